/* Multi-GPU communication benchmark, a table of GB/s for 256 MiB of float32.
 *
 *   bench_comm comm     one process: tc_comm_broadcast (GPU 0 to n GPUs) and
 *                       tc_comm_reduce_add (n GPUs to GPU 0) for n = 2 and 4,
 *                       and raw NCCL (ncclCommInitAll, one process) doing the
 *                       same broadcast and reduce, and all_reduce, for the
 *                       floor; skips (exit 0) with fewer than 2 GPUs.
 *   bench_comm dist     one rank of a group (under tools/tcuda-run):
 *                       tc_dist_all_reduce; rank 0 prints the row.
 *
 * GB/s is the algorithm bandwidth (bytes of one buffer / time) as PyTorch
 * users measure it; "bus" rows scale all_reduce by 2 (n - 1) / n as
 * nccl-tests do. Each figure is the median of 10 timed runs after 3 warm-up
 * runs; a run starts and ends with every device involved synchronized. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#define BYTES ((int64_t)256 << 20)
#define NUMEL (BYTES / 4)
enum { WARMUP = 3, RUNS = 10 };

static void sync_all(int n)
{
    for (int d = 0; d < n; d++)
        TRY(tc_synchronize(d));
}

static void row(const char *name, double gbs)
{
    printf("%-34s %10.2f  GB/s\n", name, gbs);
    fflush(stdout);
}

/* ---- tcuda comm ------------------------------------------------------------------------ */

typedef void (*op_fn)(int n, void *ctx);

static double time_gbs(op_fn op, int n, void *ctx)
{
    double t[RUNS];
    for (int i = 0; i < WARMUP + RUNS; i++) {
        sync_all(n);
        double t0 = bench_now_ns();
        op(n, ctx);
        sync_all(n);
        if (i >= WARMUP)
            t[i - WARMUP] = bench_now_ns() - t0;
    }
    return (double)BYTES / bench_median(t, RUNS); /* bytes per ns = GB/s */
}

static tc_tensor *src0, *inputs[8];

static void do_broadcast(int n, void *ctx)
{
    (void)ctx;
    int devs[8] = {0};
    tc_tensor *out[8] = {0};
    for (int i = 0; i < n; i++)
        devs[i] = i;
    TRY(tc_comm_broadcast(src0, devs, n, out));
    for (int i = 0; i < n; i++)
        tc_tensor_release(out[i]);
}

static void do_reduce_add(int n, void *ctx)
{
    (void)ctx;
    tc_tensor *sum;
    TRY(tc_comm_reduce_add((const tc_tensor *const *)inputs, n, 0, &sum));
    tc_tensor_release(sum);
}

/* ---- raw NCCL, one process over n GPUs ------------------------------------------------------ */

typedef struct nccl_comm *nccl_comm_t;
static struct {
    int (*init_all)(nccl_comm_t *, int, const int *);
    int (*destroy)(nccl_comm_t);
    int (*bcast)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*reduce)(const void *, void *, size_t, int, int, int, nccl_comm_t, cudaStream_t);
    int (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*group_start)(void);
    int (*group_end)(void);
} nccl;

static bool nccl_load(void)
{
    const char *path = getenv("TCUDA_NCCL_LIBRARY");
    void *h = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW);
    if (!h)
        return false;
    *(void **)&nccl.init_all = dlsym(h, "ncclCommInitAll");
    *(void **)&nccl.destroy = dlsym(h, "ncclCommDestroy");
    *(void **)&nccl.bcast = dlsym(h, "ncclBroadcast");
    *(void **)&nccl.reduce = dlsym(h, "ncclReduce");
    *(void **)&nccl.all_reduce = dlsym(h, "ncclAllReduce");
    *(void **)&nccl.group_start = dlsym(h, "ncclGroupStart");
    *(void **)&nccl.group_end = dlsym(h, "ncclGroupEnd");
    return nccl.init_all && nccl.bcast && nccl.reduce && nccl.all_reduce && nccl.group_start;
}

typedef struct raw {
    nccl_comm_t comms[8];
    void *buf[8], *out[8];
    cudaStream_t streams[8];
    int kind; /* 0 broadcast, 1 reduce, 2 all_reduce */
} raw;

static void do_raw(int n, void *ctx)
{
    raw *r = ctx;
    nccl.group_start();
    for (int d = 0; d < n; d++) {
        cudaSetDevice(d);
        if (r->kind == 0)
            nccl.bcast(r->buf[d], r->buf[d], (size_t)NUMEL, 7, 0, r->comms[d], r->streams[d]);
        else if (r->kind == 1)
            nccl.reduce(r->buf[d], r->out[d], (size_t)NUMEL, 7, 0, 0, r->comms[d], r->streams[d]);
        else
            nccl.all_reduce(r->buf[d], r->buf[d], (size_t)NUMEL, 7, 0, r->comms[d], r->streams[d]);
    }
    nccl.group_end();
    for (int d = 0; d < n; d++) {
        cudaSetDevice(d);
        cudaStreamSynchronize(r->streams[d]);
    }
}

static void raw_rows(int n)
{
    raw r;
    memset(&r, 0, sizeof r);
    int devs[8] = {0};
    for (int d = 0; d < n; d++)
        devs[d] = d;
    if (nccl.init_all(r.comms, n, devs) != 0) {
        printf("raw NCCL over %d GPUs: ncclCommInitAll failed\n", n);
        return;
    }
    for (int d = 0; d < n; d++) {
        cudaSetDevice(d);
        cudaMalloc(&r.buf[d], (size_t)BYTES);
        cudaMalloc(&r.out[d], (size_t)BYTES);
        cudaMemset(r.buf[d], 0, (size_t)BYTES);
        cudaStreamCreateWithFlags(&r.streams[d], cudaStreamNonBlocking);
    }
    static const char *names[3] = {"broadcast", "reduce", "all_reduce"};
    for (int k = 0; k < 3; k++) {
        r.kind = k;
        double gbs = time_gbs(do_raw, n, &r);
        char name[64];
        snprintf(name, sizeof name, "raw nccl %s x%d", names[k], n);
        row(name, gbs);
        if (k == 2) {
            snprintf(name, sizeof name, "raw nccl all_reduce bus x%d", n);
            row(name, gbs * 2.0 * (n - 1) / n);
        }
    }
    for (int d = 0; d < n; d++) {
        cudaSetDevice(d);
        cudaFree(r.buf[d]);
        cudaFree(r.out[d]);
        cudaStreamDestroy(r.streams[d]);
        nccl.destroy(r.comms[d]);
    }
    cudaSetDevice(0);
}

static int comm_main(void)
{
    int gpus = tc_device_count();
    if (gpus < 2) {
        printf("skipped: bench_comm needs 2 or more GPUs, this machine has %d\n", gpus);
        return 0;
    }
    bool have_nccl = nccl_load();
    if (!have_nccl)
        printf("raw NCCL rows skipped: libnccl.so.2 not found (set TCUDA_NCCL_LIBRARY)\n");
    int64_t n = NUMEL;
    TRY(tc_tensor_ones(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, 0}, &src0));
    for (int d = 0; d < gpus && d < 8; d++)
        TRY(tc_tensor_ones(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, d}, &inputs[d]));
    for (int k = 2; k <= 4; k *= 2) {
        if (k > gpus)
            break;
        char name[64];
        snprintf(name, sizeof name, "comm broadcast x%d", k);
        row(name, time_gbs(do_broadcast, k, NULL));
        snprintf(name, sizeof name, "comm reduce_add x%d", k);
        row(name, time_gbs(do_reduce_add, k, NULL));
        if (have_nccl)
            raw_rows(k);
    }
    tc_tensor_release(src0);
    for (int d = 0; d < gpus && d < 8; d++)
        tc_tensor_release(inputs[d]);
    return 0;
}

/* ---- one rank of a group ------------------------------------------------------------------- */

static int dist_main(void)
{
    tc_process_group *pg;
    TRY(tc_process_group_create_from_env(&pg));
    int world = tc_process_group_size(pg), dev = tc_process_group_device(pg);
    int64_t n = NUMEL;
    tc_tensor *t;
    TRY(tc_tensor_ones(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, dev}, &t));
    double times[RUNS];
    for (int i = 0; i < WARMUP + RUNS; i++) {
        TRY(tc_dist_barrier(pg));
        double t0 = bench_now_ns();
        tc_work *w;
        TRY(tc_dist_all_reduce(pg, t, TC_REDUCE_OP_SUM, &w));
        TRY(tc_work_wait(w));
        TRY(tc_work_destroy(w));
        if (i >= WARMUP)
            times[i - WARMUP] = bench_now_ns() - t0;
    }
    double gbs = (double)BYTES / bench_median(times, RUNS);
    if (tc_process_group_rank(pg) == 0) {
        char name[64];
        snprintf(name, sizeof name, "dist all_reduce x%d", world);
        row(name, gbs);
        snprintf(name, sizeof name, "dist all_reduce bus x%d", world);
        row(name, gbs * 2.0 * (world - 1) / world);
    }
    tc_tensor_release(t);
    TRY(tc_process_group_destroy(pg));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "dist"))
        return dist_main();
    if (argc == 2 && !strcmp(argv[1], "comm"))
        return comm_main();
    fprintf(stderr, "usage: bench_comm comm | bench_comm dist (under tools/tcuda-run)\n");
    return 2;
}
