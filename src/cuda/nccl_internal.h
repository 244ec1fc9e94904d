/* NCCL, loaded at run time (nccl.c), for process groups (dist.c) and the
 * one-process collectives (comm_nccl.c). Its few types are declared here from
 * nccl.h's stable ABI: ncclUniqueId is 128 bytes and the enums' values are
 * fixed since NCCL 2.0 (ncclAvg since 2.10). Not installed. */
#ifndef TCUDA_NCCL_INTERNAL_H
#define TCUDA_NCCL_INTERNAL_H

#include "cuda_internal.h"
#include "tcuda/dtype.h"

typedef struct {
    char internal[128];
} tc__nccl_unique_id;
typedef struct tc__nccl_comm *tc__nccl_comm_t;
typedef int tc__nccl_result;
enum { TC__NCCL_SUCCESS = 0, TC__NCCL_IN_PROGRESS = 7 };
enum { TC__NCCL_INT8 = 0, TC__NCCL_SUM = 0 };

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
} tc__nccl_api;

/* Filled by tc__nccl_ready. */
extern tc__nccl_api tc__nccl;

/* Loads NCCL once ($TCUDA_NCCL_LIBRARY first, then libnccl.so.2) and sets
 * NCCL_NVLS_ENABLE=0 unless the user set it. TC_ERROR_NOT_SUPPORTED naming
 * what is missing. */
tc_status tc__nccl_ready(void);
/* TC_ERROR_CUDA: "`what` failed: NCCL error N (NCCL's words)". */
tc_status tc__nccl_fail(tc__nccl_result r, const char *what);
/* ncclDataType_t of a tcuda dtype; -1 for bool and int16 (NCCL has none). */
int tc__nccl_dtype(tc_dtype d);

#endif
