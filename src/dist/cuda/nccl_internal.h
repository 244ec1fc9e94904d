/* NCCL, loaded at run time (nccl.c), for process groups (dist.c) and the
 * one-process collectives (comm_nccl.c). Its few types are declared here from
 * nccl.h's stable ABI: ncclUniqueId is 128 bytes and the enums' values are
 * fixed since NCCL 2.0 (ncclAvg since 2.10). Not installed. */
#ifndef TCUDA_NCCL_INTERNAL_H
#define TCUDA_NCCL_INTERNAL_H

#include "runtime/cuda/cuda_internal.h"
#include "tcuda/dtype.h"

typedef struct {
    char internal[128];
} tc__nccl_unique_id;
typedef struct tc__nccl_comm *tc__nccl_comm_t;
typedef int tc__nccl_result;
enum {
    TC__NCCL_SUCCESS = 0,
    TC__NCCL_SYSTEM_ERROR = 2,
    TC__NCCL_INTERNAL_ERROR = 3,
    TC__NCCL_REMOTE_ERROR = 6,
    TC__NCCL_IN_PROGRESS = 7
};
enum { TC__NCCL_INT8 = 0, TC__NCCL_SUM = 0 };

/* ncclConfig_t as NCCL 2.17 lays it out. NCCL reads `size` bytes of it (at
 * most its own struct's size), checks `magic`, and ignores the fields that
 * `version` predates; later versions append fields. Fields left at
 * TC__NCCL_CONFIG_UNDEF take NCCL's defaults. */
typedef struct tc__nccl_config {
    size_t size;
    unsigned int magic;   /* TC__NCCL_CONFIG_MAGIC */
    unsigned int version; /* NCCL_VERSION(2, 17, 0) */
    int blocking;         /* 0: calls return ncclInProgress and complete later */
    int cga_cluster_size;
    int min_ctas;
    int max_ctas;
    const char *net_name;
} tc__nccl_config;
#define TC__NCCL_CONFIG_MAGIC 0xcafebeefu
#define TC__NCCL_CONFIG_UNDEF (-2147483647 - 1) /* NCCL_CONFIG_UNDEF_INT, INT_MIN */

typedef struct tc__nccl_api {
    tc__nccl_result (*get_version)(int *);
    tc__nccl_result (*get_unique_id)(tc__nccl_unique_id *);
    tc__nccl_result (*comm_init_rank)(tc__nccl_comm_t *, int, tc__nccl_unique_id, int);
    tc__nccl_result (*comm_init_all)(tc__nccl_comm_t *, int, const int *);
    tc__nccl_result (*comm_destroy)(tc__nccl_comm_t);
    tc__nccl_result (*comm_abort)(tc__nccl_comm_t);
    tc__nccl_result (*comm_get_async_error)(tc__nccl_comm_t, tc__nccl_result *);
    const char *(*get_error_string)(tc__nccl_result);
    tc__nccl_result (*all_reduce)(const void *, void *, size_t, int, int, tc__nccl_comm_t,
                                  cudaStream_t);
    tc__nccl_result (*broadcast)(const void *, void *, size_t, int, int, tc__nccl_comm_t,
                                 cudaStream_t);
    tc__nccl_result (*reduce)(const void *, void *, size_t, int, int, int, tc__nccl_comm_t,
                              cudaStream_t);
    tc__nccl_result (*all_gather)(const void *, void *, size_t, int, tc__nccl_comm_t, cudaStream_t);
    tc__nccl_result (*reduce_scatter)(const void *, void *, size_t, int, int, tc__nccl_comm_t,
                                      cudaStream_t);
    tc__nccl_result (*send)(const void *, size_t, int, int, tc__nccl_comm_t, cudaStream_t);
    tc__nccl_result (*recv)(void *, size_t, int, int, tc__nccl_comm_t, cudaStream_t);
    tc__nccl_result (*group_start)(void);
    tc__nccl_result (*group_end)(void);
    /* Optional (NULL when this NCCL is older): non-blocking communicators
     * (2.14) and the detailed last error (2.13). */
    tc__nccl_result (*comm_init_rank_config)(tc__nccl_comm_t *, int, tc__nccl_unique_id, int,
                                             tc__nccl_config *);
    tc__nccl_result (*comm_finalize)(tc__nccl_comm_t);
    const char *(*get_last_error)(tc__nccl_comm_t);
} tc__nccl_api;

/* Filled by tc__nccl_ready; the required entries are never NULL after it
 * succeeded, the optional ones may be. */
extern tc__nccl_api tc__nccl;

/* Loads NCCL once: $TCUDA_NCCL_LIBRARY alone when it is set and not empty,
 * else libnccl.so.2, then libnccl.so. TC_ERROR_NOT_SUPPORTED saying why it is
 * not there (the variable and its value with dlerror's words, the names
 * tried, or the symbol an older NCCL lacks), the same on every call. Sets no
 * environment variable (NCCL's are the user's). */
tc_status tc__nccl_ready(void);
/* "NCCL error N (NCCL's words): NCCL's last error message" into buf (the
 * last part where this NCCL has ncclGetLastError). */
void tc__nccl_words(tc__nccl_result r, char *buf, size_t n);
/* TC_ERROR_CUDA: "`what` failed: " and tc__nccl_words. */
tc_status tc__nccl_fail(tc__nccl_result r, const char *what);
/* ncclDataType_t of a tcuda dtype; -1 for bool and int16 (NCCL has none). */
int tc__nccl_dtype(tc_dtype d);
/* A config asking for a blocking (1) or non-blocking (0) communicator,
 * every other field NCCL's default. */
tc__nccl_config tc__nccl_config_of(int blocking);

#endif
