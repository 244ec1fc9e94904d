/* Launchers of the random-number kernels (src/random/cuda/random.cu), called
 * by src/random/cuda/random_cuda.c. Not installed. */
#ifndef TCUDA_RANDOM_KERNELS_H
#define TCUDA_RANDOM_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "random/philox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a kernel takes its Philox (seed, offset): by value, or, while a CUDA
 * graph is captured, from device memory `ptr` = {seed, offset} plus
 * `intragraph`, the blocks earlier kernels of the same graph use. A graph's
 * replay rewrites *ptr before it runs (tc__generator_replay_prologue), so
 * each replay draws fresh numbers without re-capturing. */
typedef struct tc__philox_args {
    uint64_t seed;
    uint64_t offset;
    const uint64_t *ptr;
    uint64_t intragraph;
} tc__philox_args;

/* Queues the fill of data[0..n) described by p on `stream`; *kernel gets a
 * name for messages. The caller calls tc__launch_check afterwards. */
void tc__random_launch(const tc__rng_params *p, tc__philox_args a, void *data, size_t n,
                       int sm_count, cudaStream_t stream, const char **kernel);

/* Queues the write of {seed, offset} into buf[0..1] on `stream`. */
void tc__random_launch_set_state(uint64_t *buf, uint64_t seed, uint64_t offset,
                                 cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
