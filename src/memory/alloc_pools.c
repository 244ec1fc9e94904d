/* Private pools (for graph capture): between begin and end, allocations on a
 * stream come from pool `id`. A pool's segments serve only that pool while
 * it lives; once released, its wholly free segments go back at once, and the
 * others once free, on the next empty_cache, out-of-memory retry or garbage
 * collection (giving memory back may wait for the GPU, which a free must not). */
#include <inttypes.h>
#include <stdlib.h>

#include "base/internal.h"
#include "alloc_internal.h"

pool *tc__pool_find(tc__allocator *a, uint64_t id)
{
    for (pool *p = a->pools; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

uint64_t tc__capture_pool(const tc__allocator *a, uintptr_t stream)
{
    for (int i = 0; i < a->ncaps; i++)
        if (a->caps[i].stream == stream)
            return a->caps[i].pool_id;
    return 0;
}

tc_status tc__alloc_begin_pool(tc__allocator *a, uint64_t id, uintptr_t stream)
{
    TC_CHECK_ARG(id != 0, "private pool id 0 is the default pool");
    tc__mutex_lock(&a->mu);
    tc_status st = TC_OK;
    pool *p = tc__pool_find(a, id);
    if (p && p->released)
        st = tc__fail(TC_ERROR_INVALID_STATE, "private pool %" PRIu64 " was released", id);
    else if (tc__capture_pool(a, stream) != 0 || a->ncaps == 16)
        st = tc__fail(TC_ERROR_INVALID_STATE,
                      "a private pool is already active on this stream (or 16 are active)");
    else if (!p && !(p = calloc(1, sizeof *p)))
        st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    else {
        if (!p->id) {
            p->id = id;
            p->next = a->pools;
            a->pools = p;
        }
        a->caps[a->ncaps].stream = stream;
        a->caps[a->ncaps].pool_id = id;
        a->ncaps++;
    }
    tc__mutex_unlock(&a->mu);
    return st;
}

tc_status tc__alloc_end_pool(tc__allocator *a, uintptr_t stream)
{
    tc__mutex_lock(&a->mu);
    tc_status st = tc__fail(TC_ERROR_INVALID_STATE, "no private pool is active on that stream");
    for (int i = 0; i < a->ncaps; i++)
        if (a->caps[i].stream == stream) {
            a->caps[i] = a->caps[--a->ncaps];
            st = TC_OK;
            break;
        }
    tc__mutex_unlock(&a->mu);
    return st;
}

tc_status tc__alloc_release_pool(tc__allocator *a, uint64_t id)
{
    tc__mutex_lock(&a->mu);
    pool *p = tc__pool_find(a, id);
    tc_status st = TC_OK;
    if (!p || p->released)
        st = tc__fail(TC_ERROR_INVALID_ARGUMENT, "no live private pool %" PRIu64, id);
    else {
        for (int i = 0; i < a->ncaps; i++)
            if (a->caps[i].pool_id == id)
                st = tc__fail(TC_ERROR_INVALID_STATE,
                              "private pool %" PRIu64 " is still active on a stream", id);
        if (st == TC_OK) {
            p->released = true;
            for (seg *s = a->segs, *n; s; s = n) {
                n = s->next;
                if (s->sc->pool_id == id && tc__seg_whole_free(s))
                    tc__seg_release(a, s);
            }
        }
    }
    tc__mutex_unlock(&a->mu);
    return st;
}
