/* Random fills of CPU tensors: a fill gives the numbers a buffer draw from a
 * generator in the same state gives, in row-major order whatever the strides;
 * the offset advances; rand/randn; bad input leaves the generator alone. */
#include <math.h>
#include <stdlib.h>

#include "tc_test.h"

static const tc_device CPU = {TC_CPU, -1};

/* Draws n values of dtype into a buffer from a fresh generator (seed, offset
 * 0) and returns them as doubles: what a fill from that state must give. */
static double *expected(uint64_t seed, int kind, size_t n, tc_dtype dt, double a, double b)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_create(CPU, seed, &g));
    void *buf = malloc(n * 8 + 8);
    tc_status st = kind == 0   ? tc_generator_uniform(g, buf, n, dt, a, b)
                   : kind == 1 ? tc_generator_normal(g, buf, n, dt, a, b)
                   : kind == 2 ? tc_generator_bernoulli(g, buf, n, dt, a)
                               : tc_generator_random_int(g, buf, n, dt, (int64_t)a, (int64_t)b);
    CHECK_OK(st);
    tc_tensor *t = NULL;
    int64_t sz = (int64_t)n;
    CHECK_OK(tc_tensor_from_data(buf, 1, &sz, dt, CPU, &t));
    double *v = tc_test_values(t);
    tc_tensor_release(t);
    free(buf);
    tc_generator_destroy(g);
    return v;
}

static bool same(const double *a, const double *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

static void test_fills_match_buffer_draws(void)
{
    int64_t sz[2] = {37, 29};
    size_t n = 37 * 29;
    struct {
        int kind;
        tc_dtype dt;
        double a, b;
    } cases[] = {{0, TC_FLOAT32, -2, 3},  {0, TC_FLOAT64, 0, 1},   {0, TC_BFLOAT16, 0, 1},
                 {1, TC_FLOAT32, 1, 0.5}, {1, TC_FLOAT16, 0, 1},   {1, TC_FLOAT64, -3, 2},
                 {2, TC_BOOL, 0.3, 0},    {2, TC_FLOAT32, 0.7, 0}, {3, TC_INT32, -50, 50},
                 {3, TC_INT64, 0, 1000},  {3, TC_UINT8, 0, 256},   {3, TC_FLOAT32, -7, 9}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t seed = 1000 + c;
        double *want = expected(seed, cases[c].kind, n, cases[c].dt, cases[c].a, cases[c].b);
        tc_generator *g = NULL;
        CHECK_OK(tc_generator_create(CPU, seed, &g));
        for (int strided = 0; strided < 2; strided++) {
            CHECK_OK(tc_generator_manual_seed(g, seed));
            /* strided: a transposed view of a [29, 37] tensor */
            int64_t tsz[2] = {29, 37};
            tc_tensor *base = NULL, *t = NULL;
            CHECK_OK(tc_tensor_zeros(2, strided ? tsz : sz, cases[c].dt, CPU, &base));
            if (strided) {
                CHECK_OK(tc_tensor_transpose(base, 0, 1, &t));
            } else {
                CHECK_OK(tc_tensor_retain(base));
                t = base;
            }
            CHECK(tc_tensor_is_contiguous(t) == !strided);
            tc_status st = cases[c].kind == 0   ? tc_tensor_uniform_(t, cases[c].a, cases[c].b, g)
                           : cases[c].kind == 1 ? tc_tensor_normal_(t, cases[c].a, cases[c].b, g)
                           : cases[c].kind == 2
                               ? tc_tensor_bernoulli_(t, cases[c].a, g)
                               : tc_tensor_random_(t, (int64_t)cases[c].a, (int64_t)cases[c].b, g);
            CHECK_OK(st);
            double *got = tc_test_values(t); /* row-major order of t, whatever its strides */
            CHECK(same(got, want, (int64_t)n));
            CHECK(tc_test_gen_offset(g) > 0);
            free(got);
            tc_tensor_release(t);
            tc_tensor_release(base);
        }
        tc_generator_destroy(g);
        free(want);
    }
}

static void test_offsets_and_defaults(void)
{
    tc_generator *cpu = NULL;
    CHECK_OK(tc_default_generator(CPU, &cpu));
    CHECK_OK(tc_generator_manual_seed(cpu, 7));
    int64_t sz = 1000;
    tc_tensor *a = NULL, *b = NULL, *e = NULL, *z = NULL;
    CHECK_OK(tc_tensor_empty(1, &sz, TC_FLOAT32, CPU, &a));
    CHECK_OK(tc_tensor_empty(1, &sz, TC_FLOAT32, CPU, &b));
    CHECK_OK(tc_tensor_uniform_(a, 0, 1, NULL)); /* NULL: the CPU default generator */
    uint64_t off = tc_test_gen_offset(cpu);
    CHECK(off == 250); /* 4 float32 per Philox block */
    CHECK_OK(tc_tensor_uniform_(b, 0, 1, NULL));
    CHECK(tc_test_gen_offset(cpu) == 500);
    double *va = tc_test_values(a), *vb = tc_test_values(b);
    CHECK(!same(va, vb, sz));
    double *want = expected(7, 0, 1000, TC_FLOAT32, 0, 1);
    CHECK(same(va, want, sz));
    free(va), free(vb), free(want);
    /* empty tensors draw nothing; a 0-d tensor draws one value */
    int64_t zero = 0;
    CHECK_OK(tc_tensor_empty(1, &zero, TC_FLOAT32, CPU, &e));
    CHECK_OK(tc_tensor_normal_(e, 0, 1, NULL));
    CHECK(tc_test_gen_offset(cpu) == 500);
    CHECK_OK(tc_tensor_empty(0, NULL, TC_FLOAT64, CPU, &z));
    CHECK_OK(tc_tensor_uniform_(z, 5, 6, NULL));
    double v = 0;
    CHECK_OK(tc_tensor_item(z, &v));
    CHECK(v >= 5 && v < 6 && tc_test_gen_offset(cpu) == 501);
    tc_tensor_release(a), tc_tensor_release(b), tc_tensor_release(e), tc_tensor_release(z);
}

static void test_rand_randn(void)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_create(CPU, 2024, &g));
    int64_t sz[2] = {400, 500};
    tc_tensor *u = NULL, *n = NULL;
    CHECK_OK(tc_tensor_rand(2, sz, TC_FLOAT32, CPU, g, &u));
    CHECK_OK(tc_tensor_randn(2, sz, TC_FLOAT64, CPU, g, &n));
    double *vu = tc_test_values(u), *vn = tc_test_values(n);
    double su = 0, sn = 0, sn2 = 0, lo = 1, hi = 0;
    int64_t cnt = 400 * 500;
    for (int64_t i = 0; i < cnt; i++) {
        su += vu[i], sn += vn[i], sn2 += vn[i] * vn[i];
        lo = fmin(lo, vu[i]), hi = fmax(hi, vu[i]);
    }
    /* means within 6 standard errors; the variance within 2% */
    CHECK(lo >= 0 && hi < 1);
    CHECK(fabs(su / (double)cnt - 0.5) < 6 * sqrt(1.0 / 12 / (double)cnt));
    CHECK(fabs(sn / (double)cnt) < 6 / sqrt((double)cnt));
    CHECK(fabs(sn2 / (double)cnt - 1) < 0.02);
    free(vu), free(vn);
    tc_tensor_release(u), tc_tensor_release(n);
    tc_generator_destroy(g);
}

static void test_bad_input(void)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_create(CPU, 5, &g));
    int64_t sz = 16;
    tc_tensor *i = NULL, *f = NULL, *out = NULL;
    CHECK_OK(tc_tensor_zeros(1, &sz, TC_INT32, CPU, &i));
    CHECK_OK(tc_tensor_zeros(1, &sz, TC_FLOAT16, CPU, &f));
    CHECK_STATUS(tc_tensor_uniform_(i, 0, 1, g), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_normal_(i, 0, 1, g), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_uniform_(f, 2, 1, g), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_normal_(f, 0, -1, g), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_bernoulli_(f, 1.5, g), TC_ERROR_INVALID_ARGUMENT);
    /* NaN is named as such, not "negative" or "above hi" */
    CHECK_STATUS(tc_tensor_normal_(f, 0, NAN, g), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "NaN") && !strstr(tc_last_error(), "negative"));
    CHECK_STATUS(tc_tensor_uniform_(f, NAN, 1, g), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "NaN") && !strstr(tc_last_error(), "above"));
    CHECK_STATUS(tc_tensor_uniform_(f, 0, NAN, g), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "NaN") != NULL);
    CHECK_STATUS(tc_tensor_bernoulli_(f, NAN, g), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "NaN") && !strstr(tc_last_error(), "outside"));
    CHECK_STATUS(tc_tensor_bernoulli_(f, 1.0000000000000002, g), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "1.0000000000000002") != NULL);
    CHECK_STATUS(tc_tensor_random_(i, 3, 3, g), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_random_(f, 0, 1 << 20, g), TC_ERROR_INVALID_ARGUMENT); /* > 2^11 */
    CHECK_STATUS(tc_tensor_uniform_(NULL, 0, 1, g), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_rand(1, &sz, TC_INT64, CPU, g, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_randn(1, &sz, TC_FLOAT32, CPU, g, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(out == NULL);
    /* a destroyed generator is refused, not used */
    tc_generator *dead = NULL;
    CHECK_OK(tc_generator_create(CPU, 9, &dead));
    CHECK_OK(tc_generator_destroy(dead));
    CHECK_STATUS(tc_tensor_uniform_(f, 0, 1, dead), TC_ERROR_INVALID_HANDLE);
    CHECK(strstr(tc_last_error(), "destroyed") != NULL);
    CHECK(tc_test_gen_offset(g) == 0); /* nothing drew */
    double v[16];
    CHECK_OK(tc_tensor_to_host(i, TC_FLOAT64, v));
    bool zero = true;
    for (int k = 0; k < 16; k++)
        zero &= v[k] == 0;
    CHECK(zero); /* a refused fill wrote nothing */
    tc_tensor_release(i), tc_tensor_release(f);
    tc_generator_destroy(g);
}

int main(void)
{
    tc_test_init();
    test_fills_match_buffer_draws();
    test_offsets_and_defaults();
    test_rand_randn();
    test_bad_input();
    return TC_TEST_DONE();
}
