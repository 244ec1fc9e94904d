/* Attention's backward (nn_backward.h): the math path, composed of tensor
 * operations so that it runs on every device with no kernel of its own; the
 * training pair tc_nn_scaled_dot_product_attention_lse and
 * tc_nn_scaled_dot_product_attention_backward_lse; and the choice of the
 * backend's fused backward (FlashAttention-2's, attention_backward.cu)
 * where it takes the operands, the plain backward running the fused
 * forward again for the lse it needs.
 *
 * The math path:
 *
 * Nothing of the forward is saved: P is recomputed from q and k by the
 * forward's own scores GEMM and fused masked softmax (tensor_nn.c, through
 * nn_internal.h), so the same mask and the same numerics hold. The rest is
 * GEMMs on [B, L, *] views (bmm reads transposed views in place) and
 * softmax's backward, everything in the computation dtype (float32 for
 * 16-bit inputs, converted once at the start and rounded once at the end).
 * At most two [B, L, S] matrices live at a time, P and dP, which softmax's
 * backward from P turns into dS in place (its row sums rowsum(dP * P) taken
 * before it writes a row). */
#include <math.h>
#include <stdio.h>

#include "backends_internal.h"
#include "nn_internal.h"
#include "tcuda/indexing.h"
#include "tcuda/nn_backward.h"
#include "tensor_internal.h"

#define SDPA_BWD "tc_nn_scaled_dot_product_attention_backward"

/* "[2, 3, 4]" into buf. */
static const char *sizes_text(int nd, const int64_t *sizes, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < nd && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", i ? ", " : "", (long long)sizes[i]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

/* g (grad_output, or the forward's out, named by `what`): live, like q,
 * with the forward output's sizes [..., L, Ev]; fn names the call. */
static tc_status check_grad_out(const char *fn, const char *what, const tc_tensor *g,
                                const tc_tensor *q, const tc_tensor *v)
{
    char handle[48];
    snprintf(handle, sizeof handle, "tc_tensor %s", what);
    TC_TRY(tc__tensor_check(g, handle));
    TC_TRY(tc__check_same_device(fn, q, g));
    if (g->dtype != q->dtype)
        return tc__fail(TC_ERROR_DTYPE, "%s: %s is %s but q is %s; they must match", fn, what,
                        tc_dtype_string(g->dtype), tc_dtype_string(q->dtype));
    int nd = q->ndim;
    int64_t want[TC_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        want[i] = q->sizes[i];
    want[nd - 1] = v->sizes[nd - 1];
    bool ok = g->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = g->sizes[i] == want[i];
    if (!ok) {
        char got[160], exp[160];
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: %s is %s; it must have the forward output's sizes %s (q's "
                        "leading sizes and L, v's last size)",
                        fn, what, sizes_text(g->ndim, g->sizes, got, sizeof got),
                        sizes_text(nd, want, exp, sizeof exp));
    }
    return TC_OK;
}

/* t in the computation dtype cdt as [b, rows, cols]: a view where t's
 * layout allows, else a copy. */
static tc_status as_batch(const tc_tensor *t, tc_dtype cdt, int64_t b, tc_tensor **out)
{
    int nd = t->ndim;
    int64_t sz[3] = {b, t->sizes[nd - 2], t->sizes[nd - 1]};
    tc_tensor *c = NULL;
    TC_TRY(tc_tensor_to(t, t->storage->device, cdt, false, &c));
    tc_status st = tc_tensor_reshape(c, 3, sz, out);
    tc_tensor_release(c);
    return st;
}

/* A gradient g [b, rows, cols] of cdt as a new contiguous tensor with like's
 * sizes and dtype; g is released. */
static tc_status finish_grad(tc_tensor *g, const tc_tensor *like, tc_tensor **out)
{
    tc_tensor *r = NULL;
    tc_status st = tc_tensor_view(g, like->ndim, like->sizes, &r);
    tc_tensor_release(g);
    if (st == TC_OK)
        st = tc_tensor_to(r, like->storage->device, like->dtype, false, out);
    tc_tensor_release(r);
    return st;
}

/* Operands as [B, *, *] in the computation dtype. */
typedef struct sdpa_in {
    tc_tensor *go, *q, *k, *v;
} sdpa_in;

static void release_in(sdpa_in *in)
{
    tc_tensor_release(in->go);
    tc_tensor_release(in->q);
    tc_tensor_release(in->k);
    tc_tensor_release(in->v);
}

/* The gradients wanted (NULL slots are skipped), as [B, *, *] of the
 * computation dtype. */
typedef struct sdpa_grads {
    tc_tensor *dq, *dk, *dv;
} sdpa_grads;

/* dS = P * (dP - rowsum(dP * P)) with dP = dO V^T: dP by one GEMM into
 * a new [B, L, S] tensor, then softmax's backward from P over it in place
 * (each row's sum is taken before any of its elements is written). */
static tc_status grad_scores(const sdpa_in *in, const tc_tensor *p, tc_tensor **out)
{
    tc_device dev = p->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    tc_tensor *vt = NULL, *ds = NULL;
    tc_status st = tc_tensor_transpose(in->v, 1, 2, &vt);
    if (st == TC_OK)
        st = tc_tensor_bmm(in->go, vt, &ds);
    tc_tensor_release(vt);
    if (st == TC_OK) { /* both new tensors of their own: dense */
        tc__nn_softmax_bwd a = {.dtype = p->dtype,
                                .grad_out = tc__data(ds),
                                .y = tc__data(p),
                                .grad_in = tc__data(ds),
                                .outer = p->sizes[0] * p->sizes[1],
                                .n = p->sizes[2],
                                .inner = 1};
        st = be->softmax_backward(dev.index, &a);
    }
    return tc__nn_finish(st, ds, out);
}

/* dQ = dS K * scale and dK = dS^T Q * scale, as wanted: one GEMM each with
 * the scale as its alpha (baddbmm with beta 0 does not read its input). */
static tc_status grad_qk(const sdpa_in *in, const tc_tensor *ds, double scale, bool want_q,
                         bool want_k, sdpa_grads *g)
{
    tc_tensor *zero = NULL, *dst = NULL;
    tc_status st = tc_tensor_zeros(0, NULL, in->q->dtype, in->q->storage->device, &zero);
    if (st == TC_OK && want_q)
        st = tc_tensor_baddbmm(zero, ds, in->k, 0, scale, &g->dq);
    if (st == TC_OK && want_k)
        st = tc_tensor_transpose(ds, 1, 2, &dst);
    if (st == TC_OK && want_k)
        st = tc_tensor_baddbmm(zero, dst, in->q, 0, scale, &g->dk);
    tc_tensor_release(dst);
    tc_tensor_release(zero);
    return st;
}

/* The gradients of attention over L, S >= 1, by the header's formulas. */
static tc_status sdpa_grads_of(const sdpa_in *in, bool causal, double scale, bool want_q,
                               bool want_k, bool want_v, sdpa_grads *g)
{
    tc_tensor *p = NULL, *pt = NULL, *ds = NULL;
    tc_status st = tc__nn_attention_probs(in->q, in->k, causal, scale, &p);
    if (st == TC_OK && want_v)
        st = tc_tensor_transpose(p, 1, 2, &pt);
    if (st == TC_OK && want_v)
        st = tc_tensor_bmm(pt, in->go, &g->dv);
    tc_tensor_release(pt);
    if (st == TC_OK && (want_q || want_k))
        st = grad_scores(in, p, &ds);
    tc_tensor_release(p); /* P is done with: only dS and the operands stay */
    if (st == TC_OK && (want_q || want_k))
        st = grad_qk(in, ds, scale, want_q, want_k, g);
    tc_tensor_release(ds);
    return st;
}

/* Zeros for every gradient wanted: with L, S or a leading size 0 every sum
 * that makes a gradient is a sum of nothing. */
static tc_status zero_grads(const tc_tensor *q, const tc_tensor *k, const tc_tensor *v,
                            tc_tensor **dq, tc_tensor **dk, tc_tensor **dv)
{
    tc_device dev = q->storage->device;
    tc_status st = TC_OK;
    if (dq)
        st = tc_tensor_zeros(q->ndim, q->sizes, q->dtype, dev, dq);
    if (st == TC_OK && dk)
        st = tc_tensor_zeros(k->ndim, k->sizes, k->dtype, dev, dk);
    if (st == TC_OK && dv)
        st = tc_tensor_zeros(v->ndim, v->sizes, v->dtype, dev, dv);
    return st;
}

/* The gradients wanted for L, S and every leading size >= 1: the operands
 * in the computation dtype as [b, *, *], the math, then each gradient back
 * to its input's shape and dtype. */
static tc_status math_grads(const tc_tensor *go, const tc_tensor *q, const tc_tensor *k,
                            const tc_tensor *v, bool causal, double scale, int64_t b, bool want_q,
                            bool want_k, bool want_v, sdpa_grads *g)
{
    tc_dtype cdt = q->dtype == TC_FLOAT16 || q->dtype == TC_BFLOAT16 ? TC_FLOAT32 : q->dtype;
    sdpa_in in = {0};
    tc_status st = as_batch(go, cdt, b, &in.go);
    if (st == TC_OK)
        st = as_batch(q, cdt, b, &in.q);
    if (st == TC_OK)
        st = as_batch(k, cdt, b, &in.k);
    if (st == TC_OK)
        st = as_batch(v, cdt, b, &in.v);
    if (st == TC_OK)
        st = sdpa_grads_of(&in, causal, scale, want_q, want_k, want_v, g);
    release_in(&in);
    tc_tensor *raw[3] = {g->dq, g->dk, g->dv};
    const tc_tensor *like[3] = {q, k, v};
    tc_tensor **slot[3] = {&g->dq, &g->dk, &g->dv};
    for (int i = 0; i < 3; i++) { /* finish_grad takes raw[i] */
        *slot[i] = NULL;
        if (raw[i] && st == TC_OK)
            st = finish_grad(raw[i], like[i], slot[i]);
        else
            tc_tensor_release(raw[i]);
    }
    return st;
}

/* ---- the fused backward ---------------------------------------------------------------- */

static _Thread_local uint64_t bwd_fused;

uint64_t tc__nn_attention_backward_fused_count(void) { return bwd_fused; }

/* The gradients wanted into the caller's slots, or on failure all of g
 * released. */
static tc_status hand_out(tc_status st, sdpa_grads *g, tc_tensor **grad_q, tc_tensor **grad_k,
                          tc_tensor **grad_v)
{
    tc_tensor **slot[3] = {grad_q, grad_k, grad_v}, *got[3] = {g->dq, g->dk, g->dv};
    for (int i = 0; i < 3; i++) {
        if (st == TC_OK && slot[i])
            *slot[i] = got[i];
        else
            tc_tensor_release(got[i]);
    }
    return st;
}

/* The backend's fused backward for L, S, E >= 1: reads every operand in
 * place, lse (dense float32 [..., L]) included, and writes each gradient
 * into into[i] where that is given and its strides are the kernels' kind
 * (g's slot then NULL), else into a new dense tensor in g; *done false (g
 * untouched, nothing written) where the backend does not take the operands
 * or there is none. */
static tc_status fused_grads_into(const tc_tensor *go, const tc_tensor *q, const tc_tensor *k,
                                  const tc_tensor *v, const tc_tensor *out, const tc_tensor *lse,
                                  bool causal, double scale, tc_tensor *const into[3],
                                  sdpa_grads *g, bool *done)
{
    *done = false;
    tc_device dev = q->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    int nd = q->ndim;
    if (!be || !be->attention_backward || !tc__nn_attention_fuse_on() ||
        v->sizes[nd - 1] != q->sizes[nd - 1] || lse->dtype != TC_FLOAT32 || !tc__is_contiguous(lse))
        return TC_OK;
    tc__nn_attention_bwd a = {.dtype = q->dtype,
                              .q = tc__data(q),
                              .k = tc__data(k),
                              .v = tc__data(v),
                              .out = tc__data(out),
                              .grad_out = tc__data(go),
                              .lse = (const float *)tc__data(lse),
                              .inner = nd > 2 ? q->sizes[nd - 3] : 1,
                              .l = q->sizes[nd - 2],
                              .s = k->sizes[nd - 2],
                              .e = q->sizes[nd - 1],
                              .scale = scale,
                              .causal = causal,
                              .deterministic = tc__deterministic_algorithms()};
    a.batch = 1;
    for (int i = 0; i < nd - 2; i++)
        a.batch *= q->sizes[i];
    if (!tc__nn_attention_levels(q, a.q_strides) || !tc__nn_attention_levels(k, a.k_strides) ||
        !tc__nn_attention_levels(v, a.v_strides) || !tc__nn_attention_levels(out, a.out_strides) ||
        !tc__nn_attention_levels(go, a.go_strides))
        return TC_OK;
    sdpa_grads r = {0};
    tc_tensor **made[3] = {&r.dq, &r.dk, &r.dv};
    const tc_tensor *like[3] = {q, k, v};
    void **ptr[3] = {&a.dq, &a.dk, &a.dv};
    int64_t *strides[3] = {a.dq_strides, a.dk_strides, a.dv_strides};
    tc_status st = TC_OK;
    for (int i = 0; i < 3 && st == TC_OK; i++) {
        tc_tensor *t = into && into[i] ? into[i] : NULL;
        if (!t || !tc__nn_attention_levels(t, strides[i])) {
            st = tc__new_tensor(nd, like[i]->sizes, like[i]->dtype, dev, false, made[i]);
            if (st != TC_OK)
                break;
            t = *made[i];
            (void)tc__nn_attention_levels(t, strides[i]); /* dense: always two levels */
        }
        *ptr[i] = tc__data(t);
    }
    if (st == TC_OK)
        st = be->attention_backward(dev.index, &a, done);
    if (st != TC_OK || !*done) {
        *done = false;
        tc_tensor_release(r.dq);
        tc_tensor_release(r.dk);
        tc_tensor_release(r.dv);
        return st;
    }
    bwd_fused++;
    *g = r;
    return TC_OK;
}

/* fused_grads_into with every gradient into a new dense tensor. */
static tc_status fused_grads(const tc_tensor *go, const tc_tensor *q, const tc_tensor *k,
                             const tc_tensor *v, const tc_tensor *out, const tc_tensor *lse,
                             bool causal, double scale, sdpa_grads *g, bool *done)
{
    return fused_grads_into(go, q, k, v, out, lse, causal, scale, NULL, g, done);
}

/* tc_nn_scaled_dot_product_attention_backward on a device with a fused
 * backward: the fused forward again, keeping lse, then the fused backward.
 * *done false (g untouched) where either is not fused (the forward then
 * computes nothing): the caller runs the math path. */
static tc_status reforward_grads(const tc_tensor *go, const tc_tensor *q, const tc_tensor *k,
                                 const tc_tensor *v, bool causal, double scale, sdpa_grads *g,
                                 bool *done)
{
    *done = false;
    const tc__nn_backend *be = tc__nn_of(q->storage->device);
    int nd = q->ndim;
    if (!be || !be->attention_backward || !tc__nn_attention_fuse_on() || q->dtype == TC_FLOAT64 ||
        v->sizes[nd - 1] != q->sizes[nd - 1])
        return TC_OK;
    tc_tensor *lse = NULL, *out = NULL;
    bool lse_done = false;
    tc_status st = tc__new_tensor(nd - 1, q->sizes, TC_FLOAT32, q->storage->device, false, &lse);
    if (st == TC_OK)
        st = tc__nn_sdpa_forward(q, k, v, causal, scale, lse, true, &lse_done, &out);
    if (st == TC_OK && lse_done)
        st = fused_grads(go, q, k, v, out, lse, causal, scale, g, done);
    tc_tensor_release(out);
    tc_tensor_release(lse);
    return st;
}

/* Whether attention on q, k, v has nothing to compute (L, S or a leading
 * size 0, or E and Ev both 0: every gradient is then empty, and B * L * S,
 * which no operand's sizes bound then, may be past int64_t); else *b, the
 * product of the leading sizes (bounded by q's or v's elements). */
static bool batch_of(const tc_tensor *q, const tc_tensor *k, const tc_tensor *v, int64_t *b)
{
    int nd = q->ndim;
    bool empty = q->sizes[nd - 2] == 0 || k->sizes[nd - 2] == 0 ||
                 (q->sizes[nd - 1] == 0 && v->sizes[nd - 1] == 0);
    for (int i = 0; i < nd - 2; i++)
        empty = empty || q->sizes[i] == 0;
    *b = 1;
    for (int i = 0; !empty && i < nd - 2; i++)
        *b *= q->sizes[i];
    return empty;
}

/* Both backward entries after their checks (defined with the training
 * pair, below). */
static tc_status grads_of(const tc_tensor *grad_output, const tc_tensor *q, const tc_tensor *k,
                          const tc_tensor *v, const tc_tensor *output, const tc_tensor *lse,
                          bool is_causal, const double *scale, tc_tensor **grad_q,
                          tc_tensor **grad_k, tc_tensor **grad_v);

tc_status tc_nn_scaled_dot_product_attention_backward(const tc_tensor *grad_output,
                                                      const tc_tensor *q, const tc_tensor *k,
                                                      const tc_tensor *v, bool is_causal,
                                                      const double *scale, tc_tensor **grad_q,
                                                      tc_tensor **grad_k, tc_tensor **grad_v)
{
    TC_API_BEGIN;
    TC_TRY(tc__nn_sdpa_check(SDPA_BWD, q, k, v));
    TC_TRY(check_grad_out(SDPA_BWD, "grad_output", grad_output, q, v));
    TC_CHECK_ARG(grad_q || grad_k || grad_v,
                 "%s: grad_q, grad_k and grad_v are all NULL; ask for at least one gradient",
                 SDPA_BWD);
    return grads_of(grad_output, q, k, v, NULL, NULL, is_causal, scale, grad_q, grad_k, grad_v);
}

/* ---- the training pair: forward with lse, backward from it ----------------------------- */

#define SDPA_LSE "tc_nn_scaled_dot_product_attention_lse"
#define SDPA_BWD_LSE "tc_nn_scaled_dot_product_attention_backward_lse"
#define SDPA_BWD_INTO "tc_nn_scaled_dot_product_attention_backward_lse_into"

/* The computation dtype: float32 for 16-bit dtypes (lse's dtype). */
static tc_dtype comp_dtype(tc_dtype dt)
{
    return dt == TC_FLOAT16 || dt == TC_BFLOAT16 ? TC_FLOAT32 : dt;
}

/* The math path's lse for L, S >= 1: logsumexp over the keys of the scaled
 * scores in the computation dtype, -inf where causal masks them, as a new
 * [..., L] tensor. */
static tc_status math_lse(const tc_tensor *q, const tc_tensor *k, bool causal, double scale,
                          int64_t b, tc_tensor **out)
{
    int nd = q->ndim;
    int64_t l = q->sizes[nd - 2], s = k->sizes[nd - 2], msz[2] = {l, s};
    tc_dtype cdt = comp_dtype(q->dtype);
    tc_device dev = q->storage->device;
    tc_tensor *qb = NULL, *kb = NULL, *kt = NULL, *zero = NULL, *sc = NULL, *ones = NULL;
    tc_tensor *mask = NULL, *masked = NULL, *r = NULL;
    tc_status st = as_batch(q, cdt, b, &qb);
    if (st == TC_OK)
        st = as_batch(k, cdt, b, &kb);
    if (st == TC_OK)
        st = tc_tensor_transpose(kb, 1, 2, &kt);
    if (st == TC_OK)
        st = tc_tensor_zeros(0, NULL, cdt, dev, &zero);
    if (st == TC_OK)
        st = tc_tensor_baddbmm(zero, qb, kt, 0, scale, &sc);
    if (st == TC_OK && causal) /* key j > query i is masked: the upper triangle */
        st = tc_tensor_ones(2, msz, TC_BOOL, dev, &ones);
    if (st == TC_OK && causal)
        st = tc_tensor_triu(ones, 1, &mask);
    if (st == TC_OK && causal)
        st = tc_tensor_masked_fill(sc, mask, -INFINITY, &masked);
    if (st == TC_OK)
        st = tc_tensor_logsumexp(causal ? masked : sc, -1, false, &r);
    if (st == TC_OK)
        st = tc_tensor_view(r, nd - 1, q->sizes, out);
    tc_tensor *tmp[9] = {qb, kb, kt, zero, sc, ones, mask, masked, r};
    for (int i = 0; i < 9; i++)
        tc_tensor_release(tmp[i]);
    return st;
}

/* The forward and its lse for L, S, B, Ev >= 1: the fused kernel's where it
 * takes the operands, else the math path's output and math_lse. */
static tc_status forward_lse(const tc_tensor *q, const tc_tensor *k, const tc_tensor *v,
                             bool causal, double scale, int64_t b, tc_tensor **out, tc_tensor **lse)
{
    int nd = q->ndim;
    tc_dtype cdt = comp_dtype(q->dtype);
    tc_tensor *o = NULL, *m = NULL;
    bool done = false;
    tc_status st = tc__new_tensor(nd - 1, q->sizes, cdt, q->storage->device, false, &m);
    if (st == TC_OK)
        st = tc__nn_sdpa_forward(q, k, v, causal, scale, cdt == TC_FLOAT32 ? m : NULL, false, &done,
                                 &o);
    if (st == TC_OK && !done) {
        tc_tensor_release(m);
        m = NULL;
        st = math_lse(q, k, causal, scale, b, &m);
    }
    if (st != TC_OK) {
        tc_tensor_release(o);
        tc_tensor_release(m);
        return st;
    }
    *out = o;
    *lse = m;
    return TC_OK;
}

tc_status tc_nn_scaled_dot_product_attention_lse(const tc_tensor *q, const tc_tensor *k,
                                                 const tc_tensor *v, bool is_causal,
                                                 const double *scale, tc_tensor **out,
                                                 tc_tensor **lse)
{
    TC_API_BEGIN;
    TC_TRY(tc__nn_sdpa_check(SDPA_LSE, q, k, v));
    TC_CHECK_ARG(out, "%s: out is NULL", SDPA_LSE);
    TC_CHECK_ARG(lse, "%s: lse is NULL", SDPA_LSE);
    int nd = q->ndim;
    int64_t l = q->sizes[nd - 2], e = q->sizes[nd - 1], s = k->sizes[nd - 2];
    int64_t ev = v->sizes[nd - 1], b = 1, osz[TC_MAX_DIMS];
    bool none = l == 0 || s == 0;
    for (int i = 0; i < nd - 2; i++)
        none = none || q->sizes[i] == 0;
    for (int i = 0; !none && i < nd - 2; i++) /* bounded by k's elements (E > 0) or lse's */
        b *= q->sizes[i];
    for (int i = 0; i < nd; i++)
        osz[i] = q->sizes[i];
    osz[nd - 1] = ev;
    double sc = scale ? *scale : 1.0 / sqrt((double)e);
    tc_device dev = q->storage->device;
    tc_dtype cdt = comp_dtype(q->dtype);
    tc_tensor *o = NULL, *m = NULL;
    tc_status st;
    if (none) { /* a sum of nothing: log(0) */
        st = tc_tensor_zeros(nd, osz, q->dtype, dev, &o);
        if (st == TC_OK)
            st = tc_tensor_full(nd - 1, q->sizes, -INFINITY, cdt, dev, &m);
    } else if (ev == 0) { /* an empty output, but each row still has its lse */
        st = tc_tensor_zeros(nd, osz, q->dtype, dev, &o);
        if (st == TC_OK)
            st = math_lse(q, k, is_causal, sc, b, &m);
    } else {
        st = forward_lse(q, k, v, is_causal, sc, b, &o, &m);
    }
    if (st != TC_OK) {
        tc_tensor_release(o);
        tc_tensor_release(m);
        return st;
    }
    *out = o;
    *lse = m;
    return TC_OK;
}

/* lse: live, on q's device, of the computation dtype, sized [..., L]. */
static tc_status check_lse(const char *fn, const tc_tensor *lse, const tc_tensor *q)
{
    TC_TRY(tc__tensor_check(lse, "tc_tensor lse"));
    TC_TRY(tc__check_same_device(fn, q, lse));
    tc_dtype cdt = comp_dtype(q->dtype);
    if (lse->dtype != cdt)
        return tc__fail(TC_ERROR_DTYPE, "%s: lse is %s; for %s q it must be %s", fn,
                        tc_dtype_string(lse->dtype), tc_dtype_string(q->dtype),
                        tc_dtype_string(cdt));
    int nd = q->ndim;
    bool ok = lse->ndim == nd - 1;
    for (int i = 0; ok && i < nd - 1; i++)
        ok = lse->sizes[i] == q->sizes[i];
    if (!ok) {
        char got[160], exp[160];
        return tc__fail(TC_ERROR_SHAPE, "%s: lse is %s; it must be %s (q's sizes without E)", fn,
                        sizes_text(lse->ndim, lse->sizes, got, sizeof got),
                        sizes_text(nd - 1, q->sizes, exp, sizeof exp));
    }
    return TC_OK;
}

/* Zeros for empty operands; else, from the forward's output and lse when
 * given (the training pair) or from its fused forward run again for them
 * (the plain backward), the fused kernels where the backend has them, and
 * the math path where it has not. */
static tc_status grads_of(const tc_tensor *grad_output, const tc_tensor *q, const tc_tensor *k,
                          const tc_tensor *v, const tc_tensor *output, const tc_tensor *lse,
                          bool is_causal, const double *scale, tc_tensor **grad_q,
                          tc_tensor **grad_k, tc_tensor **grad_v)
{
    int nd = q->ndim;
    int64_t b;
    sdpa_grads g = {0};
    tc_status st;
    if (batch_of(q, k, v, &b)) {
        st = zero_grads(q, k, v, grad_q ? &g.dq : NULL, grad_k ? &g.dk : NULL,
                        grad_v ? &g.dv : NULL);
    } else {
        double sc = scale ? *scale : 1.0 / sqrt((double)q->sizes[nd - 1]);
        bool done = false;
        if (!lse)
            st = reforward_grads(grad_output, q, k, v, is_causal, sc, &g, &done);
        else if (q->sizes[nd - 1] == 0)
            st = TC_OK;
        else
            st = fused_grads(grad_output, q, k, v, output, lse, is_causal, sc, &g, &done);
        if (st == TC_OK && !done)
            st = math_grads(grad_output, q, k, v, is_causal, sc, b, grad_q, grad_k, grad_v, &g);
    }
    return hand_out(st, &g, grad_q, grad_k, grad_v);
}

/* The backward from the forward's output and lse: its operands checked
 * against each other, fn naming the call. */
static tc_status check_lse_pair(const char *fn, const tc_tensor *grad_output, const tc_tensor *q,
                                const tc_tensor *k, const tc_tensor *v, const tc_tensor *output,
                                const tc_tensor *lse)
{
    TC_TRY(tc__nn_sdpa_check(fn, q, k, v));
    TC_TRY(check_grad_out(fn, "grad_output", grad_output, q, v));
    TC_TRY(check_grad_out(fn, "output", output, q, v));
    return check_lse(fn, lse, q);
}

tc_status tc_nn_scaled_dot_product_attention_backward_lse(
    const tc_tensor *grad_output, const tc_tensor *q, const tc_tensor *k, const tc_tensor *v,
    const tc_tensor *output, const tc_tensor *lse, bool is_causal, const double *scale,
    tc_tensor **grad_q, tc_tensor **grad_k, tc_tensor **grad_v)
{
    TC_API_BEGIN;
    TC_TRY(check_lse_pair(SDPA_BWD_LSE, grad_output, q, k, v, output, lse));
    TC_CHECK_ARG(grad_q || grad_k || grad_v,
                 "%s: grad_q, grad_k and grad_v are all NULL; ask for at least one gradient",
                 SDPA_BWD_LSE);
    return grads_of(grad_output, q, k, v, output, lse, is_causal, scale, grad_q, grad_k, grad_v);
}

/* A destination of the _into backward: of t's (the operand's) shape, dtype
 * and device, writable, apart from every input. */
static tc_status check_into(const tc_tensor *d, const tc_tensor *like, const char *what,
                            const tc_tensor *const in[6])
{
    if (!d)
        return TC_OK;
    TC_TRY(tc__tensor_check(d, what));
    TC_TRY(tc__check_same_device(SDPA_BWD_INTO, like, d));
    bool ok = d->ndim == like->ndim && d->dtype == like->dtype;
    for (int i = 0; ok && i < d->ndim; i++)
        ok = d->sizes[i] == like->sizes[i];
    if (!ok) {
        char got[160], exp[160];
        return tc__fail(d->dtype != like->dtype ? TC_ERROR_DTYPE : TC_ERROR_SHAPE,
                        "%s: %s is %s %s; it must be %s %s, as its operand", SDPA_BWD_INTO, what,
                        tc_dtype_string(d->dtype), sizes_text(d->ndim, d->sizes, got, sizeof got),
                        tc_dtype_string(like->dtype),
                        sizes_text(like->ndim, like->sizes, exp, sizeof exp));
    }
    TC_TRY(tc__check_writable(d));
    static const char *names[6] = {"grad_output", "q", "k", "v", "output", "lse"};
    for (int j = 0; j < 6; j++)
        if (tc__overlap_of(d, in[j]) != TC__OVERLAP_NONE)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: %s shares memory with %s",
                            SDPA_BWD_INTO, what, names[j]);
    return TC_OK;
}

tc_status tc_nn_scaled_dot_product_attention_backward_lse_into(
    const tc_tensor *grad_output, const tc_tensor *q, const tc_tensor *k, const tc_tensor *v,
    const tc_tensor *output, const tc_tensor *lse, bool is_causal, const double *scale,
    tc_tensor *grad_q, tc_tensor *grad_k, tc_tensor *grad_v)
{
    TC_API_BEGIN;
    TC_TRY(check_lse_pair(SDPA_BWD_INTO, grad_output, q, k, v, output, lse));
    TC_CHECK_ARG(grad_q || grad_k || grad_v,
                 "%s: grad_q, grad_k and grad_v are all NULL; pass at least one", SDPA_BWD_INTO);
    const tc_tensor *const in[6] = {grad_output, q, k, v, output, lse};
    TC_TRY(check_into(grad_q, q, "tc_tensor grad_q", in));
    TC_TRY(check_into(grad_k, k, "tc_tensor grad_k", in));
    TC_TRY(check_into(grad_v, v, "tc_tensor grad_v", in));
    tc_tensor *const into[3] = {grad_q, grad_k, grad_v};
    static const char *names[3] = {"grad_q", "grad_k", "grad_v"};
    /* destinations may interleave in one buffer (strided views: TOO_HARD to
     * tell), never share elements for certain */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < i; j++) {
            tc__overlap o = into[i] && into[j] ? tc__overlap_of(into[i], into[j])
                                               : TC__OVERLAP_NONE;
            if (o == TC__OVERLAP_SAME || o == TC__OVERLAP_PARTIAL)
                return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: %s shares memory with %s",
                                SDPA_BWD_INTO, names[i], names[j]);
        }
    int nd = q->ndim;
    int64_t b;
    sdpa_grads g = {0};
    bool done = false;
    tc_status st = TC_OK;
    if (!batch_of(q, k, v, &b) && q->sizes[nd - 1] > 0) {
        double sc = scale ? *scale : 1.0 / sqrt((double)q->sizes[nd - 1]);
        st = fused_grads_into(grad_output, q, k, v, output, lse, is_causal, sc, into, &g, &done);
    }
    if (st == TC_OK && !done) /* every other case: new tensors, then copies */
        st = grads_of(grad_output, q, k, v, output, lse, is_causal, scale, grad_q ? &g.dq : NULL,
                      grad_k ? &g.dk : NULL, grad_v ? &g.dv : NULL);
    tc_tensor *got[3] = {g.dq, g.dk, g.dv};
    for (int i = 0; i < 3; i++) {
        if (st == TC_OK && into[i] && got[i])
            st = tc_tensor_copy_(into[i], got[i], false);
        tc_tensor_release(got[i]);
    }
    return st;
}
