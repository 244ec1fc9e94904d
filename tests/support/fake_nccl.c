/* A stand-in for libnccl.so.2 (loaded through TCUDA_NCCL_LIBRARY) that lets
 * one GPU test what a real NCCL only shows with a dead peer: a
 * communicator whose setup never ends, an operation that never gets
 * queued, an ncclCommInitAll that fails. It moves no data.
 *
 * $FAKE_NCCL picks the behaviour: "ok" (on a non-blocking communicator,
 * init, operations and finalize answer ncclInProgress and are done two
 * polls later; on a blocking one they return done), "init_hangs" (init
 * stays in progress, or never returns when blocking), "op_hangs"
 * (operations stay in progress, or do not return until the communicator is
 * aborted, then fail with ncclInternalError, as NCCL's abort flag makes them),
 * "initall_fails" (ncclCommInitAll fails with a message). Communicators are
 * never freed, so a use after ncclCommAbort or ncclCommDestroy is seen and
 * counted in fake_nccl_misuse; the other counters say what was called. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct fake_comm {
    atomic_int state; /* ncclResult_t of the pending work: 0 done, 7 in progress */
    atomic_int polls_left;
    atomic_int dead;
    int blocking; /* calls return when done (tcuda's process groups ask for this) */
} fake_comm;

typedef struct {
    char internal[128];
} fake_id;

/* what the test reads (dlsym) */
atomic_int fake_nccl_aborts, fake_nccl_destroys, fake_nccl_finalizes, fake_nccl_misuse;

static const char *last = "";

static int mode_is(const char *m)
{
    const char *v = getenv("FAKE_NCCL");
    return v && !strcmp(v, m);
}

static fake_comm *use(void *c)
{
    fake_comm *f = c;
    if (!f || atomic_load(&f->dead))
        atomic_fetch_add(&fake_nccl_misuse, 1);
    return f;
}

/* Work that finishes two polls later, or never when `hangs`. */
static int pending(fake_comm *f, int hangs)
{
    atomic_store(&f->polls_left, hangs ? -1 : 2);
    atomic_store(&f->state, 7);
    return 7;
}

static int new_comm(void **out, int hangs)
{
    fake_comm *f = calloc(1, sizeof *f);
    if (!f)
        return 1;
    *out = f;
    return pending(f, hangs);
}

/* The NCCL symbols tcuda resolves (prototypes for -Wmissing-prototypes). */
int ncclGetVersion(int *v);
int ncclGetUniqueId(fake_id *id);
int ncclCommInitRank(void **c, int n, fake_id id, int r);
int ncclCommInitRankConfig(void **c, int n, fake_id id, int r, void *cfg);
int ncclCommInitAll(void **c, int n, const int *devs);
int ncclCommFinalize(void *c);
int ncclCommDestroy(void *c);
int ncclCommAbort(void *c);
int ncclCommGetAsyncError(void *c, int *state);
const char *ncclGetErrorString(int r);
const char *ncclGetLastError(void *c);
int ncclAllReduce(const void *s, void *d, size_t n, int t, int op, void *c, void *st);
int ncclBroadcast(const void *s, void *d, size_t n, int t, int root, void *c, void *st);
int ncclReduce(const void *s, void *d, size_t n, int t, int op, int root, void *c, void *st);
int ncclAllGather(const void *s, void *d, size_t n, int t, void *c, void *st);
int ncclReduceScatter(const void *s, void *d, size_t n, int t, int op, void *c, void *st);
int ncclSend(const void *s, size_t n, int t, int peer, void *c, void *st);
int ncclRecv(void *d, size_t n, int t, int peer, void *c, void *st);
int ncclGroupStart(void);
int ncclGroupEnd(void);

int ncclGetVersion(int *v)
{
    *v = 22000;
    return 0;
}
int ncclGetUniqueId(fake_id *id)
{
    memset(id, 7, sizeof *id);
    return 0;
}
int ncclCommInitRank(void **c, int n, fake_id id, int r)
{
    (void)n, (void)id, (void)r;
    int st = new_comm(c, 0);
    if (st == 7) {
        atomic_store(&((fake_comm *)*c)->state, 0); /* blocking: done */
        ((fake_comm *)*c)->blocking = 1;
    }
    return st == 7 ? 0 : st;
}
int ncclCommInitRankConfig(void **c, int n, fake_id id, int r, void *cfg)
{
    (void)n, (void)id, (void)r;
    /* ncclConfig_t: size_t size, unsigned magic, unsigned version, int blocking */
    int blocking = *(const int *)((const char *)cfg + sizeof(size_t) + 2 * sizeof(unsigned));
    if (blocking == 1) {
        while (mode_is("init_hangs"))
            sleep(1000); /* a peer that never comes: NCCL waits for it */
        return ncclCommInitRank(c, n, id, r);
    }
    return new_comm(c, mode_is("init_hangs"));
}
int ncclCommInitAll(void **c, int n, const int *devs)
{
    (void)devs;
    if (mode_is("initall_fails")) {
        last = "fake NCCL: ncclCommInitAll failed on purpose";
        return 2; /* ncclSystemError */
    }
    for (int i = 0; i < n; i++)
        if (ncclCommInitRank(&c[i], n, (fake_id){{0}}, i) != 0)
            return 1;
    return 0;
}
int ncclCommFinalize(void *c)
{
    atomic_fetch_add(&fake_nccl_finalizes, 1);
    return pending(use(c), 0);
}
int ncclCommDestroy(void *c)
{
    atomic_fetch_add(&fake_nccl_destroys, 1);
    atomic_store(&use(c)->dead, 1);
    return 0;
}
int ncclCommAbort(void *c)
{
    atomic_fetch_add(&fake_nccl_aborts, 1);
    atomic_store(&use(c)->dead, 1);
    return 0;
}
int ncclCommGetAsyncError(void *c, int *state)
{
    fake_comm *f = use(c);
    if (atomic_load(&f->state) == 7 && atomic_load(&f->polls_left) >= 0 &&
        atomic_fetch_sub(&f->polls_left, 1) <= 0)
        atomic_store(&f->state, 0);
    *state = atomic_load(&f->state);
    return 0;
}
const char *ncclGetErrorString(int r) { return r == 0 ? "no error" : "fake error"; }
const char *ncclGetLastError(void *c)
{
    (void)c;
    return last;
}

/* In "op_hangs" only the test's own operations (64 elements) hang, not
 * those tcuda queues while it sets up a group. */
static int op(void *c, size_t n)
{
    fake_comm *f = use(c);
    int hangs = mode_is("op_hangs") && n == 64;
    if (!f->blocking)
        return pending(f, hangs);
    if (!hangs)
        return 0;
    while (!atomic_load(&f->dead))
        usleep(1000);
    return 3; /* ncclInternalError: the abort flag ended the wait */
}

int ncclAllReduce(const void *s, void *d, size_t n, int t, int o, void *c, void *st)
{
    (void)s, (void)d, (void)t, (void)o, (void)st;
    return op(c, n);
}
int ncclBroadcast(const void *s, void *d, size_t n, int t, int root, void *c, void *st)
{
    (void)s, (void)d, (void)t, (void)root, (void)st;
    return op(c, n);
}
int ncclReduce(const void *s, void *d, size_t n, int t, int o, int root, void *c, void *st)
{
    (void)s, (void)d, (void)t, (void)o, (void)root, (void)st;
    return op(c, n);
}
int ncclAllGather(const void *s, void *d, size_t n, int t, void *c, void *st)
{
    (void)s, (void)d, (void)t, (void)st;
    return op(c, n);
}
int ncclReduceScatter(const void *s, void *d, size_t n, int t, int o, void *c, void *st)
{
    (void)s, (void)d, (void)t, (void)o, (void)st;
    return op(c, n);
}
int ncclSend(const void *s, size_t n, int t, int peer, void *c, void *st)
{
    (void)s, (void)t, (void)peer, (void)st;
    return op(c, n);
}
int ncclRecv(void *d, size_t n, int t, int peer, void *c, void *st)
{
    (void)d, (void)t, (void)peer, (void)st;
    return op(c, n);
}
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }
