/* tcuda: NVTX marks and ranges (torch.cuda.nvtx), shown by Nsight Systems and
 * other tools. When no tool listens they cost almost nothing. In a build
 * without CUDA they only keep the range depth. */
#ifndef TCUDA_NVTX_H
#define TCUDA_NVTX_H

#include "status.h"

TCUDA_EXTERN_C_BEGIN

/* An instantaneous event named `message` (NULL is ignored). */
TCUDA_API void tc_nvtx_mark(const char *message);

/* Opens a nested range on the calling thread; returns its zero-based depth,
 * or -1 if `message` is NULL. */
TCUDA_API int tc_nvtx_range_push(const char *message);

/* Closes the innermost open range of the calling thread; returns the
 * zero-based depth of the range that ended, or -1 (with a message) when no
 * range is open. */
TCUDA_API int tc_nvtx_range_pop(void);

TCUDA_EXTERN_C_END

#endif
