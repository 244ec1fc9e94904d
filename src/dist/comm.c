/* torch.cuda.comm: collectives between the GPUs of one process, built on
 * tensor copies and adds.
 *
 * Every transfer is a tc_tensor_to / tc_tensor_copy_ between devices, which
 * the CUDA side (tensor_cuda.c) queues on the destination's current stream
 * after an event recorded on the source's current stream, enabling peer
 * access once per device pair; so these functions never synchronize a
 * device, and a device list of one is just a copy. Reductions add on the
 * destination's current stream. Where NCCL is there (comm_internal.h), it
 * carries broadcast and reduce_add instead, on the same current streams, as
 * in PyTorch (only its absence, TC_ERROR_NOT_SUPPORTED, falls back to the
 * copies: an NCCL that fails fails the call). The coalesced forms pack
 * tensors of one
 * dtype into flat buffers of at most buffer_size bytes (one transfer per
 * buffer) and hand back views of the received buffers, as PyTorch does.
 *
 * Invariant: every function validates all its arguments before it queues
 * anything, and on failure releases what it made and writes no output. */
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "comm_internal.h"
#include "runtime/device_ops.h"
#include "tcuda/comm.h"
#include "tensor/tensor_internal.h"

static void release_all(tc_tensor **t, int n)
{
    for (int i = 0; i < n; i++) {
        tc_tensor_release(t[i]);
        t[i] = NULL;
    }
}

/* A live GPU tensor, named `what`. */
static tc_status check_gpu_tensor(const tc_tensor *t, const char *what)
{
    TC_TRY(tc__tensor_check(t, what));
    if (t->storage->device.type != TC_CUDA)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s must be on a GPU, not the CPU", what);
    return TC_OK;
}

/* devices[0..n) resolved into res (-1: the current device), none twice. */
static tc_status resolve_devices(const int *devices, int n, int *res)
{
    TC_CHECK_ARG(devices, "devices is NULL");
    TC_CHECK_ARG(n >= 1, "the device list must not be empty (n = %d)", n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            TC_CHECK_ARG(devices[i] < 0 || devices[i] != devices[j],
                         "device %d is listed twice (at %d and %d)", devices[i], j, i);
    for (int i = 0; i < n; i++) {
        tc_device d;
        TC_TRY(tc__device_resolve((tc_device){TC_CUDA, devices[i] < 0 ? -1 : devices[i]}, &d));
        res[i] = d.index;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            TC_CHECK_ARG(res[i] != res[j], "device %d is listed twice (at %d and %d)", res[i], j,
                         i);
    return TC_OK;
}

static bool same_sizes(const tc_tensor *a, const tc_tensor *b)
{
    return a->ndim == b->ndim && memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

static tc_status check_like(const tc_tensor *ref, const tc_tensor *t, const char *what, int i)
{
    if (t->dtype != ref->dtype)
        return tc__fail(TC_ERROR_DTYPE, "%s %d has dtype %s, expected %s", what, i,
                        tc_dtype_string(t->dtype), tc_dtype_string(ref->dtype));
    if (!same_sizes(ref, t))
        return tc__fail(TC_ERROR_SHAPE, "%s %d has a different shape (%d dims) than %s 0", what, i,
                        t->ndim, what);
    return TC_OK;
}

/* The same tensor on device `d`: t itself (a new reference) when it is there. */
static tc_status copy_to(const tc_tensor *t, int d, tc_tensor **out)
{
    return tc_tensor_to(t, (tc_device){TC_CUDA, d}, t->dtype, true, out);
}

/* The NCCL path (comm_internal.h): t is on one of the devices and dense.
 * TC_ERROR_NOT_SUPPORTED (nothing queued) sends the caller to the copies. */
static tc_status broadcast_accel(const tc_tensor *t, const int *devs, int n, tc_tensor **out)
{
    int root = -1;
    for (int i = 0; i < n; i++)
        if (devs[i] == t->storage->device.index)
            root = i;
    size_t bytes = (size_t)tc__numel(t->ndim, t->sizes) * tc_dtype_size(t->dtype);
    if (n < 2 || root < 0 || bytes == 0 || !tc__is_contiguous(t))
        return TC_ERROR_NOT_SUPPORTED;
    tc_tensor *tmp[TC_MAX_DEVICES] = {0};
    tc_status st = TC_OK;
    for (int i = 0; i < n && st == TC_OK; i++)
        st = i == root ? (tmp[i] = tc__tensor_ref((tc_tensor *)t), TC_OK)
                       : tc__new_tensor(t->ndim, t->sizes, t->dtype, (tc_device){TC_CUDA, devs[i]},
                                        false, &tmp[i]);
    if (st == TC_OK)
        st = tc__dev()->comm->broadcast(tmp, devs, n, root, bytes);
    if (st == TC_OK)
        memcpy(out, tmp, sizeof *tmp * (size_t)n);
    else
        release_all(tmp, n);
    return st;
}

static tc_status broadcast_resolved(const tc_tensor *t, const int *devs, int n, tc_tensor **out)
{
    tc_status st = broadcast_accel(t, devs, n, out);
    if (st != TC_ERROR_NOT_SUPPORTED)
        return st;
    tc_tensor *tmp[TC_MAX_DEVICES] = {0};
    st = TC_OK;
    for (int i = 0; i < n && st == TC_OK; i++)
        st = copy_to(t, devs[i], &tmp[i]);
    if (st == TC_OK)
        memcpy(out, tmp, sizeof *tmp * (size_t)n);
    else
        release_all(tmp, n);
    return st;
}

tc_status tc_comm_broadcast(const tc_tensor *t, const int *devices, int n, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(check_gpu_tensor(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out is NULL");
    int devs[TC_MAX_DEVICES];
    TC_CHECK_ARG(n <= TC_MAX_DEVICES, "at most %d devices, not %d", TC_MAX_DEVICES, n);
    TC_TRY(resolve_devices(devices, n, devs));
    return broadcast_resolved(t, devs, n, out);
}

/* NCCL into the outputs on other devices than t's, when all are dense: t is
 * the root of the list; an output on t's own device is a copy after it.
 * TC_ERROR_NOT_SUPPORTED (nothing queued) sends the caller to the copies;
 * any other failure (NCCL there but failing) is the caller's error. */
static tc_status broadcast_out_accel(const tc_tensor *t, tc_tensor *const *outputs, int n)
{
    tc_tensor *bufs[TC_MAX_DEVICES + 1];
    int devs[TC_MAX_DEVICES + 1], m = 1, src = t->storage->device.index;
    size_t bytes = (size_t)tc__numel(t->ndim, t->sizes) * tc_dtype_size(t->dtype);
    bufs[0] = (tc_tensor *)t;
    devs[0] = src;
    for (int i = 0; i < n; i++) {
        if (!tc__is_contiguous(outputs[i]))
            return TC_ERROR_NOT_SUPPORTED;
        if (outputs[i]->storage->device.index != src) {
            bufs[m] = outputs[i];
            devs[m++] = outputs[i]->storage->device.index;
        }
    }
    if (m < 2 || bytes == 0 || !tc__is_contiguous(t))
        return TC_ERROR_NOT_SUPPORTED;
    TC_TRY(tc__dev()->comm->broadcast(bufs, devs, m, 0, bytes));
    for (int i = 0; i < n; i++) /* the output on t's device, if any */
        if (outputs[i]->storage->device.index == src && outputs[i] != t)
            TC_TRY(tc_tensor_copy_(outputs[i], t, true));
    return TC_OK;
}

tc_status tc_comm_broadcast_out(const tc_tensor *t, tc_tensor *const *outputs, int n)
{
    TC_API_BEGIN;
    TC_TRY(check_gpu_tensor(t, "tc_tensor t"));
    TC_CHECK_ARG(outputs, "outputs is NULL");
    TC_CHECK_ARG(n >= 1 && n <= TC_MAX_DEVICES, "n must be in 1..%d, not %d", TC_MAX_DEVICES, n);
    for (int i = 0; i < n; i++) {
        TC_TRY(check_gpu_tensor(outputs[i], "output"));
        TC_TRY(check_like(t, outputs[i], "output", i));
        for (int j = 0; j < i; j++)
            TC_CHECK_ARG(outputs[i]->storage->device.index != outputs[j]->storage->device.index,
                         "outputs %d and %d are on the same device (cuda:%d)", j, i,
                         outputs[i]->storage->device.index);
    }
    tc_status st = broadcast_out_accel(t, outputs, n);
    if (st != TC_ERROR_NOT_SUPPORTED)
        return st;
    for (int i = 0; i < n; i++) /* peer copies, where NCCL is not there */
        if (outputs[i] != t)
            TC_TRY(tc_tensor_copy_(outputs[i], t, true));
    return TC_OK;
}

tc_status tc_comm_reduce_add(const tc_tensor *const *inputs, int n, int destination,
                             tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(inputs, "inputs is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(n >= 1 && n <= TC_MAX_DEVICES, "n must be in 1..%d, not %d", TC_MAX_DEVICES, n);
    for (int i = 0; i < n; i++) {
        TC_TRY(check_gpu_tensor(inputs[i], "input"));
        TC_TRY(check_like(inputs[0], inputs[i], "input", i));
        for (int j = 0; j < i; j++)
            TC_CHECK_ARG(inputs[i]->storage->device.index != inputs[j]->storage->device.index,
                         "inputs %d and %d are on the same device (cuda:%d)", j, i,
                         inputs[i]->storage->device.index);
    }
    tc_device dst;
    TC_TRY(tc__device_resolve((tc_device){TC_CUDA, destination < 0 ? -1 : destination}, &dst));
    int first = -1, devs[TC_MAX_DEVICES];
    bool dense = true;
    for (int i = 0; i < n; i++) {
        devs[i] = inputs[i]->storage->device.index;
        dense = dense && tc__is_contiguous(inputs[i]);
        if (devs[i] == dst.index)
            first = i;
    }
    if (n >= 2 && first >= 0 && dense && tc__numel(inputs[0]->ndim, inputs[0]->sizes) > 0) {
        tc_tensor *sum; /* NCCL's reduce, as torch.cuda.comm; else the copies below */
        TC_TRY(
            tc__new_tensor(inputs[0]->ndim, inputs[0]->sizes, inputs[0]->dtype, dst, false, &sum));
        tc_status st = tc__dev()->comm->reduce(inputs, sum, devs, n, first);
        for (int i = 0; i < n && st == TC_OK; i++) /* read there: not reused before it is done */
            st = tc__storage_record_stream(inputs[i]->storage, tc__dev()->current_stream(devs[i]));
        if (st == TC_OK) {
            *out = sum;
            return TC_OK;
        }
        tc_tensor_release(sum);
        if (st != TC_ERROR_NOT_SUPPORTED)
            return st;
    }
    /* The input already on the destination (if any) first: it needs no
     * transfer; each other one is copied over and added. */
    if (first < 0)
        first = 0;
    tc_tensor *acc = NULL;
    tc_status st = copy_to(inputs[first], dst.index, &acc);
    for (int i = 0; i < n && st == TC_OK; i++) {
        if (i == first)
            continue;
        tc_tensor *x = NULL, *sum = NULL;
        st = copy_to(inputs[i], dst.index, &x);
        if (st == TC_OK)
            st = tc_tensor_add(acc, x, &sum);
        tc_tensor_release(x);
        if (st == TC_OK) {
            tc_tensor_release(acc);
            acc = sum;
        }
    }
    if (st == TC_OK && acc == inputs[first]) { /* one input: a copy, never the input */
        tc_tensor *copy = NULL;
        st = tc__new_tensor(acc->ndim, acc->sizes, acc->dtype, dst, false, &copy);
        if (st == TC_OK)
            st = tc_tensor_copy_(copy, acc, true);
        tc_tensor_release(acc);
        acc = copy;
    }
    if (st != TC_OK) {
        tc_tensor_release(acc);
        return st;
    }
    *out = acc;
    return TC_OK;
}

/* ---- packing for the coalesced forms ------------------------------------------------ */

/* Tensors [lo, hi) of a row share a buffer when they have one dtype and fit
 * in buffer_size bytes together (a larger tensor has a buffer of its own). */
static int bucket_end(const tc_tensor *const *row, int lo, int n, size_t buffer_size)
{
    size_t bytes = 0;
    int hi = lo;
    while (hi < n && row[hi]->dtype == row[lo]->dtype) {
        size_t b = (size_t)tc__numel(row[hi]->ndim, row[hi]->sizes) * tc_dtype_size(row[hi]->dtype);
        if (hi > lo && bytes + b > buffer_size)
            break;
        bytes += b;
        hi++;
    }
    return hi;
}

/* A flat buffer on row[lo]'s device holding row[lo..hi) one after another. */
static tc_status pack(const tc_tensor *const *row, int lo, int hi, tc_tensor **out)
{
    int64_t total = 0;
    for (int i = lo; i < hi; i++)
        total += tc__numel(row[i]->ndim, row[i]->sizes);
    tc_tensor *flat;
    TC_TRY(tc__new_tensor(1, &total, row[lo]->dtype, row[lo]->storage->device, false, &flat));
    tc_status st = TC_OK;
    int64_t off = 0;
    for (int i = lo; i < hi && st == TC_OK; i++) {
        int64_t k = tc__numel(row[i]->ndim, row[i]->sizes);
        tc_tensor *part = NULL, *shaped = NULL;
        st = tc_tensor_narrow(flat, 0, off, k, &part);
        if (st == TC_OK)
            st = tc_tensor_view(part, row[i]->ndim, row[i]->sizes, &shaped);
        if (st == TC_OK)
            st = tc_tensor_copy_(shaped, row[i], true);
        tc_tensor_release(part);
        tc_tensor_release(shaped);
        off += k;
    }
    if (st != TC_OK) {
        tc_tensor_release(flat);
        return st;
    }
    *out = flat;
    return TC_OK;
}

/* out[i - lo] = views of `flat` shaped as like[lo..hi). */
static tc_status unpack(const tc_tensor *flat, const tc_tensor *const *like, int lo, int hi,
                        tc_tensor **out)
{
    int64_t off = 0;
    for (int i = lo; i < hi; i++) {
        int64_t k = tc__numel(like[i]->ndim, like[i]->sizes);
        tc_tensor *part = NULL;
        tc_status st = tc_tensor_narrow(flat, 0, off, k, &part);
        if (st == TC_OK)
            st = tc_tensor_view(part, like[i]->ndim, like[i]->sizes, &out[i - lo]);
        tc_tensor_release(part);
        if (st != TC_OK) {
            release_all(out, i - lo);
            return st;
        }
        off += k;
    }
    return TC_OK;
}

static tc_status broadcast_bucket(const tc_tensor *const *tensors, int lo, int hi, int nt,
                                  const int *devs, int nd, tc_tensor **res)
{
    int src = tensors[lo]->storage->device.index;
    if (hi - lo == 1) { /* one tensor: no packing */
        tc_tensor *got[TC_MAX_DEVICES];
        TC_TRY(broadcast_resolved(tensors[lo], devs, nd, got));
        for (int d = 0; d < nd; d++)
            res[d * nt + lo] = got[d];
        return TC_OK;
    }
    tc_tensor *flat, *got[TC_MAX_DEVICES];
    TC_TRY(pack(tensors, lo, hi, &flat));
    tc_status st = broadcast_resolved(flat, devs, nd, got);
    tc_tensor_release(flat);
    TC_TRY(st);
    for (int d = 0; d < nd && st == TC_OK; d++) {
        if (devs[d] == src) {
            for (int i = lo; i < hi; i++)
                res[d * nt + i] = tc__tensor_ref((tc_tensor *)tensors[i]);
        } else {
            st = unpack(got[d], tensors, lo, hi, &res[d * nt + lo]);
        }
    }
    release_all(got, nd);
    return st;
}

tc_status tc_comm_broadcast_coalesced(const tc_tensor *const *tensors, int n_tensors,
                                      const int *devices, int n_devices, size_t buffer_size,
                                      tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(tensors && n_tensors >= 1, "tensors must be a non-empty array");
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(buffer_size > 0, "buffer_size must be positive");
    TC_CHECK_ARG(n_devices <= TC_MAX_DEVICES, "at most %d devices, not %d", TC_MAX_DEVICES,
                 n_devices);
    for (int i = 0; i < n_tensors; i++) {
        TC_TRY(check_gpu_tensor(tensors[i], "tensor"));
        if (tensors[i]->storage->device.index != tensors[0]->storage->device.index)
            return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                            "all tensors must be on one device: tensor %d is on cuda:%d, tensor "
                            "0 on cuda:%d",
                            i, tensors[i]->storage->device.index,
                            tensors[0]->storage->device.index);
    }
    int devs[TC_MAX_DEVICES];
    TC_TRY(resolve_devices(devices, n_devices, devs));
    size_t count = (size_t)n_tensors * (size_t)n_devices;
    tc_tensor **res = calloc(count, sizeof *res);
    if (!res)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    tc_status st = TC_OK;
    for (int lo = 0; lo < n_tensors && st == TC_OK;) {
        int hi = bucket_end(tensors, lo, n_tensors, buffer_size);
        st = broadcast_bucket(tensors, lo, hi, n_tensors, devs, n_devices, res);
        lo = hi;
    }
    if (st == TC_OK)
        memcpy(out, res, sizeof *res * count);
    else
        release_all(res, (int)count);
    free(res);
    return st;
}

static tc_status reduce_bucket(const tc_tensor *const *inputs, int nd, int nt, int lo, int hi,
                               int dst, tc_tensor **res)
{
    tc_tensor *flats[TC_MAX_DEVICES] = {0};
    tc_status st = TC_OK;
    int made = 0;
    for (; made < nd && st == TC_OK; made++) {
        const tc_tensor *const *row = inputs + (size_t)made * (size_t)nt;
        if (hi - lo == 1)
            flats[made] = tc__tensor_ref((tc_tensor *)row[lo]);
        else
            st = pack(row, lo, hi, &flats[made]);
    }
    tc_tensor *sum = NULL;
    if (st == TC_OK)
        st = tc_comm_reduce_add((const tc_tensor *const *)flats, nd, dst, &sum);
    release_all(flats, made);
    if (st != TC_OK)
        return st;
    if (hi - lo == 1)
        res[lo] = sum;
    else {
        st = unpack(sum, inputs, lo, hi, &res[lo]);
        tc_tensor_release(sum);
    }
    return st;
}

tc_status tc_comm_reduce_add_coalesced(const tc_tensor *const *inputs, int n_devices, int n_tensors,
                                       int destination, size_t buffer_size, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(inputs, "inputs is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(buffer_size > 0, "buffer_size must be positive");
    TC_CHECK_ARG(n_devices >= 1 && n_devices <= TC_MAX_DEVICES, "n_devices must be in 1..%d",
                 TC_MAX_DEVICES);
    TC_CHECK_ARG(n_tensors >= 1, "n_tensors must be positive");
    for (int d = 0; d < n_devices; d++) {
        const tc_tensor *const *row = inputs + (size_t)d * (size_t)n_tensors;
        for (int i = 0; i < n_tensors; i++) {
            TC_TRY(check_gpu_tensor(row[i], "input"));
            TC_TRY(check_like(inputs[i], row[i], "input", d * n_tensors + i));
            if (row[i]->storage->device.index != row[0]->storage->device.index)
                return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                                "the tensors of row %d must be on one device", d);
        }
    }
    tc_tensor **res = calloc((size_t)n_tensors, sizeof *res);
    if (!res)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    tc_status st = TC_OK;
    for (int lo = 0; lo < n_tensors && st == TC_OK;) {
        int hi = bucket_end(inputs, lo, n_tensors, buffer_size);
        st = reduce_bucket(inputs, n_devices, n_tensors, lo, hi, destination, res);
        lo = hi;
    }
    if (st == TC_OK)
        memcpy(out, res, sizeof *res * (size_t)n_tensors);
    else
        release_all(res, n_tensors);
    free(res);
    return st;
}

/* ---- scatter and gather ---------------------------------------------------------------- */

static tc_status wrap_dim(const tc_tensor *t, int dim, int *out)
{
    if (t->ndim == 0)
        return tc__fail(TC_ERROR_SHAPE, "a 0-d tensor cannot be split or joined");
    int d = dim < 0 ? dim + t->ndim : dim;
    TC_CHECK_ARG(d >= 0 && d < t->ndim, "dim %d is out of range for %d dimensions", dim, t->ndim);
    *out = d;
    return TC_OK;
}

/* Chunk lengths along dim: given ones checked, or Tensor.chunk(n)'s. */
static tc_status chunk_lengths(int64_t size, int n, const int64_t *given, int64_t *len, int *count)
{
    if (given) {
        int64_t sum = 0;
        for (int i = 0; i < n; i++) {
            TC_CHECK_ARG(given[i] > 0, "chunk size %d is %lld; every chunk size must be positive",
                         i, (long long)given[i]);
            TC_CHECK_ARG(given[i] <= size - sum, "the chunk sizes add up to more than %lld",
                         (long long)size);
            sum += given[i];
            len[i] = given[i];
        }
        TC_CHECK_ARG(sum == size, "the chunk sizes add up to %lld, the size of dim is %lld",
                     (long long)sum, (long long)size);
        *count = n;
        return TC_OK;
    }
    int64_t each = (size + n - 1) / n;
    int c = 0;
    for (int64_t off = 0; off < size; off += each)
        len[c++] = size - off < each ? size - off : each;
    if (c == 0) /* an empty dim: n empty chunks, as Tensor.chunk gives one */
        len[c++] = 0;
    *count = c;
    return TC_OK;
}

static tc_status scatter_one(const tc_tensor *t, int dim, int64_t off, int64_t len, int dev,
                             tc_stream *stream, tc_tensor **out)
{
    tc_tensor *part = NULL, *res = NULL;
    TC_TRY(tc_tensor_narrow(t, dim, off, len, &part));
    /* A given stream of t's own device reads t: after t's current stream, and
     * t's memory is not reused before it is done (a copy from another device
     * orders itself, tensor_cuda.c). */
    const tc__device_ops *ops = tc__dev();
    bool local = stream && t->storage->device.type == TC_CUDA && t->storage->device.index == dev;
    tc_status st = TC_OK;
    tc_stream *cur = NULL;
    if (local)
        st = ops->stream_current(dev, &cur);
    if (local && st == TC_OK)
        st = ops->stream_wait_stream(stream, cur);
    if (local && st == TC_OK)
        st = tc_tensor_record_stream(t, stream);
    tc_stream_guard g = ops->stream_guard_enter(stream);
    if (st == TC_OK)
        st = tc__new_tensor(part->ndim, part->sizes, part->dtype, (tc_device){TC_CUDA, dev}, false,
                            &res);
    if (st == TC_OK)
        st = tc_tensor_copy_(res, part, true);
    ops->stream_guard_exit(&g);
    tc_tensor_release(part);
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}

tc_status tc_comm_scatter(const tc_tensor *t, const int *devices, int n, const int64_t *chunk_sizes,
                          int dim, tc_stream *const *streams, tc_tensor **out, int *n_out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out && n_out, "out or n_out is NULL");
    TC_CHECK_ARG(n <= TC_MAX_DEVICES, "at most %d devices, not %d", TC_MAX_DEVICES, n);
    int d;
    TC_TRY(wrap_dim(t, dim, &d));
    int64_t len[TC_MAX_DEVICES];
    int count = 0;
    TC_CHECK_ARG(devices && n >= 1, "devices must be a non-empty array");
    TC_TRY(chunk_lengths(t->sizes[d], n, chunk_sizes, len, &count));
    int devs[TC_MAX_DEVICES];
    TC_TRY(resolve_devices(devices, n, devs));
    if (streams)
        for (int i = 0; i < n; i++)
            if (streams[i] && tc__dev()->stream_device(streams[i]) != devs[i])
                return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                                "stream %d belongs to cuda:%d, its chunk goes to cuda:%d", i,
                                tc__dev()->stream_device(streams[i]), devs[i]);
    tc_tensor *res[TC_MAX_DEVICES] = {0};
    tc_status st = TC_OK;
    int64_t off = 0;
    for (int i = 0; i < count && st == TC_OK; i++) {
        st = scatter_one(t, d, off, len[i], devs[i], streams ? streams[i] : NULL, &res[i]);
        off += len[i];
    }
    if (st != TC_OK) {
        release_all(res, count);
        return st;
    }
    memcpy(out, res, sizeof *res * (size_t)count);
    *n_out = count;
    return TC_OK;
}

tc_status tc_comm_gather(const tc_tensor *const *tensors, int n, int dim, int destination,
                         tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(tensors && n >= 1, "tensors must be a non-empty array");
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(destination >= TC_COMM_CURRENT_DEVICE,
                 "destination %d: use a GPU index, -1 for the CPU or TC_COMM_CURRENT_DEVICE",
                 destination);
    TC_TRY(check_gpu_tensor(tensors[0], "tensor"));
    int d;
    TC_TRY(wrap_dim(tensors[0], dim, &d));
    int64_t sizes[TC_MAX_DIMS];
    memcpy(sizes, tensors[0]->sizes, sizeof sizes);
    sizes[d] = 0;
    for (int i = 0; i < n; i++) {
        const tc_tensor *t = tensors[i];
        TC_TRY(check_gpu_tensor(t, "tensor"));
        if (t->dtype != tensors[0]->dtype)
            return tc__fail(TC_ERROR_DTYPE, "tensor %d has dtype %s, tensor 0 %s", i,
                            tc_dtype_string(t->dtype), tc_dtype_string(tensors[0]->dtype));
        if (t->ndim != tensors[0]->ndim)
            return tc__fail(TC_ERROR_SHAPE, "tensor %d has %d dims, tensor 0 has %d", i, t->ndim,
                            tensors[0]->ndim);
        for (int k = 0; k < t->ndim; k++)
            if (k != d && t->sizes[k] != tensors[0]->sizes[k])
                return tc__fail(TC_ERROR_SHAPE,
                                "tensor %d has size %lld in dim %d, tensor 0 has %lld (only dim "
                                "%d may differ)",
                                i, (long long)t->sizes[k], k, (long long)tensors[0]->sizes[k], d);
        sizes[d] += t->sizes[d];
    }
    tc_device dst;
    if (destination == -1)
        dst = (tc_device){TC_CPU, -1};
    else
        TC_TRY(tc__device_resolve(
            (tc_device){TC_CUDA, destination == TC_COMM_CURRENT_DEVICE ? -1 : destination}, &dst));
    tc_tensor *res;
    TC_TRY(tc__new_tensor(tensors[0]->ndim, sizes, tensors[0]->dtype, dst, false, &res));
    tc_status st = TC_OK;
    int64_t off = 0;
    for (int i = 0; i < n && st == TC_OK; i++) {
        tc_tensor *part = NULL;
        st = tc_tensor_narrow(res, d, off, tensors[i]->sizes[d], &part);
        if (st == TC_OK)
            st = tc_tensor_copy_(part, tensors[i], dst.type == TC_CUDA);
        tc_tensor_release(part);
        off += tensors[i]->sizes[d];
    }
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}
