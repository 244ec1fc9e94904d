/* Debug switches that need no CUDA.
 *
 * Sync debug mode (torch.cuda.set_sync_debug_mode) is one process-wide
 * number, read by tc__sync_point() before any call that makes the host wait
 * for a stream. CUDA_LAUNCH_BLOCKING is read once from the environment. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "debug.h"
#include "tcuda/device.h"

static atomic_int sync_debug_mode;
static bool launch_blocking;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static bool env_true(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0 && strcmp(v, "false") != 0;
}

static void read_env(void)
{
    launch_blocking = env_true("CUDA_LAUNCH_BLOCKING");
    const char *mode = getenv("TCUDA_SYNC_DEBUG_MODE");
    if (mode && (strcmp(mode, "1") == 0 || strcmp(mode, "warn") == 0))
        atomic_store(&sync_debug_mode, 1);
    else if (mode && (strcmp(mode, "2") == 0 || strcmp(mode, "error") == 0))
        atomic_store(&sync_debug_mode, 2);
}

void tc__warn(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tcuda warning: %s\n", line);
}

int tc_get_sync_debug_mode(void)
{
    pthread_once(&env_once, read_env);
    return atomic_load_explicit(&sync_debug_mode, memory_order_relaxed);
}

tc_status tc_set_sync_debug_mode(int mode)
{
    pthread_once(&env_once, read_env);
    TC_CHECK_ARG(mode >= 0 && mode <= 2,
                 "tc_set_sync_debug_mode: mode %d is not 0 (off), 1 (warn) or 2 (error)", mode);
    atomic_store(&sync_debug_mode, mode);
    return TC_OK;
}

tc_status tc__sync_point(const char *what)
{
    int mode = tc_get_sync_debug_mode();
    if (TC_LIKELY(mode == 0))
        return TC_OK;
    if (mode == 1) {
        tc__warn("%s synchronizes the host with the GPU (sync debug mode is 1)", what);
        return TC_OK;
    }
    return tc__fail(TC_ERROR_SYNC_DISALLOWED,
                    "%s would synchronize the host with the GPU, which sync debug mode 2 forbids "
                    "(tc_set_sync_debug_mode(0) allows it)",
                    what);
}

bool tc__launch_blocking_enabled(void)
{
    pthread_once(&env_once, read_env);
    return launch_blocking;
}

bool tc_launch_blocking(void) { return tc__launch_blocking_enabled(); }
