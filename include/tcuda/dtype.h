/* tcuda: element types of buffers and tensors (torch.dtype). */
#ifndef TCUDA_DTYPE_H
#define TCUDA_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include "status.h"

TCUDA_EXTERN_C_BEGIN

typedef enum tc_dtype {
    TC_BOOL = 0,
    TC_UINT8,
    TC_INT8,
    TC_INT16,
    TC_INT32,
    TC_INT64,
    TC_FLOAT16,
    TC_BFLOAT16,
    TC_FLOAT32,
    TC_FLOAT64,
    TC_NUM_DTYPES
} tc_dtype;

/* Bytes per element; 0 for a value that is not a tc_dtype. Cannot fail. */
TCUDA_API size_t tc_dtype_size(tc_dtype dtype);
/* "float32", "bfloat16", ... (torch's names); "invalid" for a value that is
 * not a tc_dtype. Never NULL. */
TCUDA_API const char *tc_dtype_string(tc_dtype dtype);
/* True for float16, bfloat16, float32, float64; false for the others and
 * for a value that is not a tc_dtype. Cannot fail. */
TCUDA_API bool tc_dtype_is_floating(tc_dtype dtype);

TCUDA_EXTERN_C_END

#endif
