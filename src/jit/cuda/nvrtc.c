/* jiterator's GPU half: NVRTC (loaded at run time through tc__dynlib; its
 * files read ahead from CUDA's initialization on, nvrtc_readahead.c) turns
 * the generated source into a cubin for the device's own architecture, and
 * the driver API (driver_api.c's table, so libcuda is never linked) loads it
 * into the device's primary context and launches it on the current stream.
 *
 * Driver calls act on the calling thread's current context: every one here
 * runs after cudaSetDevice(device), which (CUDA 12 and later) makes the
 * device's primary context current, the one the runtime and tcuda's
 * allocations use. */
#include <cuda.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "runtime/cuda/cuda_internal.h"
#include "runtime/cuda/driver_api.h"
#include "jit/jit_internal.h"

static tc__dynlib nvrtc_lib = {"NVRTC (jiterator's run-time compiler)", tc__nvrtc_names, NULL, 0,
                               ""};

/* NVRTC's options besides the architecture; part of every key. -fmad=false:
 * no contraction into fused multiply-adds, so a + b * c gives the rounded
 * operations it writes, as the built-in ops and the CPU path do.
 * -default-device: the user's unannotated functions are device functions.
 * -w: the log holds the errors only. -minimal (NVRTC 12.4 and later; left
 * out before): no implicit CUDA runtime header (textures, surfaces, device
 * launches, the runtime API's types, none of which an element-wise function
 * uses): 8 ms less front end per compile (an empty kernel takes 35 ms
 * of CPU here, 43 without), byte for byte the same cubin, so the key names
 * it whether or not the NVRTC found takes it. No -G or -lineinfo; -dopt is the
 * default; --extra-device-vectorization and -split-compile were slower,
 * -Ofast-compile changes the code (bench/bench_jit_compile.c). */
static const char *const nvrtc_opts[] = {"--std=c++17", "--fmad=false", "-default-device", "-w",
                                         "-minimal"};
#define N_OPTS 5

typedef nvrtcResult (*pf_version)(int *, int *);
typedef nvrtcResult (*pf_create)(nvrtcProgram *, const char *, const char *, int,
                                 const char *const *, const char *const *);
typedef nvrtcResult (*pf_compile)(nvrtcProgram, int, const char *const *);
typedef nvrtcResult (*pf_size)(nvrtcProgram, size_t *);
typedef nvrtcResult (*pf_get)(nvrtcProgram, char *);
typedef nvrtcResult (*pf_destroy)(nvrtcProgram *);
typedef const char *(*pf_errstr)(nvrtcResult);

static struct {
    pf_version version;
    pf_create create;
    pf_compile compile;
    pf_size log_size, cubin_size;
    pf_get log, cubin;
    pf_destroy destroy;
    pf_errstr errstr;
    char version_str[32];
    int n_opts; /* of nvrtc_opts this NVRTC takes: all but -minimal before 12.4 */
    int state;  /* 0 not tried, 1 ready */
} nv;
static pthread_mutex_t nv_lock = PTHREAD_MUTEX_INITIALIZER;

static tc_status nvrtc_load(void)
{
    if (__atomic_load_n(&nv.state, __ATOMIC_ACQUIRE) == 1)
        return TC_OK;
    pthread_mutex_lock(&nv_lock);
    tc_status st = TC_OK;
    if (nv.state == 0) {
        static const char *const names[] = {
            "nvrtcVersion",           "nvrtcCreateProgram",  "nvrtcCompileProgram",
            "nvrtcGetProgramLogSize", "nvrtcGetCUBINSize",   "nvrtcGetProgramLog",
            "nvrtcGetCUBIN",          "nvrtcDestroyProgram", "nvrtcGetErrorString"};
        void **slots[] = {(void **)&nv.version,  (void **)&nv.create,     (void **)&nv.compile,
                          (void **)&nv.log_size, (void **)&nv.cubin_size, (void **)&nv.log,
                          (void **)&nv.cubin,    (void **)&nv.destroy,    (void **)&nv.errstr};
        for (int i = 0; i < 9 && st == TC_OK; i++)
            st = tc__dynlib_sym(&nvrtc_lib, names[i], slots[i]);
        int major = 0, minor = 0;
        if (st == TC_OK && nv.version(&major, &minor) == NVRTC_SUCCESS) {
            snprintf(nv.version_str, sizeof nv.version_str, "NVRTC %d.%d", major, minor);
            nv.n_opts = major * 100 + minor >= 1204 ? N_OPTS : N_OPTS - 1;
            __atomic_store_n(&nv.state, 1, __ATOMIC_RELEASE);
        } else if (st == TC_OK) {
            st = tc__fail(TC_ERROR_NOT_SUPPORTED, "NVRTC was loaded but nvrtcVersion failed");
        }
    }
    pthread_mutex_unlock(&nv_lock);
    return st;
}

static tc_status cu_nvrtc_version(const char **out)
{
    TC_TRY(nvrtc_load());
    *out = nv.version_str;
    return TC_OK;
}

static char key_id[160];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void key_init(void)
{
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) {
        driver = 0;
        (void)cudaGetLastError();
    }
    int n = snprintf(key_id, sizeof key_id, "cuda%d driver%d", CUDART_VERSION / 1000, driver);
    for (int i = 0; i < N_OPTS && n > 0 && (size_t)n < sizeof key_id; i++)
        n += snprintf(key_id + n, sizeof key_id - (size_t)n, " %s", nvrtc_opts[i]);
}

static const char *cu_key_id(void)
{
    pthread_once(&key_once, key_init);
    return key_id;
}

/* Two attributes, not tc_get_device_capability: its first call on a device
 * reads every property (cudaGetDeviceProperties), which a first call need
 * not wait for. */
static tc_status cu_device(int device, int *arch, int *sms)
{
    int major = 0, minor = 0;
    cudaError_t err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (err != cudaSuccess)
        return tc__cuda_fail(err, "cudaDeviceGetAttribute", __FILE__, __LINE__);
    *arch = major * 10 + minor;
    *sms = tc__sm_count(device);
    return TC_OK;
}

static _Thread_local double phase_ms[3];

static double now_ms(void) { return tc__now_s() * 1e3; }

static void cu_compile_phases(double ms[3]) { memcpy(ms, phase_ms, sizeof phase_ms); }

static tc_status cu_compile(const char *source, int arch, void **cubin, size_t *size)
{
    TC_TRY(nvrtc_load());
    char arch_opt[48];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=sm_%d", arch);
    const char *opts[N_OPTS + 1] = {arch_opt};
    for (int i = 0; i < N_OPTS; i++)
        opts[i + 1] = nvrtc_opts[i];
    nvrtcProgram prog;
    double t0 = now_ms();
    nvrtcResult r = nv.create(&prog, source, "tcuda_jit.cu", 0, NULL, NULL);
    double t1 = now_ms();
    if (r != NVRTC_SUCCESS)
        return tc__fail(r == NVRTC_ERROR_OUT_OF_MEMORY ? TC_ERROR_OUT_OF_MEMORY : TC_ERROR_CUDA,
                        "nvrtcCreateProgram: %s", nv.errstr(r));
    r = nv.compile(prog, nv.n_opts + 1, opts);
    double t2 = now_ms();
    tc_status st = TC_OK;
    if (r != NVRTC_SUCCESS) {
        size_t n = 0;
        char *log = NULL;
        if (nv.log_size(prog, &n) == NVRTC_SUCCESS && n > 0 && (log = malloc(n + 1))) {
            if (nv.log(prog, log) != NVRTC_SUCCESS)
                log[0] = '\0';
            log[n] = '\0';
        }
        if (r == NVRTC_ERROR_COMPILATION)
            st = tc__fail(TC_ERROR_INVALID_ARGUMENT, "the code does not compile (%s, sm_%d):\n%s",
                          nv.version_str, arch, log ? log : "(no log)");
        else
            st = tc__fail(TC_ERROR_NOT_SUPPORTED, "%s cannot compile for sm_%d: %s\n%s",
                          nv.version_str, arch, nv.errstr(r), log ? log : "");
        free(log);
    } else {
        size_t n = 0;
        void *bin = NULL;
        r = nv.cubin_size(prog, &n);
        if (r == NVRTC_SUCCESS && n > 0 && (bin = malloc(n)) &&
            nv.cubin(prog, bin) == NVRTC_SUCCESS) {
            *cubin = bin;
            *size = n;
        } else {
            free(bin);
            st = tc__fail(TC_ERROR_CUDA, "%s gave no cubin for sm_%d", nv.version_str, arch);
        }
    }
    nv.destroy(&prog);
    phase_ms[0] = t1 - t0;
    phase_ms[1] = t2 - t1;
    phase_ms[2] = now_ms() - t2;
    return st;
}

/* ---- the driver --------------------------------------------------------------------- */

static tc_status drv_fail(CUresult r, const char *what)
{
    return tc__fail(r == CUDA_ERROR_OUT_OF_MEMORY ? TC_ERROR_OUT_OF_MEMORY : TC_ERROR_CUDA,
                    "%s failed with CUDA driver error %d", what, (int)r);
}

static const char modules[] = "jiterator (cuModuleLoadData, cuLaunchKernel, ...)";

static tc_status cu_load(int device, const void *cubin, size_t size, void **module, void **function)
{
    (void)size;
    const tc__driver_api *drv;
    TC_TRY(tc__driver_need(TC__DRV_MODULE, modules, &drv));
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    tc_status st = TC_OK;
    cudaError_t err = cudaSetDevice(device); /* the primary context, current */
    CUmodule mod = NULL;
    CUfunction f = NULL;
    CUresult r = CUDA_SUCCESS;
    if (err != cudaSuccess)
        st = tc__cuda_fail(err, "cudaSetDevice", __FILE__, __LINE__);
    else if ((r = drv->module_load_data(&mod, cubin)) != CUDA_SUCCESS)
        st = drv_fail(r, "cuModuleLoadData (the cached or compiled cubin)");
    else if ((r = drv->module_get_function(&f, mod, "tc_jit_kernel")) != CUDA_SUCCESS) {
        st = drv_fail(r, "cuModuleGetFunction(tc_jit_kernel)");
        (void)drv->module_unload(mod);
    }
    tc_device_guard_exit(&g);
    if (st == TC_OK) {
        *module = (void *)mod;
        *function = (void *)f;
    }
    return st;
}

static void cu_unload(int device, void *module)
{
    const tc__driver_api *drv = tc__driver();
    tc_device_guard g = tc_device_guard_enter(device);
    if (g.status == TC_OK && cudaSetDevice(device) == cudaSuccess && drv->module_unload)
        (void)drv->module_unload((CUmodule)module);
    (void)cudaGetLastError();
    tc_device_guard_exit(&g);
}

static tc_status cu_launch(int device, void *function, const tc__jit_args *args, unsigned grid)
{
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t stream = tc__current_cuda_stream(device);
    tc_status st = TC_OK;
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess) {
        st = tc__cuda_fail(err, "cudaSetDevice", __FILE__, __LINE__);
    } else {
        void *params[1] = {(void *)args};
        /* the driver copies the kernel's parameter: tc__jit_args_bytes of args */
        CUresult r = tc__driver()->launch_kernel((CUfunction)function, grid, 1, 1, TC__JIT_THREADS,
                                                 1, 1, 0, (CUstream)stream, params, NULL);
        if (r != CUDA_SUCCESS)
            st = drv_fail(r, "cuLaunchKernel(tc_jit_kernel)");
        else
            st = tc__launch_check(stream, "tc_jit_kernel");
    }
    tc_device_guard_exit(&g);
    return st;
}

const tc__jit_ops tc__jit_cuda_ops = {.device = cu_device,
                                      .key_id = cu_key_id,
                                      .nvrtc_version = cu_nvrtc_version,
                                      .compile = cu_compile,
                                      .compile_phases = cu_compile_phases,
                                      .load = cu_load,
                                      .unload = cu_unload,
                                      .launch = cu_launch};
