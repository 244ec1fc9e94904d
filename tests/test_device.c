/* GPU: devices, the per-thread current device, guards, properties, memory
 * info, arch list, peer access, and bad device indices: every failure is
 * named after the public call and writes no out-parameter. */
#include <pthread.h>
#include <stdlib.h>

#include "tc_test.h"

static int other_device;

static void *thread_device(void *arg)
{
    int *out = arg; /* no CHECK on this thread: main checks what it wrote */
    out[0] = out[2] = -1;
    (void)tc_current_device(&out[0]); /* a new thread starts on device 0 */
    out[1] = tc_set_device(other_device) == TC_OK;
    (void)tc_current_device(&out[2]);
    return NULL;
}

int main(void)
{
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    int n = tc_device_count();
    CHECK(n >= 1);
    CHECK(tc_is_initialized());
    CHECK_OK(tc_init());
    CHECK(tc_test_current_device() == 0);

    /* per-thread current device */
    other_device = n > 1 ? 1 : 0;
    int seen[3] = {-9, -9, -9};
    pthread_t t;
    pthread_create(&t, NULL, thread_device, seen);
    pthread_join(t, NULL);
    CHECK(seen[0] == 0 && seen[1] == 1 && seen[2] == other_device);
    CHECK(tc_test_current_device() == 0); /* main thread unchanged */

    /* guards, nested, and the negative no-op */
    tc_device_guard g1 = tc_device_guard_enter(n - 1);
    CHECK(g1.status == TC_OK && tc_test_current_device() == n - 1);
    tc_device_guard g2 = tc_device_guard_enter(0);
    CHECK(g2.status == TC_OK && tc_test_current_device() == 0);
    tc_device_guard g3 = tc_device_guard_enter(-1);
    CHECK(g3.status == TC_OK && tc_test_current_device() == 0);
    tc_device_guard_exit(&g3);
    tc_device_guard_exit(&g2);
    CHECK(tc_test_current_device() == n - 1);
    tc_device_guard_exit(&g1);
    CHECK(tc_test_current_device() == 0);

    /* bad devices change nothing */
    tc_device_guard bad = tc_device_guard_enter(99);
    CHECK(bad.status == TC_ERROR_INVALID_DEVICE);
    CHECK(strstr(tc_last_error(), "device 99 does not exist") != NULL);
    tc_device_guard_exit(&bad);
    CHECK(tc_test_current_device() == 0);
    CHECK_STATUS(tc_set_device(99), TC_ERROR_INVALID_DEVICE);
    CHECK(tc_test_current_device() == 0);
    CHECK_OK(tc_set_device(-5)); /* negative: no-op, as in PyTorch */
    const char *bad_name = "unchanged";
    CHECK_STATUS(tc_get_device_name(99, &bad_name), TC_ERROR_INVALID_DEVICE);
    CHECK(strncmp(tc_last_error(), "tc_get_device_name: device 99 does not exist", 44) == 0);
    CHECK_STATUS(tc_get_device_name(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(bad_name, "unchanged") == 0);
    bool can = true;
    CHECK_STATUS(tc_can_device_access_peer(0, 99, &can), TC_ERROR_INVALID_DEVICE);
    CHECK(strncmp(tc_last_error(), "tc_can_device_access_peer: device 99", 36) == 0);
    CHECK_STATUS(tc_can_device_access_peer(99, 0, &can), TC_ERROR_INVALID_DEVICE);
    CHECK_STATUS(tc_can_device_access_peer(0, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(can);
    int cur = -5;
    CHECK_STATUS(tc_current_device(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_current_device(&cur));
    CHECK(cur == 0);
    CHECK(tc_test_current_device() == 0);
    int major = -7, minor = -7;
    CHECK_STATUS(tc_get_device_capability(99, &major, &minor), TC_ERROR_INVALID_DEVICE);
    CHECK(strncmp(tc_last_error(), "tc_get_device_capability: ", 26) == 0);
    CHECK(major == -7 && minor == -7);
    tc_device_properties sentinel, props;
    memset(&sentinel, 0x5c, sizeof sentinel);
    memset(&props, 0x5c, sizeof props);
    CHECK_STATUS(tc_get_device_properties(99, &props), TC_ERROR_INVALID_DEVICE);
    CHECK(memcmp(&props, &sentinel, sizeof props) == 0);
    size_t fb = 3, tb = 3;
    CHECK_STATUS(tc_mem_get_info(99, &fb, &tb), TC_ERROR_INVALID_DEVICE);
    CHECK(strncmp(tc_last_error(), "tc_mem_get_info: ", 17) == 0);
    CHECK(fb == 3 && tb == 3);
    CHECK_STATUS(tc_synchronize(99), TC_ERROR_INVALID_DEVICE);
    CHECK(strncmp(tc_last_error(), "tc_synchronize: ", 16) == 0);
    CHECK_STATUS(tc_set_device(99), TC_ERROR_INVALID_DEVICE);
    CHECK(strncmp(tc_last_error(), "tc_set_device: ", 15) == 0);
    tc_device_guard bad_guard = tc_device_guard_enter(99);
    CHECK(strncmp(tc_last_error(), "tc_device_guard_enter: ", 23) == 0);
    tc_device_guard_exit(&bad_guard);

    for (int d = 0; d < n; d++) {
        tc_device_properties p;
        CHECK_OK(tc_get_device_properties(d, &p));
        const char *name = NULL;
        CHECK_OK(tc_get_device_name(d, &name));
        CHECK(name && strcmp(name, p.name) == 0 && strlen(name) > 3);
        major = 0, minor = -1;
        CHECK_OK(tc_get_device_capability(d, &major, &minor));
        CHECK(major == p.major && minor == p.minor && major >= 7 && minor >= 0);
        CHECK(p.total_memory > ((size_t)1 << 30));
        CHECK(p.multi_processor_count > 0 && p.warp_size == 32);
        CHECK(p.max_threads_per_block >= 512 && p.l2_cache_size > 0);
        CHECK(p.clock_rate_khz > 100000 && p.memory_bus_width > 0);
        size_t free_b = 0, total_b = 0;
        CHECK_OK(tc_mem_get_info(d, &free_b, &total_b));
        CHECK(free_b > 0 && free_b <= total_b);
        CHECK(total_b == p.total_memory);
        bool self = true;
        CHECK_OK(tc_can_device_access_peer(d, d, &self));
        CHECK(!self);
        CHECK_OK(tc_synchronize(d));
        printf("cuda:%d %s cc %d.%d, %d SMs, %.1f GiB\n", d, name, major, minor,
               p.multi_processor_count, total_b / 1073741824.0);
    }
    CHECK_OK(tc_synchronize(-1));
    CHECK_OK(tc_ipc_collect());
    CHECK(tc_test_current_device() == 0); /* the calls above restored the device */

    /* what this build carries */
    CHECK(strstr(tc_get_arch_list(), "sm_90") != NULL);
    CHECK(strstr(tc_get_gencode_flags(), "-gencode arch=compute_90,code=sm_90") != NULL);
    CHECK(tc_cuda_runtime_version() >= 12000 && tc_cuda_driver_version() >= 12000);

    /* NULL out-pointers */
    CHECK_STATUS(tc_get_device_capability(0, NULL, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_get_device_properties(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_mem_get_info(0, NULL, NULL), TC_ERROR_INVALID_ARGUMENT);
    return TC_TEST_DONE();
}
