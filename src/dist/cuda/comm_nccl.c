/* The collectives' fast path on NCCL (dist/comm_internal.h): broadcast and
 * reduce of one process over several distinct GPUs, as torch.cuda.comm does
 * when NCCL is there.
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
 * the caller copies instead). A list whose ncclCommInitAll fails is kept in
 * the cache as failed: one "tcuda warning:" line gives NCCL's reason, and
 * from then on the list answers TC_ERROR_NOT_SUPPORTED at once (peer copies,
 * the same results), without trying NCCL again. A collective that fails on
 * communicators that exist is an error (TC_ERROR_CUDA with NCCL's words).
 *
 * Threads: NCCL's communicators are not safe to use from two threads at
 * once, and two groups that launch on shared devices in different orders
 * deadlock on the GPU (device 0 runs A then B, device 1 B then A). So each
 * cached list has a mutex, and a launch holds the mutexes of every cached
 * list that shares a device with its own (in cache order, so two launches
 * never wait on each other in a cycle): launches over overlapping devices
 * queue whole, one after the other; disjoint ones run concurrently. Of two
 * overlapping lists, the one made later sees the other when it launches, so
 * every pair of launches that share a device shares a mutex. A new list's
 * ncclCommInitAll runs with the mutexes of the lists it overlaps held too,
 * so NCCL never sets up on a device while another thread is queuing a group
 * there. ncclGroupStart/End nest per thread in NCCL, so a group is begun and
 * ended by one call here, on one thread, with nothing else of NCCL in
 * between; it is always ended, even after a failed call (NCCL then cancels
 * the group rather than launching part of it), and it never switches
 * devices in between (NCCL knows each communicator's device), so no failure
 * of ours can leave a group half queued. NCCL may change CUDA's current
 * device; the thread's device is set back after each init and group. Only
 * the queuing is serialized, not the GPU work. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "dist/comm_internal.h"
#include "tensor/tensor_internal.h"
#include "runtime/cuda/cuda_internal.h"
#include "access/access.h"
#include "nccl_internal.h"

enum { CACHE = 8, MAX_LIST = 16 };

typedef struct cached {
    pthread_mutex_t use; /* held while work is queued on these communicators */
    bool failed;         /* ncclCommInitAll failed: peer copies for this list */
    int n;
    int devs[MAX_LIST];
    tc__nccl_comm_t comms[MAX_LIST];
} cached;

/* `lock` guards the cache's list; entries, once made, stay for the
 * process's life (their addresses too). Order: `lock` before any entry's
 * `use`, and the `use` mutexes in cache order; nobody takes `lock` while
 * holding a `use`. */
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

static bool overlap(const cached *a, const cached *b)
{
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++)
            if (a->devs[i] == b->devs[j])
                return true;
    return false;
}

/* The working cached lists sharing a device with c, in cache order, into
 * held[]; the caller holds `lock`. */
static int overlapping(const cached *c, cached **held)
{
    int k = 0;
    for (int i = 0; i < n_cached; i++)
        if (!cache[i].failed && overlap(&cache[i], c))
            held[k++] = &cache[i];
    return k;
}

static void lock_all(cached **held, int n)
{
    for (int i = 0; i < n; i++)
        pthread_mutex_lock(&held[i]->use);
}

static void unlock_all(cached **held, int n)
{
    for (int i = n - 1; i >= 0; i--)
        pthread_mutex_unlock(&held[i]->use);
}

/* The one warning of a list whose ncclCommInitAll failed (why: NCCL's
 * message, as tc__nccl_fail wrote it). */
static void warn_failed(const int *devs, int n, const char *why)
{
    char list[MAX_LIST * 12] = "";
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%scuda:%d", i ? "," : "", devs[i]);
    tc__warn("%s; torch.cuda.comm's broadcast and reduce_add over [%s] use peer copies from now "
             "on (the results are the same)",
             why, list);
}

/* Makes the next cache entry for devs[0..n) (the caller holds `lock`, and
 * there is room), holding the `use` mutexes of the lists it overlaps while
 * NCCL sets up. A failed ncclCommInitAll is remembered in the entry and
 * answers TC_ERROR_NOT_SUPPORTED, after the warning. */
static tc_status make_entry(const int *devs, int n, cached **out)
{
    cached *c = &cache[n_cached];
    c->n = n;
    c->failed = false;
    memcpy(c->devs, devs, sizeof(int) * (size_t)n);
    cached *held[CACHE];
    int nheld = overlapping(c, held);
    lock_all(held, nheld);
    int prev = tc__tls_device;
    tc__nccl_result r = tc__nccl.comm_init_all(c->comms, n, devs);
    tc_status sw = tc__switch_device(prev); /* NCCL may have changed CUDA's device */
    unlock_all(held, nheld);
    pthread_mutex_init(&c->use, NULL);
    n_cached++;
    if (r != TC__NCCL_SUCCESS) {
        c->failed = true;
        (void)tc__nccl_fail(r, "ncclCommInitAll");
        warn_failed(devs, n, tc_last_error());
        return unsupported("ncclCommInitAll failed for this device list");
    }
    TC_TRY(sw);
    *out = c;
    return TC_OK;
}

/* The communicators of devs[0..n), made on first use; TC_ERROR_NOT_SUPPORTED
 * for a list whose ncclCommInitAll failed before, or when the cache is full. */
static tc_status comms_for(const int *devs, int n, cached **out)
{
    tc_status st = TC_OK;
    pthread_mutex_lock(&lock);
    cached *c = NULL;
    for (int i = 0; i < n_cached && !c; i++)
        if (cache[i].n == n && !memcmp(cache[i].devs, devs, sizeof(int) * (size_t)n))
            c = &cache[i];
    if (c && c->failed)
        st = unsupported("ncclCommInitAll failed for this device list before");
    else if (!c && n_cached == CACHE)
        st = unsupported("too many device lists");
    else if (!c)
        st = make_entry(devs, n, &c);
    pthread_mutex_unlock(&lock);
    if (st == TC_OK)
        *out = c;
    return st;
}

/* Takes the use mutexes of every working cached list sharing a device with
 * c (c's own included), in cache order; held[0..*n) says which, for
 * unlock_all. */
static void use_begin(const cached *c, cached **held, int *n)
{
    pthread_mutex_lock(&lock);
    int k = overlapping(c, held);
    pthread_mutex_unlock(&lock);
    lock_all(held, k);
    *n = k;
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

/* The status of a group of calls: the first failure among the calls (r),
 * ncclGroupEnd (e) and setting the thread's device back (sw). */
static tc_status group_status(tc__nccl_result r, tc__nccl_result e, tc_status sw, const char *what)
{
    if (r != TC__NCCL_SUCCESS || (e != TC__NCCL_SUCCESS && e != TC__NCCL_IN_PROGRESS))
        return tc__nccl_fail(r != TC__NCCL_SUCCESS ? r : e, what);
    return sw;
}

/* One NCCL call per device of c, inside one ncclGroupStart/End, each on its
 * device's current stream, with the lists that share a device held. */
typedef tc__nccl_result (*per_device_fn)(int i, tc__nccl_comm_t comm, cudaStream_t cs,
                                         const void *ctx);

static tc_status nccl_group(cached *c, const int *devs, int n, per_device_fn call, const void *ctx,
                            const char *what)
{
    cudaStream_t cs[MAX_LIST];
    for (int i = 0; i < n; i++) /* read before: nothing in the group can fail but NCCL */
        cs[i] = tc__current_cuda_stream(devs[i]);
    int prev = tc__tls_device;
    cached *held[CACHE];
    int nheld;
    use_begin(c, held, &nheld);
    tc__nccl_result r = tc__nccl.group_start(), e = TC__NCCL_SUCCESS;
    if (r == TC__NCCL_SUCCESS) {
        for (int i = 0; i < n && r == TC__NCCL_SUCCESS; i++)
            r = call(i, c->comms[i], cs[i], ctx);
        e = tc__nccl.group_end(); /* always: a failed call cancels the group */
    }
    unlock_all(held, nheld);
    tc_status sw = tc__switch_device(prev); /* NCCL may have changed CUDA's device */
    return group_status(r, e, sw, what);
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
