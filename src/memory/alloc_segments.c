/* Whole segments: how big a new one is, taking one from the provider, giving
 * one back, and making room before reserving more.
 *
 * Sizes follow PyTorch: requests up to 1 MiB share 2 MiB segments, requests
 * under 10 MiB share 20 MiB ones, larger ones get their own, rounded up to
 * 2 MiB. Cached memory is normally kept; it goes back on empty_cache, on the
 * garbage-collection threshold and when an allocation would otherwise fail,
 * as in PyTorch: giving a whole segment back (cudaFree) waits for all queued
 * GPU work, so the allocation path never does it. With expandable segments,
 * tc__make_room also unmaps free chunks when reserving more would raise the
 * most ever reserved, but only chunks whose last use is known complete
 * (fences, alloc_streams.c), through calls that do not wait. That keeps
 * reserved memory close to what is live at its peak, and costs provider
 * calls only while the high-water mark is being set: a program in its steady
 * state reserves nothing new and so releases nothing. (An earlier rule also
 * gave back wholly free plain segments there, for 1.24x peak reserved over
 * peak live instead of 1.34x, but each cudaFree made the host wait for the
 * GPU in the middle of a training step. Even with a free that does not wait,
 * whole segments are too coarse: bench_alloc_host on four seeds of its trace,
 * giving back every wholly free segment before each new one, measured
 * 1.26-1.32x against 1.34-1.42x, for 1,600-2,700 provider calls in three
 * warm replays. The holes that cost the memory lie inside segments with live
 * blocks; only unmapping granules under free blocks, as expandable segments
 * do, reaches them.) */
#include <stdlib.h>

#include "base/internal.h"
#include "alloc_history.h"
#include "alloc_internal.h"

size_t tc__segment_size(size_t rounded)
{
    if (rounded <= TC__SMALL_SIZE)
        return TC__SMALL_BUFFER;
    if (rounded < TC__MIN_LARGE_ALLOC)
        return TC__LARGE_BUFFER;
    return (rounded + TC__ROUND_LARGE - 1) / TC__ROUND_LARGE * TC__ROUND_LARGE;
}

bool tc__seg_whole_free(const seg *s)
{
    return !s->head || (s->head->state == B_FREE && !s->head->next);
}

bool tc__seg_releasable(tc__allocator *a, const seg *s, bool all_pools)
{
    if (!tc__seg_whole_free(s))
        return false;
    if (!s->sc->pool_id || all_pools)
        return true;
    pool *p = tc__pool_find(a, s->sc->pool_id);
    return !p || p->released;
}

void tc__seg_link(tc__allocator *a, seg *s)
{
    s->prev = NULL;
    s->next = a->segs;
    if (a->segs)
        a->segs->prev = s;
    a->segs = s;
}

static void seg_unlink(tc__allocator *a, seg *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        a->segs = s->next;
    if (s->next)
        s->next->prev = s->prev;
}

void tc__seg_release(tc__allocator *a, seg *s)
{
    scache *c = s->sc;
    int small = c->small;
    blk *b = s->head;
    if (b) {
        tc__split_stat(a, b, -1);
        tc__bin_remove(s->sc, b);
    }
    if (s->expandable) {
        tc__exp_release(a, s);
    } else {
        if (TC__HIST_FREE_SEEN(a, TC_HISTORY_RECORD_SEGMENT))
            tc__hist_record(a, TC__H_SEGMENT_FREE, s->addr, s->size, 0, s->sc->stream,
                            s->sc->pool_id);
        a->p.free(a->p.ctx, (void *)s->addr, s->size);
        a->st.num_device_synchronize += a->p.free_waits;
        reserved_upd(a, small, -(int64_t)s->size);
        if (a->cfg.max_split_size != SIZE_MAX && s->size >= a->cfg.max_split_size)
            stat_upd(&a->st.oversize_segments, -1);
    }
    stat2(a->st.segment, small, -1);
    a->st.num_device_free++;
    seg_unlink(a, s);
    if (b)
        tc__blk_del(a, b);
    free(s);
    if (TC_UNLIKELY(c->gone))
        tc__gone_reap(a, c); /* its stream went away: the record goes with its last segment */
}

void tc__no_caching_release(tc__allocator *a, seg *s)
{
    if (!a->ncaps && tc__seg_releasable(a, s, false))
        tc__seg_release(a, s);
}

static seg *oldest_releasable(tc__allocator *a, bool all_pools)
{
    seg *oldest = NULL;
    for (seg *s = a->segs; s; s = s->next)
        if ((!oldest || s->free_tick < oldest->free_tick) && tc__seg_releasable(a, s, all_pools))
            oldest = s;
    return oldest;
}

void tc__release_cached(tc__allocator *a, size_t target, bool all_pools)
{
    while ((size_t)a->st.reserved_bytes[0].current > target) {
        seg *s = oldest_releasable(a, all_pools);
        if (!s)
            return;
        tc__seg_release(a, s);
    }
}

void tc__make_room(tc__allocator *a, size_t more)
{
    if (a->ncaps)
        return; /* a graph capture is underway: giving memory back would synchronize */
    /* Unmap free chunks, but only past 1/16 above the most ever in use, and
     * then 1/64 more than needed, so that steady-state reuse of free
     * (mapped) blocks does not turn into map/unmap pairs. What is left in
     * bench_alloc_host's warm replays is all around the peak, where best fit
     * spreads the live blocks over an extent ~1.23x the peak, so the holes
     * must move. Slack from 1/20 to 1/12 and 1/16 or 1/32 extra, and
     * preferring wholly mapped blocks in best fit, were measured: none cut
     * the calls by much, and the larger slack costs its share of memory. */
    size_t cur = (size_t)a->st.reserved_bytes[0].current;
    if (cur + more > a->high && a->cfg.expandable_segments) {
        size_t act = a->peak_active, soft = act + act / 16;
        if (cur + more > soft)
            tc__exp_unmap_free(a, cur + more - soft + act / 64, false);
    }
}

tc_status tc__new_segment(tc__allocator *a, size_t rounded, scache *c, blk **out)
{
    if (a->cfg.expandable_segments && a->p.granularity && a->p.reserve)
        return tc__exp_grow(a, c, rounded, out);
    size_t ss = a->cfg.no_caching ? rounded : tc__segment_size(rounded);
    if (a->limit != SIZE_MAX && (size_t)a->st.reserved_bytes[0].current + ss > a->limit)
        return TC_ERROR_OUT_OF_MEMORY;
    seg *s = calloc(1, sizeof *s);
    blk *h = s ? tc__blk_new(a) : NULL;
    if (!h) {
        free(s);
        return TC_ERROR_OUT_OF_MEMORY;
    }
    void *base = NULL;
    tc_status st = a->p.alloc(a->p.ctx, ss, c->stream, &base);
    if (st != TC_OK) {
        tc__blk_del(a, h);
        free(s);
        return st;
    }
    s->addr = (uintptr_t)base;
    s->size = s->va_size = s->mapped = ss;
    s->sc = c;
    s->free_tick = ++a->tick;
    h->addr = s->addr;
    h->size = ss;
    h->seg = s;
    h->small = (unsigned char)c->small;
    s->head = h;
    tc__seg_link(a, s);
    tc__bin_insert(c, h);
    stat2(a->st.segment, c->small, +1);
    reserved_upd(a, c->small, (int64_t)ss);
    a->st.num_device_alloc++;
    if (a->cfg.max_split_size != SIZE_MAX && ss >= a->cfg.max_split_size)
        stat_upd(&a->st.oversize_segments, +1);
    if (TC__HIST_ON(TC_HISTORY_RECORD_SEGMENT))
        tc__hist_record(a, TC__H_SEGMENT_ALLOC, s->addr, ss, rounded, c->stream, c->pool_id);
    *out = h;
    return TC_OK;
}
