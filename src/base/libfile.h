/* A shared library's file, found as the dynamic loader would find it but
 * without loading it, and a file read into the page cache ahead of need.
 * Both serve runtime/cuda/nvrtc_readahead.c, and both are hints for speed:
 * a wrong or missing answer costs time, never a result. Not installed. */
#ifndef TCUDA_LIBFILE_H
#define TCUDA_LIBFILE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The file that dlopen(`soname`) from tcuda would open (e.g.
 * "libnvrtc.so.13"): the first folder of LD_LIBRARY_PATH that holds it, else
 * /etc/ld.so.cache's entry for this machine's ABI. The cache's entries for a
 * CPU feature level (glibc-hwcaps) are passed over, and so are the
 * executable's RPATH and the loader's default folders when the cache does
 * not list them. True with the path in `out`; false when nothing was found
 * or the path does not fit in `size`. Reads the environment and the cache
 * at each call. */
bool tc__library_file(const char *soname, char *out, size_t size);

/* The path /etc/ld.so.cache's `n` bytes at `cache` give `soname` for this
 * machine's ABI, as above (the path must name a readable file); false for
 * none, or for bytes that are not such a cache or are damaged: every offset
 * is checked against `n`. tc__library_file's second step, apart for tests. */
bool tc__ld_cache_lookup(const void *cache, size_t n, const char *soname, char *out, size_t size);

/* Asks the kernel to read the whole file `path` into the page cache and
 * returns without waiting for the reads (posix_fadvise WILLNEED, 2 MiB a
 * call: one call over a 109 MB file brought in only 8 MB). False when the
 * file cannot be opened. */
bool tc__read_ahead(const char *path);

#ifdef __cplusplus
}
#endif

#endif
