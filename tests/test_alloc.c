/* The caching allocator's algorithm on the plain host provider: rounding,
 * pools, split and merge, max-split and power-of-two rules, GC threshold,
 * fraction cap, private pools, stream reuse with fake events, config errors,
 * expandable segments, no waits for the GPU on the allocation path, and an
 * invariant check after every step of a long random sequence (10^6 steps;
 * TC_ALLOC_STEPS overrides, e.g. under ASan). The fake GPU: each stream's
 * queued work ends at fake_stamp[stream], done once fake_clock reaches it;
 * an event sync moves the clock there (a wait), and the provider's free and
 * unmap are wrapped to count waits and to catch memory given back while
 * queued work may still use it. */
#include <inttypes.h>
#include <stdlib.h>

#include "memory/alloc.h"
#include "tc_test.h"

#define MiB ((size_t)1 << 20)

static tc__host_provider_ctx hctx;
static tc__seg_provider prov;

/* Fake events: an event is "done" once fake_clock passes its stamp. */
static uint64_t fake_clock, fake_stamp[8]; /* per stream id 1..7: last work */
static int fake_live;
static void *ev_record(void *ctx, uintptr_t stream)
{
    (void)tc__host_stream_touch(ctx, stream); /* counts a record on a stream gone */
    uint64_t *e = malloc(sizeof *e);
    *e = fake_stamp[stream & 7];
    fake_live++;
    return e;
}
static int ev_query(void *ctx, void *e)
{
    (void)ctx;
    return *(uint64_t *)e <= fake_clock;
}
static int64_t fake_waits; /* event syncs and plain frees: the host waited */
static void ev_sync(void *ctx, void *e)
{
    (void)ctx;
    fake_waits++;
    if (*(uint64_t *)e > fake_clock)
        fake_clock = *(uint64_t *)e;
}

/* Memory freed by the program whose queued work ends at `stamp`: giving it
 * back to the device before fake_clock reaches the stamp is unsafe. */
static struct inflight {
    uintptr_t addr;
    size_t size;
    uint64_t stamp;
} * infl;
static size_t ninfl, cap_infl;
static int64_t unsafe_unmaps;
static void inflight_add(void *p, size_t size, uint64_t stamp)
{
    size_t k = 0;
    for (size_t i = 0; i < ninfl; i++) /* drop what completed */
        if (infl[i].stamp > fake_clock)
            infl[k++] = infl[i];
    ninfl = k;
    if (stamp <= fake_clock)
        return;
    if (ninfl == cap_infl) {
        cap_infl = cap_infl ? 2 * cap_infl : 64;
        infl = realloc(infl, cap_infl * sizeof *infl);
    }
    infl[ninfl++] = (struct inflight){(uintptr_t)p, size, stamp};
}
static void (*host_free_fn)(void *, void *, size_t);
static void (*host_unmap_fn)(void *, void *, size_t);
static void wrap_free(void *ctx, void *p, size_t size)
{
    fake_waits++; /* cudaFree waits for the device */
    host_free_fn(ctx, p, size);
}
static void wrap_unmap(void *ctx, void *p, size_t size)
{
    uintptr_t lo = (uintptr_t)p, hi = lo + size;
    for (size_t i = 0; i < ninfl; i++)
        if (infl[i].stamp > fake_clock && infl[i].addr < hi && lo < infl[i].addr + infl[i].size)
            unsafe_unmaps++;
    host_unmap_fn(ctx, p, size);
}
static void ev_destroy(void *ctx, void *e)
{
    (void)ctx;
    fake_live--;
    free(e);
}

static tc__allocator *mk(const char *conf, size_t capacity, size_t gran)
{
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    if (conf && tc__alloc_config_parse(conf, &cfg) != TC_OK) {
        printf("config %s: %s\n", conf, tc_last_error());
        return NULL;
    }
    memset(&hctx, 0, sizeof hctx);
    fake_waits = 0;
    hctx.capacity = capacity;
    hctx.granularity = gran;
    tc__host_provider_init(&prov, &hctx);
    prov.event_record = ev_record;
    prov.event_query = ev_query;
    prov.event_sync = ev_sync;
    prov.event_destroy = ev_destroy;
    host_free_fn = prov.free;
    prov.free = wrap_free;
    if (prov.unmap) {
        host_unmap_fn = prov.unmap;
        prov.unmap = wrap_unmap;
    }
    tc__allocator *a = NULL;
    tc__alloc_create(&prov, &cfg, 0, &a);
    return a;
}

static int64_t S(tc__allocator *a, const char *key)
{
    tc_memory_stats_info s;
    tc__alloc_stats(a, &s);
    int64_t v = -1;
    CHECK(tc__stats_get(&s, key, &v));
    return v;
}

static void sound(tc__allocator *a)
{
    char why[256];
    int bad = tc__alloc_check(a, why, sizeof why);
    if (bad)
        printf("invariant: %s\n", why);
    CHECK(!bad);
}

static void test_rounding_pools(void)
{
    tc__allocator *a = mk(NULL, 0, 0);
    void *p, *q;
    CHECK_OK(tc__alloc_malloc(a, 1, 1, &p));
    CHECK(S(a, "allocated_bytes.all.current") == 512);
    CHECK(S(a, "requested_bytes.all.current") == 1);
    CHECK(S(a, "reserved_bytes.small_pool.current") == (int64_t)(2 * MiB));
    CHECK_OK(tc__alloc_malloc(a, 513, 1, &q));
    CHECK((uintptr_t)q == (uintptr_t)p + 512); /* split from the same segment */
    CHECK(S(a, "allocated_bytes.all.current") == 1536);
    CHECK_OK(tc__alloc_free(a, p));
    CHECK_OK(tc__alloc_free(a, q));
    CHECK(S(a, "inactive_split.all.current") == 0); /* merged back whole */
    void *l;
    CHECK_OK(tc__alloc_malloc(a, MiB + 1, 1, &l));
    CHECK(S(a, "reserved_bytes.large_pool.current") == (int64_t)(20 * MiB));
    CHECK_OK(tc__alloc_free(a, l));
    CHECK_OK(tc__alloc_malloc(a, 25 * MiB + 7, 1, &l)); /* own segment, 2 MiB multiple */
    /* the 20 MiB and 2 MiB segments sit wholly free, but giving them back
     * would wait for the GPU: they stay until empty_cache */
    CHECK(S(a, "segment.large_pool.current") == 2);
    CHECK(S(a, "reserved_bytes.large_pool.current") == (int64_t)(46 * MiB));
    CHECK(S(a, "reserved_bytes.small_pool.current") == (int64_t)(2 * MiB));
    CHECK(S(a, "num_device_free") == 0 && S(a, "num_device_synchronize") == 0);
    CHECK_OK(tc__alloc_free(a, l));
    CHECK_STATUS(tc__alloc_free(a, (char *)l + 512), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc__alloc_free(a, l), TC_ERROR_INVALID_ARGUMENT); /* double free */
    sound(a);
    tc__alloc_empty_cache(a);
    CHECK(S(a, "reserved_bytes.all.current") == 0);
    CHECK(hctx.in_use == 0);
    CHECK(S(a, "num_device_alloc") == 3 && S(a, "num_device_free") == 3);
    CHECK(S(a, "num_device_synchronize") == 3); /* three cudaFrees */
    tc__alloc_destroy(a);
}

static void test_split_merge_bestfit(void)
{
    tc__allocator *a = mk(NULL, 0, 0);
    void *p[6];
    for (int i = 0; i < 6; i++)
        CHECK_OK(tc__alloc_malloc(a, 2 * MiB, 1, &p[i])); /* six in a 20 MiB segment */
    CHECK(S(a, "segment.all.current") == 1);
    CHECK_OK(tc__alloc_free(a, p[1]));
    CHECK_OK(tc__alloc_free(a, p[3]));
    CHECK_OK(tc__alloc_free(a, p[4]));              /* merges with p[3] */
    CHECK(S(a, "inactive_split.all.current") == 3); /* p1, p3+p4, tail */
    void *q;
    CHECK_OK(tc__alloc_malloc(a, 2 * MiB, 1, &q)); /* best fit: the 2 MiB hole */
    CHECK(q == p[1]);
    CHECK_OK(tc__alloc_malloc(a, 3 * MiB, 1, &q)); /* next: the 4 MiB hole */
    CHECK(q == p[3]);
    sound(a);
    tc__alloc_destroy(a);
}

static void test_max_split_and_power2(void)
{
    tc__allocator *a = mk("max_split_size_mb:30", 0, 0);
    void *big, *s, *f;
    CHECK_OK(tc__alloc_malloc(a, 40 * MiB, 1, &big));
    CHECK(S(a, "oversize_allocations.current") == 1 && S(a, "oversize_segments.current") == 1);
    CHECK_OK(tc__alloc_malloc(a, 14 * MiB, 1, &f));
    CHECK_OK(tc__alloc_free(a, big));
    CHECK_OK(tc__alloc_free(a, f));
    CHECK_OK(tc__alloc_malloc(a, 12 * MiB, 1, &s)); /* must not split the 40 MiB block */
    CHECK(s == f);
    CHECK(S(a, "segment.all.current") == 2);
    CHECK_OK(tc__alloc_free(a, s));
    CHECK_OK(tc__alloc_malloc(a, 36 * MiB, 1, &s)); /* oversize reuse within 20 MiB: ok */
    CHECK(s == big);
    CHECK(S(a, "allocated_bytes.all.current") == (int64_t)(40 * MiB)); /* not split */
    CHECK(S(a, "max_split_size") == (int64_t)(30 * MiB));
    sound(a);
    tc__alloc_destroy(a);

    a = mk("roundup_power2_divisions:4", 0, 0);
    CHECK_OK(tc__alloc_malloc(a, 1200 * 1024, 1, &s)); /* 1.17 MiB -> 1.25 MiB */
    CHECK(S(a, "allocated_bytes.all.current") == (int64_t)(1280 * 1024));
    CHECK_OK(tc__alloc_free(a, s));
    CHECK_OK(tc__alloc_malloc(a, 1000, 1, &s)); /* small sizes: 512 rounding */
    CHECK(S(a, "allocated_bytes.all.current") == 1024);
    tc__alloc_destroy(a);

    /* PyTorch's reading: below 4 MiB 1 (the first entry's interval [2, 4)
     * MiB and every one below it), [4, 8) MiB left 0, [8, 16) MiB quarters,
     * larger eighths; 0 and 1 both mean plain 512-byte rounding */
    a = mk("roundup_power2_divisions:[2:1,8:4,>:8]", 0, 0);
    static const size_t ask[][2] = {
        {1200 * 1024, 1200 * 1024},   /* plain 512 rounding */
        {2 * MiB - 1, 2 * MiB},       /* still plain */
        {5 * MiB + 1, 5 * MiB + 512}, /* [4, 8) MiB is left at 0: plain */
        {8 * MiB, 8 * MiB},           /* a power of two stays */
        {9 * MiB, 10 * MiB},          /* quarters of 8 MiB: 2 MiB steps */
        {10 * MiB + 1, 12 * MiB},     {100 * MiB + 1, 104 * MiB}, /* eighths of 64 MiB */
    };
    for (size_t i = 0; i < sizeof ask / sizeof *ask; i++) {
        CHECK_OK(tc__alloc_malloc(a, ask[i][0], 1, &s));
        if (S(a, "allocated_bytes.all.current") != (int64_t)ask[i][1])
            printf("roundup list: %zu -> %" PRId64 ", want %zu\n", ask[i][0],
                   S(a, "allocated_bytes.all.current"), ask[i][1]);
        CHECK(S(a, "allocated_bytes.all.current") == (int64_t)ask[i][1]);
        CHECK_OK(tc__alloc_free(a, s));
    }
    sound(a);
    tc__alloc_destroy(a);
}

/* Growing past the most ever reserved gives no plain segment back (cudaFree
 * would wait for the GPU): only empty_cache, the OOM retry and the GC
 * threshold do, and each such wait is counted. */
static void test_no_wait_before_grow(void)
{
    tc__allocator *a = mk(NULL, 0, 0);
    void *p, *x, *y, *q;
    CHECK_OK(tc__alloc_malloc(a, 110 * MiB, 1, &p)); /* sets the most ever reserved */
    CHECK_OK(tc__alloc_free(a, p));
    tc__alloc_empty_cache(a);
    CHECK(S(a, "reserved_bytes.all.current") == 0);
    CHECK(S(a, "num_device_synchronize") == 1 && fake_waits == 1);
    CHECK_OK(tc__alloc_malloc(a, 50 * MiB, 1, &x)); /* own segment */
    CHECK_OK(tc__alloc_malloc(a, 2 * MiB, 1, &y));  /* a 20 MiB shared one */
    CHECK_OK(tc__alloc_free(a, x));
    CHECK_OK(tc__alloc_free(a, y));
    /* 52 MiB fits neither; 70 + 52 passes 110, and the free segments stay */
    CHECK_OK(tc__alloc_malloc(a, 52 * MiB, 1, &q));
    CHECK(S(a, "num_device_free") == 1 && fake_waits == 1);
    CHECK(S(a, "reserved_bytes.all.current") == (int64_t)(122 * MiB));
    CHECK(S(a, "segment.all.current") == 3);
    CHECK_OK(tc__alloc_free(a, q));
    tc__alloc_empty_cache(a);
    CHECK(S(a, "reserved_bytes.all.current") == 0 && hctx.in_use == 0);
    CHECK(S(a, "num_device_synchronize") == 4 && fake_waits == 4);
    sound(a);
    tc__alloc_destroy(a);
}

/* Expandable segments under pressure unmap only chunks whose last use is
 * known complete (a fence on their stream has been seen done), never waiting
 * for the GPU; what is still in use on the GPU goes once its work is done. */
static void test_expandable_fences(void)
{
    tc__allocator *a = mk("expandable_segments:True", 1024 * MiB, 2 * MiB);
    void *p[3], *big, *more;
    for (int i = 0; i < 3; i++)
        CHECK_OK(tc__alloc_malloc(a, 8 * MiB, 1, &p[i]));
    fake_stamp[1] = fake_clock + 10; /* stream 1: kernels still read p[1] */
    inflight_add(p[1], 8 * MiB, fake_stamp[1]);
    CHECK_OK(tc__alloc_free(a, p[1]));
    /* 16 MiB more at the end passes the 1/16 slack over the 24 MiB in use,
     * but the hole's last use has not completed: it stays mapped, nothing
     * waits, and reserved grows instead */
    CHECK_OK(tc__alloc_malloc(a, 16 * MiB, 1, &big));
    CHECK(S(a, "reserved_bytes.all.current") == (int64_t)(40 * MiB));
    CHECK(fake_waits == 0 && S(a, "num_device_synchronize") == 0 && unsafe_unmaps == 0);
    sound(a);
    fake_clock += 20; /* the GPU caught up: the fence recorded then is done */
    CHECK_OK(tc__alloc_malloc(a, 8 * MiB, 1, &more));
    CHECK(hctx.in_use == 40 * MiB); /* the hole went back, the new 8 MiB came */
    CHECK(S(a, "reserved_bytes.all.current") == (int64_t)(40 * MiB));
    CHECK(fake_waits == 0 && unsafe_unmaps == 0);
    sound(a);
    /* empty_cache waits for queued work before it unmaps */
    fake_stamp[1] = fake_clock + 10;
    inflight_add(big, 16 * MiB, fake_stamp[1]);
    CHECK_OK(tc__alloc_free(a, big));
    tc__alloc_empty_cache(a);
    CHECK(fake_waits == 1 && S(a, "num_device_synchronize") == 1 && unsafe_unmaps == 0);
    CHECK(hctx.in_use == 24 * MiB);
    CHECK_OK(tc__alloc_free(a, p[0]));
    CHECK_OK(tc__alloc_free(a, p[2]));
    CHECK_OK(tc__alloc_free(a, more));
    tc__alloc_empty_cache(a);
    CHECK(hctx.in_use == 0 && unsafe_unmaps == 0 && fake_live == 0);
    tc__alloc_destroy(a);
}

static void test_many_streams(void)
{
    tc__allocator *a = mk(NULL, 0, 0);
    void *p;
    CHECK_OK(tc__alloc_malloc(a, 4096, 1, &p));
    for (uintptr_t s = 2; s < 2 + 20; s++) { /* 20 extra streams, each twice */
        CHECK_OK(tc__alloc_record_stream(a, p, s));
        CHECK_OK(tc__alloc_record_stream(a, p, s));
    }
    CHECK_OK(tc__alloc_record_stream(a, p, 1)); /* its own stream: nothing to add */
    for (int i = 0; i < 8; i++)
        fake_stamp[i] = fake_clock + 100; /* every stream busy */
    int live0 = fake_live;
    CHECK_OK(tc__alloc_free(a, p));
    CHECK(fake_live == live0 + 20); /* one event per extra stream */
    CHECK(S(a, "active.all.current") == 1);
    void *q;
    CHECK_OK(tc__alloc_malloc(a, 4096, 1, &q));
    CHECK(q != p);
    CHECK_OK(tc__alloc_free(a, q));
    fake_clock += 200;
    CHECK_OK(tc__alloc_malloc(a, 4096, 1, &q)); /* polls: all done, p is free again */
    CHECK(fake_live == live0);
    CHECK(S(a, "active.all.current") == 1);
    CHECK_OK(tc__alloc_free(a, q));
    sound(a);
    tc__alloc_destroy(a);
}

/* A stream goes away (destroyed, or an external stream's wrapper released)
 * while memory is recorded on it, cached for it and live on it: nothing
 * names the stream afterwards, what its queued work may still use is not
 * reused until the event recorded as it went is done, a new stream that
 * takes the same handle value starts afresh, and the cached memory then
 * serves another stream without a new segment. */
static void test_stream_gone(const char *conf, size_t gran)
{
    tc__allocator *a = mk(conf, 1024 * MiB, gran);
    void *p, *q, *r, *x;
    CHECK_OK(tc__alloc_malloc(a, 4096, 1, &p));
    CHECK_OK(tc__alloc_record_stream(a, p, 3)); /* p is used on stream 3 too */
    CHECK_OK(tc__alloc_malloc(a, 4096, 3, &q));
    CHECK_OK(tc__alloc_malloc(a, 8192, 3, &r));
    CHECK_OK(tc__alloc_free(a, q));  /* cached for stream 3 */
    fake_stamp[3] = fake_clock + 10; /* stream 3's kernels still read p, q and r */
    inflight_add(q, 4096, fake_stamp[3]);
    int64_t segs = S(a, "segment.all.current"), live0 = fake_live;
    tc__alloc_stream_gone(a, 3); /* one event for p's use, one for the cache */
    CHECK(fake_live == live0 + 2);
    tc__host_stream_set_gone(&hctx, 3, true);
    sound(a);
    CHECK_OK(tc__alloc_free(a, p)); /* waits for the event kept, not for stream 3 */
    CHECK(S(a, "active.all.current") == 2 && hctx.dead_stream_uses == 0);
    inflight_add(r, 8192, fake_stamp[3]);
    CHECK_OK(tc__alloc_free(a, r)); /* into the gone cache */
    CHECK_OK(tc__alloc_malloc(a, 4096, 1, &x));
    CHECK(x != p); /* p still waits for stream 3's work */
    CHECK_OK(tc__alloc_free(a, x));
    /* a new stream takes the value 3: the old cache is not its own */
    tc__host_stream_set_gone(&hctx, 3, false);
    void *x3;
    CHECK_OK(tc__alloc_malloc(a, 4096, 3, &x3));
    CHECK(x3 != q && x3 != r && x3 != p);
    CHECK(S(a, "segment.all.current") == segs + 1);
    CHECK_OK(tc__alloc_free(a, x3));
    tc__alloc_stream_gone(a, 3); /* the new stream goes too: its cache is gone */
    tc__host_stream_set_gone(&hctx, 3, true);
    sound(a);
    CHECK(hctx.dead_stream_uses == 0 && fake_waits == 0 && unsafe_unmaps == 0);
    fake_clock += 20; /* stream 3's work is done */
    int64_t segs2 = S(a, "segment.all.current");
    CHECK_OK(tc__alloc_malloc(a, 4096, 2, &x)); /* stream 2 takes the gone caches' memory */
    if (!gran)
        CHECK(S(a, "segment.all.current") == segs2);
    CHECK(x == q || x == x3 || gran); /* a segment adopted starts there (q and r merged) */
    CHECK_OK(tc__alloc_malloc(a, 4096, 1, &q)); /* polls: p completed */
    CHECK(q == p);
    CHECK(S(a, "active.all.current") == 2);
    CHECK_OK(tc__alloc_free(a, q));
    CHECK_OK(tc__alloc_free(a, x));
    sound(a);
    CHECK(hctx.dead_stream_uses == 0 && fake_waits == 0 && unsafe_unmaps == 0);
    tc__alloc_empty_cache(a);
    CHECK(hctx.in_use == 0 && fake_live == 0 && hctx.dead_stream_uses == 0);
    CHECK(S(a, "reserved_bytes.all.current") == 0);
    tc__host_stream_set_gone(&hctx, 3, false);
    tc__alloc_destroy(a);
}

/* A block recorded on a stream that goes away and is destroyed with the
 * allocator before it is freed: the event kept is destroyed too. */
static void test_stream_gone_destroy(void)
{
    tc__allocator *a = mk(NULL, 0, 0);
    void *p;
    CHECK_OK(tc__alloc_malloc(a, 4096, 1, &p));
    CHECK_OK(tc__alloc_record_stream(a, p, 4));
    tc__alloc_stream_gone_all(4);
    tc__host_stream_set_gone(&hctx, 4, true);
    CHECK(fake_live == 1);
    tc__alloc_destroy(a);
    CHECK(fake_live == 0 && hctx.dead_stream_uses == 0);
    tc__host_stream_set_gone(&hctx, 4, false);
}

static void test_gc_fraction_oom(void)
{
    tc__allocator *a = mk(NULL, 100 * MiB, 0);
    void *p, *q;
    CHECK_OK(tc__alloc_set_fraction(a, 0.5));
    CHECK_OK(tc__alloc_malloc(a, 40 * MiB, 1, &p));
    CHECK_STATUS(tc__alloc_malloc(a, 12 * MiB, 1, &q), TC_ERROR_OUT_OF_MEMORY);
    CHECK(strstr(tc_last_error(), "tried to allocate 12.00 MiB") != NULL);
    CHECK(strstr(tc_last_error(), "capped") != NULL);
    CHECK(S(a, "num_ooms") == 1 && S(a, "num_alloc_retries") == 1);
    CHECK_STATUS(tc__alloc_set_fraction(a, 1.5), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc__alloc_set_fraction(a, 1.0));
    CHECK_OK(tc__alloc_free(a, p));
    /* OOM path releases the cache and retries: 40 MiB cached, ask 70 MiB. */
    CHECK_OK(tc__alloc_malloc(a, 70 * MiB, 1, &p));
    CHECK(S(a, "reserved_bytes.all.current") == (int64_t)(70 * MiB));
    CHECK_STATUS(tc__alloc_malloc(a, 50 * MiB, 1, &q), TC_ERROR_OUT_OF_MEMORY);
    CHECK(strstr(tc_last_error(), "of which 30.00 MiB is free") != NULL);
    CHECK_OK(tc__alloc_free(a, p));
    sound(a);
    tc__alloc_destroy(a);

    a = mk("garbage_collection_threshold:0.5", 100 * MiB, 0);
    CHECK_OK(tc__alloc_malloc(a, 30 * MiB, 1, &p));
    CHECK_OK(tc__alloc_free(a, p));                 /* 30 MiB cached */
    CHECK_OK(tc__alloc_malloc(a, 36 * MiB, 1, &q)); /* above 50: the cached one goes first */
    CHECK(S(a, "reserved_bytes.all.current") == (int64_t)(36 * MiB));
    CHECK(S(a, "num_alloc_retries") == 0);
    tc__alloc_destroy(a);
}

static void test_private_pool(void)
{
    tc__allocator *a = mk(NULL, 0, 0);
    void *p, *q;
    CHECK_STATUS(tc__alloc_begin_pool(a, 0, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc__alloc_begin_pool(a, 7, 1));
    CHECK_STATUS(tc__alloc_begin_pool(a, 8, 1), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc__alloc_malloc(a, 1000, 1, &p));
    CHECK_OK(tc__alloc_malloc(a, 1000, 2, &q)); /* other stream: default pool */
    CHECK_OK(tc__alloc_end_pool(a, 1));
    CHECK_STATUS(tc__alloc_end_pool(a, 1), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc__alloc_free(a, p));
    void *r;
    CHECK_OK(tc__alloc_malloc(a, 1000, 1, &r)); /* the pool's memory is not reused */
    CHECK(r != p);
    CHECK(S(a, "segment.all.current") == 3);
    tc_memory_snapshot_info snap = {0};
    CHECK_OK(tc__alloc_snapshot(a, &snap));
    int in_pool = 0;
    for (size_t i = 0; i < snap.num_segments; i++)
        in_pool += snap.segments[i].segment_pool_id == 7;
    CHECK(in_pool == 1);
    tc__snapshot_free(&snap);
    tc__alloc_empty_cache(a); /* a live pool keeps its cache */
    CHECK(S(a, "segment.all.current") == 3);
    CHECK_OK(tc__alloc_release_pool(a, 7));
    CHECK(S(a, "segment.all.current") == 2);
    CHECK_STATUS(tc__alloc_release_pool(a, 7), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc__alloc_begin_pool(a, 7, 1), TC_ERROR_INVALID_STATE);
    sound(a);
    tc__alloc_destroy(a);
}

static void test_streams(void)
{
    tc__allocator *a = mk(NULL, 0, 0);
    void *p, *q;
    CHECK_OK(tc__alloc_malloc(a, 4096, 1, &p));
    CHECK_OK(tc__alloc_free(a, p));
    CHECK_OK(tc__alloc_malloc(a, 4096, 1, &q));
    CHECK(q == p); /* same stream: at once */
    CHECK_OK(tc__alloc_malloc(a, 4096, 2, &q));
    CHECK(S(a, "segment.all.current") == 2); /* other stream: its own cache */
    CHECK_OK(tc__alloc_free(a, q));
    CHECK_OK(tc__alloc_record_stream(a, p, 3));
    CHECK_STATUS(tc__alloc_record_stream(a, (char *)p + 1, 3), TC_ERROR_INVALID_ARGUMENT);
    fake_stamp[3] = ++fake_clock + 5; /* stream 3 has work in flight */
    CHECK_OK(tc__alloc_free(a, p));
    CHECK(S(a, "active.all.current") == 1); /* pending free */
    CHECK_OK(tc__alloc_malloc(a, 4096, 1, &q));
    CHECK(q != p); /* not reused while stream 3's work runs */
    CHECK_OK(tc__alloc_free(a, q));
    fake_clock += 10; /* stream 3 finished */
    CHECK_OK(tc__alloc_malloc(a, 4096, 1, &q));
    CHECK(S(a, "active.all.current") == 1);
    CHECK_OK(tc__alloc_free(a, q));
    CHECK(fake_live == 0);
    sound(a);
    tc__alloc_destroy(a);
}

static void test_config_errors(void)
{
    tc__alloc_config c;
    tc__alloc_config_default(&c);
    CHECK_STATUS(tc__alloc_config_parse("foo:1", &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "unknown key 'foo'") != NULL);
    CHECK_STATUS(tc__alloc_config_parse("max_split_size_mb:abc", &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc__alloc_config_parse("roundup_power2_divisions:3", &c),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc__alloc_config_parse("garbage_collection_threshold:1.5", &c),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc__alloc_config_parse("expandable_segments:maybe", &c),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc__alloc_config_parse("backend:jemalloc", &c), TC_ERROR_INVALID_ARGUMENT);
    static const char *bad_lists[][2] = {
        {"roundup_power2_divisions:[3:1]", "size '3'"},
        {"roundup_power2_divisions:[4:1,2:2]", "must increase"},
        {"roundup_power2_divisions:[2:3]", "for '2' is '3'"},
        {"roundup_power2_divisions:[>:2,4:1]", "entry '4:1'"},
        {"roundup_power2_divisions:[2:1", "closing"},
        {"roundup_power2_divisions:[]", "empty"},
    };
    for (size_t i = 0; i < sizeof bad_lists / sizeof *bad_lists; i++) {
        CHECK_STATUS(tc__alloc_config_parse(bad_lists[i][0], &c), TC_ERROR_INVALID_ARGUMENT);
        if (!strstr(tc_last_error(), bad_lists[i][1]))
            printf("%s: message '%s' lacks '%s'\n", bad_lists[i][0], tc_last_error(),
                   bad_lists[i][1]);
        CHECK(strstr(tc_last_error(), bad_lists[i][1]) != NULL);
    }
    CHECK_STATUS(tc__alloc_config_parse("expandable_segments", &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK(c.max_split_size == SIZE_MAX && !c.expandable_segments); /* unchanged */
    CHECK_OK(tc__alloc_config_parse("backend:cudaMallocAsync, expandable_segments:True,"
                                    "max_split_size_mb:64,garbage_collection_threshold:0.8",
                                    &c));
    CHECK(c.backend == 1 && c.expandable_segments && c.max_split_size == 64 * MiB);
    CHECK(c.gc_threshold == 0.8);
    CHECK_OK(tc__alloc_config_parse("roundup_power2_divisions:[256:1,512:2,1024:4,>:8],"
                                    "max_split_size_mb:32",
                                    &c));
    CHECK(c.max_split_size == 32 * MiB);
    /* PyTorch's intervals: entry i is [2^i, 2^(i+1)) MiB (the snapshot's key 2^i) */
    CHECK(c.roundup_power2_divisions[0] == 1 && c.roundup_power2_divisions[7] == 1);
    CHECK(c.roundup_power2_divisions[8] == 1);  /* [256, 512) MiB */
    CHECK(c.roundup_power2_divisions[9] == 2);  /* [512 MiB, 1 GiB) */
    CHECK(c.roundup_power2_divisions[10] == 4); /* [1, 2) GiB */
    CHECK(c.roundup_power2_divisions[11] == 8 && c.roundup_power2_divisions[15] == 8);
    CHECK_OK(tc__alloc_config_parse("roundup_power2_divisions:[>:4]", &c));
    CHECK(c.roundup_power2_divisions[0] == 0 &&
          c.roundup_power2_divisions[1] == 4); /* as PyTorch */
    CHECK_OK(tc__alloc_config_parse("roundup_power2_divisions:[1:0,65536:2]", &c));
    CHECK(c.roundup_power2_divisions[0] == 0 && c.roundup_power2_divisions[15] == 2);
    CHECK(c.roundup_power2_divisions[14] == 0);
    CHECK_OK(tc__alloc_config_parse("roundup_power2_divisions:4", &c));
    CHECK(c.roundup_power2_divisions[0] == 4 && c.roundup_power2_divisions[15] == 4);
}

static void test_expandable(void)
{
    tc__allocator *a = mk("expandable_segments:True", 1024 * MiB, 2 * MiB);
    void *p, *q;
    CHECK_OK(tc__alloc_malloc(a, 3 * MiB, 1, &p));
    CHECK(S(a, "reserved_bytes.all.current") == (int64_t)(4 * MiB));
    CHECK_OK(tc__alloc_malloc(a, 5 * MiB, 1, &q));
    CHECK((uintptr_t)q == (uintptr_t)p + 3 * MiB); /* grew in place */
    CHECK(S(a, "reserved_bytes.all.current") == (int64_t)(8 * MiB));
    CHECK(S(a, "segment.all.current") == 1);
    sound(a);
    CHECK_OK(tc__alloc_free(a, q));
    tc__alloc_empty_cache(a); /* the free tail is unmapped, the live head stays */
    CHECK(S(a, "reserved_bytes.all.current") == (int64_t)(4 * MiB));
    CHECK(hctx.in_use == 4 * MiB);
    sound(a);
    CHECK_OK(tc__alloc_free(a, p));
    tc__alloc_empty_cache(a);
    CHECK(hctx.in_use == 0 && S(a, "reserved_bytes.all.current") == 0);
    tc__alloc_destroy(a);
}

static void test_expandable_holes(void)
{
    tc__allocator *a = mk("expandable_segments:True", 1024 * MiB, 2 * MiB);
    void *p[3], *q;
    for (int i = 0; i < 3; i++)
        CHECK_OK(tc__alloc_malloc(a, 8 * MiB, 1, &p[i]));
    CHECK_OK(tc__alloc_free(a, p[1]));
    CHECK(hctx.in_use == 24 * MiB); /* freeing unmaps nothing */
    tc__alloc_empty_cache(a);       /* the hole in the middle is unmapped */
    CHECK(S(a, "reserved_bytes.all.current") == (int64_t)(16 * MiB));
    CHECK(hctx.in_use == 16 * MiB);
    sound(a);
    CHECK_OK(tc__alloc_malloc(a, 8 * MiB, 1, &q)); /* reused and mapped back */
    CHECK(q == p[1]);
    CHECK(hctx.in_use == 24 * MiB && S(a, "reserved_bytes.all.current") == (int64_t)(24 * MiB));
    sound(a);
    /* Pressure: the most ever in use is 24 MiB. With the 8 MiB hole free but
     * mapped, 16 MiB more at the end would make 40 MiB reserved for 32 live;
     * the hole's granules go back first. */
    CHECK_OK(tc__alloc_free(a, q));
    void *big;
    CHECK_OK(tc__alloc_malloc(a, 16 * MiB, 1, &big));
    CHECK((uintptr_t)big == (uintptr_t)p[2] + 8 * MiB);
    CHECK(S(a, "reserved_bytes.all.current") == (int64_t)(32 * MiB));
    CHECK(hctx.in_use == 32 * MiB);
    sound(a);
    CHECK_OK(tc__alloc_free(a, big));
    CHECK_OK(tc__alloc_free(a, p[0]));
    CHECK_OK(tc__alloc_free(a, p[2]));
    tc__alloc_empty_cache(a);
    CHECK(hctx.in_use == 0 && S(a, "reserved_bytes.all.current") == 0);
    tc__alloc_destroy(a);
}

/* Memory is mapped one chunk per run of granules and unmapped only whole. */
static void test_expandable_chunks(void)
{
    tc__allocator *a = mk("expandable_segments:True", 1024 * MiB, 2 * MiB);
    void *p, *q, *r;
    CHECK_OK(tc__alloc_malloc(a, 8 * MiB, 1, &p));
    CHECK(hctx.allocs == 1 && hctx.in_use == 8 * MiB); /* 4 granules, one map call */
    CHECK_OK(tc__alloc_free(a, p));
    CHECK_OK(tc__alloc_malloc(a, 2 * MiB, 1, &q)); /* best fit: the start of that chunk */
    CHECK(q == p);
    tc__alloc_empty_cache(a); /* the chunk holds a live granule: it stays whole */
    CHECK(hctx.in_use == 8 * MiB && S(a, "reserved_bytes.all.current") == (int64_t)(8 * MiB));
    sound(a);
    CHECK_OK(tc__alloc_free(a, q));
    tc__alloc_empty_cache(a);
    CHECK(hctx.in_use == 0 && hctx.frees == 1);
    /* A block over mapped and unmapped granules maps each unmapped run as
     * one chunk: granules 0-1 and 3-5, around the live granule 2. */
    void *x, *y, *z;
    CHECK_OK(tc__alloc_malloc(a, 4 * MiB, 1, &x));
    CHECK_OK(tc__alloc_malloc(a, 2 * MiB, 1, &y));
    CHECK_OK(tc__alloc_malloc(a, 6 * MiB, 1, &z));
    CHECK_OK(tc__alloc_free(a, x));
    CHECK_OK(tc__alloc_free(a, z));
    tc__alloc_empty_cache(a);
    CHECK(hctx.in_use == 2 * MiB);
    int64_t maps = hctx.allocs;
    CHECK_OK(tc__alloc_free(a, y));
    CHECK_OK(tc__alloc_malloc(a, 12 * MiB, 1, &r)); /* all six granules: two runs */
    CHECK(r == x && hctx.allocs == maps + 2 && hctx.in_use == 12 * MiB);
    sound(a);
    CHECK_OK(tc__alloc_free(a, r));
    tc__alloc_empty_cache(a);
    CHECK(hctx.in_use == 0 && hctx.bad_unmaps == 0);
    /* A granularity that is not a power of two is refused. */
    tc__seg_provider odd = prov;
    odd.granularity = 3 * MiB;
    tc__allocator *bad = NULL;
    CHECK_STATUS(tc__alloc_create(&odd, &(tc__alloc_config){0}, 0, &bad),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(bad == NULL);
    /* A chunk covers at most 16 granules (32 MiB), aligned: 40 MiB is two. */
    maps = hctx.allocs;
    CHECK_OK(tc__alloc_malloc(a, 40 * MiB, 1, &r));
    CHECK(hctx.allocs == maps + 2 && hctx.in_use == 40 * MiB);
    CHECK_OK(tc__alloc_free(a, r));
    tc__alloc_empty_cache(a);
    CHECK(hctx.in_use == 0 && hctx.bad_unmaps == 0);
    prov.unmap(prov.ctx, p, 2 * MiB); /* the checking provider notices a stray unmap */
    CHECK(hctx.bad_unmaps == 1);
    tc__alloc_destroy(a);
}

static size_t rand_size(void)
{
    double u = tc_test_rand_uniform(), r = tc_test_rand_uniform();
    double lo = 512, hi = 1 << 20;
    if (u > 0.7) {
        lo = 1 << 20;
        hi = 32 << 20;
    }
    if (u > 0.97) {
        lo = 32 << 20;
        hi = 256 << 20;
    }
    return (size_t)(lo * __builtin_pow(hi / lo, r)) + (tc_test_rand() % 511);
}

/* A long random sequence on three streams with record_stream, lagging fake
 * GPU work and streams that go away for a while (then a new stream takes the
 * handle value): after every step the invariants hold; nothing names a
 * stream gone; nothing waits for the
 * GPU inside malloc or free (except an out-of-memory retry); no memory goes
 * back while queued work may still use it; every wait is counted. */
static void test_random(const char *conf, size_t gran, long steps)
{
    tc__allocator *a = mk(conf, 8192 * MiB, gran);
    enum { LIVE = 256 };
    void *live[LIVE] = {0};
    uintptr_t lstream[LIVE];
    unsigned lrec[LIVE];
    uint64_t lfixed[LIVE]; /* the end of uses on streams that went away */
    size_t lsize[LIVE];
    long bad = 0, path_waits = 0, gone_until[8] = {0};
    unsafe_unmaps = 0;
    for (long i = 0; i < steps && !bad; i++) {
        int k = (int)(tc_test_rand() % LIVE);
        uint64_t op = tc_test_rand() % 100;
        int64_t w0 = fake_waits;
        if (tc_test_rand() % 4000 == 0) { /* a stream goes away for a while */
            uintptr_t t = 1 + (tc_test_rand() % 5);
            if (!gone_until[t]) {
                tc__alloc_stream_gone(a, t);
                tc__host_stream_set_gone(&hctx, t, true);
                gone_until[t] = i + 1 + (long)(tc_test_rand() % 200);
                for (int j = 0; j < LIVE; j++) /* their uses there end with its work */
                    if (live[j] && (lstream[j] == t || (lrec[j] >> t & 1))) {
                        if (fake_stamp[t] > lfixed[j])
                            lfixed[j] = fake_stamp[t];
                        lrec[j] &= ~(1u << t);
                        if (lstream[j] == t)
                            lstream[j] = 0; /* its stream is gone */
                    }
            }
        }
        for (uintptr_t t = 1; t < 8; t++)
            if (gone_until[t] && i >= gone_until[t]) { /* a new stream takes its value */
                tc__host_stream_set_gone(&hctx, t, false);
                gone_until[t] = 0;
            }
        if (!live[k] && !(gone_until[1] && gone_until[2] && gone_until[3])) {
            uintptr_t stream = 1 + (tc_test_rand() % 3);
            while (gone_until[stream])
                stream = stream % 3 + 1;
            lfixed[k] = 0;
            size_t size = rand_size();
            int64_t r0 = S(a, "num_alloc_retries");
            if (tc__alloc_malloc(a, size, stream, &live[k]) != TC_OK)
                live[k] = NULL;
            lstream[k] = stream, lrec[k] = 0, lsize[k] = size;
            path_waits += fake_waits != w0 && S(a, "num_alloc_retries") == r0;
        } else if (live[k]) {
            if (op < 10) {
                uintptr_t t = 1 + (tc_test_rand() % 5);
                if (!gone_until[t]) {
                    tc__alloc_record_stream(a, live[k], t);
                    lrec[k] |= 1u << t;
                }
            }
            unsigned busy = (unsigned)(tc_test_rand() % 8);
            if (!gone_until[busy]) /* a stream gone takes no more work */
                fake_stamp[busy] = fake_clock + 3;
            uint64_t stamp = lstream[k] ? fake_stamp[lstream[k] & 7] : 0;
            if (lfixed[k] > stamp)
                stamp = lfixed[k];
            for (int t = 0; t < 8; t++)
                if ((lrec[k] >> t & 1) && fake_stamp[t] > stamp)
                    stamp = fake_stamp[t];
            inflight_add(live[k], lsize[k], stamp);
            w0 = fake_waits;
            if (tc__alloc_free(a, live[k]) != TC_OK)
                bad++;
            path_waits += fake_waits != w0;
            live[k] = NULL;
        }
        fake_clock++;
        if (op == 99 && tc_test_rand() % 100 == 0)
            tc__alloc_empty_cache(a);
        char why[256];
        if (tc__alloc_check(a, why, sizeof why)) {
            printf("step %ld (%s): %s\n", i, conf ? conf : "default", why);
            bad++;
        }
    }
    CHECK(bad == 0);
    CHECK(path_waits == 0);
    CHECK(unsafe_unmaps == 0);
    CHECK(hctx.dead_stream_uses == 0);
    CHECK(S(a, "num_device_synchronize") == fake_waits);
    double ratio = (double)S(a, "reserved_bytes.all.peak") / (double)S(a, "active_bytes.all.peak");
    printf("random (%s): peak reserved / peak active %.3f, %lld waits, %lld OOM retries\n",
           conf ? conf : "default", ratio, (long long)fake_waits,
           (long long)S(a, "num_alloc_retries"));
    /* expandable segments stay bounded though the fake GPU lags: fences
     * complete a few steps later and the chunks go then (1.07 to 1.22 seen
     * over 16 seeds; 1.86 to 1.94 when nothing is unmapped under pressure) */
    if (gran)
        CHECK(ratio <= 1.35);
    for (int k = 0; k < LIVE; k++)
        CHECK_OK(tc__alloc_free(a, live[k]));
    tc__alloc_empty_cache(a);
    CHECK(S(a, "reserved_bytes.all.current") == 0 && S(a, "active.all.current") == 0);
    CHECK(hctx.in_use == 0 && fake_live == 0 && hctx.bad_unmaps == 0 && unsafe_unmaps == 0);
    tc__alloc_destroy(a);
    for (uintptr_t t = 1; t < 8; t++)
        tc__host_stream_set_gone(&hctx, t, false);
}

int main(void)
{
    tc_test_init();
    test_rounding_pools();
    test_split_merge_bestfit();
    test_max_split_and_power2();
    test_gc_fraction_oom();
    test_private_pool();
    test_streams();
    test_config_errors();
    test_expandable();
    test_expandable_holes();
    test_expandable_chunks();
    test_no_wait_before_grow();
    test_expandable_fences();
    test_many_streams();
    test_stream_gone(NULL, 0);
    test_stream_gone("expandable_segments:True", 2 * MiB);
    test_stream_gone_destroy();
    const char *e = getenv("TC_ALLOC_STEPS");
    long steps = e ? atol(e) : 1000000;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    if (!e)
        steps = 20000; /* the checker walks every segment: keep sanitizer runs short */
#endif
    test_random(NULL, 0, steps);
    test_random("max_split_size_mb:64,roundup_power2_divisions:8", 0, steps / 8);
    test_random("expandable_segments:True", 2 * MiB, steps / 8);
    return TC_TEST_DONE();
}
