/* The plain host segment provider, for CPU tests: segments from
 * aligned_alloc (never touched here), expandable segments as an mmap'ed
 * reservation whose "mapping" only counts bytes, and a capacity so that tests
 * can make it refuse. Event hooks are left to the tests. free is marked as
 * waiting for the GPU, as cudaFree does, so that tests see what a device
 * provider would count. Streams can go away: a call that names one after
 * that (which CUDA would refuse, or crash on) is counted, so tests see that
 * the allocator forgot it. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc.h"

void tc__host_stream_set_gone(tc__host_provider_ctx *ctx, uintptr_t stream, bool gone)
{
    for (size_t i = 0; i < ctx->ngone; i++)
        if (ctx->gone[i] == stream) {
            if (!gone)
                ctx->gone[i] = ctx->gone[--ctx->ngone];
            return;
        }
    if (gone && ctx->ngone < sizeof ctx->gone / sizeof ctx->gone[0])
        ctx->gone[ctx->ngone++] = stream;
}

bool tc__host_stream_touch(tc__host_provider_ctx *ctx, uintptr_t stream)
{
    for (size_t i = 0; i < ctx->ngone; i++)
        if (ctx->gone[i] == stream) {
            ctx->dead_stream_uses++;
            return false;
        }
    return true;
}

static tc_status host_alloc(void *ctx, size_t size, uintptr_t stream, void **out)
{
    tc__host_provider_ctx *c = ctx;
    (void)tc__host_stream_touch(c, stream);
    if (c->capacity && c->in_use + size > c->capacity)
        return TC_ERROR_OUT_OF_MEMORY;
    void *p = aligned_alloc(512, size);
    if (!p)
        return TC_ERROR_OUT_OF_MEMORY;
    c->in_use += size;
    c->allocs++;
    *out = p;
    return TC_OK;
}

static void host_free(void *ctx, void *ptr, size_t size)
{
    tc__host_provider_ctx *c = ctx;
    c->in_use -= size;
    c->frees++;
    free(ptr);
}

static void host_info(void *ctx, size_t *fr, size_t *tot)
{
    tc__host_provider_ctx *c = ctx;
    *tot = c->capacity;
    *fr = c->capacity - c->in_use;
}

/* Expandable: reserve a range with mmap; "mapping" only counts bytes and
 * remembers the range. */
static tc_status host_reserve(void *ctx, size_t size, void **out)
{
    (void)ctx;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return TC_ERROR_OUT_OF_MEMORY;
    *out = p;
    return TC_OK;
}
static tc_status host_map(void *ctx, void *addr, size_t size)
{
    tc__host_provider_ctx *c = ctx;
    if (c->capacity && c->in_use + size > c->capacity)
        return TC_ERROR_OUT_OF_MEMORY;
    if (c->nranges == c->cap_ranges) {
        size_t nc = c->cap_ranges ? 2 * c->cap_ranges : 16;
        struct tc__host_range *nr = realloc(c->ranges, nc * sizeof *nr);
        if (!nr)
            return TC_ERROR_OUT_OF_MEMORY;
        c->ranges = nr;
        c->cap_ranges = nc;
    }
    c->ranges[c->nranges++] = (struct tc__host_range){(uintptr_t)addr, size};
    c->in_use += size;
    c->allocs++;
    return TC_OK;
}
static void host_unmap(void *ctx, void *addr, size_t size)
{
    tc__host_provider_ctx *c = ctx;
    size_t i = 0;
    while (i < c->nranges && (c->ranges[i].addr != (uintptr_t)addr || c->ranges[i].size != size))
        i++;
    if (i == c->nranges) {
        c->bad_unmaps++; /* not a range one map call backed */
        return;
    }
    c->ranges[i] = c->ranges[--c->nranges];
    if (!c->nranges) {
        free(c->ranges);
        c->ranges = NULL;
        c->cap_ranges = 0;
    }
    c->in_use -= size;
    c->frees++;
}
static void host_unreserve(void *ctx, void *addr, size_t size)
{
    (void)ctx;
    munmap(addr, size);
}

void tc__host_provider_init(tc__seg_provider *p, tc__host_provider_ctx *ctx)
{
    memset(p, 0, sizeof *p);
    p->name = "host";
    p->ctx = ctx;
    p->alloc = host_alloc;
    p->free = host_free;
    p->mem_info = host_info;
    p->free_waits = true; /* as cudaFree does: tests count these waits */
    if (ctx->granularity) {
        p->granularity = ctx->granularity;
        p->reserve = host_reserve;
        p->map = host_map;
        p->unmap = host_unmap;
        p->unreserve = host_unreserve;
    }
}
