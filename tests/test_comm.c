/* torch.cuda.comm without a GPU: argument validation. Every collective
 * checks NULL arrays, empty lists, CPU tensors where GPU ones are needed,
 * devices listed twice, bad chunk sizes and dims, and writes no output on
 * failure; a valid call then answers TC_ERROR_NO_DEVICE (or runs, where a
 * GPU exists: test_comm_cuda checks the values). */
#include <string.h>

#include "tc_test.h"
#include "tcuda/comm.h"

int main(void)
{
    tc_test_init();
    int64_t sz[2] = {4, 3};
    tc_tensor *cpu;
    CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT32, (tc_device){TC_CPU, -1}, &cpu));
    tc_tensor *sentinel = (tc_tensor *)0x1;
    tc_tensor *out[4] = {sentinel, sentinel, sentinel, sentinel};
    int devs[2] = {0, 1}, twice[2] = {0, 0};

    /* broadcast */
    CHECK_STATUS(tc_comm_broadcast(NULL, devs, 2, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast(cpu, devs, 2, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_comm_broadcast: ") == tc_last_error());
    CHECK(strstr(tc_last_error(), "GPU") != NULL);
    CHECK_STATUS(tc_comm_broadcast_out(cpu, NULL, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast_out(cpu, &cpu, 0), TC_ERROR_INVALID_ARGUMENT);

    /* broadcast_coalesced */
    const tc_tensor *list[1] = {cpu};
    CHECK_STATUS(tc_comm_broadcast_coalesced(list, 1, devs, 2, 0, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast_coalesced(list, 0, devs, 2, 1024, out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast_coalesced(list, 1, devs, 2, 1024, out),
                 TC_ERROR_INVALID_ARGUMENT);

    /* reduce_add */
    CHECK_STATUS(tc_comm_reduce_add(NULL, 1, 0, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_reduce_add(list, 0, 0, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_reduce_add(list, 1, 0, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_reduce_add_coalesced(list, 1, 1, 0, 0, out), TC_ERROR_INVALID_ARGUMENT);

    /* scatter: the source may be a CPU tensor; chunks and dims are checked first */
    int n_out = -5;
    int64_t bad_sum[2] = {1, 2}, zero[2] = {4, 0}, good[2] = {1, 3};
    CHECK_STATUS(tc_comm_scatter(cpu, devs, 2, bad_sum, 0, NULL, out, &n_out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "add up to 3") != NULL);
    CHECK_STATUS(tc_comm_scatter(cpu, devs, 2, zero, 0, NULL, out, &n_out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_scatter(cpu, devs, 2, good, 2, NULL, out, &n_out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "dim 2") != NULL);
    CHECK_STATUS(tc_comm_scatter(cpu, twice, 2, good, 0, NULL, out, &n_out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "listed twice") != NULL);
    CHECK_STATUS(tc_comm_scatter(cpu, devs, 0, NULL, 0, NULL, out, &n_out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_scatter(cpu, devs, 2, good, 0, NULL, NULL, &n_out),
                 TC_ERROR_INVALID_ARGUMENT);
    tc_tensor *scalar;
    CHECK_OK(tc_tensor_zeros(0, NULL, TC_FLOAT32, (tc_device){TC_CPU, -1}, &scalar));
    CHECK_STATUS(tc_comm_scatter(scalar, devs, 2, NULL, 0, NULL, out, &n_out), TC_ERROR_SHAPE);
    if (!tc_is_available()) {
        int one[1] = {0};
        CHECK_STATUS(tc_comm_scatter(cpu, one, 1, NULL, -1, NULL, out, &n_out), TC_ERROR_NO_DEVICE);
    }
    CHECK(n_out == -5);

    /* gather */
    CHECK_STATUS(tc_comm_gather(NULL, 1, 0, -1, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_gather(list, 1, 0, -1, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_gather(list, 1, 0, -3, out), TC_ERROR_INVALID_ARGUMENT);

    /* a released tensor is a bad handle, not a crash */
    tc_tensor *dead;
    CHECK_OK(tc_tensor_zeros(1, sz, TC_FLOAT32, (tc_device){TC_CPU, -1}, &dead));
    CHECK_OK(tc_tensor_release(dead));
    CHECK_STATUS(tc_comm_broadcast(dead, devs, 1, out), TC_ERROR_INVALID_HANDLE);

    for (int i = 0; i < 4; i++)
        CHECK(out[i] == sentinel);
    tc_tensor_release(scalar);
    tc_tensor_release(cpu);
    return TC_TEST_DONE();
}
