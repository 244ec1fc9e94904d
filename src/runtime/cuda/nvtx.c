/* NVTX marks and ranges (torch.cuda.nvtx) through NVTX 3 (header-only, from
 * the CUDA toolkit), which does nothing until a tool such as Nsight Systems
 * attaches. tcuda keeps each thread's range depth itself (nvtx_depth.h), so
 * push and pop return the same depths whether or not a tool listens, and in
 * a build without CUDA (nocuda/nvtx.c). */
#include <nvtx3/nvToolsExt.h>

#include "runtime/nvtx_depth.h"
#include "tcuda/nvtx.h"

void tc_nvtx_mark(const char *message)
{
    if (message)
        nvtxMarkA(message);
}

int tc_nvtx_range_push(const char *message)
{
    int depth = tc__nvtx_depth_push(message);
    if (depth >= 0)
        (void)nvtxRangePushA(message);
    return depth;
}

int tc_nvtx_range_pop(void)
{
    int depth = tc__nvtx_depth_pop();
    if (depth >= 0)
        (void)nvtxRangePop();
    return depth;
}
