/* The optimizer backend table (optim.h's and amp.h's device work), one per
 * device type: the CPU's in src/optim/optim_cpu.c, a GPU's reached through
 * the device seam's `optim` field (device_ops.h), filled by
 * src/optim/cuda/optim_cuda.c.
 *
 * The front end (optim.c, foreach.c, amp.c) checks every argument and hands
 * a backend a tc__mt_list: n dense tensors of one dtype on one device, each
 * as its element count and one data pointer per slot (a parameter, its
 * gradient, its state...). A backend walks the tensors in order, element by
 * element, with the per-element formulas of optim_math.h, so that the CPU
 * and the GPU compute the same bits. Plain C, so that the .cu files include
 * it too. Not installed. */
#ifndef TCUDA_OPTIM_INTERNAL_H
#define TCUDA_OPTIM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tcuda/dtype.h"
#include "tcuda/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Slots of a list. Adam: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq
 * (amsgrad), step. SGD: param, grad, momentum buffer (momentum != 0), step.
 * foreach: self, other / t1 / end, t2. The step slot is a float32 count. */
enum {
    TC__MT_PARAM = 0,
    TC__MT_GRAD = 1,
    TC__MT_EXP_AVG = 2,
    TC__MT_EXP_AVG_SQ = 3,
    TC__MT_MAX_EXP_AVG_SQ = 4,
    TC__MT_STEP = 5,
    TC__MT_SLOTS = 6
};

typedef struct tc__mt_list {
    int n;
    tc_dtype dtype;
    const int64_t *numel;           /* n */
    void *const *ptr[TC__MT_SLOTS]; /* ptr[slot][i]; NULL for a slot unused */
} tc__mt_list;

/* Where a step reads its learning rate, gradient scale and overflow flag:
 * a device float (NULL: lr from the double; no scale; no flag). */
typedef struct tc__mt_amp {
    const float *lr;
    const float *grad_scale;
    const float *found_inf;
} tc__mt_amp;

typedef struct tc__adam_args {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, maximize, decoupled; /* decoupled: AdamW */
    tc__mt_amp amp;
} tc__adam_args;

typedef struct tc__sgd_args {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize;
    tc__mt_amp amp;
} tc__sgd_args;

typedef enum tc__foreach_op {
    TC__FE_ZERO,
    TC__FE_ADD_SCALAR,
    TC__FE_MUL_SCALAR,
    TC__FE_MUL_TENSOR, /* by *scalar_ptr */
    TC__FE_ADD_LIST,   /* self + alpha * a */
    TC__FE_MUL_LIST,
    TC__FE_ADDCMUL, /* self + alpha * a * b */
    TC__FE_ADDCDIV, /* self + alpha * a / b */
    TC__FE_LERP,    /* lerp(self, a, alpha) */
    TC__FE_SQRT
} tc__foreach_op;

typedef struct tc__foreach_args {
    tc__foreach_op op;
    double alpha;           /* the scalar, alpha, value or weight */
    const void *scalar_ptr; /* MUL_TENSOR: one element of scalar_dtype */
    tc_dtype scalar_dtype;  /* float32, or the list's dtype */
} tc__foreach_args;

typedef struct tc__optim_backend {
    /* One Adam(W) step over the list (slots as above): where amp.found_inf
     * reads non-zero nothing changes; else each tensor's step count goes up
     * by one and its elements are updated with the new count. */
    tc_status (*adam)(int device, const tc__mt_list *l, const tc__adam_args *a);
    /* One SGD step, as adam (the step slot says which step is the first). */
    tc_status (*sgd)(int device, const tc__mt_list *l, const tc__sgd_args *a);
    /* One foreach operation over the list (slots 0, 1, 2). */
    tc_status (*apply)(int device, const tc__mt_list *l, const tc__foreach_args *a);
    /* out[i] (n values of l->dtype) = the ord-norm of tensor i (2: in
     * float64; INFINITY: the largest magnitude, NaN where any is NaN). */
    tc_status (*norms)(int device, const tc__mt_list *l, double ord, void *out);
    /* clip_grad_norm_'s coefficient: *total (of dtype) = the ord-norm of
     * norms[0..n) (of dtype, n >= 1), *coef (of dtype) = min(max_norm /
     * (total + 1e-6), 1) (optim_math.h's tc__clip_coef_*). */
    tc_status (*clip_coef)(int device, tc_dtype dtype, const void *norms, int n, double ord,
                           double max_norm, void *total, void *coef);
    /* _amp_foreach_non_finite_check_and_unscale_: *found_inf = 1 where an
     * element is infinite or NaN; each element times (float)(1 / (double)
     * *scale), or unchanged when check_only. */
    tc_status (*unscale)(int device, const tc__mt_list *l, const float *scale, bool check_only,
                         float *found_inf);
    /* _amp_update_scale_ (amp.h's update). */
    tc_status (*update_scale)(int device, float *scale, int32_t *tracker, const float *found_inf,
                              double growth, double backoff, int interval);
} tc__optim_backend;

extern const tc__optim_backend tc__cpu_optim_backend;

#ifdef __cplusplus
}
#endif

#endif
