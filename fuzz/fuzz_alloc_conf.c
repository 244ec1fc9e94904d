/* Fuzzes the TCUDA_ALLOC_CONF parser (tc__alloc_config_parse) with arbitrary
 * text, and the size rounding the parsed config controls.
 *
 * The parser's promises are checked, not only its memory safety: a failure
 * leaves the config untouched and sets a message; a success gives values in
 * their documented ranges, and tc__round_size then never rounds down, gives
 * a multiple of 512 and stays within the next power of two. */
#include <string.h>

#include "memory/alloc.h"
#include "memory/alloc_internal.h"
#include "fuzz_input.h"
#include "tcuda/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_config(const tc__alloc_config *c)
{
    FZ_CHECK(c->backend == 0 || c->backend == 1);
    FZ_CHECK(c->max_split_size == SIZE_MAX || c->max_split_size >= ((size_t)2 << 20));
    FZ_CHECK(c->gc_threshold == 0.0 || (c->gc_threshold > 0.0 && c->gc_threshold < 1.0));
    for (int i = 0; i < TC__ROUNDUP_INTERVALS; i++) {
        unsigned d = c->roundup_power2_divisions[i];
        FZ_CHECK(d <= 64 && (d & (d - 1)) == 0);
    }
}

static void check_rounding(const tc__alloc_config *c, size_t size)
{
    size_t r = tc__round_size(c, size);
    FZ_CHECK(r >= size && r % 512 == 0);
    /* never more than the next power of two (or 512) */
    size_t pow2 = 512;
    while (pow2 < size)
        pow2 <<= 1;
    FZ_CHECK(r <= pow2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[2048];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';

    tc__alloc_config c, before;
    tc__alloc_config_default(&c);
    c.gc_threshold = 0.5; /* a non-default value that a failure must keep */
    before = c;
    tc_status st = tc__alloc_config_parse(text, &c);
    if (st != TC_OK) {
        FZ_CHECK(st == TC_ERROR_INVALID_ARGUMENT);
        FZ_CHECK(tc_last_error()[0] != '\0');
        FZ_CHECK(memcmp(&c, &before, sizeof c) == 0);
        return 0;
    }
    check_config(&c);
    /* Sizes up to 2^56, the allocator's limit (tc__alloc_malloc), taken
     * from the text's bytes so the fuzzer steers them too. */
    fz_input in = {data, size};
    check_rounding(&c, 1);
    check_rounding(&c, (size_t)1 << 56);
    for (int i = 0; i < 8 && in.n; i++) {
        uint64_t s = fz_u64(&in) >> (8 + (i % 40));
        check_rounding(&c, (size_t)(s ? s : 1));
    }
    return 0;
}
