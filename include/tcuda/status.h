/* tcuda: status codes and error messages.
 *
 * Every call that can fail returns a tc_status (TC_OK == 0). The reason, in
 * words, is tc_last_error(): the message of the most recent failed call on
 * this thread. A failed call changes nothing and writes no out-parameter.
 * Calls that cannot fail (pure functions, accessors of a handle) return
 * their value directly and say so. */
#ifndef TCUDA_STATUS_H
#define TCUDA_STATUS_H

#include <stddef.h>

#include "export.h"

TCUDA_EXTERN_C_BEGIN

typedef enum tc_status {
    TC_OK = 0,
    TC_ERROR_INVALID_ARGUMENT, /* a NULL pointer, a value out of range */
    TC_ERROR_NO_DEVICE,        /* no CUDA GPU or driver, or built without CUDA */
    TC_ERROR_INVALID_DEVICE,   /* a device index that does not exist */
    TC_ERROR_INVALID_HANDLE,   /* a destroyed or foreign stream, event, ... */
    TC_ERROR_INVALID_STATE,    /* the object is not in a state that allows this */
    TC_ERROR_NOT_READY,        /* the GPU work this needs has not finished */
    TC_ERROR_OUT_OF_MEMORY,    /* the device or host refused memory */
    TC_ERROR_NOT_SUPPORTED,    /* an optional library or feature is missing */
    TC_ERROR_DEVICE_MISMATCH,  /* objects on different devices meet in one call */
    TC_ERROR_SHAPE,            /* tensor shapes that do not fit together */
    TC_ERROR_DTYPE,            /* a dtype the operation does not take */
    TC_ERROR_SYNC_DISALLOWED,  /* a synchronizing call in sync debug mode 2 */
    TC_ERROR_CUDA,             /* any other error that CUDA reported */
    TC_ERROR_IO,               /* a file could not be read or written */
    TC_ERROR_INTERNAL,         /* a bug in tcuda: please report it */
    TC_ERROR_RACE              /* the stream sanitizer refused an unsynchronized access */
} tc_status;

/* The name of a status code, e.g. "TC_ERROR_NO_DEVICE". Never NULL. */
TCUDA_API const char *tc_status_string(tc_status status);

/* The message of the most recent failed call on this thread ("" if none;
 * never NULL). The string belongs to tcuda and stays valid until the next
 * failing call on this thread. */
TCUDA_API const char *tc_last_error(void);

/* Frees a string or buffer that a tcuda call documents as "caller frees"
 * (NULL does nothing). */
TCUDA_API void tc_free(void *p);

/* The library's version as "major.minor.patch", and TCUDA_VERSION_CODE of the
 * library actually loaded (compare with the header's to detect a mismatch).
 * These cannot fail. */
TCUDA_API const char *tc_version(void);
TCUDA_API int tc_version_code(void);

TCUDA_EXTERN_C_END

#endif
