/* torch.cuda.comm's scatter and gather, and their out= forms: a tensor
 * split along one dimension onto GPUs, and GPU tensors joined along one
 * dimension onto a GPU or the CPU.
 *
 * Every piece moves with Tensor.copy_ (tc_tensor_copy_), so it converts
 * dtypes where the out= forms ask for it and orders itself as copies do (a
 * copy into device B goes on B's current stream after an event on the
 * source's stream; one into pageable host memory waits). scatter leaves a
 * chunk for the source's own GPU as a view of the source, as PyTorch does.
 * A stream given for a chunk is made the current stream of its device for
 * the copy (comm.scatter's `streams`).
 *
 * Invariant: every function validates all its arguments before it queues
 * anything, and on failure releases what it made and writes no output (an
 * out= form may have written some outputs when a copy fails midway). */
#include <stdint.h>
#include <string.h>

#include "base/internal.h"
#include "comm_internal.h"
#include "runtime/device_ops.h"
#include "tcuda/comm.h"
#include "tensor/tensor_internal.h"

/* dim of t wrapped into 0..ndim-1; a 0-d tensor has nothing to split. */
static tc_status wrap_dim(const tc_tensor *t, int dim, int *out)
{
    if (t->ndim == 0)
        return tc__fail(TC_ERROR_SHAPE, "a 0-d tensor cannot be split or joined");
    int d = dim < 0 ? dim + t->ndim : dim;
    TC_CHECK_ARG(d >= 0 && d < t->ndim, "dim %d is out of range for %d dimensions", dim, t->ndim);
    *out = d;
    return TC_OK;
}

/* Chunk lengths along a dim of `size`: the given ones checked (each >= 0,
 * adding up to size), or Tensor.chunk(n)'s (ceil(size / n) each, the last
 * shorter, so fewer than n when size is small; n empty ones for size 0). */
static tc_status chunk_lengths(int64_t size, int n, const int64_t *given, int64_t *len, int *count)
{
    if (given) {
        int64_t sum = 0;
        for (int i = 0; i < n; i++) {
            TC_CHECK_ARG(given[i] >= 0, "chunk_sizes[%d] is %lld; a chunk size must be >= 0", i,
                         (long long)given[i]);
            TC_CHECK_ARG(given[i] <= size - sum,
                         "the chunk sizes add up to more than %lld, the size of dim",
                         (long long)size);
            sum += given[i];
            len[i] = given[i];
        }
        TC_CHECK_ARG(sum == size, "the chunk sizes add up to %lld, the size of dim is %lld",
                     (long long)sum, (long long)size);
        *count = n;
        return TC_OK;
    }
    int c = 0;
    if (size == 0) {
        for (; c < n; c++)
            len[c] = 0;
    } else {
        int64_t each = size / n + (size % n != 0);
        for (int64_t off = 0; off < size; off += each)
            len[c++] = size - off < each ? size - off : each;
    }
    *count = c;
    return TC_OK;
}

/* streams[i] (when given) is a live stream of device dev[i]; `skip[i]`
 * entries (chunks that are not copied) are not looked at, as in PyTorch. */
static tc_status check_streams(tc_stream *const *streams, const int *dev, const bool *skip, int n)
{
    const tc__device_ops *ops = tc__dev();
    for (int i = 0; streams && i < n; i++) {
        if (!streams[i] || (skip && skip[i]))
            continue;
        int sd;
        void *handle;
        TC_TRY(ops->stream_of(streams[i], &sd, &handle));
        if (sd != dev[i])
            return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                            "streams[%d] belongs to cuda:%d, its chunk goes to cuda:%d", i, sd,
                            dev[i]);
    }
    return TC_OK;
}

/* ---- scatter ------------------------------------------------------------------------------ */

/* A new tensor on GPU dev holding `part`, copied on `stream` (NULL: dev's
 * current stream), where the new memory is allocated too. */
static tc_status copy_chunk(const tc_tensor *part, int dev, tc_stream *stream, tc_tensor **out)
{
    const tc__device_ops *ops = tc__dev();
    tc_stream_guard g = ops->stream_guard_enter(stream);
    tc_status st = g.status;
    tc_tensor *res = NULL;
    if (st == TC_OK)
        st = tc__new_tensor(part->ndim, part->sizes, part->dtype, (tc_device){TC_CUDA, dev}, false,
                            &res);
    if (st == TC_OK)
        st = tc_tensor_copy_(res, part, true);
    ops->stream_guard_exit(&g);
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
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(n_out, "n_out is NULL");
    TC_CHECK_ARG(devices, "devices is NULL");
    TC_CHECK_ARG(n >= 1 && n <= TC_MAX_DEVICES, "n must be in 1..%d, not %d", TC_MAX_DEVICES, n);
    int d = 0; /* set by wrap_dim; GCC's -O3 cannot see it (-Wmaybe-uninitialized) */
    TC_TRY(wrap_dim(t, dim, &d));
    int64_t len[TC_MAX_DEVICES];
    int count = 0;
    TC_TRY(chunk_lengths(t->sizes[d], n, chunk_sizes, len, &count));
    TC_TRY(tc__comm_check_devices(devices, n));
    int src = t->storage->device.type == TC_CUDA ? t->storage->device.index : -1;
    bool local[TC_MAX_DEVICES] = {0};
    for (int i = 0; i < count; i++)
        local[i] = devices[i] == src;
    TC_TRY(check_streams(streams, devices, local, count));
    tc_tensor *res[TC_MAX_DEVICES] = {0};
    tc_status st = TC_OK;
    int64_t off = 0;
    for (int i = 0; i < count && st == TC_OK; i++) {
        tc_tensor *part = NULL;
        st = tc_tensor_narrow(t, d, off, len[i], &part);
        if (st == TC_OK && local[i])
            res[i] = part; /* the source's own GPU: the view itself */
        else if (st == TC_OK) {
            st = copy_chunk(part, devices[i], streams ? streams[i] : NULL, &res[i]);
            tc_tensor_release(part);
        }
        off += len[i];
    }
    if (st != TC_OK) {
        tc__comm_release_all(res, count);
        return st;
    }
    memcpy(out, res, sizeof *res * (size_t)count);
    *n_out = count;
    return TC_OK;
}

/* ---- scatter_out -------------------------------------------------------------------------- */

/* outputs[0..n) are GPU tensors with t's sizes except along d, where they
 * add up to t's; len[i] = outputs[i]'s length there. */
static tc_status check_scatter_outputs(const tc_tensor *t, int d, tc_tensor *const *outputs, int n,
                                       int64_t *len, int *dev)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        const tc_tensor *o = outputs[i];
        TC_TRY(tc__comm_check_gpu(o, "output", i));
        if (o->ndim != t->ndim)
            return tc__fail(TC_ERROR_SHAPE, "output %d has %d dims, t has %d", i, o->ndim, t->ndim);
        for (int k = 0; k < t->ndim; k++)
            if (k != d && o->sizes[k] != t->sizes[k])
                return tc__fail(TC_ERROR_SHAPE,
                                "output %d has size %lld in dim %d, t has %lld (only dim %d, "
                                "the scatter dim, may differ)",
                                i, (long long)o->sizes[k], k, (long long)t->sizes[k], d);
        if (o->sizes[d] > t->sizes[d] - total)
            return tc__fail(TC_ERROR_SHAPE,
                            "the outputs' sizes along dim %d add up to more than t's, %lld", d,
                            (long long)t->sizes[d]);
        total += o->sizes[d];
        len[i] = o->sizes[d];
        dev[i] = o->storage->device.index;
    }
    if (total != t->sizes[d])
        return tc__fail(TC_ERROR_SHAPE,
                        "the outputs' sizes along dim %d add up to %lld, t's size there is %lld", d,
                        (long long)total, (long long)t->sizes[d]);
    return TC_OK;
}

/* Copies part (of t) into o on `stream` (NULL: o's device's current
 * stream). The stream first waits for o's device's current stream (o's
 * pending work, and t's when t is there; a copy from elsewhere orders itself
 * after t's stream), and both keep their memory until it is done. */
static tc_status copy_into(tc_tensor *o, const tc_tensor *part, const tc_tensor *t,
                           tc_stream *stream)
{
    if (!stream)
        return tc_tensor_copy_(o, part, true);
    const tc__device_ops *ops = tc__dev();
    int dev = o->storage->device.index;
    tc_stream *cur = NULL;
    TC_TRY(ops->stream_current(dev, &cur));
    TC_TRY(ops->stream_wait_stream(stream, cur));
    TC_TRY(tc_tensor_record_stream(o, stream));
    if (t->storage->device.type == TC_CUDA && t->storage->device.index == dev)
        TC_TRY(tc_tensor_record_stream(t, stream));
    tc_stream_guard g = ops->stream_guard_enter(stream);
    TC_TRY(g.status);
    tc_status st = tc_tensor_copy_(o, part, true);
    ops->stream_guard_exit(&g);
    return st;
}

tc_status tc_comm_scatter_out(const tc_tensor *t, tc_tensor *const *outputs, int n, int dim,
                              tc_stream *const *streams)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(outputs, "outputs is NULL");
    TC_CHECK_ARG(n >= 1 && n <= TC_MAX_DEVICES, "n must be in 1..%d, not %d", TC_MAX_DEVICES, n);
    int d = 0; /* set by wrap_dim; GCC's -O3 cannot see it (-Wmaybe-uninitialized) */
    TC_TRY(wrap_dim(t, dim, &d));
    int64_t len[TC_MAX_DEVICES];
    int dev[TC_MAX_DEVICES];
    TC_TRY(check_scatter_outputs(t, d, outputs, n, len, dev));
    TC_TRY(check_streams(streams, dev, NULL, n));
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        tc_tensor *part = NULL;
        TC_TRY(tc_tensor_narrow(t, d, off, len[i], &part));
        tc_status st = copy_into(outputs[i], part, t, streams ? streams[i] : NULL);
        tc_tensor_release(part);
        TC_TRY(st);
        off += len[i];
    }
    return TC_OK;
}

/* ---- gather ------------------------------------------------------------------------------- */

/* The checks of gather and gather_out: n >= 1 GPU tensors of one number of
 * dims and of tensors[0]'s sizes but along dim (*d, wrapped); sizes = the
 * concatenation's. Dtypes may differ (copy_ converts them). */
static tc_status gather_shape(const tc_tensor *const *tensors, int n, int dim, int *d,
                              int64_t *sizes)
{
    TC_CHECK_ARG(tensors, "tensors is NULL");
    TC_CHECK_ARG(n >= 1, "tensors must hold at least one tensor (n = %d)", n);
    TC_TRY(tc__comm_check_gpu(tensors[0], "tensor", 0));
    const tc_tensor *first = tensors[0];
    TC_TRY(wrap_dim(first, dim, d));
    memcpy(sizes, first->sizes, sizeof(int64_t) * (size_t)first->ndim);
    sizes[*d] = 0;
    for (int i = 0; i < n; i++) {
        const tc_tensor *t = tensors[i];
        TC_TRY(tc__comm_check_gpu(t, "tensor", i));
        if (t->ndim != first->ndim)
            return tc__fail(TC_ERROR_SHAPE, "tensor %d has %d dims, tensor 0 has %d", i, t->ndim,
                            first->ndim);
        for (int k = 0; k < t->ndim; k++)
            if (k != *d && t->sizes[k] != first->sizes[k])
                return tc__fail(TC_ERROR_SHAPE,
                                "tensor %d has size %lld in dim %d, tensor 0 has %lld (only dim "
                                "%d may differ)",
                                i, (long long)t->sizes[k], k, (long long)first->sizes[k], *d);
        if (t->sizes[*d] > INT64_MAX - sizes[*d])
            return tc__fail(TC_ERROR_SHAPE, "the sizes along dim %d overflow", *d);
        sizes[*d] += t->sizes[*d];
    }
    return TC_OK;
}

/* Copies tensors[0..n) one after another along d into res. */
static tc_status gather_into(const tc_tensor *const *tensors, int n, int d, tc_tensor *res)
{
    bool non_blocking = res->storage->device.type == TC_CUDA;
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        tc_tensor *part = NULL;
        TC_TRY(tc_tensor_narrow(res, d, off, tensors[i]->sizes[d], &part));
        tc_status st = tc_tensor_copy_(part, tensors[i], non_blocking);
        tc_tensor_release(part);
        TC_TRY(st);
        off += tensors[i]->sizes[d];
    }
    return TC_OK;
}

tc_status tc_comm_gather(const tc_tensor *const *tensors, int n, int dim, int destination,
                         tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    int d;
    int64_t sizes[TC_MAX_DIMS];
    TC_TRY(gather_shape(tensors, n, dim, &d, sizes));
    if (destination < TC_COMM_CURRENT_DEVICE)
        return tc__fail(TC_ERROR_INVALID_DEVICE,
                        "destination %d: use a GPU index, -1 for the CPU or "
                        "TC_COMM_CURRENT_DEVICE (-2) for the current GPU",
                        destination);
    tc_device dst;
    if (destination == -1)
        dst = (tc_device){TC_CPU, -1};
    else
        TC_TRY(tc__device_resolve(
            (tc_device){TC_CUDA, destination == TC_COMM_CURRENT_DEVICE ? -1 : destination}, &dst));
    tc_tensor *res;
    TC_TRY(tc__new_tensor(tensors[0]->ndim, sizes, tensors[0]->dtype, dst, false, &res));
    tc_status st = gather_into(tensors, n, d, res);
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}

tc_status tc_comm_gather_out(const tc_tensor *const *tensors, int n, int dim, tc_tensor *out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(out, "tc_tensor out"));
    int d;
    int64_t sizes[TC_MAX_DIMS];
    TC_TRY(gather_shape(tensors, n, dim, &d, sizes));
    if (out->ndim != tensors[0]->ndim ||
        memcmp(out->sizes, sizes, sizeof(int64_t) * (size_t)out->ndim) != 0)
        return tc__fail(TC_ERROR_SHAPE,
                        "out has other sizes than the tensors joined along dim %d (%d dims, "
                        "%lld along dim %d)",
                        d, tensors[0]->ndim, (long long)sizes[d], d);
    return gather_into(tensors, n, d, out);
}
