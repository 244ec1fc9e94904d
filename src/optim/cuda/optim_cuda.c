/* The CUDA optimizer backend (optim/optim_internal.h): each entry enters the
 * device, queues optim.cu's kernels on its current stream and reports launch
 * errors in one place. Nothing here allocates or waits. */
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
    TC_LAUNCH(device, "optim_norms_kernel", tc__k_optim_norms(cs_, l, ord, out));
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
