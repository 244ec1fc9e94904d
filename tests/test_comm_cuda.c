/* GPU: torch.cuda.comm collectives, checked against values computed on the
 * host. With one GPU every collective runs on device lists of GPU 0, once
 * and listed twice (PyTorch takes a device more than once: broadcast gives
 * the source itself for each entry of its device, scatter views of it), from
 * GPU and CPU sources, with zero-size chunks, the out= forms of scatter and
 * gather (chunk lengths from the outputs, dtypes converted) and the errors
 * (negative devices and destinations, shapes, dtypes). With two or more,
 * every collective runs over all GPUs (broadcast from the GPU and the CPU,
 * coalesced forms with several buffers, reduce_add with inputs sharing a
 * device and to a device no input is on, scatter even and by chunk sizes
 * along two dims with streams, the out= forms across devices, gather to a
 * GPU and to the CPU), once with peer copies (TCUDA_COMM_NCCL=0) and once on
 * NCCL where it is found; the current device is the same after each call.
 * With two or more GPUs also: four threads running broadcast and reduce_add
 * on one device list at once, and two threads on overlapping lists of other
 * orders (made while the other thread launches: no deadlock, right values);
 * and, with a fake NCCL whose ncclCommInitAll fails (support/fake_nccl.c, in
 * a child process), broadcast, broadcast_out and reduce_add fall back to
 * peer copies with right values, and each failed device list prints one
 * warning (it is not tried again). Parts that need more GPUs than the host
 * has say so and are skipped. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl_find.h"
#include "tc_test.h"
#include "tcuda/comm.h"

static const tc_device CPU = {TC_CPU, -1};

/* Host values: small integers, so float sums are exact. */
static float *values(int64_t n)
{
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((int)(tc_test_rand() % 1000) - 500);
    return v;
}

static tc_tensor *on(int dev, int ndim, const int64_t *sizes, const float *v)
{
    tc_tensor *t = NULL;
    tc_device d = dev < 0 ? CPU : (tc_device){TC_CUDA, dev};
    CHECK_OK(tc_tensor_from_data(v, ndim, sizes, TC_FLOAT32, d, &t));
    return t;
}

static tc_tensor *zeros(int dev, int ndim, const int64_t *sizes, tc_dtype dtype)
{
    tc_tensor *t = NULL;
    tc_device d = dev < 0 ? CPU : (tc_device){TC_CUDA, dev};
    CHECK_OK(tc_tensor_zeros(ndim, sizes, dtype, d, &t));
    return t;
}

/* True when t (any device) holds exactly v[0..n). */
static bool holds(const tc_tensor *t, const float *v, int64_t n)
{
    if (!t || tc_tensor_numel(t) != n)
        return false;
    double *got = tc_test_values(t);
    bool ok = got != NULL;
    for (int64_t i = 0; ok && i < n; i++)
        ok = got[i] == (double)v[i];
    free(got);
    return ok;
}

/* True when a and b are views of one storage. */
static bool same_storage(const tc_tensor *a, const tc_tensor *b)
{
    const char *pa = (const char *)tc_tensor_data_ptr(a) -
                     tc_tensor_offset(a) * (int64_t)tc_dtype_size(tc_tensor_dtype(a));
    const char *pb = (const char *)tc_tensor_data_ptr(b) -
                     tc_tensor_offset(b) * (int64_t)tc_dtype_size(tc_tensor_dtype(b));
    return pa && pa == pb;
}

static bool on_gpu(const tc_tensor *t, int dev)
{
    return tc_tensor_is_cuda(t) && tc_tensor_device(t).index == dev;
}

static void release_n(tc_tensor **t, int n)
{
    for (int i = 0; i < n; i++) {
        tc_tensor_release(t[i]);
        t[i] = NULL;
    }
}

/* ---- one GPU -------------------------------------------------------------------------------- */

static void one_device_broadcast(tc_tensor *t, tc_tensor *host, const float *v, const float *w)
{
    int64_t sz[2] = {6, 5};
    int dev0[1] = {0}, twice[2] = {0, 0};
    tc_tensor *out[8] = {0};
    CHECK_OK(tc_comm_broadcast(t, dev0, 1, out));
    CHECK(out[0] == t); /* the source device gets the tensor itself, as in PyTorch */
    release_n(out, 1);
    CHECK_OK(tc_comm_broadcast(t, twice, 2, out)); /* each time it is listed */
    CHECK(out[0] == t && out[1] == t);
    release_n(out, 2);
    /* a CPU source: a copy for each entry, never the source itself */
    CHECK_OK(tc_comm_broadcast(host, twice, 2, out));
    CHECK(on_gpu(out[0], 0) && on_gpu(out[1], 0) && !same_storage(out[0], out[1]));
    CHECK(holds(out[0], v, 30) && holds(out[1], v, 30));
    release_n(out, 2);

    /* broadcast_out: two outputs on one device, from the GPU and the CPU */
    tc_tensor *outs[2] = {on(0, 2, sz, w), on(0, 2, sz, w)};
    CHECK_OK(tc_comm_broadcast_out(t, outs, 2));
    CHECK(holds(outs[0], v, 30) && holds(outs[1], v, 30));
    CHECK_OK(tc_tensor_fill_(outs[0], 0));
    CHECK_OK(tc_tensor_fill_(outs[1], 0));
    CHECK_OK(tc_comm_broadcast_out(host, outs, 2));
    CHECK(holds(outs[0], v, 30) && holds(outs[1], v, 30));
    tc_tensor *i64 = zeros(0, 2, sz, TC_INT64), *other = zeros(0, 1, sz, TC_FLOAT32);
    CHECK_STATUS(tc_comm_broadcast_out(t, &i64, 1), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_comm_broadcast_out(t, &other, 1), TC_ERROR_SHAPE);

    /* broadcast_coalesced: the tensors themselves on devices[0]; a repeat of
     * it gets views of the packed buffer; CPU tensors are copied */
    int64_t s3 = 3;
    float *x = values(3);
    tc_tensor *small = on(0, 1, &s3, x), *hsmall = on(-1, 1, &s3, x);
    const tc_tensor *list[3] = {t, small, outs[0]};
    CHECK_OK(tc_comm_broadcast_coalesced(list, 3, dev0, 1, 64, out));
    CHECK(out[0] == t && out[1] == small && out[2] == outs[0]);
    release_n(out, 3);
    CHECK_OK(tc_comm_broadcast_coalesced(list, 3, twice, 2, TC_COMM_DEFAULT_BUFFER_SIZE, out));
    CHECK(out[0] == t && out[1] == small && out[2] == outs[0]);
    CHECK(holds(out[3], v, 30) && holds(out[4], x, 3) && holds(out[5], v, 30));
    CHECK(!same_storage(out[3], t) && same_storage(out[3], out[5]) && on_gpu(out[4], 0));
    release_n(out, 6);
    const tc_tensor *hlist[2] = {host, hsmall};
    CHECK_OK(tc_comm_broadcast_coalesced(hlist, 2, twice, 2, 0, out)); /* a buffer each */
    for (int d = 0; d < 2; d++)
        CHECK(on_gpu(out[2 * d], 0) && holds(out[2 * d], v, 30) && holds(out[2 * d + 1], x, 3));
    CHECK(!same_storage(out[0], out[2]));
    release_n(out, 4);

    tc_tensor_release(i64);
    tc_tensor_release(other);
    tc_tensor_release(small);
    tc_tensor_release(hsmall);
    release_n(outs, 2);
    free(x);
}

static void one_device_reduce(tc_tensor *t, const float *v, const float *w)
{
    int64_t sz[2] = {6, 5};
    tc_tensor *wt = on(0, 2, sz, w), *sum = NULL, *out[3] = {0};
    const tc_tensor *one[1] = {t};
    CHECK_OK(tc_comm_reduce_add(one, 1, 0, &sum));
    CHECK(sum == t); /* one input on the destination: the input, as in PyTorch */
    tc_tensor_release(sum);
    const tc_tensor *pair[2] = {t, wt}; /* two inputs on one device */
    CHECK_OK(tc_comm_reduce_add(pair, 2, TC_CURRENT_DEVICE, &sum));
    float ref[30];
    for (int i = 0; i < 30; i++)
        ref[i] = v[i] + w[i];
    CHECK(sum != t && sum != wt && on_gpu(sum, 0) && holds(sum, ref, 30));
    tc_tensor_release(sum);

    /* coalesced: one row gives the inputs themselves (one-tensor buckets);
     * two rows on one device their sums (one packed bucket) */
    int64_t s3 = 3;
    float *x = values(3);
    tc_tensor *small = on(0, 1, &s3, x);
    const tc_tensor *rows[6] = {t, small, wt, wt, small, t};
    CHECK_OK(tc_comm_reduce_add_coalesced(rows, 1, 3, TC_CURRENT_DEVICE, 64, out));
    CHECK(out[0] == t && out[1] == small && out[2] == wt);
    release_n(out, 3);
    CHECK_OK(tc_comm_reduce_add_coalesced(rows, 2, 3, 0, TC_COMM_DEFAULT_BUFFER_SIZE, out));
    float x2[3] = {2 * x[0], 2 * x[1], 2 * x[2]};
    CHECK(holds(out[0], ref, 30) && holds(out[1], x2, 3) && holds(out[2], ref, 30));
    release_n(out, 3);

    /* errors */
    int64_t other_sz[2] = {5, 6};
    tc_tensor *wrong = on(0, 2, other_sz, v), *i64 = zeros(0, 2, sz, TC_INT64),
              *keep = (tc_tensor *)0x1;
    const tc_tensor *bad_shape[2] = {t, wrong}, *bad_dtype[2] = {t, i64};
    CHECK_STATUS(tc_comm_reduce_add(bad_shape, 2, 0, &keep), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_comm_reduce_add(bad_dtype, 2, 0, &keep), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_comm_reduce_add(one, 1, -3, &keep), TC_ERROR_INVALID_DEVICE);
    CHECK(strstr(tc_last_error(), "destination -3") != NULL);
    CHECK_STATUS(tc_comm_reduce_add(one, 1, 99, &keep), TC_ERROR_INVALID_DEVICE);
    CHECK_STATUS(tc_comm_reduce_add_coalesced(rows, 1, 3, -2, 64, out), TC_ERROR_INVALID_DEVICE);
    CHECK(keep == (tc_tensor *)0x1 && out[0] == NULL);
    tc_tensor_release(wrong);
    tc_tensor_release(i64);
    tc_tensor_release(small);
    tc_tensor_release(wt);
    free(x);
}

static void one_device_scatter(tc_tensor *t, tc_tensor *host, const float *v)
{
    int dev0[1] = {0}, twice[2] = {0, 0}, n_out = 0;
    tc_tensor *out[4] = {0};
    CHECK_OK(tc_comm_scatter(host, dev0, 1, NULL, 0, NULL, out, &n_out));
    CHECK(n_out == 1 && on_gpu(out[0], 0) && holds(out[0], v, 30));
    release_n(out, 1);
    /* the source's own device: a view of it, no copy (its stream is not used) */
    tc_stream *s = NULL;
    CHECK_OK(tc_stream_create(0, 0, &s));
    int64_t five = 5;
    CHECK_OK(tc_comm_scatter(t, dev0, 1, &five, 1, &s, out, &n_out));
    CHECK(n_out == 1 && tc_tensor_data_ptr(out[0]) == tc_tensor_data_ptr(t));
    CHECK(holds(out[0], v, 30));
    release_n(out, 1);
    /* a device twice with a zero chunk: two views of t */
    int64_t split[2] = {0, 6};
    CHECK_OK(tc_comm_scatter(t, twice, 2, split, 0, NULL, out, &n_out));
    CHECK(n_out == 2 && tc_tensor_size(out[0], 0) == 0 && tc_tensor_size(out[1], 0) == 6);
    CHECK(same_storage(out[1], t) && holds(out[1], v, 30));
    release_n(out, 2);
    /* from the CPU: the zero chunk is an empty GPU tensor */
    CHECK_OK(tc_comm_scatter(host, twice, 2, split, 0, NULL, out, &n_out));
    CHECK(n_out == 2 && on_gpu(out[0], 0) && tc_tensor_numel(out[0]) == 0);
    CHECK(tc_tensor_size(out[0], 1) == 5 && on_gpu(out[1], 0) && holds(out[1], v, 30));
    release_n(out, 2);
    /* an empty dim: n empty chunks, as Tensor.chunk */
    int64_t esz[2] = {0, 5};
    tc_tensor *empty = zeros(-1, 2, esz, TC_FLOAT32);
    CHECK_OK(tc_comm_scatter(empty, twice, 2, NULL, 0, NULL, out, &n_out));
    CHECK(n_out == 2 && on_gpu(out[0], 0) && on_gpu(out[1], 0));
    CHECK(tc_tensor_numel(out[0]) == 0 && tc_tensor_numel(out[1]) == 0);
    release_n(out, 2);
    /* uneven chunks: 6 rows in 4 gives 2, 2, 2 (three chunks) */
    int four[4] = {0, 0, 0, 0};
    CHECK_OK(tc_comm_scatter(host, four, 4, NULL, 0, NULL, out, &n_out));
    CHECK(n_out == 3 && holds(out[2], v + 20, 10));
    release_n(out, 3);
    int neg[2] = {0, -1};
    CHECK_STATUS(tc_comm_scatter(host, neg, 2, NULL, 0, NULL, out, &n_out),
                 TC_ERROR_INVALID_DEVICE);

    /* scatter_out: lengths from the outputs, dtype converted, on a stream */
    int64_t a_sz[2] = {2, 5}, b_sz[2] = {4, 5}, c_sz[2] = {6, 2}, d_sz[2] = {6, 3};
    tc_tensor *oa = zeros(0, 2, a_sz, TC_FLOAT32), *ob = zeros(0, 2, b_sz, TC_INT64);
    tc_tensor *souts[2] = {oa, ob};
    tc_stream *ss[2] = {s, NULL};
    CHECK_OK(tc_comm_scatter_out(t, souts, 2, 0, ss));
    CHECK_OK(tc_stream_synchronize(s));
    CHECK(holds(oa, v, 10) && holds(ob, v + 10, 20) && tc_tensor_dtype(ob) == TC_INT64);
    tc_tensor *oc = zeros(0, 2, c_sz, TC_FLOAT32), *od = zeros(0, 2, d_sz, TC_FLOAT16);
    tc_tensor *couts[2] = {oc, od};
    CHECK_OK(tc_comm_scatter_out(host, couts, 2, -1, NULL)); /* from the CPU, along dim -1 */
    float rc[12], rd[18];
    for (int r = 0; r < 6; r++) {
        memcpy(rc + r * 2, v + r * 5, sizeof(float) * 2);
        memcpy(rd + r * 3, v + r * 5 + 2, sizeof(float) * 3);
    }
    CHECK(holds(oc, rc, 12) && holds(od, rd, 18));
    tc_tensor *twice_a[2] = {oa, oa}, *mixed[2] = {oa, oc}, *with_cpu[2] = {oa, host};
    CHECK_STATUS(tc_comm_scatter_out(t, twice_a, 2, 0, NULL), TC_ERROR_SHAPE); /* 4 != 6 */
    CHECK(strstr(tc_last_error(), "add up to 4") != NULL);
    CHECK_STATUS(tc_comm_scatter_out(t, mixed, 2, 0, NULL), TC_ERROR_SHAPE); /* dim 1 differs */
    CHECK_STATUS(tc_comm_scatter_out(t, with_cpu, 2, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    int64_t flat = 30;
    tc_tensor *flat1 = zeros(0, 1, &flat, TC_FLOAT32);
    CHECK_STATUS(tc_comm_scatter_out(t, &flat1, 1, 0, NULL), TC_ERROR_SHAPE); /* 1 dim, not 2 */

    tc_tensor_release(flat1);
    tc_tensor_release(oa);
    tc_tensor_release(ob);
    tc_tensor_release(oc);
    tc_tensor_release(od);
    tc_tensor_release(empty);
    tc_stream_destroy(s);
}

static void one_device_gather(tc_tensor *t, const float *v)
{
    int64_t sz[2] = {6, 5};
    tc_tensor *dst = on(0, 2, sz, v), *g = NULL;
    const tc_tensor *three[3] = {t, dst, t};
    CHECK_OK(tc_comm_gather(three, 3, 0, 0, &g));
    float *ref = malloc(sizeof(float) * 90);
    memcpy(ref, v, 120), memcpy(ref + 30, v, 120), memcpy(ref + 60, v, 120);
    CHECK(g && tc_tensor_size(g, 0) == 18 && holds(g, ref, 90));
    tc_tensor_release(g);
    CHECK_OK(tc_comm_gather(three, 3, -1, -1, &g)); /* dim -1 (1), to the CPU */
    for (int r = 0; r < 6; r++)
        for (int k = 0; k < 3; k++)
            memcpy(ref + r * 15 + k * 5, v + r * 5, 20);
    CHECK(g && !tc_tensor_is_cuda(g) && tc_tensor_size(g, 1) == 15 && holds(g, ref, 90));
    tc_tensor_release(g);
    CHECK_OK(tc_comm_gather(three, 3, 1, TC_COMM_CURRENT_DEVICE, &g));
    CHECK(g && on_gpu(g, 0) && holds(g, ref, 90));
    tc_tensor_release(g);

    /* gather_out: into the CPU and, converting, into an int64 GPU tensor */
    int64_t gsz[2] = {6, 15};
    tc_tensor *hout = zeros(-1, 2, gsz, TC_FLOAT32), *iout = zeros(0, 2, gsz, TC_INT64);
    CHECK_OK(tc_comm_gather_out(three, 3, 1, hout));
    CHECK_OK(tc_comm_gather_out(three, 3, -1, iout));
    CHECK(holds(hout, ref, 90) && holds(iout, ref, 90) && tc_tensor_dtype(iout) == TC_INT64);
    CHECK_STATUS(tc_comm_gather_out(three, 3, 0, hout), TC_ERROR_SHAPE); /* wants 18 x 5 */

    /* dtypes may differ: converted to tensors[0]'s */
    tc_tensor *i64 = zeros(0, 2, sz, TC_INT64);
    const tc_tensor *mixed[2] = {t, i64};
    CHECK_OK(tc_comm_gather(mixed, 2, 0, 0, &g));
    memcpy(ref, v, 120);
    memset(ref + 30, 0, 120);
    CHECK(g && tc_tensor_dtype(g) == TC_FLOAT32 && holds(g, ref, 60));
    tc_tensor_release(g);

    /* errors */
    int64_t other_sz[2] = {5, 6};
    tc_tensor *wrong = on(0, 2, other_sz, v), *keep = (tc_tensor *)0x1;
    const tc_tensor *bad[2] = {t, wrong};
    CHECK_STATUS(tc_comm_gather(bad, 2, 0, 0, &keep), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_comm_gather(three, 3, 0, -3, &keep), TC_ERROR_INVALID_DEVICE);
    CHECK(strstr(tc_last_error(), "destination -3") != NULL);
    CHECK_STATUS(tc_comm_gather(three, 3, 0, 99, &keep), TC_ERROR_INVALID_DEVICE);
    CHECK_STATUS(tc_comm_gather(three, 3, 2, 0, &keep), TC_ERROR_INVALID_ARGUMENT);
    CHECK(keep == (tc_tensor *)0x1);
    tc_tensor_release(wrong);
    tc_tensor_release(i64);
    tc_tensor_release(hout);
    tc_tensor_release(iout);
    tc_tensor_release(dst);
    free(ref);
}

static void test_one_device(void)
{
    int64_t sz[2] = {6, 5};
    float *v = values(30), *w = values(30);
    tc_tensor *t = on(0, 2, sz, v), *host = on(-1, 2, sz, v), *out[2] = {0};
    one_device_broadcast(t, host, v, w);
    one_device_reduce(t, v, w);
    one_device_scatter(t, host, v);
    one_device_gather(t, v);
    /* device lists take no negative entries, TC_CURRENT_DEVICE included */
    int cur[1] = {TC_CURRENT_DEVICE}, neg[2] = {0, -1}, missing[1] = {99};
    CHECK_STATUS(tc_comm_broadcast(t, cur, 1, out), TC_ERROR_INVALID_DEVICE);
    CHECK_STATUS(tc_comm_broadcast(t, neg, 2, out), TC_ERROR_INVALID_DEVICE);
    CHECK(strstr(tc_last_error(), "devices[1] is -1") != NULL);
    CHECK_STATUS(tc_comm_broadcast(t, missing, 1, out), TC_ERROR_INVALID_DEVICE);
    CHECK(out[0] == NULL && out[1] == NULL);
    tc_tensor_release(host);
    tc_tensor_release(t);
    free(v);
    free(w);
}

/* ---- several GPUs --------------------------------------------------------------------------- */

/* Broadcast from GPU 0 (to every GPU, the source last; to the others only;
 * to GPU 1 twice) and from the CPU, and broadcast_out. */
static void many_broadcast(int n, tc_tensor *t, const float *v, int64_t numel)
{
    int64_t sz[2] = {64, 33};
    int devs[8], others[8], dup[3] = {1, 1, 0};
    for (int i = 0; i < n; i++) {
        devs[i] = n - 1 - i; /* the source (0) last */
        others[i] = i + 1;
    }
    tc_tensor *out[8] = {0};
    CHECK_OK(tc_comm_broadcast(t, devs, n, out));
    for (int i = 0; i < n; i++)
        CHECK(on_gpu(out[i], devs[i]) && holds(out[i], v, numel));
    CHECK(out[n - 1] == t);
    release_n(out, n);
    CHECK_OK(tc_comm_broadcast(t, others, n - 1, out)); /* the source's device not listed */
    for (int i = 0; i < n - 1; i++)
        CHECK(on_gpu(out[i], i + 1) && holds(out[i], v, numel));
    release_n(out, n - 1);
    CHECK_OK(tc_comm_broadcast(t, dup, 3, out));
    CHECK(on_gpu(out[0], 1) && on_gpu(out[1], 1) && out[2] == t);
    CHECK(!same_storage(out[0], out[1]) && holds(out[0], v, numel) && holds(out[1], v, numel));
    release_n(out, 3);
    tc_tensor *host = on(-1, 2, sz, v);
    CHECK_OK(tc_comm_broadcast(host, devs, n, out));
    for (int i = 0; i < n; i++)
        CHECK(on_gpu(out[i], devs[i]) && holds(out[i], v, numel));
    release_n(out, n);

    /* broadcast_out into tensors on every device, and two on GPU 1 */
    tc_tensor *dst[9];
    for (int i = 0; i < n; i++)
        dst[i] = zeros(i, 2, sz, TC_FLOAT32);
    dst[n] = zeros(1, 2, sz, TC_FLOAT32);
    CHECK_OK(tc_comm_broadcast_out(t, dst, n));
    for (int i = 0; i < n; i++)
        CHECK(holds(dst[i], v, numel));
    CHECK_OK(tc_comm_broadcast_out(host, dst + 1, n));
    CHECK(holds(dst[n], v, numel));
    release_n(dst, n + 1);
    tc_tensor_release(host);
}

/* reduce_add to every device, with inputs sharing a device, and to a device
 * no input is on (tcuda's; PyTorch refuses it). */
static void many_reduce(int n, tc_tensor **dst, float **parts, int64_t numel)
{
    const tc_tensor *ins[9];
    float *sum = calloc((size_t)numel, sizeof(float)), *two = calloc((size_t)numel, sizeof(float));
    for (int i = 0; i < n; i++) {
        ins[i] = dst[i];
        for (int64_t k = 0; k < numel; k++)
            sum[k] += parts[i][k];
    }
    for (int d = 0; d < n; d++) {
        tc_tensor *r = NULL;
        CHECK_OK(tc_comm_reduce_add(ins, n, d, &r));
        CHECK(r && on_gpu(r, d) && holds(r, sum, numel));
        tc_tensor_release(r);
    }
    ins[n] = dst[1]; /* GPU 1 twice */
    for (int64_t k = 0; k < numel; k++)
        sum[k] += parts[1][k];
    tc_tensor *r = NULL;
    CHECK_OK(tc_comm_reduce_add(ins, n + 1, 1, &r));
    CHECK(r && on_gpu(r, 1) && holds(r, sum, numel));
    tc_tensor_release(r);
    if (n >= 3) {
        const tc_tensor *pair[2] = {dst[0], dst[1]};
        for (int64_t k = 0; k < numel; k++)
            two[k] = parts[0][k] + parts[1][k];
        CHECK_OK(tc_comm_reduce_add(pair, 2, 2, &r));
        CHECK(r && on_gpu(r, 2) && holds(r, two, numel));
        tc_tensor_release(r);
    }
    free(sum);
    free(two);
}

static void many_coalesced(int n, tc_tensor *t, const float *v, int64_t numel)
{
    int devs[8];
    for (int i = 0; i < n; i++)
        devs[i] = i;
    /* 4 tensors (two dtypes) in buffers of 1 KiB: a shared one, and single ones */
    int64_t s1 = 100, s2 = 150; /* 400 + 600 bytes: one buffer */
    float *a = values(s1), *b = values(s2);
    tc_tensor *ta = on(0, 1, &s1, a), *tb = on(0, 1, &s2, b), *ti = NULL;
    CHECK_OK(tc_tensor_arange(0, 50, 1, TC_INT64, (tc_device){TC_CUDA, 0}, &ti));
    const tc_tensor *list[4] = {ta, tb, ti, t};
    tc_tensor **co = calloc((size_t)(4 * n), sizeof *co);
    CHECK_OK(tc_comm_broadcast_coalesced(list, 4, devs, n, 1024, co));
    float *iota = malloc(sizeof(float) * 50);
    for (int k = 0; k < 50; k++)
        iota[k] = (float)k;
    CHECK(co[0] == ta && co[3] == t);
    for (int d = 0; d < n; d++) {
        CHECK(holds(co[d * 4 + 0], a, s1) && holds(co[d * 4 + 1], b, s2));
        CHECK(holds(co[d * 4 + 2], iota, 50) && holds(co[d * 4 + 3], v, numel));
        CHECK(tc_tensor_dtype(co[d * 4 + 2]) == TC_INT64);
        CHECK(on_gpu(co[d * 4 + 1], devs[d]));
    }
    /* reduce_add_coalesced over the received copies: n times each */
    tc_tensor *red[4] = {0};
    CHECK_OK(tc_comm_reduce_add_coalesced((const tc_tensor *const *)co, n, 4, 0, 1024, red));
    for (int64_t k = 0; k < s2; k++)
        b[k] *= (float)n;
    for (int k = 0; k < 50; k++)
        iota[k] *= (float)n;
    CHECK(holds(red[1], b, s2) && holds(red[2], iota, 50) && on_gpu(red[0], 0));
    release_n(red, 4);
    release_n(co, 4 * n);
    /* from CPU tensors: every entry a copy */
    tc_tensor *ha = on(-1, 1, &s1, a);
    const tc_tensor *hlist[2] = {ha, ha};
    CHECK_OK(tc_comm_broadcast_coalesced(hlist, 2, devs, n, 1024, co));
    for (int d = 0; d < n; d++)
        CHECK(on_gpu(co[2 * d], d) && holds(co[2 * d], a, s1) && holds(co[2 * d + 1], a, s1));
    release_n(co, 2 * n);
    tc_tensor_release(ha);
    free(co);
    tc_tensor_release(ta);
    tc_tensor_release(tb);
    tc_tensor_release(ti);
    free(iota);
    free(a);
    free(b);
}

static void many_scatter_gather(int n, tc_tensor *t, const float *v, int64_t numel)
{
    int devs[8], n_out = 0;
    for (int i = 0; i < n; i++)
        devs[i] = n - 1 - i; /* the source (0) last */
    tc_tensor *out[9] = {0};
    /* scatter: even chunks along dim 0 (64 rows) on streams; given sizes along dim 1 */
    tc_stream *streams[8];
    for (int i = 0; i < n; i++)
        CHECK_OK(tc_stream_create(devs[i], 0, &streams[i]));
    CHECK_OK(tc_comm_scatter(t, devs, n, NULL, 0, streams, out, &n_out));
    int64_t each = (64 + n - 1) / n, row = 0;
    CHECK(n_out == (int)((64 + each - 1) / each));
    for (int i = 0; i < n_out; i++) {
        CHECK_OK(tc_stream_synchronize(streams[i]));
        int64_t rows = tc_tensor_size(out[i], 0);
        CHECK(on_gpu(out[i], devs[i]) && holds(out[i], v + row * 33, rows * 33));
        row += rows;
    }
    CHECK(row == 64);
    const tc_tensor *back[9];
    for (int i = 0; i < n_out; i++)
        back[i] = out[i];
    tc_tensor *g = NULL;
    CHECK_OK(tc_comm_gather(back, n_out, 0, -1, &g));
    CHECK(holds(g, v, numel));
    tc_tensor_release(g);
    release_n(out, n_out);

    int64_t chunks[8], left = 33;
    for (int i = 0; i < n; i++) {
        chunks[i] = i == n - 1 ? left : 1 + i;
        left -= chunks[i];
    }
    CHECK_OK(tc_comm_scatter(t, devs, n, chunks, 1, NULL, out, &n_out));
    CHECK(n_out == n);
    for (int i = 0; i < n; i++)
        back[i] = out[i];
    CHECK_OK(tc_comm_gather(back, n, 1, 1, &g));
    CHECK(g && on_gpu(g, 1) && holds(g, v, numel));
    tc_tensor_release(g);
    /* gather_out of the same pieces into GPU 1 */
    int64_t sz[2] = {64, 33};
    tc_tensor *gout = zeros(1, 2, sz, TC_FLOAT32);
    CHECK_OK(tc_comm_gather_out(back, n, -1, gout));
    CHECK(holds(gout, v, numel));
    release_n(out, n);

    /* from the CPU to GPU 1 twice, with a zero chunk, then GPU 0 */
    tc_tensor *host = on(-1, 2, sz, v);
    int dup[3] = {1, 1, 0};
    int64_t split[3] = {0, 10, 54};
    CHECK_OK(tc_comm_scatter(host, dup, 3, split, 0, NULL, out, &n_out));
    CHECK(n_out == 3 && on_gpu(out[0], 1) && tc_tensor_numel(out[0]) == 0);
    CHECK(on_gpu(out[1], 1) && holds(out[1], v, 330) && on_gpu(out[2], 0));
    CHECK(holds(out[2], v + 330, 54 * 33));
    release_n(out, 3);
    /* a stream of another device than its chunk's: refused where the chunk
     * is copied, not looked at for the source's own device (as PyTorch) */
    int pair[2] = {0, 1};
    tc_stream *wrong[2] = {streams[n - 2], streams[n - 1]}; /* on GPUs 1 and 0 */
    CHECK_STATUS(tc_comm_scatter(t, pair, 2, NULL, 0, wrong, out, &n_out),
                 TC_ERROR_DEVICE_MISMATCH);
    tc_stream *local_only[2] = {streams[n - 2], NULL};
    CHECK_OK(tc_comm_scatter(t, pair, 2, NULL, 0, local_only, out, &n_out));
    CHECK(n_out == 2 && holds(out[1], v + 32 * 33, 32 * 33));
    release_n(out, 2);

    /* scatter_out across devices: GPU 1 gets 10 rows, GPU 0 54, with streams */
    int64_t s10[2] = {10, 33}, s54[2] = {54, 33};
    tc_tensor *souts[2] = {zeros(1, 2, s10, TC_FLOAT32), zeros(0, 2, s54, TC_FLOAT32)};
    tc_stream *ss[2] = {streams[n - 2], streams[n - 1]};
    CHECK_OK(tc_comm_scatter_out(host, souts, 2, 0, ss));
    CHECK_OK(tc_comm_scatter_out(t, souts, 2, 0, ss));
    CHECK_OK(tc_stream_synchronize(ss[0]));
    CHECK_OK(tc_stream_synchronize(ss[1]));
    CHECK(holds(souts[0], v, 330) && holds(souts[1], v + 330, 54 * 33));
    tc_stream *swapped[2] = {ss[1], ss[0]};
    CHECK_STATUS(tc_comm_scatter_out(t, souts, 2, 0, swapped), TC_ERROR_DEVICE_MISMATCH);
    release_n(souts, 2);
    tc_tensor_release(gout);
    tc_tensor_release(host);
    for (int i = 0; i < n; i++)
        tc_stream_destroy(streams[i]);
}

/* The current device is the caller's after collectives, and is where
 * reduce_add's and gather's "current device" put their results. */
static void many_current_device(tc_tensor *t, const float *v, int64_t numel)
{
    CHECK_OK(tc_set_device(1));
    int devs[2] = {0, 1};
    tc_tensor *out[2] = {0}, *r = NULL;
    CHECK_OK(tc_comm_broadcast(t, devs, 2, out));
    CHECK(tc_test_current_device() == 1);
    const tc_tensor *ins[2] = {out[0], out[1]};
    CHECK_OK(tc_comm_reduce_add(ins, 2, TC_CURRENT_DEVICE, &r));
    CHECK(tc_test_current_device() == 1 && on_gpu(r, 1));
    float *two = malloc(sizeof(float) * (size_t)numel);
    for (int64_t k = 0; k < numel; k++)
        two[k] = 2 * v[k];
    CHECK(holds(r, two, numel));
    tc_tensor_release(r);
    CHECK_OK(tc_comm_gather(ins, 2, 0, TC_COMM_CURRENT_DEVICE, &r));
    CHECK(on_gpu(r, 1) && tc_tensor_size(r, 0) == 128);
    tc_tensor_release(r);
    release_n(out, 2);
    CHECK_OK(tc_set_device(0));
    free(two);
}

static void test_many_devices(int n)
{
    bool peer = false;
    CHECK_OK(tc_can_device_access_peer(0, 1, &peer));
    printf("%d GPUs; peer access 0->1: %s\n", n, peer ? "yes" : "no");
    int64_t sz[2] = {64, 33};
    int64_t numel = 64 * 33;
    float *v = values(numel);
    tc_tensor *t = on(0, 2, sz, v);
    many_broadcast(n, t, v, numel);

    tc_tensor *dst[8];
    float *parts[8];
    for (int i = 0; i < n; i++) {
        parts[i] = values(numel);
        dst[i] = on(i, 2, sz, parts[i]);
    }
    many_reduce(n, dst, parts, numel);
    for (int i = 0; i < n; i++) {
        tc_tensor_release(dst[i]);
        free(parts[i]);
    }
    many_coalesced(n, t, v, numel);
    many_scatter_gather(n, t, v, numel);
    many_current_device(t, v, numel);
    tc_tensor_release(t);
    free(v);
}

/* ---- threads -------------------------------------------------------------------------------- */

/* One thread of test_threads: rounds of broadcast and reduce_add over
 * devices {0, 1}, each checked; the failures are counted. */
typedef struct worker {
    int rounds, failed;
    float *v;
} worker;

static void *work(void *p)
{
    worker *w = p;
    int64_t n = 4096;
    int devs[2] = {0, 1};
    for (int r = 0; r < w->rounds; r++) {
        tc_tensor *t = NULL, *out[2] = {0}, *sum = NULL;
        if (tc_tensor_from_data(w->v, 1, &n, TC_FLOAT32, (tc_device){TC_CUDA, 0}, &t) != TC_OK ||
            tc_comm_broadcast(t, devs, 2, out) != TC_OK ||
            tc_comm_reduce_add((const tc_tensor *const *)out, 2, 0, &sum) != TC_OK) {
            w->failed++;
        } else {
            double *got = tc_test_values(sum);
            for (int64_t i = 0; got && i < n; i++)
                if (got[i] != 2.0 * w->v[i]) {
                    w->failed++;
                    break;
                }
            free(got);
        }
        tc_tensor_release(sum);
        release_n(out, 2);
        tc_tensor_release(t);
    }
    return NULL;
}

/* Collectives of several threads on one device list at once. */
static void test_threads(void)
{
    worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){50, 0, values(4096)};
        CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].failed == 0);
        free(w[i].v);
    }
}

/* One thread of test_overlap: rounds alternating between two device lists;
 * each round broadcasts from the list's first device to the list and
 * reduce_adds the copies back there (NCCL's list is the device list itself
 * both times), checked. The threads start together, so a list is made while
 * the other thread launches on a list sharing its devices. */
typedef struct list_worker {
    int rounds, failed;
    int lists[2][4], len[2];
    float *v;
    pthread_barrier_t *start;
} list_worker;

static void *list_work(void *p)
{
    list_worker *w = p;
    int64_t n = 2048;
    pthread_barrier_wait(w->start);
    for (int r = 0; r < w->rounds; r++) {
        const int *devs = w->lists[r % 2];
        int m = w->len[r % 2];
        tc_tensor *t = NULL, *out[4] = {0}, *sum = NULL;
        if (tc_tensor_from_data(w->v, 1, &n, TC_FLOAT32, (tc_device){TC_CUDA, devs[0]}, &t) !=
                TC_OK ||
            tc_comm_broadcast(t, devs, m, out) != TC_OK ||
            tc_comm_reduce_add((const tc_tensor *const *)out, m, devs[0], &sum) != TC_OK) {
            w->failed++;
        } else {
            double *got = tc_test_values(sum);
            for (int64_t i = 0; got && i < n; i++)
                if (got[i] != (double)m * w->v[i]) {
                    w->failed++;
                    break;
                }
            if (!got || tc_tensor_device(sum).index != devs[0])
                w->failed++;
            free(got);
        }
        tc_tensor_release(sum);
        release_n(out, m);
        tc_tensor_release(t);
    }
    return NULL;
}

/* Two threads on overlapping device lists of different orders: {0, 1} and
 * {1, 0} with 2 GPUs; {0, 1, 2}, {0, 1} and {2, 1}, {1, 0} with 3; {3, 2, 1}
 * instead of {2, 1} with 4 or more. Launches that share a device queue one
 * after the other (no deadlock); the values are right. */
static void test_overlap(int n)
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    list_worker w[2] = {
        {.rounds = 40, .lists = {{0, 1}, {0, 1}}, .len = {2, 2}, .start = &start},
        {.rounds = 40, .lists = {{1, 0}, {1, 0}}, .len = {2, 2}, .start = &start},
    };
    if (n >= 3) {
        w[0].lists[0][2] = 2, w[0].len[0] = 3;      /* {0, 1, 2}, {0, 1} */
        w[1].lists[0][0] = 2, w[1].lists[0][1] = 1; /* {2, 1}, {1, 0} */
    }
    if (n >= 4) {
        int l[3] = {3, 2, 1};
        memcpy(w[1].lists[0], l, sizeof l);
        w[1].len[0] = 3;
    }
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        w[i].v = values(2048);
        CHECK(pthread_create(&th[i], NULL, list_work, &w[i]) == 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].failed == 0);
        free(w[i].v);
    }
    pthread_barrier_destroy(&start);
}

/* ---- a failing ncclCommInitAll ------------------------------------------------------------- */

#ifdef TC_TEST_FAKE_NCCL
static int count_of(const char *text, const char *word)
{
    int k = 0;
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word))
        k++;
    return k;
}

/* The child (argv: fake-initall): NCCL there, its ncclCommInitAll failing.
 * Two device lists ({0, 1} and {1, 0}), each used by several calls twice:
 * right values (peer copies), one warning per list. */
static int fake_initall_main(void)
{
    tc_test_init();
    int64_t n = 256;
    float *v = values(n), *two = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        two[i] = 2 * v[i];
    int devs[2] = {0, 1}, back[2] = {1, 0};
    tc_tensor *t0 = on(0, 1, &n, v), *t1 = on(1, 1, &n, v);
    tc_test_capture_stderr_begin();
    bool ok = true;
    for (int round = 0; round < 2; round++) {
        tc_tensor *out[2] = {0}, *sum = NULL, *dst = zeros(1, 1, &n, TC_FLOAT32);
        ok = ok && tc_comm_broadcast(t0, devs, 2, out) == TC_OK && holds(out[1], v, n);
        const tc_tensor *ins[2] = {out[0], out[1]};
        ok = ok && tc_comm_reduce_add(ins, 2, 0, &sum) == TC_OK && holds(sum, two, n);
        ok = ok && tc_comm_broadcast_out(t0, &dst, 1) == TC_OK && holds(dst, v, n);
        tc_tensor_release(sum);
        release_n(out, 2);
        ok = ok && tc_comm_broadcast(t1, back, 2, out) == TC_OK && holds(out[1], v, n);
        ok = ok && on_gpu(out[1], 0);
        release_n(out, 2);
        tc_tensor_release(dst);
    }
    const char *err = tc_test_capture_stderr_end();
    CHECK(ok);
    CHECK(count_of(err, "tcuda warning:") == 2);
    CHECK(count_of(err, "ncclCommInitAll failed:") == 2);
    CHECK(count_of(err, "failed on purpose") == 2);
    CHECK(strstr(err, "[cuda:0,cuda:1] use peer copies") != NULL);
    CHECK(strstr(err, "[cuda:1,cuda:0] use peer copies") != NULL);
    if (tc_test_failed)
        fprintf(stderr, "what the calls printed:\n%s\n", err);
    tc_tensor_release(t0);
    tc_tensor_release(t1);
    free(v);
    free(two);
    return TC_TEST_DONE();
}

static void test_fake_initall(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TCUDA_NCCL_LIBRARY", TC_TEST_FAKE_NCCL, 1);
        setenv("FAKE_NCCL", "initall_fails", 1);
        unsetenv("TCUDA_COMM_NCCL");
        execl("/proc/self/exe", "test_comm_cuda", "fake-initall", (char *)NULL);
        _exit(99);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
#endif

int main(int argc, char **argv)
{
#ifdef TC_TEST_FAKE_NCCL
    if (argc == 2 && !strcmp(argv[1], "fake-initall"))
        return fake_initall_main();
#else
    (void)argv;
#endif
    (void)argc;
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    test_one_device();
    int n = tc_device_count();
    if (n >= 2) { /* peer copies, then NCCL (when it is there) */
        setenv("TCUDA_COMM_NCCL", "0", 1);
        printf("-- with peer copies (TCUDA_COMM_NCCL=0)\n");
        test_many_devices(n > 8 ? 8 : n);
        unsetenv("TCUDA_COMM_NCCL");
        tc_test_find_nccl();
        printf("-- with NCCL where it is found\n");
        test_many_devices(n > 8 ? 8 : n);
        test_threads();
        test_overlap(n);
#ifdef TC_TEST_FAKE_NCCL
        test_fake_initall();
#endif
    } else {
        printf("multi-GPU part skipped: %d GPU (needs 2 or more)\n", n);
    }
    if (n >= 2 && n < 3)
        printf("the parts for 3 and 4 GPUs skipped (reduce_add to a device no input is on, "
               "overlapping lists of three)\n");
    return TC_TEST_DONE();
}
