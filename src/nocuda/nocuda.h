/* What the files of src/nocuda share: the one answer of a build without
 * CUDA, and the one check of a handle no call here can have made. Every
 * stub checks its arguments as the call of the CUDA build does (the
 * validators shared with it where there is more than a NULL check), then
 * answers with tc__nocuda(); tests/test_no_device_args.c holds both builds
 * to one table. Not installed. */
#ifndef TCUDA_NOCUDA_H
#define TCUDA_NOCUDA_H

#include "base/handle_pool.h"
#include "base/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TC_ERROR_NO_DEVICE: "CUDA is not available: tcuda was built without CUDA
 * (TCUDA_CUDA=OFF or no nvcc at configure time)". A bad CUDA_LAUNCH_BLOCKING
 * or TCUDA_SYNC_DEBUG_MODE is reported first, as a CUDA build reports it
 * before it looks for a GPU. The message starts with the public call. */
tc_status tc__nocuda(void);

/* A handle argument: no stream, event, graph, allocator, group or work can
 * exist in this build, so NULL is TC_ERROR_INVALID_ARGUMENT and anything
 * else TC_ERROR_INVALID_HANDLE, as the CUDA build's check answers for a
 * pointer it did not make. */
static inline tc_status tc__nocuda_handle(const void *h, const char *type)
{
    return tc__handle_fail(h, 0, type);
}

#ifdef __cplusplus
}
#endif

#endif
