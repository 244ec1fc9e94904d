/* tcuda: the neural-network operations a transformer needs, with PyTorch's
 * semantics (torch.nn.functional.X is tc_nn_X; torch.bmm and torch.baddbmm
 * are with tc_tensor_matmul in tensor.h).
 *
 * Every function takes floating tensors (float16, bfloat16, float32,
 * float64; TC_ERROR_DTYPE otherwise) of one dtype and one device
 * (TC_ERROR_DEVICE_MISMATCH otherwise), checks its tensor arguments as
 * tensor.h says (NULL: TC_ERROR_INVALID_ARGUMENT; released or foreign:
 * TC_ERROR_INVALID_HANDLE), and returns a new contiguous tensor in *out,
 * written only on success. 16-bit inputs are computed in float32 and rounded
 * once at the end; on a GPU the work is queued on the current stream. Shapes
 * that do not fit give TC_ERROR_SHAPE, a dimension out of range
 * TC_ERROR_INVALID_ARGUMENT. Optional tensors are NULL when absent. */
#ifndef TCUDA_NN_H
#define TCUDA_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"
#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* ---- softmax --------------------------------------------------------------- */

/* softmax / log_softmax of x along `dim` (negative counts from the end), in
 * one numerically stable pass (the maximum is subtracted first): a row of
 * large values stays finite. Errors: the common ones above. */
TCUDA_API tc_status tc_nn_softmax(const tc_tensor *x, int dim, tc_tensor **out);
TCUDA_API tc_status tc_nn_log_softmax(const tc_tensor *x, int dim, tc_tensor **out);

/* ---- normalization --------------------------------------------------------- */

/* (x - mean) / sqrt(var + eps) * weight + bias over the last `nshape` dims of
 * x, which must equal normalized_shape (nshape >= 1); weight and bias, each
 * optional, have that shape. var is the biased variance. Errors: the common
 * ones, TC_ERROR_INVALID_ARGUMENT for a bad normalized_shape. */
TCUDA_API tc_status tc_nn_layer_norm(const tc_tensor *x, int nshape,
                                     const int64_t *normalized_shape, const tc_tensor *weight,
                                     const tc_tensor *bias, double eps, tc_tensor **out);

/* x / sqrt(mean(x^2) + eps) * weight over the last `nshape` dims, as
 * layer_norm. eps NULL is PyTorch's eps=None: the epsilon of the computation
 * type (float32's for 16-bit and float32, float64's for float64), as
 * PyTorch's rms_norm takes it. Errors: as layer_norm. */
TCUDA_API tc_status tc_nn_rms_norm(const tc_tensor *x, int nshape, const int64_t *normalized_shape,
                                   const tc_tensor *weight, const double *eps, tc_tensor **out);

/* ---- losses ------------------------------------------------------------------ */

/* How a loss reduces its rows (torch's reduction="none" | "mean" | "sum"). */
typedef enum tc_reduction {
    TC_REDUCTION_NONE = 0,
    TC_REDUCTION_MEAN,
    TC_REDUCTION_SUM
} tc_reduction;

/* Cross entropy of logits [N, C] (or [C]) with int64 class indices `target`
 * [N] (or 0-d): per row logsumexp(x) - x[target]; rows whose target is
 * ignore_index count 0 and are left out of the mean (all of them ignored:
 * NaN, as PyTorch). Result: [N] for NONE, 0-d for MEAN and SUM, of
 * logits' dtype; rows computed in float32 (float64 for float64 logits),
 * summed in float64 (on a GPU: one kernel for the rows and their blocks'
 * sums, one for the total). A target
 * outside [0, C) other than ignore_index is TC_ERROR_INVALID_ARGUMENT: on
 * the CPU from this call; on a GPU, which this call does not wait for (it
 * can be captured in a graph), the row's loss is NaN and the error comes
 * from the next call that waits for the device (tc_synchronize, a stream or
 * event synchronize, a copy to the host, whose output is then not to be
 * used, a stream or event query that finds the work done; with
 * CUDA_LAUNCH_BLOCKING=1 this call), as PyTorch's device-side
 * assert. A target that is not int64 is TC_ERROR_DTYPE; a bad reduction
 * TC_ERROR_INVALID_ARGUMENT. */
TCUDA_API tc_status tc_nn_cross_entropy(const tc_tensor *logits, const tc_tensor *target,
                                        int64_t ignore_index, tc_reduction reduction,
                                        tc_tensor **out);

/* ---- layers ------------------------------------------------------------------ */

/* x @ weight^T + bias: x [..., in] (at least 1-d), weight [out, in], bias
 * [out] optional; the result is [..., out]. On a GPU, with a bias, one
 * cuBLASLt matmul that adds the bias in its epilogue (as PyTorch's addmm),
 * where libcublasLt is there and takes the shape, dtype and layout; else,
 * and without a bias, one cuBLAS GEMM (the bias copied into the output
 * first and added with beta = 1). Both compute in float32 (TF32 only
 * where backends.h allows it) or float64. A large 16-bit result whose rows
 * would not be whole 16-byte vectors (out % 8 != 0, at least 2^22 elements;
 * GPT-2's 50257 logits) comes with its rows padded to them: its sizes as
 * said, its row stride out rounded up to a multiple of 8 (not contiguous;
 * tc_tensor_contiguous gives a dense copy). cuBLAS has only slow kernels
 * for unaligned rows, and torch.compile pads such strides too. Errors: the
 * common ones; cuBLAS missing is TC_ERROR_NOT_SUPPORTED. */
TCUDA_API tc_status tc_nn_linear(const tc_tensor *x, const tc_tensor *weight, const tc_tensor *bias,
                                 tc_tensor **out);

/* residual + linear(x, weight, bias), a transformer block's projection
 * and its residual add: residual broadcasts to the result as
 * tc_tensor_add's operands do. On a GPU, with every tensor dense, of x's
 * dtype, and the residual of the result's shape, one kernel adds the
 * residual to the float32 product and rounds once, where the ops apart
 * round the linear's output first (within one rounding of the dtype):
 * tcuda's skinny kernel (at most 16 rows of x; float16, bfloat16, or
 * float32 up to 4 rows), else, with a bias, one cuBLASLt matmul that reads
 * the residual as its C. Otherwise, and on the CPU, tc_nn_linear then
 * tc_tensor_add. Errors: those of tc_nn_linear and tc_tensor_add. */
TCUDA_API tc_status tc_nn_linear_add(const tc_tensor *x, const tc_tensor *weight,
                                     const tc_tensor *bias, const tc_tensor *residual,
                                     tc_tensor **out);

/* linear(layer_norm(x), weight, bias), the norm over x's last size `in`
 * with ln_weight and ln_bias ([in], each optional) and eps, as Transformer
 * Engine's LayerNormLinear; the norm's output is not kept. Where the GPU's
 * skinny kernel takes it (as tc_nn_linear_add's, but at most 4 rows;
 * ln_weight and ln_bias dense, of x's dtype) it normalizes x's rows as it
 * reads them,
 * each value rounded to the dtype as tc_nn_layer_norm stores it; the
 * row's mean and variance are summed in another order than
 * tc_nn_layer_norm's, so a normalized value may round the other way (one
 * unit in the last place of the dtype). Otherwise tc_nn_layer_norm then
 * tc_nn_linear. Errors: those two calls' (x 0-d: TC_ERROR_INVALID_ARGUMENT). */
TCUDA_API tc_status tc_nn_layer_norm_linear(const tc_tensor *x, const tc_tensor *ln_weight,
                                            const tc_tensor *ln_bias, double eps,
                                            const tc_tensor *weight, const tc_tensor *bias,
                                            tc_tensor **out);
/* gelu(tc_nn_layer_norm_linear(...)): fused as above with the tanh
 * approximation (gelu applied to the float32 result, as tc_nn_linear_gelu's
 * epilogue); otherwise tc_nn_layer_norm then tc_nn_linear_gelu. Errors: as
 * tc_nn_layer_norm_linear; TC_ERROR_INVALID_ARGUMENT for an unknown
 * approximate. */
TCUDA_API tc_status tc_nn_layer_norm_linear_gelu(const tc_tensor *x, const tc_tensor *ln_weight,
                                                 const tc_tensor *ln_bias, double eps,
                                                 const tc_tensor *weight, const tc_tensor *bias,
                                                 tc_gelu_approximate approximate, tc_tensor **out);

/* ---- embedding --------------------------------------------------------------- */

/* F.embedding: the rows of weight [V, C] that indices (int64 or int32, any
 * shape) pick, a new [..., C] tensor (tc_tensor_embedding of indexing.h
 * under torch.nn.functional's name, with nn.h's floating weight). An index
 * outside [0, V) is as indexing.h says. The gradient is
 * tc_nn_embedding_backward (nn_backward.h). Errors: the common ones;
 * TC_ERROR_SHAPE for a weight that is not 2-d; TC_ERROR_DTYPE for indices. */
TCUDA_API tc_status tc_nn_embedding(const tc_tensor *weight, const tc_tensor *indices,
                                    tc_tensor **out);

/* ---- dropout ----------------------------------------------------------------- */

/* F.dropout (aten's native_dropout): with training, a bool mask of x's
 * shape whose elements are true with probability 1 - p, and a new
 * out = x * mask * scale, scale = 1 / (1 - p) (0 for p == 1: all zeros, NaN
 * where x is infinite or NaN, as PyTorch), computed in float32 for 16-bit
 * dtypes. The mask is tc_generator_bernoulli(1 - p) drawn from `generator`
 * (NULL: the default generator of x's device) over x's elements in
 * row-major order: the same generator state gives the same mask on the CPU
 * and on every GPU (random.h's Philox counter layout, 4 elements a block),
 * and advances the offset past ceil(numel / 4) blocks. Masks equal
 * PyTorch's in distribution, not bit for bit (PyTorch's counters differ).
 * Without training (or for p == 0 with training, which still draws) out is
 * a new copy of x; without training the mask is all true and nothing is
 * drawn. *mask (NULL: not wanted) is a new bool tensor, written only on
 * success. Errors: the common ones; TC_ERROR_INVALID_ARGUMENT for p outside
 * [0, 1] or NaN; TC_ERROR_DEVICE_MISMATCH for a generator of another
 * device. */
TCUDA_API tc_status tc_nn_dropout(const tc_tensor *x, double p, bool training,
                                  tc_generator *generator, tc_tensor **out, tc_tensor **mask);

/* ---- attention --------------------------------------------------------------- */

/* softmax(q k^T * scale + mask) v with q [..., L, E], k [..., S, E],
 * v [..., S, Ev] (the same leading dims, at least 2-d) -> [..., L, Ev], as
 * PyTorch's math. scale NULL means 1/sqrt(E) (PyTorch's None). With
 * is_causal, query i sees keys j <= i (torch.ones(L, S).tril(), top-left
 * aligned when L != S). On a GPU, for float32 and (compute capability 8.0
 * on) 16-bit dtypes with E == Ev <= 128 and a positive scale: one fused
 * kernel that reads q, k and v in place (head views of one projection need
 * no copy) and keeps the scores on chip; its result for a 4-d q over
 * [B, L, H, E] memory (the transpose(1, 2) of a projection's view) is a
 * view over [B, L, H, Ev] memory, as PyTorch's flash attention, so merging
 * heads back needs no copy. Otherwise a GEMM for the scores (float32 for
 * 16-bit inputs), the fused softmax with the mask inside, a GEMM with v.
 * Errors: the common ones. */
TCUDA_API tc_status tc_nn_scaled_dot_product_attention(const tc_tensor *q, const tc_tensor *k,
                                                       const tc_tensor *v, bool is_causal,
                                                       const double *scale, tc_tensor **out);

/* Attention of T new tokens over a key/value cache, with the cache's
 * update in the same call (flash_attn_with_kvcache's op; PyTorch composes
 * it from index_copy_ and scaled_dot_product_attention). q is [B, H, T, E];
 * k_cache and v_cache [B, Hkv, S, E] with H a multiple of Hkv (grouped
 * queries: head h reads kv head h / (H / Hkv)); k_new and v_new
 * [B, Hkv, T, E], or both NULL. cache_len (int32 or int64, B elements or
 * one for every entry, on q's device) holds each entry's filled length n.
 * The call writes k_new and v_new into the caches at positions n..n+T-1,
 * then out[b, h, t] = softmax(scale * q k^T) v over positions 0..n+t with
 * is_causal, or all of 0..n+T-1 without (no new rows: 0..n-T+t and
 * 0..n-1; a row that sees nothing is zeros). scale NULL means 1/sqrt(E).
 * The lengths are read by the device, so the call never waits for them,
 * and a CUDA graph of a decode step replays as they grow (the caller
 * advances cache_len, e.g. tc_tensor_add_). *out is a new [B, H, T, E]
 * tensor of q's dtype over [B, T, H, E] memory, so merging the heads is a
 * view. Sums are float32 for 16-bit dtypes and float32, double for
 * float64, with one rounding at the end: as PyTorch's math path within
 * its tolerance. On a GPU one kernel does all of it (head sizes up to
 * 512); on a device of compute capability 9.0 a cluster of blocks splits
 * a row's positions. Every operand needs unit stride in its last dim (the
 * caches are written in place). A length out of range (n < 0 or
 * n + T > S): on the CPU TC_ERROR_INVALID_ARGUMENT with nothing written;
 * on a GPU nothing is written to that entry's caches, its rows are
 * computed with n clamped, and the next call that waits for the device
 * returns TC_ERROR_INVALID_ARGUMENT naming it (as a bad cross_entropy
 * target). Errors: the common ones; TC_ERROR_SHAPE for sizes that do not
 * agree; TC_ERROR_DTYPE for a length tensor that is not int32 or int64;
 * TC_ERROR_INVALID_ARGUMENT for one of k_new and v_new, a last dim without
 * unit stride, or a scale that is not finite; TC_ERROR_NOT_SUPPORTED for a
 * head size over 512 on a GPU. */
TCUDA_API tc_status tc_nn_attention_with_kv_cache(const tc_tensor *q, tc_tensor *k_cache,
                                                  tc_tensor *v_cache, const tc_tensor *k_new,
                                                  const tc_tensor *v_new,
                                                  const tc_tensor *cache_len, bool is_causal,
                                                  const double *scale, tc_tensor **out);

TCUDA_EXTERN_C_END

#endif
