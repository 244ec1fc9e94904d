/* The switches of tcuda/backends.h: four process-wide atomics (the matmul
 * precisions and whether deterministic algorithms are on).
 *
 * The float32 matmul precision is the one number behind both
 * set_float32_matmul_precision and allow_tf32 (PyTorch keeps them as one
 * too), so the two views never disagree. TORCH_ALLOW_TF32_CUBLAS_OVERRIDE
 * is read once, before the first read or write of the precision, so a
 * setter called first is never overwritten by it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends_internal.h"
#include "base/internal.h"
#include "tcuda/backends.h"

/* Indices into names[]; the order is PyTorch's, most precise first. */
enum { PRECISION_HIGHEST = 0, PRECISION_HIGH = 1, PRECISION_MEDIUM = 2 };
static const char *const names[] = {"highest", "high", "medium"};

static atomic_int precision = PRECISION_HIGHEST;
static atomic_bool fp16_reduced = true, bf16_reduced = true;
static atomic_bool deterministic = false;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* PyTorch's check_env reads "1" as set (and "0" as not); so does this. */
static void read_env(void)
{
    const char *v = getenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE");
    if (v && strcmp(v, "1") == 0)
        atomic_store(&precision, PRECISION_HIGH);
}

static int precision_now(void)
{
    pthread_once(&env_once, read_env);
    return atomic_load(&precision);
}

static void precision_set(int p)
{
    pthread_once(&env_once, read_env);
    atomic_store(&precision, p);
}

bool tc__matmul_allow_tf32(void) { return precision_now() != PRECISION_HIGHEST; }

bool tc__matmul_allow_reduced_reduction(tc_dtype dt)
{
    return dt == TC_FLOAT16    ? atomic_load(&fp16_reduced)
           : dt == TC_BFLOAT16 ? atomic_load(&bf16_reduced)
                               : true;
}

tc_status tc_set_float32_matmul_precision(const char *p)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(p, "precision is NULL");
    for (int i = 0; i < 3; i++)
        if (strcmp(p, names[i]) == 0) {
            precision_set(i);
            return TC_OK;
        }
    return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                    "precision '%.64s' is not one of 'highest', 'high', 'medium'", p);
}

tc_status tc_get_float32_matmul_precision(const char **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    *out = names[precision_now()];
    return TC_OK;
}

tc_status tc_backends_cuda_matmul_set_allow_tf32(bool allow)
{
    precision_set(allow ? PRECISION_HIGH : PRECISION_HIGHEST);
    return TC_OK;
}

tc_status tc_backends_cuda_matmul_get_allow_tf32(bool *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    *out = tc__matmul_allow_tf32();
    return TC_OK;
}

tc_status tc_backends_cuda_matmul_set_allow_fp16_reduced_precision_reduction(bool allow)
{
    atomic_store(&fp16_reduced, allow);
    return TC_OK;
}

tc_status tc_backends_cuda_matmul_get_allow_fp16_reduced_precision_reduction(bool *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    *out = atomic_load(&fp16_reduced);
    return TC_OK;
}

tc_status tc_backends_cuda_matmul_set_allow_bf16_reduced_precision_reduction(bool allow)
{
    atomic_store(&bf16_reduced, allow);
    return TC_OK;
}

tc_status tc_backends_cuda_matmul_get_allow_bf16_reduced_precision_reduction(bool *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    *out = atomic_load(&bf16_reduced);
    return TC_OK;
}

bool tc__deterministic_algorithms(void) { return atomic_load(&deterministic); }

tc_status tc_use_deterministic_algorithms(bool enabled)
{
    atomic_store(&deterministic, enabled);
    return TC_OK;
}

tc_status tc_are_deterministic_algorithms_enabled(bool *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    *out = atomic_load(&deterministic);
    return TC_OK;
}
