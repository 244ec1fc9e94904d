/* Device-side helpers shared by the tensor kernels: the element type of each
 * tc_dtype, its computation type (float for 16-bit floats, int64 for
 * integers), loads and stores with PyTorch's conversion rules, strided offset
 * computation, and grid sizing. Not installed. */
#ifndef TCUDA_KERNELS_COMMON_CUH
#define TCUDA_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <atomic>
#include <type_traits>

#include "kernels.h"
#include "runtime/cuda/pdl.cuh"

namespace tck {

typedef long long i64;

template <typename T> struct Compute {
    typedef i64 type;
};
template <> struct Compute<__half> {
    typedef float type;
};
template <> struct Compute<__nv_bfloat16> {
    typedef float type;
};
template <> struct Compute<float> {
    typedef float type;
};
template <> struct Compute<double> {
    typedef double type;
};

/* bool is stored as one byte 0/1. */
struct Bool {
    uint8_t v;
};

template <typename C, typename T> __device__ __forceinline__ C load(const T *p) { return (C)*p; }
template <typename C> __device__ __forceinline__ C load(const Bool *p) { return (C)(p->v != 0); }
template <typename C> __device__ __forceinline__ C load(const __half *p)
{
    return (C)__half2float(*p);
}
template <typename C> __device__ __forceinline__ C load(const __nv_bfloat16 *p)
{
    return (C)__bfloat162float(*p);
}

/* Floating to integer as the CPU backend does: NaN and out of range give
 * INT64_MIN, then the low bits. */
__device__ __forceinline__ i64 f_to_i(double v)
{
    if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18))
        return (i64)0x8000000000000000ull;
    return (i64)v;
}

template <typename T, typename C> __device__ __forceinline__ void store(T *p, C v) { *p = (T)v; }
template <typename C> __device__ __forceinline__ void store(Bool *p, C v) { p->v = v != (C)0; }
template <typename C> __device__ __forceinline__ void store(__half *p, C v)
{
    *p = __float2half_rn((float)v);
}
template <> __device__ __forceinline__ void store(__half *p, double v) { *p = __double2half(v); }
template <typename C> __device__ __forceinline__ void store(__nv_bfloat16 *p, C v)
{
    *p = __float2bfloat16_rn((float)v);
}
template <> __device__ __forceinline__ void store(__nv_bfloat16 *p, double v)
{
    *p = __double2bfloat16(v);
}

/* 2^x by the special function unit (ex2.approx, about 2 ulp; denormal
 * results flush to 0), and log2(e), for exp(x) as 2^(x log2 e). */
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
constexpr float LOG2E = 1.4426950408889634f;

/* 16 bytes of T (V elements), moved as one aligned load or store. */
template <typename T> struct alignas(16) Pack16 {
    static constexpr int V = 16 / (int)sizeof(T);
    T v[V];
};

/* The Pack16 at p (16-byte aligned). */
template <typename T> __device__ __forceinline__ Pack16<T> ld16(const T *p)
{
    return *reinterpret_cast<const Pack16<T> *>(p);
}

/* The elements of p (n of them) before its first 16-byte boundary: the
 * head that a loop of Pack16 loads takes one by one (at most n). */
template <typename T> __device__ __forceinline__ i64 head16(const T *p, i64 n)
{
    i64 h = (i64)((16 - (uintptr_t)p % 16) % 16) / (i64)sizeof(T);
    return h < n ? h : n;
}

/* Whether the pointers sit alike against 16-byte boundaries (so that one
 * head serves them all). */
inline bool same16(const void *a, const void *b) { return (uintptr_t)a % 16 == (uintptr_t)b % 16; }

/* What a strided kernel of N operands needs of a tc__iter. Kernels take it
 * by value, so it holds only those N operands: a launch copies its
 * parameters, and a graph node stores and replays them (a whole tc__iter,
 * sized for jiterator's 8 operands, is 660 bytes; this is 100 to 300).
 * flat: every operand is dense (its offsets are the linear index) or one
 * element broadcast to all (bit k of scalars: offset 0), as x * 0.5 with
 * a 0-d tensor; contiguous implies flat with no scalars. */
template <int N> struct KIter {
    int ndim;
    bool contiguous, flat;
    unsigned char scalars;
    i64 numel;
    i64 sizes[TC_MAX_DIMS];
    i64 strides[N][TC_MAX_DIMS];
    void *data[N];
};

/* Whether each of the iter's operands is dense (its offsets are the linear
 * index) or one element broadcast to all (bit k of *scalars; contiguous:
 * none is). */
static inline bool flat_operands(const tc__iter *it, unsigned *scalars)
{
    *scalars = 0;
    if (it->contiguous)
        return true;
    for (int o = 0; o < it->nops; o++) {
        bool dense = true, zero = true;
        i64 want = 1;
        for (int d = it->ndim - 1; d >= 0; d--) {
            if (it->sizes[d] != 1) {
                dense = dense && it->strides[o][d] == want;
                zero = zero && it->strides[o][d] == 0;
            }
            want *= it->sizes[d];
        }
        if (!dense && !zero) {
            *scalars = 0;
            return false;
        }
        if (!dense)
            *scalars |= 1u << o;
    }
    return true;
}

template <int N> static inline KIter<N> kiter(const tc__iter *it)
{
    KIter<N> k;
    k.ndim = it->ndim;
    k.contiguous = it->contiguous;
    k.numel = it->numel;
    for (int d = 0; d < TC_MAX_DIMS; d++) {
        k.sizes[d] = it->sizes[d];
        for (int o = 0; o < N; o++)
            k.strides[o][d] = it->strides[o][d];
    }
    for (int o = 0; o < N; o++)
        k.data[o] = it->data[o];
    unsigned scalars;
    k.flat = flat_operands(it, &scalars);
    k.scalars = (unsigned char)scalars;
    return k;
}

/* Element offsets of linear index i for every operand. */
template <int N> __device__ __forceinline__ void offsets(const KIter<N> &it, i64 i, i64 *off)
{
    for (int k = 0; k < N; k++)
        off[k] = 0;
    for (int d = it.ndim - 1; d >= 0; d--) {
        i64 s = it.sizes[d];
        i64 idx = i % s;
        i /= s;
        for (int k = 0; k < N; k++)
            off[k] += idx * it.strides[k][d];
    }
}

/* The same, quicker where the iteration is flat. */
template <int N>
__device__ __forceinline__ void element_offsets(const KIter<N> &it, i64 i, i64 *off)
{
    if (it.flat) {
        for (int k = 0; k < N; k++)
            off[k] = it.scalars >> k & 1 ? 0 : i;
    } else {
        offsets(it, i, off);
    }
}

static inline unsigned grid_for(int64_t work, int threads, int sms)
{
    int64_t blocks = (work + threads - 1) / threads;
    int64_t cap = (int64_t)(sms > 0 ? sms : 80) * 32;
    if (blocks > cap)
        blocks = cap;
    return (unsigned)(blocks > 0 ? blocks : 1);
}

/* Shared memory a block may opt in to on `device` (0 when the query fails),
 * asked once per device. */
inline size_t smem_optin(int device)
{
    static std::atomic<int> cached[64];
    if (device < 0 || device >= 64)
        return 0;
    int v = cached[device].load(std::memory_order_relaxed);
    if (v == 0) {
        if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
                cudaSuccess ||
            v <= 0) {
            (void)cudaGetLastError();
            return 0;
        }
        cached[device].store(v, std::memory_order_relaxed);
    }
    return (size_t)v;
}

/* Raises `kernel`'s dynamic shared memory allowance to `bytes`, once per
 * device (`set_on`: the kernel's own record of the devices done), so that
 * later launches, in a capture too, need no further call. False when CUDA
 * refuses. */
template <typename K>
bool smem_allowed(K kernel, int bytes, int device, std::atomic<unsigned long long> &set_on)
{
    unsigned long long bit = device >= 0 && device < 64 ? 1ull << device : 0;
    if (bit && (set_on.load(std::memory_order_acquire) & bit))
        return true;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    set_on.fetch_or(bit, std::memory_order_acq_rel);
    return true;
}

/* Calls f.template operator()<T>() with T the element type of `dtype`. */
template <typename F> void dispatch(tc_dtype dtype, F f)
{
    switch (dtype) {
    case TC_BOOL: f((Bool *)0); break;
    case TC_UINT8: f((uint8_t *)0); break;
    case TC_INT8: f((int8_t *)0); break;
    case TC_INT16: f((int16_t *)0); break;
    case TC_INT32: f((int32_t *)0); break;
    case TC_INT64: f((i64 *)0); break;
    case TC_FLOAT16: f((__half *)0); break;
    case TC_BFLOAT16: f((__nv_bfloat16 *)0); break;
    case TC_FLOAT32: f((float *)0); break;
    default: f((double *)0); break;
    }
}

/* The same for a floating dtype. */
template <typename F> void dispatch_float(tc_dtype dtype, F f)
{
    switch (dtype) {
    case TC_FLOAT16: f((__half *)0); break;
    case TC_BFLOAT16: f((__nv_bfloat16 *)0); break;
    case TC_FLOAT32: f((float *)0); break;
    default: f((double *)0); break;
    }
}

} // namespace tck

#endif
