/* Built instead of runtime/cuda when tcuda is configured without
 * CUDA (TCUDA_CUDA=OFF or no nvcc). Every CUDA-only call links and answers:
 * no devices, TC_ERROR_NO_DEVICE with the reason, guards that do nothing.
 * The answers match a CUDA build on a machine without a GPU: arguments are
 * checked first (a NULL out-parameter is TC_ERROR_INVALID_ARGUMENT, and since
 * no stream or event can exist here, any non-NULL handle is
 * TC_ERROR_INVALID_HANDLE), a bad CUDA_LAUNCH_BLOCKING or
 * TCUDA_SYNC_DEBUG_MODE is reported before the missing GPU, and every message
 * starts with the public call. */
#include "nocuda.h"
#include "runtime/runtime_args.h"
#include "base/handle_pool.h"
#include "base/internal.h"
#include "tcuda/stream.h"

/* A stream argument where NULL means "the current stream". */
static tc_status stream_arg(const tc_stream *s)
{
    return s ? tc__nocuda_handle(s, "tc_stream") : tc__nocuda();
}

#define TC_ABSENT_STATUS(name, params)                                                             \
    tc_status name params                                                                          \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        return tc__nocuda();                                                                       \
    }
#define TC_ABSENT_VALUE(type, name, params, value)                                                 \
    type name params                                                                               \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        (void)tc__nocuda();                                                                        \
        return value;                                                                              \
    }
/* A getter of `device`: its out-parameter is checked, then there is no device. */
#define TC_ABSENT_GETTER(name, type)                                                               \
    tc_status name(int device, type *out)                                                          \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        (void)device;                                                                              \
        TC_CHECK_ARG(out, "out is NULL");                                                          \
        return tc__nocuda();                                                                       \
    }

bool tc_is_available(void)
{
    TC_API_BEGIN;
    (void)tc__nocuda();
    return false;
}
bool tc_is_initialized(void) { return false; }
TC_ABSENT_STATUS(tc_init, (void))
int tc_cuda_driver_version(void) { return 0; }
int tc_cuda_runtime_version(void) { return 0; }
TC_ABSENT_VALUE(int, tc_device_count, (void), 0)
tc_status tc_current_device(int *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}
tc_status tc_set_device(int device)
{
    TC_API_BEGIN;
    return device < 0 ? TC_OK : tc__nocuda();
}

tc_device_guard tc_device_guard_enter(int device)
{
    TC_API_BEGIN;
    tc_device_guard g = {.prev_device = -1, .device = device, .status = TC_OK};
    if (device >= 0)
        g.status = tc__nocuda();
    return g;
}
void tc_device_guard_exit(tc_device_guard *guard) { (void)guard; }

TC_ABSENT_GETTER(tc_get_device_name, const char *)
tc_status tc_get_device_capability(int device, int *major, int *minor)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(major && minor, "major or minor is NULL");
    return tc__nocuda();
}
tc_status tc_get_device_properties(int device, tc_device_properties *props)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(props, "props is NULL");
    return tc__nocuda();
}
tc_status tc_can_device_access_peer(int device, int peer, bool *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}
const char *tc_get_arch_list(void) { return ""; }
const char *tc_get_gencode_flags(void) { return ""; }
TC_ABSENT_STATUS(tc_synchronize, (int device))
tc_status tc_mem_get_info(int device, size_t *free_bytes, size_t *total_bytes)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(free_bytes && total_bytes, "free or total is NULL");
    return tc__nocuda();
}

TC_ABSENT_GETTER(tc_utilization, int)
TC_ABSENT_GETTER(tc_memory_usage, int)
TC_ABSENT_GETTER(tc_temperature, int)
TC_ABSENT_GETTER(tc_power_draw, int)
TC_ABSENT_GETTER(tc_clock_rate, int64_t)
TC_ABSENT_GETTER(tc_list_gpu_processes, char *)

tc_status tc_stream_priority_range(int *least, int *greatest)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(least && greatest, "least or greatest is NULL");
    return tc__nocuda();
}
tc_status tc_stream_create(int device, int priority, tc_stream **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}
tc_status tc_stream_create_external(void *cuda_stream, int device, tc_stream **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}
tc_status tc_stream_destroy(tc_stream *stream)
{
    TC_API_BEGIN;
    return tc__nocuda_handle(stream, "tc_stream");
}
tc_status tc_stream_query(tc_stream *stream)
{
    TC_API_BEGIN;
    return stream_arg(stream);
}
tc_status tc_stream_synchronize(tc_stream *stream)
{
    TC_API_BEGIN;
    return stream_arg(stream);
}
tc_status tc_stream_wait_event(tc_stream *stream, tc_event *event)
{
    TC_API_BEGIN;
    return tc__nocuda_handle(event, "tc_event");
}
tc_status tc_stream_wait_stream(tc_stream *stream, tc_stream *other)
{
    TC_API_BEGIN;
    if (stream || !other) /* the handles first, as with CUDA */
        return stream_arg(stream);
    return tc__nocuda_handle(other, "tc_stream");
}
tc_status tc_stream_record_event(tc_stream *stream, tc_event **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return stream_arg(stream);
}
int tc_stream_device(const tc_stream *stream) { return -1; }
int tc_stream_priority(const tc_stream *stream) { return 0; }
void *tc_stream_cuda_handle(const tc_stream *stream) { return NULL; }
TC_ABSENT_GETTER(tc_current_stream, tc_stream *)
TC_ABSENT_GETTER(tc_default_stream, tc_stream *)
tc_status tc_set_stream(tc_stream *stream)
{
    TC_API_BEGIN;
    return stream ? tc__nocuda_handle(stream, "tc_stream") : TC_OK;
}

tc_stream_guard tc_stream_guard_enter(tc_stream *stream)
{
    TC_API_BEGIN;
    tc_stream_guard g = {.prev_stream = NULL, .device_guard = {-1, -1, TC_OK}, .status = TC_OK};
    if (stream)
        g.status = tc__nocuda_handle(stream, "tc_stream");
    return g;
}
void tc_stream_guard_exit(tc_stream_guard *guard) { (void)guard; }

tc_status tc_event_create(unsigned flags, tc_event **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__event_create_check(flags, out));
    return tc__nocuda();
}
tc_status tc_event_destroy(tc_event *event)
{
    TC_API_BEGIN;
    return tc__nocuda_handle(event, "tc_event");
}
tc_status tc_event_record(tc_event *event, tc_stream *stream)
{
    TC_API_BEGIN;
    return tc__nocuda_handle(event, "tc_event");
}
tc_status tc_event_query(tc_event *event)
{
    TC_API_BEGIN;
    return tc__nocuda_handle(event, "tc_event");
}
tc_status tc_event_synchronize(tc_event *event)
{
    TC_API_BEGIN;
    return tc__nocuda_handle(event, "tc_event");
}
tc_status tc_event_wait(tc_event *event, tc_stream *stream)
{
    TC_API_BEGIN;
    return tc__nocuda_handle(event, "tc_event");
}
tc_status tc_event_elapsed_time(tc_event *start, tc_event *end, float *ms)
{
    TC_API_BEGIN;
    return tc__nocuda_handle(start, "tc_event");
}
int tc_event_device(const tc_event *event) { return -1; }
