/* Multi-GPU communication benchmark: tcuda's collectives at bench/coll_plan.h's
 * sizes (64 KiB to 1 GiB of float32), in ROW lines that bench/compare.py
 * joins with nccl_floor's (raw NCCL) and the PyTorch twins'.
 *
 *   bench_comm dist     one rank of a group (under tools/tcuda-run):
 *                       tc_dist_all_reduce, broadcast (root 0), all_gather
 *                       and reduce_scatter, each in coll_plan.h's two
 *                       modes: tcuda_stream (K calls with out = NULL queued
 *                       back to back, one tc_synchronize; what a training
 *                       step sees; tcuda_queue is the host's time per
 *                       call of those loops, before the synchronize) and
 *                       tcuda_wait (each call's tc_work
 *                       waited with tc_work_wait, then destroyed, each
 *                       beside a call waited for with tc_stream_synchronize:
 *                       tcuda_sync); every batch starts after a
 *                       tc_dist_barrier. All on a
 *                       stream the bench makes (non-blocking, as the
 *                       floor's); tcuda_legacy is stream mode on the
 *                       device's default stream. Rank 0 prints.
 *   bench_comm comm     one process: tc_comm_broadcast (GPU 0 to GPUs 0..n-1)
 *                       and tc_comm_reduce_add (GPUs 0..n-1 to GPU 0) for
 *                       n = 2 and 4, stream mode only (K calls queued, their
 *                       result tensors released at once, then every device
 *                       synchronized); GB/s is the algorithm bandwidth
 *                       (bytes of one buffer / time). Skips (exit 0) with
 *                       fewer than 2 GPUs.
 *
 * Buffers hold zeros, so that repeated sums stay finite. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "coll_plan.h"
#include "tcuda/tcuda.h"

/* ---- one rank of a group ------------------------------------------------------------------- */

typedef struct cell {
    tc_process_group *pg;
    int device, world;
    coll_op op;
    tc_tensor *big, *small;  /* bytes and bytes / world */
    tc_stream *own, *legacy; /* a stream of the bench's, as the floor's; the default one */
} cell;

/* One collective of the cell; out NULL queues it without a tc_work. */
static void issue(const cell *c, tc_work **out)
{
    switch (c->op) {
    case COLL_ALL_REDUCE: TRY(tc_dist_all_reduce(c->pg, c->big, TC_REDUCE_OP_SUM, out)); break;
    case COLL_BROADCAST: TRY(tc_dist_broadcast(c->pg, c->big, 0, out)); break;
    case COLL_ALL_GATHER: TRY(tc_dist_all_gather(c->pg, c->big, c->small, out)); break;
    default: TRY(tc_dist_reduce_scatter(c->pg, c->small, c->big, TC_REDUCE_OP_SUM, out)); break;
    }
}

/* Host nanoseconds per call of the last stream batch's loop: the time to
 * queue a call, which bounds the stream-ordered rate of small messages. */
static double queued_ns;

/* Nanoseconds per call of `calls` calls queued back to back, the ranks
 * started together, one device synchronize at the end. */
static double stream_batch(const cell *c, int calls)
{
    TRY(tc_dist_barrier(c->pg));
    double t0 = bench_now_ns();
    for (int i = 0; i < calls; i++)
        issue(c, NULL);
    queued_ns = (bench_now_ns() - t0) / calls;
    TRY(tc_synchronize(c->device));
    return (bench_now_ns() - t0) / calls;
}

/* The largest of the ranks' values, so that all use the same counts. */
static double agree_max(const cell *c, double v)
{
    tc_tensor *t;
    tc_work *w;
    TRY(tc_tensor_full(0, NULL, v, TC_FLOAT64, (tc_device){TC_CUDA, c->device}, &t));
    TRY(tc_dist_all_reduce(c->pg, t, TC_REDUCE_OP_MAX, &w));
    TRY(tc_work_wait(w));
    TRY(tc_work_destroy(w));
    TRY(tc_tensor_item(t, &v));
    tc_tensor_release(t);
    return v;
}

static void print_row(const cell *c, int64_t bytes, const char *variant, double ns)
{
    if (tc_process_group_rank(c->pg) != 0)
        return;
    double bus = (double)bytes / ns * coll_bus_factor(c->op, c->world);
    printf(COLL_ROW_FORMAT, coll_op_names[c->op], c->world, (long long)bytes, variant, ns * 1e-3,
           bus);
    fflush(stdout);
}

static void dist_cell(const cell *c, int64_t bytes)
{
    for (int i = 0; i < COLL_WARMUP; i++)
        issue(c, NULL);
    double est = agree_max(c, stream_batch(c, COLL_PROBE));
    int k = coll_batch_calls(est), m = coll_wait_calls(est);
    double t[COLL_MAX_WAITS];
    double q[COLL_BATCHES];
    for (int b = 0; b < COLL_BATCHES; b++) {
        t[b] = stream_batch(c, k);
        q[b] = queued_ns;
    }
    print_row(c, bytes, "tcuda_stream", bench_median(t, COLL_BATCHES));
    print_row(c, bytes, "tcuda_queue", bench_median(q, COLL_BATCHES));
    /* the same on the device's default stream (CUDA's legacy stream) */
    TRY(tc_set_stream(c->legacy));
    for (int b = 0; b < COLL_BATCHES; b++)
        t[b] = stream_batch(c, k);
    print_row(c, bytes, "tcuda_legacy", bench_median(t, COLL_BATCHES));
    TRY(tc_set_stream(c->own));
    TRY(tc_dist_barrier(c->pg));
    /* each tc_work_wait call beside one waited for with a plain stream
     * synchronize, in turn: their difference is what tc_work_wait adds,
     * free of the spread between processes (tens of us at 1 GiB) */
    double s[COLL_MAX_WAITS];
    for (int i = 0; i < m; i++) {
        double t0 = bench_now_ns();
        tc_work *w;
        issue(c, &w);
        TRY(tc_work_wait(w));
        TRY(tc_work_destroy(w));
        t[i] = bench_now_ns() - t0;
        t0 = bench_now_ns();
        issue(c, NULL);
        TRY(tc_stream_synchronize(c->own));
        s[i] = bench_now_ns() - t0;
    }
    print_row(c, bytes, "tcuda_wait", bench_median(t, m));
    print_row(c, bytes, "tcuda_sync", bench_median(s, m));
}

static int dist_main(void)
{
    cell c = {0};
    TRY(tc_process_group_create_from_env(&c.pg));
    c.world = tc_process_group_size(c.pg);
    c.device = tc_process_group_device(c.pg);
    TRY(tc_set_device(c.device));
    /* collectives go on a stream of our own, as nccl_floor's (a non-blocking
     * one); the default stream's rows are tcuda_legacy */
    TRY(tc_stream_create(c.device, 0, &c.own));
    TRY(tc_default_stream(c.device, &c.legacy));
    TRY(tc_set_stream(c.own));
    if (tc_process_group_rank(c.pg) == 0)
        printf("# bench_comm dist: tcuda %s, %d ranks, %s, NCCL %s\n", tc_version(), c.world,
               bench_device_name(c.device),
               getenv("TCUDA_NCCL_LIBRARY") ? getenv("TCUDA_NCCL_LIBRARY") : "libnccl.so.2");
    tc_device dev = {TC_CUDA, c.device};
    for (int s = 0; s < COLL_N_SIZES; s++) {
        int64_t bytes = coll_size(s), big_n = bytes / 4, small_n = big_n / c.world;
        TRY(tc_tensor_zeros(1, &big_n, TC_FLOAT32, dev, &c.big));
        TRY(tc_tensor_zeros(1, &small_n, TC_FLOAT32, dev, &c.small));
        for (int op = 0; op < COLL_N_OPS; op++) {
            c.op = (coll_op)op;
            dist_cell(&c, bytes);
        }
        tc_tensor_release(c.big);
        tc_tensor_release(c.small);
        TRY(tc_synchronize(c.device));
        TRY(tc_empty_cache()); /* the next size's buffers fit without the last ones' */
    }
    TRY(tc_dist_barrier(c.pg));
    TRY(tc_set_stream(c.legacy));
    TRY(tc_process_group_destroy(c.pg));
    TRY(tc_stream_destroy(c.own));
    return 0;
}

/* ---- one process, torch.cuda.comm's calls -------------------------------------------------- */

typedef struct comm_cell {
    int n;
    bool reduce;          /* reduce_add, else broadcast */
    tc_tensor *src;       /* broadcast's source, on GPU 0 */
    tc_tensor *inputs[4]; /* reduce_add's inputs, one per GPU */
} comm_cell;

static void comm_issue(const comm_cell *c)
{
    if (c->reduce) {
        tc_tensor *sum;
        TRY(tc_comm_reduce_add((const tc_tensor *const *)c->inputs, c->n, 0, &sum));
        tc_tensor_release(sum);
        return;
    }
    static const int devs[4] = {0, 1, 2, 3};
    tc_tensor *out[4] = {0};
    TRY(tc_comm_broadcast(c->src, devs, c->n, out));
    for (int i = 0; i < c->n; i++)
        tc_tensor_release(out[i]);
}

static void sync_all(int n)
{
    for (int d = 0; d < n; d++)
        TRY(tc_synchronize(d));
}

static double comm_batch(const comm_cell *c, int calls)
{
    sync_all(c->n);
    double t0 = bench_now_ns();
    for (int i = 0; i < calls; i++)
        comm_issue(c);
    sync_all(c->n);
    return (bench_now_ns() - t0) / calls;
}

static void comm_cell_row(const comm_cell *c, int64_t bytes)
{
    for (int i = 0; i < COLL_WARMUP; i++)
        comm_issue(c);
    int k = coll_batch_calls(comm_batch(c, COLL_PROBE));
    double t[COLL_BATCHES];
    for (int b = 0; b < COLL_BATCHES; b++)
        t[b] = comm_batch(c, k);
    double ns = bench_median(t, COLL_BATCHES);
    printf(COLL_ROW_FORMAT, c->reduce ? "comm_reduce_add" : "comm_broadcast", c->n,
           (long long)bytes, "tcuda", ns * 1e-3, (double)bytes / ns);
    fflush(stdout);
}

static int comm_main(void)
{
    int gpus = tc_device_count();
    if (gpus < 2) {
        printf("skipped: bench_comm comm needs 2 or more GPUs, this machine has %d\n", gpus);
        return 0;
    }
    printf("# bench_comm comm: tcuda %s, %d GPUs, %s, NCCL %s\n", tc_version(), gpus,
           bench_device_name(0),
           getenv("TCUDA_NCCL_LIBRARY") ? getenv("TCUDA_NCCL_LIBRARY") : "libnccl.so.2");
    for (int n = 2; n <= 4 && n <= gpus; n *= 2) {
        for (int s = 0; s < COLL_N_SIZES; s++) {
            int64_t bytes = coll_size(s), numel = bytes / 4;
            comm_cell c = {.n = n};
            TRY(tc_tensor_zeros(1, &numel, TC_FLOAT32, (tc_device){TC_CUDA, 0}, &c.src));
            for (int d = 0; d < n; d++)
                TRY(tc_tensor_zeros(1, &numel, TC_FLOAT32, (tc_device){TC_CUDA, d}, &c.inputs[d]));
            comm_cell_row(&c, bytes);
            c.reduce = true;
            comm_cell_row(&c, bytes);
            tc_tensor_release(c.src);
            for (int d = 0; d < n; d++)
                tc_tensor_release(c.inputs[d]);
            sync_all(n);
            TRY(tc_empty_cache());
        }
    }
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
