/* The optimizer kernels: Adam(W), SGD, the foreach operations, the
 * per-tensor norms, clip_grad_norm_'s coefficient and the gradient scaler's
 * two kernels. Every element goes through optim_math.h's formulas, the ones
 * the CPU backend runs (optim_cpu.c), so that both give the same bits.
 *
 * Multi-tensor launches: a Table holds up to TC__MT_CHUNK tensors (their
 * sizes and one address per slot, about 2.7 KB of kernel arguments); each
 * thread walks the chunk's tensors in order with a grid-stride loop over
 * each. A step reads each tensor's count, then a second one-block kernel
 * increments the counts (not where found_inf is set): every read of a count
 * is ordered before its write, with no atomics. The norms split each
 * tensor into fixed chunks, a block each, then add the chunks in order. */
#include <math.h>
#include <stdint.h>

#include "optim/optim_math.h"
#include "optim_cuda.h"
#include "runtime/cuda/pdl.cuh"

typedef long long i64;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

struct Table {
    int n;
    i64 numel[TC__MT_CHUNK];
    void *ptr[TC__MT_SLOTS][TC__MT_CHUNK];
};

__device__ __forceinline__ bool skipped(const float *found_inf)
{
    return found_inf && *found_inf != 0.0f;
}

/* ---- Adam --------------------------------------------------------------------------- */

__global__ void adam_kernel(Table t, tc__adam_args a, tc_dtype dt)
{
    tck_pdl_entry();
    if (skipped(a.amp.found_inf))
        return;
    double lr = a.amp.lr ? (double)*a.amp.lr : a.lr;
    i64 stride = (i64)gridDim.x * blockDim.x, first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = 0; i < t.n; i++) {
        float step = TC_FADD(*(const float *)t.ptr[TC__MT_STEP][i], 1.0f);
        tc__adam_el e = tc__adam_el_of(&a, lr, step, a.amp.grad_scale);
        void *p = t.ptr[TC__MT_PARAM][i], *g = t.ptr[TC__MT_GRAD][i];
        void *m = t.ptr[TC__MT_EXP_AVG][i], *v = t.ptr[TC__MT_EXP_AVG_SQ][i];
        void *vm = a.amsgrad ? t.ptr[TC__MT_MAX_EXP_AVG_SQ][i] : NULL;
        for (i64 k = first; k < t.numel[i]; k += stride) {
            if (dt == TC_FLOAT64) {
                tc__adam_d(&e, (double *)p + k, (double *)g + k, (double *)m + k, (double *)v + k,
                           vm ? (double *)vm + k : NULL);
                continue;
            }
            float pf = tc__mt_loadf(p, k, dt), gf = tc__mt_loadf(g, k, dt);
            float mf = tc__mt_loadf(m, k, dt), vf = tc__mt_loadf(v, k, dt);
            float xf = vm ? tc__mt_loadf(vm, k, dt) : 0.0f;
            tc__adam_f(&e, &pf, &gf, &mf, &vf, &xf);
            tc__mt_storef(p, k, dt, pf), tc__mt_storef(m, k, dt, mf);
            tc__mt_storef(v, k, dt, vf);
            if (vm)
                tc__mt_storef(vm, k, dt, xf);
            if (e.scaled)
                tc__mt_storef(g, k, dt, gf);
        }
    }
}

/* The counts of a chunk go up by one, unless found_inf is set. */
__global__ void step_kernel(Table t, const float *found_inf)
{
    tck_pdl_entry();
    if (skipped(found_inf))
        return;
    for (int i = threadIdx.x; i < t.n; i += blockDim.x) {
        float *s = (float *)t.ptr[TC__MT_STEP][i];
        *s = TC_FADD(*s, 1.0f);
    }
}

/* ---- SGD ----------------------------------------------------------------------------- */

__global__ void sgd_kernel(Table t, tc__sgd_args a, tc_dtype dt)
{
    tck_pdl_entry();
    if (skipped(a.amp.found_inf))
        return;
    tc__sgd_el e;
    e.lr = a.amp.lr ? (double)*a.amp.lr : a.lr;
    e.momentum = a.momentum;
    e.omd = 1.0 - a.dampening;
    e.wd = a.weight_decay;
    e.nesterov = a.nesterov, e.maximize = a.maximize;
    e.scaled = a.amp.grad_scale != NULL;
    e.scale = a.amp.grad_scale ? (double)*a.amp.grad_scale : 1.0;
    i64 stride = (i64)gridDim.x * blockDim.x, first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = 0; i < t.n; i++) {
        e.first = *(const float *)t.ptr[TC__MT_STEP][i] == 0.0f;
        void *p = t.ptr[TC__MT_PARAM][i], *g = t.ptr[TC__MT_GRAD][i];
        void *b = t.ptr[TC__MT_EXP_AVG][i];
        for (i64 k = first; k < t.numel[i]; k += stride) {
            if (dt == TC_FLOAT64) {
                tc__sgd_d(&e, (double *)p + k, (double *)g + k, b ? (double *)b + k : NULL);
                continue;
            }
            float pf = tc__mt_loadf(p, k, dt), gf = tc__mt_loadf(g, k, dt);
            float bf = b ? tc__mt_loadf(b, k, dt) : 0.0f;
            tc__sgd_f(&e, &pf, &gf, b ? &bf : NULL);
            tc__mt_storef(p, k, dt, pf);
            if (b)
                tc__mt_storef(b, k, dt, bf);
            if (e.scaled)
                tc__mt_storef(g, k, dt, gf);
        }
    }
}

/* ---- foreach --------------------------------------------------------------------------- */

__global__ void foreach_kernel(Table t, tc__foreach_args a, tc_dtype dt)
{
    tck_pdl_entry();
    double sd = a.alpha;
    if (a.op == TC__FE_MUL_TENSOR)
        sd = a.scalar_dtype == TC_FLOAT64 ? *(const double *)a.scalar_ptr
                                          : (double)tc__mt_loadf(a.scalar_ptr, 0, a.scalar_dtype);
    float sf = (float)sd;
    bool ra = tc__foreach_reads_a(a.op), rb = tc__foreach_reads_b(a.op);
    i64 stride = (i64)gridDim.x * blockDim.x, first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = 0; i < t.n; i++) {
        void *x = t.ptr[0][i];
        const void *pa = ra ? t.ptr[1][i] : NULL, *pb = rb ? t.ptr[2][i] : NULL;
        for (i64 k = first; k < t.numel[i]; k += stride) {
            if (dt == TC_FLOAT64) {
                double *xd = (double *)x + k;
                *xd = tc__foreach_d(a.op, *xd, pa ? ((const double *)pa)[k] : 0.0,
                                    pb ? ((const double *)pb)[k] : 0.0, sd);
                continue;
            }
            float va = pa ? tc__mt_loadf(pa, k, dt) : 0.0f;
            float vb = pb ? tc__mt_loadf(pb, k, dt) : 0.0f;
            tc__mt_storef(x, k, dt, tc__foreach_f(a.op, tc__mt_loadf(x, k, dt), va, vb, sf));
        }
    }
}

/* ---- norms ------------------------------------------------------------------------------ */

__device__ __forceinline__ double load_d(const void *p, i64 k, tc_dtype dt)
{
    return dt == TC_FLOAT64 ? ((const double *)p)[k] : (double)tc__mt_loadf(p, k, dt);
}

__device__ __forceinline__ void store_d(void *p, i64 k, tc_dtype dt, double v)
{
    if (dt == TC_FLOAT64)
        ((double *)p)[k] = v;
    else
        tc__mt_storef(p, k, dt, (float)v);
}

/* The largest of two magnitudes, NaN winning. */
__device__ __forceinline__ double max_nan(double a, double b)
{
    return a != a || b != b ? (double)NAN : (a > b ? a : b);
}

#define NORM_THREADS 512

/* The block's combined value of v (sum, or max_nan when inf). */
__device__ double block_combine(double v, bool inf)
{
    __shared__ double part[NORM_THREADS];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int w = NORM_THREADS / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            part[threadIdx.x] = inf ? max_nan(part[threadIdx.x], part[threadIdx.x + w])
                                    : part[threadIdx.x] + part[threadIdx.x + w];
        __syncthreads();
    }
    return part[0];
}

/* The norms in two kernels. Each block of the first takes NORM_CHUNK
 * elements of one tensor (a tensor's chunks in order, one part at least, so
 * an empty tensor's norm is 0); one block per tensor of the second combines
 * its parts in order. The split depends on the sizes alone: the same list
 * gives the same bits on any GPU. */
#define NORM_CHUNK (NORM_THREADS * 64)

/* Where each tensor's parts start among a chunk's: first[i] .. first[i + 1]. */
struct Parts {
    int first[TC__MT_CHUNK + 1];
};

__host__ __device__ __forceinline__ i64 parts_of(i64 numel)
{
    return numel > NORM_CHUNK ? (numel + NORM_CHUNK - 1) / NORM_CHUNK : 1;
}

__global__ void norm_parts_kernel(Table t, Parts p, tc_dtype dt, bool inf, double *part)
{
    tck_pdl_entry();
    int b = blockIdx.x, i = 0;
    while (i + 1 < t.n && p.first[i + 1] <= b)
        i++;
    i64 lo = (i64)(b - p.first[i]) * NORM_CHUNK;
    i64 hi = lo + NORM_CHUNK < t.numel[i] ? lo + NORM_CHUNK : t.numel[i];
    const void *x = t.ptr[0][i];
    double acc = 0;
    for (i64 k = lo + threadIdx.x; k < hi; k += NORM_THREADS) {
        double v = fabs(load_d(x, k, dt));
        acc = inf ? max_nan(acc, v) : acc + v * v;
    }
    acc = block_combine(acc, inf);
    if (threadIdx.x == 0)
        part[b] = acc;
}

/* One block per tensor: out[blockIdx.x] = its norm, from its parts. */
__global__ void norm_total_kernel(Parts p, const double *part, tc_dtype dt, bool inf, void *out)
{
    tck_pdl_entry();
    int i = blockIdx.x;
    double acc = 0;
    for (int k = p.first[i] + threadIdx.x; k < p.first[i + 1]; k += NORM_THREADS)
        acc = inf ? max_nan(acc, part[k]) : acc + part[k];
    acc = block_combine(acc, inf);
    if (threadIdx.x == 0)
        store_d(out, i, dt, inf ? acc : sqrt(acc));
}

/* One block: the total norm of n norms, then the clip coefficient. */
__global__ void clip_coef_kernel(tc_dtype dt, const void *norms, int n, bool inf, double max_norm,
                                 void *total, void *coef)
{
    tck_pdl_entry();
    double acc = 0;
    for (int k = threadIdx.x; k < n; k += NORM_THREADS) {
        double v = fabs(load_d(norms, k, dt));
        acc = inf ? max_nan(acc, v) : acc + v * v;
    }
    acc = block_combine(acc, inf);
    if (threadIdx.x != 0)
        return;
    store_d(total, 0, dt, inf ? acc : sqrt(acc));
    if (dt == TC_FLOAT64)
        *(double *)coef = tc__clip_coef_d(*(const double *)total, max_norm);
    else
        tc__mt_storef(coef, 0, dt, tc__clip_coef_f(tc__mt_loadf(total, 0, dt), max_norm, dt));
}

/* ---- the gradient scaler ----------------------------------------------------------------- */

__global__ void unscale_kernel(Table t, tc_dtype dt, const float *scale, bool check_only,
                               float *found_inf)
{
    tck_pdl_entry();
    float inv = check_only ? 1.0f : tc__amp_inv_scale(*scale);
    i64 stride = (i64)gridDim.x * blockDim.x, first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = 0; i < t.n; i++) {
        void *x = t.ptr[0][i];
        for (i64 k = first; k < t.numel[i]; k += stride) {
            if (dt == TC_FLOAT64) {
                double v = ((double *)x)[k];
                if (!isfinite(v))
                    *found_inf = 1.0f;
                ((double *)x)[k] = inv == 1.0f ? v : TC_DMUL(v, (double)inv);
                continue;
            }
            float v = tc__mt_loadf(x, k, dt);
            if (!isfinite(v))
                *found_inf = 1.0f;
            if (inv != 1.0f)
                tc__mt_storef(x, k, dt, TC_FMUL(v, inv));
        }
    }
}

__global__ void update_scale_kernel(float *scale, int32_t *tracker, const float *found_inf,
                                    double growth, double backoff, int interval)
{
    tck_pdl_entry();
    tc__amp_update(scale, tracker, *found_inf, growth, backoff, interval);
}

/* ---- chunks ---------------------------------------------------------------------------------- */

/* Calls launch(table, start, elements) for each chunk of the list. */
template <typename F> void for_chunks(const tc__mt_list *l, F launch)
{
    for (int s = 0; s < l->n; s += TC__MT_CHUNK) {
        Table t;
        t.n = l->n - s < TC__MT_CHUNK ? l->n - s : TC__MT_CHUNK;
        i64 total = 0;
        for (int i = 0; i < t.n; i++) {
            t.numel[i] = l->numel[s + i];
            total += t.numel[i];
            for (int slot = 0; slot < TC__MT_SLOTS; slot++)
                t.ptr[slot][i] = l->ptr[slot] ? l->ptr[slot][s + i] : NULL;
        }
        launch(t, s, total);
    }
}

unsigned grid_of(i64 total, int sms)
{
    i64 blocks = (total + 255) / 256, cap = (i64)(sms > 0 ? sms : 80) * 8;
    blocks = blocks > cap ? cap : blocks;
    return (unsigned)(blocks > 0 ? blocks : 1);
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" void tc__k_optim_adam(cudaStream_t stream, int sms, const tc__mt_list *l,
                                 const tc__adam_args *a)
{
    for_chunks(l, [&](const Table &t, int, i64 total) {
        adam_kernel<<<grid_of(total, sms), 256, 0, stream>>>(t, *a, l->dtype);
        step_kernel<<<1, 64, 0, stream>>>(t, a->amp.found_inf);
    });
}

extern "C" void tc__k_optim_sgd(cudaStream_t stream, int sms, const tc__mt_list *l,
                                const tc__sgd_args *a)
{
    for_chunks(l, [&](const Table &t, int, i64 total) {
        sgd_kernel<<<grid_of(total, sms), 256, 0, stream>>>(t, *a, l->dtype);
        step_kernel<<<1, 64, 0, stream>>>(t, a->amp.found_inf);
    });
}

extern "C" void tc__k_optim_foreach(cudaStream_t stream, int sms, const tc__mt_list *l,
                                    const tc__foreach_args *a)
{
    for_chunks(l, [&](const Table &t, int, i64 total) {
        foreach_kernel<<<grid_of(total, sms), 256, 0, stream>>>(t, *a, l->dtype);
    });
}

extern "C" size_t tc__k_optim_norms_scratch(const tc__mt_list *l)
{
    i64 parts = 0;
    for (int i = 0; i < l->n; i++)
        parts += parts_of(l->numel[i]);
    return (size_t)parts * sizeof(double);
}

extern "C" void tc__k_optim_norms(cudaStream_t stream, const tc__mt_list *l, double ord, void *out,
                                  void *scratch)
{
    size_t es = l->dtype == TC_FLOAT64 ? 8 : l->dtype == TC_FLOAT32 ? 4 : 2;
    double *part = (double *)scratch;
    bool inf = isinf(ord) != 0;
    for_chunks(l, [&](const Table &t, int start, i64) {
        Parts p;
        p.first[0] = 0;
        for (int i = 0; i < t.n; i++)
            p.first[i + 1] = p.first[i] + (int)parts_of(t.numel[i]);
        norm_parts_kernel<<<p.first[t.n], NORM_THREADS, 0, stream>>>(t, p, l->dtype, inf, part);
        norm_total_kernel<<<t.n, NORM_THREADS, 0, stream>>>(p, part, l->dtype, inf,
                                                            (char *)out + (size_t)start * es);
        part += p.first[t.n];
    });
}

extern "C" void tc__k_optim_clip_coef(cudaStream_t stream, tc_dtype dtype, const void *norms, int n,
                                      double ord, double max_norm, void *total, void *coef)
{
    clip_coef_kernel<<<1, NORM_THREADS, 0, stream>>>(dtype, norms, n, isinf(ord) != 0, max_norm,
                                                     total, coef);
}

extern "C" void tc__k_optim_unscale(cudaStream_t stream, int sms, const tc__mt_list *l,
                                    const float *scale, bool check_only, float *found_inf)
{
    for_chunks(l, [&](const Table &t, int, i64 total) {
        unscale_kernel<<<grid_of(total, sms), 256, 0, stream>>>(t, l->dtype, scale, check_only,
                                                                found_inf);
    });
}

extern "C" void tc__k_optim_update_scale(cudaStream_t stream, float *scale, int32_t *tracker,
                                         const float *found_inf, double growth, double backoff,
                                         int interval)
{
    update_scale_kernel<<<1, 1, 0, stream>>>(scale, tracker, found_inf, growth, backoff, interval);
}
