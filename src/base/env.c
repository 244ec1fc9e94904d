/* Debug switches that need no CUDA, and the environment variables that
 * set them; and which of the caching allocator's variables is read.
 *
 * Sync debug mode (torch.cuda.set_sync_debug_mode) is one process-wide
 * number, read by tc__sync_point() before any call that makes the host wait
 * for a stream. CUDA_LAUNCH_BLOCKING and TCUDA_SYNC_DEBUG_MODE are read once
 * from the environment. A value neither parser knows is never taken for a
 * default: it is kept as an error that tc__debug_env_check() returns, and
 * initialization (tc_init, or the first call that needs CUDA) fails with it,
 * as a bad TCUDA_ALLOC_CONF does. Nothing is printed unless the user asked
 * for warnings (sync debug mode 1), or set both a tcuda variable and its
 * PyTorch twin (one notice per pair and process). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>

#include "env.h"
#include "tcuda/device.h"

static atomic_int sync_debug_mode;
/* TCUDA_SYNC_DEBUG_MODE was invalid and tc_set_sync_debug_mode has not set a
 * mode since. */
static atomic_bool sync_env_bad;
static bool launch_blocking, launch_env_bad;
static char sync_env_error[256], launch_env_error[256];
/* TCUDA_SANITIZER (read here, acted on by the stream sanitizer, src/sanitizer). */
static int sanitizer_env_mode;
static bool sanitizer_env_bad;
static char sanitizer_env_error[256];
/* TCUDA_NO_CACHING, else PYTORCH_NO_CUDA_MEMORY_CACHING (read here, acted on
 * by the caching allocator). PyTorch's names are read when tcuda's twin is
 * unset, so a program's PyTorch settings carry over; tcuda's wins when both
 * are set, with a notice on stderr (once), since silently reading one of
 * two different values would hide which one counts. */
static bool no_caching, no_caching_bad;
static char no_caching_error[256];
/* TCUDA_JIT_READAHEAD (read here, acted on by
 * runtime/cuda/nvrtc_readahead.c): on when unset. */
static bool jit_readahead, jit_readahead_bad;
static char jit_readahead_error[256];
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* Case-insensitive membership of `text` in a NULL-terminated list. */
static bool one_of(const char *text, const char *const *words)
{
    for (; *words; words++)
        if (strcasecmp(text, *words) == 0)
            return true;
    return false;
}

/* A true/false variable: the words below, any letter case; unset is false. */
static tc_status parse_bool(const char *name, const char *text, bool *on)
{
    static const char *const yes[] = {"1", "true", "yes", "on", NULL};
    static const char *const no[] = {"", "0", "false", "no", "off", NULL};
    if (!text || one_of(text, no)) {
        *on = false;
        return TC_OK;
    }
    if (one_of(text, yes)) {
        *on = true;
        return TC_OK;
    }
    return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                    "%s='%.64s' is neither true (1, true, yes, on) nor false "
                    "(0, false, no, off, empty); any letter case",
                    name, text);
}

tc_status tc__parse_launch_blocking(const char *text, bool *on)
{
    return parse_bool("CUDA_LAUNCH_BLOCKING", text, on);
}

tc_status tc__parse_no_caching(const char *text, bool *on)
{
    return parse_bool("TCUDA_NO_CACHING", text, on);
}

tc_status tc__parse_no_caching_named(const char *name, const char *text, bool *on)
{
    return parse_bool(name, text, on);
}

tc_status tc__parse_jit_readahead(const char *text, bool *on)
{
    if (!text) {
        *on = true;
        return TC_OK;
    }
    return parse_bool("TCUDA_JIT_READAHEAD", text, on);
}

/* The first of `names` (NULL-terminated) that is set, its value in *value
 * (NULL and names[0] when none is). The first time the one read hides
 * others that are set, one line on stderr names them all (*noticed: once). */
static const char *first_set(const char *const *names, const char **value, atomic_bool *noticed)
{
    const char *name = names[0];
    char hidden[128] = "";
    *value = NULL;
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && !*value) {
            name = *names;
            *value = v;
        } else if (v) {
            size_t at = strlen(hidden);
            snprintf(hidden + at, sizeof hidden - at, "%s%s", at ? " and " : "", *names);
        }
    }
    if (hidden[0] && !atomic_exchange(noticed, true))
        tc__warn("%s is set: tcuda reads it and ignores %s", name, hidden);
    return name;
}

const char *tc__alloc_conf_env(const char **name)
{
    static const char *const names[] = {"TCUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
                                        "PYTORCH_CUDA_ALLOC_CONF", NULL};
    static atomic_bool noticed;
    const char *value;
    const char *n = first_set(names, &value, &noticed);
    if (name)
        *name = n;
    return value;
}

tc_status tc__parse_sync_debug_mode(const char *text, int *mode)
{
    static const char *const names[3][4] = {
        {"", "0", "default", NULL}, {"1", "warn", NULL}, {"2", "error", NULL}};
    if (!text) {
        *mode = 0;
        return TC_OK;
    }
    for (int m = 0; m < 3; m++) {
        if (one_of(text, names[m])) {
            *mode = m;
            return TC_OK;
        }
    }
    return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                    "TCUDA_SYNC_DEBUG_MODE='%.64s' is not a sync debug mode: use 0 or \"default\" "
                    "(off), 1 or \"warn\", 2 or \"error\"; any letter case",
                    text);
}

tc_status tc__parse_sanitizer(const char *text, int *mode)
{
    static const char *const names[4][4] = {
        {"", "0", "off", NULL}, {"1", "report", NULL}, {"error", NULL}, {"abort", NULL}};
    for (int m = 0; m < 4; m++) {
        if (!text || one_of(text, names[m])) {
            *mode = text ? m : 0;
            return TC_OK;
        }
    }
    return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                    "TCUDA_SANITIZER='%.64s' is not a sanitizer mode: use 0 or \"off\", 1 or "
                    "\"report\", \"error\", \"abort\"; any letter case",
                    text);
}

/* Parses one variable; on failure keeps its message in `error`. */
static bool env_ok(tc_status st, char *error, size_t size)
{
    if (st == TC_OK)
        return true;
    snprintf(error, size, "%s", tc_last_error());
    return false;
}

static void read_env(void)
{
    /* The parsers' failures are kept, not reported now: no public call is
     * failing yet, and the thread's last message must stay as it was. */
    tc__saved_message saved;
    tc__message_save(&saved);
    const char *prev_api = tc__api_name;
    tc__api_name = NULL; /* the kept message names the variable, not a call */
    bool on = false;
    launch_env_bad = !env_ok(tc__parse_launch_blocking(getenv("CUDA_LAUNCH_BLOCKING"), &on),
                             launch_env_error, sizeof launch_env_error);
    launch_blocking = on;
    int mode = 0;
    if (env_ok(tc__parse_sync_debug_mode(getenv("TCUDA_SYNC_DEBUG_MODE"), &mode), sync_env_error,
               sizeof sync_env_error))
        atomic_store(&sync_debug_mode, mode);
    else
        atomic_store(&sync_env_bad, true);
    sanitizer_env_bad = !env_ok(tc__parse_sanitizer(getenv("TCUDA_SANITIZER"), &sanitizer_env_mode),
                                sanitizer_env_error, sizeof sanitizer_env_error);
    static const char *const no_caching_names[] = {"TCUDA_NO_CACHING",
                                                   "PYTORCH_NO_CUDA_MEMORY_CACHING", NULL};
    static atomic_bool no_caching_noticed;
    const char *text;
    const char *name = first_set(no_caching_names, &text, &no_caching_noticed);
    no_caching_bad = !env_ok(tc__parse_no_caching_named(name, text, &on), no_caching_error,
                             sizeof no_caching_error);
    no_caching = on && !no_caching_bad;
    jit_readahead_bad = !env_ok(tc__parse_jit_readahead(getenv("TCUDA_JIT_READAHEAD"), &on),
                                jit_readahead_error, sizeof jit_readahead_error);
    jit_readahead = on && !jit_readahead_bad;
    tc__message_restore(&saved);
    tc__api_name = prev_api;
}

tc_status tc__debug_env_check(void)
{
    pthread_once(&env_once, read_env);
    if (TC_UNLIKELY(launch_env_bad))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s", launch_env_error);
    if (TC_UNLIKELY(sanitizer_env_bad))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s", sanitizer_env_error);
    if (TC_UNLIKELY(no_caching_bad))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s", no_caching_error);
    if (TC_UNLIKELY(jit_readahead_bad))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s", jit_readahead_error);
    if (TC_UNLIKELY(atomic_load_explicit(&sync_env_bad, memory_order_relaxed)))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%s (or call tc_set_sync_debug_mode, which replaces it)", sync_env_error);
    return TC_OK;
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

tc_status tc_get_sync_debug_mode(tc_sync_debug_mode *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    pthread_once(&env_once, read_env);
    if (TC_UNLIKELY(atomic_load_explicit(&sync_env_bad, memory_order_relaxed)))
        return tc__debug_env_check();
    *out = (tc_sync_debug_mode)atomic_load_explicit(&sync_debug_mode, memory_order_relaxed);
    return TC_OK;
}

tc_status tc_set_sync_debug_mode(tc_sync_debug_mode mode)
{
    TC_API_BEGIN;
    pthread_once(&env_once, read_env);
    int m = (int)mode; /* any int may arrive */
    TC_CHECK_ARG(m >= TC_SYNC_DEBUG_MODE_DEFAULT && m <= TC_SYNC_DEBUG_MODE_ERROR,
                 "mode %d is not 0 (off), 1 (warn) or 2 (error)", m);
    atomic_store(&sync_debug_mode, m);
    atomic_store(&sync_env_bad, false);
    return TC_OK;
}

static _Atomic(tc__sync_check_fn) sync_check;

void tc__sync_check_install(tc__sync_check_fn fn)
{
    atomic_store_explicit(&sync_check, fn, memory_order_release);
}

tc_status tc__sync_check(const char *what, void *stream)
{
    tc__sync_check_fn fn = atomic_load_explicit(&sync_check, memory_order_acquire);
    return fn ? fn(what, stream) : TC_OK;
}

tc_status tc__sync_point(const char *what) { return tc__sync_point_on(what, NULL); }

tc_status tc__sync_point_on(const char *what, void *stream)
{
    TC_TRY(tc__sync_check(what, stream));
    pthread_once(&env_once, read_env);
    if (TC_UNLIKELY(atomic_load_explicit(&sync_env_bad, memory_order_relaxed)))
        return tc__debug_env_check();
    int mode = atomic_load_explicit(&sync_debug_mode, memory_order_relaxed);
    if (TC_LIKELY(mode == 0))
        return TC_OK;
    if (mode == 1) {
        const char *api = tc__api_name;
        tc__warn("%s%s%s synchronizes the host with the GPU (sync debug mode is 1)", api ? api : "",
                 api ? ": " : "", what);
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

int tc__sanitizer_env_mode(void)
{
    pthread_once(&env_once, read_env);
    return sanitizer_env_bad ? 0 : sanitizer_env_mode;
}

bool tc__no_caching_enabled(void)
{
    pthread_once(&env_once, read_env);
    return no_caching;
}

bool tc__jit_readahead_enabled(void)
{
    pthread_once(&env_once, read_env);
    return jit_readahead;
}
