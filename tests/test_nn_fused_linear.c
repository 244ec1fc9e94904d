/* tc_nn_linear_add, tc_nn_layer_norm_linear and tc_nn_layer_norm_linear_gelu
 * (nn.h): a linear with the residual add after it or the layer_norm before
 * it in one kernel where the GPU's skinny GEMM takes it.
 *   - against a double-precision loop written here (the norm's output
 *     rounded to the dtype, as a stored norm is, then the linear, the tanh
 *     gelu, the residual), within the dtype's tolerance, on the CPU and on
 *     a GPU, for row counts on both sides of the kernel's limits, norm
 *     weights and biases present or not, 3-d inputs;
 *   - against the ops apart (the test hook off) on a GPU, within the
 *     dtype's rounding, and the fused count going up where the kernel
 *     takes the shape, for the norm only up to 4 rows (never on the CPU, for
 *     float64 or 17 rows, for a broadcast residual or the exact gelu; a
 *     residual with a bias may also go to cuBLASLt's C);
 *   - a chain norm -> linear -> linear + residual captured into a CUDA graph
 *     (programmatic edges between tcuda's kernels) and replayed;
 *   - bad input refused with a status and a message, nothing made. */
#include <string.h>

#include "nn_check.h"
#include "tcuda/graph.h"
#include "tcuda/nn_backward.h"

static double gelu_tanh(double x)
{
    return 0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}

/* v (n values) rounded to dt, as a tensor of dt stores them. */
static void round_to(tc_dtype dt, double *v, int64_t n)
{
    tc_tensor *t = tensor_of(CPU, dt, 1, &n, v);
    double *r = tc_test_values(t);
    memcpy(v, r, sizeof(double) * (size_t)n);
    free(r);
    tc_tensor_release(t);
}

/* layer_norm of x's m rows of k (weight lw, bias lb, each NULL: none) in
 * double, rounded to dt, into h. */
static void ref_norm(tc_dtype dt, const double *x, const double *lw, const double *lb, int64_t m,
                     int64_t k, double eps, double *h)
{
    for (int64_t i = 0; i < m; i++) {
        double mu = 0, var = 0;
        for (int64_t e = 0; e < k; e++)
            mu += x[i * k + e];
        mu /= (double)k;
        for (int64_t e = 0; e < k; e++)
            var += (x[i * k + e] - mu) * (x[i * k + e] - mu);
        double rs = 1 / sqrt(var / (double)k + eps);
        for (int64_t e = 0; e < k; e++)
            h[i * k + e] = (x[i * k + e] - mu) * rs * (lw ? lw[e] : 1) + (lb ? lb[e] : 0);
    }
    round_to(dt, h, m * k);
}

/* Whether the skinny kernel takes m rows of dt (gemm_skinny.cu's rule at
 * these depths, k <= 3,072). */
static bool kernel_takes(tc_dtype dt, int64_t m)
{
    return m <= 16 && (dt == TC_FLOAT16 || dt == TC_BFLOAT16 || (dt == TC_FLOAT32 && m <= 4));
}

static double mul_of(tc_dtype dt) { return dt == TC_FLOAT32 ? 4 : 2; }

/* One case: x [lead.., k] with m rows in all, weight [n, k]. Each of the
 * three calls against the loop; on a GPU against the ops apart and the
 * fused count. */
static void fused_case(tc_device dev, tc_dtype dt, int nd, const int64_t *lead, int64_t k,
                       int64_t n, bool norm_params, bool bias)
{
    int64_t xs[4], os[4], m = 1;
    for (int i = 0; i < nd - 1; i++) {
        xs[i] = os[i] = lead[i];
        m *= lead[i];
    }
    xs[nd - 1] = k;
    os[nd - 1] = n;
    int64_t ws[2] = {n, k};
    double *xv, *wv, *bv = NULL, *rv, *lwv = NULL, *lbv = NULL;
    /* x with a mean and a spread per row, so that the norm does something */
    tc_tensor *x = rnd(dev, nd, xs, dt, -2, 3, &xv), *w = rnd(dev, 2, ws, dt, -0.1, 0.1, &wv);
    tc_tensor *b = bias ? rnd(dev, 1, &n, dt, -1, 1, &bv) : NULL;
    tc_tensor *res = rnd(dev, nd, os, dt, -1, 1, &rv);
    tc_tensor *lw = norm_params ? rnd(dev, 1, &k, dt, 0.5, 1.5, &lwv) : NULL;
    tc_tensor *lb = norm_params ? rnd(dev, 1, &k, dt, -0.5, 0.5, &lbv) : NULL;
    double *h = malloc(sizeof(double) * (size_t)(m * k));
    double *ref = malloc(sizeof(double) * (size_t)(m * n)),
           *act = malloc(sizeof(double) * (size_t)(m * n));
    bool gpu = dev.type == TC_CUDA, takes = gpu && kernel_takes(dt, m);
    bool takes_norm = takes && m <= 4; /* blas_lt.c's tc__cuda_gemm_fused says why */
    const double eps = 1e-5;
    char what[160];

    /* residual + linear */
    ref_linear(xv, wv, bv, m, k, n, ref);
    for (int64_t i = 0; i < m * n; i++)
        ref[i] += rv[i];
    uint64_t c0 = tc__nn_fused_linear_count();
    tc_tensor *y = NULL, *apart = NULL;
    CHECK_OK(tc_nn_linear_add(x, w, b, res, &y));
    /* past the kernel, a GPU may still fuse a bias and a residual
     * (cuBLASLt's C); never without a bias */
    uint64_t ran = tc__nn_fused_linear_count() - c0;
    CHECK(takes ? ran == 1 : (!gpu || !bias) ? ran == 0 : ran <= 1);
    snprintf(what, sizeof what, "linear_add %s m %lld n %lld k %lld", gpu ? "gpu" : "cpu",
             (long long)m, (long long)n, (long long)k);
    near_ref(what, dt, y, ref, m * n, mul_of(dt));
    CHECK(y && tc_tensor_ndim(y) == nd && tc_tensor_size(y, nd - 1) == n);
    if (gpu) {
        tc__nn_fused_linear_set_fused(false);
        CHECK_OK(tc_nn_linear_add(x, w, b, res, &apart));
        tc__nn_fused_linear_set_fused(true);
        near_tensor(what, y, apart, 1);
    }
    tc_tensor_release(y), tc_tensor_release(apart);
    y = apart = NULL;

    /* linear(layer_norm(x)), then with gelu */
    ref_norm(dt, xv, lwv, lbv, m, k, eps, h);
    ref_linear(h, wv, bv, m, k, n, ref);
    for (int64_t i = 0; i < m * n; i++)
        act[i] = gelu_tanh(ref[i]);
    for (int with_gelu = 0; with_gelu < 2; with_gelu++) {
        c0 = tc__nn_fused_linear_count();
        if (with_gelu)
            CHECK_OK(
                tc_nn_layer_norm_linear_gelu(x, lw, lb, eps, w, b, TC_GELU_APPROXIMATE_TANH, &y));
        else
            CHECK_OK(tc_nn_layer_norm_linear(x, lw, lb, eps, w, b, &y));
        CHECK(tc__nn_fused_linear_count() - c0 == (takes_norm ? 1u : 0u));
        snprintf(what, sizeof what, "layer_norm_linear%s %s m %lld n %lld k %lld",
                 with_gelu ? "_gelu" : "", gpu ? "gpu" : "cpu", (long long)m, (long long)n,
                 (long long)k);
        /* the norm's rounding may differ by one unit of dt before the
         * product: a little more room than a plain linear */
        near_ref(what, dt, y, with_gelu ? act : ref, m * n, 2 * mul_of(dt));
        if (gpu) {
            tc__nn_fused_linear_set_fused(false);
            if (with_gelu)
                CHECK_OK(tc_nn_layer_norm_linear_gelu(x, lw, lb, eps, w, b,
                                                      TC_GELU_APPROXIMATE_TANH, &apart));
            else
                CHECK_OK(tc_nn_layer_norm_linear(x, lw, lb, eps, w, b, &apart));
            tc__nn_fused_linear_set_fused(true);
            near_tensor(what, y, apart, 2);
        }
        tc_tensor_release(y), tc_tensor_release(apart);
        y = apart = NULL;
    }
    free(xv), free(wv), free(bv), free(rv), free(lwv), free(lbv), free(h), free(ref), free(act);
    tc_tensor_release(x), tc_tensor_release(w), tc_tensor_release(b), tc_tensor_release(res);
    tc_tensor_release(lw), tc_tensor_release(lb);
}

static void test_values(tc_device dev)
{
    const tc_dtype dts[] = {TC_FLOAT16, TC_BFLOAT16, TC_FLOAT32, TC_FLOAT64};
    const int64_t rows[] = {1, 3, 8, 16, 17};
    for (size_t d = 0; d < 4; d++)
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
            int64_t lead[1] = {rows[r]};
            fused_case(dev, dts[d], 2, lead, 64, 40, r % 2 == 0, true);
            fused_case(dev, dts[d], 2, lead, 264, 9, r % 2 == 1, r != 2);
        }
    /* 3-d x, GPT-2's block shapes at batch 1 and 8 */
    const int64_t b1[2] = {1, 1}, b8[2] = {8, 1}, b2[2] = {2, 3};
    fused_case(dev, TC_BFLOAT16, 3, b1, 768, 2304, true, true);
    fused_case(dev, TC_BFLOAT16, 3, b8, 768, 3072, true, true);
    fused_case(dev, TC_FLOAT16, 3, b2, 768, 768, true, false);
    fused_case(dev, TC_FLOAT32, 3, b1, 3072, 768, false, true);
}

/* Where the kernel does not run: a residual that broadcasts, the exact gelu
 * (both the ops apart, still right). */
static void test_fallbacks(tc_device dev)
{
    tc_dtype dt = TC_BFLOAT16;
    int64_t m = 2, k = 64, n = 24, xs[2] = {m, k}, ws[2] = {n, k};
    double *xv, *wv, *rv, ref[2 * 24], h[2 * 64];
    tc_tensor *x = rnd(dev, 2, xs, dt, -1, 1, &xv), *w = rnd(dev, 2, ws, dt, -0.1, 0.1, &wv);
    tc_tensor *r = rnd(dev, 1, &n, dt, -1, 1, &rv), *y = NULL;
    ref_linear(xv, wv, NULL, m, k, n, ref);
    for (int64_t i = 0; i < m * n; i++)
        ref[i] += rv[i % n];
    uint64_t c0 = tc__nn_fused_linear_count();
    CHECK_OK(tc_nn_linear_add(x, w, NULL, r, &y));
    near_ref("linear_add, broadcast residual", dt, y, ref, m * n, 2);
    tc_tensor_release(y), y = NULL;
    ref_norm(dt, xv, NULL, NULL, m, k, 1e-5, h);
    ref_linear(h, wv, NULL, m, k, n, ref);
    for (int64_t i = 0; i < m * n; i++)
        ref[i] = 0.5 * ref[i] * (1 + erf(ref[i] / sqrt(2.0)));
    CHECK_OK(
        tc_nn_layer_norm_linear_gelu(x, NULL, NULL, 1e-5, w, NULL, TC_GELU_APPROXIMATE_NONE, &y));
    near_ref("layer_norm_linear_gelu, exact gelu", dt, y, ref, m * n, 4);
    CHECK(tc__nn_fused_linear_count() == c0);
    free(xv), free(wv), free(rv);
    tc_tensor_release(x), tc_tensor_release(w), tc_tensor_release(r), tc_tensor_release(y);
}

/* A block's two fused steps captured into a graph and replayed onto zeroed
 * outputs: y1 = layer_norm_linear_gelu(x), y2 = linear_add(y1, x). */
static void test_graph(void)
{
    tc_dtype dt = TC_BFLOAT16;
    int64_t c = 256, f = 512, xs[2] = {1, c}, w1s[2] = {f, c}, w2s[2] = {c, f};
    double *xv;
    tc_tensor *x = rnd(GPU, 2, xs, dt, -2, 2, &xv), *w1 = rnd(GPU, 2, w1s, dt, -0.1, 0.1, NULL);
    tc_tensor *w2 = rnd(GPU, 2, w2s, dt, -0.1, 0.1, NULL), *b1 = rnd(GPU, 1, &f, dt, -1, 1, NULL);
    tc_tensor *lw = rnd(GPU, 1, &c, dt, 0.5, 1.5, NULL), *y1 = NULL, *y2 = NULL, *e1 = NULL,
              *e2 = NULL;
    CHECK_OK(
        tc_nn_layer_norm_linear_gelu(x, lw, NULL, 1e-5, w1, b1, TC_GELU_APPROXIMATE_TANH, &e1));
    CHECK_OK(tc_nn_linear_add(e1, w2, NULL, x, &e2));
    CHECK_OK(tc_synchronize(-1));
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_create(&g));
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    uint64_t c0 = tc__nn_fused_linear_count();
    CHECK_OK(
        tc_nn_layer_norm_linear_gelu(x, lw, NULL, 1e-5, w1, b1, TC_GELU_APPROXIMATE_TANH, &y1));
    CHECK_OK(tc_nn_linear_add(y1, w2, NULL, x, &y2));
    CHECK(tc__nn_fused_linear_count() - c0 == 2);
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    CHECK_OK(tc_tensor_fill_(y1, 0));
    CHECK_OK(tc_tensor_fill_(y2, 0));
    CHECK_OK(tc_graph_replay(g));
    CHECK_OK(tc_synchronize(-1));
    near_tensor("graph, layer_norm_linear_gelu", y1, e1, 0);
    near_tensor("graph, linear_add", y2, e2, 0);
    CHECK_OK(tc_graph_destroy(g));
    free(xv);
    tc_tensor_release(x), tc_tensor_release(w1), tc_tensor_release(w2), tc_tensor_release(b1);
    tc_tensor_release(lw), tc_tensor_release(y1), tc_tensor_release(y2);
    tc_tensor_release(e1), tc_tensor_release(e2);
}

/* Bad input: a status and a message, *out untouched. */
static void test_bad_input(tc_device dev)
{
    tc_dtype dt = TC_FLOAT32;
    int64_t xs[2] = {2, 8}, ws[2] = {4, 8}, bad_ws[2] = {4, 7}, n = 4, k = 8, k7 = 7;
    tc_tensor *x = rnd(dev, 2, xs, dt, -1, 1, NULL), *w = rnd(dev, 2, ws, dt, -1, 1, NULL);
    tc_tensor *w7 = rnd(dev, 2, bad_ws, dt, -1, 1, NULL), *b = rnd(dev, 1, &n, dt, -1, 1, NULL);
    tc_tensor *lw = rnd(dev, 1, &k, dt, -1, 1, NULL), *lw7 = rnd(dev, 1, &k7, dt, -1, 1, NULL);
    int64_t rs[2] = {2, 4}, rbad[2] = {3, 4};
    tc_tensor *r = rnd(dev, 2, rs, dt, -1, 1, NULL), *r3 = rnd(dev, 2, rbad, dt, -1, 1, NULL);
    tc_tensor *dead = rnd(dev, 2, xs, dt, -1, 1, NULL), *zero_d = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 1.0, dt, dev, &zero_d));
    tc_tensor_release(dead);
    tc_tensor *sentinel = (tc_tensor *)0x1, *out = sentinel;
    CHECK_STATUS(tc_nn_linear_add(NULL, w, b, r, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_add(x, w, b, NULL, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_add(x, w, b, r, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_add(x, w7, b, r, &out), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_linear_add(x, w, b, r3, &out), TC_ERROR_SHAPE);
    CHECK(tc_nn_linear_add(dead, w, b, r, &out) != TC_OK);
    CHECK_STATUS(tc_nn_layer_norm_linear(NULL, lw, NULL, 1e-5, w, b, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_layer_norm_linear(x, lw, NULL, 1e-5, w, b, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_layer_norm_linear(zero_d, NULL, NULL, 1e-5, w, b, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_nn_layer_norm_linear(x, lw7, NULL, 1e-5, w, b, &out) != TC_OK);
    CHECK(strstr(tc_last_error(), "weight") != NULL);
    CHECK_STATUS(tc_nn_layer_norm_linear(x, lw, NULL, 1e-5, w7, b, &out), TC_ERROR_SHAPE);
    CHECK_STATUS(
        tc_nn_layer_norm_linear_gelu(x, lw, NULL, 1e-5, w, b, (tc_gelu_approximate)7, &out),
        TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_nn_layer_norm_linear_gelu(x, dead, NULL, 1e-5, w, b, TC_GELU_APPROXIMATE_TANH, &out) !=
          TC_OK);
    CHECK(out == sentinel);
    { /* x's 2^40 rows by weight's 2^40 outputs: each fits, the result does
       * not; linear_add refuses it before any allocation, as tc_nn_linear
       * does */
        tc_tensor *row = NULL, *xh = NULL, *wh = NULL;
        CHECK_OK(tc_tensor_narrow(x, 0, 0, 1, &row));
        const int64_t huge[2] = {(int64_t)1 << 40, 8};
        CHECK_OK(tc_tensor_expand(row, 2, huge, &xh));
        CHECK_OK(tc_tensor_expand(row, 2, huge, &wh));
        CHECK_STATUS(tc_nn_linear_add(xh, wh, NULL, r, &out), TC_ERROR_SHAPE);
        CHECK(out == sentinel);
        tc_tensor_release(row), tc_tensor_release(xh), tc_tensor_release(wh);
    }
    tc_tensor_release(x), tc_tensor_release(w), tc_tensor_release(w7), tc_tensor_release(b);
    tc_tensor_release(lw), tc_tensor_release(lw7), tc_tensor_release(r), tc_tensor_release(r3);
    tc_tensor_release(zero_d);
}

int main(void)
{
    tc_test_init();
    test_values(CPU);
    test_fallbacks(CPU);
    test_bad_input(CPU);
    if (tc_is_available()) {
        test_values(GPU);
        test_fallbacks(GPU);
        test_graph();
        test_bad_input(GPU);
        CHECK_OK(tc_synchronize(-1));
    } else {
        printf("no GPU: the GPU checks are skipped\n");
    }
    return TC_TEST_DONE();
}
