/* What the memory IPC module (ipc.c) tells memory_stats.c. Not installed. */
#ifndef TCUDA_IPC_INTERNAL_H
#define TCUDA_IPC_INTERNAL_H

#include <stdint.h>

/* Blocks (and their bytes) of `device` held for consumers in other processes. */
void tc__ipc_shared_stats(int device, int64_t *blocks, int64_t *bytes);

#endif
