/* Looking inside the caching allocator: snapshots (every segment and block,
 * copied under the lock) and the invariant checker the tests run after every
 * step (blocks tile segments, free lists and the pointer map agree, the stats
 * equal a recount). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "alloc_internal.h"

tc_status tc__alloc_snapshot(tc__allocator *a, tc_memory_snapshot_info *snap)
{
    tc__mutex_lock(&a->mu);
    tc_status st = tc__alloc_snapshot_locked(a, snap);
    tc__mutex_unlock(&a->mu);
    return st;
}

tc_status tc__alloc_snapshot_locked(tc__allocator *a, tc_memory_snapshot_info *snap)
{
    size_t n = 0;
    for (seg *s = a->segs; s; s = s->next)
        n++;
    tc_memory_segment_info *ns = realloc(snap->segments, (snap->num_segments + n + 1) * sizeof *ns);
    if (!ns)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for a snapshot");
    snap->segments = ns;
    for (seg *s = a->segs; s; s = s->next) {
        tc_memory_segment_info *si = &ns[snap->num_segments];
        memset(si, 0, sizeof *si);
        size_t nb = 0;
        for (blk *b = s->head; b; b = b->next)
            nb++;
        si->blocks = calloc(nb ? nb : 1, sizeof *si->blocks);
        if (!si->blocks)
            return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for a snapshot");
        si->device = a->device;
        si->address = s->addr;
        si->total_size = s->size;
        si->stream = s->sc->stream;
        si->segment_type = s->sc->small ? TC_MEMORY_SEGMENT_TYPE_SMALL
                                        : TC_MEMORY_SEGMENT_TYPE_LARGE;
        si->segment_pool_id = s->sc->pool_id;
        si->is_expandable = s->expandable;
        for (blk *b = s->head; b; b = b->next) {
            tc_memory_block_info *bi = &si->blocks[si->num_blocks++];
            bi->address = b->addr;
            bi->size = b->size;
            bi->requested_size = b->state == B_ALLOC ? b->requested : 0;
            bi->state = b->state == B_ALLOC     ? TC_MEMORY_BLOCK_STATE_ACTIVE_ALLOCATED
                        : b->state == B_PENDING ? TC_MEMORY_BLOCK_STATE_ACTIVE_PENDING_FREE
                                                : TC_MEMORY_BLOCK_STATE_INACTIVE;
            if (b->state == B_ALLOC) {
                si->allocated_size += b->size;
                si->requested_size += b->requested;
            }
            if (b->state != B_FREE)
                si->active_size += b->size;
        }
        snap->num_segments++;
    }
    return TC_OK;
}

/* ---- the invariant checker --------------------------------------------------------- */

/* What the checker has seen: bad once an invariant is broken, why saying
 * which (the checks stop at the first segment, bin or stat that breaks
 * one), and the recount of the walk over the segments, to compare with the
 * free lists, the pointer map and the stats. */
typedef struct checker {
    tc__allocator *a;
    char *why;
    size_t why_len;
    int bad;
    int64_t cnt[9][3]; /* per stat (the order below), per pool (all, small, large) */
    size_t nlive, nfree;
} checker;

enum { ALLOCN, SEGN, ACTN, ISN, ALLOCB, RESB, ACTB, ISB, REQB };

#define FAIL(...) (c->bad = 1, snprintf(c->why, c->why_len, __VA_ARGS__))

/* An expandable segment's pages: whole granules, none mapped past the
 * extent, every mapped run begins a chunk and every chunk is mapped, and the
 * mapped bytes as counted. Gives the bytes its mapped granules hold. */
static size_t check_pages(checker *c, const seg *s)
{
    size_t g = c->a->p.granularity, n = 0, npages = s->size / g;
    if (s->size % g || s->size > s->va_size)
        FAIL("expandable segment %#lx: extent %zu is not whole granules", (unsigned long)s->addr,
             s->size);
    for (size_t w = 0; w < s->cap_pages; w++)
        n += (size_t)__builtin_popcountll(s->pages[w]);
    for (size_t k = npages; k < s->cap_pages * 64 && !c->bad; k++)
        if (tc__bit_get(s->pages, k))
            FAIL("expandable segment %#lx: granule %zu mapped beyond the extent",
                 (unsigned long)s->addr, k);
    for (size_t k = 0; k < s->cap_pages * 64 && !c->bad; k++) {
        bool on = tc__bit_get(s->pages, k), first = tc__bit_get(s->starts, k);
        bool after_hole = k == 0 || !tc__bit_get(s->pages, k - 1);
        if ((first && !on) || (on && after_hole && !first))
            FAIL("expandable segment %#lx: granule %zu %s", (unsigned long)s->addr, k,
                 on ? "begins a run but no chunk" : "unmapped but begins a chunk");
    }
    if (!c->bad && n * g != s->mapped)
        FAIL("expandable segment %#lx: %zu granules mapped but %zu bytes counted",
             (unsigned long)s->addr, n, s->mapped);
    return n * g;
}

/* A block that is not free: not over an unmapped granule, and in the
 * pointer map when allocated. Counted as active (and allocated). */
static void check_used(checker *c, const seg *s, const blk *b, int pi)
{
    if (s->expandable && tc__exp_unmapped_bytes(c->a, b))
        FAIL("block %#lx in use over an unmapped granule", (unsigned long)b->addr);
    c->cnt[ACTN][pi]++;
    c->cnt[ACTB][pi] += (int64_t)b->size;
    if (b->state == B_ALLOC) {
        c->nlive++;
        c->cnt[ALLOCN][pi]++;
        c->cnt[ALLOCB][pi] += (int64_t)b->size;
        c->cnt[REQB][pi] += (int64_t)b->requested;
        if (map_find(c->a, b->addr) == SIZE_MAX)
            FAIL("live block %#lx missing from the map", (unsigned long)b->addr);
    }
}

/* The blocks of a segment tile it, in order and linked both ways; free
 * ones have no free neighbour and sit in the bin of their size. Counts them
 * by state. */
static void check_tiling(checker *c, seg *s, int pi)
{
    uintptr_t at = s->addr;
    blk *prev = NULL;
    for (blk *b = s->head; b && !c->bad; prev = b, b = b->next) {
        if (b->addr != at || b->prev != prev || b->seg != s || b->size == 0 ||
            b->size % TC__MIN_BLOCK)
            FAIL("segment %#lx: block %#lx does not tile it", (unsigned long)s->addr,
                 (unsigned long)b->addr);
        at += b->size;
        if (b->state != B_FREE) {
            check_used(c, s, b, pi);
            continue;
        }
        c->nfree++;
        if (prev && prev->state == B_FREE)
            FAIL("two free neighbours at %#lx", (unsigned long)b->addr);
        if (b->bin != bin_of(b->size))
            FAIL("free block in the wrong bin");
        if (b != s->head || b->next) {
            c->cnt[ISN][pi]++;
            c->cnt[ISB][pi] += (int64_t)b->size;
        }
    }
    if (!c->bad && at != s->addr + s->size)
        FAIL("segment %#lx: blocks cover %zu of %zu bytes", (unsigned long)s->addr,
             (size_t)(at - s->addr), s->size);
}

/* One segment: its kind agrees with its cache, its memory is mapped (the
 * pages, for an expandable one), its blocks tile it. */
static void check_segment(checker *c, seg *s)
{
    int pi = s->sc->small ? 1 : 2;
    c->cnt[SEGN][pi]++;
    if (s->expandable != (s->sc->expand == s))
        FAIL("segment %#lx: expandable but not its cache's expand, or the reverse",
             (unsigned long)s->addr);
    size_t reserved = s->size;
    if (s->expandable)
        reserved = check_pages(c, s);
    else if (s->mapped != s->size)
        FAIL("segment %#lx: mapped %zu != size %zu", (unsigned long)s->addr, s->mapped, s->size);
    c->cnt[RESB][pi] += (int64_t)reserved;
    check_tiling(c, s, pi);
}

/* The bins list exactly the free blocks (each in its own cache and bin,
 * the bitmap marking the bins that list any) and the map exactly the live
 * ones. */
static void check_lists(checker *c)
{
    size_t nfree_listed = 0;
    for (scache *sc = c->a->caches; sc && !c->bad; sc = sc->next)
        for (unsigned i = 0; i < NBINS; i++) {
            bool bit = (sc->bitmap[i / 64] >> (i % 64)) & 1;
            if (bit != (sc->bins[i] != NULL))
                FAIL("bin bitmap disagrees at bin %u", i);
            for (blk *b = sc->bins[i]; b && !c->bad; b = b->fnext) {
                nfree_listed++;
                if (b->state != B_FREE || b->seg->sc != sc || b->bin != i)
                    FAIL("bin %u lists a block that is not free there", i);
            }
        }
    if (!c->bad && nfree_listed != c->nfree)
        FAIL("%zu free blocks but %zu listed in bins", c->nfree, nfree_listed);
    if (!c->bad && c->nlive != c->a->map_n)
        FAIL("%zu live blocks but %zu in the map", c->nlive, c->a->map_n);
}

/* Every per-pool stat equals the recount, never exceeds its peak, and
 * allocated - freed is current. */
static void check_stats(checker *c)
{
    tc_memory_stats_info st;
    tc__stats_read(c->a, &st);
    const tc_memory_stat *arrs[9] = {
        st.allocation,      st.segment,        st.active,       st.inactive_split,
        st.allocated_bytes, st.reserved_bytes, st.active_bytes, st.inactive_split_bytes,
        st.requested_bytes};
    for (int k = 0; k < 9 && !c->bad; k++) {
        c->cnt[k][0] = c->cnt[k][1] + c->cnt[k][2];
        for (int p = 0; p < 3 && !c->bad; p++) {
            const tc_memory_stat *m = &arrs[k][p];
            if (m->current != c->cnt[k][p] || m->peak < m->current ||
                m->allocated - m->freed != m->current)
                FAIL("stat %d pool %d: current %" PRId64 " but recount %" PRId64, k, p, m->current,
                     c->cnt[k][p]);
        }
    }
}

int tc__alloc_check(tc__allocator *a, char *why, size_t why_len)
{
    checker c = {.a = a, .why = why, .why_len = why_len};
    tc__mutex_lock(&a->mu);
    for (seg *s = a->segs; s && !c.bad; s = s->next)
        check_segment(&c, s);
    check_lists(&c);
    check_stats(&c);
    tc__mutex_unlock(&a->mu);
    return c.bad;
}
