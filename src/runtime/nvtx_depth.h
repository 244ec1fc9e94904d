/* The per-thread range depth behind tc_nvtx_range_push/pop, shared by the
 * NVTX build (nvtx.c) and the one without CUDA (nocuda/nvtx.c), so push and
 * pop return the same depths whether or not a tool listens. Not installed. */
#ifndef TCUDA_NVTX_DEPTH_H
#define TCUDA_NVTX_DEPTH_H

#include "base/internal.h"

static _Thread_local int tc__nvtx_depth;

/* The depth before a push of `message` (-1 and a message for NULL). */
static inline int tc__nvtx_depth_push(const char *message)
{
    if (!message) {
        (void)tc__fail(TC_ERROR_INVALID_ARGUMENT, "tc_nvtx_range_push: message must not be NULL");
        return -1;
    }
    return tc__nvtx_depth++;
}

/* The depth after a pop (-1 and a message when no range is open). */
static inline int tc__nvtx_depth_pop(void)
{
    if (tc__nvtx_depth == 0) {
        (void)tc__fail(TC_ERROR_INVALID_STATE,
                       "tc_nvtx_range_pop: no range is open on this thread");
        return -1;
    }
    return --tc__nvtx_depth;
}

#endif
