/* Debug switches that need no CUDA: sync debug mode, CUDA_LAUNCH_BLOCKING and
 * TCUDA_SANITIZER, and the parsers of the environment variables that set them. */
#ifndef TCUDA_DEBUG_H
#define TCUDA_DEBUG_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Call before any call that makes the host wait for a stream: warns (mode 1)
 * or fails with TC_ERROR_SYNC_DISALLOWED (mode 2), naming the public call
 * and `what` (e.g. "waiting for the stream"). */
tc_status tc__sync_point(const char *what);

/* The same, for a call that waits for one runtime stream (`stream`, opaque
 * to the core; NULL when unknown): the installed sync check (below) sees it. */
tc_status tc__sync_point_on(const char *what, void *stream);

/* A check a device runtime installs to refuse synchronizing calls while they
 * are not allowed (CUDA graph capture). Every sync point runs it first;
 * calls that wait but are not sync points in sync debug mode's sense (a
 * device-wide synchronize, an event query, a copy from pageable memory) run
 * it through tc__sync_check. `stream`: the runtime stream the call waits
 * for, NULL when unknown, TC__SYNC_ALL_STREAMS for a whole device. */
typedef tc_status (*tc__sync_check_fn)(const char *what, void *stream);
#define TC__SYNC_ALL_STREAMS ((void *)~(uintptr_t)0)
void tc__sync_check_install(tc__sync_check_fn fn);
tc_status tc__sync_check(const char *what, void *stream);

/* True when CUDA_LAUNCH_BLOCKING was set to a true value. */
bool tc__launch_blocking_enabled(void);

/* The parsers of CUDA_LAUNCH_BLOCKING (true: 1/true/yes/on; false: NULL,
 * empty, 0/false/no/off; any letter case) and TCUDA_SYNC_DEBUG_MODE (NULL or
 * empty: 0; 0/1/2, or PyTorch's names default/warn/error; any letter case).
 * Anything else is TC_ERROR_INVALID_ARGUMENT naming the variable and the
 * value; the out-parameter is written only on success. */
tc_status tc__parse_launch_blocking(const char *text, bool *on);
tc_status tc__parse_sync_debug_mode(const char *text, int *mode);

/* TCUDA_SANITIZER: NULL, empty, 0 or off: 0; 1 or report: 1; error: 2;
 * abort: 3 (any letter case); anything else is TC_ERROR_INVALID_ARGUMENT,
 * kept like the others for tc__debug_env_check. tc__sanitizer_env_mode() is
 * the value read once (0 when invalid); the stream sanitizer (src/sanitizer)
 * acts on it at CUDA initialization. */
tc_status tc__parse_sanitizer(const char *text, int *mode);
int tc__sanitizer_env_mode(void);
/* TCUDA_NO_CACHING: true (1, true, yes, on) makes the caching allocator give
 * every freed block back to the driver at once; false (0, false, no, off,
 * empty or unset) is the default; anything else is an error kept like the
 * others. When TCUDA_NO_CACHING is unset, PyTorch's
 * PYTORCH_NO_CUDA_MEMORY_CACHING is read the same way (its errors name it);
 * when both are set, TCUDA_NO_CACHING wins and a one-line notice on stderr
 * says so, once per process. tc__no_caching_enabled() is false while the
 * variable read is invalid. `name` is the variable named in the message. */
tc_status tc__parse_no_caching(const char *text, bool *on);
tc_status tc__parse_no_caching_named(const char *name, const char *text, bool *on);
bool tc__no_caching_enabled(void);

/* TCUDA_JIT_READAHEAD: unset or true (1, true, yes, on) lets CUDA's
 * initialization start reading NVRTC's files into the page cache
 * (runtime/cuda/nvrtc_readahead.c); false (0, false, no, off, empty) does
 * not; anything else is an error kept like the others.
 * tc__jit_readahead_enabled() is false while the value is invalid. */
tc_status tc__parse_jit_readahead(const char *text, bool *on);
bool tc__jit_readahead_enabled(void);

/* The caching allocator's settings text (PYTORCH_CUDA_ALLOC_CONF's keys):
 * TCUDA_ALLOC_CONF when it is set (even empty), else PYTORCH_ALLOC_CONF,
 * else PYTORCH_CUDA_ALLOC_CONF (PyTorch's older name: PyTorch too takes
 * PYTORCH_ALLOC_CONF first); NULL when none is set. *name, when `name` is
 * not NULL, is the variable read ("TCUDA_ALLOC_CONF" when none is). When
 * the variable read hides others that are set, the first call prints a
 * one-line notice on stderr naming them (once per process). Read on each
 * call, as getenv. */
const char *tc__alloc_conf_env(const char **name);

/* TC_OK when the variables, read once, were valid (or
 * tc_set_sync_debug_mode has since replaced TCUDA_SYNC_DEBUG_MODE's value);
 * otherwise TC_ERROR_INVALID_ARGUMENT with the variable's message.
 * Initialization calls it first, so a bad value fails tc_init and every call
 * that needs CUDA, with or without a GPU. */
tc_status tc__debug_env_check(void);

#ifdef __cplusplus
}
#endif

#endif
