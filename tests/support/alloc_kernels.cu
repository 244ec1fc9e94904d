/* Kernels for the allocator's GPU tests: one that waits a while and then sums
 * a buffer (so a later write, if the allocator wrongly reused the memory,
 * would show in the sum), and one that fills a buffer. */
#include <cuda_runtime.h>

__global__ void tc_test_spin_sum_k(const float *p, size_t n, float *out, long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
    float s = 0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        s += p[i];
    atomicAdd(out, s);
}

__global__ void tc_test_fill_k(float *p, size_t n, float v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

extern "C" int tc_test_spin_sum(const float *p, size_t n, float *out, long long cycles,
                                cudaStream_t s)
{
    tc_test_spin_sum_k<<<1, 256, 0, s>>>(p, n, out, cycles);
    return (int)cudaGetLastError();
}

extern "C" int tc_test_fill(float *p, size_t n, float v, cudaStream_t s)
{
    tc_test_fill_k<<<256, 256, 0, s>>>(p, n, v);
    return (int)cudaGetLastError();
}
