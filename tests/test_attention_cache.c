/* tc_nn_attention_with_kv_cache on the CPU against a reference in double
 * (support/attention_cache_check.h): decode's one new token and a few at
 * once, causal or not, grouped queries, no new rows, per-entry and shared
 * lengths of both integer dtypes, head views of a projection, an explicit
 * scale; beside scaled_dot_product_attention over the filled positions;
 * and bad input (sizes, dtypes, NULLs, released handles, sizes past
 * memory, a length out of range), which changes nothing. */
#include "attention_cache_check.h"

static void test_values(void)
{
    for (size_t d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        kv_case base = {.dt = dt,
                        .len_dt = TC_INT64,
                        .b = 2,
                        .h = 4,
                        .hkv = 4,
                        .t = 1,
                        .s = 12,
                        .e = 8,
                        .causal = true,
                        .with_new = true,
                        .per_batch = true,
                        .lens = {5, 0}};
        CHECK(kv_run(CPU, &base, 2, NULL));
        kv_case c = base; /* three new tokens, not causal, one length for all */
        c.t = 3, c.causal = false, c.per_batch = false, c.lens[0] = 9;
        CHECK(kv_run(CPU, &c, 2, NULL));
        c.causal = true; /* causal: token j sees n + j */
        CHECK(kv_run(CPU, &c, 2, NULL));
        c = base; /* grouped queries, int32 lengths, head views, a scale */
        c.h = 6, c.hkv = 2, c.len_dt = TC_INT32, c.strided = true, c.scale = 0.3, c.t = 2;
        c.lens[0] = 3, c.lens[1] = 10;
        CHECK(kv_run(CPU, &c, 2, NULL));
        c = base; /* no new rows: the filled positions only; causal counts back from n */
        c.with_new = false, c.t = 2, c.lens[0] = 4, c.lens[1] = 1;
        CHECK(kv_run(CPU, &c, 2, NULL)); /* entry 1's first row sees nothing: zeros */
        c.causal = false;
        CHECK(kv_run(CPU, &c, 2, NULL));
        c = base; /* a full cache */
        c.lens[0] = 11, c.lens[1] = 11;
        CHECK(kv_run(CPU, &c, 2, NULL));
    }
}

/* With its new rows written, the op equals scaled_dot_product_attention of
 * q over the caches' first n + 1 positions. */
static void test_beside_sdpa(void)
{
    int64_t qs[4] = {1, 3, 1, 16}, cs[4] = {1, 3, 20, 16}, one = 1, n = 7;
    tc_tensor *q = rnd(CPU, 4, qs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *kc = rnd(CPU, 4, cs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *vc = rnd(CPU, 4, cs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *kn = rnd(CPU, 4, qs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *vn = rnd(CPU, 4, qs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *len = NULL, *out = NULL, *k = NULL, *v = NULL, *want = NULL;
    CHECK_OK(tc_tensor_from_data(&n, 1, &one, TC_INT64, CPU, &len));
    CHECK_OK(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, len, true, NULL, &out));
    CHECK_OK(tc_tensor_narrow(kc, 2, 0, n + 1, &k));
    CHECK_OK(tc_tensor_narrow(vc, 2, 0, n + 1, &v));
    CHECK_OK(tc_nn_scaled_dot_product_attention(q, k, v, false, NULL, &want));
    near_tensor("beside sdpa", out, want, 2);
    tc_tensor *all[] = {q, kc, vc, kn, vn, len, out, k, v, want};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tc_tensor_release(all[i]);
}

static void test_bad_input(void)
{
    int64_t qs[4] = {2, 4, 1, 8}, cs[4] = {2, 2, 6, 8}, ns[4] = {2, 2, 1, 8}, two = 2;
    tc_tensor *q = rnd(CPU, 4, qs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *kc = rnd(CPU, 4, cs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *vc = rnd(CPU, 4, cs, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *kn = rnd(CPU, 4, ns, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *vn = rnd(CPU, 4, ns, TC_FLOAT32, -1, 1, NULL);
    int64_t good[2] = {5, 2}, past[2] = {1, 6}, neg[2] = {-1, 0};
    tc_tensor *len = NULL, *len_past = NULL, *len_neg = NULL, *len_f = NULL, *len3 = NULL;
    CHECK_OK(tc_tensor_from_data(good, 1, &two, TC_INT64, CPU, &len));
    CHECK_OK(tc_tensor_from_data(past, 1, &two, TC_INT64, CPU, &len_past));
    CHECK_OK(tc_tensor_from_data(neg, 1, &two, TC_INT64, CPU, &len_neg));
    CHECK_OK(tc_tensor_zeros(1, &two, TC_FLOAT32, CPU, &len_f));
    int64_t three = 3;
    CHECK_OK(tc_tensor_zeros(1, &three, TC_INT64, CPU, &len3));
    double *k0 = tc_test_values(kc), *v0 = tc_test_values(vc);
    tc_tensor *out = NULL;
    /* lengths out of range: nothing written */
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, len_past, true, NULL, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "cache_len[1] is 6") != NULL);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, len_neg, true, NULL, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    double *k1 = tc_test_values(kc), *v1 = tc_test_values(vc);
    CHECK(memcmp(k0, k1, sizeof(double) * 2 * 2 * 6 * 8) == 0);
    CHECK(memcmp(v0, v1, sizeof(double) * 2 * 2 * 6 * 8) == 0);
    CHECK(out == NULL);
    /* the arguments */
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, kn, NULL, len, true, NULL, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, len_f, true, NULL, &out),
                 TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, len3, true, NULL, &out),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, NULL, true, NULL, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, len, true, NULL, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, kc, kn, vn, len, true, NULL, &out),
                 TC_ERROR_INVALID_ARGUMENT); /* one tensor as both caches */
    tc_tensor *q_in_cache = NULL;            /* q reading what the call writes */
    CHECK_OK(tc_tensor_narrow(kc, 2, 0, 1, &q_in_cache));
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q_in_cache, kc, vc, kn, vn, len, true, NULL, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(q_in_cache);
    double inf = INFINITY;
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, len, true, &inf, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    /* sizes: 3 query heads over 2 kv heads; new rows of another count; a 3-d q */
    int64_t q3s[4] = {2, 3, 1, 8}, n2s[4] = {2, 2, 2, 8}, qd[3] = {2, 4, 8};
    tc_tensor *q3 = rnd(CPU, 4, q3s, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *kn2 = rnd(CPU, 4, n2s, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *qd3 = rnd(CPU, 3, qd, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *q16 = rnd(CPU, 4, qs, TC_BFLOAT16, -1, 1, NULL);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q3, kc, vc, kn, vn, len, true, NULL, &out),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, kn2, vn, len, true, NULL, &out),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(qd3, kc, vc, kn, vn, len, true, NULL, &out),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q16, kc, vc, kn, vn, len, true, NULL, &out),
                 TC_ERROR_DTYPE);
    /* released handles, in each operand's place */
    tc_tensor *dead = NULL;
    CHECK_OK(tc_tensor_zeros(4, cs, TC_FLOAT32, CPU, &dead));
    CHECK_OK(tc_tensor_release(dead));
    CHECK_STATUS(tc_nn_attention_with_kv_cache(dead, kc, vc, kn, vn, len, true, NULL, &out),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, dead, vc, kn, vn, len, true, NULL, &out),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, dead, kn, vn, len, true, NULL, &out),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, dead, vn, len, true, NULL, &out),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, dead, true, NULL, &out),
                 TC_ERROR_INVALID_HANDLE);
    /* sizes past memory: q broadcast to 2^40 entries against caches of 2 */
    int64_t huge[4] = {(int64_t)1 << 40, 4, 1, 8};
    tc_tensor *q1 = NULL, *qhuge = NULL;
    CHECK_OK(tc_tensor_narrow(q, 0, 0, 1, &q1)); /* [1, 4, 1, 8] */
    CHECK_OK(tc_tensor_expand(q1, 4, huge, &qhuge));
    CHECK_STATUS(tc_nn_attention_with_kv_cache(qhuge, kc, vc, kn, vn, len, true, NULL, &out),
                 TC_ERROR_SHAPE);
    tc_tensor_release(q1), tc_tensor_release(qhuge);
    /* a cache whose last dim is strided cannot be written in place */
    tc_tensor *kt = NULL;
    int64_t sq[4] = {2, 2, 8, 8};
    tc_tensor *sqc = rnd(CPU, 4, sq, TC_FLOAT32, -1, 1, NULL);
    CHECK_OK(tc_tensor_transpose(sqc, 2, 3, &kt));
    tc_tensor *kt6 = NULL;
    CHECK_OK(tc_tensor_narrow(kt, 2, 0, 6, &kt6));
    CHECK_STATUS(tc_nn_attention_with_kv_cache(q, kt6, vc, kn, vn, len, true, NULL, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(out == NULL);
    double *k2 = tc_test_values(kc);
    CHECK(memcmp(k0, k2, sizeof(double) * 2 * 2 * 6 * 8) == 0);
    free(k0), free(v0), free(k1), free(v1), free(k2);
    tc_tensor *all[] = {q,    kc, vc,  kn,  vn,  len, len_past, len_neg, len_f,
                        len3, q3, kn2, qd3, q16, kt,  sqc,      kt6};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tc_tensor_release(all[i]);
}

int main(void)
{
    tc_test_init();
    test_values();
    test_beside_sdpa();
    test_bad_input();
    return TC_TEST_DONE();
}
