/* What a backend kernel sees of an operation: the op code, and a tc__iter
 * (shape plus per-operand data pointer and element strides; operand 0 is the
 * output, broadcast inputs have stride 0, `contiguous` means every operand is
 * dense row-major of the same shape). Plain C with no atomics, so that the
 * .cu files include it too. Not installed. */
#ifndef TCUDA_ITER_H
#define TCUDA_ITER_H

#include <stdbool.h>
#include <stdint.h>

#ifndef TC_MAX_DIMS
#define TC_MAX_DIMS 8
#endif

/* Operation codes shared by every backend. */
typedef enum tc__op {
    /* binary: out = a op b */
    TC__OP_ADD,
    TC__OP_SUB,
    TC__OP_MUL,
    TC__OP_DIV,
    TC__OP_POW,
    TC__OP_MAXIMUM,
    TC__OP_MINIMUM,
    TC__OP_REMAINDER, /* Python's %: the sign of the divisor */
    /* comparisons: bool out */
    TC__OP_EQ,
    TC__OP_NE,
    TC__OP_LT,
    TC__OP_LE,
    TC__OP_GT,
    TC__OP_GE,
    /* unary */
    TC__OP_NEG,
    TC__OP_ABS,
    TC__OP_EXP,
    TC__OP_LOG,
    TC__OP_SQRT,
    TC__OP_RELU,
    TC__OP_SIGMOID,
    TC__OP_TANH,
    TC__OP_RSQRT,
    TC__OP_SIN,
    TC__OP_COS,
    TC__OP_ERF,
    TC__OP_FLOOR, /* floor, ceil, round: the identity for integers */
    TC__OP_CEIL,
    TC__OP_ROUND,     /* half to even */
    TC__OP_GELU,      /* x * Phi(x), through erf */
    TC__OP_GELU_TANH, /* the tanh approximation */
    TC__OP_SILU,
    /* reductions */
    TC__RED_SUM,
    TC__RED_MEAN,
    TC__RED_MAX,
    TC__RED_MIN,
    TC__RED_ARGMAX,
    TC__RED_PROD,
    TC__RED_ARGMIN,
    /* scans (inclusive, along one dimension) */
    TC__SCAN_CUMSUM
} tc__op;

/* jiterator runs up to 8 operands (inputs + outputs) through one iter. */
#define TC__MAX_OPERANDS 8

typedef struct tc__iter {
    int ndim;
    int nops; /* operand 0 is the output */
    bool contiguous;
    int64_t numel;
    int64_t sizes[TC_MAX_DIMS];
    int64_t strides[TC__MAX_OPERANDS][TC_MAX_DIMS];
    void *data[TC__MAX_OPERANDS];
} tc__iter;

/* A value for fills: start + i * step (step 0 for a constant). A constant
 * integer fill stores istart, so that large values stay exact; a range is
 * computed in double, as PyTorch's arange is. */
typedef struct tc__fill {
    double start, step;
    int64_t istart;
} tc__fill;

#endif
