/* What the files of src/nocuda share: the one answer of a build without
 * CUDA. Not installed. */
#ifndef TCUDA_NOCUDA_H
#define TCUDA_NOCUDA_H

#include "base/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TC_ERROR_NO_DEVICE: "CUDA is not available: tcuda was built without CUDA
 * (...), so there are no <what>". A bad CUDA_LAUNCH_BLOCKING or
 * TCUDA_SYNC_DEBUG_MODE is reported first, as a CUDA build reports it
 * before it looks for a GPU. The message starts with the public call. */
tc_status tc__nocuda(const char *what);

#ifdef __cplusplus
}
#endif

#endif
