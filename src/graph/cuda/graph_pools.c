/* CUDA graphs' private memory pools: pool ids (tc_graph_pool_handle,
 * tc_graph_pool) and, for each (pool id, device), the allocator pool that
 * captures into it route their allocations to.
 *
 * Pools are reference-counted here, one reference per graph that captured
 * into it; the last reset or destroy releases the pool in the allocator,
 * which gives its segments back as they become free. A user's pool id keeps
 * working after that: the next capture into it gets a new allocator pool. */
#include <stdlib.h>

#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "graph_object.h"

typedef struct pool_ref {
    uint64_t user, alloc;
    int device, refs;
} pool_ref;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pool_ref *pools;
static size_t npools, cap_pools;
_Atomic uint64_t tc__graph_last_pool_id;

uint64_t tc__graph_new_pool_id(void) { return atomic_fetch_add(&tc__graph_last_pool_id, 1) + 1; }

static pool_ref *pool_find(uint64_t user, int device)
{
    for (size_t i = 0; i < npools; i++)
        if (pools[i].user == user && pools[i].device == device)
            return &pools[i];
    return NULL;
}

/* Takes a reference on pool `user` of `device` and starts routing the
 * allocations on cs to it. The first reference picks the allocator's pool:
 * the user id itself, or a new id when the allocator released that one. */
tc_status tc__graph_pool_enter(uint64_t user, int device, cudaStream_t cs, uint64_t *alloc)
{
    pthread_mutex_lock(&pool_mu);
    tc_status st = TC_OK;
    pool_ref *p = pool_find(user, device);
    if (p) {
        st = tc__device_pool_begin(device, p->alloc, cs);
    } else if (npools == cap_pools) {
        size_t nc = cap_pools ? 2 * cap_pools : 16;
        pool_ref *np = realloc(pools, nc * sizeof *np);
        if (np) {
            pools = np;
            cap_pools = nc;
        } else {
            st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for pool records");
        }
    }
    if (!p && st == TC_OK) {
        uint64_t id = user;
        st = tc__device_pool_begin(device, id, cs);
        if (st == TC_ERROR_INVALID_STATE) { /* released after its last graph: a new one */
            id = tc__graph_new_pool_id();
            st = tc__device_pool_begin(device, id, cs);
        }
        if (st == TC_OK) {
            p = &pools[npools++];
            *p = (pool_ref){user, id, device, 0};
        }
    }
    if (st == TC_OK) {
        p->refs++;
        *alloc = p->alloc;
    }
    pthread_mutex_unlock(&pool_mu);
    return st;
}

/* Drops a reference; the last one releases the allocator's pool. */
void tc__graph_pool_leave(uint64_t user, int device)
{
    pthread_mutex_lock(&pool_mu);
    pool_ref *p = pool_find(user, device);
    if (p && --p->refs == 0) {
        (void)tc__device_pool_release(device, p->alloc);
        *p = pools[--npools];
    }
    pthread_mutex_unlock(&pool_mu);
}

tc_status tc_graph_pool(const tc_graph *graph, tc_graph_pool_id *out)
{
    TC_API_BEGIN;
    TC_TRY(tc__graph_check(graph));
    TC_CHECK_ARG(out, "out is NULL");
    if (graph->state == G_EMPTY)
        return tc__fail(TC_ERROR_INVALID_STATE, "the graph has no pool before its capture begins");
    out->id = graph->pool_user;
    return TC_OK;
}

tc_status tc_graph_pool_handle(tc_graph_pool_id *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__ensure_init());
    out->id = tc__graph_new_pool_id();
    return TC_OK;
}
