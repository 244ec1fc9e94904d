/* With no GPU (this test hides every GPU with CUDA_VISIBLE_DEVICES="", so it
 * runs the same on CI and on a GPU machine, with or without CUDA in the
 * build): every CUDA call answers TC_ERROR_NO_DEVICE with a message that
 * starts with the call's name, guards are no-ops, bad arguments are reported
 * before anything else, and no out-parameter is written. Stream and event
 * handles are checked even here: NULL is TC_ERROR_INVALID_ARGUMENT where it
 * does not mean "current", and a garbage pointer TC_ERROR_INVALID_HANDLE,
 * never a crash. */
#include <stdlib.h>

#include "tc_test.h"

/* The last message starts with `fn` ": " and contains `what`. */
static bool says(const char *fn, const char *what)
{
    const char *m = tc_last_error();
    size_t n = strlen(fn);
    return strncmp(m, fn, n) == 0 && m[n] == ':' && strstr(m, what) != NULL;
}

static void check_bad_handles(void)
{
    tc_stream *gs = tc_test_garbage(256);
    tc_event *ge = tc_test_garbage(256);
    CHECK_STATUS(tc_stream_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_stream_destroy", "tc_stream is NULL"));
    CHECK_STATUS(tc_stream_destroy(gs), TC_ERROR_INVALID_HANDLE);
    CHECK(says("tc_stream_destroy", "not a live tc_stream"));
    CHECK_STATUS(tc_stream_query(gs), TC_ERROR_INVALID_HANDLE);
    CHECK(says("tc_stream_query", "not a live tc_stream"));
    CHECK_STATUS(tc_stream_synchronize(gs), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_stream_wait_stream(gs, NULL), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_set_stream(gs), TC_ERROR_INVALID_HANDLE);
    CHECK(says("tc_set_stream", "not a live tc_stream"));
    tc_stream_guard g = tc_stream_guard_enter(gs);
    CHECK(g.status == TC_ERROR_INVALID_HANDLE && g.prev_stream == NULL);
    CHECK(says("tc_stream_guard_enter", "not a live tc_stream"));
    tc_stream_guard_exit(&g);
    tc_event *e = (tc_event *)0x1;
    CHECK_STATUS(tc_stream_record_event(gs, &e), TC_ERROR_INVALID_HANDLE);
    CHECK(e == (tc_event *)0x1);
    CHECK_STATUS(tc_stream_record_event(NULL, NULL), TC_ERROR_INVALID_ARGUMENT);

    /* accessors cannot fail: documented values, the last message kept */
    CHECK_STATUS(tc_set_stream(gs), TC_ERROR_INVALID_HANDLE);
    char before[256];
    snprintf(before, sizeof before, "%s", tc_last_error());
    CHECK(tc_stream_device(gs) == -1 && tc_stream_priority(gs) == 0);
    CHECK(tc_stream_cuda_handle(gs) == NULL && tc_event_device(ge) == -1);
    CHECK(tc_stream_device(NULL) == -1 && tc_stream_priority(NULL) == 0);
    CHECK(tc_stream_cuda_handle(NULL) == NULL && tc_event_device(NULL) == -1);
    CHECK(strcmp(tc_last_error(), before) == 0);

    CHECK_STATUS(tc_event_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_event_destroy", "tc_event is NULL"));
    CHECK_STATUS(tc_event_destroy(ge), TC_ERROR_INVALID_HANDLE);
    CHECK(says("tc_event_destroy", "not a live tc_event"));
    CHECK_STATUS(tc_event_query(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_event_query(ge), TC_ERROR_INVALID_HANDLE);
    CHECK(says("tc_event_query", "not a live tc_event"));
    CHECK_STATUS(tc_event_record(ge, NULL), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_event_synchronize(ge), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_event_wait(ge, NULL), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_stream_wait_event(NULL, ge), TC_ERROR_INVALID_HANDLE);
    CHECK(says("tc_stream_wait_event", "not a live tc_event"));
    float ms = -3;
    CHECK_STATUS(tc_event_elapsed_time(ge, ge, &ms), TC_ERROR_INVALID_HANDLE);
    CHECK(ms == -3);
    tc_ipc_event_handle h;
    memset(&h, 0x77, sizeof h);
    CHECK_STATUS(tc_event_ipc_handle(ge, &h), TC_ERROR_INVALID_HANDLE);
    CHECK(h.bytes[0] == 0x77 && h.bytes[63] == 0x77);
    free(gs);
    free(ge);
}

/* The NVML readers, the memory getters and the BLAS handle: a NULL out is
 * an argument error, anything else has no device; nothing is written. */
static void check_getters(void)
{
    int v = -7;
    int64_t v64 = -7;
    size_t bytes = 7;
    char *text = (char *)0x1;
    void *handle = (void *)0x1;
    CHECK_STATUS(tc_utilization(0, &v), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_utilization", "CUDA is not available"));
    CHECK_STATUS(tc_memory_usage(0, &v), TC_ERROR_NO_DEVICE);
    CHECK_STATUS(tc_temperature(TC_CURRENT_DEVICE, &v), TC_ERROR_NO_DEVICE);
    CHECK_STATUS(tc_power_draw(0, &v), TC_ERROR_NO_DEVICE);
    CHECK_STATUS(tc_clock_rate(0, &v64), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_clock_rate", "CUDA is not available"));
    CHECK_STATUS(tc_list_gpu_processes(0, &text), TC_ERROR_NO_DEVICE);
    CHECK_STATUS(tc_utilization(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_utilization", "out is NULL"));
    CHECK_STATUS(tc_memory_usage(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_temperature(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_power_draw(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_clock_rate(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_list_gpu_processes(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(v == -7 && v64 == -7 && text == (char *)0x1);

    tc_status (*const byte_getters[])(int, size_t *) = {
        tc_memory_allocated,    tc_max_memory_allocated, tc_memory_reserved,
        tc_max_memory_reserved, tc_memory_cached,        tc_max_memory_cached};
    for (size_t i = 0; i < sizeof byte_getters / sizeof byte_getters[0]; i++) {
        CHECK_STATUS(byte_getters[i](0, &bytes), TC_ERROR_NO_DEVICE);
        CHECK_STATUS(byte_getters[i](TC_CURRENT_DEVICE, NULL), TC_ERROR_INVALID_ARGUMENT);
    }
    CHECK(says("tc_max_memory_cached", "out is NULL") && bytes == 7);
    CHECK_STATUS(tc_memory_stats_get(0, "num_ooms", &v64), TC_ERROR_NO_DEVICE);
    CHECK_STATUS(tc_memory_stats_get(0, NULL, &v64), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_memory_stats_get", "key is NULL"));
    CHECK_STATUS(tc_memory_stats_get(0, "num_ooms", NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_memory_summary(0, true, &text), TC_ERROR_NO_DEVICE);
    CHECK_STATUS(tc_memory_summary(0, true, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(v64 == -7 && text == (char *)0x1);

    CHECK_STATUS(tc_current_blas_handle(&handle), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_current_blas_handle", "CUDA is not available"));
    CHECK_STATUS(tc_current_blas_handle(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(handle == (void *)0x1);
}

int main(void)
{
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    tc_test_init();

    CHECK(!tc_is_initialized());
    CHECK(!tc_is_available());
    CHECK(strstr(tc_last_error(), "CUDA is not available") != NULL);
    CHECK(!tc_is_initialized());
    CHECK(tc_device_count() == 0);
    CHECK_STATUS(tc_init(), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_init", "CUDA is not available"));
    int cur = 5;
    CHECK_STATUS(tc_current_device(&cur), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_current_device", "CUDA is not available") && cur == 5);
    CHECK_STATUS(tc_current_device(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_current_device", "out is NULL"));
    CHECK_OK(tc_set_device(-1));
    CHECK_STATUS(tc_set_device(0), TC_ERROR_NO_DEVICE);

    tc_device_guard g = tc_device_guard_enter(-1);
    CHECK(g.status == TC_OK);
    tc_device_guard_exit(&g);
    g = tc_device_guard_enter(0);
    CHECK(g.status == TC_ERROR_NO_DEVICE);
    tc_device_guard_exit(&g); /* no-op */
    tc_device_guard_exit(NULL);

    const char *name = "unchanged";
    CHECK_STATUS(tc_get_device_name(0, &name), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_get_device_name", "CUDA is not available"));
    CHECK_STATUS(tc_get_device_name(TC_CURRENT_DEVICE, &name), TC_ERROR_NO_DEVICE);
    CHECK_STATUS(tc_get_device_name(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(name, "unchanged") == 0);
    int major = -7, minor = -7;
    CHECK_STATUS(tc_get_device_capability(0, &major, &minor), TC_ERROR_NO_DEVICE);
    CHECK(major == -7 && minor == -7);
    CHECK_STATUS(tc_get_device_capability(0, NULL, &minor), TC_ERROR_INVALID_ARGUMENT);
    tc_device_properties props;
    memset(&props, 0x5c, sizeof props);
    CHECK_STATUS(tc_get_device_properties(0, &props), TC_ERROR_NO_DEVICE);
    CHECK(props.major == 0x5c5c5c5c && (unsigned char)props.name[0] == 0x5c);
    CHECK_STATUS(tc_get_device_properties(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    bool can = true;
    CHECK_STATUS(tc_can_device_access_peer(0, 1, &can), TC_ERROR_NO_DEVICE);
    CHECK_STATUS(tc_can_device_access_peer(0, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(can);
    CHECK_STATUS(tc_synchronize(-1), TC_ERROR_NO_DEVICE);
    size_t f = 1, t = 1;
    CHECK_STATUS(tc_mem_get_info(-1, &f, &t), TC_ERROR_NO_DEVICE);
    CHECK(f == 1 && t == 1);
    CHECK_STATUS(tc_mem_get_info(-1, NULL, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_ipc_collect(), TC_ERROR_NO_DEVICE);
    CHECK(tc_get_arch_list() != NULL && tc_get_gencode_flags() != NULL);

    check_getters();

    int least = 5, greatest = 5;
    CHECK_STATUS(tc_stream_priority_range(&least, &greatest), TC_ERROR_NO_DEVICE);
    CHECK(least == 5 && greatest == 5);
    CHECK_STATUS(tc_stream_priority_range(NULL, &greatest), TC_ERROR_INVALID_ARGUMENT);
    tc_stream *s = (tc_stream *)0x1;
    CHECK_STATUS(tc_stream_create(-1, 0, &s), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_stream_create", "CUDA is not available"));
    CHECK(s == (tc_stream *)0x1);
    CHECK_STATUS(tc_stream_create(-1, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_stream_create", "out is NULL"));
    CHECK_STATUS(tc_stream_create_external(NULL, 0, &s), TC_ERROR_NO_DEVICE);
    CHECK(s == (tc_stream *)0x1);
    CHECK_STATUS(tc_stream_create_external(NULL, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_stream *cs = (tc_stream *)0x1;
    CHECK_STATUS(tc_current_stream(TC_CURRENT_DEVICE, &cs), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_current_stream", "CUDA is not available"));
    CHECK_STATUS(tc_default_stream(0, &cs), TC_ERROR_NO_DEVICE);
    CHECK(cs == (tc_stream *)0x1);
    CHECK_STATUS(tc_current_stream(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_current_stream", "out is NULL"));
    CHECK_STATUS(tc_default_stream(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_set_stream(NULL));
    CHECK_STATUS(tc_stream_query(NULL), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_stream_query", "CUDA is not available"));
    CHECK_STATUS(tc_stream_synchronize(NULL), TC_ERROR_NO_DEVICE);
    tc_stream_guard sg = tc_stream_guard_enter(NULL);
    CHECK(sg.status == TC_OK);
    tc_stream_guard_exit(&sg);
    CHECK(tc_stream_device(NULL) == -1 && tc_stream_cuda_handle(NULL) == NULL);

    tc_event *e = (tc_event *)0x1;
    CHECK_STATUS(tc_event_create(TC_EVENT_FLAG_TIMING, &e), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_event_create", "CUDA is not available"));
    CHECK(e == (tc_event *)0x1);
    CHECK_STATUS(tc_event_create(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_ipc_event_handle h;
    memset(&h, 0, sizeof h);
    CHECK_STATUS(tc_event_from_ipc_handle(0, &h, &e), TC_ERROR_NO_DEVICE);
    CHECK(e == (tc_event *)0x1);
    CHECK_STATUS(tc_event_from_ipc_handle(0, NULL, &e), TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_event_device(NULL) == -1);
    check_bad_handles();

    tc_memory_snapshot_info *snap = (tc_memory_snapshot_info *)0x1;
    CHECK_STATUS(tc_memory_snapshot(&snap), TC_ERROR_NO_DEVICE);
    CHECK(snap == (tc_memory_snapshot_info *)0x1);
    CHECK_STATUS(tc_memory_snapshot_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_memory_snapshot_destroy", "snap is NULL"));

    /* Still CPU-only features work. */
    int depth = -1;
    CHECK_OK(tc_nvtx_range_push("cpu", &depth));
    CHECK(depth == 0);
    CHECK_OK(tc_nvtx_range_pop(&depth));
    CHECK(depth == 0);
    CHECK(!tc_launch_blocking() || getenv("CUDA_LAUNCH_BLOCKING"));
    return TC_TEST_DONE();
}
