/* tcuda: the backward of nn.h's operations (ATen's *_backward ops, as
 * torch.autograd computes them for torch.nn.functional.X).
 *
 * No autograd: each function is one explicit backward, a public op that
 * takes the forward's inputs (and the gradient of its output) and returns
 * the gradients of those inputs by PyTorch's autograd formulas, so that a
 * training step is composed by hand. The rules of nn.h hold: floating
 * tensors (float16, bfloat16, float32, float64; TC_ERROR_DTYPE otherwise)
 * of one dtype and one device (TC_ERROR_DEVICE_MISMATCH otherwise), NULL
 * tensors TC_ERROR_INVALID_ARGUMENT, released or foreign ones
 * TC_ERROR_INVALID_HANDLE, shapes that do not fit TC_ERROR_SHAPE; 16-bit
 * inputs are computed in float32 and rounded once at the end; on a GPU the
 * work is queued on the current stream. Each gradient comes back as a new
 * contiguous tensor of its input's shape and dtype, which the caller
 * releases; a gradient's out-parameter may be NULL when it is not wanted
 * (at least one must be asked for: TC_ERROR_INVALID_ARGUMENT), and the
 * out-parameters are written all together, only on success. */
#ifndef TCUDA_NN_BACKWARD_H
#define TCUDA_NN_BACKWARD_H

#include <stdbool.h>

#include "status.h"
#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

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
 * batch entry (P and dP). Every device runs this math path: a GEMM for the
 * scores with the forward's fused masked softmax, then GEMMs and
 * element-wise ops, all in float32 for 16-bit inputs (the GEMMs follow
 * backends.h). With L, S or a leading size 0 the gradients are zeros.
 * Errors: the header's common ones. */
TCUDA_API tc_status tc_nn_scaled_dot_product_attention_backward(
    const tc_tensor *grad_output, const tc_tensor *q, const tc_tensor *k, const tc_tensor *v,
    bool is_causal, const double *scale, tc_tensor **grad_q, tc_tensor **grad_k,
    tc_tensor **grad_v);

TCUDA_EXTERN_C_END

#endif
