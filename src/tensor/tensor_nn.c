/* nn.h's operations: argument checks, shapes and layouts, then the device's
 * nn backend (nn_internal.h) on dense operands.
 *
 * Everything that does not depend on the device is decided here (and, for
 * cross_entropy, in tensor_nn_loss.c): dims and shapes, dtypes, which operand layouts
 * a GEMM reads as they are (row-major or transposed matrices whose batch
 * dims collapse into one stride) and which need a contiguous copy first.
 * Composite operations are built from the backend's kernels and the public
 * tensor functions: linear asks the backend for its GEMM with the bias in
 * one step (gemm_bias: cuBLASLt's bias epilogue on a GPU) and, where that is
 * refused, copies its bias into the output and runs one GEMM with beta = 1;
 * attention is the backend's fused kernel where it has one, else a GEMM,
 * the fused (masked) softmax and a GEMM. The core reaches a GPU only through
 * the device seam. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "nn_internal.h"
#include "tcuda/nn.h"
#include "tensor_internal.h"

const tc__nn_backend *tc__nn_of(tc_device device)
{
    if (device.type == TC_CPU)
        return &tc__cpu_nn_backend;
    const tc__nn_backend *be = tc__dev()->nn;
    if (!be)
        (void)tc__no_backend();
    return be;
}

tc_status tc__nn_check_float(const char *fn, const tc_tensor *t, const char *what)
{
    TC_TRY(tc__tensor_check(t, what));
    if (!tc_dtype_is_floating(t->dtype))
        return tc__fail(TC_ERROR_DTYPE,
                        "%s: %s must be float16, bfloat16, float32 or float64, got %s", fn, what,
                        tc_dtype_string(t->dtype));
    return TC_OK;
}

tc_status tc__nn_check_like(const char *fn, const tc_tensor *x, const char *xname,
                            const tc_tensor *t, const char *what)
{
    TC_TRY(tc__tensor_check(t, what));
    TC_TRY(tc__check_same_device(fn, x, t));
    if (t->dtype != x->dtype)
        return tc__fail(TC_ERROR_DTYPE, "%s: %s is %s but %s is %s; they must match", fn, what,
                        tc_dtype_string(t->dtype), xname, tc_dtype_string(x->dtype));
    return TC_OK;
}

static tc_status check_like(const char *fn, const tc_tensor *x, const tc_tensor *t,
                            const char *what)
{
    return tc__nn_check_like(fn, x, "the input", t, what);
}

static int64_t prod(const int64_t *sizes, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= sizes[i];
    return p;
}

tc_status tc__nn_split_dim(const char *fn, const tc_tensor *t, int dim, int64_t *outer, int64_t *n,
                           int64_t *inner)
{
    int nd = t->ndim ? t->ndim : 1;
    if (dim < -nd || dim >= nd)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%s: dim %d is out of range for a %d-d tensor (expected %d..%d)", fn, dim,
                        t->ndim, -nd, nd - 1);
    if (dim < 0)
        dim += nd;
    *outer = *n = *inner = 1;
    if (t->ndim) {
        *outer = prod(t->sizes, 0, dim);
        *n = t->sizes[dim];
        *inner = prod(t->sizes, dim + 1, t->ndim);
    }
    return TC_OK;
}

/* Float32 for 16-bit dtypes: where scores and losses are kept. */
static tc_dtype acc_dtype(tc_dtype dt)
{
    return dt == TC_FLOAT16 || dt == TC_BFLOAT16 ? TC_FLOAT32 : dt;
}

/* ---- matrices as a GEMM reads them ------------------------------------------------- */

/* The last two dims of a tensor (at least 2-d) as a batch of matrices, the
 * GEMM operand `op`. `owned` is a contiguous copy made when the layout is not
 * one a GEMM reads (matrices neither row- nor column-dense, or batch dims
 * that do not collapse into one stride). */
typedef struct mats {
    tc_tensor *owned;
    tc__nn_operand op;
} mats;

static bool layout_of(const tc_tensor *t, tc__nn_operand *m)
{
    int nd = t->ndim;
    int64_t rows = t->sizes[nd - 2], cols = t->sizes[nd - 1];
    int64_t rs = t->strides[nd - 2], cs = t->strides[nd - 1];
    int64_t bstride = 0, expect = -1;
    for (int i = nd - 3; i >= 0; i--) {
        if (t->sizes[i] == 1)
            continue;
        if (expect >= 0 && t->strides[i] != expect)
            return false;
        if (expect < 0)
            bstride = t->strides[i];
        expect = t->strides[i] * t->sizes[i];
    }
    m->bstride = bstride;
    m->data = tc__data(t);
    int64_t need_c = cols > 1 ? cols : 1, need_r = rows > 1 ? rows : 1;
    int64_t ld = rows == 1 ? need_c : rs;
    if ((cols == 1 || cs == 1) && ld >= need_c) {
        m->trans = false;
        m->ld = ld;
        return true;
    }
    ld = cols == 1 ? need_r : cs;
    if ((rows == 1 || rs == 1) && ld >= need_r) {
        m->trans = true;
        m->ld = ld;
        return true;
    }
    return false;
}

static tc_status as_mats(const tc_tensor *t, mats *m)
{
    m->owned = NULL;
    if (layout_of(t, &m->op))
        return TC_OK;
    TC_TRY(tc_tensor_contiguous(t, &m->owned));
    (void)layout_of(m->owned, &m->op); /* dense row-major: always readable */
    return TC_OK;
}

/* The operand read the other way: op(X)^T. */
static tc__nn_operand transposed(tc__nn_operand o)
{
    o.trans = !o.trans;
    return o;
}

/* ---- softmax ----------------------------------------------------------------------- */

static tc_status softmax_impl(const char *fn, const tc_tensor *x, int dim, tc__nn_row_op op,
                              tc_tensor **out)
{
    TC_TRY(tc__nn_check_float(fn, x, "tc_tensor x"));
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    int64_t outer, n, inner;
    TC_TRY(tc__nn_split_dim(fn, x, dim, &outer, &n, &inner));
    tc_device dev = x->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    tc_tensor *xc = NULL, *res = NULL;
    tc_status st = tc_tensor_contiguous(x, &xc);
    if (st == TC_OK)
        st = tc__new_tensor(x->ndim, x->sizes, x->dtype, dev, false, &res);
    if (st == TC_OK && outer * n * inner > 0) {
        tc__nn_rows a = {.op = op,
                         .in_dtype = x->dtype,
                         .out_dtype = x->dtype,
                         .in = tc__data(xc),
                         .out = tc__data(res),
                         .outer = outer,
                         .n = n,
                         .inner = inner};
        st = be->rows(dev.index, &a);
    }
    tc_tensor_release(xc);
    return tc__nn_finish(st, res, out);
}

tc_status tc_nn_softmax(const tc_tensor *x, int dim, tc_tensor **out)
{
    TC_API_BEGIN;
    return softmax_impl("tc_nn_softmax", x, dim, TC__NN_SOFTMAX, out);
}

tc_status tc_nn_log_softmax(const tc_tensor *x, int dim, tc_tensor **out)
{
    TC_API_BEGIN;
    return softmax_impl("tc_nn_log_softmax", x, dim, TC__NN_LOG_SOFTMAX, out);
}

/* ---- layer_norm and rms_norm ------------------------------------------------------- */

tc_status tc__nn_check_norm_shape(const char *fn, const tc_tensor *x, int nshape,
                                  const int64_t *shape)
{
    TC_CHECK_ARG(nshape >= 1 && nshape <= TC_MAX_DIMS && shape,
                 "%s: normalized_shape must have 1 to %d sizes, got %d%s", fn, TC_MAX_DIMS, nshape,
                 shape ? "" : " (NULL)");
    bool ok = nshape <= x->ndim;
    for (int i = 0; ok && i < nshape; i++)
        ok = shape[i] == x->sizes[x->ndim - nshape + i];
    if (!ok)
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: the last %d dims of x (a %d-d tensor) must equal normalized_shape", fn,
                        nshape, x->ndim);
    return TC_OK;
}

tc_status tc__nn_check_norm_param(const char *fn, const tc_tensor *p, const char *what, int nshape,
                                  const int64_t *shape)
{
    bool ok = p->ndim == nshape;
    for (int i = 0; ok && i < nshape; i++)
        ok = p->sizes[i] == shape[i];
    if (!ok)
        return tc__fail(TC_ERROR_SHAPE, "%s: %s must have the normalized shape (%d dims)", fn, what,
                        nshape);
    return TC_OK;
}

/* `p` (weight or bias, optional) has exactly the normalized shape. */
static tc_status check_param(const char *fn, const tc_tensor *x, const tc_tensor *p,
                             const char *what, int nshape, const int64_t *shape)
{
    if (!p)
        return TC_OK;
    TC_TRY(check_like(fn, x, p, what));
    return tc__nn_check_norm_param(fn, p, what, nshape, shape);
}

static tc_status norm_impl(const char *fn, tc__nn_row_op op, const tc_tensor *x, int nshape,
                           const int64_t *shape, const tc_tensor *weight, const tc_tensor *bias,
                           double eps, tc_tensor **out)
{
    TC_TRY(tc__nn_check_float(fn, x, "tc_tensor x"));
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    TC_TRY(tc__nn_check_norm_shape(fn, x, nshape, shape));
    TC_TRY(check_param(fn, x, weight, "tc_tensor weight", nshape, shape));
    TC_TRY(check_param(fn, x, bias, "tc_tensor bias", nshape, shape));
    tc_device dev = x->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    int64_t m = prod(x->sizes, 0, x->ndim - nshape), n = prod(x->sizes, x->ndim - nshape, x->ndim);
    tc_tensor *xc = NULL, *wc = NULL, *bc = NULL, *res = NULL;
    tc_status st = tc_tensor_contiguous(x, &xc);
    if (st == TC_OK && weight)
        st = tc_tensor_contiguous(weight, &wc);
    if (st == TC_OK && bias)
        st = tc_tensor_contiguous(bias, &bc);
    if (st == TC_OK)
        st = tc__new_tensor(x->ndim, x->sizes, x->dtype, dev, false, &res);
    if (st == TC_OK && m * n > 0) {
        tc__nn_rows a = {.op = op,
                         .in_dtype = x->dtype,
                         .out_dtype = x->dtype,
                         .in = tc__data(xc),
                         .out = tc__data(res),
                         .weight = wc ? tc__data(wc) : NULL,
                         .bias = bc ? tc__data(bc) : NULL,
                         .outer = m,
                         .n = n,
                         .inner = 1,
                         .eps = eps};
        st = be->rows(dev.index, &a);
    }
    tc_tensor_release(xc);
    tc_tensor_release(wc);
    tc_tensor_release(bc);
    return tc__nn_finish(st, res, out);
}

tc_status tc_nn_layer_norm(const tc_tensor *x, int nshape, const int64_t *normalized_shape,
                           const tc_tensor *weight, const tc_tensor *bias, double eps,
                           tc_tensor **out)
{
    TC_API_BEGIN;
    return norm_impl("tc_nn_layer_norm", TC__NN_LAYER_NORM, x, nshape, normalized_shape, weight,
                     bias, eps, out);
}

tc_status tc_nn_rms_norm(const tc_tensor *x, int nshape, const int64_t *normalized_shape,
                         const tc_tensor *weight, const double *eps, tc_tensor **out)
{
    TC_API_BEGIN;
    /* PyTorch (layer_norm.cpp) takes numeric_limits<opmath_t>::epsilon() for
     * eps=None: float32's also for float16 and bfloat16. */
    double e = eps                                            ? *eps
               : tc__tensor_live(x) && x->dtype == TC_FLOAT64 ? 2.220446049250313e-16
                                                              : 1.1920928955078125e-07;
    return norm_impl("tc_nn_rms_norm", TC__NN_RMS_NORM, x, nshape, normalized_shape, weight, NULL,
                     e, out);
}

/* ---- linear, bmm, baddbmm ---------------------------------------------------------- */

static atomic_bool linear_fuse = true;
/* per thread, so that every linear does not write one shared cache line */
static _Thread_local uint64_t linear_fused, linear_unfused;

void tc__nn_linear_set_fused(bool fused) { atomic_store(&linear_fuse, fused); }

void tc__nn_linear_counts(uint64_t *fused, uint64_t *unfused)
{
    *fused = linear_fused;
    *unfused = linear_unfused;
}

/* res = x @ W^T + bias (bias optional) for m * of > 0: the backend's
 * gemm_bias where the bias is dense and the backend takes it, else the bias
 * copied into res (broadcast over the rows) and a GEMM with beta = 1. */
static tc_status linear_gemm(const tc__nn_backend *be, int device, tc__nn_gemm *g, tc_tensor *res,
                             const tc_tensor *bias)
{
    if (!bias)
        return be->gemm(device, g);
    bool fused = false;
    if (atomic_load_explicit(&linear_fuse, memory_order_relaxed) &&
        (bias->sizes[0] == 1 || bias->strides[0] == 1))
        TC_TRY(be->gemm_bias(device, g, tc__data(bias), &fused));
    if (fused) {
        linear_fused++;
        return TC_OK;
    }
    linear_unfused++;
    TC_TRY(tc__copy_local(res, bias)); /* broadcast over the rows; added with beta = 1 */
    g->beta = 1;
    return be->gemm(device, g);
}

tc_status tc_nn_linear(const tc_tensor *x, const tc_tensor *weight, const tc_tensor *bias,
                       tc_tensor **out)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_linear";
    TC_TRY(tc__nn_check_float(fn, x, "tc_tensor x"));
    TC_TRY(check_like(fn, x, weight, "tc_tensor weight"));
    if (bias)
        TC_TRY(check_like(fn, x, bias, "tc_tensor bias"));
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    if (x->ndim < 1 || weight->ndim != 2 || weight->sizes[1] != x->sizes[x->ndim - 1])
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: needs x [..., in] and weight [out, in] with the same `in`, got a "
                        "%d-d x and a %d-d weight",
                        fn, x->ndim, weight->ndim);
    int64_t in = weight->sizes[1], of = weight->sizes[0];
    if (bias && (bias->ndim != 1 || bias->sizes[0] != of))
        return tc__fail(TC_ERROR_SHAPE, "%s: bias must be [%lld] (weight's out), got a %d-d bias",
                        fn, (long long)of, bias->ndim);
    tc_device dev = x->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    int64_t osz[TC_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++)
        osz[i] = x->sizes[i];
    osz[x->ndim - 1] = of;
    int64_t numel; /* x's rows by weight's out may overflow where neither does */
    TC_TRY(tc__check_shape(x->ndim, osz, tc_dtype_size(x->dtype), &numel));
    int64_t m = prod(x->sizes, 0, x->ndim - 1);
    tc_tensor *xc = NULL, *res = NULL;
    mats w = {0};
    tc_status st = tc_tensor_contiguous(x, &xc);
    if (st == TC_OK)
        st = as_mats(weight, &w);
    if (st == TC_OK) /* rows padded to 16-byte vectors where tc__nn_pads_rows says */
        st = tc__nn_new_rows(x->ndim, osz, x->dtype, dev, &res);
    if (st == TC_OK && m * of > 0) {
        tc__nn_operand xo = {.data = tc__data(xc), .ld = in > 0 ? in : 1};
        tc__nn_gemm g = tc__nn_gemm_of(x->dtype, 1, m, of, in, xo, transposed(w.op), tc__data(res));
        (void)tc__nn_rows_ld(res, &g.ldc);
        st = linear_gemm(be, dev.index, &g, res, bias);
    }
    tc_tensor_release(xc);
    tc_tensor_release(w.owned);
    return tc__nn_finish(st, res, out);
}

/* Shared by bmm and baddbmm: b1 [B, M, K] @ b2 [B, K, N] checked; with
 * `input` (baddbmm) beta * input + alpha * product. */
static tc_status bmm_impl(const char *fn, const tc_tensor *input, const tc_tensor *a,
                          const tc_tensor *b, double beta, double alpha, tc_tensor **out)
{
    TC_TRY(tc__nn_check_float(fn, a, "tc_tensor a"));
    TC_TRY(check_like(fn, a, b, "tc_tensor b"));
    if (input)
        TC_TRY(check_like(fn, a, input, "tc_tensor input"));
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    if (a->ndim != 3 || b->ndim != 3)
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: needs 3-d tensors [B, M, K] and [B, K, N], got %d-d "
                        "and %d-d",
                        fn, a->ndim, b->ndim);
    int64_t bt = a->sizes[0], m = a->sizes[1], k = a->sizes[2], n = b->sizes[2];
    if (b->sizes[0] != bt || b->sizes[1] != k)
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: a is [%lld, %lld, %lld] and b is [%lld, %lld, %lld]: batch sizes "
                        "must be equal and a's last size must be b's middle one",
                        fn, (long long)bt, (long long)m, (long long)k, (long long)b->sizes[0],
                        (long long)b->sizes[1], (long long)n);
    int64_t osz[3] = {bt, m, n}, numel; /* before a's or b's copy is made */
    TC_TRY(tc__check_shape(3, osz, tc_dtype_size(a->dtype), &numel));
    if (input) {
        bool ok = input->ndim <= 3;
        for (int i = 0; ok && i < input->ndim; i++) {
            int64_t s = input->sizes[input->ndim - 1 - i];
            ok = s == 1 || s == osz[2 - i];
        }
        if (!ok)
            return tc__fail(TC_ERROR_SHAPE,
                            "%s: input (a %d-d tensor) does not broadcast to [%lld, %lld, %lld]",
                            fn, input->ndim, (long long)bt, (long long)m, (long long)n);
    }
    tc_device dev = a->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    if (!input)
        beta = 0;
    tc_tensor *res = NULL;
    mats ma = {0}, mb = {0};
    tc_status st = as_mats(a, &ma);
    if (st == TC_OK)
        st = as_mats(b, &mb);
    if (st == TC_OK)
        st = tc__new_tensor(3, osz, a->dtype, dev, false, &res);
    if (st == TC_OK && bt * m * n > 0 && beta != 0)
        st = tc__copy_local(res, input);
    if (st == TC_OK && bt * m * n > 0) {
        tc__nn_gemm g = tc__nn_gemm_of(a->dtype, bt, m, n, k, ma.op, mb.op, tc__data(res));
        g.alpha = alpha;
        g.beta = beta;
        st = be->gemm(dev.index, &g);
    }
    tc_tensor_release(ma.owned);
    tc_tensor_release(mb.owned);
    return tc__nn_finish(st, res, out);
}

tc_status tc_tensor_bmm(const tc_tensor *a, const tc_tensor *b, tc_tensor **out)
{
    TC_API_BEGIN;
    return bmm_impl("tc_tensor_bmm", NULL, a, b, 0, 1, out);
}

tc_status tc_tensor_baddbmm(const tc_tensor *input, const tc_tensor *b1, const tc_tensor *b2,
                            double beta, double alpha, tc_tensor **out)
{
    TC_API_BEGIN;
    /* input is checked first so that a NULL one is not taken for bmm's */
    TC_TRY(tc__tensor_check(input, "tc_tensor input"));
    TC_CHECK_ARG(isfinite(beta), "beta is %g; it must be a finite number", beta);
    TC_CHECK_ARG(isfinite(alpha), "alpha is %g; it must be a finite number", alpha);
    return bmm_impl("tc_tensor_baddbmm", input, b1, b2, beta, alpha, out);
}

/* ---- scaled_dot_product_attention -------------------------------------------------- */

static atomic_bool attention_fuse = true;
static _Thread_local uint64_t attention_fused;

void tc__nn_attention_set_fused(bool fused) { atomic_store(&attention_fuse, fused); }

uint64_t tc__nn_attention_fused_count(void) { return attention_fused; }

bool tc__nn_attention_fuse_on(void) { return atomic_load(&attention_fuse); }

/* An attention operand's batch dims (all but the last two) as two levels,
 * entry b = bo * inner + bi with inner the last batch dim's size: st =
 * {stride of bo, stride of bi, row stride}. False when the dims before the
 * last batch dim do not collapse into one stride, or the columns are not
 * unit-stride. */
bool tc__nn_attention_levels(const tc_tensor *t, int64_t st[3])
{
    int nd = t->ndim, nb = nd - 2;
    if (t->sizes[nd - 1] > 1 && t->strides[nd - 1] != 1)
        return false;
    st[0] = 0;
    st[1] = nb >= 1 ? t->strides[nb - 1] : 0;
    st[2] = t->strides[nd - 2];
    int64_t expect = -1;
    for (int i = nb - 2; i >= 0; i--) {
        if (t->sizes[i] == 1)
            continue;
        if (expect >= 0 && t->strides[i] != expect)
            return false;
        if (expect < 0)
            st[0] = t->strides[i];
        expect = t->strides[i] * t->sizes[i];
    }
    return true;
}

/* The fused kernel's result: q's memory order when q is [B, H, L, E] over
 * [B, L, H, E] memory (the heads of one projection), as PyTorch's flash
 * attention returns it, so that merging the heads back is a view; else
 * dense. */
static tc_status attention_result(const tc_tensor *q, int64_t ev, tc_tensor **res)
{
    int nd = q->ndim;
    tc_device dev = q->storage->device;
    int64_t osz[TC_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        osz[i] = q->sizes[i];
    osz[nd - 1] = ev;
    if (nd != 4 || q->sizes[1] == 1 || q->sizes[2] == 1 || q->strides[1] >= q->strides[2])
        return tc__new_tensor(nd, osz, q->dtype, dev, false, res);
    int64_t msz[4] = {osz[0], osz[2], osz[1], ev};
    tc_tensor *m = NULL;
    TC_TRY(tc__new_tensor(4, msz, q->dtype, dev, false, &m));
    tc_status st = tc_tensor_transpose(m, 1, 2, res);
    tc_tensor_release(m);
    return st;
}

/* The backend's fused attention, reading q, k and v in place (and writing
 * lse, dense float32, when not NULL); *res stays NULL when the backend does
 * not take these operands (or it failed). */
static tc_status fused_attention(const tc__nn_backend *be, int device, const tc_tensor *q,
                                 const tc_tensor *k, const tc_tensor *v, bool causal, double scale,
                                 tc_tensor *lse, tc_tensor **res)
{
    int nd = q->ndim;
    tc__nn_attention a = {.dtype = q->dtype,
                          .q = tc__data(q),
                          .k = tc__data(k),
                          .v = tc__data(v),
                          .batch = prod(q->sizes, 0, nd - 2),
                          .inner = nd > 2 ? q->sizes[nd - 3] : 1,
                          .l = q->sizes[nd - 2],
                          .s = k->sizes[nd - 2],
                          .e = q->sizes[nd - 1],
                          .scale = scale,
                          .causal = causal,
                          .lse = lse ? (float *)tc__data(lse) : NULL};
    if (!tc__nn_attention_levels(q, a.q_strides) || !tc__nn_attention_levels(k, a.k_strides) ||
        !tc__nn_attention_levels(v, a.v_strides))
        return TC_OK;
    tc_tensor *r = NULL;
    TC_TRY(attention_result(q, a.e, &r));
    (void)tc__nn_attention_levels(r, a.out_strides); /* dense rows: always two levels */
    a.out = tc__data(r);
    bool done = false;
    tc_status st = be->attention(device, &a, &done);
    if (st != TC_OK || !done) {
        tc_tensor_release(r);
        return st;
    }
    attention_fused++;
    *res = r;
    return TC_OK;
}

/* q [..., L, E], k [..., S, E] and v [..., S, Ev]: floating, alike, at
 * least 2-d with the same number of dims and equal leading sizes, and a
 * result [..., L, Ev] that can exist (shared with the backward,
 * nn_internal.h). */
tc_status tc__nn_sdpa_check(const char *fn, const tc_tensor *q, const tc_tensor *k,
                            const tc_tensor *v)
{
    TC_TRY(tc__nn_check_float(fn, q, "tc_tensor q"));
    TC_TRY(check_like(fn, q, k, "tc_tensor k"));
    TC_TRY(check_like(fn, q, v, "tc_tensor v"));
    int nd = q->ndim;
    bool ok = nd >= 2 && k->ndim == nd && v->ndim == nd;
    for (int i = 0; ok && i < nd - 2; i++)
        ok = k->sizes[i] == q->sizes[i] && v->sizes[i] == q->sizes[i];
    if (!ok)
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: q, k and v must be at least 2-d with the same number of dims and "
                        "equal leading sizes (got %d-d, %d-d, %d-d)",
                        fn, q->ndim, k->ndim, v->ndim);
    int64_t l = q->sizes[nd - 2], e = q->sizes[nd - 1], s = k->sizes[nd - 2];
    int64_t ev = v->sizes[nd - 1];
    if (k->sizes[nd - 1] != e || v->sizes[nd - 2] != s)
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: q is [..., %lld, %lld], k [..., %lld, %lld], v [..., %lld, %lld]: k "
                        "needs q's last size and v k's key count",
                        fn, (long long)l, (long long)e, (long long)s, (long long)k->sizes[nd - 1],
                        (long long)v->sizes[nd - 2], (long long)ev);
    /* the result [..., L, Ev]: q's rows by v's width may overflow where
     * neither does (expanded views) */
    int64_t osz[TC_MAX_DIMS], numel;
    for (int i = 0; i < nd; i++)
        osz[i] = i == nd - 1 ? ev : q->sizes[i];
    return tc__check_shape(nd, osz, tc_dtype_size(q->dtype), &numel);
}

/* Attention's probabilities: the softmax of each row of scores [B, L, S]
 * into probs, of dtype dt (the scores themselves for float32 and float64);
 * when causal, row i of an entry sees the columns j <= i only. */
static tc_status attention_probs(const tc__nn_backend *be, int device, const tc_tensor *scores,
                                 void *probs, tc_dtype dt, bool causal)
{
    int64_t l = scores->sizes[1];
    tc__nn_rows a = {.op = TC__NN_SOFTMAX,
                     .in_dtype = scores->dtype,
                     .out_dtype = dt,
                     .in = tc__data(scores),
                     .out = probs,
                     .outer = scores->sizes[0] * l,
                     .n = scores->sizes[2],
                     .inner = 1,
                     .causal = causal ? l : 0};
    return be->rows(device, &a);
}

/* The backward's probabilities (nn_internal.h): the math path's scores
 * GEMM and fused masked softmax, in place in one [B, L, S] tensor. */
tc_status tc__nn_attention_probs(const tc_tensor *q, const tc_tensor *k, bool causal, double scale,
                                 tc_tensor **out)
{
    tc_device dev = q->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    int nd = q->ndim;
    int64_t bt = prod(q->sizes, 0, nd - 2), l = q->sizes[nd - 2], e = q->sizes[nd - 1];
    int64_t ssz[3] = {bt, l, k->sizes[nd - 2]};
    tc_tensor *p = NULL;
    mats mq = {0}, mk = {0};
    tc_status st = as_mats(q, &mq);
    if (st == TC_OK)
        st = as_mats(k, &mk);
    if (st == TC_OK)
        st = tc__new_tensor(3, ssz, q->dtype, dev, false, &p);
    if (st == TC_OK) {
        tc__nn_gemm g = tc__nn_gemm_of(q->dtype, bt, l, ssz[2], e, mq.op, transposed(mk.op),
                                       tc__data(p));
        g.alpha = scale;
        st = be->gemm(dev.index, &g);
    }
    if (st == TC_OK)
        st = attention_probs(be, dev.index, p, tc__data(p), q->dtype, causal);
    tc_tensor_release(mq.owned);
    tc_tensor_release(mk.owned);
    return tc__nn_finish(st, p, out);
}

/* Attention in three steps, *res of sizes osz: scores = scale * q k^T
 * (float32 for 16-bit q), the probabilities, then *res = probs v. The
 * operands are read in place where a GEMM can read them. */
static tc_status sdpa_unfused(const tc__nn_backend *be, const tc_tensor *q, const tc_tensor *k,
                              const tc_tensor *v, bool causal, double scale, const int64_t *osz,
                              tc_tensor **res)
{
    int nd = q->ndim;
    tc_device dev = q->storage->device;
    int64_t bt = prod(q->sizes, 0, nd - 2), l = q->sizes[nd - 2], e = q->sizes[nd - 1];
    int64_t s = k->sizes[nd - 2], ev = osz[nd - 1], ssz[3] = {bt, l, s};
    tc_dtype sdt = acc_dtype(q->dtype);
    tc_tensor *scores = NULL, *p = NULL;
    mats mq = {0}, mk = {0}, mv = {0};
    tc_status st = as_mats(q, &mq);
    if (st == TC_OK)
        st = as_mats(k, &mk);
    if (st == TC_OK)
        st = as_mats(v, &mv);
    if (st == TC_OK)
        st = tc__new_tensor(3, ssz, sdt, dev, false, &scores);
    if (st == TC_OK && sdt != q->dtype)
        st = tc__new_tensor(3, ssz, q->dtype, dev, false, &p);
    if (st == TC_OK)
        st = tc__new_tensor(nd, osz, q->dtype, dev, false, res);
    void *probs = p ? tc__data(p) : scores ? tc__data(scores) : NULL; /* NULL: st says why */
    if (st == TC_OK) {
        tc__nn_gemm g = tc__nn_gemm_of(q->dtype, bt, l, s, e, mq.op, transposed(mk.op),
                                       tc__data(scores));
        g.c_dtype = sdt;
        g.alpha = scale;
        st = be->gemm(dev.index, &g);
    }
    if (st == TC_OK)
        st = attention_probs(be, dev.index, scores, probs, q->dtype, causal);
    if (st == TC_OK) {
        tc__nn_operand po = {.data = probs, .ld = s, .bstride = l * s};
        tc__nn_gemm g = tc__nn_gemm_of(q->dtype, bt, l, ev, s, po, mv.op, tc__data(*res));
        st = be->gemm(dev.index, &g);
    }
    tc_tensor_release(mq.owned);
    tc_tensor_release(mk.owned);
    tc_tensor_release(mv.owned);
    tc_tensor_release(scores);
    tc_tensor_release(p);
    return st;
}

tc_status tc__nn_sdpa_forward(const tc_tensor *q, const tc_tensor *k, const tc_tensor *v,
                              bool causal, double scale, tc_tensor *lse, bool fused_only,
                              bool *lse_done, tc_tensor **out)
{
    tc_device dev = q->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    int nd = q->ndim;
    int64_t osz[TC_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        osz[i] = i == nd - 1 ? v->sizes[i] : q->sizes[i];
    tc_tensor *res = NULL;
    *lse_done = false;
    if (be->attention && osz[nd - 1] == q->sizes[nd - 1] && atomic_load(&attention_fuse)) {
        tc_status st = fused_attention(be, dev.index, q, k, v, causal, scale, lse, &res);
        *lse_done = st == TC_OK && res && lse;
        if (st != TC_OK || res)
            return tc__nn_finish(st, res, out);
    }
    if (fused_only)
        return TC_OK;
    tc_status st = sdpa_unfused(be, q, k, v, causal, scale, osz, &res);
    return tc__nn_finish(st, res, out);
}

tc_status tc_nn_scaled_dot_product_attention(const tc_tensor *q, const tc_tensor *k,
                                             const tc_tensor *v, bool is_causal,
                                             const double *scale, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__nn_sdpa_check("tc_nn_scaled_dot_product_attention", q, k, v));
    TC_CHECK_ARG(out, "tc_nn_scaled_dot_product_attention: out is NULL");
    if (!tc__nn_of(q->storage->device))
        return TC_ERROR_NO_DEVICE;
    int nd = q->ndim;
    int64_t osz[TC_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        osz[i] = i == nd - 1 ? v->sizes[i] : q->sizes[i];
    if (prod(osz, 0, nd) == 0 || k->sizes[nd - 2] == 0) /* a sum of nothing */
        return tc_tensor_zeros(nd, osz, q->dtype, q->storage->device, out);
    double sc = scale ? *scale : 1.0 / sqrt((double)q->sizes[nd - 1]);
    bool lse_done;
    return tc__nn_sdpa_forward(q, k, v, is_causal, sc, NULL, false, &lse_done, out);
}
