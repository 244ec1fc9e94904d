/* torch.cuda.comm's broadcast and reduce_add (and their coalesced forms),
 * built on tensor copies and adds; scatter and gather are comm_scatter.c.
 *
 * Every transfer is a tc_tensor_to / tc_tensor_copy_ between devices, which
 * the CUDA side (tensor_cuda.c) queues on the destination's current stream
 * after an event recorded on the source's current stream, enabling peer
 * access once per device pair; so these functions never synchronize a
 * device (a copy from pageable host memory waits, as Tensor.copy_ does).
 * Reductions add on the destination's current stream. Where NCCL is there
 * (comm_internal.h), it carries broadcast and reduce_add instead, on the
 * same current streams, as in PyTorch, over lists of distinct devices with
 * dense tensors; its absence (TC_ERROR_NOT_SUPPORTED, also for a device list
 * whose ncclCommInitAll failed) falls back to the copies. The coalesced forms
 * pack tensors of one dtype into flat buffers of at most buffer_size bytes
 * (one transfer per buffer) and hand back views of the received buffers, as
 * PyTorch does.
 *
 * Results follow PyTorch's: broadcast gives the source itself for an entry
 * of its own device, reduce_add of one input on the destination gives that
 * input; devices may repeat.
 *
 * Invariant: every function validates all its arguments before it queues
 * anything, and on failure releases what it made and writes no output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "comm_internal.h"
#include "runtime/device_ops.h"
#include "tcuda/comm.h"
#include "tensor/tensor_internal.h"

void tc__comm_release_all(tc_tensor **t, int n)
{
    for (int i = 0; i < n; i++) {
        tc_tensor_release(t[i]);
        t[i] = NULL;
    }
}

tc_status tc__comm_check_gpu(const tc_tensor *t, const char *what, int i)
{
    char name[64];
    snprintf(name, sizeof name, "%s %d", what, i);
    TC_TRY(tc__tensor_check(t, name));
    if (t->storage->device.type != TC_CUDA)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s must be on a GPU, not the CPU", name);
    return TC_OK;
}

tc_status tc__comm_check_devices(const int *devices, int n)
{
    for (int i = 0; i < n; i++)
        if (devices[i] < 0)
            return tc__fail(TC_ERROR_INVALID_DEVICE,
                            "devices[%d] is %d: a device list holds GPU indices >= 0 (as in "
                            "torch.cuda.comm, no entry means the current device)",
                            i, devices[i]);
    for (int i = 0; i < n; i++) {
        tc_device d;
        TC_TRY(tc__device_resolve((tc_device){TC_CUDA, devices[i]}, &d));
    }
    return TC_OK;
}

/* The GPU index of a tensor, -1 for the CPU. */
static int gpu_of(const tc_tensor *t)
{
    return t->storage->device.type == TC_CUDA ? t->storage->device.index : -1;
}

static bool distinct(const int *devs, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (devs[i] == devs[j])
                return false;
    return true;
}

static bool same_sizes(const tc_tensor *a, const tc_tensor *b)
{
    return a->ndim == b->ndim && memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* t (named `what` i) has ref's dtype and sizes (ref is `ref_name`). */
static tc_status check_like(const tc_tensor *ref, const char *ref_name, const tc_tensor *t,
                            const char *what, int i)
{
    if (t->dtype != ref->dtype)
        return tc__fail(TC_ERROR_DTYPE, "%s %d has dtype %s, %s has %s", what, i,
                        tc_dtype_string(t->dtype), ref_name, tc_dtype_string(ref->dtype));
    if (!same_sizes(ref, t))
        return tc__fail(TC_ERROR_SHAPE, "%s %d has other sizes (%d dims) than %s (%d dims)", what,
                        i, t->ndim, ref_name, ref->ndim);
    return TC_OK;
}

/* reduce_add's destination: a GPU index, or TC_CURRENT_DEVICE (PyTorch's
 * None); any other negative number is refused. */
static tc_status resolve_destination(int destination, int *out)
{
    if (destination < 0 && destination != TC_CURRENT_DEVICE)
        return tc__fail(TC_ERROR_INVALID_DEVICE,
                        "destination %d: use a GPU index, or TC_CURRENT_DEVICE (-1) for the "
                        "current device",
                        destination);
    tc_device d;
    TC_TRY(tc__device_resolve((tc_device){TC_CUDA, destination}, &d));
    *out = d.index;
    return TC_OK;
}

/* ---- broadcast ------------------------------------------------------------------------- */

/* The NCCL path (comm_internal.h): t is the root, the outputs on other
 * devices than t's receive (dense, on distinct devices); an output on t's own
 * device is a copy after it. TC_ERROR_NOT_SUPPORTED (nothing queued) sends
 * the caller to the copies; any other failure (NCCL there but failing in a
 * collective) is the caller's error. */
static tc_status broadcast_accel(const tc_tensor *t, tc_tensor *const *outs, int n)
{
    int src = gpu_of(t);
    size_t bytes = (size_t)tc__numel(t->ndim, t->sizes) * tc_dtype_size(t->dtype);
    if (src < 0 || bytes == 0 || !tc__is_contiguous(t))
        return TC_ERROR_NOT_SUPPORTED;
    tc_tensor *bufs[TC_MAX_DEVICES + 1];
    int devs[TC_MAX_DEVICES + 1], m = 1;
    bufs[0] = (tc_tensor *)t;
    devs[0] = src;
    for (int i = 0; i < n; i++) {
        if (!tc__is_contiguous(outs[i]))
            return TC_ERROR_NOT_SUPPORTED;
        if (gpu_of(outs[i]) == src)
            continue;
        bufs[m] = outs[i];
        devs[m++] = gpu_of(outs[i]);
    }
    if (m < 2 || !distinct(devs, m))
        return TC_ERROR_NOT_SUPPORTED;
    const tc__device_ops *ops = tc__dev();
    TC_TRY(ops->comm->broadcast(bufs, devs, m, 0, bytes));
    for (int i = 0; i < m; i++) /* read and written there: not reused before it is done */
        TC_TRY(tc__storage_record_stream(bufs[i]->storage, devs[i], ops->current_stream(devs[i])));
    for (int i = 0; i < n; i++) /* the outputs on t's device, if any */
        if (gpu_of(outs[i]) == src && outs[i] != t)
            TC_TRY(tc_tensor_copy_(outs[i], t, true));
    return TC_OK;
}

/* Copies t into outs[0..n) (checked: GPU tensors of t's sizes and dtype):
 * NCCL where it can, else one Tensor.copy_ each (an output that is t itself
 * is left alone), as PyTorch's _broadcast_out_impl. */
static tc_status broadcast_into(const tc_tensor *t, tc_tensor *const *outs, int n)
{
    tc_status st = broadcast_accel(t, outs, n);
    if (st != TC_ERROR_NOT_SUPPORTED)
        return st;
    for (int i = 0; i < n; i++)
        if (outs[i] != t)
            TC_TRY(tc_tensor_copy_(outs[i], t, true));
    return TC_OK;
}

/* out[i] = t on devs[i] (checked GPU indices): t itself where it is there,
 * else a new tensor that receives it. */
static tc_status broadcast_to(const tc_tensor *t, const int *devs, int n, tc_tensor **out)
{
    tc_tensor *res[TC_MAX_DEVICES] = {0}, *fresh[TC_MAX_DEVICES] = {0};
    int m = 0, src = gpu_of(t);
    tc_status st = TC_OK;
    for (int i = 0; i < n && st == TC_OK; i++) {
        if (devs[i] == src) {
            res[i] = tc__tensor_ref((tc_tensor *)t);
            continue;
        }
        st = tc__new_tensor(t->ndim, t->sizes, t->dtype, (tc_device){TC_CUDA, devs[i]}, false,
                            &res[i]);
        if (st == TC_OK)
            fresh[m++] = res[i];
    }
    if (st == TC_OK)
        st = broadcast_into(t, fresh, m);
    if (st == TC_OK)
        memcpy(out, res, sizeof *res * (size_t)n);
    else
        tc__comm_release_all(res, n);
    return st;
}

tc_status tc_comm_broadcast(const tc_tensor *t, const int *devices, int n, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(n >= 0 && n <= TC_MAX_DEVICES, "n must be in 0..%d, not %d", TC_MAX_DEVICES, n);
    if (n == 0)
        return TC_OK;
    TC_CHECK_ARG(devices, "devices is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__comm_check_devices(devices, n));
    return broadcast_to(t, devices, n, out);
}

tc_status tc_comm_broadcast_out(const tc_tensor *t, tc_tensor *const *outputs, int n)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(n >= 0 && n <= TC_MAX_DEVICES, "n must be in 0..%d, not %d", TC_MAX_DEVICES, n);
    if (n == 0)
        return TC_OK;
    TC_CHECK_ARG(outputs, "outputs is NULL");
    for (int i = 0; i < n; i++) {
        TC_TRY(tc__comm_check_gpu(outputs[i], "output", i));
        TC_TRY(check_like(t, "t", outputs[i], "output", i));
    }
    return broadcast_into(t, outputs, n);
}

/* ---- reduce_add ------------------------------------------------------------------------- */

/* NCCL's reduce of inputs on distinct devices, one of them dst (devs[root]),
 * all dense, into a new tensor there. TC_ERROR_NOT_SUPPORTED: use copies. */
static tc_status reduce_accel(const tc_tensor *const *inputs, const int *devs, int n, int root,
                              tc_tensor **out)
{
    const tc_tensor *x = inputs[0];
    tc_tensor *sum;
    TC_TRY(
        tc__new_tensor(x->ndim, x->sizes, x->dtype, (tc_device){TC_CUDA, devs[root]}, false, &sum));
    const tc__device_ops *ops = tc__dev();
    tc_status st = ops->comm->reduce(inputs, sum, devs, n, root);
    for (int i = 0; i < n && st == TC_OK; i++) /* read there: not reused before it is done */
        st = tc__storage_record_stream(inputs[i]->storage, devs[i], ops->current_stream(devs[i]));
    if (st != TC_OK) {
        tc_tensor_release(sum);
        return st;
    }
    *out = sum;
    return TC_OK;
}

/* The sum of inputs[0..n) (checked: GPU, one dtype and sizes) on GPU dst.
 * As PyTorch: the last input on dst (if any) starts the sum, the others are
 * copied over and added in order; one input on dst is the result itself. */
static tc_status reduce_to(const tc_tensor *const *inputs, int n, int dst, tc_tensor **out)
{
    int root = -1, devs[TC_MAX_DEVICES];
    bool dense = true;
    for (int i = 0; i < n; i++) {
        devs[i] = gpu_of(inputs[i]);
        dense = dense && tc__is_contiguous(inputs[i]);
        if (devs[i] == dst)
            root = i;
    }
    if (n >= 2 && root >= 0 && dense && tc__numel(inputs[0]->ndim, inputs[0]->sizes) > 0 &&
        distinct(devs, n)) {
        tc_status st = reduce_accel(inputs, devs, n, root, out);
        if (st != TC_ERROR_NOT_SUPPORTED)
            return st;
    }
    int first = root >= 0 ? root : 0;
    tc_tensor *acc = NULL;
    tc_status st = tc_tensor_to(inputs[first], (tc_device){TC_CUDA, dst}, inputs[first]->dtype,
                                true, &acc);
    for (int i = 0; i < n && st == TC_OK; i++) {
        if (i == first)
            continue;
        tc_tensor *x = NULL, *sum = NULL;
        st = tc_tensor_to(inputs[i], (tc_device){TC_CUDA, dst}, inputs[i]->dtype, true, &x);
        if (st == TC_OK)
            st = tc_tensor_add(acc, x, &sum);
        tc_tensor_release(x);
        if (st == TC_OK) {
            tc_tensor_release(acc);
            acc = sum;
        }
    }
    if (st != TC_OK) {
        tc_tensor_release(acc);
        return st;
    }
    *out = acc;
    return TC_OK;
}

/* inputs[0..n) are live GPU tensors of inputs[0]'s dtype and sizes. */
static tc_status check_inputs(const tc_tensor *const *inputs, int n, int first_index)
{
    for (int i = 0; i < n; i++) {
        TC_TRY(tc__comm_check_gpu(inputs[i], "input", first_index + i));
        TC_TRY(check_like(inputs[0], "input 0", inputs[i], "input", first_index + i));
    }
    return TC_OK;
}

tc_status tc_comm_reduce_add(const tc_tensor *const *inputs, int n, int destination,
                             tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(inputs, "inputs is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(n >= 1 && n <= TC_MAX_DEVICES, "n must be in 1..%d, not %d", TC_MAX_DEVICES, n);
    TC_TRY(check_inputs(inputs, n, 0));
    int dst = 0;
    TC_TRY(resolve_destination(destination, &dst));
    return reduce_to(inputs, n, dst, out);
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
            tc__comm_release_all(out, i - lo);
            return st;
        }
        off += k;
    }
    return TC_OK;
}

/* ---- broadcast_coalesced ----------------------------------------------------------------- */

/* Broadcasts tensors[lo..hi) (one bucket) to devs[0..nd): res[d * nt + i].
 * Row `own` (-1: none) gets the tensors themselves; the others the received
 * buffer's views (a one-tensor bucket is not packed: its broadcast gives the
 * tensor itself on its own device, as PyTorch's flatten of one tensor). */
static tc_status broadcast_bucket(const tc_tensor *const *tensors, int lo, int hi, int nt,
                                  const int *devs, int nd, int own, tc_tensor **res)
{
    tc_tensor *got[TC_MAX_DEVICES];
    if (hi - lo == 1) {
        TC_TRY(broadcast_to(tensors[lo], devs, nd, got));
        for (int d = 0; d < nd; d++)
            res[d * nt + lo] = got[d];
        return TC_OK;
    }
    tc_tensor *flat;
    TC_TRY(pack(tensors, lo, hi, &flat));
    tc_status st = broadcast_to(flat, devs, nd, got);
    tc_tensor_release(flat);
    TC_TRY(st);
    for (int d = 0; d < nd && st == TC_OK; d++) {
        if (d == own) {
            for (int i = lo; i < hi; i++)
                res[d * nt + i] = tc__tensor_ref((tc_tensor *)tensors[i]);
        } else {
            st = unpack(got[d], tensors, lo, hi, &res[d * nt + lo]);
        }
    }
    tc__comm_release_all(got, nd);
    return st;
}

tc_status tc_comm_broadcast_coalesced(const tc_tensor *const *tensors, int n_tensors,
                                      const int *devices, int n_devices, size_t buffer_size,
                                      tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(tensors, "tensors is NULL");
    TC_CHECK_ARG(n_tensors >= 1, "n_tensors must be at least 1, not %d", n_tensors);
    TC_CHECK_ARG(devices, "devices is NULL");
    TC_CHECK_ARG(n_devices >= 1 && n_devices <= TC_MAX_DEVICES,
                 "n_devices must be in 1..%d, not %d", TC_MAX_DEVICES, n_devices);
    TC_CHECK_ARG(out, "out is NULL");
    for (int i = 0; i < n_tensors; i++) {
        TC_TRY(tc__tensor_check(tensors[i], "tensor"));
        if (gpu_of(tensors[i]) != gpu_of(tensors[0]))
            return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                            "all tensors must be on one device: tensor %d is on %s%d, tensor 0 "
                            "on %s%d",
                            i, gpu_of(tensors[i]) < 0 ? "the CPU " : "cuda:", gpu_of(tensors[i]),
                            gpu_of(tensors[0]) < 0 ? "the CPU " : "cuda:", gpu_of(tensors[0]));
    }
    TC_TRY(tc__comm_check_devices(devices, n_devices));
    int own = -1; /* the first entry of the tensors' own GPU */
    for (int d = n_devices - 1; d >= 0; d--)
        if (devices[d] == gpu_of(tensors[0]))
            own = d;
    size_t count = (size_t)n_tensors * (size_t)n_devices;
    tc_tensor **res = calloc(count, sizeof *res);
    if (!res)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    tc_status st = TC_OK;
    for (int lo = 0; lo < n_tensors && st == TC_OK;) {
        int hi = bucket_end(tensors, lo, n_tensors, buffer_size);
        st = broadcast_bucket(tensors, lo, hi, n_tensors, devices, n_devices, own, res);
        lo = hi;
    }
    if (st == TC_OK)
        memcpy(out, res, sizeof *res * count);
    else
        tc__comm_release_all(res, (int)count);
    free(res);
    return st;
}

/* ---- reduce_add_coalesced ----------------------------------------------------------------- */

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
        st = reduce_to((const tc_tensor *const *)flats, nd, dst, &sum);
    tc__comm_release_all(flats, made);
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
    TC_CHECK_ARG(n_devices >= 1 && n_devices <= TC_MAX_DEVICES,
                 "n_devices must be in 1..%d, not %d", TC_MAX_DEVICES, n_devices);
    TC_CHECK_ARG(n_tensors >= 1, "n_tensors must be at least 1, not %d", n_tensors);
    for (int d = 0; d < n_devices; d++) {
        const tc_tensor *const *row = inputs + (size_t)d * (size_t)n_tensors;
        for (int i = 0; i < n_tensors; i++) {
            int k = d * n_tensors + i;
            TC_TRY(tc__comm_check_gpu(row[i], "input", k));
            TC_TRY(check_like(inputs[i], "its column's first", row[i], "input", k));
            if (gpu_of(row[i]) != gpu_of(row[0]))
                return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                                "the tensors of row %d must be on one device: input %d is on "
                                "cuda:%d, the row's first on cuda:%d",
                                d, k, gpu_of(row[i]), gpu_of(row[0]));
        }
    }
    int dst = 0;
    TC_TRY(resolve_destination(destination, &dst));
    tc_tensor **res = calloc((size_t)n_tensors, sizeof *res);
    if (!res)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    tc_status st = TC_OK;
    for (int lo = 0; lo < n_tensors && st == TC_OK;) {
        int hi = bucket_end(inputs, lo, n_tensors, buffer_size);
        st = reduce_bucket(inputs, n_devices, n_tensors, lo, hi, dst, res);
        lo = hi;
    }
    if (st == TC_OK)
        memcpy(out, res, sizeof *res * (size_t)n_tensors);
    else
        tc__comm_release_all(res, n_tensors);
    free(res);
    return st;
}
