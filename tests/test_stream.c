/* GPU: streams. Priorities, current stream per thread and device, guards,
 * ordering between streams by events and wait_stream, query while a long
 * kernel runs, external streams, destroyed handles, sync debug mode. */
#include <pthread.h>
#include <stdlib.h>

#include "tc_test.h"

#if defined(TCUDA_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "test_kernels.h"

enum { N = 1 << 16 };

static tc_stream *thread_stream;

static void *thread_current(void *arg)
{
    tc_stream **out = arg;
    out[0] = tc_current_stream(-1); /* a new thread starts on the default stream */
    (void)tc_set_stream(thread_stream);
    out[1] = tc_current_stream(-1);
    return NULL;
}

/* Writes on `producer` after a delay; `consumer` is ordered after it by
 * `order` (0: an event, 1: wait_stream); checks what the consumer read. */
static void check_ordering(tc_stream *producer, tc_stream *consumer, int order, int *a, int *b)
{
    int value = (int)(tc_test_rand() % 1000000) + 1;
    int add = (int)(tc_test_rand() % 1000) + 1;
    CHECK_OK(tc_test_spin_then_fill(tc_stream_cuda_handle(producer), 50 * 1000 * 1000, a, N, value));
    if (order == 0) {
        tc_event *e;
        CHECK_OK(tc_stream_record_event(producer, &e));
        CHECK_OK(tc_stream_wait_event(consumer, e));
        CHECK_OK(tc_event_destroy(e)); /* the wait keeps what it needs */
    } else {
        CHECK_OK(tc_stream_wait_stream(consumer, producer));
    }
    CHECK_OK(tc_test_copy_add(tc_stream_cuda_handle(consumer), a, b, N, add));
    CHECK_OK(tc_stream_synchronize(consumer));
    static int host[N];
    CHECK(cudaMemcpy(host, b, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += host[i] != value + i + add;
    CHECK(bad == 0);
    CHECK_OK(tc_stream_synchronize(producer));
}

int main(void)
{
    tc_test_init();
    tc_test_require_gpu();

    int least = 1, greatest = 1;
    CHECK_OK(tc_stream_priority_range(&least, &greatest));
    CHECK(least == 0 && greatest < 0);
    printf("priority range %d (low) to %d (high)\n", least, greatest);

    tc_stream *lo, *hi;
    CHECK_OK(tc_stream_create(&lo, -1, least));
    CHECK_OK(tc_stream_create(&hi, 0, greatest));
    CHECK(tc_stream_priority(lo) == least && tc_stream_priority(hi) == greatest);
    CHECK(tc_stream_device(hi) == 0 && tc_stream_cuda_handle(hi) != NULL);
    int cuda_prio = 99;
    CHECK(cudaStreamGetPriority((cudaStream_t)tc_stream_cuda_handle(hi), &cuda_prio) == cudaSuccess);
    CHECK(cuda_prio == greatest);
    tc_stream *bad = (tc_stream *)0x1;
    CHECK_STATUS(tc_stream_create(&bad, -1, greatest - 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_stream_create(&bad, -1, least + 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_stream_create(&bad, 99, 0), TC_ERROR_INVALID_DEVICE);
    CHECK(bad == (tc_stream *)0x1);

    /* current and default streams */
    tc_stream *def = tc_default_stream(-1);
    CHECK(def != NULL && tc_current_stream(-1) == def && tc_current_stream(0) == def);
    CHECK(tc_stream_cuda_handle(def) == NULL); /* CUDA's legacy default stream */
    CHECK(tc_current_stream(99) == NULL && strstr(tc_last_error(), "99"));
    CHECK_OK(tc_set_stream(lo));
    CHECK(tc_current_stream(-1) == lo);
    thread_stream = hi;
    tc_stream *seen[2] = {NULL, NULL};
    pthread_t t;
    pthread_create(&t, NULL, thread_current, seen);
    pthread_join(t, NULL);
    CHECK(seen[0] == def && seen[1] == hi);
    CHECK(tc_current_stream(-1) == lo); /* the thread did not change ours */
    CHECK_OK(tc_set_stream(def));
    CHECK(tc_current_stream(-1) == def);
    CHECK_OK(tc_set_stream(NULL)); /* no-op */
    CHECK(tc_current_stream(-1) == def);

    /* stream guards */
    tc_stream_guard g = tc_stream_guard_enter(hi);
    CHECK(g.status == TC_OK && tc_current_stream(-1) == hi);
    tc_stream_guard g2 = tc_stream_guard_enter(lo);
    CHECK(tc_current_stream(-1) == lo);
    tc_stream_guard_exit(&g2);
    CHECK(tc_current_stream(-1) == hi);
    tc_stream_guard g3 = tc_stream_guard_enter(NULL);
    CHECK(g3.status == TC_OK && tc_current_stream(-1) == hi);
    tc_stream_guard_exit(&g3);
    tc_stream_guard_exit(&g);
    CHECK(tc_current_stream(-1) == def && tc_current_device() == 0);

    /* ordering between streams */
    int *a, *b;
    CHECK(cudaMalloc((void **)&a, N * sizeof(int)) == cudaSuccess);
    CHECK(cudaMalloc((void **)&b, N * sizeof(int)) == cudaSuccess);
    for (int round = 0; round < 3; round++) {
        check_ordering(lo, hi, 0, a, b);
        check_ordering(hi, lo, 1, a, b);
    }

    /* query: false while a long kernel runs, true after */
    CHECK(tc_stream_query(lo));
    CHECK_OK(tc_test_spin(tc_stream_cuda_handle(lo), 300 * 1000 * 1000));
    CHECK(!tc_stream_query(lo));
    CHECK_OK(tc_stream_synchronize(lo));
    CHECK(tc_stream_query(lo));

    /* sync debug mode: 1 warns, 2 refuses (and does not wait) */
    CHECK_OK(tc_set_sync_debug_mode(1));
    tc_test_capture_stderr_begin();
    tc_status st = tc_stream_synchronize(lo);
    const char *err = tc_test_capture_stderr_end();
    CHECK(st == TC_OK && strstr(err, "tc_stream_synchronize") && strstr(err, "warning"));
    CHECK_OK(tc_set_sync_debug_mode(2));
    CHECK_OK(tc_test_spin(tc_stream_cuda_handle(lo), 200 * 1000 * 1000));
    CHECK_STATUS(tc_stream_synchronize(lo), TC_ERROR_SYNC_DISALLOWED);
    CHECK(!tc_stream_query(lo)); /* it did not wait */
    CHECK_OK(tc_synchronize(-1)); /* explicit device-wide waits stay allowed */
    CHECK_OK(tc_set_sync_debug_mode(0));
    CHECK(tc_stream_query(lo));

    /* external streams */
    cudaStream_t raw;
    CHECK(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking) == cudaSuccess);
    tc_stream *ext;
    CHECK_OK(tc_stream_from_external(&ext, raw, -1));
    CHECK(tc_stream_cuda_handle(ext) == (void *)raw && tc_stream_device(ext) == 0);
    check_ordering(ext, lo, 0, a, b);
    CHECK_OK(tc_stream_destroy(ext));
    CHECK(cudaStreamQuery(raw) == cudaSuccess); /* the CUDA stream lives on */
    CHECK(cudaStreamDestroy(raw) == cudaSuccess);

    /* destroyed and default handles */
    CHECK_STATUS(tc_stream_destroy(def), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_stream_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_set_stream(hi));
    CHECK_OK(tc_stream_destroy(hi));
    CHECK(tc_current_stream(-1) == def); /* destroying the current stream resets it */
    CHECK_STATUS(tc_stream_synchronize(hi), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_stream_destroy(hi), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_set_stream(hi), TC_ERROR_INVALID_HANDLE);
    CHECK(!tc_stream_query(hi) && strstr(tc_last_error(), "not a live tc_stream"));
    tc_stream_guard dead = tc_stream_guard_enter(hi);
    CHECK(dead.status == TC_ERROR_INVALID_HANDLE);
    tc_stream_guard_exit(&dead);
    CHECK(tc_current_stream(-1) == def);

    CHECK_OK(tc_stream_destroy(lo));
    cudaFree(a);
    cudaFree(b);
    return TC_TEST_DONE();
}
#else
int main(void) { return 77; }
#endif
