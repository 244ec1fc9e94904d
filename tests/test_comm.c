/* torch.cuda.comm's argument checks, with or without a GPU. Every collective
 * checks NULL arrays, empty lists, CPU tensors where GPU ones are needed,
 * negative device numbers in a device list (an error naming the value, as
 * PyTorch raises one), bad chunk sizes and dims, and writes no output on
 * failure; an empty broadcast does nothing. Where the checks pass without a
 * GPU the call answers TC_ERROR_NO_DEVICE (test_comm_cuda checks the values
 * on a GPU). Every call here fails or does nothing on any machine. */
#include <string.h>

#include "tc_test.h"
#include "tcuda/comm.h"

static tc_tensor *const sentinel = (tc_tensor *)0x1;

static void test_broadcast(tc_tensor *cpu)
{
    tc_tensor *out[4] = {sentinel, sentinel, sentinel, sentinel};
    int devs[2] = {0, 1}, neg[2] = {0, -1}, current[1] = {TC_CURRENT_DEVICE}, low[1] = {-7};
    CHECK_STATUS(tc_comm_broadcast(NULL, devs, 2, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_comm_broadcast: ") == tc_last_error());
    /* a device list holds GPU indices >= 0: no current device inside it */
    CHECK_STATUS(tc_comm_broadcast(cpu, neg, 2, out), TC_ERROR_INVALID_DEVICE);
    CHECK(strstr(tc_last_error(), "devices[1] is -1") != NULL);
    CHECK_STATUS(tc_comm_broadcast(cpu, current, 1, out), TC_ERROR_INVALID_DEVICE);
    CHECK_STATUS(tc_comm_broadcast(cpu, low, 1, out), TC_ERROR_INVALID_DEVICE);
    CHECK(strstr(tc_last_error(), "-7") != NULL);
    CHECK_STATUS(tc_comm_broadcast(cpu, NULL, 2, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast(cpu, devs, 2, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast(cpu, devs, -1, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast(cpu, devs, 65, out), TC_ERROR_INVALID_ARGUMENT);
    /* nothing to do: as PyTorch's broadcast to no devices */
    CHECK_OK(tc_comm_broadcast(cpu, NULL, 0, NULL));
    if (!tc_is_available()) /* a CPU source is taken; then there is no GPU */
        CHECK_STATUS(tc_comm_broadcast(cpu, devs, 1, out), TC_ERROR_NO_DEVICE);

    /* broadcast_out: GPU outputs of t's sizes and dtype */
    CHECK_STATUS(tc_comm_broadcast_out(cpu, NULL, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast_out(cpu, &cpu, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "output 0 must be on a GPU") != NULL);
    CHECK_STATUS(tc_comm_broadcast_out(cpu, &cpu, -1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_comm_broadcast_out(cpu, NULL, 0));

    /* broadcast_coalesced: CPU tensors are taken, buffer_size 0 too */
    const tc_tensor *list[2] = {cpu, cpu};
    CHECK_STATUS(tc_comm_broadcast_coalesced(list, 2, neg, 2, 0, out), TC_ERROR_INVALID_DEVICE);
    CHECK_STATUS(tc_comm_broadcast_coalesced(list, 0, devs, 2, 1024, out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast_coalesced(list, 2, devs, 0, 1024, out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast_coalesced(NULL, 2, devs, 2, 1024, out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast_coalesced(list, 2, devs, 2, 1024, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    if (!tc_is_available())
        CHECK_STATUS(tc_comm_broadcast_coalesced(list, 2, devs, 1, 0, out), TC_ERROR_NO_DEVICE);
    for (int i = 0; i < 4; i++)
        CHECK(out[i] == sentinel);
}

static void test_reduce(tc_tensor *cpu)
{
    tc_tensor *out[2] = {sentinel, sentinel};
    const tc_tensor *list[1] = {cpu};
    CHECK_STATUS(tc_comm_reduce_add(NULL, 1, 0, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_reduce_add(list, 0, 0, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_reduce_add(list, 1, 0, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "input 0 must be on a GPU") != NULL);
    CHECK_STATUS(tc_comm_reduce_add(list, 1, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_reduce_add_coalesced(list, 1, 1, 0, 0, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_reduce_add_coalesced(list, 1, 0, 0, 0, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_reduce_add_coalesced(list, 0, 1, 0, 0, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(out[0] == sentinel && out[1] == sentinel);
}

static void test_scatter(tc_tensor *cpu)
{
    tc_tensor *out[4] = {sentinel, sentinel, sentinel, sentinel};
    int n_out = -5, devs[2] = {0, 1}, neg[2] = {0, -1};
    int64_t bad_sum[2] = {1, 2}, negative[2] = {-1, 5}, zero[2] = {4, 0}, good[2] = {1, 3};
    CHECK_STATUS(tc_comm_scatter(cpu, devs, 2, bad_sum, 0, NULL, out, &n_out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "add up to 3") != NULL);
    CHECK_STATUS(tc_comm_scatter(cpu, devs, 2, negative, 0, NULL, out, &n_out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "chunk_sizes[0] is -1") != NULL);
    /* a zero chunk passes the chunk checks (the device list fails after) */
    CHECK_STATUS(tc_comm_scatter(cpu, neg, 2, zero, 0, NULL, out, &n_out), TC_ERROR_INVALID_DEVICE);
    CHECK(strstr(tc_last_error(), "devices[1] is -1") != NULL);
    CHECK_STATUS(tc_comm_scatter(cpu, devs, 2, good, 2, NULL, out, &n_out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "dim 2") != NULL);
    CHECK_STATUS(tc_comm_scatter(cpu, devs, 0, NULL, 0, NULL, out, &n_out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_scatter(cpu, devs, 2, good, 0, NULL, NULL, &n_out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_scatter(cpu, devs, 2, good, 0, NULL, out, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    tc_tensor *scalar;
    CHECK_OK(tc_tensor_zeros(0, NULL, TC_FLOAT32, (tc_device){TC_CPU, -1}, &scalar));
    CHECK_STATUS(tc_comm_scatter(scalar, devs, 2, NULL, 0, NULL, out, &n_out), TC_ERROR_SHAPE);
    if (!tc_is_available()) {
        int one[1] = {0};
        CHECK_STATUS(tc_comm_scatter(cpu, one, 1, NULL, -1, NULL, out, &n_out), TC_ERROR_NO_DEVICE);
    }

    /* scatter_out: GPU outputs, at least one */
    CHECK_STATUS(tc_comm_scatter_out(cpu, NULL, 1, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_scatter_out(cpu, &cpu, 0, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_scatter_out(cpu, &cpu, 1, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_comm_scatter_out: output 0 must be on a GPU") ==
          tc_last_error());
    CHECK_STATUS(tc_comm_scatter_out(cpu, &cpu, 1, 5, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_scatter_out(scalar, &cpu, 1, 0, NULL), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_comm_scatter_out(NULL, &cpu, 1, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(n_out == -5);
    for (int i = 0; i < 4; i++)
        CHECK(out[i] == sentinel);
    tc_tensor_release(scalar);
}

static void test_gather(tc_tensor *cpu)
{
    tc_tensor *out = sentinel;
    const tc_tensor *list[1] = {cpu};
    CHECK_STATUS(tc_comm_gather(NULL, 1, 0, -1, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_gather(list, 0, 0, -1, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_gather(list, 1, 0, -1, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tensor 0 must be on a GPU") != NULL);
    CHECK_STATUS(tc_comm_gather(list, 1, 0, -1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(out == sentinel);
    /* gather_out: the out tensor may be on the CPU, the inputs not */
    CHECK_STATUS(tc_comm_gather_out(list, 1, 0, cpu), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_gather_out(list, 1, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_gather_out(NULL, 1, 0, cpu), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_gather_out(list, 0, 0, cpu), TC_ERROR_INVALID_ARGUMENT);
}

int main(void)
{
    tc_test_init();
    int64_t sz[2] = {4, 3};
    tc_tensor *cpu;
    CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT32, (tc_device){TC_CPU, -1}, &cpu));
    test_broadcast(cpu);
    test_reduce(cpu);
    test_scatter(cpu);
    test_gather(cpu);

    /* a released tensor is a bad handle, not a crash */
    tc_tensor *dead, *out[1] = {sentinel};
    int devs[1] = {0};
    CHECK_OK(tc_tensor_zeros(1, sz, TC_FLOAT32, (tc_device){TC_CPU, -1}, &dead));
    CHECK_OK(tc_tensor_release(dead));
    CHECK_STATUS(tc_comm_broadcast(dead, devs, 1, out), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_comm_scatter_out(dead, &cpu, 1, 0, NULL), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_comm_gather_out((const tc_tensor *const *)&cpu, 1, 0, dead),
                 TC_ERROR_INVALID_HANDLE);
    CHECK(out[0] == sentinel);
    tc_tensor_release(cpu);
    return TC_TEST_DONE();
}
