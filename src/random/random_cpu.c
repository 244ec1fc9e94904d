/* The CPU side of random draws: walks the Philox blocks of a request in order
 * and stores each block's values with the same per-block function the CUDA
 * kernels use (src/random/philox.h), so the two agree bit for bit. Single
 * threaded; the result would not change with threads, as element i depends
 * only on (seed, offset, i). */
#include <string.h>

#include "random_internal.h"

/* Stores the low `size` bytes of each value (little-endian hosts). */
static void store(unsigned char *dst, const uint64_t *bits, int count, size_t size)
{
    for (int l = 0; l < count; l++) {
        uint64_t v = bits[l];
        memcpy(dst + (size_t)l * size, &v, size);
    }
}

void tc__rng_cpu_fill(const tc__rng_params *p, uint64_t seed, uint64_t offset, void *data, size_t n)
{
    size_t size = tc_dtype_size((tc_dtype)p->dtype);
    size_t E = (size_t)p->per_block;
    unsigned char *out = data;
    uint64_t bits[4];
    size_t full = n / E;
    for (size_t b = 0; b < full; b++) {
        tc__rng_block_bits(p->kind, p->dtype, p->wide, p, seed, offset + b, bits);
        store(out + b * E * size, bits, (int)E, size);
    }
    if (full * E < n) {
        tc__rng_block_bits(p->kind, p->dtype, p->wide, p, seed, offset + full, bits);
        store(out + full * E * size, bits, (int)(n - full * E), size);
    }
}
