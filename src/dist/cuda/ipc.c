/* Memory IPC on CUDA: tensors shared between processes (include/tcuda/ipc.h).
 *
 * Producer: a handle names the CUDA allocation that holds the tensor's
 * storage (cudaIpcGetMemHandle on the allocation's base, found with
 * cuMemGetAddressRange, as PyTorch does with the caching allocator's
 * segment) and the storage's offset in it. Making a handle retains the
 * storage in the `sent` list, so the allocator block stays allocated and is
 * not reused after the producer releases its tensor; tc_ipc_collect drops
 * that reference once the handle's count file says every consumer released
 * (or died). At exit the count files are removed, so later opens are stale.
 *
 * Consumer: the count is taken (and the key checked) before the memory is
 * mapped, so a stale handle never maps anything; mappings are shared per
 * (producer, CUDA handle), since CUDA maps an allocation once per process.
 * The consumer's storage is not the caching allocator's, so it has hooks of
 * its own: record_stream remembers the stream (tc_tensor_record_stream works
 * on it as on any GPU tensor), and on_free waits for the device's current
 * stream and every recorded stream (the consumer's reads and writes, queued
 * until the release), closes the mapping when it is the last, and only then
 * gives its count back, so the producer never reuses memory a stream of the
 * consumer still uses. PyTorch waits for the current stream only, and its
 * record_stream skips memory its allocator did not make. Like the
 * allocator's, the wait needs the recorded streams' CUDA streams alive at
 * the release (tcuda's own streams are; an external one is the user's). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "dist/ipc_handle.h"
#include "tensor/tensor_internal.h"
#include "runtime/cuda/cuda_internal.h"
#include "runtime/cuda/driver_api.h"
#include "memory/cuda/device_alloc.h"

typedef struct sent {
    struct sent *next;
    uint64_t seq;
    uint64_t key;         /* the handle's check value */
    tc__storage *storage; /* one reference, held until the consumers are done */
} sent;

typedef struct mapping {
    struct mapping *next;
    uint32_t pid;
    int device;
    unsigned char cuda_handle[TC__IPC_CUDA_HANDLE_BYTES];
    void *base;
    int refs;
} mapping;

typedef struct consumer_ctx {
    mapping *map;
    uint32_t pid;
    uint64_t seq;
    pthread_mutex_t mu; /* guards the recorded streams */
    int n_streams, cap;
    void **streams; /* cudaStream_t named by record_stream, each once */
} consumer_ctx;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sent *sent_list;
static void shared_stats(int device, int64_t *blocks, int64_t *bytes);
static mapping *mappings;
static uint64_t next_seq = 1;
static bool atexit_done;

static void remove_files_at_exit(void)
{
    pthread_mutex_lock(&lock);
    for (sent *s = sent_list; s; s = s->next)
        tc__ipc_ref_remove((uint32_t)getpid(), s->seq);
    pthread_mutex_unlock(&lock);
}

/* The CUDA allocation containing `p`: its base. */
static tc_status allocation_base(void *p, void **base)
{
    const tc__driver_api *drv;
    TC_TRY(tc__driver_need(TC__DRV_ADDRESS_RANGE, "sharing a tensor between processes", &drv));
    CUdeviceptr b = 0;
    size_t size = 0;
    CUresult r = drv->mem_get_address_range(&b, &size, (CUdeviceptr)(uintptr_t)p);
    if (r != CUDA_SUCCESS)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "the tensor's memory is not a CUDA allocation that can be shared "
                        "(cuMemGetAddressRange error %d)",
                        (int)r);
    *base = (void *)(uintptr_t)b;
    return TC_OK;
}

static void fill_info(const tc_tensor *t, void *base, tc__ipc_info *info)
{
    memset(info, 0, sizeof *info);
    info->producer_pid = (uint32_t)getpid();
    info->device = (uint32_t)t->storage->device.index;
    info->dtype = (uint32_t)t->dtype;
    info->ndim = (uint32_t)t->ndim;
    info->segment_offset = (uint64_t)((char *)t->storage->data - (char *)base);
    info->storage_bytes = t->storage->bytes;
    info->offset = t->offset;
    for (int i = 0; i < t->ndim; i++) {
        info->sizes[i] = t->sizes[i];
        info->strides[i] = t->strides[i];
    }
}

tc_status tc_tensor_ipc_handle(const tc_tensor *t, tc_ipc_mem_handle *out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(t->storage->device.type == TC_CUDA, "only GPU tensors can be shared this way");
    TC_CHECK_ARG(t->storage->data, "an empty storage cannot be shared");
    int dev = t->storage->device.index;
    tc_device_guard g = tc_device_guard_enter(dev);
    TC_TRY(g.status);
    /* The data must be ready when a consumer maps it: wait for the producer's
     * stream here (PyTorch shares an event instead). */
    cudaStream_t cs = tc__current_cuda_stream(dev);
    void *base = NULL;
    cudaIpcMemHandle_t ch;
    tc_status st = tc__sync_point_on("sharing a tensor with another process", (void *)cs);
    if (st == TC_OK) {
        cudaError_t err = cudaStreamSynchronize(cs);
        if (err != cudaSuccess)
            st = tc__cuda_fail(err, "cudaStreamSynchronize", __FILE__, __LINE__);
    }
    if (st == TC_OK)
        st = allocation_base(t->storage->data, &base);
    if (st == TC_OK) {
        cudaError_t err = cudaIpcGetMemHandle(&ch, base);
        if (err != cudaSuccess)
            st = tc__cuda_fail(err, "cudaIpcGetMemHandle (expandable segments cannot be shared)",
                               __FILE__, __LINE__);
    }
    tc_device_guard_exit(&g);
    TC_TRY(st);
    uint64_t nonce; /* a handle must not be guessable: no clock-based fallback */
    TC_TRY(tc__os_entropy(&nonce));
    sent *s = calloc(1, sizeof *s);
    if (!s)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    tc__ipc_info info;
    fill_info(t, base, &info);
    _Static_assert(sizeof ch <= TC__IPC_CUDA_HANDLE_BYTES, "cudaIpcMemHandle_t grew");
    memcpy(info.cuda_handle, &ch, sizeof ch);
    info.nonce = nonce | 1;
    pthread_mutex_lock(&lock);
    info.seq = next_seq++;
    tc_ipc_mem_handle h;
    uint64_t key = tc__ipc_encode(&info, &h);
    st = tc__ipc_ref_create(info.producer_pid, info.seq, key);
    if (st == TC_OK) {
        s->seq = info.seq;
        s->key = key;
        s->storage = t->storage;
        tc__storage_retain(t->storage);
        s->next = sent_list;
        sent_list = s;
        if (!atexit_done)
            atexit_done = atexit(remove_files_at_exit) == 0;
    }
    pthread_mutex_unlock(&lock);
    if (st != TC_OK) {
        free(s);
        return st;
    }
    tc__device_set_ipc_stats(shared_stats); /* the statistics count the blocks held */
    *out = h;
    return TC_OK;
}

/* ---- consumer ------------------------------------------------------------------------- */

static tc_status consumer_record_stream(tc__storage *s, void *stream)
{
    consumer_ctx *c = s->ctx;
    tc_status st = TC_OK;
    pthread_mutex_lock(&c->mu);
    bool known = false;
    for (int i = 0; i < c->n_streams && !known; i++)
        known = c->streams[i] == stream;
    if (!known && c->n_streams == c->cap) {
        int cap = c->cap ? 2 * c->cap : 4;
        void **more = realloc(c->streams, sizeof *more * (size_t)cap);
        if (more) {
            c->streams = more;
            c->cap = cap;
        } else {
            st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
    }
    if (!known && st == TC_OK)
        c->streams[c->n_streams++] = stream;
    pthread_mutex_unlock(&c->mu);
    return st;
}

static void consumer_free(tc__storage *s)
{
    consumer_ctx *c = s->ctx;
    mapping *m = c->map;
    tc_device_guard g = tc_device_guard_enter(m->device);
    if (g.status == TC_OK) { /* the consumer's work finishes before the producer may reuse */
        (void)cudaStreamSynchronize(tc__current_cuda_stream(m->device));
        for (int i = 0; i < c->n_streams; i++)
            (void)cudaStreamSynchronize((cudaStream_t)c->streams[i]);
    }
    pthread_mutex_lock(&lock);
    if (--m->refs == 0) {
        for (mapping **p = &mappings; *p; p = &(*p)->next)
            if (*p == m) {
                *p = m->next;
                break;
            }
        if (g.status == TC_OK)
            (void)cudaIpcCloseMemHandle(m->base);
        free(m);
    }
    pthread_mutex_unlock(&lock);
    tc_device_guard_exit(&g);
    tc__ipc_ref_release(c->pid, c->seq);
    pthread_mutex_destroy(&c->mu);
    free(c->streams);
    free(c);
}

/* The mapping of info's allocation, shared; called under `lock`. */
static tc_status map_allocation(const tc__ipc_info *info, mapping **out)
{
    for (mapping *m = mappings; m; m = m->next)
        if (m->pid == info->producer_pid && m->device == (int)info->device &&
            !memcmp(m->cuda_handle, info->cuda_handle, sizeof m->cuda_handle)) {
            m->refs++;
            *out = m;
            return TC_OK;
        }
    mapping *m = calloc(1, sizeof *m);
    if (!m)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    cudaIpcMemHandle_t ch;
    memcpy(&ch, info->cuda_handle, sizeof ch);
    tc_device_guard g = tc_device_guard_enter((int)info->device);
    cudaError_t err = g.status == TC_OK
                          ? cudaIpcOpenMemHandle(&m->base, ch, cudaIpcMemLazyEnablePeerAccess)
                          : cudaSuccess;
    tc_device_guard_exit(&g);
    if (g.status != TC_OK || err != cudaSuccess) {
        free(m);
        TC_TRY(g.status);
        return tc__cuda_fail(err, "cudaIpcOpenMemHandle", __FILE__, __LINE__);
    }
    m->pid = info->producer_pid;
    m->device = (int)info->device;
    memcpy(m->cuda_handle, info->cuda_handle, sizeof m->cuda_handle);
    m->refs = 1;
    m->next = mappings;
    mappings = m;
    *out = m;
    return TC_OK;
}

/* The view the handle describes fits in its storage. */
static tc_status check_extent(const tc__ipc_info *info)
{
    uint64_t last = (uint64_t)info->offset;
    for (uint32_t i = 0; i < info->ndim; i++) {
        if (info->sizes[i] == 0)
            return TC_OK;
        last += (uint64_t)(info->sizes[i] - 1) * (uint64_t)info->strides[i];
    }
    uint64_t esize = tc_dtype_size((tc_dtype)info->dtype);
    if (last >= UINT64_MAX / esize || (last + 1) * esize > info->storage_bytes)
        return tc__fail(TC_ERROR_INVALID_HANDLE, "the IPC handle describes a view beyond its "
                                                 "storage");
    return TC_OK;
}

static tc_status view_of(tc__storage *s, const tc__ipc_info *info, tc_tensor **out)
{
    tc_tensor tmp = {.magic = TC_TENSOR_MAGIC, .dtype = (tc_dtype)info->dtype, .storage = s};
    return tc__make_view(&tmp, (int)info->ndim, info->sizes, info->strides, info->offset, out);
}

static tc_status open_own(const tc__ipc_info *info, uint64_t key, tc_tensor **out)
{
    tc__storage *found = NULL;
    pthread_mutex_lock(&lock);
    for (sent *s = sent_list; s && !found; s = s->next)
        if (s->seq == info->seq && s->key == key) {
            found = s->storage;
            tc__storage_retain(found);
        }
    pthread_mutex_unlock(&lock);
    if (!found)
        return tc__fail(TC_ERROR_INVALID_HANDLE,
                        "stale IPC memory handle: this process made it and has collected it");
    tc_status st = view_of(found, info, out);
    tc__storage_release(found);
    return st;
}

tc_status tc_tensor_from_ipc_handle(const tc_ipc_mem_handle *handle, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(handle && out, "handle or out is NULL");
    tc__ipc_info info;
    uint64_t key;
    TC_TRY(tc__ipc_decode(handle, &info, &key));
    TC_TRY(check_extent(&info));
    int dev;
    TC_TRY(tc__resolve_device((int)info.device, &dev));
    if (info.producer_pid == (uint32_t)getpid())
        return open_own(&info, key, out);
    consumer_ctx *c = calloc(1, sizeof *c);
    tc__storage *s = calloc(1, sizeof *s);
    if (!c || !s) {
        free(c);
        free(s);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    /* The count first: a stale handle is refused before anything is mapped. */
    tc_status st = tc__ipc_ref_acquire(info.producer_pid, info.seq, key);
    if (st == TC_OK) {
        pthread_mutex_lock(&lock);
        st = map_allocation(&info, &c->map);
        pthread_mutex_unlock(&lock);
        if (st != TC_OK)
            tc__ipc_ref_release(info.producer_pid, info.seq);
    }
    if (st != TC_OK) {
        free(c);
        free(s);
        return st;
    }
    c->pid = info.producer_pid;
    c->seq = info.seq;
    pthread_mutex_init(&c->mu, NULL);
    atomic_init(&s->refcount, 1);
    s->device = (tc_device){TC_CUDA, dev};
    s->data = (char *)c->map->base + info.segment_offset;
    s->bytes = info.storage_bytes;
    s->on_free = consumer_free;
    s->on_record_stream = consumer_record_stream;
    s->ctx = c;
    st = view_of(s, &info, out);
    tc__storage_release(s); /* the view holds it now (or, on failure, this frees it) */
    return st;
}

/* ---- producer's collection --------------------------------------------------------- */

/* Frees the blocks shared by this process whose consumers are all gone. */
static void collect(void)
{
    sent *done = NULL;
    pthread_mutex_lock(&lock);
    for (sent **p = &sent_list; *p;) {
        sent *s = *p;
        if (tc__ipc_ref_done((uint32_t)getpid(), s->seq)) {
            *p = s->next;
            s->next = done;
            done = s;
        } else {
            p = &s->next;
        }
    }
    pthread_mutex_unlock(&lock);
    while (done) { /* outside the lock: a release may call back into tcuda */
        sent *s = done;
        done = s->next;
        tc__storage_release(s->storage);
        free(s);
    }
}

/* Blocks (and their bytes) of `device` held for consumers in other
 * processes, for the memory statistics. */
static void shared_stats(int device, int64_t *blocks, int64_t *bytes)
{
    int64_t n = 0, b = 0;
    pthread_mutex_lock(&lock);
    for (sent *s = sent_list; s; s = s->next)
        if (s->storage->device.index == device) {
            n++;
            b += (int64_t)s->storage->bytes;
        }
    pthread_mutex_unlock(&lock);
    *blocks = n;
    *bytes = b;
}

tc_status tc_ipc_collect(void)
{
    TC_API_BEGIN;
    TC_TRY(tc__ensure_init());
    collect();
    return TC_OK;
}
