/* Element i of a floating buffer of dtype d as a double, and back (rounded
 * once to d): how the CPU nn kernels (cpu_nn*.c) read and write every
 * floating dtype, computing in double. Internal. */
#ifndef TCUDA_CPU_FLOAT_IO_H
#define TCUDA_CPU_FLOAT_IO_H

#include <stdint.h>

#include "base/half.h"
#include "tcuda/dtype.h"

static inline double ld(const void *p, tc_dtype d, int64_t i)
{
    switch (d) {
    case TC_FLOAT16: return tc__f16_to_f32(((const uint16_t *)p)[i]);
    case TC_BFLOAT16: return tc__bf16_to_f32(((const uint16_t *)p)[i]);
    case TC_FLOAT32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

static inline void st(void *p, tc_dtype d, int64_t i, double v)
{
    switch (d) {
    case TC_FLOAT16: ((uint16_t *)p)[i] = tc__f32_to_f16((float)v); break;
    case TC_BFLOAT16: ((uint16_t *)p)[i] = tc__f32_to_bf16((float)v); break;
    case TC_FLOAT32: ((float *)p)[i] = (float)v; break;
    default: ((double *)p)[i] = v; break;
    }
}

#endif
