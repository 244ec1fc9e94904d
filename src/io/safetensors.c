/* Reading safetensors files (include/tcuda/safetensors.h).
 *
 * The file is mapped whole, private and writable (copy-on-write: tensors
 * that view it may be written to without touching the file or crashing on a
 * read-only page). The mapping is reference-counted: the open file holds one
 * reference and every zero-copy storage one more (its on_free hook, see
 * tensor/storage.h, drops it), so close and the last tensor release may come
 * in either order. The header is parsed and checked once, at open
 * (safetensors_parse.c); nothing after that reads the header bytes. */
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

static tc_status map_file(const char *path, mapping **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tc__fail(TC_ERROR_IO, "%s: cannot open it: %s", path, strerror(errno));
    struct stat sb;
    tc_status st = TC_OK;
    if (fstat(fd, &sb) != 0)
        st = tc__fail(TC_ERROR_IO, "%s: cannot stat it: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = tc__fail(TC_ERROR_IO, "%s: not a regular file", path);
    else if (sb.st_size < 8)
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
    close(fd);
    if (st != TC_OK)
        return st;
    atomic_init(&m->refs, 1);
    *out = m;
    return TC_OK;
}

tc_status tc_safetensors_open(const char *path, tc_safetensors **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(path && out, "path or out is NULL");
    mapping *m = NULL;
    TC_TRY(map_file(path, &m));
    tc__st_header h;
    tc_status st = tc__st_parse(m->base, m->size, path, &h);
    if (st != TC_OK) {
        mapping_unref(m);
        return st;
    }
    tc_safetensors *f = tc__handle_get(&file_pool);
    if (!f) {
        tc__st_header_free(&h);
        mapping_unref(m);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    f->map = m;
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

tc_status tc_safetensors_get(const tc_safetensors *file, const char *name, tc_device device,
                             tc_tensor **out)
{
    TC_API_BEGIN;
    const tc__st_entry *e = NULL; /* set by find; GCC -O3 cannot see it */
    TC_TRY(find(file, name, &e));
    TC_CHECK_ARG(out, "out is NULL");
    tc_device dev;
    TC_TRY(tc__device_resolve(device, &dev));
    const char *at = (const char *)file->map->base + file->h.data_start + e->begin;
    size_t bytes = (size_t)(e->end - e->begin);
    tc_tensor *host;
    if ((uintptr_t)at % tc_dtype_size(e->dtype) == 0) {
        TC_TRY(view(file, e, &host));
    } else { /* kernels read whole aligned elements: copy the bytes first */
        TC_TRY(tc__new_tensor(e->ndim, e->sizes, e->dtype, (tc_device){TC_CPU, -1}, false, &host));
        memcpy(tc__data(host), at, bytes);
    }
    if (dev.type == TC_CPU) {
        *out = host;
        return TC_OK;
    }
    tc_status st = tc_tensor_to(host, dev, e->dtype, false, out);
    tc_tensor_release(host);
    return st;
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
