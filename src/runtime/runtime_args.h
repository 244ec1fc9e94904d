/* The argument checks of the runtime's calls (device.h, stream.h) that are
 * more than a NULL check, shared by their implementations (runtime/cuda)
 * and the stand-ins of a build without CUDA (nocuda/runtime.c), so that both
 * answer bad input alike. Not installed. */
#ifndef TCUDA_RUNTIME_ARGS_H
#define TCUDA_RUNTIME_ARGS_H

#include "base/internal.h"
#include "tcuda/stream.h"

/* tc_event_create: out, and TC_EVENT_FLAG_* bits CUDA takes together. */
static inline tc_status tc__event_create_check(unsigned flags, tc_event **out)
{
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG((flags & ~(unsigned)(TC_EVENT_FLAG_TIMING | TC_EVENT_FLAG_BLOCKING |
                                      TC_EVENT_FLAG_INTERPROCESS)) == 0,
                 "unknown flags 0x%x (use TC_EVENT_FLAG_TIMING, TC_EVENT_FLAG_BLOCKING, "
                 "TC_EVENT_FLAG_INTERPROCESS)",
                 flags);
    TC_CHECK_ARG(!((flags & TC_EVENT_FLAG_TIMING) && (flags & TC_EVENT_FLAG_INTERPROCESS)),
                 "an interprocess event cannot time (CUDA forbids TC_EVENT_FLAG_TIMING with "
                 "TC_EVENT_FLAG_INTERPROCESS)");
    return TC_OK;
}

#endif
