/* libFuzzer harness for the safetensors header (src/io/safetensors_parse.c).
 *
 * The input is a whole file: its first 8 bytes the header length, then the
 * header, then the data. tc__st_parse must refuse it with a message and
 * write nothing, or accept it with every promise the reader relies on
 * holding: the header within the file, each tensor's bytes its shape times
 * its dtype's size, each shape one tc__check_shape takes (as every tensor
 * factory does), the tensors in offset order covering the data exactly,
 * names and metadata keys unique, sorted and findable, all of them valid
 * UTF-8 (ASan checks every read stays in the input). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "io/json.h"
#include "io/safetensors_internal.h"
#include "tensor/tensor_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly `size` bytes, so ASan sees any read past the end. */
    uint8_t *file = malloc(size ? size : 1);
    FZ_CHECK(file);
    memcpy(file, data, size);
    tc__st_header h, same;
    memset(&h, 0xa5, sizeof h);
    same = h;
    tc_status st = tc__st_parse(file, size, "fuzz", &h);
    if (st != TC_OK) {
        FZ_CHECK(memcmp(&h, &same, sizeof h) == 0);
        FZ_CHECK(strncmp(tc_last_error(), "fuzz: ", 6) == 0);
        FZ_CHECK(st == TC_ERROR_IO || st == TC_ERROR_DTYPE || st == TC_ERROR_NOT_SUPPORTED ||
                 st == TC_ERROR_SHAPE || st == TC_ERROR_OUT_OF_MEMORY);
        free(file);
        return 0;
    }
    FZ_CHECK(h.data_start >= 8 && h.data_start <= size);
    FZ_CHECK(h.data_start + h.data_size == size);
    FZ_CHECK(h.data_start - 8 <= TC_SAFETENSORS_MAX_HEADER);
    uint64_t at = 0;
    for (size_t i = 0; i < h.n; i++) {
        const tc__st_entry *e = &h.entries[i];
        FZ_CHECK(e->begin == at && e->end >= e->begin);
        FZ_CHECK(e->ndim >= 0 && e->ndim <= TC_MAX_DIMS);
        FZ_CHECK((unsigned)e->dtype < TC_NUM_DTYPES);
        uint64_t bytes = tc_dtype_size(e->dtype);
        for (int d = 0; d < e->ndim; d++) {
            FZ_CHECK(e->sizes[d] >= 0);
            FZ_CHECK(!__builtin_mul_overflow(bytes, (uint64_t)e->sizes[d], &bytes));
        }
        FZ_CHECK(bytes == e->end - e->begin);
        int64_t numel; /* a shape every tensor factory takes */
        FZ_CHECK(tc__check_shape(e->ndim, e->sizes, tc_dtype_size(e->dtype), &numel) == TC_OK);
        FZ_CHECK(tc__utf8_valid(e->name, strlen(e->name)));
        FZ_CHECK(tc__st_find(&h, e->name) == e);
        at = e->end;
    }
    FZ_CHECK(at == h.data_size);
    for (size_t i = 1; i < h.n; i++)
        FZ_CHECK(strcmp(h.entries[h.by_name[i - 1]].name, h.entries[h.by_name[i]].name) < 0);
    for (size_t i = 0; i < h.n_meta; i++) {
        FZ_CHECK(i == 0 || strcmp(h.meta[2 * i - 2], h.meta[2 * i]) < 0);
        FZ_CHECK(tc__st_meta_find(&h, h.meta[2 * i]) == h.meta[2 * i + 1]);
        FZ_CHECK(tc__utf8_valid(h.meta[2 * i + 1], strlen(h.meta[2 * i + 1])));
    }
    tc__st_header_free(&h);
    free(file);
    return 0;
}
