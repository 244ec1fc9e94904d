/* A linear layer with the layer_norm before it or the residual add after
 * it in one kernel (nn.h: tc_nn_linear_add, tc_nn_layer_norm_linear and
 * its _gelu twin). The backend's gemm_fused computes them where it can (on
 * a GPU: tcuda's skinny GEMM kernel, decode's matrix-vector products of at
 * most 16 rows); everywhere else they are the ops apart, which also give
 * every error. The fused kernel rounds differently in two places: the
 * residual is added to the float32 product before the one rounding (apart:
 * the linear's output is rounded, then the sum), and the norm's statistics
 * are summed in another order (its output is still rounded to the dtype
 * before the product). */
#include <stdatomic.h>

#include "nn_internal.h"
#include "tcuda/nn_backward.h"
#include "tensor_internal.h"

static atomic_bool fuse = true;
static _Thread_local uint64_t fused_calls; /* per thread: no shared cache line */

void tc__nn_fused_linear_set_fused(bool on) { atomic_store(&fuse, on); }

uint64_t tc__nn_fused_linear_count(void) { return fused_calls; }

/* t is NULL, or a dense tensor of x's dtype and device with `n` sizes `sz`. */
static bool fits(const tc_tensor *t, const tc_tensor *x, int n, const int64_t *sz)
{
    if (!t)
        return true;
    if (t->dtype != x->dtype || t->ndim != n || !tc__is_contiguous(t) ||
        t->storage->device.type != x->storage->device.type ||
        t->storage->device.index != x->storage->device.index)
        return false;
    for (int i = 0; i < n; i++)
        if (t->sizes[i] != sz[i])
            return false;
    return true;
}

/* The fused linear where every operand is as the backend's kernel takes it
 * (else *done false and nothing made): x [..., in] dense and floating,
 * weight [out, in], bias [out], residual of the result's shape, ln_weight
 * and ln_bias [in], all dense, of one dtype and device. f's pointers are
 * filled in here from the tensors. */
static tc_status try_fused(const tc_tensor *x, const tc_tensor *weight, const tc_tensor *bias,
                           const tc_tensor *residual, const tc_tensor *ln_weight,
                           const tc_tensor *ln_bias, tc__nn_fusion f, tc_tensor **out, bool *done)
{
    *done = false;
    if (!atomic_load_explicit(&fuse, memory_order_relaxed) || x->ndim < 1 ||
        !tc_dtype_is_floating(x->dtype) || !tc__is_contiguous(x) || weight->ndim != 2)
        return TC_OK;
    const tc__nn_backend *be = tc__nn_of(x->storage->device);
    if (!be || !be->gemm_fused)
        return TC_OK;
    int64_t in = x->sizes[x->ndim - 1], of = weight->sizes[0], wsz[2] = {of, in}, osz[TC_MAX_DIMS];
    for (int i = 0; i < x->ndim - 1; i++)
        osz[i] = x->sizes[i];
    osz[x->ndim - 1] = of;
    int64_t numel, m = tc__numel(x->ndim - 1, x->sizes);
    if (!fits(weight, x, 2, wsz) || !fits(bias, x, 1, &of) || !fits(ln_weight, x, 1, &in) ||
        !fits(ln_bias, x, 1, &in) || !fits(residual, x, x->ndim, osz) || in < 1 || of < 1 ||
        m < 1 || tc__check_shape(x->ndim, osz, tc_dtype_size(x->dtype), &numel) != TC_OK)
        return TC_OK;
    tc_tensor *res = NULL;
    TC_TRY(tc__nn_new_rows(x->ndim, osz, x->dtype, x->storage->device, &res));
    int64_t ldc = of;
    (void)tc__nn_rows_ld(res, &ldc);
    tc_status st = TC_OK;
    if (ldc == of) { /* the kernel reads the residual in C's layout */
        tc__nn_operand a = {.data = tc__data(x), .ld = in};
        tc__nn_operand b = {.data = tc__data(weight), .trans = true, .ld = in};
        tc__nn_gemm g = tc__nn_gemm_of(x->dtype, 1, m, of, in, a, b, tc__data(res));
        f.bias = bias ? tc__data(bias) : NULL;
        f.residual = residual ? tc__data(residual) : NULL;
        f.ln_weight = ln_weight ? tc__data(ln_weight) : NULL;
        f.ln_bias = ln_bias ? tc__data(ln_bias) : NULL;
        st = be->gemm_fused(x->storage->device.index, &g, &f, done);
    }
    if (st == TC_OK && *done) {
        fused_calls++;
        *out = res;
        return TC_OK;
    }
    tc_tensor_release(res);
    return st;
}

tc_status tc_nn_linear_add(const tc_tensor *x, const tc_tensor *weight, const tc_tensor *bias,
                           const tc_tensor *residual, tc_tensor **out)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_linear_add";
    TC_TRY(tc__tensor_check(x, "tc_tensor x"));
    TC_TRY(tc__tensor_check(weight, "tc_tensor weight"));
    if (bias)
        TC_TRY(tc__tensor_check(bias, "tc_tensor bias"));
    TC_TRY(tc__tensor_check(residual, "tc_tensor residual"));
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    bool done = false;
    TC_TRY(try_fused(x, weight, bias, residual, NULL, NULL, (tc__nn_fusion){0}, out, &done));
    if (done)
        return TC_OK;
    tc_tensor *y = NULL;
    TC_TRY(tc_nn_linear(x, weight, bias, &y));
    tc_status st = tc_tensor_add(residual, y, out);
    tc_tensor_release(y);
    return st;
}

/* layer_norm over x's last size, then linear, then gelu where `gelu` (with
 * `approximate`): the fused kernel where it takes them (gelu only tanh),
 * else the ops apart. */
static tc_status norm_linear(const char *fn, const tc_tensor *x, const tc_tensor *ln_weight,
                             const tc_tensor *ln_bias, double eps, const tc_tensor *weight,
                             const tc_tensor *bias, bool gelu, tc_gelu_approximate approximate,
                             tc_tensor **out)
{
    TC_TRY(tc__tensor_check(x, "tc_tensor x"));
    if (ln_weight)
        TC_TRY(tc__tensor_check(ln_weight, "tc_tensor ln_weight"));
    if (ln_bias)
        TC_TRY(tc__tensor_check(ln_bias, "tc_tensor ln_bias"));
    TC_TRY(tc__tensor_check(weight, "tc_tensor weight"));
    if (bias)
        TC_TRY(tc__tensor_check(bias, "tc_tensor bias"));
    if (gelu)
        TC_TRY(tc__nn_check_gelu_approximate(fn, approximate));
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    TC_CHECK_ARG(x->ndim >= 1, "%s: x is 0-d; it needs a last size to normalize", fn);
    if (!gelu || approximate == TC_GELU_APPROXIMATE_TANH) {
        tc__nn_fusion f = {.eps = eps, .ln = true, .gelu = gelu};
        bool done = false;
        TC_TRY(try_fused(x, weight, bias, NULL, ln_weight, ln_bias, f, out, &done));
        if (done)
            return TC_OK;
    }
    int64_t in = x->sizes[x->ndim - 1];
    tc_tensor *h = NULL;
    TC_TRY(tc_nn_layer_norm(x, 1, &in, ln_weight, ln_bias, eps, &h));
    tc_status st = gelu ? tc_nn_linear_gelu(h, weight, bias, approximate, out, NULL)
                        : tc_nn_linear(h, weight, bias, out);
    tc_tensor_release(h);
    return st;
}

tc_status tc_nn_layer_norm_linear(const tc_tensor *x, const tc_tensor *ln_weight,
                                  const tc_tensor *ln_bias, double eps, const tc_tensor *weight,
                                  const tc_tensor *bias, tc_tensor **out)
{
    TC_API_BEGIN;
    return norm_linear("tc_nn_layer_norm_linear", x, ln_weight, ln_bias, eps, weight, bias, false,
                       TC_GELU_APPROXIMATE_NONE, out);
}

tc_status tc_nn_layer_norm_linear_gelu(const tc_tensor *x, const tc_tensor *ln_weight,
                                       const tc_tensor *ln_bias, double eps,
                                       const tc_tensor *weight, const tc_tensor *bias,
                                       tc_gelu_approximate approximate, tc_tensor **out)
{
    TC_API_BEGIN;
    return norm_linear("tc_nn_layer_norm_linear_gelu", x, ln_weight, ln_bias, eps, weight, bias,
                       true, approximate, out);
}
