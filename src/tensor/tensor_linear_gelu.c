/* A linear layer and the tanh gelu after it, forward and backward. The
 * forward is one GEMM where the nn backend has the epilogue (cuBLASLt's
 * GELU_AUX_BIAS on a GPU), else tc_nn_linear then tc_tensor_gelu; the fused
 * one applies gelu to the float32 accumulator before rounding (the
 * pre-activation is rounded on its own), within the dtype's rounding of
 * the two apart. The backward is tc_nn_linear_backward's grad_x,
 * tc_nn_gelu_backward and a column sum (cuBLASLt's DGELU_BGRAD epilogue
 * was slower on an H100: blas_lt.c). */
#include <stdatomic.h>

#include "nn_internal.h"
#include "tcuda/nn_backward.h"
#include "tensor_internal.h"

static atomic_bool gelu_fuse = true;
static _Thread_local uint64_t gelu_fused; /* per thread: no shared cache line */

void tc__nn_linear_gelu_set_fused(bool fused) { atomic_store(&gelu_fuse, fused); }

uint64_t tc__nn_linear_gelu_fused_count(void) { return gelu_fused; }

/* Whether the three tensors are floating, of one dtype and device, dense,
 * with a [rows, k] @ [k, n]-shaped product: x [..., k] (at least 1-d), w
 * [n, k] and v (NULL or [n]). The rest of the checks are the ops' own:
 * anything else takes the path of the ops apart. */
static bool fusable(const tc_tensor *x, const tc_tensor *w, const tc_tensor *v)
{
    if (x->ndim < 1 || w->ndim != 2 || x->dtype != w->dtype || !tc_dtype_is_floating(x->dtype) ||
        !tc__is_contiguous(x) || !tc__is_contiguous(w) ||
        x->storage->device.type != w->storage->device.type ||
        x->storage->device.index != w->storage->device.index)
        return false;
    int64_t k = x->sizes[x->ndim - 1], n = w->sizes[0];
    if (w->sizes[1] != k || k < 1 || n < 1)
        return false;
    return !v || (v->ndim == 1 && v->sizes[0] == n && v->dtype == x->dtype &&
                  tc__is_contiguous(v) && v->storage->device.type == x->storage->device.type &&
                  v->storage->device.index == x->storage->device.index);
}

/* t into *slot, or released where the caller does not want it (NULL slot). */
static void give(tc_tensor *t, tc_tensor **slot)
{
    if (slot)
        *slot = t;
    else
        tc_tensor_release(t);
}

/* x's leading sizes and n, the shape of a [..., n] result. */
static int result_shape(const tc_tensor *x, int64_t n, int64_t *sz)
{
    for (int i = 0; i < x->ndim - 1; i++)
        sz[i] = x->sizes[i];
    sz[x->ndim - 1] = n;
    return x->ndim;
}

tc_status tc_nn_linear_gelu(const tc_tensor *x, const tc_tensor *weight, const tc_tensor *bias,
                            tc_gelu_approximate approximate, tc_tensor **out, tc_tensor **pre)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_linear_gelu";
    TC_TRY(tc__tensor_check(x, "tc_tensor x"));
    TC_TRY(tc__tensor_check(weight, "tc_tensor weight"));
    if (bias)
        TC_TRY(tc__tensor_check(bias, "tc_tensor bias"));
    TC_TRY(tc__nn_check_gelu_approximate(fn, approximate));
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    const tc__nn_backend *be = tc__nn_of(x->storage->device);
    if (be && be->gemm_gelu && atomic_load_explicit(&gelu_fuse, memory_order_relaxed) &&
        approximate == TC_GELU_APPROXIMATE_TANH && bias && fusable(x, weight, bias) &&
        tc__numel(x->ndim - 1, x->sizes) > 0) {
        int64_t of = weight->sizes[0], in = weight->sizes[1], sz[TC_MAX_DIMS];
        int nd = result_shape(x, of, sz);
        int64_t m = tc__numel(x->ndim - 1, x->sizes);
        tc_tensor *o = NULL, *p = NULL;
        tc_status st = tc__new_tensor(nd, sz, x->dtype, x->storage->device, false, &o);
        if (st == TC_OK)
            st = tc__new_tensor(nd, sz, x->dtype, x->storage->device, false, &p);
        bool fused = false;
        if (st == TC_OK) {
            tc__nn_operand a = {.data = tc__data(x), .ld = in};
            tc__nn_operand b = {.data = tc__data(weight), .trans = true, .ld = in};
            tc__nn_gemm g = tc__nn_gemm_of(x->dtype, 1, m, of, in, a, b, tc__data(o));
            st = be->gemm_gelu(x->storage->device.index, &g, tc__data(bias), tc__data(p), &fused);
        }
        if (st == TC_OK && fused) {
            gelu_fused++;
            *out = o;
            give(p, pre);
            return TC_OK;
        }
        tc_tensor_release(o);
        tc_tensor_release(p);
        if (st != TC_OK)
            return st;
    }
    tc_tensor *p = NULL, *o = NULL;
    TC_TRY(tc_nn_linear(x, weight, bias, &p));
    tc_status st = tc_tensor_gelu(p, approximate, &o);
    if (st != TC_OK) {
        tc_tensor_release(p);
        return st;
    }
    *out = o;
    give(p, pre);
    return TC_OK;
}

/* grad_pre's sum over its leading dims, [n]: the bias gradient of the
 * layer that made pre. */
static tc_status column_sum(const tc_tensor *t, tc_tensor **out)
{
    int64_t n = t->sizes[t->ndim - 1], sz[2] = {tc__numel(t->ndim, t->sizes) / (n ? n : 1), n};
    tc_tensor *t2 = NULL;
    TC_TRY(tc_tensor_reshape(t, 2, sz, &t2));
    tc_status st = tc_tensor_sum(t2, 0, false, out);
    tc_tensor_release(t2);
    return st;
}

tc_status tc_nn_linear_backward_gelu(const tc_tensor *grad_output, const tc_tensor *weight,
                                     const tc_tensor *pre, tc_gelu_approximate approximate,
                                     tc_tensor **grad_pre, tc_tensor **grad_bias)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_linear_backward_gelu";
    TC_TRY(tc__tensor_check(grad_output, "tc_tensor grad_output"));
    TC_TRY(tc__tensor_check(weight, "tc_tensor weight"));
    TC_TRY(tc__tensor_check(pre, "tc_tensor pre"));
    TC_TRY(tc__nn_check_gelu_approximate(fn, approximate));
    TC_CHECK_ARG(grad_pre, "%s: grad_pre is NULL", fn);
    /* the ops apart: pre stands for the linear's input (gelu(pre)), whose
     * shape alone grad_x needs */
    tc_tensor *dy = NULL, *gp = NULL, *gb = NULL;
    TC_TRY(tc_nn_linear_backward(grad_output, pre, weight, TC_NN_LINEAR_GRAD_X, &dy, NULL, NULL));
    tc_status st = tc_nn_gelu_backward(dy, pre, approximate, &gp);
    tc_tensor_release(dy);
    if (st == TC_OK && grad_bias)
        st = column_sum(gp, &gb);
    if (st != TC_OK) {
        tc_tensor_release(gp);
        return st;
    }
    *grad_pre = gp;
    if (grad_bias)
        *grad_bias = gb;
    return TC_OK;
}
