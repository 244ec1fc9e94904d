/* NVTX in a build without CUDA: marks go nowhere, ranges only keep the
 * per-thread depth (nvtx_depth.h), so push and pop answer as with NVTX, and
 * are the memory history's annotations as there, on device 0 (the one the
 * history's host allocators take). */
#include "runtime/nvtx_depth.h"
#include "tcuda/nvtx.h"

static int note_device(void) { return 0; }

void tc_nvtx_mark(const char *message) { (void)message; }

tc_status tc_nvtx_range_push(const char *message, int *depth)
{
    return tc__nvtx_depth_push(message, depth, note_device);
}

tc_status tc_nvtx_range_pop(int *depth) { return tc__nvtx_depth_pop(depth, note_device); }
