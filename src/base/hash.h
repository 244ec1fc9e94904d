/* One 64-bit hash for check values and cache keys: FNV-1a over the bytes,
 * then splitmix64's finalizer to spread the bits. Not cryptographic: it
 * catches damage and accidents, not forgery. (The RNG state blob keeps its
 * own plain FNV-1a: its format is frozen.) Not installed. */
#ifndef TCUDA_HASH_H
#define TCUDA_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t tc__hash64(const void *data, size_t n, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

#endif
