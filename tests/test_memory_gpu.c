/* The caching allocator on a real GPU: the OOM path and its message, a block
 * still read on stream B after stream A freed it is not overwritten, the
 * fraction cap, snapshot JSON and the summary (abbreviated too), pinned-host
 * reuse safety (with tc_host_record_stream); then, in child runs,
 * peak statistics and every reset through the public API with every stat key
 * equal to its field, and with TCUDA_ALLOC_CONF set, expandable segments
 * growing in place, the cudaMallocAsync backend, and a bad setting refused
 * before any allocation. Exits 77 without a GPU. (Peaks, resets and keys are
 * checked against a model on the CPU in tests/test_memory_stats.c; user
 * allocators serving tensors in tests/test_memory_pluggable.c.) */
#include <math.h>
#include <stdlib.h>

#include "tc_test.h"

#include <cuda_runtime_api.h>

int tc_test_spin_sum(const float *p, size_t n, float *out, long long cycles, cudaStream_t s);
int tc_test_fill(float *p, size_t n, float v, cudaStream_t s);

#define MiB ((size_t)1 << 20)

static void test_oom(void)
{
    size_t fr, tot;
    CHECK_OK(tc_mem_get_info(0, &fr, &tot));
    void *keep, *cached;
    CHECK_OK(tc_caching_allocator_alloc(64 * MiB, 0, NULL, &keep));
    CHECK_OK(tc_caching_allocator_alloc(200 * MiB, 0, NULL, &cached));
    CHECK_OK(tc_caching_allocator_delete(cached)); /* 200 MiB cached, unused */
    void *p = NULL;
    CHECK_STATUS(tc_caching_allocator_alloc(tot + (1ull << 30), 0, NULL, &p),
                 TC_ERROR_OUT_OF_MEMORY);
    const char *m = tc_last_error();
    printf("OOM message: %s\n", m);
    CHECK(strstr(m, "tried to allocate") && strstr(m, "total capacity") && strstr(m, "allocated") &&
          strstr(m, "Hint"));
    CHECK(tc_test_stat(0, "num_ooms") == 1);
    CHECK(tc_test_bytes(tc_memory_reserved, 0) == 64 * MiB + 0 * MiB ||
          tc_test_bytes(tc_memory_reserved, 0) <= 66 * MiB);
    CHECK_OK(tc_caching_allocator_alloc(300 * MiB, 0, NULL, &p)); /* later alloc works */
    CHECK_OK(tc_caching_allocator_delete(p));
    CHECK_OK(tc_caching_allocator_delete(keep));
    CHECK_OK(tc_empty_cache());
    CHECK(tc_test_bytes(tc_memory_reserved, 0) == 0);
}

static void test_record_stream(void)
{
    tc_stream *a, *b;
    CHECK_OK(tc_stream_create(0, 0, &a));
    CHECK_OK(tc_stream_create(0, 0, &b));
    size_t n = 1 << 20;
    float *x, *out;
    CHECK_OK(tc_caching_allocator_alloc(n * 4, 0, a, (void **)&x));
    CHECK_OK(tc_caching_allocator_alloc(4, 0, b, (void **)&out));
    cudaStream_t ha = tc_stream_cuda_handle(a), hb = tc_stream_cuda_handle(b);
    CHECK(tc_test_fill(x, n, 1.0f, ha) == 0);
    CHECK(cudaStreamSynchronize(ha) == cudaSuccess);
    CHECK(cudaMemsetAsync(out, 0, 4, hb) == cudaSuccess);
    CHECK(tc_test_spin_sum(x, n, out, 200000000LL, hb) == 0); /* ~0.1 s, then reads x */
    CHECK_OK(tc_caching_allocator_record_stream(x, b));
    CHECK_OK(tc_caching_allocator_delete(x));
    float *y;
    CHECK_OK(tc_caching_allocator_alloc(n * 4, 0, a, (void **)&y));
    CHECK(y != x); /* not reused while b's kernel runs */
    CHECK(tc_test_fill(y, n, 7.0f, ha) == 0);
    float h = 0;
    CHECK(cudaMemcpyAsync(&h, out, 4, cudaMemcpyDeviceToHost, hb) == cudaSuccess);
    CHECK(cudaStreamSynchronize(hb) == cudaSuccess);
    CHECK(h == (float)n);
    CHECK_OK(tc_caching_allocator_delete(y));
    CHECK_OK(tc_caching_allocator_delete(out));
    CHECK_OK(tc_synchronize(0));
    CHECK_OK(tc_stream_destroy(a));
    CHECK_OK(tc_stream_destroy(b));
}

static void test_fraction_snapshot(void)
{
    size_t fr, tot;
    CHECK_OK(tc_mem_get_info(0, &fr, &tot));
    CHECK_OK(tc_set_per_process_memory_fraction(0, 0.1));
    void *p = NULL;
    CHECK_STATUS(tc_caching_allocator_alloc(tot / 5, 0, NULL, &p), TC_ERROR_OUT_OF_MEMORY);
    CHECK(strstr(tc_last_error(), "capped") != NULL);
    CHECK_OK(tc_caching_allocator_alloc(tot / 20, 0, NULL, &p));
    CHECK_OK(tc_set_per_process_memory_fraction(0, 1.0));
    CHECK_STATUS(tc_set_per_process_memory_fraction(0, 2.0), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_set_per_process_memory_fraction(0, NAN), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "NaN") != NULL);
    CHECK_STATUS(tc_set_per_process_memory_fraction(0, 1.0000000000000002),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "1.0000000000000002") != NULL);
    void *q;
    CHECK_OK(tc_caching_allocator_alloc(1000, 0, NULL, &q));
    tc_memory_snapshot_info *snap;
    CHECK_OK(tc_memory_snapshot(&snap));
    CHECK(snap->num_segments >= 2);
    int small_alloc = 0; /* q: 1000 bytes in a small segment, active and allocated */
    for (size_t i = 0; i < snap->num_segments; i++)
        for (size_t j = 0; j < snap->segments[i].num_blocks; j++)
            small_alloc += snap->segments[i].segment_type == TC_MEMORY_SEGMENT_TYPE_SMALL &&
                           snap->segments[i].blocks[j].address == (uint64_t)(uintptr_t)q &&
                           snap->segments[i].blocks[j].state ==
                               TC_MEMORY_BLOCK_STATE_ACTIVE_ALLOCATED;
    CHECK(small_alloc == 1);
    CHECK_OK(tc_memory_snapshot_write_json(snap, "tc_alloc_snapshot.json"));
    CHECK_OK(tc_memory_snapshot_destroy(snap));
    CHECK(system("python3 -c \"import json; d=json.load(open('tc_alloc_snapshot.json')); "
                 "assert len(d['segments'])>=2; "
                 "assert {s['segment_type'] for s in d['segments']} <= {'small', 'large'}; "
                 "assert 'active_allocated' in {b['state'] for s in d['segments'] "
                 "for b in s['blocks']}\"") == 0);
    char *sum = NULL;
    CHECK_OK(tc_memory_summary(0, false, &sum));
    CHECK(sum && strstr(sum, "Allocated memory"));
    /* abbreviated: the same table without the per-pool rows (nothing
     * allocates in between, so the numbers are the same) */
    char *abbr = NULL;
    CHECK_OK(tc_memory_summary(0, true, &abbr));
    CHECK(sum && abbr && strstr(sum, "from small pool") && !strstr(abbr, "from small pool") &&
          !strstr(abbr, "from large pool"));
    if (sum && abbr) {
        char *kept = malloc(strlen(sum) + 1);
        size_t at = 0;
        for (const char *line = sum; *line;) {
            const char *end = strchr(line, '\n');
            size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
            char one[256];
            snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one ? len : sizeof one - 1), line);
            if (!strstr(one, "from small pool") && !strstr(one, "from large pool")) {
                memcpy(kept + at, line, len);
                at += len;
            }
            line += len;
        }
        kept[at] = '\0';
        CHECK(strcmp(kept, abbr) == 0);
        free(kept);
    }
    tc_free(abbr);
    tc_free(sum);
    CHECK_STATUS(tc_memory_summary(0, false, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_test_stat(0, "allocation.all.current") == 2);
    int64_t v = 5;
    CHECK_STATUS(tc_memory_stats_get(0, "no.such.key", &v), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_memory_stats_get(0, "allocation.all.current", NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(v == 5);
    CHECK_OK(tc_caching_allocator_delete(p));
    CHECK_OK(tc_caching_allocator_delete(q));
    CHECK_STATUS(tc_caching_allocator_delete(q), TC_ERROR_INVALID_ARGUMENT);
    tc_allocator *u;
    CHECK_OK(tc_allocator_create((tc_alloc_fn)1, (tc_free_fn)1, &u));
    CHECK_STATUS(tc_change_current_allocator(u), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc_allocator_destroy(u)); /* not current: it can go */
}

static void test_pinned(void)
{
    size_t n = 4 << 20;
    float *h, *d;
    CHECK_OK(tc_caching_allocator_alloc(n * 4, 0, NULL, (void **)&d));
    CHECK_OK(tc_host_alloc(n * 4, (void **)&h));
    for (size_t i = 0; i < n; i++)
        h[i] = 3.0f;
    cudaStream_t s = tc_stream_cuda_handle(tc_test_current_stream(0));
    float *out;
    CHECK_OK(tc_caching_allocator_alloc(4, 0, NULL, (void **)&out));
    CHECK(cudaMemsetAsync(out, 0, 4, s) == cudaSuccess);
    CHECK(tc_test_spin_sum(d, 1, out, 200000000LL, s) == 0); /* delay the copy */
    CHECK(cudaMemcpyAsync(d, h, n * 4, cudaMemcpyHostToDevice, s) == cudaSuccess);
    CHECK_OK(tc_host_free(h));
    float *h2;
    CHECK_OK(tc_host_alloc(n * 4, (void **)&h2));
    CHECK(h2 != h); /* the copy has not run yet: not reused */
    for (size_t i = 0; i < n; i++)
        h2[i] = 9.0f;
    float back = 0;
    CHECK(cudaMemcpyAsync(&back, d + n - 1, 4, cudaMemcpyDeviceToHost, s) == cudaSuccess);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(back == 3.0f);
    CHECK_OK(tc_host_free(h2));
    CHECK_OK(tc_caching_allocator_delete(d));
    CHECK_OK(tc_caching_allocator_delete(out));
}

/* tc_host_record_stream: a pinned block read by a copy on another stream,
 * recorded there and freed, is not handed out again while that copy waits
 * (the data it copies stays the block's), and comes back once the stream is
 * done; bad pointers are refused. */
static void test_pinned_record_stream(void)
{
    size_t n = 4 << 20;
    float *h, *d, *out;
    CHECK_OK(tc_caching_allocator_alloc(n * 4, 0, NULL, (void **)&d));
    CHECK_OK(tc_caching_allocator_alloc(4, 0, NULL, (void **)&out));
    CHECK_OK(tc_host_alloc(n * 4, (void **)&h));
    for (size_t i = 0; i < n; i++)
        h[i] = 5.0f;
    tc_stream *side = NULL;
    CHECK_OK(tc_stream_create(0, 0, &side));
    cudaStream_t cs = tc_stream_cuda_handle(side);
    CHECK(cudaMemsetAsync(out, 0, 4, cs) == cudaSuccess);
    CHECK(tc_test_spin_sum(d, 1, out, 200000000LL, cs) == 0); /* delay the copy */
    CHECK(cudaMemcpyAsync(d, h, n * 4, cudaMemcpyHostToDevice, cs) == cudaSuccess);
    CHECK_OK(tc_host_record_stream(h, side));
    CHECK_OK(tc_host_record_stream(h, side)); /* twice: still one use */
    CHECK_OK(tc_host_free(h));
    float *h2;
    CHECK_OK(tc_host_alloc(n * 4, (void **)&h2));
    CHECK(h2 != h); /* the side stream's copy has not run yet */
    for (size_t i = 0; i < n; i++)
        h2[i] = 8.0f;
    float back = 0;
    CHECK(cudaMemcpyAsync(&back, d + n - 1, 4, cudaMemcpyDeviceToHost, cs) == cudaSuccess);
    CHECK(cudaStreamSynchronize(cs) == cudaSuccess);
    CHECK(back == 5.0f); /* what h held when the copy was queued */
    CHECK_OK(tc_host_free(h2));
    /* the side stream is done: both cached blocks of this size are free again */
    float *h3, *h4;
    CHECK_OK(tc_host_alloc(n * 4, (void **)&h3));
    CHECK_OK(tc_host_alloc(n * 4, (void **)&h4));
    CHECK(h3 == h || h4 == h);
    CHECK_STATUS(tc_host_record_stream(NULL, side), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_host_record_stream(h3 + 1, side), TC_ERROR_INVALID_ARGUMENT); /* not a start */
    float local = 0;
    CHECK_STATUS(tc_host_record_stream(&local, side), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_host_free(h3));
    CHECK_OK(tc_host_free(h4));
    CHECK_OK(tc_stream_destroy(side));
    CHECK_OK(tc_caching_allocator_delete(d));
    CHECK_OK(tc_caching_allocator_delete(out));
}

static int child_expandable(void)
{
    void *p, *q;
    CHECK_OK(tc_caching_allocator_alloc(30 * MiB, 0, NULL, &p));
    CHECK_OK(tc_caching_allocator_alloc(50 * MiB, 0, NULL, &q));
    CHECK((char *)q == (char *)p + 30 * MiB);
    CHECK(tc_test_stat(0, "segment.all.current") == 1);
    CHECK(tc_test_bytes(tc_memory_reserved, 0) <= 82 * MiB);
    CHECK(tc_test_fill(q, 50 * MiB / 4, 1.0f, NULL) == 0);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK_OK(tc_caching_allocator_delete(p));
    CHECK_OK(tc_caching_allocator_delete(q));
    CHECK_OK(tc_empty_cache());
    CHECK(tc_test_bytes(tc_memory_reserved, 0) == 0);
    return TC_TEST_DONE();
}

static int child_async(void)
{
    const char *backend = NULL;
    CHECK_OK(tc_get_allocator_backend(&backend));
    CHECK(backend && strcmp(backend, "cudaMallocAsync") == 0);
    void *p = NULL;
    CHECK_OK(tc_caching_allocator_alloc(10 * MiB, 0, NULL, &p));
    if (!p)
        return TC_TEST_DONE();
    CHECK(tc_test_bytes(tc_memory_allocated, 0) == 10 * MiB);
    CHECK(tc_test_bytes(tc_memory_reserved, 0) >= 10 * MiB);
    CHECK(tc_test_fill(p, 10 * MiB / 4, 1.0f, NULL) == 0);
    CHECK_OK(tc_caching_allocator_delete(p));
    CHECK(tc_test_bytes(tc_memory_allocated, 0) == 0);
    CHECK_OK(tc_synchronize(0));
    return TC_TEST_DONE();
}

/* A bad TCUDA_ALLOC_CONF is an error at tc_init and in tc_get_allocator_backend
 * (not silently "native"), and every allocation fails with the same message. */
static int child_bad_conf(void)
{
    const char *backend = NULL;
    CHECK_STATUS(tc_get_allocator_backend(&backend), TC_ERROR_INVALID_ARGUMENT);
    CHECK(backend == NULL);
    CHECK(strncmp(tc_last_error(), "tc_get_allocator_backend: TCUDA_ALLOC_CONF: ", 44) == 0 &&
          strstr(tc_last_error(), "bogus") != NULL);
    CHECK_STATUS(tc_init(), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(tc_last_error(), "tc_init: ", 9) == 0 && strstr(tc_last_error(), "bogus"));
    void *p = NULL;
    CHECK_STATUS(tc_caching_allocator_alloc(1000, 0, NULL, &p), TC_ERROR_INVALID_ARGUMENT);
    CHECK(p == NULL && strstr(tc_last_error(), "bogus") != NULL);
    int64_t n = 4;
    tc_tensor *t = NULL;
    CHECK_STATUS(tc_tensor_zeros(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, 0}, &t),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(t == NULL);
    return TC_TEST_DONE();
}

/* ---- peaks, resets and keys through the public API ----------------------------- */

/* One statistic of device 0; -1 (and a message) for a key that fails. */
static int64_t stat(const char *key)
{
    int64_t v = -1;
    (void)tc_memory_stats_get(0, key, &v);
    return v;
}

/* Stats with a peak whose peak is not the current value. */
static int peaks_not_current(void)
{
    tc_memory_stats_info s;
    CHECK_OK(tc_memory_stats(0, &s));
    const tc_memory_stat *all = &s.allocation[0];
    int bad = 0;
    for (size_t i = 0; i < 9 * TC_STAT_POOL_COUNT; i++)
        bad += all[i].peak != all[i].current;
    return bad + (s.oversize_allocations.peak != s.oversize_allocations.current) +
           (s.oversize_segments.peak != s.oversize_segments.current);
}

/* Every key memory.h lists for tc_memory_stats_get reads its field. */
static void check_every_key(void)
{
    tc_memory_stats_info s;
    CHECK_OK(tc_memory_stats(0, &s)); /* nothing runs between this and the reads */
    static const char *names[10] = {"allocation",     "allocated",      "segment",
                                    "active",         "inactive_split", "allocated_bytes",
                                    "reserved_bytes", "active_bytes",   "inactive_split_bytes",
                                    "requested_bytes"};
    const tc_memory_stat *arrays[10] = {s.allocation,     s.allocation,     s.segment,
                                        s.active,         s.inactive_split, s.allocated_bytes,
                                        s.reserved_bytes, s.active_bytes,   s.inactive_split_bytes,
                                        s.requested_bytes};
    static const char *pools[3] = {"all", "small_pool", "large_pool"};
    static const char *metrics[4] = {"current", "peak", "allocated", "freed"};
    int bad = 0;
    for (int i = 0; i < 10; i++)
        for (int p = 0; p < 3; p++)
            for (int k = 0; k < 4; k++) {
                const tc_memory_stat *m = &arrays[i][p];
                const int64_t want[4] = {m->current, m->peak, m->allocated, m->freed};
                char key[64];
                snprintf(key, sizeof key, "%s.%s.%s", names[i], pools[p], metrics[k]);
                bad += stat(key) != want[k];
            }
    for (int k = 0; k < 4; k++) {
        char key[64];
        const tc_memory_stat *o[2] = {&s.oversize_allocations, &s.oversize_segments};
        for (int j = 0; j < 2; j++) {
            const int64_t want[4] = {o[j]->current, o[j]->peak, o[j]->allocated, o[j]->freed};
            snprintf(key, sizeof key, "%s.%s", j ? "oversize_segments" : "oversize_allocations",
                     metrics[k]);
            bad += stat(key) != want[k];
        }
    }
    bad += stat("num_alloc_retries") != s.num_alloc_retries;
    bad += stat("num_ooms") != s.num_ooms;
    bad += stat("num_sync_all_streams") != s.num_sync_all_streams;
    bad += stat("num_device_alloc") != s.num_device_alloc;
    bad += stat("num_device_free") != s.num_device_free;
    bad += stat("max_split_size") != s.max_split_size;
    bad += stat("num_device_synchronize") != s.num_device_synchronize;
    CHECK(bad == 0);
    CHECK(s.allocation[0].current > 0); /* the comparison saw real numbers */
    CHECK(stat("allocation.all") == -1 && strstr(tc_last_error(), "unknown key"));
    int64_t v = 3;
    CHECK_STATUS(tc_memory_stats_get(0, NULL, &v), TC_ERROR_INVALID_ARGUMENT);
    CHECK(v == 3);
}

static int child_peaks(void)
{
    tc_memory_stats_info s;
    CHECK_OK(tc_memory_stats(0, &s));
    CHECK(s.allocation[0].peak == 0 && s.reserved_bytes[0].peak == 0); /* before first use */
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK_OK(tc_caching_allocator_alloc(1000, 0, NULL, &a));     /* small pool */
    CHECK_OK(tc_caching_allocator_alloc(3 * MiB, 0, NULL, &b));  /* large pool */
    CHECK_OK(tc_caching_allocator_alloc(30 * MiB, 0, NULL, &c)); /* large, own segment */
    CHECK(stat("requested_bytes.all.current") == (int64_t)(1000 + 33 * MiB));
    CHECK(stat("requested_bytes.small_pool.current") == 1000);
    CHECK(stat("allocation.small_pool.current") == 1 && stat("allocation.large_pool.current") == 2);
    size_t top = tc_test_bytes(tc_memory_allocated, 0);
    CHECK(top >= 1000 + 33 * MiB && top == (size_t)stat("allocated_bytes.all.current"));
    CHECK(tc_test_bytes(tc_max_memory_allocated, 0) == top);
    CHECK(tc_test_bytes(tc_memory_reserved, 0) >= top &&
          tc_test_bytes(tc_max_memory_reserved, 0) >= tc_test_bytes(tc_memory_reserved, 0));
    CHECK(tc_test_bytes(tc_memory_cached, 0) == tc_test_bytes(tc_memory_reserved, 0));
    CHECK(tc_test_bytes(tc_max_memory_cached, 0) == tc_test_bytes(tc_max_memory_reserved, 0));
    check_every_key();
    /* a free lowers current, never the peak */
    CHECK_OK(tc_caching_allocator_delete(c));
    CHECK(tc_test_bytes(tc_memory_allocated, 0) <= top - 30 * MiB &&
          tc_test_bytes(tc_max_memory_allocated, 0) == top);
    CHECK(stat("allocation.all.peak") == 3 && stat("allocation.all.current") == 2);
    /* reset_max_memory_allocated resets every peak (as torch.cuda's now does)
     * and keeps totals: allocated/freed and the event counters */
    tc_memory_stats_info before, after;
    CHECK_OK(tc_memory_stats(0, &before));
    CHECK(peaks_not_current() > 0);
    CHECK_OK(tc_reset_max_memory_allocated(0));
    CHECK(peaks_not_current() == 0);
    CHECK_OK(tc_memory_stats(0, &after));
    CHECK(tc_test_bytes(tc_max_memory_allocated, 0) == tc_test_bytes(tc_memory_allocated, 0));
    CHECK(after.allocation[0].allocated == 3 && after.allocation[0].freed == 1);
    CHECK(after.allocated_bytes[0].allocated == before.allocated_bytes[0].allocated &&
          after.allocated_bytes[0].freed == before.allocated_bytes[0].freed);
    CHECK(after.num_device_alloc == before.num_device_alloc &&
          after.num_device_free == before.num_device_free && after.num_ooms == before.num_ooms);
    /* the peak rises again from there */
    size_t base = tc_test_bytes(tc_memory_allocated, 0);
    CHECK_OK(tc_caching_allocator_alloc(5 * MiB, 0, NULL, &d));
    CHECK(tc_test_bytes(tc_max_memory_allocated, 0) == tc_test_bytes(tc_memory_allocated, 0) &&
          tc_test_bytes(tc_memory_allocated, 0) >= base + 5 * MiB);
    CHECK_OK(tc_caching_allocator_delete(d));
    CHECK(tc_test_bytes(tc_max_memory_allocated, 0) >= base + 5 * MiB);
    /* reserved: a new segment raises its peak; released, the peak stays until
     * reset_max_memory_cached brings it down to the current value */
    void *e = NULL, *f = NULL;
    CHECK_OK(tc_empty_cache()); /* no wholly free segment left to release in e's favour */
    size_t reserved0 = tc_test_bytes(tc_memory_reserved, 0);
    CHECK_OK(tc_caching_allocator_alloc(40 * MiB, 0, NULL, &e)); /* own segment: reserves */
    CHECK_OK(tc_caching_allocator_delete(e));
    CHECK_OK(tc_empty_cache());
    CHECK(tc_test_bytes(tc_memory_reserved, 0) <= reserved0);
    CHECK(tc_test_bytes(tc_max_memory_reserved, 0) >= reserved0 + 40 * MiB);
    CHECK_OK(tc_reset_max_memory_cached(0));
    CHECK(tc_test_bytes(tc_max_memory_reserved, 0) == tc_test_bytes(tc_memory_reserved, 0));
    CHECK(tc_test_bytes(tc_max_memory_cached, 0) == tc_test_bytes(tc_memory_cached, 0));
    CHECK(peaks_not_current() == 0); /* it, too, resets every peak */
    CHECK_OK(tc_caching_allocator_alloc(8 * MiB, 0, NULL, &d));
    CHECK_OK(tc_caching_allocator_alloc(1000, 0, NULL, &f));
    CHECK_OK(tc_caching_allocator_delete(f));
    CHECK(peaks_not_current() > 0);           /* f's allocation raised peaks above current */
    CHECK_OK(tc_reset_peak_memory_stats(-1)); /* -1: the current device, 0 */
    CHECK(peaks_not_current() == 0);
    /* a, b, c, d (5 MiB), e, d (8 MiB), f; freed: c, d, e, f */
    CHECK(stat("allocation.all.allocated") == 7 && stat("allocation.all.freed") == 4);
    check_every_key();
    /* a bad device is an error named after the call */
    CHECK_STATUS(tc_reset_peak_memory_stats(4096), TC_ERROR_INVALID_DEVICE);
    CHECK_STATUS(tc_reset_max_memory_allocated(4096), TC_ERROR_INVALID_DEVICE);
    CHECK(strncmp(tc_last_error(), "tc_reset_max_memory_allocated: ", 31) == 0);
    size_t bytes = 9;
    CHECK_STATUS(tc_max_memory_allocated(4096, &bytes), TC_ERROR_INVALID_DEVICE);
    CHECK(strncmp(tc_last_error(), "tc_max_memory_allocated: ", 25) == 0 && bytes == 9);
    CHECK_OK(tc_caching_allocator_delete(a));
    CHECK_OK(tc_caching_allocator_delete(b));
    CHECK_OK(tc_caching_allocator_delete(d));
    CHECK(tc_test_bytes(tc_memory_allocated, 0) == 0);
    return TC_TEST_DONE();
}

int main(int argc, char **argv)
{
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    if (argc > 1 && !strcmp(argv[1], "expandable"))
        return child_expandable();
    if (argc > 1 && !strcmp(argv[1], "async"))
        return child_async();
    if (argc > 1 && !strcmp(argv[1], "badconf"))
        return child_bad_conf();
    if (argc > 1 && !strcmp(argv[1], "peaks"))
        return child_peaks();
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' peaks", argv[0]);
    CHECK(system(cmd) == 0); /* first, in a fresh process: exact counts */
    test_oom();
    test_record_stream();
    test_fraction_snapshot();
    test_pinned();
    test_pinned_record_stream();
    snprintf(cmd, sizeof cmd, "TCUDA_ALLOC_CONF=expandable_segments:True '%s' expandable", argv[0]);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "TCUDA_ALLOC_CONF=backend:cudaMallocAsync '%s' async", argv[0]);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "TCUDA_ALLOC_CONF=bogus:1 '%s' badconf", argv[0]);
    CHECK(system(cmd) == 0); /* a bad config is an error, not ignored */
    return TC_TEST_DONE();
}
