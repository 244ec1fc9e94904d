/* What test_optim, test_amp and test_optim_cuda share: tensors made from
 * double values, random values, and the optimizers' formulas in double
 * precision (the independent reference: written from PyTorch's documented
 * algorithms, not from tcuda's kernels). */
#ifndef TC_OPTIM_CHECK_H
#define TC_OPTIM_CHECK_H

#include <math.h>
#include <stdlib.h>

#include "tc_test.h"

static const tc_device CPU = {TC_CPU, -1};

/* A tensor of dtype on dev holding vals (converted). */
static inline tc_tensor *mk(tc_device dev, tc_dtype dt, int ndim, const int64_t *sizes,
                            const double *vals)
{
    tc_tensor *d = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(vals, ndim, sizes, TC_FLOAT64, CPU, &d));
    CHECK_OK(tc_tensor_to(d, dev, dt, false, &t));
    tc_tensor_release(d);
    return t;
}

/* n random values in [lo, hi) (caller frees). */
static inline double *rnd_vals(int64_t n, double lo, double hi)
{
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * tc_test_rand_uniform();
    return v;
}

/* A random tensor of n elements (1-d); *rounded gets its values as stored. */
static inline tc_tensor *rnd_tensor(tc_device dev, tc_dtype dt, int64_t n, double lo, double hi,
                                    double **rounded)
{
    double *v = rnd_vals(n, lo, hi);
    tc_tensor *t = mk(dev, dt, 1, &n, v);
    free(v);
    if (rounded)
        *rounded = tc_test_values(t);
    return t;
}

/* |got - want| <= tol * (1 + |want|) for every element; prints the first miss. */
static inline void near_vals(const char *what, const tc_tensor *t, const double *want, int64_t n,
                             double tol)
{
    double *got = tc_test_values(t);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        bool ok = d <= tol * (1 + fabs(want[i])) || (isnan(got[i]) && isnan(want[i]));
        if (!ok && !bad++)
            printf("  %s[%lld]: got %.17g want %.17g\n", what, (long long)i, got[i], want[i]);
    }
    CHECK(bad == 0);
    free(got);
}

/* ---- the optimizers in double --------------------------------------------------------- */

static inline void ref_adam(double *p, const double *g0, double *m, double *v, double *vm,
                            int64_t n, int t, const tc_adamw_options *o, bool decoupled)
{
    double bc1 = 1 - pow(o->beta1, t), bc2 = 1 - pow(o->beta2, t);
    for (int64_t k = 0; k < n; k++) {
        double g = o->maximize ? -g0[k] : g0[k];
        if (o->weight_decay != 0) {
            if (decoupled)
                p[k] *= 1 - o->lr * o->weight_decay;
            else
                g += o->weight_decay * p[k];
        }
        m[k] = o->beta1 * m[k] + (1 - o->beta1) * g;
        v[k] = o->beta2 * v[k] + (1 - o->beta2) * g * g;
        double sq = v[k];
        if (o->amsgrad) {
            vm[k] = vm[k] > v[k] ? vm[k] : v[k];
            sq = vm[k];
        }
        double denom = sqrt(sq) / sqrt(bc2) + o->eps;
        p[k] -= o->lr / bc1 * m[k] / denom;
    }
}

static inline void ref_sgd(double *p, const double *g0, double *buf, int64_t n, bool first,
                           const tc_sgd_options *o)
{
    for (int64_t k = 0; k < n; k++) {
        double g = o->maximize ? -g0[k] : g0[k];
        g += o->weight_decay * p[k];
        if (o->momentum != 0) {
            buf[k] = first ? g : o->momentum * buf[k] + (1 - o->dampening) * g;
            g = o->nesterov ? g + o->momentum * buf[k] : buf[k];
        }
        p[k] -= o->lr * g;
    }
}

/* Whether two tensors hold the same bits (as float64 values, NaNs equal). */
static inline bool same_vals(const tc_tensor *a, const tc_tensor *b)
{
    int64_t n = tc_tensor_numel(a);
    if (n != tc_tensor_numel(b))
        return false;
    double *x = tc_test_values(a), *y = tc_test_values(b);
    bool same = true;
    for (int64_t i = 0; i < n && same; i++)
        same = x[i] == y[i] || (isnan(x[i]) && isnan(y[i]));
    free(x), free(y);
    return same;
}

#endif
