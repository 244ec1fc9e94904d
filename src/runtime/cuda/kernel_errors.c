/* The slots through which kernels report bad input (kernel_errors.h). */
#include <pthread.h>
#include <stdatomic.h>

#include "cuda_internal.h"
#include "runtime/cuda/capture.h"
#include "kernel_errors.h"
#include "base/device_fault.h"

static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
/* host addresses of the slots, made on first use and kept for the process */
static _Atomic(tc__kernel_error *) slots[TC_MAX_DEVICES];

tc_status tc__kernel_error_slot(int device, tc__kernel_error **slot)
{
    tc__kernel_error *s = atomic_load_explicit(&slots[device], memory_order_acquire);
    if (!s) {
        pthread_mutex_lock(&slot_mu);
        s = atomic_load_explicit(&slots[device], memory_order_relaxed);
        cudaError_t err = cudaSuccess;
        if (!s) {
            /* not stream work: allowed in a capture (as the allocator's cudaMalloc) */
            enum cudaStreamCaptureMode m = tc__capture_relaxed_begin();
            err = cudaHostAlloc((void **)&s, sizeof *s,
                                cudaHostAllocMapped | cudaHostAllocPortable);
            tc__capture_relaxed_end(m);
            if (err == cudaSuccess) {
                s->kind = TC__KERR_NONE;
                atomic_store_explicit(&slots[device], s, memory_order_release);
            }
        }
        pthread_mutex_unlock(&slot_mu);
        if (err != cudaSuccess)
            return tc__cuda_fail(err, "cudaHostAlloc (the kernel error slot)", __FILE__, __LINE__);
    }
    /* with unified addressing, as on every 64-bit platform CUDA runs on, the
     * host address of mapped memory is its device address */
    *slot = s;
    return TC_OK;
}

tc_status tc__kernel_errors_check(int device)
{
    const char *api = tc__api_name;
    TC_TRY(tc__device_fault_check(device, api ? api : "waiting for the GPU"));
    tc__kernel_error *s = atomic_load_explicit(&slots[device], memory_order_acquire);
    if (TC_LIKELY(!s))
        return TC_OK;
    int kind = __atomic_load_n(&s->kind, __ATOMIC_ACQUIRE);
    if (TC_LIKELY(kind <= TC__KERR_NONE)) /* none, or a kernel still writing */
        return TC_OK;
    volatile tc__kernel_error *vs = s;
    long long v[4] = {vs->v[0], vs->v[1], vs->v[2], vs->v[3]};
    /* read before the slot is freed; a thread that cleared it first reports it */
    if (!__atomic_compare_exchange_n(&s->kind, &kind, TC__KERR_NONE, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return TC_OK;
    if (kind == TC__KERR_CE_TARGET)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "tc_nn_cross_entropy (queued earlier on cuda:%d): target %lld (row %lld) "
                        "is out of range: classes are 0..%lld (ignore_index %lld); its row's "
                        "loss is NaN",
                        device, v[1], v[0], v[2] - 1, v[3]);
    if (kind == TC__KERR_EMBEDDING_INDEX)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "tc_nn_embedding_backward (queued earlier on cuda:%d): index %lld "
                        "(position %lld) is out of range: the weight has rows 0..%lld; the "
                        "position was left out of the gradient",
                        device, v[1], v[0], v[2] - 1);
    if (kind == TC__KERR_CACHE_LENGTH)
        return tc__fail(
            TC_ERROR_INVALID_ARGUMENT,
            "tc_nn_attention_with_kv_cache (queued earlier on cuda:%d): cache_len[%lld] "
            "is %lld: with %lld new positions the cache of %lld takes lengths 0..%lld; "
            "that entry's caches were not written",
            device, v[0], v[1], v[2], v[3], v[3] - v[2]);
    return tc__fail(TC_ERROR_INTERNAL, "a kernel on cuda:%d reported error kind %d", device, kind);
}
