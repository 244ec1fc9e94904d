/* Shared by test_jit.c (CPU) and test_jit_cuda.c (GPU): jiterator functions
 * run on one device and compared, bit for bit, with tcuda's built-in
 * element-wise ops on the same random inputs there: every dtype, broadcast,
 * strided, 0-d, empty and mixed-dtype inputs, scalars, multi-output and
 * given outputs; and jc_thread_call, one thread's create-and-call. The
 * reference is independent: the built-in ops do not go
 * through jiterator. */
#ifndef TC_JIT_CHECK_H
#define TC_JIT_CHECK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tc_test.h"

static const char jc_add[] = "template <typename T> T jadd(T x, T y) { return x + y; }";
static const char jc_mul[] = "template <typename T> T jmul(T x, T y) { return x * y; }";
static const char jc_axpy[] =
    "template <typename T> T axpy(T x, T y, T alpha) { return x + alpha * y; }";
static const char jc_sumdiff[] =
    "template <typename T> void sumdiff(T x, T y, T &s, T &d) { s = x + y; d = x - y; }";

/* Random non-zero values fitting every dtype, as `dt` on `dev`. */
static tc_tensor *jc_rand(tc_device dev, tc_dtype dt, int ndim, const int64_t *sizes)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= sizes[i];
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        double r = tc_test_rand_uniform();
        if (dt == TC_BOOL)
            v[i] = r < 0.5;
        else if (dt == TC_UINT8)
            v[i] = 1 + (int)(r * 120);
        else if (tc_dtype_is_floating(dt))
            v[i] = (r - 0.5) * 40 + (r < 0.5 ? -0.25 : 0.25);
        else
            v[i] = (r < 0.5 ? -1 : 1) * (1 + (int)(r * 60));
    }
    tc_tensor *h = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, ndim, sizes, TC_FLOAT64, (tc_device){TC_CPU, -1}, &h));
    CHECK_OK(tc_tensor_to(h, dev, dt, false, &t));
    tc_tensor_release(h);
    free(v);
    return t;
}

/* Same dtype, shape and bytes. */
static bool jc_same(const tc_tensor *a, const tc_tensor *b)
{
    if (!a || !b || tc_tensor_dtype(a) != tc_tensor_dtype(b) ||
        tc_tensor_ndim(a) != tc_tensor_ndim(b))
        return false;
    for (int d = 0; d < tc_tensor_ndim(a); d++)
        if (tc_tensor_size(a, d) != tc_tensor_size(b, d))
            return false;
    int64_t n = tc_tensor_numel(a);
    size_t bytes = (size_t)(n > 0 ? n : 1) * tc_dtype_size(tc_tensor_dtype(a));
    void *x = calloc(1, bytes), *y = calloc(1, bytes);
    bool ok = tc_tensor_to_host(a, tc_tensor_dtype(a), x) == TC_OK &&
              tc_tensor_to_host(b, tc_tensor_dtype(b), y) == TC_OK && !memcmp(x, y, bytes);
    free(x);
    free(y);
    return ok;
}

typedef tc_status (*jc_builtin)(const tc_tensor *, const tc_tensor *, tc_tensor **);

/* fn(a, b) against builtin(a, b). */
static void jc_check_binary(tc_jit_fn *fn, jc_builtin builtin, const tc_tensor *a,
                            const tc_tensor *b, const char *what)
{
    const tc_tensor *in[2] = {a, b};
    tc_tensor *out[1] = {NULL}, *ref = NULL;
    CHECK_OK(tc_jit_fn_call(fn, in, 2, NULL, out));
    CHECK_OK(builtin(a, b, &ref));
    if (!jc_same(out[0], ref)) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s: %s of %s and %s differs from the built-in op", what,
                 tc_jit_fn_name(fn), tc_dtype_string(tc_tensor_dtype(a)),
                 tc_dtype_string(tc_tensor_dtype(b)));
        tc_test_fail_at(__FILE__, __LINE__, msg);
    } else {
        tc_test_passed++;
    }
    tc_tensor_release(out[0]);
    tc_tensor_release(ref);
}

/* One thread's work: create fn from code and check fn(x, x) (the inputs
 * are made by the main thread: the test's random numbers are not
 * thread-safe). */
typedef struct jc_thread_job {
    const char *code;
    tc_tensor *x;
    bool ok;
} jc_thread_job;

static void *jc_thread_call(void *arg)
{
    jc_thread_job *j = arg;
    tc_jit_fn *fn = NULL;
    tc_tensor *out[1] = {NULL}, *ref = NULL;
    const tc_tensor *in[2] = {j->x, j->x};
    j->ok = tc_jit_fn_create(j->code, NULL, &fn) == TC_OK &&
            tc_jit_fn_call(fn, in, 2, NULL, out) == TC_OK &&
            tc_tensor_add(j->x, j->x, &ref) == TC_OK && jc_same(out[0], ref);
    if (!j->ok)
        fprintf(stderr, "thread: %s\n", tc_last_error());
    tc_tensor_release(out[0]);
    tc_tensor_release(ref);
    tc_jit_fn_destroy(fn);
    return NULL;
}

static void jc_parity_suite(tc_device dev)
{
    tc_jit_fn *add = NULL, *mul = NULL, *axpy = NULL, *sd = NULL;
    CHECK_OK(tc_jit_fn_create(jc_add, NULL, &add));
    CHECK_OK(tc_jit_fn_create(jc_mul, NULL, &mul));
    tc_jit_options o = {.scalars = "alpha=1.0"};
    CHECK_OK(tc_jit_fn_create(jc_axpy, &o, &axpy));
    CHECK_OK(tc_jit_fn_create_multi_output(jc_sumdiff, 2, NULL, &sd));
    if (!add || !mul || !axpy || !sd)
        return;

    /* every dtype, same shape */
    for (int d = 0; d < TC_NUM_DTYPES; d++) {
        int64_t s[2] = {5, 37};
        tc_tensor *a = jc_rand(dev, (tc_dtype)d, 2, s), *b = jc_rand(dev, (tc_dtype)d, 2, s);
        jc_check_binary(add, tc_tensor_add, a, b, "same shape");
        jc_check_binary(mul, tc_tensor_mul, a, b, "same shape");
        tc_tensor_release(a);
        tc_tensor_release(b);
    }
    /* long enough for the vector path, with a tail */
    {
        int64_t s[1] = {4099};
        tc_tensor *a = jc_rand(dev, TC_FLOAT32, 1, s), *b = jc_rand(dev, TC_FLOAT32, 1, s);
        jc_check_binary(add, tc_tensor_add, a, b, "4099 float32");
        tc_tensor *a16 = jc_rand(dev, TC_FLOAT16, 1, s), *b16 = jc_rand(dev, TC_FLOAT16, 1, s);
        jc_check_binary(mul, tc_tensor_mul, a16, b16, "4099 float16");
        /* unaligned: a view starting one element in */
        tc_tensor *an = NULL, *bn = NULL;
        CHECK_OK(tc_tensor_narrow(a, 0, 1, 4098, &an));
        CHECK_OK(tc_tensor_narrow(b, 0, 0, 4098, &bn));
        jc_check_binary(add, tc_tensor_add, an, bn, "unaligned float32");
        tc_tensor_release(an);
        tc_tensor_release(bn);
        tc_tensor_release(a);
        tc_tensor_release(b);
        tc_tensor_release(a16);
        tc_tensor_release(b16);
    }
    /* broadcast, strided, 0-d, empty, mixed dtypes */
    tc_dtype some[] = {TC_FLOAT32, TC_FLOAT16, TC_BFLOAT16, TC_FLOAT64, TC_INT32, TC_UINT8};
    for (int k = 0; k < 6; k++) {
        tc_dtype dt = some[k];
        int64_t s1[3] = {4, 1, 3}, s2[2] = {5, 1}, s3[2] = {6, 5}, s4[2] = {5, 6};
        tc_tensor *a = jc_rand(dev, dt, 3, s1), *b = jc_rand(dev, dt, 2, s2);
        jc_check_binary(add, tc_tensor_add, a, b, "broadcast");
        jc_check_binary(mul, tc_tensor_mul, b, a, "broadcast");
        tc_tensor *c = jc_rand(dev, dt, 2, s3), *ct = NULL, *e = jc_rand(dev, dt, 2, s4);
        CHECK_OK(tc_tensor_transpose(c, 0, 1, &ct));
        jc_check_binary(add, tc_tensor_add, ct, e, "strided");
        jc_check_binary(mul, tc_tensor_mul, e, ct, "strided");
        tc_tensor *z = jc_rand(dev, TC_FLOAT64, 0, NULL);
        jc_check_binary(add, tc_tensor_add, z, e, "0-d float64 with a tensor");
        tc_tensor *z2 = jc_rand(dev, dt, 0, NULL);
        jc_check_binary(mul, tc_tensor_mul, z2, z, "two 0-d");
        int64_t s5[2] = {0, 3}, s6[1] = {3};
        tc_tensor *em = jc_rand(dev, dt, 2, s5), *r3 = jc_rand(dev, dt, 1, s6);
        jc_check_binary(add, tc_tensor_add, em, r3, "empty");
        tc_tensor *f16 = jc_rand(dev, TC_FLOAT16, 2, s4), *i8 = jc_rand(dev, TC_INT8, 2, s4);
        jc_check_binary(add, tc_tensor_add, e, f16, "mixed with float16");
        jc_check_binary(mul, tc_tensor_mul, i8, e, "mixed with int8");
        tc_tensor *rel[] = {a, b, c, ct, e, z, z2, em, r3, f16, i8};
        for (int i = 0; i < 11; i++)
            tc_tensor_release(rel[i]);
    }
    /* scalars: the default (alpha = 1 is exact: x + y) and a given value */
    for (int k = 0; k < 4; k++) {
        int64_t s[1] = {1000};
        tc_tensor *x = jc_rand(dev, some[k], 1, s), *y = jc_rand(dev, some[k], 1, s);
        const tc_tensor *in[2] = {x, y};
        tc_tensor *out[1] = {NULL}, *ref = NULL, *two = NULL, *ty = NULL, *ref2 = NULL;
        CHECK_OK(tc_jit_fn_call(axpy, in, 2, NULL, out));
        CHECK_OK(tc_tensor_add(x, y, &ref));
        CHECK(jc_same(out[0], ref));
        tc_tensor_release(out[0]);
        out[0] = NULL;
        double alpha = 2.0;
        CHECK_OK(tc_jit_fn_call(axpy, in, 2, &alpha, out));
        CHECK_OK(tc_tensor_full(0, NULL, 2.0, some[k], dev, &two));
        CHECK_OK(tc_tensor_mul(y, two, &ty));
        CHECK_OK(tc_tensor_add(x, ty, &ref2));
        CHECK(jc_same(out[0], ref2));
        tc_tensor *rel[] = {x, y, out[0], ref, two, ty, ref2};
        for (int i = 0; i < 7; i++)
            tc_tensor_release(rel[i]);
    }
    /* multi-output, and outputs given by the caller */
    tc_dtype mo[] = {TC_FLOAT32, TC_INT64, TC_BFLOAT16};
    for (int k = 0; k < 3; k++) {
        int64_t s[2] = {3, 50};
        tc_tensor *x = jc_rand(dev, mo[k], 2, s), *y = jc_rand(dev, mo[k], 2, s);
        const tc_tensor *in[2] = {x, y};
        tc_tensor *out[2] = {NULL, NULL}, *rs = NULL, *rd = NULL;
        CHECK_OK(tc_jit_fn_call(sd, in, 2, NULL, out));
        CHECK_OK(tc_tensor_add(x, y, &rs));
        CHECK_OK(tc_tensor_sub(x, y, &rd));
        CHECK(jc_same(out[0], rs));
        CHECK(jc_same(out[1], rd));
        /* given: one of another dtype (converted), one a strided view */
        tc_tensor *g64 = NULL, *base = NULL, *gt = NULL, *rs64 = NULL;
        int64_t st[2] = {50, 3};
        CHECK_OK(tc_tensor_zeros(2, s, TC_FLOAT64, dev, &g64));
        CHECK_OK(tc_tensor_zeros(2, st, mo[k], dev, &base));
        CHECK_OK(tc_tensor_transpose(base, 0, 1, &gt));
        tc_tensor *given[2] = {g64, gt};
        CHECK_OK(tc_jit_fn_call(sd, in, 2, NULL, given));
        CHECK(given[0] == g64 && given[1] == gt);
        CHECK_OK(tc_tensor_to(rs, dev, TC_FLOAT64, false, &rs64));
        CHECK(jc_same(g64, rs64));
        CHECK(jc_same(gt, rd));
        tc_tensor *rel[] = {x, y, out[0], out[1], rs, rd, g64, base, gt, rs64};
        for (int i = 0; i < 10; i++)
            tc_tensor_release(rel[i]);
    }
    CHECK_OK(tc_jit_fn_destroy(add));
    CHECK_OK(tc_jit_fn_destroy(mul));
    CHECK_OK(tc_jit_fn_destroy(axpy));
    CHECK_OK(tc_jit_fn_destroy(sd));
}

#endif
