/* Process groups without a GPU: the launchers' environments (torchrun,
 * OpenMPI, Slurm; bad values named; TCUDA_DIST_TIMEOUT in fractional
 * seconds), option checks, and the TCP rendezvous over loopback with
 * several processes (fork): every rank receives rank 0's blob; a missing
 * rank is a timeout error, not a hang; a process of another world size is
 * refused, and told so at once. Connecting keeps the deadline even when
 * rank 0's host answers nothing (its accept queue full, so SYNs are
 * dropped), and rank 0 listens on every interface, whatever MASTER_ADDR it
 * was given. test_dist_rendezvous.c puts the rendezvous against strangers
 * on the port. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/dist_internal.h"
#include "dist_support.h"
#include "tc_test.h"

static const char *vars[] = {
    "RANK",         "WORLD_SIZE",           "LOCAL_RANK",           "MASTER_ADDR",
    "MASTER_PORT",  "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_PROCID", "SLURM_NTASKS",         "SLURM_LOCALID",        "TCUDA_DIST_TIMEOUT"};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
}

static void test_env(void)
{
    tc_dist_options o;
    clear_env();
    CHECK_STATUS(tc_dist_options_from_env(&o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "RANK") != NULL);

    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("MASTER_ADDR", "10.1.2.3", 1);
    setenv("MASTER_PORT", "1234", 1);
    CHECK_OK(tc_dist_options_from_env(&o));
    CHECK(o.rank == 2 && o.world_size == 4 && o.local_rank == 1 && o.master_port == 1234);
    CHECK(strcmp(o.master_addr, "10.1.2.3") == 0 && o.timeout_s == 600);

    setenv("RANK", "4", 1); /* not below WORLD_SIZE */
    CHECK_STATUS(tc_dist_options_from_env(&o), TC_ERROR_INVALID_ARGUMENT);
    setenv("RANK", "x1", 1);
    CHECK_STATUS(tc_dist_options_from_env(&o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "RANK=\"x1\"") != NULL);
    setenv("RANK", "1", 1);
    setenv("MASTER_PORT", "70000", 1);
    CHECK_STATUS(tc_dist_options_from_env(&o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "MASTER_PORT") != NULL);
    unsetenv("WORLD_SIZE");
    unsetenv("MASTER_PORT");
    CHECK_STATUS(tc_dist_options_from_env(&o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "WORLD_SIZE") != NULL);

    clear_env(); /* OpenMPI, defaults for the master */
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    setenv("TCUDA_DIST_TIMEOUT", "5", 1);
    CHECK_OK(tc_dist_options_from_env(&o));
    CHECK(o.rank == 0 && o.world_size == 2 && o.local_rank == 0 && o.timeout_s == 5);
    CHECK(strcmp(o.master_addr, "127.0.0.1") == 0 && o.master_port == 29500);
    /* seconds with a fraction, or beyond an int of milliseconds */
    const struct {
        const char *s;
        double v;
    } good[] = {{"2.5", 2.5}, {"0.2", 0.2}, {"1e9", 1e9}, {"86400000", 86400000}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        setenv("TCUDA_DIST_TIMEOUT", good[i].s, 1);
        CHECK_OK(tc_dist_options_from_env(&o));
        CHECK(o.timeout_s == good[i].v);
    }
    const char *bad[] = {"abc", "0", "-1", "nan", "inf", "-inf", "5s", "1e999", "0x", " "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want[64];
        snprintf(want, sizeof want, "TCUDA_DIST_TIMEOUT=\"%s\"", bad[i]);
        setenv("TCUDA_DIST_TIMEOUT", bad[i], 1);
        CHECK_STATUS(tc_dist_options_from_env(&o), TC_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(tc_last_error(), want) != NULL);
    }
    setenv("TCUDA_DIST_TIMEOUT", "", 1); /* empty: unset, the default */
    CHECK_OK(tc_dist_options_from_env(&o));
    CHECK(o.timeout_s == 600);

    clear_env(); /* Slurm, no local id: the current device */
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "8", 1);
    CHECK_OK(tc_dist_options_from_env(&o));
    CHECK(o.rank == 3 && o.world_size == 8 && o.local_rank == -1);
    clear_env();

    CHECK_STATUS(tc_dist_options_from_env(NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_process_group *pg = (tc_process_group *)0x1;
    o.rank = 8;
    CHECK_STATUS(tc_process_group_create(&o, &pg), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_process_group_create: rank 8") == tc_last_error());
    CHECK(pg == (tc_process_group *)0x1);
    CHECK_STATUS(tc_process_group_create(NULL, &pg), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_dist_all_reduce(NULL, NULL, TC_REDUCE_OP_SUM, NULL), TC_ERROR_INVALID_ARGUMENT);
    void *junk = tc_test_garbage(256);
    CHECK_STATUS(tc_dist_barrier(junk), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_work_wait(junk), TC_ERROR_INVALID_HANDLE);
    free(junk);
}

static int free_port(void) { return tc_test_free_port(29511); }

static tc_dist_options opts(int rank, int world, int port, double timeout)
{
    return tc_test_dist_opts(rank, world, port, timeout);
}

/* Forks `world` ranks (rank r started after a delay of (world - r) * 20 ms,
 * so rank 0 is last); each exits 0 when it got the blob. Rank 0 is given
 * MASTER_ADDR addr0, the others addr. */
static void rendezvous_at(int world, const char *addr0, const char *addr)
{
    int port = free_port();
    unsigned char blob[128];
    for (int i = 0; i < 128; i++)
        blob[i] = (unsigned char)(i * 13 + world);
    pid_t kids[8];
    for (int r = 0; r < world; r++) {
        kids[r] = fork();
        if (kids[r] == 0) {
            usleep((useconds_t)(world - r) * 20000);
            tc_dist_options o = opts(r, world, port, 20);
            strcpy(o.master_addr, r == 0 ? addr0 : addr);
            unsigned char got[128];
            memcpy(got, blob, sizeof got);
            if (r != 0)
                memset(got, 0, sizeof got);
            tc_status st = tc__dist_rendezvous(&o, got, sizeof got);
            if (st != TC_OK)
                fprintf(stderr, "rank %d: %s\n", r, tc_last_error());
            _exit(st == TC_OK && memcmp(got, blob, sizeof got) == 0 ? 0 : 1);
        }
    }
    for (int r = 0; r < world; r++) {
        int status = 0;
        waitpid(kids[r], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

static void test_rendezvous(int world) { rendezvous_at(world, "127.0.0.1", "127.0.0.1"); }

/* Rank 0 listens on every interface, as PyTorch's TCPStore server: given an
 * address that is no interface of this host (TEST-NET-1, RFC 5737) it still
 * serves the ranks that reach it on loopback, by IPv4 or by name; and by
 * IPv6 where the host has it. */
static void test_rendezvous_any_interface(void)
{
    rendezvous_at(2, "192.0.2.1", "127.0.0.1");
    rendezvous_at(3, "127.0.0.1", "localhost");
    int s6 = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool have_v6 = s6 >= 0 && bind(s6, (struct sockaddr *)&a6, sizeof a6) == 0;
    if (s6 >= 0)
        close(s6);
    if (have_v6)
        rendezvous_at(2, "127.0.0.1", "::1");
    else
        printf("test_dist: no IPv6 loopback here, ::1 not tried\n");
}

/* Rank 1 against a rank 0 whose host answers nothing: a listener that never
 * accepts, its queue filled (Linux then drops SYNs, so a blocking connect
 * would wait minutes). The call must fail with TC_ERROR_IO near the
 * deadline. The alarm turns a hang into a failure. */
static void test_connect_deadline(void)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&a, sizeof a) == 0 && listen(ls, 0) == 0 &&
          getsockname(ls, (struct sockaddr *)&a, &len) == 0);
    int fill[4];
    for (int i = 0; i < 4; i++) { /* fills the accept queue; later SYNs are dropped */
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        (void)connect(fill[i], (struct sockaddr *)&a, sizeof a);
    }
    usleep(100000);
    unsigned char blob[16] = {0};
    tc_dist_options o = opts(1, 2, ntohs(a.sin_port), 1.0);
    alarm(60);
    double t0 = tc_test_now_ms();
    CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_IO);
    double took = (tc_test_now_ms() - t0) / 1000;
    alarm(0);
    CHECK(strstr(tc_last_error(), "could not reach rank 0") != NULL);
    CHECK(took >= 0.95 && took < 2.5);
    if (!(took >= 0.95 && took < 2.5))
        fprintf(stderr, "connect to a silent host took %.3f s, deadline 1 s\n", took);
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(ls);
}

static void test_rendezvous_errors(void)
{
    unsigned char blob[16] = {1};
    /* rank 0 alone in a world of 2: a timeout with a message */
    tc_dist_options o = opts(0, 2, free_port(), 0.5);
    CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_IO);
    CHECK(strstr(tc_last_error(), "0 of 1 other ranks joined") != NULL);
    /* rank 1 with nobody listening: refused, retried until the deadline */
    o = opts(1, 2, free_port(), 0.5);
    double t0 = tc_test_now_ms();
    CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_IO);
    double took = (tc_test_now_ms() - t0) / 1000;
    CHECK(took >= 0.45 && took < 1.5);
    CHECK(strstr(tc_last_error(), "could not reach rank 0") != NULL);
    CHECK(strstr(tc_last_error(), "refused") != NULL);
    /* a rank of another world size is refused: it fails at once (long
     * before its timeout) saying why; rank 0 keeps waiting for its own
     * rank 1, then names the refusal when it times out */
    int port = free_port();
    pid_t c = fork();
    if (c == 0) {
        usleep(50000);
        tc_dist_options oc = opts(1, 3, port, 60);
        double t = tc_test_now_ms();
        tc_status st = tc__dist_rendezvous(&oc, blob, sizeof blob);
        _exit(st == TC_ERROR_IO && strstr(tc_last_error(), "its group has 2 ranks") &&
                      tc_test_now_ms() - t < 30000
                  ? 0
                  : 1);
    }
    o = opts(0, 2, port, 1);
    CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_IO);
    CHECK(strstr(tc_last_error(), "rank 1 of 3 (this group has 2 ranks)") != NULL);
    int status = 0;
    waitpid(c, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* a timeout that is not a number */
    o = opts(1, 2, port, 0);
    o.timeout_s = NAN;
    CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "timeout_s") != NULL);
    o.timeout_s = INFINITY;
    CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_INVALID_ARGUMENT);
    /* a world of one needs nobody */
    o = opts(0, 1, 1, 1);
    CHECK_OK(tc__dist_rendezvous(&o, blob, sizeof blob));
    o.master_port = 0;
    CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_INVALID_ARGUMENT);
}

int main(void)
{
    tc_test_init();
    test_env();
    test_rendezvous(2);
    test_rendezvous(4);
    test_rendezvous(7);
    test_rendezvous_any_interface();
    test_connect_deadline();
    test_rendezvous_errors();
    return TC_TEST_DONE();
}
