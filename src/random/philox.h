/* Philox4x32-10 and the transforms from random words to values, shared word
 * for word by the CPU (C) and the GPU (CUDA), so both give the same numbers.
 *
 * Invariants:
 *  - Counter layout. A request of n elements at generator offset `off` uses
 *    the Philox blocks off, off+1, ..., off+ceil(n/E)-1, where E (elements per
 *    block, 4 or 2) depends only on the kind, the dtype and, for integers, the
 *    range. Element i lives in block off + i/E, lane i%E. Block b is the
 *    counter {lo32(b), hi32(b), 0, 0} under the key {lo32(seed), hi32(seed)}.
 *    Rejection retries of integer lane l use counters {lo32(b), hi32(b), r, l}
 *    with r >= 1, which no main block ever uses. So an element's value depends
 *    on (seed, offset, i) only, never on threads or launch configuration.
 *  - Bitwise equality. Every floating-point step is one IEEE operation rounded
 *    to nearest: multiply, add, divide, square root, or an explicit fused
 *    multiply-add (base/hd.h's TC_FMUL .. TC_DFMA, with the host's FMA
 *    contraction turned off for this header). log, sin and cos are our own
 *    polynomials built from those operations, never libm's. Hence normal
 *    draws are bitwise equal too; the promise (and the GPU test's bound) is
 *    2 ulp.
 *  - float16 / bfloat16 conversions are base/half.h's, round to nearest even
 *    (the GPU uses its conversion instructions, which give the same bits).
 *
 * Transforms (u = a uniform draw made from the top bits of words):
 *  - uniform, 16/32-bit floats: k = w>>8 (24 bits), r = lo + range*(k*2^-24)
 *    in float (one fma), then rounded to the dtype and clamped below hi;
 *    float64 uses 53 bits from two words and a double fma.
 *  - normal: Box-Muller. u1 = (k1+1)*2^-24 in (0,1], angle = 2*pi*k2*2^-24;
 *    z0 = sqrt(-2 ln u1) cos(angle), z1 = ... sin(angle);
 *    out = fma(std * sqrt(-2 ln u1), cos or sin, mean). Extremes: |z| <= 5.77
 *    (float path), 8.58 (float64 path).
 *    ln: exponent split exactly with integer ops, ln(m) = 2 atanh((m-1)/(m+1))
 *    by its series; sin/cos: exact quadrant reduction on the integer k2, then
 *    Taylor polynomials on |x| <= pi/4. float64 does the same with 53 bits.
 *    The float path trades the last bits for GPU speed (Newton steps instead
 *    of a division and a square root, the atanh series to s^7, sin/cos to
 *    x^7/x^8): its values are within about 2e-6 of exact Box-Muller, far
 *    below what any statistic can see.
 *  - bernoulli(p): 1 when w < round(p * 2^32), else 0 (p resolved to 2^-32).
 *  - integers in [lo, hi): Lemire's multiply-and-reject, unbiased: 32-bit
 *    words when hi-lo <= 2^32, else 64-bit words with a 128-bit product. */
#ifndef TCUDA_PHILOX_H
#define TCUDA_PHILOX_H

#include <stdint.h>

#include "base/half.h"
#include "base/hd.h"

TC_EXACT_BEGIN

#ifdef __cplusplus
extern "C" {
#endif

/* ---- integer helpers ------------------------------------------------------ */

TC_HD int tc__clz32(uint32_t x) /* x != 0 */
{
#if defined(__CUDA_ARCH__)
    return __clz((int)x);
#else
    return __builtin_clz(x);
#endif
}
TC_HD int tc__clz64(uint64_t x) /* x != 0 */
{
#if defined(__CUDA_ARCH__)
    return __clzll((long long)x);
#else
    return __builtin_clzll(x);
#endif
}
TC_HD uint32_t tc__mulhi32(uint32_t a, uint32_t b)
{
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return (uint32_t)(((uint64_t)a * b) >> 32);
#endif
}
TC_HD uint64_t tc__mulhi64(uint64_t a, uint64_t b)
{
#if defined(__CUDA_ARCH__)
    return __umul64hi(a, b);
#else
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
#endif
}

/* ---- Philox4x32-10 (Salmon et al., SC'11; constants from Random123) ----- */
#define TC_PHILOX_M0 0xD2511F53u
#define TC_PHILOX_M1 0xCD9E8D57u
#define TC_PHILOX_W0 0x9E3779B9u
#define TC_PHILOX_W1 0xBB67AE85u

TC_HD void tc__philox4x32_10(const uint32_t in[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = in[0], c1 = in[1], c2 = in[2], c3 = in[3];
    uint32_t k0 = key[0], k1 = key[1];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int r = 0; r < 10; r++) {
        if (r) {
            k0 += TC_PHILOX_W0;
            k1 += TC_PHILOX_W1;
        }
        uint32_t hi0 = tc__mulhi32(TC_PHILOX_M0, c0), lo0 = TC_PHILOX_M0 * c0;
        uint32_t hi1 = tc__mulhi32(TC_PHILOX_M1, c2), lo1 = TC_PHILOX_M1 * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Block `block` of the stream (seed); retry r >= 1 of lane l of that block. */
TC_HD void tc__philox_block(uint64_t seed, uint64_t block, uint32_t retry, uint32_t lane,
                            uint32_t out[4])
{
    uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), retry, lane};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    tc__philox4x32_10(ctr, key, out);
}

/* ---- natural log, sin and cos from rounded operations only -------------- */

/* ln(j * 2^-24) for j in [1, 2^24]. */
TC_HD float tc__ln_u24(uint32_t j)
{
    int e = 31 - tc__clz32(j);
    float m = TC_FMUL((float)j, tc__u2f((uint32_t)(127 - e) << 23)); /* [1, 2) exactly */
    if (m > 1.41421356f) {
        m = TC_FMUL(m, 0.5f);
        e += 1;
    }
    /* s = (m-1)/(m+1) with 1/(m+1) from a bit-trick guess (within 12%) and
     * three Newton steps: IEEE operations only, and cheaper on a GPU than a
     * correctly rounded division (s is within 2 ulp: 1.98 seen over 2e7 m) */
    float den = TC_FADD(m, 1.0f);
    float y = tc__u2f(0x7EF311C3u - tc__f2u(den));
    for (int i = 0; i < 3; i++)
        y = TC_FFMA(y, TC_FFMA(-den, y, 1.0f), y);
    float s = TC_FMUL(TC_FSUB(m, 1.0f), y);
    float s2 = TC_FMUL(s, s);
    /* to s^7: the next term is below 2^-23 of the sum, as |s| <= 0.1716 */
    float p = 0.142857149f; /* 1/7 */
    p = TC_FFMA(p, s2, 0.200000003f);
    p = TC_FFMA(p, s2, 0.333333343f);
    float t = TC_FMUL(2.0f, s); /* exact */
    float lnm = TC_FFMA(TC_FMUL(t, s2), p, t);
    float k = (float)(e - 24);
    /* ln2 = hi + lo, hi with few bits so k*hi is exact */
    return TC_FFMA(k, 0.693145751953125f, TC_FFMA(k, 1.42860677e-06f, lnm));
}

/* ln(j * 2^-53) for j in [1, 2^53]. */
TC_HD double tc__ln_u53(uint64_t j)
{
    int e = 63 - tc__clz64(j);
    double m = TC_DMUL((double)j, tc__u2d((uint64_t)(1023 - e) << 52));
    if (m > 1.4142135623730951) {
        m = TC_DMUL(m, 0.5);
        e += 1;
    }
    double s = TC_DDIV(TC_DSUB(m, 1.0), TC_DADD(m, 1.0));
    double s2 = TC_DMUL(s, s);
    double p = 1.0 / 23.0;
    p = TC_DFMA(p, s2, 1.0 / 21.0);
    p = TC_DFMA(p, s2, 1.0 / 19.0);
    p = TC_DFMA(p, s2, 1.0 / 17.0);
    p = TC_DFMA(p, s2, 1.0 / 15.0);
    p = TC_DFMA(p, s2, 1.0 / 13.0);
    p = TC_DFMA(p, s2, 1.0 / 11.0);
    p = TC_DFMA(p, s2, 1.0 / 9.0);
    p = TC_DFMA(p, s2, 1.0 / 7.0);
    p = TC_DFMA(p, s2, 1.0 / 5.0);
    p = TC_DFMA(p, s2, 1.0 / 3.0);
    double t = TC_DMUL(2.0, s); /* exact */
    double lnm = TC_DFMA(TC_DMUL(t, s2), p, t);
    double k = (double)(e - 53);
    return TC_DFMA(k, 6.93147180369123816490e-01, TC_DFMA(k, 1.90821492927058770002e-10, lnm));
}

/* sqrt(x) for x >= 0 (or -0) from multiplies and fused multiply-adds only: a
 * bit-trick guess of 1/sqrt(x) (within 3.5%), three Newton steps, then
 * x * (1/sqrt x). Within 3 ulp of the square root (2.8 seen over 2e7 values
 * in (0, 34]), and cheaper on a GPU than a correctly rounded one. Zeros come
 * back as they are. */
TC_HD float tc__sqrt_newton(float x)
{
    float h = TC_FMUL(x, 0.5f);
    float y = tc__u2f(0x5F375A86u - (tc__f2u(x) >> 1));
    for (int i = 0; i < 3; i++)
        y = TC_FMUL(y, TC_FFMA(-h, TC_FMUL(y, y), 1.5f));
    return x > 0.0f ? TC_FMUL(x, y) : x;
}

/* cos and sin of 2*pi*k*2^-24 for k in [0, 2^24). */
TC_HD void tc__sincos_u24(uint32_t k, float *c_out, float *s_out)
{
    uint32_t quot = (k + (1u << 21)) >> 22;         /* nearest quarter turn, 0..4 */
    int32_t t = (int32_t)k - (int32_t)(quot << 22); /* [-2^21, 2^21) */
    float x = TC_FMUL((float)t, 3.74507039e-07f);   /* 2*pi*2^-24 */
    float x2 = TC_FMUL(x, x);
    /* Taylor to x^7 and x^8: within 2e-6 of sin and cos on |x| <= pi/4 */
    float sp = -1.98412701e-04f; /* -1/7! */
    sp = TC_FFMA(sp, x2, 8.33333377e-03f);
    sp = TC_FFMA(sp, x2, -0.166666672f);
    float s = TC_FFMA(TC_FMUL(x, x2), sp, x);
    float cp = 2.48015876e-05f; /* 1/8! */
    cp = TC_FFMA(cp, x2, -1.38888892e-03f);
    cp = TC_FFMA(cp, x2, 4.16666679e-02f);
    cp = TC_FFMA(cp, x2, -0.5f);
    float c = TC_FFMA(cp, x2, 1.0f);
    /* the quadrant by selects and sign flips, not a branch: quarter turn q
     * maps (c, s) to (c, s), (-s, c), (-c, -s), (s, -c) */
    uint32_t q = quot & 3u;
    float cq = (q & 1u) ? s : c, sq = (q & 1u) ? c : s;
    *c_out = tc__u2f(tc__f2u(cq) ^ (((q + 1u) & 2u) << 30));
    *s_out = tc__u2f(tc__f2u(sq) ^ ((q & 2u) << 30));
}

/* cos and sin of 2*pi*k*2^-53 for k in [0, 2^53). */
TC_HD void tc__sincos_u53(uint64_t k, double *c_out, double *s_out)
{
    uint64_t quot = (k + (1ull << 50)) >> 51;
    int64_t t = (int64_t)k - (int64_t)(quot << 51);
    double x = TC_DMUL((double)t, 6.283185307179586476925286766559 * 0x1p-53);
    double x2 = TC_DMUL(x, x);
    double sp = 1.0 / 355687428096000.0; /* 1/17! */
    sp = TC_DFMA(sp, x2, -1.0 / 1307674368000.0);
    sp = TC_DFMA(sp, x2, 1.0 / 6227020800.0);
    sp = TC_DFMA(sp, x2, -1.0 / 39916800.0);
    sp = TC_DFMA(sp, x2, 1.0 / 362880.0);
    sp = TC_DFMA(sp, x2, -1.0 / 5040.0);
    sp = TC_DFMA(sp, x2, 1.0 / 120.0);
    sp = TC_DFMA(sp, x2, -1.0 / 6.0);
    double s = TC_DFMA(TC_DMUL(x, x2), sp, x);
    double cp = -1.0 / 6402373705728000.0; /* -1/18! */
    cp = TC_DFMA(cp, x2, 1.0 / 20922789888000.0);
    cp = TC_DFMA(cp, x2, -1.0 / 87178291200.0);
    cp = TC_DFMA(cp, x2, 1.0 / 479001600.0);
    cp = TC_DFMA(cp, x2, -1.0 / 3628800.0);
    cp = TC_DFMA(cp, x2, 1.0 / 40320.0);
    cp = TC_DFMA(cp, x2, -1.0 / 720.0);
    cp = TC_DFMA(cp, x2, 1.0 / 24.0);
    cp = TC_DFMA(cp, x2, -0.5);
    double c = TC_DFMA(cp, x2, 1.0);
    switch (quot & 3u) {
    case 0:
        *c_out = c;
        *s_out = s;
        break;
    case 1:
        *c_out = -s;
        *s_out = c;
        break;
    case 2:
        *c_out = -c;
        *s_out = -s;
        break;
    default:
        *c_out = s;
        *s_out = -c;
        break;
    }
}

/* ---- requests ----------------------------------------------------------- */

enum { TC__RNG_UNIFORM = 0, TC__RNG_NORMAL = 1, TC__RNG_BERNOULLI = 2, TC__RNG_INT = 3 };

/* Everything a fill needs besides (seed, offset), computed once on the host
 * (src/random/random.c) and handed unchanged to the CPU loop or the kernel. */
typedef struct tc__rng_params {
    int kind;      /* TC__RNG_* */
    int dtype;     /* tc_dtype */
    int per_block; /* E: elements per Philox block, 4 or 2 */
    int wide;      /* integers: 64-bit words per element */
    float fa, fb;  /* uniform: lo, range; normal: mean, std (16/32-bit floats) */
    float fmax;    /* uniform: the largest value below hi */
    double da, db; /* the same for float64 */
    double dmax;
    uint64_t ilo;     /* integers: lo (two's complement) */
    uint64_t irange;  /* hi - lo; 0 means 2^64 */
    uint64_t ithresh; /* Lemire threshold: 2^w mod range */
    uint64_t bthresh; /* bernoulli: w < bthresh gives 1 */
} tc__rng_params;

/* Lemire's unbiased integer in [0, range) from 32-bit words. */
TC_HD uint64_t tc__int32_lemire(const tc__rng_params *p, uint64_t seed, uint64_t block,
                                uint32_t lane, uint32_t w)
{
    if (p->irange == (1ull << 32))
        return w;
    uint32_t r32 = (uint32_t)p->irange;
    uint64_t m = (uint64_t)w * r32;
    if ((uint32_t)m < r32) {
        uint32_t extra[4];
        uint32_t retry = 0, used = 4;
        while ((uint32_t)m < (uint32_t)p->ithresh) {
            if (used == 4) {
                tc__philox_block(seed, block, ++retry, lane, extra);
                used = 0;
            }
            m = (uint64_t)extra[used++] * r32;
        }
    }
    return m >> 32;
}

/* The same with 64-bit words and a 128-bit product (range > 2^32, or 2^64). */
TC_HD uint64_t tc__int64_lemire(const tc__rng_params *p, uint64_t seed, uint64_t block,
                                uint32_t lane, uint64_t x)
{
    uint64_t r = p->irange;
    if (r == 0)
        return x;
    uint64_t lo = x * r;
    if (lo < r) {
        uint32_t extra[4];
        uint32_t retry = 0, used = 4;
        while (lo < p->ithresh) {
            if (used == 4) {
                tc__philox_block(seed, block, ++retry, lane, extra);
                used = 0;
            }
            x = ((uint64_t)extra[used] << 32) | extra[used + 1];
            used += 2;
            lo = x * r;
        }
    }
    return tc__mulhi64(x, r);
}

/* An integer-valued result (random_int, bernoulli) as the bits of dtype. */
TC_HD uint64_t tc__int_to_bits(int dtype, uint64_t v)
{
    switch (dtype) {
    case 0: /* TC_BOOL */ return v != 0;
    case 6: /* TC_FLOAT16 */ return tc__f32_to_f16((float)(int64_t)v);
    case 7: /* TC_BFLOAT16 */ return tc__f32_to_bf16((float)(int64_t)v);
    case 8: /* TC_FLOAT32 */ return tc__f2u((float)(int64_t)v);
    case 9: /* TC_FLOAT64 */ return tc__d2u((double)(int64_t)v);
    default: return v; /* integer types: the low bytes are stored */
    }
}

/* A float result as the bits of a 16/32-bit float dtype. */
TC_HD uint64_t tc__float_to_bits(int dtype, float v)
{
    if (dtype == 6)
        return tc__f32_to_f16(v);
    if (dtype == 7)
        return tc__f32_to_bf16(v);
    return tc__f2u(v);
}

/* uniform before rounding to the dtype: lo + range*u in float32, one fma.
 * (Building k*2^-24 from bits instead of converting k, exact too, made the
 * float16 fill slower on an H100: 0.476 ms against 0.415.) */
TC_HD float tc__uniform_f32(const tc__rng_params *p, uint32_t w)
{
    float u = TC_FMUL((float)(w >> 8), 5.9604644775390625e-08f);
    return TC_FFMA(p->fb, u, p->fa);
}

/* Box-Muller on float32: two normal values from two words. */
TC_HD void tc__normal_f32(const tc__rng_params *p, uint32_t w0, uint32_t w1, float *z0, float *z1)
{
    float rad = tc__sqrt_newton(TC_FMUL(-2.0f, tc__ln_u24((w0 >> 8) + 1)));
    float c, s;
    tc__sincos_u24(w1 >> 8, &c, &s);
    float rs = TC_FMUL(p->fb, rad);
    *z0 = TC_FFMA(rs, c, p->fa);
    *z1 = TC_FFMA(rs, s, p->fa);
}

/* uniform in a 16/32-bit float dtype: lo + range*u, rounded, kept below hi. */
TC_HD uint64_t tc__uniform_bits(int dtype, const tc__rng_params *p, uint32_t w)
{
    float r = tc__uniform_f32(p, w);
    if (dtype == 8)
        return tc__f2u(r > p->fmax ? p->fmax : r);
    uint16_t h;
    float back;
    if (dtype == 6) {
        h = tc__f32_to_f16(r);
        back = tc__f16_to_f32(h);
        if (back > p->fmax)
            h = tc__f32_to_f16(p->fmax);
    } else {
        h = tc__f32_to_bf16(r);
        back = tc__bf16_to_f32(h);
        if (back > p->fmax)
            h = tc__f32_to_bf16(p->fmax);
    }
    return h;
}

/* The E values of block `block` as dtype bits in out[0..E-1]. With kind and
 * dtype constant (the CUDA kernels are templates) the switches fold away. */
TC_HD void tc__rng_block_bits(int kind, int dtype, int wide, const tc__rng_params *p, uint64_t seed,
                              uint64_t block, uint64_t out[4])
{
    uint32_t w[4];
    tc__philox_block(seed, block, 0, 0, w);
    if (kind == TC__RNG_UNIFORM) {
        if (dtype == 9) {
            for (int l = 0; l < 2; l++) {
                uint64_t k = ((((uint64_t)w[2 * l] << 32) | w[2 * l + 1]) >> 11);
                double u = TC_DMUL((double)k, 0x1p-53);
                double r = TC_DFMA(p->db, u, p->da);
                out[l] = tc__d2u(r > p->dmax ? p->dmax : r);
            }
        } else {
            for (int l = 0; l < 4; l++)
                out[l] = tc__uniform_bits(dtype, p, w[l]);
        }
    } else if (kind == TC__RNG_NORMAL) {
        if (dtype == 9) {
            uint64_t k1 = (((uint64_t)w[0] << 32) | w[1]) >> 11;
            uint64_t k2 = (((uint64_t)w[2] << 32) | w[3]) >> 11;
            double rad = TC_DSQRT(TC_DMUL(-2.0, tc__ln_u53(k1 + 1)));
            double c, s;
            tc__sincos_u53(k2, &c, &s);
            double rs = TC_DMUL(p->db, rad);
            out[0] = tc__d2u(TC_DFMA(rs, c, p->da));
            out[1] = tc__d2u(TC_DFMA(rs, s, p->da));
        } else {
            for (int l = 0; l < 4; l += 2) {
                float z0, z1;
                tc__normal_f32(p, w[l], w[l + 1], &z0, &z1);
                out[l] = tc__float_to_bits(dtype, z0);
                out[l + 1] = tc__float_to_bits(dtype, z1);
            }
        }
    } else if (kind == TC__RNG_BERNOULLI) {
        for (int l = 0; l < 4; l++)
            out[l] = tc__int_to_bits(dtype, (uint64_t)w[l] < p->bthresh);
    } else if (!wide) {
        for (int l = 0; l < 4; l++)
            out[l] = tc__int_to_bits(dtype,
                                     p->ilo + tc__int32_lemire(p, seed, block, (uint32_t)l, w[l]));
    } else {
        for (int l = 0; l < 2; l++) {
            uint64_t x = ((uint64_t)w[2 * l] << 32) | w[2 * l + 1];
            out[l] = tc__int_to_bits(dtype,
                                     p->ilo + tc__int64_lemire(p, seed, block, (uint32_t)l, x));
        }
    }
}

#ifdef __cplusplus
}
#endif

TC_EXACT_END

#endif
