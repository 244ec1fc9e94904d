/* CUDA segment providers for the caching allocator (internal). */
#ifndef TCUDA_ALLOC_PROVIDERS_H
#define TCUDA_ALLOC_PROVIDERS_H

#include <stdbool.h>
#include <stdint.h>

#include "memory/alloc.h"

/* cudaMalloc segments, or with expandable CUDA virtual memory (fails with
 * TC_ERROR_NOT_SUPPORTED when the driver lacks it). */
tc_status tc__device_provider(int device, bool expandable, tc__seg_provider *p);
/* Pinned host segments (cudaHostAlloc). Its allocator names streams by
 * tc__host_stream_key, and its events are made on each stream's device. */
void tc__pinned_provider(tc__seg_provider *p);

/* The pinned host cache's name for `handle`, a stream of `device`: the
 * handle itself, except for CUDA's special handles (0, cudaStreamLegacy,
 * cudaStreamPerThread), which name another stream on each device and so
 * carry the device (a block read by cuda:1's default stream and freed while
 * cuda:0 is current must wait for cuda:1's). */
#define TC__HOST_SPECIAL_KEY0 ((uintptr_t)0x100)
static inline uintptr_t tc__host_stream_key(int device, const void *handle)
{
    uintptr_t h = (uintptr_t)handle;
    return h > 2 ? h : TC__HOST_SPECIAL_KEY0 + (uintptr_t)device * 4 + h;
}
/* The virtual memory mapping step of device (2 MiB or more). */
size_t tc__vm_granularity(int device);

#endif
