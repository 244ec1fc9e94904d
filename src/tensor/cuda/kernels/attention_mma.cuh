/* What the fused attention forward (attention.cu) and its backward
 * (attention_backward.cu) share for their 16-bit tensor core paths
 * (compute capability 8.0 and newer): the mma.sync m16n8k16 product with
 * float32 accumulation and the conversions to its operands, 16-byte tile
 * loads by cp.async, and ldmatrix. Not installed.
 *
 * The fragments of one m16n8k16 product, per lane (g = lane / 4,
 * t = lane % 4; each register holds two 16-bit elements, the lower column
 * or row in the low half):
 *   A (16x16, row-major): a0 rows g, columns 2t, 2t+1; a1 rows g+8, the
 *     same columns; a2 row g, columns 2t+8, 2t+9; a3 row g+8, those.
 *   B (16x8, "col": k by n): b0 rows (k) 2t, 2t+1 of column (n) g; b1 rows
 *     2t+8, 2t+9 of it.
 *   C, D (16x8, float32): c0, c1 row g, columns 2t, 2t+1; c2, c3 row g+8.
 * So the accumulators of two neighbouring 16x8 products (columns 0-7 and
 * 8-15) are, packed in pairs, the A operand of a product whose k runs over
 * those 16 columns: a0 = (c0, c1) and a1 = (c2, c3) of the first, a2 and
 * a3 those of the second. */
#ifndef TCUDA_KERNELS_ATTENTION_MMA_CUH
#define TCUDA_KERNELS_ATTENTION_MMA_CUH

#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "common.cuh"

namespace tcuda_kernels {
namespace amma {

using tck::i64;

using tck::ex2;

/* The 16-bit type T's tensor core product, d += a b (mma.sync m16n8k16,
 * float32 accumulation), and its conversions from float. */
template <typename T> struct Mma {
    static __device__ __forceinline__ void run(float *d, const uint32_t *a, uint32_t b0,
                                               uint32_t b1)
    {
#if __CUDA_ARCH__ >= 800
        if constexpr (std::is_same<T, __nv_bfloat16>::value)
            asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
        else
            asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
    }
    /* x rounded to T, as bits */
    static __device__ __forceinline__ uint16_t bits(float x)
    {
        T h;
        tck::store(&h, x);
        uint16_t r;
        memcpy(&r, &h, sizeof r);
        return r;
    }
    /* lo and hi rounded to T, lo in the low half: one paired conversion */
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        uint32_t r;
        if constexpr (std::is_same<T, __nv_bfloat16>::value) {
            __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
            memcpy(&r, &h, sizeof r);
        } else {
            __half2 h = __floats2half2_rn(lo, hi);
            memcpy(&r, &h, sizeof r);
        }
        return r;
    }
};

/* Eight 16-bit elements of row `src` from column `col`: one 16-byte load
 * when aligned and whole, else element loads with zeros past e. The bits
 * are moved, not converted: zero bits are 0.0 in both dtypes. */
__device__ __forceinline__ uint4 load8(const uint16_t *src, int col, int e, bool vec)
{
    if (vec && col + 8 <= e)
        return *reinterpret_cast<const uint4 *>(src + col);
    uint16_t h[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
        h[i] = col + i < e ? src[col + i] : (uint16_t)0;
    uint4 r;
    memcpy(&r, h, sizeof r);
    return r;
}

/* One 16-byte cp.async from global src to shared dst: its first `bytes`
 * (0 to 16) copied, the rest zero-filled; left in flight (the caller
 * commits). */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int bytes)
{
#if __CUDA_ARCH__ >= 800
    unsigned to = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(src), "r"(bytes));
#endif
}

/* A ROWS-row tile, rows [0, n) of src (row stride `row`), into dst
 * [ROWS][LD] row-major, zeros below n and right of e (up to D columns).
 * Aligned rows go by cp.async, 16 bytes a thread at a time, left in flight
 * (the caller commits and waits); others by element loads and stores.
 * Blocks of NT threads, NT dividing ROWS * D / 8. */
template <int ROWS, int D, int LD, int NT>
__device__ __forceinline__ void fill_tile(uint16_t (*dst)[LD], const uint16_t *src, i64 row, int n,
                                          int e, bool vec)
{
    constexpr int CH = D / 8;
    static_assert(ROWS * CH % NT == 0, "a tile's 16-byte chunks spread evenly over the block");
#pragma unroll
    for (int i = 0; i < ROWS * CH / NT; i++) {
        int c = threadIdx.x + i * NT, r = c / CH, col = (c % CH) * 8;
        if (vec) {
            int bytes = r < n ? min(max(e - col, 0), 8) * 2 : 0; /* the rest is zero-filled */
            cp_async16(&dst[r][col], bytes ? src + r * row + col : src, bytes);
        } else {
            uint4 v = r < n ? load8(src + r * row, col, e, false) : make_uint4(0, 0, 0, 0);
            *reinterpret_cast<uint4 *>(&dst[r][col]) = v;
        }
    }
}

__device__ __forceinline__ void cp_commit()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/* Waits until at most `pending` committed groups of this thread are in
 * flight. */
template <int pending> __device__ __forceinline__ void cp_wait()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
#endif
}

/* Four 8x8 matrices of 16-bit elements from shared memory, each row's
 * address given by one of the warp's lanes (lanes 8i..8i+7: matrix i), as
 * mma fragments: lane holds row lane/4, columns 2(lane%4) and +1 of each
 * matrix, or with TRANS its column lane/4, rows 2(lane%4) and +1. */
template <bool TRANS>
__device__ __forceinline__ void ldmatrix4(uint32_t *r, const uint16_t *row_address)
{
#if __CUDA_ARCH__ >= 800
    unsigned a = (unsigned)__cvta_generic_to_shared(row_address);
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
#endif
}

/* A lane's A fragment of a 16x16 block of a row-major tile in shared
 * memory (the layout above), by 32-bit loads: r and c are the lane's
 * first row and column, the block's corner plus lane / 4 and
 * 2 * (lane % 4). */
template <int LD>
__device__ __forceinline__ void frag_a(uint32_t *f, const uint16_t (*tile)[LD], int r, int c)
{
    f[0] = *reinterpret_cast<const uint32_t *>(&tile[r][c]);
    f[1] = *reinterpret_cast<const uint32_t *>(&tile[r + 8][c]);
    f[2] = *reinterpret_cast<const uint32_t *>(&tile[r][c + 8]);
    f[3] = *reinterpret_cast<const uint32_t *>(&tile[r + 8][c + 8]);
}

/* A lane's row and column, from a block's corner, in the
 * ldmatrix4 that reads the B fragments of two neighbouring 8-column
 * blocks (n) of a product 16 deep (k): b0, b1 of the first block, then
 * b0, b1 of the second.
 *   ldm_b_nk: the tile holds B's transpose, row n, column k (keys for
 *     q k^T), read as is: lanes 0-7 rows 0-7 at column 0, 8-15 rows 0-7
 *     at column 8, 16-23 rows 8-15 at 0, 24-31 rows 8-15 at 8.
 *   ldm_b_kn: the tile holds B, row k, column n (values for p v), read
 *     transposed: lanes 0-7 rows 0-7 at column 0, 8-15 rows 8-15 at 0,
 *     16-23 rows 0-7 at column 8, 24-31 rows 8-15 at 8.
 * (attention_mma writes the same expressions inline, as kr, kc, vr, vc:
 * through these calls nvcc schedules its integer math differently, and
 * the forward's PTX is kept as it was measured.) */
__device__ __forceinline__ int ldm_b_nk_row(int lane) { return (lane % 8) + (lane / 16) * 8; }
__device__ __forceinline__ int ldm_b_nk_col(int lane) { return ((lane / 8) % 2) * 8; }
__device__ __forceinline__ int ldm_b_kn_row(int lane) { return (lane % 8) + ((lane / 8) % 2) * 8; }
__device__ __forceinline__ int ldm_b_kn_col(int lane) { return (lane / 16) * 8; }

/* Whether an operand at p with strides st (outer, inner, row; in elements)
 * has every row 16-byte aligned, elems elements making 16 bytes: the
 * condition of fill_tile's cp.async (vec) and of load8's vector loads. */
inline bool aligned(const void *p, const int64_t *st, int64_t elems)
{
    if ((uintptr_t)p % 16)
        return false;
    for (int i = 0; i < 3; i++)
        if (st[i] % elems)
            return false;
    return true;
}

} // namespace amma
} // namespace tcuda_kernels

#endif
