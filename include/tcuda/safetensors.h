/* tcuda: reading and writing safetensors files, the format models ship in.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON naming
 * each tensor's dtype, shape and byte range, then the tensors' bytes. Opening
 * a file maps it into memory and checks the whole header at once; tensors
 * read from it on the CPU are views of the mapping (no copy), on a GPU
 * copies. dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL (tcuda's ten).
 *
 * The handle is checked as every tcuda handle is: a closed or foreign file
 * gives TC_ERROR_INVALID_HANDLE, never a crash. Messages name the file and
 * what is wrong in it. */
#ifndef TCUDA_SAFETENSORS_H
#define TCUDA_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* ---- reading ----------------------------------------------------------------- */

/* An open file. */
typedef struct tc_safetensors tc_safetensors;

/* Opens the file at `path` (mapped read-only from the file, copy-on-write in
 * memory) and checks its header strictly: the length within the file (and
 * at most 100 MB), valid JSON of exactly the format's shape (no unknown keys,
 * no key twice, names and metadata valid UTF-8 without NUL), every tensor's
 * bytes = its shape times its dtype's size, offsets in range, tensors not
 * overlapping and covering the data without holes. The caller closes *out
 * with tc_safetensors_close. Errors: TC_ERROR_INVALID_ARGUMENT (NULL path or
 * out), TC_ERROR_IO (the file cannot be read, or is not well-formed: the
 * message says where and why), TC_ERROR_DTYPE (a dtype tcuda has not,
 * naming the tensor), TC_ERROR_NOT_SUPPORTED (a tensor of more than
 * TC_MAX_DIMS dimensions), TC_ERROR_OUT_OF_MEMORY. */
TCUDA_API tc_status tc_safetensors_open(const char *path, tc_safetensors **out);
/* Closes the file. Tensors got from it stay valid: the mapping goes when the
 * file is closed and every such tensor is released. NULL is
 * TC_ERROR_INVALID_ARGUMENT, a closed file TC_ERROR_INVALID_HANDLE. */
TCUDA_API tc_status tc_safetensors_close(tc_safetensors *file);

/* The number of tensors, and the name of tensor i (0 <= i < count), in the
 * order of their data in the file. The names belong to the file (valid until
 * it is closed). These cannot fail: 0 and NULL for a NULL, closed or foreign
 * file and for i out of range. */
TCUDA_API int tc_safetensors_count(const tc_safetensors *file);
TCUDA_API const char *tc_safetensors_name(const tc_safetensors *file, int i);

/* The dtype, ndim and sizes (TC_MAX_DIMS entries room) of tensor `name`;
 * any of the three may be NULL when not wanted. TC_ERROR_INVALID_ARGUMENT
 * for a NULL name or a name the file has not. */
TCUDA_API tc_status tc_safetensors_info(const tc_safetensors *file, const char *name,
                                        tc_dtype *dtype, int *ndim, int64_t *sizes);

/* Tensor `name` as a new tensor (caller releases) on `device`. On the CPU, a
 * contiguous view of the mapped file (zero-copy; writes go to this process's
 * copy-on-write pages, never to the file, and are seen by other tensors of
 * the same open file); a tensor whose bytes are not aligned to its element
 * size in the file is copied instead. On a GPU, a copy (the call returns when
 * the data has left the file). Errors: TC_ERROR_INVALID_ARGUMENT (NULL name or
 * out, a name the file has not, a bad device), the device's, and
 * TC_ERROR_OUT_OF_MEMORY. */
TCUDA_API tc_status tc_safetensors_get(const tc_safetensors *file, const char *name,
                                       tc_device device, tc_tensor **out);

/* The header's "__metadata__" (string to string): the number of entries and
 * key i (sorted by key), which cannot fail (0 and NULL for a bad file or i
 * out of range); and the value of `key` in *value (owned by the file; NULL,
 * with TC_OK, when the file has no such key). */
TCUDA_API int tc_safetensors_metadata_count(const tc_safetensors *file);
TCUDA_API const char *tc_safetensors_metadata_key(const tc_safetensors *file, int i);
TCUDA_API tc_status tc_safetensors_metadata(const tc_safetensors *file, const char *key,
                                            const char **value);

/* ---- writing ----------------------------------------------------------------- */

/* Writes n tensors (any device, dtype and strides: their values are copied to
 * the host, row-major) under names[i] to `path`, replacing the file only once
 * the new one is complete (written to a temporary beside it, then renamed).
 * `metadata` is NULL or a NULL-terminated list of key, value, key, value, ...
 * strings. The tensors are laid out as the reference writer does: by
 * decreasing element size, then name, so each is aligned to its element
 * size; the header is padded with spaces to a multiple of 8 bytes.
 * Errors: TC_ERROR_INVALID_ARGUMENT (NULL path, a negative n, NULL names or
 * tensors with n > 0,
 * a NULL, duplicate, "__metadata__" or non-UTF-8 name or key, a
 * key without value), TC_ERROR_INVALID_HANDLE (a released tensor),
 * TC_ERROR_IO (the file cannot be written), the devices'. */
TCUDA_API tc_status tc_safetensors_save(const char *path, const char *const *names,
                                        const tc_tensor *const *tensors, int n,
                                        const char *const *metadata);

TCUDA_EXTERN_C_END

#endif
