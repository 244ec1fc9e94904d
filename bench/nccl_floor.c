/* nccl_floor: raw NCCL, the floor of bench/run.sh comm. One rank of a group,
 * run under tools/tcuda-run (it reads RANK, WORLD_SIZE, LOCAL_RANK and
 * MASTER_PORT as torchrun sets them):
 *
 *   tools/tcuda-run -n N -- nccl_floor [DIR]
 *
 * It times all_reduce, broadcast, all_gather and reduce_scatter of
 * bench/coll_plan.h's sizes in its two modes (stream: queued back to back,
 * one cudaDeviceSynchronize; wait: cudaStreamSynchronize after each call)
 * and rank 0 prints a ROW line per cell (variants nccl_stream, nccl_wait;
 * nccl_queue is the host's time per call of the stream loops, before the
 * synchronize).
 *
 * Nothing of tcuda is used, so that the floor measures NCCL alone: NCCL is
 * loaded with dlopen ($TCUDA_NCCL_LIBRARY, else libnccl.so.2) and its few
 * types are declared here from nccl.h's stable ABI; the communicator is
 * NCCL's blocking one (ncclCommInitRank) on a cudaStreamNonBlocking stream.
 * Rank 0 hands the unique id to the others through a file,
 * DIR/nccl_floor_id.MASTER_PORT (DIR: the argument, else $NCCL_FLOOR_DIR,
 * else /tmp), written under another name and renamed so that no rank reads
 * half of it; the others poll for it for up to 60 s, ignore one older than
 * a few seconds before they started (a run that died), and rank 0 removes
 * it once every rank has joined. Any failure prints the call and exits 1. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "coll_plan.h"

/* ---- NCCL's ABI -------------------------------------------------------------------------- */

typedef struct {
    char internal[128];
} nccl_unique_id;
typedef struct nccl_comm *nccl_comm_t;
enum { NCCL_FLOAT32 = 7, NCCL_FLOAT64 = 8, NCCL_SUM = 0, NCCL_MAX = 2 };

static struct {
    int (*get_version)(int *);
    int (*get_unique_id)(nccl_unique_id *);
    int (*init_rank)(nccl_comm_t *, int, nccl_unique_id, int);
    int (*destroy)(nccl_comm_t);
    const char *(*error_string)(int);
    int (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*broadcast)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*all_gather)(const void *, void *, size_t, int, nccl_comm_t, cudaStream_t);
    int (*reduce_scatter)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
} nccl;

static int rank_ = -1;

static void die(const char *what, const char *why)
{
    fprintf(stderr, "nccl_floor rank %d: %s: %s\n", rank_, what, why);
    exit(1);
}

#define CUDA(call)                                                                                 \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            die(#call, cudaGetErrorString(e_));                                                    \
    } while (0)
#define NCCL(call)                                                                                 \
    do {                                                                                           \
        int r_ = (call);                                                                           \
        if (r_ != 0)                                                                               \
            die(#call, nccl.error_string ? nccl.error_string(r_) : "NCCL error");                  \
    } while (0)

/* dlsym into a function pointer (ISO C has no cast between the two). */
static void sym(void *lib, const char *name, void *fn_ptr)
{
    void *p = dlsym(lib, name);
    if (!p)
        die("dlsym", name);
    memcpy(fn_ptr, &p, sizeof p);
}

static const char *nccl_load(void)
{
    const char *path = getenv("TCUDA_NCCL_LIBRARY");
    if (!path || !*path)
        path = "libnccl.so.2";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        die("dlopen of NCCL (set TCUDA_NCCL_LIBRARY)", dlerror());
    sym(lib, "ncclGetErrorString", &nccl.error_string);
    sym(lib, "ncclGetVersion", &nccl.get_version);
    sym(lib, "ncclGetUniqueId", &nccl.get_unique_id);
    sym(lib, "ncclCommInitRank", &nccl.init_rank);
    sym(lib, "ncclCommDestroy", &nccl.destroy);
    sym(lib, "ncclAllReduce", &nccl.all_reduce);
    sym(lib, "ncclBroadcast", &nccl.broadcast);
    sym(lib, "ncclAllGather", &nccl.all_gather);
    sym(lib, "ncclReduceScatter", &nccl.reduce_scatter);
    return path;
}

/* ---- the group ----------------------------------------------------------------------------- */

typedef struct group {
    int rank, world, device;
    nccl_comm_t comm;
    cudaStream_t stream;
    void *one;   /* a float: the barrier's all_reduce */
    double *est; /* a double: the agreed estimate */
} group;

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        if (fallback >= 0)
            return fallback;
        die(name, "not set (run under tools/tcuda-run)");
    }
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 0 || x > 1 << 20)
        die(name, "not a number in range");
    return (int)x;
}

/* Rank 0 writes the id under a temporary name and renames it: a reader
 * sees all of it or nothing. */
static void id_write(const char *path, const nccl_unique_id *id)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0)
        die("writing the unique id", tmp);
    if (rename(tmp, path) != 0)
        die("renaming the unique id into place", path);
}

static void id_read(const char *path, nccl_unique_id *id, double started_s)
{
    for (int tries = 0; tries < 6000; tries++) { /* 10 ms apart: 60 s */
        struct stat st;
        FILE *f = stat(path, &st) == 0 && st.st_mtime >= started_s - 5 ? fopen(path, "rb") : NULL;
        if (f) {
            size_t got = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (got == 1)
                return;
        }
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    die("waiting 60 s for rank 0's unique id", path);
}

static void group_join(group *g, const char *dir)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    g->rank = rank_ = env_int("RANK", -1);
    g->world = env_int("WORLD_SIZE", -1);
    g->device = env_int("LOCAL_RANK", g->rank);
    if (g->world < 1 || g->rank >= g->world)
        die("RANK and WORLD_SIZE", "RANK must be below WORLD_SIZE");
    char path[4096];
    snprintf(path, sizeof path, "%s/nccl_floor_id.%d", dir, env_int("MASTER_PORT", 29500));
    CUDA(cudaSetDevice(g->device));
    nccl_unique_id id;
    if (g->rank == 0) {
        NCCL(nccl.get_unique_id(&id));
        id_write(path, &id);
    } else {
        id_read(path, &id, (double)now.tv_sec);
    }
    NCCL(nccl.init_rank(&g->comm, g->world, id, g->rank));
    if (g->rank == 0)
        unlink(path); /* every rank has read it: init is collective */
    CUDA(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    CUDA(cudaMalloc(&g->one, sizeof(float)));
    CUDA(cudaMalloc((void **)&g->est, sizeof(double)));
    CUDA(cudaMemsetAsync(g->one, 0, sizeof(float), g->stream));
}

/* Every rank here before any goes on: an all_reduce of one float, waited. */
static void barrier(group *g)
{
    NCCL(nccl.all_reduce(g->one, g->one, 1, NCCL_FLOAT32, NCCL_SUM, g->comm, g->stream));
    CUDA(cudaStreamSynchronize(g->stream));
}

/* The largest of the ranks' values, so that all use the same counts. */
static double agree_max(group *g, double v)
{
    /* all on NCCL's stream: a non-blocking stream does not follow the legacy one */
    CUDA(cudaMemcpyAsync(g->est, &v, sizeof v, cudaMemcpyHostToDevice, g->stream));
    NCCL(nccl.all_reduce(g->est, g->est, 1, NCCL_FLOAT64, NCCL_MAX, g->comm, g->stream));
    CUDA(cudaMemcpyAsync(&v, g->est, sizeof v, cudaMemcpyDeviceToHost, g->stream));
    CUDA(cudaStreamSynchronize(g->stream));
    return v;
}

/* ---- one cell ------------------------------------------------------------------------------ */

typedef struct cell {
    group *g;
    coll_op op;
    void *big, *small; /* bytes and bytes / world */
    size_t big_n, small_n;
} cell;

static void issue(const cell *c)
{
    group *g = c->g;
    switch (c->op) {
    case COLL_ALL_REDUCE:
        NCCL(nccl.all_reduce(c->big, c->big, c->big_n, NCCL_FLOAT32, NCCL_SUM, g->comm, g->stream));
        break;
    case COLL_BROADCAST:
        NCCL(nccl.broadcast(c->big, c->big, c->big_n, NCCL_FLOAT32, 0, g->comm, g->stream));
        break;
    case COLL_ALL_GATHER:
        NCCL(nccl.all_gather(c->small, c->big, c->small_n, NCCL_FLOAT32, g->comm, g->stream));
        break;
    default:
        NCCL(nccl.reduce_scatter(c->big, c->small, c->small_n, NCCL_FLOAT32, NCCL_SUM, g->comm,
                                 g->stream));
        break;
    }
}

/* Host nanoseconds per call of the last stream batch's loop: the time to
 * queue a call, which bounds the stream-ordered rate of small messages. */
static double queued_ns;

/* Nanoseconds per call of `calls` calls queued back to back, the ranks
 * started together, one device synchronize at the end. */
static double stream_batch(const cell *c, int calls)
{
    barrier(c->g);
    double t0 = bench_now_ns();
    for (int i = 0; i < calls; i++)
        issue(c);
    queued_ns = (bench_now_ns() - t0) / calls;
    CUDA(cudaDeviceSynchronize());
    return (bench_now_ns() - t0) / calls;
}

static void print_row(const cell *c, int64_t bytes, const char *variant, double ns)
{
    if (c->g->rank != 0)
        return;
    double bus = (double)bytes / ns * coll_bus_factor(c->op, c->g->world);
    printf(COLL_ROW_FORMAT, coll_op_names[c->op], c->g->world, (long long)bytes, variant, ns * 1e-3,
           bus);
    fflush(stdout);
}

static void run_cell(const cell *c, int64_t bytes)
{
    for (int i = 0; i < COLL_WARMUP; i++)
        issue(c);
    double est = agree_max(c->g, stream_batch(c, COLL_PROBE));
    int k = coll_batch_calls(est), m = coll_wait_calls(est);
    double t[COLL_MAX_WAITS];
    double q[COLL_BATCHES];
    for (int b = 0; b < COLL_BATCHES; b++) {
        t[b] = stream_batch(c, k);
        q[b] = queued_ns;
    }
    print_row(c, bytes, "nccl_stream", bench_median(t, COLL_BATCHES));
    print_row(c, bytes, "nccl_queue", bench_median(q, COLL_BATCHES));
    barrier(c->g);
    for (int i = 0; i < m; i++) {
        double t0 = bench_now_ns();
        issue(c);
        CUDA(cudaStreamSynchronize(c->g->stream));
        t[i] = bench_now_ns() - t0;
    }
    print_row(c, bytes, "nccl_wait", bench_median(t, m));
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: tools/tcuda-run -n N -- nccl_floor [DIR of the unique id file]\n");
        return 2;
    }
    const char *dir = argc == 2 ? argv[1] : getenv("NCCL_FLOOR_DIR");
    if (!dir || !*dir)
        dir = "/tmp";
    const char *lib = nccl_load();
    group g;
    memset(&g, 0, sizeof g);
    group_join(&g, dir);
    if (g.rank == 0) {
        int v = 0;
        struct cudaDeviceProp prop;
        NCCL(nccl.get_version(&v));
        CUDA(cudaGetDeviceProperties(&prop, g.device));
        printf("# nccl_floor: NCCL %d.%d.%d (%s), %d ranks, %s\n", v / 10000, v / 100 % 100,
               v % 100, lib, g.world, prop.name);
    }
    for (int s = 0; s < COLL_N_SIZES; s++) {
        int64_t bytes = coll_size(s);
        cell c = {.g = &g, .big_n = (size_t)bytes / 4, .small_n = (size_t)bytes / 4 / g.world};
        CUDA(cudaMalloc(&c.big, (size_t)bytes));
        CUDA(cudaMalloc(&c.small, c.small_n * 4));
        CUDA(cudaMemset(c.big, 0, (size_t)bytes));
        CUDA(cudaMemset(c.small, 0, c.small_n * 4));
        CUDA(cudaDeviceSynchronize()); /* the memsets ran on another stream than NCCL's */
        for (int op = 0; op < COLL_N_OPS; op++) {
            c.op = (coll_op)op;
            run_cell(&c, bytes);
        }
        CUDA(cudaFree(c.big));
        CUDA(cudaFree(c.small));
    }
    barrier(&g);
    NCCL(nccl.destroy(g.comm));
    CUDA(cudaStreamDestroy(g.stream));
    CUDA(cudaFree(g.one));
    CUDA(cudaFree(g.est));
    return 0;
}
