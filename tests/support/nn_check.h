/* Shared by the nn tests: the floating dtypes and their
 * tolerances, random tensors and values, comparison with a double-precision reference,
 * int64 targets, and linear's reference and path counts. Static inline:
 * each test program takes what it uses. */
#ifndef TC_NN_CHECK_H
#define TC_NN_CHECK_H

#include <math.h>
#include <stdlib.h>

#include "tensor/nn_internal.h" /* linear's test switch and path counts */
#include "tc_test.h"

static const tc_device CPU = {TC_CPU, -1}, GPU = {TC_CUDA, -1};
static const tc_dtype FLOATS[4] = {TC_FLOAT16, TC_BFLOAT16, TC_FLOAT32, TC_FLOAT64};

static inline double tol_of(tc_dtype d)
{
    switch (d) {
    case TC_FLOAT16: return 4e-3;
    case TC_BFLOAT16: return 3e-2;
    case TC_FLOAT32: return 2e-5;
    default: return 1e-11;
    }
}

/* A tensor of dtype dt on dev holding v (rounded to dt). */
static inline tc_tensor *tensor_of(tc_device dev, tc_dtype dt, int nd, const int64_t *sz,
                                   const double *v)
{
    tc_tensor *d = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, nd, sz, TC_FLOAT64, CPU, &d));
    CHECK_OK(tc_tensor_to(d, dev, dt, false, &t));
    tc_tensor_release(d);
    return t;
}

/* n uniform values in [lo, hi), malloc'd (the caller frees them). */
static inline double *rand_doubles(int64_t n, double lo, double hi)
{
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * tc_test_rand_uniform();
    return v;
}

static inline int64_t numel_of(int nd, const int64_t *sz)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= sz[i];
    return n;
}

/* A random tensor on `dev`; *v (if not NULL) receives its values as stored,
 * rounded to dtype (caller frees). */
static inline tc_tensor *rnd(tc_device dev, int nd, const int64_t *sz, tc_dtype dt, double lo,
                             double hi, double **v)
{
    int64_t n = numel_of(nd, sz);
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * tc_test_rand_uniform();
    tc_tensor *d = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(x, nd, sz, TC_FLOAT64, CPU, &d));
    CHECK_OK(tc_tensor_to(d, dev, dt, false, &t));
    tc_tensor_release(d);
    free(x);
    if (v)
        *v = tc_test_values(t);
    return t;
}

/* got (a tensor of `dt` with n elements) against ref, within the dtype's
 * tolerance times `mul`, relative to 1 + |ref|. */
static inline bool near_ref(const char *what, tc_dtype dt, const tc_tensor *got, const double *ref,
                            int64_t n, double mul)
{
    bool ok = got && tc_tensor_numel(got) == n && tc_tensor_dtype(got) == dt;
    double *g = ok ? tc_test_values(got) : NULL;
    double tol = tol_of(dt) * mul;
    for (int64_t i = 0; ok && i < n; i++) {
        bool same = (isnan(g[i]) && isnan(ref[i])) || g[i] == ref[i] ||
                    fabs(g[i] - ref[i]) <= tol * (1 + fabs(ref[i]));
        if (!same) {
            fprintf(stderr, "%s (%s): element %lld is %.9g, expected %.9g\n", what,
                    tc_dtype_string(dt), (long long)i, g[i], ref[i]);
            ok = false;
        }
    }
    if (!got || tc_tensor_numel(got) != n)
        fprintf(stderr, "%s (%s): wrong element count\n", what, tc_dtype_string(dt));
    free(g);
    CHECK(ok);
    return ok;
}

/* got against want (a tensor of the same dtype and size, any device):
 * near_ref with want's values; mul 0 asks for the same values. */
static inline bool near_tensor(const char *what, const tc_tensor *got, const tc_tensor *want,
                               double mul)
{
    double *w = tc_test_values(want);
    bool ok = near_ref(what, tc_tensor_dtype(want), got, w, tc_tensor_numel(want), mul);
    free(w);
    return ok;
}

static inline tc_tensor *targets(tc_device dev, int nd, int64_t n, const int64_t *v)
{
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, nd, &n, TC_INT64, dev, &t));
    return t;
}

/* Cross entropy of one row x[0..c) with target t: logsumexp(x) - x[t]. */
static inline double ref_ce_row(const double *x, int64_t c, int64_t t)
{
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; j++)
        m = fmax(m, x[j]);
    for (int64_t j = 0; j < c; j++)
        s += exp(x[j] - m);
    return m + log(s) - x[t];
}

/* y [m, n] = x [m, k] w^T (+ b) for dense row-major x and w [n, k]. */
static inline void ref_linear(const double *x, const double *w, const double *b, int64_t m,
                              int64_t k, int64_t n, double *y)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = b ? b[j] : 0;
            for (int64_t q = 0; q < k; q++)
                s += x[i * k + q] * w[j * k + q];
            y[i * n + j] = s;
        }
}

/* softmax(scale q k^T, causal mask) v in double for dense q [nb, l, e], k
 * [nb, s, e], v [nb, s, ev] into o [nb, l, ev]. */
static inline void ref_sdpa(const double *q, const double *k, const double *v, int64_t nb,
                            int64_t l, int64_t s, int64_t e, int64_t ev, bool causal, double scale,
                            double *o)
{
    double *w = malloc(sizeof(double) * (size_t)s);
    for (int64_t p = 0; p < nb; p++)
        for (int64_t i = 0; i < l; i++) {
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < s; j++) {
                double d = 0;
                for (int64_t x = 0; x < e; x++)
                    d += q[(p * l + i) * e + x] * k[(p * s + j) * e + x];
                w[j] = causal && j > i ? -INFINITY : d * scale;
                m = fmax(m, w[j]);
            }
            for (int64_t j = 0; j < s; j++)
                sum += (w[j] = exp(w[j] - m));
            for (int64_t x = 0; x < ev; x++) {
                double acc = 0;
                for (int64_t j = 0; j < s; j++)
                    acc += w[j] / sum * v[(p * s + j) * ev + x];
                o[(p * l + i) * ev + x] = acc;
            }
        }
    free(w);
}

/* Which path a linear took: 1 gemm_bias in one step, 0 copy + GEMM, -1 none
 * counted (no bias). */
static inline int path_of(uint64_t f0, uint64_t u0)
{
    uint64_t f1, u1;
    tc__nn_linear_counts(&f1, &u1);
    CHECK(f1 - f0 + u1 - u0 <= 1);
    return f1 > f0 ? 1 : u1 > u0 ? 0 : -1;
}

#endif
