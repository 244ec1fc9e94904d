/* The TCP rendezvous of process groups, without CUDA: it hands rank 0's
 * blob (the NCCL unique id) to every rank.
 *
 * Rank 0 listens on master_port on every interface (as PyTorch's
 * TCPStore server, whatever MASTER_ADDR says) and serves every
 * connection at once from one poll() loop; the others connect to
 * master_addr:master_port and say hello. A connection has RV_HELLO_S to say
 * a well-formed one, else (silent, garbage) it is closed while rank 0 goes
 * on: a port scan or a health check costs nothing. A hello rank 0 takes is
 * answered at once, so a rank that reached another program on the port
 * knows within RV_HELLO_S; all get the blob once all joined. As with
 * TCPStore, a stranger cannot stall or break a group: a hello rank 0 cannot
 * take (another world size or tcuda version, a rank out of range or already
 * joined: the first to join as a rank keeps it, until its connection
 * closes) is refused to that client alone, which fails saying why; rank 0
 * warns, goes on, and names the refusal if the group then does not form.
 *
 * Every wait is a poll() or a sleep against one deadline, in slices that
 * fit an int (a timeout of years works); failures are TC_ERROR_IO naming
 * the ranks missing and the address. */
#define _GNU_SOURCE /* accept4 */
#include "dist_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
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

#include "base/clock.h"
#include "base/internal.h"

/* ---- the rendezvous ---------------------------------------------------------------- */

/* The protocol: every message is four 32-bit words in network byte order.
 *   hello, rank r to rank 0: {RV_MAGIC, RV_VERSION, r, world_size}
 *   answer, rank 0 to rank r: {RV_MAGIC, RV_VERSION, code, arg}
 * The magic stays, the version changes with the protocol, so ranks of
 * different tcuda versions refuse each other by name. Version 1 (magic
 * RV_MAGIC_V1 in host order, no version word) is recognised and refused. */
#define RV_MAGIC 0x74637276u    /* "tcrv" */
#define RV_MAGIC_V1 0x54435256u /* "TCRV", version 1's hello, host order */
#define RV_VERSION 2u
#define RV_MSG 16

/* Answer codes. */
enum {
    RV_WAITING = 1,        /* joined; "go" follows once every rank has */
    RV_GO = 2,             /* arg: the blob's size, the blob follows */
    RV_FAILED = 3,         /* rank 0 gave up (timed out) */
    RV_REFUSED_WORLD = 4,  /* arg: rank 0's world size */
    RV_REFUSED_RANK = 5,   /* out of 1..world-1; arg: rank 0's world size */
    RV_REFUSED_TWICE = 6,  /* another process joined as that rank first */
    RV_REFUSED_VERSION = 7 /* the words carry rank 0's version */
};

/* How long a connection has to say its hello to rank 0, and a rank to get
 * rank 0's first answer (the whole timeout when that is shorter). Rank 0
 * answers a hello at once from a loop that does nothing else, so only a
 * peer that is not rank 0 takes that long: 5 s is far above a round trip on
 * any network a group runs on, and far below the default timeout. */
#define RV_HELLO_S 5.0
/* Connections waiting to say hello that rank 0 holds at once; more wait in
 * the listen queue until these are done (each within RV_HELLO_S). */
#define RV_MAX_PENDING 256
/* The longest single poll() or sleep: far below INT_MAX ms (24.8 days), so
 * a deadline years away is waited for in slices. */
#define RV_SLICE_MS (3600 * 1000)
/* The pause between attempts to reach rank 0 while it is not up. */
#define RV_RETRY_S 0.05

static double min_d(double a, double b) { return a < b ? a : b; }

static double timeout_of(const tc_dist_options *o) { return o->timeout_s > 0 ? o->timeout_s : 600; }

/* Milliseconds from now to the deadline for poll(): rounded up, 0 once it
 * passed, at most RV_SLICE_MS (the caller loops). */
static int ms_until(double deadline)
{
    double left = deadline - tc__now_s();
    if (!(left > 0))
        return 0;
    return left * 1000 >= RV_SLICE_MS ? RV_SLICE_MS : (int)(left * 1000) + 1;
}

/* Sleeps RV_RETRY_S, or until the deadline if that is sooner: false (and
 * no sleep) once it passed. */
static bool pause_until(double deadline)
{
    double left = min_d(deadline - tc__now_s(), RV_RETRY_S);
    if (!(left > 0))
        return false;
    struct timespec ts = {0, (long)(left * 1e9)};
    nanosleep(&ts, NULL);
    return true;
}

/* Waits until fd is ready for `events` or the deadline: 1 ready, 0 not. */
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, ms_until(deadline));
        if (r > 0)
            return 1;
        if ((r < 0 && errno != EINTR) || ms_until(deadline) == 0)
            return 0;
    }
}

/* Sends or receives all n bytes of a non-blocking socket before the
 * deadline: 0, ETIMEDOUT, ECONNRESET when the peer closed, or the errno. */
static int io_all(int fd, void *buf, size_t n, bool sending, double deadline)
{
    char *p = buf;
    while (n) {
        if (!wait_fd(fd, sending ? POLLOUT : POLLIN, deadline))
            return ETIMEDOUT;
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (k <= 0)
            return k == 0 ? ECONNRESET : errno;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static void msg_pack(uint32_t m[4], uint32_t a, uint32_t b)
{
    m[0] = htonl(RV_MAGIC);
    m[1] = htonl(RV_VERSION);
    m[2] = htonl(a);
    m[3] = htonl(b);
}

/* Rank 0's short answers: sent whole without waiting (a new connection's
 * buffer has room), so that no peer can hold the loop; false if not. */
static bool send_now(int fd, const void *buf, size_t n)
{
    return send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)n;
}

/* ---- rank 0: the server ------------------------------------------------------------ */

/* A socket of `family` bound to every interface at `port`, listening,
 * non-blocking; an IPv6 one with IPV6_V6ONLY off takes IPv4 clients too.
 * -1 and errno when it cannot be had. */
static int listen_any(int family, int port)
{
    int ls = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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

/* One accepted connection: waiting for its hello (rank -1), or a rank. */
typedef struct rv_conn {
    int fd;
    int rank;
    double hello_by;
    short revents;
    unsigned got; /* bytes of the hello so far */
    uint32_t hello[4];
} rv_conn;

typedef struct rv_server {
    const tc_dist_options *o;
    double deadline;
    int ls;
    rv_conn *conns; /* n of them, joined and pending; capacity peers + RV_MAX_PENDING */
    int n, pending, joined;
    struct pollfd *pfds;
    bool *has;       /* has[r]: rank r joined */
    bool fd_starved; /* accept ran out of descriptors: wait for one to close */
    int refused;     /* well-formed hellos refused */
    char first_refusal[200];
} rv_server;

/* "ADDR:PORT" of the peer of fd. */
static void peer_name(int fd, char *buf, size_t size)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) /* an IPv4 client of the dual socket */
                inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], host, sizeof host);
            else
                inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
            port = ntohs(a->sin6_port);
        } else if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
            port = ntohs(a->sin_port);
        }
    }
    snprintf(buf, size, "%s:%d", host, port);
}

static void conn_drop(rv_server *s, rv_conn *c)
{
    if (c->rank >= 0) {
        s->has[c->rank] = false;
        s->joined--;
    } else {
        s->pending--;
    }
    close(c->fd);
    c->fd = -1;
    s->fd_starved = false;
}

/* Refuses a well-formed hello: tells the client (reply), closes it, warns
 * why, and keeps the first reason for rank 0's error. */
static void refuse_with(rv_server *s, rv_conn *c, const void *reply, size_t n, const char *why)
{
    (void)send_now(c->fd, reply, n);
    char peer[80], line[200];
    peer_name(c->fd, peer, sizeof peer);
    snprintf(line, sizeof line, "a process at %s %s", peer, why);
    if (s->refused++ == 0)
        snprintf(s->first_refusal, sizeof s->first_refusal, "%s", line);
    if (s->refused <= 8) /* a loop of strangers must not flood stderr */
        tc__warn("rendezvous on port %d: refused %s; still waiting for the group's ranks",
                 s->o->master_port, line);
    conn_drop(s, c);
}

static void refuse(rv_server *s, rv_conn *c, uint32_t code, uint32_t arg, const char *why)
{
    uint32_t m[4];
    msg_pack(m, code, arg);
    refuse_with(s, c, m, sizeof m, why);
}

/* The hello of c is complete: joins it, or refuses it. */
static void hello_done(rv_server *s, rv_conn *c)
{
    int world = s->o->world_size;
    uint32_t r = ntohl(c->hello[2]), w = ntohl(c->hello[3]);
    char why[120];
    if (w != (uint32_t)world) {
        snprintf(why, sizeof why, "that joined as rank %u of %u (this group has %d ranks)", r, w,
                 world);
        refuse(s, c, RV_REFUSED_WORLD, (uint32_t)world, why);
    } else if (r < 1 || r >= w) {
        snprintf(why, sizeof why, "that joined as rank %u (not in 1..%d)", r, world - 1);
        refuse(s, c, RV_REFUSED_RANK, (uint32_t)world, why);
    } else if (s->has[r]) {
        snprintf(why, sizeof why, "that joined as rank %u, which another process joined first", r);
        refuse(s, c, RV_REFUSED_TWICE, 0, why);
    } else {
        uint32_t m[4];
        msg_pack(m, RV_WAITING, 0);
        if (!send_now(c->fd, m, sizeof m)) {
            conn_drop(s, c);
            return;
        }
        c->rank = (int)r;
        s->has[r] = true;
        s->pending--;
        s->joined++;
    }
}

/* Reads what a connection sent: more of its hello (checked as it comes:
 * garbage closes it), or, from a rank that joined, its going away or bytes
 * it must not send (both close it and free the rank). */
static void conn_read(rv_server *s, rv_conn *c)
{
    if (c->rank >= 0) {
        char junk[64];
        ssize_t k = recv(c->fd, junk, sizeof junk, 0);
        if (k >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
            conn_drop(s, c);
        return;
    }
    ssize_t k = recv(c->fd, (char *)c->hello + c->got, RV_MSG - c->got, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (k <= 0) {
        conn_drop(s, c);
        return;
    }
    c->got += (unsigned)k;
    if (c->got >= 4 && c->hello[0] == RV_MAGIC_V1) {
        uint32_t v1[2] = {RV_MAGIC_V1, 1}; /* version 1's refusal */
        refuse_with(s, c, v1, sizeof v1, "of an older tcuda (rendezvous protocol 1)");
    } else if (c->got >= 4 && ntohl(c->hello[0]) != RV_MAGIC) {
        conn_drop(s, c); /* not a tcuda rank: not worth a word */
    } else if (c->got >= 8 && ntohl(c->hello[1]) != RV_VERSION) {
        char why[120];
        snprintf(why, sizeof why, "that speaks rendezvous protocol %u (this one %u)",
                 ntohl(c->hello[1]), RV_VERSION);
        refuse(s, c, RV_REFUSED_VERSION, 0, why);
    } else if (c->got == RV_MSG) {
        hello_done(s, c);
    }
}

/* Accepts what the listen queue holds, up to RV_MAX_PENDING waiting for a
 * hello. Running out of descriptors pauses accepting while some
 * connection may still close; with none, it is an error. */
static tc_status accept_new(rv_server *s)
{
    while (s->pending < RV_MAX_PENDING) {
        int fd = accept4(s->ls, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return TC_OK;
            if ((errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) &&
                s->pending > 0) {
                s->fd_starved = true;
                return TC_OK;
            }
            return tc__fail(TC_ERROR_IO,
                            "rendezvous: rank 0 cannot accept connections on port %d with %d "
                            "ranks joined: %s",
                            s->o->master_port, s->joined, strerror(errno));
        }
        s->conns[s->n++] = (rv_conn){.fd = fd, .rank = -1, .hello_by = tc__now_s() + RV_HELLO_S};
        s->pending++;
    }
    return TC_OK;
}

/* The ranks 1..world-1 with has[r] == want, as "1-3, 5", or "none". */
static void rank_list(const bool *has, int world, bool want, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = 0;
    for (int r = 1; r < world; r++) {
        if (has[r] != want)
            continue;
        int e = r;
        while (e + 1 < world && has[e + 1] == want)
            e++;
        char item[32];
        int k = e == r ? snprintf(item, sizeof item, "%s%d", len ? ", " : "", r)
                       : snprintf(item, sizeof item, "%s%d-%d", len ? ", " : "", r, e);
        if (len + (size_t)k + 4 >= size) {
            snprintf(buf + len, size - len, "...");
            return;
        }
        memcpy(buf + len, item, (size_t)k + 1);
        len += (size_t)k;
        r = e;
    }
    if (!len)
        snprintf(buf, size, "none");
}

static tc_status timed_out(const rv_server *s)
{
    const tc_dist_options *o = s->o;
    char joined[160], missing[160];
    rank_list(s->has, o->world_size, true, joined, sizeof joined);
    rank_list(s->has, o->world_size, false, missing, sizeof missing);
    return tc__fail(TC_ERROR_IO,
                    "rendezvous timed out after %g s: rank 0 listened on port %d (every "
                    "interface; the others connect to %s:%d) and %d of %d other ranks joined "
                    "(joined: %s; missing: %s)%s%s%s",
                    timeout_of(o), o->master_port, o->master_addr, o->master_port, s->joined,
                    o->world_size - 1, joined, missing, s->refused ? "; refused " : "",
                    s->first_refusal, s->refused > 1 ? " (and others)" : "");
}

/* One round of the loop: drops hellos that are late, polls the listener and
 * every connection until something happens (or the next hello deadline),
 * reads what came, accepts what waits. */
static tc_status serve_round(rv_server *s)
{
    double now = tc__now_s(), wake = s->deadline;
    int k = 0;
    bool listening = s->pending < RV_MAX_PENDING && !s->fd_starved;
    if (listening)
        s->pfds[k++] = (struct pollfd){.fd = s->ls, .events = POLLIN};
    for (int i = 0; i < s->n; i++) {
        rv_conn *c = &s->conns[i];
        if (c->rank < 0 && c->hello_by <= now) {
            conn_drop(s, c); /* said nothing (or half a hello) in time */
            continue;
        }
        if (c->rank < 0)
            wake = min_d(wake, c->hello_by);
        s->pfds[k++] = (struct pollfd){.fd = c->fd, .events = POLLIN};
    }
    int r = poll(s->pfds, (nfds_t)k, ms_until(wake));
    if (r < 0 && errno != EINTR)
        return tc__fail(TC_ERROR_IO, "rendezvous: poll failed on rank 0: %s", strerror(errno));
    /* the ranks that went away first, so that one restarting is not refused as its own twin */
    for (int i = 0, j = listening; i < s->n; i++)
        s->conns[i].revents = s->conns[i].fd >= 0 ? s->pfds[j++].revents : 0;
    for (int pass = 0; r > 0 && pass < 2; pass++)
        for (int i = 0; i < s->n; i++)
            if (s->conns[i].fd >= 0 && s->conns[i].revents && (s->conns[i].rank >= 0) == !pass)
                conn_read(s, &s->conns[i]);
    int kept = 0;
    for (int i = 0; i < s->n; i++)
        if (s->conns[i].fd >= 0)
            s->conns[kept++] = s->conns[i];
    s->n = kept;
    if (r > 0 && listening && s->pfds[0].revents)
        return accept_new(s);
    return TC_OK;
}

/* Ends the rendezvous for every joined rank: "go" and the blob, or
 * "failed" after an error; closes every connection (one still to say its
 * hello hears nothing). */
static tc_status serve_end(rv_server *s, tc_status st, const void *blob, size_t n)
{
    for (int i = 0; i < s->n; i++) {
        rv_conn *c = &s->conns[i];
        uint32_t m[4];
        msg_pack(m, st == TC_OK ? RV_GO : RV_FAILED, (uint32_t)n);
        double by = tc__now_s() + RV_HELLO_S;
        if (c->rank >= 0 && st == TC_OK &&
            (io_all(c->fd, m, sizeof m, true, by) || io_all(c->fd, (void *)blob, n, true, by)))
            st = tc__fail(TC_ERROR_IO, "rendezvous: rank %d went away before it got the id",
                          c->rank);
        else if (c->rank >= 0 && st != TC_OK)
            (void)io_all(c->fd, m, sizeof m, true, by);
        close(c->fd);
    }
    return st;
}

/* Rank 0, as PyTorch's TCPStore server: listens on every interface (IPv6
 * and IPv4 together where the host has IPv6, else IPv4), whatever
 * MASTER_ADDR says: that is the address the other ranks use to get here,
 * and a host has several. A port it cannot have is an error at once. */
static tc_status serve(const tc_dist_options *o, const void *blob, size_t n, double deadline)
{
    int ls = listen_any(AF_INET6, o->master_port);
    if (ls < 0 && errno != EADDRINUSE && errno != EACCES)
        ls = listen_any(AF_INET, o->master_port); /* a host without IPv6 */
    if (ls < 0)
        return tc__fail(TC_ERROR_IO,
                        "rank 0 cannot listen on port %d (every interface): %s (errno %d)%s",
                        o->master_port, strerror(errno), errno,
                        errno == EADDRINUSE ? "; another program, or another group's rank 0, "
                                              "holds it: pick another MASTER_PORT"
                                            : "");
    int peers = o->world_size - 1;
    rv_server s = {.o = o, .deadline = deadline, .ls = ls};
    s.conns = malloc((size_t)(peers + RV_MAX_PENDING) * sizeof *s.conns);
    s.pfds = malloc((size_t)(peers + RV_MAX_PENDING + 1) * sizeof *s.pfds);
    s.has = calloc((size_t)o->world_size, sizeof *s.has);
    tc_status st = TC_OK;
    if (!s.conns || !s.pfds || !s.has)
        st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for %d ranks", o->world_size);
    while (st == TC_OK && s.joined < peers) {
        if (tc__now_s() >= deadline)
            st = timed_out(&s);
        else
            st = serve_round(&s);
    }
    st = serve_end(&s, st, blob, n);
    free(s.conns);
    free(s.pfds);
    free(s.has);
    close(ls);
    return st;
}

/* ---- the other ranks: the client --------------------------------------------------- */

/* One non-blocking connect to `ai`, given up at `limit`: the connected
 * socket (left non-blocking), or -1 and errno (ETIMEDOUT at the limit). A
 * connection to itself (TCP's simultaneous open, when nobody listens on a
 * loopback port and the kernel picks that port for this side) is refused. */
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
    struct sockaddr_storage me, peer;
    socklen_t lm = sizeof me, lp = sizeof peer;
    if (r == 0 && getsockname(c, (struct sockaddr *)&me, &lm) == 0 &&
        getpeername(c, (struct sockaddr *)&peer, &lp) == 0 && lm == lp && !memcmp(&me, &peer, lm)) {
        r = -1;
        errno = ECONNREFUSED;
    }
    if (r != 0) {
        int e = errno;
        close(c);
        errno = e;
        return -1;
    }
    return c;
}

/* Resolves MASTER_ADDR, again every RV_RETRY_S while the name service says
 * "try again" and the deadline allows. (getaddrinfo's own wait is the
 * resolver's, resolv.conf's timeout; a numeric address has none.) */
static tc_status resolve(const tc_dist_options *o, double deadline, struct addrinfo **res)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    char port[16];
    snprintf(port, sizeof port, "%d", o->master_port);
    int r;
    do {
        *res = NULL;
        r = getaddrinfo(o->master_addr, port, &hints, res);
    } while (r == EAI_AGAIN && pause_until(deadline));
    if (r == 0 && *res)
        return TC_OK;
    if (r == 0)
        freeaddrinfo(*res);
    return tc__fail(TC_ERROR_IO, "rendezvous: rank %d cannot resolve MASTER_ADDR %s: %s", o->rank,
                    o->master_addr, r ? gai_strerror(r) : "no address");
}

/* Connects to rank 0 before the deadline, as PyTorch's TCPStore client
 * does: each address of MASTER_ADDR in turn with a non-blocking connect
 * bounded by the deadline (by RV_HELLO_S too when another address is left,
 * so that a silent one cannot take all the time), again every RV_RETRY_S
 * while rank 0 is not up yet. */
static tc_status connect_rank0(const tc_dist_options *o, double deadline, int *out)
{
    struct addrinfo *res;
    TC_TRY(resolve(o, deadline, &res));
    int c = -1, err = ETIMEDOUT;
    while (c < 0 && tc__now_s() < deadline) {
        for (const struct addrinfo *ai = res; ai && c < 0 && tc__now_s() < deadline;
             ai = ai->ai_next) {
            c = connect_by(ai, ai->ai_next ? min_d(deadline, tc__now_s() + RV_HELLO_S) : deadline);
            if (c < 0)
                err = errno;
        }
        if (c < 0)
            (void)pause_until(deadline);
    }
    freeaddrinfo(res);
    if (c < 0)
        return tc__fail(TC_ERROR_IO,
                        "rendezvous timed out after %g s: rank %d could not reach rank 0 at "
                        "%s:%d (%s)",
                        timeout_of(o), o->rank, o->master_addr, o->master_port, strerror(err));
    *out = c;
    return TC_OK;
}

/* What rank 0's answer m says, as a status: TC_OK for "waiting" and "go"
 * (in *code), else TC_ERROR_IO with the reason. */
static tc_status answer(const tc_dist_options *o, const uint32_t m[4], size_t n, uint32_t *code)
{
    const char *a = o->master_addr;
    int p = o->master_port, r = o->rank, w = o->world_size;
    uint32_t arg = ntohl(m[3]);
    *code = ntohl(m[2]);
    if (ntohl(m[0]) != RV_MAGIC)
        return tc__fail(TC_ERROR_IO,
                        "rendezvous: rank %d reached %s:%d, but what listens there answered "
                        "something that is not tcuda's rendezvous: it is not rank 0 of this "
                        "group (another program holds the port?)",
                        r, a, p);
    if (ntohl(m[1]) != RV_VERSION)
        return tc__fail(TC_ERROR_IO,
                        "rendezvous: rank 0 at %s:%d speaks rendezvous protocol %u, rank %d "
                        "protocol %u: the ranks run different versions of tcuda",
                        a, p, ntohl(m[1]), r, RV_VERSION);
    switch (*code) {
    case RV_WAITING: return TC_OK;
    case RV_GO:
        if (arg == n)
            return TC_OK;
        return tc__fail(TC_ERROR_IO,
                        "rendezvous: rank 0 at %s:%d sends %u bytes, rank %d wants %zu", a, p, arg,
                        r, n);
    case RV_FAILED:
        return tc__fail(TC_ERROR_IO,
                        "rendezvous: rank 0 at %s:%d gave up before every rank joined (its error "
                        "names the missing ranks); rank %d of %d was there",
                        a, p, r, w);
    case RV_REFUSED_WORLD:
    case RV_REFUSED_RANK:
        return tc__fail(TC_ERROR_IO,
                        "rendezvous: rank 0 at %s:%d refused rank %d of %d: its group has %u "
                        "ranks (another group, or a wrong WORLD_SIZE?)",
                        a, p, r, w, arg);
    case RV_REFUSED_TWICE:
        return tc__fail(TC_ERROR_IO,
                        "rendezvous: rank 0 at %s:%d refused rank %d of %d: another process "
                        "joined as rank %d first (a rank given twice?)",
                        a, p, r, w, r);
    default:
        return tc__fail(TC_ERROR_IO, "rendezvous: rank 0 at %s:%d refused rank %d of %d (code %u)",
                        a, p, r, w, *code);
    }
}

/* A rank's side: hello, rank 0's "waiting" within RV_HELLO_S (else what
 * listens is not rank 0 of a tcuda group), then "go" and the blob before
 * the deadline. */
static tc_status join(const tc_dist_options *o, void *blob, size_t n, double deadline)
{
    int c = -1;
    TC_TRY(connect_rank0(o, deadline, &c));
    uint32_t m[4], code = RV_WAITING;
    double t0 = tc__now_s(), ack_by = min_d(deadline, t0 + RV_HELLO_S);
    msg_pack(m, (uint32_t)o->rank, (uint32_t)o->world_size);
    int e = io_all(c, m, sizeof m, true, ack_by);
    if (!e)
        e = io_all(c, m, sizeof m, false, ack_by);
    tc_status st = TC_OK;
    char what[80] = "closed the connection without a tcuda answer";
    if (e == ETIMEDOUT)
        snprintf(what, sizeof what, "did not answer a tcuda hello within %.3g s", ack_by - t0);
    if (e)
        st = tc__fail(TC_ERROR_IO,
                      "rendezvous: rank %d connected to %s:%d, but what listens there %s: it is "
                      "not rank 0 of this group (another program holds the port?)",
                      o->rank, o->master_addr, o->master_port, what);
    if (st == TC_OK)
        st = answer(o, m, n, &code);
    while (st == TC_OK && code == RV_WAITING) {
        e = io_all(c, m, sizeof m, false, deadline);
        if (e == ETIMEDOUT)
            st = tc__fail(TC_ERROR_IO,
                          "rendezvous timed out after %g s: rank %d of %d joined rank 0 at %s:%d, "
                          "but not every rank did (rank 0's error names them)",
                          timeout_of(o), o->rank, o->world_size, o->master_addr, o->master_port);
        else if (e)
            st = tc__fail(TC_ERROR_IO,
                          "rendezvous: rank 0 at %s:%d went away before every rank joined "
                          "(it failed or was stopped); rank %d of %d was there",
                          o->master_addr, o->master_port, o->rank, o->world_size);
        else
            st = answer(o, m, n, &code);
    }
    if (st == TC_OK && io_all(c, blob, n, false, deadline))
        st = tc__fail(TC_ERROR_IO, "rendezvous: rank 0 at %s:%d went away before sending the id",
                      o->master_addr, o->master_port);
    close(c);
    return st;
}

tc_status tc__dist_rendezvous(const tc_dist_options *o, void *blob, size_t n)
{
    TC_TRY(tc__dist_check_options(o));
    if (o->world_size == 1)
        return TC_OK;
    double deadline = tc__now_s() + timeout_of(o);
    return o->rank == 0 ? serve(o, blob, n, deadline) : join(o, blob, n, deadline);
}
