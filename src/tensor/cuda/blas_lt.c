/* cuBLASLt, loaded at run time: linear's GEMM with its bias as one
 * cublasLtMatmul with the bias epilogue (nn_internal.h's gemm_bias), as
 * PyTorch's addmm does, instead of a copy kernel and a GEMM with beta = 1;
 * and linear's weight gradient with its bias gradient (gemm_bgrad) as one
 * with the BGRADB epilogue, as llm.c does, instead of a GEMM and a column
 * sum. BGRADB sums cuBLASLt's B (our op(A)) over k into a vector as long as
 * D's columns (our m): our bias gradient, written (never accumulated) in
 * D's type, while D itself may be C + the product (beta 1). And a linear
 * with the tanh gelu after it (gemm_gelu: GELU_AUX_BIAS, the pre-activation
 * kept in the aux matrix), as llm.c's gelu fusion does. Not its backward
 * (DGELU_BGRAD): on an H100, at GPT-2's [16384, 3072] bfloat16, cuBLASLt
 * ran it as the GEMM and then a separate epilogue kernel of 348 us
 * (profile.sh train, 2026-11-27), where tcuda's gelu backward kernel took
 * 57 us at half that size (bench_nn_backward). And a linear with a
 * residual added after it (gemm_fused: the residual read as C with beta 1,
 * D a separate output, the bias epilogue). GEMMs of at most 16 rows
 * (decode's matrix-vector products) go to tcuda's own kernel first, bias
 * and gelu included (blas.c's tc__cuda_gemm_skinny).
 *
 * As in blas.c, only the entry points used are declared here, so the build
 * needs no cuBLAS header or library. Whatever cuBLASLt does not take is a
 * refusal, never an error: the library missing, a shape, dtype or layout
 * outside what this file hands it, no algorithm from the heuristic, or an
 * error from any cuBLASLt call. A refusal queues nothing and leaves C as it
 * was, and tensor_nn.c takes the copy + GEMM path, which writes all of C.
 *
 * The mapping is tc__cuda_gemm's: row-major C = op(A) op(B) is column-major
 * C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m), so cuBLASLt's A is our B,
 * its B our A, and its D has n rows. The bias epilogue adds a vector as long
 * as D's rows to every column of D, that is our bias [n] to every row of the
 * row-major output. Its type is left at the default, D's type, which is
 * linear's dtype (PyTorch leaves it too). Computation in float32 (float64
 * for float64), as tcuda/backends.h's switches say: float32 with TF32
 * (CUBLAS_COMPUTE_32F_FAST_TF32) where allow_tf32 holds, and for 16-bit
 * outputs whose reduced-precision reduction is forbidden the heuristic may
 * only pick split-K schemes that reduce in float32, so the result is
 * rounded once; allowed (PyTorch's default), any scheme.
 *
 * Per thread and device, a cuBLASLt handle (as blas.c's cuBLAS handles), and
 * per thread a table of LT_PLANS plans (descriptor, layouts, the algorithm
 * the heuristic chose, or a refusal) keyed by all the choice depends on:
 * device, dtype, sizes, transposes, leading dimensions, the precision
 * switches (a change makes new plans) and the alignment of the four
 * pointers (cuBLASLt's algorithms are chosen for an alignment).
 * Repeated shapes, a decode step's, make no heuristic query after the first
 * call. Plans are the thread's own because the bias pointer is set on the
 * descriptor at each call. Handles and plans live until the process ends,
 * as blas.c's handles do.
 *
 * The workspace (at most what PyTorch allows: 1 MiB, 4 MiB on a compute
 * capability 8.x GPU with at least 24 GiB, 32 MiB from 9.0 on, the sizes of
 * its CUBLASLT_WORKSPACE_SIZE default, pytorch#120925) is taken from the
 * caching allocator on the current stream for each call, only as many bytes
 * as the chosen algorithm needs (often none), and given back right after it
 * is queued, as a temporary tensor is: stream order makes its reuse safe,
 * and during graph capture it comes from the graph's private pool, so a
 * replay never shares it with work outside the graph. A cuBLASLt handle is
 * not created while a capture is underway (its creation may make calls a
 * capture forbids): the first linear of a thread on a device during capture
 * takes the copy + GEMM path. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_abi.h"
#include "tensor/backends_internal.h"
#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "runtime/cuda/capture.h"
#include "nn_cuda.h"
#include "nn_layers_cuda.h"
#include "tcuda/device.h"

/* cuBLASLt's values (part of its ABI), from the cuBLAS documentation,
 * docs.nvidia.com/cuda/cublas/ (cuBLASLt datatypes:
 * cublasLtMatmulDescAttributes_t, cublasLtEpilogue_t,
 * cublasLtMatmulPreferenceAttributes_t, cublasLtReductionScheme_t,
 * cublasLtMatmulHeuristicResult_t, cublasLtMatmulAlgo_t), with the numbers
 * as NVIDIA's nvmath-python bindings list them
 * (docs.nvidia.com/cuda/nvmath-python/latest/bindings/generated/
 * nvmath.bindings.cublasLt.{MatmulDescAttribute, Epilogue,
 * MatmulPreferenceAttribute}.html), checked against CUDA 13.0's cublasLt.h.
 * The type each attribute takes is in its comment. */
enum {
    LT_DESC_TRANSA = 3,                /* int32_t, a cublasOperation_t */
    LT_DESC_TRANSB = 4,                /* int32_t, a cublasOperation_t */
    LT_DESC_EPILOGUE = 7,              /* uint32_t, a cublasLtEpilogue_t */
    LT_DESC_BIAS_POINTER = 8,          /* const void *; its type: BIAS_DATA_TYPE, default D's */
    LT_DESC_EPILOGUE_AUX_POINTER = 11, /* void *; its type: AUX_DATA_TYPE, default D's */
    LT_DESC_EPILOGUE_AUX_LD = 12,      /* int64_t, the aux matrix's leading dimension */
};
/* GELU_AUX_BIAS: D = gelu(AB + bias) with AB + bias into aux; cuBLASLt's
 * gelu is the tanh approximation. */
enum { LT_EPILOGUE_BIAS = 4, LT_EPILOGUE_GELU_AUX_BIAS = 164, LT_EPILOGUE_BGRADB = 512 };
enum {
    LT_PREF_MAX_WORKSPACE_BYTES = 1,   /* uint64_t, default 0 */
    LT_PREF_REDUCTION_SCHEME_MASK = 3, /* uint32_t, default all schemes */
    LT_PREF_MIN_ALIGNMENT_A_BYTES = 5, /* uint32_t each, default 256 */
    LT_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    LT_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    LT_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
/* cublasLtReductionScheme_t: split-K partial sums kept in the computation
 * type (2); the others, INPLACE (1) and OUTPUT_TYPE (4), reduce in the output
 * type, the reduced precision of a 16-bit output. No scheme is needed by
 * algorithms without split-K, which every mask admits. */
enum { LT_REDUCTION_SCHEME_COMPUTE_TYPE = 2 };

typedef struct lt_algo { /* cublasLtMatmulAlgo_t */
    uint64_t data[8];
} lt_algo;

typedef struct lt_heuristic { /* cublasLtMatmulHeuristicResult_t */
    lt_algo algo;
    size_t workspace_size;
    int state; /* a cublasStatus_t */
    float waves_count;
    int reserved[4];
} lt_heuristic;

typedef int (*lt_create_fn)(void **);
typedef size_t (*lt_version_fn)(void);
typedef int (*lt_desc_create_fn)(void **, int, int);
typedef int (*lt_destroy_fn)(void *);
typedef int (*lt_set_fn)(void *, int, const void *, size_t);
typedef int (*lt_layout_create_fn)(void **, int, uint64_t, uint64_t, int64_t);
typedef int (*lt_pref_create_fn)(void **);
typedef int (*lt_heuristic_fn)(void *, void *, void *, void *, void *, void *, void *, int, void *,
                               int *);
typedef int (*lt_matmul_fn)(void *, void *, const void *, const void *, void *, const void *,
                            void *, const void *, const void *, void *, void *, void *,
                            const void *, void *, size_t, cudaStream_t);

static const char *const lt_names[] = {"libcublasLt.so.13",
                                       "/usr/local/cuda/lib64/libcublasLt.so.13",
                                       "libcublasLt.so.12", "libcublasLt.so", NULL};
static tc__dynlib lt_lib = {.what = "cuBLASLt (libcublasLt)", .names = lt_names};
static pthread_once_t syms_once = PTHREAD_ONCE_INIT;
static bool syms_ok;
static size_t lt_version; /* cublasLtGetVersion: major * 10000 + minor * 100 + patch */
static lt_create_fn p_create;
static lt_version_fn p_version;
static lt_desc_create_fn p_desc_create;
static lt_destroy_fn p_desc_destroy, p_layout_destroy, p_pref_destroy;
static lt_set_fn p_desc_set, p_pref_set;
static lt_layout_create_fn p_layout_create;
static lt_pref_create_fn p_pref_create;
static lt_heuristic_fn p_heuristic;
static lt_matmul_fn p_matmul;

static void load_syms(void)
{
    struct {
        const char *name;
        void **slot;
    } syms[] = {{"cublasLtCreate", (void **)&p_create},
                {"cublasLtGetVersion", (void **)&p_version},
                {"cublasLtMatmulDescCreate", (void **)&p_desc_create},
                {"cublasLtMatmulDescDestroy", (void **)&p_desc_destroy},
                {"cublasLtMatmulDescSetAttribute", (void **)&p_desc_set},
                {"cublasLtMatrixLayoutCreate", (void **)&p_layout_create},
                {"cublasLtMatrixLayoutDestroy", (void **)&p_layout_destroy},
                {"cublasLtMatmulPreferenceCreate", (void **)&p_pref_create},
                {"cublasLtMatmulPreferenceDestroy", (void **)&p_pref_destroy},
                {"cublasLtMatmulPreferenceSetAttribute", (void **)&p_pref_set},
                {"cublasLtMatmulAlgoGetHeuristic", (void **)&p_heuristic},
                {"cublasLtMatmul", (void **)&p_matmul}};
    /* missing is a refusal, not an error: the message tc__dynlib leaves is
     * the thread's last one only until its next failure */
    tc_status st = tc__dynlib_load(&lt_lib);
    for (size_t i = 0; st == TC_OK && i < sizeof syms / sizeof syms[0]; i++)
        st = tc__dynlib_sym(&lt_lib, syms[i].name, syms[i].slot);
    if (st == TC_OK)
        lt_version = p_version();
    syms_ok = st == TC_OK;
}

/* ---- plans -------------------------------------------------------------------------- */

#define LT_PLANS 64

typedef struct lt_key {
    int device, dtype, trans_a, trans_b;
    int tf32, reduced; /* the switches of tcuda/backends.h as the plan was made */
    int epilogue;      /* one of LT_EPILOGUE_* */
    int64_t m, n, k, lda, ldb;
    uint32_t align[5]; /* A, B, C (also D), the bias and aux, in bytes, at most 256 */
} lt_key;

typedef struct lt_plan {
    lt_key key;
    bool used, refused;
    void *desc, *la, *lb, *lc; /* cuBLASLt's A (our B), B (our A), C and D */
    lt_algo algo;
    size_t workspace; /* bytes the algorithm needs */
} lt_plan;

typedef struct lt_thread {
    void *handles[TC_MAX_DEVICES];
    lt_plan plans[LT_PLANS];
    int next; /* the plan a new one replaces when all are used */
} lt_thread;

static _Thread_local lt_thread *mine;

/* The largest power of two up to 256 that divides the address, as PyTorch's
 * _getAlignment: the alignment an algorithm may count on. */
static uint32_t align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al)
        al /= 2;
    return al;
}

static void drop_plan(lt_plan *p)
{
    if (p->desc)
        (void)p_desc_destroy(p->desc);
    void *layouts[3] = {p->la, p->lb, p->lc};
    for (int i = 0; i < 3; i++)
        if (layouts[i])
            (void)p_layout_destroy(layouts[i]);
    memset(p, 0, sizeof *p);
}

/* The most workspace an algorithm may ask for on `device` (current), as
 * PyTorch sizes its cuBLASLt workspace by default. */
size_t tc__cublas_workspace_limit(int device)
{
    static size_t limits[TC_MAX_DEVICES];
    size_t v = __atomic_load_n(&limits[device], __ATOMIC_RELAXED);
    if (v)
        return v;
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
        (void)cudaGetLastError();
        major = 0;
    }
    size_t total = 0;
    struct cudaDeviceProp prop;
    if (major == 8) {
        if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
            total = prop.totalGlobalMem;
        else
            (void)cudaGetLastError();
    }
    v = major >= 9                                ? (size_t)32 << 20
        : major == 8 && total >= (size_t)24 << 30 ? (size_t)4 << 20
                                                  : (size_t)1 << 20;
    __atomic_store_n(&limits[device], v, __ATOMIC_RELAXED);
    return v;
}

/* cuBLASLt's layout of one of our operands: the column-major matrix it
 * stores is rows x cols with leading dimension ld. */
static int layout(void **out, tc_dtype dt, int64_t rows, int64_t cols, int64_t ld)
{
    return p_layout_create(out, tc__cuda_data_type(dt), (uint64_t)rows, (uint64_t)cols, ld);
}

/* Fills plan p for key (descriptor, layouts, the heuristic's algorithm), or
 * marks it refused. g and bias give the pointers whose alignment is in the
 * key (the heuristic reads the bias pointer for it). */
static void build_plan(void *h, lt_plan *p, const lt_key *key, const tc__nn_gemm *g,
                       const void *bias, const void *aux)
{
    memset(p, 0, sizeof *p);
    p->key = *key;
    p->used = true;
    p->refused = true; /* until the end */
    tc_dtype dt = g->dtype;
    bool f64 = dt == TC_FLOAT64, half = dt == TC_FLOAT16 || dt == TC_BFLOAT16;
    int32_t ta = g->trans_b ? CUBLAS_OP_T_ : CUBLAS_OP_N_; /* cuBLASLt's A is our B */
    int32_t tb = g->trans_a ? CUBLAS_OP_T_ : CUBLAS_OP_N_;
    uint32_t epilogue = (uint32_t)key->epilogue;
    int compute = f64         ? CUBLAS_COMPUTE_64F_
                  : key->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32_
                              : CUBLAS_COMPUTE_32F_;
    int rc = p_desc_create(&p->desc, compute, f64 ? CUDA_R_64F_ : CUDA_R_32F_);
    if (rc == 0)
        rc = p_desc_set(p->desc, LT_DESC_TRANSA, &ta, sizeof ta);
    if (rc == 0)
        rc = p_desc_set(p->desc, LT_DESC_TRANSB, &tb, sizeof tb);
    if (rc == 0)
        rc = p_desc_set(p->desc, LT_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    if (rc == 0)
        rc = p_desc_set(p->desc, LT_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (rc == 0 && aux) { /* aux is dense like C: n rows (cuBLASLt's) of each of m columns */
        int64_t ld = g->n;
        rc = p_desc_set(p->desc, LT_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
        if (rc == 0)
            rc = p_desc_set(p->desc, LT_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
    }
    /* op(B)^T is n x k: stored n x k (ld ldb), or k x n when trans_b */
    if (rc == 0)
        rc = g->trans_b ? layout(&p->la, dt, g->k, g->n, g->ldb)
                        : layout(&p->la, dt, g->n, g->k, g->ldb);
    /* op(A)^T is k x m: stored k x m (ld lda), or m x k when trans_a */
    if (rc == 0)
        rc = g->trans_a ? layout(&p->lb, dt, g->m, g->k, g->lda)
                        : layout(&p->lb, dt, g->k, g->m, g->lda);
    if (rc == 0)
        rc = layout(&p->lc, dt, g->n, g->m, g->ldc);
    void *pref = NULL;
    if (rc == 0)
        rc = p_pref_create(&pref);
    uint64_t max_ws = tc__cublas_workspace_limit(key->device);
    if (rc == 0)
        rc = p_pref_set(pref, LT_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws);
    const int align_attr[4] = {LT_PREF_MIN_ALIGNMENT_A_BYTES, LT_PREF_MIN_ALIGNMENT_B_BYTES,
                               LT_PREF_MIN_ALIGNMENT_C_BYTES, LT_PREF_MIN_ALIGNMENT_D_BYTES};
    /* cuBLASLt's A is our B; C and D are both our C */
    const uint32_t align[4] = {key->align[1], key->align[0], key->align[2], key->align[2]};
    for (int i = 0; rc == 0 && i < 4; i++)
        rc = p_pref_set(pref, align_attr[i], &align[i], sizeof align[i]);
    uint32_t mask = LT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (rc == 0 && half && !key->reduced)
        rc = p_pref_set(pref, LT_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask);
    /* room beyond one result, in case a later cuBLASLt grows the struct */
    union {
        lt_heuristic r;
        unsigned char room[512];
    } res;
    memset(&res, 0, sizeof res);
    int found = 0;
    if (rc == 0)
        rc = p_heuristic(h, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found);
    if (pref)
        (void)p_pref_destroy(pref);
    if (rc == 0 && found >= 1 && res.r.state == CUBLAS_STATUS_SUCCESS_ &&
        res.r.workspace_size <= max_ws) {
        p->algo = res.r.algo;
        p->workspace = res.r.workspace_size;
        p->refused = false;
        return;
    }
    /* keep the key, so that the shape is refused without asking again */
    drop_plan(p);
    p->key = *key;
    p->used = true;
    p->refused = true;
}

/* The plan for key, made on first use (replacing the oldest when the table
 * is full). */
static lt_plan *plan_for(lt_thread *t, void *h, const lt_key *key, const tc__nn_gemm *g,
                         const void *bias, const void *aux)
{
    for (int i = 0; i < LT_PLANS; i++)
        if (t->plans[i].used && memcmp(&t->plans[i].key, key, sizeof *key) == 0)
            return &t->plans[i];
    lt_plan *p = &t->plans[t->next];
    t->next = (t->next + 1) % LT_PLANS;
    drop_plan(p);
    build_plan(h, p, key, g, bias, aux);
    return p;
}

/* ---- the call ----------------------------------------------------------------------- */

/* What this file hands cuBLASLt: one GEMM of a floating dtype with a dense
 * output (ldc == n: cuBLASLt once left the bias off columns of a D whose
 * leading dimension exceeded its rows, github.com/dfyz/cublaslt-bias-epilogue;
 * linear's output is always dense) and sizes within int. Before cuBLASLt
 * 12.1, 16-bit operands must be dense too (PyTorch's "leading dim >> rows"
 * guard, test_corner_cases_of_cublasltmatmul). */
static bool eligible(const tc__nn_gemm *g, const void *bias, int epilogue)
{
    tc_dtype dt = g->dtype;
    bool half = dt == TC_FLOAT16 || dt == TC_BFLOAT16;
    bool beta_ok = g->beta == 0 || (epilogue == LT_EPILOGUE_BGRADB && g->beta == 1);
    if (!bias || g->batch != 1 || g->alpha != 1 || !beta_ok || g->c_dtype != dt ||
        !(half || dt == TC_FLOAT32 || dt == TC_FLOAT64) || !g->a || !g->b || !g->c)
        return false;
    if (g->m < 1 || g->n < 1 || g->k < 1 || g->m > INT32_MAX || g->n > INT32_MAX ||
        g->k > INT32_MAX || g->lda > INT32_MAX || g->ldb > INT32_MAX || g->ldc != g->n)
        return false;
    /* blas.c pads the rows or the operands: faster than the unaligned kernels */
    if (tc__gemm_pads_rows(g) || tc__gemm_pads_operands(g) || tc__gemm_spans_2g(g))
        return false;
    if (half && lt_version < 120100) {
        int64_t rows_b = g->trans_b ? g->k : g->n, rows_a = g->trans_a ? g->m : g->k;
        if (g->ldb != rows_b || g->lda != rows_a)
            return false;
    }
    return true;
}

/* Is a graph capture underway that the handle's creation could disturb? */
static bool capturing(cudaStream_t cs)
{
    enum cudaStreamCaptureStatus s = cudaStreamCaptureStatusNone;
    if (tc__capturing())
        return true;
    if (cudaStreamIsCapturing(cs, &s) != cudaSuccess) {
        (void)cudaGetLastError();
        return true;
    }
    return s != cudaStreamCaptureStatusNone;
}

/* The thread's state and its handle for `device` (current); NULL to refuse. */
static void *handle_for(int device, cudaStream_t cs)
{
    if (!mine) {
        if (capturing(cs))
            return NULL;
        mine = calloc(1, sizeof *mine);
        if (!mine)
            return NULL;
    }
    if (!mine->handles[device]) {
        void *h = NULL;
        if (capturing(cs) || p_create(&h) != 0 || !h)
            return NULL;
        mine->handles[device] = h;
    }
    return mine->handles[device];
}

/* One cublasLtMatmul on the current stream with `epilogue` (its vector:
 * bias, read or written; its matrix: aux, written, NULL for none),
 * or a refusal. beta is g's (0 or 1), or 1 with c_in: then C is read from
 * c_in (C's layout) and D written to g's c. */
static tc_status run(int device, const tc__nn_gemm *g, const void *bias, const void *aux,
                     const void *c_in, int epilogue, bool *fused)
{
    cudaStream_t cs = tc__current_cuda_stream(device);
    void *h = handle_for(device, cs);
    if (!h)
        return TC_OK;
    lt_key key;
    memset(&key, 0, sizeof key); /* padding too: keys compare with memcmp */
    key.device = device;
    key.dtype = (int)g->dtype;
    key.trans_a = g->trans_a;
    key.trans_b = g->trans_b;
    key.epilogue = epilogue;
    key.tf32 = g->dtype == TC_FLOAT32 && tc__matmul_allow_tf32();
    key.reduced = tc__matmul_allow_reduced_reduction(g->dtype);
    key.m = g->m, key.n = g->n, key.k = g->k, key.lda = g->lda, key.ldb = g->ldb;
    key.align[0] = align_of(g->a);
    key.align[1] = align_of(g->b);
    key.align[2] = align_of(g->c);
    if (c_in && align_of(c_in) < key.align[2])
        key.align[2] = align_of(c_in); /* C's alignment is the lesser of the two */
    key.align[3] = align_of(bias);
    key.align[4] = aux ? align_of(aux) : 0;
    lt_plan *p = plan_for(mine, h, &key, g, bias, aux);
    if (p->refused || p_desc_set(p->desc, LT_DESC_BIAS_POINTER, &bias, sizeof bias) != 0 ||
        (aux && p_desc_set(p->desc, LT_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux) != 0))
        return TC_OK;
    void *ws = NULL;
    if (p->workspace && tc__device_alloc(device, cs, p->workspace, &ws) != TC_OK)
        return TC_OK; /* no memory for it: the copy + GEMM path needs none */
    float one_f = 1, beta_f = c_in ? 1.0f : (float)g->beta;
    double one_d = 1, beta_d = c_in ? 1.0 : g->beta;
    bool f64 = g->dtype == TC_FLOAT64;
    const void *alpha = f64 ? (const void *)&one_d : (const void *)&one_f;
    const void *beta = f64 ? (const void *)&beta_d : (const void *)&beta_f;
    /* beta 0: C is not read; D is C unless c_in is given */
    int rc = p_matmul(h, p->desc, alpha, g->b, p->la, g->a, p->lb, beta, c_in ? c_in : g->c, p->lc,
                      g->c, p->lc, &p->algo, ws, p->workspace, cs);
    /* given back at once: the next user on this stream comes after the matmul */
    tc_status st = tc__device_free(ws);
    if (rc != 0) {
        p->refused = true; /* not asked again: the copy + GEMM path from now on */
        return st;
    }
    *fused = true;
    return st;
}

/* The gelu epilogue: 16-bit only, beta 0, aux rows of whole 16-byte
 * vectors (cuBLASLt asks the aux leading dimension to be a multiple of 8).
 * float32 keeps the ops apart, as PyTorch runs them, so that its results
 * stay PyTorch's (the backward epilogue's landed some 5e-6 away on an H200,
 * past float32's tolerance), while in 16 bits the rounding to the dtype
 * hides such differences; float64 has no gelu epilogue. */
static bool gelu_eligible(const tc__nn_gemm *g, const void *vec, const void *aux, int epilogue)
{
    return (g->dtype == TC_FLOAT16 || g->dtype == TC_BFLOAT16) && g->beta == 0 && aux &&
           g->n % 8 == 0 && (uintptr_t)aux % 16 == 0 && eligible(g, vec, epilogue);
}

/* One matmul with `epilogue` where cuBLASLt is there and takes g (its
 * vector vec; aux, for the gelu epilogue; c_in: C read from there with
 * beta 1, the bias epilogue's only), else a refusal. */
static tc_status lt_call(int device, const tc__nn_gemm *g, const void *vec, const void *aux,
                         const void *c_in, int epilogue, bool *fused)
{
    *fused = false;
    pthread_once(&syms_once, load_syms);
    bool gelu = epilogue == LT_EPILOGUE_GELU_AUX_BIAS;
    if (!syms_ok || !(gelu ? gelu_eligible(g, vec, aux, epilogue) : eligible(g, vec, epilogue)))
        return TC_OK;
    tc_device_guard gd = tc_device_guard_enter(device);
    TC_TRY(gd.status);
    tc_status st = run(device, g, vec, aux, c_in, epilogue, fused);
    tc_device_guard_exit(&gd);
    return st;
}

tc_status tc__cuda_gemm_bias(int device, const tc__nn_gemm *g, const void *bias, bool *fused)
{
    const tc__nn_fusion f = {.bias = bias};
    TC_TRY(tc__cuda_gemm_skinny(device, g, &f, fused));
    return *fused ? TC_OK : lt_call(device, g, bias, NULL, NULL, LT_EPILOGUE_BIAS, fused);
}

/* Not float16 from compute capability 9.0: there cuBLASLt runs float16's
 * BGRADB only on an older family of kernels (its heuristic's algorithm
 * 39), where float16's plain GEMM and bfloat16's BGRADB take the Hopper
 * ones (66). On an H100 at GPT-2's weight gradients over 8,192 rows
 * (2026-11-28, the heuristic's first eight algorithms timed), float16's
 * BGRADB took 107.6 us as the heuristic chose it (95.5, the best of the
 * eight) for a [768, 3072] weight and 106.6 for [3072, 768]; its GEMM
 * alone 61.9 and 60.3. So the GEMM and a column sum (reduce.cu's split
 * over the rows) should come out ahead. */
tc_status tc__cuda_gemm_bgrad(int device, const tc__nn_gemm *g, void *bias_grad, bool *fused)
{
    if (g->dtype == TC_FLOAT16 && tc__cc_major(device) >= 9) {
        *fused = false;
        return TC_OK;
    }
    return lt_call(device, g, bias_grad, NULL, NULL, LT_EPILOGUE_BGRADB, fused);
}

/* float32 keeps the ops apart here too (gelu_eligible says why). */
tc_status tc__cuda_gemm_gelu(int device, const tc__nn_gemm *g, const void *bias, void *aux,
                             bool *fused)
{
    *fused = false;
    if (g->dtype == TC_FLOAT16 || g->dtype == TC_BFLOAT16)
        TC_TRY(tc__cuda_gemm_skinny(
            device, g, &(tc__nn_fusion){.bias = bias, .aux = aux, .gelu = true}, fused));
    return *fused ? TC_OK : lt_call(device, g, bias, aux, NULL, LT_EPILOGUE_GELU_AUX_BIAS, fused);
}

/* The skinny kernel first (a norm before the product, a residual after it:
 * the norm's weight and bias read 16 bytes at a time); else a residual
 * with a bias and nothing else is cuBLASLt's C, read with beta 1 and the
 * bias epilogue: D = A B + C + bias in one matmul. The norm goes into the
 * kernel at up to 4 rows only (blas.c's tc__cuda_gemm_skinny says why). */
tc_status tc__cuda_gemm_fused(int device, const tc__nn_gemm *g, const tc__nn_fusion *f, bool *fused)
{
    *fused = false;
    if (f->ln && ((uintptr_t)f->ln_weight % 16 != 0 || (uintptr_t)f->ln_bias % 16 != 0))
        return TC_OK;
    TC_TRY(tc__cuda_gemm_skinny(device, g, f, fused));
    if (*fused || f->ln || f->gelu || f->aux || !f->bias || !f->residual)
        return TC_OK;
    return lt_call(device, g, f->bias, NULL, f->residual, LT_EPILOGUE_BIAS, fused);
}
