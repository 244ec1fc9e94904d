/* The CUDA tensor backend: the backend table (kernels launched on the current
 * stream of the tensor's device) and copies that cross devices.
 *
 * Copy rules, as the CUDA semantics seed says: host to device returns once
 * the source was read (pageable memory is staged by CUDA; pinned memory with
 * non_blocking is read later by the DMA engine); device to host waits for the
 * stream unless the destination is pinned and non_blocking was asked (then a
 * sync point is not reached). Device to device between GPUs goes on the
 * destination's current stream, ordered after the source's current stream
 * and before any later work on it. Strided or converting copies go through a
 * dense temporary on the side that has the kernels. */
#include <string.h>

#include "base/env.h"
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

/* ---- copies across devices --------------------------------------------------------- */

static bool dense_as(const tc_tensor *src, const tc_tensor *dst)
{
    return src->dtype == dst->dtype && src->ndim == dst->ndim && tc__is_contiguous(src) &&
           memcmp(src->sizes, dst->sizes, sizeof(int64_t) * (size_t)dst->ndim) == 0;
}

/* src (already on `device`'s side) as a dense tensor with dst's dtype and
 * sizes on src's device: src itself when it is one already. */
static tc_status dense_source(const tc_tensor *src, const tc_tensor *dst, tc_tensor **out)
{
    if (dense_as(src, dst)) {
        *out = tc__tensor_ref((tc_tensor *)src);
        return TC_OK;
    }
    tc_tensor *t;
    TC_TRY(tc__new_tensor(dst->ndim, dst->sizes, dst->dtype, src->storage->device, false, &t));
    tc_status st = tc__copy_local(t, src);
    if (st != TC_OK) {
        tc_tensor_release(t);
        return st;
    }
    *out = t;
    return TC_OK;
}

/* dst itself when dense, else a dense temporary like dst on dst's device. */
static tc_status dense_target(tc_tensor *dst, tc_tensor **out)
{
    if (tc__is_contiguous(dst)) {
        *out = tc__tensor_ref(dst);
        return TC_OK;
    }
    return tc__new_tensor(dst->ndim, dst->sizes, dst->dtype, dst->storage->device, false, out);
}

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

tc_status tc__cuda_copy(tc_tensor *dst, const tc_tensor *src, bool non_blocking)
{
    tc_device dd = dst->storage->device, sd = src->storage->device;
    size_t bytes = (size_t)tc__numel(dst->ndim, dst->sizes) * tc_dtype_size(dst->dtype);
    if (bytes == 0)
        return TC_OK;
    bool d2h = dd.type == TC_CPU;
    bool h2d = sd.type == TC_CPU;
    /* Decide first whether this copy waits, so that sync debug mode 2 refuses
     * it before anything was queued. */
    bool wait = d2h && !(non_blocking && dst->storage->pinned && tc__is_contiguous(dst));
    if (wait)
        TC_TRY(tc__sync_point_on(dst->storage->pinned ? "a blocking copy to host memory"
                                                      : "a copy to pageable host memory",
                                 tc__current_cuda_stream(sd.index)));
    else if (h2d && !(non_blocking && src->storage->pinned))
        TC_TRY(tc__sync_check(src->storage->pinned ? "a blocking copy from host memory"
                                                   : "a copy from pageable host memory",
                              tc__current_cuda_stream(dd.index)));
    tc_tensor *s = NULL, *d = NULL;
    tc_status st = dense_source(src, dst, &s);
    if (st == TC_OK)
        st = dense_target(dst, &d);
    int dev = h2d ? dd.index : sd.index;
    tc_device_guard g = {.prev_device = -1};
    if (st == TC_OK) {
        g = tc_device_guard_enter(d2h || h2d ? dev : dd.index);
        st = g.status;
    }
    if (st != TC_OK) {
        tc_tensor_release(s);
        tc_tensor_release(d);
        return st;
    }
    cudaError_t err;
    if (h2d || d2h) {
        cudaStream_t cs = tc__current_cuda_stream(dev);
        err = cudaMemcpyAsync(tc__data(d), tc__data(s), bytes,
                              h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, cs);
        bool waited = false;
        if (err == cudaSuccess &&
            (wait || (h2d && !non_blocking && src->storage->pinned && s == src))) {
            err = cudaStreamSynchronize(cs);
            waited = true;
        }
        if (err != cudaSuccess)
            st = tc__cuda_fail(
                err, h2d ? "cudaMemcpyAsync (host to device)" : "cudaMemcpyAsync (device to host)",
                __FILE__, __LINE__);
        /* pinned memory is read or written later: its reuse waits for cs */
        else
            st = tc__storage_record_stream(h2d ? s->storage : d->storage, (void *)cs);
        /* the copy waited: what kernels before it found is reported now */
        if (st == TC_OK && waited)
            st = tc__kernel_errors_check(dev);
    } else {
        cudaStream_t ss = tc__current_cuda_stream(sd.index), ds = tc__current_cuda_stream(dd.index);
        st = enable_peer(dd.index, sd.index);
        if (st == TC_OK)
            st = enable_peer(sd.index, dd.index);
        if (st == TC_OK)
            st = order_streams(sd.index, ss, dd.index, ds);
        if (st == TC_OK) {
            err = cudaMemcpyPeerAsync(tc__data(d), dd.index, tc__data(s), sd.index, bytes, ds);
            if (err != cudaSuccess)
                st = tc__cuda_fail(err, "cudaMemcpyPeerAsync", __FILE__, __LINE__);
        }
        /* later work on the source stream (and the temporary's free) waits */
        if (st == TC_OK)
            st = order_streams(dd.index, ds, sd.index, ss);
        if (st == TC_OK)
            st = tc__switch_device(dd.index);
    }
    tc_device_guard_exit(&g);
    if (st == TC_OK && d != dst)
        st = tc__copy_local(dst, d); /* on the destination device (the CPU after a wait) */
    tc_tensor_release(s);
    tc_tensor_release(d);
    return st;
}
