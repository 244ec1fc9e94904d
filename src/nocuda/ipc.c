/* Memory IPC in a build without CUDA (see src/nocuda/runtime.c for the rules):
 * arguments are checked first, a handle is decoded (so a forged one is still
 * TC_ERROR_INVALID_HANDLE), then every call answers TC_ERROR_NO_DEVICE. */
#include "base/env.h"
#include "base/internal.h"
#include "dist/ipc_handle.h"
#include "tensor/tensor_internal.h"

static tc_status absent(void)
{
    TC_TRY(tc__debug_env_check());
    return tc__fail(TC_ERROR_NO_DEVICE,
                    "memory IPC needs CUDA: tcuda was built without CUDA (TCUDA_CUDA=OFF or no "
                    "nvcc at configure time)");
}

tc_status tc_tensor_ipc_handle(const tc_tensor *t, tc_ipc_mem_handle *out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out must not be NULL");
    TC_CHECK_ARG(t->storage->device.type == TC_CUDA, "only GPU tensors can be shared this way");
    return absent();
}

tc_status tc_tensor_from_ipc_handle(const tc_ipc_mem_handle *handle, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(handle && out, "handle and out must not be NULL");
    tc__ipc_info info;
    TC_TRY(tc__ipc_decode(handle, &info, NULL));
    return absent();
}
