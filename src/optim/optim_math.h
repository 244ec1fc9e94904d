/* The per-element formulas of the optimizers, the foreach operations and the
 * gradient scaler, one definition for the CPU (optim_cpu.c) and the GPU
 * (cuda/optim.cu), so that both compute the same bits (base/hd.h: each
 * TC_F* / TC_D* is one IEEE operation, TC_*FMA an explicit fused
 * multiply-add, and nothing else is contracted).
 *
 * They follow PyTorch's CUDA kernels operation by operation, including
 * their mixed precision: the fused Adam kernel (fused_adam_utils.cuh as
 * PyTorch 2.x has it, adam_math taking lr, betas, eps and weight_decay as
 * doubles) evaluates an expression such as beta1 * m + (1 - beta1) * g in
 * double for float32 (and 16-bit) tensors and rounds it to float once; its
 * bias corrections are rounded to float. (PyTorch's main branch of 2026
 * casts those scalars to float first and writes the moments as
 * fma(beta1, m, fma(-beta1, g, g)): the results differ by about a float
 * rounding per step, which the oracle tests/torch/optim_torch.py measures.)
 * Where PyTorch's source writes a * b + c, nvcc contracts it into one FMA
 * (its default), and so do these formulas (TC_DFMA / TC_FFMA). Where PyTorch may
 * still differ by a rounding: it computes beta^t with pow, these by
 * repeated squaring (exact on both of tcuda's sides, within a few double
 * ulps of pow, which float rounding nearly always hides); its foreach SGD
 * rounds each intermediate to the tensor's dtype, the fused SGD here keeps
 * them in float (the same bits for float32, not for 16-bit dtypes).
 *
 * Values of 16-bit and float32 tensors are computed in float, of float64
 * tensors in double. Internal. */
#ifndef TCUDA_OPTIM_MATH_H
#define TCUDA_OPTIM_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/half.h"
#include "base/hd.h"
#include "optim_internal.h"

TC_EXACT_BEGIN

/* ---- loads and stores: float for the 16- and 32-bit dtypes ------------------ */

TC_HD float tc__mt_loadf(const void *p, int64_t i, tc_dtype dt)
{
    if (dt == TC_BFLOAT16)
        return tc__bf16_to_f32(((const uint16_t *)p)[i]);
    if (dt == TC_FLOAT16)
        return tc__f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

TC_HD void tc__mt_storef(void *p, int64_t i, tc_dtype dt, float v)
{
    if (dt == TC_BFLOAT16)
        ((uint16_t *)p)[i] = tc__f32_to_bf16(v);
    else if (dt == TC_FLOAT16)
        ((uint16_t *)p)[i] = tc__f32_to_f16(v);
    else
        ((float *)p)[i] = v;
}

/* ---- bias corrections ----------------------------------------------------------- */

/* b^t for a whole t >= 0, by repeated squaring (the same bits everywhere). */
TC_HD double tc__mt_powi(double b, double t)
{
    int64_t e = t > 0 ? (int64_t)t : 0;
    double r = 1, x = b;
    while (e) {
        if (e & 1)
            r = TC_DMUL(r, x);
        x = TC_DMUL(x, x);
        e >>= 1;
    }
    return r;
}

/* What an Adam step needs per tensor, from the scalars and the step count
 * t (after its increment): PyTorch's step_size = lr / bias_correction1 and
 * bias_correction2_sqrt, in double (the float path rounds them as PyTorch's
 * kernel does: bc1 and bc2_sqrt to float, then step_size to float). */
typedef struct tc__adam_el {
    double lr, lrwd, beta1, beta2, omb1, omb2, eps, wd;
    double step_size, bc2s;    /* double path */
    float step_size_f, bc2s_f; /* float path */
    bool amsgrad, maximize, decoupled;
    bool scaled;
    double scale; /* the grad scale as PyTorch divides by it: (double)float */
} tc__adam_el;

TC_HD tc__adam_el tc__adam_el_of(const tc__adam_args *a, double lr, float t, const float *scale)
{
    tc__adam_el e;
    e.lr = lr;
    e.wd = a->weight_decay;
    e.lrwd = TC_DMUL(lr, a->weight_decay);
    e.beta1 = a->beta1, e.beta2 = a->beta2;
    e.omb1 = TC_DSUB(1.0, a->beta1), e.omb2 = TC_DSUB(1.0, a->beta2);
    e.eps = a->eps;
    e.amsgrad = a->amsgrad, e.maximize = a->maximize, e.decoupled = a->decoupled;
    e.scaled = scale != NULL;
    e.scale = scale ? (double)*scale : 1.0;
    double bc1 = TC_DSUB(1.0, tc__mt_powi(a->beta1, (double)t));
    double bc2s = TC_DSQRT(TC_DSUB(1.0, tc__mt_powi(a->beta2, (double)t)));
    e.step_size = TC_DDIV(lr, bc1);
    e.bc2s = bc2s;
    e.step_size_f = (float)TC_DDIV(lr, (double)(float)bc1);
    e.bc2s_f = (float)bc2s;
    return e;
}

/* ---- Adam / AdamW, one element ---------------------------------------------------- */

/* The float path (float32, bfloat16, float16 tensors). *g is the unscaled
 * gradient afterwards (the caller stores it back when e->scaled). */
TC_HD void tc__adam_f(const tc__adam_el *e, float *p, float *g, float *m, float *v, float *vmax)
{
    float grad = *g;
    if (e->scaled) {
        grad = (float)TC_DDIV((double)grad, e->scale);
        *g = grad;
    }
    if (e->maximize)
        grad = -grad;
    float param = *p;
    if (e->wd != 0) {
        if (e->decoupled)
            param = (float)TC_DFMA(-e->lrwd, (double)param, (double)param);
        else
            grad = (float)TC_DFMA((double)param, e->wd, (double)grad);
    }
    float ea = (float)TC_DFMA(e->beta1, (double)*m, TC_DMUL(e->omb1, (double)grad));
    float es = (float)TC_DFMA(e->beta2, (double)*v,
                              TC_DMUL(TC_DMUL(e->omb2, (double)grad), (double)grad));
    float sq = es;
    if (e->amsgrad) {
        float mx = *vmax < es ? es : *vmax; /* std::max */
        *vmax = mx;
        sq = mx;
    }
    float denom = (float)TC_DADD((double)TC_FDIV(TC_FSQRT(sq), e->bc2s_f), e->eps);
    param = TC_FSUB(param, TC_FDIV(TC_FMUL(e->step_size_f, ea), denom));
    *p = param, *m = ea, *v = es;
}

/* The double path (float64 tensors). */
TC_HD void tc__adam_d(const tc__adam_el *e, double *p, double *g, double *m, double *v,
                      double *vmax)
{
    double grad = *g;
    if (e->scaled) {
        grad = TC_DDIV(grad, e->scale);
        *g = grad;
    }
    if (e->maximize)
        grad = -grad;
    double param = *p;
    if (e->wd != 0) {
        if (e->decoupled)
            param = TC_DFMA(-e->lrwd, param, param);
        else
            grad = TC_DFMA(param, e->wd, grad);
    }
    double ea = TC_DFMA(e->beta1, *m, TC_DMUL(e->omb1, grad));
    double es = TC_DFMA(e->beta2, *v, TC_DMUL(TC_DMUL(e->omb2, grad), grad));
    double sq = es;
    if (e->amsgrad) {
        double mx = *vmax < es ? es : *vmax;
        *vmax = mx;
        sq = mx;
    }
    double denom = TC_DADD(TC_DDIV(TC_DSQRT(sq), e->bc2s), e->eps);
    param = TC_DSUB(param, TC_DDIV(TC_DMUL(e->step_size, ea), denom));
    *p = param, *m = ea, *v = es;
}

/* ---- SGD, one element -------------------------------------------------------------- */

/* PyTorch's foreach SGD, operation by operation, with the scalars rounded to
 * the computation type as its foreach kernels take them. buf is NULL
 * without momentum; first: the step that sets buf = g. */
typedef struct tc__sgd_el {
    double lr, momentum, omd, wd; /* omd: 1 - dampening */
    bool nesterov, maximize, first, scaled;
    double scale;
} tc__sgd_el;

TC_HD void tc__sgd_f(const tc__sgd_el *e, float *p, float *g, float *buf)
{
    float grad = *g;
    if (e->scaled) {
        grad = (float)TC_DDIV((double)grad, e->scale);
        *g = grad;
    }
    if (e->maximize)
        grad = -grad;
    if (e->wd != 0)
        grad = TC_FFMA((float)e->wd, *p, grad);
    if (buf) {
        float b = e->first ? grad : TC_FFMA((float)e->omd, grad, TC_FMUL(*buf, (float)e->momentum));
        *buf = b;
        grad = e->nesterov ? TC_FFMA((float)e->momentum, b, grad) : b;
    }
    *p = TC_FFMA((float)-e->lr, grad, *p);
}

TC_HD void tc__sgd_d(const tc__sgd_el *e, double *p, double *g, double *buf)
{
    double grad = *g;
    if (e->scaled) {
        grad = TC_DDIV(grad, e->scale);
        *g = grad;
    }
    if (e->maximize)
        grad = -grad;
    if (e->wd != 0)
        grad = TC_DFMA(e->wd, *p, grad);
    if (buf) {
        double b = e->first ? grad : TC_DFMA(e->omd, grad, TC_DMUL(*buf, e->momentum));
        *buf = b;
        grad = e->nesterov ? TC_DFMA(e->momentum, b, grad) : b;
    }
    *p = TC_DFMA(-e->lr, grad, *p);
}

/* ---- foreach, one element ------------------------------------------------------------ */

/* x op (a, b) with the scalar s (already of the computation type). */
TC_HD float tc__foreach_f(tc__foreach_op op, float x, float a, float b, float s)
{
    switch (op) {
    case TC__FE_ZERO: return 0.0f;
    case TC__FE_ADD_SCALAR: return TC_FADD(x, s);
    case TC__FE_MUL_SCALAR:
    case TC__FE_MUL_TENSOR: return TC_FMUL(x, s);
    case TC__FE_ADD_LIST: return TC_FFMA(s, a, x);
    case TC__FE_MUL_LIST: return TC_FMUL(x, a);
    case TC__FE_ADDCMUL: return TC_FFMA(s, TC_FMUL(a, b), x);
    case TC__FE_ADDCDIV: return TC_FFMA(s, TC_FDIV(a, b), x);
    case TC__FE_LERP: {
        float diff = TC_FSUB(a, x);
        return fabsf(s) < 0.5f ? TC_FFMA(s, diff, x) : TC_FFMA(-diff, TC_FSUB(1.0f, s), a);
    }
    default: return TC_FSQRT(x);
    }
}

TC_HD double tc__foreach_d(tc__foreach_op op, double x, double a, double b, double s)
{
    switch (op) {
    case TC__FE_ZERO: return 0.0;
    case TC__FE_ADD_SCALAR: return TC_DADD(x, s);
    case TC__FE_MUL_SCALAR:
    case TC__FE_MUL_TENSOR: return TC_DMUL(x, s);
    case TC__FE_ADD_LIST: return TC_DFMA(s, a, x);
    case TC__FE_MUL_LIST: return TC_DMUL(x, a);
    case TC__FE_ADDCMUL: return TC_DFMA(s, TC_DMUL(a, b), x);
    case TC__FE_ADDCDIV: return TC_DFMA(s, TC_DDIV(a, b), x);
    case TC__FE_LERP: {
        double diff = TC_DSUB(a, x);
        return fabs(s) < 0.5 ? TC_DFMA(s, diff, x) : TC_DFMA(-diff, TC_DSUB(1.0, s), a);
    }
    default: return TC_DSQRT(x);
    }
}

/* Whether an op reads slot 1 / slot 2. */
TC_HD bool tc__foreach_reads_a(tc__foreach_op op)
{
    return op == TC__FE_ADD_LIST || op == TC__FE_MUL_LIST || op == TC__FE_ADDCMUL ||
           op == TC__FE_ADDCDIV || op == TC__FE_LERP;
}
TC_HD bool tc__foreach_reads_b(tc__foreach_op op)
{
    return op == TC__FE_ADDCMUL || op == TC__FE_ADDCDIV;
}

/* ---- the gradient scaler ---------------------------------------------------------------- */

/* GradScaler's inverse scale: scale.double().reciprocal().float(). */
TC_HD float tc__amp_inv_scale(float scale) { return (float)TC_DDIV(1.0, (double)scale); }

/* _amp_update_scale_: the scale's float times a double factor, rounded to
 * float (growth kept only if finite). */
TC_HD void tc__amp_update(float *scale, int32_t *tracker, float found_inf, double growth,
                          double backoff, int interval)
{
    if (found_inf != 0.0f) {
        *scale = (float)TC_DMUL((double)*scale, backoff);
        *tracker = 0;
        return;
    }
    int32_t ok = *tracker + 1;
    if (ok == interval) {
        float grown = (float)TC_DMUL((double)*scale, growth);
        if (isfinite(grown))
            *scale = grown;
        *tracker = 0;
    } else {
        *tracker = ok;
    }
}

/* v rounded to dt and back (the identity for float32). */
TC_HD float tc__mt_roundf(float v, tc_dtype dt)
{
    uint16_t h;
    if (dt == TC_BFLOAT16) {
        h = tc__f32_to_bf16(v);
        return tc__bf16_to_f32(h);
    }
    if (dt == TC_FLOAT16) {
        h = tc__f32_to_f16(v);
        return tc__f16_to_f32(h);
    }
    return v;
}

/* clip_grad_norm_'s coefficient from the total norm, as PyTorch's tensor
 * operations compute it, each rounded to the norms' dtype: t = total +
 * 1e-6; max_norm / t is t.reciprocal() * max_norm; clamp(max=1) keeps NaN. */
TC_HD float tc__clip_coef_f(float total, double max_norm, tc_dtype dt)
{
    float t = tc__mt_roundf(TC_FADD(total, (float)1e-6), dt);
    float r = tc__mt_roundf(TC_FDIV(1.0f, t), dt);
    float c = tc__mt_roundf(TC_FMUL(r, (float)max_norm), dt);
    return c != c || c < 1.0f ? c : 1.0f;
}
TC_HD double tc__clip_coef_d(double total, double max_norm)
{
    double c = TC_DMUL(TC_DDIV(1.0, TC_DADD(total, 1e-6)), max_norm);
    return c != c || c < 1.0 ? c : 1.0;
}

TC_EXACT_END

#endif
