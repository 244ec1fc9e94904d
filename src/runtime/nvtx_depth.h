/* The per-thread range depth behind tc_nvtx_range_push/pop, shared by the
 * NVTX build (nvtx.c) and the one without CUDA (nocuda/nvtx.c), so push and
 * pop return the same depths whether or not a tool listens. Not installed. */
#ifndef TCUDA_NVTX_DEPTH_H
#define TCUDA_NVTX_DEPTH_H

#include "base/internal.h"

static _Thread_local int tc__nvtx_depth;

/* Counts a push of `message`; the depth before it into *depth (if not NULL).
 * TC_ERROR_INVALID_ARGUMENT for a NULL message. */
static inline tc_status tc__nvtx_depth_push(const char *message, int *depth)
{
    if (!message)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "tc_nvtx_range_push: message is NULL");
    int d = tc__nvtx_depth++;
    if (depth)
        *depth = d;
    return TC_OK;
}

/* Counts a pop; the depth after it into *depth (if not NULL).
 * TC_ERROR_INVALID_STATE when no range is open. */
static inline tc_status tc__nvtx_depth_pop(int *depth)
{
    if (tc__nvtx_depth == 0)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "tc_nvtx_range_pop: no range is open on this thread");
    int d = --tc__nvtx_depth;
    if (depth)
        *depth = d;
    return TC_OK;
}

#endif
