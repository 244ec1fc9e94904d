/* NCCL's version codes (include/tcuda/nccl.h), in both builds: taking one
 * apart needs neither NCCL nor CUDA. NCCL_VERSION(X, Y, Z) is X * 1000 +
 * Y * 100 + Z up to 2.8 and X * 10000 + Y * 100 + Z from 2.9 on (a minor
 * version reached two digits), so a code of five digits or more is of the
 * second kind and one of four digits of the first. */
#include "base/internal.h"
#include "tcuda/nccl.h"

tc_status tc_nccl_version_split(int version, int *major, int *minor, int *patch)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(major && minor && patch, "major, minor or patch is NULL");
    TC_CHECK_ARG(version >= 1000, "%d is not an NCCL version code (2.27.3 is 22703, 2.4.8 is 2408)",
                 version);
    int unit = version >= 10000 ? 10000 : 1000;
    *major = version / unit;
    *minor = version % unit / 100;
    *patch = version % 100;
    return TC_OK;
}
