/* tcuda: optimizers and the multi-tensor operations under them
 * (torch.optim.AdamW / Adam / SGD with fused=True, torch.nn.utils.clip_grad_norm_,
 * Optimizer.zero_grad, the torch._foreach_* operations).
 *
 * Every call here takes a list of tensors, (pointer, count), all of one
 * floating dtype (float32, bfloat16, float16, float64: TC_ERROR_DTYPE
 * otherwise), all on one device (TC_ERROR_DEVICE_MISMATCH otherwise) and
 * each contiguous (TC_ERROR_INVALID_ARGUMENT otherwise: the kernels walk
 * them as flat arrays). Lists given together (a tensor and its gradient)
 * match element by element in sizes (TC_ERROR_SHAPE otherwise). On a GPU a
 * call queues one kernel for up to 48 tensors (a table of their addresses
 * and sizes goes in the launch's arguments, as PyTorch's multi_tensor_apply;
 * a step adds a one-block kernel that counts the step) on the current
 * stream and returns at once: nothing here waits for the
 * device, except clip_grad_norm_'s error_if_nonfinite, which must read the
 * norm. Values are computed as PyTorch's CUDA kernels compute them (float32
 * for 16-bit and float32 tensors, float64 for float64), and the CPU does the
 * same operations in the same order, so a CPU and a GPU give the same bits
 * (the norms excepted: their sums run in another order).
 *
 * Common errors: NULL arrays or entries (TC_ERROR_INVALID_ARGUMENT), a
 * released tensor (TC_ERROR_INVALID_HANDLE), a negative count
 * (TC_ERROR_INVALID_ARGUMENT), a count of 0 is allowed and does nothing. */
#ifndef TCUDA_OPTIM_H
#define TCUDA_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"
#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* ---- optimizers ------------------------------------------------------------ */

/* An optimizer over a list of parameters, fused as PyTorch's fused=True:
 * one step updates every parameter and its state in one pass. It holds a
 * reference on each parameter (tc_tensor_retain) and owns its state
 * tensors, made at create, zeroed, on the parameters' device with their
 * dtype (as torch.zeros_like(p)); the step count is a float32 0-d tensor per
 * parameter, as PyTorch's fused optimizers keep it, so that a step reads it
 * on the device and can be captured in a CUDA graph. */
typedef struct tc_optimizer tc_optimizer;

/* Adam and AdamW (torch.optim.Adam / AdamW). Per element, with t the step
 * count after its increment: AdamW multiplies p by (1 - lr * weight_decay)
 * first, Adam adds weight_decay * p to the gradient (L2); then
 * m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2,
 * p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps), with the
 * running maximum of v in place of v under amsgrad; maximize uses -g. */
typedef struct tc_adamw_options {
    double lr;
    double beta1, beta2;
    double eps;
    double weight_decay;
    bool amsgrad;
    bool maximize;
} tc_adamw_options;

/* PyTorch's AdamW defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8,
 * weight_decay 1e-2, amsgrad and maximize false. Cannot fail. */
TCUDA_API tc_adamw_options tc_adamw_options_default(void);
/* PyTorch's Adam defaults: as AdamW's with weight_decay 0. Cannot fail. */
TCUDA_API tc_adamw_options tc_adam_options_default(void);

/* SGD (torch.optim.SGD): g = (maximize ? -g : g) + weight_decay * p; with
 * momentum, buf = g on the first step, else momentum * buf +
 * (1 - dampening) g, and g = nesterov ? g + momentum * buf : buf;
 * p -= lr * g. */
typedef struct tc_sgd_options {
    double lr;
    double momentum;
    double dampening;
    double weight_decay;
    bool nesterov;
    bool maximize;
} tc_sgd_options;

/* SGD's defaults: lr 1e-3 (PyTorch's default), the rest 0 / false. Cannot
 * fail. */
TCUDA_API tc_sgd_options tc_sgd_options_default(void);

/* Makes an optimizer over params[0..n) (n >= 1; one dtype, one device, each
 * contiguous, none twice). Errors: the common ones; TC_ERROR_INVALID_ARGUMENT
 * for options out of PyTorch's ranges (lr, eps, weight_decay negative or not
 * finite, a beta outside [0, 1), momentum negative, nesterov without
 * momentum or with dampening, NULL opts or out); TC_ERROR_OUT_OF_MEMORY. */
TCUDA_API tc_status tc_optimizer_create_adamw(tc_tensor *const *params, int n,
                                              const tc_adamw_options *opts, tc_optimizer **out);
TCUDA_API tc_status tc_optimizer_create_adam(tc_tensor *const *params, int n,
                                             const tc_adamw_options *opts, tc_optimizer **out);
TCUDA_API tc_status tc_optimizer_create_sgd(tc_tensor *const *params, int n,
                                            const tc_sgd_options *opts, tc_optimizer **out);
/* Drops the optimizer's references and its state. NULL is
 * TC_ERROR_INVALID_ARGUMENT; a destroyed one TC_ERROR_INVALID_HANDLE. */
TCUDA_API tc_status tc_optimizer_destroy(tc_optimizer *opt);

/* One step with grads[i] the gradient of params[i] (n the optimizer's
 * count; same sizes, dtype and device). Errors: the common ones,
 * TC_ERROR_INVALID_ARGUMENT for a count that differs. */
TCUDA_API tc_status tc_optimizer_step(tc_optimizer *opt, tc_tensor *const *grads, int n);
/* The step as PyTorch's fused kernels take it from a GradScaler: grad_scale
 * (a float32 one-element tensor on the parameters' device, or NULL)
 * divides each gradient first, and the unscaled gradient is written back to
 * grads[i], as PyTorch's fused kernels do; where found_inf (float32, one
 * element, same device, or NULL) is not 0 the step changes nothing: no
 * parameter, no state, no step count. Read on the device: no wait. */
TCUDA_API tc_status tc_optimizer_step_scaled(tc_optimizer *opt, tc_tensor *const *grads, int n,
                                             const tc_tensor *grad_scale,
                                             const tc_tensor *found_inf);

/* The learning rate as a number (param_groups[0]["lr"] = lr); it replaces a
 * learning-rate tensor set before. lr must be finite and >= 0. */
TCUDA_API tc_status tc_optimizer_set_lr(tc_optimizer *opt, double lr);
/* The learning rate as a number (the one set last, also while a tensor is in
 * use). */
TCUDA_API tc_status tc_optimizer_get_lr(const tc_optimizer *opt, double *out);
/* The learning rate read from a float32 one-element tensor on the
 * parameters' device at each step (PyTorch's lr as a Tensor with
 * fused=True), so a schedule can change it inside a captured CUDA graph.
 * The optimizer holds a reference on it; NULL goes back to the number. */
TCUDA_API tc_status tc_optimizer_set_lr_tensor(tc_optimizer *opt, const tc_tensor *lr);

/* The state an optimizer keeps per parameter (optimizer.state[p]). */
typedef enum tc_optimizer_state {
    TC_OPTIMIZER_STATE_STEP = 0,       /* float32 0-d: steps taken */
    TC_OPTIMIZER_STATE_EXP_AVG,        /* Adam(W): m */
    TC_OPTIMIZER_STATE_EXP_AVG_SQ,     /* Adam(W): v */
    TC_OPTIMIZER_STATE_MAX_EXP_AVG_SQ, /* Adam(W) with amsgrad */
    TC_OPTIMIZER_STATE_MOMENTUM_BUFFER /* SGD with momentum */
} tc_optimizer_state;

/* State `which` of parameter `index` (0..n-1), a new reference to the live
 * tensor (for checkpoints: read it, or tc_tensor_copy_ a saved value into
 * it). SGD's step count is tcuda's own (it says which step is the first).
 * TC_ERROR_INVALID_ARGUMENT for an index out of range or a state this
 * optimizer does not keep. */
TCUDA_API tc_status tc_optimizer_get_state(const tc_optimizer *opt, int index,
                                           tc_optimizer_state which, tc_tensor **out);
/* The number of parameters; 0 for a NULL or destroyed optimizer. Cannot
 * fail. */
TCUDA_API int tc_optimizer_param_count(const tc_optimizer *opt);

/* Optimizer.zero_grad(set_to_none=False): every tensor of grads set to 0 in
 * one pass (tc_foreach_zero_). set_to_none=True is simply releasing the
 * gradient tensors (tc_tensor_release) and making new ones at the next
 * backward pass. */
TCUDA_API tc_status tc_optimizer_zero_grad(tc_tensor *const *grads, int n);

/* ---- clip_grad_norm_ ---------------------------------------------------------- */

/* torch.nn.utils.clip_grad_norm_: total = the norm_type-norm (2 or
 * INFINITY) of the gradients' per-tensor norms; every gradient is
 * multiplied by min(max_norm / (total + 1e-6), 1). *total_norm (a new 0-d
 * tensor of the gradients' dtype and device) is the norm before clipping,
 * computed without a wait. error_if_nonfinite waits for it (a sync point)
 * and fails with TC_ERROR_INVALID_ARGUMENT, changing nothing, where it is
 * NaN or infinite. n 0 gives a total of 0 (float32 on the CPU).
 * Errors: the common ones, a norm_type other than 2 or INFINITY
 * (TC_ERROR_INVALID_ARGUMENT). */
TCUDA_API tc_status tc_clip_grad_norm_(tc_tensor *const *grads, int n, double max_norm,
                                       double norm_type, bool error_if_nonfinite,
                                       tc_tensor **total_norm);

/* ---- foreach operations ------------------------------------------------------- */
/* torch._foreach_X_ on self[0..n), in place; others (same count) are read.
 * Scalars are rounded to the computation type first, as PyTorch does. */

/* self[i] = 0. */
TCUDA_API tc_status tc_foreach_zero_(tc_tensor *const *self, int n);
/* self[i] += scalar. */
TCUDA_API tc_status tc_foreach_add_scalar_(tc_tensor *const *self, int n, double scalar);
/* self[i] *= scalar. */
TCUDA_API tc_status tc_foreach_mul_scalar_(tc_tensor *const *self, int n, double scalar);
/* self[i] *= scalar[0], a float32 one-element tensor on self's device, read
 * there (no wait); a scalar that shares memory with a self tensor is
 * TC_ERROR_INVALID_ARGUMENT. */
TCUDA_API tc_status tc_foreach_mul_tensor_(tc_tensor *const *self, int n, const tc_tensor *scalar);
/* self[i] += alpha * other[i] (one fused multiply-add). */
TCUDA_API tc_status tc_foreach_add_list_(tc_tensor *const *self, const tc_tensor *const *other,
                                         int n, double alpha);
/* self[i] *= other[i]. */
TCUDA_API tc_status tc_foreach_mul_list_(tc_tensor *const *self, const tc_tensor *const *other,
                                         int n);
/* self[i] += value * t1[i] * t2[i] (addcmul_) and self[i] += value * t1[i] /
 * t2[i] (addcdiv_). */
TCUDA_API tc_status tc_foreach_addcmul_(tc_tensor *const *self, const tc_tensor *const *t1,
                                        const tc_tensor *const *t2, int n, double value);
TCUDA_API tc_status tc_foreach_addcdiv_(tc_tensor *const *self, const tc_tensor *const *t1,
                                        const tc_tensor *const *t2, int n, double value);
/* self[i] = lerp(self[i], end[i], weight), PyTorch's two-sided formula. */
TCUDA_API tc_status tc_foreach_lerp_(tc_tensor *const *self, const tc_tensor *const *end, int n,
                                     double weight);
/* self[i] = sqrt(self[i]). */
TCUDA_API tc_status tc_foreach_sqrt_(tc_tensor *const *self, int n);
/* torch._foreach_norm(self, ord): a new 1-d tensor of n norms (2: the
 * square root of the sum of squares, accumulated in float64; INFINITY: the
 * largest magnitude, NaN where any is NaN), of self's dtype and device.
 * n must be at least 1. TC_ERROR_INVALID_ARGUMENT for another ord. */
TCUDA_API tc_status tc_foreach_norm(const tc_tensor *const *self, int n, double ord,
                                    tc_tensor **out);

TCUDA_EXTERN_C_END

#endif
