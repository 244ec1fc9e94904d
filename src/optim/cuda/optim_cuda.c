/* The CUDA optimizer backend (optim/optim_internal.h): each entry enters the
 * device, queues optim.cu's kernels on its current stream and reports launch
 * errors in one place. Nothing here waits; only the norms take scratch, from
 * the caching allocator on the stream. */
#include "memory/cuda/device_alloc.h"
#include "optim_cuda.h"
#include "runtime/cuda/cuda_internal.h"
#include "tcuda/device.h"

static tc_status cu_adam(int device, const tc__mt_list *l, const tc__adam_args *a)
{
    TC_LAUNCH(device, "optim_adam_kernel",
              tc__k_optim_adam(cs_, tc__sm_count_for_grid(device), l, a));
}

static tc_status cu_sgd(int device, const tc__mt_list *l, const tc__sgd_args *a)
{
    TC_LAUNCH(device, "optim_sgd_kernel",
              tc__k_optim_sgd(cs_, tc__sm_count_for_grid(device), l, a));
}

static tc_status cu_foreach(int device, const tc__mt_list *l, const tc__foreach_args *a)
{
    TC_LAUNCH(device, "optim_foreach_kernel",
              tc__k_optim_foreach(cs_, tc__sm_count_for_grid(device), l, a));
}

static tc_status cu_norms(int device, const tc__mt_list *l, double ord, void *out)
{
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t cs = tc__current_cuda_stream(device);
    /* the chunks' partial sums, from the cache on this stream: freed once
     * the kernels are queued, reused only by later work on the stream */
    void *scratch = NULL;
    tc_status st = tc__device_alloc(device, cs, tc__k_optim_norms_scratch(l), &scratch);
    if (st == TC_OK) {
        tc__k_optim_norms(cs, l, ord, out, scratch);
        st = tc__launch_check(cs, "optim_norms_kernel");
        (void)tc__device_free(scratch);
    }
    tc_device_guard_exit(&g);
    return st;
}

static tc_status cu_clip_coef(int device, tc_dtype dtype, const void *norms, int n, double ord,
                              double max_norm, void *total, void *coef)
{
    TC_LAUNCH(device, "optim_clip_coef_kernel",
              tc__k_optim_clip_coef(cs_, dtype, norms, n, ord, max_norm, total, coef));
}

static tc_status cu_unscale(int device, const tc__mt_list *l, const float *scale, bool check_only,
                            float *found_inf)
{
    TC_LAUNCH(
        device, "optim_unscale_kernel",
        tc__k_optim_unscale(cs_, tc__sm_count_for_grid(device), l, scale, check_only, found_inf));
}

static tc_status cu_update_scale(int device, float *scale, int32_t *tracker, const float *found_inf,
                                 double growth, double backoff, int interval)
{
    TC_LAUNCH(device, "optim_update_scale_kernel",
              tc__k_optim_update_scale(cs_, scale, tracker, found_inf, growth, backoff, interval));
}

const tc__optim_backend tc__cuda_optim_backend = {
    .adam = cu_adam,
    .sgd = cu_sgd,
    .apply = cu_foreach,
    .norms = cu_norms,
    .clip_coef = cu_clip_coef,
    .unscale = cu_unscale,
    .update_scale = cu_update_scale,
};
