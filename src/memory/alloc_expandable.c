/* Expandable segments: one reserved address range per (pool, class, stream)
 * cache, mapped in granules as blocks need them.
 *
 * The blocks tile the segment's extent (whole granules from its start); the
 * extent grows at the end when no free block fits. Which granules are mapped
 * is a bitmap: a granule under any block that is not free is always mapped;
 * granules wholly inside free blocks may be unmapped, so reserved memory can
 * follow live memory instead of the extent. Granules are mapped when a block
 * over them is handed out, and unmapped only under pressure (tc__make_room,
 * before reserved would pass its high-water mark), on empty_cache and before
 * an out-of-memory retry, so a program in its steady state maps nothing.
 * Under pressure only chunks whose last use is known complete go (fences,
 * alloc_streams.c), so unmapping never waits for the GPU; empty_cache and
 * the out-of-memory retry wait for the fences first.
 *
 * Each run of unmapped granules under a block is mapped by as few provider
 * calls as CHUNK allows, because the driver's cost is per call, not per
 * byte: on an H100 (bench_vmm) backing 512 MiB took 64 us as one allocation
 * and 7.5 ms as 256 granules, and 32 MiB took 43 us. A mapping can only be
 * undone whole, so a chunk is unmapped only when every granule of it lies
 * inside free blocks. A second bitmap marks the first granule of each chunk;
 * a chunk runs from there to the next start or the next unmapped granule. */
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "alloc_history.h"
#include "alloc_internal.h"

/* The most granules one chunk covers (32 MiB at 2 MiB granules), chunks
 * aligned to it. Larger chunks mean fewer driver calls but more memory held
 * because a live block sits somewhere in a chunk. bench_alloc_host, driver
 * calls per warm replay over three or four traces: one granule per chunk
 * (PyTorch's way) 2,000-12,600 at 1.06x peak reserved over peak live; 16
 * granules 170-820 at 1.06-1.08x; 32 granules 100-410 at up to 1.12x;
 * uncapped 36-54 at 1.22-1.40x. */
enum { CHUNK = 16 };

static size_t gran(const tc__allocator *a) { return a->p.granularity; }

static bool page_get(const seg *s, size_t k) { return tc__bit_get(s->pages, k); }

static void pages_set(seg *s, size_t from, size_t to, bool on)
{
    for (size_t k = from; k < to; k++) {
        if (on)
            s->pages[k / 64] |= 1ull << (k % 64);
        else
            s->pages[k / 64] &= ~(1ull << (k % 64));
    }
}

/* The end of the chunk that mapped granule k belongs to. */
static size_t chunk_end(const seg *s, size_t g, size_t k)
{
    size_t n = s->size / g;
    do
        k++;
    while (k < n && page_get(s, k) && !tc__bit_get(s->starts, k));
    return k;
}

/* Granule indices [*from, *to) that a block touches. */
static void touched(const tc__allocator *a, const blk *b, size_t *from, size_t *to)
{
    size_t g = gran(a), off = b->addr - b->seg->addr;
    *from = off >> a->gshift; /* shifts: malloc runs this on every expandable block */
    *to = (off + b->size + g - 1) >> a->gshift;
}

static int pages_reserve(seg *s, size_t npages)
{
    size_t words = (npages + 63) / 64;
    if (words <= s->cap_pages)
        return 0;
    size_t nc = s->cap_pages ? s->cap_pages : 16;
    while (nc < words)
        nc *= 2;
    uint64_t *np = realloc(s->pages, nc * sizeof *np);
    if (!np)
        return -1;
    s->pages = np;
    uint64_t *ns = realloc(s->starts, nc * sizeof *ns);
    if (!ns)
        return -1; /* pages grew, cap_pages did not: harmless */
    s->starts = ns;
    memset(np + s->cap_pages, 0, (nc - s->cap_pages) * sizeof *np);
    memset(ns + s->cap_pages, 0, (nc - s->cap_pages) * sizeof *ns);
    s->cap_pages = nc;
    return 0;
}

static tc_status reserve_segment(tc__allocator *a, scache *c)
{
    size_t va = tc__mem_total(a);
    if (va == 0)
        va = (size_t)1 << 40;
    va = (va + gran(a) - 1) / gran(a) * gran(a);
    void *base;
    tc_status st = a->p.reserve(a->p.ctx, va, &base);
    if (st != TC_OK)
        return st;
    seg *s = calloc(1, sizeof *s);
    if (!s) {
        a->p.unreserve(a->p.ctx, base, va);
        return TC_ERROR_OUT_OF_MEMORY;
    }
    s->addr = (uintptr_t)base;
    s->va_size = va;
    s->expandable = true;
    s->sc = c;
    s->free_tick = ++a->tick;
    tc__seg_link(a, s);
    c->expand = s;
    stat2(a->st.segment, c->small, +1);
    a->st.num_device_alloc++;
    return TC_OK;
}

tc_status tc__exp_grow(tc__allocator *a, scache *c, size_t size, blk **out)
{
    if (!c->expand)
        TC_TRY(reserve_segment(a, c));
    seg *s = c->expand;
    blk *tail = s->head;
    while (tail && tail->next)
        tail = tail->next;
    size_t g = gran(a), have = tail && tail->state == B_FREE ? tail->size : 0;
    size_t need = (size - have + g - 1) / g * g;
    if (need > s->va_size - s->size || pages_reserve(s, (s->size + need) / g) != 0)
        return TC_ERROR_OUT_OF_MEMORY;
    if (have) {
        tc__split_stat(a, tail, -1);
        tc__bin_remove(c, tail);
        tail->size += need;
    } else {
        blk *nb = tc__blk_new(a);
        if (!nb)
            return TC_ERROR_OUT_OF_MEMORY;
        nb->addr = s->addr + s->size;
        nb->size = need;
        nb->seg = s;
        nb->small = (unsigned char)c->small;
        nb->prev = tail;
        if (tail)
            tail->next = nb;
        else
            s->head = nb;
        tail = nb;
    }
    s->size += need;
    tc__split_stat(a, tail, +1);
    tc__bin_insert(c, tail);
    *out = tail;
    return TC_OK;
}

/* Set bits of w in [from, to), a word at a time (malloc asks this of every
 * block it hands out in an expandable segment). */
static size_t bits_count(const uint64_t *w, size_t from, size_t to)
{
    size_t n = 0;
    while (from < to) {
        size_t k = from / 64, end = (k + 1) * 64 < to ? (k + 1) * 64 : to;
        uint64_t word = w[k] >> (from % 64);
        if (end - from < 64)
            word &= (1ull << (end - from)) - 1;
        n += (size_t)__builtin_popcountll(word);
        from = end;
    }
    return n;
}

size_t tc__exp_unmapped_bytes(const tc__allocator *a, const blk *b)
{
    size_t from, to;
    touched(a, b, &from, &to);
    return (to - from - bits_count(b->seg->pages, from, to)) * gran(a);
}

/* Gives back the chunk [from, to). */
static void unmap_chunk(tc__allocator *a, seg *s, size_t from, size_t to)
{
    size_t g = gran(a), bytes = (to - from) * g;
    if (TC__HIST_ON(TC_HISTORY_RECORD_SEGMENT))
        tc__hist_record(a, TC__H_SEGMENT_UNMAP, s->addr + from * g, bytes, 0, s->sc->stream,
                        s->sc->pool_id);
    a->p.unmap(a->p.ctx, (void *)(s->addr + from * g), bytes);
    pages_set(s, from, to, false);
    s->starts[from / 64] &= ~(1ull << (from % 64));
    s->mapped -= bytes;
    reserved_upd(a, s->sc->small, -(int64_t)bytes);
}

/* The first run [start, *end) of unmapped granules in [k, to), cut at the
 * next multiple of CHUNK granules; start == to when there is none. */
static size_t unmapped_run(const seg *s, size_t k, size_t to, size_t *end)
{
    while (k < to && page_get(s, k))
        k++;
    size_t e = k, piece_end = (k / CHUNK + 1) * CHUNK;
    if (to > piece_end)
        to = piece_end;
    while (e < to && !page_get(s, e))
        e++;
    *end = e;
    return k;
}

tc_status tc__exp_map_block(tc__allocator *a, blk *b, size_t need)
{
    seg *s = b->seg;
    size_t g = gran(a), from, to, k, e;
    touched(a, b, &from, &to);
    if (a->limit != SIZE_MAX && (size_t)a->st.reserved_bytes[0].current + need > a->limit)
        return TC_ERROR_OUT_OF_MEMORY;
    for (k = from; (k = unmapped_run(s, k, to, &e)) < to; k = e)
        if (a->p.map(a->p.ctx, (void *)(s->addr + k * g), (e - k) * g) != TC_OK)
            break;
    if (k < to) { /* refused: the bits are still clear, undo the runs before k */
        size_t fail = k;
        for (k = from; (k = unmapped_run(s, k, fail, &e)) < fail; k = e)
            a->p.unmap(a->p.ctx, (void *)(s->addr + k * g), (e - k) * g);
        return TC_ERROR_OUT_OF_MEMORY;
    }
    for (k = from; (k = unmapped_run(s, k, to, &e)) < to; k = e) {
        pages_set(s, k, e, true);
        s->starts[k / 64] |= 1ull << (k % 64);
        s->mapped += (e - k) * g;
        reserved_upd(a, s->sc->small, (int64_t)((e - k) * g));
        if (TC__HIST_ON(TC_HISTORY_RECORD_SEGMENT))
            tc__hist_record(a, TC__H_SEGMENT_MAP, s->addr + k * g, (e - k) * g, 0, s->sc->stream,
                            s->sc->pool_id);
    }
    return TC_OK;
}

/* Unmaps the chunks wholly inside free block b until `want` bytes went
 * back; returns bytes. */
static size_t unmap_block(tc__allocator *a, blk *b, size_t want)
{
    seg *s = b->seg;
    size_t g = gran(a), off = b->addr - s->addr, got = 0;
    size_t from = (off + g - 1) / g, to = (off + b->size) / g;
    for (size_t k = from; k < to && got < want;) {
        if (!page_get(s, k)) {
            k++;
            continue;
        }
        size_t e = chunk_end(s, g, k);
        if (e > to)
            break;                       /* this chunk, and any after it, reach past the block */
        if (tc__bit_get(s->starts, k)) { /* else it began before the block */
            unmap_chunk(a, s, k, e);
            got += (e - k) * g;
        }
        k = e;
    }
    return got;
}

/* Largest free blocks first: best fit reaches for them last, so their
 * granules are the least likely to be wanted again soon. */
size_t tc__exp_unmap_free(tc__allocator *a, size_t want, bool wait)
{
    if (!gran(a))
        return 0; /* a provider without expandable segments */
    size_t got = 0;
    unsigned lo = bin_of(gran(a));
    for (scache *c = a->caches; c && got < want; c = c->next) {
        if (!c->expand || !c->expand->mapped)
            continue;
        if (wait)
            tc__fence_wait(a, c);
        else
            tc__fence_poll(a, c);
        for (unsigned i = NBINS; i-- > lo && got < want;)
            for (blk *b = c->bins[i]; b && got < want; b = b->fnext)
                if (b->size >= gran(a) && tc__epoch_done(c, b->epoch))
                    got += unmap_block(a, b, want - got);
    }
    return got;
}

void tc__exp_release(tc__allocator *a, seg *s)
{
    size_t g = gran(a), n = s->size / g;
    if (s->mapped)
        tc__fence_wait(a, s->sc);
    for (size_t k = 0; k < n;) {
        if (!page_get(s, k)) {
            k++;
            continue;
        }
        size_t e = chunk_end(s, g, k);
        unmap_chunk(a, s, k, e);
        k = e;
    }
    a->p.unreserve(a->p.ctx, (void *)s->addr, s->va_size);
    s->sc->expand = NULL;
    free(s->pages);
    free(s->starts);
    s->pages = s->starts = NULL;
    s->cap_pages = 0;
}
