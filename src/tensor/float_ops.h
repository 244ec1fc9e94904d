/* The floating-point binary element-wise formulas, shared by the CPU
 * backend (cpu_ops.c) and the kernels (elementwise.cu) so that both follow
 * the same rules, as int_ops.h does for integers: maximum and minimum give
 * NaN where either operand is NaN (PyTorch's rule), remainder is Python's %
 * (the sign of the divisor), a comparison gives 1 or 0.
 *
 * Each formula is written once over the type tc__real: double in C (the CPU
 * computes every floating dtype in double), a template parameter in CUDA's
 * C++ (the kernels compute in the dtype's computation type: float for the
 * 16- and 32-bit floats, double for float64). Internal. */
#ifndef TCUDA_FLOAT_OPS_H
#define TCUDA_FLOAT_OPS_H

#include <math.h>

#include "base/hd.h"
#include "iter.h"

#ifdef __cplusplus
#define TC__REAL_FN template <typename tc__real> TC_HD tc__real
#else
typedef double tc__real;
#define TC__REAL_FN TC_HD tc__real
#endif

/* Python's a % b (torch.remainder): fmod, moved to the divisor's sign. */
TC__REAL_FN tc__fremainder(tc__real a, tc__real b)
{
    tc__real m = fmod(a, b);
    return m != (tc__real)0 && ((b < (tc__real)0) != (m < (tc__real)0)) ? m + b : m;
}

TC__REAL_FN tc__fbinary(int op, tc__real a, tc__real b)
{
    switch (op) {
    case TC__OP_ADD: return a + b;
    case TC__OP_SUB: return a - b;
    case TC__OP_MUL: return a * b;
    case TC__OP_DIV: return a / b;
    case TC__OP_POW: return pow(a, b);
    case TC__OP_MAXIMUM: return a != a || b != b ? (tc__real)NAN : a > b ? a : b;
    case TC__OP_MINIMUM: return a != a || b != b ? (tc__real)NAN : a < b ? a : b;
    case TC__OP_REMAINDER: return tc__fremainder(a, b);
    case TC__OP_EQ: return a == b;
    case TC__OP_NE: return a != b;
    case TC__OP_LT: return a < b;
    case TC__OP_LE: return a <= b;
    case TC__OP_GT: return a > b;
    default: return a >= b;
    }
}

#endif
