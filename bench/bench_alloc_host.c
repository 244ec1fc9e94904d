/* The caching allocator's algorithm alone, on the CPU: replays bench_alloc's
 * trace (alloc_trace.h) through tc__alloc_* with a provider that hands out
 * fake addresses from a counter (nothing is touched, nothing is mapped) and
 * counts its calls. On a GPU each provider call costs tens of microseconds
 * (cudaFree and unmapping also synchronize), so the calls made in the warm
 * replays matter as much as ns/op. Usage:
 *   bench_alloc_host [CONF]     CONF as TCUDA_ALLOC_CONF (default: that variable)
 *   bench_alloc_host --trace FILE [CONF]
 *                               a recorded trace instead (trace_file.h: bench_trace's
 *                               transformer trace, gunzipped)
 *   bench_alloc_host --loop     the replay loop alone, with no allocator
 * Prints one row: ns/op cold, ns/op warm (best of 3), peak reserved / peak
 * live, provider calls in the cold replay and in the 3 warm replays together
 * (alloc+free of segments; map+unmap of expandable granules, with the MiB
 * they moved). The invariant checker runs after each replay. TC_TRACE_SEED
 * picks another trace of the same shape. The expandable granularity is 2 MiB and the
 * device 80 GiB, as on an H100. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/alloc.h"
#include "alloc_trace.h"
#include "tcuda/tcuda.h"
#include "trace_file.h"

typedef struct counting {
    uintptr_t next_va;
    size_t total, in_use;
    long allocs, frees, maps, unmaps;
    size_t map_bytes, unmap_bytes;
} counting;

static tc_status c_alloc(void *ctx, size_t size, uintptr_t stream, void **out)
{
    (void)stream;
    counting *c = ctx;
    if (c->in_use + size > c->total)
        return TC_ERROR_OUT_OF_MEMORY;
    *out = (void *)c->next_va;
    c->next_va += (size + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    c->in_use += size;
    c->allocs++;
    return TC_OK;
}
static void c_free(void *ctx, void *ptr, size_t size)
{
    (void)ptr;
    counting *c = ctx;
    c->in_use -= size;
    c->frees++;
}
static void c_info(void *ctx, size_t *fr, size_t *tot)
{
    counting *c = ctx;
    *tot = c->total;
    *fr = c->total - c->in_use;
}
static tc_status c_reserve(void *ctx, size_t size, void **out)
{
    counting *c = ctx;
    *out = (void *)c->next_va;
    c->next_va += size;
    return TC_OK;
}
static tc_status c_map(void *ctx, void *addr, size_t size)
{
    (void)addr;
    counting *c = ctx;
    if (c->in_use + size > c->total)
        return TC_ERROR_OUT_OF_MEMORY;
    c->in_use += size;
    c->maps++;
    c->map_bytes += size;
    return TC_OK;
}
static void c_unmap(void *ctx, void *addr, size_t size)
{
    (void)addr;
    counting *c = ctx;
    c->in_use -= size;
    c->unmaps++;
    c->unmap_bytes += size;
}
static void c_unreserve(void *ctx, void *addr, size_t size) { (void)ctx, (void)addr, (void)size; }

static void **slots;
static int nops = NOPS;      /* the trace's operations */
static size_t nslots = NOPS; /* and the slots its ids take (more than enough) */

/* Replays the trace, frees what is left; returns ns/op, -1 on failure. */
static void release(void *ctx, void *p) { tc__alloc_free(ctx, p); }

static double replay(tc__allocator *a, const op *t)
{
    double t0 = bench_now_ns();
    for (int i = 0; i < nops; i++) {
        if (t[i].alloc) {
            if (tc__alloc_malloc(a, t[i].size, 0, &slots[t[i].id]) != TC_OK) {
                fprintf(stderr, "bench_alloc_host: allocation %d (%llu bytes) failed: %s\n", i,
                        (unsigned long long)t[i].size, tc_last_error());
                return -1;
            }
        } else {
            tc__alloc_free(a, slots[t[i].id]);
        }
    }
    double ns = (bench_now_ns() - t0) / nops;
    free_live(t, nops, nslots, slots, release, a);
    char why[256];
    if (tc__alloc_check(a, why, sizeof why)) {
        fprintf(stderr, "bench_alloc_host: invariant broken: %s\n", why);
        return -1;
    }
    return ns;
}

/* The replay loop with no allocator: what every row's ns/op includes. */
static volatile uintptr_t loop_sink; /* keeps the loop's reads */

static double replay_loop(const op *t)
{
    uintptr_t acc = 0;
    double t0 = bench_now_ns();
    for (int i = 0; i < NOPS; i++) {
        if (t[i].alloc)
            slots[t[i].id] = (void *)(uintptr_t)(i + 1);
        else
            acc += (uintptr_t)slots[t[i].id];
    }
    loop_sink = acc;
    return (bench_now_ns() - t0) / NOPS;
}

/* The recorded trace at path as the synthetic one's ops (nops and nslots
 * set to its own); NULL when it cannot be read. */
static op *recorded(const char *path, size_t *peak_live)
{
    tr_trace tr;
    if (tr_load(path, &tr) != 0)
        return NULL;
    op *t = malloc(tr.n * sizeof *t);
    for (uint64_t i = 0; t && i < tr.n; i++)
        t[i] = (op){tr.ops[i].id, tr.ops[i].alloc, tr.ops[i].size};
    nops = (int)tr.n;
    nslots = tr.slots;
    *peak_live = tr.peak_live;
    free(tr.ops);
    return t;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--loop")) {
        size_t peak_live;
        op *t = gen(&peak_live);
        slots = calloc(NOPS, sizeof *slots);
        double best = 1e30;
        for (int r = 0; r < 4; r++) {
            double w = replay_loop(t);
            best = w < best ? w : best;
        }
        printf("| %-36s | %8s | %8.1f |\n", "replay loop alone (no allocator)", "-", best);
        free(slots);
        free(t);
        return 0;
    }
    const char *file = NULL; /* --trace FILE */
    if (argc > 2 && !strcmp(argv[1], "--trace")) {
        file = argv[2];
        argc -= 2, argv += 2;
    }
    const char *conf = argc > 1 ? argv[1] : getenv("TCUDA_ALLOC_CONF");
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    if (tc__alloc_config_parse(conf, &cfg) != TC_OK) {
        fprintf(stderr, "bench_alloc_host: %s\n", tc_last_error());
        return 2;
    }
    if (getenv("TC_TRACE_SEED")) /* other traces of the same shape */
        rs ^= strtoull(getenv("TC_TRACE_SEED"), NULL, 0) * 0x9e3779b97f4a7c15ull;
    size_t peak_live;
    op *t = file ? recorded(file, &peak_live) : gen(&peak_live);
    if (!t)
        return 1;
    slots = calloc(nslots, sizeof *slots);
    counting ctx = {.next_va = (uintptr_t)1 << 40, .total = (size_t)80 << 30};
    tc__seg_provider p = {
        .name = "counting", .ctx = &ctx, .alloc = c_alloc, .free = c_free, .mem_info = c_info};
    if (cfg.expandable_segments) {
        p.granularity = (size_t)2 << 20;
        p.reserve = c_reserve;
        p.map = c_map;
        p.unmap = c_unmap;
        p.unreserve = c_unreserve;
    }
    tc__allocator *a;
    if (tc__alloc_create(&p, &cfg, 0, &a) != TC_OK)
        return 1;
    double cold = replay(a, t), warm = 1e30;
    long cold_af = ctx.allocs + ctx.frees, cold_mu = ctx.maps + ctx.unmaps;
    size_t cold_mb = (ctx.map_bytes + ctx.unmap_bytes) >> 20;
    for (int r = 0; r < 3 && cold >= 0; r++) {
        double w = replay(a, t);
        if (w < 0)
            cold = -1;
        else if (w < warm)
            warm = w;
    }
    if (cold < 0)
        return 1;
    tc_memory_stats_info st;
    tc__alloc_stats(a, &st);
    double ratio = (double)st.reserved_bytes[0].peak / (double)peak_live;
    char name[96];
    snprintf(name, sizeof name, "host%s%s%s", file ? " trace" : "", conf && *conf ? " " : "",
             conf ? conf : "");
    printf("| %-36s | %8.1f | %8.1f | %6.3fx | %5ld | %5ld (%6zu MiB) | %5ld | %5ld (%6zu MiB) |\n",
           name, cold, warm, ratio, cold_af, cold_mu, cold_mb, ctx.allocs + ctx.frees - cold_af,
           ctx.maps + ctx.unmaps - cold_mu, ((ctx.map_bytes + ctx.unmap_bytes) >> 20) - cold_mb);
    tc__alloc_destroy(a);
    free(slots);
    free(t);
    return 0;
}
