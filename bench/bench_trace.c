/* A recorded training trace (bench/torch/record_trace.py) replayed with GPU work
 * queued: a 20 us kernel every 50 allocations (bench/trace_replay.h). Prints
 * one row per run: host / end-to-end ms of the cold pass, the second pass and
 * the median warm pass, peak reserved over peak live, and for tcuda the
 * calls that made the host wait for the GPU (num_device_synchronize).
 *   bench_trace MODE TRACE      MODE: tcuda | cudamalloc | async
 * tcuda's options come from TCUDA_ALLOC_CONF as usual. */
#include <stdio.h>
#include <string.h>

#include "trace_replay.h"

#include "tcuda/tcuda.h"

static int tc_a(void *ctx, size_t n, void **p)
{
    (void)ctx;
    return tc_caching_allocator_alloc(n, 0, NULL, p) == TC_OK ? 0 : -1;
}
static void tc_f(void *ctx, void *p)
{
    (void)ctx;
    tc_caching_allocator_delete(p);
}
static double tc_reserved(void *ctx)
{
    (void)ctx;
    size_t bytes = 0;
    (void)tc_max_memory_reserved(0, &bytes); /* 0 if it cannot say */
    return (double)bytes;
}

static int cm_a(void *ctx, size_t n, void **p)
{
    (void)ctx;
    return cudaMalloc(p, n) == cudaSuccess ? 0 : -1;
}
static void cm_f(void *ctx, void *p)
{
    (void)ctx;
    cudaFree(p);
}

static int as_a(void *ctx, size_t n, void **p)
{
    (void)ctx;
    return cudaMallocAsync(p, n, 0) == cudaSuccess ? 0 : -1;
}
static void as_f(void *ctx, void *p)
{
    (void)ctx;
    cudaFreeAsync(p, 0);
}
static double as_reserved(void *ctx)
{
    (void)ctx;
    cudaMemPool_t pool;
    uint64_t high = 0;
    cudaDeviceGetDefaultMemPool(&pool, 0);
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high);
    return (double)high;
}

/* The calls of the whole run (all passes) that made the host wait. */
static void tc_waits(char *buf, size_t n)
{
    int64_t waits = -1, frees = -1;
    (void)tc_memory_stats_get(0, "num_device_synchronize", &waits); /* -1 if unknown */
    (void)tc_memory_stats_get(0, "num_device_free", &frees);
    snprintf(buf, n, "%lld waits, %lld segments freed", (long long)waits, (long long)frees);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_trace tcuda|cudamalloc|async TRACE\n");
        return 2;
    }
    tr_trace t;
    if (tr_load(argv[2], &t) != 0)
        return 1;
    if (!tc_is_available()) {
        printf("bench_trace: no GPU: %s\n", tc_last_error());
        return 0;
    }
    if (tr_spin_init() != 0)
        return 1;
    const char *m = argv[1];
    if (!strcmp(m, "tcuda")) {
        const char *conf = getenv("TCUDA_ALLOC_CONF");
        char name[64];
        snprintf(name, sizeof name, "tcuda%s",
                 conf && strstr(conf, "expandable_segments:True") ? ", expandable" : "");
        return tr_bench(name, &t, tc_a, tc_f, NULL, tc_reserved, tc_waits) ? 1 : 0;
    }
    if (!strcmp(m, "cudamalloc"))
        return tr_bench("cudaMalloc/cudaFree", &t, cm_a, cm_f, NULL, NULL, NULL) ? 1 : 0;
    if (!strcmp(m, "async")) {
        cudaMemPool_t pool;
        uint64_t thr = UINT64_MAX;
        cudaDeviceGetDefaultMemPool(&pool, 0);
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr);
        return tr_bench("cudaMallocAsync", &t, as_a, as_f, NULL, as_reserved, NULL) ? 1 : 0;
    }
    fprintf(stderr, "bench_trace: unknown mode %s\n", m);
    return 2;
}
