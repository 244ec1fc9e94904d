/* Element-wise kernels: unary and binary arithmetic and math, comparisons
 * and where.
 *
 * When all operands are dense, 16-byte aligned and of the same shape, a
 * one-pass kernel moves 16 bytes per operand per load; it is instantiated
 * per element type and per operation, so each kernel holds the code of its
 * own operation only. (One kernel holding every operation behind a run-time
 * switch is thousands of instructions; on an H100 a graph node of it cost
 * 1.38 us against 0.96 us for a bare add, the time going to fetching code.)
 * Everything else is a grid-stride loop per arity and element type, the
 * operation a kernel argument, so the dtype x op matrix does not multiply
 * the code of the rarer strided cases. */
#include "common.cuh"
#include "tensor/float_ops.h"
#include "tensor/int_ops.h"

#include <utility>

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

/* Floating values, in the computation type: the formulas the CPU backend uses. */
template <typename C> __device__ __forceinline__ C binop(int op, C a, C b)
{
    return tc__fbinary(op, a, b);
}

/* Integers (bool included): the formulas the CPU backend uses. */
template <> __device__ __forceinline__ i64 binop<i64>(int op, i64 a, i64 b)
{
    return tc__ibinary(op, a, b);
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
    case TC__OP_RSQRT: return (C)1 / sqrt(x);
    case TC__OP_SIN: return sin(x);
    case TC__OP_COS: return cos(x);
    case TC__OP_ERF: return erf(x);
    case TC__OP_FLOOR: return floor(x);
    case TC__OP_CEIL: return ceil(x);
    case TC__OP_ROUND:
        return rint(x); /* round to nearest, half to even */
    /* gelu's constants as the CPU backend spells them: sqrt(1/2), sqrt(2/pi) */
    case TC__OP_GELU: return (C)0.5 * x * ((C)1 + erf(x * (C)0.70710678118654752440));
    case TC__OP_GELU_TANH:
        return (C)0.5 * x *
               ((C)1 + tanh((C)0.79788456080286535588 * (x + (C)0.044715 * x * x * x)));
    case TC__OP_SILU: return x / ((C)1 + exp(-x));
    default: return tanh(x);
    }
}

template <> __device__ __forceinline__ i64 unop<i64>(int op, i64 x) { return tc__iunary(op, x); }

template <typename T, int N> struct alignas(16) Vec {
    T v[N];
};

/* Dense, 16-byte aligned operands of one shape: each thread of a 128-thread
 * block moves `per` 16-byte vectors per operand (VEC_U, or 1 for tensors
 * too small to give every SM a block of VEC_U: a kernel of a few thousand
 * elements is latency, and more blocks shorten it), all loads issued before
 * any store, and the grid covers the tensor in one pass (no grid-stride
 * loop: on an H100 this streams at memcpy speed, a grid-stride loop about
 * 4% below). The last numel % N elements go to the first threads of block 0. */
enum { VEC_THREADS = 128, VEC_U = 4 };

__device__ __forceinline__ i64 vec_base(unsigned per)
{
    return (i64)blockIdx.x * VEC_THREADS * per + threadIdx.x;
}

/* out = op(x) or op(x, y), computed in T's compute type. */
template <typename T, int NIN>
__device__ __forceinline__ void apply(int op, T *out, const T *x, const T *y)
{
    typedef typename Compute<T>::type C;
    if constexpr (NIN == 2)
        store(out, binop<C>(op, load<C>(x), load<C>(y)));
    else
        store(out, unop<C>(op, load<C>(x)));
}

/* The vector kernels' parameters: 56 bytes (see KIter). Operands: out,
 * then the inputs, each dense or (bit k of scalars) one element broadcast
 * to all, as x * 0.5 with a 0-d tensor. bvec > 0: b is a dense block of
 * bvec vectors repeated along a's leading dims (a bias, a position table),
 * read at vector index i % bvec. per: vectors a thread moves (VEC_U or 1). */
struct Flat {
    i64 numel;
    void *data[4];
    unsigned scalars, bvec, per;
};

/* Vectors per thread for numel elements of `size` bytes on `sms` SMs. */
static inline unsigned vec_per(int64_t numel, size_t size, int sms)
{
    int64_t nv = numel / (int64_t)(16 / size);
    return nv >= (int64_t)VEC_THREADS * VEC_U * (sms > 0 ? sms : 80) ? VEC_U : 1;
}

static inline Flat flat(const tc__iter *it, unsigned scalars, unsigned bvec, unsigned per)
{
    Flat f = {it->numel, {nullptr, nullptr, nullptr, nullptr}, scalars, bvec, per};
    for (int k = 0; k < it->nops && k < 4; k++)
        f.data[k] = it->data[k];
    return f;
}

/* Vector i of operand p, of N elements E; a broadcast element (`one`)
 * repeated N times. */
template <typename V, typename E, int N>
__device__ __forceinline__ V vec_at(const void *p, bool one, i64 i)
{
    if (!one)
        return ((const V *)p)[i];
    V v;
    const E e = *(const E *)p;
#pragma unroll
    for (int k = 0; k < N; k++)
        v.v[k] = e;
    return v;
}

/* Element e of operand p of element type E, or its one element. */
template <typename E> __device__ __forceinline__ const E *elem_at(const void *p, bool one, i64 e)
{
    return (const E *)p + (one ? 0 : e);
}

/* N bools of one vector of a comparison's output or where's condition. */
template <int N> struct alignas(N) BoolVec {
    Bool v[N];
};

/* A unary (NIN 1: data[1] in) or binary (NIN 2: data[1], data[2]) op. */
template <typename T, int NIN, int OP>
__global__ void __launch_bounds__(VEC_THREADS) vec_kernel(Flat it)
{
    tck_pdl_entry();
    constexpr int op = OP;
    constexpr int N = 16 / sizeof(T);
    const T *a = (const T *)it.data[1], *b = (const T *)it.data[NIN];
    T *o = (T *)it.data[0];
    typedef Vec<T, N> V;
    const bool sa = it.scalars & 2, sb = it.scalars & 4;
    i64 nv = it.numel / N, base = vec_base(it.per);
    V va[VEC_U], vb[NIN == 2 ? VEC_U : 1];
#pragma unroll
    for (int u = 0; u < VEC_U; u++) {
        i64 i = base + u * VEC_THREADS;
        if (u < it.per && i < nv) {
            va[u] = vec_at<V, T, N>(a, sa, i);
            if constexpr (NIN == 2)
                vb[u] = vec_at<V, T, N>(b, sb, it.bvec ? (i64)((unsigned)i % it.bvec) : i);
        }
    }
#pragma unroll
    for (int u = 0; u < VEC_U; u++) {
        i64 i = base + u * VEC_THREADS;
        if (u < it.per && i < nv) {
            Vec<T, N> vo;
#pragma unroll
            for (int k = 0; k < N; k++)
                apply<T, NIN>(op, &vo.v[k], &va[u].v[k], &vb[NIN == 2 ? u : 0].v[k]);
            ((Vec<T, N> *)o)[i] = vo;
        }
    }
    i64 e = nv * N + base;
    if (blockIdx.x == 0 && e < it.numel)
        apply<T, NIN>(op, o + e, elem_at<T>(a, sa, e),
                      elem_at<T>(b, sb, it.bvec ? e % ((i64)it.bvec * N) : e));
}

/* A comparison of flat operands (Flat): N results of T per vector, stored
 * as N bools. */
template <typename T, int OP> __global__ void __launch_bounds__(VEC_THREADS) cmp_vec_kernel(Flat it)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    constexpr int N = 16 / sizeof(T);
    typedef Vec<T, N> V;
    const bool sa = it.scalars & 2, sb = it.scalars & 4;
    i64 nv = it.numel / N, base = vec_base(it.per);
    V va[VEC_U], vb[VEC_U];
#pragma unroll
    for (int u = 0; u < VEC_U; u++) {
        i64 i = base + u * VEC_THREADS;
        if (u < it.per && i < nv) {
            va[u] = vec_at<V, T, N>(it.data[1], sa, i);
            vb[u] = vec_at<V, T, N>(it.data[2], sb, i);
        }
    }
#pragma unroll
    for (int u = 0; u < VEC_U; u++) {
        i64 i = base + u * VEC_THREADS;
        if (u < it.per && i < nv) {
            BoolVec<N> r;
#pragma unroll
            for (int k = 0; k < N; k++)
                store(&r.v[k], binop<C>(OP, load<C>(&va[u].v[k]), load<C>(&vb[u].v[k])));
            ((BoolVec<N> *)it.data[0])[i] = r;
        }
    }
    i64 e = nv * N + base;
    if (blockIdx.x == 0 && e < it.numel)
        store((Bool *)it.data[0] + e, binop<C>(OP, load<C>(elem_at<T>(it.data[1], sa, e)),
                                               load<C>(elem_at<T>(it.data[2], sb, e))));
}

/* where(cond, a, b) of flat operands (Flat): the condition read as N bools
 * per vector of T. */
template <typename T> __global__ void __launch_bounds__(VEC_THREADS) where_vec_kernel(Flat it)
{
    tck_pdl_entry();
    constexpr int N = 16 / sizeof(T);
    typedef Vec<T, N> V;
    typedef BoolVec<N> B;
    const bool sc = it.scalars & 2, sa = it.scalars & 4, sb = it.scalars & 8;
    i64 nv = it.numel / N, base = vec_base(it.per);
    B vc[VEC_U];
    V va[VEC_U], vb[VEC_U];
#pragma unroll
    for (int u = 0; u < VEC_U; u++) {
        i64 i = base + u * VEC_THREADS;
        if (u < it.per && i < nv) {
            vc[u] = vec_at<B, Bool, N>(it.data[1], sc, i);
            va[u] = vec_at<V, T, N>(it.data[2], sa, i);
            vb[u] = vec_at<V, T, N>(it.data[3], sb, i);
        }
    }
#pragma unroll
    for (int u = 0; u < VEC_U; u++) {
        i64 i = base + u * VEC_THREADS;
        if (u < it.per && i < nv) {
            V r;
#pragma unroll
            for (int k = 0; k < N; k++)
                r.v[k] = vc[u].v[k].v ? va[u].v[k] : vb[u].v[k];
            ((V *)it.data[0])[i] = r;
        }
    }
    i64 e = nv * N + base;
    if (blockIdx.x == 0 && e < it.numel)
        ((T *)it.data[0])[e] = elem_at<Bool>(it.data[1], sc, e)->v ? *elem_at<T>(it.data[2], sa, e)
                                                                   : *elem_at<T>(it.data[3], sb, e);
}

/* Blocks for the vector kernels: one pass over numel elements of `size`
 * bytes, per vectors a thread. */
unsigned vec_grid(int64_t numel, size_t size, unsigned per)
{
    int64_t nv = numel / (int64_t)(16 / size);
    int64_t blocks = (nv + VEC_THREADS * per - 1) / (VEC_THREADS * per);
    return (unsigned)(blocks > 0 ? blocks : 1);
}

template <typename T, int NIN, int OP>
bool vec_launch(cudaStream_t stream, int sms, const tc__iter *it, unsigned scalars, unsigned bvec)
{
    unsigned per = vec_per(it->numel, sizeof(T), sms);
    Flat f = flat(it, scalars, bvec, per);
    if constexpr (NIN == 0) /* a comparison */
        cmp_vec_kernel<T, OP><<<vec_grid(it->numel, sizeof(T), per), VEC_THREADS, 0, stream>>>(f);
    else
        vec_kernel<T, NIN, OP><<<vec_grid(it->numel, sizeof(T), per), VEC_THREADS, 0, stream>>>(f);
    return true;
}

/* vec_kernel<T, NIN, op> (NIN 0: cmp_vec_kernel<T, op>) for a run-time op
 * among FIRST, FIRST + 1, ... */
template <typename T, int NIN, int FIRST, int... I>
void vec_dispatch(std::integer_sequence<int, I...>, int op, cudaStream_t stream, int sms,
                  const tc__iter *it, unsigned scalars, unsigned bvec = 0)
{
    (void)((op == FIRST + I && vec_launch<T, NIN, FIRST + I>(stream, sms, it, scalars, bvec)) ||
           ...);
}

/* Everything else: contiguous without the vector conditions, or strided. */
template <typename T> __global__ void binary_kernel(KIter<3> it, int op, int cmp)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    const T *a = (const T *)it.data[1], *b = (const T *)it.data[2];
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[3];
        element_offsets(it, i, off);
        C r = binop<C>(op, load<C>(a + off[1]), load<C>(b + off[2]));
        if (cmp)
            store((Bool *)it.data[0] + off[0], r);
        else
            store((T *)it.data[0] + off[0], r);
    }
}

template <typename T> __global__ void unary_kernel(KIter<2> it, int op)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    const T *a = (const T *)it.data[1];
    T *o = (T *)it.data[0];
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[2];
        element_offsets(it, i, off);
        store(o + off[0], unop<C>(op, load<C>(a + off[1])));
    }
}

template <typename T> __global__ void where_kernel(KIter<4> it)
{
    tck_pdl_entry();
    const Bool *c = (const Bool *)it.data[1];
    const T *a = (const T *)it.data[2], *b = (const T *)it.data[3];
    T *o = (T *)it.data[0];
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[4];
        element_offsets(it, i, off);
        o[off[0]] = c[off[1]].v ? a[off[2]] : b[off[3]];
    }
}

/* Whether every operand but the broadcast elements (bits of `scalars`)
 * starts on 16 bytes. */
bool aligned16(const tc__iter *it, unsigned scalars = 0)
{
    for (int i = 0; i < it->nops; i++)
        if (!(scalars >> i & 1) && (uintptr_t)it->data[i] % 16)
            return false;
    return true;
}

/* Whether the vector kernels take it as Flat operands: each dense or one
 * element (*scalars), the output dense, the dense ones aligned. */
bool vec_flat(const tc__iter *it, unsigned *scalars)
{
    return flat_operands(it, scalars) && !(*scalars & 1) && aligned16(it, *scalars);
}

/* Whether operand k's strides over dims [from, ndim) are those of a dense
 * row-major block; *numel gets that block's element count. */
bool dense_from(const tc__iter *it, int k, int from, int64_t *numel)
{
    int64_t want = 1;
    for (int d = it->ndim - 1; d >= from; d--) {
        if (it->sizes[d] != 1 && it->strides[k][d] != want)
            return false;
        want *= it->sizes[d];
    }
    *numel = want;
    return true;
}

/* For out = a op b with out and a dense and b a dense block repeated along
 * the leading dims (stride 0 there), b's block in vectors of n elements;
 * 0 when the operands are not so, the block is not whole vectors, or the
 * vector indices pass 32 bits. */
unsigned bcast_vectors(const tc__iter *it, int n)
{
    int64_t all = 0, block = 0;
    if (it->nops != 3 || !dense_from(it, 0, 0, &all) || !dense_from(it, 1, 0, &all))
        return 0;
    int from = 0; /* b's leading broadcast dims */
    while (from < it->ndim && (it->strides[2][from] == 0 || it->sizes[from] == 1))
        from++;
    if (from == 0 || !dense_from(it, 2, from, &block) || block % n || all / n > UINT32_MAX)
        return 0;
    return (unsigned)(block / n);
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" void tc__k_binary(cudaStream_t stream, int sms, tc__op op, tc_dtype dtype,
                             const tc__iter *it)
{
    int cmp = op >= TC__OP_EQ && op <= TC__OP_GE;
    unsigned scalars = 0, bvec = 0;
    bool vec = vec_flat(it, &scalars);
    if (!vec && !cmp && aligned16(it)) /* x + bias, x + positions */
        vec = (bvec = bcast_vectors(it, 16 / (int)tc_dtype_size(dtype))) > 0;
    dispatch(dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        if (vec && cmp)
            vec_dispatch<T, 0, TC__OP_EQ>(
                std::make_integer_sequence<int, TC__OP_GE - TC__OP_EQ + 1>(), (int)op, stream, sms,
                it, scalars);
        else if (vec)
            vec_dispatch<T, 2, TC__OP_ADD>(
                std::make_integer_sequence<int, TC__OP_REMAINDER - TC__OP_ADD + 1>(), (int)op,
                stream, sms, it, scalars, bvec);
        else
            binary_kernel<T>
                <<<grid_for(it->numel, 256, sms), 256, 0, stream>>>(kiter<3>(it), (int)op, cmp);
    });
}

extern "C" void tc__k_unary(cudaStream_t stream, int sms, tc__op op, tc_dtype dtype,
                            const tc__iter *it)
{
    bool vec = it->contiguous && aligned16(it);
    dispatch(dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        if (vec)
            vec_dispatch<T, 1, TC__OP_NEG>(
                std::make_integer_sequence<int, TC__OP_SILU - TC__OP_NEG + 1>(), (int)op, stream,
                sms, it, 0u);
        else
            unary_kernel<T>
                <<<grid_for(it->numel, 256, sms), 256, 0, stream>>>(kiter<2>(it), (int)op);
    });
}

extern "C" void tc__k_where(cudaStream_t stream, int sms, tc_dtype dtype, const tc__iter *it)
{
    unsigned scalars = 0;
    bool vec = vec_flat(it, &scalars);
    dispatch(dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        if (vec) {
            unsigned per = vec_per(it->numel, sizeof(T), sms);
            where_vec_kernel<T><<<vec_grid(it->numel, sizeof(T), per), VEC_THREADS, 0, stream>>>(
                flat(it, scalars, 0, per));
        } else {
            where_kernel<T><<<grid_for(it->numel, 256, sms), 256, 0, stream>>>(kiter<4>(it));
        }
    });
}
