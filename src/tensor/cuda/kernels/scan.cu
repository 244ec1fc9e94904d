/* Scan kernels: the inclusive running sum (cumsum) of a contiguous tensor
 * seen as [outer, r, inner], along r.
 *
 * Long rows (inner == 1, r > SCAN_SHORT): a block per row walks it in tiles
 * of SCAN_THREADS * SCAN_ITEMS elements. Each thread sums its SCAN_ITEMS
 * neighbouring elements, the block scans the thread totals (warp shuffles,
 * then the warp totals), each thread writes its running sums, and the tile's
 * total is carried into the next tile. Everything else (columns, short rows):
 * a thread per line walks r, neighbouring threads reading neighbouring
 * columns. Sums accumulate in the compute type (float for 16-bit floats and
 * float32, double, wrapping int64); the order of the additions depends only
 * on the shape, so results are deterministic. */
#include "common.cuh"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

enum { SCAN_THREADS = 256, SCAN_ITEMS = 4, SCAN_WARPS = SCAN_THREADS / 32, SCAN_SHORT = 64 };

template <typename C> __device__ __forceinline__ C add(C a, C b) { return a + b; }
template <> __device__ __forceinline__ i64 add<i64>(i64 a, i64 b)
{
    return (i64)((unsigned long long)a + (unsigned long long)b); /* wraps, as the CPU's */
}

/* Inclusive scan of x over the lanes of a warp. */
template <typename C> __device__ __forceinline__ C warp_scan(C x, int lane)
{
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        C y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o)
            x = add(x, y);
    }
    return x;
}

template <typename T>
__global__ void __launch_bounds__(SCAN_THREADS)
    scan_rows_kernel(const T *in, T *out, i64 rows, i64 r)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    __shared__ C warp_tot[SCAN_WARPS];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *src = in + row * r;
        T *dst = out + row * r;
        C carry = (C)0;
        for (i64 base = 0; base < r; base += (i64)SCAN_THREADS * SCAN_ITEMS) {
            i64 first = base + (i64)threadIdx.x * SCAN_ITEMS;
            C v[SCAN_ITEMS], t = (C)0;
#pragma unroll
            for (int k = 0; k < SCAN_ITEMS; k++) {
                t = add(t, first + k < r ? load<C>(src + first + k) : (C)0);
                v[k] = t; /* this thread's running sums */
            }
            C x = warp_scan(t, lane);
            C before = __shfl_up_sync(0xffffffffu, x, 1); /* the lanes below this one */
            if (lane == 0)
                before = (C)0;
            if (lane == 31)
                warp_tot[warp] = x;
            __syncthreads();
            if (warp == 0) {
                C w = warp_scan(lane < SCAN_WARPS ? warp_tot[lane] : (C)0, lane);
                if (lane < SCAN_WARPS)
                    warp_tot[lane] = w; /* inclusive over the warps */
            }
            __syncthreads();
            C prefix = add(carry, warp ? add(warp_tot[warp - 1], before) : before);
#pragma unroll
            for (int k = 0; k < SCAN_ITEMS; k++)
                if (first + k < r)
                    store(dst + first + k, add(prefix, v[k]));
            carry = add(carry, warp_tot[SCAN_WARPS - 1]);
            __syncthreads(); /* warp_tot is rewritten by the next tile */
        }
    }
}

template <typename T>
__global__ void scan_lines_kernel(const T *in, T *out, i64 outer, i64 r, i64 inner)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < outer * inner; i += stride) {
        i64 o = i / inner, k = i % inner, at = o * r * inner + k;
        C acc = (C)0;
        for (i64 j = 0; j < r; j++, at += inner) {
            acc = add(acc, load<C>(in + at));
            store(out + at, acc);
        }
    }
}

template <typename T>
void launch(cudaStream_t stream, int sms, const void *in, void *out, i64 outer, i64 r, i64 inner)
{
    if (inner == 1 && r > SCAN_SHORT) {
        i64 cap = (i64)(sms > 0 ? sms : 80) * 8;
        unsigned blocks = (unsigned)(outer < cap ? outer : cap);
        scan_rows_kernel<T><<<blocks, SCAN_THREADS, 0, stream>>>((const T *)in, (T *)out, outer, r);
    } else {
        scan_lines_kernel<T><<<grid_for(outer * inner, 256, sms), 256, 0, stream>>>(
            (const T *)in, (T *)out, outer, r, inner);
    }
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" void tc__k_scan(cudaStream_t stream, int sms, tc__op op, tc_dtype dtype, const void *in,
                           void *out, int64_t outer, int64_t r, int64_t inner)
{
    (void)op;        /* TC__SCAN_CUMSUM, the one scan */
    switch (dtype) { /* the core gives floating dtypes and int64 only */
    case TC_FLOAT16: launch<__half>(stream, sms, in, out, outer, r, inner); break;
    case TC_BFLOAT16: launch<__nv_bfloat16>(stream, sms, in, out, outer, r, inner); break;
    case TC_FLOAT32: launch<float>(stream, sms, in, out, outer, r, inner); break;
    case TC_FLOAT64: launch<double>(stream, sms, in, out, outer, r, inner); break;
    default: launch<i64>(stream, sms, in, out, outer, r, inner); break;
    }
}
