/* The caching allocator's algorithm (no CUDA here; see alloc.h).
 *
 * Segments come from a provider; each segment is a doubly linked list of
 * blocks in address order that tile it exactly. A segment belongs to one pool
 * (default id 0 or a private pool), one size class (small/large) and one
 * stream; its free blocks sit in that (pool, class, stream) cache's size bins.
 * Bins are log2 classes with 8 steps each; a bitmap finds the next non-empty
 * bin, so best fit costs a short scan. Live blocks are found by address in an
 * open-addressing map. Block records come from a slab free list, so the hot
 * path calls no malloc. Invariants (checked by tc__alloc_check): blocks tile
 * segments, no two free neighbours, every free block is in exactly its bin,
 * every live block is in the map, and the stats equal a recount. */
#include "alloc.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

#include "alloc_internal.h"

/* ---- small helpers ------------------------------------------------------ */


static void stat_upd(tc_memory_stat *s, int64_t d)
{
    s->current += d;
    if (s->current > s->peak)
        s->peak = s->current;
    if (d > 0)
        s->allocated += d;
    else
        s->freed -= d;
}

static void stat2(tc_memory_stat *arr, int small, int64_t d)
{
    stat_upd(&arr[TC_STAT_ALL], d);
    stat_upd(&arr[small ? TC_STAT_SMALL_POOL : TC_STAT_LARGE_POOL], d);
}

static size_t round_size(const tc__allocator *a, size_t size)
{
    if (size < TC__MIN_BLOCK)
        return TC__MIN_BLOCK;
    unsigned div = a->cfg.roundup_power2_divisions;
    if (div > 1 && size > TC__MIN_BLOCK * div) {
        unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
        size_t floor2 = (size_t)1 << lg;
        if (floor2 == size)
            return size;
        size_t step = floor2 / div;
        if (step < TC__MIN_BLOCK)
            step = TC__MIN_BLOCK;
        return (size + step - 1) / step * step;
    }
    return (size + TC__MIN_BLOCK - 1) / TC__MIN_BLOCK * TC__MIN_BLOCK;
}

static size_t segment_size(size_t rounded)
{
    if (rounded <= TC__SMALL_SIZE)
        return TC__SMALL_BUFFER;
    if (rounded < TC__MIN_LARGE_ALLOC)
        return TC__LARGE_BUFFER;
    return (rounded + TC__ROUND_LARGE - 1) / TC__ROUND_LARGE * TC__ROUND_LARGE;
}

/* ---- block records -------------------------------------------------------- */

static blk *blk_new(tc__allocator *a)
{
    if (TC_UNLIKELY(!a->slab_free)) {
        enum { N = 256 };
        if (a->nslabs == a->cap_slabs) {
            size_t nc = a->cap_slabs ? 2 * a->cap_slabs : 16;
            void **ns = realloc(a->slabs, nc * sizeof *ns);
            if (!ns)
                return NULL;
            a->slabs = ns;
            a->cap_slabs = nc;
        }
        blk *arr = calloc(N, sizeof *arr);
        if (!arr)
            return NULL;
        a->slabs[a->nslabs++] = arr;
        for (int i = 0; i < N; i++) {
            arr[i].fnext = a->slab_free;
            a->slab_free = &arr[i];
        }
    }
    blk *b = a->slab_free;
    a->slab_free = b->fnext;
    memset(b, 0, sizeof *b);
    return b;
}

static void blk_del(tc__allocator *a, blk *b)
{
    b->fnext = a->slab_free;
    a->slab_free = b;
}

/* ---- pointer map ------------------------------------------------------------ */


static int map_grow(tc__allocator *a)
{
    size_t nc = a->map_cap ? a->map_cap * 2 : 4096;
    blk **nm = calloc(nc, sizeof *nm);
    if (!nm)
        return -1;
    for (size_t i = 0; i < a->map_cap; i++) {
        blk *b = a->map[i];
        if (!b)
            continue;
        size_t j = hash_addr(b->addr, nc);
        while (nm[j])
            j = (j + 1) & (nc - 1);
        nm[j] = b;
    }
    free(a->map);
    a->map = nm;
    a->map_cap = nc;
    return 0;
}

static int map_put(tc__allocator *a, blk *b)
{
    if ((a->map_n + 1) * 2 > a->map_cap && map_grow(a) != 0)
        return -1;
    size_t j = hash_addr(b->addr, a->map_cap);
    while (a->map[j])
        j = (j + 1) & (a->map_cap - 1);
    a->map[j] = b;
    a->map_n++;
    return 0;
}


static void map_remove_at(tc__allocator *a, size_t j)
{
    size_t m = a->map_cap - 1;
    a->map[j] = NULL;
    a->map_n--;
    for (size_t k = (j + 1) & m; a->map[k]; k = (k + 1) & m) { /* backward shift */
        size_t h = hash_addr(a->map[k]->addr, a->map_cap);
        if (((k - h) & m) >= ((k - j) & m)) {
            a->map[j] = a->map[k];
            a->map[k] = NULL;
            j = k;
        }
    }
}

/* ---- bins ------------------------------------------------------------------- */

static void bin_insert(scache *c, blk *b)
{
    unsigned i = bin_of(b->size);
    b->bin = i;
    b->fprev = NULL;
    b->fnext = c->bins[i];
    if (c->bins[i])
        c->bins[i]->fprev = b;
    c->bins[i] = b;
    c->bitmap[i / 64] |= 1ull << (i % 64);
}

static void bin_remove(scache *c, blk *b)
{
    unsigned i = b->bin;
    if (b->fprev)
        b->fprev->fnext = b->fnext;
    else
        c->bins[i] = b->fnext;
    if (b->fnext)
        b->fnext->fprev = b->fprev;
    if (!c->bins[i])
        c->bitmap[i / 64] &= ~(1ull << (i % 64));
    b->fprev = b->fnext = NULL;
}

static bool usable(const tc__allocator *a, const blk *b, size_t size)
{
    if (b->size < size)
        return false;
    size_t ms = a->cfg.max_split_size;
    if (ms != SIZE_MAX) {
        if (size < ms && b->size >= ms)
            return false; /* do not split an oversize block for a small request */
        if (size >= ms && b->size >= size + TC__LARGE_BUFFER)
            return false; /* too much waste */
    }
    return true;
}

/* Best fit: the smallest usable block in the first bin that has one. */
static blk *bin_find(const tc__allocator *a, scache *c, size_t size)
{
    unsigned i = bin_of(size);
    while (i < NBINS) {
        unsigned w = i / 64;
        uint64_t bits = c->bitmap[w] & (~0ull << (i % 64));
        while (!bits) {
            if (++w >= NWORDS)
                return NULL;
            bits = c->bitmap[w];
        }
        i = w * 64 + (unsigned)__builtin_ctzll(bits);
        blk *best = NULL;
        for (blk *b = c->bins[i]; b; b = b->fnext)
            if (usable(a, b, size) && (!best || b->size < best->size ||
                                       (b->size == best->size && b->addr < best->addr)))
                best = b;
        if (best)
            return best;
        i++;
    }
    return NULL;
}

static scache *cache_get(tc__allocator *a, uint64_t pool_id, int small, uintptr_t stream)
{
    scache *c = a->last_cache;
    if (c && c->stream == stream && c->small == small && c->pool_id == pool_id)
        return c;
    for (c = a->caches; c; c = c->next)
        if (c->stream == stream && c->small == small && c->pool_id == pool_id)
            return a->last_cache = c;
    c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->stream = stream;
    c->small = small;
    c->pool_id = pool_id;
    c->next = a->caches;
    a->caches = c;
    return a->last_cache = c;
}

static pool *pool_find(tc__allocator *a, uint64_t id)
{
    for (pool *p = a->pools; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

/* ---- segments ----------------------------------------------------------------- */

static bool seg_whole_free(const seg *s)
{
    return !s->head || (s->head->state == B_FREE && !s->head->next && s->head->size == s->size);
}

/* Accounting for a free block: inactive_split when it does not fill its segment. */
static void split_stat(tc__allocator *a, blk *b, int dir)
{
    if (b->size != b->seg->size || b->prev || b->next) {
        stat2(a->st.inactive_split, b->seg->sc->small, dir);
        stat2(a->st.inactive_split_bytes, b->seg->sc->small, dir * (int64_t)b->size);
    }
}

static void seg_release(tc__allocator *a, seg *s)
{
    int small = s->sc->small;
    blk *b = s->head;
    if (b)
        bin_remove(s->sc, b);
    if (s->expandable) {
        if (s->size)
            a->p.unmap(a->p.ctx, (void *)s->addr, s->size);
        a->p.unreserve(a->p.ctx, (void *)s->addr, s->va_size);
        s->sc->expand = NULL;
    } else {
        a->p.free(a->p.ctx, (void *)s->addr, s->size);
    }
    stat2(a->st.segment, small, -1);
    stat2(a->st.reserved_bytes, small, -(int64_t)s->size);
    a->st.num_device_free++;
    if (a->cfg.max_split_size != SIZE_MAX && s->size >= a->cfg.max_split_size)
        stat_upd(&a->st.oversize_segments, -1);
    if (s->prev)
        s->prev->next = s->next;
    else
        a->segs = s->next;
    if (s->next)
        s->next->prev = s->prev;
    if (b)
        blk_del(a, b);
    free(s);
}

/* Releases wholly free segments (not of live private pools unless `all`),
 * oldest first, until reserved <= target. */
static void release_cached(tc__allocator *a, size_t target, bool all_pools)
{
    for (;;) {
        if ((size_t)a->st.reserved_bytes[0].current <= target)
            return;
        seg *oldest = NULL;
        for (seg *s = a->segs; s; s = s->next) {
            if (!seg_whole_free(s))
                continue;
            pool *p = s->sc->pool_id ? pool_find(a, s->sc->pool_id) : NULL;
            if (p && !p->released && !all_pools)
                continue;
            if (!oldest || s->free_tick < oldest->free_tick)
                oldest = s;
        }
        if (!oldest)
            return;
        seg_release(a, oldest);
    }
}

/* Frees a block back into its cache, merging with free neighbours. */
static void free_block(tc__allocator *a, blk *b)
{
    seg *s = b->seg;
    scache *c = s->sc;
    b->state = B_FREE;
    b->nuses = 0;
    blk *n;
    if ((n = b->prev) && n->state == B_FREE) {
        split_stat(a, n, -1);
        bin_remove(c, n);
        n->size += b->size;
        n->next = b->next;
        if (b->next)
            b->next->prev = n;
        blk_del(a, b);
        b = n;
    }
    if ((n = b->next) && n->state == B_FREE) {
        split_stat(a, n, -1);
        bin_remove(c, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next)
            n->next->prev = b;
        blk_del(a, n);
    }
    split_stat(a, b, +1);
    bin_insert(c, b);
    s->free_tick = ++a->tick;
    pool *p = c->pool_id ? pool_find(a, c->pool_id) : NULL;
    if (p && p->released && seg_whole_free(s))
        seg_release(a, s);
}

static void process_events(tc__allocator *a, bool wait)
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
        if (--b->pending == 0) {
            int small = b->seg->sc->small;
            stat2(a->st.active, small, -1);
            stat2(a->st.active_bytes, small, -(int64_t)b->size);
            free_block(a, b);
        }
    }
    a->npend = k;
}

static size_t mem_total(tc__allocator *a)
{
    size_t fr = 0, tot = 0;
    if (a->p.mem_info)
        a->p.mem_info(a->p.ctx, &fr, &tot);
    return tot;
}

static tc_status new_segment(tc__allocator *a, size_t rounded, scache *c, blk **out);

/* Grows the cache's expandable segment so that its tail free block holds `size`. */
static tc_status grow_expandable(tc__allocator *a, scache *c, size_t size, blk **out)
{
    seg *s = c->expand;
    if (!s) {
        size_t va = mem_total(a);
        if (va == 0)
            va = (size_t)1 << 40;
        va = (va + a->p.granularity - 1) / a->p.granularity * a->p.granularity;
        void *base;
        tc_status st = a->p.reserve(a->p.ctx, va, &base);
        if (st != TC_OK)
            return st;
        s = calloc(1, sizeof *s);
        if (!s) {
            a->p.unreserve(a->p.ctx, base, va);
            return TC_ERROR_OUT_OF_MEMORY;
        }
        s->addr = (uintptr_t)base;
        s->va_size = va;
        s->expandable = true;
        s->sc = c;
        s->next = a->segs;
        if (a->segs)
            a->segs->prev = s;
        a->segs = s;
        c->expand = s;
        stat2(a->st.segment, c->small, +1);
        a->st.num_device_alloc++;
    }
    if (!s->head) { /* empty: map the first piece */
        size_t g = a->p.granularity, need = (size + g - 1) / g * g;
        blk *h = blk_new(a);
        tc_status st = TC_ERROR_OUT_OF_MEMORY;
        if (h && need <= s->va_size &&
            (a->limit == SIZE_MAX ||
             (size_t)a->st.reserved_bytes[0].current + need <= a->limit))
            st = a->p.map(a->p.ctx, (void *)s->addr, need);
        if (st != TC_OK) {
            if (h)
                blk_del(a, h);
            return st;
        }
        h->addr = s->addr;
        h->size = need;
        h->seg = s;
        s->head = h;
        s->size = need;
        stat2(a->st.reserved_bytes, c->small, (int64_t)need);
        bin_insert(c, h);
        *out = h;
        return TC_OK;
    }
    blk *tail = s->head;
    while (tail->next)
        tail = tail->next;
    size_t have = tail->state == B_FREE ? tail->size : 0;
    size_t g = a->p.granularity;
    size_t need = (size - have + g - 1) / g * g;
    if (s->size + need > s->va_size)
        return TC_ERROR_OUT_OF_MEMORY;
    if (a->limit != SIZE_MAX && (size_t)a->st.reserved_bytes[0].current + need > a->limit)
        return TC_ERROR_OUT_OF_MEMORY;
    tc_status st = a->p.map(a->p.ctx, (void *)(s->addr + s->size), need);
    if (st != TC_OK)
        return st;
    if (tail->state == B_FREE) {
        split_stat(a, tail, -1);
        bin_remove(c, tail);
        tail->size += need;
    } else {
        blk *nb = blk_new(a);
        if (!nb) {
            a->p.unmap(a->p.ctx, (void *)(s->addr + s->size), need);
            return TC_ERROR_OUT_OF_MEMORY;
        }
        nb->addr = s->addr + s->size;
        nb->size = need;
        nb->seg = s;
        nb->prev = tail;
        tail->next = nb;
        tail = nb;
    }
    s->size += need;
    stat2(a->st.reserved_bytes, c->small, (int64_t)need);
    split_stat(a, tail, +1);
    bin_insert(c, tail);
    *out = tail;
    return TC_OK;
}

static tc_status new_segment(tc__allocator *a, size_t rounded, scache *c, blk **out)
{
    if (a->cfg.expandable_segments && a->p.granularity && a->p.reserve)
        return grow_expandable(a, c, rounded, out);
    size_t ss = segment_size(rounded);
    if (a->limit != SIZE_MAX && (size_t)a->st.reserved_bytes[0].current + ss > a->limit)
        return TC_ERROR_OUT_OF_MEMORY;
    seg *s = calloc(1, sizeof *s);
    blk *h = s ? blk_new(a) : NULL;
    if (!h) {
        free(s);
        return TC_ERROR_OUT_OF_MEMORY;
    }
    void *base = NULL;
    tc_status st = a->p.alloc(a->p.ctx, ss, c->stream, &base);
    if (st != TC_OK) {
        blk_del(a, h);
        free(s);
        return st;
    }
    s->addr = (uintptr_t)base;
    s->size = s->va_size = ss;
    s->sc = c;
    h->addr = s->addr;
    h->size = ss;
    h->seg = s;
    s->head = h;
    s->next = a->segs;
    if (a->segs)
        a->segs->prev = s;
    a->segs = s;
    bin_insert(c, h);
    stat2(a->st.segment, c->small, +1);
    stat2(a->st.reserved_bytes, c->small, (int64_t)ss);
    a->st.num_device_alloc++;
    if (a->cfg.max_split_size != SIZE_MAX && ss >= a->cfg.max_split_size)
        stat_upd(&a->st.oversize_segments, +1);
    *out = h;
    return TC_OK;
}

/* ---- the public-facing operations -------------------------------------------- */

tc_status tc__alloc_create(const tc__seg_provider *provider, const tc__alloc_config *cfg,
                           int device, tc__allocator **out)
{
    tc__allocator *a = calloc(1, sizeof *a);
    if (!a)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory creating an allocator");
    pthread_mutex_init(&a->mu, NULL);
    a->p = *provider;
    a->cfg = *cfg;
    a->device = device;
    a->fraction = 1.0;
    a->limit = SIZE_MAX;
    a->st.max_split_size = cfg->max_split_size == SIZE_MAX ? -1 : (int64_t)cfg->max_split_size;
    *out = a;
    return TC_OK;
}

void tc__alloc_destroy(tc__allocator *a)
{
    if (!a)
        return;
    process_events(a, true);
    while (a->segs) {
        seg *s = a->segs;
        a->segs = s->next;
        if (s->expandable) {
            if (s->size)
                a->p.unmap(a->p.ctx, (void *)s->addr, s->size);
            a->p.unreserve(a->p.ctx, (void *)s->addr, s->va_size);
        } else {
            a->p.free(a->p.ctx, (void *)s->addr, s->size);
        }
        free(s);
    }
    while (a->caches) {
        scache *c = a->caches;
        a->caches = c->next;
        free(c);
    }
    while (a->pools) {
        pool *p = a->pools;
        a->pools = p->next;
        free(p);
    }
    for (size_t i = 0; i < a->nslabs; i++)
        free(a->slabs[i]);
    free(a->slabs);
    free(a->map);
    free(a->pend);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

static void oom_message(tc__allocator *a, size_t size)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    size_t fr = 0, tot = 0;
    if (a->p.mem_info)
        a->p.mem_info(a->p.ctx, &fr, &tot);
    int64_t alloc = a->st.allocated_bytes[0].current;
    int64_t unused = a->st.reserved_bytes[0].current - alloc;
    char lim[96] = "";
    if (a->limit != SIZE_MAX)
        snprintf(lim, sizeof lim, " (this process is capped at %s by the memory fraction)",
                 tc__fmt_bytes(b5, sizeof b5, a->limit));
    const char *hint =
        unused > (int64_t)(size_t)(tot / 20)
            ? "reserved-but-unused memory is large: TCUDA_ALLOC_CONF=expandable_segments:True "
              "(or max_split_size_mb) may avoid fragmentation"
            : "free tensors you no longer need, or lower the memory fraction of other processes";
    tc__fail(TC_ERROR_OUT_OF_MEMORY,
             "%s out of memory: tried to allocate %s on device %d, which has a total capacity "
             "of %s of which %s is free%s; tcuda holds %s allocated and %s reserved but "
             "unallocated. Hint: %s",
             a->p.name, tc__fmt_bytes(b1, sizeof b1, size), a->device,
             tc__fmt_bytes(b2, sizeof b2, tot), tc__fmt_bytes(b3, sizeof b3, fr), lim,
             tc__fmt_bytes(b4, sizeof b4, (uint64_t)alloc),
             tc__fmt_bytes(b5, sizeof b5, (uint64_t)(unused > 0 ? unused : 0)), hint);
}

static uint64_t capture_pool(const tc__allocator *a, uintptr_t stream)
{
    for (int i = 0; i < a->ncaps; i++)
        if (a->caps[i].stream == stream)
            return a->caps[i].pool_id;
    return 0;
}

static tc_status malloc_locked(tc__allocator *a, size_t size, uintptr_t stream, void **out)
{
    if (a->npend)
        process_events(a, false);
    size_t rs = round_size(a, size);
    int small = rs <= TC__SMALL_SIZE;
    uint64_t pid = a->ncaps ? capture_pool(a, stream) : 0;
    scache *c = cache_get(a, pid, small, stream);
    if (!c)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for allocator records");
    blk *b = bin_find(a, c, rs);
    if (!b) {
        tc_status st = TC_ERROR_OUT_OF_MEMORY;
        if (a->cfg.gc_threshold > 0) {
            size_t cap = a->limit != SIZE_MAX ? a->limit : mem_total(a);
            size_t thr = (size_t)(a->cfg.gc_threshold * (double)cap);
            size_t ss = segment_size(rs);
            if (cap && (size_t)a->st.reserved_bytes[0].current + ss > thr)
                release_cached(a, thr > ss ? thr - ss : 0, false);
        }
        st = new_segment(a, rs, c, &b);
        if (st != TC_OK) {
            a->st.num_alloc_retries++;
            process_events(a, true);
            b = bin_find(a, c, rs);
            if (!b) {
                release_cached(a, 0, false);
                st = new_segment(a, rs, c, &b);
            }
            if (!b) {
                a->st.num_ooms++;
                oom_message(a, size);
                return TC_ERROR_OUT_OF_MEMORY;
            }
        }
    }
    split_stat(a, b, -1);
    bin_remove(c, b);
    size_t rem = b->size - rs;
    bool split = small ? rem >= TC__MIN_BLOCK : rem > TC__SMALL_SIZE;
    if (split && b->size >= a->cfg.max_split_size)
        split = false;
    if (b->seg->expandable)
        split = rem >= TC__MIN_BLOCK;
    if (split) {
        blk *r = blk_new(a);
        if (r) {
            r->addr = b->addr + rs;
            r->size = rem;
            r->seg = b->seg;
            r->prev = b;
            r->next = b->next;
            if (b->next)
                b->next->prev = r;
            b->next = r;
            b->size = rs;
            split_stat(a, r, +1);
            bin_insert(c, r);
        }
    }
    b->state = B_ALLOC;
    b->requested = size;
    b->nuses = 0;
    if (map_put(a, b) != 0) {
        free_block(a, b);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for the allocator's map");
    }
    stat2(a->st.allocation, small, 1);
    stat2(a->st.allocated_bytes, small, (int64_t)b->size);
    stat2(a->st.active, small, 1);
    stat2(a->st.active_bytes, small, (int64_t)b->size);
    stat2(a->st.requested_bytes, small, (int64_t)size);
    if (a->cfg.max_split_size != SIZE_MAX && b->size >= a->cfg.max_split_size)
        stat_upd(&a->st.oversize_allocations, 1);
    *out = (void *)b->addr;
    return TC_OK;
}

tc_status tc__alloc_malloc(tc__allocator *a, size_t size, uintptr_t stream, void **out)
{
    if (size == 0) {
        *out = NULL;
        return TC_OK;
    }
    if (size > ((size_t)1 << 56))
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "tried to allocate %zu bytes: more than any "
                        "device can hold", size);
    pthread_mutex_lock(&a->mu);
    tc_status st = malloc_locked(a, size, stream, out);
    pthread_mutex_unlock(&a->mu);
    return st;
}

static tc_status push_pending(tc__allocator *a, blk *b, uintptr_t stream)
{
    void *ev = a->p.event_record ? a->p.event_record(a->p.ctx, stream) : NULL;
    if (!ev)
        return TC_OK; /* nothing to wait for (or could not record: treated as done) */
    if (a->npend == a->cap_pend) {
        size_t nc = a->cap_pend ? 2 * a->cap_pend : 64;
        pend *np = realloc(a->pend, nc * sizeof *np);
        if (!np) {
            if (a->p.event_sync)
                a->p.event_sync(a->p.ctx, ev);
            a->p.event_destroy(a->p.ctx, ev);
            return TC_OK;
        }
        a->pend = np;
        a->cap_pend = nc;
    }
    a->pend[a->npend].event = ev;
    a->pend[a->npend].b = b;
    a->npend++;
    b->pending++;
    return TC_OK;
}

tc_status tc__alloc_free(tc__allocator *a, void *ptr)
{
    bool owned;
    tc__alloc_free_if_owned(a, ptr, &owned);
    if (!owned)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "pointer %p was not allocated by tcuda's %s allocator of device %d (or "
                        "was freed already)", ptr, a->p.name, a->device);
    return TC_OK;
}

void tc__alloc_free_if_owned(tc__allocator *a, void *ptr, bool *owned)
{
    *owned = true;
    if (!ptr)
        return;
    pthread_mutex_lock(&a->mu);
    size_t j = map_find(a, (uintptr_t)ptr);
    if (j == SIZE_MAX) {
        pthread_mutex_unlock(&a->mu);
        *owned = false;
        return;
    }
    blk *b = a->map[j];
    map_remove_at(a, j);
    int small = b->seg->sc->small;
    stat2(a->st.allocation, small, -1);
    stat2(a->st.allocated_bytes, small, -(int64_t)b->size);
    stat2(a->st.requested_bytes, small, -(int64_t)b->requested);
    if (a->cfg.max_split_size != SIZE_MAX && b->size >= a->cfg.max_split_size)
        stat_upd(&a->st.oversize_allocations, -1);
    if (b->nuses) {
        b->state = B_PENDING;
        int n = b->nuses;
        for (int i = 0; i < n; i++)
            push_pending(a, b, b->uses[i]);
    }
    if (b->pending == 0) {
        stat2(a->st.active, small, -1);
        stat2(a->st.active_bytes, small, -(int64_t)b->size);
        free_block(a, b);
    }
    pthread_mutex_unlock(&a->mu);
}

bool tc__alloc_owns(tc__allocator *a, const void *ptr)
{
    pthread_mutex_lock(&a->mu);
    bool r = map_find(a, (uintptr_t)ptr) != SIZE_MAX;
    pthread_mutex_unlock(&a->mu);
    return r;
}

tc_status tc__alloc_record_stream(tc__allocator *a, void *ptr, uintptr_t stream)
{
    pthread_mutex_lock(&a->mu);
    size_t j = map_find(a, (uintptr_t)ptr);
    tc_status st = TC_OK;
    if (j == SIZE_MAX) {
        st = tc__fail(TC_ERROR_INVALID_ARGUMENT,
                      "record_stream: %p is not the start of a live tcuda block", ptr);
    } else {
        blk *b = a->map[j];
        bool have = b->seg->sc->stream == stream;
        for (int i = 0; i < b->nuses && !have; i++)
            have = b->uses[i] == stream;
        if (!have) {
            if (b->nuses == MAX_USES)
                st = tc__fail(TC_ERROR_NOT_SUPPORTED,
                              "record_stream: a block may be used on at most %d extra streams",
                              MAX_USES);
            else
                b->uses[b->nuses++] = stream;
        }
    }
    pthread_mutex_unlock(&a->mu);
    return st;
}

/* Unmaps the whole granules of an expandable segment's free tail. */
static void trim_tail(tc__allocator *a, seg *s)
{
    blk *t = s->head;
    while (t && t->next)
        t = t->next;
    if (!t || t->state != B_FREE || !t->prev)
        return;
    size_t g = a->p.granularity;
    uintptr_t from = (t->addr + g - 1) / g * g, end = s->addr + s->size;
    if (from >= end)
        return;
    size_t cut = (size_t)(end - from);
    split_stat(a, t, -1);
    bin_remove(s->sc, t);
    a->p.unmap(a->p.ctx, (void *)from, cut);
    s->size -= cut;
    stat2(a->st.reserved_bytes, s->sc->small, -(int64_t)cut);
    t->size -= cut;
    if (t->size == 0) {
        t->prev->next = NULL;
        blk_del(a, t);
    } else {
        split_stat(a, t, +1);
        bin_insert(s->sc, t);
    }
}

void tc__alloc_empty_cache(tc__allocator *a)
{
    pthread_mutex_lock(&a->mu);
    process_events(a, true);
    release_cached(a, 0, false);
    for (seg *s = a->segs; s; s = s->next)
        if (s->expandable)
            trim_tail(a, s);
    pthread_mutex_unlock(&a->mu);
}

void tc__alloc_stats(tc__allocator *a, struct tc_memory_stats *out)
{
    pthread_mutex_lock(&a->mu);
    *out = a->st;
    pthread_mutex_unlock(&a->mu);
}

static void reset_peak(tc_memory_stat *s) { s->peak = s->current; }

void tc__alloc_reset_peak(tc__allocator *a)
{
    pthread_mutex_lock(&a->mu);
    tc_memory_stat *all = (tc_memory_stat *)&a->st;
    size_t n = offsetof(struct tc_memory_stats, num_alloc_retries) / sizeof(tc_memory_stat);
    for (size_t i = 0; i < n; i++)
        reset_peak(&all[i]);
    reset_peak(&a->st.oversize_allocations);
    reset_peak(&a->st.oversize_segments);
    pthread_mutex_unlock(&a->mu);
}

void tc__alloc_reset_accumulated(tc__allocator *a)
{
    pthread_mutex_lock(&a->mu);
    tc_memory_stat *all = (tc_memory_stat *)&a->st;
    size_t n = offsetof(struct tc_memory_stats, num_alloc_retries) / sizeof(tc_memory_stat);
    for (size_t i = 0; i < n; i++)
        all[i].allocated = all[i].freed = 0;
    a->st.num_alloc_retries = a->st.num_ooms = a->st.num_sync_all_streams = 0;
    a->st.num_device_alloc = a->st.num_device_free = 0;
    pthread_mutex_unlock(&a->mu);
}

tc_status tc__alloc_set_fraction(tc__allocator *a, double fraction)
{
    TC_CHECK_ARG(fraction >= 0.0 && fraction <= 1.0,
                 "memory fraction %g is outside [0, 1]", fraction);
    pthread_mutex_lock(&a->mu);
    a->fraction = fraction;
    size_t tot = mem_total(a);
    a->limit = fraction >= 1.0 || tot == 0 ? SIZE_MAX : (size_t)(fraction * (double)tot);
    pthread_mutex_unlock(&a->mu);
    return TC_OK;
}

tc_status tc__alloc_begin_pool(tc__allocator *a, uint64_t id, uintptr_t stream)
{
    TC_CHECK_ARG(id != 0, "private pool id 0 is the default pool");
    pthread_mutex_lock(&a->mu);
    tc_status st = TC_OK;
    pool *p = pool_find(a, id);
    if (p && p->released)
        st = tc__fail(TC_ERROR_INVALID_STATE, "private pool %" PRIu64 " was released", id);
    else if (capture_pool(a, stream) != 0 || a->ncaps == 16)
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
    pthread_mutex_unlock(&a->mu);
    return st;
}

tc_status tc__alloc_end_pool(tc__allocator *a, uintptr_t stream)
{
    pthread_mutex_lock(&a->mu);
    tc_status st = tc__fail(TC_ERROR_INVALID_STATE, "no private pool is active on that stream");
    for (int i = 0; i < a->ncaps; i++)
        if (a->caps[i].stream == stream) {
            a->caps[i] = a->caps[--a->ncaps];
            st = TC_OK;
            break;
        }
    pthread_mutex_unlock(&a->mu);
    return st;
}

tc_status tc__alloc_release_pool(tc__allocator *a, uint64_t id)
{
    pthread_mutex_lock(&a->mu);
    pool *p = pool_find(a, id);
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
                if (s->sc->pool_id == id && seg_whole_free(s))
                    seg_release(a, s);
            }
        }
    }
    pthread_mutex_unlock(&a->mu);
    return st;
}
