# The library's sources, one group per module in layer order (bottom first;
# docs/architecture.md). Every source is listed by name: a new file is added
# here, in its module's group (scripts/check_sources.sh finds one that is
# not). The lists follow the tree's rule: a folder named `cuda` holds what
# needs CUDA and is built only with it; src/nocuda stands in for all of them
# without it.
set(TCUDA_SOURCES
  # base: status, messages, handles, strings, environment switches
  src/base/device_fault.c
  src/base/dtype.c
  src/base/entropy.c
  src/base/env.c
  src/base/handle_pool.c
  src/base/libfile.c
  src/base/status.c
  src/base/strbuf.c
  # access: who touches which bytes on which stream, for the watchers
  src/access/access.c
  # sanitizer: the stream sanitizer (a watcher of access)
  src/sanitizer/sanitizer.c
  src/sanitizer/sanitizer_access.c
  src/sanitizer/sanitizer_capture.c
  src/sanitizer/sanitizer_clocks.c
  src/sanitizer/sanitizer_memory.c
  src/sanitizer/sanitizer_report.c
  src/sanitizer/sanitizer_stacks.c
  # memory: the caching allocator's algorithm
  src/memory/alloc.c
  src/memory/alloc_blocks.c
  src/memory/alloc_config.c
  src/memory/alloc_expandable.c
  src/memory/alloc_history.c
  src/memory/alloc_history_dump.c
  src/memory/alloc_history_events.c
  src/memory/alloc_history_notes.c
  src/memory/alloc_history_stacks.c
  src/memory/alloc_host.c
  src/memory/alloc_inspect.c
  src/memory/alloc_mempool.c
  src/memory/alloc_pools.c
  src/memory/alloc_segments.c
  src/memory/alloc_streams.c
  src/memory/alloc_text.c
  # runtime: devices, streams, events, NVTX, NVML; the device seam
  src/runtime/device_ops.c
  src/runtime/device_parse.c
  # random: generators and Philox draws
  src/random/random.c
  src/random/random_cpu.c
  # tensor: tensors: front end, cpu/ backend, cuda/ backend and kernels
  src/tensor/backends.c
  src/tensor/cpu/cpu_attention_cache.c
  src/tensor/cpu/cpu_index.c
  src/tensor/cpu/cpu_matmul.c
  src/tensor/cpu/cpu_nn.c
  src/tensor/cpu/cpu_nn_backward.c
  src/tensor/cpu/cpu_nn_layers.c
  src/tensor/cpu/cpu_ops.c
  src/tensor/iter.c
  src/tensor/storage.c
  src/tensor/tensor.c
  src/tensor/tensor_attention_backward.c
  src/tensor/tensor_attention_cache.c
  src/tensor/tensor_copy.c
  src/tensor/tensor_copy_across.c
  src/tensor/tensor_index.c
  src/tensor/tensor_matmul.c
  src/tensor/tensor_nn.c
  src/tensor/tensor_nn_backward.c
  src/tensor/tensor_nn_fused.c
  src/tensor/tensor_linear_gelu.c
  src/tensor/tensor_nn_layers.c
  src/tensor/tensor_nn_rows.c
  src/tensor/tensor_nn_loss.c
  src/tensor/tensor_ops.c
  src/tensor/tensor_random.c
  src/tensor/tensor_reduce.c
  src/tensor/tensor_shape.c
  src/tensor/tensor_watch.c
  # optim: optimizers, foreach operations, clip_grad_norm_, the gradient scaler
  src/optim/amp.c
  src/optim/foreach.c
  src/optim/optim.c
  src/optim/optim_cpu.c
  # jit: jiterator
  src/jit/jit.c
  src/jit/jit_cache.c
  src/jit/jit_codegen.c
  src/jit/jit_host.c
  src/jit/jit_parse.c
  # dist: comm, dist and IPC
  src/dist/comm.c
  src/dist/comm_scatter.c
  src/dist/ddp_buckets.c
  src/dist/dist_env.c
  src/dist/rendezvous.c
  src/dist/ipc_handle.c
  src/dist/nccl_version.c
  # io: safetensors
  src/io/json.c
  src/io/safetensors.c
  src/io/safetensors_parse.c
  src/io/safetensors_save.c
  # interop: DLPack
  src/interop/dlpack.c
  # train: training checkpoints
  src/train/checkpoint.c
  src/train/checkpoint_meta.c)
# The cuda/ halves: host code and kernels.
set(TCUDA_CUDA_SOURCES
  # memory
  src/memory/cuda/alloc_providers.c
  src/memory/cuda/memory.c
  src/memory/cuda/memory_allocators.c
  src/memory/cuda/memory_host.c
  src/memory/cuda/memory_mempool.c
  src/memory/cuda/memory_snapshot.c
  src/memory/cuda/memory_stats.c
  # runtime
  src/runtime/cuda/capture.c
  src/runtime/cuda/device.c
  src/runtime/cuda/driver_api.c
  src/runtime/cuda/dynlib.c
  src/runtime/cuda/errors.c
  src/runtime/cuda/event.c
  src/runtime/cuda/init.c
  src/runtime/cuda/kernel_errors.c
  src/runtime/cuda/launch.c
  src/runtime/cuda/nvml.c
  src/runtime/cuda/nvrtc_readahead.c
  src/runtime/cuda/nvtx.c
  src/runtime/cuda/stream.c
  # random
  src/random/cuda/random.cu
  src/random/cuda/random_cuda.c
  # tensor
  src/tensor/cuda/blas.c
  src/tensor/cuda/blas_lt.c
  src/tensor/cuda/index_cuda.c
  src/tensor/cuda/kernels/attention.cu
  src/tensor/cuda/kernels/attention_backward.cu
  src/tensor/cuda/kernels/attention_backward_f32.cu
  src/tensor/cuda/kernels/attention_cache.cu
  src/tensor/cuda/kernels/backward.cu
  src/tensor/cuda/kernels/copy.cu
  src/tensor/cuda/kernels/dropout.cu
  src/tensor/cuda/kernels/elementwise.cu
  src/tensor/cuda/kernels/embedding.cu
  src/tensor/cuda/kernels/gemm_scale.cu
  src/tensor/cuda/kernels/gemm_skinny.cu
  src/tensor/cuda/kernels/gemm_small.cu
  src/tensor/cuda/kernels/index.cu
  src/tensor/cuda/kernels/layer_norm.cu
  src/tensor/cuda/kernels/loss.cu
  src/tensor/cuda/kernels/reduce.cu
  src/tensor/cuda/kernels/rows.cu
  src/tensor/cuda/kernels/scan.cu
  src/tensor/cuda/nn_cuda.c
  src/tensor/cuda/nn_layers_cuda.c
  src/tensor/cuda/tensor_cuda.c
  # optim
  src/optim/cuda/optim.cu
  src/optim/cuda/optim_cuda.c
  # graph
  src/graph/cuda/graph.c
  src/graph/cuda/graph_callables.c
  src/graph/cuda/graph_capture.c
  src/graph/cuda/graph_order.c
  src/graph/cuda/graph_pdl.c
  src/graph/cuda/graph_pools.c
  src/graph/cuda/graph_update.c
  # jit
  src/jit/cuda/nvrtc.c
  # dist
  src/dist/cuda/comm_nccl.c
  src/dist/cuda/ddp.c
  src/dist/cuda/dist.c
  src/dist/cuda/ipc.c
  src/dist/cuda/ipc_event.c
  src/dist/cuda/nccl.c
  src/dist/cuda/pg_join.c
  src/dist/cuda/pg_watch.c
  # cuda: the device seam's table of a CUDA build
  src/cuda/device_ops.c)
# What answers for the cuda/ halves in a build without CUDA.
set(TCUDA_NOCUDA_SOURCES
  src/nocuda/device_ops.c
  src/nocuda/dist.c
  src/nocuda/graph.c
  src/nocuda/ipc.c
  src/nocuda/memory.c
  src/nocuda/nccl.c
  src/nocuda/nocuda.c
  src/nocuda/nvtx.c
  src/nocuda/runtime.c)

# The folder rule, checked where it is cheapest: no list holds another's files.
foreach(_src ${TCUDA_SOURCES})
  if(_src MATCHES "/cuda/|^src/nocuda/")
    message(FATAL_ERROR "${_src} needs CUDA (a cuda/ folder) or stands in for it: not in TCUDA_SOURCES")
  endif()
endforeach()
foreach(_src ${TCUDA_CUDA_SOURCES})
  if(NOT _src MATCHES "/cuda/")
    message(FATAL_ERROR "${_src} is in TCUDA_CUDA_SOURCES but not in a cuda/ folder")
  endif()
endforeach()
foreach(_src ${TCUDA_NOCUDA_SOURCES})
  if(NOT _src MATCHES "^src/nocuda/")
    message(FATAL_ERROR "${_src} is in TCUDA_NOCUDA_SOURCES but not in src/nocuda")
  endif()
endforeach()
# Kernels on Hopper's architecture-specific instructions (wgmma): CMakeLists.txt
# builds them apart, for sm_90a where the architectures hold 90.
set(TCUDA_SM90A_SOURCES
  src/tensor/cuda/kernels/attention_backward_sm90.cu
  src/tensor/cuda/kernels/attention_sm90.cu)
