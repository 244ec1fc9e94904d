/* Element-wise operations: the device-independent half (reductions are in
 * tensor_reduce.c).
 *
 * Here live type promotion, broadcasting, dtype checks and the output
 * allocation; the backend table of the tensor's device does the arithmetic on
 * operands that all have the computation dtype already (inputs of another
 * dtype are converted into a temporary first). Operations PyTorch defines
 * through others are written that way here too, so that every backend runs
 * them with the kernels it has: clamp is maximum then minimum, masked_fill a
 * where, the logical operations comparisons or arithmetic on bool. In-place
 * forms write into self directly when the result has self's dtype and other
 * cannot overlap self, else through a temporary. */
#include <math.h>
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
        *out = tc__tensor_ref((tc_tensor *)t);
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

/* Public names, for messages. */
static const char *fn_name(tc__op op)
{
    static const char *const names[] = {
        [TC__OP_ADD] = "tc_tensor_add",         [TC__OP_SUB] = "tc_tensor_sub",
        [TC__OP_MUL] = "tc_tensor_mul",         [TC__OP_DIV] = "tc_tensor_div",
        [TC__OP_POW] = "tc_tensor_pow",         [TC__OP_MAXIMUM] = "tc_tensor_maximum",
        [TC__OP_MINIMUM] = "tc_tensor_minimum", [TC__OP_REMAINDER] = "tc_tensor_remainder",
        [TC__OP_EQ] = "tc_tensor_eq",           [TC__OP_NE] = "tc_tensor_ne",
        [TC__OP_LT] = "tc_tensor_lt",           [TC__OP_LE] = "tc_tensor_le",
        [TC__OP_GT] = "tc_tensor_gt",           [TC__OP_GE] = "tc_tensor_ge",
        [TC__OP_NEG] = "tc_tensor_neg",         [TC__OP_ABS] = "tc_tensor_abs",
        [TC__OP_EXP] = "tc_tensor_exp",         [TC__OP_LOG] = "tc_tensor_log",
        [TC__OP_SQRT] = "tc_tensor_sqrt",       [TC__OP_RELU] = "tc_tensor_relu",
        [TC__OP_SIGMOID] = "tc_tensor_sigmoid", [TC__OP_TANH] = "tc_tensor_tanh",
        [TC__OP_RSQRT] = "tc_tensor_rsqrt",     [TC__OP_SIN] = "tc_tensor_sin",
        [TC__OP_COS] = "tc_tensor_cos",         [TC__OP_ERF] = "tc_tensor_erf",
        [TC__OP_FLOOR] = "tc_tensor_floor",     [TC__OP_CEIL] = "tc_tensor_ceil",
        [TC__OP_ROUND] = "tc_tensor_round",     [TC__OP_GELU] = "tc_tensor_gelu",
        [TC__OP_GELU_TANH] = "tc_tensor_gelu",  [TC__OP_SILU] = "tc_tensor_silu",
    };
    return names[op];
}

static bool is_comparison(tc__op op) { return op >= TC__OP_EQ && op <= TC__OP_GE; }

/* Math functions: integer and bool inputs give the default float dtype. */
static bool float_math(tc__op op)
{
    switch (op) {
    case TC__OP_DIV:
    case TC__OP_EXP:
    case TC__OP_LOG:
    case TC__OP_SQRT:
    case TC__OP_SIGMOID:
    case TC__OP_TANH:
    case TC__OP_RSQRT:
    case TC__OP_SIN:
    case TC__OP_COS:
    case TC__OP_ERF: return true;
    default: return false;
    }
}

/* The computation dtype of an op over its inputs (where: the value inputs),
 * with PyTorch's refusals. */
static tc_status compute_dtype(const char *fn, tc__op op, bool is_where, int n,
                               const tc_tensor *const *in, tc_dtype *ct_out)
{
    const tc_tensor *const *vals = is_where ? in + 1 : in;
    if (is_where && in[0]->dtype != TC_BOOL)
        return tc__fail(TC_ERROR_DTYPE, "%s: the condition must be bool, not %s", fn,
                        tc_dtype_string(in[0]->dtype));
    tc_dtype ct = tc__result_type(is_where ? 2 : n, vals);
    *ct_out = ct;
    if (is_where)
        return TC_OK;
    /* As PyTorch: either operand bool, whatever the result type. */
    if (op == TC__OP_SUB && (in[0]->dtype == TC_BOOL || in[1]->dtype == TC_BOOL))
        return tc__fail(TC_ERROR_DTYPE,
                        "Subtraction, the `-` operator, with a bool tensor is not supported. "
                        "If you are trying to invert a mask, use the `~` or `logical_not()` "
                        "operator instead (tcuda: tc_tensor_logical_not)");
    if (op == TC__OP_NEG && ct == TC_BOOL)
        return tc__fail(TC_ERROR_DTYPE,
                        "Negation, the `-` operator, on a bool tensor is not supported. If "
                        "you are trying to invert a mask, use the `~` or `logical_not()` "
                        "operator instead (tcuda: tc_tensor_logical_not)");
    if (ct == TC_BOOL &&
        (op == TC__OP_ABS || op == TC__OP_POW || op == TC__OP_RELU || op == TC__OP_REMAINDER ||
         op == TC__OP_FLOOR || op == TC__OP_CEIL || op == TC__OP_ROUND))
        return tc__fail(TC_ERROR_DTYPE,
                        "%s: not defined for bool tensors (use a logical "
                        "operation or convert the dtype first)",
                        fn);
    bool fl = tc_dtype_is_floating(ct);
    if (!fl && (op == TC__OP_GELU || op == TC__OP_GELU_TANH || op == TC__OP_SILU))
        return tc__fail(TC_ERROR_DTYPE,
                        "%s: needs a floating tensor, not %s (convert with tc_tensor_to first)", fn,
                        tc_dtype_string(ct));
    if (!fl && float_math(op))
        *ct_out = TC_FLOAT32; /* integer inputs give the default float dtype */
    return TC_OK;
}

/* Runs op over the inputs (converted to `ct`) into res, whose sizes are the
 * broadcast sizes; res may be an input itself (in place). */
static tc_status run(tc__op op, bool is_where, int n, const tc_tensor *const *in, tc_dtype ct,
                     tc_tensor *res)
{
    const tc__backend *be = tc__backend_of(res->storage->device);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    if (tc__numel(res->ndim, res->sizes) == 0)
        return TC_OK;
    tc_tensor *conv[3] = {NULL, NULL, NULL};
    tc_status st = TC_OK;
    for (int i = 0; i < n && st == TC_OK; i++)
        st = tc__as_dtype(in[i], is_where && i == 0 ? TC_BOOL : ct, &conv[i]);
    if (st == TC_OK) {
        tc__iter it;
        tc__iter_init(&it, res->ndim, res->sizes, n + 1);
        tc__iter_set(&it, 0, res);
        for (int i = 0; i < n; i++)
            tc__iter_set(&it, i + 1, conv[i]);
        tc__iter_coalesce(&it);
        int dev = res->storage->device.index;
        if (is_where)
            st = be->where(dev, ct, &it);
        else if (n == 1)
            st = be->unary(dev, op, ct, &it);
        else
            st = be->binary(dev, op, ct, &it);
    }
    for (int i = 0; i < n; i++)
        tc_tensor_release(conv[i]);
    return st;
}

/* Checks the inputs and out (names: "tc_tensor a", ...) and their devices. */
static tc_status check_inputs(const char *fn, int n, const tc_tensor *const *in,
                              const char *const *names)
{
    for (int i = 0; i < n; i++)
        TC_TRY(tc__tensor_check(in[i], names[i]));
    for (int i = 1; i < n; i++)
        TC_TRY(tc__check_same_device(fn, in[0], in[i]));
    return TC_OK;
}

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
    TC_TRY(check_inputs(fn, n, in, names[n - 1]));
    tc_dtype ct;
    TC_TRY(compute_dtype(fn, op, is_where, n, in, &ct));
    tc_dtype out_dtype = !is_where && is_comparison(op) ? TC_BOOL : ct;
    int ndim = 0;
    int64_t sizes[TC_MAX_DIMS] = {0};
    TC_TRY(tc__broadcast_shapes(fn, n, in, &ndim, sizes));
    if (!tc__backend_of(in[0]->storage->device))
        return TC_ERROR_NO_DEVICE;
    tc_tensor *res = NULL;
    TC_TRY(tc__new_tensor(ndim, sizes, out_dtype, in[0]->storage->device, false, &res));
    tc_status st = run(op, is_where, n, in, ct, res);
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
BINARY(remainder, TC__OP_REMAINDER)
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
UNARY(rsqrt, TC__OP_RSQRT)
UNARY(sin, TC__OP_SIN)
UNARY(cos, TC__OP_COS)
UNARY(erf, TC__OP_ERF)
UNARY(floor, TC__OP_FLOOR)
UNARY(ceil, TC__OP_CEIL)
UNARY(round, TC__OP_ROUND)
UNARY(silu, TC__OP_SILU)

tc_status tc_tensor_gelu(const tc_tensor *a, tc_gelu_approximate approximate, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(approximate == TC_GELU_APPROXIMATE_NONE || approximate == TC_GELU_APPROXIMATE_TANH,
                 "approximate %d is neither TC_GELU_APPROXIMATE_NONE nor TC_GELU_APPROXIMATE_TANH",
                 (int)approximate);
    const tc_tensor *in[1] = {a};
    return elementwise(approximate == TC_GELU_APPROXIMATE_TANH ? TC__OP_GELU_TANH : TC__OP_GELU,
                       false, 1, in, out);
}

tc_status tc_tensor_where(const tc_tensor *cond, const tc_tensor *a, const tc_tensor *b,
                          tc_tensor **out)
{
    TC_API_BEGIN;
    const tc_tensor *in[3] = {cond, a, b};
    return elementwise(TC__OP_ADD, true, 3, in, out);
}

/* ---- operations made of others ------------------------------------------------------ */

/* A 0-d tensor holding v in dtype on t's device (v checked as tc_tensor_full
 * checks it). */
static tc_status scalar_like(const tc_tensor *t, double v, tc_dtype dtype, tc_tensor **out)
{
    return tc_tensor_full(0, NULL, v, dtype, t->storage->device, out);
}

/* A bound is a Python int when it is a whole number int64 holds. */
static bool whole(double v) { return v == floor(v) && v >= -0x1p63 && v < 0x1p63; }

tc_status tc_tensor_clamp(const tc_tensor *a, const double *min, const double *max, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(a, "tc_tensor a"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(min || max, "min and max are both NULL");
    /* torch.result_type(a, bound) with the bounds as Python numbers */
    tc_dtype ct = a->dtype;
    if (!tc_dtype_is_floating(ct)) {
        if ((min && !whole(*min)) || (max && !whole(*max)))
            ct = TC_FLOAT32;
        else if (ct == TC_BOOL)
            ct = TC_INT64;
    }
    tc_tensor *lo = NULL, *hi = NULL, *t = NULL, *res = NULL;
    tc_status st = TC_OK;
    if (min)
        st = scalar_like(a, *min, ct, &lo);
    if (st == TC_OK && max)
        st = scalar_like(a, *max, ct, &hi);
    /* maximum and minimum propagate NaN, of a and of the bounds alike */
    if (st == TC_OK)
        st = lo ? tc_tensor_maximum(a, lo, &t) : tc__as_dtype(a, ct, &t);
    if (st == TC_OK)
        st = hi ? tc_tensor_minimum(t, hi, &res) : (res = tc__tensor_ref(t), TC_OK);
    tc_tensor_release(lo), tc_tensor_release(hi), tc_tensor_release(t);
    if (st != TC_OK)
        return st;
    *out = res;
    return TC_OK;
}

/* The logical operations: operands as bool (non-zero and NaN are true). */
static tc_status logical(tc__op op, const tc_tensor *a, const tc_tensor *b, tc_tensor **out)
{
    const tc_tensor *in[2] = {a, b};
    static const char *const names[2] = {"tc_tensor a", "tc_tensor b"};
    for (int i = 0; i < 2; i++)
        TC_TRY(tc__tensor_check(in[i], names[i]));
    TC_CHECK_ARG(out, "out is NULL");
    tc_tensor *ab = NULL, *bb = NULL;
    tc_status st = tc__as_dtype(a, TC_BOOL, &ab);
    if (st == TC_OK)
        st = tc__as_dtype(b, TC_BOOL, &bb);
    /* on 0 and 1, and is mul and or is maximum */
    if (st == TC_OK)
        st = op == TC__OP_MUL ? tc_tensor_mul(ab, bb, out) : tc_tensor_maximum(ab, bb, out);
    tc_tensor_release(ab), tc_tensor_release(bb);
    return st;
}

tc_status tc_tensor_logical_and(const tc_tensor *a, const tc_tensor *b, tc_tensor **out)
{
    TC_API_BEGIN;
    return logical(TC__OP_MUL, a, b, out);
}

tc_status tc_tensor_logical_or(const tc_tensor *a, const tc_tensor *b, tc_tensor **out)
{
    TC_API_BEGIN;
    return logical(TC__OP_MAXIMUM, a, b, out);
}

tc_status tc_tensor_logical_not(const tc_tensor *a, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(a, "tc_tensor a"));
    TC_CHECK_ARG(out, "out is NULL");
    tc_tensor *zero;
    TC_TRY(scalar_like(a, 0, a->dtype, &zero));
    tc_status st = tc_tensor_eq(a, zero, out); /* NaN == 0 is false: not NaN is false */
    tc_tensor_release(zero);
    return st;
}

tc_status tc_tensor_masked_fill(const tc_tensor *a, const tc_tensor *mask, double value,
                                tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(a, "tc_tensor a"));
    TC_TRY(tc__tensor_check(mask, "tc_tensor mask"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__check_same_device("tc_tensor_masked_fill", a, mask));
    if (mask->dtype != TC_BOOL)
        return tc__fail(TC_ERROR_DTYPE,
                        "masked_fill only supports boolean masks, but got mask "
                        "with dtype %s",
                        tc_dtype_string(mask->dtype));
    tc_tensor *v;
    TC_TRY(scalar_like(a, value, a->dtype, &v));
    tc_status st = tc_tensor_where(mask, v, a, out); /* a 0-d v of a's dtype: a's dtype */
    tc_tensor_release(v);
    return st;
}

/* ---- in place ------------------------------------------------------------------------- */

/* other may be read while self is written element by element when it is
 * elsewhere, or is self itself. */
static bool may_alias(const tc_tensor *self, const tc_tensor *other)
{
    if (self->storage != other->storage)
        return false;
    return !(self->offset == other->offset && self->dtype == other->dtype &&
             self->ndim == other->ndim &&
             memcmp(self->sizes, other->sizes, sizeof(int64_t) * (size_t)self->ndim) == 0 &&
             memcmp(self->strides, other->strides, sizeof(int64_t) * (size_t)self->ndim) == 0);
}

static tc_status inplace(const char *fn, tc__op op, tc_tensor *self, const tc_tensor *other)
{
    static const char *const names[2] = {"tc_tensor self", "tc_tensor other"};
    const tc_tensor *in[2] = {self, other};
    TC_TRY(check_inputs(fn, 2, in, names));
    int ndim = 0;
    int64_t sizes[TC_MAX_DIMS] = {0};
    TC_TRY(tc__broadcast_shapes(fn, 2, in, &ndim, sizes));
    if (ndim != self->ndim || memcmp(sizes, self->sizes, sizeof(int64_t) * (size_t)ndim) != 0)
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: output with %d dimensions (%lld elements) doesn't match the "
                        "broadcast shape (%d dimensions, %lld elements): self cannot grow",
                        fn, self->ndim, (long long)tc__numel(self->ndim, self->sizes), ndim,
                        (long long)tc__numel(ndim, sizes));
    TC_TRY(tc__check_writable(self));
    tc_dtype ct;
    TC_TRY(compute_dtype(fn, op, false, 2, in, &ct));
    if (category(ct) > category(self->dtype))
        return tc__fail(TC_ERROR_DTYPE,
                        "result type %s can't be cast to the desired output type %s",
                        tc_dtype_string(ct), tc_dtype_string(self->dtype));
    if (!tc__backend_of(self->storage->device))
        return TC_ERROR_NO_DEVICE;
    if (ct == self->dtype && !may_alias(self, other))
        return run(op, false, 2, in, ct, self);
    tc_tensor *res = NULL;
    tc_status st = tc__new_tensor(ndim, sizes, ct, self->storage->device, false, &res);
    if (st == TC_OK)
        st = run(op, false, 2, in, ct, res);
    if (st == TC_OK)
        st = tc__copy_local(self, res);
    tc_tensor_release(res);
    return st;
}

#define INPLACE(name, OP)                                                                          \
    tc_status tc_tensor_##name##_(tc_tensor *self, const tc_tensor *other)                         \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        return inplace("tc_tensor_" #name "_", OP, self, other);                                   \
    }
INPLACE(add, TC__OP_ADD)
INPLACE(sub, TC__OP_SUB)
INPLACE(mul, TC__OP_MUL)
INPLACE(div, TC__OP_DIV)

tc_status tc_tensor_fill_(tc_tensor *t, double value)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    tc_tensor *v;
    TC_TRY(scalar_like(t, value, t->dtype, &v));
    /* stride-0 views are fine: every write puts the same value (as PyTorch) */
    tc_status st = tc__copy_local(t, v);
    tc_tensor_release(v);
    return st;
}
