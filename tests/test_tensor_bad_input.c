/* Bad input to the tensor API, on the CPU: each case is an input that once
 * went wrong (a crash, an overflow, a silent wrong result, a difference from
 * PyTorch, a misleading message). Every call must
 * fail cleanly with the documented status, leave *out alone, and say in its
 * message what the user called and what was wrong; the cases that succeed
 * are checked for their values. */
#include <math.h>
#include <stdlib.h>

#include "tc_test.h"

static const tc_device CPU = {TC_CPU, -1};

/* The message starts with the public function the user called. */
static bool names(const char *fn) { return strncmp(tc_last_error(), fn, strlen(fn)) == 0; }
static bool says(const char *what) { return strstr(tc_last_error(), what) != NULL; }

/* A factory that fails leaves the caller's *out as it was (found by
 * fuzz_tensor_shape: tc_tensor_empty with a bad dtype wrote NULL). */
static void test_out_untouched(void)
{
    int64_t sz[1] = {2};
    tc_tensor *const SENT = (tc_tensor *)(uintptr_t)0x5e5e5e5e5e;
    tc_tensor *t = SENT;
    CHECK_STATUS(tc_tensor_empty(1, sz, (tc_dtype)TC_NUM_DTYPES, CPU, &t),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(t == SENT);
    sz[0] = -1;
    CHECK_STATUS(tc_tensor_empty(1, sz, TC_FLOAT32, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK(t == SENT);
    sz[0] = (int64_t)1 << 61;
    CHECK(tc_tensor_empty(1, sz, TC_FLOAT64, CPU, &t) != TC_OK);
    CHECK(t == SENT);
}

static void test_null_out(void)
{
    int64_t sz[1] = {3};
    double data[3] = {1, 2, 3};
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_ones(1, sz, TC_FLOAT32, CPU, &t));
    CHECK_STATUS(tc_tensor_empty(1, sz, TC_FLOAT32, CPU, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_zeros(1, sz, TC_FLOAT32, CPU, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_zeros"));
    CHECK_STATUS(tc_tensor_ones(1, sz, TC_FLOAT32, CPU, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_full(1, sz, 2, TC_FLOAT32, CPU, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_arange(0, 3, 1, TC_FLOAT32, CPU, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_from_data(data, 1, sz, TC_FLOAT64, CPU, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_empty_like(t, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_zeros_like(t, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_zeros_like"));
    CHECK_STATUS(tc_tensor_ones_like(t, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_full_like(t, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_new_empty(t, 1, sz, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_new_zeros(t, 1, sz, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_new_zeros"));
    CHECK_STATUS(tc_tensor_new_ones(t, 1, sz, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_new_full(t, 1, sz, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor *o = NULL;
    CHECK_STATUS(tc_tensor_zeros_like(NULL, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_new_ones(NULL, 1, sz, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(o == NULL);
    tc_tensor_release(t);
}

/* Shapes whose element count, strides or bytes do not fit. */
static void test_overflowing_shapes(void)
{
    const int64_t p61 = INT64_C(1) << 61, p62 = INT64_C(1) << 62;
    tc_tensor *t = NULL;
    int64_t s1[1] = {p61};
    CHECK_STATUS(tc_tensor_empty(1, s1, TC_FLOAT64, CPU, &t), TC_ERROR_SHAPE);
    CHECK(names("tc_tensor_empty") && says("2305843009213693952"));
    CHECK_STATUS(tc_tensor_zeros(1, s1, TC_FLOAT64, CPU, &t), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_full(1, s1, 1, TC_INT64, CPU, &t), TC_ERROR_SHAPE);
    int64_t s2[3] = {p62, p62, 0};
    CHECK_STATUS(tc_tensor_empty(3, s2, TC_FLOAT32, CPU, &t), TC_ERROR_SHAPE);
    int64_t s3[3] = {0, p62, 2}; /* a contiguous stride would be 2^63 */
    CHECK_STATUS(tc_tensor_zeros(3, s3, TC_UINT8, CPU, &t), TC_ERROR_SHAPE);
    int64_t s4[2] = {INT64_MAX, INT64_MAX};
    CHECK_STATUS(tc_tensor_ones(2, s4, TC_BOOL, CPU, &t), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_from_data(NULL, 2, s4, TC_BOOL, CPU, &t), TC_ERROR_SHAPE);
    CHECK(t == NULL);
    int64_t neg[2] = {3, -1};
    CHECK_STATUS(tc_tensor_empty(2, neg, TC_FLOAT32, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("negative"));
    CHECK_STATUS(tc_tensor_empty(9, s4, TC_FLOAT32, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_empty(1, s1, (tc_dtype)99, CPU, &t), TC_ERROR_INVALID_ARGUMENT);

    /* empty tensors with big sizes are fine while the strides fit */
    int64_t e[2] = {0, p62};
    CHECK_OK(tc_tensor_empty(2, e, TC_FLOAT64, CPU, &t));
    CHECK(tc_tensor_numel(t) == 0 && tc_tensor_stride(t, 0) == p62 && tc_tensor_stride(t, 1) == 1);
    tc_tensor *v = NULL;
    int64_t ev[3] = {p62, 0, 1};
    CHECK_OK(tc_tensor_view(t, 3, ev, &v));
    CHECK(tc_tensor_numel(v) == 0 && tc_tensor_size(v, 0) == p62);
    tc_tensor_release(v);
    v = NULL;
    int64_t ebad3[3] = {p62, 4, 0}; /* extent 2^64 */
    CHECK_STATUS(tc_tensor_view(t, 3, ebad3, &v), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_reshape(t, 3, ebad3, &v), TC_ERROR_SHAPE);
    tc_tensor_release(t);

    /* a 4-element tensor viewed as {2^62 + 1, 4}: the product wraps to 4 */
    CHECK_OK(tc_tensor_arange(0, 4, 1, TC_FLOAT32, CPU, &t));
    int64_t w[2] = {p62 + 1, 4}, w2[2] = {-1, p62}, w3[3] = {p62, 4, -1};
    CHECK_STATUS(tc_tensor_view(t, 2, w, &v), TC_ERROR_SHAPE);
    CHECK(names("tc_tensor_view"));
    CHECK_STATUS(tc_tensor_reshape(t, 2, w, &v), TC_ERROR_SHAPE);
    CHECK(names("tc_tensor_reshape"));
    CHECK_STATUS(tc_tensor_view(t, 2, w2, &v), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_reshape(t, 3, w3, &v), TC_ERROR_SHAPE);
    CHECK(v == NULL);
    int64_t ok2[2] = {2, -1};
    CHECK_OK(tc_tensor_view(t, 2, ok2, &v));
    CHECK(tc_tensor_size(v, 1) == 2 && tc_tensor_numel(v) == 4);
    tc_tensor_release(v);
    tc_tensor_release(t);
}

static void test_narrow(void)
{
    double vals[5] = {10, 11, 12, 13, 14};
    int64_t sz[1] = {5};
    tc_tensor *t = NULL, *v = NULL;
    CHECK_OK(tc_tensor_from_data(vals, 1, sz, TC_FLOAT64, CPU, &t));
    CHECK_STATUS(tc_tensor_narrow(t, 0, INT64_MAX, 2, &v), TC_ERROR_SHAPE);
    CHECK(names("tc_tensor_narrow") && says("9223372036854775807"));
    CHECK_STATUS(tc_tensor_narrow(t, 0, 2, INT64_MAX, &v), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_narrow(t, 0, INT64_MIN, 1, &v), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_narrow(t, 0, -6, 1, &v), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_narrow(t, 0, 6, 0, &v), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_narrow(t, 0, 1, -1, &v), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_narrow(t, INT32_MIN, 0, 1, &v), TC_ERROR_INVALID_ARGUMENT);
    CHECK(v == NULL);
    CHECK_OK(tc_tensor_narrow(t, 0, -5, 2, &v)); /* start -size is 0 */
    double got[2];
    CHECK_OK(tc_tensor_to_host(v, TC_FLOAT64, got));
    CHECK(got[0] == 10 && got[1] == 11);
    tc_tensor_release(v);
    CHECK_OK(tc_tensor_narrow(t, 0, 5, 0, &v)); /* empty at the end */
    CHECK(tc_tensor_numel(v) == 0);
    tc_tensor_release(v);
    /* an empty view's offset grows with each narrow: never past int64_t,
     * in elements or in bytes */
    int64_t e[2] = {0, INT64_C(1) << 62};
    tc_tensor *big = NULL, *n1 = NULL, *n2 = NULL, *n3 = NULL;
    CHECK_OK(tc_tensor_empty(2, e, TC_UINT8, CPU, &big));
    CHECK_OK(tc_tensor_narrow(big, 1, INT64_C(1) << 62, 0, &n1));
    CHECK(tc_tensor_offset(n1) == INT64_C(1) << 62);
    CHECK_OK(tc_tensor_view(n1, 2, e, &n2)); /* strides {2^62, 1} again */
    CHECK_STATUS(tc_tensor_narrow(n2, 1, INT64_C(1) << 62, 0, &n3), TC_ERROR_SHAPE);
    CHECK(n3 == NULL);
    tc_tensor_release(n2), tc_tensor_release(n1), tc_tensor_release(big);
    CHECK_OK(tc_tensor_empty(2, e, TC_FLOAT64, CPU, &big));
    CHECK_STATUS(tc_tensor_narrow(big, 1, INT64_C(1) << 61, 0, &n1), TC_ERROR_SHAPE); /* 2^64 B */
    CHECK_OK(tc_tensor_narrow(big, 1, INT64_C(1) << 59, 0, &n1));
    CHECK(tc_tensor_offset(n1) == INT64_C(1) << 59 && tc_tensor_data_ptr(n1) != NULL);
    tc_tensor_release(n1), tc_tensor_release(big);
    CHECK_OK(tc_tensor_narrow(t, -1, -2, 2, &v));
    CHECK_OK(tc_tensor_to_host(v, TC_FLOAT64, got));
    CHECK(got[0] == 13 && got[1] == 14);
    tc_tensor_release(v);
    tc_tensor_release(t);
}

/* A 4x4 tensor with values 0..15. */
static tc_tensor *square(void)
{
    tc_tensor *a = NULL, *m = NULL;
    int64_t sz[2] = {4, 4};
    CHECK_OK(tc_tensor_arange(0, 16, 1, TC_FLOAT32, CPU, &a));
    CHECK_OK(tc_tensor_view(a, 2, sz, &m));
    tc_tensor_release(a);
    return m;
}

static void test_copy_overlap(void)
{
    tc_tensor *m = square(), *mt = NULL;
    CHECK_OK(tc_tensor_transpose(m, 0, 1, &mt));
    CHECK_STATUS(tc_tensor_copy_(m, mt, false), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_copy_") && says("refer to a single memory location"));
    double v[16];
    CHECK_OK(tc_tensor_to_host(m, TC_FLOAT64, v));
    bool same = true;
    for (int i = 0; i < 16; i++)
        same &= v[i] == i;
    CHECK(same); /* nothing was written */
    CHECK_STATUS(tc_tensor_copy_(mt, m, false), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_tensor_copy_(m, m, false)); /* the same elements: a no-op */

    /* dense halves of one storage: disjoint is fine, overlapping is refused */
    tc_tensor *flat = NULL, *lo = NULL, *hi = NULL, *x = NULL, *y = NULL;
    int64_t all[1] = {16};
    CHECK_OK(tc_tensor_view(m, 1, all, &flat));
    CHECK_OK(tc_tensor_narrow(flat, 0, 0, 8, &lo));
    CHECK_OK(tc_tensor_narrow(flat, 0, 8, 8, &hi));
    CHECK_OK(tc_tensor_copy_(lo, hi, false));
    CHECK_OK(tc_tensor_to_host(m, TC_FLOAT64, v));
    same = true;
    for (int i = 0; i < 16; i++)
        same &= v[i] == (i < 8 ? i + 8 : i);
    CHECK(same);
    CHECK_OK(tc_tensor_narrow(flat, 0, 0, 6, &x));
    CHECK_OK(tc_tensor_narrow(flat, 0, 4, 6, &y));
    CHECK_STATUS(tc_tensor_copy_(x, y, false), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(x), tc_tensor_release(y), tc_tensor_release(lo), tc_tensor_release(hi);
    tc_tensor_release(flat), tc_tensor_release(mt), tc_tensor_release(m);

    /* strided operands that overlap (PyTorch: "too hard" to decide): tcuda
     * copies through a temporary, so the result is the source's old values */
    m = square();
    tc_tensor *d = NULL, *s = NULL;
    CHECK_OK(tc_tensor_narrow(m, 1, 0, 3, &d)); /* columns 0..2 */
    CHECK_OK(tc_tensor_narrow(m, 1, 1, 3, &s)); /* columns 1..3 */
    CHECK_OK(tc_tensor_copy_(d, s, false));
    CHECK_OK(tc_tensor_to_host(m, TC_FLOAT64, v));
    same = true;
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            same &= v[r * 4 + c] == (c < 3 ? r * 4 + c + 1 : r * 4 + c);
    CHECK(same);
    tc_tensor_release(d), tc_tensor_release(s), tc_tensor_release(m);
}

static void test_full_values(void)
{
    int64_t sz[2] = {2, 3};
    tc_tensor *t = NULL;
    static const tc_dtype ints[] = {TC_UINT8, TC_INT8, TC_INT16, TC_INT32, TC_INT64};
    for (int i = 0; i < 5; i++) {
        CHECK_STATUS(tc_tensor_full(2, sz, NAN, ints[i], CPU, &t), TC_ERROR_INVALID_ARGUMENT);
        CHECK(names("tc_tensor_full") && says("nan") && !says("negative") && !says("above"));
        CHECK_STATUS(tc_tensor_full(2, sz, INFINITY, ints[i], CPU, &t), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(tc_tensor_full(2, sz, -INFINITY, ints[i], CPU, &t), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(tc_tensor_full(2, sz, 1e300, ints[i], CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    }
    CHECK_STATUS(tc_tensor_full(2, sz, 256, TC_UINT8, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_full(2, sz, -1, TC_UINT8, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_full(2, sz, 128, TC_INT8, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_full(2, sz, 2147483647.5, TC_INT32, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("2147483647.5")); /* %g would have printed 2.14748e+09 */
    CHECK_STATUS(tc_tensor_full(2, sz, 0x1p63, TC_INT64, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_full(2, sz, 1e6, TC_FLOAT16, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_full(2, sz, 1e39, TC_FLOAT32, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK(t == NULL);
    /* wrappers name themselves */
    tc_tensor *like = NULL;
    CHECK_OK(tc_tensor_zeros(2, sz, TC_INT32, CPU, &like));
    CHECK_STATUS(tc_tensor_full_like(like, NAN, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_full_like"));
    CHECK_STATUS(tc_tensor_new_full(like, 2, sz, 1e10, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_new_full"));

    /* what is accepted, with its value */
    static const struct {
        double v;
        tc_dtype dt;
        double want;
    } ok[] = {{2147483647, TC_INT32, 2147483647},
              {-2147483648.0, TC_INT32, -2147483648.0},
              {2.75, TC_INT32, 2},
              {-0x1p63, TC_INT64, -0x1p63},
              {9223372036854774784.0, TC_INT64, 9223372036854774784.0},
              {255, TC_UINT8, 255},
              {NAN, TC_BOOL, 1},
              {-1e300, TC_BOOL, 1},
              {INFINITY, TC_FLOAT16, INFINITY},
              {65504, TC_FLOAT16, 65504},
              {1e300, TC_FLOAT64, 1e300}};
    for (int i = 0; i < (int)(sizeof ok / sizeof ok[0]); i++) {
        CHECK_OK(tc_tensor_full(2, sz, ok[i].v, ok[i].dt, CPU, &t));
        double *v = tc_test_values(t);
        bool all = v != NULL;
        for (int k = 0; all && k < 6; k++)
            all = v[k] == ok[i].want;
        if (ok[i].dt == TC_INT64) { /* exact, not through double */
            const int64_t *p = tc_tensor_data_ptr(t);
            all = all && p[5] == (int64_t)ok[i].want;
        }
        CHECK(all);
        free(v);
        tc_tensor_release(t);
        t = NULL;
    }
    tc_tensor_release(like);
}

static void test_dtype_refusals(void)
{
    tc_tensor *t = NULL;
    CHECK_STATUS(tc_tensor_arange(0, 3, 1, TC_BOOL, CPU, &t), TC_ERROR_DTYPE);
    CHECK(names("tc_tensor_arange") && says("bool"));
    CHECK_STATUS(tc_tensor_arange(0, NAN, 1, TC_FLOAT32, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK(t == NULL);

    /* subtraction with a bool operand, in every pairing, as PyTorch */
    int64_t sz[1] = {4};
    for (int d = 0; d < TC_NUM_DTYPES; d++) {
        tc_tensor *b = NULL, *x = NULL, *o = NULL;
        CHECK_OK(tc_tensor_ones(1, sz, TC_BOOL, CPU, &b));
        CHECK_OK(tc_tensor_full(1, sz, 3, (tc_dtype)d, CPU, &x));
        CHECK_STATUS(tc_tensor_sub(b, x, &o), TC_ERROR_DTYPE);
        CHECK(names("tc_tensor_sub") && says("Subtraction, the `-` operator, with a bool tensor"));
        CHECK_STATUS(tc_tensor_sub(x, b, &o), TC_ERROR_DTYPE);
        CHECK(o == NULL);
        if (d != TC_BOOL) { /* and the rest of the arithmetic still works */
            CHECK_OK(tc_tensor_add(x, b, &o));
            double v[4];
            CHECK_OK(tc_tensor_to_host(o, TC_FLOAT64, v));
            CHECK(v[0] == 4 && v[3] == 4);
            tc_tensor_release(o);
        }
        tc_tensor_release(b), tc_tensor_release(x);
    }
    tc_tensor *b = NULL, *o = NULL;
    CHECK_OK(tc_tensor_ones(1, sz, TC_BOOL, CPU, &b));
    CHECK_STATUS(tc_tensor_neg(b, &o), TC_ERROR_DTYPE);
    CHECK(says("Negation"));
    tc_tensor_release(b);

    /* integer pow with a negative exponent gives 0, as in PyTorch */
    double base[3] = {2, 3, 5}, ex[3] = {-1, -2, -3};
    tc_tensor *x = NULL, *e = NULL, *xi = NULL, *ei = NULL;
    int64_t s3[1] = {3};
    CHECK_OK(tc_tensor_from_data(base, 1, s3, TC_FLOAT64, CPU, &x));
    CHECK_OK(tc_tensor_from_data(ex, 1, s3, TC_FLOAT64, CPU, &e));
    CHECK_OK(tc_tensor_to(x, CPU, TC_INT32, false, &xi));
    CHECK_OK(tc_tensor_to(e, CPU, TC_INT32, false, &ei));
    CHECK_OK(tc_tensor_pow(xi, ei, &o));
    double p[3];
    CHECK_OK(tc_tensor_to_host(o, TC_FLOAT64, p));
    CHECK(tc_tensor_dtype(o) == TC_INT32 && p[0] == 0 && p[1] == 0 && p[2] == 0);
    tc_tensor_release(o), tc_tensor_release(x), tc_tensor_release(e);
    tc_tensor_release(xi), tc_tensor_release(ei);
}

/* Released and garbage tensors, double release, accessors. */
static void test_handles(void)
{
    int64_t sz[1] = {3};
    tc_tensor *t = NULL, *o = NULL;
    CHECK_OK(tc_tensor_ones(1, sz, TC_FLOAT32, CPU, &t));
    CHECK_OK(tc_tensor_release(t));
    CHECK_STATUS(tc_tensor_release(t), TC_ERROR_INVALID_HANDLE); /* twice: reported */
    CHECK(names("tc_tensor_release") && says("tc_tensor"));
    CHECK_STATUS(tc_tensor_add(t, t, &o), TC_ERROR_INVALID_HANDLE);
    CHECK(names("tc_tensor_add") && says("tc_tensor a"));
    CHECK_STATUS(tc_tensor_zeros_like(t, &o), TC_ERROR_INVALID_HANDLE);
    CHECK(names("tc_tensor_zeros_like"));
    CHECK_STATUS(tc_tensor_view(t, 1, sz, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_copy_(t, t, false), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_sum(t, TC_ALL_DIMS, false, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_cpu(t, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_uniform_(t, 0, 1, NULL), TC_ERROR_INVALID_HANDLE);
    CHECK(o == NULL);
    double v;
    CHECK_STATUS(tc_tensor_item(t, &v), TC_ERROR_INVALID_HANDLE);
    /* accessors answer as for NULL */
    CHECK(tc_tensor_ndim(t) == 0 && tc_tensor_numel(t) == 0 && tc_tensor_size(t, 0) == 0);
    CHECK(tc_tensor_sizes(t) == NULL && tc_tensor_data_ptr(t) == NULL && !tc_tensor_is_cuda(t));
    CHECK_STATUS(tc_tensor_retain(t), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_retain(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_tensor_ndim(NULL) == 0 && tc_tensor_dtype(NULL) == TC_FLOAT32);
    CHECK(tc_tensor_device(NULL).type == TC_CPU && tc_tensor_release(NULL) == TC_OK);
    tc_device_guard g = tc_device_guard_enter_of(t);
    CHECK(g.status == TC_ERROR_INVALID_HANDLE);
    /* not a tensor at all */
    uint64_t junk[40] = {0x1234};
    CHECK_STATUS(tc_tensor_neg((const tc_tensor *)junk, &o), TC_ERROR_INVALID_HANDLE);
    CHECK(says("not a live tc_tensor"));
    CHECK_STATUS(tc_tensor_release((tc_tensor *)junk), TC_ERROR_INVALID_HANDLE);
    CHECK(o == NULL);
    /* a retained tensor lives until its last reference goes */
    CHECK_OK(tc_tensor_ones(1, sz, TC_FLOAT32, CPU, &t));
    CHECK_OK(tc_tensor_retain(t));
    CHECK_OK(tc_tensor_release(t));
    CHECK(tc_tensor_numel(t) == 3);
    CHECK_OK(tc_tensor_release(t));
    CHECK(tc_tensor_numel(t) == 0);
}

/* One device rule for tensors and generators. */
static void test_device_rule(void)
{
    int64_t sz[1] = {2};
    tc_tensor *t = NULL;
    tc_generator *g = NULL;
    CHECK_STATUS(tc_tensor_empty(1, sz, TC_FLOAT32, (tc_device){TC_CPU, 5}, &t),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("CPU device index 5"));
    CHECK_STATUS(tc_default_generator((tc_device){TC_CPU, 5}, &g), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("CPU device index 5"));
    CHECK_STATUS(tc_tensor_empty(1, sz, TC_FLOAT32, (tc_device){(tc_device_type)7, 0}, &t),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_zeros(1, sz, TC_FLOAT32, (tc_device){TC_CPU, -2}, &t),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(t == NULL && g == NULL);
    CHECK_OK(tc_tensor_empty(1, sz, TC_FLOAT32, (tc_device){TC_CPU, 0}, &t));
    CHECK(tc_tensor_device(t).type == TC_CPU && tc_tensor_device(t).index == -1);
    CHECK_OK(tc_default_generator((tc_device){TC_CPU, 0}, &g));
    tc_device parsed = {TC_CUDA, 7};
    CHECK_OK(tc_device_parse("cpu:0", &parsed));
    CHECK(parsed.type == TC_CPU && parsed.index == -1);
    CHECK_STATUS(tc_device_parse("cpu:1", &parsed), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_device_parse") && parsed.type == TC_CPU);
    tc_device gd = {TC_CUDA, 0};
    CHECK_OK(tc_generator_device(g, &gd));
    CHECK(gd.type == TC_CPU);
    tc_tensor *o = NULL;
    CHECK_STATUS(tc_tensor_to(t, (tc_device){TC_CPU, 3}, TC_FLOAT32, false, &o),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_to"));
    if (!tc_is_available()) { /* the wrapper, not tc_tensor_to, is named */
        CHECK_STATUS(tc_tensor_cuda(t, -1, false, &o), TC_ERROR_NO_DEVICE);
        CHECK(names("tc_tensor_cuda"));
    }
    CHECK(o == NULL);
    tc_tensor_release(t);
}

/* NaN is never "negative" nor "above hi"; %g does not hide the bad digit. */
static void test_messages(void)
{
    int64_t sz[1] = {3};
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_zeros(1, sz, TC_FLOAT32, CPU, &t));
    CHECK_STATUS(tc_tensor_uniform_(t, NAN, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_uniform_") && says("NaN") && !says("above"));
    CHECK_STATUS(tc_tensor_normal_(t, 0, NAN, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("NaN") && !says("negative"));
    CHECK_STATUS(tc_tensor_bernoulli_(t, NAN, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("NaN") && !says("negative"));
    CHECK_STATUS(tc_tensor_uniform_(t, 1.0000000000000002, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("1.0000000000000002"));
    CHECK_STATUS(tc_tensor_arange(1, 0, 0.30000000000000004, TC_FLOAT64, CPU, &t),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("0.30000000000000004"));
    tc_tensor_release(t);
}

/* The element-wise, in-place and reduction ops: NULL and released tensors,
 * NULL outs, wrong dtypes and bad dimensions, each refused with its status,
 * named, nothing written. */
typedef tc_status (*unary_op)(const tc_tensor *, tc_tensor **);
typedef tc_status (*binary_op)(const tc_tensor *, const tc_tensor *, tc_tensor **);
typedef tc_status (*reduce_op)(const tc_tensor *, int, bool, tc_tensor **);
typedef tc_status (*inplace_op)(tc_tensor *, const tc_tensor *);

static void test_new_ops(void)
{
    int64_t sz[2] = {2, 3};
    tc_tensor *f = NULL, *i = NULL, *b = NULL, *dead = NULL, *o = NULL, *o2 = NULL;
    CHECK_OK(tc_tensor_ones(2, sz, TC_FLOAT32, CPU, &f));
    CHECK_OK(tc_tensor_ones(2, sz, TC_INT32, CPU, &i));
    CHECK_OK(tc_tensor_ones(2, sz, TC_BOOL, CPU, &b));
    CHECK_OK(tc_tensor_ones(2, sz, TC_FLOAT32, CPU, &dead));
    CHECK_OK(tc_tensor_release(dead));
    static const struct {
        const char *name;
        unary_op fn;
    } un[] = {{"tc_tensor_rsqrt", tc_tensor_rsqrt},
              {"tc_tensor_sin", tc_tensor_sin},
              {"tc_tensor_cos", tc_tensor_cos},
              {"tc_tensor_erf", tc_tensor_erf},
              {"tc_tensor_floor", tc_tensor_floor},
              {"tc_tensor_ceil", tc_tensor_ceil},
              {"tc_tensor_round", tc_tensor_round},
              {"tc_tensor_silu", tc_tensor_silu},
              {"tc_tensor_logical_not", tc_tensor_logical_not}};
    for (size_t k = 0; k < sizeof un / sizeof un[0]; k++) {
        CHECK_STATUS(un[k].fn(NULL, &o), TC_ERROR_INVALID_ARGUMENT);
        CHECK(names(un[k].name));
        CHECK_STATUS(un[k].fn(dead, &o), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(un[k].fn(f, NULL), TC_ERROR_INVALID_ARGUMENT);
        CHECK(names(un[k].name));
    }
    CHECK_STATUS(tc_tensor_floor(b, &o), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_round(b, &o), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_silu(i, &o), TC_ERROR_DTYPE);
    CHECK(names("tc_tensor_silu") && says("floating"));
    CHECK_STATUS(tc_tensor_gelu(i, TC_GELU_APPROXIMATE_NONE, &o), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_gelu(NULL, TC_GELU_APPROXIMATE_TANH, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_gelu(dead, TC_GELU_APPROXIMATE_TANH, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_gelu(f, (tc_gelu_approximate)2, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_gelu"));

    static const struct {
        const char *name;
        binary_op fn;
    } bin[] = {{"tc_tensor_remainder", tc_tensor_remainder},
               {"tc_tensor_logical_and", tc_tensor_logical_and},
               {"tc_tensor_logical_or", tc_tensor_logical_or}};
    int64_t bad[1] = {4};
    tc_tensor *four = NULL;
    CHECK_OK(tc_tensor_ones(1, bad, TC_FLOAT32, CPU, &four));
    for (size_t k = 0; k < sizeof bin / sizeof bin[0]; k++) {
        CHECK_STATUS(bin[k].fn(NULL, f, &o), TC_ERROR_INVALID_ARGUMENT);
        CHECK(names(bin[k].name));
        CHECK_STATUS(bin[k].fn(f, dead, &o), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(bin[k].fn(f, f, NULL), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(bin[k].fn(f, four, &o), TC_ERROR_SHAPE);
        CHECK(names(bin[k].name));
    }
    CHECK_STATUS(tc_tensor_remainder(b, b, &o), TC_ERROR_DTYPE);

    double lo = 0, big = 1e300;
    CHECK_STATUS(tc_tensor_clamp(NULL, &lo, NULL, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_clamp(dead, &lo, NULL, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_clamp(f, &lo, NULL, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_clamp(f, NULL, NULL, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_clamp") && says("min and max"));
    CHECK_STATUS(tc_tensor_clamp(f, &big, NULL, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_clamp") && says("overflow"));

    CHECK_STATUS(tc_tensor_masked_fill(NULL, b, 1, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_masked_fill(f, dead, 1, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_masked_fill(f, b, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_masked_fill(f, i, 1, &o), TC_ERROR_DTYPE);
    CHECK(names("tc_tensor_masked_fill") && says("boolean masks"));
    CHECK_STATUS(tc_tensor_masked_fill(i, b, NAN, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_masked_fill"));

    static const struct {
        const char *name;
        inplace_op fn;
    } ip[] = {{"tc_tensor_add_", tc_tensor_add_},
              {"tc_tensor_sub_", tc_tensor_sub_},
              {"tc_tensor_mul_", tc_tensor_mul_},
              {"tc_tensor_div_", tc_tensor_div_}};
    for (size_t k = 0; k < sizeof ip / sizeof ip[0]; k++) {
        CHECK_STATUS(ip[k].fn(NULL, f), TC_ERROR_INVALID_ARGUMENT);
        CHECK(names(ip[k].name) && says("self"));
        CHECK_STATUS(ip[k].fn(f, NULL), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(ip[k].fn(dead, f), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(ip[k].fn(i, f), TC_ERROR_DTYPE);
        CHECK(names(ip[k].name));
        CHECK_STATUS(ip[k].fn(f, four), TC_ERROR_SHAPE);
    }
    CHECK_STATUS(tc_tensor_fill_(NULL, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_fill_(dead, 1), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_fill_(i, INFINITY), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_fill_"));

    static const struct {
        const char *name;
        reduce_op fn;
        bool floating_only;
    } red[] = {{"tc_tensor_prod", tc_tensor_prod, false},
               {"tc_tensor_logsumexp", tc_tensor_logsumexp, false},
               {"tc_tensor_any", tc_tensor_any, false},
               {"tc_tensor_all", tc_tensor_all, false}};
    for (size_t k = 0; k < sizeof red / sizeof red[0]; k++) {
        CHECK_STATUS(red[k].fn(NULL, 0, false, &o), TC_ERROR_INVALID_ARGUMENT);
        CHECK(names(red[k].name));
        CHECK_STATUS(red[k].fn(dead, 0, false, &o), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(red[k].fn(f, 0, false, NULL), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(red[k].fn(f, 2, false, &o), TC_ERROR_INVALID_ARGUMENT);
        CHECK(names(red[k].name) && says("out of range"));
        CHECK_STATUS(red[k].fn(f, -3, false, &o), TC_ERROR_INVALID_ARGUMENT);
    }
    for (int is_std = 0; is_std < 2; is_std++) {
        tc_status (*fn)(const tc_tensor *, int, int64_t, bool,
                        tc_tensor **) = is_std ? tc_tensor_std : tc_tensor_var;
        const char *name = is_std ? "tc_tensor_std" : "tc_tensor_var";
        CHECK_STATUS(fn(NULL, 0, 1, false, &o), TC_ERROR_INVALID_ARGUMENT);
        CHECK(names(name));
        CHECK_STATUS(fn(dead, 0, 1, false, &o), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(fn(f, 0, 1, false, NULL), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(fn(f, 5, 1, false, &o), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(fn(i, 0, 1, false, &o), TC_ERROR_DTYPE);
        CHECK(names(name) && says("int32"));
    }
    CHECK_STATUS(tc_tensor_norm(NULL, 2, 0, false, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_norm(dead, 2, 0, false, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_norm(f, 2, 0, false, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_norm(f, 2, 9, false, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_norm(f, NAN, 0, false, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_norm(i, 2, 0, false, &o), TC_ERROR_DTYPE);
    CHECK(names("tc_tensor_norm"));
    CHECK_STATUS(tc_tensor_cumsum(NULL, 0, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_cumsum(dead, 0, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_cumsum(f, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_cumsum(f, 2, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_cumsum(f, TC_ALL_DIMS, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(names("tc_tensor_cumsum") && says("TC_ALL_DIMS"));
    for (int is_max = 0; is_max < 2; is_max++) {
        tc_status (*fn)(const tc_tensor *, int, bool, tc_tensor **,
                        tc_tensor **) = is_max ? tc_tensor_max_dim : tc_tensor_min_dim;
        const char *name = is_max ? "tc_tensor_max_dim" : "tc_tensor_min_dim";
        CHECK_STATUS(fn(NULL, 0, false, &o, &o2), TC_ERROR_INVALID_ARGUMENT);
        CHECK(names(name));
        CHECK_STATUS(fn(dead, 0, false, &o, &o2), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(fn(f, 0, false, NULL, &o2), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(fn(f, 0, false, &o, NULL), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(fn(f, 2, false, &o, &o2), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(fn(f, TC_ALL_DIMS, false, &o, &o2), TC_ERROR_INVALID_ARGUMENT);
    }
    CHECK(o == NULL && o2 == NULL);
    tc_tensor_release(f), tc_tensor_release(i), tc_tensor_release(b), tc_tensor_release(four);
}

int main(void)
{
    tc_test_init();
    test_null_out();
    test_out_untouched();
    test_overflowing_shapes();
    test_narrow();
    test_copy_overlap();
    test_full_values();
    test_dtype_refusals();
    test_handles();
    test_device_rule();
    test_messages();
    test_new_ops();
    return TC_TEST_DONE();
}
