/* Tensor calls that need CUDA, in a build without it (see absent.c). */
#include "base/internal.h"
#include "tcuda/tensor.h"

void *tc_current_blas_handle(void)
{
    TC_API_BEGIN;
    (void)tc__fail(TC_ERROR_NO_DEVICE, "tc_current_blas_handle: CUDA is not available: tcuda "
                                       "was built without CUDA (TCUDA_CUDA=OFF or no nvcc)");
    return NULL;
}
