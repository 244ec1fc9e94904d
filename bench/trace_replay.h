/* Replay of a recorded allocation trace with GPU work queued, shared by
 * bench_trace.c (tcuda, cudaMalloc, cudaMallocAsync) and trace_torch.cpp
 * (PyTorch's caching allocator), so every allocator runs the same loop.
 *
 * The trace file (trace_file.h) is written by record_trace.py from a
 * PyTorch training run. One pass replays it in order on the default stream
 * and queues a kernel that spins for TR_SPIN_NS every TR_EVERY allocations, as
 * a training step queues its work between allocations. A pass reports the
 * host loop's time and the end-to-end time (loop + waiting for the GPU): an
 * allocator that never makes the host wait shows a host time well under the
 * GPU's (kernels x 20 us) once its cache is warm; one that waits shows host
 * time equal to end-to-end. Blocks still live after a pass are freed outside
 * the timing. The spin kernel is PTX loaded through the driver API (found
 * with cudaGetDriverEntryPointByVersion), so C programs need no nvcc. */
#ifndef TCUDA_BENCH_TRACE_REPLAY_H
#define TCUDA_BENCH_TRACE_REPLAY_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <time.h>

#include "trace_file.h"

enum { TR_EVERY = 50, TR_PASSES = 6 };
#define TR_SPIN_NS 20000ull

static double tr_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static const char tr_ptx[] = ".version 6.0\n.target sm_50\n.address_size 64\n"
                             ".visible .entry tr_spin(.param .u64 ns)\n{\n"
                             "  .reg .u64 %n, %t0, %t1, %d;\n  .reg .pred %p;\n"
                             "  ld.param.u64 %n, [ns];\n  mov.u64 %t0, %globaltimer;\n"
                             "LOOP:\n  mov.u64 %t1, %globaltimer;\n  sub.u64 %d, %t1, %t0;\n"
                             "  setp.lt.u64 %p, %d, %n;\n  @%p bra LOOP;\n  ret;\n}\n";

typedef CUresult (*tr_pf_load)(CUmodule *, const void *);
typedef CUresult (*tr_pf_getfn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*tr_pf_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 unsigned, unsigned, CUstream, void **, void **);
static tr_pf_launch tr_launch_fn;
static CUfunction tr_spin_fn;

static void *tr_entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        return NULL;
    return fn;
}

/* Loads the spin kernel (after the context exists); 0 on success. */
static int tr_spin_init(void)
{
    cudaFree(0);
    tr_pf_load load = (tr_pf_load)tr_entry("cuModuleLoadData");
    tr_pf_getfn getfn = (tr_pf_getfn)tr_entry("cuModuleGetFunction");
    tr_launch_fn = (tr_pf_launch)tr_entry("cuLaunchKernel");
    CUmodule m;
    if (!load || !getfn || !tr_launch_fn || load(&m, tr_ptx) != CUDA_SUCCESS ||
        getfn(&tr_spin_fn, m, "tr_spin") != CUDA_SUCCESS) {
        fprintf(stderr, "trace: could not load the spin kernel\n");
        return -1;
    }
    return 0;
}

static void tr_spin(void)
{
    unsigned long long ns = TR_SPIN_NS;
    void *args[] = {&ns};
    tr_launch_fn(tr_spin_fn, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
}

typedef int (*tr_alloc_fn)(void *ctx, size_t n, void **p); /* 0 on success */
typedef void (*tr_free_fn)(void *ctx, void *p);

typedef struct tr_pass {
    double host_ms, e2e_ms;
} tr_pass;

/* One pass; -1 when an allocation failed. */
static int tr_run_pass(const tr_trace *t, void **slots, tr_alloc_fn af, tr_free_fn ff, void *ctx,
                       tr_pass *out)
{
    uint64_t allocs = 0;
    double t0 = tr_now_ms();
    for (uint64_t i = 0; i < t->n; i++) {
        const tr_op *o = &t->ops[i];
        if (o->alloc) {
            if (af(ctx, o->size, &slots[o->id]) != 0) {
                fprintf(stderr, "trace: allocation %llu of %llu bytes failed\n",
                        (unsigned long long)i, (unsigned long long)o->size);
                return -1;
            }
            if (++allocs % TR_EVERY == 0)
                tr_spin();
        } else {
            ff(ctx, slots[o->id]);
        }
    }
    double t1 = tr_now_ms();
    cudaDeviceSynchronize();
    out->host_ms = t1 - t0;
    out->e2e_ms = tr_now_ms() - t0;
    unsigned char *alive = (unsigned char *)calloc(t->slots, 1);
    for (uint64_t i = 0; i < t->n; i++)
        alive[t->ops[i].id] = (unsigned char)t->ops[i].alloc;
    for (uint64_t i = 0; i < t->slots; i++)
        if (alive[i])
            ff(ctx, slots[i]);
    free(alive);
    cudaDeviceSynchronize();
    return 0;
}

/* Runs TR_PASSES passes and prints the row: pass 1 (cold), pass 2, the
 * median of passes 3.., each as host / end-to-end ms, then peak reserved over
 * peak live (reserved NULL: not known) and what `extra` writes after the
 * passes (e.g. the calls that waited), if given. */
static int tr_bench(const char *name, const tr_trace *t, tr_alloc_fn af, tr_free_fn ff, void *ctx,
                    double (*reserved)(void *ctx), void (*extra)(char *, size_t))
{
    void **slots = (void **)calloc(t->slots, sizeof(void *));
    tr_pass p[TR_PASSES];
    for (int i = 0; i < TR_PASSES; i++)
        if (tr_run_pass(t, slots, af, ff, ctx, &p[i]) != 0)
            return -1;
    /* median of the warm passes 3.. by host time (insertion sort: few) */
    int nw = TR_PASSES - 2;
    tr_pass w[TR_PASSES];
    for (int i = 0; i < nw; i++) {
        int j = i;
        w[i] = p[i + 2];
        while (j > 0 && w[j - 1].host_ms > w[j].host_ms) {
            tr_pass x = w[j - 1];
            w[j - 1] = w[j];
            w[j] = x;
            j--;
        }
    }
    double r = reserved ? reserved(ctx) : -1;
    char rr[16] = "-", ex[96] = "";
    if (extra)
        extra(ex, sizeof ex);
    if (r >= 0)
        snprintf(rr, sizeof rr, "%.2fx", r / (double)t->peak_live);
    printf("| %-28s | %6.1f / %6.1f | %6.1f / %6.1f | %6.1f / %6.1f | %7s | %s\n", name,
           p[0].host_ms, p[0].e2e_ms, p[1].host_ms, p[1].e2e_ms, w[nw / 2].host_ms,
           w[nw / 2].e2e_ms, rr, ex);
    free(slots);
    return 0;
}

#endif
