/* The caching allocator's data structures, shared by alloc.c (the algorithm)
 * and alloc_inspect.c (snapshot and invariant checker). Internal. */
#ifndef TCUDA_ALLOC_INTERNAL_H
#define TCUDA_ALLOC_INTERNAL_H

#include <pthread.h>

#include "alloc.h"

enum { B_FREE = 0, B_ALLOC = 1, B_PENDING = 2 };
#define NBINS 384
#define NWORDS (NBINS / 64)
#define MAX_USES 4

typedef struct blk blk;
typedef struct seg seg;
typedef struct scache scache;

struct blk {
    uintptr_t addr;
    size_t size, requested;
    blk *prev, *next;   /* address neighbours in the segment */
    blk *fprev, *fnext; /* bin list (free) or slab list */
    seg *seg;
    int state, pending;
    int nuses;
    uintptr_t uses[MAX_USES]; /* extra streams from record_stream */
    unsigned bin;
};

struct scache { /* free blocks of one (pool, class, stream) */
    uintptr_t stream;
    int small;
    uint64_t pool_id;
    uint64_t bitmap[NWORDS];
    blk *bins[NBINS];
    seg *expand; /* this cache's expandable segment, if any */
    scache *next;
};

struct seg {
    uintptr_t addr;
    size_t size;    /* mapped bytes */
    size_t va_size; /* reserved bytes (expandable), else == size */
    bool expandable;
    scache *sc;
    blk *head;
    seg *prev, *next;
    uint64_t free_tick;
};

typedef struct pool {
    uint64_t id;
    bool released;
    struct pool *next;
} pool;

typedef struct pend {
    void *event;
    blk *b;
} pend;

typedef struct capture {
    uintptr_t stream;
    uint64_t pool_id;
} capture;

struct tc__allocator {
    pthread_mutex_t mu;
    tc__seg_provider p;
    tc__alloc_config cfg;
    int device;
    double fraction;
    size_t limit; /* reserved cap, SIZE_MAX: none */
    struct tc_memory_stats st;
    seg *segs;
    scache *caches, *last_cache;
    pool *pools;
    capture caps[16];
    int ncaps;
    pend *pend;
    size_t npend, cap_pend;
    blk **map; /* open addressing by addr */
    size_t map_cap, map_n;
    blk *slab_free;
    void **slabs;
    size_t nslabs, cap_slabs;
    uint64_t tick;
};

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
    while (a->map[j]) {
        if (a->map[j]->addr == addr)
            return j;
        j = (j + 1) & m;
    }
    return SIZE_MAX;
}

#endif
