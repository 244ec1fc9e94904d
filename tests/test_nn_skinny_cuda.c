/* GEMMs of at most 16 rows on a GPU (decode's matrix-vector products,
 * kernels/gemm_skinny.cu): linear with and without its bias, linear_gelu,
 * and a batched product against transposed keys (baddbmm, as attention's
 * scores) against a double-precision reference, for row counts, widths and
 * depths that reach each part of the kernels (one and two 8-row halves,
 * partial column blocks, a partial last k chunk); which shapes take the
 * kernel and which fall back (unaligned operands, 17 rows, float64, and
 * the shapes left to cuBLAS as faster); the
 * same bits on a second call; and a chain of linears replayed from a CUDA
 * graph, whose edges between tcuda's kernels are programmatic. Exits 77
 * without a GPU. */
#include <string.h>

#include "nn_check.h"
#include "tcuda/nn_backward.h"

#include "tensor/cuda/kernels/nn_kernels.h" /* the kernel's launch count */

static double gelu_tanh(double x)
{
    return 0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}

/* How far a result may be from the reference: the dtype's tolerance, and
 * for 16-bit outputs the rounding of a sum of k products of [-1, 1) and
 * [-0.1, 0.1) values. */
static double mul_of(tc_dtype dt) { return dt == TC_FLOAT32 ? 4 : 2; }

/* linear(x [m, k], w [n, k], b) against ref_linear, and whether the kernel
 * ran (`expect`), for one shape and dtype. */
static void linear_case(tc_dtype dt, int64_t m, int64_t n, int64_t k, bool bias, bool expect)
{
    int64_t xs[2] = {m, k}, ws[2] = {n, k};
    double *xv, *wv, *bv = NULL;
    tc_tensor *x = rnd(GPU, 2, xs, dt, -1, 1, &xv), *w = rnd(GPU, 2, ws, dt, -0.1, 0.1, &wv);
    tc_tensor *b = bias ? rnd(GPU, 1, &n, dt, -1, 1, &bv) : NULL, *y = NULL, *y2 = NULL;
    double *ref = malloc(sizeof(double) * (size_t)(m * n));
    ref_linear(xv, wv, bv, m, k, n, ref);
    uint64_t r0 = tc__k_gemm_skinny_count();
    CHECK_OK(tc_nn_linear(x, w, b, &y));
    bool ran = tc__k_gemm_skinny_count() > r0;
    if (ran != expect)
        fprintf(stderr, "linear %s m %lld n %lld k %lld bias %d: the kernel %s\n",
                tc_dtype_string(dt), (long long)m, (long long)n, (long long)k, bias,
                ran ? "ran" : "did not run");
    CHECK(ran == expect);
    if (!near_ref("skinny linear", dt, y, ref, m * n, mul_of(dt)))
        fprintf(stderr, "  at m %lld n %lld k %lld bias %d\n", (long long)m, (long long)n,
                (long long)k, bias);
    /* a second call: the same bits (the warps' sums are added in a fixed order) */
    CHECK_OK(tc_nn_linear(x, w, b, &y2));
    double *g1 = tc_test_values(y), *g2 = tc_test_values(y2);
    CHECK(memcmp(g1, g2, sizeof(double) * (size_t)(m * n)) == 0);
    free(g1), free(g2), free(ref), free(xv), free(wv), free(bv);
    tc_tensor_release(x), tc_tensor_release(w), tc_tensor_release(b);
    tc_tensor_release(y), tc_tensor_release(y2);
}

static void test_linear_shapes(void)
{
    const int64_t ms[] = {1, 2, 5, 8, 9, 16}, ns[] = {1, 7, 8, 9, 130}, ks[] = {8, 40, 264, 1032};
    const tc_dtype dts[] = {TC_FLOAT16, TC_BFLOAT16, TC_FLOAT32};
    for (size_t d = 0; d < 3; d++)
        for (size_t a = 0; a < sizeof ms / sizeof *ms; a++)
            for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
                for (size_t c = 0; c < sizeof ks / sizeof *ks; c++)
                    linear_case(dts[d], ms[a], ns[b], ks[c], (a + b + c) % 2 == 0,
                                dts[d] != TC_FLOAT32 || ms[a] <= 4);
    /* GPT-2 small's decode shapes: the block's four linears and the logits */
    const int64_t gpt[][2] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}, {50257, 768}};
    for (size_t d = 0; d < 3; d++)
        for (size_t i = 0; i < sizeof gpt / sizeof *gpt; i++)
            linear_case(dts[d], 1, gpt[i][0], gpt[i][1], i < 4, true);
    /* outside the kernel: 17 rows, float64, a depth of no whole 16-byte
     * vectors, and where cuBLAS is faster (gemm_skinny.cu): float32 past 4
     * rows (above), 16-bit past 4 rows with k past 3,072 */
    linear_case(TC_BFLOAT16, 17, 64, 64, true, false);
    linear_case(TC_FLOAT16, 8, 64, 4096, true, false);
    linear_case(TC_BFLOAT16, 4, 64, 4096, true, true);
    linear_case(TC_FLOAT64, 1, 64, 64, true, false);
    linear_case(TC_FLOAT16, 1, 64, 36, true, false);
    linear_case(TC_FLOAT32, 3, 64, 66, false, false);
}

/* x one element into its storage: not 16-byte aligned, so cuBLAS's path,
 * with the same values. */
static void test_unaligned(void)
{
    for (int d = 0; d < 3; d++) {
        tc_dtype dt = FLOATS[d];
        int64_t fs = 1 + 256, ws[2] = {32, 256}, xs[2] = {1, 256};
        double *fv, *wv;
        tc_tensor *flat = rnd(GPU, 1, &fs, dt, -1, 1, &fv), *w = rnd(GPU, 2, ws, dt, -1, 1, &wv);
        tc_tensor *part = NULL, *x = NULL, *y = NULL;
        CHECK_OK(tc_tensor_narrow(flat, 0, 1, 256, &part));
        CHECK_OK(tc_tensor_view(part, 2, xs, &x));
        double ref[32];
        ref_linear(fv + 1, wv, NULL, 1, 256, 32, ref);
        uint64_t r0 = tc__k_gemm_skinny_count();
        CHECK_OK(tc_nn_linear(x, w, NULL, &y));
        CHECK(tc__k_gemm_skinny_count() == r0);
        near_ref("unaligned skinny linear", dt, y, ref, 32, 4);
        free(fv), free(wv);
        tc_tensor_release(flat), tc_tensor_release(part), tc_tensor_release(x);
        tc_tensor_release(w), tc_tensor_release(y);
    }
}

/* linear_gelu in 16 bits: the kernel writes the pre-activation and gelu of
 * its float32 value. float32 keeps the ops apart (blas_lt.c says why), its
 * linear still in the kernel. */
static void test_linear_gelu(void)
{
    const tc_dtype dts[] = {TC_FLOAT16, TC_BFLOAT16, TC_FLOAT32};
    for (size_t d = 0; d < 3; d++) {
        tc_dtype dt = dts[d];
        int64_t m = 3, n = 200, k = 96, xs[2] = {m, k}, ws[2] = {n, k};
        double *xv, *wv, *bv, ref[3 * 200], act[3 * 200];
        tc_tensor *x = rnd(GPU, 2, xs, dt, -1, 1, &xv), *w = rnd(GPU, 2, ws, dt, -0.3, 0.3, &wv);
        tc_tensor *b = rnd(GPU, 1, &n, dt, -1, 1, &bv), *out = NULL, *pre = NULL;
        ref_linear(xv, wv, bv, m, k, n, ref);
        for (int64_t i = 0; i < m * n; i++)
            act[i] = gelu_tanh(ref[i]);
        uint64_t f0 = tc__nn_linear_gelu_fused_count(), r0 = tc__k_gemm_skinny_count();
        CHECK_OK(tc_nn_linear_gelu(x, w, b, TC_GELU_APPROXIMATE_TANH, &out, &pre));
        bool fused = tc__nn_linear_gelu_fused_count() > f0;
        CHECK(fused == (dt != TC_FLOAT32));
        CHECK(tc__k_gemm_skinny_count() == r0 + 1);
        near_ref("skinny linear_gelu pre", dt, pre, ref, m * n, 2);
        near_ref("skinny linear_gelu out", dt, out, act, m * n, 2);
        free(xv), free(wv), free(bv);
        tc_tensor_release(x), tc_tensor_release(w), tc_tensor_release(b);
        tc_tensor_release(out), tc_tensor_release(pre);
    }
}

/* Attention's decode scores: mask + scale q [B, 1, e] @ k^T, k a cache
 * [B, S, e] transposed, as examples/gpt.c's decode step. */
static void test_scores(void)
{
    const tc_dtype dts[] = {TC_FLOAT16, TC_BFLOAT16, TC_FLOAT32};
    for (size_t d = 0; d < 3; d++) {
        tc_dtype dt = dts[d];
        int64_t B = 12, S = 40, e = 64, qs[3] = {B, 1, e}, ks[3] = {B, S, e}, ms = S;
        double *qv, *kv, *mv, ref[12 * 40];
        tc_tensor *q = rnd(GPU, 3, qs, dt, -1, 1, &qv), *kc = rnd(GPU, 3, ks, dt, -1, 1, &kv);
        tc_tensor *mask = rnd(GPU, 1, &ms, dt, -1, 1, &mv), *kt = NULL, *sc = NULL;
        CHECK_OK(tc_tensor_transpose(kc, 1, 2, &kt));
        double scale = 0.125;
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < S; j++) {
                double s = 0;
                for (int64_t x = 0; x < e; x++)
                    s += qv[b * e + x] * kv[(b * S + j) * e + x];
                ref[b * S + j] = mv[j] + scale * s;
            }
        uint64_t r0 = tc__k_gemm_skinny_count();
        CHECK_OK(tc_tensor_baddbmm(mask, q, kt, 1, scale, &sc));
        CHECK(tc__k_gemm_skinny_count() == r0 + 1);
        near_ref("skinny baddbmm scores", dt, sc, ref, B * S, 2);
        free(qv), free(kv), free(mv);
        tc_tensor_release(q), tc_tensor_release(kc), tc_tensor_release(mask);
        tc_tensor_release(kt), tc_tensor_release(sc);
    }
}

/* Three linears in a row captured into a graph (each waits on the one
 * before through a programmatic edge on compute capability 9.0), replayed
 * onto zeroed outputs. */
static void test_graph_chain(void)
{
    for (int d = 0; d < 3; d++) {
        tc_dtype dt = FLOATS[d];
        int64_t n = 256, xs[2] = {1, n}, ws[2] = {n, n};
        double *xv, *wv[3], *bv[3], r1[256], r2[256], r3[256];
        tc_tensor *x = rnd(GPU, 2, xs, dt, -1, 1, &xv), *w[3], *b[3];
        for (int i = 0; i < 3; i++) {
            w[i] = rnd(GPU, 2, ws, dt, -0.1, 0.1, &wv[i]);
            b[i] = rnd(GPU, 1, &n, dt, -0.5, 0.5, &bv[i]);
        }
        /* the reference rounds each layer's output to dt, as the GPU stores it */
        tc_tensor *y[3] = {NULL, NULL, NULL};
        CHECK_OK(tc_nn_linear(x, w[0], b[0], &y[0])); /* warm-up, and the stored roundings */
        CHECK_OK(tc_nn_linear(y[0], w[1], b[1], &y[1]));
        CHECK_OK(tc_nn_linear(y[1], w[2], b[2], &y[2]));
        double *y0 = tc_test_values(y[0]), *y1 = tc_test_values(y[1]);
        ref_linear(xv, wv[0], bv[0], 1, n, n, r1);
        ref_linear(y0, wv[1], bv[1], 1, n, n, r2);
        ref_linear(y1, wv[2], bv[2], 1, n, n, r3);
        for (int i = 0; i < 3; i++)
            tc_tensor_release(y[i]), y[i] = NULL;
        CHECK_OK(tc_synchronize(-1));
        tc_graph *g = NULL;
        CHECK_OK(tc_graph_create(&g));
        tc_graph_pool_id none = {0};
        tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL,
                                                                 TC_CAPTURE_MODE_GLOBAL);
        CHECK_OK(gd.status);
        CHECK_OK(tc_nn_linear(x, w[0], b[0], &y[0]));
        CHECK_OK(tc_nn_linear(y[0], w[1], b[1], &y[1]));
        CHECK_OK(tc_nn_linear(y[1], w[2], b[2], &y[2]));
        CHECK_OK(tc_graph_capture_guard_exit(&gd));
        for (int i = 0; i < 3; i++)
            CHECK_OK(tc_tensor_fill_(y[i], 0));
        CHECK_OK(tc_graph_replay(g));
        CHECK_OK(tc_synchronize(-1));
        near_ref("graph chain, layer 1", dt, y[0], r1, n, mul_of(dt));
        near_ref("graph chain, layer 2", dt, y[1], r2, n, mul_of(dt));
        near_ref("graph chain, layer 3", dt, y[2], r3, n, mul_of(dt));
        CHECK_OK(tc_graph_destroy(g));
        free(xv), free(y0), free(y1);
        tc_tensor_release(x);
        for (int i = 0; i < 3; i++) {
            tc_tensor_release(w[i]), tc_tensor_release(b[i]), tc_tensor_release(y[i]);
            free(wv[i]), free(bv[i]);
        }
    }
}

int main(void)
{
    TC_TEST_REQUIRE_GPU();
    tc_test_init();
    test_linear_shapes();
    test_unaligned();
    test_linear_gelu();
    test_scores();
    test_graph_chain();
    CHECK_OK(tc_synchronize(-1));
    return TC_TEST_DONE();
}
