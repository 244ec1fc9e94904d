/* Bit casts and the float16 / bfloat16 conversions, one definition for the
 * CPU (C) and the GPU (CUDA): the CPU backend, the random fills and the
 * kernels that include it store the same bits. Internal.
 *
 * Conversions round to nearest even. The *_soft functions are the
 * definition, in integer operations. On the GPU the conversions use the
 * hardware's (cvt.rn.f16.f32, cvt.rn.bf16.f32 on sm_80+, cvt.f32.f16),
 * which round to nearest even as well and so give the same bits for every
 * input that is not a NaN; NaNs keep the software's quiet NaN, which the
 * hardware's canonical NaN is not. The software takes about fifteen
 * instructions and two branches per float16; this is what made uniform
 * float16 fills compute-bound (bench/check_cvt.cu compares the two over all
 * 2^32 floats). */
#ifndef TCUDA_HALF_H
#define TCUDA_HALF_H

#include <stdint.h>
#include <string.h>

#include "hd.h"

TC_EXACT_BEGIN

#ifdef __cplusplus
extern "C" {
#endif

/* ---- bit casts ----------------------------------------------------------- */

TC_HD uint32_t tc__f2u(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}
TC_HD float tc__u2f(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}
TC_HD uint64_t tc__d2u(double d)
{
#if defined(__CUDA_ARCH__)
    return (uint64_t)__double_as_longlong(d);
#else
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
#endif
}
TC_HD double tc__u2d(uint64_t u)
{
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)u);
#else
    double d;
    memcpy(&d, &u, 8);
    return d;
#endif
}

/* ---- float16 / bfloat16, round to nearest even --------------------------- */

TC_HD uint16_t tc__f32_to_f16_soft(float f)
{
    uint32_t x = tc__f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u)
        return (uint16_t)(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (x >= 0x477ff000u) /* >= 65520 rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    uint32_t h, rem, half;
    if (x < 0x38800000u) { /* below 2^-14: a subnormal half (or zero) */
        if (x < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        h = m >> shift;
        rem = m & ((1u << shift) - 1u);
        half = 1u << (shift - 1u);
    } else {
        h = (((x >> 23) - 112u) << 10) | ((x & 0x7fffffu) >> 13);
        rem = x & 0x1fffu;
        half = 0x1000u;
    }
    if (rem > half || (rem == half && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

TC_HD uint16_t tc__f32_to_f16(float f)
{
#if defined(__CUDA_ARCH__)
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    uint16_t nan = (uint16_t)(((tc__f2u(f) >> 16) & 0x8000u) | 0x7e00u);
    return f != f ? nan : (uint16_t)h;
#else
    return tc__f32_to_f16_soft(f);
#endif
}

TC_HD float tc__f16_to_f32_soft(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return tc__u2f(sign | 0x7f800000u | (m << 13));
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in float */
        float v = TC_FMUL((float)m, 5.9604644775390625e-08f);
        return sign ? -v : v;
    }
    return tc__u2f(sign | ((e + 112u) << 23) | (m << 13));
}

TC_HD float tc__f16_to_f32(uint16_t h)
{
#if defined(__CUDA_ARCH__)
    if ((h & 0x7c00u) == 0x7c00u) /* infinities and NaNs: payload kept */
        return tc__f16_to_f32_soft(h);
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)h));
    return f;
#else
    return tc__f16_to_f32_soft(h);
#endif
}

TC_HD uint16_t tc__f32_to_bf16_soft(float f)
{
    uint32_t x = tc__f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

TC_HD uint16_t tc__f32_to_bf16(float f)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned short b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
    uint16_t nan = (uint16_t)((tc__f2u(f) >> 16) | 0x40u);
    return f != f ? nan : (uint16_t)b;
#else
    return tc__f32_to_bf16_soft(f);
#endif
}

TC_HD float tc__bf16_to_f32(uint16_t b) { return tc__u2f((uint32_t)b << 16); }

#ifdef __cplusplus
}
#endif

TC_EXACT_END

#endif
