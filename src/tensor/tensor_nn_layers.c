/* The layers of nn.h and nn_backward.h that training adds: embedding (its
 * forward is indexing's gather, its backward a backend kernel), linear's
 * backward (GEMMs of the nn backend and a column sum, or the weight and
 * bias gradients in one backend step: cuBLASLt's BGRADB), dropout (a Philox
 * bernoulli mask from random.h, then one backend kernel for the product,
 * forward and backward alike).
 *
 * As tensor_nn.c, everything that does not depend on the device is decided
 * here: arguments, shapes, dtypes, dense operands, the deterministic switch
 * of backends.h. A gradient accumulated into a caller's tensor is computed
 * in place where the tensor is dense (a GEMM with beta = 1, the embedding
 * kernel adding into it), else into a temporary that is then added. */
#include <math.h>
#include <stdatomic.h>

#include "backends_internal.h"
#include "nn_internal.h"
#include "tcuda/indexing.h"
#include "tcuda/nn_backward.h"
#include "tcuda/random.h"
#include "tensor_internal.h"

static tc_status check_like(const char *fn, const tc_tensor *x, const tc_tensor *t,
                            const char *what)
{
    return tc__nn_check_like(fn, x, "grad_output", t, what);
}

static bool sizes_equal(const tc_tensor *t, int nd, const int64_t *sz)
{
    if (t->ndim != nd)
        return false;
    for (int i = 0; i < nd; i++)
        if (t->sizes[i] != sz[i])
            return false;
    return true;
}

static tc_status finish(tc_status st, tc_tensor *res, tc_tensor **out)
{
    return tc__nn_finish(st, res, out);
}

/* dst = src, or dst += src with accumulate; dst the caller's (any layout). */
static tc_status store(tc_tensor *dst, const tc_tensor *src, bool accumulate)
{
    return accumulate ? tc_tensor_add_(dst, src) : tc__copy_local(dst, src);
}

/* ---- embedding ---------------------------------------------------------------------- */

tc_status tc_nn_embedding(const tc_tensor *weight, const tc_tensor *indices, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__nn_check_float("tc_nn_embedding", weight, "tc_tensor weight"));
    return tc_tensor_embedding(weight, indices, out);
}

/* grad_output [..., C] against indices [...] (int64 or int32) and the
 * weight's row count v; padding_idx -1 or a row. */
static tc_status embedding_check(const char *fn, const tc_tensor *go, const tc_tensor *idx,
                                 int64_t v, int64_t padding_idx)
{
    TC_TRY(tc__nn_check_float(fn, go, "tc_tensor grad_output"));
    TC_TRY(tc__tensor_check(idx, "tc_tensor indices"));
    TC_TRY(tc__check_same_device(fn, go, idx));
    if (idx->dtype != TC_INT64 && idx->dtype != TC_INT32)
        return tc__fail(TC_ERROR_DTYPE, "%s: indices must be int64 or int32, got %s", fn,
                        tc_dtype_string(idx->dtype));
    if (go->ndim != idx->ndim + 1 || !sizes_equal(idx, idx->ndim, go->sizes))
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: grad_output must be indices' shape plus one dim [..., C]; got a "
                        "%d-d grad_output for %d-d indices",
                        fn, go->ndim, idx->ndim);
    TC_CHECK_ARG(v >= 0, "%s: num_weights is %lld; it must be >= 0", fn, (long long)v);
    TC_CHECK_ARG(padding_idx >= -1 && padding_idx < v,
                 "%s: padding_idx %lld must be -1 (none) or a row in [0, %lld)", fn,
                 (long long)padding_idx, (long long)v);
    return TC_OK;
}

/* grad_weight (dense [v, c]) += the rows of grad_output at indices (each
 * row's sum divided by its count with freq). */
static tc_status embedding_add(tc_tensor *gw, const tc_tensor *go, const tc_tensor *idx,
                               int64_t padding_idx, bool freq)
{
    tc_device dev = go->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    int64_t n = tc__numel(idx->ndim, idx->sizes), c = go->sizes[go->ndim - 1];
    if (n == 0 || c == 0)
        return TC_OK;
    tc_tensor *i64 = NULL, *ic = NULL, *gc = NULL;
    tc_status st = tc_tensor_to(idx, dev, TC_INT64, false, &i64);
    if (st == TC_OK)
        st = tc_tensor_contiguous(i64, &ic);
    if (st == TC_OK)
        st = tc_tensor_contiguous(go, &gc);
    if (st == TC_OK) {
        tc__nn_embedding_bwd a = {.dtype = go->dtype,
                                  .grad_output = tc__data(gc),
                                  .indices = tc__data(ic),
                                  .grad_weight = tc__data(gw),
                                  .n = n,
                                  .c = c,
                                  .v = gw->sizes[0],
                                  .padding_idx = padding_idx,
                                  .scale_grad_by_freq = freq,
                                  .deterministic = tc__deterministic_algorithms()};
        st = be->embedding_backward(dev.index, &a);
    }
    tc_tensor_release(i64);
    tc_tensor_release(ic);
    tc_tensor_release(gc);
    return st;
}

tc_status tc_nn_embedding_backward(const tc_tensor *grad_output, const tc_tensor *indices,
                                   int64_t num_weights, int64_t padding_idx,
                                   bool scale_grad_by_freq, tc_tensor **grad_weight)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_embedding_backward";
    TC_TRY(embedding_check(fn, grad_output, indices, num_weights, padding_idx));
    TC_CHECK_ARG(grad_weight, "%s: grad_weight is NULL", fn);
    int64_t sz[2] = {num_weights, grad_output->sizes[grad_output->ndim - 1]};
    tc_tensor *res = NULL;
    tc_status st = tc_tensor_zeros(2, sz, grad_output->dtype, grad_output->storage->device, &res);
    if (st == TC_OK)
        st = embedding_add(res, grad_output, indices, padding_idx, scale_grad_by_freq);
    return finish(st, res, grad_weight);
}

tc_status tc_nn_embedding_backward_(tc_tensor *grad_weight, const tc_tensor *grad_output,
                                    const tc_tensor *indices, int64_t padding_idx,
                                    bool scale_grad_by_freq)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_embedding_backward_";
    TC_TRY(tc__tensor_check(grad_weight, "tc_tensor grad_weight"));
    int64_t v = grad_weight->ndim == 2 ? grad_weight->sizes[0] : 0;
    TC_TRY(embedding_check(fn, grad_output, indices, v, padding_idx));
    TC_TRY(check_like(fn, grad_output, grad_weight, "tc_tensor grad_weight"));
    int64_t c = grad_output->sizes[grad_output->ndim - 1];
    if (grad_weight->ndim != 2 || grad_weight->sizes[1] != c)
        return tc__fail(TC_ERROR_SHAPE, "%s: grad_weight must be [V, %lld] (C of grad_output)", fn,
                        (long long)c);
    TC_CHECK_ARG(tc__is_contiguous(grad_weight), "%s: grad_weight must be contiguous", fn);
    return embedding_add(grad_weight, grad_output, indices, padding_idx, scale_grad_by_freq);
}

/* ---- linear's backward ------------------------------------------------------------ */

/* One linear backward: operands as [m, of] (grad_output, rows go_ld
 * apart), [m, in] (x) and [of, in] (weight). */
typedef struct lin {
    const tc__nn_backend *be;
    tc_device dev;
    tc_dtype dt;
    int64_t m, in, of, go_ld;
    tc_tensor *go, *x, *w; /* x and w contiguous, go's rows as tc__nn_rows_ld reads them */
} lin;

/* C [rows, cols] = op(A) op(B) (k inner) into dst (the caller's, or NULL:
 * a new tensor of nd dims and sizes sz into *made): in place with beta = 1
 * or 0 where dst is dense, else through a temporary. */
static tc_status gemm_into(const lin *L, tc__nn_gemm g, tc_tensor *dst, bool accumulate, int nd,
                           const int64_t *sz, tc_tensor **made)
{
    tc_tensor *tmp = NULL;
    bool direct = dst && tc__is_contiguous(dst);
    if (!direct)
        TC_TRY(tc__new_tensor(nd, sz, L->dt, L->dev, false, &tmp));
    tc_tensor *c = direct ? dst : tmp;
    tc_status st = TC_OK;
    if (g.m * g.n > 0) {
        g.c = tc__data(c);
        g.beta = direct && accumulate ? 1 : 0;
        st = L->be->gemm(L->dev.index, &g);
    }
    if (st == TC_OK && dst && !direct)
        st = store(dst, tmp, accumulate);
    if (st == TC_OK && !dst) {
        *made = tmp;
        return TC_OK;
    }
    tc_tensor_release(tmp);
    return st;
}

static int64_t at_least_1(int64_t v) { return v > 0 ? v : 1; }

/* grad_x = grad_output @ weight: [m, of] @ [of, in]. */
static tc_status linear_grad_x(const lin *L, tc_tensor *dst, bool acc, tc_tensor **made)
{
    tc__nn_operand a = {.data = tc__data(L->go), .ld = at_least_1(L->go_ld)};
    tc__nn_operand b = {.data = tc__data(L->w), .ld = at_least_1(L->in)};
    tc__nn_gemm g = tc__nn_gemm_of(L->dt, 1, L->m, L->in, L->of, a, b, NULL);
    return gemm_into(L, g, dst, acc, L->x->ndim, L->x->sizes, made);
}

/* grad_weight = grad_output^T @ x: [of, m] @ [m, in]. */
static tc_status linear_grad_w(const lin *L, tc_tensor *dst, bool acc, tc_tensor **made)
{
    tc__nn_operand a = {.data = tc__data(L->go), .trans = true, .ld = at_least_1(L->go_ld)};
    tc__nn_operand b = {.data = tc__data(L->x), .ld = at_least_1(L->in)};
    tc__nn_gemm g = tc__nn_gemm_of(L->dt, 1, L->of, L->in, L->m, a, b, NULL);
    int64_t sz[2] = {L->of, L->in};
    return gemm_into(L, g, dst, acc, 2, sz, made);
}

/* grad_bias = grad_output summed over its rows: the tensor reduction
 * (deterministic on every device; float32 sums for 16-bit dtypes). */
static tc_status linear_grad_b(const lin *L, tc_tensor *dst, bool acc, tc_tensor **made)
{
    int64_t sz[2] = {L->m, L->of};
    tc_tensor *go2 = NULL, *sum = NULL;
    TC_TRY(tc_tensor_reshape(L->go, 2, sz, &go2));
    tc_status st = tc_tensor_sum(go2, 0, false, &sum);
    tc_tensor_release(go2);
    if (st == TC_OK && dst)
        st = store(dst, sum, acc);
    if (st == TC_OK && !dst) {
        *made = sum;
        return TC_OK;
    }
    tc_tensor_release(sum);
    return st;
}

static atomic_bool bgrad_fuse = true;
static _Thread_local uint64_t bgrad_fused; /* per thread: no shared cache line */

void tc__nn_linear_backward_set_fused(bool fused) { atomic_store(&bgrad_fuse, fused); }

uint64_t tc__nn_linear_backward_fused_count(void) { return bgrad_fused; }

/* grad_weight and grad_bias in one backend step (gemm_bgrad: cuBLASLt's
 * BGRADB epilogue) where it takes them; *done false: nothing computed, the
 * caller runs the GEMM and the column sum. grad_weight goes straight into
 * a dense dw (beta 1 with acc); the bias gradient, which the epilogue
 * writes and never adds, straight into a dense db without acc, else into a
 * temporary that is then stored. */
static tc_status linear_grad_wb(const lin *L, tc_tensor *dw, tc_tensor *db, bool acc,
                                tc_tensor **mw, tc_tensor **mb, bool *done)
{
    *done = false;
    if (!L->be->gemm_bgrad || !atomic_load_explicit(&bgrad_fuse, memory_order_relaxed) ||
        L->m == 0 || L->of * L->in == 0 || (dw && !tc__is_contiguous(dw)))
        return TC_OK;
    bool db_direct = db && !acc && tc__is_contiguous(db);
    int64_t wsz[2] = {L->of, L->in};
    tc_tensor *nw = NULL, *nb = NULL;
    tc_status st = dw ? TC_OK : tc__new_tensor(2, wsz, L->dt, L->dev, false, &nw);
    if (st == TC_OK && !db_direct)
        st = tc__new_tensor(1, &L->of, L->dt, L->dev, false, &nb);
    if (st == TC_OK) {
        tc__nn_operand a = {.data = tc__data(L->go), .trans = true, .ld = at_least_1(L->go_ld)};
        tc__nn_operand b = {.data = tc__data(L->x), .ld = at_least_1(L->in)};
        tc__nn_gemm g = tc__nn_gemm_of(L->dt, 1, L->of, L->in, L->m, a, b, tc__data(dw ? dw : nw));
        g.beta = dw && acc ? 1 : 0;
        st = L->be->gemm_bgrad(L->dev.index, &g, tc__data(db_direct ? db : nb), done);
    }
    if (st == TC_OK && *done && db && !db_direct)
        st = store(db, nb, acc);
    if (st != TC_OK || !*done) {
        tc_tensor_release(nw);
        tc_tensor_release(nb);
        return st;
    }
    bgrad_fused++;
    if (!dw)
        *mw = nw;
    if (!db)
        *mb = nb;
    else
        tc_tensor_release(nb);
    return TC_OK;
}

/* grad_output, x, weight checked against each other; *L filled but for its
 * dense copies. */
static tc_status linear_check(const char *fn, const tc_tensor *go, const tc_tensor *x,
                              const tc_tensor *w, lin *L)
{
    TC_TRY(tc__nn_check_float(fn, go, "tc_tensor grad_output"));
    TC_TRY(check_like(fn, go, x, "tc_tensor x"));
    TC_TRY(check_like(fn, go, w, "tc_tensor weight"));
    if (x->ndim < 1 || w->ndim != 2 || w->sizes[1] != x->sizes[x->ndim - 1])
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: needs x [..., in] and weight [out, in] with the same `in`, got a "
                        "%d-d x and a %d-d weight",
                        fn, x->ndim, w->ndim);
    bool ok = go->ndim == x->ndim && go->sizes[go->ndim - 1] == w->sizes[0];
    for (int i = 0; ok && i < x->ndim - 1; i++)
        ok = go->sizes[i] == x->sizes[i];
    if (!ok)
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: grad_output must be [..., %lld]: x's leading dims and weight's out",
                        fn, (long long)w->sizes[0]);
    *L = (lin){.dev = go->storage->device,
               .dt = go->dtype,
               .in = w->sizes[1],
               .of = w->sizes[0],
               .m = tc__numel(x->ndim - 1, x->sizes)};
    L->be = tc__nn_of(L->dev);
    return L->be ? TC_OK : TC_ERROR_NO_DEVICE;
}

/* A caller's gradient tensor (NULL: not wanted) of the right shape. */
static tc_status check_dst(const char *fn, const tc_tensor *go, const tc_tensor *t,
                           const char *what, int nd, const int64_t *sz)
{
    if (!t)
        return TC_OK;
    TC_TRY(check_like(fn, go, t, what));
    if (!sizes_equal(t, nd, sz))
        return tc__fail(TC_ERROR_SHAPE, "%s: %s has the wrong shape (a %d-d tensor; wanted %d-d)",
                        fn, what, t->ndim, nd);
    return tc__check_writable(t);
}

/* The caller's gradients share no memory with the inputs or each other:
 * a GEMM's output may not alias what it reads. */
static tc_status check_apart(const char *fn, tc_tensor *const dst[3], const tc_tensor *go,
                             const tc_tensor *x, const tc_tensor *w)
{
    static const char *names[3] = {"grad_x", "grad_weight", "grad_bias"};
    const tc_tensor *in[3] = {go, x, w};
    static const char *in_names[3] = {"grad_output", "x", "weight"};
    for (int i = 0; i < 3; i++) {
        if (!dst[i])
            continue;
        for (int j = 0; j < 3; j++)
            if (tc__overlap_of(dst[i], in[j]) != TC__OVERLAP_NONE)
                return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: %s shares memory with %s", fn,
                                names[i], in_names[j]);
        for (int j = 0; j < i; j++)
            if (dst[j] && tc__overlap_of(dst[i], dst[j]) != TC__OVERLAP_NONE)
                return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: %s shares memory with %s", fn,
                                names[i], names[j]);
    }
    return TC_OK;
}

/* Computes the wanted gradients: into the caller's tensors (dst[i] not
 * NULL) or new ones (made[i]). */
static tc_status linear_run(lin *L, const tc_tensor *go, const tc_tensor *x, const tc_tensor *w,
                            bool acc, tc_tensor *const dst[3], const bool want[3],
                            tc_tensor *made[3])
{
    /* grad_output's rows at any stride (tc_nn_linear's padded ones) as they are */
    tc_status st = TC_OK;
    if (tc__nn_rows_ld(go, &L->go_ld)) {
        L->go = tc__tensor_ref((tc_tensor *)go);
    } else {
        st = tc_tensor_contiguous(go, &L->go);
        L->go_ld = L->of;
    }
    if (st == TC_OK)
        st = tc_tensor_contiguous(x, &L->x);
    if (st == TC_OK)
        st = tc_tensor_contiguous(w, &L->w);
    if (st == TC_OK && want[0])
        st = linear_grad_x(L, dst[0], acc, &made[0]);
    bool both = false;
    if (st == TC_OK && want[1] && want[2])
        st = linear_grad_wb(L, dst[1], dst[2], acc, &made[1], &made[2], &both);
    if (st == TC_OK && want[1] && !both)
        st = linear_grad_w(L, dst[1], acc, &made[1]);
    if (st == TC_OK && want[2] && !both)
        st = linear_grad_b(L, dst[2], acc, &made[2]);
    tc_tensor_release(L->go);
    tc_tensor_release(L->x);
    tc_tensor_release(L->w);
    return st;
}

tc_status tc_nn_linear_backward(const tc_tensor *grad_output, const tc_tensor *x,
                                const tc_tensor *weight, unsigned want, tc_tensor **grad_x,
                                tc_tensor **grad_weight, tc_tensor **grad_bias)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_linear_backward";
    const unsigned all = TC_NN_LINEAR_GRAD_X | TC_NN_LINEAR_GRAD_WEIGHT | TC_NN_LINEAR_GRAD_BIAS;
    TC_CHECK_ARG(want && !(want & ~all),
                 "%s: want is %#x; it must be a non-empty set of TC_NN_LINEAR_GRAD_X, _WEIGHT "
                 "and _BIAS",
                 fn, want);
    bool w3[3] = {want & TC_NN_LINEAR_GRAD_X, want & TC_NN_LINEAR_GRAD_WEIGHT,
                  want & TC_NN_LINEAR_GRAD_BIAS};
    TC_CHECK_ARG(!w3[0] || grad_x, "%s: grad_x is NULL but wanted", fn);
    TC_CHECK_ARG(!w3[1] || grad_weight, "%s: grad_weight is NULL but wanted", fn);
    TC_CHECK_ARG(!w3[2] || grad_bias, "%s: grad_bias is NULL but wanted", fn);
    lin L;
    TC_TRY(linear_check(fn, grad_output, x, weight, &L));
    tc_tensor *const none[3] = {NULL, NULL, NULL};
    tc_tensor *made[3] = {NULL, NULL, NULL};
    tc_status st = linear_run(&L, grad_output, x, weight, false, none, w3, made);
    if (st != TC_OK) {
        for (int i = 0; i < 3; i++)
            tc_tensor_release(made[i]);
        return st;
    }
    if (w3[0])
        *grad_x = made[0];
    if (w3[1])
        *grad_weight = made[1];
    if (w3[2])
        *grad_bias = made[2];
    return TC_OK;
}

tc_status tc_nn_linear_backward_into(const tc_tensor *grad_output, const tc_tensor *x,
                                     const tc_tensor *weight, bool accumulate, tc_tensor *grad_x,
                                     tc_tensor *grad_weight, tc_tensor *grad_bias)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_linear_backward_into";
    TC_CHECK_ARG(grad_x || grad_weight || grad_bias,
                 "%s: grad_x, grad_weight and grad_bias are all NULL; pass at least one", fn);
    lin L;
    TC_TRY(linear_check(fn, grad_output, x, weight, &L));
    int64_t wsz[2] = {L.of, L.in};
    TC_TRY(check_dst(fn, grad_output, grad_x, "tc_tensor grad_x", x->ndim, x->sizes));
    TC_TRY(check_dst(fn, grad_output, grad_weight, "tc_tensor grad_weight", 2, wsz));
    TC_TRY(check_dst(fn, grad_output, grad_bias, "tc_tensor grad_bias", 1, &L.of));
    tc_tensor *const dst[3] = {grad_x, grad_weight, grad_bias};
    TC_TRY(check_apart(fn, dst, grad_output, x, weight));
    bool w3[3] = {grad_x != NULL, grad_weight != NULL, grad_bias != NULL};
    tc_tensor *made[3] = {NULL, NULL, NULL}; /* stays empty: every output is the caller's */
    return linear_run(&L, grad_output, x, weight, accumulate, dst, w3, made);
}

/* ---- dropout --------------------------------------------------------------------- */

static tc_status check_p(const char *fn, double p)
{
    TC_CHECK_ARG(p >= 0 && p <= 1, "%s: p is %g; it must be in [0, 1]", fn, p); /* NaN too */
    return TC_OK;
}

/* PyTorch's scale: 1 / (1 - p), 0 when everything is dropped. */
static double dropout_scale(double p) { return 1 - p == 0 ? 0 : 1 / (1 - p); }

/* res (new, dense) = x * mask * scale through the backend. */
static tc_status dropout_apply(const tc_tensor *x, const tc_tensor *mask, double scale,
                               tc_tensor **out)
{
    tc_device dev = x->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    int64_t n = tc__numel(x->ndim, x->sizes);
    tc_tensor *xc = NULL, *mc = NULL, *res = NULL;
    tc_status st = tc_tensor_contiguous(x, &xc);
    if (st == TC_OK)
        st = tc_tensor_contiguous(mask, &mc);
    if (st == TC_OK)
        st = tc__new_tensor(x->ndim, x->sizes, x->dtype, dev, false, &res);
    if (st == TC_OK && n > 0) {
        tc__nn_dropout a = {.dtype = x->dtype,
                            .x = tc__data(xc),
                            .mask = tc__data(mc),
                            .out = tc__data(res),
                            .n = n,
                            .scale = scale};
        st = be->dropout(dev.index, &a);
    }
    tc_tensor_release(xc);
    tc_tensor_release(mc);
    return finish(st, res, out);
}

/* The generator to draw from: gen, or x's device's default; on x's device. */
static tc_status dropout_generator(const tc_tensor *x, tc_generator *gen, tc_generator **out)
{
    tc_device td = x->storage->device, gd;
    if (!gen)
        TC_TRY(tc_default_generator(td, &gen));
    TC_TRY(tc_generator_device(gen, &gd));
    if (gd.type != td.type || (td.type == TC_CUDA && gd.index != td.index)) {
        char gs[16], ts[16];
        tc_device_format(gd, gs, sizeof gs);
        tc_device_format(td, ts, sizeof ts);
        return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                        "tc_nn_dropout: the generator is on %s, x on %s; they must match", gs, ts);
    }
    *out = gen;
    return TC_OK;
}

/* Eval mode: a copy of x and an all-true mask (NULL mask: not wanted). */
static tc_status dropout_eval(const tc_tensor *x, tc_tensor **res, tc_tensor **mask)
{
    tc_device dev = x->storage->device;
    TC_TRY(tc__new_tensor(x->ndim, x->sizes, x->dtype, dev, false, res));
    tc_status st = tc__copy_local(*res, x);
    if (st == TC_OK && mask)
        st = tc_tensor_ones(x->ndim, x->sizes, TC_BOOL, dev, mask);
    return st;
}

tc_status tc_nn_dropout(const tc_tensor *x, double p, bool training, tc_generator *generator,
                        tc_tensor **out, tc_tensor **mask)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_dropout";
    TC_TRY(tc__nn_check_float(fn, x, "tc_tensor x"));
    TC_TRY(check_p(fn, p));
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    tc_tensor *res = NULL, *m = NULL;
    if (!training) {
        tc_status st = dropout_eval(x, &res, mask ? &m : NULL);
        if (st == TC_OK && mask)
            *mask = m;
        else
            tc_tensor_release(m);
        return finish(st, res, out);
    }
    tc_generator *gen = NULL;
    TC_TRY(dropout_generator(x, generator, &gen));
    int64_t n = tc__numel(x->ndim, x->sizes);
    tc_status st = tc__new_tensor(x->ndim, x->sizes, TC_BOOL, x->storage->device, false, &m);
    if (st == TC_OK && n > 0)
        st = tc_generator_bernoulli(gen, tc__data(m), (size_t)n, TC_BOOL, 1 - p);
    if (st == TC_OK)
        st = dropout_apply(x, m, dropout_scale(p), &res);
    if (st == TC_OK && mask) {
        *mask = m;
        m = NULL;
    }
    tc_tensor_release(m);
    return finish(st, res, out);
}

tc_status tc_nn_dropout_backward(const tc_tensor *grad_output, const tc_tensor *mask, double p,
                                 tc_tensor **grad_in)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_dropout_backward";
    TC_TRY(tc__nn_check_float(fn, grad_output, "tc_tensor grad_output"));
    TC_TRY(tc__tensor_check(mask, "tc_tensor mask"));
    TC_TRY(tc__check_same_device(fn, grad_output, mask));
    if (mask->dtype != TC_BOOL)
        return tc__fail(TC_ERROR_DTYPE, "%s: mask must be bool (tc_nn_dropout's), got %s", fn,
                        tc_dtype_string(mask->dtype));
    if (!sizes_equal(mask, grad_output->ndim, grad_output->sizes))
        return tc__fail(TC_ERROR_SHAPE, "%s: mask must have grad_output's shape", fn);
    TC_TRY(check_p(fn, p));
    TC_CHECK_ARG(grad_in, "%s: grad_in is NULL", fn);
    return dropout_apply(grad_output, mask, dropout_scale(p), grad_in);
}
