/* Streams and the events that delay reuse.
 *
 * A block belongs to the stream it was allocated on and is reused at once by
 * that stream. record_stream adds further streams (any number); freeing such
 * a block records an event on each of them, and the block stays "pending"
 * (active, not reusable) until every one of those events has completed.
 * Pending events are polled on each malloc and waited for on empty_cache and
 * before an out-of-memory retry.
 *
 * Fences say when cached memory may go back to the device without waiting.
 * A block in a cache is reused at once by the cache's stream, whose queued
 * work is ordered after its earlier uses, but memory given back (an unmapped
 * chunk of an expandable segment) may be handed to anyone while kernels
 * queued before its free still read it. So every free stamps the block with
 * the allocator's epoch, and a fence is an event recorded on a cache's stream
 * that moves the epoch on: once the fence is seen complete (cudaEventQuery,
 * never waited for), every block of that cache stamped at or before the
 * fence's epoch is no longer used by the GPU (its other streams' uses were
 * waited for by the events above before it became free). tc__make_room polls
 * and records fences only when it wants to give memory back; empty_cache,
 * an out-of-memory retry and the garbage-collection threshold wait for them.
 * Each wait is counted in num_device_synchronize. */
#include <stdlib.h>

#include "../core/internal.h"
#include "alloc_history.h"
#include "alloc_internal.h"

void tc__event_wait(tc__allocator *a, void *ev)
{
    if (a->p.event_sync) {
        a->p.event_sync(a->p.ctx, ev);
        a->st.num_device_synchronize++;
    }
}

static void fence_record(tc__allocator *a, scache *c)
{
    uint32_t e = a->epoch++; /* blocks stamped e or before were freed before it */
    void *ev = a->p.event_record ? a->p.event_record(a->p.ctx, c->stream) : NULL;
    if (!ev) {
        c->done_epoch = e; /* no events (host), or the stream was waited for */
        return;
    }
    c->fence = ev;
    c->fence_epoch = e;
}

static void fence_retire(tc__allocator *a, scache *c)
{
    if (a->p.event_destroy)
        a->p.event_destroy(a->p.ctx, c->fence);
    c->fence = NULL;
    c->done_epoch = c->fence_epoch;
}

static bool fence_done(tc__allocator *a, scache *c)
{
    return !a->p.event_query || a->p.event_query(a->p.ctx, c->fence);
}

/* A new fence is asked at once too: on an idle stream it is often done. */
void tc__fence_poll(tc__allocator *a, scache *c)
{
    if (c->fence && fence_done(a, c))
        fence_retire(a, c);
    if (!c->fence && !tc__epoch_done(c, c->free_epoch)) {
        fence_record(a, c);
        if (c->fence && fence_done(a, c))
            fence_retire(a, c);
    }
}

void tc__fence_drop(tc__allocator *a, scache *c)
{
    if (c->fence && a->p.event_destroy)
        a->p.event_destroy(a->p.ctx, c->fence);
    c->fence = NULL;
}

void tc__fence_wait(tc__allocator *a, scache *c)
{
    if (tc__epoch_done(c, c->free_epoch))
        return;
    if (c->fence && (int32_t)(c->free_epoch - c->fence_epoch) > 0)
        tc__fence_drop(a, c); /* too old to cover the last frees: a newer one
                               * on the same stream completes after it */
    if (!c->fence)
        fence_record(a, c);
    if (c->fence) {
        tc__event_wait(a, c->fence);
        fence_retire(a, c);
    }
}

void tc__process_events(tc__allocator *a, bool wait)
{
    size_t k = 0;
    if (wait && a->npend)
        a->st.num_sync_all_streams++;
    for (size_t i = 0; i < a->npend; i++) {
        pend *e = &a->pend[i];
        bool done;
        if (wait) {
            tc__event_wait(a, e->event);
            done = true;
        } else {
            done = !a->p.event_query || a->p.event_query(a->p.ctx, e->event) != 0;
        }
        if (!done) {
            a->pend[k++] = *e;
            continue;
        }
        if (a->p.event_destroy)
            a->p.event_destroy(a->p.ctx, e->event);
        blk *b = e->b;
        if (--b->uses->pending == 0) {
            int small = b->seg->sc->small;
            stat2_sub(a->st.active, small, 1);
            stat2_sub(a->st.active_bytes, small, (int64_t)b->size);
            if (TC__HIST_ON(TC_HISTORY_FREE))
                tc__hist_record(a, TC__H_FREE_COMPLETED, b->addr, b->size, b->requested,
                                b->seg->sc->stream, b->seg->sc->pool_id);
            seg *s = b->seg;
            tc__free_block(a, b);
            if (TC_UNLIKELY(a->cfg.no_caching))
                tc__no_caching_release(a, s);
        }
    }
    a->npend = k;
}

void tc__push_pending(tc__allocator *a, blk *b, uintptr_t stream)
{
    void *ev = a->p.event_record ? a->p.event_record(a->p.ctx, stream) : NULL;
    if (!ev)
        return; /* nothing to wait for (or could not record: treated as done) */
    if (a->npend == a->cap_pend) {
        size_t nc = a->cap_pend ? 2 * a->cap_pend : 64;
        pend *np = realloc(a->pend, nc * sizeof *np);
        if (!np) {
            tc__event_wait(a, ev);
            if (a->p.event_destroy)
                a->p.event_destroy(a->p.ctx, ev);
            return;
        }
        a->pend = np;
        a->cap_pend = nc;
    }
    a->pend[a->npend].event = ev;
    a->pend[a->npend].b = b;
    a->npend++;
    b->uses->pending++;
}

tc_status tc__alloc_record_stream(tc__allocator *a, void *ptr, uintptr_t stream)
{
    tc__mutex_lock(&a->mu);
    size_t j = map_find(a, (uintptr_t)ptr);
    tc_status st = TC_OK;
    if (j == SIZE_MAX) {
        st = tc__fail(TC_ERROR_INVALID_ARGUMENT,
                      "record_stream: %p is not the start of a live tcuda block", ptr);
    } else {
        blk *b = a->map[j].b;
        blk_uses *u = b->uses;
        bool have = b->seg->sc->stream == stream;
        for (unsigned i = 0; u && i < u->n && !have; i++)
            have = u->stream[i] == stream;
        if (!have && (!u || u->n == u->cap)) {
            unsigned nc = u ? 2 * u->cap : 4;
            blk_uses *nu = realloc(u, sizeof *nu + nc * sizeof nu->stream[0]);
            if (nu) {
                if (!u)
                    nu->pending = 0, nu->n = 0;
                nu->cap = nc;
                b->uses = u = nu;
            } else {
                st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "record_stream: out of host memory");
            }
        }
        if (!have && st == TC_OK)
            u->stream[u->n++] = stream;
    }
    tc__mutex_unlock(&a->mu);
    return st;
}
