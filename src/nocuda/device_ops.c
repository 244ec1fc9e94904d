/* The device seam (runtime/device_ops.h) in a build without CUDA: no
 * kernels, the runtime's public calls answered as src/nocuda/runtime.c and
 * memory.c answer them, and every step that needs a GPU (device memory, a
 * transfer, a random fill, cuBLAS, jiterator's compiler) TC_ERROR_NO_DEVICE;
 * the collectives' fast path is simply not there (TC_ERROR_NOT_SUPPORTED:
 * comm.c then checks its arguments and fails when it makes a GPU tensor).
 * The core never reaches the steps that need a device it could not resolve. */
#include "dist/comm_internal.h"
#include "jit/jit_internal.h"
#include "nocuda.h"
#include "random/random_internal.h"
#include "runtime/device_ops.h"
#include "tcuda/graph.h"
#include "tcuda/memory.h"

static tc_status no_resolve(int index, int *out)
{
    (void)index;
    *out = 0;
    return tc__nocuda();
}
static tc_status no_alloc(int device, size_t bytes, void **out)
{
    (void)device, (void)bytes, (void)out;
    return tc__nocuda();
}
static void no_free(void *ptr) { (void)ptr; }
static tc_status no_record_stream(void *ptr, bool host, int device, void *stream)
{
    (void)ptr, (void)host, (void)device, (void)stream;
    return tc__nocuda();
}
static void *no_current_stream(int device)
{
    (void)device;
    return NULL;
}
static tc_status no_stream_of(tc_stream *stream, int *device, void **handle)
{
    (void)stream, (void)device, (void)handle;
    return tc__nocuda();
}
static tc_status no_transfer(struct tc_tensor *d, const struct tc_tensor *s, bool wait)
{
    (void)d, (void)s, (void)wait;
    return tc__nocuda();
}
static tc_status no_blas_handle(void **out)
{
    (void)out;
    return tc__nocuda();
}
static tc_status no_rng_fill(tc_generator *gen, const tc__rng_params *p, void *data, size_t n)
{
    (void)gen, (void)p, (void)data, (void)n;
    return tc__nocuda();
}

/* ---- collectives: no fast path ---------------------------------------------------- */

static tc_status no_accel(void)
{
    return tc__fail(TC_ERROR_NOT_SUPPORTED, "no fast path for collectives without CUDA");
}
static tc_status no_broadcast(tc_tensor *const *bufs, const int *devs, int n, int root,
                              size_t bytes)
{
    (void)bufs, (void)devs, (void)n, (void)root, (void)bytes;
    return no_accel();
}
static tc_status no_reduce(const tc_tensor *const *ins, tc_tensor *out, const int *devs, int n,
                           int root)
{
    (void)ins, (void)out, (void)devs, (void)n, (void)root;
    return no_accel();
}
static const tc__comm_accel no_comm = {no_broadcast, no_reduce};

/* ---- jiterator: CPU tensors only ----------------------------------------------------- */

static tc_status jit_device(int device, int *arch, int *sms)
{
    (void)device, (void)arch, (void)sms;
    return tc__nocuda();
}
static const char *jit_key_id(void) { return "no-cuda"; }
static tc_status jit_nvrtc_version(const char **out)
{
    (void)out;
    return tc__nocuda();
}
static tc_status jit_compile(const char *source, int arch, void **cubin, size_t *size)
{
    (void)source, (void)arch, (void)cubin, (void)size;
    return tc__nocuda();
}
static void jit_compile_phases(double ms[3]) { ms[0] = ms[1] = ms[2] = 0; }
static tc_status jit_load(int device, const void *cubin, size_t size, void **module,
                          void **function)
{
    (void)device, (void)cubin, (void)size, (void)module, (void)function;
    return tc__nocuda();
}
static void jit_unload(int device, void *module) { (void)device, (void)module; }
static tc_status jit_launch(int device, void *function, const tc__jit_args *args, unsigned grid)
{
    (void)device, (void)function, (void)args, (void)grid;
    return tc__nocuda();
}
static const tc__jit_ops no_jit_ops = {.device = jit_device,
                                       .key_id = jit_key_id,
                                       .nvrtc_version = jit_nvrtc_version,
                                       .compile = jit_compile,
                                       .compile_phases = jit_compile_phases,
                                       .load = jit_load,
                                       .unload = jit_unload,
                                       .launch = jit_launch};

const tc__device_ops tc__device_ops_builtin = {
    .name = "CUDA",
    .device_count = tc_device_count,
    .resolve = no_resolve,
    .device_guard_enter = tc_device_guard_enter,
    .device_guard_exit = tc_device_guard_exit,
    .current_stream = no_current_stream,
    .stream_of = no_stream_of,
    .stream_current = tc_current_stream,
    .stream_device = tc_stream_device,
    .stream_wait_stream = tc_stream_wait_stream,
    .stream_synchronize = tc_stream_synchronize,
    .stream_guard_enter = tc_stream_guard_enter,
    .stream_guard_exit = tc_stream_guard_exit,
    .stream_capturing = tc_is_current_stream_capturing,
    .alloc = no_alloc,
    .free = no_free,
    .record_stream = no_record_stream,
    .host_alloc = tc_host_alloc,
    .host_free = tc_host_free,
    .optim = NULL, /* no GPU tensor exists to reach it: optim.c answers NO_DEVICE */
    .transfer = no_transfer,
    .blas_handle = no_blas_handle,
    .rng_fill = no_rng_fill,
    .comm = &no_comm,
    .jit = &no_jit_ops,
};
