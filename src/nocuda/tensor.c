/* Tensor calls that need CUDA, in a build without it (see runtime.c). */
#include "base/internal.h"
#include "tcuda/tensor.h"

tc_status tc_current_blas_handle(void **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__fail(TC_ERROR_NO_DEVICE, "tc_current_blas_handle: CUDA is not available: tcuda "
                                        "was built without CUDA (TCUDA_CUDA=OFF or no nvcc)");
}
