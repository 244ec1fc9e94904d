/* Pluggable device allocators (torch.cuda's CUDAPluggableAllocator and
 * change_current_allocator): one made from two functions (here, on
 * cudaMallocAsync/cudaFreeAsync) and one loaded from a shared object
 * (tests/support/pluggable_alloc.c, built by CMake as tc_test_pluggable_alloc,
 * its path given in TC_TEST_PLUGGABLE_SO) each serve real tensors on the GPU:
 * values read back right, every pointer tcuda used came from the allocator,
 * and its own alloc/free counts match tcuda's statistics. Also the handle
 * rules: junk, NULL and destroyed allocators, an empty path, missing names,
 * destroying the current allocator. The allocator can be changed only before
 * the first allocation, so each part runs in a child process of its own. */
#include <dlfcn.h>
#include <stdlib.h>

#include "tc_test.h"

#ifndef TCUDA_HAVE_CUDA
/* Without CUDA, every allocator call links, checks its arguments as with
 * CUDA, and then says there is no device. */
static void *no_alloc(size_t size, int device, void *stream)
{
    (void)size, (void)device, (void)stream;
    return NULL;
}
static void no_free(void *ptr, size_t size, int device, void *stream)
{
    (void)ptr, (void)size, (void)device, (void)stream;
}

int main(void)
{
    tc_test_init();
    tc_allocator *u = NULL;
    CHECK_STATUS(tc_allocator_create(NULL, NULL, &u), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_allocator_create(no_alloc, no_free, &u), TC_ERROR_NO_DEVICE);
    CHECK_STATUS(tc_allocator_create_from_library("x.so", "a", "f", &u), TC_ERROR_NO_DEVICE);
    CHECK(u == NULL);
    CHECK_STATUS(tc_change_current_allocator(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_allocator_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(tc_last_error(), "tc_allocator_destroy: ", 22) == 0);
    return TC_TEST_DONE();
}
#else
#include <cuda_runtime_api.h>
#include <pthread.h>

typedef void (*counts_fn)(long long *allocs, long long *frees, long long *bad_frees,
                          long long *bytes);
typedef bool (*owns_fn)(const void *ptr);

/* ---- the allocator made from functions ------------------------------------------- */

static pthread_mutex_t fn_mu = PTHREAD_MUTEX_INITIALIZER;
static long long fn_allocs, fn_frees, fn_bad, fn_bytes;
static struct {
    void *p;
    size_t size;
} fn_live[1024];

static void *fn_alloc(size_t size, int device, void *stream)
{
    int prev = 0;
    void *p = NULL;
    if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(device) != cudaSuccess)
        return NULL;
    cudaError_t err = cudaMallocAsync(&p, size, (cudaStream_t)stream);
    (void)cudaSetDevice(prev);
    if (err != cudaSuccess)
        return NULL;
    pthread_mutex_lock(&fn_mu);
    for (int i = 0; i < 1024; i++)
        if (!fn_live[i].p) {
            fn_live[i].p = p;
            fn_live[i].size = size;
            fn_allocs++;
            fn_bytes += (long long)size;
            break;
        }
    pthread_mutex_unlock(&fn_mu);
    return p;
}

static void fn_free(void *ptr, size_t size, int device, void *stream)
{
    (void)device;
    bool found = false;
    pthread_mutex_lock(&fn_mu);
    for (int i = 0; i < 1024 && !found; i++)
        if (fn_live[i].p == ptr && ptr) {
            found = fn_live[i].size == size;
            fn_live[i].p = NULL;
        }
    if (found) {
        fn_frees++;
        fn_bytes -= (long long)size;
    } else {
        fn_bad++;
    }
    pthread_mutex_unlock(&fn_mu);
    if (found)
        (void)cudaFreeAsync(ptr, (cudaStream_t)stream);
}

static void fn_counts(long long *allocs, long long *frees, long long *bad, long long *bytes)
{
    pthread_mutex_lock(&fn_mu);
    *allocs = fn_allocs, *frees = fn_frees, *bad = fn_bad, *bytes = fn_bytes;
    pthread_mutex_unlock(&fn_mu);
}

static bool fn_owns(const void *ptr)
{
    bool r = false;
    pthread_mutex_lock(&fn_mu);
    for (int i = 0; i < 1024 && !r; i++)
        r = ptr && fn_live[i].p == ptr;
    pthread_mutex_unlock(&fn_mu);
    return r;
}

/* ---- tensors served by the current user allocator --------------------------------- */

/* One statistic of device 0; -1 (and a message) for a key that fails. */
static int64_t stat(const char *key)
{
    int64_t v = -1;
    (void)tc_memory_stats_get(0, key, &v);
    return v;
}

static int serve_tensors(tc_allocator *u, counts_fn counts, owns_fn owns)
{
    const tc_device gpu = {TC_CUDA, 0};
    CHECK_OK(tc_change_current_allocator(u));
    enum { N = 300000 }; /* 1.2 MB per tensor: large-pool sizes */
    int64_t n = N;
    tc_tensor *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(tc_tensor_arange(0, N, 1, TC_FLOAT32, gpu, &a));
    CHECK_OK(tc_tensor_full(1, &n, 2.0, TC_FLOAT32, gpu, &b));
    CHECK_OK(tc_tensor_mul(a, b, &c));
    if (!a || !b || !c)
        return TC_TEST_DONE();
    float *h = malloc(N * sizeof *h);
    CHECK_OK(tc_tensor_to_host(c, TC_FLOAT32, h));
    int wrong = 0;
    for (int i = 0; i < N; i++)
        wrong += h[i] != 2.0f * (float)i;
    CHECK(wrong == 0);
    free(h);
    CHECK(owns(tc_tensor_data_ptr(a)) && owns(tc_tensor_data_ptr(b)) &&
          owns(tc_tensor_data_ptr(c)));
    long long allocs, frees, bad, bytes;
    counts(&allocs, &frees, &bad, &bytes);
    CHECK(allocs >= 3 && bad == 0);
    CHECK(stat("allocation.all.current") == allocs - frees);
    CHECK(stat("allocation.all.allocated") == allocs);
    CHECK(stat("segment.all.current") == allocs - frees); /* each allocation is a segment */
    CHECK(stat("allocated_bytes.all.current") == bytes);
    CHECK(tc_test_bytes(tc_memory_allocated, 0) == (size_t)bytes && bytes >= 3 * N * 4);
    /* the allocator API goes through it too */
    void *p = NULL;
    CHECK_OK(tc_caching_allocator_alloc(1000, 0, NULL, &p));
    CHECK(owns(p));
    long long allocs2, frees2;
    counts(&allocs2, &frees2, &bad, &bytes);
    CHECK(allocs2 == allocs + 1 && frees2 == frees);
    CHECK_OK(tc_caching_allocator_delete(p));
    counts(&allocs2, &frees2, &bad, &bytes);
    CHECK(frees2 == frees + 1 && !owns(p));
    /* memory was allocated: no other allocator now, and this one stays */
    CHECK_STATUS(tc_change_current_allocator(u), TC_ERROR_INVALID_STATE);
    CHECK_STATUS(tc_allocator_destroy(u), TC_ERROR_INVALID_STATE);
    CHECK(strstr(tc_last_error(), "current allocator") != NULL);
    tc_tensor_release(a);
    tc_tensor_release(b);
    tc_tensor_release(c);
    CHECK_OK(tc_synchronize(0));
    counts(&allocs, &frees, &bad, &bytes);
    CHECK(allocs == frees && bytes == 0 && bad == 0);
    CHECK(tc_test_bytes(tc_memory_allocated, 0) == 0 && stat("allocation.all.current") == 0);
    CHECK(stat("allocation.all.freed") == frees && stat("allocation.all.peak") >= 3);
    return TC_TEST_DONE();
}

static int child_functions(void)
{
    tc_allocator *u = NULL;
    CHECK_OK(tc_allocator_create(fn_alloc, fn_free, &u));
    return u ? serve_tensors(u, fn_counts, fn_owns) : TC_TEST_DONE();
}

#ifdef TC_TEST_PLUGGABLE_SO
static int child_shared_object(void)
{
    tc_allocator *u = NULL;
    CHECK_OK(tc_allocator_create_from_library(TC_TEST_PLUGGABLE_SO, "tc_test_pa_alloc",
                                              "tc_test_pa_free", &u));
    /* the same object again (already loaded: the same copy) for its counters */
    void *h = dlopen(TC_TEST_PLUGGABLE_SO, RTLD_NOW | RTLD_LOCAL);
    void *c = h ? dlsym(h, "tc_test_pa_counts") : NULL, *o = h ? dlsym(h, "tc_test_pa_owns") : NULL;
    CHECK(u && c && o);
    if (!u || !c || !o)
        return TC_TEST_DONE();
    counts_fn counts;
    owns_fn owns;
    memcpy(&counts, &c, sizeof counts);
    memcpy(&owns, &o, sizeof owns);
    return serve_tensors(u, counts, owns);
}
#endif

/* ---- handles (no GPU needed: nothing is allocated) ---------------------------------- */

static int child_handles(void)
{
    tc_allocator *u = NULL, *v = NULL;
    CHECK_STATUS(tc_allocator_create(NULL, fn_free, &u), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_allocator_create(fn_alloc, NULL, &u), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_allocator_create(fn_alloc, fn_free, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(u == NULL);
    CHECK_OK(tc_allocator_create(fn_alloc, fn_free, &u));
    CHECK_OK(tc_allocator_create(fn_alloc, fn_free, &v));
    uint64_t junk[8] = {42, 43};
    CHECK_STATUS(tc_change_current_allocator((tc_allocator *)junk), TC_ERROR_INVALID_HANDLE);
    CHECK(strncmp(tc_last_error(), "tc_change_current_allocator: ", 29) == 0 &&
          strstr(tc_last_error(), "not a live tc_allocator"));
    CHECK_STATUS(tc_allocator_destroy((tc_allocator *)junk), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_change_current_allocator(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_allocator_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_allocator_destroy(v));
    CHECK_STATUS(tc_allocator_destroy(v), TC_ERROR_INVALID_HANDLE); /* double destroy */
    CHECK(strstr(tc_last_error(), "already destroyed") != NULL);
    CHECK_STATUS(tc_change_current_allocator(v), TC_ERROR_INVALID_HANDLE);
    /* the current allocator cannot be destroyed; a replaced one can */
    CHECK_OK(tc_allocator_create(fn_alloc, fn_free, &v));
    CHECK_OK(tc_change_current_allocator(v));
    CHECK_OK(tc_change_current_allocator(u));
    CHECK_STATUS(tc_allocator_destroy(u), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc_allocator_destroy(v));
    /* loading: an empty path would dlopen the program itself */
    tc_allocator *l = NULL;
    CHECK_STATUS(tc_allocator_create_from_library("", "malloc", "free", &l),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "empty") != NULL);
    CHECK_STATUS(tc_allocator_create_from_library(NULL, "a", "f", &l), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_allocator_create_from_library("x.so", NULL, "f", &l),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_allocator_create_from_library("x.so", "a", "", &l), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_allocator_create_from_library("/nonexistent/tc_alloc.so", "a", "f", &l),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "/nonexistent/tc_alloc.so") != NULL);
    CHECK(l == NULL);
#ifdef TC_TEST_PLUGGABLE_SO
    CHECK_STATUS(tc_allocator_create_from_library(TC_TEST_PLUGGABLE_SO, "tc_test_pa_alloc",
                                                  "no_such_free", &l),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "no_such_free") != NULL && l == NULL);
    for (int round = 0; round < 2; round++) { /* load, destroy (dlclose), load again */
        CHECK_OK(tc_allocator_create_from_library(TC_TEST_PLUGGABLE_SO, "tc_test_pa_alloc",
                                                  "tc_test_pa_free", &l));
        CHECK_OK(tc_allocator_destroy(l));
        CHECK_STATUS(tc_change_current_allocator(l), TC_ERROR_INVALID_HANDLE);
    }
#endif
    return TC_TEST_DONE();
}

static void run_child(const char *self, const char *what)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' %s", self, what);
    int rc = system(cmd);
    if (rc != 0)
        printf("child '%s' failed\n", what);
    CHECK(rc == 0);
}

int main(int argc, char **argv)
{
    tc_test_init();
    if (argc > 1 && !strcmp(argv[1], "handles"))
        return child_handles();
    if (argc > 1 && !strcmp(argv[1], "functions"))
        return child_functions();
#ifdef TC_TEST_PLUGGABLE_SO
    if (argc > 1 && !strcmp(argv[1], "so"))
        return child_shared_object();
#endif
    run_child(argv[0], "handles");
    TC_TEST_REQUIRE_GPU();
    run_child(argv[0], "functions");
#ifdef TC_TEST_PLUGGABLE_SO
    run_child(argv[0], "so");
#else
    printf("TC_TEST_PLUGGABLE_SO is not defined: tests/CMakeLists.txt must build "
           "tests/support/pluggable_alloc.c as tc_test_pluggable_alloc and pass its path\n");
    CHECK(!"the pluggable allocator's shared object was not built");
#endif
    return TC_TEST_DONE();
}
#endif
