/* tc_nn_attention_with_kv_cache (nn.h): the checks, the operands as the
 * backend takes them (tc__nn_attention_cache, nn_internal.h) and the
 * result's layout. The backends do the rest: cpu/cpu_attention_cache.c and
 * the CUDA kernel kernels/attention_cache.cu. */
#include <math.h>
#include <stdio.h>

#include "nn_internal.h"
#include "tensor_internal.h"

#define FN "tc_nn_attention_with_kv_cache"

/* t is 4-d [b, h, rows, e]: its sizes say so, or TC_ERROR_SHAPE naming it. */
static tc_status check_4d(const tc_tensor *t, const char *what, int64_t b, int64_t h, int64_t rows,
                          int64_t e)
{
    if (t->ndim == 4 && t->sizes[0] == b && t->sizes[1] == h && (rows < 0 || t->sizes[2] == rows) &&
        t->sizes[3] == e)
        return TC_OK;
    int64_t sz[4] = {0};
    for (int i = 0; i < t->ndim && i < 4; i++)
        sz[i] = t->sizes[i];
    char r[24] = "S"; /* a cache's length is any */
    if (rows >= 0)
        snprintf(r, sizeof r, "%lld", (long long)rows);
    return tc__fail(TC_ERROR_SHAPE,
                    FN ": %s must be 4-d [%lld, %lld, %s, %lld] (got %d-d [%lld, %lld, %lld, "
                       "%lld, ...])",
                    what, (long long)b, (long long)h, r, (long long)e, t->ndim, (long long)sz[0],
                    (long long)sz[1], (long long)sz[2], (long long)sz[3]);
}

/* A cache: q's dtype and device, 4-d, writable, unit stride in its last
 * dim, sharing no memory with `other` (the other cache) or with q. */
static tc_status check_cache(const tc_tensor *q, const tc_tensor *c, const char *what,
                             const tc_tensor *other)
{
    TC_TRY(tc__nn_check_like(FN, q, "q", c, what));
    if (c->ndim != 4)
        return tc__fail(TC_ERROR_SHAPE, FN ": %s must be 4-d [B, Hkv, S, E] (got %d-d)", what,
                        c->ndim);
    TC_TRY(tc__check_writable(c));
    TC_CHECK_ARG(c->sizes[3] <= 1 || c->strides[3] == 1,
                 FN ": %s has stride %lld in its last dim; it is written in place, so it needs 1",
                 what, (long long)c->strides[3]);
    TC_CHECK_ARG(tc__overlap_of(c, q) == TC__OVERLAP_NONE &&
                     tc__overlap_of(c, other) == TC__OVERLAP_NONE,
                 FN ": %s shares memory with q or with the other cache", what);
    return TC_OK;
}

/* t's element strides of (entry, head, row); its last dim is unit-stride. */
static void strides_of(const tc_tensor *t, int64_t st[3])
{
    for (int i = 0; i < 3; i++)
        st[i] = t->strides[i];
}

/* *use is t, or a dense copy of t (*owned) when its last dim is strided. */
static tc_status unit_last(const tc_tensor *t, const tc_tensor **use, tc_tensor **owned)
{
    *use = t;
    *owned = NULL;
    if (!t || t->sizes[t->ndim - 1] <= 1 || t->strides[t->ndim - 1] == 1)
        return TC_OK;
    TC_TRY(tc_tensor_contiguous(t, owned));
    *use = *owned;
    return TC_OK;
}

/* The result: [b, h, t, e] over [b, t, h, e] memory. */
static tc_status result_of(const tc_tensor *q, tc_tensor **out)
{
    int64_t msz[4] = {q->sizes[0], q->sizes[2], q->sizes[1], q->sizes[3]};
    tc_tensor *m = NULL;
    TC_TRY(tc__new_tensor(4, msz, q->dtype, q->storage->device, false, &m));
    tc_status st = tc_tensor_transpose(m, 1, 2, out);
    tc_tensor_release(m);
    return st;
}

static tc_status checks(const tc_tensor *q, const tc_tensor *kc, const tc_tensor *vc,
                        const tc_tensor *kn, const tc_tensor *vn, const tc_tensor *len,
                        const double *scale, tc_tensor **out)
{
    TC_TRY(tc__nn_check_float(FN, q, "tc_tensor q"));
    TC_CHECK_ARG(out, FN ": out is NULL");
    TC_CHECK_ARG(!kn == !vn, FN ": k_new is %s but v_new is %s; give both or neither",
                 kn ? "given" : "NULL", vn ? "given" : "NULL");
    TC_CHECK_ARG(kc && vc, FN ": %s is NULL", kc ? "v_cache" : "k_cache");
    TC_CHECK_ARG(len, FN ": cache_len is NULL");
    /* every handle live before any is read (the caches are compared with each other) */
    const tc_tensor *given[5] = {kc, vc, kn, vn, len};
    const char *names[5] = {"k_cache", "v_cache", "k_new", "v_new", "cache_len"};
    for (int i = 0; i < 5; i++)
        if (given[i])
            TC_TRY(tc__tensor_check(given[i], names[i]));
    if (q->ndim != 4)
        return tc__fail(TC_ERROR_SHAPE, FN ": q must be 4-d [B, H, T, E] (got %d-d)", q->ndim);
    TC_TRY(check_cache(q, kc, "k_cache", vc));
    TC_TRY(check_cache(q, vc, "v_cache", kc));
    int64_t b = q->sizes[0], h = q->sizes[1], t = q->sizes[2], e = q->sizes[3];
    int64_t hkv = kc->sizes[1], s = kc->sizes[2];
    TC_TRY(check_4d(kc, "k_cache", b, hkv, -1, e));
    TC_TRY(check_4d(vc, "v_cache", b, hkv, s, e));
    if (hkv == 0 ? h != 0 : h == 0 || h % hkv != 0)
        return tc__fail(TC_ERROR_SHAPE,
                        FN
                        ": q has %lld heads and the caches %lld; q's must be a positive multiple",
                        (long long)h, (long long)hkv);
    if (kn) {
        TC_TRY(tc__nn_check_like(FN, q, "q", kn, "k_new"));
        TC_TRY(tc__nn_check_like(FN, q, "q", vn, "v_new"));
        TC_TRY(check_4d(kn, "k_new", b, hkv, t, e));
        TC_TRY(check_4d(vn, "v_new", b, hkv, t, e));
        if (t > s)
            return tc__fail(TC_ERROR_SHAPE, FN ": %lld new positions do not fit a cache of %lld",
                            (long long)t, (long long)s);
    }
    TC_TRY(tc__check_same_device(FN, q, len));
    if (len->dtype != TC_INT32 && len->dtype != TC_INT64)
        return tc__fail(TC_ERROR_DTYPE, FN ": cache_len is %s; it must be int32 or int64",
                        tc_dtype_string(len->dtype));
    int64_t nl = tc_tensor_numel(len);
    if (nl != 1 && nl != b)
        return tc__fail(TC_ERROR_SHAPE,
                        FN ": cache_len has %lld elements; it needs one per batch entry (%lld) or "
                           "one for all",
                        (long long)nl, (long long)b);
    TC_CHECK_ARG(!scale || isfinite(*scale), FN ": scale is %g; it must be finite",
                 scale ? *scale : 0.0);
    return TC_OK;
}

tc_status tc_nn_attention_with_kv_cache(const tc_tensor *q, tc_tensor *k_cache, tc_tensor *v_cache,
                                        const tc_tensor *k_new, const tc_tensor *v_new,
                                        const tc_tensor *cache_len, bool is_causal,
                                        const double *scale, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(checks(q, k_cache, v_cache, k_new, v_new, cache_len, scale, out));
    const tc__nn_backend *be = tc__nn_of(q->storage->device);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    tc_tensor *res = NULL, *owned[4] = {NULL, NULL, NULL, NULL};
    const tc_tensor *qu = q, *knu = k_new, *vnu = v_new, *lenu = cache_len;
    tc_status st = unit_last(q, &qu, &owned[0]);
    if (st == TC_OK)
        st = unit_last(k_new, &knu, &owned[1]);
    if (st == TC_OK)
        st = unit_last(v_new, &vnu, &owned[2]);
    if (st == TC_OK && !tc_tensor_is_contiguous(cache_len)) {
        st = tc_tensor_contiguous(cache_len, &owned[3]);
        lenu = owned[3];
    }
    if (st == TC_OK)
        st = result_of(q, &res);
    if (st == TC_OK && tc_tensor_numel(res) > 0) {
        tc__nn_attention_cache a = {
            .dtype = q->dtype,
            .len_dtype = cache_len->dtype,
            .q = tc__data(qu),
            .k_new = knu ? tc__data(knu) : NULL,
            .v_new = vnu ? tc__data(vnu) : NULL,
            .len = tc__data(lenu),
            .k_cache = tc__data(k_cache),
            .v_cache = tc__data(v_cache),
            .out = tc__data(res),
            .b = q->sizes[0],
            .h = q->sizes[1],
            .hkv = k_cache->sizes[1],
            .t = q->sizes[2],
            .t_new = knu ? q->sizes[2] : 0,
            .s = k_cache->sizes[2],
            .e = q->sizes[3],
            .scale = scale ? *scale : 1.0 / sqrt((double)q->sizes[3]),
            .causal = is_causal,
            .len_per_batch = tc_tensor_numel(cache_len) > 1,
        };
        strides_of(qu, a.q_strides);
        strides_of(k_cache, a.kc_strides);
        strides_of(v_cache, a.vc_strides);
        strides_of(res, a.out_strides);
        if (knu) {
            strides_of(knu, a.kn_strides);
            strides_of(vnu, a.vn_strides);
        }
        st = be->attention_cache(q->storage->device.index, &a);
    }
    for (int i = 0; i < 4; i++)
        tc_tensor_release(owned[i]);
    return tc__nn_finish(st, res, out);
}
