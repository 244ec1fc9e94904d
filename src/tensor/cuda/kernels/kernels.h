/* C launchers of the tensor kernels (elementwise.cu, copy.cu, reduce.cu,
 * scan.cu).
 *
 * Each queues its kernels on `stream`, which belongs to the current device
 * (the caller, tensor_cuda.c, entered it with a device guard), and returns at
 * once without checking: the caller runs tc__launch_check right after, so
 * every launch error (and, with CUDA_LAUNCH_BLOCKING, every kernel fault) is
 * reported in one place, in C. `sms` is the device's multiprocessor count,
 * for sizing grids. None of them allocates: tc__k_reduce writes partial
 * results to `scratch`, which the caller took from the caching allocator on
 * the same stream (tc__k_reduce_scratch says how many bytes). Not installed. */
#ifndef TCUDA_KERNELS_H
#define TCUDA_KERNELS_H

#include <cuda_runtime_api.h>

#include "tensor/iter.h"
#include "tcuda/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

void tc__k_unary(cudaStream_t stream, int sms, tc__op op, tc_dtype dtype, const tc__iter *it);
void tc__k_binary(cudaStream_t stream, int sms, tc__op op, tc_dtype dtype, const tc__iter *it);
void tc__k_where(cudaStream_t stream, int sms, tc_dtype dtype, const tc__iter *it);
void tc__k_convert(cudaStream_t stream, int sms, tc_dtype dst, tc_dtype src, const tc__iter *it);
void tc__k_fill(cudaStream_t stream, int sms, tc_dtype dtype, void *out, int64_t n, tc__fill v);
/* Scratch bytes tc__k_reduce needs for this shape (0: none); the caller
 * allocates them on the same stream. */
size_t tc__k_reduce_scratch(int sms, tc_dtype in_dtype, int64_t outer, int64_t r, int64_t inner);
void tc__k_reduce(cudaStream_t stream, int sms, tc__op op, tc_dtype in_dtype, tc_dtype out_dtype,
                  const void *in, void *out, int64_t outer, int64_t r, int64_t inner,
                  void *scratch);

/* Inclusive scan (TC__SCAN_CUMSUM) of contiguous in[outer, r, inner] over r
 * into contiguous out, both of `dtype` (floating or int64). */
void tc__k_scan(cudaStream_t stream, int sms, tc__op op, tc_dtype dtype, const void *in, void *out,
                int64_t outer, int64_t r, int64_t inner);

#ifdef __cplusplus
}
#endif

#endif
