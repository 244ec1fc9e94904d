/* tcuda: gradient scaling for mixed precision (torch.amp.GradScaler).
 *
 * A scaler keeps a scale (a float32 0-d tensor) and a growth tracker (an
 * int32 0-d tensor) on its device. The loss is multiplied by the scale
 * before the backward pass; unscale_ divides an optimizer's gradients by it
 * and records, on the device, whether any was infinite or NaN; step runs the
 * optimizer's fused step with that flag, which skips the step on the device
 * (no wait: tcuda's optimizers all take found_inf, as PyTorch's fused ones
 * do); update backs the scale off after an overflow, or grows it after
 * growth_interval good steps in a row. Nothing but the state getter waits
 * for the device.
 *
 * Per optimizer, a scaler goes READY -> (unscale_) UNSCALED -> (step)
 * STEPPED, and update makes every optimizer READY again. As PyTorch, a
 * second unscale_ or step before update is refused
 * (TC_ERROR_INVALID_STATE), and so is update with no unscale_ or step
 * before it (a call that failed counts as none). A
 * scaler made with enabled false does nothing: scale returns the loss
 * itself, unscale_ and update do nothing, step is the optimizer's plain
 * step. A scaler tracks at most 16 optimizers between two updates. */
#ifndef TCUDA_AMP_H
#define TCUDA_AMP_H

#include <stdbool.h>
#include <stdint.h>

#include "optim.h"
#include "status.h"
#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

typedef struct tc_grad_scaler tc_grad_scaler;

typedef struct tc_grad_scaler_options {
    double init_scale;
    double growth_factor;  /* > 1 */
    double backoff_factor; /* in (0, 1) */
    int growth_interval;   /* >= 1 */
    bool enabled;
} tc_grad_scaler_options;

/* PyTorch's defaults: init_scale 2^16, growth_factor 2, backoff_factor 0.5,
 * growth_interval 2000, enabled. Cannot fail. */
TCUDA_API tc_grad_scaler_options tc_grad_scaler_options_default(void);

/* A scaler whose state lives on `device` (torch.amp.GradScaler("cuda") is
 * {TC_CUDA, n}; the CPU works too). Errors: TC_ERROR_INVALID_ARGUMENT for
 * NULL opts or out and factors out of range, the device's errors,
 * TC_ERROR_OUT_OF_MEMORY. */
TCUDA_API tc_status tc_grad_scaler_create(tc_device device, const tc_grad_scaler_options *opts,
                                          tc_grad_scaler **out);
/* Ends the scaler. NULL is TC_ERROR_INVALID_ARGUMENT, a destroyed one
 * TC_ERROR_INVALID_HANDLE. */
TCUDA_API tc_status tc_grad_scaler_destroy(tc_grad_scaler *scaler);

/* GradScaler.scale: *out = loss * scale, a new tensor (type promotion as
 * tc_tensor_mul: a 0-d 16-bit loss gives float32, as in PyTorch; loss on
 * the scaler's device), or a new reference to loss when disabled. */
TCUDA_API tc_status tc_grad_scaler_scale(tc_grad_scaler *scaler, const tc_tensor *loss,
                                         tc_tensor **out);
/* GradScaler.unscale_(optimizer): grads (opt's gradients, in its parameter
 * order, on the scaler's device) multiplied by 1 / scale in one pass, and
 * the optimizer's found_inf set where any element was infinite or NaN.
 * TC_ERROR_INVALID_STATE when called twice for opt, or after its step,
 * before update; TC_ERROR_DTYPE for float16 gradients, as PyTorch refuses
 * to unscale them (step without unscale_ takes them). */
TCUDA_API tc_status tc_grad_scaler_unscale_(tc_grad_scaler *scaler, tc_optimizer *opt,
                                            tc_tensor *const *grads, int n);
/* GradScaler.step(optimizer): the optimizer's step, skipped on the device
 * where its gradients held an infinity or NaN. Without unscale_ before it,
 * the gradients are checked and the step divides them by the scale itself
 * (PyTorch's fused path); they are written back unscaled. TC_ERROR_INVALID_STATE
 * when called twice for opt before update. */
TCUDA_API tc_status tc_grad_scaler_step(tc_grad_scaler *scaler, tc_optimizer *opt,
                                        tc_tensor *const *grads, int n);
/* GradScaler.update(): with f the sum of this round's found_inf flags, the
 * scale times backoff_factor and the tracker 0 where f != 0; else the
 * tracker plus 1, and where it reaches growth_interval the scale times
 * growth_factor (kept only if finite) and the tracker 0. On the device, no
 * wait. TC_ERROR_INVALID_STATE when no step was taken since the last
 * update. */
TCUDA_API tc_status tc_grad_scaler_update(tc_grad_scaler *scaler);

/* The checkpoint (state_dict / load_state_dict): the scale, the growth
 * tracker and the factors. get waits for the device (a sync point); set
 * writes scale and tracker to the device and replaces the factors. */
typedef struct tc_grad_scaler_state {
    double scale;
    double growth_factor;
    double backoff_factor;
    int growth_interval;
    int growth_tracker;
} tc_grad_scaler_state;
TCUDA_API tc_status tc_grad_scaler_get_state(const tc_grad_scaler *scaler,
                                             tc_grad_scaler_state *out);
/* Errors: TC_ERROR_INVALID_ARGUMENT for values out of range (a scale that is
 * not finite and positive, factors as create, a negative tracker). */
TCUDA_API tc_status tc_grad_scaler_set_state(tc_grad_scaler *scaler,
                                             const tc_grad_scaler_state *state);
/* The live scale tensor (float32 0-d), a new reference: for reading without
 * a copy, or for a loss multiplied inside a graph. */
TCUDA_API tc_status tc_grad_scaler_get_scale_tensor(const tc_grad_scaler *scaler, tc_tensor **out);

TCUDA_EXTERN_C_END

#endif
