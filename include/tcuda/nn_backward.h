/* tcuda: the backward operations of nn.h for training without autograd (as
 * ATen's *_backward ops: torch.ops.aten.embedding_dense_backward,
 * linear's and native_dropout_backward), each a public op composed by hand.
 *
 * Tensors are checked as nn.h says (NULL: TC_ERROR_INVALID_ARGUMENT;
 * released or foreign: TC_ERROR_INVALID_HANDLE; floating dtypes only,
 * TC_ERROR_DTYPE otherwise; one device, TC_ERROR_DEVICE_MISMATCH
 * otherwise; shapes that do not fit, TC_ERROR_SHAPE). A gradient that is
 * returned is a new contiguous tensor written only on success; one that is
 * accumulated into is the caller's, changed only when the call succeeds
 * (on a GPU: queued on the current stream). 16-bit values are computed in
 * float32 and rounded once per result. */
#ifndef TCUDA_NN_BACKWARD_H
#define TCUDA_NN_BACKWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "nn.h"
#include "status.h"
#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

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
 * three are NULL or one has several elements in one place. */
TCUDA_API tc_status tc_nn_linear_backward_into(const tc_tensor *grad_output, const tc_tensor *x,
                                               const tc_tensor *weight, bool accumulate,
                                               tc_tensor *grad_x, tc_tensor *grad_weight,
                                               tc_tensor *grad_bias);

/* The gradient of tc_nn_dropout (aten's native_dropout_backward): a new
 * grad_in = grad_output * mask * scale, scale = 1 / (1 - p) (0 for p == 1),
 * computed in float32 for 16-bit dtypes. mask is the bool mask that
 * tc_nn_dropout returned (grad_output's shape and device). Errors: the
 * common ones; TC_ERROR_DTYPE for a mask that is not bool;
 * TC_ERROR_INVALID_ARGUMENT for p outside [0, 1]. */
TCUDA_API tc_status tc_nn_dropout_backward(const tc_tensor *grad_output, const tc_tensor *mask,
                                           double p, tc_tensor **grad_in);

TCUDA_EXTERN_C_END

#endif
