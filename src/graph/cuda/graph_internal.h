/* What the rest of the CUDA side needs to know about graph captures
 * (graph_capture.c): whether one is underway, and how to make a call that
 * CUDA counts as unsafe during capture (cudaMalloc) without invalidating
 * it. Not installed. */
#ifndef TCUDA_GRAPH_INTERNAL_H
#define TCUDA_GRAPH_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Captures begun by tcuda and not yet ended, on every thread. */
extern atomic_int tc__graph_captures;

static inline bool tc__graph_capturing(void)
{
    return atomic_load_explicit(&tc__graph_captures, memory_order_relaxed) != 0;
}

/* While a capture is underway: keeps device memory that the allocator gives
 * back (cudaFree would synchronize and break the capture) and returns true;
 * it is freed when the last capture ends. False (free it now) otherwise. */
bool tc__graph_defer_free(int device, void *ptr);

/* Around a call that a global-mode capture would take for unsafe although it
 * is not (cudaMalloc by the caching allocator: the graph never frees that
 * memory before replay, as PyTorch's cudaMallocMaybeCapturing): switches the
 * calling thread to relaxed mode; _end restores the mode _begin returned. */
static inline enum cudaStreamCaptureMode tc__graph_relaxed_begin(void)
{
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&m);
    return m;
}
static inline void tc__graph_relaxed_end(enum cudaStreamCaptureMode m)
{
    (void)cudaThreadExchangeStreamCaptureMode(&m);
}

#ifdef __cplusplus
}
#endif

#endif
