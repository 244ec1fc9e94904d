/* layer_norm's fused pieces (nn_backward.h): tc_nn_add_layer_norm, a
 * residual add and the layer_norm after it in one pass with the result in
 * the next linear's dtype, and tc_nn_layer_norm_backward_into's dx_cast, the
 * 16-bit copy of dx written beside it.
 *   - against the ops it joins, on the same device: tc_tensor_add, then
 *     tc_nn_native_layer_norm, then tc_tensor_to(out_dtype): the sum, the
 *     statistics and the result bit for bit, for float32 x with float32,
 *     bfloat16 and float16 residuals and outputs, for 16-bit and float64 x
 *     with their own dtype, with and without weight and bias, over rows
 *     that take a warp and rows that take a block;
 *   - against a double-precision loop written here, within the dtype's
 *     tolerance;
 *   - no residual: the norm of x alone, in out_dtype;
 *   - bad input: each refused with a status and a message, nothing made;
 *   - dx_cast: the same bits as dx cast after the call, dense or strided,
 *     with accumulate and without; its bad input.
 * The same on the GPU when there is one, then the GPU against the CPU on
 * the same inputs. */
#include <stdint.h>
#include <string.h>

#include "nn_check.h"

/* The fused call's four results against the three ops it joins. */
static void against_ops(const char *what, tc_tensor *x, tc_tensor *res, int64_t n, tc_tensor *w,
                        tc_tensor *b, tc_dtype ot, tc_tensor *sum, tc_tensor *out, tc_tensor *mean,
                        tc_tensor *rstd)
{
    tc_tensor *s2 = NULL, *y2 = NULL, *m2 = NULL, *r2 = NULL, *o2 = NULL;
    if (res)
        CHECK_OK(tc_tensor_add(x, res, &s2));
    CHECK_OK(tc_nn_native_layer_norm(res ? s2 : x, 1, &n, w, b, 1e-5, &y2, &m2, &r2));
    CHECK_OK(tc_tensor_to(y2, tc_tensor_device(x), ot, false, &o2));
    char name[200];
    if (res) {
        snprintf(name, sizeof name, "%.150s: sum", what);
        near_tensor(name, sum, s2, 0);
    }
    snprintf(name, sizeof name, "%.150s: out", what);
    near_tensor(name, out, o2, 0);
    snprintf(name, sizeof name, "%.150s: mean", what);
    near_tensor(name, mean, m2, 0);
    snprintf(name, sizeof name, "%.150s: rstd", what);
    near_tensor(name, rstd, r2, 0);
    tc_tensor *all[] = {s2, y2, m2, r2, o2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

/* out against a double loop over the rows of x + res (as rounded to x's
 * dtype: the values the call normalized, read back from sum). */
static void against_loop(const char *what, tc_tensor *src, const double *w, const double *b,
                         int64_t m, int64_t n, tc_tensor *out)
{
    double *s = tc_test_values(src), *want = malloc(sizeof(double) * (size_t)(m * n));
    for (int64_t r = 0; r < m; r++) {
        double mean = 0, var = 0;
        for (int64_t j = 0; j < n; j++)
            mean += s[r * n + j];
        mean /= (double)n;
        for (int64_t j = 0; j < n; j++)
            var += (s[r * n + j] - mean) * (s[r * n + j] - mean);
        double rstd = 1 / sqrt(var / (double)n + 1e-5);
        for (int64_t j = 0; j < n; j++)
            want[r * n + j] = (s[r * n + j] - mean) * rstd * (w ? w[j] : 1) + (b ? b[j] : 0);
    }
    near_ref(what, tc_tensor_dtype(out), out, want, m * n, 2);
    free(s), free(want);
}

typedef struct combo {
    tc_dtype x, res, out; /* res TC_NUM_DTYPES: no residual */
} combo;

static const combo COMBOS[] = {
    {TC_FLOAT32, TC_FLOAT32, TC_FLOAT32},      {TC_FLOAT32, TC_BFLOAT16, TC_FLOAT32},
    {TC_FLOAT32, TC_FLOAT16, TC_FLOAT32},      {TC_FLOAT32, TC_FLOAT32, TC_BFLOAT16},
    {TC_FLOAT32, TC_BFLOAT16, TC_BFLOAT16},    {TC_FLOAT32, TC_FLOAT16, TC_FLOAT16},
    {TC_FLOAT32, TC_BFLOAT16, TC_FLOAT16},     {TC_BFLOAT16, TC_BFLOAT16, TC_BFLOAT16},
    {TC_FLOAT16, TC_FLOAT16, TC_FLOAT16},      {TC_FLOAT64, TC_FLOAT64, TC_FLOAT64},
    {TC_FLOAT32, TC_NUM_DTYPES, TC_BFLOAT16},  {TC_FLOAT32, TC_NUM_DTYPES, TC_FLOAT32},
    {TC_BFLOAT16, TC_NUM_DTYPES, TC_BFLOAT16},
};
enum { NCOMBOS = sizeof COMBOS / sizeof COMBOS[0] };

/* One shape, every combination; with keep, the results of each into
 * keep[combo][0..3] (sum, out, mean, rstd) for the devices' comparison. */
static void run_shape(tc_device dev, int64_t m, int64_t n, bool affine, const double *xv,
                      const double *rv, const double *wv, const double *bv, tc_tensor *keep[][4])
{
    int64_t sz[2] = {m, n};
    for (int c = 0; c < NCOMBOS; c++) {
        combo k = COMBOS[c];
        bool has_res = k.res != TC_NUM_DTYPES;
        tc_tensor *x = tensor_of(dev, k.x, 2, sz, xv),
                  *res = has_res ? tensor_of(dev, k.res, 2, sz, rv) : NULL;
        tc_tensor *w = affine ? tensor_of(dev, k.x, 1, &n, wv) : NULL;
        tc_tensor *b = affine ? tensor_of(dev, k.x, 1, &n, bv) : NULL;
        tc_tensor *sum = NULL, *out = NULL, *mean = NULL, *rstd = NULL;
        CHECK_OK(tc_nn_add_layer_norm(x, res, 1, &n, w, b, 1e-5, k.out, has_res ? &sum : NULL, &out,
                                      &mean, &rstd));
        char what[160];
        snprintf(what, sizeof what, "add_layer_norm %s x, %s residual, %s out, [%lld, %lld]%s",
                 tc_dtype_string(k.x), has_res ? tc_dtype_string(k.res) : "no",
                 tc_dtype_string(k.out), (long long)m, (long long)n, affine ? ", affine" : "");
        CHECK(out && tc_tensor_dtype(out) == k.out && tc_tensor_ndim(out) == 2);
        CHECK(!has_res || (sum && tc_tensor_dtype(sum) == k.x));
        against_ops(what, x, res, n, w, b, k.out, sum, out, mean, rstd);
        against_loop(what, has_res ? sum : x, affine ? wv : NULL, affine ? bv : NULL, m, n, out);
        tc_tensor *made[4] = {sum, out, mean, rstd};
        for (int i = 0; i < 4; i++) {
            if (keep)
                keep[c][i] = made[i];
            else
                tc_tensor_release(made[i]);
        }
        tc_tensor_release(x), tc_tensor_release(res), tc_tensor_release(w), tc_tensor_release(b);
    }
}

static void release_kept(tc_tensor *keep[][4])
{
    for (int c = 0; c < NCOMBOS; c++)
        for (int i = 0; i < 4; i++)
            tc_tensor_release(keep[c][i]);
}

/* Rows a warp normalizes (96), rows a block does (3000) and rows the quad
 * kernel holds in registers (768), odd counts of them; on the GPU too, then
 * the GPU's results against the CPU's. */
static void test_values(void)
{
    static const struct {
        int64_t m, n;
        bool affine;
    } shapes[] = {{7, 96, true}, {5, 3000, true}, {3, 37, false}, {6, 768, true}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t m = shapes[s].m, n = shapes[s].n;
        double *xv = rand_doubles(m * n, -3, 4), *rv = rand_doubles(m * n, -2, 2);
        double *wv = rand_doubles(n, 0.5, 1.5), *bv = rand_doubles(n, -1, 1);
        if (!tc_is_available()) {
            run_shape(CPU, m, n, shapes[s].affine, xv, rv, wv, bv, NULL);
        } else {
            tc_tensor *cpu[NCOMBOS][4], *gpu[NCOMBOS][4];
            run_shape(CPU, m, n, shapes[s].affine, xv, rv, wv, bv, cpu);
            run_shape(GPU, m, n, shapes[s].affine, xv, rv, wv, bv, gpu);
            static const char *names[4] = {"sum", "out", "mean", "rstd"};
            for (int c = 0; c < NCOMBOS; c++)
                for (int i = 0; i < 4; i++) {
                    if (!cpu[c][i])
                        continue;
                    /* a float32 or float64 sum is one correctly rounded add on
                     * both (16-bit ones go through float32 on the GPU); the rest
                     * within tolerance */
                    char what[120];
                    tc_dtype xt = COMBOS[c].x;
                    double mul = i == 0 && (xt == TC_FLOAT32 || xt == TC_FLOAT64) ? 0 : 2;
                    snprintf(what, sizeof what, "add_layer_norm combo %d %s, GPU against CPU", c,
                             names[i]);
                    double *want = tc_test_values(cpu[c][i]);
                    near_ref(what, tc_tensor_dtype(cpu[c][i]), gpu[c][i], want,
                             tc_tensor_numel(cpu[c][i]), mul);
                    free(want);
                }
            release_kept(cpu);
            release_kept(gpu);
        }
        free(xv), free(rv), free(wv), free(bv);
    }
}

/* Bad input on dev: each refused with its status, nothing made. */
static void test_bad_input(tc_device dev)
{
    int64_t sz[2] = {4, 8}, n = 8, n5 = 5;
    tc_tensor *x = NULL, *r = NULL, *rs = NULL, *r64 = NULL, *xi = NULL, *dead = NULL, *w5 = NULL;
    CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT32, dev, &x));
    CHECK_OK(tc_tensor_zeros(2, sz, TC_BFLOAT16, dev, &r));
    int64_t other[2] = {4, 9};
    CHECK_OK(tc_tensor_zeros(2, other, TC_FLOAT32, dev, &rs));
    CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT64, dev, &r64));
    CHECK_OK(tc_tensor_zeros(2, sz, TC_INT32, dev, &xi));
    CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT32, dev, &dead));
    CHECK_OK(tc_tensor_zeros(1, &n5, TC_FLOAT32, dev, &w5));
    tc_tensor_release(dead); /* a freed handle */
    tc_tensor *sum = NULL, *out = NULL, *mean = NULL, *rstd = NULL;
    const tc_dtype bf = TC_BFLOAT16;
    CHECK_STATUS(
        tc_nn_add_layer_norm(NULL, r, 1, &n, NULL, NULL, 1e-5, bf, &sum, &out, &mean, &rstd),
        TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_nn_add_layer_norm"));
    CHECK_STATUS(
        tc_nn_add_layer_norm(dead, r, 1, &n, NULL, NULL, 1e-5, bf, &sum, &out, &mean, &rstd),
        TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(
        tc_nn_add_layer_norm(x, dead, 1, &n, NULL, NULL, 1e-5, bf, &sum, &out, &mean, &rstd),
        TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(
        tc_nn_add_layer_norm(xi, NULL, 1, &n, NULL, NULL, 1e-5, TC_INT32, NULL, &out, NULL, NULL),
        TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_add_layer_norm(x, r, 1, &n, NULL, NULL, 1e-5, bf, NULL, &out, NULL, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "sum"));
    CHECK_STATUS(tc_nn_add_layer_norm(x, NULL, 1, &n, NULL, NULL, 1e-5, bf, &sum, &out, NULL, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_add_layer_norm(x, r, 1, &n, NULL, NULL, 1e-5, bf, &sum, NULL, NULL, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_add_layer_norm(x, rs, 1, &n, NULL, NULL, 1e-5, bf, &sum, &out, NULL, NULL),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_add_layer_norm(x, r64, 1, &n, NULL, NULL, 1e-5, bf, &sum, &out, NULL, NULL),
                 TC_ERROR_DTYPE);
    CHECK(strstr(tc_last_error(), "residual"));
    CHECK_STATUS(
        tc_nn_add_layer_norm(x, r, 1, &n, NULL, NULL, 1e-5, TC_FLOAT64, &sum, &out, NULL, NULL),
        TC_ERROR_DTYPE);
    CHECK(strstr(tc_last_error(), "out_dtype"));
    CHECK_STATUS(
        tc_nn_add_layer_norm(x, r, 1, &n, NULL, NULL, 1e-5, (tc_dtype)99, &sum, &out, NULL, NULL),
        TC_ERROR_DTYPE);
    /* bfloat16 x takes neither a float32 residual nor a float32 output */
    CHECK_STATUS(tc_nn_add_layer_norm(r, x, 1, &n, NULL, NULL, 1e-5, bf, &sum, &out, NULL, NULL),
                 TC_ERROR_DTYPE);
    CHECK_STATUS(
        tc_nn_add_layer_norm(r, NULL, 1, &n, NULL, NULL, 1e-5, TC_FLOAT32, NULL, &out, NULL, NULL),
        TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_add_layer_norm(x, r, 1, &n5, NULL, NULL, 1e-5, bf, &sum, &out, NULL, NULL),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_add_layer_norm(x, r, 1, &n, w5, NULL, 1e-5, bf, &sum, &out, NULL, NULL),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_add_layer_norm(x, r, 0, &n, NULL, NULL, 1e-5, bf, &sum, &out, NULL, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    /* a normalized shape whose product overflows */
    const int64_t huge[2] = {INT64_MAX, 4};
    CHECK_STATUS(tc_nn_add_layer_norm(x, r, 2, huge, NULL, NULL, 1e-5, bf, &sum, &out, NULL, NULL),
                 TC_ERROR_SHAPE);
    CHECK(!sum && !out && !mean && !rstd);
    if (dev.type == TC_CUDA) { /* a residual on the other device */
        tc_tensor *rc = NULL;
        CHECK_OK(tc_tensor_zeros(2, sz, TC_BFLOAT16, CPU, &rc));
        CHECK_STATUS(
            tc_nn_add_layer_norm(x, rc, 1, &n, NULL, NULL, 1e-5, bf, &sum, &out, NULL, NULL),
            TC_ERROR_DEVICE_MISMATCH);
        CHECK(!sum && !out);
        tc_tensor_release(rc);
    }
    tc_tensor *all[] = {x, r, rs, r64, xi, w5};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

/* dx_cast of float32 x against dx cast after the call: the same bits. */
static void test_dx_cast(tc_device dev)
{
    static const int64_t shapes[][2] = {{6, 10}, {3, 1500}, {2100, 40}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t m = shapes[k][0], n = shapes[k][1], sz[2] = {m, n}, tsz[2] = {n, m};
        double *xv = rand_doubles(m * n, -2, 3), *gv = rand_doubles(m * n, -1, 1);
        double *wv = rand_doubles(n, 0.5, 1.5), *dv = rand_doubles(m * n, -1, 1);
        tc_tensor *x = tensor_of(dev, TC_FLOAT32, 2, sz, xv),
                  *w = tensor_of(dev, TC_FLOAT32, 1, &n, wv);
        tc_tensor *g = tensor_of(dev, TC_BFLOAT16, 2, sz, gv);
        tc_tensor *y = NULL, *mean = NULL, *rstd = NULL;
        CHECK_OK(tc_nn_native_layer_norm(x, 1, &n, w, NULL, 1e-5, &y, &mean, &rstd));
        static const tc_dtype casts[2] = {TC_BFLOAT16, TC_FLOAT16};
        for (int c = 0; c < 2; c++)
            for (int acc = 0; acc < 2; acc++)
                for (int strided = 0; strided < 2; strided++) {
                    tc_tensor *dx = tensor_of(dev, TC_FLOAT32, 2, sz, dv), *low = NULL, *lt = NULL;
                    if (strided) { /* the transpose of an [n, m] tensor */
                        CHECK_OK(tc_tensor_zeros(2, tsz, casts[c], dev, &lt));
                        CHECK_OK(tc_tensor_transpose(lt, 0, 1, &low));
                    } else {
                        CHECK_OK(tc_tensor_zeros(2, sz, casts[c], dev, &low));
                    }
                    CHECK_OK(tc_nn_layer_norm_backward_into(g, x, 1, &n, mean, rstd, w, acc, dx,
                                                            NULL, NULL, low));
                    tc_tensor *want = NULL;
                    CHECK_OK(tc_tensor_to(dx, dev, casts[c], false, &want));
                    char what[120];
                    snprintf(what, sizeof what,
                             "layer_norm_backward_into dx_cast %s [%lld, %lld]%s%s",
                             tc_dtype_string(casts[c]), (long long)m, (long long)n,
                             acc ? " accumulated" : "", strided ? " strided" : "");
                    near_tensor(what, low, want, 0);
                    tc_tensor_release(dx), tc_tensor_release(low), tc_tensor_release(lt);
                    tc_tensor_release(want);
                }
        /* refusals: dx_cast without dx, of a wrong dtype or shape, for
         * non-float32 x, or sharing memory with an input */
        int64_t bad[2] = {m, n + 1};
        tc_tensor *dx = tensor_of(dev, TC_FLOAT32, 2, sz, dv), *l64 = NULL, *lbad = NULL;
        tc_tensor *lok = NULL;
        CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT64, dev, &l64));
        CHECK_OK(tc_tensor_zeros(2, bad, TC_BFLOAT16, dev, &lbad));
        CHECK_OK(tc_tensor_zeros(2, sz, TC_BFLOAT16, dev, &lok));
        double *before = tc_test_values(dx);
        tc_tensor *dw = NULL;
        CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, dev, &dw));
        CHECK_STATUS(
            tc_nn_layer_norm_backward_into(g, x, 1, &n, mean, rstd, w, true, NULL, dw, NULL, lok),
            TC_ERROR_INVALID_ARGUMENT);
        tc_tensor_release(dw);
        CHECK(strstr(tc_last_error(), "dx_cast"));
        CHECK_STATUS(
            tc_nn_layer_norm_backward_into(g, x, 1, &n, mean, rstd, w, true, dx, NULL, NULL, l64),
            TC_ERROR_DTYPE);
        CHECK_STATUS(
            tc_nn_layer_norm_backward_into(g, x, 1, &n, mean, rstd, w, true, dx, NULL, NULL, lbad),
            TC_ERROR_SHAPE);
        CHECK_STATUS(
            tc_nn_layer_norm_backward_into(g, x, 1, &n, mean, rstd, w, true, dx, NULL, NULL, g),
            TC_ERROR_INVALID_ARGUMENT); /* dx_cast is grad_output */
        tc_tensor *dead = NULL;
        CHECK_OK(tc_tensor_zeros(2, sz, TC_BFLOAT16, dev, &dead));
        tc_tensor_release(dead);
        CHECK_STATUS(
            tc_nn_layer_norm_backward_into(g, x, 1, &n, mean, rstd, w, true, dx, NULL, NULL, dead),
            TC_ERROR_INVALID_HANDLE);
        near_ref("refused: dx unchanged", TC_FLOAT32, dx, before, m * n, 0);
        free(before);
        tc_tensor *all[] = {x, w, g, y, mean, rstd, dx, l64, lbad, lok};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            tc_tensor_release(all[i]);
        free(xv), free(gv), free(wv), free(dv);
    }
    /* bfloat16 x: no cast to make */
    int64_t sz[2] = {2, 8}, n = 8;
    tc_tensor *x = NULL, *dx = NULL, *low = NULL, *y = NULL, *mean = NULL, *rstd = NULL;
    CHECK_OK(tc_tensor_ones(2, sz, TC_BFLOAT16, dev, &x));
    CHECK_OK(tc_tensor_zeros(2, sz, TC_BFLOAT16, dev, &dx));
    CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT16, dev, &low));
    CHECK_OK(tc_nn_native_layer_norm(x, 1, &n, NULL, NULL, 1e-5, &y, &mean, &rstd));
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(x, x, 1, &n, mean, rstd, NULL, true, dx, NULL, NULL, low),
        TC_ERROR_DTYPE);
    tc_tensor *all[] = {x, dx, low, y, mean, rstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

int main(void)
{
    tc_test_init();
    test_values();
    test_bad_input(CPU);
    test_dx_cast(CPU);
    if (tc_is_available()) {
        test_bad_input(GPU);
        test_dx_cast(GPU);
        CHECK_OK(tc_synchronize(-1));
    } else {
        printf("no GPU: the GPU checks are skipped\n");
    }
    return TC_TEST_DONE();
}
