/* For the tests of process groups (test_dist.c, test_dist_rendezvous.c,
 * test_dist_cuda.c, test_dist_faults.c): a free port and a rank's options.
 * Header-only (static). */
#ifndef TC_TEST_DIST_SUPPORT_H
#define TC_TEST_DIST_SUPPORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tcuda/dist.h"

/* A port that was free a moment ago (`fallback` when none could be had). */
static inline int tc_test_free_port(int fallback)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (s < 0)
        return fallback;
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        close(s);
        return fallback;
    }
    close(s);
    return ntohs(a.sin_port);
}

/* Rank `rank` of `world` on 127.0.0.1:`port`, the current device. */
static inline tc_dist_options tc_test_dist_opts(int rank, int world, int port, double timeout)
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

/* Runs this program again as `world` ranks of one group (world <= 16), as
 * torchrun starts them: RANK and LOCAL_RANK r, WORLD_SIZE, MASTER_ADDR
 * 127.0.0.1, MASTER_PORT port, TCUDA_DIST_TIMEOUT from TC_TEST_DIST_TIMEOUT
 * (set longer under compute-sanitizer: NCCL's setup took over 20 s under
 * memcheck on 2 H200s) or else `timeout`, no NVLink multicast; each runs
 * argv[0] `name` then `arg` (and `arg2` unless NULL). Waits for all; the
 * number of ranks that did not exit 0, each named under `label`. */
static inline int tc_test_spawn_ranks(const char *name, const char *arg, const char *arg2,
                                      int world, int port, const char *timeout, const char *label)
{
    pid_t kids[16];
    for (int r = 0; r < world && r < 16; r++) {
        kids[r] = fork();
        if (kids[r] == 0) {
            char v[32];
            snprintf(v, sizeof v, "%d", r), setenv("RANK", v, 1), setenv("LOCAL_RANK", v, 1);
            snprintf(v, sizeof v, "%d", world), setenv("WORLD_SIZE", v, 1);
            snprintf(v, sizeof v, "%d", port), setenv("MASTER_PORT", v, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            const char *slow = getenv("TC_TEST_DIST_TIMEOUT");
            setenv("TCUDA_DIST_TIMEOUT", slow ? slow : timeout, 1);
            setenv("NCCL_NVLS_ENABLE", "0", 1);
            execl("/proc/self/exe", name, arg, arg2, (char *)NULL);
            _exit(99);
        }
    }
    int failed = 0;
    for (int r = 0; r < world && r < 16; r++) {
        int status = 0;
        waitpid(kids[r], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            printf("%s: rank %d of %d ended with status 0x%x\n", label, r, world, status);
            failed++;
        }
    }
    return failed;
}

#endif
