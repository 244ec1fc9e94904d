/* Events shared between processes (include/tcuda/ipc.h): an event made with
 * TC_EVENT_FLAG_INTERPROCESS gives a CUDA IPC event handle as plain bytes,
 * and a handle from another process opens as a tc_event of this one. The
 * events themselves, their handle pool and their lazy creation are
 * runtime/cuda/event.c's. */
#include <string.h>

#include "runtime/cuda/cuda_internal.h"
#include "tcuda/ipc.h"

tc_status tc_event_ipc_handle(tc_event *event, tc_ipc_event_handle *out)
{
    TC_API_BEGIN;
    TC_TRY(tc__event_check(event));
    TC_CHECK_ARG(out, "out is NULL");
    if (!(event->flags & TC_EVENT_FLAG_INTERPROCESS))
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "the event was created without TC_EVENT_FLAG_INTERPROCESS");
    if (event->device < 0)
        TC_TRY(tc__event_materialize(event, tc__tls_device));
    cudaIpcEventHandle_t h;
    TC_CUDA_CHECK(cudaIpcGetEventHandle(&h, event->handle));
    _Static_assert(sizeof h <= sizeof out->bytes, "IPC handle size");
    memset(out, 0, sizeof *out);
    memcpy(out->bytes, &h, sizeof h);
    return TC_OK;
}

tc_status tc_event_from_ipc_handle(int device, const tc_ipc_event_handle *handle, tc_event **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(handle && out, "handle or out is NULL");
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    cudaIpcEventHandle_t h;
    memcpy(&h, handle->bytes, sizeof h);
    tc_device_guard g = tc_device_guard_enter(d);
    TC_TRY(g.status);
    cudaEvent_t ev;
    cudaError_t err = cudaIpcOpenEventHandle(&ev, h);
    tc_device_guard_exit(&g);
    if (err != cudaSuccess)
        return tc__cuda_fail(err, "cudaIpcOpenEventHandle", __FILE__, __LINE__);
    tc_event *e = tc__event_new();
    if (!e) {
        cudaEventDestroy(ev);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    /* Another process records it: treat it as recorded so waits are real. */
    *e = (tc_event){.magic = TC_EVENT_MAGIC,
                    .flags = TC_EVENT_FLAG_INTERPROCESS,
                    .device = d,
                    .recorded = true,
                    .handle = ev};
    *out = e;
    return TC_OK;
}
