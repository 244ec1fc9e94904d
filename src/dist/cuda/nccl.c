/* NCCL, loaded at run time through tc__dynlib (nccl_internal.h). One load
 * per process under pthread_once; afterwards tc__nccl's pointers are
 * read-only. The symbols of NCCL 2.4 and later are required (a missing one
 * makes NCCL "not there"); newer ones are optional and left NULL when the
 * library predates them, their callers falling back (dist.c: blocking
 * communicators before 2.14). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "nccl_internal.h"

tc__nccl_api tc__nccl;

static const char *nccl_names[] = {NULL, "libnccl.so.2", "libnccl.so", NULL};
static tc__dynlib nccl_lib = {.what = "NCCL (libnccl.so.2)", .names = nccl_names + 1};
static pthread_once_t once = PTHREAD_ONCE_INIT;
static tc_status load_status;
static char load_message[600];

#define SYM(field, name)                                                                           \
    st = st == TC_OK ? tc__dynlib_sym(&nccl_lib, name, (void **)&tc__nccl.field) : st

/* dlsym's object pointer into a function pointer, as tc__dynlib_sym does. */
#define OPTIONAL(field, name) *(void **)&tc__nccl.field = dlsym(nccl_lib.handle, name)

static void load(void)
{
    const char *path = getenv("TCUDA_NCCL_LIBRARY");
    if (path && *path) {
        nccl_names[0] = path;
        nccl_lib.names = nccl_names;
    }
    /* never NVLink multicast unless the user asks (before any communicator) */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    tc_status st = TC_OK;
    SYM(get_version, "ncclGetVersion");
    SYM(get_unique_id, "ncclGetUniqueId");
    SYM(comm_init_rank, "ncclCommInitRank");
    SYM(comm_init_all, "ncclCommInitAll");
    SYM(comm_destroy, "ncclCommDestroy");
    SYM(comm_abort, "ncclCommAbort");
    SYM(comm_get_async_error, "ncclCommGetAsyncError");
    SYM(get_error_string, "ncclGetErrorString");
    SYM(all_reduce, "ncclAllReduce");
    SYM(broadcast, "ncclBroadcast");
    SYM(reduce, "ncclReduce");
    SYM(all_gather, "ncclAllGather");
    SYM(reduce_scatter, "ncclReduceScatter");
    SYM(send, "ncclSend");
    SYM(recv, "ncclRecv");
    SYM(group_start, "ncclGroupStart");
    SYM(group_end, "ncclGroupEnd");
    if (st == TC_OK) { /* optional: an older NCCL lacks them */
        OPTIONAL(comm_init_rank_config, "ncclCommInitRankConfig");
        OPTIONAL(comm_finalize, "ncclCommFinalize");
        OPTIONAL(get_last_error, "ncclGetLastError");
    }
    load_status = st;
    if (st != TC_OK)
        snprintf(load_message, sizeof load_message, "%s (set TCUDA_NCCL_LIBRARY to its path)",
                 tc_last_error());
}
#undef SYM
#undef OPTIONAL

tc_status tc__nccl_ready(void)
{
    pthread_once(&once, load);
    if (load_status != TC_OK)
        return tc__fail(load_status, "%s", load_message);
    return TC_OK;
}

tc_status tc__nccl_fail(tc__nccl_result r, const char *what)
{
    const char *last = tc__nccl.get_last_error ? tc__nccl.get_last_error(NULL) : NULL;
    return tc__fail(TC_ERROR_CUDA, "%s failed: NCCL error %d (%s)%s%s", what, r,
                    tc__nccl.get_error_string ? tc__nccl.get_error_string(r) : "?",
                    last && *last ? ": " : "", last && *last ? last : "");
}

tc__nccl_config tc__nccl_config_nonblocking(void)
{
    return (tc__nccl_config){.size = sizeof(tc__nccl_config),
                             .magic = TC__NCCL_CONFIG_MAGIC,
                             .version = 2 * 10000 + 17 * 100 + 0, /* NCCL_VERSION(2, 17, 0) */
                             .blocking = 0,
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
