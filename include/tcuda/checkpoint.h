/* tcuda: training checkpoints (a model's state_dict with the optimizer's,
 * the GradScaler's, torch.cuda.get_rng_state_all and the step, in one file).
 *
 * A checkpoint is one safetensors file (safetensors.h) holding a whole
 * training state, so that a run stopped after a save and resumed from it
 * takes the same next steps, bit for bit, as one that never stopped:
 * - the parameters, under their own names (a checkpoint is also a model
 *   file: examples/gpt.c and PyTorch's safetensors read it as one);
 * - the optimizer's state per parameter, as "optimizer.<name>.step" (float32
 *   0-d), ".exp_avg", ".exp_avg_sq", ".max_exp_avg_sq" (Adam and AdamW, the
 *   last with amsgrad) and ".momentum_buffer" (SGD with momentum), each of
 *   its parameter's dtype and shape; with several optimizers (PyTorch's
 *   param groups, e.g. one with weight decay and one without), the first's
 *   state is named so and optimizer g's (g >= 1) "optimizer<g>.<name>...",
 *   so a parameter's state says which optimizer it belongs to;
 * - the random states, as 32-byte uint8 tensors "rng.cpu" (the CPU's default
 *   generator) and "rng.cuda.<i>" (GPU i's default generator), the blobs of
 *   random.h's tc_rng_state;
 * - in the header's "__metadata__" (strings; numbers printed with %.17g, so
 *   they read back exactly): "format" "pt" (what Hugging Face's loaders ask
 *   of a model file), "tcuda.checkpoint" (this layout's version, "1"),
 *   "tcuda.step", "tcuda.rng.cuda_devices", the number of optimizers
 *   ("tcuda.optimizers"), each one's kind and options ("tcuda.optimizer.kind"
 *   is "adam", "adamw" or "sgd"; then "tcuda.optimizer.<option>", named as
 *   the fields of tc_adamw_options and tc_sgd_options; optimizer g >= 1's
 *   keys start "tcuda.optimizer<g>.") and the scaler's state
 *   ("tcuda.scaler.<field>" for the fields of tc_grad_scaler_state, and
 *   "tcuda.scaler.enabled"). A file of one optimizer without
 *   "tcuda.optimizers" (as the first tcuda wrote) holds one.
 *
 * Loading checks the whole file against the live objects before it changes
 * anything: a file that fails any check leaves every parameter, the
 * optimizer, the scaler, the random states and the step as they were. The
 * values are read from the file itself (tc_safetensors_get_copy, not the
 * mapping) into host memory, then copied into the live tensors: on a GPU
 * with tc_tensor_copy_ on the current stream, ordered before the work that
 * follows. Tensors of the file that the checkpoint does not name are
 * ignored, so a model file with more in it still loads its parameters.
 *
 * Common errors: TC_ERROR_INVALID_ARGUMENT (a NULL or empty path, a NULL
 * checkpoint, a negative n, NULL names or params with n > 0, a NULL or
 * duplicate name, an optimizer whose parameters are not params[0..n) in
 * this order; both optimizer and optimizers set, a negative n_optimizers,
 * NULL optimizers or a NULL entry with n_optimizers > 0, an entry with a
 * parameter that is none of params, a parameter in two entries),
 * TC_ERROR_INVALID_HANDLE (a released tensor, a destroyed optimizer or
 * scaler). */
#ifndef TCUDA_CHECKPOINT_H
#define TCUDA_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "amp.h"
#include "optim.h"
#include "status.h"
#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* What a checkpoint holds: the caller's description of the live training
 * state, on its stack; nothing in it is owned by the checkpoint. */
typedef struct tc_checkpoint {
    const char *const *names; /* parameter names, e.g. "h.0.attn.c_attn.weight" */
    tc_tensor *const *params; /* the live parameters (any device, any layout) */
    int n;                    /* the number of names and params */
    tc_optimizer *optimizer;  /* NULL: none; else its parameters are params[0..n) */
    /* Several optimizers instead of one (NULL or n_optimizers 0: none):
     * each over some of params, in any order, no parameter in two; the
     * list's order names them in the file (see above). */
    tc_optimizer *const *optimizers;
    int n_optimizers;
    tc_grad_scaler *scaler; /* NULL: none */
    bool rng;               /* the CPU's and every visible GPU's default generator */
    int64_t step;           /* the training step: saved; load writes it */
    /* save: NULL or a NULL-terminated key, value, key, value, ... list of
     * the caller's own strings for "__metadata__" (read them back with
     * tc_safetensors_open and tc_safetensors_metadata); "format" and keys
     * starting "tcuda." are the checkpoint's. load ignores it. */
    const char *const *metadata;
} tc_checkpoint;

/* Writes the state ck describes to `path` (as tc_safetensors_save: a new
 * file renamed over the old one when complete, so a failed save leaves the
 * old checkpoint whole). Waits for the devices: the optimizer's and the
 * scaler's state and the parameters are read as they are after the work
 * queued before the call. Errors: the common ones; TC_ERROR_INVALID_ARGUMENT
 * for a metadata key of the checkpoint's own or a key without value, and a
 * name that collides with another tensor of the file; those of
 * tc_safetensors_save, tc_grad_scaler_get_state and tc_get_rng_state. */
TCUDA_API tc_status tc_checkpoint_save(const char *path, const tc_checkpoint *ck);

/* Reads the file at `path` into the live state ck describes: each
 * parameter from the tensor of its name; with an optimizer, its state and
 * learning rate (its other options must equal the file's: they make the
 * steps, so a different one is refused rather than replaced; a learning
 * rate read from a tensor, tc_optimizer_set_lr_tensor, is the caller's
 * schedule and is left alone); with a scaler, its state (scale, growth
 * tracker, factors); with rng, the CPU's and every GPU's default generator
 * (the file must hold as many GPUs' states as tc_device_count()); and
 * ck->step. With optimizers, the file must hold as many optimizers' states
 * as the list has, each over the same parameters (by name) as the live one.
 * A file without "tcuda.checkpoint" is a plain model file: its
 * parameters load, ck->step becomes 0, and asking it for an optimizer, a
 * scaler or rng states is TC_ERROR_INVALID_ARGUMENT. Everything is checked
 * first (see the top of this header): a file that fails a check changes
 * nothing, and the message names the tensor or key and what differs (only
 * a device's error during the final copies can leave a part loaded). The
 * values of every tensor named are held in host memory at once, and the
 * call waits for their copies to GPUs. Errors: the common
 * ones; TC_ERROR_IO (no such file, a file that is not well-formed, or
 * shorter than its header says); TC_ERROR_INVALID_ARGUMENT (a tensor or
 * key missing, a metadata value that does not parse, the optimizer's kind
 * or options or the scaler's enabled flag unlike the file's, another
 * number of optimizers, a different
 * number of GPU random states, a random state that is not a valid blob);
 * TC_ERROR_SHAPE and TC_ERROR_DTYPE (a tensor of the file unlike the live
 * one); TC_ERROR_NOT_SUPPORTED (a checkpoint version this tcuda does not
 * read); the devices'. */
TCUDA_API tc_status tc_checkpoint_load(const char *path, tc_checkpoint *ck);

TCUDA_EXTERN_C_END

#endif
