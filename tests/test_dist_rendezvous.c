/* The rendezvous against strangers, without a GPU: processes (fork) play
 * the ranks, and raw TCP sockets play what else may reach MASTER_PORT.
 * Rank 0 serves every connection at once, so a client that connects and
 * says nothing does not delay the group (it forms before that client's
 * 5 s hello deadline); garbage, a hello of another world size, a rank out
 * of range or twice, another protocol version are refused to that client
 * alone, with the answer the protocol defines, and the group still forms.
 * A rank that reached a port held by another program (silent, garbage, or
 * closing) fails within the hello deadline, not the timeout, naming the
 * port; rank 0 that cannot bind fails at once naming the port and errno; a
 * failed rendezvous names the ranks that joined and those missing; a
 * fractional timeout ends on time; a timeout of 1e9 s works.
 *
 * The wire format is written out here from the protocol's description in
 * src/dist/dist_env.c (four 32-bit words in network order), as the
 * reference the implementation is checked against. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/dist_internal.h"
#include "dist_support.h"
#include "tc_test.h"

/* The protocol, version 2. */
#define MAGIC 0x74637276u /* "tcrv" */
#define VERSION 2u
#define WAITING 1u
#define GO 2u
#define FAILED 3u
#define REFUSED_WORLD 4u
#define REFUSED_RANK 5u
#define REFUSED_TWICE 6u
#define REFUSED_VERSION 7u
#define HELLO_S 5.0 /* a connection's time to say hello, a rank's to get an answer */

static int free_port(void) { return tc_test_free_port(29512); }

static tc_dist_options opts(int rank, int world, int port, double timeout)
{
    return tc_test_dist_opts(rank, world, port, timeout);
}

static void make_blob(unsigned char *blob, int port)
{
    for (int i = 0; i < 128; i++)
        blob[i] = (unsigned char)(i * 7 + port);
}

/* Forks a rank. It exits 0 when it got rank 0's blob (expect NULL), or
 * when it failed with TC_ERROR_IO and a message holding every `|`-separated
 * part of `expect`; else it prints what it got and exits 1. */
static pid_t spawn_rank(int rank, int world, int port, double timeout, const char *expect)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    unsigned char blob[128], got[128];
    make_blob(blob, port);
    memcpy(got, blob, sizeof got);
    if (rank != 0)
        memset(got, 0, sizeof got);
    tc_dist_options o = opts(rank, world, port, timeout);
    tc_status st = tc__dist_rendezvous(&o, got, sizeof got);
    bool ok = expect ? st == TC_ERROR_IO : st == TC_OK && memcmp(got, blob, sizeof got) == 0;
    for (const char *p = expect; ok && p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        char part[200];
        snprintf(part, sizeof part, "%.*s", (int)len, p);
        ok = strstr(tc_last_error(), part) != NULL;
        p += len + (bar != NULL);
    }
    if (!ok)
        fprintf(stderr, "rank %d of %d (port %d): status %d, expected %s: %s\n", rank, world, port,
                (int)st, expect ? expect : "the blob", st ? tc_last_error() : "");
    _exit(ok ? 0 : 1);
}

/* Waits for a spawned rank; true when it exited 0. */
static bool rank_ok(pid_t pid)
{
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* A connection to 127.0.0.1:port, tried again for up to 10 s (until rank 0
 * listens); -1 if none. */
static int raw_connect(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int i = 0; i < 1000; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, (struct sockaddr *)&a, sizeof a) == 0)
            return s;
        close(s);
        usleep(10000);
    }
    return -1;
}

static void raw_send(int s, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3)
{
    uint32_t m[4] = {htonl(w0), htonl(w1), htonl(w2), htonl(w3)};
    CHECK(send(s, m, sizeof m, MSG_NOSIGNAL) == (ssize_t)sizeof m);
}

/* Reads up to 16 bytes of an answer into m (host order) within `seconds`:
 * the bytes read, which is less than 16 when the peer closed first. */
static int raw_answer(int s, uint32_t m[4], double seconds)
{
    size_t got = 0;
    double end = tc_test_now_ms() + seconds * 1000;
    while (got < 16) {
        struct pollfd p = {.fd = s, .events = POLLIN};
        int left = (int)(end - tc_test_now_ms());
        if (left <= 0 || poll(&p, 1, left) <= 0)
            break;
        ssize_t k = recv(s, (char *)m + got, 16 - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    for (int i = 0; i < 4; i++)
        m[i] = ntohl(m[i]);
    return (int)got;
}

/* True when the peer closed s (recv sees the end) within `seconds`. */
static bool raw_closed(int s, double seconds)
{
    char c;
    struct pollfd p = {.fd = s, .events = POLLIN};
    return poll(&p, 1, (int)(seconds * 1000)) == 1 && recv(s, &c, 1, 0) <= 0;
}

/* Clients that connect to rank 0 before the real ranks and say nothing do
 * not delay the group: it forms before their hello deadline (rank 0 serving
 * them one at a time would wait at least that long, or the whole timeout). */
static void test_silent_clients(void)
{
    int port = free_port();
    double t0 = tc_test_now_ms();
    pid_t r0 = spawn_rank(0, 4, port, 20, NULL);
    int silent[3];
    for (int i = 0; i < 3; i++) {
        silent[i] = raw_connect(port);
        CHECK(silent[i] >= 0);
    }
    usleep(100000); /* rank 0 accepted them */
    pid_t r[3];
    for (int k = 1; k < 4; k++)
        r[k - 1] = spawn_rank(k, 4, port, 20, NULL);
    bool ok = rank_ok(r0);
    for (int k = 0; k < 3; k++)
        ok = rank_ok(r[k]) && ok;
    double took = (tc_test_now_ms() - t0) / 1000;
    CHECK(ok);
    CHECK(took < HELLO_S);
    if (took >= HELLO_S)
        fprintf(stderr, "silent clients: the group formed after %.2f s\n", took);
    for (int i = 0; i < 3; i++) {
        CHECK(raw_closed(silent[i], 5)); /* rank 0 closed them when it finished */
        close(silent[i]);
    }
}

/* Garbage and well-formed hellos rank 0 cannot take are refused to that
 * client alone, each with the protocol's answer; the real ranks still form
 * the group. A stranger that joined as a rank and went away frees it. */
static void test_garbage_clients(void)
{
    int port = free_port(), world = 3;
    pid_t r0 = spawn_rank(0, world, port, 20, NULL);
    uint32_t m[4];

    int s = raw_connect(port); /* another program's bytes: closed without a word */
    CHECK(s >= 0);
    CHECK(send(s, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL) == 18);
    CHECK(raw_answer(s, m, 10) == 0);
    close(s);

    s = raw_connect(port); /* half a hello, then the end */
    uint32_t half[2] = {htonl(MAGIC), htonl(VERSION)};
    CHECK(send(s, half, sizeof half, MSG_NOSIGNAL) == (ssize_t)sizeof half);
    shutdown(s, SHUT_WR);
    CHECK(raw_answer(s, m, 10) == 0);
    close(s);

    s = raw_connect(port); /* another protocol version */
    raw_send(s, MAGIC, 99, 1, (uint32_t)world);
    CHECK(raw_answer(s, m, 10) == 16);
    CHECK(m[0] == MAGIC && m[1] == VERSION && m[2] == REFUSED_VERSION);
    CHECK(raw_closed(s, 10));
    close(s);

    s = raw_connect(port); /* version 1's hello (host order, three words) */
    uint32_t v1[3] = {0x54435256u, 1, (uint32_t)world}, a1[2] = {0};
    CHECK(send(s, v1, sizeof v1, MSG_NOSIGNAL) == (ssize_t)sizeof v1);
    CHECK(recv(s, a1, sizeof a1, MSG_WAITALL) == (ssize_t)sizeof a1);
    CHECK(a1[0] == 0x54435256u && a1[1] == 1); /* version 1's "refused" */
    close(s);

    const uint32_t bad[][3] = {/* rank, world: the answer */
                               {1, 5, REFUSED_WORLD},
                               {0, 3, REFUSED_RANK},
                               {3, 3, REFUSED_RANK},
                               {0xFFFFFFFFu, 3, REFUSED_RANK}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        s = raw_connect(port);
        raw_send(s, MAGIC, VERSION, bad[i][0], bad[i][1]);
        CHECK(raw_answer(s, m, 10) == 16);
        CHECK(m[0] == MAGIC && m[1] == VERSION && m[2] == bad[i][2]);
        CHECK(m[3] == (uint32_t)world); /* rank 0's world size */
        CHECK(raw_closed(s, 10));
        close(s);
    }

    /* a stranger joins as rank 2 (so is told "waiting"), then leaves */
    s = raw_connect(port);
    raw_send(s, MAGIC, VERSION, 2, (uint32_t)world);
    CHECK(raw_answer(s, m, 10) == 16 && m[0] == MAGIC && m[2] == WAITING);
    /* while it holds rank 2, a second rank 2 is refused */
    int twin = raw_connect(port);
    raw_send(twin, MAGIC, VERSION, 2, (uint32_t)world);
    CHECK(raw_answer(twin, m, 10) == 16 && m[2] == REFUSED_TWICE);
    close(twin);
    close(s); /* rank 2 is free again */

    /* a stranger that joins as rank 1 and then sends more is dropped too */
    s = raw_connect(port);
    raw_send(s, MAGIC, VERSION, 1, (uint32_t)world);
    CHECK(raw_answer(s, m, 10) == 16 && m[2] == WAITING);
    raw_send(s, 1, 2, 3, 4);
    CHECK(raw_closed(s, 10));
    close(s);

    int junk = raw_connect(port); /* stays silent while the group forms */
    pid_t r1 = spawn_rank(1, world, port, 20, NULL);
    /* the real rank 1 joined: a rank 1 now is refused as a twin, and that
     * process fails at once saying so, while the group goes on */
    usleep(200000);
    pid_t dup = spawn_rank(1, world, port, 20, "refused rank 1 of 3|joined as rank 1 first");
    CHECK(rank_ok(dup));
    pid_t r2 = spawn_rank(2, world, port, 20, NULL);
    CHECK(rank_ok(r0));
    CHECK(rank_ok(r1));
    CHECK(rank_ok(r2));
    close(junk);
}

/* A process of another world size is refused, fails at once naming rank
 * 0's size, and does not break the group: the real rank joins after it. */
static void test_other_world(void)
{
    int port = free_port();
    pid_t r0 = spawn_rank(0, 2, port, 20, NULL);
    double t0 = tc_test_now_ms();
    pid_t misfit = spawn_rank(1, 3, port, 20, "refused rank 1 of 3|group has 2 ranks");
    CHECK(rank_ok(misfit));
    CHECK((tc_test_now_ms() - t0) / 1000 < 20); /* not after its timeout */
    pid_t r1 = spawn_rank(1, 2, port, 20, NULL);
    CHECK(rank_ok(r0));
    CHECK(rank_ok(r1));

    /* when the group then does not form, rank 0's error names the refusal */
    port = free_port();
    char want[200];
    snprintf(want, sizeof want,
             "rank 0 listened on port %d|0 of 1 other ranks joined|missing: 1|refused a process "
             "at 127.0.0.1:|joined as rank 1 of 3 (this group has 2 ranks)",
             port);
    r0 = spawn_rank(0, 2, port, 2, want);
    misfit = spawn_rank(1, 3, port, 20, "group has 2 ranks");
    CHECK(rank_ok(misfit));
    CHECK(rank_ok(r0));
}

/* A failed rendezvous says which ranks joined and which did not, and where;
 * the ranks that joined hear from rank 0 when it gives up, at once. */
static void test_missing_ranks(void)
{
    int port = free_port(), world = 7;
    char want0[200];
    snprintf(want0, sizeof want0,
             "timed out after 1.5 s|port %d|127.0.0.1:%d|4 of 6 other ranks joined|joined: 1-3, "
             "5;|missing: 4, 6)",
             port, port);
    double t0 = tc_test_now_ms();
    pid_t r0 = spawn_rank(0, world, port, 1.5, want0);
    pid_t r[4];
    int ranks[4] = {1, 2, 3, 5};
    char want[200];
    snprintf(want, sizeof want, "rank 0 at 127.0.0.1:%d gave up", port);
    for (int i = 0; i < 4; i++)
        r[i] = spawn_rank(ranks[i], world, port, 30, want);
    bool ok = rank_ok(r0);
    for (int i = 0; i < 4; i++)
        ok = rank_ok(r[i]) && ok;
    CHECK(ok);
    CHECK((tc_test_now_ms() - t0) / 1000 < 30); /* the ranks heard it, not their timeout */
}

/* A socket that holds the port: listening only (never accepts, never
 * answers), or accepting and sending garbage, or accepting and closing. */
typedef enum { HOLD_SILENT, HOLD_GARBAGE, HOLD_CLOSE } hold_kind;

/* Holds a port on every IPv4 interface; for the answering kinds, a child
 * process answers connections until killed. Returns the listener; *server
 * is the child or -1. */
static int hold_port(hold_kind kind, int *port, pid_t *server)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&a, sizeof a) == 0 && listen(ls, 16) == 0 &&
          getsockname(ls, (struct sockaddr *)&a, &len) == 0);
    *port = ntohs(a.sin_port);
    *server = -1;
    if (kind == HOLD_SILENT)
        return ls;
    *server = fork();
    if (*server == 0) {
        for (;;) {
            int c = accept(ls, NULL, NULL);
            if (c < 0)
                continue;
            if (kind == HOLD_GARBAGE) {
                const char *g = "SSH-2.0-OpenSSH_9.6 not a tcuda rank 0\r\n";
                (void)send(c, g, strlen(g), MSG_NOSIGNAL);
                continue; /* and keeps it open */
            }
            close(c);
        }
    }
    return ls;
}

static void release_port(int ls, pid_t server)
{
    if (server > 0) {
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
    }
    close(ls);
}

/* A rank that reached another program fails within the hello deadline, not
 * the timeout (60 s here), naming the address; rank 0 cannot bind the port
 * and fails at once, naming it and errno. */
static void test_port_held(void)
{
    const struct {
        hold_kind kind;
        const char *says;
    } cases[] = {{HOLD_SILENT, "did not answer a tcuda hello within 5 s"},
                 {HOLD_GARBAGE, "answered something that is not tcuda's rendezvous"},
                 {HOLD_CLOSE, "closed the connection without a tcuda answer"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int port;
        pid_t server;
        int ls = hold_port(cases[i].kind, &port, &server);
        unsigned char blob[128] = {0};
        tc_dist_options o = opts(1, 2, port, 60);
        char where[64];
        snprintf(where, sizeof where, "127.0.0.1:%d", port);
        alarm(120);
        double t0 = tc_test_now_ms();
        CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_IO);
        double took = (tc_test_now_ms() - t0) / 1000;
        alarm(0);
        CHECK(strstr(tc_last_error(), where) != NULL);
        CHECK(strstr(tc_last_error(), cases[i].says) != NULL);
        CHECK(strstr(tc_last_error(), "not rank 0 of this group") != NULL);
        CHECK(took < 30); /* the hello deadline (5 s), far from the timeout */
        if (took >= 30 || !strstr(tc_last_error(), cases[i].says))
            fprintf(stderr, "port held (%d): %.2f s: %s\n", (int)cases[i].kind, took,
                    tc_last_error());

        o = opts(0, 2, port, 60); /* rank 0 on that port */
        char want[64];
        snprintf(want, sizeof want, "cannot listen on port %d", port);
        t0 = tc_test_now_ms();
        CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_IO);
        CHECK((tc_test_now_ms() - t0) / 1000 < 30);
        CHECK(strstr(tc_last_error(), want) != NULL);
        CHECK(strstr(tc_last_error(), strerror(EADDRINUSE)) != NULL);
        release_port(ls, server);
    }
}

/* A fractional timeout ends on time, connecting or listening; a timeout of
 * 1e9 s (past an int of milliseconds) is a group that forms all the same. */
static void test_timeouts(void)
{
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_PORT", "1", 1);
    setenv("TCUDA_DIST_TIMEOUT", "0.3", 1);
    tc_dist_options o;
    CHECK_OK(tc_dist_options_from_env(&o));
    CHECK(o.timeout_s == 0.3);
    unsigned char blob[128] = {0};
    for (int rank = 0; rank < 2; rank++) { /* rank 1: nobody listens; rank 0: nobody comes */
        o.rank = rank;
        o.master_port = free_port();
        double t0 = tc_test_now_ms();
        CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_IO);
        double took = (tc_test_now_ms() - t0) / 1000;
        CHECK(took >= 0.3 && took < 2);
        if (!(took >= 0.3 && took < 2))
            fprintf(stderr, "rank %d with a 0.3 s timeout took %.3f s\n", rank, took);
        CHECK(strstr(tc_last_error(), "timed out after 0.3 s") != NULL);
    }

    setenv("TCUDA_DIST_TIMEOUT", "1e9", 1);
    CHECK_OK(tc_dist_options_from_env(&o));
    CHECK(o.timeout_s == 1e9);
    int port = free_port();
    pid_t r[3];
    for (int k = 0; k < 3; k++)
        r[k] = spawn_rank(k, 3, port, o.timeout_s, NULL);
    for (int k = 0; k < 3; k++)
        CHECK(rank_ok(r[k]));
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("MASTER_PORT");
    unsetenv("TCUDA_DIST_TIMEOUT");
}

int main(void)
{
    tc_test_init();
    signal(SIGPIPE, SIG_IGN);
    test_silent_clients();
    test_garbage_clients();
    test_other_world();
    test_missing_ranks();
    test_port_held();
    test_timeouts();
    return TC_TEST_DONE();
}
