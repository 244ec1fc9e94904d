/* tcuda: the NCCL library under the collectives (torch.cuda.nccl.version),
 * where it was loaded from, and why there is none.
 *
 * NCCL carries the process groups of dist.h and, where it is there, the
 * multi-GPU broadcast and reduce of comm.h. tcuda loads it at run time, once
 * per process, when something first needs it: the library that
 * $TCUDA_NCCL_LIBRARY names (a path, or a name the loader looks up) when the
 * variable is set and not empty, and then only that one; otherwise
 * libnccl.so.2, then libnccl.so, from the loader's search path. NCCL 2.4 or
 * later is needed. A variable that names a file that does not load, or a
 * library without NCCL's functions, leaves tcuda without NCCL: it never falls
 * back to another copy, which would hide the mistake.
 *
 * Without NCCL these calls, like dist.h's, answer TC_ERROR_NOT_SUPPORTED and
 * tc_last_error() says why: the variable, the path it gives and the loader's
 * words; or each name tried and why it did not load; or the function an
 * older NCCL lacks. The load is tried once, so the answer holds for the
 * life of the process. NCCL needs no GPU: a build with CUDA finds it on a
 * machine without one; a build without CUDA has none (TC_ERROR_NO_DEVICE).
 *
 * NCCL's own variables (NCCL_DEBUG, NCCL_SOCKET_IFNAME, NCCL_NVLS_ENABLE and
 * the rest) are the user's: tcuda sets none of them. */
#ifndef TCUDA_NCCL_H
#define TCUDA_NCCL_H

#include "status.h"

TCUDA_EXTERN_C_BEGIN

/* NCCL's version code as ncclGetVersion gives it, into *out: 22703 for
 * 2.27.3 (major * 10000 + minor * 100 + patch since NCCL 2.9, major * 1000 +
 * minor * 100 + patch before); tc_nccl_version_split takes it apart (the
 * tuple torch.cuda.nccl.version returns). Loads NCCL if nothing has yet.
 * Errors: TC_ERROR_INVALID_ARGUMENT (NULL out), TC_ERROR_NOT_SUPPORTED (no
 * NCCL; tc_last_error() says why), TC_ERROR_CUDA (ncclGetVersion failed),
 * TC_ERROR_NO_DEVICE (built without CUDA). */
TCUDA_API tc_status tc_nccl_version(int *out);

/* The parts of a version code from tc_nccl_version: 22703 is 2, 27, 3 and
 * 2408 is 2, 4, 8. Needs no NCCL and no CUDA. TC_ERROR_INVALID_ARGUMENT for
 * a NULL pointer or a code below 1000, which no NCCL release has. */
TCUDA_API tc_status tc_nccl_version_split(int version, int *major, int *minor, int *patch);

/* The file NCCL's functions were loaded from, into *out: the library that
 * holds ncclGetVersion, as an absolute path with links resolved where that
 * can be done. The string belongs to tcuda and lives as long as the
 * process. Loads NCCL if nothing has yet. Errors: TC_ERROR_INVALID_ARGUMENT
 * (NULL out), TC_ERROR_NOT_SUPPORTED (no NCCL; tc_last_error() says why),
 * TC_ERROR_NO_DEVICE (built without CUDA). */
TCUDA_API tc_status tc_nccl_get_library_path(const char **out);

TCUDA_EXTERN_C_END

#endif
