/* Process groups on NCCL (include/tcuda/dist.h).
 *
 * NCCL is loaded at run time (nccl.c, nccl_internal.h). A group holds one
 * communicator on one device, made non-blocking (ncclCommInitRankConfig,
 * blocking = 0; NCCL 2.14 and later): no NCCL call then waits on a peer.
 * Creation, each operation and ncclCommFinalize return ncclInProgress and
 * finish in the background; tcuda polls ncclCommGetAsyncError until it
 * leaves ncclInProgress, giving up after the group's timeout by aborting the
 * communicator. An older NCCL gets blocking calls (ncclCommInitRank,
 * ncclCommDestroy) as before.
 *
 * Each operation is queued on the device's current stream; a tc_work is an
 * event recorded after it. Waiting polls the event and ncclCommGetAsyncError
 * every 100 us, and past the group's timeout aborts the communicator
 * (ncclCommAbort also unblocks its kernels): a dead or stuck peer gives
 * TC_ERROR_INVALID_STATE with a message, never a silent hang. Once aborted,
 * a group refuses every operation.
 *
 * Aborting while other threads use the group: every call that hands the
 * communicator to NCCL is a "user" (pg->users, under pg->mu) from before it
 * reads pg->comm until after its last NCCL call. An abort sets the flag
 * (later calls are refused) and calls ncclCommAbort itself when there is
 * no user, else the last user does on its way out; so ncclCommAbort, which
 * frees the communicator, never runs while another thread is inside NCCL
 * with it. Users never block inside NCCL on a non-blocking communicator
 * (they poll, and see the flag), so an abort takes effect within a poll.
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
    static const int map[] = {[TC_REDUCE_OP_SUM] = 0,
                              [TC_REDUCE_OP_PROD] = 1,
                              [TC_REDUCE_OP_MIN] = 3,
                              [TC_REDUCE_OP_MAX] = 2,
                              [TC_REDUCE_OP_AVG] = 4};
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
    bool nonblocking; /* made by ncclCommInitRankConfig with blocking = 0 */
    bool destroyed;
    pthread_mutex_t mu;   /* guards comm, users, why and the writes of aborted */
    tc__nccl_comm_t comm; /* NULL once aborted by the last user */
    int users;            /* calls inside NCCL with comm now */
    atomic_bool aborted;  /* set once, under mu; read without it */
    char why[300];        /* the error that aborted it */
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pause_poll(void) { nanosleep(&(struct timespec){0, 100 * 1000}, NULL); }

/* NCCL's error `r` on `what`, with ncclGetLastError where there is one. */
static void nccl_words(tc__nccl_result r, char *buf, size_t n)
{
    const char *last = tc__nccl.get_last_error ? tc__nccl.get_last_error(NULL) : NULL;
    snprintf(buf, n, "NCCL error %d (%s)%s%s", r, tc__nccl.get_error_string(r),
             last && *last ? ": " : "", last && *last ? last : "");
}

/* Waits until `comm`'s pending work (an init, a call that answered
 * ncclInProgress, a finalize) leaves ncclInProgress: its state into *state,
 * or false when `limit` passed first or *stop became true. */
static bool poll_state(tc__nccl_comm_t comm, double limit, const atomic_bool *stop,
                       tc__nccl_result *state)
{
    for (;;) {
        tc__nccl_result e = TC__NCCL_SUCCESS;
        tc__nccl_result q = tc__nccl.comm_get_async_error(comm, &e);
        if (q != TC__NCCL_SUCCESS)
            e = q;
        if (e != TC__NCCL_IN_PROGRESS) {
            *state = e;
            return true;
        }
        if (now_s() > limit || (stop && atomic_load(stop)))
            return false;
        pause_poll();
    }
}

/* The group's abort error, with its reason. */
static tc_status aborted_fail(tc_process_group *pg)
{
    char why[sizeof pg->why];
    pthread_mutex_lock(&pg->mu);
    memcpy(why, pg->why, sizeof why);
    pthread_mutex_unlock(&pg->mu);
    return tc__fail(TC_ERROR_INVALID_STATE, "the process group was aborted: %s", why);
}

static void comm_abort(tc_process_group *pg, tc__nccl_comm_t comm)
{
    tc_device_guard g = tc_device_guard_enter(pg->device);
    (void)tc__nccl.comm_abort(comm);
    if (g.status == TC_OK)
        tc_device_guard_exit(&g);
}

/* Aborts the group with a reason (the first one wins): no call is let in
 * after this, and ncclCommAbort runs now when nobody is inside NCCL with
 * the communicator, else when the last user leaves (use_end). */
static tc_status pg_abort(tc_process_group *pg, const char *fmt, ...) TC_PRINTF(2, 3);
static tc_status pg_abort(tc_process_group *pg, const char *fmt, ...)
{
    tc__nccl_comm_t doomed = NULL;
    pthread_mutex_lock(&pg->mu);
    if (!atomic_load(&pg->aborted)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(pg->why, sizeof pg->why, fmt, ap);
        va_end(ap);
        atomic_store(&pg->aborted, true);
        if (pg->users == 0) {
            doomed = pg->comm;
            pg->comm = NULL;
        }
    }
    pthread_mutex_unlock(&pg->mu);
    if (doomed)
        comm_abort(pg, doomed);
    return aborted_fail(pg);
}

/* Enters a call that hands the communicator to NCCL: *comm, or the abort
 * error. Every TC_OK is paired with one use_end. */
static tc_status use_begin(tc_process_group *pg, tc__nccl_comm_t *comm)
{
    pthread_mutex_lock(&pg->mu);
    bool ok = !atomic_load(&pg->aborted) && pg->comm;
    if (ok) {
        pg->users++;
        *comm = pg->comm;
    }
    pthread_mutex_unlock(&pg->mu);
    return ok ? TC_OK : aborted_fail(pg);
}

/* Leaves it; the last user out of an aborted group aborts the communicator. */
static void use_end(tc_process_group *pg)
{
    tc__nccl_comm_t doomed = NULL;
    pthread_mutex_lock(&pg->mu);
    if (--pg->users == 0 && atomic_load(&pg->aborted)) {
        doomed = pg->comm;
        pg->comm = NULL;
    }
    pthread_mutex_unlock(&pg->mu);
    if (doomed)
        comm_abort(pg, doomed);
}

/* The end of a communicator whose group has no references left (so no
 * users): ncclCommAbort when the group was aborted; else its queued work
 * is let finish (ncclCommFinalize, polled up to the group's timeout, then
 * ncclCommDestroy), and aborted when that fails or takes too long. An NCCL
 * without ncclCommFinalize gets the blocking ncclCommDestroy. */
static tc_status release_comm(tc_process_group *pg)
{
    tc__nccl_comm_t comm = pg->comm;
    pg->comm = NULL;
    if (!comm)
        return TC_OK;
    if (atomic_load(&pg->aborted)) {
        comm_abort(pg, comm);
        return TC_OK;
    }
    tc_device_guard g = tc_device_guard_enter(pg->device);
    tc__nccl_result r = TC__NCCL_SUCCESS, state = TC__NCCL_SUCCESS;
    bool done = true;
    if (pg->nonblocking && tc__nccl.comm_finalize) {
        r = tc__nccl.comm_finalize(comm);
        if (r == TC__NCCL_SUCCESS || r == TC__NCCL_IN_PROGRESS) {
            done = poll_state(comm, now_s() + pg->timeout_s, NULL, &state);
            r = state;
        }
    }
    tc_status st = TC_OK;
    if (done && r == TC__NCCL_SUCCESS) {
        r = tc__nccl.comm_destroy(comm);
        if (r != TC__NCCL_SUCCESS)
            st = tc__nccl_fail(r, "ncclCommDestroy");
    } else {
        char words[400];
        nccl_words(r, words, sizeof words);
        (void)tc__nccl.comm_abort(comm);
        st = done ? tc__fail(TC_ERROR_INVALID_STATE,
                             "ncclCommFinalize failed (%s), a peer may have died; the "
                             "communicator was aborted",
                             words)
                  : tc__fail(TC_ERROR_INVALID_STATE,
                             "ncclCommFinalize did not finish the group's work within %g s: a "
                             "peer died or hangs; the communicator was aborted",
                             pg->timeout_s);
    }
    if (g.status == TC_OK)
        tc_device_guard_exit(&g);
    return st;
}

/* Drops a reference; the last one ends the communicator and the group. */
static tc_status pg_unref(tc_process_group *pg)
{
    if (atomic_fetch_sub(&pg->refs, 1) != 1)
        return TC_OK;
    tc_status st = release_comm(pg);
    pthread_mutex_destroy(&pg->mu);
    tc__handle_put(&pg_pool, pg);
    return st;
}

static tc_status pg_check(tc_process_group *pg)
{
    TC_TRY(tc__handle_check(pg, TC_PG_MAGIC, "tc_process_group"));
    if (pg->destroyed)
        return tc__fail(TC_ERROR_INVALID_HANDLE, "the tc_process_group was destroyed");
    if (atomic_load(&pg->aborted))
        return aborted_fail(pg);
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

/* Joins the communicator without blocking on the peers: created with
 * blocking = 0 and polled until it is ready, fails or the timeout passes
 * (then aborted: a rank that never came gives an error, not a hang). */
static tc_status init_nonblocking(tc_process_group *pg, const tc_dist_options *o,
                                  tc__nccl_unique_id id)
{
    tc__nccl_config cfg = tc__nccl_config_nonblocking();
    tc__nccl_comm_t comm = NULL;
    tc__nccl_result r = tc__nccl.comm_init_rank_config(&comm, o->world_size, id, o->rank, &cfg);
    tc__nccl_result state = r;
    bool done = true;
    if (comm && (r == TC__NCCL_SUCCESS || r == TC__NCCL_IN_PROGRESS))
        done = poll_state(comm, now_s() + pg->timeout_s, NULL, &state);
    if (done && state == TC__NCCL_SUCCESS && comm) {
        pg->comm = comm;
        pg->nonblocking = true;
        return TC_OK;
    }
    char words[400];
    nccl_words(state, words, sizeof words);
    if (comm)
        (void)tc__nccl.comm_abort(comm);
    if (!done)
        return tc__fail(TC_ERROR_IO,
                        "rank %d of %d: the NCCL communicator was not ready within %g s (a rank "
                        "died or never joined); it was aborted",
                        o->rank, o->world_size, pg->timeout_s);
    return tc__fail(TC_ERROR_CUDA, "ncclCommInitRankConfig failed: %s", words);
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
    tc_status st = TC_OK;
    if (tc__nccl.comm_init_rank_config) {
        st = init_nonblocking(pg, o, id);
    } else { /* NCCL before 2.14: blocking */
        tc__nccl_result r = tc__nccl.comm_init_rank(&pg->comm, o->world_size, id, o->rank);
        if (r != TC__NCCL_SUCCESS) {
            pg->comm = NULL;
            st = tc__nccl_fail(r, "ncclCommInitRank");
        }
    }
    tc_device_guard_exit(&g);
    return st;
}

tc_status tc_process_group_create(const tc_dist_options *opts, tc_process_group **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
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
    pthread_mutex_init(&pg->mu, NULL);
    tc_status st = init_comm(pg, opts);
    if (st != TC_OK) {
        pthread_mutex_destroy(&pg->mu);
        tc__handle_put(&pg_pool, pg);
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
    return pg_unref(pg);
}

/* NCCL's asynchronous error on the group: TC_OK, or the group aborted.
 * Called by a user of `comm`. */
static tc_status async_error(tc_process_group *pg, tc__nccl_comm_t comm, const char *what)
{
    if (atomic_load(&pg->aborted))
        return aborted_fail(pg);
    tc__nccl_result e = TC__NCCL_SUCCESS;
    if (tc__nccl.comm_get_async_error(comm, &e) == TC__NCCL_SUCCESS && e != TC__NCCL_SUCCESS &&
        e != TC__NCCL_IN_PROGRESS) {
        char words[400];
        nccl_words(e, words, sizeof words);
        return pg_abort(pg, "%s: %s, a peer may have died", what, words);
    }
    return TC_OK;
}

/* After an NCCL call `r` on a non-blocking communicator: waits until it is
 * queued (ncclInProgress over), so the work's event follows it. An error,
 * or the group's timeout, aborts the group. */
static tc_status settle(tc_process_group *pg, tc__nccl_comm_t comm, tc__nccl_result r,
                        const char *what)
{
    if (r == TC__NCCL_SUCCESS || (r == TC__NCCL_IN_PROGRESS && !pg->nonblocking))
        return TC_OK;
    if (r != TC__NCCL_IN_PROGRESS)
        return tc__nccl_fail(r, what);
    tc__nccl_result state;
    if (!poll_state(comm, now_s() + pg->timeout_s, &pg->aborted, &state)) {
        if (atomic_load(&pg->aborted))
            return aborted_fail(pg);
        return pg_abort(pg,
                        "%s could not be queued within %g s: a peer died or hangs; the group was "
                        "aborted",
                        what, pg->timeout_s);
    }
    if (state != TC__NCCL_SUCCESS) {
        char words[400];
        nccl_words(state, words, sizeof words);
        return pg_abort(pg, "%s: %s, a peer may have died", what, words);
    }
    return TC_OK;
}

/* Ends an operation queued on `cs`: an event into *out when asked for. */
static tc_status finish(tc_process_group *pg, tc__nccl_comm_t comm, cudaStream_t cs,
                        const char *what, tc_work **out)
{
    TC_TRY(async_error(pg, comm, what));
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
        TC_TRY(use_begin(pg, &comm));                                                              \
        tc_device_guard g_ = tc_device_guard_enter((pg)->device);                                  \
        tc_status st_ = g_.status;                                                                 \
        if (st_ == TC_OK) {                                                                        \
            cudaStream_t cs = tc__current_cuda_stream((pg)->device);                               \
            st_ = settle(pg, comm, (call), what);                                                  \
            if (st_ == TC_OK)                                                                      \
                st_ = finish(pg, comm, cs, what, out);                                             \
            tc_device_guard_exit(&g_);                                                             \
        }                                                                                          \
        use_end(pg);                                                                               \
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
    tc__nccl_comm_t comm;
    TC_TRY(use_begin(w->pg, &comm));
    tc_status st = async_error(w->pg, comm, w->what);
    use_end(w->pg);
    TC_TRY(st);
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
                            "%s did not finish within %g s: a peer died or hangs; "
                            "the group was aborted",
                            work->what, work->pg->timeout_s);
        pause_poll();
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
    return pg_unref(pg); /* the last reference: the group's end, and its error */
}

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
