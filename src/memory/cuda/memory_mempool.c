/* tc_mempool_create: a user pool of the device's caching allocator
 * (alloc_mempool.c), or, on a user allocator, a pool of an allocator of its
 * own whose segments come from the user's functions. */
#include <stdlib.h>

#include "alloc_providers.h"
#include "base/internal.h"
#include "memory/alloc_mempool.h"
#include "memory_internal.h"

/* A pool's own provider: the device's (events, memory info), with the
 * user allocator's functions for segments. */
typedef struct user_prov {
    tc__seg_provider base;
    tc_allocator *u;
    int device;
} user_prov;

static tc_status up_alloc(void *ctx, size_t size, uintptr_t stream, void **out)
{
    user_prov *c = ctx;
    void *p = c->u->alloc(size, c->device, (void *)stream);
    if (!p)
        return TC_ERROR_OUT_OF_MEMORY;
    *out = p;
    return TC_OK;
}
static void up_free(void *ctx, void *ptr, size_t size)
{
    user_prov *c = ctx;
    c->u->free(ptr, size, c->device, NULL);
}
static void up_info(void *ctx, size_t *fr, size_t *tot)
{
    user_prov *c = ctx;
    c->base.mem_info(c->base.ctx, fr, tot);
}
static void *up_record(void *ctx, uintptr_t stream)
{
    user_prov *c = ctx;
    return c->base.event_record ? c->base.event_record(c->base.ctx, stream) : NULL;
}
static int up_query(void *ctx, void *ev)
{
    user_prov *c = ctx;
    return c->base.event_query(c->base.ctx, ev);
}
static void up_sync(void *ctx, void *ev)
{
    user_prov *c = ctx;
    c->base.event_sync(c->base.ctx, ev);
}
static void up_destroy(void *ctx, void *ev)
{
    user_prov *c = ctx;
    c->base.event_destroy(c->base.ctx, ev);
}

/* An allocator on `u`'s functions for device d; the pool takes it. */
static tc_status own_pool(int d, tc_allocator *u, tc_mempool **out)
{
    user_prov *c = calloc(1, sizeof *c);
    if (!c)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for a pool");
    tc_status st = tc__device_provider(d, false, &c->base);
    tc__seg_provider p = {.name = "user pool",
                          .ctx = c,
                          .alloc = up_alloc,
                          .free = up_free,
                          .mem_info = up_info,
                          .free_waits = true};
    if (c->base.event_record) {
        p.event_record = up_record;
        p.event_query = up_query;
        p.event_sync = up_sync;
        p.event_destroy = up_destroy;
    }
    c->u = u;
    c->device = d;
    tc__alloc_config cfg = tc__mem_conf;
    cfg.expandable_segments = false; /* the user allocator maps nothing */
    tc__allocator *a = NULL;
    if (st == TC_OK)
        st = tc__alloc_create(&p, &cfg, d, &a);
    if (st == TC_OK)
        st = tc__mempool_create_own(a, c, u, d, out);
    if (st != TC_OK) { /* nothing was made: the new allocator goes too */
        if (a)
            tc__alloc_destroy(a);
        free(c);
    }
    return st;
}

/* A user pool of the device's caching allocator (alloc_mempool.c). */
tc_status tc_mempool_create(int device, tc_allocator *allocator, tc_mempool **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    if (allocator)
        TC_TRY(tc__mem_check_allocator(allocator));
    int d = 0;
    cudaStream_t s = NULL;
    TC_TRY(tc__mem_resolve(device, NULL, &d, &s));
    tc__allocator *a;
    TC_TRY(tc__mem_get_allocator(d, &a));
    if (tc__mem_conf.backend == 1 || tc__mem_user_alloc)
        return tc__fail(TC_ERROR_NOT_SUPPORTED, "memory pools need the native caching allocator, "
                                                "not cudaMallocAsync or a user allocator");
    if (!allocator)
        return tc__mempool_create_on(a, d, out);
    pthread_mutex_lock(&tc__mem_mu); /* against a concurrent tc_allocator_destroy */
    tc_status st = tc__mem_check_allocator(allocator);
    if (st == TC_OK)
        st = own_pool(d, allocator, out);
    pthread_mutex_unlock(&tc__mem_mu);
    return st;
}
