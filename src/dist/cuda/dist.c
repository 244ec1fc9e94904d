/* Process groups on NCCL (include/tcuda/dist.h): making and ending them,
 * and queuing their collectives; pg.h and pg_watch.c hold what is in
 * flight, the watchdog, aborting and waiting.
 *
 * NCCL is loaded at run time (nccl.c, nccl_internal.h). A group holds one
 * blocking communicator on one device, joined and its connections set up
 * in a thread of its own (pg_join.c) so that creation never waits longer
 * than its deadline: the group's timeout from the call, for the rendezvous
 * and NCCL's setup together. Each operation is queued on the device's
 * current stream, one thread at a time, and returns; its op (pg.h) lets
 * the watchdog see that it ends.
 *
 * Invariant: a tc_work keeps its group alive (a reference count), so
 * destroying the group while works exist is safe. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/dist_internal.h"
#include "base/handle_pool.h"
#include "tensor/tensor_internal.h"
#include "runtime/cuda/cuda_internal.h"
#include "access/access.h"
#include "pg.h"

#define NCCL_CHECK(call, what)                                                                     \
    do {                                                                                           \
        tc__nccl_result r_ = (call);                                                               \
        if (r_ != TC__NCCL_SUCCESS && r_ != TC__NCCL_IN_PROGRESS)                                  \
            return tc__nccl_fail(r_, what);                                                        \
    } while (0)

/* ncclRedOp_t: ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4. */
static int nccl_op(tc_reduce_op op)
{
    static const int map[] = {[TC_REDUCE_OP_SUM] = 0,
                              [TC_REDUCE_OP_PROD] = 1,
                              [TC_REDUCE_OP_MIN] = 3,
                              [TC_REDUCE_OP_MAX] = 2,
                              [TC_REDUCE_OP_AVG] = 4};
    return map[op];
}

#define TC_PG_MAGIC 0x7cd15711u

static tc__handle_pool pg_pool = TC_HANDLE_POOL_INIT(struct tc_process_group);

/* The end of a communicator whose group has no references left (so no
 * users): ncclCommAbort when the group was aborted; else the collectives
 * still in flight are given the group's timeout to finish, then
 * ncclCommDestroy; when they do not finish, a peer is gone: the
 * communicator is aborted, which ends their kernels. */
static tc_status release_comm(tc_process_group *pg)
{
    tc__nccl_comm_t comm = pg->comm;
    pg->comm = NULL;
    if (!comm)
        return TC_OK;
    tc_device_guard g = tc_device_guard_enter(pg->device);
    tc_status st = TC_OK;
    if (!atomic_load(&pg->aborted) && pg->tail_n > 0)
        (void)tc__pg_tail_cover(pg); /* no user is left: `launch` is free */
    if (atomic_load(&pg->aborted)) {
        (void)tc__nccl.comm_abort(comm);
    } else if (!tc__pg_ops_drain(pg, tc__now_s() + pg->timeout_s)) {
        (void)tc__nccl.comm_abort(comm);
        st = tc__fail(TC_ERROR_INVALID_STATE,
                      "rank %d of %d: the group's collectives did not finish within %g s: a peer "
                      "died, exited or hangs; the communicator was aborted",
                      pg->rank, pg->world_size, pg->timeout_s);
    } else {
        tc__nccl_result r = tc__nccl.comm_destroy(comm);
        if (r != TC__NCCL_SUCCESS)
            st = tc__nccl_fail(r, "ncclCommDestroy");
    }
    if (g.status == TC_OK)
        tc_device_guard_exit(&g);
    return st;
}

/* The group's memory, once nothing uses it. */
static void pg_free(tc_process_group *pg)
{
    tc__pg_ops_free(pg);
    pthread_mutex_destroy(&pg->launch);
    pthread_mutex_destroy(&pg->mu);
    tc__handle_put(&pg_pool, pg);
}

tc_status tc__pg_unref(tc_process_group *pg)
{
    if (atomic_fetch_sub(&pg->refs, 1) != 1)
        return TC_OK;
    tc__pg_watch_stop(pg);
    tc_status st = release_comm(pg);
    pg_free(pg);
    return st;
}
static tc_status pg_check(tc_process_group *pg)
{
    TC_TRY(tc__handle_check(pg, TC_PG_MAGIC, "tc_process_group"));
    if (pg->destroyed)
        return tc__fail(TC_ERROR_INVALID_HANDLE, "the tc_process_group was destroyed");
    if (atomic_load(&pg->aborted))
        return tc__pg_aborted_fail(pg);
    return TC_OK;
}

int tc_process_group_rank(const tc_process_group *pg)
{
    return tc__handle_live(pg, TC_PG_MAGIC) ? pg->rank : -1;
}
int tc_process_group_size(const tc_process_group *pg)
{
    return tc__handle_live(pg, TC_PG_MAGIC) ? pg->world_size : -1;
}
int tc_process_group_device(const tc_process_group *pg)
{
    return tc__handle_live(pg, TC_PG_MAGIC) ? pg->device : -1;
}

/* The rendezvous, then NCCL's setup, both before `deadline`. */
static tc_status init_comm(tc_process_group *pg, const tc_dist_options *o, double deadline)
{
    tc__nccl_unique_id id;
    memset(&id, 0, sizeof id);
    if (o->rank == 0)
        NCCL_CHECK(tc__nccl.get_unique_id(&id), "ncclGetUniqueId");
    TC_TRY(tc__dist_rendezvous(o, &id, sizeof id));
    return tc__pg_join(pg, id, deadline);
}

tc_status tc_process_group_create(const tc_dist_options *opts, tc_process_group **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__dist_check_options(opts));
    double deadline = tc__now_s() + (opts->timeout_s > 0 ? opts->timeout_s : 600.0);
    int dev;
    TC_TRY(tc__resolve_device(opts->local_rank, &dev));
    TC_TRY(tc__nccl_ready());
    tc_process_group *pg = tc__handle_get(&pg_pool);
    if (!pg)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    pg->rank = opts->rank;
    pg->world_size = opts->world_size;
    pg->device = dev;
    pg->timeout_s = opts->timeout_s > 0 ? opts->timeout_s : 600.0;
    atomic_init(&pg->refs, 1);
    atomic_init(&pg->aborted, false);
    pthread_mutex_init(&pg->mu, NULL);
    pthread_mutex_init(&pg->launch, NULL);
    tc_status st = init_comm(pg, opts, deadline);
    if (st == TC_OK) {
        st = tc__pg_watch_start(pg);
        if (st != TC_OK)
            (void)release_comm(pg);
    }
    if (st != TC_OK) {
        pg_free(pg);
        return st;
    }
    pg->magic = TC_PG_MAGIC;
    *out = pg;
    return TC_OK;
}

tc_status tc_process_group_create_from_env(tc_process_group **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc_dist_options o;
    TC_TRY(tc_dist_options_from_env(&o));
    return tc_process_group_create(&o, out);
}

tc_status tc_process_group_destroy(tc_process_group *pg)
{
    TC_API_BEGIN;
    TC_TRY(tc__handle_check(pg, TC_PG_MAGIC, "tc_process_group"));
    if (pg->destroyed)
        return tc__fail(TC_ERROR_INVALID_HANDLE, "the tc_process_group was destroyed already");
    pg->destroyed = true;
    return tc__pg_unref(pg);
}

/* After an NCCL call: an error that says a peer or the system failed
 * (ncclSystemError, ncclInternalError, ncclRemoteError) aborts the group;
 * others (a bad argument) fail only the call. */
static tc_status settle(tc_process_group *pg, tc__nccl_result r, const char *what)
{
    if (r == TC__NCCL_SUCCESS)
        return TC_OK;
    if (r == TC__NCCL_SYSTEM_ERROR || r == TC__NCCL_INTERNAL_ERROR || r == TC__NCCL_REMOTE_ERROR) {
        char words[300];
        tc__nccl_words(r, words, sizeof words);
        return tc__pg_abort(pg, "%s: %s; a peer may have died", what, words);
    }
    return tc__nccl_fail(r, what);
}

/* Before an operation's NCCL call: the communicator (a use of it), the
 * launch lock, the group's device current, and its current stream. */
static tc_status launch_begin(tc_process_group *pg, tc__nccl_comm_t *comm, tc_device_guard *g,
                              cudaStream_t *cs)
{
    TC_TRY(tc__pg_use_begin(pg, comm));
    pthread_mutex_lock(&pg->launch);
    tc_status st = atomic_load(&pg->aborted) ? tc__pg_aborted_fail(pg) : TC_OK;
    if (st == TC_OK) {
        *g = tc_device_guard_enter(pg->device);
        st = g->status;
    }
    if (st != TC_OK) {
        pthread_mutex_unlock(&pg->launch);
        tc__pg_use_end(pg);
        return st;
    }
    *cs = tc__current_cuda_stream(pg->device);
    atomic_store(&pg->in_call_ns, tc__now_ns());
    return TC_OK;
}

/* After it: the op recorded when the call went well, everything undone. */
static tc_status launch_end(tc_process_group *pg, tc_status st, tc_device_guard *g, cudaStream_t cs,
                            const char *what, tc_work **out)
{
    double queued_s = (double)atomic_exchange(&pg->in_call_ns, 0) * 1e-9;
    if (st == TC_OK)
        st = tc__pg_op_record(pg, cs, what, queued_s, out);
    tc_device_guard_exit(g);
    pthread_mutex_unlock(&pg->launch);
    tc__pg_use_end(pg);
    return st;
}

/* A contiguous GPU tensor on the group's device, of a dtype NCCL has. */
static tc_status check_tensor(tc_process_group *pg, const tc_tensor *t, const char *what)
{
    TC_TRY(tc__tensor_check(t, what));
    if (t->storage->device.type != TC_CUDA)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s must be on a GPU", what);
    if (t->storage->device.index != pg->device)
        return tc__fail(TC_ERROR_DEVICE_MISMATCH, "%s is on cuda:%d, the group on cuda:%d", what,
                        t->storage->device.index, pg->device);
    if (!tc__is_contiguous(t))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s must be contiguous", what);
    if (tc__nccl_dtype(t->dtype) < 0)
        return tc__fail(TC_ERROR_DTYPE, "NCCL has no %s type", tc_dtype_string(t->dtype));
    return TC_OK;
}

static tc_status check_op(tc_reduce_op op)
{
    TC_CHECK_ARG(op >= TC_REDUCE_OP_SUM && op <= TC_REDUCE_OP_AVG, "unknown reduce op %d", (int)op);
    return TC_OK;
}

static tc_status check_rank(const tc_process_group *pg, int r, const char *what)
{
    TC_CHECK_ARG(r >= 0 && r < pg->world_size, "%s %d is not in 0..%d", what, r,
                 pg->world_size - 1);
    return TC_OK;
}

static size_t numel(const tc_tensor *t) { return (size_t)tc__numel(t->ndim, t->sizes); }

/* Declares to the access layer what an operation reads (in) and writes
 * (out, may be NULL) on the group's current stream: NCCL's kernels are not
 * tensor ops. */
static tc_status declare(tc_process_group *pg, const tc_tensor *in, const tc_tensor *out,
                         const char *what)
{
    if (!tc__access_on())
        return TC_OK;
    tc__span sp[2];
    int n = 0;
    const tc_tensor *ts[2] = {in, out};
    for (int i = 0; i < 2; i++)
        if (ts[i])
            tc__span_dense(tc__data(ts[i]), numel(ts[i]) * tc_dtype_size(ts[i]->dtype),
                           ts[i]->dtype, ts[i]->ndim, ts[i]->sizes, i == 1, &sp[n++]);
    tc__access_op op = {.dev = pg->device,
                        .stream = (void *)tc__current_cuda_stream(pg->device),
                        .spans = sp,
                        .n = n,
                        .what = what};
    return tc__access_op_publish(&op);
}

/* Everything an operation does around its NCCL call: the use of the
 * communicator (`comm` in `call`), device, stream (`cs`), settling, work. */
#define RUN(pg, what, out, call)                                                                   \
    do {                                                                                           \
        tc__nccl_comm_t comm;                                                                      \
        tc_device_guard g_;                                                                        \
        cudaStream_t cs;                                                                           \
        TC_TRY(launch_begin(pg, &comm, &g_, &cs));                                                 \
        tc_status st_ = settle(pg, (call), what);                                                  \
        return launch_end(pg, st_, &g_, cs, what, out);                                            \
    } while (0)

tc_status tc_dist_all_reduce(tc_process_group *pg, tc_tensor *t, tc_reduce_op op, tc_work **out)
{
    TC_API_BEGIN;
    TC_TRY(pg_check(pg));
    TC_TRY(check_tensor(pg, t, "tc_tensor t"));
    TC_TRY(check_op(op));
    void *p = tc__data(t);
    TC_TRY(declare(pg, NULL, t, "all_reduce"));
    RUN(pg, "ncclAllReduce", out,
        tc__nccl.all_reduce(p, p, numel(t), tc__nccl_dtype(t->dtype), nccl_op(op), comm, cs));
}

tc_status tc_dist_broadcast(tc_process_group *pg, tc_tensor *t, int root, tc_work **out)
{
    TC_API_BEGIN;
    TC_TRY(pg_check(pg));
    TC_TRY(check_tensor(pg, t, "tc_tensor t"));
    TC_TRY(check_rank(pg, root, "root"));
    void *p = tc__data(t);
    TC_TRY(declare(pg, NULL, t, "broadcast"));
    RUN(pg, "ncclBroadcast", out,
        tc__nccl.broadcast(p, p, numel(t), tc__nccl_dtype(t->dtype), root, comm, cs));
}

tc_status tc_dist_reduce(tc_process_group *pg, tc_tensor *t, int root, tc_reduce_op op,
                         tc_work **out)
{
    TC_API_BEGIN;
    TC_TRY(pg_check(pg));
    TC_TRY(check_tensor(pg, t, "tc_tensor t"));
    TC_TRY(check_rank(pg, root, "root"));
    TC_TRY(check_op(op));
    void *p = tc__data(t);
    TC_TRY(declare(pg, NULL, t, "reduce"));
    RUN(pg, "ncclReduce", out,
        tc__nccl.reduce(p, p, numel(t), tc__nccl_dtype(t->dtype), nccl_op(op), root, comm, cs));
}

static tc_status check_pair(tc_process_group *pg, const tc_tensor *o, const tc_tensor *in)
{
    TC_TRY(check_tensor(pg, o, "tc_tensor output"));
    TC_TRY(check_tensor(pg, in, "tc_tensor input"));
    if (o->dtype != in->dtype)
        return tc__fail(TC_ERROR_DTYPE, "output is %s, input %s", tc_dtype_string(o->dtype),
                        tc_dtype_string(in->dtype));
    return TC_OK;
}

tc_status tc_dist_all_gather(tc_process_group *pg, tc_tensor *output, const tc_tensor *input,
                             tc_work **out)
{
    TC_API_BEGIN;
    TC_TRY(pg_check(pg));
    TC_TRY(check_pair(pg, output, input));
    size_t n = numel(input);
    if (numel(output) != n * (size_t)pg->world_size)
        return tc__fail(TC_ERROR_SHAPE, "output has %zu elements, world_size * input is %zu",
                        numel(output), n * (size_t)pg->world_size);
    TC_TRY(declare(pg, input, output, "all_gather"));
    RUN(pg, "ncclAllGather", out,
        tc__nccl.all_gather(tc__data(input), tc__data(output), n, tc__nccl_dtype(input->dtype),
                            comm, cs));
}

tc_status tc_dist_reduce_scatter(tc_process_group *pg, tc_tensor *output, const tc_tensor *input,
                                 tc_reduce_op op, tc_work **out)
{
    TC_API_BEGIN;
    TC_TRY(pg_check(pg));
    TC_TRY(check_pair(pg, output, input));
    TC_TRY(check_op(op));
    size_t n = numel(output);
    if (numel(input) != n * (size_t)pg->world_size)
        return tc__fail(TC_ERROR_SHAPE, "input has %zu elements, world_size * output is %zu",
                        numel(input), n * (size_t)pg->world_size);
    TC_TRY(declare(pg, input, output, "reduce_scatter"));
    RUN(pg, "ncclReduceScatter", out,
        tc__nccl.reduce_scatter(tc__data(input), tc__data(output), n, tc__nccl_dtype(input->dtype),
                                nccl_op(op), comm, cs));
}

/* all_to_all as NCCL's documentation writes it: a group of sends and receives. */
static tc__nccl_result all_to_all(tc_process_group *pg, tc__nccl_comm_t comm, const char *in,
                                  char *o, size_t n, int dt, size_t bytes, cudaStream_t cs)
{
    tc__nccl_result r = tc__nccl.group_start();
    for (int p = 0; p < pg->world_size && r == TC__NCCL_SUCCESS; p++) {
        r = tc__nccl.send(in + (size_t)p * bytes, n, dt, p, comm, cs);
        if (r == TC__NCCL_SUCCESS)
            r = tc__nccl.recv(o + (size_t)p * bytes, n, dt, p, comm, cs);
    }
    tc__nccl_result e = tc__nccl.group_end();
    return r != TC__NCCL_SUCCESS ? r : e;
}

tc_status tc_dist_all_to_all(tc_process_group *pg, tc_tensor *output, const tc_tensor *input,
                             tc_work **out)
{
    TC_API_BEGIN;
    TC_TRY(pg_check(pg));
    TC_TRY(check_pair(pg, output, input));
    size_t n = numel(input);
    if (numel(output) != n || n % (size_t)pg->world_size)
        return tc__fail(TC_ERROR_SHAPE,
                        "input (%zu) and output (%zu) must have the same number of elements, a "
                        "multiple of world_size %d",
                        n, numel(output), pg->world_size);
    size_t per = n / (size_t)pg->world_size;
    size_t bytes = per * tc_dtype_size(input->dtype);
    TC_TRY(declare(pg, input, output, "all_to_all"));
    RUN(pg, "all_to_all (ncclSend/ncclRecv)", out,
        all_to_all(pg, comm, tc__data(input), tc__data(output), per, tc__nccl_dtype(input->dtype),
                   bytes, cs));
}

tc_status tc_dist_send(tc_process_group *pg, const tc_tensor *t, int peer, tc_work **out)
{
    TC_API_BEGIN;
    TC_TRY(pg_check(pg));
    TC_TRY(check_tensor(pg, t, "tc_tensor t"));
    TC_TRY(check_rank(pg, peer, "peer"));
    TC_CHECK_ARG(peer != pg->rank, "a rank cannot send to itself");
    TC_TRY(declare(pg, t, NULL, "send"));
    RUN(pg, "ncclSend", out,
        tc__nccl.send(tc__data(t), numel(t), tc__nccl_dtype(t->dtype), peer, comm, cs));
}

tc_status tc_dist_recv(tc_process_group *pg, tc_tensor *t, int peer, tc_work **out)
{
    TC_API_BEGIN;
    TC_TRY(pg_check(pg));
    TC_TRY(check_tensor(pg, t, "tc_tensor t"));
    TC_TRY(check_rank(pg, peer, "peer"));
    TC_CHECK_ARG(peer != pg->rank, "a rank cannot receive from itself");
    TC_TRY(declare(pg, NULL, t, "recv"));
    RUN(pg, "ncclRecv", out,
        tc__nccl.recv(tc__data(t), numel(t), tc__nccl_dtype(t->dtype), peer, comm, cs));
}

/* ---- barrier -----------------------------------------------------------------------------*/

tc_status tc_dist_barrier(tc_process_group *pg)
{
    TC_API_BEGIN;
    TC_TRY(pg_check(pg));
    tc_tensor *one = NULL;
    tc_work *w = NULL;
    TC_TRY(tc_tensor_ones(0, NULL, TC_FLOAT32, (tc_device){TC_CUDA, pg->device}, &one));
    tc_status st = tc_dist_all_reduce(pg, one, TC_REDUCE_OP_SUM, &w);
    if (st == TC_OK) {
        st = tc_work_wait(w);
        tc_work_destroy(w);
    }
    tc_tensor_release(one);
    return st;
}
