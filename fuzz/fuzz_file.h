/* The fuzzer's input as a whole file, for harnesses that read files: one
 * in-memory file (memfd) that every run of the process reuses, named by a
 * path under /proc/self/fd. The including harness defines _GNU_SOURCE (for
 * memfd_create) before its first #include. */
#ifndef TC_FUZZ_FILE_H
#define TC_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_input.h"

/* Writes data[0..size) as the file's whole content; returns its path. */
static const char *fz_file(const uint8_t *data, size_t size)
{
    static char path[64];
    static int fd = -1;
    if (fd < 0) {
        fd = memfd_create("tcuda_fuzz", MFD_CLOEXEC);
        FZ_CHECK(fd >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    FZ_CHECK(ftruncate(fd, 0) == 0);
    for (size_t at = 0; at < size;) {
        ssize_t n = pwrite(fd, data + at, size - at, (off_t)at);
        FZ_CHECK(n > 0);
        at += (size_t)n;
    }
    return path;
}

#endif
