/* Allocator benchmark: a synthetic trace (200,000 operations: sizes 70% in
 * 512 B..1 MiB, 27% in 1..32 MiB, 3% in 32..512 MiB, log-uniform and not
 * aligned; alloc or free with equal odds, frees in random order, at most 2,048
 * live) replayed cold once and warm three times. Usage:
 *   bench_alloc gen FILE          write the trace (for bench/torch/alloc_torch.cpp)
 *   bench_alloc MODE [FILE]       MODE: tcuda | cudamalloc | async
 * Prints one row: ns/op cold, ns/op warm (best of 3), peak reserved / peak
 * live. tcuda's options come from TCUDA_ALLOC_CONF as usual. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "alloc_trace.h"

#include "tcuda/tcuda.h"

static void **slots;
static int mode; /* 0 tcuda, 1 cudaMalloc, 2 cudaMallocAsync */

static int do_alloc(size_t n, void **p)
{
    if (mode == 0)
        return tc_caching_allocator_alloc(n, 0, NULL, p) == TC_OK ? 0 : -1;
    if (mode == 1)
        return cudaMalloc(p, n) == cudaSuccess ? 0 : -1;
    return cudaMallocAsync(p, n, 0) == cudaSuccess ? 0 : -1;
}
static void do_free(void *p)
{
    if (mode == 0)
        tc_caching_allocator_delete(p);
    else if (mode == 1)
        cudaFree(p);
    else
        cudaFreeAsync(p, 0);
}

/* Replays the trace; returns ns/op, or -1 when an allocation failed. */
static void release(void *ctx, void *p)
{
    (void)ctx;
    do_free(p);
}

static double replay(const op *t)
{
    int fail = 0;
    double t0 = bench_now_ns();
    for (int i = 0; i < NOPS; i++) {
        if (t[i].alloc)
            fail |= do_alloc(t[i].size, &slots[t[i].id]);
        else
            do_free(slots[t[i].id]);
        if (fail) {
            fprintf(stderr, "bench_alloc: allocation %d (%llu bytes) failed: %s\n", i,
                    (unsigned long long)t[i].size, mode ? "cuda" : tc_last_error());
            return -1;
        }
    }
    double ns = (bench_now_ns() - t0) / NOPS;
    free_live(t, NOPS, NOPS, slots, release, NULL);
    cudaDeviceSynchronize();
    return ns;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_alloc gen FILE | tcuda | cudamalloc | async\n");
        return 2;
    }
    size_t peak_live;
    op *t = gen(&peak_live);
    if (!strcmp(argv[1], "gen")) {
        FILE *f = fopen(argc > 2 ? argv[2] : "alloc_trace.bin", "wb");
        if (!f)
            return 1;
        uint64_t n = NOPS;
        fwrite(&n, 8, 1, f);
        fwrite(t, sizeof *t, NOPS, f);
        fclose(f);
        printf("trace: %d ops, peak live %.1f MiB\n", NOPS, peak_live / 1048576.0);
        return 0;
    }
    mode = !strcmp(argv[1], "tcuda") ? 0 : !strcmp(argv[1], "cudamalloc") ? 1 : 2;
    if (!tc_is_available()) {
        printf("bench_alloc: no GPU: %s\n", tc_last_error());
        return 0;
    }
    slots = calloc(NOPS, sizeof *slots);
    if (mode == 2) {
        cudaMemPool_t pool;
        uint64_t thr = UINT64_MAX;
        cudaDeviceGetDefaultMemPool(&pool, 0);
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr);
    }
    cudaFree(0);
    double cold = replay(t), warm = 1e30;
    for (int r = 0; r < 3 && cold >= 0; r++) {
        double w = replay(t);
        if (w < 0) {
            cold = -1;
            break;
        }
        if (w < warm)
            warm = w;
    }
    if (cold < 0)
        return 1;
    double reserved = (double)peak_live;
    if (mode == 0) {
        size_t bytes = 0;
        (void)tc_max_memory_reserved(0, &bytes); /* 0 if it cannot say */
        reserved = (double)bytes;
    } else if (mode == 2) {
        cudaMemPool_t pool;
        uint64_t high = 0;
        cudaDeviceGetDefaultMemPool(&pool, 0);
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high);
        reserved = (double)high;
    }
    const char *conf = getenv("TCUDA_ALLOC_CONF");
    char name[96];
    snprintf(name, sizeof name, "%s%s%s", argv[1], mode == 0 && conf ? " " : "",
             mode == 0 && conf ? conf : "");
    printf("| %-40s | %10.0f | %10.0f | %6.2fx |\n", name, cold, warm, reserved / peak_live);
    return 0;
}
