/* Hooks of the memory IPC module (ipc.c) for device.c and memory_stats.c. Not
 * installed. */
#ifndef TCUDA_IPC_INTERNAL_H
#define TCUDA_IPC_INTERNAL_H

#include <stdint.h>

/* Frees the blocks shared by this process whose consumers are all gone. */
void tc__ipc_collect(void);
/* Blocks (and their bytes) of `device` held for consumers in other processes. */
void tc__ipc_shared_stats(int device, int64_t *blocks, int64_t *bytes);

#endif
