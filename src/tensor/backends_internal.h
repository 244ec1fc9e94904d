/* What the GPU GEMMs (cuda/blas.c, cuda/blas_lt.c) read of the precision
 * switches of tcuda/backends.h, kept by backends.c. Each read is one atomic
 * load, so a GEMM reads the settings as they are when it is queued. */
#ifndef TCUDA_BACKENDS_INTERNAL_H
#define TCUDA_BACKENDS_INTERNAL_H

#include <stdbool.h>

#include "tcuda/dtype.h"

/* Whether float32 GEMMs may use TF32 (precision "high" or "medium"). */
bool tc__matmul_allow_tf32(void);
/* Whether GEMMs of `dt` (float16 or bfloat16) may reduce partial sums in
 * their own type; true for every other dtype (nothing to forbid there). */
bool tc__matmul_allow_reduced_reduction(tc_dtype dt);
/* Whether tc_use_deterministic_algorithms is on (read by the operations
 * that have a deterministic GPU algorithm when they are queued). */
bool tc__deterministic_algorithms(void);

#endif
