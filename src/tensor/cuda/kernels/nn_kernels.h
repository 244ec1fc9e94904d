/* C launchers of the nn kernels, called by nn_cuda.c and blas.c: the row
 * kernels (rows.cu), cross_entropy (loss.cu), attention (attention.cu) and
 * its backward (attention_backward.cu), the backward kernels (backward.cu) and
 * the GEMMs tcuda computes without cuBLAS (gemm_small.cu, gemm_skinny.cu,
 * gemm_scale.cu).
 * As the other launchers (kernels.h), each queues its kernels on `stream` of
 * the current device and returns at once; the caller runs tc__launch_check
 * right after. `sms` is the device's multiprocessor count. Not installed. */
#ifndef TCUDA_NN_KERNELS_H
#define TCUDA_NN_KERNELS_H

#include <cuda_runtime_api.h>

#include "tensor/nn_internal.h"
#include "runtime/cuda/kernel_errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* See tc__nn_rows (tensor/nn_internal.h). */
void tc__k_nn_rows(cudaStream_t stream, int sms, const tc__nn_rows *args);
/* For benchmarks only: every later row kernel (softmax, log_softmax, the
 * norms; not along an inner dim) takes `path` where the row allows it:
 * registers with the fewest threads, registers with about 4 vectors a
 * thread, shared memory, or two reads of global memory; AUTO (the default)
 * chooses by the row's length. One setting for the whole process. */
enum {
    TC__NN_PATH_AUTO,
    TC__NN_PATH_REGS,
    TC__NN_PATH_REGS_WIDE,
    TC__NN_PATH_SMEM,
    TC__NN_PATH_LOOP
};
void tc__k_nn_rows_path(int path);
/* See tc__nn_ce (tensor/nn_internal.h). A target out of range (not
 * ignore_index) gives its row NaN and is reported through err
 * (kernel_errors.h). A sum or mean needs tc__k_nn_cross_entropy_scratch
 * bytes of device memory for the blocks' partial sums, read by a second
 * kernel on the same stream. */
size_t tc__k_nn_cross_entropy_scratch(int sms, const tc__nn_ce *a);
void tc__k_nn_cross_entropy(cudaStream_t stream, int sms, const tc__nn_ce *a, void *scratch,
                            tc__kernel_error *err);
/* See tc__nn_attention (tensor/nn_internal.h): queues the fused attention
 * kernel on `stream` of `device` (compute capability cc_major.cc_minor)
 * and returns true, or returns false, queuing nothing, for what it does
 * not take: float64, 16-bit dtypes before compute capability 8.0, head
 * sizes over 128, a scale that is not positive and finite (attention.cu).
 * Test hooks: sm90 false keeps 16-bit problems on the mma.sync kernel
 * where Hopper's would take them (true, the default, restores it; returns
 * the setting before); the count is the calling thread's calls that
 * queued Hopper's. */
bool tc__k_nn_attention(cudaStream_t stream, int device, int cc_major, int cc_minor,
                        const tc__nn_attention *a);
bool tc__k_nn_attention_set_sm90(bool on);
uint64_t tc__k_nn_attention_sm90_count(void);
/* See tc__nn_attention_cache (attention_cache.cu): whether the kernel
 * takes a (head sizes up to 512), and its launch on `stream` of a device
 * of compute capability cc_major.x with `sms` multiprocessors (clusters
 * from 9.0); a length out of range is reported through err. Returns the
 * launch's error. */
bool tc__k_nn_attention_cache_takes(const tc__nn_attention_cache *a);
cudaError_t tc__k_nn_attention_cache(cudaStream_t stream, int sms, int cc_major,
                                     const tc__nn_attention_cache *a, tc__kernel_error *err);
/* See tc__nn_attention_bwd: whether the fused backward takes a (float32,
 * float16 or bfloat16, head sizes up to 128, a positive finite scale), the
 * bytes of device scratch it needs on a device of compute capability
 * cc_major.cc_minor (D, and where dq is summed with atomic adds, its
 * float32 sums), and its kernels queued on `stream` of `device` with that
 * scratch (false, queuing nothing, where it does not take a)
 * (attention_backward.cu). */
bool tc__k_nn_attention_backward_takes(const tc__nn_attention_bwd *a);
size_t tc__k_nn_attention_backward_scratch(int cc_major, int cc_minor,
                                           const tc__nn_attention_bwd *a);
bool tc__k_nn_attention_backward(cudaStream_t stream, int device, int cc_major, int cc_minor,
                                 const tc__nn_attention_bwd *a, void *scratch);
/* Test hooks of that backward: fma true makes float16 and bfloat16 take
 * the float32-in-shared-memory kernels, as float32 does, instead of the
 * tensor core ones (one setting for the whole process; false, the default,
 * restores them); the count is the calling thread's calls that queued the
 * tensor core kernels (mma.sync's or Hopper's). sm90 false keeps 16-bit
 * problems on the mma.sync kernels where Hopper's would take them (true,
 * the default, restores them; returns the setting before); its count is
 * the calling thread's calls that queued Hopper's, and the atomic count
 * those of them that summed dq with atomic adds. */
void tc__k_nn_attention_backward_set_fma(bool fma);
uint64_t tc__k_nn_attention_backward_mma_count(void);
bool tc__k_nn_attention_backward_set_sm90(bool on);
uint64_t tc__k_nn_attention_backward_sm90_count(void);
uint64_t tc__k_nn_attention_backward_atomic_count(void);
/* Benchmark hook: the shape of the tensor core dK/dV kernel for head dims
 * up to 64 (0, the default, to the count returned less one; one setting
 * for the process; a variant out of range changes nothing). Returns the
 * count of variants. */
int tc__k_nn_attention_backward_set_variant(int variant);
/* c = beta * c (0 for beta 0, c not read) over `batch` row-major [m, n]
 * matrices of dtype (floating) with leading dimension ldc and batch stride
 * stride_c: a GEMM with k = 0 (gemm_scale.cu). Launches nothing when the
 * batch is empty. */
void tc__k_nn_scale(cudaStream_t stream, int sms, tc_dtype dtype, void *c, int64_t batch, int64_t m,
                    int64_t n, int64_t ldc, int64_t stride_c, double beta);

/* The backward kernels (backward.cu): see each struct in
 * tensor/nn_internal.h. layer_norm_backward's dweight and dbias need
 * tc__k_nn_layer_norm_backward_scratch bytes of device memory for their
 * partial sums (0: none), cross_entropy_backward's its scratch's (the
 * mean's divisor and the blocks' partial losses), each read by a later
 * kernel on the same stream. A target out of range is reported through err
 * as tc__k_nn_cross_entropy's. */
void tc__k_nn_gelu_backward(cudaStream_t stream, int sms, const tc__nn_gelu_bwd *a);
void tc__k_nn_softmax_backward(cudaStream_t stream, int sms, const tc__nn_softmax_bwd *a);
void tc__k_nn_layer_norm(cudaStream_t stream, const tc__nn_ln *a);
size_t tc__k_nn_layer_norm_backward_scratch(const tc__nn_ln_bwd *a);
void tc__k_nn_layer_norm_backward(cudaStream_t stream, int sms, const tc__nn_ln_bwd *a,
                                  void *scratch);
size_t tc__k_nn_cross_entropy_backward_scratch(int sms, const tc__nn_ce_bwd *a);
void tc__k_nn_cross_entropy_backward(cudaStream_t stream, int sms, const tc__nn_ce_bwd *a,
                                     void *scratch, tc__kernel_error *err);

/* Small float32 GEMMs without cuBLAS (gemm_small.cu): whether g is one
 * (float32 A, B and C; m and n at least 8; k up to 1024; at most 2^22
 * multiply-adds in all), and the kernel that computes it (one launch). */
bool tc__k_gemm_small_fits(const tc__nn_gemm *g);
void tc__k_gemm_small(cudaStream_t stream, const tc__nn_gemm *g);

/* Skinny GEMMs without cuBLAS (gemm_skinny.cu): whether g is one (float16,
 * bfloat16 or float32 throughout; A not transposed with 1 to 16 rows (4
 * for float32; past 4 only with k up to 3,072 for 16-bit dtypes), B
 * transposed, i.e. stored [n, k]; A and B 16-byte aligned with k, their
 * leading dimensions and batch strides whole 16-byte vectors; k up to
 * 2^16), and the kernel that computes it (one launch) with f's prologue
 * and epilogue (NULL: none; tc__nn_fusion), the bias and residual added
 * after alpha and beta. With a residual (read in C's layout, ldc apart),
 * g's beta must be 0; ln only for up to 4 rows (the FMA path; blas.c
 * keeps it there), with ln_weight and ln_bias 16-byte aligned. */
bool tc__k_gemm_skinny_fits(const tc__nn_gemm *g);
void tc__k_gemm_skinny(cudaStream_t stream, int sms, const tc__nn_gemm *g, const tc__nn_fusion *f);
/* Test hook: launches of tc__k_gemm_skinny so far by the calling thread. */
uint64_t tc__k_gemm_skinny_count(void);
/* Benchmark hook: false sends every GEMM past the kernel (cuBLAS's path);
 * one setting for the process, true by default. */
void tc__k_gemm_skinny_set_enabled(bool on);

#ifdef __cplusplus
}
#endif

#endif
