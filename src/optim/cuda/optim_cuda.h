/* The CUDA optimizer backend: the table the device seam registers
 * (optim_cuda.c) and the C launchers of its kernels (optim.cu).
 *
 * Each launcher queues its kernels on `stream` (of the current device: the
 * caller entered it) and returns without checking; the caller runs
 * tc__launch_check after. A list goes in chunks of TC__MT_CHUNK tensors,
 * one kernel launch per chunk, the chunk's addresses and sizes in the
 * launch's arguments (multi_tensor_apply's idea): nothing is copied to the
 * device first, so a capture replays them as they were. `sms` sizes grids.
 * Not installed. */
#ifndef TCUDA_OPTIM_CUDA_H
#define TCUDA_OPTIM_CUDA_H

#include <cuda_runtime_api.h>

#include "optim/optim_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TC__MT_CHUNK 48

extern const tc__optim_backend tc__cuda_optim_backend;

void tc__k_optim_adam(cudaStream_t stream, int sms, const tc__mt_list *l, const tc__adam_args *a);
void tc__k_optim_sgd(cudaStream_t stream, int sms, const tc__mt_list *l, const tc__sgd_args *a);
void tc__k_optim_foreach(cudaStream_t stream, int sms, const tc__mt_list *l,
                         const tc__foreach_args *a);
/* The bytes of device scratch tc__k_optim_norms needs for l (the chunks'
 * partial sums; at least 8 a tensor). */
size_t tc__k_optim_norms_scratch(const tc__mt_list *l);
void tc__k_optim_norms(cudaStream_t stream, const tc__mt_list *l, double ord, void *out,
                       void *scratch);
void tc__k_optim_clip_coef(cudaStream_t stream, tc_dtype dtype, const void *norms, int n,
                           double ord, double max_norm, void *total, void *coef);
void tc__k_optim_unscale(cudaStream_t stream, int sms, const tc__mt_list *l, const float *scale,
                         bool check_only, float *found_inf);
void tc__k_optim_update_scale(cudaStream_t stream, float *scale, int32_t *tracker,
                              const float *found_inf, double growth, double backoff, int interval);

#ifdef __cplusplus
}
#endif

#endif
