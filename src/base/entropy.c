/* 64 bits of the operating system's entropy (tc__os_entropy, internal.h):
 * getrandom, or /dev/urandom on kernels that lack it. Seeds
 * (tc_generator_seed, tc_seed_all) and the nonces of IPC handles come from
 * here. */
#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include "internal.h"

tc_status tc__os_entropy(uint64_t *out)
{
    uint64_t v = 0;
    size_t got = 0;
    while (got < sizeof v) {
        ssize_t r = getrandom((char *)&v + got, sizeof v - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got < sizeof v) { /* very old kernels: fall back on /dev/urandom */
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v) {
            if (fd >= 0)
                close(fd);
            return tc__fail(TC_ERROR_IO, "no entropy: getrandom and /dev/urandom both failed");
        }
        close(fd);
    }
    *out = v;
    return TC_OK;
}
