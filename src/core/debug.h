/* Debug switches that need no CUDA: sync debug mode and CUDA_LAUNCH_BLOCKING. */
#ifndef TCUDA_DEBUG_H
#define TCUDA_DEBUG_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Call before any call that makes the host wait for a stream: warns (mode 1)
 * or fails with TC_ERROR_SYNC_DISALLOWED (mode 2), naming `what`. */
tc_status tc__sync_point(const char *what);

/* 1 when CUDA_LAUNCH_BLOCKING was set to a true value. */
bool tc__launch_blocking_enabled(void);

#ifdef __cplusplus
}
#endif

#endif
