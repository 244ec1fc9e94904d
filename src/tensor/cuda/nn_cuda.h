/* The CUDA nn backend as the device seam (src/cuda/device_ops.c) sees it: the
 * table (nn_cuda.c), cuBLAS's strided-batched GEMM and tcuda's own small and
 * skinny ones (blas.c) and cuBLASLt's GEMM with a bias (blas_lt.c). Not
 * installed. */
#ifndef TCUDA_NN_CUDA_H
#define TCUDA_NN_CUDA_H

#include "tensor/nn_internal.h"

extern const tc__nn_backend tc__cuda_nn_backend;
/* See tc__nn_gemm: one cuBLAS GEMM call on the current stream. */
tc_status tc__cuda_gemm(int device, const tc__nn_gemm *g);
/* See tc__nn_backend.gemm_bias: tcuda's skinny kernel where it takes g
 * (tc__cuda_gemm_skinny), else one cublasLtMatmul with the bias epilogue on
 * the current stream (blas_lt.c); *fused false where neither takes it. */
tc_status tc__cuda_gemm_bias(int device, const tc__nn_gemm *g, const void *bias, bool *fused);
/* See tc__nn_backend.gemm_gelu (16-bit dtypes): tcuda's skinny kernel
 * where it takes g, else one cublasLtMatmul with the GELU_AUX_BIAS epilogue
 * (blas_lt.c); *fused false where neither takes it. */
tc_status tc__cuda_gemm_gelu(int device, const tc__nn_gemm *g, const void *bias, void *aux,
                             bool *fused);
/* g in one kernel of tcuda's where it is a skinny GEMM (blas.c,
 * kernels/gemm_skinny.cu: at most 16 rows of A, B transposed), with f's
 * prologue and epilogue (NULL: none; tc__nn_fusion); *done false: nothing
 * queued, g is not one. */
tc_status tc__cuda_gemm_skinny(int device, const tc__nn_gemm *g, const tc__nn_fusion *f,
                               bool *done);
/* See tc__nn_backend.gemm_fused: the skinny kernel where it takes g (and
 * the norm's weight and bias are 16-byte aligned); else, for a bias and a
 * residual alone, one cublasLtMatmul that reads the residual as C (beta 1)
 * with the bias epilogue (blas_lt.c); else a refusal. */
tc_status tc__cuda_gemm_fused(int device, const tc__nn_gemm *g, const tc__nn_fusion *f,
                              bool *fused);
/* Whether g's result goes through rows padded to whole 16-byte vectors
 * (blas.c): a 16-bit C of one matrix, dense, wider than 8 and not a
 * multiple of 8, with at least 2^22 elements; the bias GEMM refuses these. */
bool tc__gemm_pads_rows(const tc__nn_gemm *g);
/* Does g go through padded copies of an operand whose rows are not whole
 * 16-byte vectors (large 16-bit GEMMs; blas_lt.c leaves them to blas.c)? */
bool tc__gemm_pads_operands(const tc__nn_gemm *g);
/* Whether g (batch 1) has a C, or an A whose rows run along m, of 2^31
 * elements or more: blas.c runs it in slices of m, blas_lt.c leaves it to
 * blas.c. */
bool tc__gemm_spans_2g(const tc__nn_gemm *g);
/* The cuBLAS(Lt) workspace size PyTorch uses by default on `device`:
 * 1 MiB, 4 MiB on a compute capability 8.x GPU of 24 GiB or more, 32 MiB
 * from 9.0 on (blas_lt.c). */
size_t tc__cublas_workspace_limit(int device);

#endif
