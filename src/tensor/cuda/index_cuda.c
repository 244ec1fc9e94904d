/* The CUDA indexing backend (tensor/index_internal.h): launches the kernels of
 * kernels/index.cu on the current stream of the tensor's device, under a
 * device guard, and checks each launch (tc__launch_check). Installed in the
 * device seam by src/cuda/device_ops.c. Out-of-range indices are caught by a
 * device-side assert in the kernels (see include/tcuda/indexing.h). */
#include "tensor/index_internal.h"
#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "index_cuda.h"
#include "tensor/cuda/kernels/index_kernels.h"

static tc_status cu_gather(int device, tc_dtype dt, tc_dtype idt, const tc__iter *it,
                           int64_t dim_stride, int64_t dim_size)
{
    TC_LAUNCH(device, "gather_kernel",
              tc__k_gather(cs_, tc__sm_count_for_grid(device), dt, idt, it, dim_stride, dim_size));
}

static tc_status cu_scatter_add(int device, tc_dtype dt, const tc__iter *it, int64_t dim_stride,
                                int64_t dim_size)
{
    TC_LAUNCH(device, "scatter_add_kernel",
              tc__k_scatter_add(cs_, tc__sm_count_for_grid(device), dt, it, dim_stride, dim_size));
}

static tc_status cu_tri(int device, tc_dtype dt, bool upper, int64_t diagonal, const tc__iter *it)
{
    TC_LAUNCH(device, "tri_kernel",
              tc__k_tri(cs_, tc__sm_count_for_grid(device), dt, upper, diagonal, it));
}

static tc_status cu_topk(int device, tc_dtype dt, const void *in, void *values, int64_t *indices,
                         int64_t outer, int64_t r, int64_t inner, int64_t k, bool largest)
{
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t cs = tc__current_cuda_stream(device);
    /* sort space, from the cache on this stream: given back as soon as the
     * kernel is queued, reused only by later work on the same stream */
    void *scratch = NULL;
    size_t sb = tc__k_topk_scratch(tc__sm_count_for_grid(device), dt, outer * inner, r);
    tc_status st = tc__device_alloc(device, cs, sb, &scratch);
    if (st == TC_OK) {
        tc__k_topk(cs, tc__sm_count_for_grid(device), dt, in, values, indices, outer, r, inner, k,
                   largest, scratch);
        st = tc__launch_check(cs, "topk_kernel");
        (void)tc__device_free(scratch);
    }
    tc_device_guard_exit(&g);
    return st;
}

const tc__index_backend tc__cuda_index_backend = {
    .gather = cu_gather,
    .scatter_add = cu_scatter_add,
    .tri = cu_tri,
    .topk = cu_topk,
};
