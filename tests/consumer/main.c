/* The consumer project's program: links tcuda, makes a CPU tensor and reads
 * it back, so both the headers and the library are proven reachable. */
#include <stdio.h>

#include "tcuda/tcuda.h"

int main(void)
{
    int64_t sizes[2] = {2, 3};
    tc_tensor *t = NULL;
    tc_status st = tc_tensor_full(2, sizes, 1.5, TC_FLOAT32, (tc_device){TC_CPU, -1}, &t);
    double v[6] = {0};
    if (st == TC_OK)
        st = tc_tensor_to_host(t, TC_FLOAT64, v);
    tc_tensor_release(t);
    if (st != TC_OK || v[5] != 1.5) {
        fprintf(stderr, "consumer: %s: %s\n", tc_status_string(st), tc_last_error());
        return 1;
    }
    printf("consumer: tcuda %s works through add_subdirectory\n", tc_version());
    return 0;
}
