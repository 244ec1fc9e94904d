/* The device seam (device_ops.h): which table is in use, and the one rule
 * that resolves a tc_device for tensors and generators. */
#include "device_ops.h"

const tc__device_ops *_Atomic tc__device_ops_current = &tc__device_ops_builtin;

void tc__device_ops_install(const tc__device_ops *ops, const tc__device_ops **prev)
{
    const tc__device_ops *old = atomic_exchange_explicit(&tc__device_ops_current, ops,
                                                         memory_order_acq_rel);
    if (prev)
        *prev = old;
}

tc_status tc__device_resolve(tc_device device, tc_device *out)
{
    *out = (tc_device){TC_CPU, -1}; /* internal: written even on failure, for compilers */
    if (device.type == TC_CPU) {
        TC_CHECK_ARG(device.index == -1 || device.index == 0,
                     "CPU device index %d: the CPU is index -1 (or 0, as \"cpu:0\")", device.index);
        return TC_OK;
    }
    TC_CHECK_ARG(device.type == TC_CUDA, "device type %d is neither TC_CPU nor TC_CUDA",
                 (int)device.type);
    int idx;
    TC_TRY(tc__dev()->resolve(device.index, &idx));
    *out = (tc_device){TC_CUDA, idx};
    return TC_OK;
}
