/* IPC in a build without CUDA (see src/nocuda/runtime.c for the rules):
 * arguments are checked first, a memory handle is decoded (so a forged one
 * is still TC_ERROR_INVALID_HANDLE), no event can exist (any non-NULL one is
 * TC_ERROR_INVALID_HANDLE), then every call answers TC_ERROR_NO_DEVICE. */
#include "nocuda.h"
#include "base/handle_pool.h"
#include "base/internal.h"
#include "dist/ipc_handle.h"
#include "tcuda/ipc.h"
#include "tensor/tensor_internal.h"

tc_status tc_tensor_ipc_handle(const tc_tensor *t, tc_ipc_mem_handle *out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(t->storage->device.type == TC_CUDA, "only GPU tensors can be shared this way");
    return tc__nocuda();
}

tc_status tc_tensor_from_ipc_handle(const tc_ipc_mem_handle *handle, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(handle && out, "handle or out is NULL");
    tc__ipc_info info;
    TC_TRY(tc__ipc_decode(handle, &info, NULL));
    return tc__nocuda();
}

tc_status tc_ipc_collect(void)
{
    TC_API_BEGIN;
    return tc__nocuda();
}

tc_status tc_event_ipc_handle(tc_event *event, tc_ipc_event_handle *out)
{
    TC_API_BEGIN;
    (void)out;
    return tc__handle_fail(event, 0, "tc_event");
}

tc_status tc_event_from_ipc_handle(int device, const tc_ipc_event_handle *handle, tc_event **out)
{
    TC_API_BEGIN;
    (void)device;
    TC_CHECK_ARG(handle && out, "handle or out is NULL");
    return tc__nocuda();
}
