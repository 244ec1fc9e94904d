/* What the files of the public memory API (memory*.c) share: the device
 * allocators and their settings, the user allocator, and the calls one
 * file makes into another. Not installed; device_alloc.h is what the rest
 * of tcuda calls. */
#ifndef TCUDA_MEMORY_INTERNAL_H
#define TCUDA_MEMORY_INTERNAL_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>

#include "memory/alloc.h"
#include "tcuda/memory.h"
#include "tcuda/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tc_allocator {
    uint32_t magic; /* first: tc__handle_check */
    tc_alloc_fn alloc;
    tc_free_fn free;
    void *dl; /* the shared object it came from, or NULL */
};

/* ---- memory.c ----------------------------------------------------------- */

/* Guards the settings, the lazy creation, the pointer map and user allocators. */
extern pthread_mutex_t tc__mem_mu;
/* TCUDA_ALLOC_CONF as parsed (valid once an allocator exists). */
extern tc__alloc_config tc__mem_conf;
/* Each device's caching allocator, NULL until its first use. */
extern _Atomic(tc__allocator *) tc__mem_allocs[TC_MAX_DEVICES];
/* The current user allocator, or NULL (under tc__mem_mu to change). */
extern tc_allocator *tc__mem_user_alloc;
/* Set by the first device allocation: the user allocator cannot change after it. */
extern atomic_bool tc__mem_any_alloc;
/* Statistics of the async backend and user allocators (under tc__mem_mu). */
extern tc_memory_stats_info tc__mem_ext_stats[TC_MAX_DEVICES];
/* Device d's caching allocator, made on first use (TCUDA_ALLOC_CONF's error if bad). */
tc_status tc__mem_get_allocator(int d, tc__allocator **out);
/* Resolves (device, stream) arguments to a device index and a CUDA stream. */
tc_status tc__mem_resolve(int device, tc_stream *stream, int *d, cudaStream_t *s);

/* ---- memory_allocators.c ------------------------------------------------ */

/* TC_OK when a is a live user allocator handle. */
tc_status tc__mem_check_allocator(const tc_allocator *a);

#ifdef __cplusplus
}
#endif

#endif
