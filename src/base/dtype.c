/* Element types: sizes and names. */
#include "tcuda/dtype.h"

static const struct {
    const char *name;
    size_t size;
    bool floating;
} info[TC_NUM_DTYPES] = {
    [TC_BOOL] = {"bool", 1, false},      [TC_UINT8] = {"uint8", 1, false},
    [TC_INT8] = {"int8", 1, false},      [TC_INT16] = {"int16", 2, false},
    [TC_INT32] = {"int32", 4, false},    [TC_INT64] = {"int64", 8, false},
    [TC_FLOAT16] = {"float16", 2, true}, [TC_BFLOAT16] = {"bfloat16", 2, true},
    [TC_FLOAT32] = {"float32", 4, true}, [TC_FLOAT64] = {"float64", 8, true},
};

static bool valid(tc_dtype d) { return (unsigned)d < TC_NUM_DTYPES; }

size_t tc_dtype_size(tc_dtype d) { return valid(d) ? info[d].size : 0; }
const char *tc_dtype_string(tc_dtype d) { return valid(d) ? info[d].name : "invalid"; }
bool tc_dtype_is_floating(tc_dtype d) { return valid(d) && info[d].floating; }
