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
 * Each wait is counted in num_device_synchronize.
 *
 * Streams go away (tc_stream_destroy, an external stream's wrapper
 * released), and a handle value may then name another stream: so the
 * allocator keeps no stream past that point. tc__alloc_stream_gone records
 * one event on the stream while it is valid and keeps it instead: a live
 * block recorded there holds that event in its blk_use (waited for, as
 * pending, when the block is freed); the stream's caches become "gone":
 * they serve no malloc, their frees are stamped with the epoch of the
 * event, so no new fence is ever recorded for them, and once the event is
 * seen complete (queried, never waited for) their plain segments move to a
 * live cache of the same pool and class that found no free block, their
 * free blocks counted as complete there. Expandable segments stay (a cache
 * has at most one) until their memory is released as usual. */
#include <stdlib.h>

#include "base/internal.h"
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
    if (TC_UNLIKELY(c->gone))
        return;              /* its last fence covers every use; its stream may be dead */
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
    if (c->fence && (int32_t)(c->free_epoch - c->fence_epoch) > 0 && !c->gone)
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
            if (TC__HIST_ON(TC_HISTORY_RECORD_FREE))
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

void tc__push_pending(tc__allocator *a, blk *b, uintptr_t stream, void *event)
{
    void *ev = event;
    if (!ev && a->p.event_record)
        ev = a->p.event_record(a->p.ctx, stream);
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
        scache *c = b->seg->sc; /* a gone cache's stream value may name a new stream */
        bool have = c->stream == stream && !c->gone;
        for (unsigned i = 0; u && i < u->n && !have; i++)
            have = u->use[i].stream == stream && !u->use[i].event;
        if (!have && (!u || u->n == u->cap)) {
            unsigned nc = u ? 2 * u->cap : 4;
            blk_uses *nu = realloc(u, sizeof *nu + nc * sizeof nu->use[0]);
            if (nu) {
                if (!u) {
                    nu->pending = 0, nu->n = 0;
                    a->nuses++;
                }
                nu->cap = nc;
                b->uses = u = nu;
            } else {
                st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "record_stream: out of host memory");
            }
        }
        if (!have && st == TC_OK)
            u->use[u->n++] = (blk_use){stream, NULL};
    }
    tc__mutex_unlock(&a->mu);
    return st;
}

/* ---- streams going away --------------------------------------------------- */

/* An event on `stream` for its uses so far, or NULL when they count as
 * complete (no events, or the provider waited for the stream instead). */
static void *gone_event(tc__allocator *a, uintptr_t stream)
{
    return a->p.event_record ? a->p.event_record(a->p.ctx, stream) : NULL;
}

/* Gives the cache's stream up (see scache.gone). */
static void cache_gone(tc__allocator *a, scache *c)
{
    tc__fence_drop(a, c);    /* the new fence covers what the old one did */
    uint32_t e = a->epoch++; /* every free of c so far is stamped e or before */
    void *ev = gone_event(a, c->stream);
    if (ev) {
        c->fence = ev;
        c->fence_epoch = e;
    } else {
        c->done_epoch = e;
    }
    c->gone = true;
    c->gone_epoch = e;
    a->ngone++;
    if (a->last_cache[c->small] == c)
        a->last_cache[c->small] = NULL;
    tc__gone_reap(a, c);
}

void tc__gone_reap(tc__allocator *a, scache *c)
{
    if (!c->gone || c->expand)
        return;
    for (seg *s = a->segs; s; s = s->next)
        if (s->sc == c)
            return;
    for (scache **p = &a->caches; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    tc__fence_drop(a, c);
    a->ngone--;
    free(c);
}

/* Moves plain segment s from its (gone, complete) cache to c; its free
 * blocks count as complete there. */
static void seg_move(scache *from, scache *c, seg *s)
{
    for (blk *b = s->head; b; b = b->next)
        if (b->state == B_FREE) {
            tc__bin_remove(from, b);
            b->epoch = c->done_epoch;
            tc__bin_insert(c, b);
        }
    s->sc = c;
}

bool tc__gone_adopt(tc__allocator *a, scache *c)
{
    bool moved = false;
    for (scache *o = a->caches, *next; o; o = next) {
        next = o->next;
        if (!o->gone || o->small != c->small || o->pool_id != c->pool_id)
            continue;
        tc__fence_poll(a, o);
        if (!tc__epoch_done(o, o->gone_epoch))
            continue; /* its stream's work may still use the memory */
        for (seg *s = a->segs; s; s = s->next)
            if (s->sc == o && !s->expandable) {
                seg_move(o, c, s);
                moved = true;
            }
        tc__gone_reap(a, o);
    }
    return moved;
}

void tc__alloc_stream_gone(tc__allocator *a, uintptr_t stream)
{
    tc__mutex_lock(&a->mu);
    /* Live blocks recorded on the stream keep an event instead of it. */
    for (size_t j = 0; a->nuses && j < a->map_cap; j++) {
        blk *b = a->map[j].b;
        blk_uses *u = b ? b->uses : NULL;
        for (unsigned i = 0; u && i < u->n;) {
            blk_use *e = &u->use[i];
            if (e->event || e->stream != stream) {
                i++;
                continue;
            }
            e->event = gone_event(a, stream);
            if (!e->event)
                *e = u->use[--u->n]; /* complete already: nothing to wait for */
            else
                i++;
        }
    }
    for (scache *c = a->caches, *next; c; c = next) {
        next = c->next; /* c may be freed */
        if (c->stream == stream && !c->gone)
            cache_gone(a, c);
    }
    tc__mutex_unlock(&a->mu);
}
