/* The CUDA tensor backend as the device seam (device_ops_cuda.c) sees it:
 * the kernel table, cross-device copies (tensor_cuda.c) and cuBLAS matmul
 * (blas.c). Not installed. */
#ifndef TCUDA_TENSOR_CUDA_H
#define TCUDA_TENSOR_CUDA_H

#include "tensor/tensor_internal.h"

extern const tc__backend tc__cuda_backend;
/* dst = src where the devices differ (host <-> GPU, GPU <-> GPU). */
tc_status tc__cuda_copy(tc_tensor *dst, const tc_tensor *src, bool non_blocking);
tc_status tc__cuda_matmul(int device, tc_dtype dt, const void *a, const void *b, void *c,
                          int64_t batch, int64_t m, int64_t n, int64_t k, int64_t sa, int64_t sb);

#endif
