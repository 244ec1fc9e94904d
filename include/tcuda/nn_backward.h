/* tcuda: explicit backward functions of nn.h's and tensor.h's operations,
 * with PyTorch's autograd formulas (ATen's gelu_backward,
 * _softmax_backward_data, _log_softmax_backward_data,
 * native_layer_norm_backward, cross_entropy's gradient,
 * embedding_dense_backward, linear's, native_dropout_backward and
 * scaled_dot_product_attention's).
 *
 * There is no autograd: a training step calls the forward operations, keeps
 * what their backward needs, and calls these in reverse order (as llm.c
 * does). tc_nn_<op>_backward takes the gradient of the operation's output
 * first (grad_output, of the output's shape and dtype), then what the forward
 * saved (its input or output, as ATen's op takes it), then the options, and
 * returns new contiguous gradients through out-parameters, written only on
 * success (all of them or none); tc_nn_cross_entropy_fused's and
 * _backward's dlogits keep the rows of logits padded as tc_nn_linear pads
 * its result (nn.h). A gradient accumulated into (the `_` and
 * `_into` forms) is the caller's tensor, changed only when the call
 * succeeds.
 *
 * Common rules, as nn.h's: tensors are floating (float16, bfloat16,
 * float32, float64; TC_ERROR_DTYPE otherwise) of one dtype and one device
 * (TC_ERROR_DEVICE_MISMATCH otherwise); NULL is TC_ERROR_INVALID_ARGUMENT,
 * a released or foreign tensor TC_ERROR_INVALID_HANDLE; shapes that do not
 * fit give TC_ERROR_SHAPE, a dimension out of range
 * TC_ERROR_INVALID_ARGUMENT. 16-bit inputs are computed in float32 (float64
 * inputs in float64) and rounded once per result; on a GPU the work is
 * queued on the current stream of the tensors' device. Sums over many rows
 * (layer_norm's weight and bias gradients, cross_entropy's loss, linear's
 * bias gradient, embedding's rows in deterministic mode) are taken in a
 * fixed order: the same inputs give the same bits on every run. */
#ifndef TCUDA_NN_BACKWARD_H
#define TCUDA_NN_BACKWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "nn.h"
#include "status.h"
#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* ---- element-wise and row-wise ------------------------------------------------ */

/* d gelu(x) / dx times grad_output (PyTorch's GeluBackward): for NONE
 * grad_output * (Phi(x) + x * phi(x)), for TANH the derivative of
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). grad_output and x have
 * the same shape; *grad_in has it too. Errors: the common ones,
 * TC_ERROR_INVALID_ARGUMENT for an unknown `approximate`. */
TCUDA_API tc_status tc_nn_gelu_backward(const tc_tensor *grad_output, const tc_tensor *x,
                                        tc_gelu_approximate approximate, tc_tensor **grad_in);

/* softmax's backward from its output y = softmax(x, dim):
 * grad_in = y * (grad_output - sum(grad_output * y, dim)); log_softmax's from its
 * output y = log_softmax(x, dim): grad_in = grad_output - exp(y) *
 * sum(grad_output, dim) (PyTorch's _softmax_backward_data and
 * _log_softmax_backward_data). grad_output and y have the same shape; dim
 * counts from the end when negative. Errors: the common ones. */
TCUDA_API tc_status tc_nn_softmax_backward(const tc_tensor *grad_output, const tc_tensor *y,
                                           int dim, tc_tensor **grad_in);
TCUDA_API tc_status tc_nn_log_softmax_backward(const tc_tensor *grad_output, const tc_tensor *y,
                                               int dim, tc_tensor **grad_in);

/* layer_norm (as tc_nn_layer_norm) that also returns what its backward
 * needs, as PyTorch's native_layer_norm: each row's mean and rstd =
 * 1 / sqrt(biased variance + eps), of float32 for 16-bit x (x's dtype
 * otherwise), shaped as PyTorch's: x's leading dims followed by nshape
 * ones (a [B, T, C] x normalized over C gives [B, T, 1]). mean and rstd may
 * be NULL when not wanted; out may not. Errors: as tc_nn_layer_norm. */
TCUDA_API tc_status tc_nn_native_layer_norm(const tc_tensor *x, int nshape,
                                            const int64_t *normalized_shape,
                                            const tc_tensor *weight, const tc_tensor *bias,
                                            double eps, tc_tensor **out, tc_tensor **mean,
                                            tc_tensor **rstd);

/* A transformer block's residual add and the layer_norm after it in one
 * pass: *sum = x + residual (x's shape and dtype; residual of x's dtype, or
 * float16 / bfloat16 with float32 x), then tc_nn_native_layer_norm of *sum
 * (the stored values) with the result rounded to out_dtype: x's dtype, or
 * float16 / bfloat16 with float32 x, the same bits as the norm in float32
 * followed by a cast (autocast's layer_norm and the next linear's input,
 * with no float32 copy between). residual and sum both NULL: the norm of x
 * alone, with that output dtype. *sum, *out, *mean and *rstd are new (mean
 * and rstd may be NULL when not wanted; out may not). Errors: as
 * tc_nn_native_layer_norm; TC_ERROR_DTYPE for a residual or out_dtype
 * outside those pairs; TC_ERROR_SHAPE for a residual not of x's shape;
 * TC_ERROR_INVALID_ARGUMENT for one of residual and sum NULL without the
 * other. */
TCUDA_API tc_status tc_nn_add_layer_norm(const tc_tensor *x, const tc_tensor *residual, int nshape,
                                         const int64_t *normalized_shape, const tc_tensor *weight,
                                         const tc_tensor *bias, double eps, tc_dtype out_dtype,
                                         tc_tensor **sum, tc_tensor **out, tc_tensor **mean,
                                         tc_tensor **rstd);

/* layer_norm's backward (PyTorch's native_layer_norm_backward) with
 * xhat = (x - mean) * rstd and g = grad_output * weight (grad_output without a
 * weight): dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row,
 * dweight = sum over the rows of grad_output * xhat, dbias = sum of grad_output
 * (both of the normalized shape and x's dtype, summed in float32, or
 * float64 for float64, in a fixed order). mean and rstd are
 * tc_nn_native_layer_norm's (required: of x's leading size, float32 for
 * 16-bit x, x's dtype otherwise; with or without the trailing ones); weight
 * is optional. dx, dweight and dbias are each NULL when not wanted
 * (PyTorch's output_mask): the bias itself is not needed. Errors: the
 * common ones; TC_ERROR_DTYPE or TC_ERROR_SHAPE for a mean or rstd not as
 * above; TC_ERROR_INVALID_ARGUMENT when no output is asked for. */
TCUDA_API tc_status tc_nn_layer_norm_backward(const tc_tensor *grad_output, const tc_tensor *x,
                                              int nshape, const int64_t *normalized_shape,
                                              const tc_tensor *mean, const tc_tensor *rstd,
                                              const tc_tensor *weight, tc_tensor **dx,
                                              tc_tensor **dweight, tc_tensor **dbias);

/* As tc_nn_layer_norm_backward, into the caller's tensors (llm.c's
 * layernorm_backward): each of dx (x's shape), dweight and dbias
 * (normalized_shape) that is not NULL is computed, of x's dtype and device;
 * with accumulate the gradient is added to what it holds (a residual
 * stream's gradient, gradient accumulation over micro-batches), else
 * overwritten. grad_output may also be float16 or bfloat16 where x is
 * float32 (autocast's float32 layer norm, its gradient coming from a 16-bit
 * layer): its values are read as float32. dx_cast (NULL: none; with dx
 * only, of x's shape and device, float16 or bfloat16 with float32 x)
 * receives dx's final values rounded to its dtype in the same pass: the
 * input of the 16-bit layer before, without a cast of its own. Errors: as
 * tc_nn_layer_norm_backward; TC_ERROR_SHAPE or TC_ERROR_DTYPE for an output
 * not as above; TC_ERROR_INVALID_ARGUMENT when dx, dweight and dbias are
 * all NULL, dx_cast comes without dx, or an output shares memory with an
 * input or another output. A failure after the first output was written
 * (memory for a non-contiguous output's intermediate) leaves the earlier
 * ones written. */
TCUDA_API tc_status tc_nn_layer_norm_backward_into(const tc_tensor *grad_output, const tc_tensor *x,
                                                   int nshape, const int64_t *normalized_shape,
                                                   const tc_tensor *mean, const tc_tensor *rstd,
                                                   const tc_tensor *weight, bool accumulate,
                                                   tc_tensor *dx, tc_tensor *dweight,
                                                   tc_tensor *dbias, tc_tensor *dx_cast);

/* cross_entropy forward and backward in one pass over the logits (llm.c's
 * fused classifier): *loss as tc_nn_cross_entropy returns it (of logits'
 * dtype: [N] for NONE, 0-d for MEAN and SUM; NULL when not wanted) and
 * *dlogits, logits' shape and dtype (its rows padded where logits' are
 * padded as tc_nn_linear's result, which is then read as it lies, without
 * copies), the gradient of grad_scale * loss (for NONE: of grad_scale *
 * the sum of the losses):
 * (softmax(row) - onehot(target)) * grad_scale, divided for MEAN by the
 * number of rows not ignored. A row whose target is ignore_index gets a
 * zero gradient; with every row ignored, MEAN's loss is NaN (0 / 0) and
 * dlogits is all zeros, as PyTorch's formula gives (no row takes the
 * 1 / 0). A target out of range is handled as tc_nn_cross_entropy does (the
 * CPU: TC_ERROR_INVALID_ARGUMENT from this call; a GPU: its row's loss and
 * gradient are NaN and the next call that waits for the device reports
 * it). On a GPU, 16-bit logits take exp from the hardware's approximate
 * exp2 (a relative error near 1e-6, well below their rounding). Errors: as
 * tc_nn_cross_entropy; a grad_scale that is not finite is
 * TC_ERROR_INVALID_ARGUMENT. */
TCUDA_API tc_status tc_nn_cross_entropy_fused(const tc_tensor *logits, const tc_tensor *target,
                                              int64_t ignore_index, tc_reduction reduction,
                                              double grad_scale, tc_tensor **loss,
                                              tc_tensor **dlogits);

/* tc_nn_cross_entropy_fused for float16 or bfloat16 logits as autocast
 * runs cross_entropy (in float32): the values of logits cast to float32
 * through tc_nn_cross_entropy_fused, a float32 *loss, and *dlogits of
 * logits' dtype, each element the float32 gradient rounded once, without
 * the two float32 copies of the logits that the casts would make. Errors:
 * as tc_nn_cross_entropy_fused; TC_ERROR_DTYPE for logits of another dtype. */
TCUDA_API tc_status tc_nn_cross_entropy_fused_autocast(const tc_tensor *logits,
                                                       const tc_tensor *target,
                                                       int64_t ignore_index, tc_reduction reduction,
                                                       double grad_scale, tc_tensor **loss,
                                                       tc_tensor **dlogits);

/* cross_entropy's backward alone: dlogits (logits' shape and dtype) for the
 * gradient grad_loss of tc_nn_cross_entropy's result (logits' dtype, its
 * shape: 0-d for MEAN and SUM, [N] for NONE), the formula of
 * tc_nn_cross_entropy_fused with grad_scale read from grad_loss (row i's
 * from grad_loss[i] for NONE). Errors: as tc_nn_cross_entropy_fused. */
TCUDA_API tc_status tc_nn_cross_entropy_backward(const tc_tensor *grad_loss,
                                                 const tc_tensor *logits, const tc_tensor *target,
                                                 int64_t ignore_index, tc_reduction reduction,
                                                 tc_tensor **dlogits);

/* ---- layers ---------------------------------------------------------------- */

/* The gradient of tc_nn_embedding's weight (aten's embedding_dense_backward):
 * a new [num_weights, C] tensor of grad_output's dtype, zero but for the sum
 * of grad_output's rows [..., C] over the positions whose index picked each
 * weight row. indices (int64 or int32, any shape) must be grad_output's
 * shape without its last dim. padding_idx is -1 (none) or a row in
 * [0, num_weights) that gets no gradient (F.embedding's padding_idx, made
 * non-negative). With scale_grad_by_freq each row's sum is divided by the
 * number of positions that picked it (F.embedding's scale_grad_by_freq).
 * On a GPU, with tc_use_deterministic_algorithms (backends.h) on, the
 * indices are sorted and each row's contributions summed in the order of
 * their positions (bit-identical run to run); off (the default), float
 * atomic adds (into a float32 scratch for 16-bit dtypes). An index outside
 * [0, num_weights): TC_ERROR_INVALID_ARGUMENT from the CPU call; on a GPU
 * the position is skipped and the error comes from the next call that waits
 * for the device, as tc_nn_cross_entropy's target. Errors: the common ones;
 * TC_ERROR_INVALID_ARGUMENT for num_weights < 0, a bad padding_idx, a NULL
 * grad_weight. */
TCUDA_API tc_status tc_nn_embedding_backward(const tc_tensor *grad_output, const tc_tensor *indices,
                                             int64_t num_weights, int64_t padding_idx,
                                             bool scale_grad_by_freq, tc_tensor **grad_weight);
/* As tc_nn_embedding_backward, added into grad_weight [V, C] (weight tying:
 * the classifier's gradient and the embedding's in one tensor), V its
 * num_weights. grad_weight must be dense (contiguous) and of grad_output's
 * dtype and device; for 16-bit dtypes each touched row is rounded once, after
 * its whole sum is added in float32. Errors: as tc_nn_embedding_backward;
 * TC_ERROR_INVALID_ARGUMENT for a grad_weight that is not contiguous. */
TCUDA_API tc_status tc_nn_embedding_backward_(tc_tensor *grad_weight, const tc_tensor *grad_output,
                                              const tc_tensor *indices, int64_t padding_idx,
                                              bool scale_grad_by_freq);

/* Which gradients tc_nn_linear_backward computes (bits, passed as unsigned). */
typedef enum tc_nn_linear_grad {
    TC_NN_LINEAR_GRAD_X = 1,
    TC_NN_LINEAR_GRAD_WEIGHT = 2,
    TC_NN_LINEAR_GRAD_BIAS = 4
} tc_nn_linear_grad;

/* The gradients of tc_nn_linear for grad_output [..., out], x [..., in] (the
 * same leading dims) and weight [out, in]: grad_x = grad_output @ weight
 * [..., in], grad_weight = grad_output^T @ x [out, in] over all leading
 * positions, grad_bias = grad_output summed over them [out]. `want` is a
 * set of tc_nn_linear_grad bits; only those outputs are written (the
 * others may be NULL). On a GPU the GEMMs are cuBLAS's (TF32 as backends.h
 * allows, as the forward); grad_weight and grad_bias together are one
 * cuBLASLt matmul with the bias-gradient epilogue (BGRADB) where cuBLASLt
 * takes the shape and dtype, else a GEMM and a deterministic column sum.
 * grad_output whose rows lie at any stride (as tc_nn_linear's padded
 * result, or the gradient of tc_nn_cross_entropy_fused) is read as it is.
 * Errors: the common ones; TC_ERROR_INVALID_ARGUMENT for want 0 or with
 * unknown bits, or a NULL output that is wanted. */
TCUDA_API tc_status tc_nn_linear_backward(const tc_tensor *grad_output, const tc_tensor *x,
                                          const tc_tensor *weight, unsigned want,
                                          tc_tensor **grad_x, tc_tensor **grad_weight,
                                          tc_tensor **grad_bias);
/* As tc_nn_linear_backward, into the caller's tensors: each of grad_x
 * [..., in], grad_weight [out, in] and grad_bias [out] (grad_output's dtype
 * and device) that is not NULL is computed; with accumulate the gradient is
 * added to what it holds (gradient accumulation over micro-batches: one
 * GEMM with beta = 1 where the tensor is contiguous), else overwritten.
 * Errors: as tc_nn_linear_backward; TC_ERROR_INVALID_ARGUMENT when all
 * three are NULL, one has several elements in one place, or one shares
 * memory with an input or another output. Unlike the other calls here, a
 * failure after the first output was written (host or device memory for a
 * temporary running out, a cuBLAS error) can leave grad_x updated and the
 * others not, so with accumulate the same call is not to be retried. */
TCUDA_API tc_status tc_nn_linear_backward_into(const tc_tensor *grad_output, const tc_tensor *x,
                                               const tc_tensor *weight, bool accumulate,
                                               tc_tensor *grad_x, tc_tensor *grad_weight,
                                               tc_tensor *grad_bias);

/* gelu(linear(x, weight, bias)) with the linear's output kept (the input
 * of gelu's backward): *pre = x @ weight^T + bias and *out = gelu(*pre),
 * both [..., out] of x's dtype; pre may be NULL when not wanted. On a GPU
 * with a bias and the tanh approximation, where cuBLASLt takes the shape
 * (out a multiple of 8; float16 or bfloat16): one matmul whose
 * epilogue adds the bias, writes pre and applies gelu to the float32
 * result before rounding (GELU_AUX_BIAS; within the dtype's rounding of
 * the two ops apart). Otherwise tc_nn_linear, then tc_tensor_gelu. Errors:
 * those of tc_nn_linear and tc_tensor_gelu; TC_ERROR_INVALID_ARGUMENT for
 * an unknown approximate or out NULL. */
TCUDA_API tc_status tc_nn_linear_gelu(const tc_tensor *x, const tc_tensor *weight,
                                      const tc_tensor *bias, tc_gelu_approximate approximate,
                                      tc_tensor **out, tc_tensor **pre);

/* The backward of y = linear(gelu(pre), weight, ...) down to pre, for
 * grad_output [..., out] (y's gradient), weight [out, in] and pre [..., in]
 * (the same leading dims, one dtype): *grad_pre = gelu_backward(grad_output
 * @ weight, pre) [..., in] and, where grad_bias is not NULL, *grad_bias
 * [in] = *grad_pre summed over the leading dims (the bias gradient of the
 * linear that made pre): tc_nn_linear_backward's grad_x, then
 * tc_nn_gelu_backward and a column sum. The bias gradient also comes out of
 * tc_nn_linear_backward of the linear that made pre, in the GEMM of its
 * weight gradient on a GPU: pass grad_bias NULL to take it there. Errors:
 * those of the ops; TC_ERROR_INVALID_ARGUMENT for an unknown approximate
 * or grad_pre NULL. */
TCUDA_API tc_status tc_nn_linear_backward_gelu(const tc_tensor *grad_output,
                                               const tc_tensor *weight, const tc_tensor *pre,
                                               tc_gelu_approximate approximate,
                                               tc_tensor **grad_pre, tc_tensor **grad_bias);

/* The gradient of tc_nn_dropout (aten's native_dropout_backward): a new
 * grad_in = grad_output * mask * scale, scale = 1 / (1 - p) (0 for p == 1),
 * computed in float32 for 16-bit dtypes. mask is the bool mask that
 * tc_nn_dropout returned (grad_output's shape and device). Errors: the
 * common ones; TC_ERROR_DTYPE for a mask that is not bool;
 * TC_ERROR_INVALID_ARGUMENT for p outside [0, 1]. */
TCUDA_API tc_status tc_nn_dropout_backward(const tc_tensor *grad_output, const tc_tensor *mask,
                                           double p, tc_tensor **grad_in);

/* ---- attention --------------------------------------------------------------- */

/* The gradients of tc_nn_scaled_dot_product_attention(q, k, v, is_causal,
 * scale) given grad_output [..., L, Ev] (its output's gradient): q [..., L, E],
 * k [..., S, E], v [..., S, Ev] under the forward's shape rules, grad_output
 * with q's leading sizes; scale NULL means 1/sqrt(E). P = softmax(q k^T *
 * scale) (with is_causal, query i sees keys j <= i, top-left aligned as the
 * forward: every row sees key 0, so no row is fully masked, also when L > S)
 * is recomputed here from q and k, so no state of the forward is kept or
 * needed. Then dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dP * P)),
 * dQ = dS K * scale, dK = dS^T Q * scale; rowsum(dP * P) is computed as
 * rowsum(dO * (P V)), the same sum, to hold only two [L, S] matrices per
 * batch entry (P and dP). On a GPU, for float32, float16 and bfloat16
 * with E == Ev <= 128 (16-bit from compute capability 8.0), this runs
 * tc_nn_scaled_dot_product_attention_lse's fused forward again and then
 * tc_nn_scaled_dot_product_attention_backward_lse's fused kernels. Every
 * other case runs the math path: a GEMM for the scores with the forward's
 * fused masked softmax, then GEMMs and element-wise ops, all in float32 for
 * 16-bit inputs (the GEMMs follow backends.h). With L, S or a leading size
 * 0 the gradients are zeros. Errors: the header's common ones. */
TCUDA_API tc_status tc_nn_scaled_dot_product_attention_backward(
    const tc_tensor *grad_output, const tc_tensor *q, const tc_tensor *k, const tc_tensor *v,
    bool is_causal, const double *scale, tc_tensor **grad_q, tc_tensor **grad_k,
    tc_tensor **grad_v);

/* The training forward of attention: *out as tc_nn_scaled_dot_product_attention
 * gives it, and *lse [..., L] (q's sizes without E), each query row's
 * log-sum-exp of its scaled, masked scores (natural log; PyTorch's flash
 * attention's logsumexp), float32 for 16-bit and float32 inputs, float64 for
 * float64; -inf for rows with no key (S == 0). Where the fused forward runs
 * (a GPU, float32/float16/bfloat16, E == Ev <= 128) the kernel writes lse
 * in the same pass; elsewhere it is a logsumexp of the math path's scores.
 * Both results are new; out and lse must not be NULL. Errors: as
 * tc_nn_scaled_dot_product_attention. */
TCUDA_API tc_status tc_nn_scaled_dot_product_attention_lse(const tc_tensor *q, const tc_tensor *k,
                                                           const tc_tensor *v, bool is_causal,
                                                           const double *scale, tc_tensor **out,
                                                           tc_tensor **lse);

/* The gradients of attention from what tc_nn_scaled_dot_product_attention_lse
 * kept: its out, here `output` (grad_output's sizes and dtype), and lse
 * ([..., L], float32 for 16-bit and float32 q, float64 for float64), with
 * the same is_causal and scale. Results as tc_nn_scaled_dot_product_attention_backward's (new,
 * contiguous, q's dtype; NULL slots not computed). On a GPU, for float32,
 * float16 and bfloat16 with E == Ev <= 128 (16-bit from compute capability
 * 8.0) and a contiguous lse, FlashAttention-2's backward: D = rowsum(dO * O),
 * then one kernel over blocks of keys for dK and dV and one over blocks of
 * queries for dQ, recomputing P = exp(scale * q k^T - lse) tile by tile in
 * float32, no [L, S] matrix in memory and no atomics (the same bits on
 * every run). But for 16-bit E from 33 to 64 on compute capability 9.0,
 * and float32 E up to 64 (a multiple of 4) from 8.0, all with 16-byte
 * aligned rows, the key blocks' kernel also adds dQ's terms into float32
 * sums with atomic adds (batch * L * 64 floats of scratch), as PyTorch's
 * flash and memory-efficient backwards do: dQ's bits may then differ from
 * run to run, unless tc_use_deterministic_algorithms (backends.h) is on.
 * Elsewhere the math path of
 * tc_nn_scaled_dot_product_attention_backward runs and output and lse are
 * only checked. Errors: the header's common ones; TC_ERROR_SHAPE for an
 * output not of grad_output's sizes or an lse not of q's sizes without E,
 * TC_ERROR_DTYPE for an output not of q's dtype or an lse not of the dtype
 * above. */
TCUDA_API tc_status tc_nn_scaled_dot_product_attention_backward_lse(
    const tc_tensor *grad_output, const tc_tensor *q, const tc_tensor *k, const tc_tensor *v,
    const tc_tensor *output, const tc_tensor *lse, bool is_causal, const double *scale,
    tc_tensor **grad_q, tc_tensor **grad_k, tc_tensor **grad_v);
/* As tc_nn_scaled_dot_product_attention_backward_lse, into the caller's
 * tensors: each of grad_q, grad_k and grad_v that is not NULL (of q's, k's
 * and v's shape, dtype and device, any strides) is overwritten with its
 * gradient. Where the fused kernels run they write straight into views of
 * one buffer (the heads of a [B, L, 3 * H * E] qkv gradient, as the
 * projection's backward reads it) when each has unit-stride rows and its
 * batch dims collapse into two strides, else into new tensors then copied;
 * every other path computes new tensors and copies them. Errors: as the
 * _lse call; TC_ERROR_SHAPE or TC_ERROR_DTYPE for a destination not like its
 * operand; TC_ERROR_INVALID_ARGUMENT when all three are NULL, one shares
 * memory with an input, or two are (or overlap within) the same dense
 * memory. Strided destinations in one buffer must not share elements: that
 * is not checked. */
TCUDA_API tc_status tc_nn_scaled_dot_product_attention_backward_lse_into(
    const tc_tensor *grad_output, const tc_tensor *q, const tc_tensor *k, const tc_tensor *v,
    const tc_tensor *output, const tc_tensor *lse, bool is_causal, const double *scale,
    tc_tensor *grad_q, tc_tensor *grad_k, tc_tensor *grad_v);

TCUDA_EXTERN_C_END

#endif
