/* Blocks: their records, the pointer map, the size bins, split and merge.
 *
 * Each segment is a doubly linked list of blocks in address order that tile
 * it exactly. Free blocks sit in their (pool, class, stream) cache's size
 * bins: log2 classes with 8 steps each, and a bitmap that finds the next
 * non-empty bin, so best fit costs a short scan. Live blocks are found by
 * address in an open-addressing map (linear probing, backward-shift delete)
 * whose slots hold the address beside the record, so probing and shifting
 * read only the map.
 * Block records (one cache line each) come from 64-byte aligned slabs
 * through a free list, so the hot path calls no malloc.
 *
 * What malloc and free run on every call (records, map put/remove, the cache's
 * lookup, best fit, split) is inline in alloc_internal.h; this file has
 * the slow halves and the merge that free runs. */
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "alloc_internal.h"

/* ---- block records -------------------------------------------------------- */

int tc__slab_add(tc__allocator *a)
{
    enum { N = 256 };
    if (a->nslabs == a->cap_slabs) {
        size_t nc = a->cap_slabs ? 2 * a->cap_slabs : 16;
        void **ns = realloc(a->slabs, nc * sizeof *ns);
        if (!ns)
            return -1;
        a->slabs = ns;
        a->cap_slabs = nc;
    }
    blk *arr = aligned_alloc(64, N * sizeof *arr); /* one record per line */
    if (!arr)
        return -1;
    a->slabs[a->nslabs++] = arr;
    for (int i = N - 1; i >= 0; i--) {
        arr[i].fnext = a->slab_free;
        a->slab_free = &arr[i];
    }
    return 0;
}

/* ---- pointer map ---------------------------------------------------------- */

int tc__map_grow(tc__allocator *a)
{
    size_t nc = a->map_cap ? a->map_cap * 2 : 4096;
    mapent *nm = calloc(nc, sizeof *nm);
    if (!nm)
        return -1;
    for (size_t i = 0; i < a->map_cap; i++) {
        if (!a->map[i].b)
            continue;
        size_t j = hash_addr(a->map[i].addr, nc);
        while (nm[j].b)
            j = (j + 1) & (nc - 1);
        nm[j] = a->map[i];
    }
    free(a->map);
    a->map = nm;
    a->map_cap = nc;
    return 0;
}

/* ---- caches --------------------------------------------------------------- */

scache *tc__cache_find(tc__allocator *a, uint64_t pool_id, int small, uintptr_t stream)
{
    scache *c;
    for (c = a->caches; c; c = c->next)
        if (c->stream == stream && c->small == small && c->pool_id == pool_id && !c->gone)
            return a->last_cache[small] = c;
    c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->stream = stream;
    c->small = small;
    c->pool_id = pool_id;
    c->next = a->caches;
    a->caches = c;
    return a->last_cache[small] = c;
}

/* ---- split and merge ------------------------------------------------------ */

/* Joins `gone` (the block right after `keep`) into `keep`; their free
 * neighbour `n` (one of the two) leaves its bin first. */
static inline void merge(tc__allocator *a, scache *c, blk *n, blk *keep, blk *gone)
{
    tc__split_stat(a, n, -1);
    tc__bin_remove(c, n);
    keep->size += gone->size;
    keep->next = gone->next;
    tc__link_prev(gone->next, keep);
    tc__blk_del(a, gone);
}

void tc__free_block(tc__allocator *a, blk *b)
{
    seg *s = b->seg;
    scache *c = s->sc;
    b->state = B_FREE;
    if (TC_UNLIKELY(b->uses != NULL)) {
        free(b->uses); /* b->uses is overwritten below: b joins a bin or the free list;
                        * its events went to the pending list before */
        a->nuses--;
    }
    blk *n;
    if ((n = b->prev) && n->state == B_FREE) {
        merge(a, c, n, n, b);
        b = n;
    }
    if ((n = b->next) && n->state == B_FREE)
        merge(a, c, n, b, n);
    tc__split_stat(a, b, +1);
    tc__bin_insert(c, b);
    s->free_tick = ++a->tick;
    /* merged memory: the newest stamp (the epoch never goes back); in a gone
     * cache every use was on its dead stream, before its last fence */
    b->epoch = c->free_epoch = TC_UNLIKELY(c->gone) ? c->gone_epoch : a->epoch;
    /* A released pool's segment that is now wholly free goes back on the next
     * empty_cache, out-of-memory retry or garbage collection, not here:
     * giving it back may wait for the GPU. */
}
