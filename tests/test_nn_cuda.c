/* nn.h on a GPU beside the CPU: every op's GPU result against the CPU's on
 * the same inputs for row lengths that reach each kernel path, each row
 * kernel path forced in turn, a linear captured in a CUDA graph,
 * cross_entropy without a wait (in a graph, its bad targets reported by the
 * next wait), the fused cross_entropy over rows kept in shared memory, a
 * large linear through padded rows, one whose output passes 2^31 elements, and
 * the fused attention kernel on dense and strided operands. (The
 * per-op checks against a double-precision reference run on both devices in
 * test_nn.) Exits 77 without a GPU. */
#include <string.h>

#include "nn_check.h"
#include "tcuda/nn_backward.h"

#include "tensor/cuda/kernels/nn_kernels.h" /* the row kernels' path switch */

/* A linear captured into a CUDA graph after a warm-up (the thread's
 * cuBLASLt handle and plan exist): the output is zeroed, the replay must
 * write x W^T + b again, through the one-step path for float32 and the
 * 16-bit dtypes (its workspace from the graph's pool). */
static void test_linear_graph(void)
{
    for (int d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        int64_t xs[2] = {8, 64}, ws[2] = {96, 64}, bs = 96;
        double *xv, *wv, *bv, ref[8 * 96];
        tc_tensor *x = rnd(GPU, 2, xs, dt, -1, 1, &xv), *w = rnd(GPU, 2, ws, dt, -0.1, 0.1, &wv);
        tc_tensor *b = rnd(GPU, 1, &bs, dt, -1, 1, &bv), *y = NULL;
        ref_linear(xv, wv, bv, 8, 64, 96, ref);
        CHECK_OK(tc_nn_linear(x, w, b, &y)); /* warm-up */
        tc_tensor_release(y);
        y = NULL;
        CHECK_OK(tc_synchronize(-1));
        tc_graph *g = NULL;
        CHECK_OK(tc_graph_create(&g));
        uint64_t f0, u0;
        tc__nn_linear_counts(&f0, &u0);
        tc_graph_pool_id none = {0};
        tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL,
                                                                 TC_CAPTURE_MODE_GLOBAL);
        CHECK_OK(gd.status);
        CHECK_OK(tc_nn_linear(x, w, b, &y));
        CHECK_OK(tc_graph_capture_guard_exit(&gd));
        int got = path_of(f0, u0);
        printf("linear in a graph (%s): %s path\n", tc_dtype_string(dt),
               got == 1 ? "cuBLASLt one-step" : "copy + GEMM");
        if (dt != TC_FLOAT64)
            CHECK(got == 1);
        CHECK_OK(tc_tensor_fill_(y, 0));
        CHECK_OK(tc_graph_replay(g));
        CHECK_OK(tc_synchronize(-1));
        near_ref("linear replayed from a graph", dt, y, ref, 8 * 96, 4);
        tc_tensor_release(y);
        CHECK_OK(tc_graph_destroy(g));
        tc_tensor_release(x), tc_tensor_release(w), tc_tensor_release(b);
        free(xv), free(wv), free(bv);
    }
}

/* ---- cross_entropy on a GPU: no wait, in a graph, bad targets reported later ---------- */

/* The mean of logsumexp(x[i]) - x[i][t[i]] over rows whose t is not -100. */
static double ce_mean(const double *x, const int64_t *t, int64_t n, int64_t c)
{
    double sum = 0;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (t[i] == -100)
            continue;
        sum += ref_ce_row(x + i * c, c, t[i]);
        k++;
    }
    return sum / (double)k;
}

/* Writes host targets into the GPU tensor tg. */
static void set_targets(tc_tensor *tg, const int64_t *v, int64_t n)
{
    tc_tensor *h = targets(CPU, 1, n, v);
    CHECK_OK(tc_tensor_copy_(tg, h, false));
    tc_tensor_release(h);
}

static void test_cross_entropy_async(void)
{
    enum { N = 6, C = 5 };
    int64_t t1[N] = {0, 4, -100, 2, 3, -100}, t2[N] = {1, -100, 0, 0, 4, 2};
    int64_t bad[N] = {0, 4, 7, 2, 3, -100}, neg[N] = {0, -3, 1, 2, 3, 4};
    double *xv, ref;
    tc_tensor *x = rnd(GPU, 2, (int64_t[]){N, C}, TC_FLOAT32, -2, 2, &xv);
    tc_tensor *tg = targets(GPU, 1, N, t1), *y = NULL;
    /* no wait: allowed under sync debug mode 2, which refuses every wait */
    CHECK_OK(tc_set_sync_debug_mode(2));
    CHECK_OK(tc_nn_cross_entropy(x, tg, -100, TC_REDUCTION_MEAN, &y));
    CHECK_OK(tc_set_sync_debug_mode(0));
    ref = ce_mean(xv, t1, N, C);
    near_ref("cross_entropy mean, GPU, without a wait", TC_FLOAT32, y, &ref, 1, 4);
    tc_tensor_release(y);
    y = NULL;

    /* captured: each replay counts the rows it does not ignore anew */
    CHECK_OK(tc_synchronize(-1));
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_create(&g));
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_OK(tc_nn_cross_entropy(x, tg, -100, TC_REDUCTION_MEAN, &y));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    CHECK_OK(tc_graph_replay(g));
    near_ref("cross_entropy mean replayed", TC_FLOAT32, y, &ref, 1, 4);
    set_targets(tg, t2, N);
    CHECK_OK(tc_graph_replay(g));
    ref = ce_mean(xv, t2, N, C);
    near_ref("cross_entropy mean replayed, other targets", TC_FLOAT32, y, &ref, 1, 4);

    /* a target out of range: NaN in its row, reported by the next wait */
    set_targets(tg, bad, N);
    CHECK_OK(tc_graph_replay(g));
    CHECK_STATUS(tc_synchronize(-1), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_nn_cross_entropy") && strstr(tc_last_error(), "target 7") &&
          strstr(tc_last_error(), "row 2") && strstr(tc_last_error(), "0..4"));
    CHECK_OK(tc_synchronize(-1)); /* reported once */
    double got = 0;
    CHECK_OK(tc_tensor_item(y, &got));
    CHECK(isnan(got));
    tc_tensor *per = NULL;
    CHECK_OK(tc_nn_cross_entropy(x, tg, -100, TC_REDUCTION_NONE, &per));
    double pv[N];
    /* a copy to the host waits: it reports the error (its output is not to be used) */
    CHECK_STATUS(tc_tensor_to_host(per, TC_FLOAT64, pv), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "target 7") != NULL);
    CHECK_OK(tc_tensor_to_host(per, TC_FLOAT64, pv));
    CHECK(isnan(pv[2]) && !isnan(pv[0]) && pv[5] == 0);
    tc_tensor_release(per);
    per = NULL;
    /* through a stream synchronize, an event synchronize, queries and item */
    set_targets(tg, neg, N);
    CHECK_OK(tc_synchronize(-1));
    CHECK_OK(tc_nn_cross_entropy(x, tg, -100, TC_REDUCTION_NONE, &per));
    CHECK_STATUS(tc_stream_synchronize(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "target -3") && strstr(tc_last_error(), "row 1"));
    tc_tensor_release(per);
    per = NULL;
    tc_event *ev = NULL;
    CHECK_OK(tc_event_create(0, &ev));
    CHECK_OK(tc_nn_cross_entropy(x, tg, -100, TC_REDUCTION_NONE, &per));
    CHECK_OK(tc_event_record(ev, NULL));
    CHECK_STATUS(tc_event_synchronize(ev), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(per);
    per = NULL;
    /* through queries polled until the work is done: the one that finds it
     * done reports the error, once */
    CHECK_OK(tc_nn_cross_entropy(x, tg, -100, TC_REDUCTION_NONE, &per));
    tc_status q;
    while ((q = tc_stream_query(NULL)) == TC_ERROR_NOT_READY)
        ;
    CHECK(q == TC_ERROR_INVALID_ARGUMENT && strstr(tc_last_error(), "target -3"));
    CHECK_OK(tc_stream_query(NULL));
    tc_tensor_release(per);
    per = NULL;
    CHECK_OK(tc_nn_cross_entropy(x, tg, -100, TC_REDUCTION_NONE, &per));
    CHECK_OK(tc_event_record(ev, NULL));
    while ((q = tc_event_query(ev)) == TC_ERROR_NOT_READY)
        ;
    CHECK(q == TC_ERROR_INVALID_ARGUMENT && strstr(tc_last_error(), "target -3"));
    CHECK_OK(tc_event_query(ev));
    CHECK_OK(tc_event_destroy(ev));
    tc_tensor_release(per);
    per = NULL;
    tc_tensor *m = NULL;
    CHECK_OK(tc_nn_cross_entropy(x, tg, -100, TC_REDUCTION_MEAN, &m));
    CHECK_STATUS(tc_tensor_item(m, &got), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_synchronize(-1));
    tc_tensor_release(m);
    CHECK_OK(tc_graph_destroy(g));
    tc_tensor_release(y), tc_tensor_release(tg), tc_tensor_release(x);
    free(xv);
}

/* ---- GPU: device mismatch and parity with the CPU ------------------------------------- */

static tc_tensor *on(tc_device dev, const tc_tensor *t)
{
    tc_tensor *r = NULL;
    CHECK_OK(tc_tensor_to(t, dev, tc_tensor_dtype(t), false, &r));
    return r;
}

static void parity(const char *what, const tc_tensor *c, const tc_tensor *g, double mul)
{
    double *v = tc_test_values(c);
    near_ref(what, tc_tensor_dtype(c), g, v, tc_tensor_numel(c), mul);
    free(v);
}

static void test_gpu_parity(void)
{
    for (int d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        int64_t rows[] = {1,    32,   100,  127,  128,   512,   768,   1024,
                          1025, 2048, 4096, 8192, 16384, 16385, 50257, 130001};
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            int64_t sz[2] = {5, rows[r]};
            tc_tensor *x = rnd(CPU, 2, sz, dt, -5, 5, NULL), *xg = on(GPU, x);
            tc_tensor *w = rnd(CPU, 1, &rows[r], dt, 0, 2, NULL), *wg = on(GPU, w);
            tc_tensor *b = rnd(CPU, 1, &rows[r], dt, -1, 1, NULL), *bg = on(GPU, b);
            tc_tensor *yc = NULL, *yg = NULL;
            CHECK_OK(tc_nn_softmax(x, 1, &yc));
            CHECK_OK(tc_nn_softmax(xg, 1, &yg));
            parity("softmax parity", yc, yg, 1);
            tc_tensor_release(yc), tc_tensor_release(yg);
            CHECK_OK(tc_nn_log_softmax(x, 1, &yc));
            CHECK_OK(tc_nn_log_softmax(xg, 1, &yg));
            parity("log_softmax parity", yc, yg, 1);
            tc_tensor_release(yc), tc_tensor_release(yg);
            CHECK_OK(tc_nn_layer_norm(x, 1, &rows[r], w, b, 1e-5, &yc));
            CHECK_OK(tc_nn_layer_norm(xg, 1, &rows[r], wg, bg, 1e-5, &yg));
            parity("layer_norm parity", yc, yg, 2);
            tc_tensor_release(yc), tc_tensor_release(yg);
            CHECK_OK(tc_nn_rms_norm(x, 1, &rows[r], w, NULL, &yc));
            CHECK_OK(tc_nn_rms_norm(xg, 1, &rows[r], wg, NULL, &yg));
            parity("rms_norm parity", yc, yg, 2);
            tc_tensor_release(yc), tc_tensor_release(yg);
            int64_t tg[5] = {0, rows[r] - 1, -100, rows[r] / 2, rows[r] / 3};
            tc_tensor *t = targets(CPU, 1, 5, tg), *tgg = targets(GPU, 1, 5, tg);
            CHECK_OK(tc_nn_cross_entropy(x, t, -100, TC_REDUCTION_NONE, &yc));
            CHECK_OK(tc_nn_cross_entropy(xg, tgg, -100, TC_REDUCTION_NONE, &yg));
            parity("cross_entropy parity", yc, yg, 2);
            tc_tensor_release(yc), tc_tensor_release(yg);
            tc_tensor_release(t), tc_tensor_release(tgg);
            tc_tensor_release(x), tc_tensor_release(xg), tc_tensor_release(w);
            tc_tensor_release(wg), tc_tensor_release(b), tc_tensor_release(bg);
        }
        /* a GPT-2-shaped attention block, causal, through every op */
        int64_t qs[4] = {2, 4, 128, 64}, xs[3] = {2, 128, 256}, ws[2] = {192, 256}, bs = 192;
        tc_tensor *q = rnd(CPU, 4, qs, dt, -1, 1, NULL), *k = rnd(CPU, 4, qs, dt, -1, 1, NULL);
        tc_tensor *v = rnd(CPU, 4, qs, dt, -1, 1, NULL), *qg = on(GPU, q), *kg = on(GPU, k);
        tc_tensor *vg = on(GPU, v), *yc = NULL, *yg = NULL;
        CHECK_OK(tc_nn_scaled_dot_product_attention(q, k, v, true, NULL, &yc));
        CHECK_OK(tc_nn_scaled_dot_product_attention(qg, kg, vg, true, NULL, &yg));
        parity("sdpa parity", yc, yg, 3);
        tc_tensor_release(yc), tc_tensor_release(yg);
        tc_tensor *x = rnd(CPU, 3, xs, dt, -1, 1, NULL), *w = rnd(CPU, 2, ws, dt, -0.1, 0.1, NULL);
        tc_tensor *b = rnd(CPU, 1, &bs, dt, -1, 1, NULL), *xg = on(GPU, x), *wg = on(GPU, w);
        tc_tensor *bg = on(GPU, b);
        CHECK_OK(tc_nn_linear(x, w, b, &yc));
        CHECK_OK(tc_nn_linear(xg, wg, bg, &yg));
        parity("linear parity", yc, yg, 3);
        tc_tensor_release(yc), tc_tensor_release(yg);
        /* device mismatch */
        CHECK_STATUS(tc_nn_linear(x, wg, NULL, &yg), TC_ERROR_DEVICE_MISMATCH);
        CHECK_STATUS(tc_nn_scaled_dot_product_attention(qg, k, vg, false, NULL, &yg),
                     TC_ERROR_DEVICE_MISMATCH);
        tc_tensor *all[] = {q, k, v, qg, kg, vg, x, w, b, xg, wg, bg};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            tc_tensor_release(all[i]);
    }
}

/* Each row kernel path forced (registers two ways, shared memory, two reads)
 * on rows of several lengths, aligned or not, against the CPU: the automatic
 * choice sends each length one way only, so the others are checked here. */
static void test_gpu_paths(void)
{
    const int64_t lens[] = {700, 4096, 4097, 16385, 50257};
    for (int path = TC__NN_PATH_REGS; path <= TC__NN_PATH_LOOP; path++)
        for (int d = 0; d < 4; d++)
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                int64_t n = lens[li], sz[2] = {3, n};
                tc_tensor *x = rnd(CPU, 2, sz, FLOATS[d], -5, 5, NULL), *xg = on(GPU, x);
                tc_tensor *w = rnd(CPU, 1, &n, FLOATS[d], 0, 2, NULL), *wg = on(GPU, w);
                tc_tensor *b = rnd(CPU, 1, &n, FLOATS[d], -1, 1, NULL), *bg = on(GPU, b);
                for (int op = 0; op < 4; op++) {
                    tc_tensor *yc = NULL, *yg = NULL;
                    if (op < 2) {
                        CHECK_OK((op ? tc_nn_log_softmax : tc_nn_softmax)(x, 1, &yc));
                        tc__k_nn_rows_path(path);
                        CHECK_OK((op ? tc_nn_log_softmax : tc_nn_softmax)(xg, 1, &yg));
                    } else {
                        CHECK_OK(op == 2 ? tc_nn_layer_norm(x, 1, &n, w, b, 1e-5, &yc)
                                         : tc_nn_rms_norm(x, 1, &n, w, NULL, &yc));
                        tc__k_nn_rows_path(path);
                        CHECK_OK(op == 2 ? tc_nn_layer_norm(xg, 1, &n, wg, bg, 1e-5, &yg)
                                         : tc_nn_rms_norm(xg, 1, &n, wg, NULL, &yg));
                    }
                    tc__k_nn_rows_path(TC__NN_PATH_AUTO);
                    parity("row kernel path", yc, yg, op < 2 ? 1 : 2);
                    tc_tensor_release(yc), tc_tensor_release(yg);
                }
                tc_tensor_release(x), tc_tensor_release(xg), tc_tensor_release(w);
                tc_tensor_release(wg), tc_tensor_release(b), tc_tensor_release(bg);
            }
}

/* ---- fused attention ------------------------------------------------------------------- */

/* q, k, v [B, H, T, E] as the heads of one projection [B, T, skip + 3 H E]
 * (narrowed, viewed and transposed, as examples/gpt.c makes them); skip 1
 * leaves the rows unaligned for 16-byte loads. */
static void qkv_views(tc_dtype dt, int64_t B, int64_t T, int64_t H, int64_t E, int64_t skip,
                      tc_tensor **qkv)
{
    int64_t ps[3] = {B, T, skip + 3 * H * E}, hs[4] = {B, T, H, E};
    tc_tensor *p = rnd(GPU, 3, ps, dt, -1, 1, NULL);
    for (int i = 0; i < 3; i++) {
        tc_tensor *part = NULL, *split = NULL;
        CHECK_OK(tc_tensor_narrow(p, 2, skip + i * H * E, H * E, &part));
        CHECK_OK(tc_tensor_view(part, 4, hs, &split));
        CHECK_OK(tc_tensor_transpose(split, 1, 2, &qkv[i]));
        tc_tensor_release(part), tc_tensor_release(split);
    }
    tc_tensor_release(p);
}

/* The fused kernel (float32 FMAs; tensor cores for the 16-bit dtypes from
 * compute capability 8.0, Hopper's warpgroup products at 9.0 for head
 * sizes 33 to 64, and there mma.sync's too by the test hook) against a
 * double-precision reference: key counts
 * across block edges, fewer keys than queries, one query, head sizes from 3
 * to 128, causal or not, dense operands and the head views of a projection
 * (aligned and not), whose result must come back over [B, T, H, E] memory.
 * float64 and ev != e take the unfused path. */
static void test_attention_fused(void)
{
    int major = 0, minor = 0;
    CHECK_OK(tc_get_device_capability(-1, &major, &minor));
    struct {
        int nd;
        int64_t lead[2], l, s, e;
        int view; /* 0 dense, 1 projection heads, 2 unaligned projection heads */
    } cases[] = {{4, {2, 3}, 70, 70, 64, 0},    {4, {1, 2}, 1, 130, 64, 0},
                 {3, {5, 0}, 33, 200, 32, 0},   {2, {0, 0}, 129, 65, 128, 0},
                 {4, {2, 2}, 100, 30, 20, 0},   {4, {2, 2}, 65, 129, 3, 0},
                 {4, {2, 3}, 77, 77, 64, 1},    {4, {2, 3}, 77, 77, 64, 2},
                 {4, {1, 2}, 200, 200, 128, 1}, {4, {1, 2}, 300, 300, 40, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int d = 0; d < 4; d++)
            for (int mode = 0; mode < 3; mode++) {
                tc_dtype dt = FLOATS[d];
                int nd = cases[c].nd;
                int64_t l = cases[c].l, s = cases[c].s, e = cases[c].e, qs[4], ks[4], nb = 1;
                for (int i = 0; i < nd - 2; i++) {
                    qs[i] = ks[i] = cases[c].lead[i];
                    nb *= cases[c].lead[i];
                }
                qs[nd - 2] = l, ks[nd - 2] = s, qs[nd - 1] = ks[nd - 1] = e;
                tc_tensor *t[3];
                if (cases[c].view) {
                    qkv_views(dt, qs[0], l, qs[1], e, cases[c].view - 1, t);
                } else {
                    t[0] = rnd(GPU, nd, qs, dt, -1, 1, NULL);
                    t[1] = rnd(GPU, nd, ks, dt, -1, 1, NULL);
                    t[2] = rnd(GPU, nd, ks, dt, -1, 1, NULL);
                }
                double *q = tc_test_values(t[0]), *k = tc_test_values(t[1]);
                double *v = tc_test_values(t[2]);
                double *ref = malloc(sizeof(double) * (size_t)(nb * l * e));
                bool causal = mode != 0;
                double scale = mode == 2 ? 0.3 : 1 / sqrt((double)e);
                ref_sdpa(q, k, v, nb, l, s, e, e, causal, scale, ref);
                uint64_t n0 = tc__nn_attention_fused_count();
                uint64_t h0 = tc__k_nn_attention_sm90_count();
                tc_tensor *y = NULL;
                CHECK_OK(tc_nn_scaled_dot_product_attention(t[0], t[1], t[2], causal,
                                                            mode == 2 ? &scale : NULL, &y));
                bool fused = tc__nn_attention_fused_count() > n0;
                /* Hopper's kernel: 16-bit, head sizes 33 to 64, rows 16-byte aligned */
                bool half = dt == TC_FLOAT16 || dt == TC_BFLOAT16;
                bool hopper = half && major == 9 && minor == 0 && e > 32 && e <= 64 && e % 8 == 0 &&
                              cases[c].view != 2;
                CHECK(tc__k_nn_attention_sm90_count() - h0 == (hopper ? 1u : 0u));
                if (hopper) { /* and mma.sync's kernel on the same operands */
                    tc_tensor *ys = NULL;
                    tc__k_nn_attention_set_sm90(false);
                    CHECK_OK(tc_nn_scaled_dot_product_attention(t[0], t[1], t[2], causal,
                                                                mode == 2 ? &scale : NULL, &ys));
                    tc__k_nn_attention_set_sm90(true);
                    near_ref("fused attention, mma.sync beside Hopper's", dt, ys, ref, nb * l * e,
                             3);
                    tc_tensor_release(ys);
                }
                bool want = dt == TC_FLOAT32 || (dt != TC_FLOAT64 && major >= 8);
                if (fused != want)
                    fprintf(stderr, "attention case %zu (%s): fused %d, expected %d\n", c,
                            tc_dtype_string(dt), fused, want);
                CHECK(fused == want);
                near_ref(causal ? "fused attention, causal" : "fused attention", dt, y, ref,
                         nb * l * e, 3);
                if (cases[c].view && fused) { /* merging the heads back is a view */
                    tc_tensor *yt = NULL;
                    CHECK_OK(tc_tensor_transpose(y, 1, 2, &yt));
                    CHECK(tc_tensor_is_contiguous(yt));
                    tc_tensor_release(yt);
                }
                tc_tensor_release(y);
                /* the same through the unfused path */
                tc__nn_attention_set_fused(false);
                n0 = tc__nn_attention_fused_count();
                CHECK_OK(tc_nn_scaled_dot_product_attention(t[0], t[1], t[2], causal,
                                                            mode == 2 ? &scale : NULL, &y));
                tc__nn_attention_set_fused(true);
                CHECK(tc__nn_attention_fused_count() == n0);
                near_ref("unfused attention", dt, y, ref, nb * l * e, 3);
                tc_tensor_release(y);
                for (int i = 0; i < 3; i++)
                    tc_tensor_release(t[i]);
                free(q), free(k), free(v), free(ref);
            }
    /* ev != e: the unfused path */
    int64_t qs[3] = {2, 9, 16}, vs[3] = {2, 9, 8};
    tc_tensor *q = rnd(GPU, 3, qs, TC_FLOAT32, -1, 1, NULL),
              *v = rnd(GPU, 3, vs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *y = NULL;
    uint64_t n0 = tc__nn_attention_fused_count();
    CHECK_OK(tc_nn_scaled_dot_product_attention(q, q, v, true, NULL, &y));
    CHECK(tc__nn_attention_fused_count() == n0);
    tc_tensor_release(q), tc_tensor_release(v), tc_tensor_release(y);
}

/* cross_entropy_fused over rows of 64 KiB and more, which a block each
 * keeps in shared memory between its two reads (kernels/backward.cu): 300
 * rows of 33,001 logits, each row at its own offset against 16 bytes, some
 * ignored, for float32 and bfloat16, mean and none, against a loop in
 * double. grad_scale makes the gradient's values about 1 in size. */
static void test_cross_entropy_staged(void)
{
    enum { N = 300, C = 33001 };
    int64_t t[N];
    for (int64_t i = 0; i < N; i++)
        t[i] = i % 7 == 3 ? -100 : i == 5 ? C - 1 : (int64_t)(tc_test_rand() % C);
    int64_t kept = 0;
    for (int64_t i = 0; i < N; i++)
        kept += t[i] != -100;
    double *lref = malloc(sizeof(double) * N), *gref = malloc(sizeof(double) * N * C);
    const tc_dtype dts[2] = {TC_FLOAT32, TC_BFLOAT16};
    for (int d = 0; d < 2; d++)
        for (int mean = 0; mean < 2; mean++) {
            double *xv = NULL;
            tc_tensor *x = rnd(GPU, 2, (int64_t[]){N, C}, dts[d], -6, 6, &xv);
            tc_tensor *tg = targets(GPU, 1, N, t), *loss = NULL, *dl = NULL;
            double scale = mean ? (double)C * (double)kept : (double)C, sum = 0;
            for (int64_t i = 0; i < N; i++) {
                const double *r = xv + i * C;
                double *g = gref + i * C;
                lref[i] = t[i] == -100 ? 0 : ref_ce_row(r, C, t[i]);
                sum += lref[i];
                double m = -INFINITY, s = 0;
                for (int64_t j = 0; j < C; j++)
                    m = fmax(m, r[j]);
                for (int64_t j = 0; j < C; j++)
                    s += exp(r[j] - m);
                double gs = t[i] == -100 ? 0 : mean ? scale / (double)kept : scale;
                for (int64_t j = 0; j < C; j++)
                    g[j] = (exp(r[j] - m) / s - (j == t[i])) * gs;
            }
            if (mean)
                lref[0] = sum / (double)kept;
            tc_reduction red = mean ? TC_REDUCTION_MEAN : TC_REDUCTION_NONE;
            CHECK_OK(tc_nn_cross_entropy_fused(x, tg, -100, red, scale, &loss, &dl));
            near_ref("cross_entropy_fused, staged rows: loss", dts[d], loss, lref, mean ? 1 : N, 2);
            near_ref("cross_entropy_fused, staged rows: dlogits", dts[d], dl, gref, N * C, 2);
            tc_tensor *all[] = {x, tg, loss, dl};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                tc_tensor_release(all[i]);
            free(xv);
        }
    free(lref), free(gref);
}

/* A large 16-bit linear whose width is not whole 16-byte vectors writes
 * rows padded to them (two GEMMs, no copy): the same values as the CPU's,
 * with and without a bias, and a result whose rows are 32776 apart. */
static void test_linear_padded(void)
{
    for (int d = 0; d < 2; d++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            tc_dtype dt = FLOATS[d];
            int64_t xs[3] = {2, 64, 64}, ws[2] = {32771, 64}, bs = 32771;
            tc_tensor *x = rnd(CPU, 3, xs, dt, -1, 1, NULL),
                      *w = rnd(CPU, 2, ws, dt, -0.2, 0.2, NULL);
            tc_tensor *b = with_bias ? rnd(CPU, 1, &bs, dt, -1, 1, NULL) : NULL;
            tc_tensor *xg = on(GPU, x), *wg = on(GPU, w), *bg = b ? on(GPU, b) : NULL;
            tc_tensor *yc = NULL, *yg = NULL;
            CHECK_OK(tc_nn_linear(x, w, b, &yc));
            CHECK_OK(tc_nn_linear(xg, wg, bg, &yg));
            CHECK(!tc_tensor_is_contiguous(yg) && tc_tensor_stride(yg, 1) == 32776 &&
                  tc_tensor_stride(yg, 0) == 64 * 32776);
            parity("linear, padded rows", yc, yg, 3);
            tc_tensor *all[] = {x, w, b, xg, wg, bg, yc, yg};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                tc_tensor_release(all[i]);
        }
}

/* A 16-bit linear backward whose gradient rows are not whole 16-byte
 * vectors (4099 features, as GPT-2's 50257-word classifier): both GEMMs read
 * grad_output through padded copies, one with k padded with zeros (grad_x)
 * and one in slices of m (grad_weight); the same values as the CPU's.
 * bfloat16 alone: float16 takes the same path, and the CPU's side is slow. */
static void test_linear_backward_padded(void)
{
    tc_dtype dt = TC_BFLOAT16;
    int64_t gs[2] = {2048, 4099}, xs[2] = {2048, 512}, ws[2] = {4099, 512};
    tc_tensor *gy = rnd(CPU, 2, gs, dt, -1, 1, NULL), *x = rnd(CPU, 2, xs, dt, -1, 1, NULL),
              *w = rnd(CPU, 2, ws, dt, -0.2, 0.2, NULL);
    tc_tensor *gyg = on(GPU, gy), *xg = on(GPU, x), *wg = on(GPU, w);
    tc_tensor *dxc = NULL, *dwc = NULL, *dxg = NULL, *dwg = NULL;
    unsigned want = TC_NN_LINEAR_GRAD_X | TC_NN_LINEAR_GRAD_WEIGHT;
    CHECK_OK(tc_nn_linear_backward(gy, x, w, want, &dxc, &dwc, NULL));
    CHECK_OK(tc_nn_linear_backward(gyg, xg, wg, want, &dxg, &dwg, NULL));
    parity("linear_backward grad_x, padded k", dxc, dxg, 3);
    parity("linear_backward grad_weight, padded slices", dwc, dwg, 3);
    tc_tensor *all[] = {gy, x, w, gyg, xg, wg, dxc, dwc, dxg, dwg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

/* GPT-2's classifier at 49,152 tokens: logits [49152, 50257] bfloat16,
 * 2.47e9 elements, whose padded rows cuBLAS wrote out of bounds in one
 * GEMM (blas.c now runs it in slices of rows). Rows on both sides of the
 * slices' boundary and the last one, against the CPU's linear of the same
 * rows. Needs some 10 GiB of GPU memory: skipped with less free, and where
 * TC_TEST_SKIP_LARGE is set (gpu.sh sets it under compute-sanitizer, whose
 * instrumented GEMM would take minutes). */
static void test_linear_huge_output(void)
{
    size_t free_b = 0, total_b = 0;
    CHECK_OK(tc_mem_get_info(-1, &free_b, &total_b));
    const char *skip = getenv("TC_TEST_SKIP_LARGE");
    if ((skip && *skip && strcmp(skip, "0")) || free_b < ((size_t)12 << 30)) {
        printf("linear with 2^31 logits: skipped (%zu MiB free%s)\n", free_b >> 20,
               skip ? ", TC_TEST_SKIP_LARGE" : "");
        return;
    }
    tc_dtype dt = TC_BFLOAT16;
    int64_t xs[2] = {49152, 768}, ws[2] = {50257, 768};
    tc_tensor *xg = NULL, *w = rnd(CPU, 2, ws, dt, -0.2, 0.2, NULL), *wg = on(GPU, w), *y = NULL;
    CHECK_OK(tc_tensor_randn(2, xs, dt, GPU, NULL, &xg));
    CHECK_OK(tc_nn_linear(xg, wg, NULL, &y));
    /* the slices hold (2^31 - 1) / 50264 rows, rounded down to 8: 42,720 */
    static const int64_t rows[5] = {0, 1, 42719, 42720, 49151};
    for (int i = 0; i < 5; i++) {
        tc_tensor *xr = NULL, *yr = NULL, *xc = NULL, *ref = NULL;
        CHECK_OK(tc_tensor_narrow(xg, 0, rows[i], 1, &xr));
        CHECK_OK(tc_tensor_narrow(y, 0, rows[i], 1, &yr));
        xc = on(CPU, xr);
        CHECK_OK(tc_nn_linear(xc, w, NULL, &ref));
        char what[80];
        snprintf(what, sizeof what, "linear with 2^31 logits, row %lld", (long long)rows[i]);
        parity(what, ref, yr, 3);
        tc_tensor *all[] = {xr, yr, xc, ref};
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
            tc_tensor_release(all[j]);
    }
    CHECK_OK(tc_synchronize(-1));
    tc_tensor *all[] = {xg, w, wg, y};
    for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
        tc_tensor_release(all[j]);
}

int main(void)
{
    TC_TEST_REQUIRE_GPU();
    tc_test_init();
    test_linear_graph();
    test_cross_entropy_async();
    test_gpu_parity();
    test_gpu_paths();
    test_attention_fused();
    test_cross_entropy_staged();
    test_linear_padded();
    test_linear_backward_padded();
    test_linear_huge_output();
    CHECK_OK(tc_synchronize(-1));
    return TC_TEST_DONE();
}
