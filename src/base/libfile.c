/* Where a shared library's file is, without loading it; a file's pages read
 * ahead (libfile.h).
 *
 * /etc/ld.so.cache, as glibc's ldconfig writes it ("glibc-ld.so.cache1.1",
 * glibc 2.32 on alone; older ones write it after a table in the old
 * "ld.so-1.7.0" format): a 48-byte header (magic and version, 20 bytes; the
 * entry count; the string table's length; flags; an extension's offset),
 * then 24-byte entries (flags, the soname's and the path's offsets, an
 * unused word, hwcap), then the strings. Offsets count from the header. An
 * entry's flags say its ABI: the low byte 3 is an ELF library for glibc;
 * the next byte is the architecture (0x03 x86-64, 0x0a AArch64; 0 for a
 * 32-bit x86 library on x86-64). Every offset is checked against the file's
 * size, so a damaged cache gives "not found", never a bad read. */
#define _GNU_SOURCE /* posix_fadvise on every libc this builds with */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libfile.h"

#if defined(__x86_64__)
#define ABI_FLAGS 0x0303
#elif defined(__aarch64__)
#define ABI_FLAGS 0x0a03
#else
#define ABI_FLAGS 0 /* any ELF library for glibc */
#endif

static const char new_magic[] = "glibc-ld.so.cache1.1";
static const char old_magic[] = "ld.so-1.7.0";

static uint32_t word(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Whether `path` is a file this process could open. */
static bool readable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

/* The NUL-terminated string at offset `at` of the `n` bytes at `base`,
 * NULL when it does not end inside them. */
static const char *string_at(const unsigned char *base, size_t n, uint32_t at)
{
    if (at >= n || !memchr(base + at, '\0', n - at))
        return NULL;
    return (const char *)base + at;
}

bool tc__ld_cache_lookup(const void *cache, size_t n, const char *soname, char *out, size_t size)
{
    const unsigned char *c = cache;
    if (!c || !soname || !out || size == 0)
        return false;
    size_t at = 0;
    if (n >= 16 && memcmp(c, old_magic, sizeof old_magic - 1) == 0) {
        /* old table: magic, count, 12-byte entries; the new header follows,
         * at the next multiple of 8 */
        uint64_t old_entries = word(c + 12);
        at = (size_t)((16 + old_entries * 12 + 7) & ~(uint64_t)7);
    }
    if (at > n || n - at < 48 || memcmp(c + at, new_magic, sizeof new_magic - 1) != 0)
        return false;
    const unsigned char *h = c + at;
    size_t avail = n - at;
    uint64_t count = word(h + 20);
    if (count > (avail - 48) / 24)
        return false;
    for (uint64_t i = 0; i < count; i++) {
        const unsigned char *e = h + 48 + i * 24;
        uint32_t flags = word(e);
        uint64_t hwcap;
        memcpy(&hwcap, e + 16, 8);
        if (hwcap != 0 || (ABI_FLAGS ? (flags & 0xffff) != ABI_FLAGS : (flags & 0xff) != 3))
            continue;
        const char *key = string_at(h, avail, word(e + 4));
        if (!key || strcmp(key, soname) != 0)
            continue;
        const char *path = string_at(h, avail, word(e + 8));
        if (path && strlen(path) < size && readable(path)) {
            strcpy(out, path);
            return true;
        }
    }
    return false;
}

bool tc__library_file(const char *soname, char *out, size_t size)
{
    if (!soname || !*soname || strchr(soname, '/') || !out || size == 0)
        return false;
    /* LD_LIBRARY_PATH: folders split at ':' or ';'; an empty one is skipped */
    const char *dirs = getenv("LD_LIBRARY_PATH");
    for (const char *d = dirs; d && *d;) {
        size_t len = strcspn(d, ":;");
        if (len > 0) {
            int w = snprintf(out, size, "%.*s/%s", (int)len, d, soname);
            if (w > 0 && (size_t)w < size && readable(out))
                return true;
        }
        d += len + (d[len] != '\0');
    }
    bool found = false;
    int fd = open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            found = tc__ld_cache_lookup(map, (size_t)st.st_size, soname, out, size);
            munmap(map, (size_t)st.st_size);
        }
    }
    if (fd >= 0)
        close(fd);
    if (!found)
        out[0] = '\0';
    return found;
}

bool tc__read_ahead(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    const off_t chunk = (off_t)2 << 20;
    if (fstat(fd, &st) == 0)
        for (off_t at = 0; at < st.st_size; at += chunk)
            (void)posix_fadvise(fd, at, chunk, POSIX_FADV_WILLNEED);
    close(fd);
    return true;
}
