/* User memory pools: a handle around a private pool of a device's caching
 * allocator (alloc_pools.c keeps the pool's record, so its segments serve
 * only it), routed by thread: tc_mempool_use_begin pushes (allocator, pool)
 * on the thread's stack of up to 8, and malloc asks tc__mempool_current,
 * but only while some thread has a pool in use (tc__mempool_users), so that
 * the allocation path pays one relaxed load otherwise. A pool is released
 * only when no thread uses it (its `users` count).
 *
 * A pool made with a user allocator has an allocator of its own (`own`,
 * whose segments come from the user's functions): the device's allocation
 * entry asks tc__mempool_route which allocator serves this thread, and a
 * free that no device allocator owns asks tc__mempool_free_own. Such an
 * allocator outlives its handle while blocks of it are live, and is
 * destroyed (its memory given back through the user's free) when the last
 * goes. */
#include "alloc_mempool.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/handle_pool.h"
#include "alloc_internal.h"

#define TC_MEMPOOL_MAGIC 0x3e3b0011u
#define MAX_USES 8

struct tc_mempool {
    uint32_t magic; /* first: tc__handle_check */
    int device;
    uint64_t id;
    tc__allocator *a;
    atomic_int users; /* uses begun and not ended, all threads */
    bool own;         /* a is the pool's own allocator (a user allocator's) */
};

/* Own allocators, live or released with blocks still live. */
typedef struct own_ent {
    tc__allocator *a;
    void *ctx;        /* the provider's context, freed with it */
    const void *user; /* the user allocator (tc_allocator) whose functions it calls */
    bool released;
} own_ent;
static pthread_mutex_t own_mu = PTHREAD_MUTEX_INITIALIZER;
static own_ent *owns;
static size_t nowns, cap_owns;
static atomic_int nowns_any;

atomic_int tc__mempool_users;
static tc__handle_pool mempool_handles = TC_HANDLE_POOL_INIT(struct tc_mempool);
static atomic_uint_fast64_t last_id;

static _Thread_local tc_mempool *uses[MAX_USES];
static _Thread_local int nuses;

uint64_t tc__mempool_current(const tc__allocator *a)
{
    for (int i = nuses; i-- > 0;)
        if (uses[i]->a == a)
            return uses[i]->id;
    return 0;
}

tc__allocator *tc__mempool_route(int device, tc__allocator *dflt)
{
    for (int i = nuses; i-- > 0;)
        if (uses[i]->device == device)
            return uses[i]->a;
    return dflt;
}

static tc_status check(const tc_mempool *p)
{
    return tc__handle_check(p, TC_MEMPOOL_MAGIC, "tc_mempool");
}

/* Adds pool `id`'s record to a (alloc_pools.c: a pool without one counts as
 * released, its memory free to go). */
static tc_status add_record(tc__allocator *a, uint64_t id)
{
    pool *r = calloc(1, sizeof *r);
    if (!r)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for a pool");
    r->id = id;
    tc__mutex_lock(&a->mu);
    r->next = a->pools;
    a->pools = r;
    tc__mutex_unlock(&a->mu);
    return TC_OK;
}

static tc_status add_own(tc__allocator *a, void *ctx, const void *user)
{
    pthread_mutex_lock(&own_mu);
    bool ok = true;
    if (nowns == cap_owns) {
        size_t nc = cap_owns ? cap_owns * 2 : 8;
        own_ent *n = realloc(owns, nc * sizeof *n);
        ok = n != NULL;
        if (ok) {
            owns = n;
            cap_owns = nc;
        }
    }
    if (ok) {
        owns[nowns++] = (own_ent){a, ctx, user, false};
        atomic_store(&nowns_any, 1);
    }
    pthread_mutex_unlock(&own_mu);
    return ok ? TC_OK : tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for a pool");
}

/* Destroys own allocator i if released and holding no live block (own_mu held). */
static void own_reap(size_t i)
{
    tc_memory_stats_info st;
    tc__alloc_stats(owns[i].a, &st);
    if (!owns[i].released || st.allocation[TC_STAT_POOL_ALL].current != 0 ||
        st.active[TC_STAT_POOL_ALL].current != 0)
        return;
    tc__alloc_destroy(owns[i].a);
    free(owns[i].ctx);
    owns[i] = owns[--nowns];
}

bool tc__mempool_free_own(void *ptr)
{
    if (!atomic_load_explicit(&nowns_any, memory_order_relaxed))
        return false;
    bool owned = false;
    pthread_mutex_lock(&own_mu);
    for (size_t i = 0; i < nowns && !owned; i++) {
        tc__alloc_free_if_owned(owns[i].a, ptr, &owned);
        if (owned)
            own_reap(i);
    }
    pthread_mutex_unlock(&own_mu);
    return owned;
}

tc_status tc__mempool_check_unused(const void *user)
{
    size_t pools = 0, gone = 0;
    pthread_mutex_lock(&own_mu);
    for (size_t i = 0; i < nowns; i++)
        if (owns[i].user == user) {
            pools++;
            gone += owns[i].released;
        }
    pthread_mutex_unlock(&own_mu);
    if (!pools)
        return TC_OK;
    return tc__fail(TC_ERROR_INVALID_STATE,
                    "the allocator is in use by %zu memory pool%s (%zu destroyed with blocks still "
                    "live); destroy the pools and free their memory first",
                    pools, pools == 1 ? "" : "s", gone);
}

tc__allocator *tc__mempool_owner(const void *ptr)
{
    if (!atomic_load_explicit(&nowns_any, memory_order_relaxed))
        return NULL;
    tc__allocator *r = NULL;
    pthread_mutex_lock(&own_mu);
    for (size_t i = 0; i < nowns && !r; i++)
        if (tc__alloc_owns(owns[i].a, ptr))
            r = owns[i].a;
    pthread_mutex_unlock(&own_mu);
    return r;
}

tc_status tc__mempool_create_own(tc__allocator *own, void *ctx, const void *user, int device,
                                 tc_mempool **out)
{
    TC_CHECK_ARG(out != NULL, "out is NULL");
    tc_mempool *p;
    TC_TRY(tc__mempool_create_on(own, device, &p));
    p->own = true;
    tc_status st = add_own(own, ctx, user);
    if (st != TC_OK) {
        p->magic = 0;
        tc__handle_put(&mempool_handles, p);
        return st;
    }
    *out = p; /* written only on success */
    return TC_OK;
}

tc_status tc__mempool_create_on(tc__allocator *a, int device, tc_mempool **out)
{
    TC_CHECK_ARG(out != NULL, "out is NULL");
    tc_mempool *p = tc__handle_get(&mempool_handles);
    if (!p)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for a pool");
    p->device = device;
    p->a = a;
    p->id = (1ull << 63) | (uint64_t)(atomic_fetch_add(&last_id, 1) + 1);
    atomic_init(&p->users, 0);
    p->own = false;
    tc_status st = add_record(a, p->id);
    if (st != TC_OK) {
        tc__handle_put(&mempool_handles, p);
        return st;
    }
    p->magic = TC_MEMPOOL_MAGIC;
    *out = p;
    return TC_OK;
}

tc_status tc_mempool_use_begin(tc_mempool *mp)
{
    TC_API_BEGIN;
    TC_TRY(check(mp));
    if (nuses == MAX_USES)
        return tc__fail(TC_ERROR_INVALID_STATE, "%d pools are in use on this thread, the most",
                        MAX_USES);
    uses[nuses++] = mp;
    atomic_fetch_add(&mp->users, 1);
    atomic_fetch_add(&tc__mempool_users, 1);
    return TC_OK;
}

tc_status tc_mempool_use_end(tc_mempool *mp)
{
    TC_API_BEGIN;
    TC_TRY(check(mp));
    if (!nuses || uses[nuses - 1] != mp)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "this pool is not the one this thread began to use last");
    nuses--;
    atomic_fetch_sub(&mp->users, 1);
    atomic_fetch_sub(&tc__mempool_users, 1);
    return TC_OK;
}

tc_status tc_mempool_stats(const tc_mempool *mp, tc_mempool_stats_info *out)
{
    TC_API_BEGIN;
    TC_TRY(check(mp));
    TC_CHECK_ARG(out != NULL, "out is NULL");
    tc_mempool_stats_info s = {mp->id, mp->device, 0, 0, 0, 0, 0, 0};
    tc__allocator *a = mp->a;
    tc__mutex_lock(&a->mu);
    for (seg *g = a->segs; g; g = g->next) {
        if (g->sc->pool_id != mp->id)
            continue;
        s.segments++;
        s.reserved_bytes += g->mapped;
        for (blk *b = g->head; b; b = b->next) {
            if (b->state == B_FREE)
                continue;
            s.active_bytes += b->size;
            if (b->state == B_ALLOC) {
                s.blocks++;
                s.allocated_bytes += b->size;
                s.requested_bytes += b->requested;
            }
        }
    }
    tc__mutex_unlock(&a->mu);
    *out = s;
    return TC_OK;
}

tc_status tc_mempool_destroy(tc_mempool *mp)
{
    TC_API_BEGIN;
    TC_TRY(check(mp));
    if (atomic_load(&mp->users) != 0)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "pool %#" PRIx64 " is in use (tc_mempool_use_begin without its end)",
                        mp->id);
    TC_TRY(tc__alloc_release_pool(mp->a, mp->id));
    if (mp->own) { /* its allocator goes now, or with its last live block */
        pthread_mutex_lock(&own_mu);
        for (size_t i = 0; i < nowns; i++)
            if (owns[i].a == mp->a) {
                owns[i].released = true;
                tc__alloc_empty_cache(owns[i].a);
                own_reap(i);
                break;
            }
        pthread_mutex_unlock(&own_mu);
    }
    tc__handle_put(&mempool_handles, mp);
    return TC_OK;
}
