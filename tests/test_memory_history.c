/* Memory history on the plain host provider (no GPU): the recorded events
 * match the operations (counts, sizes, order), the ring keeps the newest
 * max_entries, stacks name this test's own functions (the test is linked
 * with -rdynamic), the pickle and the JSON dumps read back in Python's own
 * pickle and json modules and agree (skipped with a message without
 * python3), out-of-memory observers fire once per failure with what was
 * asked, TCUDA_NO_CACHING's allocator keeps nothing cached and its parser is
 * strict, concurrent recording stays consistent, and user memory pools
 * isolate their memory (per thread, nested, in snapshots, destroyed), also
 * with an allocator of their own. The test functions
 * that allocate are extern and kept out of inlining and cloning (HIST_SITE)
 * so that their names are in the stacks in every build type. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory/alloc.h"
#include "memory/alloc_history.h"
#include "memory/alloc_internal.h"
#include "memory/alloc_mempool.h"
#include "base/env.h"
#include "tc_test.h"
#include "tcuda/nvtx.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static tc__host_provider_ctx hctx;
static tc__seg_provider prov;

/* An allocator on a fresh host provider; granularity > 0: expandable. */
static tc__allocator *make_on(size_t capacity, bool no_caching, size_t granularity)
{
    memset(&hctx, 0, sizeof hctx);
    hctx.capacity = capacity;
    hctx.granularity = granularity;
    tc__host_provider_init(&prov, &hctx);
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    cfg.no_caching = no_caching;
    cfg.expandable_segments = granularity > 0;
    tc__allocator *a = NULL;
    CHECK_OK(tc__alloc_create(&prov, &cfg, 0, &a));
    return a;
}

static tc__allocator *make(size_t capacity, bool no_caching)
{
    return make_on(capacity, no_caching, 0);
}

static void record(bool on, tc_history_stacks stacks, size_t max_entries)
{
    tc_memory_history_options o = {on, TC_HISTORY_RECORD_ALL, stacks, max_entries};
    CHECK_OK(tc_memory_record_history(&o));
}

/* Exported (the test is linked with ENABLE_EXPORTS) so that dladdr names them.
 * noinline is not enough: GCC's -O3 (a Release build) clones a function
 * whose callers pass a constant (hist_test_alloc_site.constprop.0, a local
 * symbol dladdr cannot name) and calls the clone, so the stack holds the
 * clone's address; noipa keeps every call on the exported function. */
#if defined(__GNUC__) && !defined(__clang__)
#define HIST_SITE __attribute__((noipa))
#else
#define HIST_SITE __attribute__((noinline))
#endif
void *hist_test_alloc_site(tc__allocator *a, size_t size);
void *hist_test_other_site(tc__allocator *a, size_t size);
HIST_SITE void *hist_test_alloc_site(tc__allocator *a, size_t size)
{
    void *p = NULL;
    CHECK_OK(tc__alloc_malloc(a, size, 1, &p));
    __asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays */
    return p;
}

HIST_SITE void *hist_test_other_site(tc__allocator *a, size_t size)
{
    void *p = NULL;
    CHECK_OK(tc__alloc_malloc(a, size, 2, &p));
    __asm__ volatile("" ::: "memory");
    return p;
}

static void test_events_match(void)
{
    tc__allocator *a = make(0, false);
    record(true, TC_HISTORY_STACKS_ALLOC, 1000);
    void *p = hist_test_alloc_site(a, 1000);    /* small: a 2 MiB segment, 1024 bytes */
    void *q = hist_test_other_site(a, 3 * MiB); /* large: a 20 MiB segment */
    CHECK_OK(tc__alloc_free(a, p));
    void *r = hist_test_alloc_site(a, 1000); /* reuses p's block: no new segment */
    CHECK(r == p);
    CHECK_OK(tc__alloc_free(a, r));
    CHECK_OK(tc__alloc_free(a, q));
    tc__alloc_empty_cache(a);
    tc__hist_copy c;
    CHECK_OK(tc__hist_copy_take(&c));
    static const struct {
        int action;
        size_t size;
    } want[] = {
        {TC__H_SEGMENT_ALLOC, 2 * MiB},
        {TC__H_ALLOC, 1024},
        {TC__H_SEGMENT_ALLOC, 20 * MiB},
        {TC__H_ALLOC, 3 * MiB},
        {TC__H_FREE_REQUESTED, 1024},
        {TC__H_FREE_COMPLETED, 1024},
        {TC__H_ALLOC, 1024},
        {TC__H_FREE_REQUESTED, 1024},
        {TC__H_FREE_COMPLETED, 1024},
        {TC__H_FREE_REQUESTED, 3 * MiB},
        {TC__H_FREE_COMPLETED, 3 * MiB},
        {TC__H_SEGMENT_FREE, 0},
        {TC__H_SEGMENT_FREE, 0},
    };
    size_t nw = sizeof want / sizeof want[0];
    CHECK(c.nev == nw);
    for (size_t i = 0; i < nw && i < c.nev; i++) {
        CHECK(c.ev[i].action == want[i].action);
        if (want[i].size)
            CHECK(c.ev[i].size == want[i].size);
        CHECK(c.ev[i].device == 0);
        if (i > 0)
            CHECK(c.ev[i].time_us >= c.ev[i - 1].time_us);
    }
    if (c.nev == nw) {
        CHECK(c.ev[1].addr == (uintptr_t)p && c.ev[1].requested == 1000 && c.ev[1].stream == 1);
        CHECK(c.ev[3].addr == (uintptr_t)q && c.ev[3].stream == 2);
        CHECK(c.ev[1].stack != 0 && c.ev[3].stack != 0 && c.ev[1].stack != c.ev[3].stack);
        CHECK(c.ev[6].stack != c.ev[1].stack); /* called from another line of this test */
        CHECK(c.ev[4].stack == 0);             /* stacks for allocations only */
        CHECK(c.ev[11].size == 20 * MiB || c.ev[11].size == 2 * MiB);
    }
    tc__hist_copy_free(&c);
    record(false, TC_HISTORY_STACKS_NONE, 0);
    void *s = hist_test_alloc_site(a, 512); /* not recorded */
    CHECK_OK(tc__alloc_free(a, s));
    CHECK_OK(tc__hist_copy_take(&c));
    CHECK(c.nev == nw); /* stopping keeps what was recorded */
    tc__hist_copy_free(&c);
    tc__alloc_destroy(a);
}

static void test_ring_wraps(void)
{
    tc__allocator *a = make(0, false);
    tc_memory_history_options o = {true, TC_HISTORY_RECORD_ALLOC, TC_HISTORY_STACKS_NONE, 8};
    CHECK_OK(tc_memory_record_history(&o));
    void *p[20];
    for (int i = 0; i < 20; i++)
        CHECK_OK(tc__alloc_malloc(a, (size_t)(i + 1) * KiB, 0, &p[i]));
    tc__hist_copy c;
    CHECK_OK(tc__hist_copy_take(&c));
    CHECK(c.nev == 8);
    for (size_t i = 0; i < c.nev; i++) /* the newest eight, oldest first */
        CHECK(c.ev[i].action == TC__H_ALLOC && c.ev[i].requested == (12 + i + 1) * KiB &&
              c.ev[i].addr == (uintptr_t)p[12 + i]);
    tc__hist_copy_free(&c);
    for (int i = 0; i < 20; i++)
        CHECK_OK(tc__alloc_free(a, p[i]));
    CHECK_OK(tc__hist_copy_take(&c));
    CHECK(c.nev == 8 && c.nlive == 0); /* frees are seen, not recorded: no stale stacks */
    tc__hist_copy_free(&c);
    /* a block freed after recording stopped, its address reused: no stack */
    record(true, TC_HISTORY_STACKS_ALLOC, 100);
    void *x = hist_test_alloc_site(a, 3000);
    record(false, TC_HISTORY_STACKS_NONE, 0);
    CHECK_OK(tc__alloc_free(a, x));
    void *y = NULL;
    CHECK_OK(tc__alloc_malloc(a, 3000, 1, &y));
    CHECK(y == x);
    CHECK_OK(tc__hist_copy_take(&c));
    CHECK(tc__hist_copy_live(&c, 0, 0, (uintptr_t)y) == 0);
    CHECK(c.nlive == 1 && c.live[0].kind == 1); /* x's segment (stream 1's), still there */
    tc__hist_copy_free(&c);
    CHECK_OK(tc__alloc_free(a, y));
    tc__alloc_empty_cache(a); /* the segment goes: nothing kept, the hooks are off again */
    CHECK(atomic_load(&tc__hist_mask) == 0);
    tc_memory_history_options bad = {true, 1u << 9, TC_HISTORY_STACKS_NONE, 8};
    CHECK_STATUS(tc_memory_record_history(&bad), TC_ERROR_INVALID_ARGUMENT);
    bad.record = 0;
    bad.stacks = (tc_history_stacks)7;
    CHECK_STATUS(tc_memory_record_history(&bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_memory_record_history(NULL), TC_ERROR_INVALID_ARGUMENT);
    record(false, TC_HISTORY_STACKS_NONE, 0);
    tc__alloc_destroy(a);
}

static bool have_python(void)
{
    return system("python3 -c 'import pickle, json' 2>/dev/null") == 0;
}

/* The checker run in Python: both files load, are equal, and hold what the
 * C side did. */
static const char *py_check =
    "import pickle, json, sys\n"
    "d = pickle.load(open(sys.argv[1], 'rb'))\n"
    "j = json.load(open(sys.argv[2]))\n"
    "assert d == j, 'pickle and json differ'\n"
    "assert set(d) >= {'segments', 'device_traces', 'allocator_settings'}, d.keys()\n"
    "t = d['device_traces'][0]\n"
    "acts = [e['action'] for e in t]\n"
    "assert acts.count('alloc') == 3, acts\n"
    "assert acts.count('free_requested') == 1 and acts.count('free_completed') == 1, acts\n"
    "assert all(set(e) >= {'action', 'addr', 'size', 'stream', 'time_us', 'frames'} for e in t)\n"
    "live = [b for s in d['segments'] for b in s['blocks'] if b['state'] == "
    "'active_allocated']\n"
    "assert sorted(b['requested_size'] for b in live) == [5000, 4 << 20], live\n"
    "names = [f['name'] for b in live for f in b['frames']]\n"
    "assert 'hist_test_alloc_site' in names and 'hist_test_other_site' in names, names\n"
    "big = [b for b in live if b['requested_size'] == 4 << 20][0]\n"
    "assert big['frames'][0]['name'] == 'hist_test_other_site', big['frames'][:3]\n"
    "assert any(e['addr'] >= 2**31 for e in t)\n"
    "print('python: pickle and json agree,', len(t), 'events,', len(d['segments']), "
    "'segments')\n";

static void test_dump_roundtrip(void)
{
    tc__allocator *a = make(0, false);
    record(true, TC_HISTORY_STACKS_ALLOC, 1000);
    void *p = hist_test_alloc_site(a, 5000);
    void *q = hist_test_other_site(a, 4 * MiB);
    void *r = hist_test_alloc_site(a, 100);
    CHECK_OK(tc__alloc_free(a, r));
    char pk[] = "/tmp/tc_hist_XXXXXX", js[64], py[64];
    int fd = mkstemp(pk);
    CHECK(fd >= 0);
    close(fd);
    snprintf(js, sizeof js, "%s.json", pk);
    snprintf(py, sizeof py, "%s.py", pk);
    CHECK_OK(tc_memory_dump_snapshot(pk));
    CHECK_OK(tc_memory_dump_snapshot_json(js));
    CHECK_STATUS(tc_memory_dump_snapshot(""), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_memory_dump_snapshot("/nonexistent/dir/x.pickle"), TC_ERROR_IO);
    char *text = tc_test_read_file(js);
    CHECK(text && strstr(text, "\"device_traces\"") && strstr(text, "hist_test_alloc_site"));
    free(text);
    if (have_python()) {
        FILE *f = fopen(py, "w");
        fputs(py_check, f);
        fclose(f);
        char cmd[256];
        snprintf(cmd, sizeof cmd, "python3 %s %s %s", py, pk, js);
        CHECK(system(cmd) == 0);
    } else {
        printf("python3 not found: the pickle and JSON round trip is skipped\n");
    }
    remove(pk);
    remove(js);
    remove(py);
    CHECK_OK(tc__alloc_free(a, p));
    CHECK_OK(tc__alloc_free(a, q));
    record(false, TC_HISTORY_STACKS_NONE, 0);
    tc__alloc_destroy(a);
}

static int oom_calls;
static tc_oom_info oom_seen;
static size_t oom_segments;
static void on_oom(const tc_oom_info *info, void *ctx)
{
    oom_calls++;
    oom_seen = *info;
    oom_segments = info->snapshot ? info->snapshot->num_segments : 0;
    CHECK(ctx == &oom_calls);
    tc_last_error(); /* the observer may call tcuda */
    int64_t v;
    (void)tc_memory_stats_get(0, "nonsense.key", &v); /* one that fails: the message is kept */
}

static void test_oom_observer(void)
{
    tc__allocator *a = make(24 * MiB, false);
    record(true, TC_HISTORY_STACKS_NONE, 100);
    CHECK_OK(tc_memory_attach_oom_observer(on_oom, &oom_calls));
    void *p = NULL, *q = NULL;
    CHECK_OK(tc__alloc_malloc(a, 12 * MiB, 0, &p));
    CHECK_STATUS(tc__alloc_malloc(a, 16 * MiB, 0, &q), TC_ERROR_OUT_OF_MEMORY);
    CHECK(strstr(tc_last_error(), "out of memory") != NULL);
    CHECK(oom_calls == 1);
    CHECK(oom_seen.device == 0 && oom_seen.requested == 16 * MiB);
    CHECK(oom_seen.total_bytes == 24 * MiB && oom_seen.free_bytes == 12 * MiB);
    CHECK(oom_segments == 1);
    CHECK_STATUS(tc__alloc_malloc(a, 20 * MiB, 0, &q), TC_ERROR_OUT_OF_MEMORY);
    CHECK(oom_calls == 2 && oom_seen.requested == 20 * MiB);
    tc__hist_copy c;
    CHECK_OK(tc__hist_copy_take(&c));
    int nooms = 0;
    for (size_t i = 0; i < c.nev; i++)
        nooms += c.ev[i].action == TC__H_OOM;
    CHECK(nooms == 2);
    tc__hist_copy_free(&c);
    CHECK_OK(tc_memory_detach_oom_observer(on_oom, &oom_calls));
    CHECK_STATUS(tc_memory_detach_oom_observer(on_oom, &oom_calls), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc__alloc_malloc(a, 16 * MiB, 0, &q), TC_ERROR_OUT_OF_MEMORY);
    CHECK(oom_calls == 2);
    CHECK_STATUS(tc_memory_attach_oom_observer(NULL, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc__alloc_free(a, p));
    record(false, TC_HISTORY_STACKS_NONE, 0);
    tc__alloc_destroy(a);
}

static void test_no_caching(void)
{
    tc__allocator *a = make(0, true);
    void *p[6];
    size_t sizes[6] = {100, 1000, 5000, 3 * MiB, 12 * MiB, 700};
    size_t total = 0;
    for (int i = 0; i < 6; i++) {
        CHECK_OK(tc__alloc_malloc(a, sizes[i], 0, &p[i]));
        total += (sizes[i] + 511) / 512 * 512;
    }
    tc_memory_stats_info st;
    tc__alloc_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == (int64_t)total); /* one exact segment each */
    CHECK(st.allocated_bytes[0].current == (int64_t)total);
    CHECK(st.segment[0].current == 6);
    for (int i = 0; i < 6; i += 2)
        CHECK_OK(tc__alloc_free(a, p[i]));
    tc__alloc_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == st.allocated_bytes[0].current);
    CHECK(st.segment[0].current == 3);
    CHECK(hctx.in_use == (size_t)st.reserved_bytes[0].current);
    for (int i = 1; i < 6; i += 2)
        CHECK_OK(tc__alloc_free(a, p[i]));
    tc__alloc_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 0 && hctx.in_use == 0);
    CHECK(st.allocation[0].allocated == 6 && st.allocation[0].freed == 6);
    CHECK(st.num_device_alloc == 6 && st.num_device_free == 6);
    char why[256];
    CHECK(tc__alloc_check(a, why, sizeof why) == 0);
    tc__alloc_destroy(a);
    bool on = false;
    CHECK_OK(tc__parse_no_caching("1", &on));
    CHECK(on);
    CHECK_OK(tc__parse_no_caching("OFF", &on));
    CHECK(!on);
    CHECK_OK(tc__parse_no_caching(NULL, &on));
    CHECK(!on);
    CHECK_STATUS(tc__parse_no_caching("maybe", &on), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "TCUDA_NO_CACHING") != NULL);
}

static tc__allocator *shared_alloc;
static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        void *p = NULL;
        if (tc__alloc_malloc(shared_alloc, 512 + (size_t)(i % 7) * 512, 0, &p) == TC_OK)
            (void)tc__alloc_free(shared_alloc, p);
    }
    return NULL;
}

static void test_threads(void)
{
    shared_alloc = make(0, false);
    tc_memory_history_options o = {true, TC_HISTORY_RECORD_ALLOC | TC_HISTORY_RECORD_FREE,
                                   TC_HISTORY_STACKS_ALL, 100000};
    CHECK_OK(tc_memory_record_history(&o));
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    tc__hist_copy c;
    CHECK_OK(tc__hist_copy_take(&c));
    CHECK(c.nev == 4 * 2000 * 3); /* alloc, free_requested, free_completed */
    int64_t live = 0, bad = 0;
    for (size_t i = 0; i < c.nev; i++) {
        live += c.ev[i].action == TC__H_ALLOC ? 1 : c.ev[i].action == TC__H_FREE_COMPLETED ? -1 : 0;
        bad += live < 0 || c.ev[i].stack == 0;
    }
    CHECK(live == 0 && bad == 0);
    if (c.nstacks > 16)
        printf("%zu stacks\n", c.nstacks);
    CHECK(c.nstacks >= 2 && c.nstacks <= 16); /* 24000 events, a few call sites: interned */
    tc__hist_copy_free(&c);
    record(false, TC_HISTORY_STACKS_NONE, 0);
    tc__alloc_destroy(shared_alloc);
}

static void *other_ptr;
static void *pool_other_thread(void *arg)
{
    tc__allocator *a = arg;
    CHECK_OK(tc__alloc_malloc(a, 1000, 0, &other_ptr)); /* not in the pool: another thread */
    return NULL;
}

static void test_user_pools(void)
{
    tc__allocator *a = make(0, false);
    tc_mempool *outer = NULL, *inner = NULL;
    CHECK_OK(tc__mempool_create_on(a, 0, &outer));
    CHECK_OK(tc__mempool_create_on(a, 0, &inner));
    tc_mempool_stats_info ps, is;
    CHECK_OK(tc_mempool_stats(outer, &ps));
    CHECK_OK(tc_mempool_stats(inner, &is));
    CHECK(ps.id != 0 && ps.id != is.id && ps.segments == 0 && ps.reserved_bytes == 0);
    void *x = NULL, *y = NULL, *z = NULL, *w = NULL;
    CHECK_OK(tc_mempool_use_begin(outer));
    CHECK_OK(tc__alloc_malloc(a, 1000, 0, &x));
    pthread_t t;
    pthread_create(&t, NULL, pool_other_thread, a);
    pthread_join(t, NULL);
    CHECK_OK(tc_mempool_use_begin(inner)); /* nested: the innermost wins */
    CHECK_OK(tc__alloc_malloc(a, 3000, 0, &w));
    CHECK_STATUS(tc_mempool_use_end(outer), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc_mempool_use_end(inner));
    CHECK_STATUS(tc_mempool_destroy(outer), TC_ERROR_INVALID_STATE); /* in use */
    CHECK_OK(tc_mempool_use_end(outer));
    CHECK_OK(tc_mempool_stats(outer, &ps));
    CHECK_OK(tc_mempool_stats(inner, &is));
    CHECK(ps.segments == 1 && ps.reserved_bytes == 2 * MiB && ps.blocks == 1 &&
          ps.allocated_bytes == 1024 && ps.requested_bytes == 1000);
    CHECK(is.segments == 1 && is.blocks == 1 && is.requested_bytes == 3000);
    CHECK_OK(tc__alloc_free(a, x));             /* x's block goes back to the outer's cache */
    CHECK_OK(tc__alloc_malloc(a, 1000, 0, &y)); /* default outer: not x's memory */
    CHECK(y != x);
    CHECK(other_ptr != x && other_ptr != w);
    CHECK_OK(tc_mempool_use_begin(outer));
    CHECK_OK(tc__alloc_malloc(a, 1000, 0, &z)); /* the outer again: x's block */
    CHECK_OK(tc_mempool_use_end(outer));
    CHECK(z == x);
    tc_memory_snapshot_info snap = {0, NULL};
    CHECK_OK(tc__alloc_snapshot(a, &snap));
    int in_pool = 0;
    for (size_t i = 0; i < snap.num_segments; i++)
        in_pool += snap.segments[i].segment_pool_id == ps.id;
    CHECK(in_pool == 1);
    tc__snapshot_free(&snap);
    size_t before = hctx.in_use;
    CHECK_OK(tc_mempool_destroy(outer)); /* z still live: its segment stays */
    CHECK(hctx.in_use == before);
    CHECK_STATUS(tc_mempool_destroy(outer), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_mempool_use_begin(outer), TC_ERROR_INVALID_HANDLE);
    CHECK_OK(tc__alloc_free(a, z));
    tc__alloc_empty_cache(a); /* now its segment goes */
    CHECK(hctx.in_use == before - 2 * MiB);
    CHECK_OK(tc__alloc_free(a, w));
    before = hctx.in_use;
    CHECK_OK(tc_mempool_destroy(inner)); /* wholly free: back at once */
    CHECK(hctx.in_use == before - 2 * MiB);
    CHECK_OK(tc__alloc_free(a, y));
    CHECK_OK(tc__alloc_free(a, other_ptr));
    char why[256];
    CHECK(tc__alloc_check(a, why, sizeof why) == 0);
    tc__alloc_destroy(a);
}

static void test_expandable_events(void)
{
    /* A known capacity bounds the range reserved: with none it would be
     * 1 TiB, which ThreadSanitizer's address space cannot hold. */
    tc__allocator *a = make_on(64 * MiB, false, 2 * MiB);
    record(true, TC_HISTORY_STACKS_NONE, 100);
    void *p = NULL;
    CHECK_OK(tc__alloc_malloc(a, 15 * MiB, 0, &p));
    CHECK_OK(tc__alloc_free(a, p));
    tc__alloc_empty_cache(a);
    tc__hist_copy c;
    CHECK_OK(tc__hist_copy_take(&c));
    size_t mapped = 0, unmapped = 0;
    for (size_t i = 0; i < c.nev; i++) {
        mapped += c.ev[i].action == TC__H_SEGMENT_MAP ? c.ev[i].size : 0;
        unmapped += c.ev[i].action == TC__H_SEGMENT_UNMAP ? c.ev[i].size : 0;
    }
    CHECK(mapped == 16 * MiB && unmapped == mapped);
    tc__hist_copy_free(&c);
    record(false, TC_HISTORY_STACKS_NONE, 0);
    tc__alloc_destroy(a);
}

/* A pool with an allocator of its own, on counting host functions. */
static tc__seg_provider host_base;
static int64_t own_allocs, own_frees;
static int own_user; /* stands for the tc_allocator the pool calls */
static tc_status own_alloc(void *ctx, size_t size, uintptr_t stream, void **out)
{
    own_allocs++;
    return host_base.alloc(ctx, size, stream, out);
}
static void own_free(void *ctx, void *ptr, size_t size)
{
    own_frees++;
    host_base.free(ctx, ptr, size);
}

static void test_own_pool(void)
{
    tc__allocator *a = make(0, false), *own = NULL;
    tc__host_provider_ctx *ctx = calloc(1, sizeof *ctx); /* the pool frees it */
    tc__host_provider_init(&host_base, ctx);
    tc__seg_provider p = host_base;
    p.alloc = own_alloc;
    p.free = own_free;
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    CHECK_OK(tc__alloc_create(&p, &cfg, 0, &own));
    tc_mempool *mp = NULL;
    CHECK_OK(tc__mempool_check_unused(&own_user));
    CHECK_OK(tc__mempool_create_own(own, ctx, &own_user, 0, &mp));
    /* tc_allocator_destroy's check: refused while the pool uses the allocator */
    CHECK_STATUS(tc__mempool_check_unused(&own_user), TC_ERROR_INVALID_STATE);
    CHECK(strstr(tc_last_error(), "in use by 1 memory pool (0 destroyed") != NULL);
    CHECK(tc__mempool_route(0, a) == a);
    CHECK_OK(tc_mempool_use_begin(mp));
    CHECK(tc__mempool_route(0, a) == own && tc__mempool_route(1, a) == a);
    void *x = NULL, *y = NULL;
    CHECK_OK(tc__alloc_malloc(tc__mempool_route(0, a), 5000, 0, &x));
    CHECK_OK(tc_mempool_use_end(mp));
    CHECK(tc__mempool_route(0, a) == a);
    CHECK_OK(tc__alloc_malloc(a, 5000, 0, &y));
    CHECK(own_allocs == 1 && tc__alloc_owns(own, x) && !tc__alloc_owns(a, x));
    CHECK(tc__mempool_owner(x) == own && tc__mempool_owner(y) == NULL);
    tc_mempool_stats_info st;
    CHECK_OK(tc_mempool_stats(mp, &st));
    CHECK(st.blocks == 1 && st.requested_bytes == 5000 && st.reserved_bytes == 2 * MiB);
    CHECK_OK(tc_mempool_destroy(mp)); /* x is live: its allocator stays */
    CHECK(own_frees == 0);
    CHECK_STATUS(tc__mempool_check_unused(&own_user), TC_ERROR_INVALID_STATE);
    CHECK(strstr(tc_last_error(), "(1 destroyed with blocks still live)") != NULL);
    CHECK(!tc__mempool_free_own(y));
    CHECK(tc__mempool_free_own(x)); /* the last block: the allocator goes */
    CHECK(own_frees == 1);
    CHECK_OK(tc__mempool_check_unused(&own_user)); /* now it may be destroyed */
    CHECK(!tc__mempool_free_own(x));
    CHECK_OK(tc__alloc_free(a, y));
    tc__alloc_destroy(a);
}

/* ---- dladdr, counted: the dump names each distinct address once ---------- */

static atomic_int dladdr_calls;
int dladdr(const void *addr, Dl_info *info)
{
    static int (*real)(const void *, Dl_info *);
    if (!real) {
        void *f = dlsym(RTLD_NEXT, "dladdr");
        memcpy(&real, &f, sizeof real);
    }
    atomic_fetch_add(&dladdr_calls, 1);
    return real(addr, info);
}

/* Whether stack `id` of copy c has a frame in function `name`. */
static bool stack_has(const tc__hist_copy *c, uint32_t id, const char *name)
{
    if (!id || id > c->nstacks)
        return false;
    for (size_t i = c->stack_off[id - 1]; i < c->stack_off[id]; i++) {
        Dl_info di;
        if (dladdr(c->frames[i], &di) && di.dli_sname && strcmp(di.dli_sname, name) == 0)
            return true;
    }
    return false;
}

static void test_symbols_once(void)
{
    tc__allocator *a = make(0, false);
    record(true, TC_HISTORY_STACKS_ALL, 10000);
    void *p[200];
    for (int i = 0; i < 200; i++)
        p[i] = hist_test_alloc_site(a, 1000);
    for (int i = 0; i < 200; i++)
        CHECK_OK(tc__alloc_free(a, p[i]));
    tc__hist_copy c;
    CHECK_OK(tc__hist_copy_take(&c));
    size_t nframes = c.nstacks ? c.stack_off[c.nstacks] : 0; /* distinct addresses at most */
    CHECK(c.nev >= 600 && c.nstacks >= 2 && c.nstacks <= 4);
    tc__hist_copy_free(&c);
    char path[] = "/tmp/tc_hist_sym_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    atomic_store(&dladdr_calls, 0);
    CHECK_OK(tc_memory_dump_snapshot_json(path));
    int calls = atomic_load(&dladdr_calls);
    /* 600 events with stacks of ~10 frames: once per distinct address (and
     * one for the library's own base), not once per appearance */
    CHECK(calls > 0 && (size_t)calls <= nframes + 1);
    char *text = tc_test_read_file(path);
    CHECK(text && strstr(text, "hist_test_alloc_site"));
    free(text);
    remove(path);
    record(false, TC_HISTORY_STACKS_NONE, 0);
    tc__alloc_destroy(a);
}

/* Distinct stacks: depth `d` of calls through two functions chosen by the
 * bits of `bits`, then an allocation (and its free). */
void *hist_test_left(tc__allocator *a, unsigned bits, int d);
void *hist_test_right(tc__allocator *a, unsigned bits, int d);
static void *hist_test_step(tc__allocator *a, unsigned bits, int d)
{
    if (d == 0)
        return hist_test_alloc_site(a, 700);
    return (bits & 1) ? hist_test_right(a, bits >> 1, d - 1) : hist_test_left(a, bits >> 1, d - 1);
}
HIST_SITE void *hist_test_left(tc__allocator *a, unsigned bits, int d)
{
    void *p = hist_test_step(a, bits, d);
    __asm__ volatile("" ::: "memory");
    return p;
}
HIST_SITE void *hist_test_right(tc__allocator *a, unsigned bits, int d)
{
    void *p = hist_test_step(a, bits, d);
    __asm__ volatile("" ::: "memory");
    return p;
}

void tc__hist_table_limit(size_t cap);

static void test_stack_table_bounded(void)
{
    tc__allocator *a = make(0, false);
    record(true, TC_HISTORY_STACKS_ALLOC, 16); /* the ring keeps the newest 16 */
    tc__hist_table_limit(32);
    size_t used = 0, capacity = 0, most = 0;
    for (unsigned i = 0; i < 256; i++) { /* 256 distinct stacks */
        void *p = hist_test_step(a, i, 8);
        CHECK_OK(tc__alloc_free(a, p));
        tc__hist_table_usage(&used, &capacity);
        most = used > most ? used : most;
    }
    if (!(capacity == 32 && most <= 32))
        printf("stack table: capacity %zu, most used %zu\n", capacity, most);
    CHECK(capacity == 32 && most <= 32);
    tc__hist_copy c;
    CHECK_OK(tc__hist_copy_take(&c));
    size_t allocs = 0, bad = 0;
    for (size_t i = 0; i < c.nev; i++) {
        if (c.ev[i].action != TC__H_ALLOC)
            continue;
        allocs++;
        bad += !stack_has(&c, c.ev[i].stack, "hist_test_alloc_site") ||
               !(stack_has(&c, c.ev[i].stack, "hist_test_left") ||
                 stack_has(&c, c.ev[i].stack, "hist_test_right"));
        for (size_t j = 0; j < i; j++) /* each a different stack */
            bad += c.ev[j].action == TC__H_ALLOC && c.ev[j].stack == c.ev[i].stack;
    }
    CHECK(allocs >= 5 && bad == 0); /* the newest events kept their stacks */
    tc__hist_copy_free(&c);
    tc__hist_table_limit(0);
    /* the backtrace() fallback gives the same frames as the walk */
    setenv("TCUDA_HISTORY_UNWIND", "backtrace", 1);
    record(true, TC_HISTORY_STACKS_ALLOC, 16);
    void *p = hist_test_step(a, 5, 3);
    CHECK_OK(tc__hist_copy_take(&c));
    CHECK(c.nev >= 1 && stack_has(&c, c.ev[c.nev - 1].stack, "hist_test_right") &&
          stack_has(&c, c.ev[c.nev - 1].stack, "hist_test_left"));
    tc__hist_copy_free(&c);
    /* an unwinder tcuda does not know is refused by name, changing nothing:
     * the events recorded so far stay */
    setenv("TCUDA_HISTORY_UNWIND", "bactrace", 1);
    CHECK_OK(tc__hist_copy_take(&c));
    size_t before = c.nev;
    tc__hist_copy_free(&c);
    tc_memory_history_options o = {true, TC_HISTORY_RECORD_ALL, TC_HISTORY_STACKS_ALLOC, 16};
    CHECK_STATUS(tc_memory_record_history(&o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "TCUDA_HISTORY_UNWIND") != NULL);
    CHECK_OK(tc__hist_copy_take(&c));
    CHECK(c.nev == before);
    tc__hist_copy_free(&c);
    unsetenv("TCUDA_HISTORY_UNWIND");
    CHECK_OK(tc__alloc_free(a, p));
    record(false, TC_HISTORY_STACKS_NONE, 0);
    tc__alloc_destroy(a);
}

/* Stacks are captured without the allocator's lock, and frees take no
 * process-wide lock: a dump stuck on one allocator's mutex (held here by
 * another thread) holds the history's registry and stack table, and
 * allocations and frees on another allocator go on meanwhile. */
static tc__allocator *stuck;
static atomic_int dump_done; /* 1: copied, 2: failed */
static void *dump_thread(void *arg)
{
    (void)arg;
    tc__hist_copy c;
    tc_status st = tc__hist_copy_take(&c);
    if (st == TC_OK)
        tc__hist_copy_free(&c);
    atomic_store(&dump_done, st == TC_OK ? 1 : 2);
    return NULL;
}

static void test_no_global_lock(void)
{
    tc__allocator *a = make(0, false);
    static tc__host_provider_ctx bctx;
    tc__seg_provider bp;
    tc__host_provider_init(&bp, &bctx);
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    CHECK_OK(tc__alloc_create(&bp, &cfg, 1, &stuck));
    record(true, TC_HISTORY_STACKS_ALLOC, 1000);
    void *p[8];
    for (int i = 0; i < 8; i++) /* stacks interned before the dump starts */
        p[i] = hist_test_alloc_site(a, 2000);
    tc__mutex_lock(&a->mu); /* the capture does not need the allocator's lock */
    uint32_t id = tc__hist_capture(atomic_load(&tc__hist_mask), true);
    tc__mutex_unlock(&a->mu);
    CHECK(id != 0);
    tc__hist_stack_put(id);
    tc__mutex_lock(&stuck->mu);
    atomic_store(&dump_done, 0);
    pthread_t t;
    pthread_create(&t, NULL, dump_thread, NULL);
    usleep(100 * 1000);         /* the dump now waits for stuck's mutex, holding its locks */
    for (int i = 0; i < 8; i++) /* frees with live stacks kept, recorded */
        CHECK_OK(tc__alloc_free(a, p[i]));
    record(false, TC_HISTORY_STACKS_NONE, 0); /* not recorded, stacks still forgotten */
    void *q = hist_test_alloc_site(a, 2000);
    CHECK_OK(tc__alloc_free(a, q));
    CHECK(atomic_load(&dump_done) == 0); /* it was stuck all along */
    tc__mutex_unlock(&stuck->mu);
    pthread_join(t, NULL);
    CHECK(atomic_load(&dump_done) == 1);
    tc__alloc_destroy(stuck);
    tc__alloc_destroy(a);
}

/* A dump racing pools whose own allocators come and go (the last free of a
 * destroyed pool destroys its allocator): the dump holds the registry, so no
 * allocator it reads goes away under it (ThreadSanitizer in CI). */
static atomic_int race_stop, race_bad; /* CHECK only on the main thread */
static void *pool_churn(void *arg)
{
    (void)arg;
    for (int i = 0; i < 150; i++) {
        tc__host_provider_ctx *ctx = calloc(1, sizeof *ctx); /* the pool frees it */
        tc__seg_provider p;
        tc__host_provider_init(&p, ctx);
        tc__alloc_config cfg;
        tc__alloc_config_default(&cfg);
        tc__allocator *own = NULL;
        tc_mempool *mp = NULL;
        void *x = NULL;
        if (tc__alloc_create(&p, &cfg, 0, &own) != TC_OK ||
            tc__mempool_create_own(own, ctx, &race_stop, 0, &mp) != TC_OK ||
            tc__alloc_malloc(own, 3000 + (size_t)i, 0, &x) != TC_OK ||
            tc_mempool_destroy(mp) != TC_OK || !tc__mempool_free_own(x)) /* own goes here */
            atomic_fetch_add(&race_bad, 1);
    }
    atomic_store(&race_stop, 1);
    return NULL;
}

static void test_dump_races_pools(void)
{
    record(true, TC_HISTORY_STACKS_ALLOC, 1000);
    char path[] = "/tmp/tc_hist_race_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    atomic_store(&race_stop, 0);
    pthread_t t;
    pthread_create(&t, NULL, pool_churn, NULL);
    int dumps = 0, failed = 0;
    while (!atomic_load(&race_stop) || dumps < 2) {
        failed += tc_memory_dump_snapshot(path) != TC_OK;
        dumps++;
    }
    pthread_join(t, NULL);
    CHECK(failed == 0 && atomic_load(&race_bad) == 0);
    CHECK_OK(tc_memory_dump_snapshot_json(path));
    char *text = tc_test_read_file(path);
    CHECK(text && strstr(text, "\"device_traces\"")); /* the gone allocators' events stay */
    free(text);
    remove(path);
    record(false, TC_HISTORY_STACKS_NONE, 0);
}

/* TCUDA_NO_CACHING frees just the freed block's segment: another block
 * still waiting for its stream is not waited for, nor its segment given
 * back, until its own use completes. */
static int fake_done; /* events complete when set */
static int64_t fake_syncs;
static void *nc_record(void *ctx, uintptr_t stream)
{
    (void)ctx, (void)stream;
    return malloc(1);
}
static int nc_query(void *ctx, void *ev)
{
    (void)ctx, (void)ev;
    return fake_done;
}
static void nc_sync(void *ctx, void *ev)
{
    (void)ctx, (void)ev;
    fake_syncs++;
}
static void nc_destroy(void *ctx, void *ev)
{
    (void)ctx;
    free(ev);
}

static void test_no_caching_one_segment(void)
{
    memset(&hctx, 0, sizeof hctx);
    tc__host_provider_init(&prov, &hctx);
    prov.event_record = nc_record;
    prov.event_query = nc_query;
    prov.event_sync = nc_sync;
    prov.event_destroy = nc_destroy;
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    cfg.no_caching = true;
    tc__allocator *a = NULL;
    CHECK_OK(tc__alloc_create(&prov, &cfg, 0, &a));
    fake_done = 0;
    fake_syncs = 0;
    void *x = NULL, *y = NULL, *z = NULL;
    CHECK_OK(tc__alloc_malloc(a, 5000, 1, &x));
    CHECK_OK(tc__alloc_malloc(a, 7000, 1, &y));
    CHECK_OK(tc__alloc_malloc(a, 9000, 1, &z));
    CHECK_OK(tc__alloc_record_stream(a, x, 2));
    CHECK_OK(tc__alloc_free(a, x)); /* pending on stream 2: its segment stays */
    CHECK(hctx.frees == 0 && hctx.in_use == 5120 + 7168 + 9216);
    CHECK_OK(tc__alloc_free(a, y)); /* y's segment alone goes; x is not waited for */
    CHECK(hctx.frees == 1 && hctx.in_use == 5120 + 9216 && fake_syncs == 0);
    fake_done = 1; /* x's stream is done: its segment goes at the next call */
    CHECK_OK(tc__alloc_free(a, z));
    void *w = NULL;
    CHECK_OK(tc__alloc_malloc(a, 100, 1, &w));
    CHECK(hctx.frees == 3 && hctx.in_use == 512 && fake_syncs == 0);
    CHECK_OK(tc__alloc_free(a, w));
    CHECK(hctx.in_use == 0);
    tc_memory_stats_info st;
    tc__alloc_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 0 && st.segment[0].current == 0);
    char why[256];
    CHECK(tc__alloc_check(a, why, sizeof why) == 0);
    tc__alloc_destroy(a);
}

/* ---- the notes: user metadata, annotations, PyTorch 2.11's keys -------------- */

/* The metadata string of each event of c with `action`, in order, joined by
 * commas into buf. */
static void metas_of(const tc__hist_copy *c, int action, char *buf, size_t n)
{
    buf[0] = '\0';
    bool first = true;
    for (size_t i = 0; i < c->nev; i++)
        if (c->ev[i].action == action) {
            size_t l = strlen(buf);
            snprintf(buf + l, n - l, "%s%s", first ? "" : ",",
                     tc__hist_copy_meta(c, c->ev[i].meta));
            first = false;
        }
}

static void test_metadata(void)
{
    tc__allocator *a = make(0, false);
    record(true, TC_HISTORY_STACKS_NONE, 1000);
    char got[64];
    CHECK_OK(tc_memory_get_history_metadata(got, sizeof got));
    CHECK(strcmp(got, "") == 0);
    void *p, *q;
    CHECK_OK(tc_memory_set_history_metadata("a"));
    CHECK_OK(tc__alloc_malloc(a, 1000, 0, &p));
    CHECK_OK(tc_memory_set_history_metadata("b"));
    CHECK_OK(tc__alloc_malloc(a, 3000, 0, &q));
    CHECK_OK(tc_memory_set_history_metadata(""));
    CHECK_OK(tc__alloc_free(a, p));
    /* refused: NULL, 4097 bytes; nothing changes */
    CHECK_OK(tc_memory_set_history_metadata("b"));
    static char big[4098];
    memset(big, 'x', 4097);
    CHECK_STATUS(tc_memory_set_history_metadata(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_memory_set_history_metadata(big), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "4096") != NULL);
    CHECK_OK(tc_memory_get_history_metadata(got, sizeof got));
    CHECK(strcmp(got, "b") == 0);
    CHECK_STATUS(tc_memory_get_history_metadata(got, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_memory_get_history_metadata(NULL, 8), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc__alloc_free(a, q)); /* "b" again: the same string, one entry */
    tc__hist_copy c;
    CHECK_OK(tc__hist_copy_take(&c));
    char buf[256];
    metas_of(&c, TC__H_ALLOC, buf, sizeof buf);
    CHECK(strcmp(buf, "a,b") == 0);
    metas_of(&c, TC__H_FREE_REQUESTED, buf, sizeof buf);
    CHECK(strcmp(buf, ",b") == 0);
    metas_of(&c, TC__H_SEGMENT_ALLOC, buf, sizeof buf);
    CHECK(strcmp(buf, "a") == 0);                       /* the segment came with p */
    CHECK(c.nmeta == 3);                                /* "a" and "b" once each (slot 0 is "") */
    CHECK(strcmp(tc__hist_copy_meta(&c, 99), "") == 0); /* ids past the table: "" */
    tc__hist_copy_free(&c);
    /* 4096 bytes are taken; a restart keeps only the current string */
    big[4096] = '\0';
    CHECK_OK(tc_memory_set_history_metadata(big));
    CHECK_OK(tc_memory_set_history_metadata("keep"));
    record(true, TC_HISTORY_STACKS_NONE, 1000);
    CHECK_OK(tc__alloc_malloc(a, 1000, 0, &p));
    CHECK_OK(tc__hist_copy_take(&c));
    metas_of(&c, TC__H_ALLOC, buf, sizeof buf);
    CHECK(strcmp(buf, "keep") == 0 && c.nmeta == 2);
    tc__hist_copy_free(&c);
    CHECK_OK(tc_memory_set_history_metadata(""));
    CHECK_OK(tc__alloc_free(a, p));
    record(false, TC_HISTORY_STACKS_NONE, 0);
    tc__alloc_destroy(a);
}

/* c's annotations as "S:name" / "E:name", joined by commas into buf; every
 * one on device 0, in time order (false otherwise). */
static bool notes_of(const tc__hist_copy *c, char *buf, size_t n)
{
    bool ok = true;
    buf[0] = '\0';
    for (size_t i = 0; i < c->nnotes; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "%s%c:%s", l ? "," : "", c->notes[i].start ? 'S' : 'E',
                 c->notes[i].name);
        ok = ok && c->notes[i].device == 0 &&
             (i == 0 || c->notes[i].time_us >= c->notes[i - 1].time_us);
    }
    return ok;
}

static void test_annotations(void)
{
    char buf[512];
    tc__hist_copy c;
    int d = -1;
    CHECK_OK(tc_nvtx_range_push("before", &d)); /* opened while not recording */
    CHECK(d == 0);
    record(true, TC_HISTORY_STACKS_NONE, 1000);
    CHECK_OK(tc_nvtx_range_push("outer", &d));
    CHECK(d == 1);
    CHECK_OK(tc_nvtx_range_push("inner", &d));
    CHECK_OK(tc_nvtx_range_pop(&d));
    CHECK(d == 2);
    CHECK_OK(tc_nvtx_range_pop(&d));
    CHECK(d == 1);
    CHECK_OK(tc_nvtx_range_pop(&d)); /* "before": no END without its START */
    CHECK(d == 0);
    CHECK_STATUS(tc_nvtx_range_pop(&d), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc__hist_copy_take(&c));
    CHECK(notes_of(&c, buf, sizeof buf));
    CHECK(strcmp(buf, "S:outer,S:inner,E:inner,E:outer") == 0);
    tc__hist_copy_free(&c);
    /* a range open when recording stops records no END; ranges while off add
     * nothing, and stopping keeps what was recorded */
    CHECK_OK(tc_nvtx_range_push("cut", NULL));
    record(false, TC_HISTORY_STACKS_NONE, 0);
    CHECK_OK(tc_nvtx_range_pop(NULL));
    CHECK_OK(tc_nvtx_range_push("off", NULL));
    CHECK_OK(tc_nvtx_range_pop(NULL));
    CHECK_OK(tc__hist_copy_take(&c));
    CHECK(notes_of(&c, buf, sizeof buf));
    CHECK(strcmp(buf, "S:outer,S:inner,E:inner,E:outer,S:cut") == 0);
    tc__hist_copy_free(&c);
    /* a restart clears them; the ring keeps the newest max_entries */
    record(true, TC_HISTORY_STACKS_NONE, 3);
    const char *names[] = {"r0", "r1", "r2"};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(tc_nvtx_range_push(names[i], NULL));
        CHECK_OK(tc_nvtx_range_pop(NULL));
    }
    CHECK_OK(tc__hist_copy_take(&c));
    CHECK(c.nnotes == 3 && notes_of(&c, buf, sizeof buf));
    CHECK(strcmp(buf, "E:r1,S:r2,E:r2") == 0);
    tc__hist_copy_free(&c);
    /* deep nesting grows the thread's stack of names, and pops match */
    record(true, TC_HISTORY_STACKS_NONE, 1000);
    char nm[16];
    for (int i = 0; i < 40; i++) {
        snprintf(nm, sizeof nm, "n%d", i);
        CHECK_OK(tc_nvtx_range_push(nm, NULL));
    }
    for (int i = 0; i < 40; i++)
        CHECK_OK(tc_nvtx_range_pop(NULL));
    CHECK_OK(tc__hist_copy_take(&c));
    CHECK(c.nnotes == 80 && strcmp(c.notes[40].name, "n39") == 0 && !c.notes[40].start &&
          strcmp(c.notes[79].name, "n0") == 0 && !c.notes[79].start);
    tc__hist_copy_free(&c);
    record(false, TC_HISTORY_STACKS_NONE, 0);
}

/* Threads open and close ranges while others set metadata, allocate and take
 * copies: the ring stays bounded, every note is whole, nothing leaks (ASan). */
static atomic_int notes_stop, churn_failures; /* CHECK's counters are the main thread's */
static void *range_churn(void *arg)
{
    char nm[32];
    snprintf(nm, sizeof nm, "t%d", (int)(intptr_t)arg);
    while (!atomic_load(&notes_stop)) {
        if (tc_nvtx_range_push(nm, NULL) != TC_OK || tc_nvtx_range_push("in", NULL) != TC_OK ||
            tc_nvtx_range_pop(NULL) != TC_OK || tc_nvtx_range_pop(NULL) != TC_OK)
            atomic_fetch_add(&churn_failures, 1);
    }
    return NULL;
}

static void test_notes_threads(void)
{
    tc__allocator *a = make(0, false);
    record(true, TC_HISTORY_STACKS_NONE, 64);
    atomic_store(&notes_stop, 0);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, range_churn, (void *)(intptr_t)i);
    size_t bad = 0;
    for (int k = 0; k < 300; k++) {
        char m[16];
        snprintf(m, sizeof m, "m%d", k % 7);
        CHECK_OK(tc_memory_set_history_metadata(m));
        void *p;
        CHECK_OK(tc__alloc_malloc(a, 4096, 0, &p));
        CHECK_OK(tc__alloc_free(a, p));
        if (k == 150)
            record(true, TC_HISTORY_STACKS_NONE, 64); /* a restart among them */
        tc__hist_copy c;
        CHECK_OK(tc__hist_copy_take(&c));
        bad += c.nnotes > 64;
        for (size_t i = 0; i < c.nnotes; i++)
            bad += !c.notes[i].name || (c.notes[i].name[0] != 't' && strcmp(c.notes[i].name, "in"));
        for (size_t i = 0; i < c.nev; i++)
            bad += tc__hist_copy_meta(&c, c.ev[i].meta)[0] != 'm';
        tc__hist_copy_free(&c);
    }
    atomic_store(&notes_stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CHECK(bad == 0);
    CHECK(atomic_load(&churn_failures) == 0);
    CHECK_OK(tc_memory_set_history_metadata(""));
    record(false, TC_HISTORY_STACKS_NONE, 0);
    tc__alloc_destroy(a);
}

/* The dump holds PyTorch 2.11's keys with the values of the settings given. */
static const char *py_keys =
    "import pickle, json, sys\n"
    "d = pickle.load(open(sys.argv[1], 'rb'))\n"
    "j = json.load(open(sys.argv[2]))\n"
    "assert d == j, 'pickle and json differ'\n"
    "assert list(d) == ['segments', 'device_traces', 'allocator_settings', "
    "'external_annotations'], list(d)\n"
    "t = d['device_traces'][0]\n"
    "assert all(e['compile_context'] == 'N/A' and 'user_metadata' in e for e in t), t\n"
    "ooms = [e for e in t if e['action'] == 'oom']\n"
    "assert len(ooms) == 1 and 'addr' not in ooms[0], ooms\n"
    "assert ooms[0]['device_free'] == 12 << 20 and ooms[0]['size'] == 16 << 20, ooms\n"
    "assert all('addr' in e and 'device_free' not in e for e in t if e['action'] != 'oom')\n"
    "assert [e['user_metadata'] for e in t if e['action'] == 'alloc'] == ['phase=fwd'], t\n"
    "s = d['allocator_settings']\n"
    "want = {'PYTORCH_CUDA_ALLOC_CONF': sys.argv[3], 'max_split_size': 256 << 20,\n"
    "        'garbage_collection_threshold': 0.8, 'expandable_segments': False,\n"
    "        'pinned_num_register_threads': 1, 'release_lock_on_cudamalloc': False,\n"
    "        'pinned_use_cuda_host_register': False,\n"
    "        'graph_capture_record_stream_reuse': False,\n"
    "        'roundup_power2_divisions': {str(1 << i): 1 if i <= 8 else 2 if i == 9 else 8\n"
    "                                     for i in range(16)},\n"
    "        'no_caching': False, 'backend': 'native'}\n"
    "assert s == want, (s, want)\n"
    "a = d['external_annotations']\n"
    "assert [(x['name'], x['stage'], x['device']) for x in a] == "
    "[('step', 'START', 0), ('step', 'END', 0)], a\n"
    "assert all(set(x) == {'name', 'stage', 'device', 'time_us'} for x in a), a\n"
    "assert a[0]['time_us'] <= a[1]['time_us'], a\n"
    "print('python: PyTorch 2.11 keys present,', len(t), 'events')\n";

static void test_torch_keys(void)
{
    const char *conf = "roundup_power2_divisions:[256:1,512:2,>:8],max_split_size_mb:256,"
                       "garbage_collection_threshold:0.8";
    setenv("TCUDA_ALLOC_CONF", conf, 1);
    memset(&hctx, 0, sizeof hctx);
    hctx.capacity = 24 * MiB;
    tc__host_provider_init(&prov, &hctx);
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    CHECK_OK(tc__alloc_config_parse(conf, &cfg));
    tc__allocator *a = NULL;
    CHECK_OK(tc__alloc_create(&prov, &cfg, 0, &a));
    record(true, TC_HISTORY_STACKS_NONE, 1000);
    CHECK_OK(tc_nvtx_range_push("step", NULL));
    CHECK_OK(tc_memory_set_history_metadata("phase=fwd"));
    void *p = NULL, *q = NULL;
    CHECK_OK(tc__alloc_malloc(a, 12 * MiB, 0, &p));
    CHECK_STATUS(tc__alloc_malloc(a, 16 * MiB, 0, &q), TC_ERROR_OUT_OF_MEMORY);
    CHECK_OK(tc_memory_set_history_metadata(""));
    CHECK_OK(tc_nvtx_range_pop(NULL));
    char pk[] = "/tmp/tc_keys_XXXXXX", js[64], py[64];
    int fd = mkstemp(pk);
    CHECK(fd >= 0);
    close(fd);
    snprintf(js, sizeof js, "%s.json", pk);
    snprintf(py, sizeof py, "%s.py", pk);
    CHECK_OK(tc_memory_dump_snapshot(pk));
    CHECK_OK(tc_memory_dump_snapshot_json(js));
    char *text = tc_test_read_file(js);
    CHECK(text && strstr(text, "\"device_free\": 12582912") &&
          strstr(text, "\"external_annotations\": [{\"name\": \"step\",\"stage\": \"START\"") &&
          strstr(text, "\"512\": 2,\"1024\": 8"));
    free(text);
    if (have_python()) {
        FILE *f = fopen(py, "w");
        fputs(py_keys, f);
        fclose(f);
        char cmd[512];
        snprintf(cmd, sizeof cmd, "python3 %s %s %s '%s'", py, pk, js, conf);
        CHECK(system(cmd) == 0);
    } else {
        printf("python3 not found: the check of PyTorch's keys is skipped\n");
    }
    remove(pk);
    remove(js);
    remove(py);
    unsetenv("TCUDA_ALLOC_CONF");
    CHECK_OK(tc__alloc_free(a, p));
    record(false, TC_HISTORY_STACKS_NONE, 0);
    tc__alloc_destroy(a);
}

int main(void)
{
    tc_test_init();
    test_events_match();
    test_ring_wraps();
    test_dump_roundtrip();
    test_oom_observer();
    test_no_caching();
    test_threads();
    test_user_pools();
    test_expandable_events();
    test_own_pool();
    test_symbols_once();
    test_stack_table_bounded();
    test_no_global_lock();
    test_dump_races_pools();
    test_no_caching_one_segment();
    test_metadata();
    test_annotations();
    test_notes_threads();
    test_torch_keys();
    return TC_TEST_DONE();
}
