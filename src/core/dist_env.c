/* Process groups without CUDA: the launcher's environment, and the TCP
 * rendezvous that hands rank 0's blob (the NCCL unique id) to every rank.
 *
 * Rendezvous: rank 0 listens on master_addr:master_port and accepts
 * world_size - 1 connections; each rank sends a hello {magic, rank, world}
 * and rank 0 answers {magic, 0} and the blob once every rank joined, or
 * {magic, 1} to a hello it refuses (another world size, a rank out of range
 * or twice). Ranks retry connecting until the deadline (rank 0 may start
 * last). Every wait is a poll() against one deadline, so nothing blocks
 * longer than the timeout; failures are TC_ERROR_IO saying what was missing. */
#define _GNU_SOURCE /* accept4 */
#include "dist_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

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
    TC_CHECK_ARG(out, "out must not be NULL");
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
    int timeout = 600;
    if (env_int("TCUDA_DIST_TIMEOUT", 1, 1 << 24, &timeout) < 0)
        return TC_ERROR_INVALID_ARGUMENT;
    o.timeout_s = timeout;
    *out = o;
    return TC_OK;
}

/* The same in every build: tc_dist_init (dist.c, or absent_dist.c) does the rest. */
tc_status tc_dist_init_from_env(tc_process_group **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out must not be NULL");
    tc_dist_options o;
    TC_TRY(tc_dist_options_from_env(&o));
    return tc_dist_init(&o, out);
}

tc_status tc__dist_check_options(const tc_dist_options *o)
{
    TC_CHECK_ARG(o, "options must not be NULL");
    TC_CHECK_ARG(o->world_size >= 1, "world_size must be at least 1, not %d", o->world_size);
    TC_CHECK_ARG(o->rank >= 0 && o->rank < o->world_size, "rank %d is not in 0..%d", o->rank,
                 o->world_size - 1);
    TC_CHECK_ARG(o->local_rank >= -1, "local_rank %d: use -1 for the current device",
                 o->local_rank);
    TC_CHECK_ARG(memchr(o->master_addr, 0, sizeof o->master_addr) && o->master_addr[0],
                 "master_addr must be a non-empty string");
    TC_CHECK_ARG(o->master_port >= 1 && o->master_port <= 65535,
                 "master_port %d is not in 1..65535", o->master_port);
    return TC_OK;
}

/* ---- the rendezvous ---------------------------------------------------------------- */

#define RV_MAGIC 0x54435256u /* "TCRV" */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int ms_left(double deadline)
{
    double left = deadline - now_s();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* Waits until fd is ready for `events` or the deadline: 1 ready, 0 timeout. */
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        return r > 0;
    }
}

static bool io_all(int fd, void *buf, size_t n, bool sending, double deadline)
{
    char *p = buf;
    while (n) {
        if (!wait_fd(fd, sending ? POLLOUT : POLLIN, deadline))
            return false;
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

static tc_status resolve_addr(const tc_dist_options *o, struct sockaddr_in *sa)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", o->master_port);
    int r = getaddrinfo(o->master_addr, port, &hints, &res);
    if (r != 0 || !res)
        return tc__fail(TC_ERROR_IO, "cannot resolve MASTER_ADDR %s: %s", o->master_addr,
                        gai_strerror(r));
    memcpy(sa, res->ai_addr, sizeof *sa);
    freeaddrinfo(res);
    return TC_OK;
}

static tc_status serve(const tc_dist_options *o, const struct sockaddr_in *sa, const void *blob,
                       size_t n, double deadline)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0)
        return tc__fail(TC_ERROR_IO, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(ls, (const struct sockaddr *)sa, sizeof *sa) != 0 || listen(ls, 128) != 0) {
        int e = errno;
        close(ls);
        return tc__fail(TC_ERROR_IO, "rank 0 cannot listen on %s:%d: %s", o->master_addr,
                        o->master_port, strerror(e));
    }
    int peers = o->world_size - 1, joined = 0;
    int *fds = malloc((size_t)o->world_size * sizeof *fds);
    if (!fds) {
        close(ls);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    for (int k = 0; k < o->world_size; k++)
        fds[k] = -1; /* 0 is a descriptor too, when stdin is closed */
    tc_status st = TC_OK;
    while (joined < peers && st == TC_OK) {
        if (!wait_fd(ls, POLLIN, deadline)) {
            st = tc__fail(TC_ERROR_IO, "rendezvous timed out on %s:%d: %d of %d other ranks joined",
                          o->master_addr, o->master_port, joined, peers);
            break;
        }
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        uint32_t hello[3], reply[2] = {RV_MAGIC, 1};
        if (!io_all(c, hello, sizeof hello, false, deadline) || hello[0] != RV_MAGIC) {
            close(c); /* not one of ours: ignore it */
            continue;
        }
        int r = (int)hello[1];
        if ((int)hello[2] != o->world_size || r < 1 || r >= o->world_size || fds[r] >= 0) {
            (void)io_all(c, reply, sizeof reply, true, deadline);
            close(c);
            st = tc__fail(TC_ERROR_IO,
                          "rendezvous: a process joined as rank %d of %d, this group has %d "
                          "ranks%s",
                          r, (int)hello[2], o->world_size,
                          r >= 1 && r < o->world_size && fds[r] >= 0 ? " and that rank already"
                                                                     : "");
            break;
        }
        fds[r] = c;
        joined++;
    }
    for (int r = 1; r < o->world_size; r++) {
        if (fds[r] < 0)
            continue;
        uint32_t reply[2] = {RV_MAGIC, st == TC_OK ? 0u : 1u};
        if (st == TC_OK && !(io_all(fds[r], reply, sizeof reply, true, deadline) &&
                             io_all(fds[r], (void *)blob, n, true, deadline)))
            st = tc__fail(TC_ERROR_IO, "rendezvous: rank %d went away", r);
        else if (st != TC_OK)
            (void)io_all(fds[r], reply, sizeof reply, true, deadline);
        close(fds[r]);
    }
    free(fds);
    close(ls);
    return st;
}

static tc_status join(const tc_dist_options *o, const struct sockaddr_in *sa, void *blob, size_t n,
                      double deadline)
{
    int c = -1;
    while (c < 0) {
        c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c < 0)
            return tc__fail(TC_ERROR_IO, "socket: %s", strerror(errno));
        if (connect(c, (const struct sockaddr *)sa, sizeof *sa) == 0)
            break;
        close(c);
        c = -1;
        if (ms_left(deadline) == 0)
            return tc__fail(TC_ERROR_IO,
                            "rendezvous timed out: rank %d could not reach rank 0 "
                            "at %s:%d",
                            o->rank, o->master_addr, o->master_port);
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    uint32_t hello[3] = {RV_MAGIC, (uint32_t)o->rank, (uint32_t)o->world_size}, reply[2] = {0};
    tc_status st = TC_OK;
    if (!io_all(c, hello, sizeof hello, true, deadline) ||
        !io_all(c, reply, sizeof reply, false, deadline) || reply[0] != RV_MAGIC)
        st = tc__fail(TC_ERROR_IO, "rendezvous: rank 0 at %s:%d did not answer rank %d in time",
                      o->master_addr, o->master_port, o->rank);
    else if (reply[1] != 0)
        st = tc__fail(TC_ERROR_IO,
                      "rendezvous: rank 0 refused rank %d of %d (another group, "
                      "or a rank given twice)",
                      o->rank, o->world_size);
    else if (!io_all(c, blob, n, false, deadline))
        st = tc__fail(TC_ERROR_IO, "rendezvous: rank 0 went away before sending the id");
    close(c);
    return st;
}

tc_status tc__dist_rendezvous(const tc_dist_options *o, void *blob, size_t n)
{
    TC_TRY(tc__dist_check_options(o));
    if (o->world_size == 1)
        return TC_OK;
    double deadline = now_s() + (o->timeout_s > 0 ? o->timeout_s : 600.0);
    struct sockaddr_in sa;
    TC_TRY(resolve_addr(o, &sa));
    return o->rank == 0 ? serve(o, &sa, blob, n, deadline) : join(o, &sa, blob, n, deadline);
}
