/* For the tests of process groups (test_dist.c, test_dist_rendezvous.c,
 * test_dist_cuda.c, test_dist_faults.c): a free port and a rank's options.
 * Header-only (static). */
#ifndef TC_TEST_DIST_SUPPORT_H
#define TC_TEST_DIST_SUPPORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
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

#endif
