/* GPU: streams. Priorities, current stream per thread and device, guards,
 * ordering between streams by events and wait_stream, query while a long
 * kernel runs (TC_ERROR_NOT_READY without a message, then TC_OK), external
 * streams and memory used on one after it is destroyed, sync debug
 * mode, and bad handles: NULL, destroyed, destroyed twice, garbage bytes;
 * failed calls write no out-parameter. */
#include <pthread.h>
#include <stdlib.h>

#include "tc_test.h"

#include <cuda_runtime_api.h>

#include "test_kernels.h"

enum { N = 1 << 16 };

static tc_stream *thread_stream;

static void *thread_current(void *arg)
{
    tc_stream **out = arg; /* no CHECK on this thread: main checks what it wrote */
    out[0] = out[1] = NULL;
    (void)tc_current_stream(-1, &out[0]); /* a new thread starts on the default stream */
    (void)tc_set_stream(thread_stream);
    (void)tc_current_stream(-1, &out[1]);
    return NULL;
}

/* Writes on `producer` after a delay; `consumer` is ordered after it by
 * `order` (0: an event, 1: wait_stream); checks what the consumer read. */
static void check_ordering(tc_stream *producer, tc_stream *consumer, int order, int *a, int *b)
{
    int value = (int)(tc_test_rand() % 1000000) + 1;
    int add = (int)(tc_test_rand() % 1000) + 1;
    CHECK_OK(
        tc_test_spin_then_fill(tc_stream_cuda_handle(producer), 50 * 1000 * 1000, a, N, value));
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

/* `dead` was destroyed, `live` is a live stream, `def` the default one. */
static void check_bad_handles(tc_stream *dead, tc_stream *live, tc_stream *def)
{
    tc_stream *junk = tc_test_garbage(sizeof(void *) * 16);
    tc_stream *bad[2] = {dead, junk};
    for (int i = 0; i < 2; i++) {
        tc_stream *s = bad[i];
        const char *what = i == 0 ? "already destroyed" : "is not a live tc_stream";
        CHECK_STATUS(tc_stream_destroy(s), TC_ERROR_INVALID_HANDLE);
        CHECK(strncmp(tc_last_error(), "tc_stream_destroy: ", 19) == 0);
        CHECK(strstr(tc_last_error(), what) != NULL);
        CHECK_STATUS(tc_stream_query(s), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(tc_stream_synchronize(s), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(tc_stream_wait_stream(s, live), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(tc_stream_wait_stream(live, s), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(tc_set_stream(s), TC_ERROR_INVALID_HANDLE);
        tc_event *e = (tc_event *)0x1;
        CHECK_STATUS(tc_stream_record_event(s, &e), TC_ERROR_INVALID_HANDLE);
        CHECK(e == (tc_event *)0x1);
        tc_event *ev;
        CHECK_OK(tc_event_create(0, &ev));
        CHECK_STATUS(tc_stream_wait_event(s, ev), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(tc_event_record(ev, s), TC_ERROR_INVALID_HANDLE);
        CHECK(tc_event_device(ev) == -1); /* the failed record made nothing */
        CHECK_OK(tc_event_destroy(ev));
        tc_stream_guard g = tc_stream_guard_enter(s);
        CHECK(g.status == TC_ERROR_INVALID_HANDLE && g.prev_stream == NULL);
        tc_stream_guard_exit(&g);
        /* accessors answer their documented values and keep the message */
        char before[256];
        snprintf(before, sizeof before, "%s", tc_last_error());
        CHECK(tc_stream_device(s) == -1 && tc_stream_priority(s) == 0);
        CHECK(tc_stream_cuda_handle(s) == NULL);
        CHECK(strcmp(before, tc_last_error()) == 0);
    }
    CHECK(tc_test_current_stream(-1) == def); /* nothing above changed it */
    CHECK(tc_stream_device(NULL) == -1 && tc_stream_priority(NULL) == 0);
    CHECK(tc_stream_cuda_handle(NULL) == NULL);
    CHECK_STATUS(tc_stream_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_stream is NULL") != NULL);
    CHECK_STATUS(tc_stream_destroy(def), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "default stream") != NULL);
    CHECK(tc_stream_device(def) == 0); /* still there */
    free(junk);

    /* a guard whose previous stream is destroyed inside it restores the
     * default stream, not the dead one */
    tc_stream *a, *b;
    CHECK_OK(tc_stream_create(-1, 0, &a));
    CHECK_OK(tc_stream_create(-1, 0, &b));
    CHECK_OK(tc_set_stream(a));
    tc_stream_guard g = tc_stream_guard_enter(b);
    CHECK(g.status == TC_OK && tc_test_current_stream(-1) == b);
    CHECK_OK(tc_stream_destroy(a));
    tc_stream_guard_exit(&g);
    CHECK(tc_test_current_stream(-1) == def);
    CHECK_OK(tc_stream_destroy(b));
}

/* Memory recorded on a stream is freed after the stream was destroyed: the
 * allocator waits for the event it recorded as the stream went, and names
 * the stream no more (recording on it at the free crashed in the driver
 * before). A new stream of the same priority takes the retired handle
 * again. */
static void test_free_after_destroy(void)
{
    tc_stream *s = NULL;
    CHECK_OK(tc_stream_create(-1, 0, &s));
    void *h = tc_stream_cuda_handle(s);
    int64_t n = 1 << 16;
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_ones(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, -1}, &t));
    CHECK_OK(tc_tensor_record_stream(t, s));
    CHECK_OK(tc_stream_destroy(s));
    CHECK_OK(tc_tensor_release(t)); /* waits for the event kept at the destroy */
    tc_tensor *u = NULL;            /* the freed block is reused once that event is done */
    CHECK_OK(tc_synchronize(-1));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, -1}, &u));
    double v = -1;
    tc_tensor *sum = NULL;
    CHECK_OK(tc_tensor_sum(u, TC_ALL_DIMS, false, &sum));
    CHECK_OK(tc_tensor_item(sum, &v));
    CHECK(v == 0);
    tc_tensor_release(sum);
    tc_tensor_release(u);
    tc_stream *again = NULL;
    CHECK_OK(tc_stream_create(-1, 0, &again));
    CHECK(tc_stream_cuda_handle(again) == h);
    CHECK_OK(tc_stream_destroy(again));
}

/* An external CUDA stream goes away while memory used there is live: a
 * tensor made on it, another recorded on it, both still in use by a kernel
 * queued there when the wrapper and then the CUDA stream are destroyed.
 * Releasing them, emptying the cache and a new stream reusing the memory
 * never touch the dead stream (compute-sanitizer would see it), and the
 * memory is reused only after that kernel's work. */
static void test_external_gone(void)
{
    cudaStream_t raw;
    CHECK(cudaStreamCreate(&raw) == cudaSuccess);
    tc_stream *ext = NULL;
    CHECK_OK(tc_stream_create_external(raw, -1, &ext));
    int64_t n = 1 << 20;
    tc_tensor *on = NULL, *rec = NULL;
    tc_stream_guard g = tc_stream_guard_enter(ext);
    CHECK_OK(g.status);
    CHECK_OK(tc_tensor_ones(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, -1}, &on)); /* on raw */
    tc_stream_guard_exit(&g);
    CHECK_OK(tc_tensor_ones(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, -1}, &rec));
    CHECK_OK(tc_tensor_record_stream(rec, ext));
    CHECK_OK(tc_test_spin((void *)raw, 50 * 1000 * 1000)); /* raw stays busy a while */
    CHECK_OK(tc_stream_destroy(ext));                      /* the allocators forget raw here */
    CHECK(cudaStreamDestroy(raw) == cudaSuccess);
    CHECK_OK(tc_tensor_release(on));
    CHECK_OK(tc_tensor_release(rec));
    tc_tensor *u = NULL; /* memory of raw's cache serves another stream once done */
    CHECK_OK(tc_synchronize(-1));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, -1}, &u));
    tc_tensor *sum = NULL;
    double v = -1;
    CHECK_OK(tc_tensor_sum(u, TC_ALL_DIMS, false, &sum));
    CHECK_OK(tc_tensor_item(sum, &v));
    CHECK(v == 0);
    tc_tensor_release(sum);
    tc_tensor_release(u);
    CHECK_OK(tc_empty_cache());
    cudaStream_t again; /* may get raw's handle value: it starts afresh */
    CHECK(cudaStreamCreate(&again) == cudaSuccess);
    CHECK_OK(tc_stream_create_external(again, -1, &ext));
    g = tc_stream_guard_enter(ext);
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, -1}, &u));
    tc_stream_guard_exit(&g);
    CHECK_OK(tc_tensor_release(u));
    CHECK_OK(tc_stream_destroy(ext));
    CHECK(cudaStreamDestroy(again) == cudaSuccess);
    CHECK_OK(tc_empty_cache());
    CHECK(cudaGetLastError() == cudaSuccess);
}

int main(void)
{
    tc_test_init();
    TC_TEST_REQUIRE_GPU();

    int least = 1, greatest = 1;
    CHECK_OK(tc_stream_priority_range(&least, &greatest));
    CHECK(least == 0 && greatest < 0);
    printf("priority range %d (low) to %d (high)\n", least, greatest);

    tc_stream *lo, *hi;
    CHECK_OK(tc_stream_create(-1, least, &lo));
    CHECK_OK(tc_stream_create(0, greatest, &hi));
    CHECK(tc_stream_priority(lo) == least && tc_stream_priority(hi) == greatest);
    CHECK(tc_stream_device(hi) == 0 && tc_stream_cuda_handle(hi) != NULL);
    int cuda_prio = 99;
    CHECK(cudaStreamGetPriority((cudaStream_t)tc_stream_cuda_handle(hi), &cuda_prio) ==
          cudaSuccess);
    CHECK(cuda_prio == greatest);
    tc_stream *bad = (tc_stream *)0x1;
    CHECK_STATUS(tc_stream_create(-1, greatest - 1, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(tc_last_error(), "tc_stream_create: priority", 26) == 0);
    CHECK_STATUS(tc_stream_create(-1, least + 1, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_stream_create(99, 0, &bad), TC_ERROR_INVALID_DEVICE);
    CHECK(strncmp(tc_last_error(), "tc_stream_create: device 99 does not exist", 42) == 0);
    CHECK_STATUS(tc_stream_create_external(NULL, 99, &bad), TC_ERROR_INVALID_DEVICE);
    CHECK(bad == (tc_stream *)0x1);
    CHECK_STATUS(tc_stream_create(-1, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_stream_create_external(NULL, -1, NULL), TC_ERROR_INVALID_ARGUMENT);
    test_free_after_destroy();
    test_external_gone();

    /* current and default streams */
    tc_stream *def = NULL;
    CHECK_OK(tc_default_stream(-1, &def));
    CHECK(def != NULL && tc_test_current_stream(-1) == def && tc_test_current_stream(0) == def);
    CHECK(tc_stream_cuda_handle(def) == NULL); /* CUDA's legacy default stream */
    tc_stream *wrong = def;
    CHECK_STATUS(tc_current_stream(99, &wrong), TC_ERROR_INVALID_DEVICE);
    CHECK(wrong == def && strstr(tc_last_error(), "99"));
    CHECK_STATUS(tc_default_stream(99, &wrong), TC_ERROR_INVALID_DEVICE);
    CHECK_STATUS(tc_current_stream(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_default_stream(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_set_stream(lo));
    CHECK(tc_test_current_stream(-1) == lo);
    thread_stream = hi;
    tc_stream *seen[2] = {NULL, NULL};
    pthread_t t;
    pthread_create(&t, NULL, thread_current, seen);
    pthread_join(t, NULL);
    CHECK(seen[0] == def && seen[1] == hi);
    CHECK(tc_test_current_stream(-1) == lo); /* the thread did not change ours */
    CHECK_OK(tc_set_stream(def));
    CHECK(tc_test_current_stream(-1) == def);
    CHECK_OK(tc_set_stream(NULL)); /* no-op */
    CHECK(tc_test_current_stream(-1) == def);

    /* stream guards */
    tc_stream_guard g = tc_stream_guard_enter(hi);
    CHECK(g.status == TC_OK && tc_test_current_stream(-1) == hi);
    tc_stream_guard g2 = tc_stream_guard_enter(lo);
    CHECK(tc_test_current_stream(-1) == lo);
    tc_stream_guard_exit(&g2);
    CHECK(tc_test_current_stream(-1) == hi);
    tc_stream_guard g3 = tc_stream_guard_enter(NULL);
    CHECK(g3.status == TC_OK && tc_test_current_stream(-1) == hi);
    tc_stream_guard_exit(&g3);
    tc_stream_guard_exit(&g);
    CHECK(tc_test_current_stream(-1) == def && tc_test_current_device() == 0);

    /* ordering between streams */
    int *a, *b;
    CHECK(cudaMalloc((void **)&a, N * sizeof(int)) == cudaSuccess);
    CHECK(cudaMalloc((void **)&b, N * sizeof(int)) == cudaSuccess);
    for (int round = 0; round < 3; round++) {
        check_ordering(lo, hi, 0, a, b);
        check_ordering(hi, lo, 1, a, b);
    }

    /* query: TC_ERROR_NOT_READY while a long kernel runs, TC_OK after */
    CHECK_OK(tc_stream_query(lo));
    CHECK_OK(tc_stream_query(NULL)); /* the current (default) stream is idle */
    CHECK_OK(tc_test_spin(tc_stream_cuda_handle(lo), 300 * 1000 * 1000));
    /* NOT_READY is an answer, not an error: polling leaves the last
     * message as it was (stream.h) */
    CHECK_STATUS(tc_stream_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    char prior[256];
    snprintf(prior, sizeof prior, "%s", tc_last_error());
    CHECK_STATUS(tc_stream_query(lo), TC_ERROR_NOT_READY);
    for (int k = 0; k < 1000 && tc_stream_query(lo) == TC_ERROR_NOT_READY; k++)
        ;
    CHECK(strcmp(tc_last_error(), prior) == 0 && strstr(prior, "tc_stream_destroy") != NULL);
    CHECK_OK(tc_stream_synchronize(lo));
    CHECK_OK(tc_stream_query(lo));

    /* sync debug mode: 1 warns, 2 refuses (and does not wait) */
    CHECK_OK(tc_set_sync_debug_mode(1));
    tc_test_capture_stderr_begin();
    tc_status st = tc_stream_synchronize(lo);
    const char *err = tc_test_capture_stderr_end();
    CHECK(st == TC_OK && strstr(err, "tc_stream_synchronize") && strstr(err, "warning"));
    CHECK_OK(tc_set_sync_debug_mode(2));
    CHECK_OK(tc_test_spin(tc_stream_cuda_handle(lo), 200 * 1000 * 1000));
    CHECK_STATUS(tc_stream_synchronize(lo), TC_ERROR_SYNC_DISALLOWED);
    CHECK(strncmp(tc_last_error(), "tc_stream_synchronize: ", 23) == 0);
    CHECK_STATUS(tc_stream_query(lo), TC_ERROR_NOT_READY); /* it did not wait */
    CHECK_OK(tc_synchronize(-1)); /* explicit device-wide waits stay allowed */
    CHECK_OK(tc_set_sync_debug_mode(0));
    CHECK_OK(tc_stream_query(lo));

    /* external streams */
    cudaStream_t raw;
    CHECK(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking) == cudaSuccess);
    tc_stream *ext;
    CHECK_OK(tc_stream_create_external(raw, -1, &ext));
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
    CHECK(tc_test_current_stream(-1) == def); /* destroying the current stream resets it */
    CHECK_STATUS(tc_stream_synchronize(hi), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_stream_destroy(hi), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_set_stream(hi), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_stream_query(hi), TC_ERROR_INVALID_HANDLE);
    CHECK(strncmp(tc_last_error(), "tc_stream_query: tc_stream ", 27) == 0 &&
          strstr(tc_last_error(), "already destroyed"));
    tc_stream_guard dead = tc_stream_guard_enter(hi);
    CHECK(dead.status == TC_ERROR_INVALID_HANDLE);
    tc_stream_guard_exit(&dead);
    CHECK(tc_test_current_stream(-1) == def);
    check_bad_handles(hi, lo, def);

    CHECK_OK(tc_stream_destroy(lo));
    CHECK_STATUS(tc_stream_destroy(lo), TC_ERROR_INVALID_HANDLE); /* twice */
    CHECK(strstr(tc_last_error(), "already destroyed") != NULL);
    cudaFree(a);
    cudaFree(b);
    return TC_TEST_DONE();
}
