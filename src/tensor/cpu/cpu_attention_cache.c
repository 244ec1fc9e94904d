/* The CPU's attention over a key/value cache (tc__nn_attention_cache,
 * tensor/nn_internal.h): the reference the GPU kernel is compared with.
 * Every length is checked before anything is written; then the new keys
 * and values are copied into the caches, and each query row is computed in
 * double in two passes over the positions it sees (the largest score, then
 * the weights and their sum), rounded once to the dtype. */
#include <math.h>
#include <stdlib.h>

#include "tensor/nn_internal.h"
#include "tensor/tensor_internal.h"
#include "cpu_float_io.h"

/* Batch entry i's filled length. */
static int64_t len_of(const tc__nn_attention_cache *a, int64_t i)
{
    int64_t at = a->len_per_batch ? i : 0;
    return a->len_dtype == TC_INT32 ? ((const int32_t *)a->len)[at] : ((const int64_t *)a->len)[at];
}

/* Element offset of (entry i, head h, row r) for strides st. */
static int64_t at(const int64_t st[3], int64_t i, int64_t h, int64_t r)
{
    return i * st[0] + h * st[1] + r * st[2];
}

/* The new rows into the caches: row r of head h goes to position n + r. */
static void write_new(const tc__nn_attention_cache *a, int64_t i, int64_t n)
{
    for (int64_t h = 0; h < a->hkv; h++)
        for (int64_t r = 0; r < a->t_new; r++) {
            int64_t kn = at(a->kn_strides, i, h, r), vn = at(a->vn_strides, i, h, r);
            int64_t kc = at(a->kc_strides, i, h, n + r), vc = at(a->vc_strides, i, h, n + r);
            for (int64_t x = 0; x < a->e; x++) {
                st(a->k_cache, a->dtype, kc + x, ld(a->k_new, a->dtype, kn + x));
                st(a->v_cache, a->dtype, vc + x, ld(a->v_new, a->dtype, vn + x));
            }
        }
}

/* Query row j of head hq of entry i, which sees positions 0..seen-1 of kv
 * head hk (the caches hold the new rows by now); w and acc are scratch of
 * s and e doubles. */
static void one_row(const tc__nn_attention_cache *a, int64_t i, int64_t hq, int64_t hk, int64_t j,
                    int64_t seen, double *w, double *acc)
{
    tc_dtype dt = a->dtype;
    int64_t q = at(a->q_strides, i, hq, j), o = at(a->out_strides, i, hq, j);
    double m = -INFINITY, sum = 0;
    for (int64_t p = 0; p < seen; p++) {
        int64_t k = at(a->kc_strides, i, hk, p);
        double d = 0;
        for (int64_t x = 0; x < a->e; x++)
            d += ld(a->q, dt, q + x) * ld(a->k_cache, dt, k + x);
        w[p] = d * a->scale;
        m = fmax(m, w[p]);
    }
    for (int64_t x = 0; x < a->e; x++)
        acc[x] = 0;
    for (int64_t p = 0; p < seen; p++) {
        double wp = exp(w[p] - m);
        int64_t v = at(a->vc_strides, i, hk, p);
        sum += wp;
        for (int64_t x = 0; x < a->e; x++)
            acc[x] += wp * ld(a->v_cache, dt, v + x);
    }
    for (int64_t x = 0; x < a->e; x++)
        st(a->out, dt, o + x, seen > 0 ? acc[x] / sum : 0.0);
}

tc_status tc__cpu_nn_attention_cache(int device, const tc__nn_attention_cache *a)
{
    (void)device;
    for (int64_t i = 0; i < a->b; i++) {
        int64_t n = len_of(a, i);
        if (n < 0 || n > a->s - a->t_new)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "tc_nn_attention_with_kv_cache: cache_len[%lld] is %lld: with %lld new "
                            "positions the cache of %lld takes lengths 0..%lld",
                            (long long)(a->len_per_batch ? i : 0), (long long)n,
                            (long long)a->t_new, (long long)a->s, (long long)(a->s - a->t_new));
    }
    double *w = malloc(sizeof(double) * (size_t)(a->s + a->e + 1));
    if (!w)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "tc_nn_attention_with_kv_cache: no host memory "
                                                "for a row's scores");
    int64_t group = a->h / a->hkv;
    for (int64_t i = 0; i < a->b; i++) {
        int64_t n = len_of(a, i);
        write_new(a, i, n);
        for (int64_t hq = 0; hq < a->h; hq++)
            for (int64_t j = 0; j < a->t; j++) {
                int64_t last = a->causal ? n + a->t_new - a->t + j : n + a->t_new - 1;
                one_row(a, i, hq, hq / group, j, last < 0 ? 0 : last + 1, w, w + a->s);
            }
    }
    free(w);
    return TC_OK;
}
