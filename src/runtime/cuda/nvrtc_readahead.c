/* NVRTC's files read into the page cache when CUDA initializes.
 *
 * NVRTC (libnvrtc.so, about 110 MB) and its builtins library come from disk
 * the first time a machine loads them: with a cold page cache, loading them
 * took 150-200 ms before the first jiterator compile could start
 * (BENCHMARKS.md, Jiterator). PyTorch's wheels load their NVRTC while
 * `import torch` runs, so a jiterator call there never waits for the disk.
 * tcuda does not load NVRTC before a compile asks for it; instead, when CUDA
 * initializes, a thread finds the files the first compile will load
 * (base/libfile.c: LD_LIBRARY_PATH, then /etc/ld.so.cache) and asks the
 * kernel to read them ahead, so the reads overlap the CUDA context's
 * creation and the program's own start. The thread only looks up paths and
 * makes system calls: no code of NVRTC's runs on it. Loading NVRTC on such a
 * thread was tried and withdrawn: a process that exited while the load ran
 * (its C++ constructors on one thread, exit's destructors on another)
 * crashed or hung, and no wait at exit can come before the destructors NVRTC
 * registers during its own load. TCUDA_JIT_READAHEAD=0 turns it off. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"
#include "base/env.h"
#include "base/libfile.h"

const char *const tc__nvrtc_names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL};

tc__readahead_report tc__nvrtc_readahead;

/* Every libnvrtc-builtins.so.MAJOR.* (MAJOR from `soname`, any when it has
 * none) in the folder of `path`; NVRTC opens one of them at its first
 * compile. The first one read ahead goes into `out`. Returns how many. */
static int read_builtins(const char *path, const char *soname, char *out, size_t size)
{
    char dir[sizeof tc__nvrtc_readahead.nvrtc], prefix[64], file[sizeof dir + 256];
    const char *slash = strrchr(path, '/');
    if (!slash || (size_t)(slash - path) >= sizeof dir)
        return 0;
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    const char *major = soname + strlen("libnvrtc.so");
    snprintf(prefix, sizeof prefix, "libnvrtc-builtins.so%s.", major);
    DIR *d = opendir(dir[0] ? dir : "/");
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        int len = snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
        if (len <= 0 || (size_t)len >= sizeof file || !tc__read_ahead(file))
            continue;
        if (n++ == 0 && (size_t)len < size)
            memcpy(out, file, (size_t)len + 1);
    }
    closedir(d);
    return n;
}

static void *read_nvrtc(void *unused)
{
    (void)unused;
    tc__readahead_report *r = &tc__nvrtc_readahead;
    for (const char *const *name = tc__nvrtc_names; *name; name++) {
        if (!tc__library_file(*name, r->nvrtc, sizeof r->nvrtc))
            continue;
        if (tc__read_ahead(r->nvrtc)) {
            r->files = 1 + read_builtins(r->nvrtc, *name, r->builtins, sizeof r->builtins);
            break;
        }
    }
    __atomic_store_n(&r->state, 2, __ATOMIC_RELEASE);
    return NULL;
}

void tc__nvrtc_readahead_start(void)
{
    if (!tc__jit_readahead_enabled())
        return;
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) != 0)
        return;
    /* nothing waits for it: a process may end while it runs */
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    __atomic_store_n(&tc__nvrtc_readahead.state, 1, __ATOMIC_RELEASE);
    if (pthread_create(&thread, &attr, read_nvrtc, NULL) != 0)
        __atomic_store_n(&tc__nvrtc_readahead.state, 0, __ATOMIC_RELEASE);
    pthread_attr_destroy(&attr);
}
