/* What a process group has in flight, its watchdog, aborting it, and
 * waiting on its works (pg.h says how they fit together).
 *
 * Aborting while other threads use the group: every call that hands the
 * communicator to NCCL is a "user" (pg->users, under pg->mu) from before it
 * reads pg->comm until after its last NCCL call. An abort sets the flag
 * (later calls are refused) and calls ncclCommAbort itself when there is
 * no user, else the last user does on its way out; so ncclCommAbort, which
 * frees the communicator, never runs while another thread is inside NCCL
 * with it. Users never block inside NCCL on a non-blocking communicator
 * (they poll, and see the flag), so an abort takes effect within a poll.
 * Host waits outside NCCL (a stream or event synchronize) are not users:
 * ncclCommAbort is what ends them. */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/device_fault.h"
#include "base/handle_pool.h"
#include "pg.h"
#include "runtime/cuda/capture.h"

#define TC_WORK_MAGIC 0x7c3e0271u

struct tc_work {
    uint32_t magic;
    tc_process_group *pg;
    pg_op *op;
};

static tc__handle_pool work_pool = TC_HANDLE_POOL_INIT(struct tc_work);

/* How old a tail may grow before an op covers it (pg.h). */
#define TAIL_MAX_S 0.001

/* Whether `cs` is being captured into a graph now (only asked while tcuda
 * has a capture underway: tc__capturing is one atomic load). */
static bool stream_capturing(cudaStream_t cs)
{
    if (!tc__capturing())
        return false;
    enum cudaStreamCaptureStatus c = cudaStreamCaptureStatusNone;
    cudaError_t err = cudaStreamIsCapturing(cs, &c);
    if (err != cudaSuccess)
        (void)cudaGetLastError();
    return err == cudaSuccess && c != cudaStreamCaptureStatusNone;
}

void tc__pg_pause(double waited_s)
{
    if (waited_s < 0.1)
        sched_yield();
    else
        nanosleep(&(struct timespec){0, waited_s < 1 ? 50 * 1000 : 1000 * 1000}, NULL);
}

tc_status tc__pg_aborted_fail(tc_process_group *pg)
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

/* Under mu, at an abort: every op still running is failed, and the devices
 * that ran it or waited for it get a fault. */
static void fail_in_flight(tc_process_group *pg)
{
    uint64_t devices = 0;
    for (int i = 0; i < pg->n_ops; i++) {
        pg_op *op = pg->ops[i];
        if (cudaEventQuery(op->done) == cudaSuccess)
            continue;
        atomic_store(&op->failed, true);
        devices |= (1ull << pg->device) | atomic_load(&op->waiter_devices);
    }
    (void)cudaGetLastError(); /* cudaErrorNotReady is not sticky, but leaves a last error */
    for (int d = 0; d < 64; d++)
        if (devices >> d & 1)
            tc__device_fault_raise(d, pg, pg->why);
}

/* The abort: the reason (the first one wins), the ops in flight failed,
 * and ncclCommAbort now when nobody is inside NCCL with the communicator
 * (or `force`), else by the last user on its way out. */
static void abort_v(tc_process_group *pg, bool force, const char *fmt, va_list ap)
{
    tc__nccl_comm_t doomed = NULL;
    pthread_mutex_lock(&pg->mu);
    if (!atomic_load(&pg->aborted)) {
        int k = snprintf(pg->why, sizeof pg->why, "rank %d of %d (cuda:%d): ", pg->rank,
                         pg->world_size, pg->device);
        vsnprintf(pg->why + k, sizeof pg->why - (size_t)k, fmt, ap);
        fail_in_flight(pg); /* before the abort lets their kernels end */
        atomic_store(&pg->aborted, true);
    }
    if (pg->users == 0 || force) {
        doomed = pg->comm;
        pg->comm = NULL;
    }
    pthread_mutex_unlock(&pg->mu);
    if (doomed)
        comm_abort(pg, doomed);
}

tc_status tc__pg_abort(tc_process_group *pg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    abort_v(pg, false, fmt, ap);
    va_end(ap);
    return tc__pg_aborted_fail(pg);
}

/* The watchdog's last resort (see watch_once). */
static void abort_forced(tc_process_group *pg, const char *fmt, ...) TC_PRINTF(2, 3);
static void abort_forced(tc_process_group *pg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    abort_v(pg, true, fmt, ap);
    va_end(ap);
}

tc_status tc__pg_use_begin(tc_process_group *pg, tc__nccl_comm_t *comm)
{
    pthread_mutex_lock(&pg->mu);
    bool ok = !atomic_load(&pg->aborted) && pg->comm;
    if (ok) {
        pg->users++;
        *comm = pg->comm;
    }
    pthread_mutex_unlock(&pg->mu);
    return ok ? TC_OK : tc__pg_aborted_fail(pg);
}

void tc__pg_use_end(tc_process_group *pg)
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

/* ---- ops ---------------------------------------------------------------------------------- */

/* Under mu: `op`, done with, onto the free list (its event kept). */
static void op_free_locked(tc_process_group *pg, pg_op *op)
{
    op->next_free = pg->free_ops;
    pg->free_ops = op;
}

static void op_unref(tc_process_group *pg, pg_op *op)
{
    if (atomic_fetch_sub(&op->refs, 1) != 1)
        return;
    pthread_mutex_lock(&pg->mu);
    op_free_locked(pg, op);
    pthread_mutex_unlock(&pg->mu);
}

/* A free op, or a new one with its event (the group's device is current). */
static tc_status op_get(tc_process_group *pg, pg_op **out)
{
    pthread_mutex_lock(&pg->mu);
    pg_op *op = pg->free_ops;
    if (op)
        pg->free_ops = op->next_free;
    pthread_mutex_unlock(&pg->mu);
    if (!op) {
        op = calloc(1, sizeof *op);
        if (!op)
            return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
        cudaError_t err = cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming);
        if (err != cudaSuccess) {
            free(op);
            return tc__cuda_fail(err, "cudaEventCreateWithFlags", __FILE__, __LINE__);
        }
    }
    *out = op;
    return TC_OK;
}

/* Records an op on `cs` covering the tail (which holds at least one
 * collective), and a work holding it into *out when asked. */
static tc_status cover(tc_process_group *pg, cudaStream_t cs, tc_work **out)
{
    tc_work *w = NULL;
    if (out && !(w = tc__handle_get(&work_pool)))
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    pg_op *op = NULL;
    tc_status st = op_get(pg, &op);
    cudaError_t err = st == TC_OK ? cudaEventRecord(op->done, cs) : cudaSuccess;
    if (err != cudaSuccess)
        st = tc__cuda_fail(err, "cudaEventRecord", __FILE__, __LINE__);
    pthread_mutex_lock(&pg->mu);
    if (st == TC_OK && pg->n_ops == pg->cap_ops) {
        int cap = pg->cap_ops ? 2 * pg->cap_ops : 64;
        pg_op **grown = realloc(pg->ops, (size_t)cap * sizeof *grown);
        if (grown) {
            pg->ops = grown;
            pg->cap_ops = cap;
        } else {
            st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
    }
    if (st == TC_OK) {
        op->queued_s = pg->tail_first_s;
        op->what = pg->tail_what;
        op->seq = pg->tail_seq;
        atomic_store(&op->refs, out ? 2 : 1);
        op->captured = false;
        atomic_store(&op->failed, false);
        atomic_store(&op->waiter_devices, 0);
        pg->ops[pg->n_ops++] = op;
        pg->tail_n = 0;
    } else if (op) {
        op_free_locked(pg, op);
    }
    pthread_mutex_unlock(&pg->mu);
    if (st != TC_OK) {
        if (w)
            tc__handle_put(&work_pool, w);
        return st;
    }
    if (w) {
        w->pg = pg;
        w->op = op;
        atomic_fetch_add(&pg->refs, 1);
        w->magic = TC_WORK_MAGIC;
        *out = w;
    }
    return TC_OK;
}

tc_status tc__pg_tail_cover(tc_process_group *pg)
{
    /* a tail queued before a capture began on its stream: its event would
     * be recorded into the graph, so it waits for the capture's end */
    if (pg->tail_n == 0 || stream_capturing(pg->tail_stream))
        return TC_OK;
    return cover(pg, pg->tail_stream, NULL);
}

/* A collective captured into a graph: it runs at each replay, where no host
 * wait or watchdog follows it (as PyTorch's captured collectives), so it
 * joins no tail and no list. A work asked for gets an op of its own whose
 * event is recorded into the capture, for tc_work_wait_stream within it. */
static tc_status record_captured(tc_process_group *pg, cudaStream_t cs, const char *what,
                                 double queued_s, tc_work **out)
{
    pg->seq++;
    if (!out)
        return TC_OK;
    tc_work *w = tc__handle_get(&work_pool);
    if (!w)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    pg_op *op = NULL;
    tc_status st = op_get(pg, &op);
    cudaError_t err = st == TC_OK ? cudaEventRecord(op->done, cs) : cudaSuccess;
    if (err != cudaSuccess)
        st = tc__cuda_fail(err, "cudaEventRecord", __FILE__, __LINE__);
    if (st != TC_OK) {
        if (op) {
            pthread_mutex_lock(&pg->mu);
            op_free_locked(pg, op);
            pthread_mutex_unlock(&pg->mu);
        }
        tc__handle_put(&work_pool, w);
        return st;
    }
    op->queued_s = queued_s;
    op->what = what;
    op->seq = pg->seq;
    op->captured = true;
    atomic_store(&op->refs, 1);
    atomic_store(&op->failed, false);
    atomic_store(&op->waiter_devices, 0);
    w->pg = pg;
    w->op = op;
    atomic_fetch_add(&pg->refs, 1);
    w->magic = TC_WORK_MAGIC;
    *out = w;
    return TC_OK;
}

tc_status tc__pg_op_record(tc_process_group *pg, cudaStream_t cs, const char *what, double queued_s,
                           tc_work **out)
{
    if (stream_capturing(cs))
        return record_captured(pg, cs, what, queued_s, out);
    if (pg->tail_n > 0 && cs != pg->tail_stream) /* the old tail is on another stream */
        TC_TRY(tc__pg_tail_cover(pg));
    pg->seq++;
    if (pg->tail_n++ == 0) {
        pg->tail_first_s = queued_s;
        pg->tail_what = what;
        pg->tail_seq = pg->seq;
        pg->tail_stream = cs;
    }
    if (out || queued_s - pg->tail_first_s > TAIL_MAX_S)
        return cover(pg, cs, out);
    return TC_OK;
}

void tc__pg_ops_free(tc_process_group *pg)
{
    for (int i = 0; i < pg->n_ops; i++)
        op_unref(pg, pg->ops[i]);
    pg->n_ops = 0;
    free(pg->ops);
    pg->ops = NULL;
    for (pg_op *op = pg->free_ops, *next; op; op = next) {
        next = op->next_free;
        (void)cudaEventDestroy(op->done);
        free(op);
    }
    pg->free_ops = NULL;
}

/* ---- the watchdog ----------------------------------------------------------------------- */

/* What the watchdog needs of the oldest op still running. */
typedef struct op_seen {
    double queued_s;
    const char *what;
    uint64_t seq;
} op_seen;

/* Under mu: drops the ops that are done from the front of the list; the
 * oldest one still running into *oldest, or false when none is. */
static bool retire_done(tc_process_group *pg, op_seen *oldest)
{
    int done = 0;
    while (done < pg->n_ops && cudaEventQuery(pg->ops[done]->done) == cudaSuccess)
        done++;
    (void)cudaGetLastError();
    for (int i = 0; i < done; i++) {
        pg_op *op = pg->ops[i];
        if (atomic_fetch_sub(&op->refs, 1) == 1)
            op_free_locked(pg, op);
    }
    memmove(pg->ops, pg->ops + done, (size_t)(pg->n_ops - done) * sizeof *pg->ops);
    pg->n_ops -= done;
    if (pg->n_ops == 0)
        return false;
    *oldest = (op_seen){pg->ops[0]->queued_s, pg->ops[0]->what, pg->ops[0]->seq};
    return true;
}

/* One look: NCCL's asynchronous error, the age of the oldest op, and a
 * call stuck inside NCCL. Collectives on a communicator whose connections
 * are up (pg_join.c) only queue kernels, so a call that stays inside NCCL
 * past the timeout (and two seconds) waits on a peer for a connection that
 * the warm-up did not make: the watchdog then aborts the communicator
 * under that call, as PyTorch's watchdog does; NCCL's abort flag ends the
 * wait. */
static void watch_once(tc_process_group *pg)
{
    tc__nccl_comm_t comm = NULL; /* set by tc__pg_use_begin; GCC -O3 cannot see it */
    if (tc__pg_use_begin(pg, &comm) != TC_OK)
        return;
    tc__nccl_result e = TC__NCCL_SUCCESS;
    if (tc__nccl.comm_get_async_error(comm, &e) == TC__NCCL_SUCCESS && e != TC__NCCL_SUCCESS &&
        e != TC__NCCL_IN_PROGRESS) {
        char words[300];
        tc__nccl_words(e, words, sizeof words);
        (void)tc__pg_abort(pg, "NCCL reported %s; a peer may have died; the group was aborted",
                           words);
    }
    tc__pg_use_end(pg);
    /* a tail nobody added to for a while gets its op here */
    if (pthread_mutex_trylock(&pg->launch) == 0) {
        if (pg->tail_n > 0 && tc__now_s() - pg->tail_first_s > TAIL_MAX_S)
            (void)tc__pg_tail_cover(pg);
        pthread_mutex_unlock(&pg->launch);
    }
    op_seen oldest;
    pthread_mutex_lock(&pg->mu);
    bool running = !atomic_load(&pg->aborted) && retire_done(pg, &oldest);
    pthread_mutex_unlock(&pg->mu);
    long long in_call_ns = atomic_load(&pg->in_call_ns);
    double in_call = atomic_load(&pg->aborted) ? 0 : (double)in_call_ns * 1e-9;
    double now = tc__now_s();
    if (running && now - oldest.queued_s > pg->timeout_s)
        (void)tc__pg_abort(pg,
                           "%s (the group's collective #%llu) did not finish within %g s: a peer "
                           "died, exited or hangs; the group was aborted",
                           oldest.what, (unsigned long long)oldest.seq, pg->timeout_s);
    else if (in_call > 0 && now - in_call > pg->timeout_s + 2)
        abort_forced(pg,
                     "a call stayed inside NCCL for more than %g s (a peer died, exited or "
                     "hangs while NCCL set up a connection); the group was aborted",
                     pg->timeout_s);
}

bool tc__pg_ops_drain(tc_process_group *pg, double deadline)
{
    op_seen oldest;
    double t0 = tc__now_s();
    for (;;) {
        pthread_mutex_lock(&pg->mu);
        bool running = retire_done(pg, &oldest);
        pthread_mutex_unlock(&pg->mu);
        if (!running)
            return true;
        double now = tc__now_s();
        if (now > deadline)
            return false;
        tc__pg_pause(now - t0);
    }
}

static void *watch_main(void *arg)
{
    tc_process_group *pg = arg;
    (void)cudaSetDevice(pg->device);
    /* The watchdog queries events while another thread may capture a graph
     * in global mode, which refuses such calls on every thread that has not
     * chosen otherwise (as PyTorch's watchdog, this one chooses its own). */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    /* a twentieth of the timeout, between 10 and 100 ms */
    double every = pg->timeout_s / 20 < 0.01  ? 0.01
                   : pg->timeout_s / 20 > 0.1 ? 0.1
                                              : pg->timeout_s / 20;
    pthread_mutex_lock(&pg->mu);
    while (!pg->stop) {
        struct timespec until = tc__timespec_at(tc__now_s() + every);
        (void)pthread_cond_timedwait(&pg->wake, &pg->mu, &until);
        if (pg->stop || atomic_load(&pg->aborted))
            continue;
        pthread_mutex_unlock(&pg->mu);
        watch_once(pg);
        pthread_mutex_lock(&pg->mu);
    }
    pthread_mutex_unlock(&pg->mu);
    return NULL;
}

tc_status tc__pg_watch_start(tc_process_group *pg)
{
    tc__cond_init_monotonic(&pg->wake);
    pg->stop = false;
    int e = pthread_create(&pg->watchdog, NULL, watch_main, pg);
    if (e != 0) {
        pthread_cond_destroy(&pg->wake);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "cannot start the group's watchdog thread: %s",
                        strerror(e));
    }
    pg->watching = true;
    return TC_OK;
}

void tc__pg_watch_stop(tc_process_group *pg)
{
    if (!pg->watching)
        return;
    pthread_mutex_lock(&pg->mu);
    pg->stop = true;
    pthread_cond_signal(&pg->wake);
    pthread_mutex_unlock(&pg->mu);
    pthread_join(pg->watchdog, NULL);
    pthread_cond_destroy(&pg->wake);
    pg->watching = false;
    tc__device_fault_clear(pg);
}

/* ---- works -------------------------------------------------------------------------------- */

static tc_status work_check(tc_work *w) { return tc__handle_check(w, TC_WORK_MAGIC, "tc_work"); }

static tc_status op_failed(tc_work *w)
{
    char why[sizeof w->pg->why];
    pthread_mutex_lock(&w->pg->mu);
    memcpy(why, w->pg->why, sizeof why);
    pthread_mutex_unlock(&w->pg->mu);
    return tc__fail(TC_ERROR_INVALID_STATE, "%s (collective #%llu) was cut short: %s", w->op->what,
                    (unsigned long long)w->op->seq, why);
}

/* TC_OK when done, TC_ERROR_NOT_READY (no message) while running, or the
 * group's error when an abort cut it short. */
static tc_status query(tc_work *w)
{
    if (w->op->captured)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "%s (collective #%llu) was captured into a graph: it runs when the graph "
                        "is replayed, so there is nothing to wait for on the host; order streams "
                        "with tc_work_wait_stream during the capture, and wait for the replay",
                        w->op->what, (unsigned long long)w->op->seq);
    if (atomic_load(&w->op->failed))
        return op_failed(w);
    cudaError_t err = cudaEventQuery(w->op->done);
    if (err == cudaSuccess)
        return atomic_load(&w->op->failed) ? op_failed(w) : TC_OK;
    if (err != cudaErrorNotReady)
        return tc__cuda_fail(err, "cudaEventQuery", __FILE__, __LINE__);
    (void)cudaGetLastError();
    return TC_ERROR_NOT_READY;
}

tc_status tc_work_query(tc_work *work)
{
    TC_API_BEGIN;
    TC_TRY(work_check(work));
    tc_status st = query(work);
    if (st == TC_ERROR_NOT_READY)
        return tc__fail(TC_ERROR_NOT_READY, "%s is still running", work->op->what);
    return st;
}

/* Polls the op's event: the watchdog ends it within the group's timeout
 * (an abort fails it); the wait's own limit, a little later, is there in
 * case the watchdog could not run. */
tc_status tc_work_wait(tc_work *work)
{
    TC_API_BEGIN;
    TC_TRY(work_check(work));
    double limit = work->op->queued_s + work->pg->timeout_s + 5, t0 = tc__now_s(), now = t0;
    for (unsigned i = 0;; i++) {
        tc_status st = query(work);
        if (st != TC_ERROR_NOT_READY)
            return st;
        if ((i & 63) == 0)
            now = tc__now_s();
        if (now > limit)
            return tc__pg_abort(work->pg,
                                "%s (collective #%llu) did not finish within %g s: a peer died, "
                                "exited or hangs; the group was aborted",
                                work->op->what, (unsigned long long)work->op->seq,
                                work->pg->timeout_s);
        tc__pg_pause(now - t0);
    }
}

tc_status tc_work_wait_stream(tc_work *work, tc_stream *stream)
{
    TC_API_BEGIN;
    TC_TRY(work_check(work));
    if (atomic_load(&work->op->failed))
        return op_failed(work);
    cudaStream_t cs;
    int dev = work->pg->device;
    if (stream) {
        TC_TRY(tc__handle_check(stream, TC_STREAM_MAGIC, "tc_stream"));
        dev = stream->device;
        cs = stream->handle;
    } else {
        cs = tc__current_cuda_stream(dev);
    }
    /* a host wait on this device must hear of an abort too */
    atomic_fetch_or(&work->op->waiter_devices, 1ull << dev);
    tc_device_guard g = tc_device_guard_enter(dev);
    TC_TRY(g.status);
    cudaError_t err = cudaStreamWaitEvent(cs, work->op->done, 0);
    tc_device_guard_exit(&g);
    TC_CUDA_CHECK(err);
    return TC_OK;
}

tc_status tc_work_destroy(tc_work *work)
{
    TC_API_BEGIN;
    TC_TRY(work_check(work));
    tc_process_group *pg = work->pg;
    op_unref(pg, work->op);
    tc__handle_put(&work_pool, work);
    return tc__pg_unref(pg); /* the last reference: the group's end, and its error */
}
