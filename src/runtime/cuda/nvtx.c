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

tc_status tc_nvtx_range_push(const char *message, int *depth)
{
    TC_TRY(tc__nvtx_depth_push(message, depth));
    (void)nvtxRangePushA(message);
    return TC_OK;
}

tc_status tc_nvtx_range_pop(int *depth)
{
    TC_TRY(tc__nvtx_depth_pop(depth));
    (void)nvtxRangePop();
    return TC_OK;
}
