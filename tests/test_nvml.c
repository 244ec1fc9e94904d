/* GPU: monitoring through NVML gives values in plausible ranges; the SM
 * clock is in Hz (torch.cuda.clock_rate's unit), at most the device's peak
 * clock as CUDA reports it, and needs an int64_t. */
#include <stdlib.h>

#include "tc_test.h"

int main(void)
{
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    for (int d = 0; d < tc_device_count(); d++) {
        int util = -1, mem = -1, temp = -1, power = -1;
        int64_t clock = -1;
        if (tc_utilization(d, &util) != TC_OK)
            fprintf(stderr, "NVML: %s\n", tc_last_error());
        CHECK_OK(tc_memory_usage(d, &mem));
        CHECK_OK(tc_temperature(d, &temp));
        CHECK_OK(tc_power_draw(d, &power));
        CHECK_OK(tc_clock_rate(d, &clock));
        printf("cuda:%d utilization %d%%, memory %d%%, %d C, %d mW, %lld Hz\n", d, util, mem, temp,
               power, (long long)clock);
        tc_device_properties p;
        CHECK_OK(tc_get_device_properties(d, &p));
        CHECK(util >= 0 && util <= 100);
        CHECK(mem >= 0 && mem <= 100);
        CHECK(temp >= 5 && temp <= 110);
        CHECK(power >= 1000 && power <= 2000000);           /* 1 W to 2 kW, in mW */
        CHECK(clock >= 100000000 && clock <= 4000000000LL); /* 100 MHz to 4 GHz, in Hz */
        CHECK(clock % 1000000 == 0);                        /* NVML reads whole MHz */
        /* the current clock does not exceed CUDA's peak (kHz) beyond rounding */
        CHECK(clock <= (int64_t)p.clock_rate_khz * 1050 + 1000000);
        char *procs = NULL;
        CHECK_OK(tc_list_gpu_processes(d, &procs));
        CHECK(procs != NULL);
        if (procs) {
            char head[16];
            snprintf(head, sizeof head, "GPU:%d\n", d);
            CHECK(strncmp(procs, head, strlen(head)) == 0);
            CHECK(strstr(procs, "process") != NULL || strstr(procs, "no processes") != NULL);
            printf("%s", procs);
            tc_free(procs);
        }
    }
    int v = -7;
    int64_t v64 = -7;
    char *text = NULL;
    CHECK_STATUS(tc_utilization(99, &v), TC_ERROR_INVALID_DEVICE);
    CHECK(strstr(tc_last_error(), "device 99") != NULL);
    CHECK(strncmp(tc_last_error(), "tc_utilization: ", 16) == 0);
    CHECK_STATUS(tc_clock_rate(99, &v64), TC_ERROR_INVALID_DEVICE);
    CHECK(strncmp(tc_last_error(), "tc_clock_rate: device 99", 24) == 0);
    CHECK_STATUS(tc_list_gpu_processes(99, &text), TC_ERROR_INVALID_DEVICE);
    CHECK_STATUS(tc_temperature(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(v == -7 && v64 == -7 && text == NULL);
    return TC_TEST_DONE();
}
