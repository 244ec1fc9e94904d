/* C launchers of the nn kernels (nn.cu), called by nn_cuda.c. As the other
 * launchers (kernels.h), each queues its kernels on `stream` of the current
 * device and returns at once; the caller runs tc__launch_check right after.
 * `sms` is the device's multiprocessor count. Not installed. */
#ifndef TCUDA_NN_KERNELS_H
#define TCUDA_NN_KERNELS_H

#include <cuda_runtime_api.h>

#include "core/nn_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* See tc__nn_rows (core/nn_internal.h). */
void tc__k_nn_rows(cudaStream_t stream, int sms, const tc__nn_rows *args);
/* See tc__nn_backend.cross_entropy; loss is of dtype's computation type
 * (float32 for 16-bit dtypes). */
void tc__k_nn_cross_entropy(cudaStream_t stream, int sms, tc_dtype dtype, const void *logits,
                            const int64_t *target, void *loss, int64_t n, int64_t c,
                            int64_t ignore_index);
/* c = beta * c (0 for beta 0, c not read) over `batch` row-major [m, n]
 * matrices of dtype (floating) with leading dimension ldc and batch stride
 * stride_c: a GEMM with k = 0. Launches nothing when the batch is empty. */
void tc__k_nn_scale(cudaStream_t stream, int sms, tc_dtype dtype, void *c, int64_t batch, int64_t m,
                    int64_t n, int64_t ldc, int64_t stride_c, double beta);

#ifdef __cplusplus
}
#endif

#endif
