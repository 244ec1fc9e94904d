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

/* layer_norm's and rms_norm's shape rules, for the forward (tensor_nn.c) and
 * the backward (tensor_nn_backward.c): x's last nshape dims equal shape
 * (1..TC_MAX_DIMS sizes); a weight or bias p has exactly that shape.
 * Messages name fn and, for p, what. */
tc_status tc__nn_check_norm_shape(const char *fn, const tc_tensor *x, int nshape,
                                  const int64_t *shape);
tc_status tc__nn_check_norm_param(const char *fn, const tc_tensor *p, const char *what, int nshape,
                                  const int64_t *shape);

/* The end of an op that made res: *out = res on success, else res released
 * and the status passed on. */
static inline tc_status tc__nn_finish(tc_status st, tc_tensor *res, tc_tensor **out)
{
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}

#ifndef __cplusplus /* the kernels take GEMMs, they do not build them */
/* Whether a 16-bit result of sizes (at least 2-d) comes in rows padded to
 * whole 16-byte vectors: its last size not a multiple of 8 (and over 8), at
 * least 2^22 elements (GPT-2's [tokens, 50257] logits and their gradient).
 * cuBLAS reads and writes rows at an unaligned stride only in its slow
 * kernels; torch.compile pads such strides too. sizes must have passed
 * tc__check_shape (the callers check a result's shape before they make it). */
bool tc__nn_pads_rows(tc_dtype dtype, int ndim, const int64_t *sizes);
/* A new tensor of sizes whose rows are padded as tc__nn_pads_rows says
 * (else dense): contiguous but for its row stride, the last size rounded up
 * to a multiple of 8. Contents undefined. */
tc_status tc__nn_new_rows(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                          tc_tensor **out);
/* Whether t (at least 1-d) reads as a row-major [rows, cols] matrix, its
 * leading dims one run of rows whose elements are adjacent: *ld the row
 * stride (cols for at most one row), at least cols. Dense tensors and
 * tc__nn_new_rows' padded ones do. */
bool tc__nn_rows_ld(const tc_tensor *t, int64_t *ld);
/* Whether t's rows lie as tc__nn_new_rows pads them (not dense). */
bool tc__nn_rows_padded(const tc_tensor *t);

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
 * apart. l, s and e are at least 1. lse, NULL when not wanted, is dense
 * float32 [batch, l]: each row's log-sum-exp of its scaled, masked scores
 * (natural log), what the fused backward reads. */
typedef struct tc__nn_attention {
    tc_dtype dtype;
    const void *q, *k, *v;
    void *out;
    float *lse;
    int64_t q_strides[3], k_strides[3], v_strides[3], out_strides[3];
    int64_t batch, inner, l, s, e;
    double scale;
    bool causal;
} tc__nn_attention;

/* Attention of t new query rows over a key/value cache, with the cache's
 * update (tc_nn_attention_with_kv_cache). Per batch entry i of b, with n =
 * len[i] (len[0] for every entry when !len_per_batch; int32 or int64 as
 * len_dtype says) positions already filled: k_new and v_new (t rows of
 * heads hkv; NULL: none, t_new 0) go to k_cache and v_cache at positions
 * n..n+t_new-1, then query row j of head hq sees the positions 0..n+t_new-1
 * of head hq / (h / hkv), or with causal only those up to n + t_new - t +
 * j. Keys at n and past are read from k_new and v_new, never from the
 * caches. A row that sees no position is zeros. Each operand's rows are e
 * elements with unit stride; its strides[3] step the batch entry, the head
 * and the row (position). out is written whole. A length out of range (n <
 * 0 or n + t_new > s) is the backend's to report: the CPU's before it
 * writes anything; a GPU's through its kernel error slot. */
typedef struct tc__nn_attention_cache {
    tc_dtype dtype, len_dtype;
    const void *q, *k_new, *v_new, *len;
    void *k_cache, *v_cache, *out;
    int64_t q_strides[3], kn_strides[3], vn_strides[3], kc_strides[3], vc_strides[3],
        out_strides[3];
    int64_t b, h, hkv, t, t_new, s, e;
    double scale;
    bool causal, len_per_batch;
} tc__nn_attention_cache;

/* Attention's fused backward (FlashAttention-2's): from q, k, v, the
 * forward's out and grad_out (each [l or s, e] per entry, strided as
 * tc__nn_attention's operands, of `dtype`) and lse (dense float32
 * [batch, l], tc__nn_attention's), the gradients dq [l, e], dk [s, e] and
 * dv [s, e] of `dtype`, strided as the operands (two batch levels and a
 * row stride; the columns dense), written whole, never NULL. l, s and e are
 * at least 1; the scale is positive and finite. deterministic (from
 * tc_use_deterministic_algorithms) asks for sums in a fixed order; without
 * it a GPU may add dq's terms with atomic adds. */
typedef struct tc__nn_attention_bwd {
    tc_dtype dtype;
    const void *q, *k, *v, *out, *grad_out;
    const float *lse;
    void *dq, *dk, *dv;
    int64_t q_strides[3], k_strides[3], v_strides[3], out_strides[3], go_strides[3];
    int64_t dq_strides[3], dk_strides[3], dv_strides[3]; /* where the gradients go, likewise */
    int64_t batch, inner, l, s, e;
    double scale;
    bool causal, deterministic;
} tc__nn_attention_bwd;

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

/* ---- backward (nn_backward.h; tensor_nn_backward.c) ---- */

/* gelu's backward over n dense elements of dtype: grad_in = grad_out *
 * gelu'(x), exact or (tanh) the tanh approximation's. */
typedef struct tc__nn_gelu_bwd {
    tc_dtype dtype;
    bool tanh;
    const void *grad_out, *x;
    void *grad_in;
    int64_t n;
} tc__nn_gelu_bwd;

/* softmax's (or, with log, log_softmax's) backward over contiguous
 * [outer, n, inner] operands of dtype, the sums taken over n, from the
 * forward's output y. grad_in may be grad_out (in place): every backend
 * takes a row's sum before it writes any of the row. */
typedef struct tc__nn_softmax_bwd {
    bool log;
    tc_dtype dtype;
    const void *grad_out, *y;
    void *grad_in;
    int64_t outer, n, inner;
} tc__nn_softmax_bwd;

/* layer_norm over m dense rows of n: y as tc__nn_rows computes it, of
 * out_dtype (dtype, or float16 / bfloat16 where dtype is float32: rounded
 * from dtype's value, as a cast after the norm), and each row's mean and
 * rstd (m values of dtype's computation type: float32 for 16-bit dtypes).
 * weight and bias of dtype, n values, NULL when absent. With residual (NULL:
 * none) of res_dtype (dtype, or 16-bit where dtype is float32), the rows
 * normalized are x + residual, each element rounded to dtype, written to
 * sum and read back as stored (the values the unfused add gives). */
typedef struct tc__nn_ln {
    tc_dtype dtype, out_dtype, res_dtype;
    const void *x, *residual, *weight, *bias;
    void *y, *sum, *mean, *rstd;
    int64_t m, n;
    double eps;
} tc__nn_ln;

/* layer_norm's backward over m dense rows of n: x and weight (NULL when
 * absent) of dtype, grad_out of grad_dtype (dtype, or float16 / bfloat16
 * where dtype is float32), mean and rstd of its computation type; dx [m, n],
 * dweight and dbias [n] of dtype, each NULL when not wanted, written, or
 * with accumulate added to. dweight and dbias are summed over the rows in a
 * fixed order. dx_cast (NULL: none; only with dx, and a 16-bit cast_dtype
 * where dtype is float32) gets dx's final values, as stored, rounded to
 * cast_dtype. */
typedef struct tc__nn_ln_bwd {
    tc_dtype dtype, grad_dtype, cast_dtype;
    const void *grad_out, *x, *mean, *rstd, *weight;
    void *dx, *dweight, *dbias, *dx_cast;
    int64_t m, n;
    bool accumulate;
} tc__nn_ln_bwd;

/* cross_entropy's gradient over logits [n, c] of dtype (rows ld apart) with
 * int64 targets [n], checked as tc__nn_ce's: dlogits [n, c] of dtype (rows
 * d_ld apart; both lds at least c) is
 * (softmax(row) - onehot(target)) * g, g = grad_scale times grad's value
 * (grad of dtype: NULL for none, one value, or with grad_per_row one per
 * row), divided for TC_REDUCTION_MEAN by the number of rows not ignored;
 * ignored rows get 0, a target out of range NaN (reported as tc__nn_ce's).
 * loss, NULL when not wanted, is tc__nn_ce's out, of loss_dtype: dtype, or
 * float32 for 16-bit logits (tc_nn_cross_entropy_fused_autocast). */
typedef struct tc__nn_ce_bwd {
    tc_dtype dtype, loss_dtype;
    const void *logits;
    const int64_t *target;
    const void *grad;
    bool grad_per_row;
    double grad_scale;
    void *loss, *dlogits;
    int64_t n, c, ld, d_ld, ignore_index;
    tc_reduction reduction;
} tc__nn_ce_bwd;
/* embedding's backward (nn_backward.h): grad_weight [v, c] += the rows of
 * grad_output [n, c] at indices[i] (n int64 entries), but not those whose
 * index is padding_idx (-1: none). All dense, on the device, grad_weight
 * and grad_output of `dtype`; grad_weight holds what the sum is added to
 * (zeros for a new gradient). With scale_grad_by_freq each row's sum is
 * divided by the number of positions whose index is that row. Sums in float32 for 16-bit dtypes and float32
 * (double for float64), each row's added to it and rounded once. With
 * `deterministic` a GPU sums each row in the order of i; without, it may add
 * atomically (16-bit dtypes through a float32 scratch). An index outside
 * [0, v): the CPU fails with TC_ERROR_INVALID_ARGUMENT before writing; a GPU
 * skips it and reports it through kernel_errors.h. n > 0 and c > 0. */
typedef struct tc__nn_embedding_bwd {
    tc_dtype dtype;
    const void *grad_output;
    const int64_t *indices;
    void *grad_weight;
    int64_t n, c, v, padding_idx;
    bool scale_grad_by_freq, deterministic;
} tc__nn_embedding_bwd;

/* dropout's product, forward and backward: out[i] = x[i] * mask[i] * scale
 * for n > 0 dense elements, x and out of `dtype`, mask bool (bytes 0 or 1);
 * in float32 for 16-bit dtypes and float32, double for float64 (scale
 * rounded to that type first, as PyTorch's). out may be x. */
typedef struct tc__nn_dropout {
    tc_dtype dtype;
    const void *x;
    const uint8_t *mask;
    void *out;
    int64_t n;
    double scale;
} tc__nn_dropout;

/* What a linear's GEMM takes into its one kernel (gemm_fused): with ln, the
 * rows of op(A) [m, k] are first normalized over k as layer_norm does
 * (ln_weight and ln_bias [k] of the dtype, each NULL for none; eps), each
 * normalized value rounded to the dtype; then C = op(A) op(B) + bias ([n]
 * or NULL) + residual ([m, n] dense, or NULL), summed in float32 and
 * rounded once; aux (NULL: not written) gets that value, and C its tanh
 * gelu where gelu says. */
typedef struct tc__nn_fusion {
    const void *bias, *residual, *ln_weight, *ln_bias;
    void *aux;
    double eps;
    bool ln, gelu;
} tc__nn_fusion;

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
    /* The backward entries: see their structs above. */
    tc_status (*gelu_backward)(int device, const tc__nn_gelu_bwd *a);
    tc_status (*softmax_backward)(int device, const tc__nn_softmax_bwd *a);
    tc_status (*layer_norm)(int device, const tc__nn_ln *a);
    tc_status (*layer_norm_backward)(int device, const tc__nn_ln_bwd *a);
    tc_status (*cross_entropy_backward)(int device, const tc__nn_ce_bwd *a);
    /* See tc__nn_embedding_bwd. */
    tc_status (*embedding_backward)(int device, const tc__nn_embedding_bwd *a);
    /* See tc__nn_dropout. */
    tc_status (*dropout)(int device, const tc__nn_dropout *a);
    /* linear's weight gradient with its bias gradient in one step where the
     * backend can (NULL where it never can): C = op(A) op(B) + beta C for g
     * with batch 1, alpha 1, beta 0 or 1 and c_dtype == dtype, and
     * bias_grad [m] (dense, of dtype) = the sums of op(A)'s rows (over k),
     * written, not added. *fused false (with TC_OK) means nothing was
     * queued and C and bias_grad are untouched: the caller runs gemm and
     * sums the bias gradient itself. */
    tc_status (*gemm_bgrad)(int device, const tc__nn_gemm *g, void *bias_grad, bool *fused);
    /* See tc__nn_attention_bwd; NULL where there is none. *done false
     * (with TC_OK) means nothing was queued: the caller runs the math
     * path. */
    tc_status (*attention_backward)(int device, const tc__nn_attention_bwd *a, bool *done);
    /* linear with its bias and a tanh gelu in one step where the backend
     * can (NULL where it never can): aux = op(A) op(B) + bias and C =
     * gelu_tanh(aux), both [m, n] of dtype with leading dimension n, for g
     * as gemm_bias's. *fused false (with TC_OK): nothing queued. */
    tc_status (*gemm_gelu)(int device, const tc__nn_gemm *g, const void *bias, void *aux,
                           bool *fused);
    /* See tc__nn_attention_cache; every backend has it. */
    tc_status (*attention_cache)(int device, const tc__nn_attention_cache *a);
    /* linear with what f asks for in one kernel where the backend can (NULL
     * where it never can): g as gemm_bias's, with C's leading dimension n.
     * *fused false (with TC_OK): nothing queued, the caller runs the ops
     * apart. */
    tc_status (*gemm_fused)(int device, const tc__nn_gemm *g, const tc__nn_fusion *f, bool *fused);
} tc__nn_backend;

extern const tc__nn_backend tc__cpu_nn_backend;

/* The nn front ends' shared pieces (tensor_nn.c). The nn backend of a
 * device type; NULL with TC_ERROR_NO_DEVICE set. */
const tc__nn_backend *tc__nn_of(tc_device device);
/* A live tensor of a floating dtype (`fn` names the call, `what` t). */
tc_status tc__nn_check_float(const char *fn, const tc_tensor *t, const char *what);
/* approximate is TC_GELU_APPROXIMATE_NONE or _TANH (tensor_nn_backward.c). */
tc_status tc__nn_check_gelu_approximate(const char *fn, tc_gelu_approximate approximate);
/* cross_entropy's CPU targets (n int64 entries) read and checked against
 * [0, c) where they are not `ignore` (tensor_nn_loss.c); GPU targets are
 * checked by the kernels, so that the call does not wait for the device
 * (kernel_errors.h). TC_ERROR_INVALID_ARGUMENT names the first bad one. */
tc_status tc__nn_check_targets(const char *fn, const tc_tensor *target, int64_t n, int64_t c,
                               int64_t ignore);
/* Splits t's sizes around dimension `dim` (negative counts from the end; a
 * 0-d tensor has one): the product of those before it, its size, the
 * product of those after. TC_ERROR_INVALID_ARGUMENT for a dim out of range. */
tc_status tc__nn_split_dim(const char *fn, const tc_tensor *t, int dim, int64_t *outer, int64_t *n,
                           int64_t *inner);
/* A live tensor on x's device with x's dtype (xname names x in the message). */
tc_status tc__nn_check_like(const char *fn, const tc_tensor *x, const char *xname,
                            const tc_tensor *t, const char *what);
/* The CPU's backward entries of that table (cpu/cpu_nn_backward.c). */
tc_status tc__cpu_nn_gelu_backward(int device, const tc__nn_gelu_bwd *a);
tc_status tc__cpu_nn_softmax_backward(int device, const tc__nn_softmax_bwd *a);
tc_status tc__cpu_nn_layer_norm(int device, const tc__nn_ln *a);
tc_status tc__cpu_nn_layer_norm_backward(int device, const tc__nn_ln_bwd *a);
tc_status tc__cpu_nn_cross_entropy_backward(int device, const tc__nn_ce_bwd *a);
/* The CPU's embedding_backward and dropout (cpu/cpu_nn_layers.c). */
tc_status tc__cpu_nn_embedding_backward(int device, const tc__nn_embedding_bwd *a);
tc_status tc__cpu_nn_dropout(int device, const tc__nn_dropout *a);
tc_status tc__cpu_nn_attention_cache(int device, const tc__nn_attention_cache *a);

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
/* The same switch for attention's backward (tensor_attention_backward.c):
 * the count is the calling thread's backward calls that the backend's
 * fused backward ran. */
bool tc__nn_attention_fuse_on(void);
uint64_t tc__nn_attention_backward_fused_count(void);
/* Test hooks for tc_nn_linear_backward(_into) (tensor_nn_layers.c): fused
 * false makes it skip gemm_bgrad (a GEMM and a column sum on every device);
 * the count is the calling thread's backward calls whose weight and bias
 * gradients gemm_bgrad computed in one step. */
void tc__nn_linear_backward_set_fused(bool fused);
uint64_t tc__nn_linear_backward_fused_count(void);
/* Test hooks of tc_nn_linear_gelu and tc_nn_linear_backward_gelu
 * (tensor_linear_gelu.c): false makes them run the ops apart on every
 * device; the count is the calling thread's calls that ran the backend's
 * gelu epilogue. */
void tc__nn_linear_gelu_set_fused(bool fused);
uint64_t tc__nn_linear_gelu_fused_count(void);
/* Test hooks of tc_nn_linear_add and tc_nn_layer_norm_linear(_gelu)
 * (tensor_nn_fused.c): false makes them run the ops apart on every device;
 * the count is the calling thread's calls that ran the backend's
 * gemm_fused. */
void tc__nn_fused_linear_set_fused(bool on);
uint64_t tc__nn_fused_linear_count(void);

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
/* An attention operand's batch dims as tc__nn_attention's two levels and
 * row stride (st); false when they do not collapse so, or the columns are
 * not unit-stride. */
bool tc__nn_attention_levels(const tc_tensor *t, int64_t st[3]);
/* The forward for checked q, k, v with L, S, B, Ev >= 1: the fused kernel
 * where the backend takes the operands (and the switch is on), else the
 * math path (or with fused_only nothing: *out stays NULL), into a new *out
 * [..., L, Ev]. lse, NULL when not wanted, is a dense float32 tensor of
 * B * L elements that the fused kernel fills; *lse_done says whether it
 * did (false: lse untouched). */
tc_status tc__nn_sdpa_forward(const tc_tensor *q, const tc_tensor *k, const tc_tensor *v,
                              bool causal, double scale, tc_tensor *lse, bool fused_only,
                              bool *lse_done, tc_tensor **out);

#ifdef __cplusplus
}
#endif

#endif
