/* The tensor seam's accesses, declared to the access layer
 * (access/access.h): a table of wrappers installed over the device seam
 * (runtime/device_ops.h) when the first watcher activates.
 *
 * alloc, free and record_stream tell the watchers about the memory tensors
 * get; the compute backend's kernels declare their operands from the
 * tc__iter (operand 0 written, the others read) or from their pointer
 * arguments (fill, reduce, matmul) on the current stream of their device;
 * the host backend does the same for CPU kernels as the host (only memory
 * a stream also uses, pinned memory, matters there); copies across devices
 * declare themselves (tensor_copy_across.c). Each wrapper declares first,
 * then calls the same function of the table below it: a watcher that
 * refuses (the sanitizer's error mode) stops the call before anything is
 * queued. While nobody watches, each wrapper is one branch and the call
 * below.
 *
 * A GPU kernel's spans are all it touches, so it is declared complete: a
 * capture ordered by data (graph/cuda/graph_order.c) orders it by them,
 * opening the operation when it hears of it; the wrapper closes it after
 * the call below. Host work is not complete: such a capture takes what it
 * was not told of as depending on everything before it. */
#include <pthread.h>

#include "access/access.h"
#include "index_internal.h"
#include "nn_internal.h"
#include "tensor_internal.h"
#include "tensor_watch.h"

static const tc__device_ops *prev;
static const tc__backend *prev_be, *prev_host;
static tc__device_ops ops;
static tc__backend dev_be, host_be;
static const tc__nn_backend *prev_nn;
static const tc__index_backend *prev_index;
static tc__nn_backend nn_be;
static tc__index_backend index_be;

static tc_status w_alloc(int device, size_t bytes, void **out)
{
    TC_TRY(prev->alloc(device, bytes, out));
    if (tc__access_on())
        tc__access_alloc(*out, bytes, device, prev->current_stream(device), false);
    return TC_OK;
}

static void protect(void *ptr, int dev, void *stream)
{
    (void)prev->record_stream(ptr, false, dev, stream);
}

static void w_free(void *ptr)
{
    if (tc__access_on())
        tc__access_free(ptr, protect);
    prev->free(ptr);
}

static tc_status w_record_stream(void *ptr, bool host, int device, void *stream)
{
    TC_TRY(prev->record_stream(ptr, host, device, stream));
    if (tc__access_on() && !host)
        tc__access_record_stream(ptr, stream);
    return TC_OK;
}

/* ---- kernels ---------------------------------------------------------------- */

/* Declares n spans of a kernel on device's current stream (complete), or on
 * the host. */
static tc_status declare(bool host, int device, const tc__span *sp, int n, const char *what)
{
    tc__access_op op = {.dev = host ? TC__ACCESS_HOST : device,
                        .stream = host ? NULL : prev->current_stream(device),
                        .spans = sp,
                        .n = n,
                        .what = what,
                        .complete = !host};
    return tc__access_op_publish(&op);
}

/* After the call below a wrapper: closes the operation a watcher opened in
 * declare (the thread's depth was depth_before when the wrapper began: a
 * wrapper that opened nothing closes nothing). */
static tc_status order_done(tc_status st, int depth_before)
{
    if (TC_UNLIKELY(tc__access_depth > depth_before))
        tc__access_op_end();
    return st;
}

static tc_status declare_iter(bool host, int device, const tc__iter *it, const tc_dtype *dts,
                              const char *what)
{
    tc__span sp[TC__MAX_OPERANDS];
    for (int i = 0; i < it->nops && i < TC__MAX_OPERANDS; i++)
        tc__span_of_iter(it, i, dts[i], i == 0, &sp[i]);
    return declare(host, device, sp, it->nops, what);
}

/* The most operands a kernel declared by byte spans has (attention's
 * backward: three gradients, six inputs). */
#define DENSE_MAX 9

static tc_status declare_dense(bool host, int device, const char *what, int n,
                               const void *const *ptrs, const size_t *bytes, const tc_dtype *dts,
                               const bool *writes)
{
    tc__span sp[DENSE_MAX];
    for (int i = 0; i < n && i < DENSE_MAX; i++)
        tc__span_dense(ptrs[i], bytes[i], dts[i], 0, NULL, writes[i], &sp[i]);
    return declare(host, device, sp, n, what);
}

static bool is_comparison(tc__op op) { return op >= TC__OP_EQ && op <= TC__OP_GE; }

static size_t esz(tc_dtype d) { return tc_dtype_size(d); }

/* One set of wrappers per table: HOST is true for the CPU kernels. */
#define SAN_WRAPPERS(P, HOST, BE)                                                                  \
    static tc_status P##unary(int dev, tc__op op, tc_dtype dt, const tc__iter *it)                 \
    {                                                                                              \
        int od = tc__access_depth;                                                                 \
        if (tc__access_on()) {                                                                     \
            tc_dtype d[TC__MAX_OPERANDS] = {dt, dt, dt, dt};                                       \
            TC_TRY(declare_iter(HOST, dev, it, d, "unary kernel"));                                \
        }                                                                                          \
        return order_done(BE->unary(dev, op, dt, it), od);                                         \
    }                                                                                              \
    static tc_status P##binary(int dev, tc__op op, tc_dtype dt, const tc__iter *it)                \
    {                                                                                              \
        int od = tc__access_depth;                                                                 \
        if (tc__access_on()) {                                                                     \
            tc_dtype d[TC__MAX_OPERANDS] = {is_comparison(op) ? TC_BOOL : dt, dt, dt, dt};         \
            TC_TRY(declare_iter(HOST, dev, it, d, "binary kernel"));                               \
        }                                                                                          \
        return order_done(BE->binary(dev, op, dt, it), od);                                        \
    }                                                                                              \
    static tc_status P##where(int dev, tc_dtype dt, const tc__iter *it)                            \
    {                                                                                              \
        int od = tc__access_depth;                                                                 \
        if (tc__access_on()) {                                                                     \
            tc_dtype d[TC__MAX_OPERANDS] = {dt, TC_BOOL, dt, dt};                                  \
            TC_TRY(declare_iter(HOST, dev, it, d, "where kernel"));                                \
        }                                                                                          \
        return order_done(BE->where(dev, dt, it), od);                                             \
    }                                                                                              \
    static tc_status P##convert(int dev, tc_dtype dst, tc_dtype src, const tc__iter *it)           \
    {                                                                                              \
        int od = tc__access_depth;                                                                 \
        if (tc__access_on()) {                                                                     \
            tc_dtype d[TC__MAX_OPERANDS] = {dst, src, src, src};                                   \
            TC_TRY(declare_iter(HOST, dev, it, d, "copy kernel"));                                 \
        }                                                                                          \
        return order_done(BE->convert(dev, dst, src, it), od);                                     \
    }                                                                                              \
    static tc_status P##fill(int dev, tc_dtype dt, void *out, int64_t n, tc__fill v)               \
    {                                                                                              \
        int od = tc__access_depth;                                                                 \
        if (tc__access_on()) {                                                                     \
            const void *p[1] = {out};                                                              \
            size_t b[1] = {(size_t)n * esz(dt)};                                                   \
            bool w[1] = {true};                                                                    \
            TC_TRY(declare_dense(HOST, dev, "fill kernel", 1, p, b, &dt, w));                      \
        }                                                                                          \
        return order_done(BE->fill(dev, dt, out, n, v), od);                                       \
    }                                                                                              \
    static tc_status P##reduce(int dev, tc__op op, tc_dtype it_, tc_dtype ot, const void *in,      \
                               void *out, int64_t outer, int64_t r, int64_t inner)                 \
    {                                                                                              \
        int od = tc__access_depth;                                                                 \
        if (tc__access_on()) {                                                                     \
            const void *p[2] = {out, in};                                                          \
            size_t b[2] = {(size_t)(outer * inner) * esz(ot),                                      \
                           (size_t)(outer * r * inner) * esz(it_)};                                \
            tc_dtype d[2] = {ot, it_};                                                             \
            bool w[2] = {true, false};                                                             \
            TC_TRY(declare_dense(HOST, dev, "reduce kernel", 2, p, b, d, w));                      \
        }                                                                                          \
        return order_done(BE->reduce(dev, op, it_, ot, in, out, outer, r, inner), od);             \
    }                                                                                              \
    static tc_status P##matmul(int dev, tc_dtype dt, const void *a, const void *b, void *c,        \
                               int64_t batch, int64_t m, int64_t n, int64_t k, int64_t sa,         \
                               int64_t sb)                                                         \
    {                                                                                              \
        int od = tc__access_depth;                                                                 \
        if (tc__access_on()) {                                                                     \
            const void *p[3] = {c, a, b};                                                          \
            size_t e = esz(dt);                                                                    \
            size_t by[3] = {(size_t)(batch * m * n) * e, (size_t)((sa ? batch : 1) * m * k) * e,   \
                            (size_t)((sb ? batch : 1) * k * n) * e};                               \
            tc_dtype d[3] = {dt, dt, dt};                                                          \
            bool w[3] = {true, false, false};                                                      \
            TC_TRY(declare_dense(HOST, dev, "matmul", 3, p, by, d, w));                            \
        }                                                                                          \
        return order_done(BE->matmul(dev, dt, a, b, c, batch, m, n, k, sa, sb), od);               \
    }                                                                                              \
    static tc_status P##scan(int dev, tc__op op, tc_dtype dt, const void *in, void *out,           \
                             int64_t outer, int64_t r, int64_t inner)                              \
    {                                                                                              \
        int od = tc__access_depth;                                                                 \
        if (tc__access_on()) {                                                                     \
            const void *p[2] = {out, in};                                                          \
            size_t b = (size_t)(outer * r * inner) * esz(dt), by[2] = {b, b};                      \
            tc_dtype d[2] = {dt, dt};                                                              \
            bool w[2] = {true, false};                                                             \
            TC_TRY(declare_dense(HOST, dev, "scan kernel", 2, p, by, d, w));                       \
        }                                                                                          \
        return order_done(BE->scan(dev, op, dt, in, out, outer, r, inner), od);                    \
    }

SAN_WRAPPERS(d_, false, prev_be)
SAN_WRAPPERS(h_, true, prev_host)

/* ---- the GPU's nn and indexing tables ------------------------------------------------ */
/* Only a GPU's: CPU tensors reach the CPU's tables directly, and the host
 * only matters to the engine for pinned memory, which these ops never get
 * from the core. */

static tc_status d_rows(int dev, const tc__nn_rows *a)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        size_t count = (size_t)(a->outer * a->n * a->inner), wb = (size_t)a->n * esz(a->in_dtype);
        const void *p[4] = {a->out, a->in};
        size_t b[4] = {count * esz(a->out_dtype), count * esz(a->in_dtype)};
        tc_dtype d[4] = {a->out_dtype, a->in_dtype, a->in_dtype, a->in_dtype};
        bool w[4] = {true, false, false, false};
        int n = 2;
        if (a->weight)
            p[n] = a->weight, b[n++] = wb;
        if (a->bias)
            p[n] = a->bias, b[n++] = wb;
        TC_TRY(declare_dense(false, dev, "nn row kernel", n, p, b, d, w));
    }
    return order_done(prev_nn->rows(dev, a), od);
}

/* Elements from the first to the last one an (op) matrix of a strided batch
 * touches: rows r, columns c, leading dimension ld, transposed or not. */
static size_t gemm_extent(int64_t batch, int64_t stride, int64_t r, int64_t c, int64_t ld,
                          bool trans)
{
    if (r == 0 || c == 0)
        return 0;
    int64_t one = trans ? (c - 1) * ld + r : (r - 1) * ld + c;
    return (size_t)((batch - 1) * stride + one);
}

static tc_status d_gemm(int dev, const tc__nn_gemm *g)
{
    int od = tc__access_depth;
    if (tc__access_on() && g->batch > 0) {
        const void *p[3] = {g->c, g->a, g->b};
        size_t b[3] = {
            gemm_extent(g->batch, g->stride_c, g->m, g->n, g->ldc, false) * esz(g->c_dtype),
            gemm_extent(g->batch, g->stride_a, g->m, g->k, g->lda, g->trans_a) * esz(g->dtype),
            gemm_extent(g->batch, g->stride_b, g->k, g->n, g->ldb, g->trans_b) * esz(g->dtype)};
        tc_dtype d[3] = {g->c_dtype, g->dtype, g->dtype};
        bool w[3] = {true, false, false};
        TC_TRY(declare_dense(false, dev, "gemm", 3, p, b, d, w));
    }
    return order_done(prev_nn->gemm(dev, g), od);
}

/* linear's GEMM with its bias: C written, A, B and the bias read. A refusal
 * (*fused false) queues nothing; the copy and the GEMM that follow declare
 * themselves. */
static tc_status d_gemm_bias(int dev, const tc__nn_gemm *g, const void *bias, bool *fused)
{
    int od = tc__access_depth;
    if (tc__access_on() && g->batch > 0) {
        const void *p[4] = {g->c, g->a, g->b, bias};
        size_t b[4] = {
            gemm_extent(g->batch, g->stride_c, g->m, g->n, g->ldc, false) * esz(g->c_dtype),
            gemm_extent(g->batch, g->stride_a, g->m, g->k, g->lda, g->trans_a) * esz(g->dtype),
            gemm_extent(g->batch, g->stride_b, g->k, g->n, g->ldb, g->trans_b) * esz(g->dtype),
            (size_t)g->n * esz(g->c_dtype)};
        tc_dtype d[4] = {g->c_dtype, g->dtype, g->dtype, g->c_dtype};
        bool w[4] = {true, false, false, false};
        TC_TRY(declare_dense(false, dev, "gemm with bias", 4, p, b, d, w));
    }
    return order_done(prev_nn->gemm_bias(dev, g, bias, fused), od);
}

/* Elements from the first to the last one an attention operand touches:
 * `batch` entries of `rows` rows of e elements, strides as tc__nn_attention
 * gives them. */
static size_t attention_extent(const int64_t *st, int64_t batch, int64_t inner, int64_t rows,
                               int64_t e)
{
    return (size_t)((batch / inner - 1) * st[0] + (inner - 1) * st[1] + (rows - 1) * st[2] + e);
}

static tc_status d_cross_entropy(int dev, const tc__nn_ce *a)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        size_t es = esz(a->dtype);
        const void *p[3] = {a->out, a->logits, a->target};
        size_t b[3] = {(a->reduction == TC_REDUCTION_NONE ? (size_t)a->n : 1) * es,
                       (size_t)(a->n * a->c) * es, (size_t)a->n * 8};
        tc_dtype d[3] = {a->dtype, a->dtype, TC_INT64};
        bool w[3] = {true, false, false};
        TC_TRY(declare_dense(false, dev, "cross_entropy kernel", 3, p, b, d, w));
    }
    return order_done(prev_nn->cross_entropy(dev, a), od);
}

/* ---- the backward entries (nn_backward.h): their operands, outputs first ---- */

/* Declares the operands of a backward kernel; NULL pointers (outputs not
 * wanted, optional inputs) are left out. */
static tc_status declare_bwd(int dev, const char *what, int n, const void *const *p,
                             const size_t *b, const tc_dtype *d, const bool *w)
{
    const void *pp[DENSE_MAX];
    size_t bb[DENSE_MAX];
    tc_dtype dd[DENSE_MAX];
    bool ww[DENSE_MAX];
    int k = 0;
    for (int i = 0; i < n && k < DENSE_MAX; i++)
        if (p[i])
            pp[k] = p[i], bb[k] = b[i], dd[k] = d[i], ww[k++] = w[i];
    return declare_dense(false, dev, what, k, pp, bb, dd, ww);
}

/* Fused attention: out (and lse, when asked) written, q, k and v read. A
 * refusal (*done false) queues nothing; the GEMMs and softmax that follow
 * declare themselves. */
static tc_status d_attention(int dev, const tc__nn_attention *a, bool *done)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        size_t es = esz(a->dtype);
        const void *p[5] = {a->out, a->lse, a->q, a->k, a->v};
        size_t b[5] = {attention_extent(a->out_strides, a->batch, a->inner, a->l, a->e) * es,
                       (size_t)(a->batch * a->l) * sizeof(float),
                       attention_extent(a->q_strides, a->batch, a->inner, a->l, a->e) * es,
                       attention_extent(a->k_strides, a->batch, a->inner, a->s, a->e) * es,
                       attention_extent(a->v_strides, a->batch, a->inner, a->s, a->e) * es};
        tc_dtype d[5] = {a->dtype, TC_FLOAT32, a->dtype, a->dtype, a->dtype};
        bool w[5] = {true, true, false, false, false};
        TC_TRY(declare_bwd(dev, "attention kernel", 5, p, b, d, w));
    }
    return order_done(prev_nn->attention(dev, a, done), od);
}

/* Attention over a KV cache: out and both caches written (the new rows go
 * in), q, the new rows and the lengths read. */
static tc_status d_attention_cache(int dev, const tc__nn_attention_cache *a)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        size_t es = esz(a->dtype);
        const void *p[7] = {a->out, a->k_cache, a->v_cache, a->q, a->k_new, a->v_new, a->len};
        /* its operands are [b, heads, rows, e]: attention's two batch levels */
        int64_t bh = a->b * a->h, bkv = a->b * a->hkv;
        size_t b[7] = {attention_extent(a->out_strides, bh, a->h, a->t, a->e) * es,
                       attention_extent(a->kc_strides, bkv, a->hkv, a->s, a->e) * es,
                       attention_extent(a->vc_strides, bkv, a->hkv, a->s, a->e) * es,
                       attention_extent(a->q_strides, bh, a->h, a->t, a->e) * es,
                       attention_extent(a->kn_strides, bkv, a->hkv, a->t_new, a->e) * es,
                       attention_extent(a->vn_strides, bkv, a->hkv, a->t_new, a->e) * es,
                       (size_t)(a->len_per_batch ? a->b : 1) * esz(a->len_dtype)};
        tc_dtype d[7] = {a->dtype, a->dtype, a->dtype, a->dtype, a->dtype, a->dtype, a->len_dtype};
        bool w[7] = {true, true, true, false, false, false, false};
        TC_TRY(declare_bwd(dev, "attention_cache kernel", 7, p, b, d, w));
    }
    return order_done(prev_nn->attention_cache(dev, a), od);
}

/* Fused attention backward: dq, dk and dv (dense) written; q, k, v, out,
 * grad_out and lse read. Its scratch (D) comes from the allocator, which
 * declares it. */
static tc_status d_attention_backward(int dev, const tc__nn_attention_bwd *a, bool *done)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        size_t es = esz(a->dtype);
        const void *p[9] = {a->dq, a->dk, a->dv, a->q, a->k, a->v, a->out, a->grad_out, a->lse};
        size_t b[9] = {attention_extent(a->dq_strides, a->batch, a->inner, a->l, a->e) * es,
                       attention_extent(a->dk_strides, a->batch, a->inner, a->s, a->e) * es,
                       attention_extent(a->dv_strides, a->batch, a->inner, a->s, a->e) * es,
                       attention_extent(a->q_strides, a->batch, a->inner, a->l, a->e) * es,
                       attention_extent(a->k_strides, a->batch, a->inner, a->s, a->e) * es,
                       attention_extent(a->v_strides, a->batch, a->inner, a->s, a->e) * es,
                       attention_extent(a->out_strides, a->batch, a->inner, a->l, a->e) * es,
                       attention_extent(a->go_strides, a->batch, a->inner, a->l, a->e) * es,
                       (size_t)(a->batch * a->l) * sizeof(float)};
        tc_dtype d[9] = {a->dtype, a->dtype, a->dtype, a->dtype,  a->dtype,
                         a->dtype, a->dtype, a->dtype, TC_FLOAT32};
        bool w[9] = {true, true, true, false, false, false, false, false, false};
        TC_TRY(declare_bwd(dev, "attention_backward kernel", 9, p, b, d, w));
    }
    return order_done(prev_nn->attention_backward(dev, a, done), od);
}

static tc_status d_gelu_backward(int dev, const tc__nn_gelu_bwd *a)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        size_t b = (size_t)a->n * esz(a->dtype), bs[3] = {b, b, b};
        const void *p[3] = {a->grad_in, a->grad_out, a->x};
        tc_dtype d[3] = {a->dtype, a->dtype, a->dtype};
        bool w[3] = {true, false, false};
        TC_TRY(declare_bwd(dev, "gelu_backward kernel", 3, p, bs, d, w));
    }
    return order_done(prev_nn->gelu_backward(dev, a), od);
}

static tc_status d_softmax_backward(int dev, const tc__nn_softmax_bwd *a)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        size_t b = (size_t)(a->outer * a->n * a->inner) * esz(a->dtype), bs[3] = {b, b, b};
        const void *p[3] = {a->grad_in, a->grad_out, a->y};
        tc_dtype d[3] = {a->dtype, a->dtype, a->dtype};
        bool w[3] = {true, false, false};
        TC_TRY(declare_bwd(dev, "softmax_backward kernel", 3, p, bs, d, w));
    }
    return order_done(prev_nn->softmax_backward(dev, a), od);
}

/* layer_norm's statistics: float32 for 16-bit dtypes. */
static tc_dtype stat_of(tc_dtype d) { return d == TC_FLOAT64 ? TC_FLOAT64 : TC_FLOAT32; }

static tc_status d_layer_norm(int dev, const tc__nn_ln *a)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        tc_dtype t = a->dtype, s = stat_of(t), o = a->out_dtype, r = a->res_dtype;
        size_t elems = (size_t)(a->m * a->n), rows = elems * esz(t), vec = (size_t)a->n * esz(t);
        size_t st = (size_t)a->m * esz(s);
        size_t b[8] = {elems * esz(o), st, st, rows, vec, vec, rows, elems * esz(r)};
        /* sum and residual NULL without a residual: no span */
        const void *p[8] = {a->y, a->mean, a->rstd, a->x, a->weight, a->bias, a->sum, a->residual};
        tc_dtype d[8] = {o, s, s, t, t, t, t, r};
        bool w[8] = {true, true, true, false, false, false, true, false};
        TC_TRY(declare_bwd(dev, "layer_norm kernel", 8, p, b, d, w));
    }
    return order_done(prev_nn->layer_norm(dev, a), od);
}

/* layer_norm's backward: dx, dweight and dbias written (read too when
 * accumulating: a write covers both), the rest read. */
static tc_status d_layer_norm_backward(int dev, const tc__nn_ln_bwd *a)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        tc_dtype t = a->dtype, s = stat_of(t), g = a->grad_dtype, c = a->cast_dtype;
        size_t rows = (size_t)(a->m * a->n) * esz(t), vec = (size_t)a->n * esz(t);
        size_t grows = (size_t)(a->m * a->n) * esz(g), st = (size_t)a->m * esz(s);
        size_t b[9] = {rows, vec, vec, grows, rows, st, st, vec, (size_t)(a->m * a->n) * esz(c)};
        const void *p[9] = {a->dx,   a->dweight, a->dbias,  a->grad_out, a->x,
                            a->mean, a->rstd,    a->weight, a->dx_cast};
        tc_dtype d[9] = {t, t, t, g, t, s, s, t, c};
        bool w[9] = {true, true, true, false, false, false, false, false, true};
        TC_TRY(declare_bwd(dev, "layer_norm_backward kernel", 9, p, b, d, w));
    }
    return order_done(prev_nn->layer_norm_backward(dev, a), od);
}

static tc_status d_cross_entropy_backward(int dev, const tc__nn_ce_bwd *a)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        size_t es = esz(a->dtype), n = (size_t)a->n;
        bool none = a->reduction == TC_REDUCTION_NONE;
        /* rows ld (d_ld) apart: the span to the last row's end */
        size_t x = n ? ((n - 1) * (size_t)a->ld + (size_t)a->c) * es : 0;
        size_t dx = n ? ((n - 1) * (size_t)a->d_ld + (size_t)a->c) * es : 0;
        size_t b[5] = {dx, (none ? n : 1) * esz(a->loss_dtype), x, n * 8,
                       (a->grad_per_row ? n : 1) * es};
        const void *p[5] = {a->dlogits, a->loss, a->logits, a->target, a->grad};
        tc_dtype d[5] = {a->dtype, a->loss_dtype, a->dtype, TC_INT64, a->dtype};
        bool w[5] = {true, true, false, false, false};
        TC_TRY(declare_bwd(dev, "cross_entropy_backward kernel", 5, p, b, d, w));
    }
    return order_done(prev_nn->cross_entropy_backward(dev, a), od);
}

/* embedding's backward: grad_weight read and written, grad_output and the
 * indices read (its scratch is the allocator's, declared there). */
static tc_status d_embedding_backward(int dev, const tc__nn_embedding_bwd *a)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        size_t es = esz(a->dtype);
        const void *p[3] = {a->grad_weight, a->grad_output, a->indices};
        size_t b[3] = {(size_t)(a->v * a->c) * es, (size_t)(a->n * a->c) * es, (size_t)a->n * 8};
        tc_dtype d[3] = {a->dtype, a->dtype, TC_INT64};
        bool w[3] = {true, false, false};
        TC_TRY(declare_dense(false, dev, "embedding backward kernel", 3, p, b, d, w));
    }
    return order_done(prev_nn->embedding_backward(dev, a), od);
}

/* linear's weight and bias gradients: C and the bias gradient written (C
 * read too where beta is 1), A and B read. */
static tc_status d_gemm_bgrad(int dev, const tc__nn_gemm *g, void *bias_grad, bool *fused)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        const void *p[4] = {g->c, g->a, g->b, bias_grad};
        size_t b[4] = {
            gemm_extent(g->batch, g->stride_c, g->m, g->n, g->ldc, false) * esz(g->c_dtype),
            gemm_extent(g->batch, g->stride_a, g->m, g->k, g->lda, g->trans_a) * esz(g->dtype),
            gemm_extent(g->batch, g->stride_b, g->k, g->n, g->ldb, g->trans_b) * esz(g->dtype),
            (size_t)g->m * esz(g->dtype)};
        tc_dtype d[4] = {g->c_dtype, g->dtype, g->dtype, g->dtype};
        bool w[4] = {true, false, false, true};
        TC_TRY(declare_dense(false, dev, "gemm with bias gradient", 4, p, b, d, w));
    }
    return order_done(prev_nn->gemm_bgrad(dev, g, bias_grad, fused), od);
}

/* The gelu epilogue: C and aux written; A, B and the bias read. */
static tc_status declare_gelu(int dev, const tc__nn_gemm *g, const void *vec, const void *aux)
{
    const void *p[5] = {g->c, g->a, g->b, vec, aux};
    size_t c = gemm_extent(g->batch, g->stride_c, g->m, g->n, g->ldc, false) * esz(g->c_dtype);
    size_t b[5] = {
        c, gemm_extent(g->batch, g->stride_a, g->m, g->k, g->lda, g->trans_a) * esz(g->dtype),
        gemm_extent(g->batch, g->stride_b, g->k, g->n, g->ldb, g->trans_b) * esz(g->dtype),
        (size_t)g->n * esz(g->c_dtype), (size_t)(g->m * g->n) * esz(g->c_dtype)};
    tc_dtype d[5] = {g->c_dtype, g->dtype, g->dtype, g->c_dtype, g->c_dtype};
    bool w[5] = {true, false, false, false, true};
    return declare_dense(false, dev, "gemm with gelu", 5, p, b, d, w);
}

static tc_status d_gemm_gelu(int dev, const tc__nn_gemm *g, const void *bias, void *aux,
                             bool *fused)
{
    int od = tc__access_depth;
    if (tc__access_on())
        TC_TRY(declare_gelu(dev, g, bias, aux));
    return order_done(prev_nn->gemm_gelu(dev, g, bias, aux, fused), od);
}

/* dropout's product: out written, x and the mask read. */
static tc_status d_dropout(int dev, const tc__nn_dropout *a)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        size_t n = (size_t)a->n;
        const void *p[3] = {a->out, a->x, a->mask};
        size_t b[3] = {n * esz(a->dtype), n * esz(a->dtype), n};
        tc_dtype d[3] = {a->dtype, a->dtype, TC_BOOL};
        bool w[3] = {true, false, false};
        TC_TRY(declare_dense(false, dev, "dropout kernel", 3, p, b, d, w));
    }
    return order_done(prev_nn->dropout(dev, a), od);
}

/* The spans of an indexing iter; operand `along` (stride 0 along the
 * indexed dimension) reaches dim_size entries dim_stride apart. */
static tc_status declare_indexed(int dev, const tc__iter *it, const tc_dtype *dts, int along,
                                 int64_t dim_stride, int64_t dim_size, const char *what)
{
    tc__span sp[TC__MAX_OPERANDS];
    for (int i = 0; i < it->nops && i < TC__MAX_OPERANDS; i++)
        tc__span_of_iter(it, i, dts[i], i == 0, &sp[i]);
    if (dim_size > 0 && sp[along].hi > sp[along].lo)
        sp[along].hi += (uintptr_t)((dim_size - 1) * dim_stride) * esz(dts[along]);
    return declare(false, dev, sp, it->nops, what);
}

static tc_status d_gather(int dev, tc_dtype dt, tc_dtype idt, const tc__iter *it,
                          int64_t dim_stride, int64_t dim_size)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        tc_dtype d[TC__MAX_OPERANDS] = {dt, dt, idt, idt};
        TC_TRY(declare_indexed(dev, it, d, 1, dim_stride, dim_size, "gather kernel"));
    }
    return order_done(prev_index->gather(dev, dt, idt, it, dim_stride, dim_size), od);
}

static tc_status d_scatter_add(int dev, tc_dtype dt, const tc__iter *it, int64_t dim_stride,
                               int64_t dim_size)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        tc_dtype d[TC__MAX_OPERANDS] = {dt, dt, TC_INT64, TC_INT64};
        TC_TRY(declare_indexed(dev, it, d, 0, dim_stride, dim_size, "scatter_add kernel"));
    }
    return order_done(prev_index->scatter_add(dev, dt, it, dim_stride, dim_size), od);
}

static tc_status d_tri(int dev, tc_dtype dt, bool upper, int64_t diagonal, const tc__iter *it)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        tc_dtype d[TC__MAX_OPERANDS] = {dt, dt, dt, dt};
        TC_TRY(declare_iter(false, dev, it, d, "triangle kernel"));
    }
    return order_done(prev_index->tri(dev, dt, upper, diagonal, it), od);
}

static tc_status d_topk(int dev, tc_dtype dt, const void *in, void *values, int64_t *indices,
                        int64_t outer, int64_t r, int64_t inner, int64_t k, bool largest)
{
    int od = tc__access_depth;
    if (tc__access_on()) {
        const void *p[3] = {values, indices, in};
        size_t out_n = (size_t)(outer * k * inner);
        size_t b[3] = {out_n * esz(dt), out_n * 8, (size_t)(outer * r * inner) * esz(dt)};
        tc_dtype d[3] = {dt, TC_INT64, dt};
        bool w[3] = {true, true, false};
        TC_TRY(declare_dense(false, dev, "topk kernel", 3, p, b, d, w));
    }
    return order_done(prev_index->topk(dev, dt, in, values, indices, outer, r, inner, k, largest),
                      od);
}

/* ---- installation ------------------------------------------------------------------- */

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void install(void)
{
    const tc__device_ops *cur = tc__dev();
    prev = cur;
    ops = *cur;
    ops.alloc = w_alloc;
    ops.free = w_free;
    ops.record_stream = w_record_stream;
    if (cur->backend) {
        prev_be = cur->backend;
        dev_be = (tc__backend){d_unary, d_binary, d_where,  d_convert,
                               d_fill,  d_reduce, d_matmul, d_scan};
        ops.backend = &dev_be;
    }
    if (cur->nn) {
        prev_nn = cur->nn;
        nn_be = (tc__nn_backend){
            .rows = d_rows,
            .gemm = d_gemm,
            .cross_entropy = d_cross_entropy,
            .gemm_bias = d_gemm_bias,
            .attention = cur->nn->attention ? d_attention : NULL,
            .gelu_backward = d_gelu_backward,
            .softmax_backward = d_softmax_backward,
            .layer_norm = d_layer_norm,
            .layer_norm_backward = d_layer_norm_backward,
            .cross_entropy_backward = d_cross_entropy_backward,
            .embedding_backward = d_embedding_backward,
            .dropout = d_dropout,
            .gemm_bgrad = cur->nn->gemm_bgrad ? d_gemm_bgrad : NULL,
            .attention_backward = cur->nn->attention_backward ? d_attention_backward : NULL,
            .gemm_gelu = cur->nn->gemm_gelu ? d_gemm_gelu : NULL,
            .attention_cache = d_attention_cache};
        ops.nn = &nn_be;
    }
    if (cur->index_backend) {
        prev_index = cur->index_backend;
        index_be = (tc__index_backend){d_gather, d_scatter_add, d_tri, d_topk};
        ops.index_backend = &index_be;
    }
    prev_host = cur->host_backend ? cur->host_backend : &tc__cpu_backend;
    host_be = (tc__backend){h_unary, h_binary, h_where,  h_convert,
                            h_fill,  h_reduce, h_matmul, h_scan};
    ops.host_backend = &host_be;
    const tc__device_ops *was;
    tc__device_ops_install(&ops, &was);
    (void)was; /* == cur unless another hook raced in; it then stays below ours */
}

void tc__tensor_watch_enable(void) { pthread_once(&once, install); }

/* ---- spans ----------------------------------------------------------------------- */

void tc__span_of_iter(const tc__iter *it, int op, tc_dtype dtype, bool write, tc__span *out)
{
    int64_t es = (int64_t)tc_dtype_size(dtype), first = 0, last = 0;
    for (int d = 0; d < it->ndim; d++) {
        int64_t span = (it->sizes[d] - 1) * it->strides[op][d];
        if (span < 0)
            first += span;
        else
            last += span;
    }
    uintptr_t base = (uintptr_t)it->data[op];
    *out = (tc__span){.lo = base + (uintptr_t)(first * es),
                      .hi = base + (uintptr_t)((last + 1) * es),
                      .write = write,
                      .dtype = dtype,
                      .ndim = it->ndim};
    for (int d = 0; d < it->ndim; d++)
        out->sizes[d] = it->sizes[d];
}
