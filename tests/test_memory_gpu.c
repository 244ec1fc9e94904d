/* The caching allocator on a real GPU: the OOM path and its message, a block
 * still read on stream B after stream A freed it is not overwritten, the
 * fraction cap, snapshot JSON, pinned-host reuse safety; then, in child runs
 * with TCUDA_ALLOC_CONF set, expandable segments growing in place and the
 * cudaMallocAsync backend. Exits 77 without a GPU. */
#include <stdlib.h>

#include "tc_test.h"

#ifndef TCUDA_HAVE_CUDA
int main(void)
{
    tc_test_init();
    tc_test_require_gpu(); /* exits 77: built without CUDA */
    return 77;
}
#else
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
    CHECK(strstr(m, "tried to allocate") && strstr(m, "total capacity") &&
          strstr(m, "allocated") && strstr(m, "Hint"));
    CHECK(tc_memory_stats_get(0, "num_ooms") == 1);
    CHECK(tc_memory_reserved(0) == 64 * MiB + 0 * MiB || tc_memory_reserved(0) <= 66 * MiB);
    CHECK_OK(tc_caching_allocator_alloc(300 * MiB, 0, NULL, &p)); /* later alloc works */
    CHECK_OK(tc_caching_allocator_delete(p));
    CHECK_OK(tc_caching_allocator_delete(keep));
    CHECK_OK(tc_empty_cache());
    CHECK(tc_memory_reserved(0) == 0);
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
    CHECK_OK(tc_set_per_process_memory_fraction(0.1, 0));
    void *p = NULL;
    CHECK_STATUS(tc_caching_allocator_alloc(tot / 5, 0, NULL, &p), TC_ERROR_OUT_OF_MEMORY);
    CHECK(strstr(tc_last_error(), "capped") != NULL);
    CHECK_OK(tc_caching_allocator_alloc(tot / 20, 0, NULL, &p));
    CHECK_OK(tc_set_per_process_memory_fraction(1.0, 0));
    CHECK_STATUS(tc_set_per_process_memory_fraction(2.0, 0), TC_ERROR_INVALID_ARGUMENT);
    void *q;
    CHECK_OK(tc_caching_allocator_alloc(1000, 0, NULL, &q));
    struct tc_memory_snapshot *snap;
    CHECK_OK(tc_memory_snapshot(&snap));
    CHECK(snap->num_segments >= 2);
    CHECK_OK(tc_memory_snapshot_write_json(snap, "tc_alloc_snapshot.json"));
    tc_memory_snapshot_free(snap);
    CHECK(system("python3 -c \"import json; d=json.load(open('tc_alloc_snapshot.json')); "
                 "assert len(d['segments'])>=2\"") == 0);
    char *sum = tc_memory_summary(0, false);
    CHECK(sum && strstr(sum, "Allocated memory"));
    tc_free(sum);
    CHECK(tc_memory_stats_get(0, "allocation.all.current") == 2);
    CHECK(tc_memory_stats_get(0, "no.such.key") == -1);
    CHECK_OK(tc_caching_allocator_delete(p));
    CHECK_OK(tc_caching_allocator_delete(q));
    CHECK_STATUS(tc_caching_allocator_delete(q), TC_ERROR_INVALID_ARGUMENT);
    tc_allocator *u;
    CHECK_OK(tc_allocator_from_functions((tc_alloc_fn)1, (tc_free_fn)1, &u));
    CHECK_STATUS(tc_change_current_allocator(u), TC_ERROR_INVALID_STATE);
    free(u);
}

static void test_pinned(void)
{
    size_t n = 4 << 20;
    float *h, *d;
    CHECK_OK(tc_caching_allocator_alloc(n * 4, 0, NULL, (void **)&d));
    CHECK_OK(tc_host_alloc(n * 4, (void **)&h));
    for (size_t i = 0; i < n; i++)
        h[i] = 3.0f;
    cudaStream_t s = tc_stream_cuda_handle(tc_current_stream(0));
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

static int child_expandable(void)
{
    void *p, *q;
    CHECK_OK(tc_caching_allocator_alloc(30 * MiB, 0, NULL, &p));
    CHECK_OK(tc_caching_allocator_alloc(50 * MiB, 0, NULL, &q));
    CHECK((char *)q == (char *)p + 30 * MiB);
    CHECK(tc_memory_stats_get(0, "segment.all.current") == 1);
    CHECK(tc_memory_reserved(0) <= 82 * MiB);
    CHECK(tc_test_fill(q, 50 * MiB / 4, 1.0f, NULL) == 0);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK_OK(tc_caching_allocator_delete(p));
    CHECK_OK(tc_caching_allocator_delete(q));
    CHECK_OK(tc_empty_cache());
    CHECK(tc_memory_reserved(0) == 0);
    return TC_TEST_DONE();
}

static int child_async(void)
{
    CHECK(strcmp(tc_get_allocator_backend(), "cudaMallocAsync") == 0);
    void *p = NULL;
    tc_status st = tc_caching_allocator_alloc(10 * MiB, 0, NULL, &p);
    if (st != TC_OK) { /* the bad-config run ends here, as it should */
        fprintf(stderr, "%s\n", tc_last_error());
        return 1;
    }
    CHECK(tc_memory_allocated(0) == 10 * MiB);
    CHECK(tc_memory_reserved(0) >= 10 * MiB);
    CHECK(tc_test_fill(p, 10 * MiB / 4, 1.0f, NULL) == 0);
    CHECK_OK(tc_caching_allocator_delete(p));
    CHECK(tc_memory_allocated(0) == 0);
    CHECK_OK(tc_synchronize(0));
    return TC_TEST_DONE();
}

int main(int argc, char **argv)
{
    tc_test_init();
    tc_test_require_gpu();
    if (argc > 1 && !strcmp(argv[1], "expandable"))
        return child_expandable();
    if (argc > 1 && !strcmp(argv[1], "async"))
        return child_async();
    test_oom();
    test_record_stream();
    test_fraction_snapshot();
    test_pinned();
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "TCUDA_ALLOC_CONF=expandable_segments:True '%s' expandable", argv[0]);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "TCUDA_ALLOC_CONF=backend:cudaMallocAsync '%s' async", argv[0]);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "TCUDA_ALLOC_CONF=bogus:1 '%s' async >/dev/null 2>&1", argv[0]);
    CHECK(system(cmd) != 0); /* a bad config is an error, not ignored */
    return TC_TEST_DONE();
}
#endif
