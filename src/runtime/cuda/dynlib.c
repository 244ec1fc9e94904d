/* Run-time loading of optional NVIDIA libraries (NVML, cuBLAS, NCCL, NVRTC).
 *
 * A tc__dynlib names the library and the sonames to try. The first use
 * dlopens it under one lock; later uses read the recorded state. When none of
 * the names loads, the library is marked missing and every use returns
 * TC_ERROR_NOT_SUPPORTED with a message naming it, so only the features that
 * need it fail. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

tc_status tc__dynlib_load(tc__dynlib *lib)
{
    int state = __atomic_load_n(&lib->state, __ATOMIC_ACQUIRE);
    if (TC_LIKELY(state == 1))
        return TC_OK;
    if (state == 0) {
        pthread_mutex_lock(&load_lock);
        if (lib->state == 0) {
            char tried[256] = "";
            const char *last_error = "";
            void *h = NULL;
            for (const char *const *name = lib->names; *name && !h; name++) {
                h = dlopen(*name, RTLD_NOW | RTLD_LOCAL);
                if (!h) {
                    const char *e = dlerror();
                    last_error = e ? e : "";
                    size_t used = strlen(tried);
                    snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", *name);
                }
            }
            if (h) {
                lib->handle = h;
                __atomic_store_n(&lib->state, 1, __ATOMIC_RELEASE);
            } else {
                snprintf(lib->message, sizeof lib->message,
                         "%s is not available: could not load %s (%s)", lib->what, tried,
                         last_error);
                __atomic_store_n(&lib->state, 2, __ATOMIC_RELEASE);
            }
        }
        pthread_mutex_unlock(&load_lock);
        if (__atomic_load_n(&lib->state, __ATOMIC_ACQUIRE) == 1)
            return TC_OK;
    }
    return tc__fail(TC_ERROR_NOT_SUPPORTED, "%s", lib->message);
}

tc_status tc__dynlib_sym(tc__dynlib *lib, const char *symbol, void **out)
{
    TC_TRY(tc__dynlib_load(lib));
    void *p = dlsym(lib->handle, symbol);
    if (!p)
        return tc__fail(TC_ERROR_NOT_SUPPORTED, "%s was loaded but lacks %s: it is too old",
                        lib->what, symbol);
    *out = p;
    return TC_OK;
}
