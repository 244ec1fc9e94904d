/* Process groups in a build without CUDA (see src/nocuda/runtime.c for the
 * rules): options are checked first; no group or work can exist here, so any
 * non-NULL handle is TC_ERROR_INVALID_HANDLE; then TC_ERROR_NO_DEVICE. The
 * environment parsing and the rendezvous (src/dist/dist_env.c) work. */
#include "nocuda.h"
#include "dist/dist_internal.h"
#include "base/handle_pool.h"
#include "base/internal.h"
#include "tcuda/ddp.h"

static tc_status pg_arg(const tc_process_group *pg)
{
    return tc__handle_fail(pg, 0, "tc_process_group");
}
static tc_status work_arg(const tc_work *w) { return tc__handle_fail(w, 0, "tc_work"); }

tc_status tc_process_group_create(const tc_dist_options *opts, tc_process_group **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__dist_check_options(opts));
    return tc__nocuda();
}

tc_status tc_process_group_create_from_env(tc_process_group **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc_dist_options o;
    TC_TRY(tc_dist_options_from_env(&o));
    return tc__nocuda();
}

int tc_process_group_rank(const tc_process_group *pg) { return (void)pg, -1; }
int tc_process_group_size(const tc_process_group *pg) { return (void)pg, -1; }
int tc_process_group_device(const tc_process_group *pg) { return (void)pg, -1; }

#define PG_OP(name, params)                                                                        \
    tc_status name params                                                                          \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        return pg_arg(pg);                                                                         \
    }
PG_OP(tc_process_group_destroy, (tc_process_group * pg))
PG_OP(tc_dist_all_reduce, (tc_process_group * pg, tc_tensor *t, tc_reduce_op op, tc_work **out))
PG_OP(tc_dist_broadcast, (tc_process_group * pg, tc_tensor *t, int root, tc_work **out))
PG_OP(tc_dist_reduce,
      (tc_process_group * pg, tc_tensor *t, int root, tc_reduce_op op, tc_work **out))
PG_OP(tc_dist_all_gather,
      (tc_process_group * pg, tc_tensor *output, const tc_tensor *input, tc_work **out))
PG_OP(tc_dist_reduce_scatter, (tc_process_group * pg, tc_tensor *output, const tc_tensor *input,
                               tc_reduce_op op, tc_work **out))
PG_OP(tc_dist_all_to_all,
      (tc_process_group * pg, tc_tensor *output, const tc_tensor *input, tc_work **out))
PG_OP(tc_dist_send, (tc_process_group * pg, const tc_tensor *t, int peer, tc_work **out))
PG_OP(tc_dist_recv, (tc_process_group * pg, tc_tensor *t, int peer, tc_work **out))
PG_OP(tc_dist_barrier, (tc_process_group * pg))

#define WORK_OP(name, params)                                                                      \
    tc_status name params                                                                          \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        return work_arg(work);                                                                     \
    }
WORK_OP(tc_work_wait, (tc_work * work))
WORK_OP(tc_work_query, (tc_work * work))
WORK_OP(tc_work_wait_stream, (tc_work * work, tc_stream *stream))
WORK_OP(tc_work_destroy, (tc_work * work))

/* ---- DDP's reducer: no group can exist here ---- */

static tc_status ddp_arg(const tc_ddp *d) { return tc__handle_fail(d, 0, "tc_ddp"); }

tc_status tc_ddp_create(tc_process_group *pg, tc_tensor *const *params, int n,
                        const tc_ddp_options *opts, tc_ddp **out)
{
    TC_API_BEGIN;
    (void)opts;
    TC_CHECK_ARG(pg, "pg is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(n >= 1 && params, "params is NULL or n (%d) is not positive", n);
    return pg_arg(pg);
}

#define DDP_OP(name, params)                                                                       \
    tc_status name params                                                                          \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        return ddp_arg(ddp);                                                                       \
    }
DDP_OP(tc_ddp_destroy, (tc_ddp * ddp))
DDP_OP(tc_ddp_grad, (tc_ddp * ddp, int i, tc_tensor **out))
DDP_OP(tc_ddp_zero_grad, (tc_ddp * ddp))
DDP_OP(tc_ddp_set_require_sync, (tc_ddp * ddp, bool sync))
DDP_OP(tc_ddp_grad_ready, (tc_ddp * ddp, int i))
DDP_OP(tc_ddp_finish, (tc_ddp * ddp))
DDP_OP(tc_ddp_bucket_params,
       (const tc_ddp *ddp, int b, int *params, int capacity, int *n_out, size_t *bytes))

int tc_ddp_num_buckets(const tc_ddp *ddp) { return (void)ddp, 0; }
