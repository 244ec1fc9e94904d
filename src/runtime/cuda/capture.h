/* Graph captures underway, as the runtime and the allocators need to know
 * them (the graph module, graph/cuda, begins and ends them): whether one is
 * underway, memory given back meanwhile, and how to make a call that CUDA
 * counts as unsafe during capture (cudaMalloc) without invalidating it.
 * Not installed. */
#ifndef TCUDA_CAPTURE_H
#define TCUDA_CAPTURE_H

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Captures begun by tcuda and not yet ended, on every thread. */
extern atomic_int tc__captures;

static inline bool tc__capturing(void)
{
    return atomic_load_explicit(&tc__captures, memory_order_relaxed) != 0;
}

/* A capture begins / ends (graph capture calls these). When the last one
 * ends, the memory kept by tc__capture_defer_free is freed. */
void tc__capture_enter(void);
void tc__capture_leave(void);

/* tc_is_current_stream_capturing: CUDA captures the current stream of the
 * current device now (false before CUDA was initialized). */
bool tc__capture_current_stream(void);

/* While a capture is underway: keeps device memory that the allocator gives
 * back (cudaFree would synchronize and break the capture) and returns true;
 * it is freed when the last capture ends. False (free it now) otherwise. */
bool tc__capture_defer_free(int device, void *ptr);

/* Around a call that a global-mode capture would take for unsafe although it
 * is not (cudaMalloc by the caching allocator: the graph never frees that
 * memory before replay, as PyTorch's cudaMallocMaybeCapturing): switches the
 * calling thread to relaxed mode; _end restores the mode _begin returned. */
static inline enum cudaStreamCaptureMode tc__capture_relaxed_begin(void)
{
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&m);
    return m;
}
static inline void tc__capture_relaxed_end(enum cudaStreamCaptureMode m)
{
    (void)cudaThreadExchangeStreamCaptureMode(&m);
}

#ifdef __cplusplus
}
#endif

#endif
