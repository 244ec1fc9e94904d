/* GPT-2 for training on tcuda: its parameters, a forward pass that keeps
 * what backward needs, and the backward pass written out op by op (llm.c's
 * way: no autograd, each step a public tcuda backward op).
 *
 * Parameters are float32 "master" tensors, in Hugging Face GPT-2's order
 * (wte, wpe, then per block ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
 * mlp.c_proj, weight before bias, then ln_f). Linear weights are kept as
 * tc_nn_linear wants them, [out, in]; GPT-2's checkpoints store them as
 * Conv1D's [in, out], so load and save transpose them. The classifier is
 * tied to wte, as GPT-2's lm_head.
 *
 * Mixed precision (dtype bfloat16) mirrors torch.autocast("cuda",
 * torch.bfloat16) on Hugging Face's GPT2LMHeadModel:
 *   - bfloat16 (autocast's lower-precision list: addmm/linear, matmul,
 *     scaled_dot_product_attention): every linear (c_attn, attn.c_proj,
 *     c_fc, mlp.c_proj, the tied classifier) and attention, with bfloat16
 *     copies of the weights and biases made from the masters once per step;
 *     their outputs, and GELU (which runs in its input's dtype), are
 *     bfloat16;
 *   - float32 (autocast's float32 list: layer_norm, cross_entropy /
 *     log_softmax; and ops outside autocast's lists, which take their
 *     inputs' dtype): the embeddings (float32 weights), the residual stream
 *     (float32 + bfloat16 promotes to float32), every layer norm (input,
 *     statistics, output), the logits cast to float32 and the loss;
 *   - gradients flow back in the dtype of the forward value they belong to
 *     (bfloat16 through the bfloat16 ops, float32 through the rest), and the
 *     bfloat16 weight gradients are added into float32 gradients, as
 *     autograd does for the cast of a float32 leaf. AdamW state is float32.
 * With dtype float32 every tensor is float32 and the casts are no-ops. */
#ifndef TRAIN_GPT2_MODEL_H
#define TRAIN_GPT2_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include <tcuda/tcuda.h>

typedef struct gpt2_config {
    int n_layer, n_head;
    int64_t C;    /* width (n_embd) */
    int64_t V;    /* vocabulary */
    int64_t maxT; /* positions (n_positions) */
} gpt2_config;

/* The parameters of one block, as offsets from the block's first. */
enum {
    GPT2_LN1_W,
    GPT2_LN1_B,
    GPT2_ATTN_W,
    GPT2_ATTN_B,
    GPT2_PROJ_W,
    GPT2_PROJ_B,
    GPT2_LN2_W,
    GPT2_LN2_B,
    GPT2_FC_W,
    GPT2_FC_B,
    GPT2_FCPROJ_W,
    GPT2_FCPROJ_B,
    GPT2_PER_LAYER
};
/* Parameter indices: 0 wte, 1 wpe, 2 + 12 l + k block l's k-th, then ln_f. */
#define GPT2_WTE 0
#define GPT2_WPE 1
#define GPT2_LAYER(l, k) (2 + GPT2_PER_LAYER * (l) + (k))
#define GPT2_LNF_W(cfg) (2 + GPT2_PER_LAYER * (cfg).n_layer)
#define GPT2_LNF_B(cfg) (3 + GPT2_PER_LAYER * (cfg).n_layer)

/* Called as each gradient is final for the micro-step (DDP's hook). */
typedef tc_status (*gpt2_ready_fn)(int param, void *ctx);

typedef struct gpt2_layer_acts gpt2_layer_acts;

typedef struct gpt2 {
    gpt2_config cfg;
    tc_device dev;
    tc_dtype dtype;     /* of the matmuls and attention: float32 or bfloat16 */
    int n;              /* number of parameters */
    tc_tensor **params; /* float32 masters [n] */
    tc_tensor **low;    /* bfloat16 copies of the linear weights and biases (NULL: none) */
    tc_tensor **grads;  /* float32 gradients [n], set by the caller; accumulated into */
    gpt2_ready_fn ready;
    void *ready_ctx;
    tc_tensor *pos;        /* 0 .. maxT-1, int64 */
    gpt2_layer_acts *acts; /* per block, what backward needs */
} gpt2;

/* Hugging Face's name of parameter i (without a "transformer." prefix) into
 * buf; whether it is stored transposed (Conv1D); whether AdamW decays it
 * (nanoGPT: the 2-d parameters). */
void gpt2_param_name(const gpt2 *m, int i, char *buf, int size);
bool gpt2_param_is_conv1d(const gpt2 *m, int i);
bool gpt2_param_decays(const gpt2 *m, int i);

/* A model with GPT-2's initialization from a CPU generator seeded with seed:
 * weights normal(0, 0.02), the residual projections (attn.c_proj and
 * mlp.c_proj) normal(0, 0.02 / sqrt(2 n_layer)), biases 0, layer-norm
 * weights 1. Returns a message in err (size bytes) on failure. */
tc_status gpt2_create(const gpt2_config *cfg, tc_device dev, tc_dtype dtype, uint64_t seed, gpt2 *m,
                      char *err, int size);
/* A model from a GPT-2 safetensors file with Hugging Face's names (with or
 * without "transformer."); the head count from its "n_head" metadata, else
 * n_head_default. Checks every shape. */
tc_status gpt2_load(const char *path, int n_head_default, tc_device dev, tc_dtype dtype, gpt2 *m,
                    char *err, int size);
/* Writes the float32 parameters with Hugging Face's names and layout. */
tc_status gpt2_save(const gpt2 *m, const char *path);
void gpt2_free(gpt2 *m);

/* Refreshes the bfloat16 copies from the masters (a no-op for float32). */
tc_status gpt2_cast_weights(gpt2 *m);

/* One micro-step on tokens x [B, T] and targets y [B, T] (int64): the mean
 * cross entropy is added into loss_acc (float32 0-d). With backward, the
 * gradients of grad_scale * loss are added into m->grads, and m->ready is
 * called for each parameter once its gradient is final. Queues work only:
 * nothing waits for the device. On failure the message says which op. */
tc_status gpt2_forward_backward(gpt2 *m, const tc_tensor *x, const tc_tensor *y, double grad_scale,
                                bool backward, tc_tensor *loss_acc);

#endif
