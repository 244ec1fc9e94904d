/* Status codes and the thread-local error message.
 *
 * tc__fail() is the one way a failing call reports: it formats the message
 * into this thread's buffer and returns the status, so that a function can
 * end with `return tc__fail(TC_ERROR_X, "what was wrong")`. The message is
 * kept until the next failure on the same thread. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static _Thread_local char tls_message[1024];

const char *tc_status_string(tc_status status)
{
    switch (status) {
    case TC_OK: return "TC_OK";
    case TC_ERROR_INVALID_ARGUMENT: return "TC_ERROR_INVALID_ARGUMENT";
    case TC_ERROR_NO_DEVICE: return "TC_ERROR_NO_DEVICE";
    case TC_ERROR_INVALID_DEVICE: return "TC_ERROR_INVALID_DEVICE";
    case TC_ERROR_INVALID_HANDLE: return "TC_ERROR_INVALID_HANDLE";
    case TC_ERROR_INVALID_STATE: return "TC_ERROR_INVALID_STATE";
    case TC_ERROR_NOT_READY: return "TC_ERROR_NOT_READY";
    case TC_ERROR_OUT_OF_MEMORY: return "TC_ERROR_OUT_OF_MEMORY";
    case TC_ERROR_NOT_SUPPORTED: return "TC_ERROR_NOT_SUPPORTED";
    case TC_ERROR_DEVICE_MISMATCH: return "TC_ERROR_DEVICE_MISMATCH";
    case TC_ERROR_SHAPE: return "TC_ERROR_SHAPE";
    case TC_ERROR_DTYPE: return "TC_ERROR_DTYPE";
    case TC_ERROR_SYNC_DISALLOWED: return "TC_ERROR_SYNC_DISALLOWED";
    case TC_ERROR_CUDA: return "TC_ERROR_CUDA";
    case TC_ERROR_IO: return "TC_ERROR_IO";
    case TC_ERROR_INTERNAL: return "TC_ERROR_INTERNAL";
    }
    return "TC_ERROR_UNKNOWN";
}

const char *tc_last_error(void) { return tls_message; }

tc_status tc__fail(tc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_message, sizeof tls_message, fmt, ap);
    va_end(ap);
    return status;
}

void tc_free(void *p) { free(p); }

#define TC_STR2(x) #x
#define TC_STR(x) TC_STR2(x)

const char *tc_version(void)
{
    return TC_STR(TCUDA_VERSION_MAJOR) "." TC_STR(TCUDA_VERSION_MINOR) "." TC_STR(
        TCUDA_VERSION_PATCH);
}

int tc_version_code(void) { return TCUDA_VERSION_CODE; }
