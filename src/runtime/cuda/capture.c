/* The count of graph captures underway and the device memory given back
 * while any is (capture.h). Both under one mutex, so that memory kept for a
 * capture is never missed by the flush of the last one to end. */
#include <pthread.h>
#include <stdlib.h>

#include "capture.h"
#include "cuda_internal.h"
#include "tcuda/device.h"

atomic_int tc__captures;

typedef struct deferred {
    void *ptr;
    int device;
} deferred;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static deferred *dfree;
static size_t ndfree, cap_dfree;

void tc__capture_enter(void)
{
    pthread_mutex_lock(&mu);
    atomic_fetch_add(&tc__captures, 1);
    pthread_mutex_unlock(&mu);
}

bool tc__capture_defer_free(int device, void *ptr)
{
    if (!tc__capturing())
        return false;
    pthread_mutex_lock(&mu);
    bool kept = false;
    if (atomic_load(&tc__captures) > 0) {
        if (ndfree == cap_dfree) {
            size_t nc = cap_dfree ? 2 * cap_dfree : 16;
            deferred *n = realloc(dfree, nc * sizeof *n);
            if (n) {
                dfree = n;
                cap_dfree = nc;
            }
        }
        if (ndfree < cap_dfree) {
            dfree[ndfree++] = (deferred){ptr, device};
            kept = true;
        }
    }
    pthread_mutex_unlock(&mu);
    return kept;
}

bool tc__capture_current_stream(void)
{
    if (atomic_load_explicit(&tc__init_state, memory_order_acquire) != 1)
        return false;
    cudaStream_t s = tc__current_cuda_stream(tc__tls_device);
    if (!s)
        return false; /* the legacy stream never captures */
    enum cudaStreamCaptureStatus cst = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cst) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return cst == cudaStreamCaptureStatusActive;
}

void tc__capture_leave(void)
{
    deferred *list = NULL;
    size_t n = 0;
    pthread_mutex_lock(&mu);
    if (atomic_fetch_sub(&tc__captures, 1) == 1 && ndfree) {
        list = dfree;
        n = ndfree;
        dfree = NULL;
        ndfree = cap_dfree = 0;
    }
    pthread_mutex_unlock(&mu);
    for (size_t i = 0; i < n; i++) { /* no capture is underway: cudaFree may wait */
        tc_device_guard dg = tc_device_guard_enter(list[i].device);
        (void)cudaFree(list[i].ptr);
        tc_device_guard_exit(&dg);
    }
    free(list);
}
