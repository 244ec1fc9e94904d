/* NCCL in a build without CUDA (see src/nocuda/runtime.c for the rules):
 * NCCL is a CUDA library, so there is none; the arguments are checked, then
 * TC_ERROR_NO_DEVICE. tc_nccl_version_split needs neither and is in
 * src/dist/nccl_version.c. */
#include "nocuda.h"
#include "tcuda/nccl.h"

tc_status tc_nccl_version(int *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}

tc_status tc_nccl_get_library_path(const char **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}
