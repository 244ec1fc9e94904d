/* tcuda: precision switches of the GPU matmul (torch.backends.cuda.matmul's
 * allow_tf32, allow_fp16_reduced_precision_reduction,
 * allow_bf16_reduced_precision_reduction, and
 * torch.set_float32_matmul_precision / get_float32_matmul_precision), and
 * the deterministic-algorithms switch (torch.use_deterministic_algorithms /
 * are_deterministic_algorithms_enabled).
 *
 * Process-wide settings, read by every GPU GEMM when it is queued (the
 * tensor matmul, and nn's linear and its backward); safe from any thread.
 * They work without CUDA too: there they are only stored. Defaults are
 * PyTorch's: float32 matmul precision "highest" (no TF32), reduced-precision
 * reductions of float16 and bfloat16 GEMMs allowed.
 *
 * allow_tf32 and the float32 matmul precision are one setting seen two ways,
 * as in PyTorch: "high" and "medium" allow TF32, "highest" does not; allowing
 * TF32 makes the precision "high", disallowing it "highest". On the GPU
 * "medium" computes as "high" does (cuBLAS with TF32), as PyTorch's does.
 *
 * Which GEMMs follow them: those tcuda hands to cuBLAS and cuBLASLt (matmul,
 * bmm, linear, and attention's two GEMMs where its fused kernel does not
 * take the shape). tcuda's own float32 GEMM kernel for small sizes (the
 * few-block shapes where cuBLAS's host time dominates) and the fused
 * attention kernel always compute in full float32 whatever the setting, as
 * PyTorch's own non-cuBLAS kernels ignore allow_tf32; so a float32 result
 * may be more accurate than the setting allows, never less.
 *
 * Environment: TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 (PyTorch's variable) starts
 * the process with TF32 allowed (precision "high"); unlike PyTorch, the
 * setters below can still turn it off. NVIDIA_TF32_OVERRIDE=0 is read by
 * cuBLAS itself and disables TF32 in every GEMM whatever these settings say
 * (the getters still report the setting). */
#ifndef TCUDA_BACKENDS_H
#define TCUDA_BACKENDS_H

#include <stdbool.h>

#include "status.h"

TCUDA_EXTERN_C_BEGIN

/* ---- float32 matmul precision ---- */

/* Sets the float32 matmul precision: "highest", "high" or "medium" (exactly
 * these, as PyTorch). TC_ERROR_INVALID_ARGUMENT naming the value for any
 * other string (the setting is unchanged); NULL is "precision is NULL". */
TCUDA_API tc_status tc_set_float32_matmul_precision(const char *precision);
/* The float32 matmul precision into *out: "highest", "high" or "medium", a
 * static string the caller does not free. TC_ERROR_INVALID_ARGUMENT for a
 * NULL out. */
TCUDA_API tc_status tc_get_float32_matmul_precision(const char **out);

/* ---- torch.backends.cuda.matmul ---- */

/* Allows (true: precision "high") or forbids (false: "highest") TF32 in
 * float32 GEMMs. Never fails (TC_OK). */
TCUDA_API tc_status tc_backends_cuda_matmul_set_allow_tf32(bool allow);
/* Whether TF32 is allowed into *out (the precision is not "highest").
 * TC_ERROR_INVALID_ARGUMENT for a NULL out. */
TCUDA_API tc_status tc_backends_cuda_matmul_get_allow_tf32(bool *out);
/* Allows or forbids float16 GEMMs to reduce partial sums (split-K) in
 * float16 rather than float32. Never fails (TC_OK). */
TCUDA_API tc_status tc_backends_cuda_matmul_set_allow_fp16_reduced_precision_reduction(bool allow);
/* The float16 setting into *out. TC_ERROR_INVALID_ARGUMENT for a NULL out. */
TCUDA_API tc_status tc_backends_cuda_matmul_get_allow_fp16_reduced_precision_reduction(bool *out);
/* As the float16 setting, for bfloat16 GEMMs. Never fails (TC_OK). */
TCUDA_API tc_status tc_backends_cuda_matmul_set_allow_bf16_reduced_precision_reduction(bool allow);
/* The bfloat16 setting into *out. TC_ERROR_INVALID_ARGUMENT for a NULL out. */
TCUDA_API tc_status tc_backends_cuda_matmul_get_allow_bf16_reduced_precision_reduction(bool *out);

/* ---- deterministic algorithms ---- */

/* Makes the operations that have a deterministic GPU algorithm use it
 * (true), or their faster one (false, the default, as PyTorch's). Read when
 * an operation is queued. The operations that follow it: the embedding
 * backward of nn_backward.h (a sort of the indices and a fixed-order sum per
 * weight row, bit-identical run to run, instead of float atomic adds) and
 * the fused attention backward's dQ (its own kernel over blocks of
 * queries instead of atomic adds; see nn_backward.h). Unlike PyTorch, operations without a deterministic algorithm do not fail
 * while it is on. Works without CUDA (only stored). Never fails (TC_OK). */
TCUDA_API tc_status tc_use_deterministic_algorithms(bool enabled);
/* Whether deterministic algorithms are on, into *out.
 * TC_ERROR_INVALID_ARGUMENT for a NULL out. */
TCUDA_API tc_status tc_are_deterministic_algorithms_enabled(bool *out);

TCUDA_EXTERN_C_END

#endif
