/* Kernels for the GPU tests; see test_kernels.h. */
#include "test_kernels.h"
#include "runtime/cuda/cuda_internal.h"

static __device__ uint64_t global_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __global__ void spin_kernel(uint64_t ns, int *buf, int n, int value)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        uint64_t start = global_ns();
        while (global_ns() - start < ns) {
        }
    }
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        buf[i] = value + i;
}

static __global__ void copy_add_kernel(const int *src, int *dst, int n, int add)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        dst[i] = src[i] + add;
}

static __global__ void fault_kernel(int *p) { *p = 42; }

extern "C" tc_status tc_test_spin(void *stream, uint64_t ns)
{
    spin_kernel<<<1, 32, 0, (cudaStream_t)stream>>>(ns, NULL, 0, 0);
    return tc__launch_check((cudaStream_t)stream, "spin_kernel");
}

extern "C" tc_status tc_test_spin_then_fill(void *stream, uint64_t ns, int *buf, int n, int value)
{
    /* One block, so the spin of thread 0 delays every write. */
    spin_kernel<<<1, 256, 0, (cudaStream_t)stream>>>(ns, buf, n, value);
    return tc__launch_check((cudaStream_t)stream, "spin_kernel");
}

extern "C" tc_status tc_test_copy_add(void *stream, const int *src, int *dst, int n, int add)
{
    copy_add_kernel<<<64, 256, 0, (cudaStream_t)stream>>>(src, dst, n, add);
    return tc__launch_check((cudaStream_t)stream, "copy_add_kernel");
}

extern "C" tc_status tc_test_fault(void *stream)
{
    fault_kernel<<<1, 1, 0, (cudaStream_t)stream>>>((int *)(uintptr_t)0x10);
    return tc__launch_check((cudaStream_t)stream, "fault_kernel");
}
