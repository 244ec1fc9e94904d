/* The CUDA nn backend as the device seam (device_ops_cuda.c) sees it: the
 * table (nn_cuda.c) and cuBLAS's strided-batched GEMM (blas.c). Not
 * installed. */
#ifndef TCUDA_NN_CUDA_H
#define TCUDA_NN_CUDA_H

#include "core/nn_internal.h"

extern const tc__nn_backend tc__cuda_nn_backend;
/* See tc__nn_gemm: one cublasGemmStridedBatchedEx on the current stream. */
tc_status tc__cuda_gemm(int device, const tc__nn_gemm *g);

#endif
