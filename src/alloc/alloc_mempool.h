/* User memory pools on the caching allocator (internal): the thread's pool
 * routing that malloc consults, and the handle functions shared by both
 * builds (the CUDA side only finds the device's allocator). */
#ifndef TCUDA_ALLOC_MEMPOOL_H
#define TCUDA_ALLOC_MEMPOOL_H

#include <stdatomic.h>

#include "alloc.h"

/* Threads inside a tc_mempool_use_begin now: malloc looks at its thread's
 * pools only when this is not 0 (one relaxed load otherwise). */
extern atomic_int tc__mempool_users;

/* The pool this thread's allocations from `a` go to (0: none). */
uint64_t tc__mempool_current(const tc__allocator *a);

/* A pool handle on allocator a (device `device`); ids have the top bit set,
 * apart from graph pools' ids. */
tc_status tc__mempool_create_on(tc__allocator *a, int device, tc_mempool **out);

#endif
