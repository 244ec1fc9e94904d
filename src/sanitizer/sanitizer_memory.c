/* The stream sanitizer's watched memory: a region per live allocation,
 * each with its list of earlier accesses, and the allocator's hooks (alloc,
 * record_stream, free).
 *
 * Memory state is per live allocation (a region, found by address in a
 * tsearch tree whose comparator calls overlapping intervals equal, which is a
 * total order because live regions do not overlap): a short list of earlier
 * accesses, each with its actor, epoch, byte range and call site. A new
 * access is checked against the entries of other actors it overlaps (a read
 * against writes, a write against both); then entries it makes redundant are
 * dropped: a write drops every entry inside its range (any later access
 * ordered after the write is ordered after them, or the write already raced
 * with them and was reported), a read drops its own actor's reads inside its
 * range. At most MAX_ACCESSES entries are kept: beyond that the two of one
 * actor and kind are merged (their hull, newest epoch: never a missed race,
 * at worst a report for bytes one of them did not touch). Memory is thus
 * O(live allocations x actors), whatever the number of accesses.
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

#define MAX_ACCESSES 16

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

static void region_free(void *p)
{
    region *r = p;
    free(r->recorded);
    free(r->acc);
    free(r);
}

static void region_remove(region *r)
{
    region_bytes -= sizeof(access) * (size_t)r->acc_cap + sizeof(int) * (size_t)r->rec_cap;
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

/* Index of an earlier access of another actor that races with this one, or -1.
 * clock: the accessing actor's clock. */
int tc__san_find_conflict(const region *r, int x, const uint64_t *clock, uintptr_t lo, uintptr_t hi,
                          bool write)
{
    for (int i = 0; i < r->nacc; i++) {
        const access *a = &r->acc[i];
        if (a->actor == x || !overlaps(a, lo, hi) || (!write && !a->write))
            continue;
        if (clock[a->actor] < a->epoch)
            return i;
    }
    return -1;
}

static void drop_access(region *r, int i) { r->acc[i] = r->acc[--r->nacc]; }

/* Keeps at most MAX_ACCESSES entries (see the top of the file). */
static void merge_one(region *r)
{
    for (int i = 0; i < r->nacc; i++)
        for (int j = i + 1; j < r->nacc; j++) {
            access *a = &r->acc[i], *b = &r->acc[j];
            if (a->actor != b->actor || a->write != b->write)
                continue;
            access *keep = a->epoch >= b->epoch ? a : b;
            access m = *keep;
            m.lo = a->lo < b->lo ? a->lo : b->lo;
            m.hi = a->hi > b->hi ? a->hi : b->hi;
            *a = m;
            drop_access(r, j);
            return;
        }
    drop_access(r, 0); /* more actors than entries: the oldest-placed one goes */
}

void tc__san_record_access(region *r, int x, uint64_t epoch, uintptr_t lo, uintptr_t hi, bool write,
                           const site *s)
{
    for (int i = r->nacc - 1; i >= 0; i--) {
        const access *a = &r->acc[i];
        bool inside = a->lo >= lo && a->hi <= hi;
        if (inside && (write || (a->actor == x && !a->write)))
            drop_access(r, i);
    }
    if (r->nacc == MAX_ACCESSES)
        merge_one(r);
    if (r->nacc == r->acc_cap) {
        int cap = r->acc_cap ? r->acc_cap * 2 : 2;
        access *a = realloc(r->acc, sizeof *a * (size_t)cap);
        if (!a)
            return; /* out of memory: this access is not remembered */
        region_bytes += sizeof *a * (size_t)(cap - r->acc_cap);
        r->acc = a;
        r->acc_cap = cap;
    }
    r->acc[r->nacc++] = (access){
        .actor = x, .write = write, .epoch = epoch, .lo = lo, .hi = hi, .site = *s};
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
    int nprotect = 0;
    struct stream_ref {
        int dev;
        void *handle;
    } protect[8];
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
            bool seen = false;
            for (int k = 0; k < nprotect; k++)
                seen |= protect[k].handle == tc__san_actors[e->actor].handle &&
                        protect[k].dev == tc__san_actors[e->actor].dev;
            if (!seen && nprotect < 8 && tc__san_actors[e->actor].dev >= 0)
                protect[nprotect++] = (struct stream_ref){tc__san_actors[e->actor].dev,
                                                          tc__san_actors[e->actor].handle};
        }
    }
    region_remove(r);
    pthread_mutex_unlock(&tc__san_mu);
    if (!raced)
        return;
    /* A free cannot fail: in error mode the memory is kept from early reuse. */
    if (mode == TC_SANITIZER_MODE_ERROR && record_fn)
        for (int k = 0; k < nprotect; k++)
            record_fn((void *)ptr, protect[k].dev, protect[k].handle);
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
