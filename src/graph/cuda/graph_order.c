/* Graph captures ordered by data (TC_GRAPH_ORDER_DATA, beyond PyTorch).
 *
 * Stream capture makes each node depend on the node queued before it, so a
 * captured step replays as one chain even where its operations are
 * independent. An ordered capture rebuilds the edges from what each tcuda
 * operation touches: it watches the access layer (access/access.h), which
 * announces every complete GPU operation with the byte spans it reads and
 * writes, and
 * before the kernel is queued the stream's capture dependencies are set
 * (cudaStreamUpdateCaptureDependencies) to the last nodes of the earlier
 * operations it conflicts with: it reads what they wrote, or writes what
 * they read or wrote. Independent operations become independent branches
 * and run side by side at replay.
 *
 * The invariants that keep the graph equal to the stream's order:
 * - After each operation the stream's dependencies are set to every leaf
 *   (the last nodes of the operations nothing depends on yet). Work the
 *   wrappers do not announce (a random fill, the user's own kernel, a copy
 *   between GPUs, an event wait) is therefore captured after everything
 *   before it; the next operation finds the stream's dependencies changed
 *   and takes that work as a barrier: everything after depends on it.
 * - Memory the allocator hands out inside an operation (scratch, workspaces)
 *   counts as written by it, and the operation's later nodes wait for that
 *   memory's earlier users: in a capture, a freed block is reused by later
 *   allocations of the same capture, and the address spans see the reuse.
 * - cuBLAS shares one workspace per handle among its GEMMs. Each GEMM of an
 *   ordered capture gets one of at most MAX_WS workspaces kept by the
 *   capture (graph_order.h), preferring one whose last user is already an
 *   ancestor, so that GEMMs on different branches do not share one.
 * - Nested announcements (an operation whose kernels go through the seam
 *   again) add their spans to the operation underway.
 * A CUDA call that refuses (which would leave edges missing) stops the
 * ordering; tc__graph_order_end then fails the capture with its message.
 *
 * An operation is announced on the thread that queues it: the capture's
 * state is under `mu`; the operation underway is the thread's (open_cap). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/access.h"
#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "graph_order.h"
#include "tensor/cuda/nn_cuda.h"

enum { MAX_WS = 4, REACH_LIMIT = 1 << 14 };

typedef struct node_set {
    cudaGraphNode_t *v;
    size_t n;
} node_set;

/* An operation: its last nodes, the operations it depends on. */
typedef struct ord_op {
    node_set ends;
    int *preds;
    int npreds, cap_preds;
    uint32_t mark;
} ord_op;

/* An access of an operation to [lo, hi). */
typedef struct ord_acc {
    uintptr_t lo, hi;
    bool write;
    int op;
} ord_acc;

typedef struct ord_ws {
    void *ptr;
    int last; /* the operation that used it last */
} ord_ws;

typedef struct ord_cap {
    cudaStream_t cs;
    int device;
    ord_op *ops;
    int nops, cap_ops;
    ord_acc *acc;
    int nacc, cap_acc;
    int *leaves; /* operations nothing depends on yet */
    int nleaves, cap_leaves;
    node_set expect; /* the stream's dependencies as the last operation left them */
    ord_ws ws[MAX_WS];
    int nws;
    uint32_t gen;
    int open; /* the operation underway, -1 */
    bool failed;
    char why[320];
    struct ord_cap *next;
} ord_cap;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static ord_cap *caps;
static _Thread_local ord_cap *open_cap;

/* cuBLAS's own workspace, as a span: GEMMs that use it conflict. */
static const char cublas_own_workspace;

/* ---- small helpers (under mu) --------------------------------------------------- */

static void fail(ord_cap *c, cudaError_t err, const char *call)
{
    (void)cudaGetLastError();
    if (c->failed)
        return;
    c->failed = true;
    snprintf(c->why, sizeof c->why, "ordering the capture by data failed: %s: %s", call,
             cudaGetErrorString(err));
}

static bool grow(void **p, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return true;
    int nc = *cap ? 2 * *cap : 16;
    while (nc < need)
        nc *= 2;
    void *n = realloc(*p, (size_t)nc * size);
    if (!n)
        return false;
    *p = n;
    *cap = nc;
    return true;
}

static void out_of_memory(ord_cap *c)
{
    if (!c->failed)
        snprintf(c->why, sizeof c->why, "ordering the capture by data ran out of host memory");
    c->failed = true;
}

static bool set_copy(node_set *s, const cudaGraphNode_t *v, size_t n)
{
    cudaGraphNode_t *nv = n ? malloc(n * sizeof *nv) : NULL;
    if (n && !nv)
        return false;
    if (n)
        memcpy(nv, v, n * sizeof *nv);
    free(s->v);
    s->v = nv;
    s->n = n;
    return true;
}

static bool set_has(const cudaGraphNode_t *v, size_t n, cudaGraphNode_t x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

static bool same_set(const cudaGraphNode_t *a, size_t na, const node_set *b)
{
    if (na != b->n)
        return false;
    for (size_t i = 0; i < na; i++)
        if (!set_has(b->v, b->n, a[i]))
            return false;
    return true;
}

/* The stream's capture dependencies; false (nothing to do) when the capture
 * is not active (CUDA invalidated it) or the query failed. */
static bool current_deps(ord_cap *c, const cudaGraphNode_t **deps, size_t *n)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t err = cudaStreamGetCaptureInfo(c->cs, &st, NULL, NULL, deps, NULL, n);
    if (err != cudaSuccess) {
        fail(c, err, "cudaStreamGetCaptureInfo");
        return false;
    }
    return st == cudaStreamCaptureStatusActive;
}

/* The union of the ends of operations ops[0..n) (duplicates dropped). */
static bool ends_of(ord_cap *c, const int *ops, int n, node_set *out)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += c->ops[ops[i]].ends.n;
    out->v = total ? malloc(total * sizeof *out->v) : NULL;
    out->n = 0;
    if (total && !out->v)
        return false;
    for (int i = 0; i < n; i++) {
        const node_set *e = &c->ops[ops[i]].ends;
        for (size_t k = 0; k < e->n; k++)
            if (!set_has(out->v, out->n, e->v[k]))
                out->v[out->n++] = e->v[k];
    }
    return true;
}

/* Sets (or adds to) the stream's dependencies: the ends of ops[0..n). */
static void update_deps(ord_cap *c, const int *ops, int n, unsigned flags)
{
    node_set s;
    if (!ends_of(c, ops, n, &s)) {
        out_of_memory(c);
        return;
    }
    cudaError_t err = cudaStreamUpdateCaptureDependencies(c->cs, s.v, NULL, s.n, flags);
    if (err != cudaSuccess)
        fail(c, err, "cudaStreamUpdateCaptureDependencies");
    else if (flags == cudaStreamSetCaptureDependencies && !set_copy(&c->expect, s.v, s.n))
        out_of_memory(c);
    free(s.v);
}

static bool has_pred(const ord_op *o, int p)
{
    for (int i = 0; i < o->npreds; i++)
        if (o->preds[i] == p)
            return true;
    return false;
}

/* Makes operation op depend on p (once); false when out of memory. */
static bool add_pred(ord_cap *c, int op, int p)
{
    ord_op *o = &c->ops[op];
    if (p == op || has_pred(o, p))
        return true;
    if (!grow((void **)&o->preds, &o->cap_preds, o->npreds + 1, sizeof *o->preds))
        return false;
    o->preds[o->npreds++] = p;
    return true;
}

/* Adds to op's dependencies the operations whose accesses conflict with
 * [lo, hi) (a write conflicts with every access, a read with writes). */
static bool add_conflicts(ord_cap *c, int op, uintptr_t lo, uintptr_t hi, bool write)
{
    for (int i = 0; i < c->nacc; i++) {
        const ord_acc *a = &c->acc[i];
        if (a->op != op && a->lo < hi && lo < a->hi && (write || a->write) &&
            !add_pred(c, op, a->op))
            return false;
    }
    return true;
}

/* Records op's access to [lo, hi). A write drops the earlier accesses it
 * covers: op depends on them, so whatever conflicts with them later
 * conflicts with op and follows them through it. */
static bool record(ord_cap *c, int op, uintptr_t lo, uintptr_t hi, bool write)
{
    if (write) {
        int k = 0;
        for (int i = 0; i < c->nacc; i++) {
            const ord_acc *a = &c->acc[i];
            if (!(a->op != op && lo <= a->lo && a->hi <= hi))
                c->acc[k++] = *a;
        }
        c->nacc = k;
    }
    if (!grow((void **)&c->acc, &c->cap_acc, c->nacc + 1, sizeof *c->acc))
        return false;
    c->acc[c->nacc++] = (ord_acc){lo, hi, write, op};
    return true;
}

static int new_op(ord_cap *c)
{
    if (!grow((void **)&c->ops, &c->cap_ops, c->nops + 1, sizeof *c->ops))
        return -1;
    memset(&c->ops[c->nops], 0, sizeof c->ops[c->nops]);
    return c->nops++;
}

/* Work nobody announced was captured after every leaf: it becomes the one
 * leaf, and every later access depends on it. */
static void barrier(ord_cap *c, const cudaGraphNode_t *deps, size_t n)
{
    int b = new_op(c);
    if (b < 0 || !set_copy(&c->ops[b].ends, deps, n)) {
        out_of_memory(c);
        return;
    }
    for (int i = 0; i < c->nleaves; i++)
        if (!add_pred(c, b, c->leaves[i])) {
            out_of_memory(c);
            return;
        }
    c->nleaves = 0;
    if (!grow((void **)&c->leaves, &c->cap_leaves, 1, sizeof *c->leaves)) {
        out_of_memory(c);
        return;
    }
    c->leaves[c->nleaves++] = b;
    c->nacc = 0;
    if (!record(c, b, 0, UINTPTR_MAX, true))
        out_of_memory(c);
}

/* Announces spans of operation op: its dependencies grow by the conflicts,
 * and its accesses are recorded. False when out of memory. */
static bool announce(ord_cap *c, int op, const tc__span *sp, int n)
{
    for (int i = 0; i < n; i++)
        if (sp[i].hi > sp[i].lo && !add_conflicts(c, op, sp[i].lo, sp[i].hi, sp[i].write))
            return false;
    for (int i = 0; i < n; i++)
        if (sp[i].hi > sp[i].lo && !record(c, op, sp[i].lo, sp[i].hi, sp[i].write))
            return false;
    return true;
}

/* Inside operation op: spans found late (scratch, a nested kernel) add
 * their conflicts to the stream's dependencies for the nodes still to come. */
static void announce_late(ord_cap *c, const tc__span *sp, int n)
{
    int op = c->open, before = c->ops[op].npreds;
    if (!announce(c, op, sp, n)) {
        out_of_memory(c);
        return;
    }
    const ord_op *o = &c->ops[op];
    if (o->npreds > before)
        update_deps(c, o->preds + before, o->npreds - before, cudaStreamAddCaptureDependencies);
}

/* The capture of stream cs, or NULL (under mu). */
static ord_cap *find(cudaStream_t cs)
{
    for (ord_cap *c = caps; c; c = c->next)
        if (c->cs == cs)
            return c;
    return NULL;
}

/* ---- the seam's calls ----------------------------------------------------------- */

static atomic_int ncaptures; /* ordered captures underway, read without mu */

static void op_begin(const tc__access_op *o)
{
    void *stream = o->stream;
    const tc__span *sp = o->spans;
    int n = o->n;
    if (atomic_load_explicit(&ncaptures, memory_order_relaxed) == 0)
        return;
    if (tc__access_depth > 0) { /* nested in an operation underway */
        ord_cap *c = open_cap;
        if (!c || c->cs != (cudaStream_t)stream)
            return;
        pthread_mutex_lock(&mu);
        if (!c->failed)
            announce_late(c, sp, n);
        pthread_mutex_unlock(&mu);
        tc__access_depth++;
        return;
    }
    pthread_mutex_lock(&mu);
    ord_cap *c = find((cudaStream_t)stream);
    const cudaGraphNode_t *deps = NULL;
    size_t nd = 0;
    if (!c || c->failed || !current_deps(c, &deps, &nd)) {
        pthread_mutex_unlock(&mu);
        return;
    }
    if (!same_set(deps, nd, &c->expect))
        barrier(c, deps, nd);
    int op = c->failed ? -1 : new_op(c);
    if (op < 0 || !announce(c, op, sp, n)) {
        out_of_memory(c);
        pthread_mutex_unlock(&mu);
        return;
    }
    update_deps(c, c->ops[op].preds, c->ops[op].npreds, cudaStreamSetCaptureDependencies);
    c->open = op;
    open_cap = c;
    tc__access_depth = 1;
    pthread_mutex_unlock(&mu);
}

/* Makes op a leaf in place of the operations it depends on. */
static bool leaves_take(ord_cap *c, int op)
{
    const ord_op *o = &c->ops[op];
    int k = 0;
    for (int i = 0; i < c->nleaves; i++)
        if (!has_pred(o, c->leaves[i]))
            c->leaves[k++] = c->leaves[i];
    c->nleaves = k;
    if (!grow((void **)&c->leaves, &c->cap_leaves, c->nleaves + 1, sizeof *c->leaves))
        return false;
    c->leaves[c->nleaves++] = op;
    return true;
}

static void op_end(void)
{
    if (tc__access_depth <= 0 || --tc__access_depth > 0)
        return;
    ord_cap *c = open_cap;
    open_cap = NULL;
    if (!c)
        return;
    pthread_mutex_lock(&mu);
    const cudaGraphNode_t *deps = NULL;
    size_t nd = 0;
    int op = c->open;
    c->open = -1;
    if (!c->failed && current_deps(c, &deps, &nd)) {
        if (!set_copy(&c->ops[op].ends, deps, nd) || !leaves_take(c, op))
            out_of_memory(c);
        else
            update_deps(c, c->leaves, c->nleaves, cudaStreamSetCaptureDependencies);
    }
    pthread_mutex_unlock(&mu);
}

/* Inside an operation of an ordered capture on `stream`: the allocator handed
 * out [ptr, ptr + bytes) (scratch, a workspace). The operation's later nodes
 * then wait for the earlier users of that memory. */
static void scratch(void *stream, const void *ptr, size_t bytes)
{
    ord_cap *c = open_cap;
    if (!c || c->cs != (cudaStream_t)stream || !bytes)
        return;
    tc__span sp;
    memset(&sp, 0, sizeof sp);
    sp.lo = (uintptr_t)ptr;
    sp.hi = sp.lo + bytes;
    sp.write = true;
    pthread_mutex_lock(&mu);
    if (!c->failed && c->open >= 0)
        announce_late(c, &sp, 1);
    pthread_mutex_unlock(&mu);
}

/* Is operation `target` an ancestor of operation op (through its current
 * dependencies)? A search longer than REACH_LIMIT answers no. */
static bool reaches(ord_cap *c, int op, int target)
{
    if (++c->gen == 0) { /* wrapped: clear the marks */
        for (int i = 0; i < c->nops; i++)
            c->ops[i].mark = 0;
        c->gen = 1;
    }
    int *stack = malloc(REACH_LIMIT * sizeof *stack), top = 0, seen = 0;
    if (!stack)
        return false;
    stack[top++] = op;
    bool found = false;
    while (top > 0 && !found && seen < REACH_LIMIT) {
        const ord_op *o = &c->ops[stack[--top]];
        for (int i = 0; i < o->npreds && !found; i++) {
            ord_op *p = &c->ops[o->preds[i]];
            if (o->preds[i] == target)
                found = true;
            else if (p->mark != c->gen && top < REACH_LIMIT) {
                p->mark = c->gen;
                stack[top++] = o->preds[i];
                seen++;
            }
        }
    }
    free(stack);
    return found;
}

/* Inside an operation of an ordered capture on `stream`: true and a cuBLAS
 * workspace of `want` bytes for one GEMM (*ws), chosen among a few the
 * capture keeps so that GEMMs on independent branches do not share one; the
 * GEMM's nodes wait for the earlier users of the one it gets. False outside
 * such an operation, or when no memory was left for a workspace: the GEMM
 * then uses cuBLAS's own workspace and, in an ordered capture, waits for
 * the earlier GEMMs that used it. */
static bool workspace(int device, void *s, size_t want, void **ws)
{
    cudaStream_t stream = (cudaStream_t)s;
    ord_cap *c = open_cap;
    if (!c || c->cs != stream || !want)
        return false;
    pthread_mutex_lock(&mu);
    int pick = -1, oldest = -1;
    for (int i = 0; i < c->nws && pick < 0 && !c->failed; i++) {
        if (reaches(c, c->open, c->ws[i].last))
            pick = i;
        else if (oldest < 0 || c->ws[i].last < c->ws[oldest].last)
            oldest = i;
    }
    bool make = pick < 0 && c->nws < MAX_WS && !c->failed;
    pthread_mutex_unlock(&mu);
    if (make) { /* the allocation announces the new workspace as scratch */
        void *p = NULL;
        tc__saved_message saved;
        tc__message_save(&saved);
        if (tc__device_alloc(device, stream, want, &p) == TC_OK && p) {
            pthread_mutex_lock(&mu);
            c->ws[c->nws] = (ord_ws){p, c->open};
            *ws = c->ws[c->nws++].ptr;
            pthread_mutex_unlock(&mu);
            return true;
        }
        tc__message_restore(&saved); /* not an error: cuBLAS's own workspace serves */
    }
    if (pick < 0)
        pick = oldest;
    if (pick < 0) { /* none: cuBLAS's own, shared with the GEMMs before */
        scratch(stream, &cublas_own_workspace, 1);
        return false;
    }
    scratch(stream, c->ws[pick].ptr, want);
    pthread_mutex_lock(&mu);
    c->ws[pick].last = c->open;
    pthread_mutex_unlock(&mu);
    *ws = c->ws[pick].ptr;
    return true;
}

/* ---- captures -------------------------------------------------------------------- */

static const tc__access_watcher watcher = {.name = "graph captures ordered by data",
                                           .op_begin = op_begin,
                                           .op_end = op_end,
                                           .scratch = scratch,
                                           .workspace = workspace};

tc_status tc__graph_order_begin(int device, cudaStream_t cs)
{
    TC_TRY(tc__access_watch(&watcher));
    ord_cap *c = calloc(1, sizeof *c);
    if (!c)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for an ordered capture");
    c->cs = cs;
    c->device = device;
    c->open = -1;
    pthread_mutex_lock(&mu);
    c->next = caps;
    caps = c;
    atomic_fetch_add(&ncaptures, 1);
    pthread_mutex_unlock(&mu);
    tc__access_activate();
    return TC_OK;
}

tc_status tc__graph_order_end(cudaStream_t cs)
{
    pthread_mutex_lock(&mu);
    ord_cap *c = NULL;
    for (ord_cap **p = &caps; *p; p = &(*p)->next)
        if ((*p)->cs == cs) {
            c = *p;
            *p = c->next;
            atomic_fetch_sub(&ncaptures, 1);
            break;
        }
    pthread_mutex_unlock(&mu);
    if (!c)
        return TC_OK;
    tc__access_deactivate();
    for (int i = 0; i < c->nws; i++)
        (void)tc__device_free(c->ws[i].ptr);
    for (int i = 0; i < c->nops; i++) {
        free(c->ops[i].ends.v);
        free(c->ops[i].preds);
    }
    free(c->ops);
    free(c->acc);
    free(c->leaves);
    free(c->expect.v);
    bool failed = c->failed;
    char why[sizeof c->why];
    memcpy(why, c->why, sizeof why);
    free(c);
    return failed ? tc__fail(TC_ERROR_CUDA, "%s", why) : TC_OK;
}
