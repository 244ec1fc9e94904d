/* User allocators (tc_allocator): made from two functions or loaded from a
 * shared object, made current before the first allocation, destroyed.
 * They are checked handles: a destroyed one is parked in a handle pool; the
 * current one is never destroyed, since memory it served may still be freed
 * through it. */
#include <dlfcn.h>
#include <string.h>

#include "memory/memory_args.h"
#include "base/handle_pool.h"
#include "memory/alloc_mempool.h"
#include "memory_internal.h"

#define TC_ALLOCATOR_MAGIC 0x7c41a110u

static tc__handle_pool allocator_pool = TC_HANDLE_POOL_INIT(struct tc_allocator);

/* ---- user allocators ---------------------------------------------------------- */

tc_status tc__mem_check_allocator(const tc_allocator *a)
{
    return tc__handle_check(a, TC_ALLOCATOR_MAGIC, "tc_allocator");
}

static tc_status new_allocator(tc_alloc_fn alloc_fn, tc_free_fn free_fn, void *dl,
                               tc_allocator **out)
{
    tc_allocator *u = tc__handle_get(&allocator_pool);
    if (!u)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for an allocator");
    u->magic = TC_ALLOCATOR_MAGIC;
    u->alloc = alloc_fn;
    u->free = free_fn;
    u->dl = dl;
    *out = u;
    return TC_OK;
}

tc_status tc_allocator_create(tc_alloc_fn alloc_fn, tc_free_fn free_fn, tc_allocator **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__allocator_create_check(alloc_fn, free_fn, out));
    return new_allocator(alloc_fn, free_fn, NULL, out);
}

tc_status tc_allocator_create_from_library(const char *so_path, const char *alloc_fn,
                                           const char *free_fn, tc_allocator **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__allocator_library_check(so_path, alloc_fn, free_fn, out));
    void *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "cannot load allocator '%s': %s", so_path,
                        dlerror());
    void *af = dlsym(h, alloc_fn), *ff = dlsym(h, free_fn);
    if (!af || !ff) {
        dlclose(h);
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "'%s' has no function named '%s'", so_path,
                        !af ? alloc_fn : free_fn);
    }
    tc_alloc_fn a;
    tc_free_fn f;
    memcpy(&a, &af, sizeof a);
    memcpy(&f, &ff, sizeof f);
    tc_status st = new_allocator(a, f, h, out);
    if (st != TC_OK)
        dlclose(h);
    return st;
}

tc_status tc_change_current_allocator(tc_allocator *allocator)
{
    TC_API_BEGIN;
    pthread_mutex_lock(&tc__mem_mu); /* against a concurrent tc_allocator_destroy */
    tc_status st = tc__mem_check_allocator(allocator);
    if (st == TC_OK && atomic_load(&tc__mem_any_alloc))
        st = tc__fail(TC_ERROR_INVALID_STATE, "device memory was already allocated; change "
                                              "the allocator before the first allocation");
    if (st == TC_OK)
        tc__mem_user_alloc = allocator;
    pthread_mutex_unlock(&tc__mem_mu);
    return st;
}

tc_status tc_allocator_destroy(tc_allocator *allocator)
{
    TC_API_BEGIN;
    pthread_mutex_lock(&tc__mem_mu);
    tc_status st = tc__mem_check_allocator(allocator);
    if (st == TC_OK && allocator == tc__mem_user_alloc)
        st = tc__fail(TC_ERROR_INVALID_STATE, "it is the current allocator, which serves device "
                                              "memory until the process exits");
    if (st == TC_OK) /* a pool's memory comes from it, and goes back through it */
        st = tc__mempool_check_unused(allocator);
    void *dl = st == TC_OK ? allocator->dl : NULL;
    if (st == TC_OK)
        tc__handle_put(&allocator_pool, allocator);
    pthread_mutex_unlock(&tc__mem_mu);
    if (dl)
        dlclose(dl);
    return st;
}
