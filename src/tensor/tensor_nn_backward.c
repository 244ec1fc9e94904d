/* nn_backward.h's element-wise and row-wise functions: argument checks,
 * shapes and layouts, then the device's nn backend (nn_internal.h) on dense
 * operands.
 *
 * As tensor_nn.c, everything that does not depend on the device is decided
 * here: every tensor is checked before anything is allocated, the inputs
 * are made contiguous, the results are new tensors, and the out-parameters
 * are written only when every result is made. The range of cross_entropy's
 * targets is checked here on the CPU; a GPU's kernel checks them itself so
 * that the call does not wait for the device (kernel_errors.h). */
#include <math.h>
#include <stdlib.h>

#include "nn_internal.h"
#include "tcuda/nn_backward.h"
#include "tensor_internal.h"

/* A live tensor on x's device with dtype dt. */
static tc_status check_on(const char *fn, const tc_tensor *x, const tc_tensor *t, tc_dtype dt,
                          const char *what)
{
    TC_TRY(tc__tensor_check(t, what));
    TC_TRY(tc__check_same_device(fn, x, t));
    if (t->dtype != dt)
        return tc__fail(TC_ERROR_DTYPE, "%s: %s is %s; it must be %s", fn, what,
                        tc_dtype_string(t->dtype), tc_dtype_string(dt));
    return TC_OK;
}

/* check_on (dtype dt) with x's shape too. */
static tc_status check_shaped(const char *fn, const tc_tensor *x, const tc_tensor *t, tc_dtype dt,
                              const char *what, const char *xname)
{
    TC_TRY(check_on(fn, x, t, dt, what));
    bool ok = t->ndim == x->ndim;
    for (int i = 0; ok && i < x->ndim; i++)
        ok = t->sizes[i] == x->sizes[i];
    if (!ok)
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: %s must have %s's shape (a %d-d tensor), got a %d-d one", fn, what,
                        xname, x->ndim, t->ndim);
    return TC_OK;
}

/* check_on with x's dtype and shape. */
static tc_status check_same(const char *fn, const tc_tensor *x, const tc_tensor *t,
                            const char *what, const char *xname)
{
    return check_shaped(fn, x, t, x->dtype, what, xname);
}

static int64_t prod(const int64_t *sizes, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= sizes[i];
    return p;
}

/* Float32 for 16-bit dtypes: the type of layer_norm's statistics. */
static tc_dtype acc_dtype(tc_dtype dt)
{
    return dt == TC_FLOAT16 || dt == TC_BFLOAT16 ? TC_FLOAT32 : dt;
}

/* Contiguous copies (or new references) of n optional tensors; on failure
 * those made are released. */
static tc_status dense_all(int n, const tc_tensor *const *in, tc_tensor **out)
{
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    for (int i = 0; i < n; i++) {
        if (!in[i])
            continue;
        tc_status st = tc_tensor_contiguous(in[i], &out[i]);
        if (st != TC_OK) {
            for (int j = 0; j < i; j++)
                tc_tensor_release(out[j]);
            return st;
        }
    }
    return TC_OK;
}

static void release_all(int n, tc_tensor **t)
{
    for (int i = 0; i < n; i++)
        tc_tensor_release(t[i]);
}

static void *data_or_null(const tc_tensor *t) { return t ? tc__data(t) : NULL; }

/* ---- gelu ------------------------------------------------------------------------ */

tc_status tc__nn_check_gelu_approximate(const char *fn, tc_gelu_approximate approximate)
{
    TC_CHECK_ARG(approximate == TC_GELU_APPROXIMATE_NONE || approximate == TC_GELU_APPROXIMATE_TANH,
                 "%s: approximate %d is neither TC_GELU_APPROXIMATE_NONE nor "
                 "TC_GELU_APPROXIMATE_TANH",
                 fn, (int)approximate);
    return TC_OK;
}

tc_status tc_nn_gelu_backward(const tc_tensor *grad_output, const tc_tensor *x,
                              tc_gelu_approximate approximate, tc_tensor **grad_in)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_gelu_backward";
    TC_TRY(tc__nn_check_float(fn, x, "tc_tensor x"));
    TC_TRY(check_same(fn, x, grad_output, "tc_tensor grad_output", "x"));
    TC_TRY(tc__nn_check_gelu_approximate(fn, approximate));
    TC_CHECK_ARG(grad_in, "%s: grad_in is NULL", fn);
    tc_device dev = x->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    const tc_tensor *in[2] = {grad_output, x};
    tc_tensor *d[2], *res = NULL;
    TC_TRY(dense_all(2, in, d));
    tc_status st = tc__new_tensor(x->ndim, x->sizes, x->dtype, dev, false, &res);
    int64_t n = tc__numel(x->ndim, x->sizes);
    if (st == TC_OK && n > 0) {
        tc__nn_gelu_bwd a = {.dtype = x->dtype,
                             .tanh = approximate == TC_GELU_APPROXIMATE_TANH,
                             .grad_out = tc__data(d[0]),
                             .x = tc__data(d[1]),
                             .grad_in = tc__data(res),
                             .n = n};
        st = be->gelu_backward(dev.index, &a);
    }
    release_all(2, d);
    return tc__nn_finish(st, res, grad_in);
}

/* ---- softmax and log_softmax ------------------------------------------------------ */

static tc_status softmax_bwd(const char *fn, bool log, const tc_tensor *grad_output,
                             const tc_tensor *y, int dim, tc_tensor **grad_in)
{
    TC_TRY(tc__nn_check_float(fn, y, "tc_tensor y"));
    TC_TRY(check_same(fn, y, grad_output, "tc_tensor grad_output", "y"));
    TC_CHECK_ARG(grad_in, "%s: grad_in is NULL", fn);
    int64_t outer, n, inner;
    TC_TRY(tc__nn_split_dim(fn, y, dim, &outer, &n, &inner));
    tc_device dev = y->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    const tc_tensor *in[2] = {grad_output, y};
    tc_tensor *d[2], *res = NULL;
    TC_TRY(dense_all(2, in, d));
    tc_status st = tc__new_tensor(y->ndim, y->sizes, y->dtype, dev, false, &res);
    if (st == TC_OK && outer * n * inner > 0) {
        tc__nn_softmax_bwd a = {.log = log,
                                .dtype = y->dtype,
                                .grad_out = tc__data(d[0]),
                                .y = tc__data(d[1]),
                                .grad_in = tc__data(res),
                                .outer = outer,
                                .n = n,
                                .inner = inner};
        st = be->softmax_backward(dev.index, &a);
    }
    release_all(2, d);
    return tc__nn_finish(st, res, grad_in);
}

tc_status tc_nn_softmax_backward(const tc_tensor *grad_output, const tc_tensor *y, int dim,
                                 tc_tensor **grad_in)
{
    TC_API_BEGIN;
    return softmax_bwd("tc_nn_softmax_backward", false, grad_output, y, dim, grad_in);
}

tc_status tc_nn_log_softmax_backward(const tc_tensor *grad_output, const tc_tensor *y, int dim,
                                     tc_tensor **grad_in)
{
    TC_API_BEGIN;
    return softmax_bwd("tc_nn_log_softmax_backward", true, grad_output, y, dim, grad_in);
}

/* ---- layer_norm ------------------------------------------------------------------- */

/* `p` (weight or bias, optional) of x's dtype with exactly the normalized
 * shape. */
static tc_status check_param(const char *fn, const tc_tensor *x, const tc_tensor *p,
                             const char *what, int nshape, const int64_t *shape)
{
    if (!p)
        return TC_OK;
    TC_TRY(check_on(fn, x, p, x->dtype, what));
    return tc__nn_check_norm_param(fn, p, what, nshape, shape);
}

/* A mean or rstd for x normalized over its last nshape dims: of x's
 * statistics dtype, x's leading sizes, then nothing or nshape ones. */
static tc_status check_stat(const char *fn, const tc_tensor *x, const tc_tensor *s, int nshape,
                            const char *what)
{
    TC_TRY(check_on(fn, x, s, acc_dtype(x->dtype), what));
    int lead = x->ndim - nshape;
    bool ok = s->ndim == lead || s->ndim == x->ndim;
    for (int i = 0; ok && i < s->ndim; i++)
        ok = s->sizes[i] == (i < lead ? x->sizes[i] : 1);
    if (!ok)
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: %s must have x's %d leading sizes (then %d ones or none), got a %d-d "
                        "tensor",
                        fn, what, lead, nshape, s->ndim);
    return TC_OK;
}

/* Whether dt may go with float32 x as a residual or an output: x's own
 * dtype, or a 16-bit one where x is float32 (autocast's pairs). */
static bool mixes_with(const tc_tensor *x, tc_dtype dt)
{
    return dt == x->dtype || (x->dtype == TC_FLOAT32 && (dt == TC_FLOAT16 || dt == TC_BFLOAT16));
}

/* layer_norm of x, or of x + residual into a new *sum, the result of
 * out_dtype into *out; mean and rstd as tc_nn_native_layer_norm's. The
 * arguments are checked but for nshape's and the outputs' NULLs. */
static tc_status ln_forward(const char *fn, const tc_tensor *x, const tc_tensor *residual,
                            int nshape, const int64_t *normalized_shape, const tc_tensor *weight,
                            const tc_tensor *bias, double eps, tc_dtype out_dtype, tc_tensor **sum,
                            tc_tensor **out, tc_tensor **mean, tc_tensor **rstd)
{
    TC_TRY(tc__nn_check_norm_shape(fn, x, nshape, normalized_shape));
    TC_TRY(check_param(fn, x, weight, "tc_tensor weight", nshape, normalized_shape));
    TC_TRY(check_param(fn, x, bias, "tc_tensor bias", nshape, normalized_shape));
    tc_device dev = x->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    int lead = x->ndim - nshape;
    int64_t m = prod(x->sizes, 0, lead), n = prod(x->sizes, lead, x->ndim);
    int64_t ssz[TC_MAX_DIMS]; /* the statistics: x's leading sizes, then ones */
    for (int i = 0; i < x->ndim; i++)
        ssz[i] = i < lead ? x->sizes[i] : 1;
    const tc_tensor *in[4] = {x, weight, bias, residual};
    tc_tensor *d[4], *r[4] = {NULL, NULL, NULL, NULL}; /* out, mean, rstd, sum */
    TC_TRY(dense_all(4, in, d));
    tc_status st = tc__new_tensor(x->ndim, x->sizes, out_dtype, dev, false, &r[0]);
    for (int i = 1; i < 3 && st == TC_OK; i++)
        st = tc__new_tensor(x->ndim, ssz, acc_dtype(x->dtype), dev, false, &r[i]);
    if (st == TC_OK && residual)
        st = tc__new_tensor(x->ndim, x->sizes, x->dtype, dev, false, &r[3]);
    if (st == TC_OK && m * n > 0) {
        tc__nn_ln a = {.dtype = x->dtype,
                       .out_dtype = out_dtype,
                       .res_dtype = residual ? residual->dtype : x->dtype,
                       .x = tc__data(d[0]),
                       .residual = data_or_null(d[3]),
                       .weight = data_or_null(d[1]),
                       .bias = data_or_null(d[2]),
                       .y = tc__data(r[0]),
                       .sum = data_or_null(r[3]),
                       .mean = tc__data(r[1]),
                       .rstd = tc__data(r[2]),
                       .m = m,
                       .n = n,
                       .eps = eps};
        st = be->layer_norm(dev.index, &a);
    } else if (st == TC_OK && m > 0) { /* rows of nothing: their mean is 0 / 0 */
        st = tc_tensor_fill_(r[1], NAN);
        if (st == TC_OK)
            st = tc_tensor_fill_(r[2], NAN);
    }
    release_all(4, d);
    if (st != TC_OK) {
        release_all(4, r);
        return st;
    }
    *out = r[0];
    tc_tensor **keep[3] = {mean, rstd, sum};
    for (int i = 0; i < 3; i++) {
        if (keep[i])
            *keep[i] = r[i + 1];
        else
            tc_tensor_release(r[i + 1]);
    }
    return TC_OK;
}

tc_status tc_nn_native_layer_norm(const tc_tensor *x, int nshape, const int64_t *normalized_shape,
                                  const tc_tensor *weight, const tc_tensor *bias, double eps,
                                  tc_tensor **out, tc_tensor **mean, tc_tensor **rstd)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_native_layer_norm";
    TC_TRY(tc__nn_check_float(fn, x, "tc_tensor x"));
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    return ln_forward(fn, x, NULL, nshape, normalized_shape, weight, bias, eps, x->dtype, NULL, out,
                      mean, rstd);
}

tc_status tc_nn_add_layer_norm(const tc_tensor *x, const tc_tensor *residual, int nshape,
                               const int64_t *normalized_shape, const tc_tensor *weight,
                               const tc_tensor *bias, double eps, tc_dtype out_dtype,
                               tc_tensor **sum, tc_tensor **out, tc_tensor **mean, tc_tensor **rstd)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_add_layer_norm";
    TC_TRY(tc__nn_check_float(fn, x, "tc_tensor x"));
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    TC_CHECK_ARG(!residual == !sum,
                 "%s: sum is %s but residual is %s; pass both (x + residual is kept) or neither",
                 fn, sum ? "given" : "NULL", residual ? "given" : "NULL");
    if (residual) {
        TC_TRY(check_shaped(fn, x, residual, residual->dtype, "tc_tensor residual", "x"));
        if (!mixes_with(x, residual->dtype))
            return tc__fail(TC_ERROR_DTYPE,
                            "%s: residual is %s, x %s; residual must be x's dtype, or float16 "
                            "or bfloat16 with float32 x",
                            fn, tc_dtype_string(residual->dtype), tc_dtype_string(x->dtype));
    }
    if ((unsigned)out_dtype >= TC_NUM_DTYPES || !mixes_with(x, out_dtype))
        return tc__fail(TC_ERROR_DTYPE,
                        "%s: out_dtype is %s, x %s; it must be x's dtype, or float16 or "
                        "bfloat16 with float32 x",
                        fn, tc_dtype_string(out_dtype), tc_dtype_string(x->dtype));
    return ln_forward(fn, x, residual, nshape, normalized_shape, weight, bias, eps, out_dtype, sum,
                      out, mean, rstd);
}

/* layer_norm_backward's checks (nshape and shape already checked). With
 * mixed, grad_output may be float16 or bfloat16 where x is float32. */
static tc_status ln_bwd_check(const char *fn, const tc_tensor *grad_output, const tc_tensor *x,
                              int nshape, const int64_t *shape, const tc_tensor *mean,
                              const tc_tensor *rstd, const tc_tensor *weight, bool mixed)
{
    TC_TRY(tc__tensor_check(grad_output, "tc_tensor grad_output"));
    tc_dtype gt = grad_output->dtype;
    bool half = gt == TC_FLOAT16 || gt == TC_BFLOAT16;
    TC_TRY(check_shaped(fn, x, grad_output, mixed && half && x->dtype == TC_FLOAT32 ? gt : x->dtype,
                        "tc_tensor grad_output", "x"));
    TC_TRY(check_stat(fn, x, mean, nshape, "tc_tensor mean"));
    TC_TRY(check_stat(fn, x, rstd, nshape, "tc_tensor rstd"));
    return check_param(fn, x, weight, "tc_tensor weight", nshape, shape);
}

/* The wanted gradients (want: dx, dweight, dbias) into the caller's
 * tensors dst[i], or new ones made[i] where dst[i] is NULL. The kernels
 * write dense tensors: where a destination is not contiguous, all go
 * through new ones, then are added (accumulate) or copied into dst. */
static tc_status ln_bwd_run(const tc_tensor *grad_output, const tc_tensor *x, int nshape,
                            const int64_t *shape, const tc_tensor *mean, const tc_tensor *rstd,
                            const tc_tensor *weight, bool accumulate, tc_tensor *const dst[3],
                            const bool want[3], tc_tensor *made[3], tc_tensor *dx_cast)
{
    tc_device dev = x->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    int lead = x->ndim - nshape;
    int64_t m = prod(x->sizes, 0, lead), n = prod(x->sizes, lead, x->ndim);
    bool direct = true;
    for (int i = 0; i < 3; i++)
        direct = direct && (!dst[i] || tc_tensor_is_contiguous(dst[i]));
    const tc_tensor *in[5] = {grad_output, x, mean, rstd, weight};
    tc_tensor *d[5], *out[3] = {NULL, NULL, NULL};
    TC_TRY(dense_all(5, in, d));
    tc_status st = TC_OK;
    for (int i = 0; i < 3 && st == TC_OK; i++) {
        if (!want[i])
            continue;
        if (dst[i] && direct)
            out[i] = dst[i];
        else if ((st = tc__new_tensor(i ? nshape : x->ndim, i ? shape : x->sizes, x->dtype, dev,
                                      false, &made[i])) == TC_OK)
            out[i] = made[i];
    }
    bool acc = accumulate && direct;
    /* dx's cast in the kernel where dx is computed in place, else a copy after */
    bool cast_here = dx_cast && direct && out[0] && tc_tensor_is_contiguous(dx_cast);
    if (st == TC_OK && m * n > 0) {
        tc__nn_ln_bwd a = {.dtype = x->dtype,
                           .grad_dtype = d[0]->dtype,
                           .cast_dtype = dx_cast ? dx_cast->dtype : x->dtype,
                           .dx_cast = cast_here ? tc__data(dx_cast) : NULL,
                           .grad_out = tc__data(d[0]),
                           .x = tc__data(d[1]),
                           .mean = tc__data(d[2]),
                           .rstd = tc__data(d[3]),
                           .weight = data_or_null(d[4]),
                           .dx = data_or_null(out[0]),
                           .dweight = data_or_null(out[1]),
                           .dbias = data_or_null(out[2]),
                           .m = m,
                           .n = n,
                           .accumulate = acc};
        st = be->layer_norm_backward(dev.index, &a);
    } else if (st == TC_OK && !acc) { /* no rows: the sums over them are 0 */
        for (int i = 1; i < 3 && st == TC_OK; i++)
            if (out[i])
                st = tc_tensor_fill_(out[i], 0);
    }
    for (int i = 0; i < 3 && st == TC_OK && !direct; i++) /* into the caller's strided tensors */
        if (dst[i]) {
            st = accumulate ? tc_tensor_add_(dst[i], made[i])
                            : tc_tensor_copy_(dst[i], made[i], false);
            tc_tensor_release(made[i]);
            made[i] = NULL;
        }
    if (st == TC_OK && dx_cast && !cast_here)
        st = tc_tensor_copy_(dx_cast, dst[0], false);
    release_all(5, d);
    return st;
}

tc_status tc_nn_layer_norm_backward(const tc_tensor *grad_output, const tc_tensor *x, int nshape,
                                    const int64_t *normalized_shape, const tc_tensor *mean,
                                    const tc_tensor *rstd, const tc_tensor *weight, tc_tensor **dx,
                                    tc_tensor **dweight, tc_tensor **dbias)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_layer_norm_backward";
    TC_TRY(tc__nn_check_float(fn, x, "tc_tensor x"));
    TC_TRY(tc__nn_check_norm_shape(fn, x, nshape, normalized_shape));
    TC_TRY(ln_bwd_check(fn, grad_output, x, nshape, normalized_shape, mean, rstd, weight, false));
    TC_CHECK_ARG(dx || dweight || dbias, "%s: dx, dweight and dbias are all NULL: nothing to do",
                 fn);
    tc_tensor *const none[3] = {NULL, NULL, NULL};
    const bool want[3] = {dx != NULL, dweight != NULL, dbias != NULL};
    tc_tensor *made[3] = {NULL, NULL, NULL};
    tc_status st = ln_bwd_run(grad_output, x, nshape, normalized_shape, mean, rstd, weight, false,
                              none, want, made, NULL);
    if (st != TC_OK) {
        release_all(3, made);
        return st;
    }
    tc_tensor **res[3] = {dx, dweight, dbias};
    for (int i = 0; i < 3; i++)
        if (res[i])
            *res[i] = made[i];
    return TC_OK;
}

/* A destination of layer_norm_backward_into: of dtype dt on x's device, the
 * shape nd/sz, writable, and apart from every input. */
static tc_status ln_check_dst(const char *fn, const tc_tensor *x, const tc_tensor *t,
                              const char *what, int nd, const int64_t *sz,
                              const tc_tensor *const in[5], tc_dtype dt)
{
    if (!t)
        return TC_OK;
    TC_TRY(check_on(fn, x, t, dt, what));
    bool ok = t->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = t->sizes[i] == sz[i];
    if (!ok)
        return tc__fail(TC_ERROR_SHAPE, "%s: %s has the wrong shape (a %d-d tensor; wanted %d-d)",
                        fn, what, t->ndim, nd);
    TC_TRY(tc__check_writable(t));
    static const char *in_names[5] = {"grad_output", "x", "mean", "rstd", "weight"};
    for (int j = 0; j < 5; j++)
        if (in[j] && tc__overlap_of(t, in[j]) != TC__OVERLAP_NONE)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: %s shares memory with %s", fn, what,
                            in_names[j]);
    return TC_OK;
}

tc_status tc_nn_layer_norm_backward_into(const tc_tensor *grad_output, const tc_tensor *x,
                                         int nshape, const int64_t *normalized_shape,
                                         const tc_tensor *mean, const tc_tensor *rstd,
                                         const tc_tensor *weight, bool accumulate, tc_tensor *dx,
                                         tc_tensor *dweight, tc_tensor *dbias, tc_tensor *dx_cast)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_layer_norm_backward_into";
    TC_CHECK_ARG(dx || dweight || dbias,
                 "%s: dx, dweight and dbias are all NULL; pass at least one", fn);
    TC_TRY(tc__nn_check_float(fn, x, "tc_tensor x"));
    TC_TRY(tc__nn_check_norm_shape(fn, x, nshape, normalized_shape));
    TC_TRY(ln_bwd_check(fn, grad_output, x, nshape, normalized_shape, mean, rstd, weight, true));
    const tc_tensor *const in[5] = {grad_output, x, mean, rstd, weight};
    TC_TRY(ln_check_dst(fn, x, dx, "tc_tensor dx", x->ndim, x->sizes, in, x->dtype));
    TC_TRY(
        ln_check_dst(fn, x, dweight, "tc_tensor dweight", nshape, normalized_shape, in, x->dtype));
    TC_TRY(ln_check_dst(fn, x, dbias, "tc_tensor dbias", nshape, normalized_shape, in, x->dtype));
    if (dx_cast) {
        TC_CHECK_ARG(dx, "%s: dx_cast without dx: it is dx's copy", fn);
        TC_TRY(tc__tensor_check(dx_cast, "tc_tensor dx_cast"));
        if (x->dtype != TC_FLOAT32 ||
            (dx_cast->dtype != TC_FLOAT16 && dx_cast->dtype != TC_BFLOAT16))
            return tc__fail(TC_ERROR_DTYPE,
                            "%s: dx_cast is %s for %s x; it must be float16 or bfloat16, with "
                            "float32 x",
                            fn, tc_dtype_string(dx_cast->dtype), tc_dtype_string(x->dtype));
        TC_TRY(ln_check_dst(fn, x, dx_cast, "tc_tensor dx_cast", x->ndim, x->sizes, in,
                            dx_cast->dtype));
    }
    tc_tensor *const dst[4] = {dx, dweight, dbias, dx_cast};
    static const char *names[4] = {"dx", "dweight", "dbias", "dx_cast"};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < i; j++)
            if (dst[i] && dst[j] && tc__overlap_of(dst[i], dst[j]) != TC__OVERLAP_NONE)
                return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: %s shares memory with %s", fn,
                                names[i], names[j]);
    const bool want[3] = {dx != NULL, dweight != NULL, dbias != NULL};
    tc_tensor *made[3] = {NULL, NULL, NULL};
    tc_status st = ln_bwd_run(grad_output, x, nshape, normalized_shape, mean, rstd, weight,
                              accumulate, dst, want, made, dx_cast);
    release_all(3, made);
    return st;
}

/* ---- cross_entropy ---------------------------------------------------------------- */

/* logits [N, C] or [C] and int64 target [N] or 0-d on its device, and the
 * reduction; *n and *c written. */
static tc_status ce_check(const char *fn, const tc_tensor *logits, const tc_tensor *target,
                          tc_reduction reduction, int64_t *n, int64_t *c)
{
    TC_TRY(tc__nn_check_float(fn, logits, "tc_tensor logits"));
    TC_TRY(check_on(fn, logits, target, TC_INT64, "tc_tensor target"));
    TC_CHECK_ARG(reduction == TC_REDUCTION_NONE || reduction == TC_REDUCTION_MEAN ||
                     reduction == TC_REDUCTION_SUM,
                 "%s: reduction %d is not TC_REDUCTION_NONE, _MEAN or _SUM", fn, (int)reduction);
    if (logits->ndim != 1 && logits->ndim != 2)
        return tc__fail(TC_ERROR_SHAPE, "%s: logits must be [N, C] or [C], got a %d-d tensor", fn,
                        logits->ndim);
    *n = logits->ndim == 2 ? logits->sizes[0] : 1;
    *c = logits->sizes[logits->ndim - 1];
    if (target->ndim != logits->ndim - 1 || (target->ndim == 1 && target->sizes[0] != *n))
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: target must be [N] for logits [N, C] (0-d for [C]); got a %d-d "
                        "target for %lld rows",
                        fn, target->ndim, (long long)*n);
    return TC_OK;
}

/* The loss's rank: [N] for NONE over [N, C] logits, else 0-d. */
static int loss_rank(const tc_tensor *logits, tc_reduction reduction)
{
    return reduction == TC_REDUCTION_NONE && logits->ndim == 2 ? 1 : 0;
}

/* The shared second half: targets checked on the CPU, the operands read as
 * they are where their rows are (tc__nn_rows_ld), else dense copies, the
 * results made and the backend called. dlogits is laid out as the logits
 * are: rows padded as tc__nn_new_rows pads them (tc_nn_linear's result,
 * which linear's backward then reads at an aligned stride), else dense,
 * so that both row starts lie alike against 16-byte boundaries. a's
 * pointers, sizes and strides are filled here; `grad` is the gradient
 * tensor or NULL. */
static tc_status ce_run(const char *fn, const tc_tensor *logits, const tc_tensor *target,
                        const tc_tensor *grad, tc__nn_ce_bwd *a, tc_tensor **loss,
                        tc_tensor **dlogits)
{
    tc_device dev = logits->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    if (dev.type == TC_CPU)
        TC_TRY(tc__nn_check_targets(fn, target, a->n, a->c, a->ignore_index));
    int64_t ld = 0;
    bool rows = tc__nn_rows_ld(logits, &ld);
    const tc_tensor *in[3] = {rows ? NULL : logits, target, grad};
    tc_tensor *d[3], *r[2] = {NULL, NULL};
    TC_TRY(dense_all(3, in, d));
    if (rows)
        d[0] = tc__tensor_ref((tc_tensor *)logits);
    else
        (void)tc__nn_rows_ld(d[0], &ld);
    tc_status st = tc__nn_rows_padded(logits)
                       ? tc__nn_new_rows(logits->ndim, logits->sizes, logits->dtype, dev, &r[0])
                       : tc__new_tensor(logits->ndim, logits->sizes, logits->dtype, dev, false,
                                        &r[0]);
    if (st == TC_OK && loss)
        st = tc__new_tensor(loss_rank(logits, a->reduction), &a->n, a->loss_dtype, dev, false,
                            &r[1]);
    bool none = a->reduction == TC_REDUCTION_NONE;
    if (st == TC_OK && (a->n > 0 || (loss && !none))) {
        a->dtype = logits->dtype;
        a->logits = tc__data(d[0]);
        a->target = tc__data(d[1]);
        a->grad = data_or_null(d[2]);
        a->dlogits = tc__data(r[0]);
        a->ld = ld;
        (void)tc__nn_rows_ld(r[0], &a->d_ld);
        a->loss = data_or_null(r[1]);
        st = be->cross_entropy_backward(dev.index, a);
    }
    release_all(3, d);
    if (st != TC_OK) {
        release_all(2, r);
        return st;
    }
    *dlogits = r[0];
    if (loss)
        *loss = r[1];
    return TC_OK;
}

/* The two fused entries: checked, then ce_run with the loss of loss_dtype
 * (float32 for autocast, else logits'). */
static tc_status ce_fused(const char *fn, bool autocast, const tc_tensor *logits,
                          const tc_tensor *target, int64_t ignore_index, tc_reduction reduction,
                          double grad_scale, tc_tensor **loss, tc_tensor **dlogits)
{
    int64_t n = 0, c = 0;
    TC_TRY(ce_check(fn, logits, target, reduction, &n, &c));
    if (autocast && logits->dtype != TC_FLOAT16 && logits->dtype != TC_BFLOAT16)
        return tc__fail(TC_ERROR_DTYPE,
                        "%s: logits are %s; it takes float16 or bfloat16 logits "
                        "(tc_nn_cross_entropy_fused takes the others)",
                        fn, tc_dtype_string(logits->dtype));
    TC_CHECK_ARG(isfinite(grad_scale), "%s: grad_scale is %g; it must be a finite number", fn,
                 grad_scale);
    TC_CHECK_ARG(dlogits, "%s: dlogits is NULL", fn);
    tc__nn_ce_bwd a = {.loss_dtype = autocast ? TC_FLOAT32 : logits->dtype,
                       .grad_scale = grad_scale,
                       .n = n,
                       .c = c,
                       .ignore_index = ignore_index,
                       .reduction = reduction};
    return ce_run(fn, logits, target, NULL, &a, loss, dlogits);
}

tc_status tc_nn_cross_entropy_fused(const tc_tensor *logits, const tc_tensor *target,
                                    int64_t ignore_index, tc_reduction reduction, double grad_scale,
                                    tc_tensor **loss, tc_tensor **dlogits)
{
    TC_API_BEGIN;
    return ce_fused("tc_nn_cross_entropy_fused", false, logits, target, ignore_index, reduction,
                    grad_scale, loss, dlogits);
}

tc_status tc_nn_cross_entropy_fused_autocast(const tc_tensor *logits, const tc_tensor *target,
                                             int64_t ignore_index, tc_reduction reduction,
                                             double grad_scale, tc_tensor **loss,
                                             tc_tensor **dlogits)
{
    TC_API_BEGIN;
    return ce_fused("tc_nn_cross_entropy_fused_autocast", true, logits, target, ignore_index,
                    reduction, grad_scale, loss, dlogits);
}

tc_status tc_nn_cross_entropy_backward(const tc_tensor *grad_loss, const tc_tensor *logits,
                                       const tc_tensor *target, int64_t ignore_index,
                                       tc_reduction reduction, tc_tensor **dlogits)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_cross_entropy_backward";
    int64_t n = 0, c = 0;
    TC_TRY(ce_check(fn, logits, target, reduction, &n, &c));
    TC_TRY(check_on(fn, logits, grad_loss, logits->dtype, "tc_tensor grad_loss"));
    int rank = loss_rank(logits, reduction);
    if (grad_loss->ndim != rank || (rank == 1 && grad_loss->sizes[0] != n))
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: grad_loss must have the loss's shape (%s), got a %d-d tensor", fn,
                        rank ? "[N]" : "0-d", grad_loss->ndim);
    TC_CHECK_ARG(dlogits, "%s: dlogits is NULL", fn);
    tc__nn_ce_bwd a = {.loss_dtype = logits->dtype,
                       .grad_per_row = rank == 1,
                       .grad_scale = 1,
                       .n = n,
                       .c = c,
                       .ignore_index = ignore_index,
                       .reduction = reduction};
    return ce_run(fn, logits, target, grad_loss, &a, NULL, dlogits);
}
