/* NCCL, loaded at run time (nccl_internal.h), and what include/tcuda/nccl.h
 * says about it. One load per process under pthread_once; afterwards
 * tc__nccl's pointers, the path and the message are read-only.
 *
 * Where it comes from: $TCUDA_NCCL_LIBRARY when set and not empty, and then
 * only that library. A value that does not load, or loads something without
 * NCCL's functions, makes NCCL "not there" with a message naming the
 * variable, its value and dlerror's words: falling back to libnccl.so.2
 * would run the program on an NCCL the user did not ask for. Unset or empty:
 * libnccl.so.2, then libnccl.so (an unversioned development link), from the
 * loader's path. The symbols of NCCL 2.4 and later are required (a missing
 * one makes NCCL "not there"); newer ones are optional and left NULL when
 * the library predates them, their callers falling back (dist.c: blocking
 * communicators before 2.14).
 *
 * NCCL's own variables are the user's. Nothing here calls setenv (another
 * thread may be inside getenv, and NCCL reads its variables from threads of
 * its own); NVLink multicast, for one, is off only where the environment says
 * NCCL_NVLS_ENABLE=0 (tools/tcuda-run does for the ranks it starts). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_internal.h"
#include "tcuda/nccl.h"

tc__nccl_api tc__nccl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tc_status load_status;
static char load_message[3 * PATH_MAX]; /* why NCCL is not there */
static char load_path[PATH_MAX];        /* where it was loaded from */

#define NOT_THERE(...)                                                                             \
    snprintf(load_message, sizeof load_message, "NCCL is not available: " __VA_ARGS__)

/* dlerror's words for the last failed dl call (copied: the next one
 * overwrites them). */
static void dl_words(char *buf, size_t n)
{
    const char *e = dlerror();
    snprintf(buf, n, "%s", e ? e : "no reason given");
}

/* Resolves one required symbol into *slot; false, with dlerror's words in
 * `why`, when the library lacks it. */
static bool need(void *h, const char *name, void **slot, char *why, size_t n)
{
    (void)dlerror();
    *slot = dlsym(h, name);
    if (!*slot)
        dl_words(why, n);
    return *slot != NULL;
}

/* dlsym's object pointer into a function pointer, as tc__dynlib_sym does. */
#define NEED(field, name) ok = ok && need(h, name, (void **)&tc__nccl.field, why, n)
#define OPTIONAL(field, name) *(void **)&tc__nccl.field = dlsym(h, name)

/* Fills tc__nccl from the library `h`; false, with the words of the first
 * missing symbol in `why`, when it is not NCCL 2.4 or later. */
static bool resolve(void *h, char *why, size_t n)
{
    bool ok = true;
    NEED(get_version, "ncclGetVersion");
    NEED(get_unique_id, "ncclGetUniqueId");
    NEED(comm_init_rank, "ncclCommInitRank");
    NEED(comm_init_all, "ncclCommInitAll");
    NEED(comm_destroy, "ncclCommDestroy");
    NEED(comm_abort, "ncclCommAbort");
    NEED(comm_get_async_error, "ncclCommGetAsyncError");
    NEED(get_error_string, "ncclGetErrorString");
    NEED(all_reduce, "ncclAllReduce");
    NEED(broadcast, "ncclBroadcast");
    NEED(reduce, "ncclReduce");
    NEED(all_gather, "ncclAllGather");
    NEED(reduce_scatter, "ncclReduceScatter");
    NEED(send, "ncclSend");
    NEED(recv, "ncclRecv");
    NEED(group_start, "ncclGroupStart");
    NEED(group_end, "ncclGroupEnd");
    if (!ok) {
        memset(&tc__nccl, 0, sizeof tc__nccl);
        return false;
    }
    /* optional: an older NCCL lacks them */
    OPTIONAL(comm_init_rank_config, "ncclCommInitRankConfig");
    OPTIONAL(comm_finalize, "ncclCommFinalize");
    OPTIONAL(get_last_error, "ncclGetLastError");
    return true;
}
#undef NEED
#undef OPTIONAL

/* The library TCUDA_NCCL_LIBRARY names, or NULL with the message set. */
static void *open_named(const char *var)
{
    void *h = dlopen(var, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        char why[PATH_MAX + 256];
        dl_words(why, sizeof why);
        NOT_THERE("TCUDA_NCCL_LIBRARY=%s does not load: %s", var, why);
    }
    return h;
}

/* libnccl.so.2, else libnccl.so, into *name; NULL with the message set
 * (each name's reason, in that order). */
static void *open_default(const char **name)
{
    char why2[PATH_MAX + 256], whyso[PATH_MAX + 256];
    *name = "libnccl.so.2";
    void *h = dlopen(*name, RTLD_NOW | RTLD_LOCAL);
    if (h)
        return h;
    dl_words(why2, sizeof why2);
    *name = "libnccl.so";
    h = dlopen(*name, RTLD_NOW | RTLD_LOCAL);
    if (h)
        return h;
    dl_words(whyso, sizeof whyso);
    NOT_THERE("%s; %s (set TCUDA_NCCL_LIBRARY to NCCL's path)", why2, whyso);
    return NULL;
}

/* Where ncclGetVersion lives: the loader's name for its file (else the
 * name it was opened by), made absolute with links resolved where it is a
 * path (a bare soname would be looked up in the working directory). */
static void find_path(const char *opened_as)
{
    Dl_info info;
    void *sym = *(void **)&tc__nccl.get_version;
    const char *file = opened_as;
    if (dladdr(sym, &info) && info.dli_fname && *info.dli_fname)
        file = info.dli_fname;
    char real[PATH_MAX];
    bool resolved = strchr(file, '/') && realpath(file, real);
    snprintf(load_path, sizeof load_path, "%s", resolved ? real : file);
}

static void load(void)
{
    load_status = TC_ERROR_NOT_SUPPORTED;
    const char *var = getenv("TCUDA_NCCL_LIBRARY");
    bool named = var && *var;
    const char *name = var;
    void *h = named ? open_named(var) : open_default(&name);
    if (!h)
        return;
    char why[PATH_MAX + 256];
    if (!resolve(h, why, sizeof why)) {
        if (named)
            NOT_THERE("TCUDA_NCCL_LIBRARY=%s is not NCCL 2.4 or later: %s", var, why);
        else
            NOT_THERE("%s is older than NCCL 2.4: %s (set TCUDA_NCCL_LIBRARY to a newer NCCL)",
                      name, why);
        dlclose(h);
        return;
    }
    find_path(name);
    load_status = TC_OK;
}
#undef NOT_THERE

tc_status tc__nccl_ready(void)
{
    pthread_once(&once, load);
    if (load_status != TC_OK)
        return tc__fail(load_status, "%s", load_message);
    return TC_OK;
}

/* ---- include/tcuda/nccl.h ---------------------------------------------------------- */

tc_status tc_nccl_version(int *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__nccl_ready());
    int v = 0;
    tc__nccl_result r = tc__nccl.get_version(&v);
    if (r != TC__NCCL_SUCCESS)
        return tc__nccl_fail(r, "ncclGetVersion");
    *out = v;
    return TC_OK;
}

tc_status tc_nccl_get_library_path(const char **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__nccl_ready());
    *out = load_path;
    return TC_OK;
}

void tc__nccl_words(tc__nccl_result r, char *buf, size_t n)
{
    const char *last = tc__nccl.get_last_error ? tc__nccl.get_last_error(NULL) : NULL;
    snprintf(buf, n, "NCCL error %d (%s)%s%s", r,
             tc__nccl.get_error_string ? tc__nccl.get_error_string(r) : "?",
             last && *last ? ": " : "", last && *last ? last : "");
}

tc_status tc__nccl_fail(tc__nccl_result r, const char *what)
{
    char words[400];
    tc__nccl_words(r, words, sizeof words);
    return tc__fail(TC_ERROR_CUDA, "%s failed: %s", what, words);
}

tc__nccl_config tc__nccl_config_of(int blocking)
{
    return (tc__nccl_config){.size = sizeof(tc__nccl_config),
                             .magic = TC__NCCL_CONFIG_MAGIC,
                             .version = 2 * 10000 + 17 * 100 + 0, /* NCCL_VERSION(2, 17, 0) */
                             .blocking = blocking,
                             .cga_cluster_size = TC__NCCL_CONFIG_UNDEF,
                             .min_ctas = TC__NCCL_CONFIG_UNDEF,
                             .max_ctas = TC__NCCL_CONFIG_UNDEF,
                             .net_name = NULL};
}

int tc__nccl_dtype(tc_dtype d)
{
    switch (d) {
    case TC_UINT8: return 1;
    case TC_INT8: return 0;
    case TC_INT32: return 2;
    case TC_INT64: return 4;
    case TC_FLOAT16: return 6;
    case TC_BFLOAT16: return 9;
    case TC_FLOAT32: return 7;
    case TC_FLOAT64: return 8;
    default: return -1;
    }
}
