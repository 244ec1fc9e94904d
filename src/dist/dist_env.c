/* Process groups without CUDA: the options, from the launcher's
 * environment or the caller, and their checks. The rendezvous that hands
 * rank 0's blob to every rank is rendezvous.c. */
#include "dist_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"

/* ---- the environment --------------------------------------------------------------- */

/* The integer in variable `name` (into *v), 0 when unset, -1 when bad. */
static int env_int(const char *name, long lo, long hi, int *v)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s=\"%s\" is not a number in %ld..%ld", name, s, lo,
                 hi);
        return -1;
    }
    *v = (int)x;
    return 1;
}

/* The seconds in variable `name` (into *v; fractions allowed, "2.5"), 0
 * when unset, -1 when it is not a finite number above 0. */
static int env_seconds(const char *name, double *v)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(x) || !(x > 0)) {
        tc__fail(TC_ERROR_INVALID_ARGUMENT,
                 "%s=\"%s\" is not a number of seconds above 0 (fractions are fine: 2.5)", name, s);
        return -1;
    }
    *v = x;
    return 1;
}

/* One launcher's variables: rank, size, local rank. */
static int env_triple(const char *r, const char *w, const char *l, tc_dist_options *o)
{
    int rank = 0, world = 0, local = -1;
    int hr = env_int(r, 0, 1 << 24, &rank), hw = env_int(w, 1, 1 << 24, &world);
    int hl = env_int(l, 0, 1 << 16, &local);
    if (hr < 0 || hw < 0 || hl < 0)
        return -1;
    if (!hr && !hw)
        return 0;
    if (!hr || !hw) {
        tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s is set but %s is not", hr ? r : w, hr ? w : r);
        return -1;
    }
    if (rank >= world) {
        tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s=%d is not below %s=%d", r, rank, w, world);
        return -1;
    }
    o->rank = rank;
    o->world_size = world;
    o->local_rank = local;
    return 1;
}

tc_status tc_dist_options_from_env(tc_dist_options *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc_dist_options o;
    memset(&o, 0, sizeof o);
    int got = env_triple("RANK", "WORLD_SIZE", "LOCAL_RANK", &o);
    if (got == 0)
        got = env_triple("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_RANK", &o);
    if (got == 0)
        got = env_triple("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", &o);
    if (got < 0)
        return TC_ERROR_INVALID_ARGUMENT;
    if (got == 0)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "no rank in the environment: set RANK and WORLD_SIZE (as torchrun and "
                        "tools/tcuda-run do), or run under mpirun or srun");
    const char *addr = getenv("MASTER_ADDR");
    if (!addr || !*addr)
        addr = "127.0.0.1";
    if (strlen(addr) >= sizeof o.master_addr)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "MASTER_ADDR is too long");
    strcpy(o.master_addr, addr);
    o.master_port = 29500;
    if (env_int("MASTER_PORT", 1, 65535, &o.master_port) < 0)
        return TC_ERROR_INVALID_ARGUMENT;
    o.timeout_s = 600;
    if (env_seconds("TCUDA_DIST_TIMEOUT", &o.timeout_s) < 0)
        return TC_ERROR_INVALID_ARGUMENT;
    *out = o;
    return TC_OK;
}

tc_status tc__dist_check_options(const tc_dist_options *o)
{
    TC_CHECK_ARG(o, "options is NULL");
    TC_CHECK_ARG(o->world_size >= 1, "world_size must be at least 1, not %d", o->world_size);
    TC_CHECK_ARG(o->rank >= 0 && o->rank < o->world_size, "rank %d is not in 0..%d", o->rank,
                 o->world_size - 1);
    TC_CHECK_ARG(o->local_rank >= -1, "local_rank %d: use -1 for the current device",
                 o->local_rank);
    TC_CHECK_ARG(memchr(o->master_addr, 0, sizeof o->master_addr) && o->master_addr[0],
                 "master_addr must be a non-empty string");
    TC_CHECK_ARG(o->master_port >= 1 && o->master_port <= 65535,
                 "master_port %d is not in 1..65535", o->master_port);
    TC_CHECK_ARG(isfinite(o->timeout_s), "timeout_s must be a finite number of seconds, not %g",
                 o->timeout_s);
    return TC_OK;
}
