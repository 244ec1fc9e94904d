/* The argument checks of memory.h's calls that need CUDA, shared by their
 * implementations (memory/cuda) and the stand-ins of a build without CUDA
 * (nocuda/memory.c), so that both answer bad input alike. Each returns
 * TC_OK or TC_ERROR_INVALID_ARGUMENT with the message. Not installed. */
#ifndef TCUDA_MEMORY_ARGS_H
#define TCUDA_MEMORY_ARGS_H

#include <math.h>

#include "base/internal.h"
#include "tcuda/memory.h"

/* tc_set_per_process_memory_fraction: a number in [0, 1]. */
static inline tc_status tc__memory_fraction_check(double fraction)
{
    TC_CHECK_ARG(!isnan(fraction), "fraction is NaN; it must be a number in [0, 1]");
    TC_CHECK_ARG(fraction >= 0.0 && fraction <= 1.0, "memory fraction %.17g is outside [0, 1]",
                 fraction);
    return TC_OK;
}

/* tc_allocator_create: both functions and out. */
static inline tc_status tc__allocator_create_check(tc_alloc_fn alloc_fn, tc_free_fn free_fn,
                                                   tc_allocator **out)
{
    TC_CHECK_ARG(alloc_fn, "alloc_fn is NULL");
    TC_CHECK_ARG(free_fn, "free_fn is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    return TC_OK;
}

/* tc_allocator_create_from_library: a path (dlopen("") would give the main
 * program, not a library), two names and out. */
static inline tc_status tc__allocator_library_check(const char *so_path, const char *alloc_fn,
                                                    const char *free_fn, tc_allocator **out)
{
    TC_CHECK_ARG(so_path && *so_path, "so_path is %s; give the path of a shared object",
                 so_path ? "empty" : "NULL");
    TC_CHECK_ARG(alloc_fn && *alloc_fn, "alloc_fn is %s; give the allocation function's name",
                 alloc_fn ? "empty" : "NULL");
    TC_CHECK_ARG(free_fn && *free_fn, "free_fn is %s; give the free function's name",
                 free_fn ? "empty" : "NULL");
    TC_CHECK_ARG(out, "out is NULL");
    return TC_OK;
}

#endif
