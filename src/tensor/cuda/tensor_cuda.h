/* The CUDA tensor backend as the device seam (src/cuda/device_ops.c) sees
 * it: the kernel table, moving bytes between devices (tensor_cuda.c) and
 * cuBLAS matmul (blas.c). Not installed. */
#ifndef TCUDA_TENSOR_CUDA_H
#define TCUDA_TENSOR_CUDA_H

#include "tensor/tensor_internal.h"

extern const tc__backend tc__cuda_backend;
/* The seam's transfer (runtime/device_ops.h): dense d = dense s where the
 * devices differ (host <-> GPU, GPU <-> GPU). */
tc_status tc__cuda_transfer(tc_tensor *d, const tc_tensor *s, bool wait);
/* The seam's blas_handle: the calling thread's cuBLAS handle for the current
 * device, bound to the current stream (tc_current_blas_handle). */
tc_status tc__cuda_blas_handle(void **out);
tc_status tc__cuda_matmul(int device, tc_dtype dt, const void *a, const void *b, void *c,
                          int64_t batch, int64_t m, int64_t n, int64_t k, int64_t sa, int64_t sb);

#endif
