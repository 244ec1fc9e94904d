/* Reductions and scans: the device-independent half.
 *
 * A reduction sees its input as a contiguous [outer, r, inner] and reduces
 * over r (all dimensions: outer = inner = 1); the backend's `reduce` does
 * sum, mean, prod, max, min, argmax and argmin, its `scan` the running sum.
 * The other reductions are written, as PyTorch writes them, from those and
 * the element-wise operations, so that every backend runs them with kernels
 * it has and the same steps on the CPU and a GPU:
 *   var/std    two passes: the mean, then the squared deviations from it;
 *   logsumexp  max m (an infinite m counts as 0), then m + log(sum(exp(a - m)));
 *   any/all    max/min of the input as bool;
 *   norm       sums of |a|^p, or max/min of |a|.
 * 16-bit inputs of the composed ones are computed in float32 and converted
 * back at the end. */
#include <math.h>
#include <string.h>

#include "tensor_internal.h"

/* ---- geometry ---------------------------------------------------------------------- */

/* A reduction of `a` over `dim`: [outer, r, inner] and the result's sizes. */
typedef struct geom {
    int64_t outer, r, inner;
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
} geom;

static tc_status geometry(const char *fn, const tc_tensor *a, int dim, bool keepdim, bool allow_all,
                          geom *g)
{
    bool all = dim == TC_ALL_DIMS;
    if (all && !allow_all)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: needs a dimension, not TC_ALL_DIMS", fn);
    int d = 0;
    if (!all) {
        int n = a->ndim ? a->ndim : 1;
        d = dim < 0 ? dim + n : dim;
        TC_CHECK_ARG(d >= 0 && d < n, "%s: dimension %d out of range for a %d-d tensor", fn, dim,
                     a->ndim);
    }
    g->outer = g->inner = 1;
    g->ndim = 0;
    if (all || a->ndim == 0) {
        g->r = tc__numel(a->ndim, a->sizes);
        if (keepdim)
            for (; g->ndim < a->ndim; g->ndim++)
                g->sizes[g->ndim] = 1;
        return TC_OK;
    }
    for (int i = 0; i < a->ndim; i++) {
        if (i < d)
            g->outer *= a->sizes[i];
        else if (i > d)
            g->inner *= a->sizes[i];
        if (i != d)
            g->sizes[g->ndim++] = a->sizes[i];
        else if (keepdim)
            g->sizes[g->ndim++] = 1;
    }
    g->r = a->sizes[d];
    return TC_OK;
}

/* Runs the backend's reduction `op` of contiguous c into a new tensor. */
static tc_status launch(tc__op op, const tc_tensor *c, const geom *g, tc_dtype out_t,
                        tc_tensor **out)
{
    const tc__backend *be = tc__backend_of(c->storage->device);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    tc_tensor *res;
    TC_TRY(tc__new_tensor(g->ndim, g->sizes, out_t, c->storage->device, false, &res));
    tc_status st = TC_OK;
    if (g->outer * g->inner > 0)
        st = be->reduce(c->storage->device.index, op, c->dtype, out_t, tc__data(c), tc__data(res),
                        g->outer, g->r, g->inner);
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}

static bool is_extreme(tc__op op)
{
    return op == TC__RED_MAX || op == TC__RED_MIN || op == TC__RED_ARGMAX || op == TC__RED_ARGMIN;
}

static tc_status reduce(const char *fn, tc__op op, const tc_tensor *a, int dim, bool keepdim,
                        tc_tensor **out)
{
    TC_TRY(tc__tensor_check(a, "tc_tensor a"));
    TC_CHECK_ARG(out, "out is NULL");
    geom g;
    TC_TRY(geometry(fn, a, dim, keepdim, true, &g));
    tc_dtype out_t = a->dtype;
    bool fl = tc_dtype_is_floating(a->dtype);
    if (op == TC__RED_MEAN && !fl)
        return tc__fail(TC_ERROR_DTYPE,
                        "%s: needs a floating dtype, not %s (convert with "
                        "tc_tensor_to first)",
                        fn, tc_dtype_string(a->dtype));
    if (op == TC__RED_ARGMAX || op == TC__RED_ARGMIN ||
        ((op == TC__RED_SUM || op == TC__RED_PROD) && !fl))
        out_t = TC_INT64;
    if (g.r == 0 && is_extreme(op))
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: the reduction is over zero elements; %s of nothing "
                        "is not defined",
                        fn, fn + 10);
    if (!tc__backend_of(a->storage->device))
        return TC_ERROR_NO_DEVICE;
    tc_tensor *c = NULL;
    TC_TRY(tc_tensor_contiguous(a, &c));
    tc_status st = launch(op, c, &g, out_t, out);
    tc_tensor_release(c);
    return st;
}

#define REDUCTION(name, OP)                                                                        \
    tc_status tc_tensor_##name(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out)         \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        return reduce("tc_tensor_" #name, OP, a, dim, keepdim, out);                               \
    }
REDUCTION(sum, TC__RED_SUM)
REDUCTION(mean, TC__RED_MEAN)
REDUCTION(max, TC__RED_MAX)
REDUCTION(min, TC__RED_MIN)
REDUCTION(argmax, TC__RED_ARGMAX)
REDUCTION(prod, TC__RED_PROD)

/* ---- values and indices ---------------------------------------------------------------- */

static tc_status extreme_dim(const char *fn, bool is_max, const tc_tensor *a, int dim, bool keepdim,
                             tc_tensor **values, tc_tensor **indices)
{
    TC_TRY(tc__tensor_check(a, "tc_tensor a"));
    TC_CHECK_ARG(values && indices, "values or indices is NULL");
    geom g;
    TC_TRY(geometry(fn, a, dim, keepdim, false, &g));
    if (g.r == 0)
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: Expected reduction dim %d to have non-zero size (an empty "
                        "dimension has no %s)",
                        fn, dim, is_max ? "maximum" : "minimum");
    if (!tc__backend_of(a->storage->device))
        return TC_ERROR_NO_DEVICE;
    tc_tensor *c = NULL, *v = NULL, *i = NULL;
    TC_TRY(tc_tensor_contiguous(a, &c));
    tc_status st = launch(is_max ? TC__RED_MAX : TC__RED_MIN, c, &g, a->dtype, &v);
    if (st == TC_OK)
        st = launch(is_max ? TC__RED_ARGMAX : TC__RED_ARGMIN, c, &g, TC_INT64, &i);
    tc_tensor_release(c);
    if (st != TC_OK) {
        tc_tensor_release(v);
        return st;
    }
    *values = v;
    *indices = i;
    return TC_OK;
}

tc_status tc_tensor_max_dim(const tc_tensor *a, int dim, bool keepdim, tc_tensor **values,
                            tc_tensor **indices)
{
    TC_API_BEGIN;
    return extreme_dim("tc_tensor_max_dim", true, a, dim, keepdim, values, indices);
}

tc_status tc_tensor_min_dim(const tc_tensor *a, int dim, bool keepdim, tc_tensor **values,
                            tc_tensor **indices)
{
    TC_API_BEGIN;
    return extreme_dim("tc_tensor_min_dim", false, a, dim, keepdim, values, indices);
}

/* ---- composed reductions ---------------------------------------------------------------- */

/* Temporaries of a composed reduction, released together at the end. */
typedef struct temps {
    tc_tensor *t[16];
    int n;
} temps;
static tc_tensor **tmp(temps *ts)
{
    ts->t[ts->n] = NULL;
    return &ts->t[ts->n++];
}
static void release_all(temps *ts)
{
    for (int i = 0; i < ts->n; i++)
        tc_tensor_release(ts->t[i]);
}
#define STEP(call)                                                                                 \
    do {                                                                                           \
        if (st == TC_OK)                                                                           \
            st = (call);                                                                           \
    } while (0)

/* A 0-d tensor of v (dtype, device of t). */
static tc_status scalar(const tc_tensor *t, double v, tc_dtype dtype, tc_tensor **out)
{
    return tc_tensor_full(0, NULL, v, dtype, t->storage->device, out);
}

/* The dtype composed reductions compute in: float32 for 16-bit floats and
 * for integers, else the input's. */
static tc_dtype acc_dtype(tc_dtype d) { return d == TC_FLOAT64 ? TC_FLOAT64 : TC_FLOAT32; }

/* The common checks; `floating`: refuse other dtypes with TC_ERROR_DTYPE. */
static tc_status check_composed(const char *fn, const tc_tensor *a, bool floating, tc_tensor **out)
{
    TC_TRY(tc__tensor_check(a, "tc_tensor a"));
    TC_CHECK_ARG(out, "out is NULL");
    if (floating && !tc_dtype_is_floating(a->dtype))
        return tc__fail(TC_ERROR_DTYPE,
                        "%s: needs a floating dtype, not %s (convert with tc_tensor_to first)", fn,
                        tc_dtype_string(a->dtype));
    if (!tc__backend_of(a->storage->device))
        return TC_ERROR_NO_DEVICE;
    return TC_OK;
}

static tc_status var_std(const char *fn, bool is_std, const tc_tensor *a, int dim,
                         int64_t correction, bool keepdim, tc_tensor **out)
{
    TC_TRY(check_composed(fn, a, true, out));
    geom g;
    TC_TRY(geometry(fn, a, dim, keepdim, true, &g));
    double divisor = (double)g.r - (double)correction;
    temps T = {.n = 0};
    tc_tensor **x = tmp(&T), **m = tmp(&T), **dev = tmp(&T), **sq = tmp(&T), **s = tmp(&T);
    tc_tensor **dd = tmp(&T), **v = tmp(&T), **r = tmp(&T), *res = NULL;
    tc_dtype ct = acc_dtype(a->dtype);
    tc_status st = tc__as_dtype(a, ct, x);
    STEP(tc_tensor_mean(*x, dim, true, m));
    STEP(tc_tensor_sub(*x, *m, dev));
    STEP(tc_tensor_mul(*dev, *dev, sq));
    STEP(tc_tensor_sum(*sq, dim, keepdim, s));
    STEP(scalar(a, divisor > 0 ? divisor : 0, ct, dd));
    STEP(tc_tensor_div(*s, *dd, v));
    if (is_std)
        STEP(tc_tensor_sqrt(*v, r));
    else
        STEP((*r = tc__tensor_ref(*v), TC_OK));
    /* as PyTorch: over nothing it is NaN whatever the correction */
    if (g.r == 0)
        STEP(tc_tensor_fill_(*r, NAN));
    STEP(tc__as_dtype(*r, a->dtype, &res));
    release_all(&T);
    if (st == TC_OK)
        *out = res;
    return st;
}

tc_status tc_tensor_var(const tc_tensor *a, int dim, int64_t correction, bool keepdim,
                        tc_tensor **out)
{
    TC_API_BEGIN;
    return var_std("tc_tensor_var", false, a, dim, correction, keepdim, out);
}

tc_status tc_tensor_std(const tc_tensor *a, int dim, int64_t correction, bool keepdim,
                        tc_tensor **out)
{
    TC_API_BEGIN;
    return var_std("tc_tensor_std", true, a, dim, correction, keepdim, out);
}

tc_status tc_tensor_logsumexp(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out)
{
    TC_API_BEGIN;
    const char *fn = "tc_tensor_logsumexp";
    TC_TRY(check_composed(fn, a, false, out));
    geom g;
    TC_TRY(geometry(fn, a, dim, keepdim, true, &g));
    tc_dtype out_t = tc_dtype_is_floating(a->dtype) ? a->dtype : TC_FLOAT32;
    tc_dtype ct = acc_dtype(a->dtype);
    if (g.r == 0) /* log(0) */
        return tc_tensor_full(g.ndim, g.sizes, -INFINITY, out_t, a->storage->device, out);
    temps T = {.n = 0};
    tc_tensor **x = tmp(&T), **m = tmp(&T), **am = tmp(&T), **inf = tmp(&T), **isinf = tmp(&T);
    tc_tensor **zero = tmp(&T), **m0 = tmp(&T), **d = tmp(&T), **e = tmp(&T), **s = tmp(&T);
    tc_tensor **l = tmp(&T), **m0v = tmp(&T), **r = tmp(&T), *res = NULL;
    tc_status st = tc__as_dtype(a, ct, x);
    STEP(tc_tensor_max(*x, dim, true, m));
    /* an infinite maximum is taken out as 0 (PyTorch's masked_fill_), so that
     * inf - inf does not make NaN: all -inf gives -inf, any +inf gives +inf */
    STEP(tc_tensor_abs(*m, am));
    STEP(scalar(a, INFINITY, ct, inf));
    STEP(tc_tensor_eq(*am, *inf, isinf));
    STEP(scalar(a, 0, ct, zero));
    STEP(tc_tensor_where(*isinf, *zero, *m, m0));
    STEP(tc_tensor_sub(*x, *m0, d));
    STEP(tc_tensor_exp(*d, e));
    STEP(tc_tensor_sum(*e, dim, keepdim, s));
    STEP(tc_tensor_log(*s, l));
    STEP(tc_tensor_view(*m0, g.ndim, g.sizes, m0v));
    STEP(tc_tensor_add(*l, *m0v, r));
    STEP(tc__as_dtype(*r, out_t, &res));
    release_all(&T);
    if (st == TC_OK)
        *out = res;
    return st;
}

static tc_status any_all(const char *fn, bool is_all, const tc_tensor *a, int dim, bool keepdim,
                         tc_tensor **out)
{
    TC_TRY(check_composed(fn, a, false, out));
    geom g;
    TC_TRY(geometry(fn, a, dim, keepdim, true, &g));
    tc_dtype out_t = a->dtype == TC_UINT8 ? TC_UINT8 : TC_BOOL; /* as PyTorch */
    if (g.r == 0)
        return tc_tensor_full(g.ndim, g.sizes, is_all ? 1 : 0, out_t, a->storage->device, out);
    temps T = {.n = 0};
    tc_tensor **b = tmp(&T), **c = tmp(&T), **r = tmp(&T), *res = NULL;
    tc_status st = tc__as_dtype(a, TC_BOOL, b);
    STEP(tc_tensor_contiguous(*b, c));
    /* on 0 and 1, any is max and all is min */
    STEP(launch(is_all ? TC__RED_MIN : TC__RED_MAX, *c, &g, TC_BOOL, r));
    STEP(tc__as_dtype(*r, out_t, &res));
    release_all(&T);
    if (st == TC_OK)
        *out = res;
    return st;
}

tc_status tc_tensor_any(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out)
{
    TC_API_BEGIN;
    return any_all("tc_tensor_any", false, a, dim, keepdim, out);
}

tc_status tc_tensor_all(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out)
{
    TC_API_BEGIN;
    return any_all("tc_tensor_all", true, a, dim, keepdim, out);
}

tc_status tc_tensor_norm(const tc_tensor *a, double p, int dim, bool keepdim, tc_tensor **out)
{
    TC_API_BEGIN;
    const char *fn = "tc_tensor_norm";
    TC_TRY(check_composed(fn, a, true, out));
    TC_CHECK_ARG(!isnan(p), "%s: p is NaN", fn);
    geom g;
    TC_TRY(geometry(fn, a, dim, keepdim, true, &g));
    if (g.r == 0 && (p < 0 || isinf(p)))
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: cannot compute the %g norm over zero elements because the operation "
                        "does not have an identity",
                        fn, p);
    tc_dtype ct = acc_dtype(a->dtype);
    temps T = {.n = 0};
    tc_tensor **x = tmp(&T), **ax = tmp(&T), **t = tmp(&T), **s = tmp(&T), **e = tmp(&T);
    tc_tensor **r = tmp(&T), *res = NULL;
    tc_status st = tc__as_dtype(a, ct, x);
    if (isinf(p)) {
        STEP(tc_tensor_abs(*x, ax));
        STEP(p > 0 ? tc_tensor_max(*ax, dim, keepdim, r) : tc_tensor_min(*ax, dim, keepdim, r));
    } else if (p == 0) { /* the count of non-zeros */
        STEP(scalar(a, 0, ct, e));
        STEP(tc_tensor_ne(*x, *e, t));
        STEP(tc_tensor_sum(*t, dim, keepdim, s));
        STEP(tc__as_dtype(*s, ct, r));
    } else if (p == 1) {
        STEP(tc_tensor_abs(*x, ax));
        STEP(tc_tensor_sum(*ax, dim, keepdim, r));
    } else if (p == 2) {
        STEP(tc_tensor_mul(*x, *x, t));
        STEP(tc_tensor_sum(*t, dim, keepdim, s));
        STEP(tc_tensor_sqrt(*s, r));
    } else {
        tc_tensor **pe = tmp(&T), **ip = tmp(&T);
        STEP(tc_tensor_abs(*x, ax));
        STEP(scalar(a, p, ct, pe));
        STEP(tc_tensor_pow(*ax, *pe, t));
        STEP(tc_tensor_sum(*t, dim, keepdim, s));
        STEP(scalar(a, 1.0 / p, ct, ip));
        STEP(tc_tensor_pow(*s, *ip, r));
    }
    STEP(tc__as_dtype(*r, a->dtype, &res));
    release_all(&T);
    if (st == TC_OK)
        *out = res;
    return st;
}

/* ---- scans ---------------------------------------------------------------------------- */

tc_status tc_tensor_cumsum(const tc_tensor *a, int dim, tc_tensor **out)
{
    TC_API_BEGIN;
    const char *fn = "tc_tensor_cumsum";
    TC_TRY(check_composed(fn, a, false, out));
    geom g;
    TC_TRY(geometry(fn, a, dim, true, false, &g));
    tc_dtype dt = tc_dtype_is_floating(a->dtype) ? a->dtype : TC_INT64;
    const tc__backend *be = tc__backend_of(a->storage->device);
    temps T = {.n = 0};
    tc_tensor **x = tmp(&T), **c = tmp(&T), *res = NULL;
    tc_status st = tc__as_dtype(a, dt, x);
    STEP(tc_tensor_contiguous(*x, c));
    STEP(tc__new_tensor(a->ndim, a->sizes, dt, a->storage->device, false, &res));
    if (st == TC_OK && tc__numel(a->ndim, a->sizes) > 0)
        st = be->scan(a->storage->device.index, TC__SCAN_CUMSUM, dt, tc__data(*c), tc__data(res),
                      g.outer, g.r, g.inner);
    release_all(&T);
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return st;
}
