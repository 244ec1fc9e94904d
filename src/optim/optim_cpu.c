/* The CPU's optimizer backend (optim_internal.h): plain loops over the
 * list's tensors and their elements, with optim_math.h's formulas, the ones
 * the GPU's kernels run (cuda/optim.cu), so that both give the same bits.
 * The step count goes up before a step reads it, and not at all where
 * found_inf is set, as PyTorch's _foreach_add_(steps, 1) then
 * _foreach_sub_(steps, found_inf) leave it. */
#include <math.h>
#include <string.h>

#include "optim_internal.h"
#include "optim_math.h"

static bool skipped(const tc__mt_amp *amp) { return amp->found_inf && *amp->found_inf != 0.0f; }

static double lr_of(const tc__mt_amp *amp, double lr) { return amp->lr ? (double)*amp->lr : lr; }

/* ---- Adam ------------------------------------------------------------------------ */

static void adam_tensor(const tc__mt_list *l, int i, const tc__adam_el *e)
{
    void *p = l->ptr[TC__MT_PARAM][i], *g = l->ptr[TC__MT_GRAD][i];
    void *m = l->ptr[TC__MT_EXP_AVG][i], *v = l->ptr[TC__MT_EXP_AVG_SQ][i];
    void *vm = e->amsgrad ? l->ptr[TC__MT_MAX_EXP_AVG_SQ][i] : NULL;
    tc_dtype dt = l->dtype;
    for (int64_t k = 0; k < l->numel[i]; k++) {
        if (dt == TC_FLOAT64) {
            double *vmk = vm ? (double *)vm + k : NULL;
            tc__adam_d(e, (double *)p + k, (double *)g + k, (double *)m + k, (double *)v + k, vmk);
            continue;
        }
        float pf = tc__mt_loadf(p, k, dt), gf = tc__mt_loadf(g, k, dt);
        float mf = tc__mt_loadf(m, k, dt), vf = tc__mt_loadf(v, k, dt);
        float xf = vm ? tc__mt_loadf(vm, k, dt) : 0.0f;
        tc__adam_f(e, &pf, &gf, &mf, &vf, &xf);
        tc__mt_storef(p, k, dt, pf), tc__mt_storef(m, k, dt, mf), tc__mt_storef(v, k, dt, vf);
        if (vm)
            tc__mt_storef(vm, k, dt, xf);
        if (e->scaled)
            tc__mt_storef(g, k, dt, gf);
    }
}

static tc_status cpu_adam(int device, const tc__mt_list *l, const tc__adam_args *a)
{
    (void)device;
    if (skipped(&a->amp))
        return TC_OK;
    double lr = lr_of(&a->amp, a->lr);
    for (int i = 0; i < l->n; i++) {
        float *step = (float *)l->ptr[TC__MT_STEP][i];
        *step = TC_FADD(*step, 1.0f);
        tc__adam_el e = tc__adam_el_of(a, lr, *step, a->amp.grad_scale);
        adam_tensor(l, i, &e);
    }
    return TC_OK;
}

/* ---- SGD ---------------------------------------------------------------------------- */

static void sgd_tensor(const tc__mt_list *l, int i, const tc__sgd_el *e)
{
    void *p = l->ptr[TC__MT_PARAM][i], *g = l->ptr[TC__MT_GRAD][i];
    void *b = l->ptr[TC__MT_EXP_AVG] ? l->ptr[TC__MT_EXP_AVG][i] : NULL;
    tc_dtype dt = l->dtype;
    for (int64_t k = 0; k < l->numel[i]; k++) {
        if (dt == TC_FLOAT64) {
            tc__sgd_d(e, (double *)p + k, (double *)g + k, b ? (double *)b + k : NULL);
            continue;
        }
        float pf = tc__mt_loadf(p, k, dt), gf = tc__mt_loadf(g, k, dt);
        float bf = b ? tc__mt_loadf(b, k, dt) : 0.0f;
        tc__sgd_f(e, &pf, &gf, b ? &bf : NULL);
        tc__mt_storef(p, k, dt, pf);
        if (b)
            tc__mt_storef(b, k, dt, bf);
        if (e->scaled)
            tc__mt_storef(g, k, dt, gf);
    }
}

static tc_status cpu_sgd(int device, const tc__mt_list *l, const tc__sgd_args *a)
{
    (void)device;
    if (skipped(&a->amp))
        return TC_OK;
    tc__sgd_el e = {.lr = lr_of(&a->amp, a->lr),
                    .momentum = a->momentum,
                    .omd = 1.0 - a->dampening,
                    .wd = a->weight_decay,
                    .nesterov = a->nesterov,
                    .maximize = a->maximize,
                    .scaled = a->amp.grad_scale != NULL,
                    .scale = a->amp.grad_scale ? (double)*a->amp.grad_scale : 1.0};
    for (int i = 0; i < l->n; i++) {
        float *step = (float *)l->ptr[TC__MT_STEP][i];
        e.first = *step == 0.0f;
        *step = TC_FADD(*step, 1.0f);
        sgd_tensor(l, i, &e);
    }
    return TC_OK;
}

/* ---- foreach ------------------------------------------------------------------------- */

static tc_status cpu_foreach(int device, const tc__mt_list *l, const tc__foreach_args *a)
{
    (void)device;
    tc_dtype dt = l->dtype;
    bool ra = tc__foreach_reads_a(a->op), rb = tc__foreach_reads_b(a->op);
    double sd = a->alpha;
    if (a->op == TC__FE_MUL_TENSOR)
        sd = a->scalar_dtype == TC_FLOAT64
                 ? *(const double *)a->scalar_ptr
                 : (double)tc__mt_loadf(a->scalar_ptr, 0, a->scalar_dtype);
    float sf = (float)sd;
    for (int i = 0; i < l->n; i++) {
        void *x = l->ptr[0][i];
        const void *pa = ra ? l->ptr[1][i] : NULL, *pb = rb ? l->ptr[2][i] : NULL;
        for (int64_t k = 0; k < l->numel[i]; k++) {
            if (dt == TC_FLOAT64) {
                double *xd = (double *)x + k;
                *xd = tc__foreach_d(a->op, *xd, pa ? ((const double *)pa)[k] : 0,
                                    pb ? ((const double *)pb)[k] : 0, sd);
                continue;
            }
            float va = pa ? tc__mt_loadf(pa, k, dt) : 0.0f,
                  vb = pb ? tc__mt_loadf(pb, k, dt) : 0.0f;
            tc__mt_storef(x, k, dt, tc__foreach_f(a->op, tc__mt_loadf(x, k, dt), va, vb, sf));
        }
    }
    return TC_OK;
}

/* ---- norms and clip_grad_norm_ -------------------------------------------------------- */

static double load_d(const void *p, int64_t k, tc_dtype dt)
{
    return dt == TC_FLOAT64 ? ((const double *)p)[k] : (double)tc__mt_loadf(p, k, dt);
}

static void store_d(void *p, int64_t k, tc_dtype dt, double v)
{
    if (dt == TC_FLOAT64)
        ((double *)p)[k] = v;
    else
        tc__mt_storef(p, k, dt, (float)v);
}

/* The ord-norm of n values: the square root of the sum of squares in
 * double, or the largest magnitude (NaN wins). */
static double norm_of(const void *p, int64_t n, tc_dtype dt, double ord)
{
    double acc = 0;
    for (int64_t k = 0; k < n; k++) {
        double x = fabs(load_d(p, k, dt));
        if (isinf(ord))
            acc = x != x || acc != acc ? NAN : (x > acc ? x : acc);
        else
            acc += x * x;
    }
    return isinf(ord) ? acc : sqrt(acc);
}

static tc_status cpu_norms(int device, const tc__mt_list *l, double ord, void *out)
{
    (void)device;
    for (int i = 0; i < l->n; i++)
        store_d(out, i, l->dtype, norm_of(l->ptr[0][i], l->numel[i], l->dtype, ord));
    return TC_OK;
}

static tc_status cpu_clip_coef(int device, tc_dtype dt, const void *norms, int n, double ord,
                               double max_norm, void *total, void *coef)
{
    (void)device;
    store_d(total, 0, dt, norm_of(norms, n, dt, ord));
    if (dt == TC_FLOAT64)
        *(double *)coef = tc__clip_coef_d(*(double *)total, max_norm);
    else
        tc__mt_storef(coef, 0, dt, tc__clip_coef_f(tc__mt_loadf(total, 0, dt), max_norm, dt));
    return TC_OK;
}

/* ---- the gradient scaler ---------------------------------------------------------------- */

static tc_status cpu_unscale(int device, const tc__mt_list *l, const float *scale, bool check_only,
                             float *found_inf)
{
    (void)device;
    tc_dtype dt = l->dtype;
    float inv = check_only ? 1.0f : tc__amp_inv_scale(*scale);
    for (int i = 0; i < l->n; i++) {
        void *x = l->ptr[0][i];
        for (int64_t k = 0; k < l->numel[i]; k++) {
            if (dt == TC_FLOAT64) {
                double v = ((double *)x)[k];
                if (!isfinite(v))
                    *found_inf = 1.0f;
                ((double *)x)[k] = inv == 1.0f ? v : TC_DMUL(v, (double)inv);
                continue;
            }
            float v = tc__mt_loadf(x, k, dt);
            if (!isfinite(v))
                *found_inf = 1.0f;
            if (inv != 1.0f)
                tc__mt_storef(x, k, dt, TC_FMUL(v, inv));
        }
    }
    return TC_OK;
}

static tc_status cpu_update_scale(int device, float *scale, int32_t *tracker,
                                  const float *found_inf, double growth, double backoff,
                                  int interval)
{
    (void)device;
    tc__amp_update(scale, tracker, *found_inf, growth, backoff, interval);
    return TC_OK;
}

const tc__optim_backend tc__cpu_optim_backend = {
    .adam = cpu_adam,
    .sgd = cpu_sgd,
    .apply = cpu_foreach,
    .norms = cpu_norms,
    .clip_coef = cpu_clip_coef,
    .unscale = cpu_unscale,
    .update_scale = cpu_update_scale,
};
