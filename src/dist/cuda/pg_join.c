/* Joining a group's NCCL communicator without ever hanging the caller.
 *
 * The communicator is a blocking one, PyTorch's default: its collectives
 * only queue kernels and return, several times faster than a non-blocking
 * communicator's (which start a thread for every call). What a blocking
 * communicator can wait on a peer for is its setup and the setup of its
 * connections, which NCCL makes on first use. Both happen here, in a
 * thread of their own: ncclCommInitRankConfig, then a round of collectives
 * of several sizes and a send and receive with every peer on a private
 * stream (so every connection that later calls use exists), then a
 * synchronize of that stream. The caller waits for the thread until its
 * deadline. When the deadline passes first, the caller returns TC_ERROR_IO
 * and leaves the thread: if the thread is outside NCCL (waiting for its
 * stream) the caller aborts the communicator, which ends the kernels; if
 * it is inside NCCL (a peer that stopped without closing its sockets), the
 * thread aborts the communicator itself when NCCL lets it go, and frees
 * what it holds.
 *
 * A process that exits while such a thread is still at work would run
 * CUDA's and NCCL's teardown under it and die of SIGSEGV on the way out.
 * So the first join registers an exit handler (on_exit, which hears the
 * exit status): while join threads are running it waits for them up to
 * EXIT_GRACE_MS, then ends the process at once with that status (the exit
 * handlers registered before it, and static destructors, do not run). */
#define _DEFAULT_SOURCE /* on_exit */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pg.h"

enum { EXIT_GRACE_MS = 1000 };

/* Join threads started and not yet finished, in this process. */
static atomic_int joins_running;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void exit_while_joining(int status, void *arg)
{
    (void)arg;
    for (int ms = 0; atomic_load(&joins_running) > 0 && ms < EXIT_GRACE_MS; ms += 10)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    if (atomic_load(&joins_running) > 0) {
        fflush(NULL);
        _exit(status);
    }
}
/* A child of fork has none of its parent's threads. */
static void forked_child(void) { atomic_store(&joins_running, 0); }
static void exit_guard_register(void)
{
    (void)on_exit(exit_while_joining, NULL);
    (void)pthread_atfork(NULL, NULL, forked_child);
}

typedef struct joiner {
    pthread_mutex_t mu;
    pthread_cond_t done_cv;
    int refs;       /* the caller's and the thread's */
    bool done;      /* the thread finished (comm, st and message are final) */
    bool abandoned; /* the caller gave up waiting */
    bool in_nccl;   /* the thread is inside an NCCL call */
    tc__nccl_comm_t comm;
    tc_status st;
    char message[600];
    int world, rank, device;
    tc__nccl_unique_id id;
} joiner;

static void joiner_unref(joiner *j)
{
    pthread_mutex_lock(&j->mu);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (last) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->done_cv);
        free(j);
    }
}

/* Enters an NCCL call (false when the caller gave up: do not call). */
static bool enter(joiner *j)
{
    pthread_mutex_lock(&j->mu);
    bool go = !j->abandoned;
    j->in_nccl = go;
    pthread_mutex_unlock(&j->mu);
    return go;
}
static void leave(joiner *j)
{
    pthread_mutex_lock(&j->mu);
    j->in_nccl = false;
    pthread_mutex_unlock(&j->mu);
}

/* One collective of each kind at a small, a middle and a large size, and
 * a send and receive with every peer (grouped): NCCL sets up the ring,
 * tree and point-to-point connections these need. */
static tc__nccl_result warm_calls(joiner *j, tc__nccl_comm_t comm, char *a, char *b, cudaStream_t s)
{
    static const size_t sizes[] = {256, 16384, 262144, 1048576}; /* floats: 1 KiB .. 4 MiB */
    tc__nccl_result r = TC__NCCL_SUCCESS;
    const int f32 = 7, sum = 0;
    size_t per = sizes[3] / (size_t)j->world;
    for (int i = 0; i < 4 && r == TC__NCCL_SUCCESS; i++) {
        if (!enter(j))
            return TC__NCCL_SUCCESS;
        r = tc__nccl.all_reduce(a, a, sizes[i], f32, sum, comm, s);
        if (r == TC__NCCL_SUCCESS && (i == 1 || i == 3))
            r = tc__nccl.broadcast(a, a, sizes[i], f32, 0, comm, s);
        if (r == TC__NCCL_SUCCESS && (i == 1 || i == 3))
            r = tc__nccl.reduce(a, b, sizes[i], f32, sum, 0, comm, s);
        leave(j);
    }
    if (r == TC__NCCL_SUCCESS && enter(j)) {
        r = tc__nccl.all_gather(a, b, per, f32, comm, s);
        if (r == TC__NCCL_SUCCESS)
            r = tc__nccl.reduce_scatter(a, b, per, f32, sum, comm, s);
        leave(j);
    }
    if (r == TC__NCCL_SUCCESS && j->world > 1 && enter(j)) {
        r = tc__nccl.group_start();
        for (int p = 0; p < j->world && r == TC__NCCL_SUCCESS; p++) {
            if (p == j->rank)
                continue;
            r = tc__nccl.send(a + (size_t)p * 1024, 256, f32, p, comm, s);
            if (r == TC__NCCL_SUCCESS)
                r = tc__nccl.recv(b + (size_t)p * 1024, 256, f32, p, comm, s);
        }
        tc__nccl_result e = tc__nccl.group_end();
        r = r != TC__NCCL_SUCCESS ? r : e;
        leave(j);
    }
    return r;
}

/* The warm-up round on a private stream, then a wait for it (outside NCCL:
 * the caller may abort the communicator meanwhile, which ends it). */
static tc_status warm_up(joiner *j, tc__nccl_comm_t comm)
{
    cudaStream_t s = NULL;
    char *a = NULL, *b = NULL;
    size_t bytes = 4u << 20;
    cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (err == cudaSuccess)
        err = cudaMalloc((void **)&a, bytes);
    if (err == cudaSuccess)
        err = cudaMalloc((void **)&b, bytes);
    if (err == cudaSuccess)
        err = cudaMemsetAsync(a, 0, bytes, s);
    tc_status st = TC_OK;
    if (err != cudaSuccess) {
        st = tc__cuda_fail(err, "setting up NCCL's connections", __FILE__, __LINE__);
    } else {
        tc__nccl_result r = warm_calls(j, comm, a, b, s);
        /* a caller that gave up while this was inside NCCL left the abort
         * to us: it ends the kernels the wait below would wait for */
        pthread_mutex_lock(&j->mu);
        tc__nccl_comm_t doomed = j->abandoned ? j->comm : NULL;
        if (doomed)
            j->comm = NULL;
        pthread_mutex_unlock(&j->mu);
        if (doomed)
            (void)tc__nccl.comm_abort(doomed);
        if (r != TC__NCCL_SUCCESS)
            st = tc__nccl_fail(r, "setting up NCCL's connections");
        else if ((err = cudaStreamSynchronize(s)) != cudaSuccess)
            st = tc__cuda_fail(err, "cudaStreamSynchronize", __FILE__, __LINE__);
    }
    (void)cudaFree(a);
    (void)cudaFree(b);
    if (s)
        (void)cudaStreamDestroy(s);
    return st;
}

static void *join_main(void *arg)
{
    joiner *j = arg;
    tc__nccl_comm_t comm = NULL;
    tc_status st = TC_OK;
    cudaError_t err = cudaSetDevice(j->device);
    if (err != cudaSuccess) {
        st = tc__cuda_fail(err, "cudaSetDevice", __FILE__, __LINE__);
    } else if (enter(j)) {
        tc__nccl_result r;
        if (tc__nccl.comm_init_rank_config) {
            tc__nccl_config cfg = tc__nccl_config_of(1);
            r = tc__nccl.comm_init_rank_config(&comm, j->world, j->id, j->rank, &cfg);
        } else {
            r = tc__nccl.comm_init_rank(&comm, j->world, j->id, j->rank);
        }
        pthread_mutex_lock(&j->mu);
        j->in_nccl = false;
        j->comm = r == TC__NCCL_SUCCESS ? comm : NULL;
        pthread_mutex_unlock(&j->mu);
        if (r != TC__NCCL_SUCCESS) {
            comm = NULL;
            st = tc__nccl_fail(r, "ncclCommInitRankConfig");
        } else {
            st = warm_up(j, comm);
        }
    }
    /* the caller takes the communicator, or it ends here */
    pthread_mutex_lock(&j->mu);
    tc__nccl_comm_t doomed = NULL;
    if (j->abandoned || st != TC_OK) {
        doomed = j->comm; /* NULL when the caller aborted it already */
        j->comm = NULL;
    }
    j->st = st;
    snprintf(j->message, sizeof j->message, "%s", st != TC_OK ? tc_last_error() : "");
    j->done = true;
    pthread_cond_signal(&j->done_cv);
    pthread_mutex_unlock(&j->mu);
    if (doomed)
        (void)tc__nccl.comm_abort(doomed);
    joiner_unref(j);
    atomic_fetch_sub(&joins_running, 1); /* the thread's last touch of CUDA and NCCL is done */
    return NULL;
}

tc_status tc__pg_join(tc_process_group *pg, tc__nccl_unique_id id, double deadline)
{
    joiner *j = calloc(1, sizeof *j);
    if (!j)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    pthread_mutex_init(&j->mu, NULL);
    tc__cond_init_monotonic(&j->done_cv);
    j->refs = 2;
    j->world = pg->world_size;
    j->rank = pg->rank;
    j->device = pg->device;
    j->id = id;
    pthread_once(&exit_once, exit_guard_register);
    atomic_fetch_add(&joins_running, 1);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&t, &attr, join_main, j);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        atomic_fetch_sub(&joins_running, 1);
        j->refs = 1;
        joiner_unref(j);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "cannot start a thread to join NCCL: %s",
                        strerror(e));
    }
    struct timespec until = tc__timespec_at(deadline);
    pthread_mutex_lock(&j->mu);
    while (!j->done && tc__now_s() < deadline)
        (void)pthread_cond_timedwait(&j->done_cv, &j->mu, &until);
    tc_status st;
    tc__nccl_comm_t doomed = NULL;
    if (j->done) {
        st = j->st;
        pg->comm = j->comm;
        j->comm = NULL;
        if (st != TC_OK)
            (void)tc__fail(st, "rank %d of %d: %s", pg->rank, pg->world_size, j->message);
    } else {
        j->abandoned = true;
        if (!j->in_nccl) { /* waiting for its stream, or not started: ours to abort */
            doomed = j->comm;
            j->comm = NULL;
        }
        st = tc__fail(TC_ERROR_IO,
                      "rank %d of %d: the NCCL communicator was not ready within %g s (a rank "
                      "died, stopped or never joined)%s",
                      pg->rank, pg->world_size, pg->timeout_s,
                      doomed ? "; it was aborted" : "; it is abandoned to a thread");
    }
    pthread_mutex_unlock(&j->mu);
    if (doomed) {
        tc_device_guard g = tc_device_guard_enter(pg->device);
        (void)tc__nccl.comm_abort(doomed);
        if (g.status == TC_OK)
            tc_device_guard_exit(&g);
    }
    joiner_unref(j);
    return st;
}
