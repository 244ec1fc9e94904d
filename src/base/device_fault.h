/* Devices whose queued GPU work may have gone wrong behind the host's back.
 *
 * A process group that is aborted while its collectives are still queued
 * (a peer died, exited or stopped) unblocks those kernels by aborting the
 * communicator: the streams go on, but the tensors the collectives wrote
 * hold garbage. The group raises a fault on its device before it aborts,
 * and every tcuda call that makes the host wait for that device (stream,
 * event and device synchronizes, blocking copies) checks the faults after
 * its wait: the wait still returns, with TC_ERROR_INVALID_STATE and the
 * group's reason, instead of handing the garbage on as if it were right.
 * The fault lasts until its owner clears it (the group, when destroyed).
 *
 * No CUDA here: a device is an index. Checking costs one atomic load while
 * no fault is raised anywhere. */
#ifndef TCUDA_DEVICE_FAULT_H
#define TCUDA_DEVICE_FAULT_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Raises a fault on device `dev` for `owner` (any unique pointer), with a
 * reason; raising again for the same owner keeps the first reason. */
void tc__device_fault_raise(int dev, const void *owner, const char *reason);
/* Clears every fault `owner` raised. */
void tc__device_fault_clear(const void *owner);
/* TC_OK, or TC_ERROR_INVALID_STATE naming `what` (the wait that ended) and
 * the reason of the first fault on `dev` (a negative `dev`: any device). */
tc_status tc__device_fault_check(int dev, const char *what);

#ifdef __cplusplus
}
#endif

#endif
