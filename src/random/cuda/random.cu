/* Random-number kernels: one template over (distribution, dtype, word width),
 * instantiated for the combinations that exist.
 *
 * Each thread takes Philox blocks b = tid, tid + stride, ... (grid-stride);
 * block b yields elements b*E .. b*E+E-1 through tc__rng_block_bits, the
 * same function the CPU runs, so values never depend on the launch shape.
 * A full block is written with 16-byte (or 8/4-byte) stores when the buffer
 * is aligned for them; the tail block and unaligned buffers store element by
 * element. Philox (seed, offset) come by value, or from device memory while a
 * CUDA graph is captured (tc__philox_args). float16/bfloat16 uniform and
 * normal fills take a path of their own that converts two values at a time
 * (block16 below), with the same values; there a thread takes two blocks
 * per step, 2i and 2i+1, and writes them with one 16-byte store. */
#include <atomic>

#include "random_kernels.h"
#include "runtime/cuda/pdl.cuh"

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

__host__ __device__ constexpr int dtype_size(int d)
{
    return d <= 2 ? 1 : d == 3 ? 2 : d == 4 ? 4 : d == 5 ? 8 : d <= 7 ? 2 : d == 8 ? 4 : 8;
}

__host__ __device__ constexpr int per_block(int kind, int dtype, int wide)
{
    return ((kind == TC__RNG_UNIFORM || kind == TC__RNG_NORMAL) && dtype == 9) ||
                   (kind == TC__RNG_INT && wide)
               ? 2
               : 4;
}

template <int SIZE, int E>
__device__ __forceinline__ void store_block(unsigned char *out, uint64_t b, size_t n,
                                            const uint64_t bits[4], bool vec)
{
    constexpr int BYTES = SIZE * E;
    uint64_t first = b * E;
    unsigned char *dst = out + first * SIZE;
    if (vec && first + E <= n) {
        uint32_t w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
        for (int l = 0; l < E; l++) {
            if (SIZE == 8) {
                w[2 * l] = (uint32_t)bits[l];
                w[2 * l + 1] = (uint32_t)(bits[l] >> 32);
            } else if (SIZE == 4) {
                w[l] = (uint32_t)bits[l];
            } else if (SIZE == 2) {
                w[l / 2] |= (uint32_t)(bits[l] & 0xffffu) << (16 * (l % 2));
            } else {
                w[l / 4] |= (uint32_t)(bits[l] & 0xffu) << (8 * (l % 4));
            }
        }
        if (BYTES >= 16) {
#pragma unroll
            for (int k = 0; k < BYTES / 16; k++)
                reinterpret_cast<uint4 *>(dst)[k] = make_uint4(w[4 * k], w[4 * k + 1], w[4 * k + 2],
                                                               w[4 * k + 3]);
        } else if (BYTES == 8) {
            *reinterpret_cast<uint2 *>(dst) = make_uint2(w[0], w[1]);
        } else {
            *reinterpret_cast<uint32_t *>(dst) = w[0];
        }
        return;
    }
#pragma unroll
    for (int l = 0; l < E; l++) {
        if (first + l >= n)
            break;
        if (SIZE == 8)
            reinterpret_cast<uint64_t *>(dst)[l] = bits[l];
        else if (SIZE == 4)
            reinterpret_cast<uint32_t *>(dst)[l] = (uint32_t)bits[l];
        else if (SIZE == 2)
            reinterpret_cast<uint16_t *>(dst)[l] = (uint16_t)bits[l];
        else
            dst[l] = (unsigned char)bits[l];
    }
}

/* ---- float16 / bfloat16 uniform and normal: two values per conversion ----
 * Conversions run on a unit with 16 results per clock per SM (H100), an
 * eighth of the float32 rate, which bounded these fills. cvt.rn.{f16,bf16}x2
 * converts two floats in one instruction, with the same rounding as
 * tc__f32_to_f16/bf16 (bench/check_cvt.cu). NaNs, which the hardware makes
 * canonical, send the block to the general path (tc__rng_block_bits). The
 * uniform clamp "value(h) > fmax" compares sign-magnitude keys, which order
 * like the values for every non-NaN half, instead of converting back. */
#ifndef TCUDA_RNG_PAIRS
#define TCUDA_RNG_PAIRS 1 /* two Philox blocks per thread and step */
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr bool have_packed16 = false; /* bf16x2 needs sm_80 */
#else
constexpr bool have_packed16 = true;
#endif

template <int DTYPE> __device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    uint32_t d = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (DTYPE == 6)
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
#endif
    return d;
}

[[maybe_unused]] __device__ __forceinline__ int key16(uint32_t h)
{
    int m = (int)(h & 0x7fffu);
    return (h & 0x8000u) ? -m : m;
}

/* The clamp of a uniform half: h, or hmax (whose key is kmax) when h is above. */
[[maybe_unused]] __device__ __forceinline__ uint32_t clamp16(uint32_t h, uint32_t hmax, int kmax)
{
    return key16(h) > kmax ? hmax : h;
}

/* Whether a 16-bit fill with these parameters can make a NaN: uniform never
 * (lo + range*u with finite lo, range and u < 1), normal only when std is so
 * large that std * sqrt(-2 ln u1) (at most 5.78 std) overflows and meets a
 * zero cosine or sine. Checking each value costs the normal fill about 4%. */
template <int KIND> __device__ __forceinline__ bool may_nan(const tc__rng_params *p)
{
    return KIND == TC__RNG_NORMAL && !(fabsf(p->fb) < 5.0e37f);
}

/* Block `block` as two packed words (elements 0,1 and 2,3, low half first);
 * false when a value is NaN (then the words are not to be used). */
template <int KIND, int DTYPE>
__device__ __forceinline__ bool block16(const tc__rng_params *p, uint64_t seed, uint64_t block,
                                        uint32_t hmax, int kmax, bool check, uint32_t pw[2])
{
    uint32_t w[4];
    tc__philox_block(seed, block, 0, 0, w);
    float f[4];
    if (KIND == TC__RNG_UNIFORM) {
#pragma unroll
        for (int l = 0; l < 4; l++)
            f[l] = tc__uniform_f32(p, w[l]);
    } else {
        tc__normal_f32(p, w[0], w[1], &f[0], &f[1]);
        tc__normal_f32(p, w[2], w[3], &f[2], &f[3]);
    }
    if (check && (f[0] != f[0] || f[1] != f[1] || f[2] != f[2] || f[3] != f[3]))
        return false;
    pw[0] = pack2<DTYPE>(f[0], f[1]);
    pw[1] = pack2<DTYPE>(f[2], f[3]);
    if (KIND == TC__RNG_UNIFORM) {
#pragma unroll
        for (int k = 0; k < 2; k++)
            pw[k] = clamp16(pw[k] & 0xffffu, hmax, kmax) | clamp16(pw[k] >> 16, hmax, kmax) << 16;
    }
    return true;
}

[[maybe_unused]] __device__ __forceinline__ void store16(unsigned char *out, uint64_t b, size_t n,
                                                         const uint32_t pw[2], bool vec)
{
    uint64_t first = b * 4;
    unsigned char *dst = out + first * 2;
    if (vec && first + 4 <= n) {
        *reinterpret_cast<uint2 *>(dst) = make_uint2(pw[0], pw[1]);
        return;
    }
#pragma unroll
    for (int l = 0; l < 4; l++)
        if (first + l < n)
            reinterpret_cast<uint16_t *>(dst)[l] = (uint16_t)(pw[l / 2] >> (16 * (l % 2)));
}

template <int KIND, int DTYPE, int WIDE>
__global__ void __launch_bounds__(256)
    rng_kernel(unsigned char *out, size_t n, const tc__rng_params p, tc__philox_args a, bool vec)
{
    tck_pdl_entry();
    constexpr int E = per_block(KIND, DTYPE, WIDE);
    constexpr int SIZE = dtype_size(DTYPE);
    uint64_t seed = a.seed, offset = a.offset;
    if (a.ptr) {
        seed = a.ptr[0];
        offset = a.ptr[1] + a.intragraph;
    }
    const tc__rng_params q = p;
    uint64_t nb = ((uint64_t)n + E - 1) / E;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    constexpr bool packed = have_packed16 && (KIND == TC__RNG_UNIFORM || KIND == TC__RNG_NORMAL) &&
                            (DTYPE == 6 || DTYPE == 7);
    if constexpr (packed) {
        uint32_t hmax = DTYPE == 6 ? tc__f32_to_f16(q.fmax) : tc__f32_to_bf16(q.fmax);
        int kmax = key16(hmax);
        bool check = may_nan<KIND>(&q);
#if TCUDA_RNG_PAIRS
        /* two blocks per step, blocks 2i and 2i+1: one 16-byte store, and two
         * independent Philox chains to interleave */
        bool vec16 = vec && ((uintptr_t)out & 15u) == 0;
        for (; 2 * b < nb; b += stride) {
            uint64_t b0 = 2 * b;
            uint32_t pw[4];
            bool ok0 = block16<KIND, DTYPE>(&q, seed, offset + b0, hmax, kmax, check, pw);
            bool ok1 = block16<KIND, DTYPE>(&q, seed, offset + b0 + 1, hmax, kmax, check, pw + 2);
            if (ok0 && ok1 && vec16 && (b0 + 2) * 4 <= n) {
                *reinterpret_cast<uint4 *>(out + b0 * 8) = make_uint4(pw[0], pw[1], pw[2], pw[3]);
                continue;
            }
            for (int k = 0; k < 2 && b0 + k < nb; k++) {
                if (k ? ok1 : ok0) {
                    store16(out, b0 + k, n, pw + 2 * k, vec);
                } else {
                    uint64_t bits[4];
                    tc__rng_block_bits(KIND, DTYPE, WIDE, &q, seed, offset + b0 + k, bits);
                    store_block<SIZE, E>(out, b0 + k, n, bits, vec);
                }
            }
        }
#else
        for (; b < nb; b += stride) {
            uint32_t pw[2];
            if (block16<KIND, DTYPE>(&q, seed, offset + b, hmax, kmax, check, pw)) {
                store16(out, b, n, pw, vec);
            } else {
                uint64_t bits[4];
                tc__rng_block_bits(KIND, DTYPE, WIDE, &q, seed, offset + b, bits);
                store_block<SIZE, E>(out, b, n, bits, vec);
            }
        }
#endif
    } else {
        for (; b < nb; b += stride) {
            uint64_t bits[4];
            tc__rng_block_bits(KIND, DTYPE, WIDE, &q, seed, offset + b, bits);
            store_block<SIZE, E>(out, b, n, bits, vec);
        }
    }
}

__global__ void set_state_kernel(uint64_t *buf, uint64_t seed, uint64_t offset)
{
    tck_pdl_entry();
    buf[0] = seed;
    buf[1] = offset;
}

typedef void (*kernel_fn)(unsigned char *, size_t, const tc__rng_params, tc__philox_args, bool);

template <int KIND> kernel_fn pick_float(int dtype)
{
    switch (dtype) {
    case 6: return rng_kernel<KIND, 6, 0>;
    case 7: return rng_kernel<KIND, 7, 0>;
    case 8: return rng_kernel<KIND, 8, 0>;
    case 9: return rng_kernel<KIND, 9, 0>;
    default: return nullptr;
    }
}

template <int KIND> kernel_fn pick_any(int dtype)
{
    switch (dtype) {
    case 0: return rng_kernel<KIND, 0, 0>;
    case 1: return rng_kernel<KIND, 1, 0>;
    case 2: return rng_kernel<KIND, 2, 0>;
    case 3: return rng_kernel<KIND, 3, 0>;
    case 4: return rng_kernel<KIND, 4, 0>;
    case 5: return rng_kernel<KIND, 5, 0>;
    default: return pick_float<KIND>(dtype);
    }
}

/* Resident blocks of 256 threads per SM, per kernel (0: not asked yet), so
 * that the grid is exactly one full wave whatever a kernel's registers. */
std::atomic<int> blocks_per_sm[4][10][2];

int resident_blocks(kernel_fn fn, int kind, int dtype, int wide)
{
    std::atomic<int> &slot = blocks_per_sm[kind & 3][dtype % 10][wide ? 1 : 0];
    int b = slot.load(std::memory_order_relaxed);
    if (b == 0) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, fn, 256, 0) != cudaSuccess || b < 1) {
            (void)cudaGetLastError();
            b = 4;
        }
        slot.store(b, std::memory_order_relaxed);
    }
    return b;
}

const char *kernel_names[4] = {"random_uniform", "random_normal", "random_bernoulli", "random_int"};

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" void tc__random_launch(const tc__rng_params *p, tc__philox_args a, void *data, size_t n,
                                  int sm_count, cudaStream_t stream, const char **kernel)
{
    kernel_fn fn = nullptr;
    switch (p->kind) {
    case TC__RNG_UNIFORM: fn = pick_float<TC__RNG_UNIFORM>(p->dtype); break;
    case TC__RNG_NORMAL: fn = pick_float<TC__RNG_NORMAL>(p->dtype); break;
    case TC__RNG_BERNOULLI: fn = pick_any<TC__RNG_BERNOULLI>(p->dtype); break;
    default:
        if (!p->wide)
            fn = pick_any<TC__RNG_INT>(p->dtype);
        else if (p->dtype == 5)
            fn = rng_kernel<TC__RNG_INT, 5, 1>;
        else if (p->dtype == 9)
            fn = rng_kernel<TC__RNG_INT, 9, 1>;
        break;
    }
    *kernel = kernel_names[p->kind & 3];
    int E = p->per_block;
    int esize = dtype_size(p->dtype);
    int align = E * esize > 16 ? 16 : E * esize;
    bool vec = ((uintptr_t)data % (uintptr_t)align) == 0;
    if (!fn) {
        /* A combination the core never asks for: a zero-sized launch makes
         * tc__launch_check report it instead of writing anything. */
        cudaLaunchKernel((const void *)set_state_kernel, dim3(0), dim3(0), nullptr, 0, stream);
        return;
    }
    uint64_t nb = ((uint64_t)n + E - 1) / E;
    uint64_t blocks = (nb + 255) / 256;
    uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) *
                   (uint64_t)resident_blocks(fn, p->kind, p->dtype, p->wide);
    if (blocks > cap)
        blocks = cap;
    fn<<<(unsigned)blocks, 256, 0, stream>>>((unsigned char *)data, n, *p, a, vec);
}

extern "C" void tc__random_launch_set_state(uint64_t *buf, uint64_t seed, uint64_t offset,
                                            cudaStream_t stream)
{
    set_state_kernel<<<1, 1, 0, stream>>>(buf, seed, offset);
}
