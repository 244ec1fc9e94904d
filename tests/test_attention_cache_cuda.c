/* tc_nn_attention_with_kv_cache on a GPU (kernels/attention_cache.cu)
 * against the reference in double (support/attention_cache_check.h): every
 * dtype; decode shapes whose rows are split across a cluster of blocks
 * (lengths 0, 1, a few hundred, the whole cache) and batches that are not;
 * head sizes that take one and several slices a lane, with and without
 * 16-byte loads; grouped queries, several new tokens, no new rows, head
 * views. Then: the same bits on a second call; a CUDA graph replayed as
 * the length grows on the device, beside the CPU; a length out of range,
 * reported at the next wait with that entry's caches untouched; and a head
 * size past the kernel's. Exits 77 without a GPU. */
#include "attention_cache_check.h"

static void test_values(void)
{
    const tc_dtype dts[] = {TC_BFLOAT16, TC_FLOAT16, TC_FLOAT32, TC_FLOAT64};
    for (size_t d = 0; d < 4; d++) {
        tc_dtype dt = dts[d];
        /* decode: one row a head, split across blocks on compute capability 9.0 */
        const int64_t lens[] = {0, 1, 63, 500, 1023};
        for (size_t i = 0; i < 5; i++) {
            kv_case c = {.dt = dt,
                         .len_dt = TC_INT64,
                         .b = 1,
                         .h = 12,
                         .hkv = 12,
                         .t = 1,
                         .s = 1024,
                         .e = 64,
                         .causal = true,
                         .with_new = true,
                         .lens = {lens[i]}};
            CHECK(kv_run(GPU, &c, 2, NULL));
        }
        /* batch 8 of lengths apart, int32, head views of a projection */
        kv_case c = {.dt = dt,
                     .len_dt = TC_INT32,
                     .b = 8,
                     .h = 12,
                     .hkv = 12,
                     .t = 1,
                     .s = 300,
                     .e = 64,
                     .causal = true,
                     .with_new = true,
                     .per_batch = true,
                     .strided = true,
                     .lens = {0, 7, 299, 128, 64, 65, 200, 1}};
        CHECK(kv_run(GPU, &c, 2, NULL));
        /* head sizes: one slice a lane, several, and no 16-byte loads */
        const int64_t es[] = {8, 40, 128, 200, 256, 320, 512, 6, 33};
        for (size_t i = 0; i < sizeof es / sizeof *es; i++) {
            kv_case e = {.dt = dt,
                         .len_dt = TC_INT64,
                         .b = 2,
                         .h = 2,
                         .hkv = 1,
                         .t = 2,
                         .s = 150,
                         .e = es[i],
                         .causal = true,
                         .with_new = true,
                         .per_batch = true,
                         .lens = {97, 3}};
            CHECK(kv_run(GPU, &e, 2, NULL));
        }
        /* several new tokens, causal or not; none; grouped queries; a scale */
        kv_case m = {.dt = dt,
                     .len_dt = TC_INT64,
                     .b = 2,
                     .h = 8,
                     .hkv = 2,
                     .t = 5,
                     .s = 700,
                     .e = 64,
                     .causal = true,
                     .with_new = true,
                     .per_batch = true,
                     .scale = 0.2,
                     .lens = {600, 2}};
        CHECK(kv_run(GPU, &m, 2, NULL));
        m.causal = false;
        CHECK(kv_run(GPU, &m, 2, NULL));
        m.with_new = false, m.causal = true, m.lens[1] = 3; /* entry 1's first rows: zeros */
        CHECK(kv_run(GPU, &m, 2, NULL));
    }
}

/* The same inputs twice: the same bits (fixed order of the partial sums). */
static void test_same_bits(void)
{
    int64_t qs[4] = {1, 12, 1, 64}, cs[4] = {1, 12, 1024, 64}, one = 1, n = 700;
    tc_tensor *q = rnd(GPU, 4, qs, TC_BFLOAT16, -1, 1, NULL);
    tc_tensor *kc = rnd(GPU, 4, cs, TC_BFLOAT16, -1, 1, NULL);
    tc_tensor *vc = rnd(GPU, 4, cs, TC_BFLOAT16, -1, 1, NULL);
    tc_tensor *kn = rnd(GPU, 4, qs, TC_BFLOAT16, -1, 1, NULL);
    tc_tensor *vn = rnd(GPU, 4, qs, TC_BFLOAT16, -1, 1, NULL);
    tc_tensor *hl = NULL, *len = NULL, *o1 = NULL, *o2 = NULL;
    CHECK_OK(tc_tensor_from_data(&n, 1, &one, TC_INT64, CPU, &hl));
    CHECK_OK(tc_tensor_to(hl, GPU, TC_INT64, false, &len));
    CHECK_OK(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, len, true, NULL, &o1));
    CHECK_OK(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, len, true, NULL, &o2));
    double *a = tc_test_values(o1), *b = tc_test_values(o2);
    CHECK(memcmp(a, b, sizeof(double) * 12 * 64) == 0);
    free(a), free(b);
    tc_tensor *all[] = {q, kc, vc, kn, vn, hl, len, o1, o2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tc_tensor_release(all[i]);
}

/* A decode loop's attention captured once and replayed: each replay writes
 * one more position and advances the length on the device. The CPU runs
 * the same steps one by one. */
static void test_graph(void)
{
    const int steps = 4;
    int64_t qs[4] = {2, 4, 1, 64}, cs[4] = {2, 2, 40, 64}, two = 2, start[2] = {10, 30};
    tc_tensor *qd[4], *qc[4]; /* q, k_new, v_new and the caches' start, on both devices */
    for (int i = 0; i < 3; i++) {
        int64_t *sz = i == 0 ? qs : (int64_t[4]){2, 2, 1, 64};
        qd[i] = rnd(GPU, 4, sz, TC_FLOAT32, -1, 1, NULL);
        CHECK_OK(tc_tensor_to(qd[i], CPU, TC_FLOAT32, false, &qc[i]));
    }
    tc_tensor *kcd = rnd(GPU, 4, cs, TC_FLOAT32, -1, 1, NULL), *kcc = NULL;
    tc_tensor *vcd = rnd(GPU, 4, cs, TC_FLOAT32, -1, 1, NULL), *vcc = NULL;
    CHECK_OK(tc_tensor_to(kcd, CPU, TC_FLOAT32, false, &kcc));
    CHECK_OK(tc_tensor_to(vcd, CPU, TC_FLOAT32, false, &vcc));
    tc_tensor *lc = NULL, *ld = NULL, *onec = NULL, *oned = NULL, *od = NULL, *oc = NULL;
    CHECK_OK(tc_tensor_from_data(start, 1, &two, TC_INT64, CPU, &lc));
    CHECK_OK(tc_tensor_to(lc, GPU, TC_INT64, false, &ld));
    CHECK_OK(tc_tensor_ones(1, &two, TC_INT64, CPU, &onec));
    CHECK_OK(tc_tensor_to(onec, GPU, TC_INT64, false, &oned));
    CHECK_OK(tc_synchronize(-1));
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_create(&g));
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_OK(tc_nn_attention_with_kv_cache(qd[0], kcd, vcd, qd[1], qd[2], ld, true, NULL, &od));
    CHECK_OK(tc_tensor_add_(ld, oned));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    for (int s = 0; s < steps; s++) {
        CHECK_OK(tc_graph_replay(g));
        tc_tensor_release(oc);
        oc = NULL;
        CHECK_OK(tc_nn_attention_with_kv_cache(qc[0], kcc, vcc, qc[1], qc[2], lc, true, NULL, &oc));
        CHECK_OK(tc_tensor_add_(lc, onec));
    }
    CHECK_OK(tc_synchronize(-1));
    near_tensor("graph replay: out", od, oc, 2);
    near_tensor("graph replay: k cache", kcd, kcc, 0);
    near_tensor("graph replay: v cache", vcd, vcc, 0);
    near_tensor("graph replay: lengths", ld, lc, 0);
    CHECK_OK(tc_graph_destroy(g));
    tc_tensor *all[] = {qd[0], qd[1], qd[2], qc[0], qc[1], qc[2], kcd, kcc,
                        vcd,   vcc,   lc,    ld,    onec,  oned,  od,  oc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tc_tensor_release(all[i]);
}

/* A length past the cache: the call queues and returns; the next wait
 * reports it; entry 1's caches are untouched, entry 0's written. */
static void test_bad_length(void)
{
    int64_t qs[4] = {2, 2, 1, 16}, cs[4] = {2, 2, 8, 16}, two = 2, lens[2] = {3, 8};
    tc_tensor *q = rnd(GPU, 4, qs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *kc = rnd(GPU, 4, cs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *vc = rnd(GPU, 4, cs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *kn = rnd(GPU, 4, qs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *vn = rnd(GPU, 4, qs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *hl = NULL, *len = NULL, *out = NULL;
    CHECK_OK(tc_tensor_from_data(lens, 1, &two, TC_INT64, CPU, &hl));
    CHECK_OK(tc_tensor_to(hl, GPU, TC_INT64, false, &len));
    double *k0 = tc_test_values(kc), *knv = tc_test_values(kn);
    CHECK_OK(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, len, true, NULL, &out));
    CHECK_STATUS(tc_synchronize(-1), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "cache_len[1] is 8") != NULL);
    CHECK_OK(tc_synchronize(-1)); /* reported once */
    double *k1 = tc_test_values(kc);
    for (int64_t h = 0; h < 2; h++)
        for (int64_t p = 0; p < 8; p++)
            for (int64_t x = 0; x < 16; x++) {
                int64_t i0 = kv_at(2, 8, 16, 0, h, p, x), i1 = kv_at(2, 8, 16, 1, h, p, x);
                CHECK(k1[i0] == (p == 3 ? knv[kv_at(2, 1, 16, 0, h, 0, x)] : k0[i0]));
                CHECK(k1[i1] == k0[i1]);
            }
    free(k0), free(k1), free(knv);
    /* a head size past the kernel's */
    int64_t bq[4] = {1, 1, 1, 520}, bc[4] = {1, 1, 4, 520}, one = 1;
    tc_tensor *bq_t = rnd(GPU, 4, bq, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *bk = rnd(GPU, 4, bc, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *bv = rnd(GPU, 4, bc, TC_FLOAT32, -1, 1, NULL), *l1 = NULL, *bo = NULL;
    CHECK_OK(tc_tensor_zeros(1, &one, TC_INT64, GPU, &l1));
    CHECK_STATUS(tc_nn_attention_with_kv_cache(bq_t, bk, bv, NULL, NULL, l1, true, NULL, &bo),
                 TC_ERROR_NOT_SUPPORTED);
    CHECK(bo == NULL);
    /* the lengths on another device than q */
    tc_tensor *lh = NULL;
    CHECK_OK(tc_tensor_zeros(1, &one, TC_INT64, CPU, &lh));
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, lh, true, NULL, &bo),
                 TC_ERROR_DEVICE_MISMATCH);
    tc_tensor *all[] = {q, kc, vc, kn, vn, hl, len, out, bq_t, bk, bv, l1, lh};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tc_tensor_release(all[i]);
}

int main(void)
{
    TC_TEST_REQUIRE_GPU();
    tc_test_init();
    test_values();
    test_same_bits();
    test_graph();
    test_bad_length();
    CHECK_OK(tc_synchronize(-1));
    return TC_TEST_DONE();
}
