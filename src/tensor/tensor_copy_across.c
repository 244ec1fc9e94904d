/* Copies between devices (tc_tensor_copy_ when dst and src live on different
 * devices): which copies wait, the dense temporaries that let the device
 * move plain bytes (the seam's `transfer`), and what the access layer is
 * told.
 *
 * Copy rules, as the CUDA semantics seed says: host to device returns once
 * the source was read (pageable memory is staged by CUDA; pinned memory with
 * non_blocking is read later by the DMA engine); device to host waits for the
 * stream unless the destination is pinned and non_blocking was asked (then a
 * sync point is not reached). Device to device between GPUs goes on the
 * destination's current stream, ordered after the source's current stream
 * and before any later work on it. Strided or converting copies go through a
 * dense temporary on the side that has the kernels.
 *
 * To the access layer a copy is one operation on the GPU side's current
 * stream (a copy between GPUs: on the destination's, after the source's),
 * with the tensors' own shapes: pinned memory read or written later by the
 * DMA engine is part of it, and a copy that waits synchronizes the host
 * with that stream. A copy is never complete (captures ordered by data
 * place it after everything before it). */
#include <string.h>

#include "access/access.h"
#include "base/env.h"
#include "tensor_internal.h"
#include "tensor_watch.h"

/* src is dense with dst's dtype and sizes: read in place. */
static bool dense_as(const tc_tensor *src, const tc_tensor *dst)
{
    return src->dtype == dst->dtype && src->ndim == dst->ndim && tc__is_contiguous(src) &&
           memcmp(src->sizes, dst->sizes, sizeof(int64_t) * (size_t)dst->ndim) == 0;
}

/* src as a dense tensor with dst's dtype and sizes on src's device: src
 * itself when it is one already. */
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

/* ---- what the access layer is told ------------------------------------------ */

/* A tensor's bytes, with its own shape (a 1-operand iter, not coalesced). */
static void span_of_tensor(const tc_tensor *t, bool write, tc__span *out)
{
    tc__iter it;
    tc__iter_init(&it, t->ndim, t->sizes, 1);
    tc__iter_set(&it, 0, t);
    tc__span_of_iter(&it, 0, t->dtype, write, out);
}

/* The copy as one operation on (dev, stream), touching the n spans at sp;
 * between GPUs (after_dev >= 0) queued after `after` of after_dev. */
static tc_status declare(int dev, void *stream, const tc__span *sp, int n, bool non_blocking,
                         int after_dev, void *after)
{
    tc__access_op op = {.dev = dev,
                        .stream = stream,
                        .spans = sp,
                        .n = n,
                        .what = non_blocking ? "non_blocking copy" : "copy",
                        .after_set = after_dev >= 0,
                        .after_dev = after_dev,
                        .after_stream = after};
    return tc__access_op_publish(&op);
}

/* Before the copy: its operation; *then (when *pending) is the
 * synchronization the copy makes, to publish once it was queued: the host
 * waiting for the stream, or the source's stream waiting for the copy
 * between GPUs. */
static tc_status watch_before(tc_tensor *dst, const tc_tensor *src, bool nb, tc__sync *then,
                              bool *pending)
{
    *pending = false;
    tc_device dd = dst->storage->device, sd = src->storage->device;
    const tc__device_ops *ops = tc__dev();
    tc__span sp[2];
    span_of_tensor(dst, true, &sp[0]);
    span_of_tensor(src, false, &sp[1]);
    if (sd.type == TC_CPU) { /* host to device: pinned memory dense as dst is read later */
        void *s = ops->current_stream(dd.index);
        bool async_src = src->storage->pinned && dense_as(src, dst);
        TC_TRY(declare(dd.index, s, sp, async_src ? 2 : 1, nb, -1, NULL));
        *then = (tc__sync){.kind = TC__SYNC_STREAM_SYNC, .dev = dd.index, .stream = s};
        *pending = async_src && !nb;
        return TC_OK;
    }
    if (dd.type == TC_CPU) { /* device to host: waits unless pinned, dense and non_blocking */
        void *s = ops->current_stream(sd.index);
        bool direct = dst->storage->pinned && tc__is_contiguous(dst);
        TC_TRY(declare(sd.index, s, direct ? sp : sp + 1, direct ? 2 : 1, nb, -1, NULL));
        *then = (tc__sync){.kind = TC__SYNC_STREAM_SYNC, .dev = sd.index, .stream = s};
        *pending = !(nb && direct);
        return TC_OK;
    }
    void *ss = ops->current_stream(sd.index), *ds = ops->current_stream(dd.index);
    TC_TRY(declare(dd.index, ds, sp, 2, nb, sd.index, ss));
    *then = (tc__sync){.kind = TC__SYNC_STREAM_WAIT_STREAM,
                       .dev = sd.index,
                       .stream = ss,
                       .other_dev = dd.index,
                       .other = ds};
    *pending = true;
    return TC_OK;
}

/* ---- the copy ------------------------------------------------------------------ */

/* Decides first whether the copy waits, so that sync debug mode 2 refuses it
 * before anything was queued. */
static tc_status sync_rules(const tc_tensor *dst, const tc_tensor *src, bool nb, bool *wait)
{
    tc_device dd = dst->storage->device, sd = src->storage->device;
    bool d2h = dd.type == TC_CPU, h2d = sd.type == TC_CPU;
    *wait = d2h && !(nb && dst->storage->pinned && tc__is_contiguous(dst));
    if (*wait)
        return tc__sync_point_on(dst->storage->pinned ? "a blocking copy to host memory"
                                                      : "a copy to pageable host memory",
                                 tc__dev()->current_stream(sd.index));
    if (h2d && !(nb && src->storage->pinned))
        return tc__sync_check(src->storage->pinned ? "a blocking copy from host memory"
                                                   : "a copy from pageable host memory",
                              tc__dev()->current_stream(dd.index));
    return TC_OK;
}

/* Moves dense s into dense d (the seam), and keeps the pinned side from
 * reuse until the stream that reads or writes it is done. */
static tc_status move(tc_tensor *d, const tc_tensor *s, bool wait)
{
    const tc__device_ops *ops = tc__dev();
    TC_TRY(ops->transfer(d, s, wait));
    tc_device dd = d->storage->device, sd = s->storage->device;
    if (dd.type == TC_CUDA && sd.type == TC_CUDA)
        return TC_OK;
    tc__storage *host = sd.type == TC_CPU ? s->storage : d->storage;
    int gpu = sd.type == TC_CPU ? dd.index : sd.index;
    return tc__storage_record_stream(host, gpu, ops->current_stream(gpu));
}

tc_status tc__copy_across(tc_tensor *dst, const tc_tensor *src, bool non_blocking)
{
    if (tc__numel(dst->ndim, dst->sizes) == 0)
        return TC_OK;
    bool watched = tc__access_on(), pending = false;
    tc__sync then;
    if (watched)
        TC_TRY(watch_before(dst, src, non_blocking, &then, &pending));
    bool wait;
    TC_TRY(sync_rules(dst, src, non_blocking, &wait));
    tc_tensor *s = NULL, *d = NULL;
    tc_status st = dense_source(src, dst, &s);
    if (st == TC_OK)
        st = dense_target(dst, &d);
    bool h2d_pinned = src->storage->device.type == TC_CPU && !non_blocking &&
                      src->storage->pinned && s == src;
    if (st == TC_OK)
        st = move(d, s, wait || h2d_pinned);
    if (st == TC_OK && d != dst)
        st = tc__copy_local(dst, d); /* on the destination device (the CPU after a wait) */
    tc_tensor_release(s);
    tc_tensor_release(d);
    if (st == TC_OK && pending)
        tc__access_sync(&then);
    return st;
}
