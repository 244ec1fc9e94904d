/* jiterator's GPU half in a build without CUDA: every GPU step answers
 * TC_ERROR_NO_DEVICE (no tensor can be on a GPU in such a build anyway);
 * the CPU path (src/jit) works as in any build. */
#include "jit/jit_internal.h"

static tc_status none(void)
{
    return tc__fail(TC_ERROR_NO_DEVICE, "tcuda was built without CUDA: jiterator runs on CPU "
                                        "tensors only");
}

tc_status tc__jit_cuda_device(int device, int *arch, int *sms) { return none(); }
const char *tc__jit_cuda_key_id(void) { return "no-cuda"; }
tc_status tc__jit_cuda_nvrtc_version(const char **out) { return none(); }
tc_status tc__jit_cuda_compile(const char *source, int arch, void **cubin, size_t *size)
{
    return none();
}
void tc__jit_cuda_compile_phases(double ms[3]) { ms[0] = ms[1] = ms[2] = 0; }
tc_status tc__jit_cuda_load(int device, const void *cubin, size_t size, void **module,
                            void **function)
{
    return none();
}
void tc__jit_cuda_unload(int device, void *module) {}
tc_status tc__jit_cuda_launch(int device, void *function, const tc__jit_args *args, unsigned grid)
{
    return none();
}
