/* Process groups on NCCL (include/tcuda/dist.h).
 *
 * NCCL is loaded at run time (nccl.c, nccl_internal.h). A group holds one
 * communicator on one device. Each operation is queued on the device's
 * current stream; a tc_work is an event recorded after it. Waiting polls the
 * event and ncclCommGetAsyncError every 100 us, and past the group's
 * timeout aborts the communicator (ncclCommAbort also unblocks its kernels):
 * a dead or stuck peer gives TC_ERROR_INVALID_STATE with a message, never a
 * silent hang. Once aborted, a group refuses every operation.
 *
 * Invariant: a tc_work keeps its group alive (a reference count), so
 * destroying the group while works exist is safe. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dist_internal.h"
#include "core/handle_pool.h"
#include "core/tensor_internal.h"
#include "cuda_internal.h"
#include "debug/sanitizer_internal.h"
#include "nccl_internal.h"

#define NCCL_CHECK(call, what)                                                                     \
    do {                                                                                           \
        tc__nccl_result r_ = (call);                                                               \
        if (r_ != TC__NCCL_SUCCESS && r_ != TC__NCCL_IN_PROGRESS)                                  \
            return tc__nccl_fail(r_, what);                                                        \
    } while (0)

/* ncclRedOp_t: ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4. */
static int nccl_op(tc_reduce_op op)
{
    static const int map[] = {[TC_REDUCE_SUM] = 0,
                              [TC_REDUCE_PROD] = 1,
                              [TC_REDUCE_MIN] = 3,
                              [TC_REDUCE_MAX] = 2,
                              [TC_REDUCE_AVG] = 4};
    return map[op];
}

/* ---- groups and works ---------------------------------------------------------------- */

#define TC_PG_MAGIC 0x7cd15711u
#define TC_WORK_MAGIC 0x7c3e0271u

struct tc_process_group {
    uint32_t magic;
    atomic_int refs; /* the user's, plus one per live work */
    int rank, world_size, device;
    double timeout_s;
    tc__nccl_comm_t comm;
    atomic_bool aborted;
    bool destroyed;
    char why[300]; /* the error that aborted it */
};

struct tc_work {
    uint32_t magic;
    tc_process_group *pg;
    int device;
    cudaEvent_t done;
    const char *what;
};

static tc__handle_pool pg_pool = TC_HANDLE_POOL_INIT(struct tc_process_group);
static tc__handle_pool work_pool = TC_HANDLE_POOL_INIT(struct tc_work);

static void pg_unref(tc_process_group *pg)
{
    if (atomic_fetch_sub(&pg->refs, 1) != 1)
        return;
    if (pg->comm) {
        if (atomic_load(&pg->aborted))
            (void)tc__nccl.comm_abort(pg->comm);
        else
            (void)tc__nccl.comm_destroy(pg->comm);
    }
    tc__handle_put(&pg_pool, pg);
}

static tc_status pg_check(tc_process_group *pg)
{
    TC_TRY(tc__handle_check(pg, TC_PG_MAGIC, "tc_process_group"));
    if (pg->destroyed)
        return tc__fail(TC_ERROR_INVALID_HANDLE, "the tc_process_group was destroyed");
    if (atomic_load(&pg->aborted))
        return tc__fail(TC_ERROR_INVALID_STATE, "the process group was aborted: %s", pg->why);
    return TC_OK;
}

int tc_dist_rank(const tc_process_group *pg)
{
    return tc__handle_live(pg, TC_PG_MAGIC) ? pg->rank : -1;
}
int tc_dist_world_size(const tc_process_group *pg)
{
    return tc__handle_live(pg, TC_PG_MAGIC) ? pg->world_size : -1;
}
int tc_dist_device(const tc_process_group *pg)
{
    return tc__handle_live(pg, TC_PG_MAGIC) ? pg->device : -1;
}

static tc_status init_comm(tc_process_group *pg, const tc_dist_options *o)
{
    tc__nccl_unique_id id;
    memset(&id, 0, sizeof id);
    if (o->rank == 0)
        NCCL_CHECK(tc__nccl.get_unique_id(&id), "ncclGetUniqueId");
    TC_TRY(tc__dist_rendezvous(o, &id, sizeof id));
    tc_device_guard g = tc_device_guard_enter(pg->device);
    TC_TRY(g.status);
    tc__nccl_result r = tc__nccl.comm_init_rank(&pg->comm, o->world_size, id, o->rank);
    tc_device_guard_exit(&g);
    if (r != TC__NCCL_SUCCESS) {
        pg->comm = NULL;
        return tc__nccl_fail(r, "ncclCommInitRank");
    }
    return TC_OK;
}

tc_status tc_dist_init(const tc_dist_options *opts, tc_process_group **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out must not be NULL");
    TC_TRY(tc__dist_check_options(opts));
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
    tc_status st = init_comm(pg, opts);
    if (st != TC_OK) {
        tc__handle_put(&pg_pool, pg);
        return st;
    }
    pg->magic = TC_PG_MAGIC;
    *out = pg;
    return TC_OK;
}

tc_status tc_dist_destroy(tc_process_group *pg)
{
    TC_API_BEGIN;
    TC_TRY(tc__handle_check(pg, TC_PG_MAGIC, "tc_process_group"));
    if (pg->destroyed)
        return tc__fail(TC_ERROR_INVALID_HANDLE, "the tc_process_group was destroyed already");
    pg->destroyed = true;
    pg_unref(pg);
    return TC_OK;
}

/* Aborts the group with a reason (the first one wins). */
static tc_status pg_abort(tc_process_group *pg, const char *fmt, const char *what, double s)
{
    if (!atomic_exchange(&pg->aborted, true)) {
        snprintf(pg->why, sizeof pg->why, fmt, what, s);
        (void)tc__nccl.comm_abort(pg->comm);
        pg->comm = NULL;
    }
    return tc__fail(TC_ERROR_INVALID_STATE, "%s", pg->why);
}

/* NCCL's asynchronous error on the group: TC_OK, or the group aborted. */
static tc_status async_error(tc_process_group *pg, const char *what)
{
    if (atomic_load(&pg->aborted))
        return tc__fail(TC_ERROR_INVALID_STATE, "%s", pg->why);
    tc__nccl_result e = TC__NCCL_SUCCESS;
    if (tc__nccl.comm_get_async_error(pg->comm, &e) == TC__NCCL_SUCCESS && e != TC__NCCL_SUCCESS &&
        e != TC__NCCL_IN_PROGRESS) {
        char fmt[200];
        snprintf(fmt, sizeof fmt, "%%s: NCCL reported error %d (%s), a peer may have died%%.0f", e,
                 tc__nccl.get_error_string(e));
        return pg_abort(pg, fmt, what, 0);
    }
    return TC_OK;
}

/* Ends an operation queued on `cs`: an event into *out when asked for. */
static tc_status finish(tc_process_group *pg, cudaStream_t cs, const char *what, tc_work **out)
{
    TC_TRY(async_error(pg, what));
    if (!out)
        return TC_OK;
    tc_work *w = tc__handle_get(&work_pool);
    if (!w)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    cudaError_t err = cudaEventCreateWithFlags(&w->done, cudaEventDisableTiming);
    if (err == cudaSuccess)
        err = cudaEventRecord(w->done, cs);
    if (err != cudaSuccess) {
        if (w->done)
            (void)cudaEventDestroy(w->done);
        tc__handle_put(&work_pool, w);
        return tc__cuda_fail(err, "cudaEventRecord", __FILE__, __LINE__);
    }
    w->pg = pg;
    w->device = pg->device;
    w->what = what;
    atomic_fetch_add(&pg->refs, 1);
    w->magic = TC_WORK_MAGIC;
    *out = w;
    return TC_OK;
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
        return tc__fail(TC_ERROR_DTYPE, "NCCL has no %s type", tc_dtype_name(t->dtype));
    return TC_OK;
}

static tc_status check_op(tc_reduce_op op)
{
    TC_CHECK_ARG(op >= TC_REDUCE_SUM && op <= TC_REDUCE_AVG, "unknown reduce op %d", (int)op);
    return TC_OK;
}

static tc_status check_rank(const tc_process_group *pg, int r, const char *what)
{
    TC_CHECK_ARG(r >= 0 && r < pg->world_size, "%s %d is not in 0..%d", what, r,
                 pg->world_size - 1);
    return TC_OK;
}

static size_t numel(const tc_tensor *t) { return (size_t)tc__numel(t->ndim, t->sizes); }

/* Declares to the stream sanitizer what an operation reads (in) and writes
 * (out, may be NULL) on the group's current stream: NCCL's kernels are not
 * tensor ops. */
static tc_status declare(tc_process_group *pg, const tc_tensor *in, const tc_tensor *out,
                         const char *what)
{
    if (!tc__san_on())
        return TC_OK;
    tc__san_span sp[2];
    int n = 0;
    const tc_tensor *ts[2] = {in, out};
    for (int i = 0; i < 2; i++)
        if (ts[i])
            tc__san_span_dense(tc__data(ts[i]), numel(ts[i]) * tc_dtype_size(ts[i]->dtype),
                               ts[i]->dtype, ts[i]->ndim, ts[i]->sizes, i == 1, &sp[n++]);
    return tc__san_access(pg->device, (void *)tc__current_cuda_stream(pg->device), sp, n,
                          (tc__san_what){what, NULL}, false, false, 0, NULL);
}

/* Everything an operation does around its NCCL call: device, stream, work. */
#define RUN(pg, what, out, call)                                                                   \
    do {                                                                                           \
        tc_device_guard g_ = tc_device_guard_enter((pg)->device);                                  \
        TC_TRY(g_.status);                                                                         \
        cudaStream_t cs = tc__current_cuda_stream((pg)->device);                                   \
        tc__nccl_result r_ = (call);                                                               \
        tc_status st_ = r_ == TC__NCCL_SUCCESS || r_ == TC__NCCL_IN_PROGRESS                       \
                            ? finish(pg, cs, what, out)                                            \
                            : tc__nccl_fail(r_, what);                                             \
        tc_device_guard_exit(&g_);                                                                 \
        return st_;                                                                                \
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
        tc__nccl.all_reduce(p, p, numel(t), tc__nccl_dtype(t->dtype), nccl_op(op), pg->comm, cs));
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
        tc__nccl.broadcast(p, p, numel(t), tc__nccl_dtype(t->dtype), root, pg->comm, cs));
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
        tc__nccl.reduce(p, p, numel(t), tc__nccl_dtype(t->dtype), nccl_op(op), root, pg->comm, cs));
}

static tc_status check_pair(tc_process_group *pg, const tc_tensor *o, const tc_tensor *in)
{
    TC_TRY(check_tensor(pg, o, "tc_tensor output"));
    TC_TRY(check_tensor(pg, in, "tc_tensor input"));
    if (o->dtype != in->dtype)
        return tc__fail(TC_ERROR_DTYPE, "output is %s, input %s", tc_dtype_name(o->dtype),
                        tc_dtype_name(in->dtype));
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
                            pg->comm, cs));
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
                                nccl_op(op), pg->comm, cs));
}

/* all_to_all as NCCL's documentation writes it: a group of sends and receives. */
static tc__nccl_result all_to_all(tc_process_group *pg, const char *in, char *o, size_t n, int dt,
                                  size_t bytes, cudaStream_t cs)
{
    tc__nccl_result r = tc__nccl.group_start();
    for (int p = 0; p < pg->world_size && r == TC__NCCL_SUCCESS; p++) {
        r = tc__nccl.send(in + (size_t)p * bytes, n, dt, p, pg->comm, cs);
        if (r == TC__NCCL_SUCCESS)
            r = tc__nccl.recv(o + (size_t)p * bytes, n, dt, p, pg->comm, cs);
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
        all_to_all(pg, tc__data(input), tc__data(output), per, tc__nccl_dtype(input->dtype), bytes,
                   cs));
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
        tc__nccl.send(tc__data(t), numel(t), tc__nccl_dtype(t->dtype), peer, pg->comm, cs));
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
        tc__nccl.recv(tc__data(t), numel(t), tc__nccl_dtype(t->dtype), peer, pg->comm, cs));
}

/* ---- waiting ------------------------------------------------------------------------------ */

static tc_status work_check(tc_work *w) { return tc__handle_check(w, TC_WORK_MAGIC, "tc_work"); }

static tc_status query(tc_work *w)
{
    tc_device_guard g = tc_device_guard_enter(w->device);
    TC_TRY(g.status);
    cudaError_t err = cudaEventQuery(w->done);
    tc_device_guard_exit(&g);
    if (err == cudaSuccess)
        return TC_OK;
    if (err != cudaErrorNotReady)
        return tc__cuda_fail(err, "cudaEventQuery", __FILE__, __LINE__);
    (void)cudaGetLastError();
    TC_TRY(async_error(w->pg, w->what));
    return TC_ERROR_NOT_READY;
}

tc_status tc_work_query(tc_work *work)
{
    TC_API_BEGIN;
    TC_TRY(work_check(work));
    tc_status st = query(work);
    if (st == TC_ERROR_NOT_READY)
        return tc__fail(TC_ERROR_NOT_READY, "%s is still running", work->what);
    return st;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

tc_status tc_work_wait(tc_work *work)
{
    TC_API_BEGIN;
    TC_TRY(work_check(work));
    double deadline = now_s() + work->pg->timeout_s;
    for (;;) {
        tc_status st = query(work);
        if (st != TC_ERROR_NOT_READY)
            return st;
        if (now_s() > deadline)
            return pg_abort(work->pg,
                            "%s did not finish within %.0f s: a peer died or hangs; "
                            "the group was aborted",
                            work->what, work->pg->timeout_s);
        nanosleep(&(struct timespec){0, 100 * 1000}, NULL);
    }
}

tc_status tc_work_wait_stream(tc_work *work, tc_stream *stream)
{
    TC_API_BEGIN;
    TC_TRY(work_check(work));
    cudaStream_t cs;
    int dev = work->device;
    if (stream) {
        TC_TRY(tc__handle_check(stream, TC_STREAM_MAGIC, "tc_stream"));
        dev = stream->device;
        cs = stream->handle;
    } else {
        cs = tc__current_cuda_stream(dev);
    }
    tc_device_guard g = tc_device_guard_enter(dev);
    TC_TRY(g.status);
    cudaError_t err = cudaStreamWaitEvent(cs, work->done, 0);
    tc_device_guard_exit(&g);
    TC_CUDA_CHECK(err);
    return TC_OK;
}

tc_status tc_work_destroy(tc_work *work)
{
    TC_API_BEGIN;
    TC_TRY(work_check(work));
    (void)cudaEventDestroy(work->done);
    tc_process_group *pg = work->pg;
    tc__handle_put(&work_pool, work);
    pg_unref(pg);
    return TC_OK;
}

tc_status tc_dist_barrier(tc_process_group *pg)
{
    TC_API_BEGIN;
    TC_TRY(pg_check(pg));
    tc_tensor *one = NULL;
    tc_work *w = NULL;
    TC_TRY(tc_tensor_ones(0, NULL, TC_FLOAT32, (tc_device){TC_CUDA, pg->device}, &one));
    tc_status st = tc_dist_all_reduce(pg, one, TC_REDUCE_SUM, &w);
    if (st == TC_OK) {
        st = tc_work_wait(w);
        tc_work_destroy(w);
    }
    tc_tensor_release(one);
    return st;
}
