/* NVTX marks and ranges (torch.cuda.nvtx) through NVTX 3 (header-only, from
 * the CUDA toolkit), which does nothing until a tool such as Nsight Systems
 * attaches. tcuda keeps each thread's range depth itself (nvtx_depth.h), so
 * push and pop return the same depths whether or not a tool listens, and in
 * a build without CUDA (nocuda/nvtx.c). While the memory history records,
 * ranges are also its annotations (nvtx_depth.h). */
#include <nvtx3/nvToolsExt.h>

#include "runtime/nvtx_depth.h"
#include "tcuda/device.h"
#include "tcuda/nvtx.h"

/* The device an annotation names: the thread's current one, or 0 when it
 * cannot be had (no GPU), keeping the thread's last error as it was. */
static int note_device(void)
{
    tc__saved_message saved;
    tc__message_save(&saved);
    int d = 0;
    if (tc_current_device(&d) != TC_OK)
        d = 0;
    tc__message_restore(&saved);
    return d;
}

void tc_nvtx_mark(const char *message)
{
    if (message)
        nvtxMarkA(message);
}

tc_status tc_nvtx_range_push(const char *message, int *depth)
{
    TC_TRY(tc__nvtx_depth_push(message, depth, note_device));
    (void)nvtxRangePushA(message);
    return TC_OK;
}

tc_status tc_nvtx_range_pop(int *depth)
{
    TC_TRY(tc__nvtx_depth_pop(depth, note_device));
    (void)nvtxRangePop();
    return TC_OK;
}
