/* The cuBLAS values that blas.c (cuBLAS) and blas_lt.c (cuBLASLt) pass as
 * plain ints, so that the build needs no cuBLAS header: from cublas_api.h
 * (cublasOperation_t, cublasComputeType_t, cublasStatus_t) and
 * library_types.h (cudaDataType_t); the values are part of the ABI. Not
 * installed. */
#ifndef TCUDA_BLAS_ABI_H
#define TCUDA_BLAS_ABI_H

#include "tcuda/dtype.h"

enum { CUBLAS_STATUS_SUCCESS_ = 0 };
enum { CUBLAS_OP_N_ = 0, CUBLAS_OP_T_ = 1, CUBLAS_GEMM_DEFAULT_ = -1 };
enum { CUDA_R_32F_ = 0, CUDA_R_64F_ = 1, CUDA_R_16F_ = 2, CUDA_R_16BF_ = 14 };
/* cublasComputeType_t: 32F_FAST_TF32 lets float32 inputs be rounded to TF32
 * for tensor cores (tcuda/backends.h's allow_tf32). */
enum { CUBLAS_COMPUTE_32F_ = 68, CUBLAS_COMPUTE_64F_ = 70, CUBLAS_COMPUTE_32F_FAST_TF32_ = 77 };
/* cublasMath_t: the default, and the bit OR-ed into it that forbids 16-bit
 * GEMMs to reduce split-K partial sums in their own type. */
enum { CUBLAS_DEFAULT_MATH_ = 0, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION_ = 16 };

/* cudaDataType_t of a floating tcuda dtype. */
static inline int tc__cuda_data_type(tc_dtype dt)
{
    return dt == TC_FLOAT64   ? CUDA_R_64F_
           : dt == TC_FLOAT32 ? CUDA_R_32F_
           : dt == TC_FLOAT16 ? CUDA_R_16F_
                              : CUDA_R_16BF_;
}

#endif
