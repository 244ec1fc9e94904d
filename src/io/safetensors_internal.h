/* The safetensors header, parsed and checked (safetensors_parse.c), for the
 * reader, the writer and the fuzz harness. Not installed.
 *
 * A file is: an 8-byte little-endian header length N, N bytes of JSON, then
 * the data buffer. The JSON maps tensor names to {"dtype", "shape",
 * "data_offsets": [begin, end]} (offsets relative to the buffer) and may hold
 * "__metadata__", a map of strings to strings. */
#ifndef TCUDA_IO_SAFETENSORS_INTERNAL_H
#define TCUDA_IO_SAFETENSORS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "tcuda/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The reference implementation's limit on N. */
#define TC_SAFETENSORS_MAX_HEADER 100000000u

typedef struct tc__st_entry {
    char *name;
    tc_dtype dtype;
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
    uint64_t begin, end; /* bytes, relative to the data buffer */
} tc__st_entry;

typedef struct tc__st_header {
    tc__st_entry *entries; /* n, in the order of their data */
    size_t n;
    size_t *by_name; /* n indices of entries, sorted by name (strcmp) */
    char **meta;     /* n_meta key/value pairs (2 * n_meta strings), sorted by key */
    size_t n_meta;
    uint64_t data_start; /* 8 + N: where the buffer starts in the file */
    uint64_t data_size;  /* the buffer's bytes: the file's rest */
} tc__st_header;

/* Parses and checks the `size` bytes of a whole file at `file`; messages
 * start with `what` (the path). On success fills *out (free it with
 * tc__st_header_free); on failure writes nothing. Errors: TC_ERROR_IO (not a
 * well-formed safetensors file: the message says what is wrong and where),
 * TC_ERROR_DTYPE (a dtype tcuda has not, naming the tensor),
 * TC_ERROR_NOT_SUPPORTED (more than TC_MAX_DIMS dimensions), TC_ERROR_SHAPE
 * (a shape no tcuda tensor can have: tc__check_shape refuses it),
 * TC_ERROR_OUT_OF_MEMORY. */
tc_status tc__st_parse(const void *file, size_t size, const char *what, tc__st_header *out);
void tc__st_header_free(tc__st_header *h);
/* The entry of tensor `name`, or NULL. */
const tc__st_entry *tc__st_find(const tc__st_header *h, const char *name);
/* The value of metadata `key`, or NULL. */
const char *tc__st_meta_find(const tc__st_header *h, const char *key);
/* "F32", "BF16", ... for a tc_dtype. */
const char *tc__st_dtype_name(tc_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif
