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
/* A pool with an allocator of its own (`own`, made on the functions of user
 * allocator `user` through a provider whose context `ctx` is freed with
 * it); the pool takes own and ctx. */
tc_status tc__mempool_create_own(tc__allocator *own, void *ctx, const void *user, int device,
                                 tc_mempool **out);
/* TC_OK when no pool's allocator (live, or released with live blocks) calls
 * user allocator `user`; else TC_ERROR_INVALID_STATE with a message naming
 * how many do (tc_allocator_destroy refuses then). */
tc_status tc__mempool_check_unused(const void *user);
/* The allocator that serves this thread's allocations on `device`: the
 * innermost pool's in use on it (its own or the device's), else dflt. */
tc__allocator *tc__mempool_route(int device, tc__allocator *dflt);
/* Frees ptr if an own allocator of a pool holds it (false otherwise). */
bool tc__mempool_free_own(void *ptr);
/* The own allocator that holds the live block ptr, or NULL. */
tc__allocator *tc__mempool_owner(const void *ptr);

#endif
