/* tcuda: NVTX marks and ranges (torch.cuda.nvtx), shown by Nsight Systems and
 * other tools. When no tool listens they cost almost nothing. In a build
 * without CUDA they only keep the range depth.
 *
 * Ranges are also tcuda's record_function for memory snapshots: while the
 * memory history records (tc_memory_record_history, memory.h), a push keeps
 * a START annotation with the range's name and the current device (0 when
 * there is none), and its pop an END with the same name; a dump lists them
 * as "external_annotations". A range pushed while the history was off
 * records no END; one pushed while recording records its END only if the
 * history still records. The name is copied while recording only; a thread
 * that exits with ranges open leaks those copies. */
#ifndef TCUDA_NVTX_H
#define TCUDA_NVTX_H

#include "status.h"

TCUDA_EXTERN_C_BEGIN

/* An instantaneous event named `message` (NULL is ignored). Cannot fail. */
TCUDA_API void tc_nvtx_mark(const char *message);

/* Opens a nested range on the calling thread and writes its zero-based
 * depth to *depth (NULL: not wanted). TC_ERROR_INVALID_ARGUMENT for a NULL
 * message. */
TCUDA_API tc_status tc_nvtx_range_push(const char *message, int *depth);

/* Closes the innermost open range of the calling thread and writes the
 * zero-based depth of the range that ended to *depth (NULL: not wanted).
 * TC_ERROR_INVALID_STATE when no range is open. */
TCUDA_API tc_status tc_nvtx_range_pop(int *depth);

TCUDA_EXTERN_C_END

#endif
