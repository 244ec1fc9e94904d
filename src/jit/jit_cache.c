/* Keys and the disk cache of compiled jiterator binaries.
 *
 * A key is a 128-bit hash (two 64-bit hashes with different seeds) of every
 * input that changes the binary, each part length-prefixed so that parts
 * cannot run into each other: the generated source (which holds the user's
 * code, the dtype, the arity, the contiguity class), the target (sm_XX or
 * the host compiler's identity), the compiler's version and flags, and the
 * tcuda version. A file <key>.<ext> is
 *     header: magic "TCJIT01\n", key (32 hex), payload size, checksum of
 *             note + payload, note length
 *     note (e.g. the NVRTC version that produced it), payload
 * and is loaded only when all of these agree with what was read; anything
 * else (truncated, corrupt, another key) is removed and treated as a miss.
 * A name that is not a regular file (a FIFO, a device, a directory) is a
 * miss too, found without blocking and never read.
 * Writers write a temporary file in the same directory and rename it over
 * the entry, so concurrent writers of one entry each install a whole file
 * and readers never see a partial one. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hash.h"
#include "jit_internal.h"

static const char file_magic[8] = {'T', 'C', 'J', 'I', 'T', '0', '1', '\n'};

typedef struct file_header {
    char magic[8];
    char key[TC__JIT_KEY_LEN];
    uint64_t size;
    uint64_t checksum;
    uint32_t note_len;
    uint32_t pad;
} file_header;

#define NOTE_MAX 256

void tc__jit_key(const char *const *parts, int nparts, char *out)
{
    uint64_t h[2] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < nparts; i++) {
            const char *s = parts[i] ? parts[i] : "";
            uint64_t len = strlen(s);
            h[k] = tc__hash64(&len, sizeof len, h[k]);
            h[k] = tc__hash64(s, (size_t)len, h[k]);
        }
    snprintf(out, TC__JIT_KEY_LEN + 1, "%016llx%016llx", (unsigned long long)h[0],
             (unsigned long long)h[1]);
}

bool tc__jit_cache_dir(char *buf, size_t n)
{
    const char *env = getenv("TCUDA_JIT_CACHE_DIR");
    if (env) {
        if (!env[0])
            return false;
        return (size_t)snprintf(buf, n, "%s", env) < n;
    }
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/')
        return (size_t)snprintf(buf, n, "%s/tcuda/jit", xdg) < n;
    const char *home = getenv("HOME");
    if (!home || !home[0]) {
        struct passwd *pw = getpwuid(getuid());
        home = pw ? pw->pw_dir : NULL;
    }
    if (!home || !home[0])
        return false;
    return (size_t)snprintf(buf, n, "%s/.cache/tcuda/jit", home) < n;
}

static bool entry_path(char *buf, size_t n, const char *dir, const char *key, const char *ext)
{
    return (size_t)snprintf(buf, n, "%s/%s.%s", dir, key, ext) < n;
}

/* All n bytes read (or written): false on an error or an early end. */
static bool io_all(int fd, void *buf, size_t n, bool write_it)
{
    char *p = buf;
    while (n) {
        ssize_t r = write_it ? write(fd, p, n) : read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}
static bool read_all(int fd, void *buf, size_t n) { return io_all(fd, buf, n, false); }
static bool write_all(int fd, const void *buf, size_t n)
{
    return io_all(fd, (void *)buf, n, true);
}

static uint64_t checksum(const void *note, size_t note_len, const void *data, size_t size)
{
    uint64_t h = tc__hash64(note, note_len, 0x5bd1e995ull);
    return tc__hash64(data, size, h);
}

/* Reads and checks the file at fd; returns the payload or NULL. */
static void *read_entry(int fd, const char *key, size_t *size, char *note, size_t note_size)
{
    struct stat sb;
    file_header h;
    if (fstat(fd, &sb) != 0 || !read_all(fd, &h, sizeof h))
        return NULL;
    if (memcmp(h.magic, file_magic, sizeof h.magic) || memcmp(h.key, key, TC__JIT_KEY_LEN) ||
        h.note_len > NOTE_MAX || h.size > (uint64_t)SIZE_MAX / 2 ||
        (uint64_t)sb.st_size != sizeof h + h.note_len + h.size)
        return NULL;
    char nbuf[NOTE_MAX + 1];
    void *data = malloc(h.size ? (size_t)h.size : 1);
    if (!data)
        return NULL;
    if (!read_all(fd, nbuf, h.note_len) || !read_all(fd, data, (size_t)h.size) ||
        checksum(nbuf, h.note_len, data, (size_t)h.size) != h.checksum) {
        free(data);
        return NULL;
    }
    nbuf[h.note_len] = '\0';
    if (note && note_size)
        snprintf(note, note_size, "%s", nbuf);
    *size = (size_t)h.size;
    return data;
}

bool tc__jit_cache_read(const char *dir, const char *key, const char *ext, void **data,
                        size_t *size, char *note, size_t note_size)
{
    char path[PATH_MAX];
    if (!entry_path(path, sizeof path, dir, key, ext))
        return false;
    /* O_NONBLOCK: opening a FIFO put at this name must not wait for a
     * writer; only a regular file is an entry, anything else is a miss
     * (left alone: the next write's rename replaces it where it can) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return false;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return false;
    }
    void *p = read_entry(fd, key, size, note, note_size);
    close(fd);
    if (!p) {
        /* damaged: remove it, so that the next compile installs a good one
         * (a writer's rename may have replaced it meanwhile: then this removes
         * a good file, which costs one compile, never a wrong load) */
        (void)unlink(path);
        return false;
    }
    *data = p;
    return true;
}

/* mkdir -p */
static bool make_dirs(const char *dir)
{
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof buf, "%s", dir) >= sizeof buf)
        return false;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return false;
        *p = '/';
    }
    return mkdir(buf, 0755) == 0 || errno == EEXIST;
}

bool tc__jit_cache_write(const char *dir, const char *key, const char *ext, const void *data,
                         size_t size, const char *note)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    if (!entry_path(path, sizeof path, dir, key, ext) || !make_dirs(dir) ||
        (size_t)snprintf(tmp, sizeof tmp, "%s/.%s.%s.XXXXXX", dir, key, ext) >= sizeof tmp)
        return false;
    int fd = mkstemp(tmp);
    if (fd < 0)
        return false;
    size_t note_len = note ? strlen(note) : 0;
    if (note_len > NOTE_MAX)
        note_len = NOTE_MAX;
    file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, file_magic, sizeof h.magic);
    memcpy(h.key, key, TC__JIT_KEY_LEN);
    h.size = size;
    h.note_len = (uint32_t)note_len;
    h.checksum = checksum(note ? note : "", note_len, data, size);
    bool ok = write_all(fd, &h, sizeof h) && write_all(fd, note ? note : "", note_len) &&
              write_all(fd, data, size);
    ok = close(fd) == 0 && ok;
    if (ok && rename(tmp, path) == 0)
        return true;
    (void)unlink(tmp);
    return false;
}
