/* NVTX in a build without CUDA: marks go nowhere, ranges only keep the
 * per-thread depth (nvtx_depth.h), so push and pop return what they return
 * with NVTX. */
#include "runtime/nvtx_depth.h"
#include "tcuda/nvtx.h"

void tc_nvtx_mark(const char *message) { (void)message; }

int tc_nvtx_range_push(const char *message) { return tc__nvtx_depth_push(message); }

int tc_nvtx_range_pop(void) { return tc__nvtx_depth_pop(); }
