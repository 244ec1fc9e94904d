/* NVTX marks and ranges (torch.cuda.nvtx).
 *
 * With CUDA, the calls go to NVTX 3 (header-only, from the CUDA toolkit),
 * which does nothing until a tool such as Nsight Systems attaches. tcuda keeps
 * each thread's range depth itself, so push and pop return the same depths
 * whether or not a tool listens, and in a build without CUDA. */
#include "internal.h"
#include "tcuda/nvtx.h"

#if defined(TCUDA_HAVE_CUDA)
#include <nvtx3/nvToolsExt.h>
#define TC_NVTX_MARK(m) nvtxMarkA(m)
#define TC_NVTX_PUSH(m) (void)nvtxRangePushA(m)
#define TC_NVTX_POP() (void)nvtxRangePop()
#else
#define TC_NVTX_MARK(m) ((void)(m))
#define TC_NVTX_PUSH(m) ((void)(m))
#define TC_NVTX_POP() ((void)0)
#endif

static _Thread_local int tls_depth;

void tc_nvtx_mark(const char *message)
{
    if (message)
        TC_NVTX_MARK(message);
}

int tc_nvtx_range_push(const char *message)
{
    if (!message) {
        (void)tc__fail(TC_ERROR_INVALID_ARGUMENT, "tc_nvtx_range_push: message must not be NULL");
        return -1;
    }
    TC_NVTX_PUSH(message);
    return tls_depth++;
}

int tc_nvtx_range_pop(void)
{
    if (tls_depth == 0) {
        (void)tc__fail(TC_ERROR_INVALID_STATE,
                       "tc_nvtx_range_pop: no range is open on this thread");
        return -1;
    }
    TC_NVTX_POP();
    return --tls_depth;
}
