/* With no GPU (this test hides every GPU with CUDA_VISIBLE_DEVICES="", so it
 * runs the same on CI and on a GPU machine): every CUDA call answers
 * TC_ERROR_NO_DEVICE with a message, guards are no-ops, and bad arguments
 * are reported before anything else. */
#include <stdlib.h>

#include "tc_test.h"

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
    CHECK(tc_current_device() == -1);
    CHECK_OK(tc_set_device(-1));
    CHECK_STATUS(tc_set_device(0), TC_ERROR_NO_DEVICE);

    tc_device_guard g = tc_device_guard_enter(-1);
    CHECK(g.status == TC_OK);
    tc_device_guard_exit(&g);
    g = tc_device_guard_enter(0);
    CHECK(g.status == TC_ERROR_NO_DEVICE);
    tc_device_guard_exit(&g); /* no-op */
    tc_device_guard_exit(NULL);

    CHECK(tc_get_device_name(0) == NULL);
    int major = -7, minor = -7;
    CHECK_STATUS(tc_get_device_capability(0, &major, &minor), TC_ERROR_NO_DEVICE);
    CHECK(major == -7 && minor == -7);
    CHECK_STATUS(tc_get_device_capability(0, NULL, &minor), TC_ERROR_INVALID_ARGUMENT);
    tc_device_properties props;
    CHECK_STATUS(tc_get_device_properties(0, &props), TC_ERROR_NO_DEVICE);
    CHECK_STATUS(tc_get_device_properties(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(!tc_can_device_access_peer(0, 1));
    CHECK_STATUS(tc_synchronize(-1), TC_ERROR_NO_DEVICE);
    size_t f = 1, t = 1;
    CHECK_STATUS(tc_mem_get_info(-1, &f, &t), TC_ERROR_NO_DEVICE);
    CHECK(f == 1 && t == 1);
    CHECK_STATUS(tc_mem_get_info(-1, NULL, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_ipc_collect(), TC_ERROR_NO_DEVICE);
    CHECK(tc_get_arch_list() != NULL && tc_get_gencode_flags() != NULL);

    CHECK(tc_utilization(0) == -1 && tc_last_error()[0]);
    CHECK(tc_memory_usage(0) == -1 && tc_temperature(0) == -1);
    CHECK(tc_power_draw(0) == -1 && tc_clock_rate(0) == -1);
    CHECK(tc_list_gpu_processes(0) == NULL);

    int least = 5, greatest = 5;
    CHECK_STATUS(tc_stream_priority_range(&least, &greatest), TC_ERROR_NO_DEVICE);
    CHECK(least == 5 && greatest == 5);
    tc_stream *s = NULL;
    CHECK_STATUS(tc_stream_create(&s, -1, 0), TC_ERROR_NO_DEVICE);
    CHECK(s == NULL);
    CHECK_STATUS(tc_stream_create(NULL, -1, 0), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_stream_from_external(&s, NULL, 0), TC_ERROR_NO_DEVICE);
    CHECK(tc_current_stream(-1) == NULL && tc_last_error()[0]);
    CHECK(tc_default_stream(0) == NULL);
    CHECK_OK(tc_set_stream(NULL));
    CHECK(!tc_stream_query(NULL));
    CHECK_STATUS(tc_stream_synchronize(NULL), TC_ERROR_NO_DEVICE);
    tc_stream_guard sg = tc_stream_guard_enter(NULL);
    CHECK(sg.status == TC_OK);
    tc_stream_guard_exit(&sg);
    CHECK(tc_stream_device(NULL) == -1 && tc_stream_cuda_handle(NULL) == NULL);

    tc_event *e = NULL;
    CHECK_STATUS(tc_event_create(&e, TC_EVENT_TIMING), TC_ERROR_NO_DEVICE);
    CHECK(e == NULL);
    CHECK_STATUS(tc_event_create(NULL, 0), TC_ERROR_INVALID_ARGUMENT);
    tc_ipc_event_handle h;
    CHECK_STATUS(tc_event_from_ipc_handle(&e, 0, &h), TC_ERROR_NO_DEVICE);
    CHECK(tc_event_device(NULL) == -1);

    /* Still CPU-only features work. */
    CHECK(tc_nvtx_range_push("cpu") == 0 && tc_nvtx_range_pop() == 0);
    CHECK(!tc_launch_blocking() || getenv("CUDA_LAUNCH_BLOCKING"));
    return TC_TEST_DONE();
}
