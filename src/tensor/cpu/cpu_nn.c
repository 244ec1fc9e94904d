/* The CPU nn backend (tensor/nn_internal.h): row operations (softmax,
 * log_softmax, layer_norm, rms_norm), a strided-batched GEMM (with linear's
 * bias added in the same pass for gemm_bias) and the rows of cross_entropy.
 *
 * Every value is computed in double and rounded once into the output dtype,
 * so the CPU is the precise side of the parity tests. A row is copied into a
 * double buffer before anything is written, which makes out == in safe.
 * The GEMM converts op(A) and op(B)^T of each batch into dense double rows,
 * so its inner loop is a contiguous dot product. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/nn_internal.h"
#include "base/half.h"
#include "tensor/tensor_internal.h"
#include "cpu_float_io.h"

static tc_status no_memory(const char *what)
{
    return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the CPU %s's buffers", what);
}

/* ---- rows ------------------------------------------------------------------------------ */

/* One row of n values in x (double), written back in place. */
static void row_op(const tc__nn_rows *a, double *x, int64_t n, int64_t row)
{
    int64_t valid = n;
    if (a->causal > 0) { /* query row % causal sees keys 0..q */
        int64_t q = row % a->causal;
        valid = q + 1 < n ? q + 1 : n;
    }
    if (a->op == TC__NN_SOFTMAX || a->op == TC__NN_LOG_SOFTMAX) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < valid; j++)
            m = x[j] > m ? x[j] : m;
        for (int64_t j = 0; j < valid; j++)
            s += exp(x[j] - m);
        double ls = m + log(s);
        for (int64_t j = 0; j < n; j++) {
            if (j >= valid)
                x[j] = a->op == TC__NN_SOFTMAX ? 0 : -INFINITY;
            else
                x[j] = a->op == TC__NN_SOFTMAX ? exp(x[j] - m) / s : x[j] - ls;
        }
        return;
    }
    double mean = 0, var = 0;
    if (a->op == TC__NN_LAYER_NORM) {
        for (int64_t j = 0; j < n; j++)
            mean += x[j];
        mean /= (double)n;
    }
    for (int64_t j = 0; j < n; j++)
        var += (x[j] - mean) * (x[j] - mean);
    double r = 1.0 / sqrt(var / (double)n + a->eps);
    for (int64_t j = 0; j < n; j++) {
        double y = (x[j] - mean) * r;
        if (a->weight)
            y *= ld(a->weight, a->in_dtype, j);
        if (a->bias)
            y += ld(a->bias, a->in_dtype, j);
        x[j] = y;
    }
}

static tc_status cpu_rows(int device, const tc__nn_rows *a)
{
    (void)device;
    double *x = malloc(sizeof(double) * (size_t)a->n);
    if (!x)
        return no_memory("softmax or norm");
    int64_t n = a->n, inner = a->inner;
    for (int64_t o = 0; o < a->outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            for (int64_t j = 0; j < n; j++)
                x[j] = ld(a->in, a->in_dtype, base + j * inner);
            row_op(a, x, n, o);
            for (int64_t j = 0; j < n; j++)
                st(a->out, a->out_dtype, base + j * inner, x[j]);
        }
    free(x);
    return TC_OK;
}

/* ---- gemm ------------------------------------------------------------------------------ */

/* op(X) [r, c] of one batch into dense doubles d[i * c + j]. */
static void unpack(double *d, const void *x, tc_dtype dt, bool trans, int64_t ld_, int64_t r,
                   int64_t c)
{
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            d[i * c + j] = ld(x, dt, trans ? j * ld_ + i : i * ld_ + j);
}

/* See tc__nn_gemm; `bias` (NULL when absent) [n] of c_dtype is added to
 * every row of each batch, in double with the rest (gemm_bias). */
static tc_status gemm_impl(const tc__nn_gemm *g, const void *bias)
{
    int64_t m = g->m, n = g->n, k = g->k;
    size_t es = tc_dtype_size(g->dtype), cs = tc_dtype_size(g->c_dtype);
    double *A = malloc(sizeof(double) * (size_t)(m * k + 1));
    double *Bt = malloc(sizeof(double) * (size_t)(n * k + 1));
    if (!A || !Bt) {
        free(A), free(Bt);
        return no_memory("GEMM");
    }
    for (int64_t p = 0; p < g->batch; p++) {
        const char *a = (const char *)g->a + p * g->stride_a * (int64_t)es;
        const char *b = (const char *)g->b + p * g->stride_b * (int64_t)es;
        char *c = (char *)g->c + p * g->stride_c * (int64_t)cs;
        unpack(A, a, g->dtype, g->trans_a, g->lda, m, k);
        /* op(B)^T [n, k]: transposing op(B) flips `trans` */
        unpack(Bt, b, g->dtype, !g->trans_b, g->ldb, n, k);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                const double *ar = A + i * k, *br = Bt + j * k;
                double s = 0;
                for (int64_t q = 0; q < k; q++)
                    s += ar[q] * br[q];
                s *= g->alpha;
                int64_t at = i * g->ldc + j;
                if (g->beta != 0)
                    s += g->beta * ld(c, g->c_dtype, at);
                if (bias)
                    s += ld(bias, g->c_dtype, j);
                st(c, g->c_dtype, at, s);
            }
    }
    free(A), free(Bt);
    return TC_OK;
}

static tc_status cpu_gemm(int device, const tc__nn_gemm *g)
{
    (void)device;
    return gemm_impl(g, NULL);
}

/* The bias joins the sum before the one rounding: the values of the copy +
 * GEMM path (the bias, exact in dtype, read back with beta = 1). */
static tc_status cpu_gemm_bias(int device, const tc__nn_gemm *g, const void *bias, bool *fused)
{
    (void)device;
    *fused = false;
    TC_TRY(gemm_impl(g, bias));
    *fused = true;
    return TC_OK;
}

/* ---- cross_entropy ----------------------------------------------------------------------- */

static tc_status cpu_cross_entropy(int device, const tc__nn_ce *a)
{
    (void)device;
    double sum = 0;
    int64_t rows = 0;
    for (int64_t i = 0; i < a->n; i++) {
        double loss = 0;
        int64_t t = a->target[i];
        if (t != a->ignore_index) {
            double m = -INFINITY, s = 0;
            const int64_t row = i * a->c;
            for (int64_t j = 0; j < a->c; j++) {
                double v = ld(a->logits, a->dtype, row + j);
                m = v > m ? v : m;
            }
            for (int64_t j = 0; j < a->c; j++)
                s += exp(ld(a->logits, a->dtype, row + j) - m);
            loss = t >= 0 && t < a->c ? m + log(s) - ld(a->logits, a->dtype, row + t) : NAN;
            rows++;
        }
        if (a->reduction == TC_REDUCTION_NONE)
            st(a->out, a->dtype, i, loss);
        sum += loss;
    }
    if (a->reduction != TC_REDUCTION_NONE) /* the mean of no rows: 0 / 0, NaN */
        st(a->out, a->dtype, 0, a->reduction == TC_REDUCTION_MEAN ? sum / (double)rows : sum);
    return TC_OK;
}

const tc__nn_backend tc__cpu_nn_backend = {
    .rows = cpu_rows,
    .gemm = cpu_gemm,
    .cross_entropy = cpu_cross_entropy,
    .gemm_bias = cpu_gemm_bias,
    .gelu_backward = tc__cpu_nn_gelu_backward,
    .softmax_backward = tc__cpu_nn_softmax_backward,
    .layer_norm = tc__cpu_nn_layer_norm,
    .layer_norm_backward = tc__cpu_nn_layer_norm_backward,
    .cross_entropy_backward = tc__cpu_nn_cross_entropy_backward,
    .embedding_backward = tc__cpu_nn_embedding_backward,
    .dropout = tc__cpu_nn_dropout,
    .attention_cache = tc__cpu_nn_attention_cache,
};
