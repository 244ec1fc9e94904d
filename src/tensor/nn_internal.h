/* The neural-network backend table (nn.h's operations), one per device type:
 * the CPU's in src/tensor/cpu/cpu_nn.c, a GPU's reached through the device seam's
 * `nn` field (device_ops.h), filled by src/tensor/cuda/nn_cuda.c.
 *
 * The core (tensor_nn.c) checks every argument and hands a backend only
 * dense operands: row operations see contiguous [outer, n, inner] blocks,
 * GEMMs row-major matrices with leading dimensions. Plain C with no atomics,
 * so that the .cu files include it too. Not installed. */
#ifndef TCUDA_NN_INTERNAL_H
#define TCUDA_NN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tcuda/dtype.h"
#include "tcuda/nn.h"
#include "tcuda/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tc__nn_row_op {
    TC__NN_SOFTMAX,
    TC__NN_LOG_SOFTMAX,
    TC__NN_LAYER_NORM,
    TC__NN_RMS_NORM
} tc__nn_row_op;

/* A row operation over contiguous `in` seen as [outer, n, inner], reduced
 * over n, into contiguous `out` of the same shape. The norms come with
 * inner == 1, weight and bias (NULL when absent) of in_dtype with n
 * elements. out_dtype is in_dtype except for attention's softmax (float32
 * scores, 16-bit probabilities). causal > 0 (softmax, inner == 1 only): row r
 * is query r % causal and sees columns j <= r % causal; the others are -inf
 * and are not read. out may be in (same dtype): each row is read before it
 * is written. Values are computed in float32 for 16-bit dtypes. */
typedef struct tc__nn_rows {
    tc__nn_row_op op;
    tc_dtype in_dtype, out_dtype;
    const void *in;
    void *out;
    const void *weight, *bias;
    int64_t outer, n, inner;
    double eps;
    int64_t causal;
} tc__nn_rows;

/* Row-major, strided-batched C = alpha * op(A) op(B) + beta * C with op(A)
 * [m, k] and op(B) [k, n]: op(X)[i][j] is X[i * ld + j], or X[j * ld + i]
 * when trans. A and B are of `dtype`, C of c_dtype (dtype, or float32 for
 * 16-bit A and B); batch strides in elements (0 repeats one matrix); beta 0
 * means C is not read. 16-bit products accumulate in float32 (float32 ones
 * in TF32 only where tcuda/backends.h allows it). k may be 0
 * (C = beta * C). */
typedef struct tc__nn_gemm {
    tc_dtype dtype, c_dtype;
    bool trans_a, trans_b;
    int64_t batch, m, n, k;
    const void *a, *b;
    void *c;
    int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
    double alpha, beta;
} tc__nn_gemm;

/* A GEMM operand as tc__nn_gemm reads it: data, op(X) transposed or not,
 * the leading dimension and the batch stride (elements). */
typedef struct tc__nn_operand {
    const void *data;
    bool trans;
    int64_t ld, bstride;
} tc__nn_operand;

#ifndef __cplusplus /* the kernels take GEMMs, they do not build them */
/* C = op(A) op(B) for `batch` entries of op(A) [m, k] and op(B) [k, n] of
 * dtype, into dense C of dtype (ldc n, batch stride m * n); an operand's
 * batch stride counts only where batch > 1. alpha 1 and beta 0: a caller
 * that wants others (or another c_dtype) sets them after. */
static inline tc__nn_gemm tc__nn_gemm_of(tc_dtype dtype, int64_t batch, int64_t m, int64_t n,
                                         int64_t k, tc__nn_operand a, tc__nn_operand b, void *c)
{
    return (tc__nn_gemm){.dtype = dtype,
                         .c_dtype = dtype,
                         .trans_a = a.trans,
                         .trans_b = b.trans,
                         .batch = batch,
                         .m = m,
                         .n = n,
                         .k = k,
                         .a = a.data,
                         .b = b.data,
                         .c = c,
                         .lda = a.ld,
                         .ldb = b.ld,
                         .ldc = n,
                         .stride_a = batch > 1 ? a.bstride : 0,
                         .stride_b = batch > 1 ? b.bstride : 0,
                         .stride_c = m * n,
                         .alpha = 1,
                         .beta = 0};
}
#endif

/* Attention in one step: out = softmax(scale * q k^T) v per batch entry,
 * with the causal mask (row i sees keys j <= i) when causal. q is [l, e], k
 * [s, e], v [s, e] and out [l, e] per entry, all of `dtype`, with unit
 * column stride; entry b = bo * inner + bi of `batch` starts at
 * bo * strides[0] + bi * strides[1] elements and rows are strides[2]
 * apart. l, s and e are at least 1. */
typedef struct tc__nn_attention {
    tc_dtype dtype;
    const void *q, *k, *v;
    void *out;
    int64_t q_strides[3], k_strides[3], v_strides[3], out_strides[3];
    int64_t batch, inner, l, s, e;
    double scale;
    bool causal;
} tc__nn_attention;

/* cross_entropy of contiguous logits [n, c] of `dtype` against int64
 * targets [n] (device memory; CPU targets already checked to be in [0, c)
 * or ignore_index). Row i's loss is logsumexp(logits[i, :]) -
 * logits[i, target[i]], computed in dtype's computation type (float32 for
 * 16-bit dtypes): 0 for an ignored row, NaN for a target out of range (a
 * GPU reports it through kernel_errors.h). `out` is of dtype: with
 * TC_REDUCTION_NONE the n losses, else one value, their sum, or for
 * TC_REDUCTION_MEAN the sum over the rows not ignored divided by their
 * count (0 / 0, NaN, when every row is). */
typedef struct tc__nn_ce {
    tc_dtype dtype;
    const void *logits;
    const int64_t *target;
    void *out;
    int64_t n, c, ignore_index;
    tc_reduction reduction;
} tc__nn_ce;

typedef struct tc__nn_backend {
    /* See tc__nn_rows. */
    tc_status (*rows)(int device, const tc__nn_rows *args);
    /* See tc__nn_gemm; TC_ERROR_NOT_SUPPORTED when the BLAS is missing. */
    tc_status (*gemm)(int device, const tc__nn_gemm *g);
    /* See tc__nn_ce. */
    tc_status (*cross_entropy)(int device, const tc__nn_ce *args);
    /* linear's GEMM with its bias in one step where the backend can: C =
     * op(A) op(B) + bias for g with batch 1, alpha 1, beta 0 and c_dtype ==
     * dtype, bias [n] dense of dtype added to every row of C. *fused false
     * (with TC_OK) means nothing was queued and C is untouched: the caller
     * copies the bias into C and runs gemm with beta = 1 instead. An error
     * is a failure of the call itself, never a refusal. */
    tc_status (*gemm_bias)(int device, const tc__nn_gemm *g, const void *bias, bool *fused);
    /* See tc__nn_attention; NULL where there is none. *done false (with
     * TC_OK) means nothing was queued (a dtype, head size or device the
     * fused kernel does not take): the caller runs GEMM, softmax, GEMM. */
    tc_status (*attention)(int device, const tc__nn_attention *a, bool *done);
} tc__nn_backend;

extern const tc__nn_backend tc__cpu_nn_backend;

/* Test hooks for tc_nn_linear (tensor_nn.c): fused false makes it skip
 * gemm_bias (the copy + GEMM path on every device); counts gives the calling
 * thread's calls with a bias since it started that gemm_bias did in one step
 * (*fused) and those that took the copy + GEMM path (*unfused). */
void tc__nn_linear_set_fused(bool fused);
void tc__nn_linear_counts(uint64_t *fused, uint64_t *unfused);
/* Test hooks for tc_nn_scaled_dot_product_attention: fused false makes it
 * skip the backend's attention; the count is the calling thread's calls
 * that the backend's attention ran. */
void tc__nn_attention_set_fused(bool fused);
uint64_t tc__nn_attention_fused_count(void);

/* For tc_nn_scaled_dot_product_attention_backward (tensor_attention_backward.c),
 * from tensor_nn.c. tc__nn_sdpa_check: the forward's checks of q, k and v
 * (live, floating, alike; shapes [..., L, E], [..., S, E], [..., S, Ev]),
 * messages naming fn. tc__nn_attention_probs: P = softmax(scale * q k^T),
 * with the causal mask when causal, for checked q and k of float32 or
 * float64 with L, S >= 1, as a new dense [B, L, S] of their dtype (B the
 * product of the leading dims), computed as the forward's math path does. */
tc_status tc__nn_sdpa_check(const char *fn, const tc_tensor *q, const tc_tensor *k,
                            const tc_tensor *v);
tc_status tc__nn_attention_probs(const tc_tensor *q, const tc_tensor *k, bool causal, double scale,
                                 tc_tensor **out);

#ifdef __cplusplus
}
#endif

#endif
