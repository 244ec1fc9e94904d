/* The integer element-wise formulas, shared by the CPU backend (cpu_ops.c)
 * and the kernels (elementwise.cu) so that both compute the same values:
 * int64 arithmetic that wraps (done in uint64), as PyTorch's integer tensors
 * do. Bool and every integer dtype are computed through these. Internal. */
#ifndef TCUDA_INT_OPS_H
#define TCUDA_INT_OPS_H

#include <stdint.h>

#include "base/hd.h"
#include "iter.h"

/* base^e, wrapping; a negative e gives 0 except for bases 1 and -1. */
TC_HD int64_t tc__ipow(int64_t base, int64_t e)
{
    if (e < 0)
        return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)base;
    while (e) {
        if (e & 1)
            r *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)r;
}

/* Python's a % b (the sign of b). A zero divisor gives 0, as NumPy does
 * (PyTorch raises on the CPU and leaves the value undefined on a GPU); -1
 * gives 0 without trapping on INT64_MIN % -1. */
TC_HD int64_t tc__iremainder(int64_t a, int64_t b)
{
    if (b == 0 || b == -1)
        return 0;
    int64_t r = a % b;
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

TC_HD int64_t tc__ibinary(int op, int64_t a, int64_t b)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case TC__OP_ADD: return (int64_t)(ua + ub);
    case TC__OP_SUB: return (int64_t)(ua - ub);
    case TC__OP_MUL: return (int64_t)(ua * ub);
    case TC__OP_POW: return tc__ipow(a, b);
    case TC__OP_MAXIMUM: return a > b ? a : b;
    case TC__OP_MINIMUM: return a < b ? a : b;
    case TC__OP_REMAINDER: return tc__iremainder(a, b);
    case TC__OP_EQ: return a == b;
    case TC__OP_NE: return a != b;
    case TC__OP_LT: return a < b;
    case TC__OP_LE: return a <= b;
    case TC__OP_GT: return a > b;
    default: return a >= b; /* GE; DIV never has integer operands */
    }
}

TC_HD int64_t tc__iunary(int op, int64_t x)
{
    switch (op) {
    case TC__OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case TC__OP_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case TC__OP_FLOOR:
    case TC__OP_CEIL:
    case TC__OP_ROUND: return x;   /* integers are whole already */
    default: return x > 0 ? x : 0; /* RELU; the math functions get floating inputs */
    }
}

#endif
