/* Process groups without a GPU: the launchers' environments (torchrun,
 * OpenMPI, Slurm; bad values named), option checks, and the TCP rendezvous
 * over loopback with several processes (fork): every rank receives rank 0's
 * blob; a missing rank is a timeout error, not a hang; a process of another
 * world size is refused. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/dist_internal.h"
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

    clear_env(); /* Slurm, no local id: the current device */
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "8", 1);
    CHECK_OK(tc_dist_options_from_env(&o));
    CHECK(o.rank == 3 && o.world_size == 8 && o.local_rank == -1);
    clear_env();

    CHECK_STATUS(tc_dist_options_from_env(NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_process_group *pg = (tc_process_group *)0x1;
    o.rank = 8;
    CHECK_STATUS(tc_dist_init(&o, &pg), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_dist_init: rank 8") == tc_last_error());
    CHECK(pg == (tc_process_group *)0x1);
    CHECK_STATUS(tc_dist_init(NULL, &pg), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_dist_all_reduce(NULL, NULL, TC_REDUCE_SUM, NULL), TC_ERROR_INVALID_ARGUMENT);
    void *junk = tc_test_garbage(256);
    CHECK_STATUS(tc_dist_barrier(junk), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_work_wait(junk), TC_ERROR_INVALID_HANDLE);
    free(junk);
}

/* A port that was free a moment ago. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0)
        return 29511;
    close(s);
    return ntohs(a.sin_port);
}

static tc_dist_options opts(int rank, int world, int port, double timeout)
{
    tc_dist_options o;
    memset(&o, 0, sizeof o);
    o.rank = rank;
    o.world_size = world;
    o.local_rank = -1;
    strcpy(o.master_addr, "127.0.0.1");
    o.master_port = port;
    o.timeout_s = timeout;
    return o;
}

/* Forks `world` ranks (rank r started after a delay of (world - r) * 20 ms,
 * so rank 0 is last); each exits 0 when it got the blob. */
static void test_rendezvous(int world)
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

static void test_rendezvous_errors(void)
{
    unsigned char blob[16] = {1};
    /* rank 0 alone in a world of 2: a timeout with a message */
    tc_dist_options o = opts(0, 2, free_port(), 0.5);
    CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_IO);
    CHECK(strstr(tc_last_error(), "0 of 1 other ranks joined") != NULL);
    /* rank 1 with nobody listening */
    o = opts(1, 2, free_port(), 0.5);
    CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_IO);
    CHECK(strstr(tc_last_error(), "could not reach rank 0") != NULL);
    /* a rank of another world size is refused, on both sides */
    int port = free_port();
    pid_t c = fork();
    if (c == 0) {
        usleep(50000);
        tc_dist_options oc = opts(1, 3, port, 5);
        _exit(tc__dist_rendezvous(&oc, blob, sizeof blob) == TC_ERROR_IO ? 0 : 1);
    }
    o = opts(0, 2, port, 5);
    CHECK_STATUS(tc__dist_rendezvous(&o, blob, sizeof blob), TC_ERROR_IO);
    CHECK(strstr(tc_last_error(), "rank 1 of 3") != NULL);
    int status = 0;
    waitpid(c, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
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
    test_rendezvous_errors();
    return TC_TEST_DONE();
}
