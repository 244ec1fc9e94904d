/* Hopper's warpgroup matrix products (wgmma, compute capability 9.0 with
 * its architecture-specific features: sm_90a) for 16-bit operands, as the
 * attention backward's sm_90 kernels use them: m64n64k16 with float32
 * accumulation, A from shared memory or from registers, B from shared
 * memory; the tiles in shared memory in 128-byte rows swizzled as the
 * 128-byte mode reads them. Code using these compiles to nothing but for
 * sm_90a (TC_WGMMA). Not installed.
 *
 * Tiles: rows of 64 16-bit elements (128 bytes), 16-byte chunk c of row r
 * at byte r * 128 + ((c ^ (r % 8)) * 16), the tile starting on a 1024-byte
 * boundary (the swizzle's pattern repeats every 8 rows). One such tile is
 * both
 *   K-major (rows are M or N, the 64 columns K): the product's k16 step s
 *     starts at byte 32 s; the stride between 8-row groups (SBO) is 1024;
 *   MN-major for B (rows are K, the 64 columns N, imm-trans-b 1): step s
 *     starts at row 16 s, byte 2048 s; SBO, between 8-row groups of K, is
 *     1024, and the leading offset (between 64-column groups of N) is not
 *     used with N = 64.
 * Accumulators, per warp w of the warpgroup (g = lane / 4, t = lane % 4):
 * d[n][0], d[n][1] are row 16 w + g, columns 8 n + 2 t and + 1; d[n][2],
 * d[n][3] row 16 w + g + 8, the same columns (mma.sync's m16n8 layout,
 * repeated over n). A from registers: warp w's rows 16 w.., in mma.sync's
 * m16n8k16 A layout (attention_mma.cuh). */
#ifndef TCUDA_KERNELS_WGMMA_CUH
#define TCUDA_KERNELS_WGMMA_CUH

#include <stdint.h>

#include <type_traits>

#include "attention_mma.cuh"
#include "common.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TC_WGMMA 1
#else
#define TC_WGMMA 0
#endif

namespace tcuda_kernels {
namespace wg {

using tck::i64;

constexpr int TILE = 64 * 128; /* bytes of a 64-row tile */
constexpr int ALIGN = 1024;    /* the swizzle's pattern: tiles start on it */

/* Byte offset of 16-byte chunk c (0..7) of row r in a swizzled tile. */
__device__ __forceinline__ unsigned sw128(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

/* The block's shared memory from a 1024-byte boundary on. */
__device__ __forceinline__ unsigned char *aligned_smem(unsigned char *p)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    return p + ((ALIGN - a % ALIGN) % ALIGN);
}

/* Rows [0, n) of src (row stride `row`, e columns, 16-byte aligned) into
 * a swizzled 64-row tile at dst, zeros below n and right of e, by a block
 * of 128 threads: 16-byte cp.async copies left in flight (the caller
 * commits). Thread x copies chunk x % 8 of rows x / 8 + 16 i, whose
 * swizzled places are 2048 bytes apart (16 rows keep the row's place in
 * the swizzle's 8), so one address each side and one byte count serve
 * all four. */
__device__ __forceinline__ void fill(unsigned char *dst, const uint16_t *src, i64 row, int n, int e)
{
    int r0 = threadIdx.x / 8, ch = threadIdx.x % 8;
    int cb = min(max(e - ch * 8, 0), 8) * 2; /* the rest of a row is zero-filled */
    const uint16_t *from = src + r0 * row + ch * 8;
    unsigned char *to = dst + sw128(r0, ch);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int bytes = r0 + 16 * i < n ? cb : 0; /* rows past n too */
        amma::cp_async16(to + 2048 * i, bytes ? from + 16 * i * row : src, bytes);
    }
}

/* The A operand of a product over k = 64 columns of p (16 rows a warp, in
 * the accumulator registers of the product that made it: p[j], columns
 * 8j..), rounded to H: step s (columns 16s..) in f[s]. */
template <typename H> __device__ __forceinline__ void to_a(uint32_t (*f)[4], const float (*p)[4])
{
#pragma unroll
    for (int s = 0; s < 4; s++) {
        f[s][0] = amma::Mma<H>::pack(p[2 * s][0], p[2 * s][1]);
        f[s][1] = amma::Mma<H>::pack(p[2 * s][2], p[2 * s][3]);
        f[s][2] = amma::Mma<H>::pack(p[2 * s + 1][0], p[2 * s + 1][1]);
        f[s][3] = amma::Mma<H>::pack(p[2 * s + 1][2], p[2 * s + 1][3]);
    }
}

/* The descriptor of a swizzled operand starting at shared address addr
 * (128-byte swizzle, SBO 1024 bytes, LBO unused: encoded 1). Shared
 * addresses are under 2^18, so desc(addr) + off / 16 is desc(addr + off)
 * for 16-byte multiples off: a product's later steps add to one
 * descriptor instead of making their own. */
__device__ __forceinline__ uint64_t desc(unsigned addr)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

__device__ __forceinline__ void fence()
{
#if TC_WGMMA
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void commit()
{
#if TC_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

/* Waits until at most N committed groups of products are in flight. */
template <int N> __device__ __forceinline__ void wait()
{
#if TC_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

/* Orders this thread's earlier writes to shared memory (cp.async's too)
 * before the async proxy's reads (the tensor cores' here) that follow a
 * barrier. */
__device__ __forceinline__ void proxy_fence()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/* Keeps the compiler from moving the accumulators' registers across the
 * asynchronous products (their values are the tensor cores' until wait). */
__device__ __forceinline__ void hold(float (*d)[4])
{
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int r = 0; r < 4; r++)
            asm volatile("" : "+f"(d[n][r])::"memory");
}

/* The two products' asm for the 16-bit type named TY ("bf16" or "f16"),
 * on ss's and rs's arguments; TC_WG_D, their 32 accumulators. */
#define TC_WG_D                                                                                    \
    "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),      \
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),  \
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),  \
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),  \
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),  \
        "+f"(d[7][2]), "+f"(d[7][3])
#define TC_WG_SS(TY)                                                                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                       \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "    \
                 "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "    \
                 "%32, %33, p, 1, 1, 0, %35;\n}\n"                                                 \
                 : TC_WG_D                                                                         \
                 : "l"(da), "l"(db), "r"(scale_d), "n"(TB))
#define TC_WG_RS(TY)                                                                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                       \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "    \
                 "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "    \
                 "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"                                   \
                 : TC_WG_D                                                                         \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TB), "r"(scale_d))

/* d (64 x 64, float32) = A B (+ d when scale_d is not 0): A's descriptor
 * da (K-major), B's db, K-major (TB 0: the tile holds B^T, rows n) or
 * MN-major (TB 1: the tile holds B, rows k). */
template <typename H, int TB>
__device__ __forceinline__ void ss(float (*d)[4], uint64_t da, uint64_t db, int scale_d)
{
#if TC_WGMMA
    if constexpr (std::is_same<H, __nv_bfloat16>::value)
        TC_WG_SS("bf16");
    else
        TC_WG_SS("f16");
#endif
}

/* d (64 x 64, float32) = A B (+ d when scale_d is not 0): A from the
 * registers a (warp w's rows 16 w.., 16 columns of k), B's descriptor db,
 * K-major or MN-major as for ss. */
template <typename H, int TB>
__device__ __forceinline__ void rs(float (*d)[4], const uint32_t *a, uint64_t db, int scale_d)
{
#if TC_WGMMA
    if constexpr (std::is_same<H, __nv_bfloat16>::value)
        TC_WG_RS("bf16");
    else
        TC_WG_RS("f16");
#endif
}

#undef TC_WG_SS
#undef TC_WG_RS
#undef TC_WG_D

} // namespace wg
} // namespace tcuda_kernels

#endif
