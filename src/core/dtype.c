/* Element types: sizes and names. */
#include "tcuda/dtype.h"

static const struct {
    const char *name;
    size_t size;
    int floating;
} info[TC_NUM_DTYPES] = {
    [TC_BOOL] = {"bool", 1, 0},         [TC_UINT8] = {"uint8", 1, 0},
    [TC_INT8] = {"int8", 1, 0},         [TC_INT16] = {"int16", 2, 0},
    [TC_INT32] = {"int32", 4, 0},       [TC_INT64] = {"int64", 8, 0},
    [TC_FLOAT16] = {"float16", 2, 1},   [TC_BFLOAT16] = {"bfloat16", 2, 1},
    [TC_FLOAT32] = {"float32", 4, 1},   [TC_FLOAT64] = {"float64", 8, 1},
};

static int valid(tc_dtype d) { return (unsigned)d < TC_NUM_DTYPES; }

size_t tc_dtype_size(tc_dtype d) { return valid(d) ? info[d].size : 0; }
const char *tc_dtype_name(tc_dtype d) { return valid(d) ? info[d].name : "invalid"; }
int tc_dtype_is_floating(tc_dtype d) { return valid(d) && info[d].floating; }
