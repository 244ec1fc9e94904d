/* The CUDA nn backend's training layers, as nn_cuda.c's table names them:
 * embedding's backward and dropout (nn_layers_cuda.c), linear's weight and
 * bias gradients in one GEMM (blas_lt.c). See tensor/nn_internal.h. Not
 * installed. */
#ifndef TCUDA_NN_LAYERS_CUDA_H
#define TCUDA_NN_LAYERS_CUDA_H

#include "tensor/nn_internal.h"

tc_status tc__cuda_nn_embedding_backward(int device, const tc__nn_embedding_bwd *a);
tc_status tc__cuda_nn_dropout(int device, const tc__nn_dropout *a);
/* See tc__nn_backend.gemm_bgrad: one cublasLtMatmul with the BGRADB
 * epilogue on the current stream (blas_lt.c); *fused false where cuBLASLt
 * is missing or does not take the GEMM. */
tc_status tc__cuda_gemm_bgrad(int device, const tc__nn_gemm *g, void *bias_grad, bool *fused);

#endif
