/* Fuzzes the RNG state blob: tc_generator_set_state on the default CPU
 * generator with arbitrary bytes, then a draw.
 *
 * Input: one flag byte, the 32-byte blob, then the draw (kind, dtype, count,
 * bounds). Flag bit 0 writes the right magic, version and algorithm into the
 * blob and bit 1 its right checksum, so that the fuzzer reaches the seeds and
 * offsets behind the checks (a checksum is never guessed). Checked: a refused
 * blob leaves the generator as it was; an accepted one reads back unchanged;
 * a draw that succeeds moves the offset forward (never wraps), gives values
 * in range, and repeats exactly after the same state is set again. */
#include <math.h>
#include <string.h>

#include "fuzz_input.h"
#include "tcuda/tcuda.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_DRAW = 64 };

/* The blob's checksum, written out from random.h's description rather than
 * taken from random.c, so that the format is checked independently. */
static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The generator's offset; reading it cannot fail for a live generator. */
static uint64_t offset_of(const tc_generator *g)
{
    uint64_t off = 0;
    FZ_CHECK(tc_generator_offset(g, &off) == TC_OK);
    return off;
}

/* One draw into buf (room for MAX_DRAW 8-byte elements). */
static tc_status draw(tc_generator *g, int kind, void *buf, size_t n, tc_dtype dt, double a,
                      double b, int64_t lo, int64_t hi)
{
    switch (kind) {
    case 0: return tc_generator_uniform(g, buf, n, dt, a, b);
    case 1: return tc_generator_normal(g, buf, n, dt, a, b);
    case 2: return tc_generator_bernoulli(g, buf, n, dt, a);
    default: return tc_generator_random_int(g, buf, n, dt, lo, hi);
    }
}

static const double special[] = {0.0, 1.0, -1.0,   0.5,     1e300,  -1e300, INFINITY, -INFINITY,
                                 NAN, 2.0, 1e-300, 65504.0, 3.4e38, 1.5,    -0.5,     100.0};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    uint8_t flags = fz_u8(&in);
    tc_rng_state blob;
    for (int i = 0; i < TC_RNG_STATE_SIZE; i++)
        blob.bytes[i] = fz_u8(&in);
    if (flags & 1) {
        memcpy(blob.bytes, "TCRS", 4);
        put_le(blob.bytes + 4, TC_RNG_STATE_VERSION, 2);
        put_le(blob.bytes + 6, 1, 2);
    }
    if (flags & 2)
        put_le(blob.bytes + 24, fnv1a(blob.bytes, 24), 8);
    int kind = fz_u8(&in) % 4;
    tc_dtype dt = (tc_dtype)(fz_u8(&in) % (TC_NUM_DTYPES + 1));
    size_t n = fz_u8(&in) % (MAX_DRAW + 1);
    double a = special[fz_u8(&in) % 16], b = special[fz_u8(&in) % 16];
    int64_t lo = (int64_t)fz_u64(&in), hi = (int64_t)fz_u64(&in);
    if (flags & 4) { /* small bounds, which the dtypes can hold */
        lo = (int8_t)lo;
        hi = lo + 1 + (uint8_t)hi;
    }

    tc_generator *g = NULL;
    FZ_CHECK(tc_default_generator((tc_device){TC_CPU, -1}, &g) == TC_OK && g);
    FZ_CHECK(tc_generator_manual_seed(g, 7) == TC_OK); /* the same start for every input */
    tc_rng_state before, after;
    FZ_CHECK(tc_generator_get_state(g, &before) == TC_OK);
    if (tc_generator_set_state(g, &blob) != TC_OK) {
        FZ_CHECK(tc_last_error()[0] != '\0');
        FZ_CHECK(tc_generator_get_state(g, &after) == TC_OK);
        FZ_CHECK(memcmp(&before, &after, sizeof before) == 0);
        return 0;
    }
    FZ_CHECK(tc_generator_get_state(g, &after) == TC_OK);
    FZ_CHECK(memcmp(&blob, &after, sizeof blob) == 0);

    uint64_t off0 = offset_of(g);
    uint64_t buf[MAX_DRAW], again[MAX_DRAW];
    memset(buf, 0xa5, sizeof buf);
    memset(again, 0xa5, sizeof again);
    if (draw(g, kind, buf, n, dt, a, b, lo, hi) != TC_OK) {
        FZ_CHECK(tc_last_error()[0] != '\0');
        FZ_CHECK(offset_of(g) == off0); /* a refused draw uses nothing */
        return 0;
    }
    uint64_t off1 = offset_of(g);
    FZ_CHECK(off1 >= off0);          /* counters are never reused */
    FZ_CHECK(n == 0 || off1 > off0); /* and a draw uses some */
    if (kind == 0 && n > 0 && (dt == TC_FLOAT32 || dt == TC_FLOAT64)) {
        double ra = dt == TC_FLOAT32 ? (double)(float)a : a; /* bounds rounded to dtype */
        double rb = dt == TC_FLOAT32 ? (double)(float)b : b;
        for (size_t i = 0; i < n; i++) {
            double v = dt == TC_FLOAT32 ? ((float *)buf)[i] : ((double *)buf)[i];
            FZ_CHECK(v >= ra && v < rb);
        }
    }
    if (kind == 3 && n > 0 && dt == TC_INT64) {
        for (size_t i = 0; i < n; i++)
            FZ_CHECK(((int64_t *)buf)[i] >= lo && ((int64_t *)buf)[i] < hi);
    }
    /* the same state again gives the same numbers */
    FZ_CHECK(tc_generator_set_state(g, &blob) == TC_OK);
    FZ_CHECK(draw(g, kind, again, n, dt, a, b, lo, hi) == TC_OK);
    FZ_CHECK(memcmp(buf, again, sizeof buf) == 0);
    FZ_CHECK(offset_of(g) == off1);
    return 0;
}
