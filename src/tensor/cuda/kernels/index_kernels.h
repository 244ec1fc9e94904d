/* C launchers of the indexing kernels (index.cu), called by
 * src/tensor/cuda/index_cuda.c, with the meaning of tensor/index_internal.h. Each
 * queues its kernel on `stream` (of the current device) and returns without
 * checking; the caller runs tc__launch_check. `sms` sizes grids. Index values
 * out of range stop the kernel with a device-side assert. tc__k_topk sorts
 * each slice in shared memory when it fits, else in `scratch`, global memory
 * of tc__k_topk_scratch bytes the caller took on the same stream. Not
 * installed. */
#ifndef TCUDA_INDEX_KERNELS_H
#define TCUDA_INDEX_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>

#include "tensor/iter.h"
#include "tcuda/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

void tc__k_gather(cudaStream_t stream, int sms, tc_dtype dtype, tc_dtype index_dtype,
                  const tc__iter *it, int64_t dim_stride, int64_t dim_size);
void tc__k_scatter_add(cudaStream_t stream, int sms, tc_dtype dtype, const tc__iter *it,
                       int64_t dim_stride, int64_t dim_size);
void tc__k_tri(cudaStream_t stream, int sms, tc_dtype dtype, bool upper, int64_t diagonal,
               const tc__iter *it);
size_t tc__k_topk_scratch(int sms, tc_dtype dtype, int64_t slices, int64_t r);
void tc__k_topk(cudaStream_t stream, int sms, tc_dtype dtype, const void *in, void *values,
                int64_t *indices, int64_t outer, int64_t r, int64_t inner, int64_t k, bool largest,
                void *scratch);

#ifdef __cplusplus
}
#endif

#endif
