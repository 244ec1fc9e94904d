/* C launchers of the training layers' kernels, called by nn_layers_cuda.c:
 * embedding's backward (embedding.cu) and dropout's product (dropout.cu).
 * As the other launchers (nn_kernels.h), each queues its work on `stream`
 * of the current device and returns at once; the caller runs
 * tc__launch_check right after. `sms` is the device's multiprocessor count.
 * Not installed. */
#ifndef TCUDA_LAYERS_KERNELS_H
#define TCUDA_LAYERS_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "tensor/nn_internal.h"
#include "runtime/cuda/kernel_errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of device scratch tc__k_nn_embedding_backward needs for `a` (0:
 * none): the sort's keys, positions and CUB's temporary storage when
 * deterministic; when not, a float32 copy of the gradient for 16-bit dtypes
 * and the rows' counts for scale_grad_by_freq. */
size_t tc__k_nn_embedding_backward_scratch(const tc__nn_embedding_bwd *a);
/* See tc__nn_embedding_bwd (tensor/nn_internal.h). Deterministic: the
 * positions sorted by row (a stable radix sort, CUB's), then one block per
 * row and column tile that sums the row's contributions in position order
 * and adds them to the row; else atomic adds. An index out of range is
 * skipped and reported through err (kernel_errors.h). Returns what CUB
 * returned (cudaSuccess when not deterministic). */
cudaError_t tc__k_nn_embedding_backward(cudaStream_t stream, int sms, const tc__nn_embedding_bwd *a,
                                        void *scratch, tc__kernel_error *err);
/* See tc__nn_dropout (tensor/nn_internal.h): one element-wise kernel. */
void tc__k_nn_dropout(cudaStream_t stream, int sms, const tc__nn_dropout *a);

#ifdef __cplusplus
}
#endif

#endif
