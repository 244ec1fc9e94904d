/* Memory snapshots of the public API: every device allocator's segments
 * and blocks at one time (tc_memory_snapshot; writing and destroying one
 * needs no GPU: src/memory). */
#include <stdlib.h>

#include "runtime/cuda/cuda_internal.h"
#include "memory_internal.h"

tc_status tc_memory_snapshot(tc_memory_snapshot_info **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__ensure_init());
    tc_memory_snapshot_info *snap = calloc(1, sizeof *snap);
    if (!snap)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (int d = 0; d < tc__num_devices; d++) {
        tc__allocator *a = atomic_load_explicit(&tc__mem_allocs[d], memory_order_acquire);
        tc_status st = a ? tc__alloc_snapshot(a, snap) : TC_OK;
        if (st != TC_OK) {
            (void)tc_memory_snapshot_destroy(snap);
            return st;
        }
    }
    *out = snap;
    return TC_OK;
}
