/* Memory history's notes (internal): what the layers above the allocator
 * write into the history besides its events. The runtime's NVTX ranges are
 * tcuda's record_function: while recording, tc_nvtx_range_push and _pop
 * call tc__hist_annotate, whose START and END entries a snapshot writes as
 * "external_annotations". The rest of the notes (the user's metadata, the
 * copy a dump takes) is declared in alloc_history.h. */
#ifndef TCUDA_ALLOC_HISTORY_NOTES_H
#define TCUDA_ALLOC_HISTORY_NOTES_H

#include <stdatomic.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What is recorded (alloc_history.h); 0 when the history is off. */
extern atomic_uint tc__hist_mask;

/* Whether the history records now: one relaxed load. */
static inline bool tc__hist_recording(void)
{
    return atomic_load_explicit(&tc__hist_mask, memory_order_relaxed) != 0;
}

/* Records an annotation: the start (or end) of the scope `name` (copied) on
 * `device`, timed now, in the history's ring of annotations (bounded by
 * max_entries, the oldest dropped). Nothing while the history is off, or
 * when host memory runs out (an annotation is not worth a failure). */
void tc__hist_annotate(const char *name, bool start, int device);

#ifdef __cplusplus
}
#endif

#endif
