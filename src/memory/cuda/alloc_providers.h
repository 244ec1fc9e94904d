/* CUDA segment providers for the caching allocator (internal). */
#ifndef TCUDA_ALLOC_PROVIDERS_H
#define TCUDA_ALLOC_PROVIDERS_H

#include <stdbool.h>

#include "memory/alloc.h"

/* cudaMalloc segments, or with expandable CUDA virtual memory (fails with
 * TC_ERROR_NOT_SUPPORTED when the driver lacks it). */
tc_status tc__device_provider(int device, bool expandable, tc__seg_provider *p);
/* Pinned host segments (cudaHostAlloc). */
void tc__pinned_provider(tc__seg_provider *p);
/* The virtual memory mapping step of device (2 MiB or more). */
size_t tc__vm_granularity(int device);

#endif
