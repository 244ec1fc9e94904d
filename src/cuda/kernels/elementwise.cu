/* Element-wise kernels: unary and binary arithmetic, comparisons and where.
 *
 * One kernel template per arity, instantiated per element type; the operation
 * is a kernel argument (a uniform branch costs nothing next to the memory
 * traffic) so that the dtype x op matrix does not multiply the code. Every
 * kernel is a grid-stride loop; when all operands are dense, 16-byte aligned
 * and of the same shape, each thread moves 16 bytes per operand at a time. */
#include "common.cuh"

using namespace tck;

namespace {

template <typename C> __device__ __forceinline__ i64 ipow(i64 b, i64 e)
{
    if (e < 0)
        return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;
    unsigned long long r = 1, x = (unsigned long long)b;
    while (e) {
        if (e & 1)
            r *= x;
        x *= x;
        e >>= 1;
    }
    return (i64)r;
}

template <typename C> __device__ __forceinline__ C binop(int op, C a, C b)
{
    switch (op) {
    case TC__OP_ADD: return a + b;
    case TC__OP_SUB: return a - b;
    case TC__OP_MUL: return a * b;
    case TC__OP_DIV: return a / b;
    case TC__OP_POW: return pow(a, b);
    case TC__OP_MAXIMUM: return (a != a || b != b) ? (C)NAN : a > b ? a : b;
    case TC__OP_MINIMUM: return (a != a || b != b) ? (C)NAN : a < b ? a : b;
    case TC__OP_EQ: return a == b;
    case TC__OP_NE: return a != b;
    case TC__OP_LT: return a < b;
    case TC__OP_LE: return a <= b;
    case TC__OP_GT: return a > b;
    default: return a >= b;
    }
}

template <> __device__ __forceinline__ i64 binop<i64>(int op, i64 a, i64 b)
{
    unsigned long long ua = (unsigned long long)a, ub = (unsigned long long)b;
    switch (op) {
    case TC__OP_ADD: return (i64)(ua + ub);
    case TC__OP_SUB: return (i64)(ua - ub);
    case TC__OP_MUL: return (i64)(ua * ub);
    case TC__OP_POW: return ipow<i64>(a, b);
    case TC__OP_MAXIMUM: return a > b ? a : b;
    case TC__OP_MINIMUM: return a < b ? a : b;
    case TC__OP_EQ: return a == b;
    case TC__OP_NE: return a != b;
    case TC__OP_LT: return a < b;
    case TC__OP_LE: return a <= b;
    case TC__OP_GT: return a > b;
    default: return a >= b;
    }
}

template <typename C> __device__ __forceinline__ C unop(int op, C x)
{
    switch (op) {
    case TC__OP_NEG: return -x;
    case TC__OP_ABS: return x < 0 ? -x : x;
    case TC__OP_EXP: return exp(x);
    case TC__OP_LOG: return log(x);
    case TC__OP_SQRT: return sqrt(x);
    case TC__OP_RELU: return (x > 0 || x != x) ? x : (C)0;
    case TC__OP_SIGMOID: return (C)1 / ((C)1 + exp(-x));
    default: return tanh(x);
    }
}

template <> __device__ __forceinline__ i64 unop<i64>(int op, i64 x)
{
    switch (op) {
    case TC__OP_NEG: return (i64)(0ull - (unsigned long long)x);
    case TC__OP_ABS: return x < 0 ? (i64)(0ull - (unsigned long long)x) : x;
    default: return x > 0 ? x : 0;
    }
}

template <typename T, int N> struct alignas(16) Vec {
    T v[N];
};

template <typename T>
__global__ void binary_kernel(tc__iter it, int op, int cmp, int vec)
{
    typedef typename Compute<T>::type C;
    const T *a = (const T *)it.data[1], *b = (const T *)it.data[2];
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (it.contiguous) {
        constexpr int N = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
        i64 done = 0;
        if (vec && !cmp) {
            i64 nv = it.numel / N;
            T *o = (T *)it.data[0];
            /* two iterations at once: four 16-byte loads in flight */
            for (i64 i = tid; i < nv; i += 2 * stride) {
                bool two = i + stride < nv;
                Vec<T, N> va[2], vb[2], vo[2];
                va[0] = ((const Vec<T, N> *)a)[i], vb[0] = ((const Vec<T, N> *)b)[i];
                va[1] = two ? ((const Vec<T, N> *)a)[i + stride] : va[0];
                vb[1] = two ? ((const Vec<T, N> *)b)[i + stride] : vb[0];
#pragma unroll
                for (int u = 0; u < 2; u++)
#pragma unroll
                    for (int k = 0; k < N; k++)
                        store(&vo[u].v[k], binop<C>(op, load<C>(&va[u].v[k]), load<C>(&vb[u].v[k])));
                ((Vec<T, N> *)o)[i] = vo[0];
                if (two)
                    ((Vec<T, N> *)o)[i + stride] = vo[1];
            }
            done = nv * N;
        }
        for (i64 i = done + tid; i < it.numel; i += stride) {
            C r = binop<C>(op, load<C>(a + i), load<C>(b + i));
            if (cmp)
                store((Bool *)it.data[0] + i, r);
            else
                store((T *)it.data[0] + i, r);
        }
        return;
    }
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[3];
        offsets(it, i, 3, off);
        C r = binop<C>(op, load<C>(a + off[1]), load<C>(b + off[2]));
        if (cmp)
            store((Bool *)it.data[0] + off[0], r);
        else
            store((T *)it.data[0] + off[0], r);
    }
}

template <typename T> __global__ void unary_kernel(tc__iter it, int op, int vec)
{
    typedef typename Compute<T>::type C;
    const T *a = (const T *)it.data[1];
    T *o = (T *)it.data[0];
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (it.contiguous) {
        constexpr int N = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
        i64 done = 0;
        if (vec) {
            i64 nv = it.numel / N;
            for (i64 i = tid; i < nv; i += stride) {
                Vec<T, N> va = ((const Vec<T, N> *)a)[i], vo;
#pragma unroll
                for (int k = 0; k < N; k++)
                    store(&vo.v[k], unop<C>(op, load<C>(&va.v[k])));
                ((Vec<T, N> *)o)[i] = vo;
            }
            done = nv * N;
        }
        for (i64 i = done + tid; i < it.numel; i += stride)
            store(o + i, unop<C>(op, load<C>(a + i)));
        return;
    }
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[2];
        offsets(it, i, 2, off);
        store(o + off[0], unop<C>(op, load<C>(a + off[1])));
    }
}

template <typename T> __global__ void where_kernel(tc__iter it)
{
    const Bool *c = (const Bool *)it.data[1];
    const T *a = (const T *)it.data[2], *b = (const T *)it.data[3];
    T *o = (T *)it.data[0];
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[4] = {i, i, i, i};
        if (!it.contiguous)
            offsets(it, i, 4, off);
        o[off[0]] = c[off[1]].v ? a[off[2]] : b[off[3]];
    }
}

bool aligned16(const tc__iter *it)
{
    for (int i = 0; i < it->nops; i++)
        if ((uintptr_t)it->data[i] % 16)
            return false;
    return true;
}

} // namespace

extern "C" void tc__k_binary(cudaStream_t stream, int sms, tc__op op, tc_dtype dtype,
                             const tc__iter *it)
{
    int cmp = op >= TC__OP_EQ && op <= TC__OP_GE;
    int vec = it->contiguous && aligned16(it);
    dispatch(dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        int per = vec && !cmp ? (int)(16 / sizeof(T)) : 1;
        unsigned grid = grid_for((it->numel + per - 1) / per, 256, sms);
        binary_kernel<T><<<grid, 256, 0, stream>>>(*it, (int)op, cmp, vec);
    });
}

extern "C" void tc__k_unary(cudaStream_t stream, int sms, tc__op op, tc_dtype dtype,
                            const tc__iter *it)
{
    int vec = it->contiguous && aligned16(it);
    dispatch(dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        int per = vec ? (int)(16 / sizeof(T)) : 1;
        unsigned grid = grid_for((it->numel + per - 1) / per, 256, sms);
        unary_kernel<T><<<grid, 256, 0, stream>>>(*it, (int)op, vec);
    });
}

extern "C" void tc__k_where(cudaStream_t stream, int sms, tc_dtype dtype, const tc__iter *it)
{
    dispatch(dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        where_kernel<T><<<grid_for(it->numel, 256, sms), 256, 0, stream>>>(*it);
    });
}
