/* The one answer of a build without CUDA (nocuda.h). */
#include "base/env.h"
#include "nocuda.h"

tc_status tc__nocuda(void)
{
    TC_TRY(tc__debug_env_check());
    return tc__fail(TC_ERROR_NO_DEVICE,
                    "CUDA is not available: tcuda was built without CUDA (TCUDA_CUDA=OFF or no "
                    "nvcc at configure time)");
}
