/* The CUDA nn backend's training layers (nn_layers_cuda.c), as nn_cuda.c's
 * table names them: see tc__nn_embedding_bwd and tc__nn_dropout in
 * tensor/nn_internal.h. Not installed. */
#ifndef TCUDA_NN_LAYERS_CUDA_H
#define TCUDA_NN_LAYERS_CUDA_H

#include "tensor/nn_internal.h"

tc_status tc__cuda_nn_embedding_backward(int device, const tc__nn_embedding_bwd *a);
tc_status tc__cuda_nn_dropout(int device, const tc__nn_dropout *a);

#endif
