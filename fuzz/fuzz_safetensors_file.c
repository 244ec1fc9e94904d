/* libFuzzer harness for reading safetensors files through the public API
 * (src/io/safetensors.c): open, then get and get_copy of every tensor.
 *
 * The input is a whole file, written to one in-memory file (memfd) that
 * every run reuses. tc_safetensors_open must refuse it with a message naming the call
 * and the path and leave *out alone, or accept it; then every tensor comes
 * back from tc_safetensors_get (a view or a copy) and from
 * tc_safetensors_get_copy (read with pread) with the dtype, ndim and sizes
 * that tc_safetensors_info gives, and the tensors' bytes, in index order,
 * are exactly the file's data buffer (which starts after the 8-byte length
 * and the header). A CUDA device is refused with TC_ERROR_NO_DEVICE in this
 * build (no CUDA). The last input byte chooses whether the file is closed
 * before its views are read again and released, or after. */
#define _GNU_SOURCE /* memfd_create (fuzz_file.h) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "fuzz_input.h"
#include "tcuda/safetensors.h"
#include "tcuda/tcuda.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Tensor i of f, read both ways: checked against info and against the
 * file's bytes at *at (advanced past them). Returns the view, to read again
 * and release later. */
static tc_tensor *check_tensor(const tc_safetensors *f, int i, const uint8_t *data, size_t size,
                               size_t *at)
{
    const char *name = tc_safetensors_name(f, i);
    FZ_CHECK(name);
    tc_dtype dt;
    int nd = -1;
    int64_t sizes[TC_MAX_DIMS];
    FZ_CHECK(tc_safetensors_info(f, name, &dt, &nd, sizes) == TC_OK);
    FZ_CHECK(nd >= 0 && nd <= TC_MAX_DIMS && (unsigned)dt < TC_NUM_DTYPES);
    tc_tensor *t = NULL, *c = NULL;
    /* Every tensor's bytes are in the input, so nothing here is too large. */
    FZ_CHECK(tc_safetensors_get(f, name, (tc_device){TC_CPU, -1}, &t) == TC_OK);
    FZ_CHECK(tc_safetensors_get_copy(f, name, (tc_device){TC_CPU, -1}, &c) == TC_OK);
    FZ_CHECK(tc_tensor_dtype(t) == dt && tc_tensor_ndim(t) == nd && tc_tensor_is_contiguous(t));
    int64_t numel = 1;
    for (int d = 0; d < nd; d++) {
        FZ_CHECK(tc_tensor_size(t, d) == sizes[d] && sizes[d] >= 0);
        numel *= sizes[d];
    }
    FZ_CHECK(tc_tensor_numel(t) == numel);
    size_t bytes = (size_t)numel * tc_dtype_size(dt);
    FZ_CHECK(bytes <= size - *at);
    if (numel && (uintptr_t)tc_tensor_data_ptr(t) % tc_dtype_size(dt) != 0)
        FZ_CHECK(!"a view is misaligned");
    uint8_t *host = malloc(bytes ? bytes : 1);
    FZ_CHECK(host);
    FZ_CHECK(tc_tensor_to_host(t, dt, host) == TC_OK);
    FZ_CHECK(memcmp(host, data + *at, bytes) == 0);
    FZ_CHECK(tc_tensor_dtype(c) == dt && tc_tensor_numel(c) == numel);
    FZ_CHECK(!numel || tc_tensor_data_ptr(c) != tc_tensor_data_ptr(t));
    memset(host, 0, bytes);
    FZ_CHECK(tc_tensor_to_host(c, dt, host) == TC_OK);
    FZ_CHECK(memcmp(host, data + *at, bytes) == 0);
    tc_tensor_release(c);
    free(host);
    *at += bytes;
    tc_tensor *const SENT = (tc_tensor *)(uintptr_t)0x5e5e5e5e;
    tc_tensor *g = SENT;
    FZ_CHECK(tc_safetensors_get(f, name, (tc_device){TC_CUDA, 0}, &g) == TC_ERROR_NO_DEVICE);
    FZ_CHECK(tc_safetensors_get_copy(f, name, (tc_device){TC_CUDA, 0}, &g) == TC_ERROR_NO_DEVICE);
    FZ_CHECK(g == SENT);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_file(data, size);
    tc_safetensors *const SENT = (tc_safetensors *)(uintptr_t)0x5e5e5e5e;
    tc_safetensors *f = SENT;
    tc_status st = tc_safetensors_open(path, &f);
    if (st != TC_OK) {
        FZ_CHECK(f == SENT);
        FZ_CHECK(strncmp(tc_last_error(), "tc_safetensors_open: ", 21) == 0);
        FZ_CHECK(strstr(tc_last_error(), path) != NULL);
        FZ_CHECK(st == TC_ERROR_IO || st == TC_ERROR_DTYPE || st == TC_ERROR_NOT_SUPPORTED ||
                 st == TC_ERROR_SHAPE || st == TC_ERROR_OUT_OF_MEMORY);
        return 0;
    }
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)data[i] << (8 * i);
    FZ_CHECK(n <= size - 8);
    size_t at = 8 + (size_t)n;
    int count = tc_safetensors_count(f);
    FZ_CHECK(count >= 0 && tc_safetensors_name(f, count) == NULL);
    tc_tensor **views = calloc((size_t)count + 1, sizeof *views);
    FZ_CHECK(views);
    for (int i = 0; i < count; i++)
        views[i] = check_tensor(f, i, data, size, &at);
    FZ_CHECK(at == size); /* the tensors cover the data buffer */
    for (int k = 0; k < tc_safetensors_metadata_count(f); k++) {
        const char *key = tc_safetensors_metadata_key(f, k), *value = NULL;
        FZ_CHECK(key && tc_safetensors_metadata(f, key, &value) == TC_OK && value);
    }
    bool close_first = size && (data[size - 1] & 1);
    if (close_first)
        FZ_CHECK(tc_safetensors_close(f) == TC_OK);
    at = 8 + (size_t)n;
    for (int i = 0; i < count; i++) { /* views outlive the handle: read them again */
        size_t bytes = (size_t)tc_tensor_numel(views[i]) * tc_dtype_size(tc_tensor_dtype(views[i]));
        uint8_t *host = malloc(bytes ? bytes : 1);
        FZ_CHECK(host);
        FZ_CHECK(tc_tensor_to_host(views[i], tc_tensor_dtype(views[i]), host) == TC_OK);
        FZ_CHECK(memcmp(host, data + at, bytes) == 0);
        free(host);
        at += bytes;
    }
    for (int i = 0; i < count; i++)
        tc_tensor_release(views[i]);
    free(views);
    if (!close_first)
        FZ_CHECK(tc_safetensors_close(f) == TC_OK);
    return 0;
}
