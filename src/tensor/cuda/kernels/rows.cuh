/* What the row kernels (rows.cu) and cross_entropy's (loss.cu) share: exp
 * and log of the computation type, reductions over a warp or a block, the
 * online maximum and sum of exp, and the grid of one block per row. Not
 * installed. */
#ifndef TCUDA_KERNELS_ROWS_CUH
#define TCUDA_KERNELS_ROWS_CUH

#include <math.h>

#include "common.cuh"

namespace tck {

__device__ __forceinline__ float ex(float x) { return expf(x); }
__device__ __forceinline__ double ex(double x) { return exp(x); }
__device__ __forceinline__ float lg(float x) { return logf(x); }
__device__ __forceinline__ double lg(double x) { return log(x); }
template <typename C> __device__ __forceinline__ C ninf() { return (C)-INFINITY; }

/* Sum or max over a warp; every lane gets the result. A NaN is not taken by
 * max (the sum of exp then carries it). */
template <bool MAX, typename C> __device__ __forceinline__ C warp_red(C v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        C w = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? (w > v ? w : v) : v + w;
    }
    return v;
}

/* Over the row's team (a warp, or the block); every thread gets the result.
 * `sh` holds 32 values; the leading sync lets a previous reduction finish
 * reading it. */
template <bool MAX, bool WARP, typename C> __device__ __forceinline__ C team_red(C v, C *sh)
{
    v = warp_red<MAX>(v);
    if (WARP)
        return v;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (MAX ? ninf<C>() : (C)0);
    return warp_red<MAX>(v);
}

/* Online max and sum of exp: (m, s) after one more value v. A +inf maximum
 * makes the sum NaN, as exp(inf - inf) does in PyTorch's two passes (the
 * whole row is NaN then); without that, a thread that sees the +inf last
 * would keep s = 1 and write 0 for every other value. */
template <typename C> __device__ __forceinline__ void online(C &m, C &s, C v)
{
    if (v > m) {
        s = s * ex(m - v) + (v == -ninf<C>() ? (C)NAN : (C)1);
        m = v;
    } else {
        s += v == ninf<C>() ? (C)0 : ex(v - m); /* a NaN gives NaN */
    }
}

/* (M, S) of a team from each thread's (m, s). */
template <bool WARP, typename C> __device__ __forceinline__ void online_red(C &m, C &s, C *sh)
{
    C big = team_red<true, WARP>(m, sh);
    s = team_red<false, WARP>(m == ninf<C>() ? s * (C)0 : s * ex(m - big), sh);
    m = big;
}

/* A row of n elements at p, shared by a team (this thread: lane of size),
 * in 16-byte packs: f(j) for each element j before p's first 16-byte
 * boundary and after the last whole pack, fv(j) for each pack, j its first
 * element. Other rows whose pointers sit as p does against 16-byte
 * boundaries (same16) split at the same j. */
template <typename T, typename F, typename FV>
__device__ __forceinline__ void row16(const T *p, i64 n, int lane, int size, F f, FV fv)
{
    constexpr int V = Pack16<T>::V;
    const i64 h = head16(p, n), packs = (n - h) / V, tail = h + packs * V;
    for (i64 j = lane; j < h; j += size)
        f(j);
    for (i64 i = lane; i < packs; i += size)
        fv(h + i * V);
    for (i64 j = tail + lane; j < n; j += size)
        f(j);
}

/* row16 for a read that keeps U of each thread's packs in flight at once:
 * fv(j, pack) gets each of the packs row16 gives the thread, loaded U at a
 * time before any is used (a block with few rows resident, as the staged
 * ones, would otherwise wait out one load's latency per pack). */
template <int U, typename T, typename F, typename FV>
__device__ __forceinline__ void row16_ahead(const T *p, i64 n, int lane, int size, F f, FV fv)
{
    typedef Pack16<T> P;
    const i64 h = head16(p, n), packs = (n - h) / P::V, tail = h + packs * P::V;
    for (i64 j = lane; j < h; j += size)
        f(j);
    for (i64 i = lane; i < packs; i += (i64)U * size) {
        P v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (i + (i64)u * size < packs)
                v[u] = ld16(p + h + (i + (i64)u * size) * P::V);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (i + (i64)u * size < packs)
                fv(h + (i + (i64)u * size) * P::V, v[u]);
    }
    for (i64 j = tail + lane; j < n; j += size)
        f(j);
}

/* A grid of `blocks` blocks (one a row), kept within what a launch takes. */
static inline unsigned cap_grid(i64 blocks)
{
    return (unsigned)(blocks < 1 ? 1 : blocks > 0x7fffffff ? 0x7fffffff : blocks);
}

/* The team (WARP: a warp, else the block) of the calling thread: its rank in
 * the team, the team's size, the block's teams and this team's index. */
template <bool WARP> struct Team {
    int lane, size, teams, team;
    __device__ Team()
        : lane(WARP ? threadIdx.x & 31 : threadIdx.x), size(WARP ? 32 : blockDim.x),
          teams(WARP ? blockDim.x / 32 : 1), team(WARP ? threadIdx.x / 32 : 0)
    {
    }
};

/* Teams for `rows` rows of n: a warp each (four to a block of 128) up to
 * 1,024, else a block of `wide` threads. */
struct RowLaunch {
    bool warp;
    int threads;
    unsigned blocks;
};

inline RowLaunch row_launch(i64 rows, i64 n, int wide)
{
    RowLaunch l;
    l.warp = n <= 1024;
    l.threads = l.warp ? 128 : wide;
    l.blocks = cap_grid(l.warp ? (rows + 3) / 4 : rows);
    return l;
}

} // namespace tck

#endif
