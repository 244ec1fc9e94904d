/* The CUDA-graph hook of the random-number generators (see the top of
 * src/random/cuda/random_cuda.c for the protocol). For the graphs module; not
 * installed. */
#ifndef TCUDA_RANDOM_CUDA_H
#define TCUDA_RANDOM_CUDA_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "tcuda/random.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Puts a CUDA generator in capture mode: draws then read {seed, offset} from
 * `buf` (2 uint64 of device memory on gen's device, owned by the caller) plus
 * the blocks used so far in the capture. TC_ERROR_INVALID_STATE if already. */
tc_status tc__generator_capture_begin(tc_generator *gen, uint64_t *buf);
/* Leaves capture mode; *blocks_per_replay = blocks the captured draws use. */
tc_status tc__generator_capture_end(tc_generator *gen, uint64_t *blocks_per_replay);
/* Before each replay, on the replay's stream: queues the write of the
 * generator's {seed, offset} into buf and advances its offset by `blocks`. */
tc_status tc__generator_replay_prologue(tc_generator *gen, uint64_t *buf, uint64_t blocks,
                                        cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
