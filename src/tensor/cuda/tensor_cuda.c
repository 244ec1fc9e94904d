/* The CUDA tensor backend: the backend table (kernels launched on the current
 * stream of the tensor's device) and the bytes of dense tensors moved
 * between devices (the seam's transfer; tensor/tensor_copy_across.c decides
 * which copies wait and makes the dense temporaries). Host <-> GPU copies
 * go on the GPU's current stream; between GPUs on the destination's current
 * stream, ordered after the source's current stream and before any later
 * work on it. */
#include <string.h>

#include "tensor/tensor_internal.h"
#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "runtime/cuda/kernel_errors.h"
#include "tensor/cuda/kernels/kernels.h"
#include "tensor_cuda.h"

static tc_status cu_unary(int device, tc__op op, tc_dtype dt, const tc__iter *it)
{
    TC_LAUNCH(device, "unary_kernel", tc__k_unary(cs_, tc__sm_count_for_grid(device), op, dt, it));
}
static tc_status cu_binary(int device, tc__op op, tc_dtype dt, const tc__iter *it)
{
    TC_LAUNCH(device, "binary_kernel",
              tc__k_binary(cs_, tc__sm_count_for_grid(device), op, dt, it));
}
static tc_status cu_where(int device, tc_dtype dt, const tc__iter *it)
{
    TC_LAUNCH(device, "where_kernel", tc__k_where(cs_, tc__sm_count_for_grid(device), dt, it));
}
static tc_status cu_fill(int device, tc_dtype dt, void *out, int64_t n, tc__fill v)
{
    TC_LAUNCH(device, "fill_kernel", tc__k_fill(cs_, tc__sm_count_for_grid(device), dt, out, n, v));
}

/* Dense copies of a MiB and more go to cudaMemcpyAsync (the copy engines'
 * bandwidth); smaller ones to tcuda's copy kernel, whose start and finish on
 * the GPU take less time, and which takes part in a graph's programmatic
 * edges (graph_pdl.c), where a memcpy node does not. */
enum { MEMCPY_FROM = 1 << 20 };

static tc_status cu_convert(int device, tc_dtype dst, tc_dtype src, const tc__iter *it)
{
    if (dst == src && it->contiguous && it->numel * (int64_t)tc_dtype_size(dst) >= MEMCPY_FROM) {
        tc_device_guard g = tc_device_guard_enter(device);
        TC_TRY(g.status);
        cudaError_t err = cudaMemcpyAsync(
            it->data[0], it->data[1], (size_t)it->numel * tc_dtype_size(dst),
            cudaMemcpyDeviceToDevice, tc__current_cuda_stream(device));
        tc_device_guard_exit(&g);
        TC_CUDA_CHECK(err);
        return TC_OK;
    }
    TC_LAUNCH(device, "convert_kernel",
              tc__k_convert(cs_, tc__sm_count_for_grid(device), dst, src, it));
}

static tc_status cu_reduce(int device, tc__op op, tc_dtype in_t, tc_dtype out_t, const void *in,
                           void *out, int64_t outer, int64_t r, int64_t inner)
{
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t cs = tc__current_cuda_stream(device);
    /* partial results, from the cache on this stream: freed as soon as the
     * kernels are queued, reused only by later work on the same stream */
    void *scratch = NULL;
    size_t sb = tc__k_reduce_scratch(tc__sm_count_for_grid(device), in_t, outer, r, inner);
    tc_status st = tc__device_alloc(device, cs, sb, &scratch);
    if (st == TC_OK) {
        tc__k_reduce(cs, tc__sm_count_for_grid(device), op, in_t, out_t, in, out, outer, r, inner,
                     scratch);
        st = tc__launch_check(cs, "reduce_kernel");
        (void)tc__device_free(scratch);
    }
    tc_device_guard_exit(&g);
    return st;
}

static tc_status cu_scan(int device, tc__op op, tc_dtype dt, const void *in, void *out,
                         int64_t outer, int64_t r, int64_t inner)
{
    TC_LAUNCH(device, "scan_kernel",
              tc__k_scan(cs_, tc__sm_count_for_grid(device), op, dt, in, out, outer, r, inner));
}

const tc__backend tc__cuda_backend = {
    .unary = cu_unary,
    .binary = cu_binary,
    .where = cu_where,
    .convert = cu_convert,
    .fill = cu_fill,
    .reduce = cu_reduce,
    .matmul = tc__cuda_matmul,
    .scan = cu_scan,
};

/* ---- moving bytes between devices ------------------------------------------------ */

/* Makes `to` (of device to_dev) wait for the work queued on `from` (of
 * device from_dev) so far. The event is made and recorded on from's device and
 * waited for on to's, so that the legacy default stream (handle 0) of each
 * device is the one meant. Leaves to_dev current. */
static tc_status order_streams(int from_dev, cudaStream_t from, int to_dev, cudaStream_t to)
{
    if (tc__tls_device != from_dev)
        TC_TRY(tc__switch_device(from_dev));
    cudaEvent_t ev;
    cudaError_t err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (err == cudaSuccess)
        err = cudaEventRecord(ev, from);
    tc_status st = tc__switch_device(to_dev);
    if (err == cudaSuccess && st == TC_OK)
        err = cudaStreamWaitEvent(to, ev, 0);
    (void)cudaEventDestroy(ev);
    TC_TRY(st);
    TC_CUDA_CHECK(err);
    return TC_OK;
}

/* Enables peer access from `dev` to `peer` once per ordered pair (as PyTorch's
 * get_p2p_access): 1 enabled, 2 not possible. Where CUDA cannot or will not
 * (no P2P path, too many peers), copies still work: CUDA stages them through
 * the host, so that is remembered, not reported. Leaves `dev` current. */
static tc_status enable_peer(int dev, int peer)
{
    static atomic_int state[TC_MAX_DEVICES][TC_MAX_DEVICES];
    if (dev == peer || atomic_load(&state[dev][peer]) != 0)
        return TC_OK;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, dev, peer) != cudaSuccess)
        can = 0;
    if (can) {
        TC_TRY(tc__switch_device(dev));
        cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
        can = err == cudaSuccess || err == cudaErrorPeerAccessAlreadyEnabled;
    }
    (void)cudaGetLastError(); /* the refusals above are not sticky errors */
    atomic_store(&state[dev][peer], can ? 1 : 2);
    return TC_OK;
}

/* Host <-> GPU on the GPU's current stream; the host waits when asked (and
 * then hears of what kernels before the copy found). */
static tc_status copy_host(tc_tensor *d, const tc_tensor *s, size_t bytes, bool wait)
{
    bool h2d = s->storage->device.type == TC_CPU;
    int dev = h2d ? d->storage->device.index : s->storage->device.index;
    cudaStream_t cs = tc__current_cuda_stream(dev);
    cudaError_t err = cudaMemcpyAsync(tc__data(d), tc__data(s), bytes,
                                      h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, cs);
    if (err == cudaSuccess && wait)
        err = cudaStreamSynchronize(cs);
    if (err != cudaSuccess)
        return tc__cuda_fail(
            err, h2d ? "cudaMemcpyAsync (host to device)" : "cudaMemcpyAsync (device to host)",
            __FILE__, __LINE__);
    return wait ? tc__kernel_errors_check(dev) : TC_OK;
}

/* GPU -> GPU on the destination's current stream, after the source's work
 * so far and before its later work (and the source's free). Leaves the
 * destination's device current. */
static tc_status copy_peer(tc_tensor *d, const tc_tensor *s, size_t bytes)
{
    int dd = d->storage->device.index, sd = s->storage->device.index;
    cudaStream_t ss = tc__current_cuda_stream(sd), ds = tc__current_cuda_stream(dd);
    TC_TRY(enable_peer(dd, sd));
    TC_TRY(enable_peer(sd, dd));
    TC_TRY(order_streams(sd, ss, dd, ds));
    cudaError_t err = cudaMemcpyPeerAsync(tc__data(d), dd, tc__data(s), sd, bytes, ds);
    if (err != cudaSuccess)
        return tc__cuda_fail(err, "cudaMemcpyPeerAsync", __FILE__, __LINE__);
    TC_TRY(order_streams(dd, ds, sd, ss));
    return tc__switch_device(dd);
}

tc_status tc__cuda_transfer(tc_tensor *d, const tc_tensor *s, bool wait)
{
    tc_device dd = d->storage->device, sd = s->storage->device;
    size_t bytes = (size_t)tc__numel(d->ndim, d->sizes) * tc_dtype_size(d->dtype);
    bool host = dd.type == TC_CPU || sd.type == TC_CPU;
    /* device to host on the source's device, the others on the destination's */
    tc_device_guard g = tc_device_guard_enter(dd.type == TC_CPU ? sd.index : dd.index);
    TC_TRY(g.status);
    tc_status st = host ? copy_host(d, s, bytes, wait) : copy_peer(d, s, bytes);
    tc_device_guard_exit(&g);
    return st;
}
