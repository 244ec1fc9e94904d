/* Memory statistics on the CPU: the caching allocator over the plain host
 * provider, driven by a random sequence of allocations and frees, against a
 * model kept here (live count and requested bytes per pool, their peaks and
 * running totals). Checked: peaks follow the maximum and reset to the current
 * value (torch.cuda.reset_peak_memory_stats: totals and event counters are
 * kept), device allocs/frees equal the provider's own counts, every key the
 * seed lists (and PyTorch 2.x's) maps to its struct field, unknown keys are
 * refused, block states and segment types have PyTorch's names, the
 * abbreviated summary is the full one without its per-pool rows, and a bad
 * TCUDA_ALLOC_CONF is an error, never silently "native"; PyTorch's
 * PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF count when it is unset (a
 * notice when a set one is hidden). The GPU side
 * (through the public API) is in tests/test_memory_gpu.c. */
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "memory/alloc.h"
#include "tc_test.h"

#define MiB ((size_t)1 << 20)

/* ---- the model ----------------------------------------------------------------- */

typedef struct model_stat {
    int64_t current, peak, allocated, freed;
} model_stat;

typedef struct model {
    model_stat count[3], req[3]; /* allocation.*, requested_bytes.*; [all, small, large] */
} model;

/* The model's rule, written from the statistics' definitions in memory.h
 * (current, its peak, total increase, total decrease), for the "all" pool
 * and one other. */
static void model_add(model_stat *m, int pool, int64_t d)
{
    int idx[2] = {0, pool};
    for (int k = 0; k < 2; k++) {
        model_stat *s = &m[idx[k]];
        s->current += d;
        if (s->current > s->peak)
            s->peak = s->current;
        if (d > 0)
            s->allocated += d;
        else
            s->freed -= d;
    }
}

static void model_reset_peak(model *m)
{
    for (int p = 0; p < 3; p++) {
        m->count[p].peak = m->count[p].current;
        m->req[p].peak = m->req[p].current;
    }
}

static const char *pools[3] = {"all", "small_pool", "large_pool"};
static const char *metrics[4] = {"current", "peak", "allocated", "freed"};

static int64_t metric_of(const model_stat *s, int k)
{
    return k == 0 ? s->current : k == 1 ? s->peak : k == 2 ? s->allocated : s->freed;
}

/* Every allocation.* (also by its older name allocated.*) and
 * requested_bytes.* key equals the model. */
static int model_mismatches(tc__allocator *a, const model *m)
{
    tc_memory_stats_info s;
    tc__alloc_stats(a, &s);
    int bad = 0;
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < 4; k++) {
            char key[64];
            int64_t v = -1, w = -1, r = -1;
            snprintf(key, sizeof key, "allocation.%s.%s", pools[p], metrics[k]);
            bad += !tc__stats_get(&s, key, &v) || v != metric_of(&m->count[p], k);
            snprintf(key, sizeof key, "allocated.%s.%s", pools[p], metrics[k]);
            bad += !tc__stats_get(&s, key, &w) || w != v;
            snprintf(key, sizeof key, "requested_bytes.%s.%s", pools[p], metrics[k]);
            bad += !tc__stats_get(&s, key, &r) || r != metric_of(&m->req[p], k);
        }
    return bad;
}

/* peak == current for every statistic with a peak. */
static int peaks_not_current(const tc_memory_stats_info *s)
{
    const tc_memory_stat *all = &s->allocation[0];
    int bad = 0;
    for (size_t i = 0; i < 9 * TC_STAT_POOL_COUNT; i++)
        bad += all[i].peak != all[i].current;
    bad += s->oversize_allocations.peak != s->oversize_allocations.current;
    bad += s->oversize_segments.peak != s->oversize_segments.current;
    return bad;
}

/* Everything but the peaks is the same in a and b. */
static bool same_but_peaks(tc_memory_stats_info a, tc_memory_stats_info b)
{
    tc_memory_stat *x = &a.allocation[0], *y = &b.allocation[0];
    for (size_t i = 0; i < 9 * TC_STAT_POOL_COUNT; i++)
        x[i].peak = y[i].peak = 0;
    a.oversize_allocations.peak = b.oversize_allocations.peak = 0;
    a.oversize_segments.peak = b.oversize_segments.peak = 0;
    return memcmp(&a, &b, sizeof a) == 0;
}

/* ---- a random sequence with resets ------------------------------------------------ */

/* An allocator over the plain host provider (capacity 0: unlimited); ctx
 * counts the provider's segments and bytes, and must outlive the allocator. */
static tc__allocator *host_allocator(tc__host_provider_ctx *ctx, size_t capacity)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->capacity = capacity;
    tc__seg_provider prov;
    tc__host_provider_init(&prov, ctx);
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    tc__allocator *a = NULL;
    CHECK_OK(tc__alloc_create(&prov, &cfg, 0, &a));
    return a;
}

static void test_peaks_and_resets(void)
{
    tc__host_provider_ctx ctx;
    tc__allocator *a = host_allocator(&ctx, 0);
    if (!a)
        return;
    enum { N = 256, STEPS = 4000 };
    void *live[N] = {0};
    size_t sz[N] = {0};
    model m;
    memset(&m, 0, sizeof m);
    int bad_model = 0, bad_reset = 0, bad_kept = 0, bad_dev = 0, resets = 0;
    for (int step = 0; step < STEPS; step++) {
        int i = (int)(tc_test_rand() % N);
        if (live[i]) {
            CHECK_OK(tc__alloc_free(a, live[i]));
            model_add(m.count, sz[i] <= MiB ? 1 : 2, -1);
            model_add(m.req, sz[i] <= MiB ? 1 : 2, -(int64_t)sz[i]);
            live[i] = NULL;
        } else {
            /* small (<= 1 MiB) two times in three, else large up to 24 MiB */
            size_t size = tc_test_rand() % 3 ? 1 + tc_test_rand() % MiB
                                             : MiB + 1 + tc_test_rand() % (23 * MiB);
            tc_status st = tc__alloc_malloc(a, size, 0, &live[i]);
            CHECK(st == TC_OK);
            if (st != TC_OK)
                break;
            sz[i] = size;
            model_add(m.count, size <= MiB ? 1 : 2, 1);
            model_add(m.req, size <= MiB ? 1 : 2, (int64_t)size);
        }
        bad_model += model_mismatches(a, &m);
        if (step % 97 == 0) {
            tc_memory_stats_info before, after;
            tc__alloc_stats(a, &before);
            tc__alloc_reset_peak(a);
            model_reset_peak(&m);
            tc__alloc_stats(a, &after);
            bad_reset += peaks_not_current(&after);
            bad_kept += !same_but_peaks(before, after);
            resets++;
        }
        tc_memory_stats_info s;
        tc__alloc_stats(a, &s);
        bad_dev += s.num_device_alloc != ctx.allocs || s.num_device_free != ctx.frees ||
                   s.segment[0].current != ctx.allocs - ctx.frees ||
                   s.reserved_bytes[0].current != (int64_t)ctx.in_use;
    }
    CHECK(bad_model == 0);
    CHECK(bad_reset == 0);
    CHECK(bad_kept == 0);
    CHECK(bad_dev == 0);
    CHECK(resets > 10);
    char why[256];
    CHECK(tc__alloc_check(a, why, sizeof why) == 0);
    /* peaks rise again after a reset, and only as high as the new maximum */
    for (int i = 0; i < N; i++)
        if (live[i])
            CHECK_OK(tc__alloc_free(a, live[i]));
    tc__alloc_reset_peak(a);
    tc_memory_stats_info s;
    tc__alloc_stats(a, &s);
    CHECK(s.allocation[0].current == 0 && s.allocation[0].peak == 0);
    CHECK(s.reserved_bytes[0].peak == s.reserved_bytes[0].current); /* cached, not released */
    void *p, *q;
    CHECK_OK(tc__alloc_malloc(a, 1000, 0, &p));
    CHECK_OK(tc__alloc_malloc(a, 3 * MiB, 0, &q));
    CHECK_OK(tc__alloc_free(a, p));
    tc__alloc_stats(a, &s);
    CHECK(s.allocation[0].peak == 2 && s.allocation[0].current == 1);
    CHECK(s.allocation[TC_STAT_POOL_SMALL].peak == 1 && s.allocation[TC_STAT_POOL_LARGE].peak == 1);
    CHECK(s.requested_bytes[0].peak == (int64_t)(1000 + 3 * MiB));
    CHECK(s.requested_bytes[TC_STAT_POOL_LARGE].current == (int64_t)(3 * MiB));
    CHECK(s.allocated_bytes[0].peak >= s.requested_bytes[0].peak);
    CHECK_OK(tc__alloc_free(a, q));
    /* releasing the cache: reserved drops, its peak stays until a reset */
    tc__alloc_empty_cache(a);
    tc__alloc_stats(a, &s);
    CHECK(s.reserved_bytes[0].current == 0 && ctx.in_use == 0);
    CHECK(s.reserved_bytes[0].peak > 0);
    tc__alloc_reset_peak(a);
    tc__alloc_stats(a, &s);
    CHECK(s.reserved_bytes[0].peak == 0 && s.segment[0].peak == 0);
    CHECK(s.num_device_alloc == ctx.allocs && s.num_device_free == ctx.frees);
    tc__alloc_destroy(a);
}

/* An out-of-memory: num_alloc_retries and num_ooms count it, resets keep them. */
static void test_event_counters(void)
{
    tc__host_provider_ctx ctx;
    tc__allocator *a = host_allocator(&ctx, 64 * MiB);
    if (!a)
        return;
    void *p = NULL, *q = NULL;
    CHECK_OK(tc__alloc_malloc(a, 40 * MiB, 0, &p));
    CHECK_STATUS(tc__alloc_malloc(a, 40 * MiB, 0, &q), TC_ERROR_OUT_OF_MEMORY);
    CHECK(q == NULL);
    tc_memory_stats_info s;
    tc__alloc_stats(a, &s);
    CHECK(s.num_ooms == 1 && s.num_alloc_retries == 1);
    tc__alloc_reset_peak(a);
    tc__alloc_stats(a, &s);
    CHECK(s.num_ooms == 1 && s.num_alloc_retries == 1);
    int64_t v = 0;
    CHECK(tc__stats_get(&s, "num_ooms", &v) && v == 1);
    CHECK(tc__stats_get(&s, "num_alloc_retries", &v) && v == 1);
    CHECK(tc__stats_get(&s, "max_split_size", &v) && v == s.max_split_size);
    CHECK_OK(tc__alloc_free(a, p));
    tc__alloc_destroy(a);
}

/* ---- keys ------------------------------------------------------------------------ */

/* Every key maps to its own field: the struct is filled with distinct values
 * and each key must read the one at its field's offset. */
static void test_keys(void)
{
    tc_memory_stats_info s;
    int64_t *w = (int64_t *)&s;
    for (size_t i = 0; i < sizeof s / sizeof *w; i++)
        w[i] = 1000 + (int64_t)i * 7;
    static const struct {
        const char *name;
        size_t off;
    } arrays[] = {
#define A(key, field) {key, offsetof(tc_memory_stats_info, field)}
        A("allocation", allocation),
        A("allocated", allocation), /* the older name */
        A("segment", segment),
        A("active", active),
        A("inactive_split", inactive_split),
        A("allocated_bytes", allocated_bytes),
        A("reserved_bytes", reserved_bytes),
        A("active_bytes", active_bytes),
        A("inactive_split_bytes", inactive_split_bytes),
        A("requested_bytes", requested_bytes),
#undef A
    };
    int bad = 0, n = 0;
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        for (int p = 0; p < 3; p++)
            for (int k = 0; k < 4; k++) {
                char key[64];
                snprintf(key, sizeof key, "%s.%s.%s", arrays[i].name, pools[p], metrics[k]);
                const tc_memory_stat *st = (const tc_memory_stat *)((const char *)&s +
                                                                    arrays[i].off) +
                                           p;
                const int64_t want[4] = {st->current, st->peak, st->allocated, st->freed};
                int64_t v = -1;
                bool ok = tc__stats_get(&s, key, &v) && v == want[k];
                if (!ok)
                    printf("key %s: got %" PRId64 ", want %" PRId64 "\n", key, v, want[k]);
                bad += !ok;
                n++;
            }
    const tc_memory_stat *ov[2] = {&s.oversize_allocations, &s.oversize_segments};
    const char *ovn[2] = {"oversize_allocations", "oversize_segments"};
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < 4; k++) {
            char key[64];
            snprintf(key, sizeof key, "%s.%s", ovn[j], metrics[k]);
            const int64_t want[4] = {ov[j]->current, ov[j]->peak, ov[j]->allocated, ov[j]->freed};
            int64_t v = -1;
            bad += !tc__stats_get(&s, key, &v) || v != want[k];
            n++;
        }
    const struct {
        const char *key;
        int64_t want;
    } scalars[] = {
        {"num_alloc_retries", s.num_alloc_retries},
        {"num_ooms", s.num_ooms},
        {"num_sync_all_streams", s.num_sync_all_streams},
        {"num_device_alloc", s.num_device_alloc},
        {"num_device_free", s.num_device_free},
        {"max_split_size", s.max_split_size},
        {"num_device_synchronize", s.num_device_synchronize},
    };
    for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++) {
        int64_t v = -1;
        bad += !tc__stats_get(&s, scalars[i].key, &v) || v != scalars[i].want;
        n++;
    }
    CHECK(bad == 0);
    CHECK(n == 10 * 12 + 8 + 7);
    static const char *unknown[] = {
        "",
        "allocation",
        "allocation.all",
        "allocation.all.",
        "allocation.all.current.x",
        "allocation.medium_pool.current",
        "allocation.all.maximum",
        "allocatedx.all.current",
        "Allocation.all.current",
        "num_ooms.current",
        "oversize_allocations",
        "oversize_segments.all.current",
        "max_split_size_mb",
    };
    int accepted = 0;
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        int64_t v = 12345;
        if (tc__stats_get(&s, unknown[i], &v)) {
            printf("unknown key '%s' accepted\n", unknown[i]);
            accepted++;
        }
    }
    CHECK(accepted == 0);
}

/* ---- the summary (torch.cuda.memory_summary) ----------------------------------- */

/* The numbers of the summary's table rows, in order: rows[r][0..3] are a
 * row's four cells (a count, or "N B" for bytes below 1 KiB). Returns the
 * number of rows. */
static int table_rows(const char *text, int64_t rows[][4], int cap)
{
    int n = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[256];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        for (char *b = strstr(buf, " B "); b; b = strstr(b, " B "))
            b[1] = ' '; /* "101 B" reads as 101 */
        long long v[4];
        char name[64];
        if (sscanf(buf, "| %63[^|]| %lld | %lld | %lld | %lld |", name, &v[0], &v[1], &v[2],
                   &v[3]) == 5 &&
            n < cap) {
            for (int j = 0; j < 4; j++)
                rows[n][j] = v[j];
            n++;
        }
        line = end ? end + 1 : NULL;
    }
    return n;
}

/* memory_summary(abbreviated=True) is the full table without the small and
 * large pool rows: the full one has 9 metrics x 3 pools of rows holding the
 * values put in, the abbreviated one the 9 "all" rows; every other line is
 * the same in both. */
static void test_summary_abbreviated(void)
{
    tc_memory_stats_info s;
    memset(&s, 0, sizeof s);
    tc_memory_stat *table[9] = {
        s.allocation,      s.segment,        s.active,       s.inactive_split,
        s.allocated_bytes, s.reserved_bytes, s.active_bytes, s.inactive_split_bytes,
        s.requested_bytes};
    for (int m = 0; m < 9; m++) /* distinct, below 1 KiB: bytes print as "N B" */
        for (int k = 0; k < 3; k++)
            table[m][k] = (tc_memory_stat){100 * m + 10 * k + 1, 100 * m + 10 * k + 2,
                                           100 * m + 10 * k + 3, 100 * m + 10 * k + 4};
    s.num_ooms = 7;
    char *full = tc__stats_summary(&s, 0, false), *abbr = tc__stats_summary(&s, 0, true);
    CHECK(full && abbr);
    if (!full || !abbr) {
        free(full);
        free(abbr);
        return;
    }
    int64_t rows[40][4];
    int n = table_rows(full, rows, 40);
    CHECK(n == 27);
    bool ok = n == 27;
    for (int r = 0; ok && r < 27; r++)
        for (int j = 0; j < 4; j++)
            ok &= rows[r][j] == 100 * (r / 3) + 10 * (r % 3) + 1 + j;
    CHECK(ok);
    n = table_rows(abbr, rows, 40);
    CHECK(n == 9);
    ok = n == 9;
    for (int r = 0; ok && r < 9; r++)
        for (int j = 0; j < 4; j++)
            ok &= rows[r][j] == 100 * r + 1 + j;
    CHECK(ok);
    /* the rest: the full text, its pool rows taken out, is the abbreviated one */
    char *kept = malloc(strlen(full) + 1);
    size_t at = 0;
    for (const char *line = full; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        bool pool_row = strstr(line, "from small pool") &&
                        strstr(line, "from small pool") < line + len;
        pool_row |= strstr(line, "from large pool") && strstr(line, "from large pool") < line + len;
        if (!pool_row) {
            memcpy(kept + at, line, len);
            at += len;
        }
        line += len;
    }
    kept[at] = '\0';
    CHECK(strcmp(kept, abbr) == 0);
    CHECK(strstr(abbr, "Out-of-memory errors:") && strstr(abbr, " 7 "));
    free(kept);
    free(full);
    free(abbr);
}

/* ---- names ---------------------------------------------------------------------- */

static void test_names(void)
{
    CHECK(!strcmp(tc_memory_block_state_string(TC_MEMORY_BLOCK_STATE_ACTIVE_ALLOCATED),
                  "active_allocated"));
    CHECK(!strcmp(tc_memory_block_state_string(TC_MEMORY_BLOCK_STATE_ACTIVE_PENDING_FREE),
                  "active_pending_free"));
    CHECK(!strcmp(tc_memory_block_state_string(TC_MEMORY_BLOCK_STATE_INACTIVE), "inactive"));
    CHECK(!strcmp(tc_memory_block_state_string((tc_memory_block_state)9), "unknown"));
    CHECK(!strcmp(tc_memory_segment_type_string(TC_MEMORY_SEGMENT_TYPE_SMALL), "small"));
    CHECK(!strcmp(tc_memory_segment_type_string(TC_MEMORY_SEGMENT_TYPE_LARGE), "large"));
    CHECK(!strcmp(tc_memory_segment_type_string((tc_memory_segment_type)-1), "unknown"));

    /* a snapshot of a host allocator says which block is which, and the JSON
     * writer spells the states as PyTorch does */
    tc__host_provider_ctx ctx;
    tc__allocator *a = host_allocator(&ctx, 0);
    if (!a)
        return;
    void *p, *q;
    CHECK_OK(tc__alloc_malloc(a, 1000, 0, &p));
    CHECK_OK(tc__alloc_malloc(a, 12 * MiB, 0, &q));
    tc_memory_snapshot_info snap = {0};
    CHECK_OK(tc__alloc_snapshot(a, &snap));
    int small = 0, large = 0, alloc_blocks = 0, inactive = 0;
    for (size_t i = 0; i < snap.num_segments; i++) {
        const tc_memory_segment_info *sg = &snap.segments[i];
        small += sg->segment_type == TC_MEMORY_SEGMENT_TYPE_SMALL;
        large += sg->segment_type == TC_MEMORY_SEGMENT_TYPE_LARGE;
        for (size_t j = 0; j < sg->num_blocks; j++) {
            alloc_blocks += sg->blocks[j].state == TC_MEMORY_BLOCK_STATE_ACTIVE_ALLOCATED;
            inactive += sg->blocks[j].state == TC_MEMORY_BLOCK_STATE_INACTIVE;
        }
    }
    CHECK(small == 1 && large == 1);
    CHECK(alloc_blocks == 2 && inactive >= 1); /* the small segment's remainder is free */
    const char *path = "tc_memory_stats_snapshot.json";
    CHECK_OK(tc_memory_snapshot_write_json(&snap, path));
    FILE *f = fopen(path, "r");
    char text[8192] = {0};
    if (f) {
        size_t got = fread(text, 1, sizeof text - 1, f);
        text[got] = '\0';
        fclose(f);
    }
    remove(path);
    CHECK(strstr(text, "\"segment_type\": \"small\"") &&
          strstr(text, "\"segment_type\": \"large\""));
    CHECK(strstr(text, "\"state\": \"active_allocated\"") &&
          strstr(text, "\"state\": \"inactive\""));
    tc__snapshot_free(&snap);
    CHECK_OK(tc__alloc_free(a, p));
    CHECK_OK(tc__alloc_free(a, q));
    tc__alloc_destroy(a);
}

/* ---- TCUDA_ALLOC_CONF -------------------------------------------------------------- */

/* The parser gives the backend a valid text names and refuses every bad
 * text with a message naming the culprit, leaving the config unchanged. */
static void test_conf(void)
{
    tc__alloc_config c;
    tc__alloc_config_default(&c);
    CHECK(c.backend == 0);
    CHECK_OK(tc__alloc_config_parse("backend:cudaMallocAsync", &c));
    CHECK(c.backend == 1);
    CHECK_OK(tc__alloc_config_parse("backend:native,expandable_segments:True", &c));
    CHECK(c.backend == 0 && c.expandable_segments);
    static const struct {
        const char *text, *culprit;
    } bad[] = {
        {"bogus:1", "bogus"},
        {"backend:cudaMallocAsync,bogus:1", "bogus"},
        {"backend:cudamallocasync", "cudamallocasync"},
        {"backend:", "backend"},
        {"backend", "backend"},
        {"max_split_size_mb:1", "max_split_size_mb"},
        {"garbage_collection_threshold:1.5", "garbage_collection_threshold"},
        {"expandable_segments:yes", "expandable_segments"},
        {"roundup_power2_divisions:3", "roundup_power2_divisions"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tc__alloc_config d;
        tc__alloc_config_default(&d);
        d.backend = 1;
        CHECK_STATUS(tc__alloc_config_parse(bad[i].text, &d), TC_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(tc_last_error(), bad[i].culprit) != NULL);
        CHECK(d.backend == 1 && !d.expandable_segments); /* unchanged */
    }
}

/* Through the public API, in a child with the variable set: a bad
 * TCUDA_ALLOC_CONF gives an error and the parser's message, not "native".
 * `var`: the variable the message must name (NULL: any). Asked twice, so
 * that a notice printed each time would show. */
static int child_backend(const char *want, const char *var)
{
    const char *b = NULL;
    CHECK_STATUS(tc_get_allocator_backend(NULL), TC_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < 2; i++) {
        if (!strcmp(want, "NULL")) {
            CHECK_STATUS(tc_get_allocator_backend(&b), TC_ERROR_INVALID_ARGUMENT);
            CHECK(b == NULL);
            CHECK(strncmp(tc_last_error(), "tc_get_allocator_backend: ", 26) == 0);
            CHECK(strstr(tc_last_error(), "bogus") ||
                  strstr(tc_last_error(), "release_lock_on_cudamalloc")); /* the culprit */
            if (var) {
                char named[64];
                snprintf(named, sizeof named, ": %s: ", var);
                CHECK(strstr(tc_last_error(), named) != NULL);
            }
        } else {
            CHECK_OK(tc_get_allocator_backend(&b));
            CHECK(b && !strcmp(b, want));
        }
    }
    return TC_TEST_DONE();
}

static void test_backend_public(const char *self)
{
    static const struct {
        const char *conf, *want;
    } cases[] = {
        {"", "native"},
        {"backend:native", "native"},
        {"backend:cudaMallocAsync", "cudaMallocAsync"},
        {"bogus:1", "NULL"},
        {"backend:cudaMallocAsync,bogus:1", "NULL"},
        {"backend:bogus", "NULL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char cmd[4300];
        snprintf(cmd, sizeof cmd,
                 "env -u PYTORCH_ALLOC_CONF -u PYTORCH_CUDA_ALLOC_CONF TCUDA_ALLOC_CONF='%s' '%s' "
                 "backend %s >/dev/null 2>&1",
                 cases[i].conf, self, cases[i].want);
        int rc = system(cmd);
        if (rc != 0)
            printf("TCUDA_ALLOC_CONF='%s': wanted %s\n", cases[i].conf, cases[i].want);
        CHECK(rc == 0);
    }
}

/* PyTorch's names: PYTORCH_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF, count
 * when TCUDA_ALLOC_CONF is unset (set, even empty, it wins); errors name the
 * variable read; stderr holds one notice naming both when a set variable is
 * hidden (or naming a skipped key of PyTorch's), else nothing. */
static void test_backend_pytorch_names(const char *self)
{
    static const struct {
        const char *env, *want, *var, *hidden;
    } cases[] = {
        {"PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync", "cudaMallocAsync", NULL, NULL},
        {"PYTORCH_ALLOC_CONF=backend:cudaMallocAsync", "cudaMallocAsync", NULL, NULL},
        {"PYTORCH_ALLOC_CONF=backend:native PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync",
         "native", NULL, "PYTORCH_CUDA_ALLOC_CONF"},
        {"TCUDA_ALLOC_CONF=backend:native PYTORCH_ALLOC_CONF=backend:cudaMallocAsync", "native",
         NULL, "PYTORCH_ALLOC_CONF"},
        {"TCUDA_ALLOC_CONF= PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync", "native", NULL,
         "PYTORCH_CUDA_ALLOC_CONF"},
        {"TCUDA_ALLOC_CONF=backend:cudaMallocAsync PYTORCH_CUDA_ALLOC_CONF=bogus:1",
         "cudaMallocAsync", NULL, "PYTORCH_CUDA_ALLOC_CONF"},
        {"PYTORCH_CUDA_ALLOC_CONF=bogus:1", "NULL", "PYTORCH_CUDA_ALLOC_CONF", NULL},
        {"PYTORCH_ALLOC_CONF=bogus:1 PYTORCH_CUDA_ALLOC_CONF=backend:native", "NULL",
         "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"},
        {"TCUDA_ALLOC_CONF=bogus:1 PYTORCH_ALLOC_CONF=backend:native", "NULL", "TCUDA_ALLOC_CONF",
         "PYTORCH_ALLOC_CONF"},
        /* a key of PyTorch's that tcuda lacks: skipped with a notice in
         * PyTorch's variables, an error in tcuda's */
        {"PYTORCH_CUDA_ALLOC_CONF=release_lock_on_cudamalloc:True,backend:cudaMallocAsync",
         "cudaMallocAsync", NULL, "release_lock_on_cudamalloc"},
        {"TCUDA_ALLOC_CONF=release_lock_on_cudamalloc:True", "NULL", "TCUDA_ALLOC_CONF", NULL},
    };
    char err_path[] = "/tmp/tc_stats_env_XXXXXX";
    int fd = mkstemp(err_path);
    CHECK(fd >= 0);
    close(fd);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char cmd[4600];
        snprintf(cmd, sizeof cmd,
                 "env -u TCUDA_ALLOC_CONF -u PYTORCH_ALLOC_CONF -u PYTORCH_CUDA_ALLOC_CONF %s "
                 "'%s' backend %s %s >/dev/null 2>'%s'",
                 cases[i].env, self, cases[i].want, cases[i].var ? cases[i].var : "", err_path);
        int rc = system(cmd);
        char *err = tc_test_read_file(err_path);
        int notices = 0;
        for (const char *p = err ? strstr(err, "tcuda warning:") : NULL; p;
             p = strstr(p + 1, "tcuda warning:"))
            notices++;
        bool named = !cases[i].hidden || (err && strstr(err, cases[i].hidden));
        bool ok = rc == 0 && notices == (cases[i].hidden ? 1 : 0) && named;
        if (!ok)
            printf("%s: wanted %s, exit %d, stderr: %s\n", cases[i].env, cases[i].want, rc,
                   err ? err : "(unreadable)");
        CHECK(ok);
        free(err);
    }
    remove(err_path);
}

int main(int argc, char **argv)
{
    tc_test_init();
    if (argc > 2 && !strcmp(argv[1], "backend"))
        return child_backend(argv[2], argc > 3 && argv[3][0] ? argv[3] : NULL);
    test_peaks_and_resets();
    test_event_counters();
    test_keys();
    test_names();
    test_summary_abbreviated();
    test_conf();
    test_backend_public(argv[0]);
    test_backend_pytorch_names(argv[0]);
    return TC_TEST_DONE();
}
