/* The CUDA indexing backend as the device seam (src/cuda/device_ops.c) sees it.
 * Not installed. */
#ifndef TCUDA_INDEX_CUDA_H
#define TCUDA_INDEX_CUDA_H

#include "tensor/index_internal.h"

extern const tc__index_backend tc__cuda_index_backend;

#endif
