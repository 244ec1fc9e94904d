/* The monotonic clock, for deadlines and timeouts (the rendezvous, process
 * groups' watchdogs and joins, compile timings), and condition variables
 * that wait on it. Header-only. */
#ifndef TCUDA_CLOCK_H
#define TCUDA_CLOCK_H

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Nanoseconds of CLOCK_MONOTONIC. */
static inline int64_t tc__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Seconds of CLOCK_MONOTONIC. */
static inline double tc__now_s(void) { return (double)tc__now_ns() * 1e-9; }

/* Monotonic second `s` as a timespec (for pthread_cond_timedwait). */
static inline struct timespec tc__timespec_at(double s)
{
    double whole;
    double frac = modf(s, &whole);
    return (struct timespec){.tv_sec = (time_t)whole, .tv_nsec = (long)(frac * 1e9)};
}

/* A condition variable whose timed waits read CLOCK_MONOTONIC. */
static inline void tc__cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

#endif
