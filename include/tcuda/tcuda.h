/* tcuda: torch.cuda for C. Include this one header to get the whole API. */
#ifndef TCUDA_H
#define TCUDA_H

#include "status.h"
#include "dtype.h"
#include "device.h"
#include "stream.h"
#include "nvtx.h"
#include "random.h"
#include "memory.h"
#include "tensor.h"
#include "shape.h"
#include "indexing.h"
#include "nn.h"
#include "nn_backward.h"
#include "optim.h"
#include "amp.h"
#include "backends.h"
#include "graph.h"
#include "jit.h"
#include "sanitizer.h"
#include "comm.h"
#include "ipc.h"
#include "dist.h"
#include "ddp.h"
#include "nccl.h"
#include "dlpack.h"
#include "safetensors.h"
#include "checkpoint.h"

#endif
