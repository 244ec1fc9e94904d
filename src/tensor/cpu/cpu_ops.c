/* The CPU backend: element-wise operations, conversions, fills and
 * reductions over strided operands.
 *
 * Values are computed in double for floating dtypes and in int64 (wrapping,
 * through unsigned arithmetic) for bool and integer dtypes, then stored in
 * the operand's dtype; this makes the CPU the precise side of the parity
 * tests. Operands are walked with an odometer over the iter's dimensions. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/half.h" /* float16 / bfloat16 conversions, shared with the kernels */
#include "tensor/float_ops.h"
#include "tensor/int_ops.h"
#include "tensor/tensor_internal.h"

/* ---- loads and stores ---------------------------------------------------------- */

static double load_f(const void *p, tc_dtype d)
{
    switch (d) {
    case TC_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    case TC_UINT8: return *(const uint8_t *)p;
    case TC_INT8: return *(const int8_t *)p;
    case TC_INT16: return *(const int16_t *)p;
    case TC_INT32: return *(const int32_t *)p;
    case TC_INT64: return (double)*(const int64_t *)p;
    case TC_FLOAT16: return tc__f16_to_f32(*(const uint16_t *)p);
    case TC_BFLOAT16: return tc__bf16_to_f32(*(const uint16_t *)p);
    case TC_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
    }
}

static int64_t f_to_i(double v)
{
    /* Out of range is undefined in C; give the value CUDA's cvt gives for NaN. */
    if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18))
        return INT64_MIN;
    return (int64_t)v;
}

static int64_t load_i(const void *p, tc_dtype d)
{
    switch (d) {
    case TC_BOOL: return *(const uint8_t *)p ? 1 : 0;
    case TC_UINT8: return *(const uint8_t *)p;
    case TC_INT8: return *(const int8_t *)p;
    case TC_INT16: return *(const int16_t *)p;
    case TC_INT32: return *(const int32_t *)p;
    case TC_INT64: return *(const int64_t *)p;
    default: return f_to_i(load_f(p, d));
    }
}

static void store_i(void *p, tc_dtype d, int64_t v)
{
    switch (d) {
    case TC_BOOL: *(uint8_t *)p = v != 0; break;
    case TC_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case TC_INT8: *(int8_t *)p = (int8_t)v; break;
    case TC_INT16: *(int16_t *)p = (int16_t)v; break;
    case TC_INT32: *(int32_t *)p = (int32_t)v; break;
    case TC_INT64: *(int64_t *)p = v; break;
    case TC_FLOAT16: *(uint16_t *)p = tc__f32_to_f16((float)v); break;
    case TC_BFLOAT16: *(uint16_t *)p = tc__f32_to_bf16((float)v); break;
    case TC_FLOAT32: *(float *)p = (float)v; break;
    default: *(double *)p = (double)v; break;
    }
}

static void store_f(void *p, tc_dtype d, double v)
{
    switch (d) {
    case TC_BOOL: *(uint8_t *)p = v != 0; break;
    case TC_FLOAT16: *(uint16_t *)p = tc__f32_to_f16((float)v); break;
    case TC_BFLOAT16: *(uint16_t *)p = tc__f32_to_bf16((float)v); break;
    case TC_FLOAT32: *(float *)p = (float)v; break;
    case TC_FLOAT64: *(double *)p = v; break;
    default: store_i(p, d, f_to_i(v)); break;
    }
}

/* ---- the odometer ------------------------------------------------------------------ */

typedef struct walker {
    const tc__iter *it;
    int64_t idx[TC_MAX_DIMS];
    char *p[TC__MAX_OPERANDS];
    size_t esize[TC__MAX_OPERANDS];
} walker;

static void walk_init(walker *w, const tc__iter *it, const tc_dtype *dtypes)
{
    memset(w, 0, sizeof *w);
    w->it = it;
    for (int i = 0; i < it->nops; i++) {
        w->p[i] = it->data[i];
        w->esize[i] = tc_dtype_size(dtypes[i]);
    }
}

/* Steps every operand to the next element in row-major order.
 *
 * Do not "optimize" this by precomputing byte steps and spans per operand and
 * dimension in walk_init (walker.step[i][d] = strides * esize, span = step *
 * size) and only adding them here. That was done once (b496fd4), and GCC
 * 12.2 at -O2 (Debian 12.2.0-14; RelWithDebInfo) then miscompiled cpu_where:
 * strided where() wrote wrong values (test_tensor_cpu's test_where_values and
 * test_where_strided fail with it). -fno-ipa-modref or -fno-strict-aliasing
 * made it go away, and ASan+UBSan found no undefined behaviour, so it is taken
 * to be GCC's IPA mod-ref analysis; it was reverted in d8c125d. The multiply
 * per element costs nothing measurable next to the loads and stores of the
 * conversion switch. If you change the walker, run test_tensor_cpu built
 * with GCC 12 at -O2. */
static void walk_next(walker *w)
{
    const tc__iter *it = w->it;
    for (int d = it->ndim - 1; d >= 0; d--) {
        for (int i = 0; i < it->nops; i++)
            w->p[i] += it->strides[i][d] * (int64_t)w->esize[i];
        if (++w->idx[d] < it->sizes[d])
            return;
        for (int i = 0; i < it->nops; i++)
            w->p[i] -= it->strides[i][d] * it->sizes[d] * (int64_t)w->esize[i];
        w->idx[d] = 0;
    }
}

/* ---- element-wise (binary formulas: tensor/int_ops.h, tensor/float_ops.h) ---------- */

/* The constants of gelu, as PyTorch writes them (M_SQRT1_2; M_SQRT2 *
 * M_2_SQRTPI * 0.5), spelled out: strict C11 has no M_ constants. */
#define TC__SQRT1_2 0.70710678118654752440
#define TC__SQRT_2_PI 0.79788456080286535588

static double funary(tc__op op, double x)
{
    switch (op) {
    case TC__OP_NEG: return -x;
    case TC__OP_ABS: return fabs(x);
    case TC__OP_EXP: return exp(x);
    case TC__OP_LOG: return log(x);
    case TC__OP_SQRT: return sqrt(x);
    case TC__OP_RELU: return x > 0 || isnan(x) ? x : 0.0;
    case TC__OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case TC__OP_RSQRT: return 1.0 / sqrt(x);
    case TC__OP_SIN: return sin(x);
    case TC__OP_COS: return cos(x);
    case TC__OP_ERF: return erf(x);
    case TC__OP_FLOOR: return floor(x);
    case TC__OP_CEIL: return ceil(x);
    case TC__OP_ROUND: return nearbyint(x); /* the default mode: half to even */
    case TC__OP_GELU: return 0.5 * x * (1.0 + erf(x * TC__SQRT1_2));
    case TC__OP_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(TC__SQRT_2_PI * (x + 0.044715 * x * x * x)));
    case TC__OP_SILU: return x / (1.0 + exp(-x));
    default: return tanh(x);
    }
}

static tc_status cpu_unary(int device, tc__op op, tc_dtype dt, const tc__iter *it)
{
    tc_dtype dts[2] = {dt, dt};
    walker w;
    walk_init(&w, it, dts);
    bool fl = tc_dtype_is_floating(dt);
    for (int64_t n = 0; n < it->numel; n++, walk_next(&w)) {
        if (fl)
            store_f(w.p[0], dt, funary(op, load_f(w.p[1], dt)));
        else
            store_i(w.p[0], dt, tc__iunary((int)op, load_i(w.p[1], dt)));
    }
    return TC_OK;
}

static tc_status cpu_binary(int device, tc__op op, tc_dtype dt, const tc__iter *it)
{
    tc_dtype od = op >= TC__OP_EQ && op <= TC__OP_GE ? TC_BOOL : dt;
    tc_dtype dts[3] = {od, dt, dt};
    walker w;
    walk_init(&w, it, dts);
    bool fl = tc_dtype_is_floating(dt);
    for (int64_t n = 0; n < it->numel; n++, walk_next(&w)) {
        if (fl)
            store_f(w.p[0], od, tc__fbinary((int)op, load_f(w.p[1], dt), load_f(w.p[2], dt)));
        else
            store_i(w.p[0], od, tc__ibinary((int)op, load_i(w.p[1], dt), load_i(w.p[2], dt)));
    }
    return TC_OK;
}

static tc_status cpu_where(int device, tc_dtype dt, const tc__iter *it)
{
    tc_dtype dts[4] = {dt, TC_BOOL, dt, dt};
    walker w;
    walk_init(&w, it, dts);
    size_t es = tc_dtype_size(dt);
    for (int64_t n = 0; n < it->numel; n++, walk_next(&w))
        memcpy(w.p[0], *(const uint8_t *)w.p[1] ? w.p[2] : w.p[3], es);
    return TC_OK;
}

static tc_status cpu_convert(int device, tc_dtype dst, tc_dtype src, const tc__iter *it)
{
    tc_dtype dts[2] = {dst, src};
    if (dst == src && it->contiguous) {
        memmove(it->data[0], it->data[1], (size_t)it->numel * tc_dtype_size(dst));
        return TC_OK;
    }
    walker w;
    walk_init(&w, it, dts);
    bool fl = tc_dtype_is_floating(dst) || tc_dtype_is_floating(src);
    size_t es = tc_dtype_size(dst);
    for (int64_t n = 0; n < it->numel; n++, walk_next(&w)) {
        if (dst == src)
            memcpy(w.p[0], w.p[1], es);
        else if (fl)
            store_f(w.p[0], dst, load_f(w.p[1], src));
        else
            store_i(w.p[0], dst, load_i(w.p[1], src));
    }
    return TC_OK;
}

static tc_status cpu_fill(int device, tc_dtype dt, void *out, int64_t n, tc__fill v)
{
    size_t es = tc_dtype_size(dt);
    char *p = out;
    bool fl = tc_dtype_is_floating(dt);
    if (v.step == 0) {
        if (fl || dt == TC_BOOL)
            store_f(p, dt, v.start);
        else
            store_i(p, dt, v.istart);
        for (int64_t i = 1; i < n; i++)
            memcpy(p + i * es, p, es);
        return TC_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        if (fl)
            store_f(p + i * es, dt, v.start + (double)i * v.step);
        else
            store_i(p + i * es, dt, f_to_i(v.start + (double)i * v.step));
    }
    return TC_OK;
}

/* ---- reductions ------------------------------------------------------------------ */

/* One reduced line (r elements `step` bytes apart) of floating values. */
static void reduce_line_f(tc__op op, tc_dtype it, const char *p, int64_t r, int64_t step,
                          double *acc, int64_t *best)
{
    bool lo = op == TC__RED_MIN || op == TC__RED_ARGMIN;
    double a = op == TC__RED_PROD ? 1.0 : 0.0;
    int64_t b = 0;
    for (int64_t j = 0; j < r; j++, p += step) {
        double x = load_f(p, it);
        if (op == TC__RED_SUM || op == TC__RED_MEAN)
            a += x;
        else if (op == TC__RED_PROD)
            a *= x;
        else if (j == 0 || (!isnan(a) && (isnan(x) || (lo ? x < a : x > a)))) {
            a = x; /* the first extreme; the first NaN stays */
            b = j;
        }
    }
    *acc = a;
    *best = b;
}

/* The same for bool and integers, wrapping as int64. */
static void reduce_line_i(tc__op op, tc_dtype it, const char *p, int64_t r, int64_t step,
                          int64_t *acc, int64_t *best)
{
    bool lo = op == TC__RED_MIN || op == TC__RED_ARGMIN;
    uint64_t a = op == TC__RED_PROD ? 1 : 0;
    int64_t b = 0;
    for (int64_t j = 0; j < r; j++, p += step) {
        int64_t x = load_i(p, it);
        if (op == TC__RED_SUM)
            a += (uint64_t)x;
        else if (op == TC__RED_PROD)
            a *= (uint64_t)x;
        else if (j == 0 || (lo ? x < (int64_t)a : x > (int64_t)a)) {
            a = (uint64_t)x;
            b = j;
        }
    }
    *acc = (int64_t)a;
    *best = b;
}

static tc_status cpu_reduce(int device, tc__op op, tc_dtype it, tc_dtype ot, const void *in,
                            void *out, int64_t outer, int64_t r, int64_t inner)
{
    size_t ies = tc_dtype_size(it), oes = tc_dtype_size(ot);
    bool fl = tc_dtype_is_floating(it);
    bool index = op == TC__RED_ARGMAX || op == TC__RED_ARGMIN;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t k = 0; k < inner; k++) {
            const char *base = (const char *)in + (o * r * inner + k) * (int64_t)ies;
            char *dst = (char *)out + (o * inner + k) * (int64_t)oes;
            int64_t step = inner * (int64_t)ies, best = 0, iacc = 0;
            double facc = 0;
            if (fl)
                reduce_line_f(op, it, base, r, step, &facc, &best);
            else
                reduce_line_i(op, it, base, r, step, &iacc, &best);
            if (index)
                store_i(dst, TC_INT64, best);
            else if (op == TC__RED_MEAN)
                store_f(dst, ot, facc / (double)r);
            else if (fl)
                store_f(dst, ot, facc);
            else
                store_i(dst, ot, iacc);
        }
    }
    return TC_OK;
}

/* ---- scans ---------------------------------------------------------------------- */

static tc_status cpu_scan(int device, tc__op op, tc_dtype dt, const void *in, void *out,
                          int64_t outer, int64_t r, int64_t inner)
{
    (void)op; /* TC__SCAN_CUMSUM */
    int64_t es = (int64_t)tc_dtype_size(dt), step = inner * es;
    bool fl = tc_dtype_is_floating(dt);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            int64_t at = (o * r * inner + k) * es;
            const char *p = (const char *)in + at;
            char *q = (char *)out + at;
            double facc = 0;
            uint64_t iacc = 0;
            for (int64_t j = 0; j < r; j++, p += step, q += step) {
                if (fl) {
                    facc += load_f(p, dt);
                    store_f(q, dt, facc);
                } else {
                    iacc += (uint64_t)load_i(p, dt);
                    store_i(q, dt, (int64_t)iacc);
                }
            }
        }
    return TC_OK;
}

const tc__backend tc__cpu_backend = {
    .unary = cpu_unary,
    .binary = cpu_binary,
    .where = cpu_where,
    .convert = cpu_convert,
    .fill = cpu_fill,
    .reduce = cpu_reduce,
    .matmul = tc__cpu_matmul,
    .scan = cpu_scan,
};
