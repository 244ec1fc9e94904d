/* The collectives' fast path on NCCL (dist/comm_internal.h): broadcast and
 * reduce of one process over several GPUs, as torch.cuda.comm does when
 * NCCL is there.
 *
 * Communicators come from ncclCommInitAll over the device list, in the
 * list's order (rank i is devs[i]), and are kept for the process's life in a
 * small cache (a list used again costs nothing; more than CACHE lists fall
 * back to peer copies). Each device's part is queued on that device's
 * current stream inside one ncclGroupStart/End, so the work is ordered after
 * what the user queued there and nothing synchronizes. The reads and
 * writes are declared to the access layer (the receiving sides as ordered
 * after the root's stream, as a copy would be). TCUDA_COMM_NCCL=0 turns the path off;
 * so do a missing NCCL (or one too old to have a symbol tcuda needs), more
 * than CACHE device lists and a dtype NCCL lacks (TC_ERROR_NOT_SUPPORTED:
 * the caller copies instead). An NCCL that is there and fails, in
 * ncclCommInitAll or in a collective, is an error (TC_ERROR_CUDA with NCCL's
 * words), never a silent fallback.
 *
 * Threads: NCCL's communicators are not safe to use from two threads at
 * once, and two groups that launch on shared devices in different orders
 * deadlock on the GPU (device 0 runs A then B, device 1 B then A). So each
 * cached list has a mutex, and a launch holds the mutexes of every cached
 * list that shares a device with its own (in cache order, so two launches
 * never wait on each other in a cycle): launches over overlapping devices
 * queue whole, one after the other; disjoint ones run concurrently. Only
 * the queuing is serialized, not the GPU work. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm_internal.h"
#include "tensor/tensor_internal.h"
#include "runtime/cuda/cuda_internal.h"
#include "access/access.h"
#include "nccl_internal.h"

enum { CACHE = 8, MAX_LIST = 16 };

typedef struct cached {
    pthread_mutex_t use; /* held while work is queued on these communicators */
    int n;
    int devs[MAX_LIST];
    tc__nccl_comm_t comms[MAX_LIST];
} cached;

/* `lock` guards the cache's list; entries, once made, stay for the
 * process's life (their addresses too). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cached cache[CACHE];
static int n_cached;

static tc_status unsupported(const char *why)
{
    return tc__fail(TC_ERROR_NOT_SUPPORTED, "NCCL path not taken: %s", why);
}

static tc_status usable(int n)
{
    const char *env = getenv("TCUDA_COMM_NCCL");
    if (env && !strcmp(env, "0"))
        return unsupported("TCUDA_COMM_NCCL=0");
    if (n < 2 || n > MAX_LIST)
        return unsupported("device count");
    return tc__nccl_ready();
}

/* The communicators of devs[0..n), made on first use. A failed
 * ncclCommInitAll is TC_ERROR_CUDA with NCCL's message (and is tried again
 * on the next call). */
static tc_status comms_for(const int *devs, int n, cached **out)
{
    tc_status st = TC_OK;
    pthread_mutex_lock(&lock);
    cached *c = NULL;
    for (int i = 0; i < n_cached && !c; i++)
        if (cache[i].n == n && !memcmp(cache[i].devs, devs, sizeof(int) * (size_t)n))
            c = &cache[i];
    if (!c && n_cached == CACHE)
        st = unsupported("too many device lists");
    if (!c && st == TC_OK) {
        c = &cache[n_cached];
        int prev = tc__tls_device;
        tc__nccl_result r = tc__nccl.comm_init_all(c->comms, n, devs);
        tc_status sw = tc__switch_device(prev); /* NCCL may have changed CUDA's device */
        if (r != TC__NCCL_SUCCESS)
            st = tc__nccl_fail(r, "ncclCommInitAll");
        else if ((st = sw) == TC_OK) {
            pthread_mutex_init(&c->use, NULL);
            c->n = n;
            memcpy(c->devs, devs, sizeof(int) * (size_t)n);
            n_cached++;
        }
    }
    pthread_mutex_unlock(&lock);
    if (st == TC_OK)
        *out = c;
    return st;
}

static bool overlap(const cached *a, const cached *b)
{
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++)
            if (a->devs[i] == b->devs[j])
                return true;
    return false;
}

/* Takes the use mutexes of every cached list sharing a device with c (c's
 * own included), in cache order; *held[0..*n) says which, for release. */
static void use_begin(const cached *c, cached **held, int *n)
{
    pthread_mutex_lock(&lock);
    int k = 0;
    for (int i = 0; i < n_cached; i++)
        if (overlap(&cache[i], c))
            held[k++] = &cache[i];
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < k; i++)
        pthread_mutex_lock(&held[i]->use);
    *n = k;
}

static void use_end(cached **held, int n)
{
    for (int i = n - 1; i >= 0; i--)
        pthread_mutex_unlock(&held[i]->use);
}

static tc_status declare(const tc_tensor *t, int dev, bool write, int after_dev, bool after,
                         const char *what)
{
    tc__span sp;
    tc__span_dense(tc__data(t), (size_t)tc__numel(t->ndim, t->sizes) * tc_dtype_size(t->dtype),
                   t->dtype, t->ndim, t->sizes, write, &sp);
    tc__access_op op = {.dev = dev,
                        .stream = (void *)tc__current_cuda_stream(dev),
                        .spans = &sp,
                        .n = 1,
                        .what = what,
                        .after_set = after,
                        .after_dev = after_dev,
                        .after_stream = (void *)tc__current_cuda_stream(after_dev)};
    return tc__access_op_publish(&op);
}

/* The status of a group of calls: the first failure among the device
 * switch, the calls (r) and ncclGroupEnd (e). */
static tc_status group_status(tc_status st, tc__nccl_result r, tc__nccl_result e, const char *what)
{
    TC_TRY(st);
    if (r != TC__NCCL_SUCCESS || (e != TC__NCCL_SUCCESS && e != TC__NCCL_IN_PROGRESS))
        return tc__nccl_fail(r != TC__NCCL_SUCCESS ? r : e, what);
    return TC_OK;
}

/* One NCCL call per device of c, inside one ncclGroupStart/End, each on its
 * device's current stream, with the lists that share a device held. */
typedef tc__nccl_result (*per_device_fn)(int i, tc__nccl_comm_t comm, cudaStream_t cs,
                                         const void *ctx);

static tc_status nccl_group(cached *c, const int *devs, int n, per_device_fn call, const void *ctx,
                            const char *what)
{
    tc_device_guard g = tc_device_guard_enter(tc__tls_device);
    TC_TRY(g.status);
    cached *held[CACHE];
    int nheld;
    use_begin(c, held, &nheld);
    tc_status st = TC_OK;
    tc__nccl_result r = tc__nccl.group_start();
    for (int i = 0; i < n && r == TC__NCCL_SUCCESS && st == TC_OK; i++) {
        st = tc__switch_device(devs[i]);
        if (st == TC_OK)
            r = call(i, c->comms[i], tc__current_cuda_stream(devs[i]), ctx);
    }
    tc__nccl_result e = tc__nccl.group_end();
    use_end(held, nheld);
    tc_device_guard_exit(&g);
    return group_status(st, r, e, what);
}

typedef struct bcast_args {
    tc_tensor *const *bufs;
    size_t bytes;
    int root;
} bcast_args;

static tc__nccl_result bcast_one(int i, tc__nccl_comm_t comm, cudaStream_t cs, const void *ctx)
{
    const bcast_args *a = ctx;
    void *p = tc__data(a->bufs[i]);
    return tc__nccl.broadcast(p, p, a->bytes, TC__NCCL_INT8, a->root, comm, cs);
}

static tc_status broadcast(tc_tensor *const *bufs, const int *devs, int n, int root, size_t bytes)
{
    TC_TRY(usable(n));
    cached *c;
    TC_TRY(comms_for(devs, n, &c));
    if (tc__access_on())
        for (int i = 0; i < n; i++)
            TC_TRY(declare(bufs[i], devs[i], i != root, devs[root], i != root, "nccl broadcast"));
    bcast_args a = {bufs, bytes, root};
    return nccl_group(c, devs, n, bcast_one, &a, "ncclBroadcast");
}

typedef struct reduce_args {
    const tc_tensor *const *ins;
    tc_tensor *out;
    size_t count;
    int dtype, root;
} reduce_args;

static tc__nccl_result reduce_one(int i, tc__nccl_comm_t comm, cudaStream_t cs, const void *ctx)
{
    const reduce_args *a = ctx;
    return tc__nccl.reduce(tc__data(a->ins[i]), i == a->root ? tc__data(a->out) : NULL, a->count,
                           a->dtype, TC__NCCL_SUM, a->root, comm, cs);
}

static tc_status reduce(const tc_tensor *const *ins, tc_tensor *out, const int *devs, int n,
                        int root)
{
    int dt = tc__nccl_dtype(out->dtype);
    if (dt < 0)
        return unsupported("dtype");
    TC_TRY(usable(n));
    cached *c;
    TC_TRY(comms_for(devs, n, &c));
    if (tc__access_on()) {
        for (int i = 0; i < n; i++)
            TC_TRY(declare(ins[i], devs[i], false, 0, false, "nccl reduce"));
        TC_TRY(declare(out, devs[root], true, 0, false, "nccl reduce"));
    }
    reduce_args a = {ins, out, (size_t)tc__numel(out->ndim, out->sizes), dt, root};
    return nccl_group(c, devs, n, reduce_one, &a, "ncclReduce");
}

const tc__comm_accel tc__comm_nccl = {broadcast, reduce};
