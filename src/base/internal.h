/* Internal helpers shared by every module; not installed. */
#ifndef TCUDA_INTERNAL_H
#define TCUDA_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tcuda/status.h"

#if defined(__GNUC__)
#define TC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define TC_LIKELY(x) __builtin_expect(!!(x), 1)
#define TC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define TC_PRINTF(f, a)
#define TC_LIKELY(x) (x)
#define TC_UNLIKELY(x) (x)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Records a formatted message as this thread's last error; returns status.
 * Inside a public call (TC_API_BEGIN), the message starts with that call's
 * name: a "tc_x: " prefix written by an inner function is replaced by it, and
 * a message without one gets it. */
tc_status tc__fail(tc_status status, const char *fmt, ...) TC_PRINTF(2, 3);

/* The longest message tc_last_error() keeps. */
#define TC_MESSAGE_MAX 4096

/* The thread's last message, saved whole and put back exactly (no prefix
 * added): for code that calls functions that may fail on the way to a
 * success, or to another error, that must not change what the user's last
 * failed call reported. */
typedef struct tc__saved_message {
    char text[TC_MESSAGE_MAX];
} tc__saved_message;
void tc__message_save(tc__saved_message *s);
void tc__message_restore(const tc__saved_message *s);

/* The public function the user called on this thread (NULL outside one). */
#ifndef __cplusplus
extern _Thread_local const char *tc__api_name;
/* Where the user called it from (the return address into the caller), for
 * tools that name call sites (the stream sanitizer); valid while
 * tc__api_name is set. */
extern _Thread_local const void *tc__api_caller;

static inline const char *tc__api_begin(const char *fn, const void *caller)
{
    const char *prev = tc__api_name;
    if (!prev) {
        tc__api_name = fn;
        tc__api_caller = caller;
    }
    return prev;
}
static inline void tc__api_end(const char *const *prev)
{
    if (!*prev)
        tc__api_name = NULL;
}
/* First statement of every public function that can fail: error messages of
 * this call, and of the tcuda functions it calls, then name it (the outermost
 * public call wins, so a wrapper such as tc_tensor_cuda is named rather than
 * the tc_tensor_to it calls). */
#define TC_API_BEGIN                                                                               \
    const char *const tc__api_prev_ __attribute__((cleanup(tc__api_end), unused)) = tc__api_begin( \
        __func__, __builtin_return_address(0))
#endif

/* Prints "tcuda warning: ..." to stderr (only where the user asked for it). */
void tc__warn(const char *fmt, ...) TC_PRINTF(1, 2);

/* 64 bits from the operating system's entropy (getrandom, then
 * /dev/urandom); TC_ERROR_IO when neither answers. For seeds and nonces. */
tc_status tc__os_entropy(uint64_t *out);

/* Most devices a process can address; device indices are below this. */
#define TC_MAX_DEVICES 64

/* Validates an argument: fails with TC_ERROR_INVALID_ARGUMENT and a message. */
#define TC_CHECK_ARG(cond, ...)                                                                    \
    do {                                                                                           \
        if (TC_UNLIKELY(!(cond)))                                                                  \
            return tc__fail(TC_ERROR_INVALID_ARGUMENT, __VA_ARGS__);                               \
    } while (0)

/* Propagates a failing tc_status (its message is already set). */
#define TC_TRY(call)                                                                               \
    do {                                                                                           \
        tc_status tc_try_st_ = (call);                                                             \
        if (TC_UNLIKELY(tc_try_st_ != TC_OK))                                                      \
            return tc_try_st_;                                                                     \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
