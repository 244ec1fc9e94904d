/* A reader over a fuzzer's input bytes, shared by the harnesses in fuzz/.
 *
 * Each read takes the next bytes; past the end it gives zeros, so every input
 * is a complete program and short inputs are simply small programs. */
#ifndef TC_FUZZ_INPUT_H
#define TC_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct fz_input {
    const uint8_t *p;
    size_t n;
} fz_input;

static inline uint8_t fz_u8(fz_input *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static inline uint64_t fz_u64(fz_input *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)fz_u8(in) << (8 * i);
    return v;
}

/* A failed expectation: print it and abort, which libFuzzer reports as a
 * crash with the input that caused it. */
#define FZ_CHECK(cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                    \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
