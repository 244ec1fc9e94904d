/* Status codes and the thread-local error message.
 *
 * tc__fail() is the one way a failing call reports: it formats the message
 * into this thread's buffer and returns the status, so that a function can
 * end with `return tc__fail(TC_ERROR_X, "what was wrong")`. The message is
 * kept until the next failure on the same thread. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Large enough for a stream sanitizer report (sanitizer.h), with two call stacks. */
static _Thread_local char tls_message[TC_MESSAGE_MAX];
_Thread_local const char *tc__api_name;
_Thread_local const void *tc__api_caller;

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
    case TC_ERROR_RACE: return "TC_ERROR_RACE";
    }
    return "TC_ERROR_UNKNOWN";
}

const char *tc_last_error(void) { return tls_message; }

void tc__message_save(tc__saved_message *s) { memcpy(s->text, tls_message, sizeof s->text); }

void tc__message_restore(const tc__saved_message *s)
{
    memcpy(tls_message, s->text, sizeof tls_message);
}

/* Length of a leading "tc_name: " in msg, or 0. */
static size_t fn_prefix(const char *msg)
{
    if (strncmp(msg, "tc_", 3) != 0)
        return 0;
    size_t i = 3;
    while (msg[i] == '_' || isalnum((unsigned char)msg[i]))
        i++;
    return msg[i] == ':' && msg[i + 1] == ' ' ? i + 2 : 0;
}

tc_status tc__fail(tc_status status, const char *fmt, ...)
{
    char body[sizeof tls_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    const char *api = tc__api_name;
    if (!api) {
        memcpy(tls_message, body, sizeof body);
        return status;
    }
    /* Truncation is fine here: the message is cut, never overrun. */
    size_t n = strlen(api);
    if (n > sizeof tls_message - 3)
        n = sizeof tls_message - 3;
    memcpy(tls_message, api, n);
    memcpy(tls_message + n, ": ", 2);
    const char *rest = body + fn_prefix(body);
    size_t room = sizeof tls_message - n - 3, len = strlen(rest);
    if (len > room)
        len = room;
    memcpy(tls_message + n + 2, rest, len);
    tls_message[n + 2 + len] = '\0';
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
