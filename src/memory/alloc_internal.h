/* The caching allocator's data structures and the helpers its files share
 * (internal). alloc.h is its interface; the algorithm is split by purpose:
 *   alloc.c             entry points: malloc, free, empty_cache, stats, fraction
 *   alloc_blocks.c      block records, the pointer map, size bins, split/merge
 *                       (the hot halves are inline below: taking and giving back
 *                       a record, map put/remove, best fit, split)
 *   alloc_segments.c    whole segments: create, release, make room before growing
 *   alloc_expandable.c  expandable segments: extents, page mapping, unmapping
 *   alloc_streams.c     record_stream and the events that delay reuse
 *   alloc_pools.c       private pools
 *   alloc_config.c      TCUDA_ALLOC_CONF parsing and size rounding
 *   alloc_inspect.c     snapshot and the invariant checker
 *   alloc_text.c        the allocator's words: sizes, stat keys, the summary
 *                       table, PyTorch's names of block states and segments
 * Around it, with headers of their own:
 *   alloc_history.c     memory history (alloc_history.h): entry points and
 *                       the registry; alloc_history_events.c each allocator's
 *                       events, alloc_history_stacks.c the call stacks,
 *                       alloc_history_dump.c the pickle and JSON snapshots
 *   alloc_mempool.c     user memory pools over private pools (alloc_mempool.h)
 *   alloc_host.c        a host segment provider, for the CPU tests (alloc.h)
 * src/memory/cuda/ is its CUDA side: the segment providers (CUDA memory,
 * streams and events) and the public memory API over one allocator per
 * device and one for pinned host memory.
 * Every function here expects the allocator's mutex held unless it says not. */
#ifndef TCUDA_ALLOC_INTERNAL_H
#define TCUDA_ALLOC_INTERNAL_H

#include <pthread.h>
#include <string.h>

#include "base/internal.h"
#include "alloc.h"
#include "alloc_history.h"

/* The allocator's lock: on Linux a three-state futex lock (Drepper's
 * "Futexes are tricky", mutex 3) whose uncontended lock and unlock are one
 * atomic each, inline; elsewhere a pthread mutex. */
#if defined(__linux__)
#include <stdatomic.h>
typedef struct tc__mutex {
    atomic_int v; /* 0 free, 1 held, 2 held and maybe waited for */
} tc__mutex;
void tc__mutex_wait(tc__mutex *m);
void tc__mutex_wake(tc__mutex *m);
static inline void tc__mutex_init(tc__mutex *m) { atomic_init(&m->v, 0); }
static inline void tc__mutex_destroy(tc__mutex *m) { (void)m; }
static inline void tc__mutex_lock(tc__mutex *m)
{
    int free_ = 0;
    if (TC_UNLIKELY(!atomic_compare_exchange_strong_explicit(&m->v, &free_, 1, memory_order_acquire,
                                                             memory_order_relaxed)))
        tc__mutex_wait(m);
}
static inline void tc__mutex_unlock(tc__mutex *m)
{
    if (TC_UNLIKELY(atomic_exchange_explicit(&m->v, 0, memory_order_release) == 2))
        tc__mutex_wake(m);
}
#else
typedef pthread_mutex_t tc__mutex;
#define tc__mutex_init(m) pthread_mutex_init(m, NULL)
#define tc__mutex_destroy pthread_mutex_destroy
#define tc__mutex_lock pthread_mutex_lock
#define tc__mutex_unlock pthread_mutex_unlock
#endif

enum { B_FREE = 0, B_ALLOC = 1, B_PENDING = 2 };
#define NBINS 384
#define NWORDS (NBINS / 64)

typedef struct blk blk;
typedef struct seg seg;
typedef struct scache scache;

/* One extra stream of a live block: the stream while it lives; once it went
 * away (tc__alloc_stream_gone), an event recorded on it then, which this
 * record owns until the block is freed, and the stream is never named again. */
typedef struct blk_use {
    uintptr_t stream;
    void *event; /* NULL while the stream lives */
} blk_use;

/* Extra streams of a live block (record_stream), malloc'd on the first one;
 * freed with the block. */
typedef struct blk_uses {
    int pending;     /* events still to complete before the block is free */
    unsigned n, cap; /* entries in use, room in use[] */
    blk_use use[];
} blk_uses;

/* A block record: exactly one 64-byte line (slabs are 64-byte aligned), so
 * malloc and free touch one line per block. Fields the hot path does not
 * need live in blk_uses; the bin links and the live-block fields share
 * space, since a block is either free (in a bin) or not. */
struct blk {
    uintptr_t addr;
    size_t size;
    blk *prev, *next; /* address neighbours in the segment */
    union {
        struct {          /* free (or on the slab free list): */
            blk **fpprev; /* bin list: the link that points here */
            blk *fnext;   /* bin list, or slab free list */
        };
        struct {              /* allocated or pending: */
            size_t requested; /* bytes asked for (B_ALLOC only) */
            blk_uses *uses;   /* extra streams, or NULL */
        };
    };
    seg *seg;
    unsigned short bin;
    unsigned char state;
    unsigned char small; /* copy of seg->sc->small, to spare the hot path two loads */
    uint32_t epoch;      /* free blocks: the allocator's epoch when the memory was last
                          * freed (see "fences" in alloc_streams.c) */
};
_Static_assert(sizeof(blk) == 64, "a block record is one cache line");

struct scache { /* free blocks of one (pool, class, stream) */
    uintptr_t stream;
    int small;
    uint64_t pool_id;
    uint64_t bitmap[NWORDS];
    blk *bins[NBINS];
    seg *expand; /* this cache's expandable segment, if any; a segment is
                  * expandable exactly when it is its cache's expand */
    scache *next;
    /* Fences (alloc_streams.c): blocks of this cache freed at an epoch up to
     * done_epoch are known complete; `fence`, when not NULL, is an event on
     * `stream` recorded at fence_epoch; free_epoch is the last free's. */
    void *fence;
    uint32_t fence_epoch, done_epoch, free_epoch;
    /* The stream went away (tc__alloc_stream_gone): the cache serves no
     * malloc and its stream is never named to the provider again; `fence`
     * (or done_epoch) then covers every use of its memory on that stream,
     * recorded at gone_epoch, which stamps its frees from then on. Once that
     * is seen complete its plain segments move to a live cache that needs
     * memory (alloc_streams.c), and the record goes with its last segment. */
    bool gone;
    uint32_t gone_epoch;
};

/* A segment. Plain: one provider allocation, size == va_size == mapped.
 * Expandable: a reserved range of va_size bytes whose first `size` bytes (the
 * extent, whole granules) are tiled by blocks; of those, the granules marked
 * in `pages` are mapped (`mapped` bytes). Every granule that a block not free
 * touches is mapped; free blocks may have unmapped granules, which are mapped
 * back when the block is used again. Memory is mapped in chunks, each one
 * provider map call over a run of granules and unmapped only whole; `starts`
 * marks each chunk's first granule. */
struct seg {
    uintptr_t addr;
    size_t size;
    size_t va_size;
    size_t mapped;
    bool expandable;
    scache *sc;
    blk *head;
    seg *prev, *next;
    uint64_t free_tick;
    uint64_t *pages;  /* expandable: one bit per granule of the extent */
    uint64_t *starts; /* expandable: the granules that begin a chunk */
    size_t cap_pages; /* words in pages and in starts */
};

typedef struct pool {
    uint64_t id;
    bool released;
    struct pool *next;
} pool;

typedef struct mapent { /* a pointer-map slot; empty when b is NULL */
    uintptr_t addr;     /* b->addr, kept here so probing reads only the map */
    blk *b;
} mapent;

typedef struct pend {
    void *event;
    blk *b;
} pend;

typedef struct capture {
    uintptr_t stream;
    uint64_t pool_id;
} capture;

struct tc__allocator {
    tc__mutex mu;
    /* History (alloc_history.h): the stack id of the entry point holding mu
     * (or 0); whether one holds it (hist_call), so that its events share one
     * clock read (hist_now, 0 until read). Set by tc__hist_begin/end. */
    uint32_t hist_stack, hist_call;
    uint64_t hist_now;
    tc__seg_provider p;
    unsigned gshift; /* log2 of p.granularity (expandable segments) */
    tc__alloc_config cfg;
    int device;
    double fraction;
    size_t limit;       /* reserved cap, SIZE_MAX: none */
    size_t high;        /* the most ever reserved (not reset with the stats' peaks) */
    size_t peak_active; /* the most ever active (idem) */
    tc_memory_stats_info st;
    seg *segs;
    scache *caches;
    scache *last_cache[2]; /* the last cache used, by class (small or not) */
    pool *pools;
    capture caps[16];
    int ncaps;
    pend *pend;
    size_t npend, cap_pend;
    mapent *map; /* live blocks, open addressing by addr */
    size_t map_cap, map_n;
    blk *slab_free;
    void **slabs;
    size_t nslabs, cap_slabs;
    uint64_t tick;
    uint32_t epoch;          /* frees stamp it; each fence recorded moves it on */
    size_t nuses;            /* live blocks with a blk_uses record */
    size_t ngone;            /* caches whose stream went away */
    tc__allocator *reg_next; /* the list of every allocator (alloc.c) */
    tc__hist_local hist;     /* recorded events and live stacks (alloc_history_events.c) */
};

/* ---- statistics -----------------------------------------------------------
 * The nine per-pool arrays of a->st (allocation .. requested_bytes) are kept
 * so that an update writes little: each pool's entry holds current, peak and
 * allocated as reported, but in `freed` the reported freed - allocated +
 * current, so a decrease writes current alone; the TC_STAT_POOL_ALL entry holds
 * current and peak only (its allocated and freed are the pools' sums).
 * tc__stats_read gives the reported numbers. The other stats are plain. */

static inline void stat_upd(tc_memory_stat *s, int64_t d)
{
    s->current += d;
    if (s->current > s->peak)
        s->peak = s->current;
    if (d > 0)
        s->allocated += d;
    else
        s->freed -= d;
}

static inline void stat_grow(tc_memory_stat *s, int64_t d)
{
    int64_t c = s->current + d;
    s->current = c;
    if (TC_UNLIKELY(c > s->peak))
        s->peak = c;
}

/* One of the nine arrays grows by d >= 0 in pool `small`, and the total. */
static inline void stat2_add(tc_memory_stat *arr, int small, int64_t d)
{
    tc_memory_stat *p = &arr[small ? TC_STAT_POOL_SMALL : TC_STAT_POOL_LARGE];
    stat_grow(&arr[TC_STAT_POOL_ALL], d);
    stat_grow(p, d);
    p->allocated += d;
}

/* One of the nine arrays shrinks by d >= 0. */
static inline void stat2_sub(tc_memory_stat *arr, int small, int64_t d)
{
    arr[TC_STAT_POOL_ALL].current -= d;
    arr[small ? TC_STAT_POOL_SMALL : TC_STAT_POOL_LARGE].current -= d;
}

static inline void stat2(tc_memory_stat *arr, int small, int64_t d)
{
    if (d > 0)
        stat2_add(arr, small, d);
    else
        stat2_sub(arr, small, -d);
}

/* Reserved bytes changed by d; keeps a->high. */
static inline void reserved_upd(tc__allocator *a, int small, int64_t d)
{
    stat2(a->st.reserved_bytes, small, d);
    if ((size_t)a->st.reserved_bytes[0].current > a->high)
        a->high = (size_t)a->st.reserved_bytes[0].current;
}

/* The provider's total memory (0 when it cannot say). */
static inline size_t tc__mem_total(const tc__allocator *a)
{
    size_t fr = 0, tot = 0;
    if (a->p.mem_info)
        a->p.mem_info(a->p.ctx, &fr, &tot);
    return tot;
}

/* Bit k of a bitmap (expandable segments' granule maps). */
static inline bool tc__bit_get(const uint64_t *w, size_t k) { return (w[k / 64] >> (k % 64)) & 1; }

/* ---- bins and the pointer map --------------------------------------------- */

static inline unsigned bin_of(size_t s)
{
    unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)s);
    unsigned sub = (unsigned)(s >> (lg - 3)) & 7u;
    unsigned i = (lg - 9u) * 8u + sub;
    return i < NBINS ? i : NBINS - 1;
}

static inline size_t hash_addr(uintptr_t x, size_t cap)
{
    uint64_t h = (uint64_t)x * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static inline size_t map_find(const tc__allocator *a, uintptr_t addr)
{
    if (!a->map_cap)
        return SIZE_MAX;
    size_t m = a->map_cap - 1, j = hash_addr(addr, a->map_cap);
    while (a->map[j].b) {
        if (a->map[j].addr == addr)
            return j;
        j = (j + 1) & m;
    }
    return SIZE_MAX;
}

/* The bin lists are singly linked forward, each block holding the address of
 * the link that points to it (the bin's head or the previous block's fnext),
 * so insert and remove need no branch: a missing neighbour is written
 * through a scratch link instead. */
static inline void tc__bin_insert(scache *c, blk *b)
{
    unsigned i = bin_of(b->size);
    blk *h = c->bins[i], **scratch;
    b->bin = (unsigned short)i;
    b->fpprev = &c->bins[i];
    b->fnext = h;
    *(h ? &h->fpprev : &scratch) = &b->fnext;
    c->bins[i] = b;
    c->bitmap[i / 64] |= 1ull << (i % 64);
}

static inline void tc__bin_remove(scache *c, blk *b)
{
    unsigned i = b->bin;
    blk *n = b->fnext, **scratch;
    *b->fpprev = n;
    *(n ? &n->fpprev : &scratch) = b->fpprev;
    c->bitmap[i / 64] &= ~((uint64_t)(c->bins[i] == NULL) << (i % 64));
    b->fpprev = NULL;
    b->fnext = NULL;
}

/* Sets n->prev = p when there is an n, without a branch. */
static inline void tc__link_prev(blk *n, blk *p)
{
    blk *scratch;
    *(n ? &n->prev : &scratch) = p;
}

/* ---- hot helpers, inline (the rest of each lives in alloc_blocks.c) ------- */

int tc__slab_add(tc__allocator *a); /* more spare records; -1 when out of memory */
int tc__map_grow(tc__allocator *a); /* doubles the map; -1 when out of memory */
/* The cache of (pool, class, stream), made if new; NULL when out of memory. */
scache *tc__cache_find(tc__allocator *a, uint64_t pool_id, int small, uintptr_t stream);

/* A zeroed record, NULL when out of memory. */
static inline blk *tc__blk_new(tc__allocator *a)
{
    if (TC_UNLIKELY(!a->slab_free) && tc__slab_add(a) != 0)
        return NULL;
    blk *b = a->slab_free;
    a->slab_free = b->fnext;
    memset(b, 0, sizeof *b);
    return b;
}

static inline void tc__blk_del(tc__allocator *a, blk *b)
{
    b->fnext = a->slab_free;
    a->slab_free = b;
}

/* -1 when out of memory. */
static inline int tc__map_put(tc__allocator *a, blk *b)
{
    if (TC_UNLIKELY((a->map_n + 1) * 2 > a->map_cap) && tc__map_grow(a) != 0)
        return -1;
    size_t j = hash_addr(b->addr, a->map_cap);
    while (a->map[j].b)
        j = (j + 1) & (a->map_cap - 1);
    a->map[j].addr = b->addr;
    a->map[j].b = b;
    a->map_n++;
    return 0;
}

static inline void tc__map_remove_at(tc__allocator *a, size_t j)
{
    size_t m = a->map_cap - 1;
    a->map[j].b = NULL;
    a->map_n--;
    for (size_t k = (j + 1) & m; a->map[k].b; k = (k + 1) & m) { /* backward shift */
        size_t h = hash_addr(a->map[k].addr, a->map_cap);
        if (((k - h) & m) >= ((k - j) & m)) {
            a->map[j] = a->map[k];
            a->map[k].b = NULL;
            j = k;
        }
    }
}

/* The cache of (pool, class, stream): the last one used for the class, or
 * found (made) by tc__cache_find; NULL when out of memory. */
static inline scache *tc__cache_get(tc__allocator *a, uint64_t pool_id, int small, uintptr_t stream)
{
    scache *c = a->last_cache[small];
    if (TC_LIKELY(c && c->stream == stream && c->pool_id == pool_id))
        return c;
    return tc__cache_find(a, pool_id, small, stream);
}

/* inactive_split accounting of a free block entering (+1) or leaving (-1):
 * counted when it does not fill its segment. */
static inline void tc__split_stat(tc__allocator *a, blk *b, int dir)
{
    if (b->prev || b->next) {
        if (dir > 0) {
            stat2_add(a->st.inactive_split, b->small, 1);
            stat2_add(a->st.inactive_split_bytes, b->small, (int64_t)b->size);
        } else {
            stat2_sub(a->st.inactive_split, b->small, 1);
            stat2_sub(a->st.inactive_split_bytes, b->small, (int64_t)b->size);
        }
    }
}

/* ---- best fit and split: malloc's path, inline (merge is in alloc_blocks.c) */

static inline bool tc__usable(const tc__allocator *a, const blk *b, size_t size)
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

/* Best fit: the smallest usable block in the first bin that has one (lowest
 * address among equals). */
static inline blk *tc__bin_find(const tc__allocator *a, scache *c, size_t size)
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
            if (tc__usable(a, b, size) &&
                (!best || b->size < best->size || (b->size == best->size && b->addr < best->addr)))
                best = b;
        if (best)
            return best;
        i++;
    }
    return NULL;
}

/* Takes free block b out of its bin (in cache c, its segment's) for a
 * request of rs bytes, splitting off the rest when the rules allow; b becomes
 * the allocated part (B_ALLOC). Returns whether b's segment is expandable. */
static inline bool tc__block_take(tc__allocator *a, scache *c, blk *b, size_t rs)
{
    bool expandable = b->seg == c->expand; /* without reading the segment */
    tc__split_stat(a, b, -1);
    tc__bin_remove(c, b);
    b->state = B_ALLOC;
    /* Split off the rest when it is at least 512 B (small pool, expandable
     * segments) or over 1 MiB (large pool), and b is not oversize. The
     * threshold is picked without a branch: small and large requests come
     * in no order a predictor could learn. */
    size_t rem = b->size - rs;
    size_t large = !(c->small | expandable);
    size_t least = TC__MIN_BLOCK + large * (TC__SMALL_SIZE + 1 - TC__MIN_BLOCK);
    if (rem < least || (!expandable && b->size >= a->cfg.max_split_size))
        return expandable;
    blk *r = tc__blk_new(a);
    if (!r)
        return expandable; /* keep the whole block: correct, only less frugal */
    r->addr = b->addr + rs;
    r->size = rem;
    r->seg = b->seg;
    r->small = b->small;
    r->epoch = b->epoch;
    r->prev = b;
    r->next = b->next;
    tc__link_prev(b->next, r);
    b->next = r;
    b->size = rs;
    tc__split_stat(a, r, +1);
    tc__bin_insert(c, r);
    return expandable;
}

/* An instrumented entry point, right after taking a->mu and right before
 * giving it back. */
static inline void tc__hist_begin(tc__allocator *a, uint32_t stack)
{
    a->hist_stack = stack;
    a->hist_call = 1;
    a->hist_now = 0;
}
static inline void tc__hist_end(tc__allocator *a)
{
    a->hist_stack = 0;
    a->hist_call = 0;
}

/* Whether a free of a block must reach the history (recorded, or a stack
 * of a live block is kept). */
#define TC__HIST_FREE_SEEN(a, bits) (TC__HIST_ON(bits) || TC_UNLIKELY((a)->hist.live_n != 0))

/* alloc.c */
/* a->st as reported (see "statistics" above). */
void tc__stats_read(const tc__allocator *a, tc_memory_stats_info *out);

/* alloc_blocks.c */
/* Frees a block back into its cache, merging with free neighbours. */
void tc__free_block(tc__allocator *a, blk *b);

/* alloc_inspect.c */
/* tc__alloc_snapshot with the mutex held. */
tc_status tc__alloc_snapshot_locked(tc__allocator *a, tc_memory_snapshot_info *snap);

/* alloc_segments.c */
size_t tc__segment_size(size_t rounded);
/* TCUDA_NO_CACHING: gives segment s back if it is wholly free and may go
 * (not during a graph capture, not a live private pool's); other segments
 * stay as they are. */
void tc__no_caching_release(tc__allocator *a, seg *s);
bool tc__seg_whole_free(const seg *s);
void tc__seg_release(tc__allocator *a, seg *s);
void tc__seg_link(tc__allocator *a, seg *s); /* onto the segment list */
/* May the allocator give this segment back without being asked? (Not while
 * it belongs to a live private pool, unless `all_pools`.) */
bool tc__seg_releasable(tc__allocator *a, const seg *s, bool all_pools);
/* Releases wholly free segments, oldest first, until reserved <= target. */
void tc__release_cached(tc__allocator *a, size_t target, bool all_pools);
/* Before `more` bytes are reserved: gives back free granules of expandable
 * segments whose last use is known complete, so that reserved + more stays
 * near the most ever in use, when it can; never waits for the GPU. */
void tc__make_room(tc__allocator *a, size_t more);
/* A block of at least `rounded` bytes for cache c, from new memory. */
tc_status tc__new_segment(tc__allocator *a, size_t rounded, scache *c, blk **out);

/* alloc_expandable.c */
/* Extends c's expandable segment (reserving it first) so that a free tail
 * block holds `size` bytes; maps nothing. */
tc_status tc__exp_grow(tc__allocator *a, scache *c, size_t size, blk **out);
/* Bytes that mapping the granules under b would add. */
size_t tc__exp_unmapped_bytes(const tc__allocator *a, const blk *b);
/* Maps the granules under b that are not mapped, `need` bytes (what
 * tc__exp_unmapped_bytes said). OOM when refused (or over the fraction cap);
 * then nothing changed. */
tc_status tc__exp_map_block(tc__allocator *a, blk *b, size_t need);
/* Unmaps chunks that lie wholly in free blocks until `want` bytes went back
 * (SIZE_MAX: all); a chunk goes whole, so more may go. Only chunks whose
 * last use is known complete go, unless `wait`, which first waits for it
 * (empty_cache, out-of-memory retry). Nothing to do (0) with a provider that
 * has no expandable segments. */
size_t tc__exp_unmap_free(tc__allocator *a, size_t want, bool wait);
/* Returns a segment's chunks and its reservation to the provider, and frees
 * its bitmaps; waits for the last use of its memory first. */
void tc__exp_release(tc__allocator *a, seg *s);

/* alloc_streams.c */
void tc__process_events(tc__allocator *a, bool wait);
/* Block b, freed, waits for its use on `stream` (an event recorded there
 * now), or for `event` when not NULL (taken over). */
void tc__push_pending(tc__allocator *a, blk *b, uintptr_t stream, void *event);
/* Waits for one event (counted in num_device_synchronize). */
void tc__event_wait(tc__allocator *a, void *ev);
/* Block b, freed, is done with on every stream (at its free, or when its
 * last pending event completes): it stops counting as active, the history
 * records the free as completed, and it goes back to its cache. With
 * TCUDA_NO_CACHING its segment (its only block) goes back at once, as
 * PYTORCH_NO_CUDA_MEMORY_CACHING frees a block's memory at once. Inline:
 * every free takes it. */
static inline void tc__complete_free(tc__allocator *a, blk *b)
{
    stat2_sub(a->st.active, b->small, 1);
    stat2_sub(a->st.active_bytes, b->small, (int64_t)b->size);
    if (TC__HIST_ON(TC_HISTORY_RECORD_FREE))
        tc__hist_record(a, TC__H_FREE_COMPLETED, b->addr, b->size, b->requested, b->seg->sc->stream,
                        b->seg->sc->pool_id);
    seg *s = b->seg;
    tc__free_block(a, b);
    if (TC_UNLIKELY(a->cfg.no_caching))
        tc__no_caching_release(a, s);
}
/* Whether the memory of a free block of c stamped with `epoch` is known to be
 * no longer used by the GPU. */
static inline bool tc__epoch_done(const scache *c, uint32_t epoch)
{
    return (int32_t)(epoch - c->done_epoch) <= 0;
}
/* A cache whose stream went away and whose last use is known complete,
 * matching c's pool and class, gives its plain segments to c (malloc found no
 * block in c); false when there was none. */
bool tc__gone_adopt(tc__allocator *a, scache *c);
/* Frees the record of a gone cache once no segment belongs to it. */
void tc__gone_reap(tc__allocator *a, scache *c);
/* Polls c's fence without waiting; records a new one when there is none and
 * frees since the last are not known complete (never on a gone cache). */
void tc__fence_poll(tc__allocator *a, scache *c);
/* Waits until every free block of c is known complete (empty_cache, an
 * out-of-memory retry, the GC threshold, destroy). */
void tc__fence_wait(tc__allocator *a, scache *c);
/* Destroys c's fence, if any (destroy). */
void tc__fence_drop(tc__allocator *a, scache *c);

/* alloc_pools.c */
pool *tc__pool_find(tc__allocator *a, uint64_t id);
uint64_t tc__capture_pool(const tc__allocator *a, uintptr_t stream);

/* alloc_config.c */
size_t tc__round_size(const tc__alloc_config *cfg, size_t size);

#endif
