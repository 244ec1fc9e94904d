/* The stream sanitizer's watched memory: a region per live allocation,
 * each with its list of earlier accesses, and the allocator's hooks (alloc,
 * record_stream, free).
 *
 * Memory state is per live allocation (a region, found by address in a
 * tsearch tree whose comparator calls overlapping intervals equal, which is a
 * total order because live regions do not overlap): the list of earlier
 * accesses that a later one may race with, each with its actor, epoch, byte
 * range and call site. A new access is checked against the entries of other
 * actors it overlaps (a read against writes, a write against both); then
 * entries it makes redundant are dropped: a write drops every entry inside
 * its range (any later access ordered after the write is ordered after them,
 * or the write already raced with them and was reported: PyTorch's
 * TensorInfo clears its reads on a write too), a read drops its own actor's
 * reads inside its range (the newer one has the larger epoch: whatever is
 * ordered after it is ordered after them). Nothing else is ever dropped or
 * merged, so no race is missed: a region holds its last writes and every
 * read since (of distinct actors or ranges), as PyTorch keeps a tensor's last
 * write and every read since. Memory is thus bounded by the reads actually
 * made since the last write over them; the first REGION_INLINE_ACCESSES
 * entries live in the region itself, more on the heap, which goes back when a
 * write (or the free) empties the list to the inline size again.
 *
 * A free is checked as a write by the allocation's own stream at the time of
 * the free (the caching allocator hands the block to later work on that
 * stream at once): an access by another stream not ordered before it, and
 * not covered by record_stream, is a reuse-after-free race. Not so for a block
 * of a graph's private pool (one allocated on a capturing stream): its free
 * hands it to no stream. The allocator gives it again only to an allocation
 * captured into the same pool, whose accesses run at that graph's replays and
 * are checked there like any other; once the pool is released its segments
 * go back to CUDA (cudaFree waits for the device). Its reuse stream is the
 * capture stream, which never runs anything, while the replays that wrote it
 * ran on other streams: checking the free as usual would report every
 * graph-pool tensor released after a replay (found under TCUDA_SANITIZER=1
 * in tests/test_graph.c), so such a free forgets the block and checks
 * nothing.
 *
 * Everything here is under the engine's mutex (tc__san_mu). */
#define _GNU_SOURCE
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "sanitizer_engine.h"

static void *regions; /* tsearch tree of region */
static size_t nregions, region_bytes;
/* Pinned host regions: while there are none, host kernels skip everything. */
atomic_int tc__san_host_regions;

static int cmp_region(const void *a, const void *b)
{
    const region *x = a, *y = b;
    if (x->end <= y->base)
        return -1;
    if (y->end <= x->base)
        return 1;
    return 0;
}

region *tc__san_region_at(uintptr_t p)
{
    region probe = {.base = p, .end = p + 1};
    void *node = tfind(&probe, &regions, cmp_region);
    return node ? *(region **)node : NULL;
}

/* Bytes of r's access list on the heap (0 while it is inline). */
static size_t heap_acc_bytes(const region *r)
{
    return r->acc == r->inl ? 0 : sizeof(access) * (size_t)r->acc_cap;
}

static void region_free(void *p)
{
    region *r = p;
    free(r->recorded);
    if (r->acc != r->inl)
        free(r->acc);
    free(r);
}

static void region_remove(region *r)
{
    region_bytes -= heap_acc_bytes(r) + sizeof(int) * (size_t)r->rec_cap;
    tdelete(r, &regions, cmp_region);
    nregions--;
    if (r->host)
        atomic_fetch_sub(&tc__san_host_regions, 1);
    region_free(r);
}

region *tc__san_region_new(uintptr_t lo, uintptr_t hi, int dev, int who, bool host,
                           const site *made)
{
    /* Stale state overlapping the new memory goes first: a probe with the
     * whole interval finds any stored region that meets it. */
    region probe = {.base = lo, .end = hi};
    void *node;
    while ((node = tfind(&probe, &regions, cmp_region)))
        region_remove(*(region **)node);
    region *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    *r = (region){.base = lo, .end = hi, .dev = dev, .actor = who, .host = host, .made = *made};
    r->acc = r->inl;
    r->acc_cap = REGION_INLINE_ACCESSES;
    node = tsearch(r, &regions, cmp_region);
    if (!node || *(region **)node != r) {
        free(r);
        return NULL;
    }
    nregions++;
    if (host)
        atomic_fetch_add(&tc__san_host_regions, 1);
    return r;
}

static bool overlaps(const access *a, uintptr_t lo, uintptr_t hi)
{
    return a->lo < hi && lo < a->hi;
}

int tc__san_next_conflict(const region *r, int from, int x, const uint64_t *clock, uintptr_t lo,
                          uintptr_t hi, bool write)
{
    for (int i = from; i < r->nacc; i++) {
        const access *a = &r->acc[i];
        if (a->actor == x || !overlaps(a, lo, hi) || (!write && !a->write))
            continue;
        if (clock[a->actor] < a->epoch)
            return i;
    }
    return -1;
}

static void drop_access(region *r, int i) { r->acc[i] = r->acc[--r->nacc]; }

/* Room for one more entry; false when memory ran out. */
static bool reserve_one(region *r)
{
    if (r->nacc < r->acc_cap)
        return true;
    int cap = 2 * r->acc_cap;
    access *a = malloc(sizeof *a * (size_t)cap);
    if (!a)
        return false;
    memcpy(a, r->acc, sizeof *a * (size_t)r->nacc);
    region_bytes -= heap_acc_bytes(r);
    if (r->acc != r->inl)
        free(r->acc);
    r->acc = a;
    r->acc_cap = cap;
    region_bytes += heap_acc_bytes(r);
    return true;
}

/* Back to the inline entries once they hold the list and one more: the heap
 * is held only while that many accesses are live. */
static void shrink(region *r)
{
    if (r->acc == r->inl || r->nacc >= REGION_INLINE_ACCESSES)
        return; /* (one more must fit, or the next access would spill again) */
    region_bytes -= heap_acc_bytes(r);
    memcpy(r->inl, r->acc, sizeof *r->acc * (size_t)r->nacc);
    free(r->acc);
    r->acc = r->inl;
    r->acc_cap = REGION_INLINE_ACCESSES;
}

bool tc__san_record_access(region *r, int x, uint64_t epoch, uintptr_t lo, uintptr_t hi, bool write,
                           const site *s)
{
    for (int i = r->nacc - 1; i >= 0; i--) {
        const access *a = &r->acc[i];
        bool inside = a->lo >= lo && a->hi <= hi;
        if (inside && (write || (a->actor == x && !a->write)))
            drop_access(r, i);
    }
    shrink(r);
    if (!reserve_one(r))
        return false; /* out of memory: this access is not remembered */
    r->acc[r->nacc++] = (access){
        .actor = x, .write = write, .epoch = epoch, .lo = lo, .hi = hi, .site = *s};
    return true;
}

static bool recorded(const region *r, int who)
{
    for (int i = 0; i < r->nrec; i++)
        if (r->recorded[i] == who)
            return true;
    return false;
}

void tc__san_regions_forget(void)
{
    tdestroy(regions, region_free);
    regions = NULL;
    nregions = region_bytes = 0;
    atomic_store(&tc__san_host_regions, 0);
}

size_t tc__san_regions_bytes(void) { return sizeof(region) * nregions + region_bytes; }

/* ---- memory hooks --------------------------------------------------------------- */

void tc__san_alloc(const void *ptr, size_t bytes, int dev, void *stream, bool host)
{
    if (!ptr || !bytes || !tc__san_on())
        return;
    site made;
    tc__san_site_init(&made, host ? "pinned host allocation" : "allocation", NULL);
    if (!tc__san_lock_on())
        return;
    int a = host ? 0 : tc__san_actor_of(dev, stream);
    region *r = NULL;
    if (a >= 0)
        r = tc__san_region_new((uintptr_t)ptr, (uintptr_t)ptr + bytes, host ? TC__ACCESS_HOST : dev,
                               a, host, &made);
    if (r && !host)
        r->graph_pool = tc__san_capturing_stream(dev, stream);
    pthread_mutex_unlock(&tc__san_mu);
}

void tc__san_record_stream(const void *ptr, void *stream)
{
    if (!ptr || !tc__san_lock_on())
        return;
    region *r = tc__san_region_at((uintptr_t)ptr);
    if (r && !r->host) {
        int a = tc__san_actor_of(r->dev, stream);
        if (a >= 0 && !recorded(r, a)) {
            if (r->nrec == r->rec_cap) {
                int cap = r->rec_cap ? r->rec_cap * 2 : 2;
                int *p = realloc(r->recorded, sizeof(int) * (size_t)cap);
                if (p) {
                    region_bytes += sizeof(int) * (size_t)(cap - r->rec_cap);
                    r->recorded = p;
                    r->rec_cap = cap;
                }
            }
            if (r->nrec < r->rec_cap)
                r->recorded[r->nrec++] = a;
        }
    }
    pthread_mutex_unlock(&tc__san_mu);
}

/* The streams a free must protect from early reuse (error mode): every one,
 * INLINE_STREAM_REFS in place, more on the heap. */
enum { INLINE_STREAM_REFS = 8 };
typedef struct stream_ref {
    int dev;
    void *handle;
} stream_ref;
typedef struct stream_refs {
    stream_ref *p;
    int n, cap;
    stream_ref inl[INLINE_STREAM_REFS];
} stream_refs;

/* Adds (dev, handle) once; when memory runs out the stream is not added
 * (the race is still reported). */
static void add_stream_ref(stream_refs *l, int dev, void *handle)
{
    for (int k = 0; k < l->n; k++)
        if (l->p[k].handle == handle && l->p[k].dev == dev)
            return;
    if (l->n == l->cap) {
        stream_ref *p = malloc(sizeof *p * (size_t)(2 * l->cap));
        if (!p)
            return;
        memcpy(p, l->p, sizeof *p * (size_t)l->n);
        if (l->p != l->inl)
            free(l->p);
        l->p = p;
        l->cap *= 2;
    }
    l->p[l->n++] = (stream_ref){dev, handle};
}

void tc__san_free(const void *ptr, void (*record_fn)(void *ptr, int dev, void *stream))
{
    if (!ptr || !tc__san_on())
        return;
    site cur;
    tc__san_site_init(&cur, "free", NULL);
    if (!tc__san_lock_on())
        return;
    region *r = tc__san_region_at((uintptr_t)ptr);
    if (!r || r->base != (uintptr_t)ptr) {
        pthread_mutex_unlock(&tc__san_mu);
        return;
    }
    int mode = atomic_load(&tc__san_mode);
    pending p = {0};
    bool raced = false;
    stream_refs protect;
    protect.p = protect.inl;
    protect.n = 0;
    protect.cap = INLINE_STREAM_REFS;
    if (!r->host && !r->graph_pool) {
        const uint64_t *va = tc__san_actors[r->actor].vc, *vh = tc__san_actors[0].vc;
        for (int i = 0; i < r->nacc; i++) {
            const access *e = &r->acc[i];
            uint64_t known = va[e->actor] > vh[e->actor] ? va[e->actor] : vh[e->actor];
            if (e->actor == r->actor || recorded(r, e->actor) || known >= e->epoch)
                continue;
            if (!raced) {
                char *txt = tc__san_race_text(TC_SANITIZER_RACE_REUSE_AFTER_FREE, r, NULL, r->actor,
                                              &cur, e);
                tc__san_fill_pending(&p, TC_SANITIZER_RACE_REUSE_AFTER_FREE, r, e->lo, &cur,
                                     &e->site, txt);
                raced = true;
            }
            if (tc__san_actors[e->actor].dev >= 0)
                add_stream_ref(&protect, tc__san_actors[e->actor].dev,
                               tc__san_actors[e->actor].handle);
        }
    }
    region_remove(r);
    pthread_mutex_unlock(&tc__san_mu);
    if (raced && mode == TC_SANITIZER_MODE_ERROR && record_fn)
        for (int k = 0; k < protect.n; k++) /* a free cannot fail: kept from early reuse */
            record_fn((void *)ptr, protect.p[k].dev, protect.p[k].handle);
    if (protect.p != protect.inl)
        free(protect.p);
    if (!raced)
        return;
    tc__san_deliver(&p, mode == TC_SANITIZER_MODE_ERROR ? TC_SANITIZER_MODE_REPORT : mode);
    free(p.text);
}

size_t tc__san_watched(void)
{
    pthread_mutex_lock(&tc__san_mu);
    size_t n = nregions;
    pthread_mutex_unlock(&tc__san_mu);
    return n;
}
