/* One case of tc_nn_attention_with_kv_cache checked against a reference
 * written here in double: the caches as they must be after the call (the
 * new rows at each entry's length, every other position unchanged, bit for
 * bit) and each query row's softmax-weighted sum over the positions it
 * sees. Shared by the CPU and GPU tests. */
#ifndef TC_ATTENTION_CACHE_CHECK_H
#define TC_ATTENTION_CACHE_CHECK_H

#include <string.h>

#include "nn_check.h"

typedef struct kv_case {
    tc_dtype dt, len_dt;
    int64_t b, h, hkv, t, s, e;
    bool causal, with_new, per_batch;
    bool strided;    /* q, k_new and v_new are head views of [B, T, H, E] tensors, the caches of
                        [B, S, Hkv, E] ones */
    double scale;    /* 0: the default */
    int64_t lens[8]; /* per entry (per_batch) or lens[0] for all */
} kv_case;

/* A random [b, h, rows, e] tensor on dev: dense, or (strided) the
 * transpose(1, 2) of a dense [b, rows, h, e] one. *v: its values. */
static inline tc_tensor *kv_rnd(tc_device dev, tc_dtype dt, int64_t b, int64_t h, int64_t rows,
                                int64_t e, bool strided, double **v)
{
    int64_t dense[4] = {b, h, rows, e}, swapped[4] = {b, rows, h, e};
    if (!strided)
        return rnd(dev, 4, dense, dt, -1, 1, v);
    tc_tensor *m = rnd(dev, 4, swapped, dt, -1, 1, NULL), *t = NULL;
    CHECK_OK(tc_tensor_transpose(m, 1, 2, &t));
    tc_tensor_release(m);
    *v = tc_test_values(t);
    return t;
}

/* Element (i, h, r, x) of a dense [.., hs, rows, e] array. */
static inline int64_t kv_at(int64_t hs, int64_t rows, int64_t e, int64_t i, int64_t h, int64_t r,
                            int64_t x)
{
    return ((i * hs + h) * rows + r) * e + x;
}

/* The reference: kc, vc updated in place, out [b, h, t, e]. */
static inline void kv_reference(const kv_case *c, const double *q, double *kc, double *vc,
                                const double *kn, const double *vn, double *out)
{
    int64_t tn = c->with_new ? c->t : 0, group = c->h / c->hkv;
    double scale = c->scale != 0 ? c->scale : 1 / sqrt((double)c->e);
    double *w = malloc(sizeof(double) * (size_t)(c->s + 1));
    for (int64_t i = 0; i < c->b; i++) {
        int64_t n = c->lens[c->per_batch ? i : 0];
        for (int64_t h = 0; h < c->hkv; h++)
            for (int64_t r = 0; r < tn; r++)
                for (int64_t x = 0; x < c->e; x++) {
                    kc[kv_at(c->hkv, c->s, c->e, i, h, n + r, x)] =
                        kn[kv_at(c->hkv, c->t, c->e, i, h, r, x)];
                    vc[kv_at(c->hkv, c->s, c->e, i, h, n + r, x)] =
                        vn[kv_at(c->hkv, c->t, c->e, i, h, r, x)];
                }
        for (int64_t hq = 0; hq < c->h; hq++)
            for (int64_t j = 0; j < c->t; j++) {
                int64_t hk = hq / group, last = c->causal ? n + tn - c->t + j : n + tn - 1;
                double m = -INFINITY, sum = 0;
                for (int64_t p = 0; p <= last; p++) {
                    double d = 0;
                    for (int64_t x = 0; x < c->e; x++)
                        d += q[kv_at(c->h, c->t, c->e, i, hq, j, x)] *
                             kc[kv_at(c->hkv, c->s, c->e, i, hk, p, x)];
                    w[p] = d * scale;
                    m = fmax(m, w[p]);
                }
                for (int64_t p = 0; p <= last; p++)
                    sum += (w[p] = exp(w[p] - m));
                for (int64_t x = 0; x < c->e; x++) {
                    double a = 0;
                    for (int64_t p = 0; p <= last; p++)
                        a += w[p] * vc[kv_at(c->hkv, c->s, c->e, i, hk, p, x)];
                    out[kv_at(c->h, c->t, c->e, i, hq, j, x)] = last < 0 ? 0 : a / sum;
                }
            }
    }
    free(w);
}

/* The case's length tensor on dev. */
static inline tc_tensor *kv_lens(tc_device dev, const kv_case *c)
{
    int64_t n = c->per_batch ? c->b : 1;
    int32_t l32[8];
    for (int64_t i = 0; i < n; i++)
        l32[i] = (int32_t)c->lens[i];
    tc_tensor *h = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(c->len_dt == TC_INT32 ? (const void *)l32 : (const void *)c->lens,
                                 1, &n, c->len_dt, CPU, &h));
    CHECK_OK(tc_tensor_to(h, dev, c->len_dt, false, &t));
    tc_tensor_release(h);
    return t;
}

/* Runs the case on dev; true when out and the caches are as the reference
 * says. *out_kept (when not NULL) gets the result for the caller. */
static inline bool kv_run(tc_device dev, const kv_case *c, double mul, tc_tensor **out_kept)
{
    double *qv, *kcv, *vcv, *knv = NULL, *vnv = NULL;
    tc_tensor *q = kv_rnd(dev, c->dt, c->b, c->h, c->t, c->e, c->strided, &qv);
    tc_tensor *kc = kv_rnd(dev, c->dt, c->b, c->hkv, c->s, c->e, c->strided, &kcv);
    tc_tensor *vc = kv_rnd(dev, c->dt, c->b, c->hkv, c->s, c->e, c->strided, &vcv);
    tc_tensor *kn = NULL, *vn = NULL, *out = NULL;
    if (c->with_new) {
        kn = kv_rnd(dev, c->dt, c->b, c->hkv, c->t, c->e, c->strided, &knv);
        vn = kv_rnd(dev, c->dt, c->b, c->hkv, c->t, c->e, c->strided, &vnv);
    }
    tc_tensor *len = kv_lens(dev, c);
    double *ref = malloc(sizeof(double) * (size_t)(c->b * c->h * c->t * c->e + 1));
    kv_reference(c, qv, kcv, vcv, knv, vnv, ref);
    double scale = c->scale;
    CHECK_OK(tc_nn_attention_with_kv_cache(q, kc, vc, kn, vn, len, c->causal,
                                           c->scale != 0 ? &scale : NULL, &out));
    bool ok = out && tc_tensor_ndim(out) == 4 && tc_tensor_size(out, 0) == c->b &&
              tc_tensor_size(out, 1) == c->h && tc_tensor_size(out, 2) == c->t &&
              tc_tensor_size(out, 3) == c->e && tc_tensor_dtype(out) == c->dt;
    CHECK(ok);
    ok = ok && near_ref("attention_with_kv_cache", c->dt, out, ref, c->b * c->h * c->t * c->e, mul);
    double *kg = tc_test_values(kc), *vg = tc_test_values(vc);
    size_t cb = sizeof(double) * (size_t)(c->b * c->hkv * c->s * c->e);
    bool caches = memcmp(kg, kcv, cb) == 0 && memcmp(vg, vcv, cb) == 0;
    CHECK(caches);
    ok = ok && caches;
    if (!ok)
        fprintf(stderr,
                "  case %s b %lld h %lld hkv %lld t %lld s %lld e %lld causal %d new %d "
                "strided %d len[0] %lld\n",
                tc_dtype_string(c->dt), (long long)c->b, (long long)c->h, (long long)c->hkv,
                (long long)c->t, (long long)c->s, (long long)c->e, c->causal, c->with_new,
                c->strided, (long long)c->lens[0]);
    free(qv), free(kcv), free(vcv), free(knv), free(vnv), free(ref), free(kg), free(vg);
    tc_tensor_release(q), tc_tensor_release(kc), tc_tensor_release(vc);
    tc_tensor_release(kn), tc_tensor_release(vn), tc_tensor_release(len);
    if (out_kept)
        *out_kept = out;
    else
        tc_tensor_release(out);
    return ok;
}

#endif
