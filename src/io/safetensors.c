/* Reading safetensors files (include/tcuda/safetensors.h).
 *
 * The file is mapped whole, private and writable (copy-on-write: tensors
 * that view it may be written to without touching the file or crashing on a
 * read-only page). The mapping is reference-counted: the open file holds one
 * reference and every zero-copy storage one more (its on_free hook, see
 * tensor/storage.h, drops it), so close and the last tensor release may come
 * in either order. The header is parsed and checked once, at open
 * (safetensors_parse.c); nothing after that reads the header bytes.
 *
 * A view of a mapping dies with SIGBUS when another process truncates the
 * file under it; nothing in a library can turn that into an error. So the
 * file stays open too, and tc_safetensors_get_copy reads it with pread,
 * where truncation is a short read and TC_ERROR_IO. Opening never blocks:
 * the path's type is checked before the open (a FIFO's would wait for a
 * writer forever) and what was opened is checked again. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/handle_pool.h"
#include "tensor/tensor_internal.h"
#include "safetensors_internal.h"
#include "tcuda/safetensors.h"

#define TC_SAFETENSORS_MAGIC 0x5afe7e11u

typedef struct mapping {
    atomic_int refs;
    void *base;
    size_t size;
} mapping;

struct tc_safetensors {
    uint32_t magic; /* first: handle_pool.h needs it there */
    mapping *map;
    int fd;     /* the file, open for tc_safetensors_get_copy's reads */
    char *path; /* as opened, for messages */
    tc__st_header h;
};

static tc__handle_pool file_pool = TC_HANDLE_POOL_INIT(tc_safetensors);

static tc_status check_file(const tc_safetensors *f)
{
    return tc__handle_check(f, TC_SAFETENSORS_MAGIC, "tc_safetensors");
}

static void mapping_unref(mapping *m)
{
    if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
        return;
    munmap(m->base, m->size);
    free(m);
}

/* What a file that is not a regular file is, for messages. */
static const char *file_kind(mode_t mode)
{
    return S_ISDIR(mode)    ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
}

static tc_status check_regular(const char *path, const struct stat *sb)
{
    if (S_ISREG(sb->st_mode))
        return TC_OK;
    return tc__fail(TC_ERROR_IO,
                    "%s: is %s, not a regular file; safetensors are read from regular "
                    "files only",
                    path, file_kind(sb->st_mode));
}

/* Opens `path` for reading without ever blocking: the type is checked before
 * the open (a FIFO's open waits for a writer) and again after it, on what was
 * opened, through O_NONBLOCK (the path may have changed in between). */
static tc_status open_regular(const char *path, int *fd_out, struct stat *sb)
{
    if (stat(path, sb) != 0)
        return tc__fail(TC_ERROR_IO, "%s: cannot open it: %s", path, strerror(errno));
    TC_TRY(check_regular(path, sb));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return tc__fail(TC_ERROR_IO, "%s: cannot open it: %s", path, strerror(errno));
    tc_status st = TC_OK;
    if (fstat(fd, sb) != 0)
        st = tc__fail(TC_ERROR_IO, "%s: cannot stat it: %s", path, strerror(errno));
    else
        st = check_regular(path, sb);
    if (st != TC_OK) {
        close(fd);
        return st;
    }
    *fd_out = fd;
    return TC_OK;
}

/* Maps the file; on success *fd_out stays open for the copying reads. */
static tc_status map_file(const char *path, mapping **out, int *fd_out)
{
    int fd = -1;
    struct stat sb;
    TC_TRY(open_regular(path, &fd, &sb));
    tc_status st = TC_OK;
    if (sb.st_size < 8)
        st = tc__fail(TC_ERROR_IO,
                      "%s: the file has %lld bytes, fewer than the 8 of the header "
                      "length",
                      path, (long long)sb.st_size);
    mapping *m = NULL;
    if (st == TC_OK && !(m = calloc(1, sizeof *m)))
        st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    if (st == TC_OK) {
        m->size = (size_t)sb.st_size;
        m->base = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (m->base == MAP_FAILED) {
            st = tc__fail(TC_ERROR_IO, "%s: cannot map its %zu bytes: %s", path, m->size,
                          strerror(errno));
            free(m);
        }
    }
    if (st != TC_OK) {
        close(fd);
        return st;
    }
    atomic_init(&m->refs, 1);
    *out = m;
    *fd_out = fd;
    return TC_OK;
}

tc_status tc_safetensors_open(const char *path, tc_safetensors **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(path && out, "path or out is NULL");
    mapping *m = NULL;
    int fd = -1;
    TC_TRY(map_file(path, &m, &fd));
    tc__st_header h;
    tc_status st = tc__st_parse(m->base, m->size, path, &h);
    tc_safetensors *f = NULL;
    char *name = NULL;
    if (st == TC_OK && (!(name = strdup(path)) || !(f = tc__handle_get(&file_pool)))) {
        tc__st_header_free(&h);
        st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    if (st != TC_OK) {
        free(name);
        mapping_unref(m);
        close(fd);
        return st;
    }
    f->map = m;
    f->fd = fd;
    f->path = name;
    f->h = h;
    f->magic = TC_SAFETENSORS_MAGIC;
    *out = f;
    return TC_OK;
}

tc_status tc_safetensors_close(tc_safetensors *file)
{
    TC_API_BEGIN;
    TC_TRY(check_file(file));
    tc__st_header_free(&file->h);
    mapping_unref(file->map);
    close(file->fd);
    free(file->path);
    tc__handle_put(&file_pool, file);
    return TC_OK;
}

/* Counts fit an int: a header is at most 100 MB and an entry takes more than
 * 20 bytes of it (safetensors_parse.c). */
int tc_safetensors_count(const tc_safetensors *file)
{
    return tc__handle_live(file, TC_SAFETENSORS_MAGIC) ? (int)file->h.n : 0;
}

const char *tc_safetensors_name(const tc_safetensors *file, int i)
{
    if (!tc__handle_live(file, TC_SAFETENSORS_MAGIC) || i < 0 || (size_t)i >= file->h.n)
        return NULL;
    return file->h.entries[i].name;
}

static tc_status find(const tc_safetensors *file, const char *name, const tc__st_entry **out)
{
    TC_TRY(check_file(file));
    TC_CHECK_ARG(name, "name is NULL");
    const tc__st_entry *e = tc__st_find(&file->h, name);
    TC_CHECK_ARG(e, "the file has no tensor named '%s'", name);
    *out = e;
    return TC_OK;
}

tc_status tc_safetensors_info(const tc_safetensors *file, const char *name, tc_dtype *dtype,
                              int *ndim, int64_t *sizes)
{
    TC_API_BEGIN;
    const tc__st_entry *e = NULL; /* set by find; GCC -O3 cannot see it */
    TC_TRY(find(file, name, &e));
    if (dtype)
        *dtype = e->dtype;
    if (ndim)
        *ndim = e->ndim;
    if (sizes)
        memcpy(sizes, e->sizes, (size_t)e->ndim * sizeof *sizes);
    return TC_OK;
}

static void storage_unmap(tc__storage *s) { mapping_unref(s->ctx); }

/* A CPU tensor viewing the entry's bytes in the mapping. */
static tc_status view(const tc_safetensors *file, const tc__st_entry *e, tc_tensor **out)
{
    int64_t numel; /* the header's check (safetensors_parse.c) made this one already */
    TC_TRY(tc__check_shape(e->ndim, e->sizes, tc_dtype_size(e->dtype), &numel));
    tc__storage *s = calloc(1, sizeof *s);
    if (!s)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    atomic_init(&s->refcount, 1);
    s->device = (tc_device){TC_CPU, -1};
    s->data = (char *)file->map->base + file->h.data_start + e->begin;
    s->bytes = (size_t)(e->end - e->begin);
    s->on_free = storage_unmap;
    s->ctx = file->map;
    atomic_fetch_add_explicit(&file->map->refs, 1, memory_order_relaxed);
    int64_t strides[TC_MAX_DIMS];
    tc__contiguous_strides(e->ndim, e->sizes, strides);
    tc_tensor tmp = {.magic = TC_TENSOR_MAGIC, .dtype = e->dtype, .storage = s};
    tc_status st = tc__make_view(&tmp, e->ndim, e->sizes, strides, 0, out);
    tc__storage_release(s); /* the view holds it now (or, on failure, this unmaps) */
    return st;
}

/* The entry's bytes read into `dst` from the file itself (pread, not the
 * mapping): a file that another process truncated gives a short read and an
 * error here, where a read of the mapping would raise SIGBUS. */
static tc_status read_bytes(const tc_safetensors *file, const tc__st_entry *e, void *dst)
{
    uint64_t at = file->h.data_start + e->begin, left = e->end - e->begin;
    char *p = dst;
    while (left) {
        size_t chunk = left < ((size_t)1 << 30) ? (size_t)left : (size_t)1 << 30;
        ssize_t got = pread(file->fd, p, chunk, (off_t)at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return tc__fail(TC_ERROR_IO, "%s: reading tensor '%s' at byte %llu failed: %s",
                            file->path, e->name, (unsigned long long)at, strerror(errno));
        if (got == 0)
            return tc__fail(TC_ERROR_IO,
                            "%s: tensor '%s': the file ends at byte %llu, inside the tensor's "
                            "bytes [%llu, %llu): it was truncated since it was opened",
                            file->path, e->name, (unsigned long long)at,
                            (unsigned long long)(file->h.data_start + e->begin),
                            (unsigned long long)(file->h.data_start + e->end));
        p += got;
        at += (uint64_t)got;
        left -= (uint64_t)got;
    }
    return TC_OK;
}

/* The entry as a CPU tensor: a view of the mapping, or (copy, or bytes not
 * aligned to their element size: kernels read whole aligned elements) a
 * tensor of its own. */
static tc_status host_tensor(const tc_safetensors *file, const tc__st_entry *e, bool copy,
                             tc_tensor **out)
{
    const char *at = (const char *)file->map->base + file->h.data_start + e->begin;
    if (!copy && (uintptr_t)at % tc_dtype_size(e->dtype) == 0)
        return view(file, e, out);
    tc_tensor *t;
    TC_TRY(tc__new_tensor(e->ndim, e->sizes, e->dtype, (tc_device){TC_CPU, -1}, false, &t));
    tc_status st = TC_OK;
    if (copy)
        st = read_bytes(file, e, tc__data(t));
    else
        memcpy(tc__data(t), at, (size_t)(e->end - e->begin));
    if (st != TC_OK) {
        tc_tensor_release(t);
        return st;
    }
    *out = t;
    return TC_OK;
}

static tc_status get(const tc_safetensors *file, const char *name, tc_device device, bool copy,
                     tc_tensor **out)
{
    const tc__st_entry *e = NULL; /* set by find; GCC -O3 cannot see it */
    TC_TRY(find(file, name, &e));
    TC_CHECK_ARG(out, "out is NULL");
    tc_device dev;
    TC_TRY(tc__device_resolve(device, &dev));
    tc_tensor *host;
    TC_TRY(host_tensor(file, e, copy, &host));
    if (dev.type == TC_CPU) {
        *out = host;
        return TC_OK;
    }
    tc_status st = tc_tensor_to(host, dev, e->dtype, false, out);
    tc_tensor_release(host);
    return st;
}

tc_status tc_safetensors_get(const tc_safetensors *file, const char *name, tc_device device,
                             tc_tensor **out)
{
    TC_API_BEGIN;
    return get(file, name, device, false, out);
}

tc_status tc_safetensors_get_copy(const tc_safetensors *file, const char *name, tc_device device,
                                  tc_tensor **out)
{
    TC_API_BEGIN;
    return get(file, name, device, true, out);
}

int tc_safetensors_metadata_count(const tc_safetensors *file)
{
    return tc__handle_live(file, TC_SAFETENSORS_MAGIC) ? (int)file->h.n_meta : 0;
}

const char *tc_safetensors_metadata_key(const tc_safetensors *file, int i)
{
    if (!tc__handle_live(file, TC_SAFETENSORS_MAGIC) || i < 0 || (size_t)i >= file->h.n_meta)
        return NULL;
    return file->h.meta[2 * (size_t)i];
}

tc_status tc_safetensors_metadata(const tc_safetensors *file, const char *key, const char **value)
{
    TC_API_BEGIN;
    TC_TRY(check_file(file));
    TC_CHECK_ARG(key && value, "key or value is NULL");
    *value = tc__st_meta_find(&file->h, key);
    return TC_OK;
}
