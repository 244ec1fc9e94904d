/* DDP's reducer (include/tcuda/ddp.h): gradients as views into flat
 * buckets, each bucket all-reduced (averaged) on the ddp's own stream once
 * its gradients are ready, in bucket order.
 *
 * Ordering: a bucket's all_reduce is queued on `comm` after comm waited for
 * the current stream (where backward wrote the gradients); tc_ddp_finish
 * makes the current stream wait for comm. Buffers live as long as any view:
 * the ddp holds one reference on each bucket, tc_ddp_grad hands out views,
 * and destroy marks each bucket as used by comm before letting go, so the
 * caching allocator reuses it only after the reductions. */
#include <stdlib.h>
#include <string.h>

#include "base/handle_pool.h"
#include "base/internal.h"
#include "dist/ddp_internal.h"
#include "tcuda/ddp.h"
#include "tcuda/stream.h"

#define TC_DDP_MAGIC 0x7cdd0b0cu
#define ALIGN_BYTES 256 /* each gradient's start within its bucket */

typedef struct ddp_grad {
    int bucket;
    int64_t offset; /* in elements, within the bucket */
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
    tc_dtype dtype;
    bool marked; /* ready in this step */
} ddp_grad;

typedef struct ddp_bucket {
    tc_tensor *flat; /* 1-d, the bucket's dtype */
    int *params;     /* its gradients, in parameter order */
    int nparams;
    int pending; /* gradients not yet marked in this step */
    size_t bytes;
    bool launched;
} ddp_bucket;

struct tc_ddp {
    uint32_t magic;
    tc_process_group *pg;
    int device;
    int n, nb;
    ddp_grad *g;
    ddp_bucket *b;
    int next;      /* the first bucket not launched in this step */
    bool sync;     /* communicate in this step */
    bool stepping; /* a gradient was marked since the last finish */
    tc_stream *comm;
};

static tc__handle_pool ddp_pool = TC_HANDLE_POOL_INIT(struct tc_ddp);

static tc_status ddp_check(const tc_ddp *d) { return tc__handle_check(d, TC_DDP_MAGIC, "tc_ddp"); }

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* Frees what d holds (buckets after their last use on comm). */
static tc_status ddp_free(tc_ddp *d)
{
    tc_status st = TC_OK;
    for (int k = 0; d->b && k < d->nb; k++) {
        if (d->b[k].flat) {
            if (d->comm) {
                tc_status s = tc_tensor_record_stream(d->b[k].flat, d->comm);
                st = st == TC_OK ? s : st;
            }
            tc_tensor_release(d->b[k].flat);
        }
        free(d->b[k].params);
    }
    if (d->comm) {
        tc_status s = tc_stream_destroy(d->comm);
        st = st == TC_OK ? s : st;
    }
    free(d->b);
    free(d->g);
    tc__handle_put(&ddp_pool, d);
    return st;
}

/* Reads the parameters' shapes and forms the buckets: d->g, d->b. */
static tc_status layout(tc_ddp *d, tc_tensor *const *params, const tc_ddp_options *o)
{
    size_t *nbytes = malloc(sizeof(size_t) * (size_t)d->n);
    tc_dtype *dts = malloc(sizeof(tc_dtype) * (size_t)d->n);
    int *bucket_of = malloc(sizeof(int) * (size_t)d->n);
    d->g = calloc((size_t)d->n, sizeof *d->g);
    tc_status st = TC_OK;
    if (!nbytes || !dts || !bucket_of || !d->g)
        st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for %d parameters", d->n);
    for (int i = 0; st == TC_OK && i < d->n; i++) {
        const tc_tensor *p = params[i];
        ddp_grad *g = &d->g[i];
        g->dtype = tc_tensor_dtype(p);
        g->ndim = tc_tensor_ndim(p);
        if (g->ndim > 0)
            memcpy(g->sizes, tc_tensor_sizes(p), sizeof(int64_t) * (size_t)g->ndim);
        dts[i] = g->dtype;
        nbytes[i] = (size_t)tc_tensor_numel(p) * tc_dtype_size(g->dtype);
    }
    if (st == TC_OK)
        st = tc__ddp_assign(nbytes, dts, d->n, o->first_bucket_cap_bytes, o->bucket_cap_bytes,
                            bucket_of, &d->nb);
    if (st == TC_OK && !(d->b = calloc((size_t)(d->nb ? d->nb : 1), sizeof *d->b)))
        st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for %d buckets", d->nb);
    /* offsets: each gradient aligned, in parameter order within its bucket */
    int64_t *fill = st == TC_OK ? calloc((size_t)(d->nb ? d->nb : 1), sizeof *fill) : NULL;
    if (st == TC_OK && !fill)
        st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for %d buckets", d->nb);
    for (int i = 0; st == TC_OK && i < d->n; i++) {
        ddp_grad *g = &d->g[i];
        ddp_bucket *b = &d->b[bucket_of[i]];
        int64_t es = (int64_t)tc_dtype_size(g->dtype);
        g->bucket = bucket_of[i];
        g->offset = round_up(fill[g->bucket], ALIGN_BYTES / es);
        fill[g->bucket] = g->offset + (int64_t)(nbytes[i] / (size_t)es);
        int *np = realloc(b->params, sizeof(int) * (size_t)(b->nparams + 1));
        if (!np) {
            st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for bucket %d", g->bucket);
            break;
        }
        b->params = np;
        b->params[b->nparams++] = i;
    }
    tc_device dev = {TC_CUDA, d->device};
    for (int k = 0; st == TC_OK && k < d->nb; k++) {
        ddp_bucket *b = &d->b[k];
        tc_dtype dt = d->g[b->params[0]].dtype;
        int64_t numel = round_up(fill[k] > 0 ? fill[k] : 1,
                                 ALIGN_BYTES / (int64_t)tc_dtype_size(dt));
        b->bytes = (size_t)numel * tc_dtype_size(dt);
        st = tc_tensor_zeros(1, &numel, dt, dev, &b->flat);
    }
    free(fill);
    free(nbytes), free(dts), free(bucket_of);
    return st;
}

static tc_status check_params(tc_process_group *pg, tc_tensor *const *params, int n,
                              const tc_ddp_options *o)
{
    int dev = tc_process_group_device(pg);
    for (int i = 0; i < n; i++) {
        const tc_tensor *p = params[i];
        TC_CHECK_ARG(p, "params[%d] is NULL", i);
        if (tc_tensor_ndim(p) < 0)
            return tc__fail(TC_ERROR_INVALID_HANDLE, "params[%d] is not a live tc_tensor", i);
        tc_device pd = tc_tensor_device(p);
        if (pd.type != TC_CUDA || pd.index != dev)
            return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                            "params[%d] is on %s:%d, the group on cuda:%d", i,
                            pd.type == TC_CUDA ? "cuda" : "cpu", pd.index, dev);
        if (!tc_dtype_is_floating(tc_tensor_dtype(p)))
            return tc__fail(TC_ERROR_DTYPE, "params[%d] is %s, not a floating dtype", i,
                            tc_dtype_string(tc_tensor_dtype(p)));
        TC_CHECK_ARG(!o->broadcast_params || tc_tensor_is_contiguous(p),
                     "params[%d] is not contiguous, which broadcast_params needs", i);
        for (int j = 0; j < i; j++) /* a tied weight is one parameter */
            TC_CHECK_ARG(params[j] != p && tc_tensor_data_ptr(params[j]) != tc_tensor_data_ptr(p),
                         "params[%d] and params[%d] are the same parameter", j, i);
    }
    return TC_OK;
}

tc_status tc_ddp_create(tc_process_group *pg, tc_tensor *const *params, int n,
                        const tc_ddp_options *opts, tc_ddp **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(pg, "pg is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(n >= 1 && params, "params is NULL or n (%d) is not positive", n);
    if (tc_process_group_device(pg) < 0)
        return tc__fail(TC_ERROR_INVALID_HANDLE, "pg is not a live tc_process_group");
    tc_ddp_options o = opts ? *opts : tc_ddp_options_default();
    TC_TRY(check_params(pg, params, n, &o));
    tc_ddp *d = tc__handle_get(&ddp_pool);
    if (!d)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for a tc_ddp");
    d->pg = pg;
    d->device = tc_process_group_device(pg);
    d->n = n;
    d->sync = true;
    tc_status st = layout(d, params, &o);
    if (st == TC_OK)
        st = tc_stream_create(d->device, 0, &d->comm);
    for (int i = 0; st == TC_OK && o.broadcast_params && i < n; i++)
        st = tc_dist_broadcast(pg, params[i], 0, NULL);
    if (st != TC_OK) {
        (void)ddp_free(d);
        return st;
    }
    d->magic = TC_DDP_MAGIC;
    *out = d;
    return TC_OK;
}

/* The current stream waits for what comm has queued (the reductions). */
static tc_status join_comm(tc_ddp *d)
{
    tc_stream *cur = NULL;
    TC_TRY(tc_current_stream(d->device, &cur));
    return tc_stream_wait_stream(cur, d->comm);
}

tc_status tc_ddp_destroy(tc_ddp *ddp)
{
    TC_API_BEGIN;
    TC_TRY(ddp_check(ddp));
    /* work queued after this on the current stream (reading the views) comes
     * after the reductions; the allocator reuses the buckets after them too */
    tc_status st = join_comm(ddp);
    tc_status s2 = ddp_free(ddp);
    return st == TC_OK ? s2 : st;
}

tc_status tc_ddp_grad(tc_ddp *ddp, int i, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(ddp_check(ddp));
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(i >= 0 && i < ddp->n, "parameter %d is not in 0..%d", i, ddp->n - 1);
    const ddp_grad *g = &ddp->g[i];
    int64_t numel = 1;
    for (int k = 0; k < g->ndim; k++)
        numel *= g->sizes[k];
    tc_tensor *flat = NULL;
    TC_TRY(tc_tensor_narrow(ddp->b[g->bucket].flat, 0, g->offset, numel, &flat));
    int64_t one = 1;
    tc_status st = tc_tensor_view(flat, g->ndim, g->ndim ? g->sizes : &one, out);
    tc_tensor_release(flat);
    return st;
}

tc_status tc_ddp_zero_grad(tc_ddp *ddp)
{
    TC_API_BEGIN;
    TC_TRY(ddp_check(ddp));
    for (int k = 0; k < ddp->nb; k++)
        TC_TRY(tc_tensor_fill_(ddp->b[k].flat, 0.0));
    return TC_OK;
}

tc_status tc_ddp_set_require_sync(tc_ddp *ddp, bool sync)
{
    TC_API_BEGIN;
    TC_TRY(ddp_check(ddp));
    if (ddp->stepping)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "a step is under way (gradients were marked ready): call tc_ddp_finish "
                        "first");
    ddp->sync = sync;
    return TC_OK;
}

/* Queues bucket k's all_reduce on comm, after the current stream's work. */
static tc_status launch(tc_ddp *d, int k)
{
    tc_stream *cur = NULL;
    TC_TRY(tc_current_stream(d->device, &cur));
    TC_TRY(tc_stream_wait_stream(d->comm, cur));
    tc_stream_guard sg = tc_stream_guard_enter(d->comm);
    TC_TRY(sg.status);
    tc_status st = tc_dist_all_reduce(d->pg, d->b[k].flat, TC_REDUCE_OP_AVG, NULL);
    tc_stream_guard_exit(&sg);
    if (st == TC_OK)
        d->b[k].launched = true;
    return st;
}

/* Launches the buckets that are complete, in order, from d->next. */
static tc_status launch_ready(tc_ddp *d)
{
    while (d->next < d->nb && d->b[d->next].pending == 0) {
        TC_TRY(launch(d, d->next));
        d->next++;
    }
    return TC_OK;
}

/* The marks of a new step: every bucket waits for all its gradients. */
static void step_reset(tc_ddp *d)
{
    for (int i = 0; i < d->n; i++)
        d->g[i].marked = false;
    for (int k = 0; k < d->nb; k++) {
        d->b[k].pending = d->b[k].nparams;
        d->b[k].launched = false;
    }
    d->next = 0;
    d->stepping = false;
}

tc_status tc_ddp_grad_ready(tc_ddp *ddp, int i)
{
    TC_API_BEGIN;
    TC_TRY(ddp_check(ddp));
    TC_CHECK_ARG(i >= 0 && i < ddp->n, "parameter %d is not in 0..%d", i, ddp->n - 1);
    if (!ddp->stepping)
        step_reset(ddp);
    if (ddp->g[i].marked)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "parameter %d's gradient was marked ready already in this step", i);
    ddp->stepping = true;
    ddp->g[i].marked = true;
    ddp->b[ddp->g[i].bucket].pending--;
    return ddp->sync ? launch_ready(ddp) : TC_OK;
}

tc_status tc_ddp_finish(tc_ddp *ddp)
{
    TC_API_BEGIN;
    TC_TRY(ddp_check(ddp));
    if (!ddp->stepping)
        step_reset(ddp);
    tc_status st = TC_OK;
    if (ddp->sync) {
        for (int k = ddp->next; st == TC_OK && k < ddp->nb; k++)
            st = launch(ddp, k);
        /* also after a failed launch: those queued must be waited for */
        tc_status s2 = join_comm(ddp);
        st = st == TC_OK ? s2 : st;
    }
    step_reset(ddp);
    return st;
}

int tc_ddp_num_buckets(const tc_ddp *ddp)
{
    return tc__handle_live(ddp, TC_DDP_MAGIC) ? ddp->nb : 0;
}

tc_status tc_ddp_bucket_params(const tc_ddp *ddp, int b, int *params, int capacity, int *n_out,
                               size_t *bytes)
{
    TC_API_BEGIN;
    TC_TRY(ddp_check(ddp));
    TC_CHECK_ARG(b >= 0 && b < ddp->nb, "bucket %d is not in 0..%d", b, ddp->nb - 1);
    TC_CHECK_ARG(n_out, "n_out is NULL");
    TC_CHECK_ARG(capacity >= 0 && (capacity == 0 || params), "params is NULL or capacity < 0");
    const ddp_bucket *k = &ddp->b[b];
    for (int j = 0; j < k->nparams && j < capacity; j++)
        params[j] = k->params[j];
    *n_out = k->nparams;
    if (bytes)
        *bytes = k->bytes;
    return TC_OK;
}
