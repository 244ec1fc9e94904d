/* What the rest of tcuda (tensors, graphs) calls to get device memory: the
 * caching allocator of a device, with CUDA streams as they are. Not installed.
 * Ownership: a pointer from tc__device_alloc goes back with tc__device_free
 * (from any thread). record_stream marks work on another stream that uses the
 * memory, so its reuse waits for that work. */
#ifndef TCUDA_DEVICE_ALLOC_H
#define TCUDA_DEVICE_ALLOC_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "tcuda/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* size bytes on `device` (>= 0, already resolved) for `stream`; size 0 gives
 * NULL. TC_ERROR_OUT_OF_MEMORY with the full message when the GPU refuses. */
tc_status tc__device_alloc(int device, cudaStream_t stream, size_t size, void **out);
/* Returns memory to its device's cache; NULL is a no-op. */
tc_status tc__device_free(void *ptr);
/* The block at ptr is used by work on `stream` too. */
tc_status tc__device_record_stream(void *ptr, cudaStream_t stream);

/* Memory IPC (dist/cuda/ipc.c) tells the statistics how to count the blocks
 * of a device it holds for consumers in other processes ("ipc_shared_blocks"
 * and "_bytes" of tc_memory_stats_get; 0 until it shares one). */
typedef void (*tc__ipc_stats_fn)(int device, int64_t *blocks, int64_t *bytes);
void tc__device_set_ipc_stats(tc__ipc_stats_fn fn);

/* The pinned host block at ptr is used by work on `stream` of `device`. */
tc_status tc__host_record_stream(void *ptr, int device, cudaStream_t stream);

/* Private pools for graph capture: allocations on `stream` of `device` come
 * from pool `id` until end; release lets the pool's memory go. */
tc_status tc__device_pool_begin(int device, uint64_t id, cudaStream_t stream);
tc_status tc__device_pool_end(int device, cudaStream_t stream);
tc_status tc__device_pool_release(int device, uint64_t id);

#ifdef __cplusplus
}
#endif

#endif
