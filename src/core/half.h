/* float16 and bfloat16 to and from float, in portable C (round to nearest
 * even, NaN kept). Not installed. */
#ifndef TCUDA_HALF_H
#define TCUDA_HALF_H

#include <stdint.h>
#include <string.h>

static inline float tc__bits_to_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t tc__float_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float tc__half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f)
        return tc__bits_to_float(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24 */
        float f = (float)man * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    return tc__bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t tc__float_to_half(float f)
{
    uint32_t u = tc__float_to_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* inf or NaN */
        return sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0);
    if (a >= 0x477ff000u) /* rounds to >= 65520: overflow */
        return sign | 0x7c00;
    if (a < 0x38800000u) { /* below 2^-14: subnormal half */
        /* f * 2^24 rounded to an integer, ties to even (the FPU does it) */
        float m = tc__bits_to_float(a) * 16777216.0f;
        float r = m + 8388608.0f - 8388608.0f; /* round to integer, RNE */
        return sign | (uint16_t)r;
    }
    uint32_t exp = ((a >> 23) - 112) << 10, man = (a >> 13) & 0x3ff;
    uint32_t rest = a & 0x1fff;
    uint32_t h = exp | man;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++;
    return sign | (uint16_t)h;
}

static inline float tc__bf16_to_float(uint16_t b) { return tc__bits_to_float((uint32_t)b << 16); }

static inline uint16_t tc__float_to_bf16(float f)
{
    uint32_t u = tc__float_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

#endif
