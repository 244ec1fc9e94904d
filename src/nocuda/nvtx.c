/* NVTX in a build without CUDA: marks go nowhere, ranges only keep the
 * per-thread depth (nvtx_depth.h), so push and pop answer as with NVTX. */
#include "runtime/nvtx_depth.h"
#include "tcuda/nvtx.h"

void tc_nvtx_mark(const char *message) { (void)message; }

tc_status tc_nvtx_range_push(const char *message, int *depth)
{
    return tc__nvtx_depth_push(message, depth);
}

tc_status tc_nvtx_range_pop(int *depth) { return tc__nvtx_depth_pop(depth); }
