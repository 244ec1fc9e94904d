/* The stream sanitizer's engine: happens-before between streams and the
 * host, the state of each watched allocation, and the reports.
 *
 * Happens-before is FastTrack-style vector clocks. Each actor (a stream, or
 * the host, actor 0) has a clock vc: vc[x] is the latest epoch of actor x
 * that this actor is ordered after. An access by actor X gets the epoch
 * vc[X][X] + 1. Event record copies the stream's clock into the event; a wait
 * (event wait, wait_stream) joins it into the waiting stream's; a host
 * synchronize joins the stream's (event's, device's) into the host's. Work
 * the host queues is ordered after everything the host knows: a stream joins
 * the host clock before each access (only when it changed, counted by
 * host_ver). An earlier access (Y, e) is ordered before the current one of X
 * iff vc[X][Y] >= e.
 *
 * Memory state is per live allocation (a region, found by address in a
 * tsearch tree whose comparator calls overlapping intervals equal, which is a
 * total order because live regions do not overlap): a short list of earlier
 * accesses, each with its actor, epoch, byte range and call site. A new
 * access is checked against the entries of other actors it overlaps (a read
 * against writes, a write against both); then entries it makes redundant are
 * dropped: a write drops every entry inside its range (any later access
 * ordered after the write is ordered after them, or the write already raced
 * with them and was reported), a read drops its own actor's reads inside its
 * range. At most MAX_ACCESSES entries are kept: beyond that the two of one
 * actor and kind are merged (their hull, newest epoch: never a missed race,
 * at worst a report for bytes one of them did not touch). Memory is thus
 * O(live allocations x actors), whatever the number of accesses.
 *
 * A free is checked as a write by the allocation's own stream at the time of
 * the free (the caching allocator hands the block to later work on that
 * stream at once): an access by another stream not ordered before it, and
 * not covered by record_stream, is a reuse-after-free race. Not so for a block
 * of a graph's private pool (one allocated on a capturing stream): its free
 * hands it to no stream. The allocator gives it again only to an allocation
 * captured into the same pool, whose accesses run at that graph's replays and
 * are checked there like any other; once the pool is released its segments
 * go back to CUDA (cudaFree waits for the device). Its reuse stream is the
 * capture stream, which never runs anything, while the replays that wrote it
 * ran on other streams: checking the free as usual would report every
 * graph-pool tensor released after a replay (found under TCUDA_SANITIZER=1
 * in tests/test_graph.c), so such a free forgets the block and checks
 * nothing.
 *
 * Call stacks: backtrace() costs microseconds, so a stack is kept once per
 * call site: the public call (tc__api_name) and the return address into its
 * caller (tc__api_caller) name a site; its first capture is interned and
 * reused (deeper frames are those of the first time the line ran). At most
 * MAX_STACKS are interned. One mutex guards everything; stacks are captured
 * and reports delivered outside it. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <pthread.h>
#include <search.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/debug.h"
#include "core/device_ops.h"
#include "core/strbuf.h"
#include "sanitizer_internal.h"

#define MAX_FRAMES 24
#define MAX_STACKS 65536
#define STACK_BUCKETS 4096
#define MAX_ACCESSES 16
#define MAX_REPORTS_PER_OP 4

atomic_int tc__san_mode;
static atomic_uint_fast64_t report_count;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool explicit_mode; /* tc_sanitizer_enable was called: the environment is ignored */
static tc_sanitizer_callback callback;
static void *callback_data;

/* ---- call stacks ------------------------------------------------------------ */

typedef struct san_stack {
    struct san_stack *next;
    const char *api;
    const void *caller;
    uint64_t hash;
    int n;
    void *frames[MAX_FRAMES];
    char **symbols; /* backtrace_symbols of frames, made for the first report */
} san_stack;

static pthread_mutex_t stack_mu = PTHREAD_MUTEX_INITIALIZER;
static san_stack *stack_tab[STACK_BUCKETS];
static size_t nstacks;
static san_stack no_stack; /* n == 0: "not kept" */
/* Interned stacks and their symbols live for the process (at most MAX_STACKS). */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static bool same_stack(const san_stack *s, const char *api, const void *caller, int n,
                       void *const *frames)
{
    if (caller)
        return s->api == api && s->caller == caller;
    return !s->caller && s->n == n && memcmp(s->frames, frames, sizeof(void *) * (size_t)n) == 0;
}

static const san_stack *stack_find(uint64_t h, const char *api, const void *caller, int n,
                                   void *const *frames)
{
    for (san_stack *s = stack_tab[h % STACK_BUCKETS]; s; s = s->next)
        if (s->hash == h && same_stack(s, api, caller, n, frames))
            return s;
    return NULL;
}

/* The interned stack of the current call site. */
static __attribute__((noinline)) const san_stack *capture_stack(void)
{
    const char *api = tc__api_name;
    const void *caller = api ? tc__api_caller : NULL;
    uint64_t h = mix(mix(0, (uintptr_t)api), (uintptr_t)caller);
    const san_stack *found = NULL;
    if (caller) {
        pthread_mutex_lock(&stack_mu);
        found = stack_find(h, api, caller, 0, NULL);
        pthread_mutex_unlock(&stack_mu);
        if (found)
            return found;
    }
    void *frames[MAX_FRAMES];
    int n = backtrace(frames, MAX_FRAMES);
    if (!caller)
        for (int i = 0; i < n; i++)
            h = mix(h, (uintptr_t)frames[i]);
    pthread_mutex_lock(&stack_mu);
    found = stack_find(h, api, caller, n, frames);
    if (!found && nstacks < MAX_STACKS) {
        san_stack *s = malloc(sizeof *s);
        if (s) {
            *s = (san_stack){.next = stack_tab[h % STACK_BUCKETS],
                             .api = api,
                             .caller = caller,
                             .hash = h,
                             .n = n};
            memcpy(s->frames, frames, sizeof(void *) * (size_t)n);
            stack_tab[h % STACK_BUCKETS] = s;
            nstacks++;
            found = s;
        }
    }
    pthread_mutex_unlock(&stack_mu);
    return found ? found : &no_stack;
}

/* ---- actors and clocks ------------------------------------------------------ */

typedef struct actor {
    int dev;
    void *handle;
    uint64_t *vc; /* vc_cap entries */
    uint64_t host_ver;
} actor;

static actor *actors;
static int nactors, actors_cap, vc_cap;
static uint64_t host_ver = 1;
static uint64_t *scratch_vc; /* vc_cap entries, for a clock joined only to check */
static int last_actor;

static bool grow_clocks(void)
{
    int cap = vc_cap ? vc_cap * 2 : 8;
    for (int i = 0; i < nactors; i++) {
        uint64_t *v = realloc(actors[i].vc, sizeof(uint64_t) * (size_t)cap);
        if (!v)
            return false;
        memset(v + vc_cap, 0, sizeof(uint64_t) * (size_t)(cap - vc_cap));
        actors[i].vc = v;
    }
    uint64_t *s = realloc(scratch_vc, sizeof(uint64_t) * (size_t)cap);
    if (!s)
        return false;
    scratch_vc = s;
    vc_cap = cap;
    return true;
}

/* The actor of a stream (created on first sight); -1 when memory ran out. */
static int actor_of(int dev, void *handle)
{
    if (dev == TC__SAN_HOST_DEV)
        return 0;
    if (last_actor > 0 && last_actor < nactors && actors[last_actor].handle == handle &&
        actors[last_actor].dev == dev)
        return last_actor;
    for (int i = 1; i < nactors; i++)
        if (actors[i].handle == handle && actors[i].dev == dev)
            return last_actor = i;
    if (nactors == actors_cap) {
        int cap = actors_cap ? actors_cap * 2 : 8;
        actor *a = realloc(actors, sizeof *a * (size_t)cap);
        if (!a)
            return -1;
        actors = a;
        actors_cap = cap;
    }
    if (nactors == vc_cap && !grow_clocks())
        return -1;
    uint64_t *vc = calloc((size_t)vc_cap, sizeof(uint64_t));
    if (!vc)
        return -1;
    actors[nactors] = (actor){.dev = dev, .handle = handle, .vc = vc, .host_ver = 0};
    return last_actor = nactors++;
}

/* Makes the host actor (0) on first use; false when memory ran out. */
static bool engine_ready(void)
{
    if (nactors)
        return true;
    if (!vc_cap && !grow_clocks())
        return false;
    if (!actors_cap) {
        actors = malloc(sizeof *actors * 8);
        if (!actors)
            return false;
        actors_cap = 8;
    }
    uint64_t *vc = calloc((size_t)vc_cap, sizeof(uint64_t));
    if (!vc)
        return false;
    actors[0] = (actor){.dev = TC__SAN_HOST_DEV, .handle = NULL, .vc = vc, .host_ver = 0};
    nactors = 1;
    return true;
}

/* Joins src (n entries) into actor dst's clock. */
static void join_into(int dst, const uint64_t *src, int n)
{
    uint64_t *d = actors[dst].vc;
    for (int i = 0; i < n; i++)
        if (src[i] > d[i])
            d[i] = src[i];
    if (dst == 0)
        host_ver++;
}

/* Stream a is ordered after everything the host knows (work the host queues
 * now starts after it). */
static void sync_host(int a)
{
    if (a > 0 && actors[a].host_ver != host_ver) {
        join_into(a, actors[0].vc, nactors);
        actors[a].host_ver = host_ver;
    }
}

/* ---- events ----------------------------------------------------------------- */

typedef struct evsnap {
    const void *key;
    int n;
    uint64_t *vc;
} evsnap;

static void *events; /* tsearch tree of evsnap */
static size_t nevents;

static int cmp_event(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const evsnap *)a)->key, y = (uintptr_t)((const evsnap *)b)->key;
    return x < y ? -1 : x > y;
}

static evsnap *event_find(const void *key)
{
    evsnap probe = {.key = key};
    void *node = tfind(&probe, &events, cmp_event);
    return node ? *(evsnap **)node : NULL;
}

static void event_free(void *p)
{
    evsnap *e = p;
    free(e->vc);
    free(e);
}

/* ---- regions ---------------------------------------------------------------- */

typedef struct site {
    const char *op;   /* public call, static */
    const char *what; /* kind of access, static */
    const san_stack *stack;
    char label[40];
} site;

typedef struct access {
    int actor;
    bool write;
    uint64_t epoch;
    uintptr_t lo, hi;
    site site;
} access;

typedef struct region {
    uintptr_t base, end; /* first: the tree's probes are regions too */
    int dev;
    int actor; /* the stream the allocator reuses it for */
    bool host; /* pinned host memory */
    bool adopted;
    bool graph_pool; /* made on a capturing stream: a block of a graph's private pool */
    site made;
    int *recorded; /* actors named by record_stream */
    int nrec, rec_cap;
    access *acc;
    int nacc, acc_cap;
} region;

static void *regions; /* tsearch tree of region */
static size_t nregions, region_bytes;
/* Pinned host regions: while there are none, host kernels skip everything. */
static atomic_int host_regions;

static int cmp_region(const void *a, const void *b)
{
    const region *x = a, *y = b;
    if (x->end <= y->base)
        return -1;
    if (y->end <= x->base)
        return 1;
    return 0;
}

static region *region_at(uintptr_t p)
{
    region probe = {.base = p, .end = p + 1};
    void *node = tfind(&probe, &regions, cmp_region);
    return node ? *(region **)node : NULL;
}

static void region_free(void *p)
{
    region *r = p;
    free(r->recorded);
    free(r->acc);
    free(r);
}

static void region_remove(region *r)
{
    region_bytes -= sizeof(access) * (size_t)r->acc_cap + sizeof(int) * (size_t)r->rec_cap;
    tdelete(r, &regions, cmp_region);
    nregions--;
    if (r->host)
        atomic_fetch_sub(&host_regions, 1);
    region_free(r);
}

static region *region_new(uintptr_t lo, uintptr_t hi, int dev, int who, bool host, const site *made)
{
    /* Stale state overlapping the new memory goes first: a probe with the
     * whole interval finds any stored region that meets it. */
    region probe = {.base = lo, .end = hi};
    void *node;
    while ((node = tfind(&probe, &regions, cmp_region)))
        region_remove(*(region **)node);
    region *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    *r = (region){.base = lo, .end = hi, .dev = dev, .actor = who, .host = host, .made = *made};
    node = tsearch(r, &regions, cmp_region);
    if (!node || *(region **)node != r) {
        free(r);
        return NULL;
    }
    nregions++;
    if (host)
        atomic_fetch_add(&host_regions, 1);
    return r;
}

static bool overlaps(const access *a, uintptr_t lo, uintptr_t hi)
{
    return a->lo < hi && lo < a->hi;
}

/* Index of an earlier access of another actor that races with this one, or -1.
 * clock: the accessing actor's clock. */
static int find_conflict(const region *r, int x, const uint64_t *clock, uintptr_t lo, uintptr_t hi,
                         bool write)
{
    for (int i = 0; i < r->nacc; i++) {
        const access *a = &r->acc[i];
        if (a->actor == x || !overlaps(a, lo, hi) || (!write && !a->write))
            continue;
        if (clock[a->actor] < a->epoch)
            return i;
    }
    return -1;
}

static void drop_access(region *r, int i) { r->acc[i] = r->acc[--r->nacc]; }

/* Keeps at most MAX_ACCESSES entries (see the top of the file). */
static void merge_one(region *r)
{
    for (int i = 0; i < r->nacc; i++)
        for (int j = i + 1; j < r->nacc; j++) {
            access *a = &r->acc[i], *b = &r->acc[j];
            if (a->actor != b->actor || a->write != b->write)
                continue;
            access *keep = a->epoch >= b->epoch ? a : b;
            access m = *keep;
            m.lo = a->lo < b->lo ? a->lo : b->lo;
            m.hi = a->hi > b->hi ? a->hi : b->hi;
            *a = m;
            drop_access(r, j);
            return;
        }
    drop_access(r, 0); /* more actors than entries: the oldest-placed one goes */
}

static void record(region *r, int x, uint64_t epoch, uintptr_t lo, uintptr_t hi, bool write,
                   const site *s)
{
    for (int i = r->nacc - 1; i >= 0; i--) {
        const access *a = &r->acc[i];
        bool inside = a->lo >= lo && a->hi <= hi;
        if (inside && (write || (a->actor == x && !a->write)))
            drop_access(r, i);
    }
    if (r->nacc == MAX_ACCESSES)
        merge_one(r);
    if (r->nacc == r->acc_cap) {
        int cap = r->acc_cap ? r->acc_cap * 2 : 2;
        access *a = realloc(r->acc, sizeof *a * (size_t)cap);
        if (!a)
            return; /* out of memory: this access is not remembered */
        region_bytes += sizeof *a * (size_t)(cap - r->acc_cap);
        r->acc = a;
        r->acc_cap = cap;
    }
    r->acc[r->nacc++] = (access){
        .actor = x, .write = write, .epoch = epoch, .lo = lo, .hi = hi, .site = *s};
}

static bool recorded(const region *r, int who)
{
    for (int i = 0; i < r->nrec; i++)
        if (r->recorded[i] == who)
            return true;
    return false;
}

/* ---- reports ---------------------------------------------------------------- */

static void put_device(tc__strbuf *t, int dev)
{
    if (dev < 0)
        tc__strbuf_printf(t, "host");
    else
        tc__strbuf_printf(t, "cuda:%d", dev);
}

static void put_actor(tc__strbuf *t, int x)
{
    const actor *a = &actors[x];
    if (a->dev == TC__SAN_HOST_DEV)
        tc__strbuf_printf(t, "the host");
    else if (!a->handle)
        tc__strbuf_printf(t, "the default stream of cuda:%d", a->dev);
    else
        tc__strbuf_printf(t, "stream %p of cuda:%d", a->handle, a->dev);
}

static void put_stack(tc__strbuf *t, const san_stack *st)
{
    if (!st || st->n == 0) {
        tc__strbuf_printf(t, "        (call stack not kept: too many distinct call sites)\n");
        return;
    }
    /* Start at the public call's frame: the one before the return address
     * into its caller, when the site has one; else after this file's frames. */
    int first = st->n > 2 ? 2 : 0;
    for (int i = 0; i < st->n; i++)
        if (st->caller && st->frames[i] == st->caller) {
            first = i > 0 ? i - 1 : 0;
            break;
        }
    pthread_mutex_lock(&stack_mu);
    san_stack *w = (san_stack *)st;
    if (!w->symbols)
        w->symbols = backtrace_symbols((void *const *)w->frames, w->n);
    char **sym = w->symbols;
    pthread_mutex_unlock(&stack_mu);
    for (int i = first; i < st->n; i++) {
        if (sym)
            tc__strbuf_printf(t, "        #%d %s\n", i - first, sym[i]);
        else
            tc__strbuf_printf(t, "        #%d %p\n", i - first, st->frames[i]);
    }
}

static void put_site(tc__strbuf *t, const site *s)
{
    if (s->label[0])
        tc__strbuf_printf(t, "%s", s->label);
    else
        tc__strbuf_printf(t, "%s", s->op ? s->op : "an internal call");
    if (s->what)
        tc__strbuf_printf(t, " (%s)", s->what);
}

static void put_span(tc__strbuf *t, const tc__san_span *sp)
{
    if (sp->ndim >= 0) {
        tc__strbuf_printf(t, "%s [", tc_dtype_name(sp->dtype));
        for (int d = 0; d < sp->ndim; d++)
            tc__strbuf_printf(t, "%s%lld", d ? ", " : "", (long long)sp->sizes[d]);
        tc__strbuf_printf(t, "] ");
    } else {
        tc__strbuf_printf(t, "%zu bytes ", (size_t)(sp->hi - sp->lo));
    }
}

static const char *const race_names[] = {"write-after-read", "read-after-write",
                                         "write-after-write", "reuse-after-free"};

const char *tc_sanitizer_race_string(tc_sanitizer_race kind)
{
    return (unsigned)kind < 4 ? race_names[kind] : "unknown";
}

/* A report ready to deliver (outside the lock). */
typedef struct pending {
    tc_sanitizer_report rep;
    char *text;
    char ops[2][48];
} pending;

static void fill_pending(pending *p, tc_sanitizer_race kind, const region *r, uintptr_t addr,
                         const site *cur, const site *earlier, char *txt)
{
    const site *s[2] = {cur, earlier};
    for (int i = 0; i < 2; i++)
        snprintf(p->ops[i], sizeof p->ops[i], "%s",
                 s[i]->label[0] ? s[i]->label
                 : s[i]->op     ? s[i]->op
                                : "");
    p->text = txt;
    p->rep = (tc_sanitizer_report){.kind = kind,
                                   .address = (const void *)addr,
                                   .allocation = (const void *)r->base,
                                   .allocation_bytes = (size_t)(r->end - r->base),
                                   .current_op = p->ops[0],
                                   .earlier_op = p->ops[1],
                                   .text = txt};
}

static void put_memory(tc__strbuf *t, const region *r, const tc__san_span *sp)
{
    tc__strbuf_printf(t, "  memory: ");
    if (sp) {
        put_span(t, sp);
        tc__strbuf_printf(t, "at %p, bytes %zu..%zu of ", (void *)sp->lo,
                          (size_t)(sp->lo - r->base), (size_t)(sp->hi - r->base));
    }
    tc__strbuf_printf(t, "a %zu-byte %s at %p", (size_t)(r->end - r->base),
                      r->host      ? "pinned host allocation"
                      : r->adopted ? "region"
                                   : "allocation",
                      (void *)r->base);
    if (r->adopted) {
        tc__strbuf_printf(
            t, " (not from tcuda's allocator; watched since its first declared access)\n");
        return;
    }
    tc__strbuf_printf(t, " made");
    if (!r->host) {
        tc__strbuf_printf(t, " on ");
        put_actor(t, r->actor);
    }
    tc__strbuf_printf(t, " by ");
    put_site(t, &r->made);
    tc__strbuf_printf(t, ", at\n");
    put_stack(t, r->made.stack);
}

static const char *fix_for(tc_sanitizer_race kind, bool host_current, bool host_earlier)
{
    if (kind == TC_RACE_REUSE_AFTER_FREE)
        return "  the allocator may give this memory to new work on its own stream while the "
               "other\n  stream still uses it: call tc_tensor_record_stream (or "
               "tc_caching_allocator_record_stream)\n  with that stream before the release, or "
               "make the allocation's stream wait for it first.\n";
    if (host_current)
        return "  nothing orders the earlier access before this host access: synchronize the "
               "stream\n  (tc_stream_synchronize, or tc_event_record + tc_event_synchronize) "
               "before reading.\n";
    if (host_earlier)
        return "  nothing orders the earlier host access before this one.\n";
    return "  nothing orders the earlier access before the current one: make the current "
           "stream\n  wait for the other (tc_stream_wait_stream, or tc_event_record + "
           "tc_stream_wait_event),\n  or synchronize, in between.\n";
}

/* Writes the report of a race between the current access (actor x, span sp,
 * site cur) and earlier access e in region r. */
static char *race_text(tc_sanitizer_race kind, const region *r, const tc__san_span *sp, int x,
                       const site *cur, const access *e)
{
    tc__strbuf t = {0};
    tc__strbuf_printf(&t, "tcuda sanitizer: %s race on memory of ", race_names[kind]);
    put_device(&t, r->dev);
    tc__strbuf_printf(&t, "\n");
    put_memory(&t, r, sp);
    tc__strbuf_printf(&t, "  current access: %s by ",
                      kind == TC_RACE_REUSE_AFTER_FREE ? "free"
                      : sp && sp->write                ? "write"
                                                       : "read");
    put_site(&t, cur);
    tc__strbuf_printf(&t, " on ");
    put_actor(&t, x);
    tc__strbuf_printf(&t, ", at\n");
    put_stack(&t, cur->stack);
    tc__strbuf_printf(&t, "  earlier access: %s by ", e->write ? "write" : "read");
    put_site(&t, &e->site);
    tc__strbuf_printf(&t, " on ");
    put_actor(&t, e->actor);
    tc__strbuf_printf(&t, " (bytes %zu..%zu), at\n", (size_t)(e->lo - r->base),
                      (size_t)(e->hi - r->base));
    put_stack(&t, e->site.stack);
    tc__strbuf_printf(
        &t, "%s",
        fix_for(kind, actors[x].dev == TC__SAN_HOST_DEV, actors[e->actor].dev == TC__SAN_HOST_DEV));
    return t.p;
}

/* Counts and delivers a report made under the lock (called without it). In
 * error mode it goes to the callback only: the failing call carries it. */
static void deliver(pending *p, int mode)
{
    atomic_fetch_add(&report_count, 1);
    pthread_mutex_lock(&mu);
    tc_sanitizer_callback cb = callback;
    void *ud = callback_data;
    pthread_mutex_unlock(&mu);
    const char *txt = p->text ? p->text : "tcuda sanitizer: a race (no memory for the report)\n";
    if (mode == TC_SANITIZER_ABORT) {
        fputs(txt, stderr);
        fflush(stderr);
        abort();
    }
    if (cb)
        cb(&p->rep, ud);
    else if (mode == TC_SANITIZER_REPORT) {
        fputs(txt, stderr);
        fflush(stderr);
    }
}

/* ---- happens-before hooks ------------------------------------------------------- */

/* Takes the lock when on and the engine is usable. */
static bool lock_on(void)
{
    if (!tc__san_on())
        return false;
    pthread_mutex_lock(&mu);
    if (tc__san_on() && engine_ready())
        return true;
    pthread_mutex_unlock(&mu);
    return false;
}

void tc__san_stream_wait_stream(int dev, void *stream, int other_dev, void *other)
{
    if (!lock_on())
        return;
    int s = actor_of(dev, stream), o = actor_of(other_dev, other);
    if (s >= 0 && o >= 0 && s != o) {
        sync_host(o);
        join_into(s, actors[o].vc, nactors);
    }
    pthread_mutex_unlock(&mu);
}

void tc__san_event_record(const void *key, int dev, void *stream)
{
    if (!lock_on())
        return;
    int s = actor_of(dev, stream);
    evsnap *e = event_find(key);
    if (s >= 0 && !e && (e = calloc(1, sizeof *e))) {
        e->key = key;
        if (tsearch(e, &events, cmp_event))
            nevents++;
        else {
            free(e);
            e = NULL;
        }
    }
    if (s >= 0 && e) {
        sync_host(s);
        uint64_t *vc = e->n >= nactors ? e->vc : realloc(e->vc, sizeof(uint64_t) * (size_t)nactors);
        if (vc) {
            memcpy(vc, actors[s].vc, sizeof(uint64_t) * (size_t)nactors);
            if (e->n < nactors)
                e->n = nactors;
            else
                memset(vc + nactors, 0, sizeof(uint64_t) * (size_t)(e->n - nactors));
            e->vc = vc;
        }
    }
    pthread_mutex_unlock(&mu);
}

void tc__san_event_wait(const void *key, int dev, void *stream)
{
    if (!lock_on())
        return;
    int s = actor_of(dev, stream);
    const evsnap *e = event_find(key);
    if (s >= 0 && e)
        join_into(s, e->vc, e->n);
    pthread_mutex_unlock(&mu);
}

void tc__san_event_sync(const void *key)
{
    if (!lock_on())
        return;
    const evsnap *e = event_find(key);
    if (e)
        join_into(0, e->vc, e->n);
    pthread_mutex_unlock(&mu);
}

void tc__san_event_destroy(const void *key)
{
    if (!lock_on())
        return;
    evsnap *e = event_find(key);
    if (e) {
        tdelete(e, &events, cmp_event);
        nevents--;
        event_free(e);
    }
    pthread_mutex_unlock(&mu);
}

void tc__san_stream_sync(int dev, void *stream)
{
    if (!lock_on())
        return;
    int s = actor_of(dev, stream);
    if (s > 0) {
        sync_host(s);
        join_into(0, actors[s].vc, nactors);
    }
    pthread_mutex_unlock(&mu);
}

void tc__san_device_sync(int dev)
{
    if (!lock_on())
        return;
    for (int s = 1; s < nactors; s++)
        if (actors[s].dev == dev)
            join_into(0, actors[s].vc, nactors);
    pthread_mutex_unlock(&mu);
}

/* ---- memory hooks --------------------------------------------------------------- */

static bool capturing_stream(int dev, void *stream); /* graph capture, below */

static void site_init(site *s, const char *what, const char *label)
{
    s->op = tc__api_name;
    s->what = what;
    s->stack = capture_stack();
    size_t i = 0; /* a plain copy: this runs on every watched operation */
    for (; label && label[i] && i + 1 < sizeof s->label; i++)
        s->label[i] = label[i];
    s->label[i] = '\0';
}

void tc__san_alloc(const void *ptr, size_t bytes, int dev, void *stream, bool host)
{
    if (!ptr || !bytes || !tc__san_on())
        return;
    site made;
    site_init(&made, host ? "pinned host allocation" : "allocation", NULL);
    if (!lock_on())
        return;
    int a = host ? 0 : actor_of(dev, stream);
    region *r = NULL;
    if (a >= 0)
        r = region_new((uintptr_t)ptr, (uintptr_t)ptr + bytes, host ? TC__SAN_HOST_DEV : dev, a,
                       host, &made);
    if (r && !host)
        r->graph_pool = capturing_stream(dev, stream);
    pthread_mutex_unlock(&mu);
}

void tc__san_record_stream(const void *ptr, void *stream)
{
    if (!ptr || !lock_on())
        return;
    region *r = region_at((uintptr_t)ptr);
    if (r && !r->host) {
        int a = actor_of(r->dev, stream);
        if (a >= 0 && !recorded(r, a)) {
            if (r->nrec == r->rec_cap) {
                int cap = r->rec_cap ? r->rec_cap * 2 : 2;
                int *p = realloc(r->recorded, sizeof(int) * (size_t)cap);
                if (p) {
                    region_bytes += sizeof(int) * (size_t)(cap - r->rec_cap);
                    r->recorded = p;
                    r->rec_cap = cap;
                }
            }
            if (r->nrec < r->rec_cap)
                r->recorded[r->nrec++] = a;
        }
    }
    pthread_mutex_unlock(&mu);
}

void tc__san_free(const void *ptr, void (*record_fn)(void *ptr, int dev, void *stream))
{
    if (!ptr || !tc__san_on())
        return;
    site cur;
    site_init(&cur, "free", NULL);
    if (!lock_on())
        return;
    region *r = region_at((uintptr_t)ptr);
    if (!r || r->base != (uintptr_t)ptr) {
        pthread_mutex_unlock(&mu);
        return;
    }
    int mode = atomic_load(&tc__san_mode);
    pending p = {0};
    bool raced = false;
    int nprotect = 0;
    struct stream_ref {
        int dev;
        void *handle;
    } protect[8];
    if (!r->host && !r->graph_pool) {
        const uint64_t *va = actors[r->actor].vc, *vh = actors[0].vc;
        for (int i = 0; i < r->nacc; i++) {
            const access *e = &r->acc[i];
            uint64_t known = va[e->actor] > vh[e->actor] ? va[e->actor] : vh[e->actor];
            if (e->actor == r->actor || recorded(r, e->actor) || known >= e->epoch)
                continue;
            if (!raced) {
                char *txt = race_text(TC_RACE_REUSE_AFTER_FREE, r, NULL, r->actor, &cur, e);
                fill_pending(&p, TC_RACE_REUSE_AFTER_FREE, r, e->lo, &cur, &e->site, txt);
                raced = true;
            }
            bool seen = false;
            for (int k = 0; k < nprotect; k++)
                seen |= protect[k].handle == actors[e->actor].handle &&
                        protect[k].dev == actors[e->actor].dev;
            if (!seen && nprotect < 8 && actors[e->actor].dev >= 0)
                protect[nprotect++] = (struct stream_ref){actors[e->actor].dev,
                                                          actors[e->actor].handle};
        }
    }
    region_remove(r);
    pthread_mutex_unlock(&mu);
    if (!raced)
        return;
    /* A free cannot fail: in error mode the memory is kept from early reuse. */
    if (mode == TC_SANITIZER_ERROR && record_fn)
        for (int k = 0; k < nprotect; k++)
            record_fn((void *)ptr, protect[k].dev, protect[k].handle);
    deliver(&p, mode == TC_SANITIZER_ERROR ? TC_SANITIZER_REPORT : mode);
    free(p.text);
}

/* ---- graph capture -------------------------------------------------------------- */
/* Work queued on a stream while CUDA captures it does not run then: it runs
 * at every replay of the graph, on the stream the graph is launched on. So
 * accesses on a capturing stream are kept in a recording instead of being
 * checked, and each replay checks them again as accesses of the replay
 * stream (allocations and frees made during capture are seen as usual). A
 * recording holds one entry per captured operation: bounded by the graph. */

typedef struct rec_entry {
    tc__san_span *spans;
    int n;
    const char *what; /* static */
    char label[40];
} rec_entry;

struct tc__san_recording {
    rec_entry *e;
    int n, cap;
};

typedef struct capture {
    int dev;
    void *stream;
    tc__san_recording *rec;
} capture;
static capture *captures; /* the captures underway, under mu */
static int ncaptures, cap_captures;
static atomic_int capturing_streams; /* ncaptures, read without the lock */

/* Under mu: the capture underway on the stream, or NULL. */
static capture *find_capture(int dev, void *stream)
{
    for (int i = 0; i < ncaptures; i++)
        if (captures[i].dev == dev && captures[i].stream == stream)
            return &captures[i];
    return NULL;
}

static bool capturing_stream(int dev, void *stream) { return find_capture(dev, stream) != NULL; }

void tc__san_capture_begin(int dev, void *stream)
{
    if (!lock_on())
        return;
    tc__san_recording *rec = calloc(1, sizeof *rec);
    if (rec && ncaptures == cap_captures) {
        int nc = cap_captures ? 2 * cap_captures : 4;
        capture *c = realloc(captures, sizeof *c * (size_t)nc);
        if (c) {
            captures = c;
            cap_captures = nc;
        }
    }
    if (rec && ncaptures < cap_captures) {
        captures[ncaptures++] = (capture){dev, stream, rec};
        atomic_store(&capturing_streams, ncaptures);
    } else {
        free(rec); /* out of memory: the capture's accesses are checked as they are queued */
    }
    pthread_mutex_unlock(&mu);
}

tc__san_recording *tc__san_capture_end(int dev, void *stream)
{
    tc__san_recording *rec = NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < ncaptures; i++)
        if (captures[i].dev == dev && captures[i].stream == stream) {
            rec = captures[i].rec;
            captures[i] = captures[--ncaptures];
            atomic_store(&capturing_streams, ncaptures);
            break;
        }
    pthread_mutex_unlock(&mu);
    return rec;
}

void tc__san_recording_free(tc__san_recording *rec)
{
    if (!rec)
        return;
    for (int i = 0; i < rec->n; i++)
        free(rec->e[i].spans);
    free(rec->e);
    free(rec);
}

/* Keeps an access on a capturing stream; false when the stream is not one. */
static bool capture_access(int dev, void *stream, const tc__san_span *spans, int n,
                           tc__san_what what)
{
    if (TC_LIKELY(atomic_load_explicit(&capturing_streams, memory_order_relaxed) == 0))
        return false;
    pthread_mutex_lock(&mu);
    capture *c = find_capture(dev, stream);
    tc__san_recording *rec = c ? c->rec : NULL;
    if (rec && rec->n == rec->cap) {
        int cap = rec->cap ? 2 * rec->cap : 16;
        rec_entry *e = realloc(rec->e, sizeof *e * (size_t)cap);
        if (e) {
            rec->e = e;
            rec->cap = cap;
        }
    }
    if (rec && rec->n < rec->cap) {
        rec_entry *e = &rec->e[rec->n];
        e->spans = malloc(sizeof *spans * (size_t)(n > 0 ? n : 1));
        if (e->spans) {
            memcpy(e->spans, spans, sizeof *spans * (size_t)n);
            e->n = n;
            e->what = what.what;
            snprintf(e->label, sizeof e->label, "%s", what.label ? what.label : "");
            rec->n++;
        }
    }
    pthread_mutex_unlock(&mu);
    return rec != NULL;
}

/* ---- accesses ------------------------------------------------------------------- */

void tc__san_span_dense(const void *ptr, size_t bytes, tc_dtype dtype, int ndim,
                        const int64_t *sizes, bool write, tc__san_span *out)
{
    *out = (tc__san_span){.lo = (uintptr_t)ptr,
                          .hi = (uintptr_t)ptr + bytes,
                          .write = write,
                          .dtype = dtype,
                          .ndim = sizes ? ndim : 1};
    if (!sizes) /* a flat run of elements */
        out->sizes[0] = (int64_t)(bytes / (tc_dtype_size(dtype) ? tc_dtype_size(dtype) : 1));
    for (int d = 0; sizes && d < ndim && d < TC_MAX_DIMS; d++)
        out->sizes[d] = sizes[d];
}

void tc__san_span_of_iter(const tc__iter *it, int op, tc_dtype dtype, bool write, tc__san_span *out)
{
    int64_t es = (int64_t)tc_dtype_size(dtype), first = 0, last = 0;
    for (int d = 0; d < it->ndim; d++) {
        int64_t span = (it->sizes[d] - 1) * it->strides[op][d];
        if (span < 0)
            first += span;
        else
            last += span;
    }
    uintptr_t base = (uintptr_t)it->data[op];
    *out = (tc__san_span){.lo = base + (uintptr_t)(first * es),
                          .hi = base + (uintptr_t)((last + 1) * es),
                          .write = write,
                          .dtype = dtype,
                          .ndim = it->ndim};
    for (int d = 0; d < it->ndim; d++)
        out->sizes[d] = it->sizes[d];
}

static tc_sanitizer_race kind_of(bool write, const access *e)
{
    if (!write)
        return TC_RACE_READ_AFTER_WRITE;
    return e->write ? TC_RACE_WRITE_AFTER_WRITE : TC_RACE_WRITE_AFTER_READ;
}

/* The region a span lies in (adopting unwatched memory when asked), with the
 * span clipped to it; NULL when the span is not watched. */
static region *span_region(const tc__san_span *sp, bool adopt, int x, const site *s, uintptr_t *lo,
                           uintptr_t *hi)
{
    region *r = region_at(sp->lo);
    if (!r && adopt) {
        r = region_new(sp->lo, sp->hi, actors[x].dev, x, false, s);
        if (r)
            r->adopted = true;
    }
    if (!r)
        return NULL;
    *lo = sp->lo;
    *hi = sp->hi < r->end ? sp->hi : r->end;
    return r;
}

/* Under mu: checks an operation of actor x (whose clock, joined with the
 * stream it is queued after, is `clock`) against the earlier accesses to its
 * memory; the races found go into reps (at most max; with first_only, the
 * first race ends the search). Returns how many. */
static int check_op(int x, const uint64_t *clock, const tc__san_span *spans, int n, bool adopt,
                    const site *cur, pending *reps, int max, bool first_only)
{
    int nrep = 0;
    for (int i = 0; i < n && nrep < max; i++) {
        uintptr_t lo, hi;
        region *r = span_region(&spans[i], adopt, x, cur, &lo, &hi);
        if (!r || lo >= hi)
            continue;
        int c = find_conflict(r, x, clock, lo, hi, spans[i].write);
        if (c < 0)
            continue;
        const access *e = &r->acc[c];
        uintptr_t addr = e->lo > lo ? e->lo : lo;
        tc_sanitizer_race k = kind_of(spans[i].write, e);
        fill_pending(&reps[nrep++], k, r, addr, cur, &e->site,
                     race_text(k, r, &spans[i], x, cur, e));
        if (first_only)
            break;
    }
    return nrep;
}

/* Under mu: records an operation of actor x as its next epoch, after x
 * joins the clock of actor `after` (-1: none). */
static void record_op(int x, int after, const tc__san_span *spans, int n, const site *cur)
{
    if (after >= 0)
        join_into(x, actors[after].vc, nactors);
    uint64_t epoch = ++actors[x].vc[x];
    if (x == 0)
        host_ver++;
    for (int i = 0; i < n; i++) {
        uintptr_t lo, hi;
        region *r = span_region(&spans[i], false, x, cur, &lo, &hi);
        if (r && lo < hi)
            record(r, x, epoch, lo, hi, spans[i].write, cur);
    }
}

/* Delivers reports made under mu (called without it); frees their texts. */
static void deliver_all(pending *reps, int n, int mode)
{
    for (int i = 0; i < n; i++) {
        deliver(&reps[i], mode);
        free(reps[i].text);
    }
}

/* Error mode: the first report becomes the refusing call's error. */
static tc_status refuse(pending *rep)
{
    deliver(rep, TC_SANITIZER_ERROR);
    tc_status st = tc__fail(TC_ERROR_RACE, "%s", rep->text ? rep->text : "tcuda sanitizer: a race");
    free(rep->text);
    return st;
}

tc_status tc__san_access(int dev, void *stream, const tc__san_span *spans, int n, tc__san_what what,
                         bool adopt, bool after_stream_set, int after_dev, void *after_stream)
{
    if (!tc__san_on())
        return TC_OK;
    if (dev == TC__SAN_HOST_DEV && !adopt && atomic_load(&host_regions) == 0)
        return TC_OK; /* host kernels touch nothing a stream also uses */
    if (capture_access(dev, stream, spans, n, what))
        return TC_OK; /* runs at each replay (graph capture, above) */
    site cur;
    site_init(&cur, what.what, what.label);
    if (!lock_on())
        return TC_OK;
    int mode = atomic_load(&tc__san_mode);
    int x = actor_of(dev, stream);
    int after = after_stream_set ? actor_of(after_dev, after_stream) : -1;
    if (x < 0 || (after_stream_set && after < 0)) {
        pthread_mutex_unlock(&mu);
        return TC_OK; /* out of memory: not watched */
    }
    sync_host(x);
    const uint64_t *clock = actors[x].vc;
    if (after >= 0) {
        sync_host(after);
        for (int i = 0; i < nactors; i++)
            scratch_vc[i] = clock[i] > actors[after].vc[i] ? clock[i] : actors[after].vc[i];
        clock = scratch_vc;
    }
    pending reps[MAX_REPORTS_PER_OP];
    bool error = mode == TC_SANITIZER_ERROR;
    int nrep = check_op(x, clock, spans, n, adopt, &cur, reps, MAX_REPORTS_PER_OP, error);
    if (nrep && error) {
        pthread_mutex_unlock(&mu);
        return refuse(&reps[0]);
    }
    record_op(x, after, spans, n, &cur);
    pthread_mutex_unlock(&mu);
    deliver_all(reps, nrep, mode);
    return TC_OK;
}

/* The site of a recorded operation replayed now: the replay's call (op,
 * stack) with the recorded kind and label. */
static site replay_site(const site *replay, const rec_entry *e)
{
    site s = *replay;
    s.what = e->what;
    memcpy(s.label, e->label, sizeof s.label);
    return s;
}

/* A replay is one call: its operations are checked and recorded under one
 * hold of the lock, so no other thread's access falls between them. In
 * error mode every operation is checked before any is recorded, so a
 * refused replay (which launches nothing) leaves the state as it was. The
 * reports of one replay are capped as those of one operation are. */
tc_status tc__san_replay(const tc__san_recording *rec, int dev, void *stream)
{
    if (!rec || rec->n == 0 || !tc__san_on())
        return TC_OK;
    if (TC_UNLIKELY(atomic_load_explicit(&capturing_streams, memory_order_relaxed) != 0)) {
        pthread_mutex_lock(&mu);
        bool captured = find_capture(dev, stream) != NULL;
        pthread_mutex_unlock(&mu);
        if (captured) { /* a replay queued into a capture: kept in that recording */
            for (int i = 0; i < rec->n; i++) {
                const rec_entry *e = &rec->e[i];
                tc__san_what w = {e->what, e->label[0] ? e->label : NULL};
                TC_TRY(tc__san_access(dev, stream, e->spans, e->n, w, false, false, 0, NULL));
            }
            return TC_OK;
        }
    }
    site call;
    site_init(&call, NULL, NULL);
    if (!lock_on())
        return TC_OK;
    int mode = atomic_load(&tc__san_mode);
    int x = actor_of(dev, stream);
    if (x < 0) {
        pthread_mutex_unlock(&mu);
        return TC_OK; /* out of memory: not watched */
    }
    sync_host(x);
    pending reps[MAX_REPORTS_PER_OP];
    int nrep = 0;
    if (mode == TC_SANITIZER_ERROR) {
        for (int i = 0; i < rec->n && nrep == 0; i++) {
            site s = replay_site(&call, &rec->e[i]);
            nrep = check_op(x, actors[x].vc, rec->e[i].spans, rec->e[i].n, false, &s, reps, 1,
                            true);
        }
        if (nrep) {
            pthread_mutex_unlock(&mu);
            return refuse(&reps[0]);
        }
    }
    for (int i = 0; i < rec->n; i++) {
        site s = replay_site(&call, &rec->e[i]);
        nrep += check_op(x, actors[x].vc, rec->e[i].spans, rec->e[i].n, false, &s, reps + nrep,
                         MAX_REPORTS_PER_OP - nrep, false);
        record_op(x, -1, rec->e[i].spans, rec->e[i].n, &s);
    }
    pthread_mutex_unlock(&mu);
    deliver_all(reps, nrep, mode);
    return TC_OK;
}

/* ---- lifecycle and the public calls -------------------------------------------- */

static void forget_all(void)
{
    tdestroy(regions, region_free);
    regions = NULL;
    nregions = region_bytes = 0;
    atomic_store(&host_regions, 0);
    tdestroy(events, event_free);
    events = NULL;
    nevents = 0;
    for (int i = 0; i < nactors; i++)
        free(actors[i].vc);
    nactors = 0;
    last_actor = 0;
}

static void set_mode(int mode)
{
    if (mode != TC_SANITIZER_OFF)
        tc__san_install();
    pthread_mutex_lock(&mu);
    if (mode == TC_SANITIZER_OFF)
        forget_all();
    atomic_store(&tc__san_mode, mode);
    pthread_mutex_unlock(&mu);
}

tc_status tc_sanitizer_enable(tc_sanitizer_mode mode)
{
    TC_API_BEGIN;
    TC_CHECK_ARG((unsigned)mode <= TC_SANITIZER_ABORT,
                 "%d is not a mode: TC_SANITIZER_OFF, _REPORT, _ERROR or _ABORT", (int)mode);
    atomic_store(&explicit_mode, true);
    set_mode(mode);
    return TC_OK;
}

void tc__san_from_env(void)
{
    int mode = tc__sanitizer_env_mode();
    if (mode != TC_SANITIZER_OFF && !atomic_load(&explicit_mode))
        set_mode(mode);
}

tc_sanitizer_mode tc_sanitizer_get_mode(void)
{
    return (tc_sanitizer_mode)atomic_load_explicit(&tc__san_mode, memory_order_relaxed);
}

uint64_t tc_sanitizer_report_count(void) { return atomic_load(&report_count); }

tc_status tc_sanitizer_set_callback(tc_sanitizer_callback fn, void *user_data)
{
    TC_API_BEGIN;
    pthread_mutex_lock(&mu);
    callback = fn;
    callback_data = fn ? user_data : NULL;
    pthread_mutex_unlock(&mu);
    return TC_OK;
}

tc_status tc_sanitizer_access(const void *ptr, size_t bytes, tc_stream *stream,
                              tc_sanitizer_access_kind kind, const char *label)
{
    TC_API_BEGIN;
    unsigned k = (unsigned)kind;
    TC_CHECK_ARG((k & ~7u) == 0 && (k & 3u) != 0,
                 "%d is not TC_SANITIZER_READ, _WRITE or _READ_WRITE (or'ed with "
                 "TC_SANITIZER_BY_HOST or not)",
                 (int)kind);
    TC_CHECK_ARG(ptr || bytes == 0, "ptr is NULL but bytes is %zu", bytes);
    if (!tc__san_on() || bytes == 0)
        return TC_OK;
    int dev = TC__SAN_HOST_DEV;
    void *handle = NULL;
    if (!(k & TC_SANITIZER_BY_HOST))
        TC_TRY(tc__dev()->stream_of(stream, &dev, &handle));
    tc__san_span sp;
    tc__san_span_dense(ptr, bytes, TC_UINT8, 0, NULL, (k & TC_SANITIZER_WRITE) != 0, &sp);
    sp.ndim = -1; /* shown as bytes */
    tc__san_what w = {"user kernel", label};
    return tc__san_access(dev, handle, &sp, 1, w, true, false, 0, NULL);
}

size_t tc__san_state_bytes(void)
{
    pthread_mutex_lock(&mu);
    size_t b = sizeof(region) * nregions + region_bytes + sizeof(actor) * (size_t)actors_cap +
               sizeof(uint64_t) * (size_t)vc_cap * (size_t)(nactors + 1);
    /* events: their clocks are at most as long as the actor list */
    b += nevents * (sizeof(evsnap) + sizeof(uint64_t) * (size_t)nactors);
    pthread_mutex_unlock(&mu);
    return b;
}

size_t tc__san_watched(void)
{
    pthread_mutex_lock(&mu);
    size_t n = nregions;
    pthread_mutex_unlock(&mu);
    return n;
}
