/* The collectives' fast path in a build without CUDA: none (comm.c then
 * checks its arguments and fails with TC_ERROR_NO_DEVICE when it makes a GPU
 * tensor). */
#include "dist/comm_internal.h"
#include "base/internal.h"

static tc_status none(void)
{
    return tc__fail(TC_ERROR_NOT_SUPPORTED, "no fast path for collectives without CUDA");
}

static tc_status broadcast(tc_tensor *const *bufs, const int *devs, int n, int root, size_t bytes)
{
    (void)bufs, (void)devs, (void)n, (void)root, (void)bytes;
    return none();
}

static tc_status reduce(const tc_tensor *const *ins, tc_tensor *out, const int *devs, int n,
                        int root)
{
    (void)ins, (void)out, (void)devs, (void)n, (void)root;
    return none();
}

const tc__comm_accel tc__comm_accel_table = {broadcast, reduce};
