/* Device faults (device_fault.h): a short list under a mutex, and a count
 * read without it so that the common case, no fault anywhere, costs an
 * atomic load per host wait. */
#include "device_fault.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

enum { MAX_FAULTS = 64 };

typedef struct fault {
    int dev;
    const void *owner;
    char reason[400];
} fault;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static fault faults[MAX_FAULTS];
static int n_faults;        /* under mu */
static atomic_int n_raised; /* n_faults, for the lock-free check */

void tc__device_fault_raise(int dev, const void *owner, const char *reason)
{
    pthread_mutex_lock(&mu);
    bool known = false;
    for (int i = 0; i < n_faults && !known; i++)
        known = faults[i].owner == owner && faults[i].dev == dev;
    /* A full list keeps its faults: the waits still fail, with an older reason. */
    if (!known && n_faults < MAX_FAULTS) {
        fault *f = &faults[n_faults++];
        f->dev = dev;
        f->owner = owner;
        snprintf(f->reason, sizeof f->reason, "%s", reason);
        atomic_store(&n_raised, n_faults);
    }
    pthread_mutex_unlock(&mu);
}

void tc__device_fault_clear(const void *owner)
{
    pthread_mutex_lock(&mu);
    int kept = 0;
    for (int i = 0; i < n_faults; i++)
        if (faults[i].owner != owner)
            faults[kept++] = faults[i];
    n_faults = kept;
    atomic_store(&n_raised, n_faults);
    pthread_mutex_unlock(&mu);
}

tc_status tc__device_fault_check(int dev, const char *what)
{
    if (TC_LIKELY(atomic_load_explicit(&n_raised, memory_order_acquire) == 0))
        return TC_OK;
    char reason[sizeof faults[0].reason];
    int on = -1;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_faults && on < 0; i++)
        if (dev < 0 || faults[i].dev == dev) {
            on = faults[i].dev;
            memcpy(reason, faults[i].reason, sizeof reason);
        }
    pthread_mutex_unlock(&mu);
    if (on < 0)
        return TC_OK;
    return tc__fail(TC_ERROR_INVALID_STATE,
                    "%s ended, but work queued on cuda:%d was cut short and its results are "
                    "wrong: %s",
                    what, on, reason);
}
