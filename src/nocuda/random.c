/* Built without CUDA: the CUDA side of the random-number module answers
 * TC_ERROR_NO_DEVICE, so CUDA generators cannot be made; the CPU generator
 * and everything in src/random/random.c work as usual. */
#include "random/random_internal.h"

static tc_status absent(void)
{
    return tc__fail(TC_ERROR_NO_DEVICE,
                    "CUDA is not available: tcuda was built without CUDA (TCUDA_CUDA=OFF or no "
                    "nvcc at configure time), so there are no CUDA generators");
}

tc_status tc__rng_cuda_fill(tc_generator *gen, const tc__rng_params *p, void *data, size_t n)
{
    return absent();
}
