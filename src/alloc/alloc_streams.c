/* Streams and the events that delay reuse.
 *
 * A block belongs to the stream it was allocated on and is reused at once by
 * that stream. record_stream adds further streams (any number); freeing such
 * a block records an event on each of them, and the block stays "pending"
 * (active, not reusable) until every one of those events has completed.
 * Pending events are polled on each malloc and waited for on empty_cache and
 * before an out-of-memory retry. */
#include <stdlib.h>

#include "../core/internal.h"
#include "alloc_internal.h"

void tc__process_events(tc__allocator *a, bool wait)
{
    size_t k = 0;
    if (wait && a->npend)
        a->st.num_sync_all_streams++;
    for (size_t i = 0; i < a->npend; i++) {
        pend *e = &a->pend[i];
        bool done;
        if (wait) {
            if (a->p.event_sync)
                a->p.event_sync(a->p.ctx, e->event);
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
            tc__free_block(a, b);
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
            if (a->p.event_sync)
                a->p.event_sync(a->p.ctx, ev);
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
