/* Element-wise operations and reductions: the device-independent half.
 *
 * Here live type promotion, broadcasting, dtype checks and the output
 * allocation; the backend table of the tensor's device does the arithmetic on
 * operands that all have the computation dtype already (inputs of another
 * dtype are converted into a temporary first). */
#include <stdio.h>
#include <string.h>

#include "tensor_internal.h"

/* ---- type promotion ------------------------------------------------------ */

static int category(tc_dtype d) { return d == TC_BOOL ? 0 : tc_dtype_is_floating(d) ? 2 : 1; }

/* torch.promote_types for two dtypes. */
static tc_dtype promote(tc_dtype a, tc_dtype b)
{
    if (a == b)
        return a;
    if (a == TC_BOOL)
        return b;
    if (b == TC_BOOL)
        return a;
    int ca = category(a), cb = category(b);
    if (ca != cb)
        return ca > cb ? a : b;
    if (ca == 1) {
        if (a == TC_UINT8 || b == TC_UINT8) {
            tc_dtype s = a == TC_UINT8 ? b : a;
            return s == TC_INT8 ? TC_INT16 : s;
        }
        return a > b ? a : b; /* int8 < int16 < int32 < int64 */
    }
    if ((a == TC_FLOAT16 && b == TC_BFLOAT16) || (a == TC_BFLOAT16 && b == TC_FLOAT16))
        return TC_FLOAT32;
    return tc_dtype_size(a) > tc_dtype_size(b) ? a : b;
}

/* torch.result_type over n tensors: dimensioned tensors decide unless a 0-d
 * tensor has a higher category, in which case the 0-d tensors of that
 * category decide. */
tc_dtype tc__result_type(int n, const tc_tensor *const *ts)
{
    int dim_cat = -1, zero_cat = -1;
    tc_dtype dim_t = TC_BOOL, zero_t = TC_BOOL;
    bool have_dim = false, have_zero = false;
    for (int i = 0; i < n; i++) {
        tc_dtype d = ts[i]->dtype;
        if (ts[i]->ndim > 0) {
            dim_t = have_dim ? promote(dim_t, d) : d;
            have_dim = true;
        } else {
            zero_t = have_zero ? promote(zero_t, d) : d;
            have_zero = true;
        }
    }
    if (!have_dim)
        return zero_t;
    if (!have_zero)
        return dim_t;
    dim_cat = category(dim_t);
    zero_cat = category(zero_t);
    if (zero_cat <= dim_cat)
        return dim_t;
    /* the 0-d operands of the highest category decide */
    tc_dtype r = TC_BOOL;
    bool any = false;
    for (int i = 0; i < n; i++)
        if (ts[i]->ndim == 0 && category(ts[i]->dtype) == zero_cat) {
            r = any ? promote(r, ts[i]->dtype) : ts[i]->dtype;
            any = true;
        }
    return r;
}

/* ---- broadcasting ---------------------------------------------------------- */

tc_status tc__broadcast_shapes(const char *fn, int n, const tc_tensor *const *ts, int *ndim,
                               int64_t *sizes)
{
    int nd = 0;
    for (int i = 0; i < n; i++)
        if (ts[i]->ndim > nd)
            nd = ts[i]->ndim;
    for (int d = 0; d < nd; d++)
        sizes[d] = 1;
    for (int i = 0; i < n; i++) {
        int shift = nd - ts[i]->ndim;
        for (int d = 0; d < ts[i]->ndim; d++) {
            int64_t s = ts[i]->sizes[d], *o = &sizes[d + shift];
            if (s == *o || s == 1)
                continue;
            if (*o == 1) {
                *o = s;
                continue;
            }
            return tc__fail(TC_ERROR_SHAPE,
                            "%s: sizes do not broadcast: size %lld of operand %d (dimension %d) "
                            "against %lld",
                            fn, (long long)s, i, d, (long long)*o);
        }
    }
    *ndim = nd;
    return TC_OK;
}

/* A tensor with t's values in `dtype` on t's device: t itself (retained) when
 * it has that dtype already. */
tc_status tc__as_dtype(const tc_tensor *t, tc_dtype dtype, tc_tensor **out)
{
    if (t->dtype == dtype) {
        *out = tc_tensor_retain((tc_tensor *)t);
        return TC_OK;
    }
    tc_tensor *c;
    TC_TRY(tc__new_tensor(t->ndim, t->sizes, dtype, t->storage->device, false, &c));
    tc_status st = tc__copy_local(c, t);
    if (st != TC_OK) {
        tc_tensor_release(c);
        return st;
    }
    *out = c;
    return TC_OK;
}

/* Public names, for messages (indexed by tc__op). */
static const char *fn_name(tc__op op)
{
    static const char *names[] = {
        "tc_tensor_add",  "tc_tensor_sub",     "tc_tensor_mul",     "tc_tensor_div",
        "tc_tensor_pow",  "tc_tensor_maximum", "tc_tensor_minimum", "tc_tensor_eq",
        "tc_tensor_ne",   "tc_tensor_lt",      "tc_tensor_le",      "tc_tensor_gt",
        "tc_tensor_ge",   "tc_tensor_neg",     "tc_tensor_abs",     "tc_tensor_exp",
        "tc_tensor_log",  "tc_tensor_sqrt",    "tc_tensor_relu",    "tc_tensor_sigmoid",
        "tc_tensor_tanh", "tc_tensor_sum",     "tc_tensor_mean",    "tc_tensor_max",
        "tc_tensor_min",  "tc_tensor_argmax"};
    return names[op];
}

static bool is_comparison(tc__op op) { return op >= TC__OP_EQ && op <= TC__OP_GE; }

/* Runs an operation over n inputs (n = 1, 2, or 3 for where). */
static tc_status elementwise(tc__op op, bool is_where, int n, const tc_tensor *const *in,
                             tc_tensor **out)
{
    static const char *const names[3][3] = {{"tc_tensor a"},
                                            {"tc_tensor a", "tc_tensor b"},
                                            {"tc_tensor cond", "tc_tensor a", "tc_tensor b"}};
    const char *fn = is_where ? "tc_tensor_where" : fn_name(op);
    for (int i = 0; i < n; i++)
        TC_TRY(tc__tensor_check(in[i], names[n - 1][i]));
    TC_CHECK_ARG(out, "out is NULL");
    for (int i = 1; i < n; i++)
        TC_TRY(tc__check_same_device(fn, in[0], in[i]));
    const tc_tensor *const *vals = is_where ? in + 1 : in;
    int nv = is_where ? 2 : n;
    if (is_where && in[0]->dtype != TC_BOOL)
        return tc__fail(TC_ERROR_DTYPE, "%s: the condition must be bool, not %s", fn,
                        tc_dtype_name(in[0]->dtype));
    tc_dtype ct = tc__result_type(nv, vals);
    if (!is_where) {
        bool fl = tc_dtype_is_floating(ct);
        /* As PyTorch: either operand bool, whatever the result type. */
        if (op == TC__OP_SUB && (in[0]->dtype == TC_BOOL || in[1]->dtype == TC_BOOL))
            return tc__fail(TC_ERROR_DTYPE,
                            "Subtraction, the `-` operator, with a bool tensor is not supported. "
                            "If you are trying to invert a mask, use the `~` or `logical_not()` "
                            "operator instead (tcuda: tc_tensor_eq with a zero tensor)");
        if (op == TC__OP_NEG && ct == TC_BOOL)
            return tc__fail(TC_ERROR_DTYPE,
                            "Negation, the `-` operator, on a bool tensor is not supported. If "
                            "you are trying to invert a mask, use the `~` or `logical_not()` "
                            "operator instead (tcuda: tc_tensor_eq with a zero tensor)");
        if (ct == TC_BOOL && (op == TC__OP_ABS || op == TC__OP_POW || op == TC__OP_RELU))
            return tc__fail(TC_ERROR_DTYPE,
                            "%s: not defined for bool tensors (use a logical "
                            "operation or convert the dtype first)",
                            fn);
        if (!fl && (op == TC__OP_DIV || op == TC__OP_EXP || op == TC__OP_LOG || op == TC__OP_SQRT ||
                    op == TC__OP_SIGMOID || op == TC__OP_TANH))
            ct = TC_FLOAT32; /* integer inputs give the default float dtype */
    }
    tc_dtype out_dtype = !is_where && is_comparison(op) ? TC_BOOL : ct;
    int ndim = 0;
    int64_t sizes[TC_MAX_DIMS] = {0};
    TC_TRY(tc__broadcast_shapes(fn, n, in, &ndim, sizes));
    const tc__backend *be = tc__backend_of(in[0]->storage->device);
    if (!be)
        return TC_ERROR_NO_DEVICE;

    tc_tensor *conv[3] = {NULL, NULL, NULL}, *res = NULL;
    tc_status st = TC_OK;
    for (int i = 0; i < n && st == TC_OK; i++)
        st = tc__as_dtype(in[i], is_where && i == 0 ? TC_BOOL : ct, &conv[i]);
    if (st == TC_OK)
        st = tc__new_tensor(ndim, sizes, out_dtype, in[0]->storage->device, false, &res);
    if (st == TC_OK && tc__numel(ndim, sizes) > 0) {
        tc__iter it;
        tc__iter_init(&it, ndim, sizes, n + 1);
        tc__iter_set(&it, 0, res);
        for (int i = 0; i < n; i++)
            tc__iter_set(&it, i + 1, conv[i]);
        tc__iter_coalesce(&it);
        int dev = in[0]->storage->device.index;
        if (is_where)
            st = be->where(dev, ct, &it);
        else if (n == 1)
            st = be->unary(dev, op, ct, &it);
        else
            st = be->binary(dev, op, ct, &it);
    }
    for (int i = 0; i < n; i++)
        tc_tensor_release(conv[i]);
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}

#define BINARY(name, OP)                                                                           \
    tc_status tc_tensor_##name(const tc_tensor *a, const tc_tensor *b, tc_tensor **out)            \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        const tc_tensor *in[2] = {a, b};                                                           \
        return elementwise(OP, false, 2, in, out);                                                 \
    }
#define UNARY(name, OP)                                                                            \
    tc_status tc_tensor_##name(const tc_tensor *a, tc_tensor **out)                                \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        const tc_tensor *in[1] = {a};                                                              \
        return elementwise(OP, false, 1, in, out);                                                 \
    }
BINARY(add, TC__OP_ADD)
BINARY(sub, TC__OP_SUB)
BINARY(mul, TC__OP_MUL)
BINARY(div, TC__OP_DIV)
BINARY(pow, TC__OP_POW)
BINARY(maximum, TC__OP_MAXIMUM)
BINARY(minimum, TC__OP_MINIMUM)
BINARY(eq, TC__OP_EQ)
BINARY(ne, TC__OP_NE)
BINARY(lt, TC__OP_LT)
BINARY(le, TC__OP_LE)
BINARY(gt, TC__OP_GT)
BINARY(ge, TC__OP_GE)
UNARY(neg, TC__OP_NEG)
UNARY(abs, TC__OP_ABS)
UNARY(exp, TC__OP_EXP)
UNARY(log, TC__OP_LOG)
UNARY(sqrt, TC__OP_SQRT)
UNARY(relu, TC__OP_RELU)
UNARY(sigmoid, TC__OP_SIGMOID)
UNARY(tanh, TC__OP_TANH)

tc_status tc_tensor_where(const tc_tensor *cond, const tc_tensor *a, const tc_tensor *b,
                          tc_tensor **out)
{
    TC_API_BEGIN;
    const tc_tensor *in[3] = {cond, a, b};
    return elementwise(TC__OP_ADD, true, 3, in, out);
}

/* ---- reductions ------------------------------------------------------------------ */

static tc_status reduce(tc__op op, const tc_tensor *a, int dim, bool keepdim, tc_tensor **out)
{
    const char *fn = fn_name(op);
    TC_TRY(tc__tensor_check(a, "tc_tensor a"));
    TC_CHECK_ARG(out, "out is NULL");
    bool all = dim == TC_ALL_DIMS;
    int d = 0;
    if (!all) {
        int n = a->ndim ? a->ndim : 1;
        d = dim < 0 ? dim + n : dim;
        TC_CHECK_ARG(d >= 0 && d < n, "%s: dimension %d out of range for a %d-d tensor", fn, dim,
                     a->ndim);
    }
    tc_dtype in_t = a->dtype, out_t = a->dtype;
    if (op == TC__RED_MEAN && !tc_dtype_is_floating(in_t))
        return tc__fail(TC_ERROR_DTYPE,
                        "%s: needs a floating dtype, not %s (convert with "
                        "tc_tensor_to first)",
                        fn, tc_dtype_name(in_t));
    if (op == TC__RED_ARGMAX || (op == TC__RED_SUM && !tc_dtype_is_floating(in_t)))
        out_t = TC_INT64;
    int64_t outer = 1, r = 1, inner = 1;
    int ondim = 0;
    int64_t osizes[TC_MAX_DIMS];
    if (all || a->ndim == 0) {
        r = tc__numel(a->ndim, a->sizes);
        if (keepdim)
            for (ondim = 0; ondim < a->ndim; ondim++)
                osizes[ondim] = 1;
    } else {
        for (int i = 0; i < a->ndim; i++) {
            if (i < d)
                outer *= a->sizes[i];
            else if (i > d)
                inner *= a->sizes[i];
            if (i != d)
                osizes[ondim++] = a->sizes[i];
            else if (keepdim)
                osizes[ondim++] = 1;
        }
        r = a->sizes[d];
    }
    if (r == 0 && op != TC__RED_SUM && op != TC__RED_MEAN)
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: the reduction is over zero elements; %s of nothing "
                        "is not defined",
                        fn, fn + 10);
    const tc__backend *be = tc__backend_of(a->storage->device);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    tc_tensor *c = NULL, *res = NULL;
    TC_TRY(tc_tensor_contiguous(a, &c));
    tc_status st = tc__new_tensor(ondim, osizes, out_t, a->storage->device, false, &res);
    if (st == TC_OK && outer * inner > 0)
        st = be->reduce(a->storage->device.index, op, in_t, out_t, tc__data(c), tc__data(res),
                        outer, r, inner);
    tc_tensor_release(c);
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}

tc_status tc_tensor_sum(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out)
{
    TC_API_BEGIN;
    return reduce(TC__RED_SUM, a, dim, keepdim, out);
}
tc_status tc_tensor_mean(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out)
{
    TC_API_BEGIN;
    return reduce(TC__RED_MEAN, a, dim, keepdim, out);
}
tc_status tc_tensor_max(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out)
{
    TC_API_BEGIN;
    return reduce(TC__RED_MAX, a, dim, keepdim, out);
}
tc_status tc_tensor_min(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out)
{
    TC_API_BEGIN;
    return reduce(TC__RED_MIN, a, dim, keepdim, out);
}
tc_status tc_tensor_argmax(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out)
{
    TC_API_BEGIN;
    return reduce(TC__RED_ARGMAX, a, dim, keepdim, out);
}
