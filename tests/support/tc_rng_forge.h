/* Builds a tcuda RNG state blob with any seed and offset, computed here from
 * the documented layout (include/tcuda/random.h) independently of
 * src/random/random.c, so tests can put a generator anywhere, e.g. near the
 * end of the 2^64 counter space. */
#ifndef TC_RNG_FORGE_H
#define TC_RNG_FORGE_H

#include <string.h>

#include "tcuda/random.h"

static inline void tc_test_forge_state(uint64_t seed, uint64_t offset, tc_rng_state *s)
{
    memset(s, 0, sizeof *s);
    memcpy(s->bytes, "TCRS", 4);
    s->bytes[4] = TC_RNG_STATE_VERSION;
    s->bytes[6] = 1; /* Philox4x32-10 */
    for (int i = 0; i < 8; i++) {
        s->bytes[8 + i] = (uint8_t)(seed >> (8 * i));
        s->bytes[16 + i] = (uint8_t)(offset >> (8 * i));
    }
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 of bytes 0..23 */
    for (int i = 0; i < 24; i++)
        h = (h ^ s->bytes[i]) * 0x100000001b3ull;
    for (int i = 0; i < 8; i++)
        s->bytes[24 + i] = (uint8_t)(h >> (8 * i));
}

#endif
