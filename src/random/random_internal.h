/* Internals of the random-number module shared by its core (random.c), its
 * CPU loop (random_cpu.c) and its CUDA side (cuda/random_cuda.c, behind the
 * device seam). Not installed.
 *
 * A generator's (seed, offset) change only under its lock. A draw checks its
 * arguments, takes the lock, fills (CPU) or launches (GPU) at the current
 * offset, and advances the offset only when that succeeded, so a failed call
 * changes nothing. */
#ifndef TCUDA_RANDOM_INTERNAL_H
#define TCUDA_RANDOM_INTERNAL_H

#include <pthread.h>

#include "base/internal.h"
#include "philox.h"
#include "tcuda/random.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TC_GENERATOR_MAGIC 0x7c6e4a70u

struct tc_generator {
    uint32_t magic;
    tc_device device; /* {TC_CPU,-1} or {TC_CUDA, resolved index} */
    bool is_default;
    pthread_mutex_t lock;
    uint64_t seed;
    uint64_t offset; /* Philox blocks used so far */
    /* CUDA graph capture (see tc__generator_capture_begin in random_cuda.c):
     * while `capturing`, kernels read seed and offset from capture_buf (device
     * memory: {seed, base offset}) and add capture_offset, which counts the
     * blocks used so far inside the graph. */
    bool capturing;
    uint64_t *capture_buf;
    uint64_t capture_offset;
};

/* The blocks a draw of n elements with E per block uses. */
static inline uint64_t tc__rng_blocks(size_t n, int per_block)
{
    return ((uint64_t)n + (uint64_t)per_block - 1) / (uint64_t)per_block;
}

/* CPU: fills data[0..n) from blocks offset.. (never fails). */
void tc__rng_cpu_fill(const tc__rng_params *p, uint64_t seed, uint64_t offset, void *data,
                      size_t n);

/* CUDA (random/cuda/random_cuda.c, reached through the device seam's
 * rng_fill; without CUDA it answers TC_ERROR_NO_DEVICE): launches a fill on
 * the current stream of gen's device at gen's offset (called under gen's
 * lock; does not advance). Devices are resolved by tc__device_resolve
 * (runtime/device_ops.h). */
tc_status tc__rng_cuda_fill(tc_generator *gen, const tc__rng_params *p, void *data, size_t n);

#ifdef __cplusplus
}
#endif

#endif
