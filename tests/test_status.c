/* CPU-only: status names, the thread-local message, versions, dtypes, device
 * parsing, sync debug mode settings and NVTX range depths. */
#include <pthread.h>
#include <stdlib.h>

#include "tc_test.h"

static void *other_thread(void *arg)
{
    /* The message is per thread: a failure here does not show in main. */
    tc_device d;
    (void)tc_device_parse("gpu", &d);
    *(int *)arg = strstr(tc_last_error(), "\"gpu\"") != NULL;
    /* Ranges are per thread too. */
    *((int *)arg + 1) = tc_nvtx_range_push("thread range");
    (void)tc_nvtx_range_pop();
    return NULL;
}

int main(void)
{
    tc_test_init();

    CHECK(strcmp(tc_status_string(TC_OK), "TC_OK") == 0);
    CHECK(strcmp(tc_status_string(TC_ERROR_NO_DEVICE), "TC_ERROR_NO_DEVICE") == 0);
    CHECK(strcmp(tc_status_string((tc_status)12345), "TC_ERROR_UNKNOWN") == 0);
    for (int s = TC_OK; s <= TC_ERROR_INTERNAL; s++)
        CHECK(strncmp(tc_status_string((tc_status)s), "TC_", 3) == 0);

    CHECK(tc_version_code() == TCUDA_VERSION_CODE);
    CHECK(strcmp(tc_version(), "0.1.0") == 0 || tc_version()[0] != '\0');

    /* dtypes */
    CHECK(tc_dtype_size(TC_FLOAT32) == 4 && tc_dtype_size(TC_BFLOAT16) == 2);
    CHECK(tc_dtype_size(TC_INT64) == 8 && tc_dtype_size(TC_BOOL) == 1);
    CHECK(tc_dtype_size((tc_dtype)99) == 0);
    CHECK(strcmp(tc_dtype_name(TC_FLOAT16), "float16") == 0);
    CHECK(strcmp(tc_dtype_name((tc_dtype)-1), "invalid") == 0);
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
    CHECK(tc_get_sync_debug_mode() == 0);
    CHECK_OK(tc_set_sync_debug_mode(1));
    CHECK(tc_get_sync_debug_mode() == 1);
    CHECK_STATUS(tc_set_sync_debug_mode(3), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_set_sync_debug_mode(-1), TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_get_sync_debug_mode() == 1); /* unchanged by the failures */
    CHECK_OK(tc_set_sync_debug_mode(0));

    /* NVTX depths, independent of any attached tool */
    CHECK(tc_nvtx_range_push("outer") == 0);
    CHECK(tc_nvtx_range_push("inner") == 1);
    tc_nvtx_mark("a mark");
    tc_nvtx_mark(NULL);
    CHECK(tc_nvtx_range_push(NULL) == -1);
    CHECK(tc_nvtx_range_pop() == 1);
    CHECK(tc_nvtx_range_pop() == 0);
    CHECK(tc_nvtx_range_pop() == -1);
    CHECK(strstr(tc_last_error(), "no range is open") != NULL);

    /* per-thread message and ranges */
    (void)tc_device_parse("cuda:x", &d);
    int results[2] = {0, -5};
    pthread_t t;
    CHECK(tc_nvtx_range_push("main range") == 0);
    pthread_create(&t, NULL, other_thread, results);
    pthread_join(t, NULL);
    CHECK(results[0] == 1);
    CHECK(results[1] == 0);
    CHECK(tc_nvtx_range_pop() == 0);
    CHECK(strstr(tc_last_error(), "\"cuda:x\"") != NULL);

    tc_free(NULL);
    return TC_TEST_DONE();
}
