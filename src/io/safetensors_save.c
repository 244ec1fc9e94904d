/* Writing safetensors files (tc_safetensors_save, include/tcuda/safetensors.h).
 *
 * Everything is checked before the first byte is written. Tensors are laid
 * out as the reference writer does (decreasing element size, then name), so
 * with the header padded to a multiple of 8 every tensor's bytes are aligned
 * to its element size and read back zero-copy. The file is written to a
 * temporary beside `path` and renamed over it only once complete, so a
 * failure never leaves a half-written file under the name.
 *
 * What the rename replaces is decided first (resolve_target): a regular file
 * keeps its permission bits; a symbolic link is written through (the
 * temporary goes beside the file it leads to, which is replaced, and the link
 * stays); anything else (a FIFO, a device, a directory, a link to nothing) is
 * refused before a byte is written. A new file gets 0666 less the umask, as
 * fopen gives. A hard link is broken by the rename: the path names the new
 * file, other links keep the old one. The check and the rename are not one
 * step: a path changed in between by another process gets what rename does. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "tensor/tensor_internal.h"
#include "json.h"
#include "safetensors_internal.h"
#include "tcuda/safetensors.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this writer copies host memory as it is"
#endif

typedef struct item {
    const char *name;
    const tc_tensor *t;
    uint64_t bytes;
} item;

static int by_layout(const void *a, const void *b)
{
    const item *x = a, *y = b;
    size_t sx = tc_dtype_size(x->t->dtype), sy = tc_dtype_size(y->t->dtype);
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void put_string(tc__strbuf *b, const char *s)
{
    tc__strbuf_printf(b, "\"");
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            tc__strbuf_printf(b, "\\%c", c);
        else if (c < 0x20)
            tc__strbuf_printf(b, "\\u%04x", c);
        else
            tc__strbuf_printf(b, "%c", c);
    }
    tc__strbuf_printf(b, "\"");
}

static tc_status check_name(const char *what, size_t i, const char *s)
{
    TC_CHECK_ARG(s, "%s %zu is NULL", what, i);
    TC_CHECK_ARG(tc__utf8_valid(s, strlen(s)), "%s %zu is not valid UTF-8", what, i);
    return TC_OK;
}

/* The metadata pairs, checked; their count in *n. */
static tc_status check_metadata(const char *const *md, size_t *n)
{
    size_t k = 0;
    for (; md && md[2 * k]; k++) {
        TC_TRY(check_name("metadata key", k, md[2 * k]));
        TC_CHECK_ARG(md[2 * k + 1], "metadata key '%s' has no value (NULL)", md[2 * k]);
        TC_TRY(check_name("metadata value", k, md[2 * k + 1]));
        for (size_t j = 0; j < k; j++)
            TC_CHECK_ARG(strcmp(md[2 * j], md[2 * k]), "metadata key '%s' is given twice",
                         md[2 * k]);
    }
    *n = k;
    return TC_OK;
}

static tc_status check_items(size_t n, const char *const *names, const tc_tensor *const *tensors,
                             item *items)
{
    for (size_t i = 0; i < n; i++) {
        TC_TRY(check_name("name", i, names[i]));
        TC_CHECK_ARG(strcmp(names[i], "__metadata__"),
                     "name %zu is '__metadata__', the key the format keeps for metadata", i);
        char what[40];
        snprintf(what, sizeof what, "tensors[%zu]", i);
        TC_TRY(tc__tensor_check(tensors[i], what));
        const tc_tensor *t = tensors[i];
        items[i] = (item){names[i], t,
                          (uint64_t)tc__numel(t->ndim, t->sizes) * tc_dtype_size(t->dtype)};
    }
    qsort(items, n, sizeof *items, by_layout);
    const char **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < n; i++)
        sorted[i] = names[i];
    qsort(sorted, n, sizeof *sorted, by_string);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) {
            tc_status st = tc__fail(TC_ERROR_INVALID_ARGUMENT, "name '%s' is given twice",
                                    sorted[i]);
            free(sorted);
            return st;
        }
    free(sorted);
    return TC_OK;
}

/* The header's JSON, padded with spaces so that 8 + its length is a
 * multiple of 8. */
static tc_status header_json(const item *items, size_t n, const char *const *md, size_t n_md,
                             tc__strbuf *b)
{
    tc__strbuf_printf(b, "{");
    if (n_md) {
        tc__strbuf_printf(b, "\"__metadata__\":{");
        for (size_t k = 0; k < n_md; k++) {
            if (k)
                tc__strbuf_printf(b, ",");
            put_string(b, md[2 * k]);
            tc__strbuf_printf(b, ":");
            put_string(b, md[2 * k + 1]);
        }
        tc__strbuf_printf(b, "}");
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const tc_tensor *t = items[i].t;
        if (i || n_md)
            tc__strbuf_printf(b, ",");
        put_string(b, items[i].name);
        tc__strbuf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", tc__st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            tc__strbuf_printf(b, d ? ",%lld" : "%lld", (long long)t->sizes[d]);
        tc__strbuf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at,
                          (unsigned long long)(at + items[i].bytes));
        at += items[i].bytes;
    }
    tc__strbuf_printf(b, "}");
    while (!b->failed && b->len % 8)
        tc__strbuf_printf(b, " ");
    if (b->failed)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory writing the header");
    return TC_OK;
}

/* The tensor's values, row-major: straight from a contiguous CPU tensor,
 * else through a host buffer. */
static tc_status write_tensor(FILE *fp, const char *path, const item *it)
{
    if (!it->bytes)
        return TC_OK;
    const tc_tensor *t = it->t;
    void *buf = NULL;
    const void *src;
    if (t->storage->device.type == TC_CPU && tc__is_contiguous(t)) {
        src = tc__data(t);
    } else {
        buf = malloc((size_t)it->bytes);
        if (!buf)
            return tc__fail(TC_ERROR_OUT_OF_MEMORY, "could not allocate %llu bytes to copy '%s'",
                            (unsigned long long)it->bytes, it->name);
        tc_status st = tc_tensor_to_host(t, t->dtype, buf);
        if (st != TC_OK) {
            free(buf);
            return st;
        }
        src = buf;
    }
    size_t done = fwrite(src, 1, (size_t)it->bytes, fp);
    free(buf);
    if (done != it->bytes)
        return tc__fail(TC_ERROR_IO, "%s: writing tensor '%s' failed: %s", path, it->name,
                        strerror(errno));
    return TC_OK;
}

static tc_status write_all(FILE *fp, const char *path, const tc__strbuf *hdr, const item *items,
                           size_t n)
{
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)hdr->len >> (8 * i));
    if (fwrite(len, 1, 8, fp) != 8 || fwrite(hdr->p, 1, hdr->len, fp) != hdr->len)
        return tc__fail(TC_ERROR_IO, "%s: writing the header failed: %s", path, strerror(errno));
    for (size_t i = 0; i < n; i++)
        TC_TRY(write_tensor(fp, path, &items[i]));
    return TC_OK;
}

/* What the save replaces: the file at `path`, or (a symbolic link) the file
 * it leads to, a regular file or nothing. *target is malloc'd; *had tells
 * whether a file was there and *mode is its permission bits. */
static tc_status resolve_target(const char *path, char **target, bool *had, mode_t *mode)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno != ENOENT)
            return tc__fail(TC_ERROR_IO, "%s: cannot stat it: %s", path, strerror(errno));
        *had = false;
        *target = strdup(path);
    } else if (S_ISLNK(sb.st_mode)) {
        /* written through: the link stays, the file it names is replaced */
        char *real = realpath(path, NULL);
        if (!real)
            return tc__fail(TC_ERROR_IO,
                            "%s: a symbolic link that leads to no file (%s); tcuda writes "
                            "through a link to an existing file only",
                            path, strerror(errno));
        if (stat(real, &sb) != 0) {
            tc_status st = tc__fail(TC_ERROR_IO, "%s: cannot stat %s, where it leads: %s", path,
                                    real, strerror(errno));
            free(real);
            return st;
        }
        *had = true;
        *target = real;
    } else {
        *had = true;
        *target = strdup(path);
    }
    if (!*target)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    if (*had && !S_ISREG(sb.st_mode)) {
        const char *kind = S_ISDIR(sb.st_mode)    ? "a directory"
                           : S_ISFIFO(sb.st_mode) ? "a FIFO"
                           : S_ISCHR(sb.st_mode)  ? "a character device"
                           : S_ISBLK(sb.st_mode)  ? "a block device"
                           : S_ISSOCK(sb.st_mode) ? "a socket"
                                                  : "not a regular file";
        tc_status st = tc__fail(TC_ERROR_IO,
                                "%s: is %s%s%s; tcuda replaces only a regular file (or writes a "
                                "new one)",
                                path, kind, strcmp(*target, path) ? " through a link to " : "",
                                strcmp(*target, path) ? *target : "");
        free(*target);
        *target = NULL;
        return st;
    }
    *mode = sb.st_mode & 07777;
    return TC_OK;
}

/* A new, empty file `<target>.tmp.<random>` created as fopen creates files:
 * mode 0666 less the umask (mkstemp's 0600 would hide a new file from the
 * group and others that the umask lets see it). */
static tc_status create_temp(const char *path, const char *target, char **name, int *fd_out)
{
    for (int tries = 0; tries < 100; tries++) {
        uint64_t r = 0;
        TC_TRY(tc__os_entropy(&r));
        tc__strbuf tmp = {0};
        tc__strbuf_printf(&tmp, "%s.tmp.%012llx", target,
                          (unsigned long long)(r & 0xffffffffffffull));
        if (tmp.failed)
            return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
        int fd = open(tmp.p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *name = tmp.p;
            *fd_out = fd;
            return TC_OK;
        }
        int err = errno;
        free(tmp.p);
        if (err != EEXIST)
            return tc__fail(TC_ERROR_IO, "%s: cannot create a temporary file beside it: %s", path,
                            strerror(err));
    }
    return tc__fail(TC_ERROR_IO, "%s: cannot create a temporary file beside it: 100 names taken",
                    path);
}

/* Writes to a new temporary beside the target, then renames it over it. */
static tc_status write_file(const char *path, const tc__strbuf *hdr, const item *items, size_t n)
{
    char *target = NULL, *tmp = NULL;
    bool had = false;
    mode_t mode = 0;
    int fd = -1;
    TC_TRY(resolve_target(path, &target, &had, &mode));
    tc_status st = create_temp(path, target, &tmp, &fd);
    if (st != TC_OK) {
        free(target);
        return st;
    }
    if (had && fchmod(fd, mode) != 0) /* the replaced file's permissions, not the umask's */
        st = tc__fail(TC_ERROR_IO, "%s: cannot give the new file mode %04o: %s", path,
                      (unsigned)mode, strerror(errno));
    FILE *fp = st == TC_OK ? fdopen(fd, "wb") : NULL;
    if (st == TC_OK)
        st = fp ? write_all(fp, path, hdr, items, n)
                : tc__fail(TC_ERROR_IO, "%s: fdopen: %s", path, strerror(errno));
    if (fp && fflush(fp) != 0 && st == TC_OK)
        st = tc__fail(TC_ERROR_IO, "%s: writing failed: %s", path, strerror(errno));
    if (st == TC_OK && fsync(fd) != 0)
        st = tc__fail(TC_ERROR_IO, "%s: fsync failed: %s", path, strerror(errno));
    if (fp ? fclose(fp) != 0 : close(fd) != 0)
        if (st == TC_OK)
            st = tc__fail(TC_ERROR_IO, "%s: closing failed: %s", path, strerror(errno));
    if (st == TC_OK && rename(tmp, target) != 0)
        st = tc__fail(TC_ERROR_IO, "%s: cannot rename the finished temporary over it: %s", path,
                      strerror(errno));
    if (st != TC_OK)
        unlink(tmp);
    free(tmp);
    free(target);
    return st;
}

tc_status tc_safetensors_save(const char *path, const char *const *names,
                              const tc_tensor *const *tensors, int n, const char *const *metadata)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(path, "path is NULL");
    TC_CHECK_ARG(path[0], "path is empty");
    TC_CHECK_ARG(n >= 0, "n is %d, below 0", n);
    TC_CHECK_ARG(n == 0 || (names && tensors), "names or tensors is NULL (n is %d)", n);
    size_t count = (size_t)n;
    size_t n_md = 0;
    TC_TRY(check_metadata(metadata, &n_md));
    item *items = malloc((count ? count : 1) * sizeof *items);
    if (!items)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    tc__strbuf hdr = {0};
    tc_status st = check_items(count, names, tensors, items);
    if (st == TC_OK)
        st = header_json(items, count, metadata, n_md, &hdr);
    if (st == TC_OK)
        st = write_file(path, &hdr, items, count);
    free(hdr.p);
    free(items);
    return st;
}
