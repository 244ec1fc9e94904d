/* Device monitoring through NVML (libnvidia-ml), loaded at run time.
 *
 * tcuda does not link NVML: the first monitoring call loads it through the
 * dynlib loader and resolves the few functions it needs, declared here with
 * NVML's documented C types so no NVML header is required. A CUDA device is
 * matched to its NVML device by PCI bus id, which stays right when
 * CUDA_VISIBLE_DEVICES renumbers devices. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

typedef int nvml_ret; /* nvmlReturn_t; 0 is success */
typedef struct nvml_dev *nvml_device;
typedef struct {
    unsigned int gpu, memory;
} nvml_utilization;
typedef struct {
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id, compute_instance_id;
} nvml_process_info; /* nvmlProcessInfo_t (v2 and later) */

enum { NVML_TEMPERATURE_GPU = 0, NVML_CLOCK_SM = 1, NVML_ERROR_INSUFFICIENT_SIZE = 7 };

static struct {
    nvml_ret (*init)(void);
    const char *(*error_string)(nvml_ret);
    nvml_ret (*by_pci)(const char *, nvml_device *);
    nvml_ret (*utilization)(nvml_device, nvml_utilization *);
    nvml_ret (*temperature)(nvml_device, int, unsigned int *);
    nvml_ret (*power)(nvml_device, unsigned int *);
    nvml_ret (*clock)(nvml_device, int, unsigned int *);
    nvml_ret (*processes)(nvml_device, unsigned int *, nvml_process_info *);
} nvml;

static const char *const nvml_names[] = {"libnvidia-ml.so.1", "libnvidia-ml.so", NULL};
static tc__dynlib nvml_lib = {.what = "NVML (libnvidia-ml)", .names = nvml_names};
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static tc_status nvml_status = TC_ERROR_NOT_SUPPORTED;
static char nvml_message[512];

static void nvml_setup(void)
{
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"nvmlInit_v2", (void **)&nvml.init},
        {"nvmlErrorString", (void **)&nvml.error_string},
        {"nvmlDeviceGetHandleByPciBusId_v2", (void **)&nvml.by_pci},
        {"nvmlDeviceGetUtilizationRates", (void **)&nvml.utilization},
        {"nvmlDeviceGetTemperature", (void **)&nvml.temperature},
        {"nvmlDeviceGetPowerUsage", (void **)&nvml.power},
        {"nvmlDeviceGetClockInfo", (void **)&nvml.clock},
        {"nvmlDeviceGetComputeRunningProcesses_v3", (void **)&nvml.processes},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        nvml_status = tc__dynlib_sym(&nvml_lib, syms[i].name, syms[i].slot);
        if (nvml_status != TC_OK) {
            snprintf(nvml_message, sizeof nvml_message, "%s", tc_last_error());
            return;
        }
    }
    nvml_ret r = nvml.init();
    if (r != 0) {
        nvml_status = TC_ERROR_NOT_SUPPORTED;
        snprintf(nvml_message, sizeof nvml_message, "NVML could not start: %s",
                 nvml.error_string(r));
        return;
    }
    nvml_status = TC_OK;
}

/* Loads NVML once and finds the NVML device of CUDA device `device`. */
static tc_status nvml_device_of(int device, nvml_device *out)
{
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    pthread_once(&nvml_once, nvml_setup);
    if (nvml_status != TC_OK)
        return tc__fail(nvml_status, "%s", nvml_message);
    char bus[32];
    TC_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, d));
    nvml_ret r = nvml.by_pci(bus, out);
    if (r != 0)
        return tc__fail(TC_ERROR_NOT_SUPPORTED, "NVML has no device at PCI bus %s (cuda:%d): %s",
                        bus, d, nvml.error_string(r));
    return TC_OK;
}

static tc_status nvml_fail(const char *what, nvml_ret r)
{
    return tc__fail(TC_ERROR_NOT_SUPPORTED, "NVML could not read the %s: %s", what,
                    nvml.error_string(r));
}

/* The readers check `out` first, then find the device; each writes *out only
 * when NVML answers. */
tc_status tc_utilization(int device, int *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    nvml_device h;
    nvml_utilization u;
    TC_TRY(nvml_device_of(device, &h));
    nvml_ret r = nvml.utilization(h, &u);
    if (r != 0)
        return nvml_fail("utilization", r);
    *out = (int)u.gpu;
    return TC_OK;
}

tc_status tc_memory_usage(int device, int *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    nvml_device h;
    nvml_utilization u;
    TC_TRY(nvml_device_of(device, &h));
    nvml_ret r = nvml.utilization(h, &u);
    if (r != 0)
        return nvml_fail("memory utilization", r);
    *out = (int)u.memory;
    return TC_OK;
}

tc_status tc_temperature(int device, int *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    nvml_device h;
    unsigned int t;
    TC_TRY(nvml_device_of(device, &h));
    nvml_ret r = nvml.temperature(h, NVML_TEMPERATURE_GPU, &t);
    if (r != 0)
        return nvml_fail("temperature", r);
    *out = (int)t;
    return TC_OK;
}

tc_status tc_power_draw(int device, int *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    nvml_device h;
    unsigned int mw;
    TC_TRY(nvml_device_of(device, &h));
    nvml_ret r = nvml.power(h, &mw);
    if (r != 0)
        return nvml_fail("power draw", r);
    *out = (int)mw;
    return TC_OK;
}

tc_status tc_clock_rate(int device, int64_t *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    nvml_device h;
    unsigned int mhz;
    TC_TRY(nvml_device_of(device, &h));
    nvml_ret r = nvml.clock(h, NVML_CLOCK_SM, &mhz);
    if (r != 0)
        return nvml_fail("SM clock", r);
    *out = (int64_t)mhz * 1000000; /* NVML reads MHz; tc_clock_rate answers in Hz */
    return TC_OK;
}

/* The processes on device h, into *procs (caller frees) and *n. */
static tc_status read_processes(nvml_device h, nvml_process_info **procs, unsigned int *n)
{
    *procs = NULL;
    *n = 0;
    nvml_ret r = nvml.processes(h, n, NULL);
    while (r == NVML_ERROR_INSUFFICIENT_SIZE) {
        *n += 8; /* processes may start between the two calls */
        free(*procs);
        *procs = calloc(*n, sizeof **procs);
        if (!*procs)
            return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
        r = nvml.processes(h, n, *procs);
    }
    if (r != 0) {
        free(*procs);
        *procs = NULL;
        return nvml_fail("process list", r);
    }
    return TC_OK;
}

tc_status tc_list_gpu_processes(int device, char **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    nvml_device h;
    TC_TRY(nvml_device_of(device, &h));
    unsigned int n;
    nvml_process_info *procs;
    TC_TRY(read_processes(h, &procs, &n));
    size_t cap = 64 + (size_t)n * 64;
    char *text = malloc(cap);
    if (!text) {
        free(procs);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    int d = device < 0 ? tc__tls_device : device;
    size_t len = (size_t)snprintf(text, cap, "GPU:%d\n", d);
    if (n == 0)
        snprintf(text + len, cap - len, "no processes are running\n");
    for (unsigned int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "process %10u uses %12.3f MB GPU memory\n",
                                procs[i].pid, procs[i].used_gpu_memory / (1024.0 * 1024.0));
    free(procs);
    *out = text;
    return TC_OK;
}
