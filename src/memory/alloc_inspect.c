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

#define FAILC(...) (snprintf(why, why_len, __VA_ARGS__), 1)

int tc__alloc_check(tc__allocator *a, char *why, size_t why_len)
{
    tc__mutex_lock(&a->mu);
    int bad = 0;
    int64_t cnt[9][3] = {{0}};
    size_t nlive = 0, nfree_listed = 0, nfree = 0;
    enum { ALLOCN, SEGN, ACTN, ISN, ALLOCB, RESB, ACTB, ISB, REQB };
    for (seg *s = a->segs; s && !bad; s = s->next) {
        int pi = s->sc->small ? 1 : 2;
        cnt[SEGN][pi]++;
        if (s->expandable != (s->sc->expand == s))
            bad = FAILC("segment %#lx: expandable but not its cache's expand, or the reverse",
                        (unsigned long)s->addr);
        if (s->expandable) {
            size_t g = a->p.granularity, n = 0, npages = s->size / g;
            if (s->size % g || s->size > s->va_size)
                bad = FAILC("expandable segment %#lx: extent %zu is not whole granules",
                            (unsigned long)s->addr, s->size);
            for (size_t w = 0; w < s->cap_pages; w++)
                n += (size_t)__builtin_popcountll(s->pages[w]);
            for (size_t k = npages; k < s->cap_pages * 64 && !bad; k++)
                if (tc__bit_get(s->pages, k))
                    bad = FAILC("expandable segment %#lx: granule %zu mapped beyond the extent",
                                (unsigned long)s->addr, k);
            for (size_t k = 0; k < s->cap_pages * 64 && !bad; k++) {
                bool on = tc__bit_get(s->pages, k), first = tc__bit_get(s->starts, k);
                bool after_hole = k == 0 || !tc__bit_get(s->pages, k - 1);
                if ((first && !on) || (on && after_hole && !first))
                    bad = FAILC("expandable segment %#lx: granule %zu %s", (unsigned long)s->addr,
                                k,
                                on ? "begins a run but no chunk" : "unmapped but begins a chunk");
            }
            if (!bad && n * g != s->mapped)
                bad = FAILC("expandable segment %#lx: %zu granules mapped but %zu bytes counted",
                            (unsigned long)s->addr, n, s->mapped);
            cnt[RESB][pi] += (int64_t)(n * g);
        } else {
            if (s->mapped != s->size)
                bad = FAILC("segment %#lx: mapped %zu != size %zu", (unsigned long)s->addr,
                            s->mapped, s->size);
            cnt[RESB][pi] += (int64_t)s->size;
        }
        uintptr_t at = s->addr;
        blk *prev = NULL;
        for (blk *b = s->head; b && !bad; prev = b, b = b->next) {
            if (b->addr != at || b->prev != prev || b->seg != s || b->size == 0 ||
                b->size % TC__MIN_BLOCK)
                bad = FAILC("segment %#lx: block %#lx does not tile it", (unsigned long)s->addr,
                            (unsigned long)b->addr);
            at += b->size;
            if (b->state == B_FREE) {
                nfree++;
                if (prev && prev->state == B_FREE)
                    bad = FAILC("two free neighbours at %#lx", (unsigned long)b->addr);
                if (b->bin != bin_of(b->size))
                    bad = FAILC("free block in the wrong bin");
                if (b != s->head || b->next) {
                    cnt[ISN][pi]++;
                    cnt[ISB][pi] += (int64_t)b->size;
                }
            } else {
                if (s->expandable && tc__exp_unmapped_bytes(a, b))
                    bad = FAILC("block %#lx in use over an unmapped granule",
                                (unsigned long)b->addr);
                cnt[ACTN][pi]++;
                cnt[ACTB][pi] += (int64_t)b->size;
                if (b->state == B_ALLOC) {
                    nlive++;
                    cnt[ALLOCN][pi]++;
                    cnt[ALLOCB][pi] += (int64_t)b->size;
                    cnt[REQB][pi] += (int64_t)b->requested;
                    if (map_find(a, b->addr) == SIZE_MAX)
                        bad = FAILC("live block %#lx missing from the map", (unsigned long)b->addr);
                }
            }
        }
        if (!bad && at != s->addr + s->size)
            bad = FAILC("segment %#lx: blocks cover %zu of %zu bytes", (unsigned long)s->addr,
                        (size_t)(at - s->addr), s->size);
    }
    for (scache *c = a->caches; c && !bad; c = c->next)
        for (unsigned i = 0; i < NBINS; i++) {
            bool bit = (c->bitmap[i / 64] >> (i % 64)) & 1;
            if (bit != (c->bins[i] != NULL))
                bad = FAILC("bin bitmap disagrees at bin %u", i);
            for (blk *b = c->bins[i]; b && !bad; b = b->fnext) {
                nfree_listed++;
                if (b->state != B_FREE || b->seg->sc != c || b->bin != i)
                    bad = FAILC("bin %u lists a block that is not free there", i);
            }
        }
    if (!bad && nfree_listed != nfree)
        bad = FAILC("%zu free blocks but %zu listed in bins", nfree, nfree_listed);
    if (!bad && nlive != a->map_n)
        bad = FAILC("%zu live blocks but %zu in the map", nlive, a->map_n);
    tc_memory_stats_info st;
    tc__stats_read(a, &st);
    const tc_memory_stat *arrs[9] = {
        st.allocation,      st.segment,        st.active,       st.inactive_split,
        st.allocated_bytes, st.reserved_bytes, st.active_bytes, st.inactive_split_bytes,
        st.requested_bytes};
    for (int k = 0; k < 9 && !bad; k++) {
        cnt[k][0] = cnt[k][1] + cnt[k][2];
        for (int p = 0; p < 3 && !bad; p++) {
            const tc_memory_stat *m = &arrs[k][p];
            if (m->current != cnt[k][p] || m->peak < m->current ||
                m->allocated - m->freed != m->current)
                bad = FAILC("stat %d pool %d: current %" PRId64 " but recount %" PRId64, k, p,
                            m->current, cnt[k][p]);
        }
    }
    tc__mutex_unlock(&a->mu);
    return bad;
}
