/* Code that the host (C) and the GPU (CUDA) compile alike, so that both
 * compute the same bits: TC_HD, floating-point operations rounded exactly
 * once, and the brackets that keep the host compiler from fusing them.
 * Used by base/half.h, random/philox.h, tensor/int_ops.h and
 * tensor/float_ops.h. Internal.
 *
 *  - TC_HD marks such a function: static inline in C, static __host__
 *    __device__ __forceinline__ under nvcc.
 *  - TC_FMUL .. TC_DSQRT are one IEEE operation each, rounded to nearest;
 *    TC_FFMA and TC_DFMA an explicit fused multiply-add. The device uses the
 *    __f*_rn / __d*_rn / __fma*_rn intrinsics; the host plain operators and
 *    C99 fmaf / fma, which are exact by definition (glibc runs the FMA
 *    instruction where the CPU has it).
 *  - The host must not contract a multiply and an add into an FMA where the
 *    code did not ask for one. Exact formulas sit between TC_EXACT_BEGIN and
 *    TC_EXACT_END: GCC turns fp-contract off in between; clang's pragma
 *    cannot be popped, so it stays off to the end of the translation unit,
 *    and as clang's -ffp-contract=fast ignores pragmas, its multiplies and
 *    adds here also go through a volatile barrier no contraction crosses.
 *  - The host evaluates floats in their own precision (FLT_EVAL_METHOD 0:
 *    SSE2, not x87); anything else stops the build. */
#ifndef TCUDA_HD_H
#define TCUDA_HD_H

#if defined(__CUDACC__)
#define TC_HD static __host__ __device__ __forceinline__
#define TC_EXACT_BEGIN
#define TC_EXACT_END
#else
#define TC_HD static inline
#include <float.h>
#include <math.h>
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "tcuda's exact host formulas need FLT_EVAL_METHOD == 0 (SSE2, not x87)"
#endif
#if defined(__clang__)
#define TC_EXACT_BEGIN _Pragma("clang fp contract(off)")
#define TC_EXACT_END
#elif defined(__GNUC__)
#define TC_EXACT_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"fp-contract=off\")")
#define TC_EXACT_END _Pragma("GCC pop_options")
#else
#define TC_EXACT_BEGIN
#define TC_EXACT_END
#endif
#endif

/* ---- one IEEE operation each, rounded to nearest ------------------------- */
#if defined(__CUDA_ARCH__)
#define TC_FMUL(a, b) __fmul_rn((a), (b))
#define TC_FADD(a, b) __fadd_rn((a), (b))
#define TC_FSUB(a, b) __fsub_rn((a), (b))
#define TC_FDIV(a, b) __fdiv_rn((a), (b))
#define TC_FSQRT(a) __fsqrt_rn(a)
#define TC_DMUL(a, b) __dmul_rn((a), (b))
#define TC_DADD(a, b) __dadd_rn((a), (b))
#define TC_DSUB(a, b) __dsub_rn((a), (b))
#define TC_DDIV(a, b) __ddiv_rn((a), (b))
#define TC_DSQRT(a) __dsqrt_rn(a)
#define TC_FFMA(a, b, c) __fmaf_rn((a), (b), (c))
#define TC_DFMA(a, b, c) __fma_rn((a), (b), (c))
#elif defined(__clang__)
/* clang's -ffp-contract=fast ignores pragmas: a volatile result is a barrier
 * no contraction crosses (the CPU path is not the fast one). */
static inline float tc__fmul_h(float a, float b)
{
    volatile float r = a * b;
    return r;
}
static inline float tc__fadd_h(float a, float b)
{
    volatile float r = a + b;
    return r;
}
static inline double tc__dmul_h(double a, double b)
{
    volatile double r = a * b;
    return r;
}
static inline double tc__dadd_h(double a, double b)
{
    volatile double r = a + b;
    return r;
}
#define TC_FMUL(a, b) tc__fmul_h((a), (b))
#define TC_FADD(a, b) tc__fadd_h((a), (b))
#define TC_FSUB(a, b) tc__fadd_h((a), -(float)(b))
#define TC_FDIV(a, b) ((float)(a) / (float)(b))
#define TC_FSQRT(a) sqrtf(a)
#define TC_DMUL(a, b) tc__dmul_h((a), (b))
#define TC_DADD(a, b) tc__dadd_h((a), (b))
#define TC_DSUB(a, b) tc__dadd_h((a), -(double)(b))
#define TC_DDIV(a, b) ((double)(a) / (double)(b))
#define TC_DSQRT(a) sqrt(a)
#define TC_FFMA(a, b, c) fmaf((a), (b), (c))
#define TC_DFMA(a, b, c) fma((a), (b), (c))
#else
#define TC_FMUL(a, b) ((float)(a) * (float)(b))
#define TC_FADD(a, b) ((float)(a) + (float)(b))
#define TC_FSUB(a, b) ((float)(a) - (float)(b))
#define TC_FDIV(a, b) ((float)(a) / (float)(b))
#define TC_FSQRT(a) sqrtf(a)
#define TC_DMUL(a, b) ((double)(a) * (double)(b))
#define TC_DADD(a, b) ((double)(a) + (double)(b))
#define TC_DSUB(a, b) ((double)(a) - (double)(b))
#define TC_DDIV(a, b) ((double)(a) / (double)(b))
#define TC_DSQRT(a) sqrt(a)
#define TC_FFMA(a, b, c) fmaf((a), (b), (c))
#define TC_DFMA(a, b, c) fma((a), (b), (c))
#endif

#endif
