/* Small kernels the GPU tests use, each launched through tcuda's launch
 * check (tc__launch_check), so CUDA_LAUNCH_BLOCKING applies to them as to
 * tcuda's own kernels. Streams are cudaStream_t passed as void *. */
#ifndef TC_TEST_KERNELS_H
#define TC_TEST_KERNELS_H

#include <stdint.h>

#include "tcuda/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Spins one thread for `ns` nanoseconds of GPU time (the global timer). */
tc_status tc_test_spin(void *stream, uint64_t ns);
/* Spins for `ns`, then writes value + i into buf[i] for i < n. */
tc_status tc_test_spin_then_fill(void *stream, uint64_t ns, int *buf, int n, int value);
/* dst[i] = src[i] + add for i < n. */
tc_status tc_test_copy_add(void *stream, const int *src, int *dst, int n, int add);
/* Writes through an invalid address: an illegal-address fault. */
tc_status tc_test_fault(void *stream);

#ifdef __cplusplus
}
#endif

#endif
