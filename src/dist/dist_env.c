/* Process groups without CUDA: the launcher's environment, and the TCP
 * rendezvous that hands rank 0's blob (the NCCL unique id) to every rank.
 *
 * Rendezvous: rank 0 listens on master_port on every interface (as
 * PyTorch's TCPStore server) and accepts world_size - 1 connections; each
 * other rank connects to master_addr:master_port, sends a hello {magic,
 * rank, world}, and rank 0 answers {magic, 0} and the blob once every rank
 * joined, or {magic, 1} to a hello it refuses (another world size, a rank
 * out of range or twice). Ranks retry connecting until the deadline (rank 0
 * may start last). Every wait, connect included, is a poll() against one
 * deadline, so nothing blocks longer than the timeout; failures are
 * TC_ERROR_IO saying what was missing. */
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
    int timeout = 600;
    if (env_int("TCUDA_DIST_TIMEOUT", 1, 1 << 24, &timeout) < 0)
        return TC_ERROR_INVALID_ARGUMENT;
    o.timeout_s = timeout;
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

/* Sends or receives all n bytes before the deadline (the socket may be
 * non-blocking). */
static bool io_all(int fd, void *buf, size_t n, bool sending, double deadline)
{
    char *p = buf;
    while (n) {
        if (!wait_fd(fd, sending ? POLLOUT : POLLIN, deadline))
            return false;
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* A socket of `family` bound to every interface at `port`, listening; an
 * IPv6 one with IPV6_V6ONLY off takes IPv4 clients too. -1 and errno when
 * it cannot be had. */
static int listen_any(int family, int port)
{
    int ls = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0)
        return -1;
    int one = 1, zero = 0;
    (void)setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (family == AF_INET6) {
        (void)setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_any;
        a->sin6_port = htons((uint16_t)port);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        a->sin_port = htons((uint16_t)port);
        len = sizeof *a;
    }
    if (bind(ls, (struct sockaddr *)&ss, len) != 0 || listen(ls, 1024) != 0) {
        int e = errno;
        close(ls);
        errno = e;
        return -1;
    }
    return ls;
}

/* Rank 0, as PyTorch's TCPStore server: listens on every interface (IPv6
 * and IPv4 together where the host has IPv6, else IPv4), whatever
 * MASTER_ADDR says: that is the address the other ranks use to get here,
 * and a host has several. */
static tc_status serve(const tc_dist_options *o, const void *blob, size_t n, double deadline)
{
    int ls = listen_any(AF_INET6, o->master_port);
    if (ls < 0 && errno != EADDRINUSE && errno != EACCES)
        ls = listen_any(AF_INET, o->master_port); /* a host without IPv6 */
    if (ls < 0)
        return tc__fail(TC_ERROR_IO, "rank 0 cannot listen on port %d (every interface): %s",
                        o->master_port, strerror(errno));
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

/* One non-blocking connect to `ai`, given up at `limit`: the connected
 * socket (left non-blocking), or -1 and errno (ETIMEDOUT at the limit). */
static int connect_by(const struct addrinfo *ai, double limit)
{
    int c = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c < 0)
        return -1;
    int r = connect(c, ai->ai_addr, ai->ai_addrlen);
    if (r != 0 && (errno == EINPROGRESS || errno == EINTR)) {
        int err = ETIMEDOUT;
        socklen_t len = sizeof err;
        if (wait_fd(c, POLLOUT, limit) && getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        r = err ? -1 : 0;
        errno = err;
    }
    if (r != 0) {
        int e = errno;
        close(c);
        errno = e;
        return -1;
    }
    return c;
}

/* Connects to rank 0 before the deadline, as PyTorch's TCPStore client
 * does: each address of MASTER_ADDR in turn with a non-blocking connect
 * bounded by the deadline (a host that drops packets cannot hold the call
 * longer), again every 50 ms while rank 0 is not up yet. */
static tc_status connect_rank0(const tc_dist_options *o, double deadline, int *out)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", o->master_port);
    int r = getaddrinfo(o->master_addr, port, &hints, &res);
    if (r != 0 || !res)
        return tc__fail(TC_ERROR_IO, "cannot resolve MASTER_ADDR %s: %s", o->master_addr,
                        r ? gai_strerror(r) : "no address");
    int c = -1, err = ETIMEDOUT;
    while (c < 0 && ms_left(deadline) > 0) {
        for (const struct addrinfo *ai = res; ai && c < 0; ai = ai->ai_next) {
            /* with several addresses, a silent one must not take all the time */
            double limit = ai->ai_next && deadline > now_s() + 5 ? now_s() + 5 : deadline;
            c = connect_by(ai, limit);
            if (c < 0)
                err = errno;
        }
        int ms = ms_left(deadline) < 50 ? ms_left(deadline) : 50;
        if (c < 0 && ms > 0)
            nanosleep(&(struct timespec){0, (long)ms * 1000 * 1000}, NULL);
    }
    freeaddrinfo(res);
    if (c < 0)
        return tc__fail(TC_ERROR_IO,
                        "rendezvous timed out after %g s: rank %d could not reach rank 0 at "
                        "%s:%d (%s)",
                        o->timeout_s > 0 ? o->timeout_s : 600.0, o->rank, o->master_addr,
                        o->master_port, strerror(err));
    *out = c;
    return TC_OK;
}

static tc_status join(const tc_dist_options *o, void *blob, size_t n, double deadline)
{
    int c = -1;
    TC_TRY(connect_rank0(o, deadline, &c));
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
    return o->rank == 0 ? serve(o, blob, n, deadline) : join(o, blob, n, deadline);
}
