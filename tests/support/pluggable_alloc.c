/* A pluggable device allocator, written as a user would write one for
 * tc_allocator_create_from_library (PyTorch's CUDAPluggableAllocator shape:
 * alloc(size, device, stream), free(ptr, size, device, stream)). Built as a
 * shared object (CMake target tc_test_pluggable_alloc) for
 * tests/test_memory_pluggable.c, which reads its counters through
 * tc_test_pa_counts and asks whether it handed out a pointer through
 * tc_test_pa_owns. Plain cudaMalloc/cudaFree on the device asked for;
 * cudaFree waits for the device, so a block is never freed under a kernel. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_LIVE 4096

/* What the object exports (looked up by name with dlsym). */
EXPORT void *tc_test_pa_alloc(size_t size, int device, void *stream);
EXPORT void tc_test_pa_free(void *ptr, size_t size, int device, void *stream);
EXPORT void tc_test_pa_counts(long long *allocs, long long *frees, long long *bad_frees,
                              long long *bytes);
EXPORT bool tc_test_pa_owns(const void *ptr);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long long n_alloc, n_free, n_bad_free, live_bytes;
static void *live[MAX_LIVE];
static size_t live_size[MAX_LIVE];

static int slot_of(const void *p)
{
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i] == p)
            return i;
    return -1;
}

EXPORT void *tc_test_pa_alloc(size_t size, int device, void *stream)
{
    (void)stream;
    int prev = 0;
    void *p = NULL;
    if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(device) != cudaSuccess)
        return NULL;
    cudaError_t err = cudaMalloc(&p, size);
    (void)cudaSetDevice(prev);
    if (err != cudaSuccess)
        return NULL;
    pthread_mutex_lock(&mu);
    int i = slot_of(NULL);
    if (i >= 0) {
        live[i] = p;
        live_size[i] = size;
        n_alloc++;
        live_bytes += (long long)size;
    }
    pthread_mutex_unlock(&mu);
    if (i < 0) {
        (void)cudaFree(p);
        return NULL;
    }
    return p;
}

EXPORT void tc_test_pa_free(void *ptr, size_t size, int device, void *stream)
{
    (void)device, (void)stream;
    pthread_mutex_lock(&mu);
    int i = ptr ? slot_of(ptr) : -1;
    if (i < 0 || live_size[i] != size) {
        n_bad_free++; /* not ours, or freed with the wrong size */
    } else {
        live[i] = NULL;
        n_free++;
        live_bytes -= (long long)size;
    }
    pthread_mutex_unlock(&mu);
    if (i >= 0)
        (void)cudaFree(ptr);
}

EXPORT void tc_test_pa_counts(long long *allocs, long long *frees, long long *bad_frees,
                              long long *bytes)
{
    pthread_mutex_lock(&mu);
    *allocs = n_alloc;
    *frees = n_free;
    *bad_frees = n_bad_free;
    *bytes = live_bytes;
    pthread_mutex_unlock(&mu);
}

EXPORT bool tc_test_pa_owns(const void *ptr)
{
    pthread_mutex_lock(&mu);
    bool r = ptr && slot_of(ptr) >= 0;
    pthread_mutex_unlock(&mu);
    return r;
}
