/* CPU-only: status names, the thread-local message, versions, dtypes, device
 * parsing, sync debug mode settings, the parsers of CUDA_LAUNCH_BLOCKING and
 * TCUDA_SYNC_DEBUG_MODE, and NVTX range depths. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/device_fault.h"
#include "base/env.h"
#include "tc_test.h"

/* CUDA_LAUNCH_BLOCKING: true only for 1/true/yes/on, false for unset, empty,
 * 0/false/no/off (any case); anything else is an error naming the variable
 * and the value, and writes nothing. 0.1 took every value but "0" and
 * "false" for true, so "off", "no" and "FALSE" turned blocking on. */
static void check_launch_blocking_parser(void)
{
    static const char *const on[] = {"1", "true", "TRUE", "True", "yes", "YES", "on", "On"};
    static const char *const off[] = {"", "0", "false", "FALSE", "False", "no", "NO", "off", "OFF"};
    static const char *const bad[] = {"2", "junk", "enable", "1 ", " 1", "offf", "-1", "y"};
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        bool v = false;
        CHECK_OK(tc__parse_launch_blocking(on[i], &v));
        CHECK(v == true);
    }
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
        bool v = true;
        CHECK_OK(tc__parse_launch_blocking(off[i], &v));
        CHECK(v == false);
    }
    bool unset = true;
    CHECK_OK(tc__parse_launch_blocking(NULL, &unset));
    CHECK(unset == false);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool v = true;
        CHECK_STATUS(tc__parse_launch_blocking(bad[i], &v), TC_ERROR_INVALID_ARGUMENT);
        char want[64];
        snprintf(want, sizeof want, "CUDA_LAUNCH_BLOCKING='%s'", bad[i]);
        CHECK(strstr(tc_last_error(), want) != NULL);
        CHECK(strstr(tc_last_error(), "off") != NULL); /* says what would be right */
        CHECK(v == true);
    }
}

/* TCUDA_SYNC_DEBUG_MODE: 0/1/2 and PyTorch's names default/warn/error in any
 * case; unset or empty is 0; anything else an error (0.1 took "3", "WARN"
 * and "junk" silently for 0). */
static void check_sync_debug_mode_parser(void)
{
    static const struct {
        const char *text;
        int mode;
    } good[] = {{"0", 0},    {"default", 0}, {"DEFAULT", 0}, {"", 0},      {"1", 1},    {"warn", 1},
                {"WARN", 1}, {"Warn", 1},    {"2", 2},       {"error", 2}, {"ERROR", 2}};
    static const char *const bad[] = {"3", "-1", "junk", "warning", "02", "1.0", " 1", "off"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int m = -7;
        CHECK_OK(tc__parse_sync_debug_mode(good[i].text, &m));
        CHECK(m == good[i].mode);
    }
    int unset = -7;
    CHECK_OK(tc__parse_sync_debug_mode(NULL, &unset));
    CHECK(unset == 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int m = -7;
        CHECK_STATUS(tc__parse_sync_debug_mode(bad[i], &m), TC_ERROR_INVALID_ARGUMENT);
        char want[64];
        snprintf(want, sizeof want, "TCUDA_SYNC_DEBUG_MODE='%s'", bad[i]);
        CHECK(strstr(tc_last_error(), want) != NULL);
        CHECK(strstr(tc_last_error(), "\"warn\"") != NULL);
        CHECK(m == -7);
    }
}

/* Device faults (what an aborted process group leaves): raised per device
 * and owner, reported by the check with the reason, cleared by owner. */
static void check_device_faults(void)
{
    int a, b;
    CHECK_OK(tc__device_fault_check(0, "a wait"));
    tc__device_fault_raise(1, &a, "group A was aborted");
    tc__device_fault_raise(1, &a, "a second reason is dropped");
    tc__device_fault_raise(2, &b, "group B was aborted");
    CHECK_OK(tc__device_fault_check(0, "a wait"));
    CHECK_STATUS(tc__device_fault_check(1, "tc_stream_synchronize"), TC_ERROR_INVALID_STATE);
    CHECK(strstr(tc_last_error(), "tc_stream_synchronize") != NULL);
    CHECK(strstr(tc_last_error(), "cuda:1") != NULL);
    CHECK(strstr(tc_last_error(), "group A was aborted") != NULL);
    CHECK_STATUS(tc__device_fault_check(-1, "any"), TC_ERROR_INVALID_STATE);
    tc__device_fault_clear(&a);
    CHECK_OK(tc__device_fault_check(1, "a wait"));
    CHECK_STATUS(tc__device_fault_check(2, "a wait"), TC_ERROR_INVALID_STATE);
    CHECK(strstr(tc_last_error(), "group B") != NULL);
    tc__device_fault_clear(&b);
    CHECK_OK(tc__device_fault_check(-1, "a wait"));
}

static void *other_thread(void *arg)
{
    /* The message is per thread: a failure here does not show in main. */
    tc_device d;
    (void)tc_device_parse("gpu", &d);
    *(int *)arg = strstr(tc_last_error(), "\"gpu\"") != NULL;
    /* Ranges are per thread too. */
    (void)tc_nvtx_range_push("thread range", (int *)arg + 1);
    (void)tc_nvtx_range_pop(NULL);
    return NULL;
}

int main(void)
{
    check_device_faults();
    tc_test_init();

    CHECK(strcmp(tc_status_string(TC_OK), "TC_OK") == 0);
    CHECK(strcmp(tc_status_string(TC_ERROR_NO_DEVICE), "TC_ERROR_NO_DEVICE") == 0);
    CHECK(strcmp(tc_status_string((tc_status)12345), "TC_ERROR_UNKNOWN") == 0);
    for (int s = TC_OK; s <= TC_ERROR_RACE; s++)
        CHECK(strncmp(tc_status_string((tc_status)s), "TC_", 3) == 0);

    CHECK(tc_version_code() == TCUDA_VERSION_CODE);
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", TCUDA_VERSION_MAJOR, TCUDA_VERSION_MINOR,
             TCUDA_VERSION_PATCH);
    CHECK(strcmp(tc_version(), version) == 0);

    /* dtypes */
    CHECK(tc_dtype_size(TC_FLOAT32) == 4 && tc_dtype_size(TC_BFLOAT16) == 2);
    CHECK(tc_dtype_size(TC_INT64) == 8 && tc_dtype_size(TC_BOOL) == 1);
    CHECK(tc_dtype_size((tc_dtype)99) == 0);
    CHECK(strcmp(tc_dtype_string(TC_FLOAT16), "float16") == 0);
    CHECK(strcmp(tc_dtype_string((tc_dtype)-1), "invalid") == 0);
    CHECK(tc_dtype_is_floating(TC_BFLOAT16) && !tc_dtype_is_floating(TC_INT32));

    /* device parsing */
    tc_device d = {TC_CPU, 7};
    CHECK_OK(tc_device_parse("cpu", &d));
    CHECK(d.type == TC_CPU);
    CHECK_OK(tc_device_parse("cuda", &d));
    CHECK(d.type == TC_CUDA && d.index == -1);
    CHECK_OK(tc_device_parse("cuda:3", &d));
    CHECK(d.type == TC_CUDA && d.index == 3);
    tc_device before = d;
    CHECK_STATUS(tc_device_parse("cuda:", &d), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_device_parse("cuda:1x", &d), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_device_parse("cuda:-1", &d), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_device_parse("cuda:100000", &d), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_device_parse("gpu", &d), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "\"gpu\"") != NULL);
    CHECK_STATUS(tc_device_parse(NULL, &d), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_device_parse("cpu", NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(d.type == before.type && d.index == before.index); /* failures write nothing */

    /* sync debug mode */
    tc_sync_debug_mode mode = TC_SYNC_DEBUG_MODE_ERROR;
    CHECK_OK(tc_get_sync_debug_mode(&mode));
    CHECK(mode == TC_SYNC_DEBUG_MODE_DEFAULT);
    CHECK_STATUS(tc_get_sync_debug_mode(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_set_sync_debug_mode(TC_SYNC_DEBUG_MODE_WARN));
    CHECK_OK(tc_get_sync_debug_mode(&mode));
    CHECK(mode == TC_SYNC_DEBUG_MODE_WARN);
    CHECK_STATUS(tc_set_sync_debug_mode((tc_sync_debug_mode)3), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(tc_last_error(), "tc_set_sync_debug_mode: mode 3", 30) == 0);
    CHECK_STATUS(tc_set_sync_debug_mode((tc_sync_debug_mode)-1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_get_sync_debug_mode(&mode));
    CHECK(mode == TC_SYNC_DEBUG_MODE_WARN); /* unchanged by the failures */
    CHECK_OK(tc_set_sync_debug_mode(TC_SYNC_DEBUG_MODE_DEFAULT));
    check_launch_blocking_parser();
    check_sync_debug_mode_parser();

    /* NVTX depths, independent of any attached tool */
    int depth = -1;
    CHECK_OK(tc_nvtx_range_push("outer", &depth));
    CHECK(depth == 0);
    CHECK_OK(tc_nvtx_range_push("inner", &depth));
    CHECK(depth == 1);
    tc_nvtx_mark("a mark");
    tc_nvtx_mark(NULL);
    CHECK_STATUS(tc_nvtx_range_push(NULL, &depth), TC_ERROR_INVALID_ARGUMENT);
    CHECK(depth == 1 && strstr(tc_last_error(), "tc_nvtx_range_push: message is NULL"));
    CHECK_OK(tc_nvtx_range_pop(&depth));
    CHECK(depth == 1);
    CHECK_OK(tc_nvtx_range_pop(&depth));
    CHECK(depth == 0);
    CHECK_STATUS(tc_nvtx_range_pop(&depth), TC_ERROR_INVALID_STATE);
    CHECK(depth == 0 && strstr(tc_last_error(), "no range is open") != NULL);
    CHECK_OK(tc_nvtx_range_push("depth not wanted", NULL));
    CHECK_OK(tc_nvtx_range_pop(NULL));

    /* per-thread message and ranges */
    (void)tc_device_parse("cuda:x", &d);
    int results[2] = {0, -5};
    pthread_t t;
    CHECK_OK(tc_nvtx_range_push("main range", &depth));
    CHECK(depth == 0);
    pthread_create(&t, NULL, other_thread, results);
    pthread_join(t, NULL);
    CHECK(results[0] == 1);
    CHECK(results[1] == 0);
    CHECK_OK(tc_nvtx_range_pop(&depth));
    CHECK(depth == 0);
    CHECK(strstr(tc_last_error(), "\"cuda:x\"") != NULL);

    tc_free(NULL);
    return TC_TEST_DONE();
}
