/* The CPU's backward entries of the nn backend (tensor/nn_internal.h):
 * gelu's, softmax's and log_softmax's, layer_norm with its statistics and
 * its backward, and cross_entropy's gradient.
 *
 * As cpu_nn.c, every value is computed in double and rounded once into its
 * dtype, so the CPU is the precise side of the parity tests; the sums over
 * rows (layer_norm's dweight and dbias, cross_entropy's loss) run in row
 * order. Operands are dense and never overlap (the core makes the results
 * new tensors). */
#include <math.h>
#include <stdlib.h>

#include "tensor/nn_internal.h"
#include "base/half.h"
#include "tensor/tensor_internal.h"
#include "cpu_float_io.h"

/* The statistics' dtype: float32 for 16-bit dtypes. */
static tc_dtype stat_dtype(tc_dtype d) { return d == TC_FLOAT64 ? TC_FLOAT64 : TC_FLOAT32; }

/* ---- gelu ------------------------------------------------------------------------ */

/* PyTorch's constants (M_SQRT1_2; M_2_SQRTPI * M_SQRT1_2 * 0.5; M_SQRT2 *
 * M_2_SQRTPI * 0.5), spelled out: strict C11 has no M_ constants. */
#define SQRT1_2 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794
#define SQRT_2_PI 0.79788456080286535588

static double gelu_grad(double x, bool tanh_approx)
{
    if (!tanh_approx) {
        double cdf = 0.5 * (1.0 + erf(x * SQRT1_2)), pdf = exp(-0.5 * x * x) * INV_SQRT_2PI;
        return cdf + x * pdf;
    }
    double x2 = x * x, inner = SQRT_2_PI * (x + 0.044715 * x2 * x), t = tanh(inner);
    double left = 0.5 * x, right = 1.0 + t;
    double inner_d = SQRT_2_PI * (1.0 + 3.0 * 0.044715 * x2);
    return 0.5 * right + left * (1.0 - t * t) * inner_d;
}

tc_status tc__cpu_nn_gelu_backward(int device, const tc__nn_gelu_bwd *a)
{
    (void)device;
    for (int64_t i = 0; i < a->n; i++)
        st(a->grad_in, a->dtype, i,
           ld(a->grad_out, a->dtype, i) * gelu_grad(ld(a->x, a->dtype, i), a->tanh));
    return TC_OK;
}

/* ---- softmax and log_softmax ------------------------------------------------------ */

tc_status tc__cpu_nn_softmax_backward(int device, const tc__nn_softmax_bwd *a)
{
    (void)device;
    const int64_t n = a->n, inner = a->inner;
    const tc_dtype dt = a->dtype;
    for (int64_t o = 0; o < a->outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t base = o * n * inner + i;
            double s = 0;
            for (int64_t j = 0; j < n; j++) {
                int64_t k = base + j * inner;
                s += a->log ? ld(a->grad_out, dt, k) : ld(a->grad_out, dt, k) * ld(a->y, dt, k);
            }
            for (int64_t j = 0; j < n; j++) {
                int64_t k = base + j * inner;
                double g = ld(a->grad_out, dt, k), y = ld(a->y, dt, k);
                st(a->grad_in, dt, k, a->log ? g - exp(y) * s : y * (g - s));
            }
        }
    return TC_OK;
}

/* ---- layer_norm ------------------------------------------------------------------- */

/* Mean, then the mean of squared deviations (two passes: no cancellation). */
tc_status tc__cpu_nn_layer_norm(int device, const tc__nn_ln *a)
{
    (void)device;
    const int64_t n = a->n;
    const tc_dtype dt = a->dtype, sd = stat_dtype(dt), ot = a->out_dtype;
    /* the rows normalized: x, or x + residual as stored in sum */
    const void *src = a->residual ? a->sum : a->x;
    for (int64_t r = 0; r < a->m; r++) {
        const int64_t row = r * n;
        for (int64_t j = 0; a->residual && j < n; j++)
            st(a->sum, dt, row + j, ld(a->x, dt, row + j) + ld(a->residual, a->res_dtype, row + j));
        double mean = 0, var = 0;
        for (int64_t j = 0; j < n; j++)
            mean += ld(src, dt, row + j);
        mean /= (double)n;
        for (int64_t j = 0; j < n; j++) {
            double d = ld(src, dt, row + j) - mean;
            var += d * d;
        }
        double rstd = 1.0 / sqrt(var / (double)n + a->eps);
        for (int64_t j = 0; j < n; j++) {
            double y = (ld(src, dt, row + j) - mean) * rstd;
            if (a->weight)
                y *= ld(a->weight, dt, j);
            if (a->bias)
                y += ld(a->bias, dt, j);
            if (ot != dt) /* float32 first, as the norm's own result, then the cast */
                y = (double)(float)y;
            st(a->y, ot, row + j, y);
        }
        st(a->mean, sd, r, mean);
        st(a->rstd, sd, r, rstd);
    }
    return TC_OK;
}

tc_status tc__cpu_nn_layer_norm_backward(int device, const tc__nn_ln_bwd *a)
{
    (void)device;
    const int64_t n = a->n;
    const tc_dtype dt = a->dtype, gt = a->grad_dtype, sd = stat_dtype(dt);
    double *dw = calloc((size_t)n * 2, sizeof(double)), *db = dw ? dw + n : NULL;
    if (!dw)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for layer_norm_backward's sums");
    for (int64_t r = 0; r < a->m; r++) {
        const int64_t row = r * n;
        const double mean = ld(a->mean, sd, r), rstd = ld(a->rstd, sd, r);
        double sg = 0, sgx = 0; /* sums of g and g * xhat over the row */
        for (int64_t j = 0; j < n; j++) {
            double dy = ld(a->grad_out, gt, row + j), xh = (ld(a->x, dt, row + j) - mean) * rstd;
            double g = a->weight ? dy * ld(a->weight, dt, j) : dy;
            sg += g;
            sgx += g * xh;
            dw[j] += dy * xh;
            db[j] += dy;
        }
        if (!a->dx)
            continue;
        for (int64_t j = 0; j < n; j++) {
            double dy = ld(a->grad_out, gt, row + j), xh = (ld(a->x, dt, row + j) - mean) * rstd;
            double g = a->weight ? dy * ld(a->weight, dt, j) : dy;
            double v = rstd * (g - sg / (double)n - xh * sgx / (double)n);
            st(a->dx, dt, row + j, a->accumulate ? ld(a->dx, dt, row + j) + v : v);
            if (a->dx_cast) /* the value as stored, then the cast */
                st(a->dx_cast, a->cast_dtype, row + j, ld(a->dx, dt, row + j));
        }
    }
    for (int64_t j = 0; j < n; j++) {
        if (a->dweight)
            st(a->dweight, dt, j, a->accumulate ? ld(a->dweight, dt, j) + dw[j] : dw[j]);
        if (a->dbias)
            st(a->dbias, dt, j, a->accumulate ? ld(a->dbias, dt, j) + db[j] : db[j]);
    }
    free(dw);
    return TC_OK;
}

/* ---- cross_entropy ---------------------------------------------------------------- */

tc_status tc__cpu_nn_cross_entropy_backward(int device, const tc__nn_ce_bwd *a)
{
    (void)device;
    const tc_dtype dt = a->dtype;
    const bool none = a->reduction == TC_REDUCTION_NONE;
    int64_t kept = 0; /* targets were checked: each is in range or ignored */
    for (int64_t i = 0; i < a->n; i++)
        kept += a->target[i] != a->ignore_index;
    double sum = 0;
    for (int64_t i = 0; i < a->n; i++) {
        const int64_t t = a->target[i], row = i * a->ld, drow = i * a->d_ld;
        if (t == a->ignore_index) {
            for (int64_t j = 0; j < a->c; j++)
                st(a->dlogits, dt, drow + j, 0);
            if (a->loss && none)
                st(a->loss, a->loss_dtype, i, 0);
            continue;
        }
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < a->c; j++) {
            double v = ld(a->logits, dt, row + j);
            m = v > m ? v : m;
        }
        for (int64_t j = 0; j < a->c; j++)
            s += exp(ld(a->logits, dt, row + j) - m);
        double loss = m + log(s) - ld(a->logits, dt, row + t);
        sum += loss;
        if (a->loss && none)
            st(a->loss, a->loss_dtype, i, loss);
        double g = a->grad_scale;
        if (a->grad)
            g *= ld(a->grad, dt, a->grad_per_row ? i : 0);
        if (a->reduction == TC_REDUCTION_MEAN)
            g /= (double)kept;
        for (int64_t j = 0; j < a->c; j++) {
            double p = exp(ld(a->logits, dt, row + j) - m) / s;
            st(a->dlogits, dt, drow + j, (p - (j == t ? 1.0 : 0.0)) * g);
        }
    }
    if (a->loss && !none) /* the mean of no rows: 0 / 0, NaN */
        st(a->loss, a->loss_dtype, 0, a->reduction == TC_REDUCTION_MEAN ? sum / (double)kept : sum);
    return TC_OK;
}
