/* A monotonic clock and the median of a set of timings: what every
 * benchmark shares, tcuda's programs (bench_util.h) and the raw floors
 * that link no tcuda (nccl_floor.c). Header-only. */
#ifndef TCUDA_BENCH_TIME_H
#define TCUDA_BENCH_TIME_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n), sorting v. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

#endif
