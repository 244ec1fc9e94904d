/* cuBLAS, loaded at run time: the per-thread handle of each device
 * (tc_current_blas_handle) and the GPU matmul.
 *
 * Only the few entry points used are declared here, so the build needs no
 * cuBLAS headers or library; a machine without libcublas gets
 * TC_ERROR_NOT_SUPPORTED from matmul and nothing else changes. Handles are
 * created once per thread and device and re-bound to the current stream on
 * every use. Row-major C = A B is computed as column-major C^T = B^T A^T.
 * The nn operations' GEMM (tc__cuda_gemm) is the same call with transposes,
 * alpha, beta and a float32 C for 16-bit A and B. linear's GEMM with its
 * bias goes to cuBLASLt first (blas_lt.c), with the same mapping; the
 * tensor matmul is the same GEMM without transposes. The computation type
 * and math mode follow tcuda/backends.h's switches, read at each call.
 * Small float32 GEMMs (kernels/gemm_small.cu says which) skip cuBLAS for one
 * kernel of tcuda's: cuBLAS's host time per call and its few-block kernels
 * cost more than the work at those sizes (that kernel is full float32
 * whatever allow_tf32 says), and so do GEMMs of at most 16 rows against a
 * transposed B (kernels/gemm_skinny.cu: decode's matrix-vector products,
 * with linear's bias and gelu in the same kernel). Large 16-bit results
 * whose rows are not whole 16-byte vectors go through padded rows
 * (gemm_padded), or into them where
 * the caller padded them (gemm_split_cols), large 16-bit operands so
 * through padded copies (gemm_padded_operands), and an unaligned m or k
 * of aligned operands in two parts (gemm_split_m, gemm_split_k). In a
 * capture ordered by data each GEMM gets a workspace of its own
 * (graph/cuda/graph_order.c). */
#include <pthread.h>
#include <stdio.h>

#include "blas_abi.h"
#include "tensor/backends_internal.h"
#include "tensor/tensor_internal.h"
#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "access/access.h"
#include "tensor/cuda/kernels/kernels.h"
#include "tensor/cuda/kernels/nn_kernels.h"
#include "nn_cuda.h"
#include "tensor_cuda.h"

/* From cublas_api.h (values are part of the ABI); the shared ones in
 * blas_abi.h. */
typedef void *tc__cublas_handle;
enum { CUBLAS_POINTER_MODE_HOST_ = 0 };

typedef int (*create_fn)(tc__cublas_handle *);
typedef int (*set_stream_fn)(tc__cublas_handle, cudaStream_t);
typedef int (*set_math_mode_fn)(tc__cublas_handle, int);
typedef int (*set_pointer_mode_fn)(tc__cublas_handle, int);
typedef int (*set_workspace_fn)(tc__cublas_handle, void *, size_t);
typedef int (*gemm_fn)(tc__cublas_handle, int, int, int, int, int, const void *, const void *, int,
                       int, long long, const void *, int, int, long long, const void *, void *, int,
                       int, long long, int, int, int);
typedef int (*gemm_one_fn)(tc__cublas_handle, int, int, int, int, int, const void *, const void *,
                           int, int, const void *, int, int, const void *, void *, int, int, int,
                           int);

static const char *const cublas_names[] = {"libcublas.so.13",
                                           "/usr/local/cuda/lib64/libcublas.so.13",
                                           "libcublas.so.12", "libcublas.so", NULL};
static tc__dynlib cublas_lib = {.what = "cuBLAS (libcublas)", .names = cublas_names};
static pthread_once_t syms_once = PTHREAD_ONCE_INIT;
static tc_status syms_status = TC_ERROR_NOT_SUPPORTED;
static char syms_message[512];
static create_fn p_create;
static set_stream_fn p_set_stream;
static set_math_mode_fn p_set_math_mode;
static set_pointer_mode_fn p_set_pointer_mode;
static gemm_fn p_gemm;
static gemm_one_fn p_gemm_one;
static set_workspace_fn p_set_workspace;

static _Thread_local tc__cublas_handle handles[TC_MAX_DEVICES];

static void load_syms(void)
{
    struct {
        const char *name;
        void **slot;
    } syms[] = {{"cublasCreate_v2", (void **)&p_create},
                {"cublasSetStream_v2", (void **)&p_set_stream},
                {"cublasSetMathMode", (void **)&p_set_math_mode},
                {"cublasSetPointerMode_v2", (void **)&p_set_pointer_mode},
                {"cublasGemmStridedBatchedEx", (void **)&p_gemm},
                {"cublasGemmEx", (void **)&p_gemm_one},
                {"cublasSetWorkspace_v2", (void **)&p_set_workspace}};
    syms_status = tc__dynlib_load(&cublas_lib);
    for (size_t i = 0; syms_status == TC_OK && i < sizeof syms / sizeof syms[0]; i++)
        syms_status = tc__dynlib_sym(&cublas_lib, syms[i].name, syms[i].slot);
    if (syms_status != TC_OK)
        snprintf(syms_message, sizeof syms_message, "%s", tc_last_error());
}

/* The handle of the current thread for `device` (current), bound to the
 * current stream, with host scalars and math mode `math`:
 * tc_current_blas_handle gives the handle to the program, which may have
 * changed either (PyTorch too sets the math mode on every use). TF32 is
 * chosen by the GEMM's computation type, never by the math mode. */
static tc_status handle_for(int device, int math, tc__cublas_handle *out)
{
    *out = NULL; /* written even on failure, to keep compilers calm */
    pthread_once(&syms_once, load_syms);
    if (syms_status != TC_OK)
        return tc__fail(syms_status, "%s", syms_message);
    if (!handles[device]) {
        tc__cublas_handle h = NULL;
        int rc = p_create(&h);
        if (rc != 0)
            return tc__fail(TC_ERROR_CUDA, "cublasCreate_v2 failed with status %d on cuda:%d", rc,
                            device);
        handles[device] = h;
    }
    int rc = p_set_stream(handles[device], tc__current_cuda_stream(device));
    if (rc != 0)
        return tc__fail(TC_ERROR_CUDA, "cublasSetStream_v2 failed with status %d", rc);
    rc = p_set_pointer_mode(handles[device], CUBLAS_POINTER_MODE_HOST_);
    if (rc == 0)
        rc = p_set_math_mode(handles[device], math);
    if (rc != 0)
        return tc__fail(TC_ERROR_CUDA, "cublasSetPointerMode_v2/SetMathMode failed with status %d",
                        rc);
    *out = handles[device];
    return TC_OK;
}

/* Inside an operation a watcher opened (a capture ordered by data), the
 * GEMM about to be queued may get a workspace from it that GEMMs on other
 * branches do not use (graph/cuda/graph_order.c); the next handle_for's
 * cublasSetStream puts cuBLAS's own back. */
static tc_status ordered_workspace(int device, tc__cublas_handle h)
{
    if (TC_LIKELY(tc__access_depth == 0))
        return TC_OK;
    size_t want = tc__cublas_workspace_limit(device);
    void *ws;
    if (!tc__access_workspace(device, (void *)tc__current_cuda_stream(device), want, &ws))
        return TC_OK;
    int rc = p_set_workspace(h, ws, want);
    return rc == 0 ? TC_OK
                   : tc__fail(TC_ERROR_CUDA, "cublasSetWorkspace_v2 failed with status %d", rc);
}

tc_status tc__cuda_blas_handle(void **out)
{
    int dev;
    tc__cublas_handle h;
    TC_TRY(tc__resolve_device(-1, &dev));
    TC_TRY(handle_for(dev, CUBLAS_DEFAULT_MATH_, &h));
    *out = h;
    return TC_OK;
}

/* A small float32 GEMM in one kernel of tcuda's (kernels/gemm_small.cu):
 * cuBLAS's kernels for these sizes use few blocks, or two kernels. */
static tc_status gemm_small(int device, const tc__nn_gemm *g)
{
    cudaStream_t cs = tc__current_cuda_stream(device);
    tc__k_gemm_small(cs, g);
    return tc__launch_check(cs, "gemm_small_kernel");
}

/* A GEMM of at most 16 rows against a transposed B in one kernel of
 * tcuda's (kernels/gemm_skinny.cu): decode's matrix-vector products, whose
 * time is reading B. */
static tc_status gemm_skinny(int device, const tc__nn_gemm *g, const tc__nn_fusion *f)
{
    cudaStream_t cs = tc__current_cuda_stream(device);
    tc__k_gemm_skinny(cs, tc__sm_count(device), g, f);
    return tc__launch_check(cs, "gemm_skinny_kernel");
}

tc_status tc__cuda_gemm_skinny(int device, const tc__nn_gemm *g, const tc__nn_fusion *f, bool *done)
{
    *done = false;
    /* The norm before the product only on the FMA path (up to 4 rows): the
     * tensor core path normalizing as it read was slower than a norm kernel
     * before it (GPT-2 decode at batch 8 in a graph on an H200, 2026-11-28:
     * 14,232 tokens/s against 15,213). */
    if (!tc__k_gemm_skinny_fits(g) || (f && f->ln && g->m > 4))
        return TC_OK;
    tc_device_guard gd = tc_device_guard_enter(device);
    TC_TRY(gd.status);
    tc_status st = gemm_skinny(device, g, f);
    tc_device_guard_exit(&gd);
    *done = st == TC_OK;
    return st;
}

/* A GEMM with k = 0 is C = beta * C. PyTorch does not hand it to cuBLAS
 * (an old cuBLAS left C unwritten for a strided batch with k = 0,
 * pytorch#31421), nor does tcuda: beta 1 is nothing to do, any other beta a
 * small kernel on the current stream. */
static tc_status scale_c(int device, const tc__nn_gemm *g)
{
    if (g->beta == 1)
        return TC_OK;
    cudaStream_t cs = tc__current_cuda_stream(device);
    int sms = tc__sm_count(device);
    tc__k_nn_scale(cs, sms ? sms : 80, g->c_dtype, g->c, g->batch, g->m, g->n, g->ldc, g->stride_c,
                   g->beta);
    return tc__launch_check(cs, "gemm_scale_kernel");
}

/* One cuBLAS GEMM call on the current stream (device current); cublas_gemm
 * below is what the paths call. */
static tc_status cublas_call(int device, const tc__nn_gemm *g)
{
    /* 16-bit GEMMs reduce split-K sums in float32 unless allowed otherwise
     * (tcuda/backends.h; PyTorch's allow_*_reduced_precision_reduction) */
    int math = tc__matmul_allow_reduced_reduction(g->dtype)
                   ? CUBLAS_DEFAULT_MATH_
                   : CUBLAS_DEFAULT_MATH_ | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION_;
    tc__cublas_handle h;
    TC_TRY(handle_for(device, math, &h));
    TC_TRY(ordered_workspace(device, h));
    /* float32 computation for all but float64, TF32 for float32 inputs where
     * allowed; the scalars are of the computation type (float either way) */
    bool f64 = g->dtype == TC_FLOAT64;
    int compute = f64 ? CUBLAS_COMPUTE_64F_
                  : g->dtype == TC_FLOAT32 && tc__matmul_allow_tf32()
                      ? CUBLAS_COMPUTE_32F_FAST_TF32_
                      : CUBLAS_COMPUTE_32F_;
    float af = (float)g->alpha, bf = (float)g->beta;
    const void *alpha = f64 ? (const void *)&g->alpha : (const void *)&af;
    const void *beta = f64 ? (const void *)&g->beta : (const void *)&bf;
    int type = tc__cuda_data_type(g->dtype);
    /* column-major: C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m). One GEMM
     * goes to cublasGemmEx, as PyTorch's mm does. (The strided-batched entry
     * returned status 14 for GPT-2's classifier gradient at 65,536 tokens,
     * m=50257 k=65536, read unpadded; that gradient now reaches cuBLAS in
     * padded slices, and 65,536 tokens train on an H100.) */
    int ta = g->trans_a ? CUBLAS_OP_T_ : CUBLAS_OP_N_,
        tb = g->trans_b ? CUBLAS_OP_T_ : CUBLAS_OP_N_;
    int ct = tc__cuda_data_type(g->c_dtype);
    bool one = g->batch == 1;
    int rc = one ? p_gemm_one(h, tb, ta, (int)g->n, (int)g->m, (int)g->k, alpha, g->b, type,
                              (int)g->ldb, g->a, type, (int)g->lda, beta, g->c, ct, (int)g->ldc,
                              compute, CUBLAS_GEMM_DEFAULT_)
                 : p_gemm(h, tb, ta, (int)g->n, (int)g->m, (int)g->k, alpha, g->b, type,
                          (int)g->ldb, (long long)g->stride_b, g->a, type, (int)g->lda,
                          (long long)g->stride_a, beta, g->c, ct, (int)g->ldc,
                          (long long)g->stride_c, (int)g->batch, compute, CUBLAS_GEMM_DEFAULT_);
    if (rc != 0)
        return tc__fail(
            TC_ERROR_CUDA, "%s failed with status %d (%s, m=%lld n=%lld k=%lld batch=%lld)",
            one ? "cublasGemmEx" : "cublasGemmStridedBatchedEx", rc, tc_dtype_string(g->dtype),
            (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->batch);
    return TC_OK;
}

/* ---- matrices of 2^31 elements or more --------------------------------------------- */

/* cuBLAS's kernels for aligned rows wrote out of bounds for a C of 2^31
 * elements or more: GPT-2's logits at 49,152 tokens ([49152, 50264]
 * bfloat16 rows, 2.47e9 elements) gave invalid writes (compute-sanitizer)
 * and CUBLAS_STATUS_EXECUTION_FAILED from the next call. Such a GEMM runs
 * as several, each on a slice of m whose C, and A where its rows run along
 * m, hold fewer. (Other operands that large go to cuBLAS as they are.) */
#define SPAN_MAX (((int64_t)1 << 31) - 1)

/* Elements of C, or of A, in one row of m. */
static int64_t per_row_of(const tc__nn_gemm *g)
{
    int64_t r = g->trans_a || g->lda < g->ldc ? g->ldc : g->lda;
    return r > 0 ? r : 1;
}

bool tc__gemm_spans_2g(const tc__nn_gemm *g)
{
    return g->batch == 1 && g->m > SPAN_MAX / per_row_of(g);
}

/* g's rows [i0, i0 + rows) of C (and of op(A)), as a GEMM of their own. */
static tc__nn_gemm rows_of(const tc__nn_gemm *g, int64_t i0, int64_t rows)
{
    size_t es = tc_dtype_size(g->dtype), ces = tc_dtype_size(g->c_dtype);
    tc__nn_gemm q = *g;
    q.m = rows;
    q.a = (const char *)g->a + (size_t)(g->trans_a ? i0 : i0 * g->lda) * es;
    q.c = (char *)g->c + (size_t)(i0 * g->ldc) * ces;
    return q;
}

/* g as several cuBLAS calls, each on a slice of m. */
static tc_status cublas_gemm_sliced(int device, const tc__nn_gemm *g)
{
    int64_t rows = SPAN_MAX / per_row_of(g) / 8 * 8;
    if (rows < 8)
        return tc__fail(TC_ERROR_NOT_SUPPORTED,
                        "a GEMM row of %lld elements is too wide for the GPU GEMM",
                        (long long)per_row_of(g));
    tc_status st = TC_OK;
    for (int64_t i0 = 0; i0 < g->m && st == TC_OK; i0 += rows) {
        tc__nn_gemm q = rows_of(g, i0, g->m - i0 < rows ? g->m - i0 : rows);
        st = cublas_call(device, &q);
    }
    return st;
}

/* A GEMM for cuBLAS as it is: sliced where a matrix is too large. */
static tc_status cublas_gemm(int device, const tc__nn_gemm *g)
{
    return tc__gemm_spans_2g(g) ? cublas_gemm_sliced(device, g) : cublas_call(device, g);
}

/* A large 16-bit C (one matrix) whose n is not whole 16-byte vectors:
 * dense (ldc == n), it goes through padded rows (tc__gemm_pads_rows); in
 * rows padded already (ldc whole vectors), straight into them (splits_cols). */
static bool wide_unaligned_c(const tc__nn_gemm *g)
{
    return tc_dtype_size(g->c_dtype) == 2 && g->batch == 1 && g->n % 8 && g->n > 8 &&
           g->m * g->n >= ((int64_t)1 << 22);
}

bool tc__gemm_pads_rows(const tc__nn_gemm *g) { return wide_unaligned_c(g) && g->ldc == g->n; }

/* Copies `rows` rows of `width` bytes between two pitches on stream cs. */
static tc_status copy_rows(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           int64_t rows, cudaStream_t cs)
{
    cudaError_t err = cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, (size_t)rows,
                                        cudaMemcpyDeviceToDevice, cs);
    return err == cudaSuccess ? TC_OK : tc__cuda_fail(err, "cudaMemcpy2DAsync", __FILE__, __LINE__);
}

static bool splits_cols(const tc__nn_gemm *g) { return wide_unaligned_c(g) && g->ldc % 8 == 0; }

/* g (splits_cols: C's rows whole 16-byte vectors, n not) as two
 * GEMMs: the columns up to the last whole vector, then the rest (under 8).
 * Rows padded so (tc_nn_linear's result, a buffer of gemm_padded's) take
 * cuBLAS's aligned kernels. */
static tc_status gemm_split_cols(int device, const tc__nn_gemm *g)
{
    size_t es = tc_dtype_size(g->dtype), ces = tc_dtype_size(g->c_dtype);
    int64_t head = g->n / 8 * 8;
    tc_status st = TC_OK;
    for (int i = 0; i < 2 && st == TC_OK; i++) {
        int64_t c0 = i ? head : 0;
        tc__nn_gemm p = *g;
        p.n = i ? g->n - head : head;
        p.c = (char *)g->c + (size_t)c0 * ces;
        p.b = (const char *)g->b + (size_t)(g->trans_b ? c0 * g->ldb : c0) * es;
        st = cublas_gemm(device, &p);
    }
    return st;
}

/* Whether g is worth reshaping into aligned pieces: 2^32 multiply-adds or
 * more, where the pieces' extra calls and copies cost little beside it. */
static bool large_gemm(const tc__nn_gemm *g)
{
    return (double)g->m * (double)g->n * (double)g->k >= 4294967296.0;
}

/* Is g a large 16-bit GEMM with op(A) = A^T whose rows are all whole
 * 16-byte vectors but whose m is not (linear's weight gradient from a
 * padded gradient of GPT-2's logits: m = 50257, lda 50264)? cuBLAS ran
 * that one at about 490 TFLOP/s on an H200 (8,192 tokens), where the input
 * gradient of the same size ran at about 720. Those go through
 * gemm_split_m. */
static bool splits_m(const tc__nn_gemm *g)
{
    return tc_dtype_size(g->dtype) == 2 && g->trans_a && g->batch == 1 && g->m % 8 && g->m > 8 &&
           g->lda % 8 == 0 && g->ldb % 8 == 0 && g->ldc % 8 == 0 && large_gemm(g);
}

/* g (splits_m) as two GEMMs: C's rows up to the last whole vector of m,
 * then the rest (under 8). */
static tc_status gemm_split_m(int device, const tc__nn_gemm *g)
{
    int64_t head = g->m / 8 * 8;
    tc__nn_gemm p = rows_of(g, 0, head), q = rows_of(g, head, g->m - head);
    tc_status st = cublas_gemm(device, &p);
    return st != TC_OK ? st : cublas_gemm(device, &q);
}

/* Is g a 16-bit GEMM whose operands' rows are all whole 16-byte vectors
 * but whose k is not (linear's backward from a padded gradient of GPT-2's
 * logits: k = 50257, lda 50264)? cuBLAS runs those in slow kernels: 4.8 ms
 * for [8192, 50257] @ [50257, 768] on an H200, where padded copies took
 * 1.75. Large ones with beta 0 go through gemm_split_k. */
static bool splits_k(const tc__nn_gemm *g)
{
    return tc_dtype_size(g->dtype) == 2 && g->c_dtype == g->dtype && g->batch == 1 &&
           g->beta == 0 && g->k % 8 && g->k > 8 && g->lda % 8 == 0 && g->ldb % 8 == 0 &&
           g->ldc % 8 == 0 && large_gemm(g);
}

/* g (splits_k) as two GEMMs into one float32 buffer, k up to the last whole
 * vector and then the rest (added with beta 1), then the buffer rounded
 * into C once: the float32 sum of one GEMM, in the aligned kernels. */
static tc_status gemm_split_k(int device, const tc__nn_gemm *g)
{
    cudaStream_t cs = tc__current_cuda_stream(device);
    const size_t es = 2;
    int64_t head = g->k / 8 * 8;
    void *acc = NULL;
    TC_TRY(tc__device_alloc(device, cs, (size_t)(g->m * g->n) * sizeof(float), &acc));
    tc_status st = TC_OK;
    for (int i = 0; i < 2 && st == TC_OK; i++) {
        int64_t k0 = i ? head : 0;
        tc__nn_gemm p = *g;
        p.k = i ? g->k - head : head;
        p.a = (const char *)g->a + (size_t)(g->trans_a ? k0 * g->lda : k0) * es;
        p.b = (const char *)g->b + (size_t)(g->trans_b ? k0 : k0 * g->ldb) * es;
        p.c = acc;
        p.c_dtype = TC_FLOAT32;
        p.ldc = g->n;
        p.beta = i;
        st = cublas_gemm(device, &p);
    }
    if (st == TC_OK) { /* C [m, n] at ldc from the dense buffer */
        tc__iter it = {.ndim = 2,
                       .nops = 2,
                       .numel = g->m * g->n,
                       .sizes = {g->m, g->n},
                       .strides = {{g->ldc, 1}, {g->n, 1}},
                       .data = {g->c, acc}};
        int sms = tc__sm_count(device);
        tc__k_convert(cs, sms ? sms : 80, g->c_dtype, TC_FLOAT32, &it);
        st = tc__launch_check(cs, "convert_kernel");
    }
    /* given back at once: its next user on this stream comes after the copy */
    tc_status fst = tc__device_free(acc);
    return st != TC_OK ? st : fst;
}

/* g (tc__gemm_pads_rows) through a buffer of rows padded to whole 16-byte
 * vectors: gemm_split_cols into it, then one copy of the rows into C (C
 * first goes into the buffer when beta reads it). cuBLAS, PyTorch's too,
 * has only its unaligned kernels for such rows: 3.3 ms for a [4096, 50257]
 * bfloat16 product (GPT-2's logits) that the aligned ones do in well under
 * 1. (tc_nn_linear's own result comes padded and needs no copy.) */
static tc_status gemm_padded(int device, const tc__nn_gemm *g)
{
    cudaStream_t cs = tc__current_cuda_stream(device);
    size_t es = 2, row = (size_t)g->n * es;
    int64_t npad = (g->n + 7) / 8 * 8;
    void *buf = NULL;
    TC_TRY(tc__device_alloc(device, cs, (size_t)(g->m * npad) * es, &buf));
    tc_status st = TC_OK;
    if (g->beta != 0)
        st = copy_rows(buf, (size_t)npad * es, g->c, row, row, g->m, cs);
    tc__nn_gemm p = *g;
    p.ldc = npad;
    p.c = buf;
    if (st == TC_OK)
        st = gemm_split_cols(device, &p);
    if (st == TC_OK)
        st = copy_rows(g->c, row, buf, (size_t)npad * es, row, g->m, cs);
    /* given back at once: its next user on this stream comes after the copy */
    tc_status fst = tc__device_free(buf);
    return st != TC_OK ? st : fst;
}

/* ---- 16-bit operands whose rows are not whole 16-byte vectors ------------------------ */

/* An operand as it lies in memory: `rows` rows of `cols` elements, `ld`
 * apart; k_cols when its columns run along k. */
typedef struct stored {
    const char *p;
    int64_t rows, cols, ld;
    bool k_cols;
} stored;

static stored stored_a(const tc__nn_gemm *g)
{
    return g->trans_a ? (stored){g->a, g->k, g->m, g->lda, false}
                      : (stored){g->a, g->m, g->k, g->lda, true};
}

static stored stored_b(const tc__nn_gemm *g)
{
    return g->trans_b ? (stored){g->b, g->n, g->k, g->ldb, true}
                      : (stored){g->b, g->k, g->n, g->ldb, false};
}

/* The most bytes one padded slice of an operand takes. */
#define PAD_SLICE_BYTES ((int64_t)256 << 20)

bool tc__gemm_pads_operands(const tc__nn_gemm *g)
{
    if (tc_dtype_size(g->dtype) != 2 || g->batch != 1 || g->ldc % 8 || tc__gemm_pads_rows(g))
        return false;
    bool ua = g->lda % 8 != 0, ub = g->ldb % 8 != 0;
    if (ua == ub) /* neither, or both: cuBLAS as it is */
        return false;
    stored x = ua ? stored_a(g) : stored_b(g);
    return x.rows * x.cols >= ((int64_t)1 << 22) && g->m * g->n >= ((int64_t)1 << 16) &&
           large_gemm(g);
}

static tc_status zero_rows(void *dst, size_t pitch, size_t width, int64_t rows, cudaStream_t cs)
{
    cudaError_t err = cudaMemset2DAsync(dst, pitch, 0, width, (size_t)rows, cs);
    return err == cudaSuccess ? TC_OK : tc__cuda_fail(err, "cudaMemset2DAsync", __FILE__, __LINE__);
}

/* g (tc__gemm_pads_operands) with its unaligned operand X copied into rows
 * padded to whole vectors, a slice of m (X = A) or n (X = B) at a time, each
 * slice one GEMM into its own part of C: cuBLAS has only its unaligned
 * kernels for X as it is. GPT-2's classifier gradients read the [tokens,
 * 50257] logits' gradient so: 4.5 and 4.3 ms at 8,192 tokens in those
 * kernels, where the aligned ones take under 1. Where X's rows run along k,
 * k goes up to whole vectors, with zeros past it in X and in a padded copy of
 * the other operand. */
static tc_status gemm_padded_operands(int device, const tc__nn_gemm *g)
{
    cudaStream_t cs = tc__current_cuda_stream(device);
    const size_t es = 2, ces = tc_dtype_size(g->c_dtype);
    bool xa = g->lda % 8 != 0;
    stored x = xa ? stored_a(g) : stored_b(g), y = xa ? stored_b(g) : stored_a(g);
    int64_t kp = x.k_cols ? (g->k + 7) / 8 * 8 : g->k;
    tc__nn_gemm p = *g;
    p.k = kp;
    void *ybuf = NULL, *xbuf = NULL;
    tc_status st = TC_OK;
    if (kp != g->k) { /* the other operand with zeros past k */
        int64_t yr = y.k_cols ? y.rows : kp, yc = y.k_cols ? kp : y.cols;
        st = tc__device_alloc(device, cs, (size_t)(yr * yc) * es, &ybuf);
        if (st == TC_OK && y.k_cols)
            st = zero_rows((char *)ybuf + y.cols * es, yc * es, (kp - y.cols) * es, yr, cs);
        if (st == TC_OK && !y.k_cols)
            st = zero_rows((char *)ybuf + y.rows * yc * es, yc * es, yc * es, kp - y.rows, cs);
        if (st == TC_OK)
            st = copy_rows(ybuf, yc * es, y.p, y.ld * es, y.cols * es, y.rows, cs);
        if (xa)
            p.b = ybuf, p.ldb = yc;
        else
            p.a = ybuf, p.lda = yc;
    }
    /* X's slices: rows of X where its columns run along k, else columns */
    int64_t span = x.k_cols ? x.rows : x.cols, unit = x.k_cols ? kp : x.rows;
    int64_t per = PAD_SLICE_BYTES / (unit * (int64_t)es) / 8 * 8;
    per = per < 8 ? 8 : per > span ? (span + 7) / 8 * 8 : per;
    if (st == TC_OK)
        st = tc__device_alloc(device, cs, (size_t)(per * unit) * es, &xbuf);
    for (int64_t s0 = 0; s0 < span && st == TC_OK; s0 += per) {
        int64_t w = span - s0 < per ? span - s0 : per, ld;
        if (x.k_cols) { /* w rows of kp, zeros past k */
            ld = kp;
            if (kp != x.cols)
                st = zero_rows((char *)xbuf + x.cols * es, kp * es, (kp - x.cols) * es, w, cs);
            if (st == TC_OK)
                st = copy_rows(xbuf, kp * es, x.p + s0 * x.ld * es, x.ld * es, x.cols * es, w, cs);
        } else { /* w columns of every row, rows of whole vectors */
            ld = (w + 7) / 8 * 8;
            st = copy_rows(xbuf, ld * es, x.p + s0 * es, x.ld * es, w * es, x.rows, cs);
        }
        tc__nn_gemm q = p;
        if (xa)
            q.a = xbuf, q.lda = ld, q.m = w, q.c = (char *)g->c + s0 * g->ldc * ces;
        else
            q.b = xbuf, q.ldb = ld, q.n = w, q.c = (char *)g->c + s0 * ces;
        if (st == TC_OK)
            st = cublas_gemm(device, &q);
    }
    /* given back at once: their next users on this stream come after the GEMMs */
    tc_status fx = xbuf ? tc__device_free(xbuf) : TC_OK;
    tc_status fy = ybuf ? tc__device_free(ybuf) : TC_OK;
    return st != TC_OK ? st : fx != TC_OK ? fx : fy;
}

tc_status tc__cuda_gemm(int device, const tc__nn_gemm *g)
{
    int64_t most = g->m > g->n ? g->m : g->n;
    most = most > g->k ? most : g->k;
    most = most > g->batch ? most : g->batch;
    if (most > INT32_MAX || g->lda > INT32_MAX || g->ldb > INT32_MAX || g->ldc > INT32_MAX)
        return tc__fail(TC_ERROR_NOT_SUPPORTED, "sizes or leading dimensions above 2^31-1 are not "
                                                "supported by the GPU GEMM");
    tc_device_guard gd = tc_device_guard_enter(device);
    TC_TRY(gd.status);
    tc_status st = g->k == 0                   ? scale_c(device, g)
                   : tc__k_gemm_skinny_fits(g) ? gemm_skinny(device, g, NULL)
                   : tc__k_gemm_small_fits(g)  ? gemm_small(device, g)
                   : tc__gemm_pads_rows(g)     ? gemm_padded(device, g)
                   : splits_cols(g)            ? gemm_split_cols(device, g)
                   : splits_m(g)               ? gemm_split_m(device, g)
                   : splits_k(g)               ? gemm_split_k(device, g)
                   : tc__gemm_pads_operands(g) ? gemm_padded_operands(device, g)
                                               : cublas_gemm(device, g);
    tc_device_guard_exit(&gd);
    return st;
}

tc_status tc__cuda_matmul(int device, tc_dtype dt, const void *a, const void *b, void *c,
                          int64_t batch, int64_t m, int64_t n, int64_t k, int64_t sa, int64_t sb)
{
    tc__nn_operand ao = {.data = a, .ld = k, .bstride = sa},
                   bo = {.data = b, .ld = n, .bstride = sb};
    tc__nn_gemm g = tc__nn_gemm_of(dt, batch, m, n, k, ao, bo, c);
    return tc__cuda_gemm(device, &g);
}
