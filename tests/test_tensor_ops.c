/* Tensor ops on the CPU: element-wise math, clamp, remainder, the
 * logical ops, masked_fill, the in-place forms and fill_, and the
 * reductions prod, var/std, logsumexp, max/min with indices, any/all,
 * cumsum and norm. Values are checked against plain double-precision loops
 * written here, and against PyTorch's documented edge cases (NaN, half to
 * even, remainder signs, corrections past the count, empty reductions). */
#include <math.h>
#include <stdlib.h>

#include "tensor/tensor_internal.h"
#include "tc_test.h"

static const tc_device CPU = {TC_CPU, -1};
#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

/* A tensor of `dtype` from doubles. */
static tc_tensor *make(const double *v, int ndim, const int64_t *sizes, tc_dtype dtype)
{
    tc_tensor *d = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, ndim, sizes, TC_FLOAT64, CPU, &d));
    CHECK_OK(tc_tensor_to(d, CPU, dtype, false, &t));
    tc_tensor_release(d);
    return t;
}

/* A random tensor of `dtype` in [lo, hi) (integers floored); *vals gets the
 * values it holds (after rounding to dtype), row-major. */
static tc_tensor *rnd(int ndim, const int64_t *sizes, tc_dtype dtype, double lo, double hi,
                      double **vals)
{
    int64_t n = tc__numel(ndim, sizes);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        double x = lo + (hi - lo) * tc_test_rand_uniform();
        v[i] = dtype == TC_BOOL ? x > (lo + hi) / 2 : tc_dtype_is_floating(dtype) ? x : floor(x);
    }
    tc_tensor *t = make(v, ndim, sizes, dtype);
    CHECK_OK(tc_tensor_to_host(t, TC_FLOAT64, v));
    *vals = v;
    return t;
}

static double tol(tc_dtype d)
{
    switch (d) {
    case TC_FLOAT16: return 2e-3;
    case TC_BFLOAT16: return 1.6e-2;
    case TC_FLOAT32: return 2e-6;
    case TC_FLOAT64: return 1e-13;
    default: return 0;
    }
}

static bool close_to(double got, double want, double t)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (isinf(want) || t == 0)
        return got == want;
    return fabs(got - want) <= t * fmax(1.0, fabs(want));
}

/* t has `dtype`, n elements, each close to want[i]. */
static bool values_are(const tc_tensor *t, tc_dtype dtype, const double *want, int64_t n,
                       double scale, const char *what)
{
    if (!t || tc_tensor_dtype(t) != dtype || tc_tensor_numel(t) != n) {
        fprintf(stderr, "%s: dtype %s or count %lld wrong\n", what,
                t ? tc_dtype_string(tc_tensor_dtype(t)) : "(none)", (long long)tc_tensor_numel(t));
        return false;
    }
    double *got = tc_test_values(t);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++)
        if (!close_to(got[i], want[i], tol(dtype) * scale)) {
            fprintf(stderr, "%s: element %lld: got %.17g want %.17g (%s)\n", what, (long long)i,
                    got[i], want[i], tc_dtype_string(dtype));
            ok = false;
        }
    free(got);
    return ok;
}

/* ---- element-wise ------------------------------------------------------------------ */

static double r_rsqrt(double x) { return 1 / sqrt(x); }
static double r_gelu(double x) { return x * 0.5 * erfc(-x / sqrt(2.0)); }
static double r_gelu_tanh(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / acos(-1.0)) * (x + 0.044715 * pow(x, 3))));
}
static double r_silu(double x) { return x / (1 + exp(-x)); }
static double r_round(double x) /* half to even, by hand */
{
    double f = floor(x), d = x - f;
    if (d > 0.5 || (d == 0.5 && fmod(f, 2) != 0))
        return f + 1;
    return f;
}

typedef tc_status (*unary_fn)(const tc_tensor *, tc_tensor **);
static tc_status gelu_none(const tc_tensor *a, tc_tensor **o)
{
    return tc_tensor_gelu(a, TC_GELU_APPROXIMATE_NONE, o);
}
static tc_status gelu_tanh(const tc_tensor *a, tc_tensor **o)
{
    return tc_tensor_gelu(a, TC_GELU_APPROXIMATE_TANH, o);
}

static void test_unary_math(void)
{
    static const struct {
        const char *name;
        unary_fn fn;
        double (*ref)(double);
        bool float_only, rounding;
    } ops[] = {{"rsqrt", tc_tensor_rsqrt, r_rsqrt, false, false},
               {"sin", tc_tensor_sin, sin, false, false},
               {"cos", tc_tensor_cos, cos, false, false},
               {"erf", tc_tensor_erf, erf, false, false},
               {"floor", tc_tensor_floor, floor, false, true},
               {"ceil", tc_tensor_ceil, ceil, false, true},
               {"round", tc_tensor_round, r_round, false, true},
               {"gelu", gelu_none, r_gelu, true, false},
               {"gelu_tanh", gelu_tanh, r_gelu_tanh, true, false},
               {"silu", tc_tensor_silu, r_silu, true, false}};
    tc_dtype dts[] = {TC_FLOAT32, TC_FLOAT64, TC_FLOAT16, TC_BFLOAT16, TC_INT32, TC_BOOL};
    int64_t sz[2] = {7, 9};
    char what[96];
    for (int di = 0; di < COUNT(dts); di++) {
        tc_dtype dt = dts[di];
        bool fl = tc_dtype_is_floating(dt);
        double *v;
        tc_tensor *a = rnd(2, sz, dt, 0.05, 6, &v), *at = NULL;
        /* strided: the transpose, with the reference transposed too */
        CHECK_OK(tc_tensor_transpose(a, 0, 1, &at));
        for (int k = 0; k < COUNT(ops); k++) {
            tc_tensor *o = NULL;
            tc_status st = ops[k].fn(at, &o);
            snprintf(what, sizeof what, "%s %s", ops[k].name, tc_dtype_string(dt));
            if ((ops[k].float_only && !fl) || (ops[k].rounding && dt == TC_BOOL)) {
                CHECK(st == TC_ERROR_DTYPE && o == NULL);
                continue;
            }
            CHECK_OK(st);
            tc_dtype want_t = fl || ops[k].rounding ? dt : TC_FLOAT32;
            double want[63];
            for (int i = 0; i < 9; i++)
                for (int j = 0; j < 7; j++)
                    want[i * 7 + j] = ops[k].ref(v[j * 9 + i]);
            CHECK(values_are(o, want_t, want, 63, 1, what));
            tc_tensor_release(o);
        }
        tc_tensor_release(at), tc_tensor_release(a);
        free(v);
    }
    /* a few values PyTorch prints */
    double x[4] = {1, -1, 0.5, -3};
    int64_t n = 4;
    tc_tensor *a = make(x, 1, &n, TC_FLOAT64), *o = NULL;
    CHECK_OK(tc_tensor_gelu(a, TC_GELU_APPROXIMATE_NONE, &o));
    double g[4] = {0.8413447460685429, -0.15865525393145707, 0.34573123063700656,
                   -0.00404969409489031},
           gt[1] = {0.8411919906082768}, si[1] = {0.7310585786300049};
    CHECK(values_are(o, TC_FLOAT64, g, 4, 1e3, "gelu(1, -1, 0.5, -3)"));
    tc_tensor_release(o);
    CHECK_OK(tc_tensor_gelu(a, TC_GELU_APPROXIMATE_TANH, &o));
    double *ov = tc_test_values(o);
    CHECK(fabs(ov[0] - gt[0]) < 1e-15);
    free(ov), tc_tensor_release(o);
    CHECK_OK(tc_tensor_silu(a, &o));
    ov = tc_test_values(o);
    CHECK(fabs(ov[0] - si[0]) < 1e-15);
    free(ov), tc_tensor_release(o);
    CHECK_STATUS(tc_tensor_gelu(a, (tc_gelu_approximate)7, &o), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(a);
}

static void test_rounding(void)
{
    double x[10] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, 2.6, -2.6, -0.0};
    double rd[10] = {0, 2, 2, -0.0, -2, -2, 0, 3, -3, -0.0};
    double fl[10] = {0, 1, 2, -1, -2, -3, 0, 2, -3, -0.0};
    double ce[10] = {1, 2, 3, -0.0, -1, -2, 1, 3, -2, -0.0};
    int64_t n = 10;
    tc_dtype dts[] = {TC_FLOAT64, TC_FLOAT32, TC_FLOAT16, TC_BFLOAT16};
    for (int di = 0; di < COUNT(dts); di++) {
        tc_dtype dt = dts[di];
        /* 0.49999999999999994 is 0.5 in the narrower dtypes, 2.6 is 2.59375 in
     * bfloat16: the same results */
        tc_tensor *a = make(x, 1, &n, dt), *o = NULL;
        CHECK_OK(tc_tensor_round(a, &o));
        CHECK(values_are(o, dt, rd, n, 0, "round half to even"));
        double *ov = tc_test_values(o);
        CHECK(signbit(ov[3]) && signbit(ov[9])); /* -0.5 rounds to -0 */
        free(ov), tc_tensor_release(o);
        CHECK_OK(tc_tensor_floor(a, &o));
        CHECK(values_are(o, dt, fl, n, 0, "floor"));
        tc_tensor_release(o);
        CHECK_OK(tc_tensor_ceil(a, &o));
        CHECK(values_are(o, dt, ce, n, 0, "ceil"));
        tc_tensor_release(o);
        tc_tensor_release(a);
    }
    /* integers stay themselves, in their dtype */
    double iv[3] = {-7, 0, 9};
    int64_t three = 3;
    tc_tensor *a = make(iv, 1, &three, TC_INT16), *o = NULL;
    CHECK_OK(tc_tensor_round(a, &o));
    CHECK(values_are(o, TC_INT16, iv, 3, 0, "round of int16"));
    tc_tensor_release(o), tc_tensor_release(a);
}

static void test_remainder(void)
{
    double a[9] = {5, -5, 5, -5, 5.5, -5.5, 7, 0, -0.0};
    double b[9] = {3, 3, -3, -3, 2, 2, 0, -3, 3};
    double fw[9] = {2, 1, -1, -2, 1.5, 0.5, NAN, 0, 0};
    double iw[9] = {2, 1, -1, -2, 1, 1, 0, 0, 0}; /* 5.5 -> 5, -5.5 -> -5; % 0 -> 0 */
    int64_t n = 9;
    tc_tensor *fa = make(a, 1, &n, TC_FLOAT64), *fb = make(b, 1, &n, TC_FLOAT32), *o = NULL;
    CHECK_OK(tc_tensor_remainder(fa, fb, &o));
    CHECK(values_are(o, TC_FLOAT64, fw, n, 1, "remainder of floats"));
    tc_tensor_release(o);
    tc_tensor *ia = make(a, 1, &n, TC_INT32), *ib = make(b, 1, &n, TC_INT64);
    CHECK_OK(tc_tensor_remainder(ia, ib, &o));
    CHECK(values_are(o, TC_INT64, iw, n, 0, "remainder of integers"));
    tc_tensor_release(o);
    /* INT64_MIN % -1 does not trap */
    int64_t big[2] = {INT64_MIN, 7}, m1[2] = {-1, -1};
    int64_t two = 2;
    tc_tensor *x = NULL, *y = NULL;
    CHECK_OK(tc_tensor_from_data(big, 1, &two, TC_INT64, CPU, &x));
    CHECK_OK(tc_tensor_from_data(m1, 1, &two, TC_INT64, CPU, &y));
    CHECK_OK(tc_tensor_remainder(x, y, &o));
    int64_t r[2] = {1, 1};
    CHECK_OK(tc_tensor_to_host(o, TC_INT64, r));
    CHECK(r[0] == 0 && r[1] == 0);
    tc_tensor_release(o), tc_tensor_release(x), tc_tensor_release(y);
    /* random floats against a - b * floor(a / b) */
    int64_t sz[2] = {5, 8};
    double *va, *vb;
    tc_tensor *ra = rnd(2, sz, TC_FLOAT64, -20, 20, &va), *rb = rnd(2, sz, TC_FLOAT64, -4, 4, &vb);
    CHECK_OK(tc_tensor_remainder(ra, rb, &o));
    double want[40];
    for (int i = 0; i < 40; i++)
        want[i] = va[i] - vb[i] * floor(va[i] / vb[i]);
    CHECK(values_are(o, TC_FLOAT64, want, 40, 100, "remainder, random"));
    tc_tensor_release(o), tc_tensor_release(ra), tc_tensor_release(rb), free(va), free(vb);
    /* bool % bool is refused */
    tc_tensor *ba = make(a, 1, &n, TC_BOOL);
    o = NULL;
    CHECK_STATUS(tc_tensor_remainder(ba, ba, &o), TC_ERROR_DTYPE);
    CHECK(o == NULL);
    tc_tensor_release(ba), tc_tensor_release(fa), tc_tensor_release(fb);
    tc_tensor_release(ia), tc_tensor_release(ib);
}

static void test_clamp(void)
{
    double x[6] = {-3, -0.5, 0.25, 2, NAN, 7};
    int64_t n = 6;
    tc_tensor *a = make(x, 1, &n, TC_FLOAT32), *o = NULL;
    double lo = -1, hi = 2.5, nan = NAN;
    double w[6] = {-1, -0.5, 0.25, 2, NAN, 2.5};
    CHECK_OK(tc_tensor_clamp(a, &lo, &hi, &o));
    CHECK(values_are(o, TC_FLOAT32, w, n, 0, "clamp"));
    tc_tensor_release(o);
    double wmin[6] = {-1, -0.5, 0.25, 2, NAN, 7};
    CHECK_OK(tc_tensor_clamp(a, &lo, NULL, &o));
    CHECK(values_are(o, TC_FLOAT32, wmin, n, 0, "clamp min only"));
    tc_tensor_release(o);
    double wmax[6] = {-3, -0.5, 0.25, 2, NAN, 2.5};
    CHECK_OK(tc_tensor_clamp(a, NULL, &hi, &o));
    CHECK(values_are(o, TC_FLOAT32, wmax, n, 0, "clamp max only"));
    tc_tensor_release(o);
    double allnan[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    CHECK_OK(tc_tensor_clamp(a, &nan, &hi, &o));
    CHECK(values_are(o, TC_FLOAT32, allnan, n, 0, "clamp with a NaN bound"));
    tc_tensor_release(o);
    double five = 5, one = 1, wswap[6] = {1, 1, 1, 1, NAN, 1};
    CHECK_OK(tc_tensor_clamp(a, &five, &one, &o)); /* min > max gives max */
    CHECK(values_are(o, TC_FLOAT32, wswap, n, 0, "clamp, min above max"));
    tc_tensor_release(o);
    CHECK_STATUS(tc_tensor_clamp(a, NULL, NULL, &o), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(a);
    /* integer tensors: whole bounds keep the dtype, others give float32 */
    double xi[5] = {-100, -2, 0, 3, 100};
    int64_t n5 = 5;
    a = make(xi, 1, &n5, TC_INT32);
    double ilo = -2, ihi = 3, half = 0.5, wi[5] = {-2, -2, 0, 3, 3}, wf[5] = {0.5, 0.5, 0.5, 3, 3};
    CHECK_OK(tc_tensor_clamp(a, &ilo, &ihi, &o));
    CHECK(values_are(o, TC_INT32, wi, 5, 0, "clamp of int32"));
    tc_tensor_release(o);
    CHECK_OK(tc_tensor_clamp(a, &half, &ihi, &o));
    CHECK(values_are(o, TC_FLOAT32, wf, 5, 0, "clamp of int32 with 0.5"));
    tc_tensor_release(o), tc_tensor_release(a);
    a = make(xi, 1, &n5, TC_BOOL);
    double zero = 0, wb[5] = {1, 1, 0, 1, 1};
    CHECK_OK(tc_tensor_clamp(a, &zero, NULL, &o));
    CHECK(values_are(o, TC_INT64, wb, 5, 0, "clamp of bool"));
    tc_tensor_release(o), tc_tensor_release(a);
    a = make(xi, 1, &n5, TC_INT8);
    double big = 300;
    o = NULL;
    CHECK_STATUS(tc_tensor_clamp(a, &big, NULL, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(tc_last_error(), "tc_tensor_clamp", 15) == 0 && o == NULL);
    tc_tensor_release(a);
}

static void test_logical(void)
{
    double x[4] = {0, 2, NAN, -0.0}, y[4] = {1, 0, 3, 0};
    int64_t n = 4;
    tc_tensor *a = make(x, 1, &n, TC_FLOAT32), *b = make(y, 1, &n, TC_INT32), *o = NULL;
    double wand[4] = {0, 0, 1, 0}, wor[4] = {1, 1, 1, 0}, wnot[4] = {1, 0, 0, 1};
    CHECK_OK(tc_tensor_logical_and(a, b, &o));
    CHECK(values_are(o, TC_BOOL, wand, 4, 0, "logical_and"));
    tc_tensor_release(o);
    CHECK_OK(tc_tensor_logical_or(a, b, &o));
    CHECK(values_are(o, TC_BOOL, wor, 4, 0, "logical_or"));
    tc_tensor_release(o);
    CHECK_OK(tc_tensor_logical_not(a, &o));
    CHECK(values_are(o, TC_BOOL, wnot, 4, 0, "logical_not"));
    tc_tensor_release(o);
    /* broadcast against a 0-d bool */
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 1, TC_BOOL, CPU, &t));
    double wt[4] = {0, 1, 1, 0};
    CHECK_OK(tc_tensor_logical_and(a, t, &o));
    CHECK(values_are(o, TC_BOOL, wt, 4, 0, "logical_and with a 0-d true"));
    tc_tensor_release(o), tc_tensor_release(t);
    tc_tensor_release(a), tc_tensor_release(b);
}

static void test_masked_fill(void)
{
    int64_t sz[2] = {3, 4}, ms[1] = {4};
    double *v;
    tc_tensor *a = rnd(2, sz, TC_FLOAT16, -2, 2, &v), *o = NULL;
    double mv[4] = {1, 0, 0, 1};
    tc_tensor *m = make(mv, 1, ms, TC_BOOL);
    CHECK_OK(tc_tensor_masked_fill(a, m, -INFINITY, &o));
    double want[12];
    for (int i = 0; i < 12; i++)
        want[i] = mv[i % 4] ? -INFINITY : v[i];
    CHECK(values_are(o, TC_FLOAT16, want, 12, 0, "masked_fill"));
    tc_tensor_release(o);
    tc_tensor *fm = make(mv, 1, ms, TC_FLOAT32);
    o = NULL;
    CHECK_STATUS(tc_tensor_masked_fill(a, fm, 1, &o), TC_ERROR_DTYPE);
    tc_tensor *i8 = make(mv, 1, ms, TC_INT8);
    CHECK_STATUS(tc_tensor_masked_fill(i8, m, 1000, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(o == NULL);
    CHECK_OK(tc_tensor_masked_fill(i8, m, 7.9, &o)); /* truncated, as PyTorch's fill */
    double wi[4] = {7, 0, 0, 7};
    CHECK(values_are(o, TC_INT8, wi, 4, 0, "masked_fill of int8"));
    tc_tensor_release(o), tc_tensor_release(i8), tc_tensor_release(fm);
    tc_tensor_release(m), tc_tensor_release(a), free(v);
}

static void test_inplace(void)
{
    int64_t sz[2] = {4, 5}, rs[1] = {5};
    double *v, *w;
    tc_tensor *a = rnd(2, sz, TC_FLOAT32, -3, 3, &v), *row = rnd(1, rs, TC_FLOAT32, 1, 2, &w);
    tc_tensor *at = NULL;
    /* into a transposed view: self[j][i] = a[i][j] */
    int64_t ts[2] = {5, 4};
    tc_tensor *c = NULL;
    CHECK_OK(tc_tensor_zeros(2, ts, TC_FLOAT32, CPU, &c));
    CHECK_OK(tc_tensor_transpose(c, 0, 1, &at));
    CHECK_OK(tc_tensor_copy_(at, a, false));
    double want[20];
    tc_status (*fns[4])(tc_tensor *, const tc_tensor *) = {tc_tensor_add_, tc_tensor_sub_,
                                                           tc_tensor_mul_, tc_tensor_div_};
    double cur[20];
    for (int i = 0; i < 20; i++)
        cur[i] = v[i];
    for (int k = 0; k < 4; k++) {
        CHECK_OK(fns[k](at, row));
        for (int i = 0; i < 20; i++) {
            double b = w[i % 5];
            double r = k == 0 ? cur[i] + b : k == 1 ? cur[i] - b : k == 2 ? cur[i] * b : cur[i] / b;
            cur[i] = (float)r;
        }
        tc_tensor *ac = NULL;
        CHECK_OK(tc_tensor_contiguous(at, &ac));
        for (int i = 0; i < 20; i++)
            want[i] = cur[i];
        CHECK(values_are(ac, TC_FLOAT32, want, 20, 1, "in place on a transposed view"));
        tc_tensor_release(ac);
    }
    /* the result may not make self grow */
    CHECK_STATUS(tc_tensor_add_(row, a), TC_ERROR_SHAPE);
    /* int32 self: an int64 other is fine (cast back), a float one is not */
    tc_tensor *i32 = make(v, 2, sz, TC_INT32), *i64 = make(w, 1, rs, TC_INT64);
    double before[20], after[20];
    CHECK_OK(tc_tensor_to_host(i32, TC_FLOAT64, before));
    CHECK_OK(tc_tensor_mul_(i32, i64));
    CHECK_OK(tc_tensor_to_host(i32, TC_FLOAT64, after));
    bool ok = true;
    for (int i = 0; i < 20; i++)
        ok &= after[i] == before[i] * trunc(w[i % 5]);
    CHECK(ok && tc_tensor_dtype(i32) == TC_INT32);
    CHECK_STATUS(tc_tensor_add_(i32, row), TC_ERROR_DTYPE);
    CHECK(strstr(tc_last_error(), "can't be cast") != NULL);
    CHECK_STATUS(tc_tensor_div_(i32, i64), TC_ERROR_DTYPE);
    CHECK_OK(tc_tensor_to_host(i32, TC_FLOAT64, before));
    ok = true;
    for (int i = 0; i < 20; i++)
        ok &= after[i] == before[i]; /* untouched by the refusals */
    CHECK(ok);
    tc_tensor *bl = make(w, 1, rs, TC_BOOL);
    CHECK_STATUS(tc_tensor_add_(bl, i64), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_sub_(i64, bl), TC_ERROR_DTYPE);
    CHECK_OK(tc_tensor_add_(bl, bl)); /* bool + bool stays bool */
    /* a float16 self with a float32 other: computed in float32, rounded once */
    tc_tensor *h = make(v, 2, sz, TC_FLOAT16);
    double hv[20];
    CHECK_OK(tc_tensor_to_host(h, TC_FLOAT64, hv));
    CHECK_OK(tc_tensor_add_(h, row));
    for (int i = 0; i < 20; i++)
        want[i] = hv[i] + w[i % 5];
    CHECK(values_are(h, TC_FLOAT16, want, 20, 1, "float16 += float32"));
    /* self with itself, and with its own transpose (through a temporary) */
    int64_t sq[2] = {3, 3};
    double *s;
    tc_tensor *m = rnd(2, sq, TC_FLOAT64, -1, 1, &s), *mt = NULL;
    CHECK_OK(tc_tensor_add_(m, m));
    for (int i = 0; i < 9; i++)
        want[i] = 2 * s[i];
    CHECK(values_are(m, TC_FLOAT64, want, 9, 1, "x += x"));
    CHECK_OK(tc_tensor_transpose(m, 0, 1, &mt));
    CHECK_OK(tc_tensor_add_(m, mt));
    for (int i = 0; i < 9; i++)
        want[i] = 2 * s[i] + 2 * s[(i % 3) * 3 + i / 3];
    CHECK(values_are(m, TC_FLOAT64, want, 9, 1, "x += x.T"));
    /* a stride-0 self */
    tc_tensor *one = NULL, *ex = NULL;
    CHECK_OK(tc_tensor_zeros(1, rs, TC_FLOAT32, CPU, &one));
    int64_t es[2] = {4, 5}, est[2] = {0, 1};
    CHECK_OK(tc__make_view(one, 2, es, est, 0, &ex));
    CHECK_STATUS(tc_tensor_add_(ex, a), TC_ERROR_INVALID_ARGUMENT);
    /* fill_ fills any view, expanded ones too, with the value as full converts it */
    CHECK_OK(tc_tensor_fill_(ex, 2.5));
    for (int i = 0; i < 5; i++)
        want[i] = 2.5;
    CHECK(values_are(one, TC_FLOAT32, want, 5, 0, "fill_ of an expanded view"));
    CHECK_OK(tc_tensor_fill_(at, -1));
    for (int i = 0; i < 20; i++)
        want[i] = -1;
    CHECK(values_are(c, TC_FLOAT32, want, 20, 0, "fill_ of a transposed view"));
    CHECK_OK(tc_tensor_fill_(i32, 2.7));
    for (int i = 0; i < 20; i++)
        want[i] = 2;
    CHECK(values_are(i32, TC_INT32, want, 20, 0, "fill_ of int32 with 2.7"));
    CHECK_STATUS(tc_tensor_fill_(i32, 1e10), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(tc_last_error(), "tc_tensor_fill_", 15) == 0);
    CHECK(values_are(i32, TC_INT32, want, 20, 0, "int32 after a refused fill_"));
    CHECK_OK(tc_tensor_fill_(bl, NAN));
    for (int i = 0; i < 5; i++)
        want[i] = 1;
    CHECK(values_are(bl, TC_BOOL, want, 5, 0, "fill_ of bool with NaN"));
    tc_tensor_release(one), tc_tensor_release(ex), tc_tensor_release(m), tc_tensor_release(mt);
    tc_tensor_release(h), tc_tensor_release(bl), tc_tensor_release(i32), tc_tensor_release(i64);
    tc_tensor_release(a), tc_tensor_release(row), tc_tensor_release(at), tc_tensor_release(c);
    free(v), free(w), free(s);
}

/* ---- reductions ------------------------------------------------------------------------ */

/* [outer, r, inner] of a reduction of sizes over dim (TC_ALL_DIMS: all). */
static void split(int ndim, const int64_t *sizes, int dim, int64_t *outer, int64_t *r,
                  int64_t *inner)
{
    *outer = *r = *inner = 1;
    for (int i = 0; i < ndim; i++) {
        if (dim == TC_ALL_DIMS || i == dim)
            *r *= sizes[i];
        else if (i < dim)
            *outer *= sizes[i];
        else
            *inner *= sizes[i];
    }
}

typedef double (*line_fn)(const double *x, int64_t n, int64_t step, double arg);

static double l_prod(const double *x, int64_t n, int64_t st, double arg)
{
    (void)arg;
    double p = 1;
    for (int64_t j = 0; j < n; j++)
        p *= x[j * st];
    return p;
}
static double l_var(const double *x, int64_t n, int64_t st, double corr)
{
    double m = 0, s = 0;
    for (int64_t j = 0; j < n; j++)
        m += x[j * st];
    m /= (double)n;
    for (int64_t j = 0; j < n; j++)
        s += (x[j * st] - m) * (x[j * st] - m);
    return s / fmax(0, (double)n - corr);
}
static double l_std(const double *x, int64_t n, int64_t st, double corr)
{
    return sqrt(l_var(x, n, st, corr));
}
static double l_lse(const double *x, int64_t n, int64_t st, double arg)
{
    (void)arg;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < n; j++)
        m = fmax(m, x[j * st]);
    for (int64_t j = 0; j < n; j++)
        s += exp(x[j * st] - m);
    return m + log(s);
}
static double l_norm(const double *x, int64_t n, int64_t st, double p)
{
    double s = 0;
    for (int64_t j = 0; j < n; j++) {
        double a = fabs(x[j * st]);
        if (isinf(p))
            s = j == 0 ? a : p > 0 ? fmax(s, a) : fmin(s, a);
        else if (p == 0)
            s += a != 0;
        else
            s += pow(a, p);
    }
    return isinf(p) || p == 0 ? s : pow(s, 1 / p);
}

/* want[outer * inner] of a line function over each reduced line. */
static void ref_reduce(const double *v, int ndim, const int64_t *sizes, int dim, line_fn f,
                       double arg, double *want)
{
    int64_t outer, r, inner;
    split(ndim, sizes, dim, &outer, &r, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++)
            want[o * inner + k] = f(v + o * r * inner + k, r, inner, arg);
}

static void test_reductions_random(void)
{
    int64_t sz[3] = {3, 5, 4};
    tc_dtype dts[] = {TC_FLOAT32, TC_FLOAT64, TC_FLOAT16, TC_BFLOAT16};
    int dims[4] = {TC_ALL_DIMS, 0, 1, 2};
    char what[96];
    for (int di = 0; di < COUNT(dts); di++) {
        tc_dtype dt = dts[di];
        double *v;
        tc_tensor *a = rnd(3, sz, dt, 0.7, 1.3, &v);
        for (int k = 0; k < 4; k++) {
            int dim = dims[k];
            double want[60];
            tc_tensor *o = NULL;
            snprintf(what, sizeof what, "prod dim %d %s", dim, tc_dtype_string(dt));
            CHECK_OK(tc_tensor_prod(a, dim, false, &o));
            ref_reduce(v, 3, sz, dim, l_prod, 0, want);
            CHECK(values_are(o, dt, want, tc_tensor_numel(o), 4, what));
            tc_tensor_release(o);
            for (int corr = 0; corr < 3; corr++) {
                snprintf(what, sizeof what, "var dim %d corr %d %s", dim, corr,
                         tc_dtype_string(dt));
                CHECK_OK(tc_tensor_var(a, dim, corr, true, &o));
                ref_reduce(v, 3, sz, dim, l_var, corr, want);
                CHECK(values_are(o, dt, want, tc_tensor_numel(o), 3, what));
                CHECK(tc_tensor_ndim(o) == 3);
                tc_tensor_release(o);
                snprintf(what, sizeof what, "std dim %d corr %d %s", dim, corr,
                         tc_dtype_string(dt));
                CHECK_OK(tc_tensor_std(a, dim, corr, false, &o));
                ref_reduce(v, 3, sz, dim, l_std, corr, want);
                CHECK(values_are(o, dt, want, tc_tensor_numel(o), 3, what));
                tc_tensor_release(o);
            }
            snprintf(what, sizeof what, "logsumexp dim %d %s", dim, tc_dtype_string(dt));
            CHECK_OK(tc_tensor_logsumexp(a, dim, false, &o));
            ref_reduce(v, 3, sz, dim, l_lse, 0, want);
            CHECK(values_are(o, dt, want, tc_tensor_numel(o), 2, what));
            tc_tensor_release(o);
            double ps[] = {2, 1, INFINITY, -INFINITY, 0, 3, 0.5, -1};
            for (int pi = 0; pi < COUNT(ps); pi++) {
                snprintf(what, sizeof what, "norm p %g dim %d %s", ps[pi], dim,
                         tc_dtype_string(dt));
                CHECK_OK(tc_tensor_norm(a, ps[pi], dim, false, &o));
                ref_reduce(v, 3, sz, dim, l_norm, ps[pi], want);
                CHECK(values_are(o, dt, want, tc_tensor_numel(o), 8, what));
                tc_tensor_release(o);
            }
        }
        tc_tensor_release(a), free(v);
    }
}

static void test_reduction_edges(void)
{
    /* prod: integers give int64; nothing gives 1 */
    double x[4] = {3, -2, 5, 1};
    int64_t n = 4, e0[2] = {0, 3};
    tc_tensor *a = make(x, 1, &n, TC_INT16), *o = NULL, *idx = NULL;
    double w30[1] = {-30}, one[3] = {1, 1, 1}, nan3[3] = {NAN, NAN, NAN};
    CHECK_OK(tc_tensor_prod(a, 0, false, &o));
    CHECK(values_are(o, TC_INT64, w30, 1, 0, "prod of int16"));
    tc_tensor_release(o), tc_tensor_release(a);
    CHECK_OK(tc_tensor_zeros(2, e0, TC_FLOAT32, CPU, &a));
    CHECK_OK(tc_tensor_prod(a, 0, false, &o));
    CHECK(values_are(o, TC_FLOAT32, one, 3, 0, "prod of nothing"));
    tc_tensor_release(o);
    /* var over nothing is NaN, whatever the correction */
    CHECK_OK(tc_tensor_var(a, 0, -1, false, &o));
    CHECK(values_are(o, TC_FLOAT32, nan3, 3, 0, "var of nothing"));
    tc_tensor_release(o);
    /* any / all of nothing */
    double f3[3] = {0, 0, 0}, ninf3[3] = {-INFINITY, -INFINITY, -INFINITY};
    CHECK_OK(tc_tensor_any(a, 0, false, &o));
    CHECK(values_are(o, TC_BOOL, f3, 3, 0, "any of nothing"));
    tc_tensor_release(o);
    CHECK_OK(tc_tensor_all(a, 0, false, &o));
    CHECK(values_are(o, TC_BOOL, one, 3, 0, "all of nothing"));
    tc_tensor_release(o);
    CHECK_OK(tc_tensor_logsumexp(a, 0, false, &o));
    CHECK(values_are(o, TC_FLOAT32, ninf3, 3, 0, "logsumexp of nothing"));
    tc_tensor_release(o);
    CHECK_OK(tc_tensor_norm(a, 2, 0, false, &o));
    CHECK(values_are(o, TC_FLOAT32, f3, 3, 0, "2-norm of nothing"));
    tc_tensor_release(o);
    o = NULL;
    CHECK_STATUS(tc_tensor_norm(a, INFINITY, 0, false, &o), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_norm(a, -1, 0, false, &o), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_max_dim(a, 0, false, &o, &idx), TC_ERROR_SHAPE);
    CHECK(o == NULL && idx == NULL);
    CHECK_OK(tc_tensor_max_dim(a, 1, false, &o, &idx)); /* a non-empty dim of an empty tensor */
    CHECK(tc_tensor_numel(o) == 0 && tc_tensor_dtype(idx) == TC_INT64);
    tc_tensor_release(o), tc_tensor_release(idx), tc_tensor_release(a);
    /* var with correction >= N: inf, or NaN when every deviation is 0 */
    double y[2] = {1, 3}, inf1[1] = {INFINITY}, nan1[1] = {NAN};
    int64_t two = 2, onee = 1;
    a = make(y, 1, &two, TC_FLOAT64);
    CHECK_OK(tc_tensor_var(a, 0, 2, false, &o));
    CHECK(values_are(o, TC_FLOAT64, inf1, 1, 0, "var, correction == N"));
    tc_tensor_release(o);
    CHECK_OK(tc_tensor_std(a, TC_ALL_DIMS, 5, false, &o));
    CHECK(values_are(o, TC_FLOAT64, inf1, 1, 0, "std, correction > N"));
    tc_tensor_release(o), tc_tensor_release(a);
    a = make(y, 1, &onee, TC_FLOAT64);
    CHECK_OK(tc_tensor_var(a, 0, 1, false, &o));
    CHECK(values_are(o, TC_FLOAT64, nan1, 1, 0, "var of one value, correction 1"));
    tc_tensor_release(o), tc_tensor_release(a);
    /* logsumexp: -inf rows, +inf, NaN, and large values (stability) */
    double l[12] = {-INFINITY, -INFINITY, -INFINITY, 1, INFINITY, 2, 1, NAN, 2, 1000, 1000, -1000};
    int64_t ls[2] = {4, 3};
    a = make(l, 2, ls, TC_FLOAT32);
    double wl[4] = {-INFINITY, INFINITY, NAN, 1000 + log(2.0)};
    CHECK_OK(tc_tensor_logsumexp(a, 1, false, &o));
    CHECK(values_are(o, TC_FLOAT32, wl, 4, 1, "logsumexp edges"));
    tc_tensor_release(o), tc_tensor_release(a);
    /* integers give float32 */
    a = make(x, 1, &n, TC_INT32);
    CHECK_OK(tc_tensor_logsumexp(a, 0, false, &o));
    double wli[1] = {l_lse(x, 4, 1, 0)};
    CHECK(values_are(o, TC_FLOAT32, wli, 1, 1, "logsumexp of int32"));
    tc_tensor_release(o), tc_tensor_release(a);
}

static void test_max_min_dim(void)
{
    /* ties give the first index; NaN is the extreme, the first NaN's index */
    double x[12] = {1, 3, 3, 0, 2, NAN, 7, NAN, 5, 5, 5, 5};
    int64_t sz[2] = {3, 4};
    tc_tensor *a = make(x, 2, sz, TC_FLOAT32), *v = NULL, *i = NULL;
    CHECK_OK(tc_tensor_max_dim(a, 1, false, &v, &i));
    double wv[3] = {3, NAN, 5}, wi[3] = {1, 1, 0};
    CHECK(values_are(v, TC_FLOAT32, wv, 3, 0, "max_dim values"));
    CHECK(values_are(i, TC_INT64, wi, 3, 0, "max_dim indices"));
    tc_tensor_release(v), tc_tensor_release(i);
    CHECK_OK(tc_tensor_min_dim(a, -1, true, &v, &i));
    double mv[3] = {0, NAN, 5}, mi[3] = {3, 1, 0};
    CHECK(values_are(v, TC_FLOAT32, mv, 3, 0, "min_dim values"));
    CHECK(values_are(i, TC_INT64, mi, 3, 0, "min_dim indices"));
    CHECK(tc_tensor_ndim(v) == 2 && tc_tensor_size(v, 1) == 1 && tc_tensor_ndim(i) == 2);
    tc_tensor_release(v), tc_tensor_release(i);
    CHECK_STATUS(tc_tensor_max_dim(a, TC_ALL_DIMS, false, &v, &i), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_max_dim(a, 2, false, &v, &i), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(a);
    /* random integers (many ties) on a strided input, every dim, against a loop */
    int64_t s3[3] = {4, 6, 5};
    double *r;
    tc_tensor *b = rnd(3, s3, TC_INT32, 0, 4, &r), *bt = NULL, *bc = NULL;
    CHECK_OK(tc_tensor_transpose(b, 0, 2, &bt)); /* [5, 6, 4] */
    CHECK_OK(tc_tensor_contiguous(bt, &bc));
    double *rt = tc_test_values(bc);
    int64_t ts[3] = {5, 6, 4};
    for (int dim = 0; dim < 3; dim++)
        for (int is_max = 0; is_max < 2; is_max++) {
            CHECK_OK((is_max ? tc_tensor_max_dim : tc_tensor_min_dim)(bt, dim, false, &v, &i));
            int64_t outer, rr, inner;
            split(3, ts, dim, &outer, &rr, &inner);
            double want_v[30], want_i[30];
            for (int64_t o = 0; o < outer; o++)
                for (int64_t k = 0; k < inner; k++) {
                    const double *p = rt + o * rr * inner + k;
                    int64_t best = 0;
                    for (int64_t j = 1; j < rr; j++)
                        if (is_max ? p[j * inner] > p[best * inner]
                                   : p[j * inner] < p[best * inner])
                            best = j;
                    want_v[o * inner + k] = p[best * inner];
                    want_i[o * inner + k] = (double)best;
                }
            CHECK(values_are(v, TC_INT32, want_v, outer * inner, 0, "max/min_dim values"));
            CHECK(values_are(i, TC_INT64, want_i, outer * inner, 0, "max/min_dim indices"));
            tc_tensor_release(v), tc_tensor_release(i);
        }
    free(r), free(rt), tc_tensor_release(b), tc_tensor_release(bt), tc_tensor_release(bc);
}

static void test_any_all(void)
{
    double x[6] = {0, NAN, 0, 0, 0, 0};
    int64_t sz[2] = {2, 3};
    tc_tensor *a = make(x, 2, sz, TC_FLOAT32), *o = NULL;
    double any1[2] = {1, 0}, all0[3] = {0, 0, 0}, t1[1] = {1};
    CHECK_OK(tc_tensor_any(a, 1, false, &o));
    CHECK(values_are(o, TC_BOOL, any1, 2, 0, "any, NaN is true"));
    tc_tensor_release(o);
    CHECK_OK(tc_tensor_all(a, 0, false, &o));
    CHECK(values_are(o, TC_BOOL, all0, 3, 0, "all"));
    tc_tensor_release(o), tc_tensor_release(a);
    double y[6] = {1, 2, 3, 4, 5, 6};
    a = make(y, 2, sz, TC_UINT8);
    CHECK_OK(tc_tensor_all(a, TC_ALL_DIMS, false, &o));
    CHECK(values_are(o, TC_UINT8, t1, 1, 0, "all of uint8 is uint8"));
    tc_tensor_release(o), tc_tensor_release(a);
}

static void test_cumsum(void)
{
    int64_t sz[3] = {3, 70, 4};
    tc_dtype dts[] = {TC_FLOAT32, TC_FLOAT64, TC_FLOAT16, TC_INT32, TC_BOOL, TC_UINT8};
    for (int di = 0; di < COUNT(dts); di++) {
        tc_dtype dt = dts[di];
        bool fl = tc_dtype_is_floating(dt);
        double *v;
        tc_tensor *a = rnd(3, sz, dt, fl ? -1 : 0, fl ? 1 : 50, &v);
        for (int dim = -1; dim < 3; dim++) {
            tc_tensor *o = NULL;
            CHECK_OK(tc_tensor_cumsum(a, dim, &o));
            int d = dim < 0 ? dim + 3 : dim;
            int64_t outer, r, inner;
            split(3, sz, d, &outer, &r, &inner);
            double *want = malloc(sizeof(double) * 840);
            for (int64_t o2 = 0; o2 < outer; o2++)
                for (int64_t k = 0; k < inner; k++) {
                    double s = 0;
                    for (int64_t j = 0; j < r; j++) {
                        int64_t at = (o2 * r + j) * inner + k;
                        s += v[at];
                        want[at] = s;
                    }
                }
            char what[64];
            snprintf(what, sizeof what, "cumsum dim %d %s", dim, tc_dtype_string(dt));
            CHECK(values_are(o, fl ? dt : TC_INT64, want, 840, 8, what));
            CHECK(tc_tensor_ndim(o) == 3 && tc_tensor_size(o, 1) == 70);
            tc_tensor_release(o), free(want);
        }
        tc_tensor_release(a), free(v);
    }
    /* 0-d and empty */
    tc_tensor *z = NULL, *o = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 4, TC_INT8, CPU, &z));
    CHECK_OK(tc_tensor_cumsum(z, 0, &o));
    double four[1] = {4};
    CHECK(values_are(o, TC_INT64, four, 1, 0, "cumsum of 0-d") && tc_tensor_ndim(o) == 0);
    tc_tensor_release(o), tc_tensor_release(z);
    int64_t e[2] = {0, 3};
    CHECK_OK(tc_tensor_zeros(2, e, TC_FLOAT32, CPU, &z));
    CHECK_OK(tc_tensor_cumsum(z, 0, &o));
    CHECK(tc_tensor_numel(o) == 0 && tc_tensor_size(o, 1) == 3);
    CHECK_STATUS(tc_tensor_cumsum(z, TC_ALL_DIMS, &o), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(o), tc_tensor_release(z);
}

int main(void)
{
    tc_test_init();
    test_unary_math();
    test_rounding();
    test_remainder();
    test_clamp();
    test_logical();
    test_masked_fill();
    test_inplace();
    test_reductions_random();
    test_reduction_edges();
    test_max_min_dim();
    test_any_all();
    test_cumsum();
    return TC_TEST_DONE();
}
