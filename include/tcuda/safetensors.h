/* tcuda: reading and writing safetensors files, the format models ship in.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON naming
 * each tensor's dtype, shape and byte range, then the tensors' bytes. Opening
 * a file maps it into memory and checks the whole header at once; tensors
 * read from it with tc_safetensors_get on the CPU are views of the mapping
 * (no copy), on a GPU copies; tc_safetensors_get_copy always copies.
 * dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL (tcuda's ten).
 *
 * A view of the mapping reads the file's pages: if another process truncates
 * the file while such a tensor lives, reading the lost part raises SIGBUS and
 * kills the process (the operating system's rule for mappings; no library
 * can turn it into an error). Files that may change under the reader are read
 * with tc_safetensors_get_copy, which reads the file itself and answers
 * TC_ERROR_IO for a truncated file.
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

/* Opens the regular file at `path` (mapped read-only from the file,
 * copy-on-write in memory; the file also stays open, one descriptor, until
 * tc_safetensors_close) and checks its header strictly: the length within
 * the file (and at most 100 MB), valid JSON of exactly the format's shape (no
 * unknown keys, no key twice, names and metadata valid UTF-8 without NUL),
 * every tensor's bytes = its shape times its dtype's size, every shape one a
 * tcuda tensor can have (as tc_tensor_empty checks it), offsets in range,
 * tensors not overlapping and covering the data without holes. Never blocks:
 * a FIFO, device, socket or directory is refused before it is opened. The
 * caller closes *out with tc_safetensors_close. Errors:
 * TC_ERROR_INVALID_ARGUMENT (NULL path or out), TC_ERROR_IO (the file cannot
 * be read, is not a regular file, or is not well-formed: the message says
 * where and why), TC_ERROR_DTYPE (a dtype tcuda has not, naming the tensor),
 * TC_ERROR_NOT_SUPPORTED (a tensor of more than TC_MAX_DIMS dimensions),
 * TC_ERROR_SHAPE (a shape whose sizes, a 0 counted as 1, multiply past 2^63,
 * such as [0, 2^32, 2^32]: naming the tensor), TC_ERROR_OUT_OF_MEMORY. */
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
 * size in the file is copied instead. The view reads the file's pages as it
 * is used: the file must not be truncated while it lives (SIGBUS, see the
 * top of this header). On a GPU, a copy (the call returns when the data has
 * left the file). Errors: TC_ERROR_INVALID_ARGUMENT (NULL name or out, a name
 * the file has not, a bad device), the device's, and TC_ERROR_OUT_OF_MEMORY. */
TCUDA_API tc_status tc_safetensors_get(const tc_safetensors *file, const char *name,
                                       tc_device device, tc_tensor **out);
/* Tensor `name` as a new tensor of its own (caller releases) on `device`: its
 * bytes are read from the file (not the mapping) when this is called, so the
 * tensor shares nothing with the file or other tensors of it, and what
 * happens to the file afterwards cannot reach it. A file truncated since it
 * was opened gives TC_ERROR_IO instead of a SIGBUS; a file rewritten in place
 * gives its bytes as they are now. Errors: those of tc_safetensors_get, and
 * TC_ERROR_IO (the read fails or comes up short, naming the file, tensor and
 * byte). */
TCUDA_API tc_status tc_safetensors_get_copy(const tc_safetensors *file, const char *name,
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
 * the new one is complete (written to a temporary beside it, then renamed
 * over it), so a failure leaves the old file whole. What is at `path`:
 * - nothing: a new file, mode 0666 less the umask (as fopen makes);
 * - a regular file: replaced by a new file with the same permission bits
 *   (owner and group are the writer's); other hard links to the old file
 *   keep the old contents (the rename gives `path` a new inode, where an
 *   in-place rewrite would have changed every link);
 * - a symbolic link: written through: the file it leads to is replaced as
 *   above (the temporary goes beside that file) and the link stays;
 * - a FIFO, device, socket, directory, or a link to one of them or to
 *   nothing: refused with TC_ERROR_IO before anything is written.
 * `metadata` is NULL or a NULL-terminated list of key, value, key, value, ...
 * strings. The tensors are laid out as the reference writer does: by
 * decreasing element size, then name, so each is aligned to its element
 * size; the header is padded with spaces to a multiple of 8 bytes.
 * Errors: TC_ERROR_INVALID_ARGUMENT (NULL or empty path, a negative n, NULL
 * names or tensors with n > 0, a NULL, duplicate, "__metadata__" or
 * non-UTF-8 name or key, a key without value), TC_ERROR_INVALID_HANDLE (a
 * released tensor), TC_ERROR_IO (the file cannot be written, or `path` is
 * not a regular file, nothing or a link to a regular file: the message says
 * what it is), the devices'. */
TCUDA_API tc_status tc_safetensors_save(const char *path, const char *const *names,
                                        const tc_tensor *const *tensors, int n,
                                        const char *const *metadata);

TCUDA_EXTERN_C_END

#endif
