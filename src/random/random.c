/* Generators: objects, default generators, seeding, state blobs, argument
 * checking, and the draw entry points that hand a checked request to the CPU
 * loop or the CUDA launcher.
 *
 * Invariants: a generator's seed and offset change only under its lock, and
 * only after the whole call is known to succeed (arguments checked, fill or
 * launch done). All parameters of a request (float constants, thresholds,
 * elements per block) are computed here, once, on the host, so the CPU and
 * the GPU receive identical numbers. Default generators are created lazily
 * and never destroyed; a destroyed generator is parked in a handle pool
 * (src/base/handle_pool.h) so that a stale handle is recognized, not reused.
 * The offset never wraps: a draw that would take it past 2^64-1 is refused,
 * since Philox counters past it would repeat the first draws' numbers. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device_ops.h"
#include "base/handle_pool.h"
#include "random_internal.h"

/* ---- generators ---------------------------------------------------------- */

static tc_generator cpu_default = {
    .magic = TC_GENERATOR_MAGIC,
    .device = {TC_CPU, -1},
    .is_default = true,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .seed = TC_DEFAULT_SEED,
};
static tc_generator cuda_defaults[TC_MAX_DEVICES];
static bool cuda_default_ready[TC_MAX_DEVICES];
static pthread_mutex_t defaults_lock = PTHREAD_MUTEX_INITIALIZER;
static tc__handle_pool gen_pool = TC_HANDLE_POOL_INIT(tc_generator);

static tc_status check_gen(const tc_generator *gen)
{
    return tc__handle_check(gen, TC_GENERATOR_MAGIC, "tc_generator");
}

/* v as the shortest decimal that reads back as v ("0.1", "1.0000000000000002"),
 * so that a message never rounds away the digit that made a value wrong. */
static const char *fmt_double(char buf[32], double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v || isnan(v))
            break;
    }
    return buf;
}

static void gen_init(tc_generator *gen, tc_device device, uint64_t seed, bool is_default)
{
    memset(gen, 0, sizeof *gen);
    gen->magic = TC_GENERATOR_MAGIC;
    gen->device = device;
    gen->is_default = is_default;
    pthread_mutex_init(&gen->lock, NULL);
    gen->seed = seed;
}

/* Checks a device for a generator and resolves a CUDA index: the rule every
 * tensor follows too (device_ops.h). */
static tc_status resolve(tc_device device, tc_device *out)
{
    return tc__device_resolve(device, out);
}

tc_status tc_generator_create(tc_device device, uint64_t seed, tc_generator **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc_device dev;
    TC_TRY(resolve(device, &dev));
    tc_generator *gen = tc__handle_get(&gen_pool);
    if (!gen)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for a generator");
    gen_init(gen, dev, seed, false);
    *out = gen;
    return TC_OK;
}

tc_status tc_generator_destroy(tc_generator *gen)
{
    TC_API_BEGIN;
    TC_TRY(check_gen(gen));
    TC_CHECK_ARG(!gen->is_default, "a default generator cannot be destroyed");
    pthread_mutex_lock(&gen->lock);
    bool busy = gen->capturing;
    pthread_mutex_unlock(&gen->lock);
    if (busy)
        return tc__fail(TC_ERROR_INVALID_STATE, "the generator is in use by a CUDA graph "
                                                "capture; end the capture first");
    pthread_mutex_destroy(&gen->lock);
    tc__handle_put(&gen_pool, gen); /* parked: a stale handle finds a dead magic word */
    return TC_OK;
}

tc_status tc_default_generator(tc_device device, tc_generator **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc_device dev;
    TC_TRY(resolve(device, &dev));
    if (dev.type == TC_CPU) {
        *out = &cpu_default;
        return TC_OK;
    }
    pthread_mutex_lock(&defaults_lock);
    if (!cuda_default_ready[dev.index]) {
        gen_init(&cuda_defaults[dev.index], dev, TC_DEFAULT_SEED, true);
        cuda_default_ready[dev.index] = true;
    }
    pthread_mutex_unlock(&defaults_lock);
    *out = &cuda_defaults[dev.index];
    return TC_OK;
}

/* ---- seeds ---------------------------------------------------------------- */

tc_status tc_generator_manual_seed(tc_generator *gen, uint64_t seed)
{
    TC_API_BEGIN;
    TC_TRY(check_gen(gen));
    pthread_mutex_lock(&gen->lock);
    bool busy = gen->capturing;
    if (!busy) {
        gen->seed = seed;
        gen->offset = 0;
    }
    pthread_mutex_unlock(&gen->lock);
    if (busy)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "cannot reseed a generator while a CUDA graph capture uses it");
    return TC_OK;
}

tc_status tc_generator_seed(tc_generator *gen, uint64_t *seed)
{
    TC_API_BEGIN;
    TC_TRY(check_gen(gen));
    uint64_t s;
    TC_TRY(tc__os_entropy(&s));
    TC_TRY(tc_generator_manual_seed(gen, s));
    if (seed)
        *seed = s;
    return TC_OK;
}

static tc_status locked_read(const tc_generator *gen, bool want_offset, uint64_t *out)
{
    TC_TRY(check_gen(gen));
    TC_CHECK_ARG(out, "out is NULL");
    tc_generator *g = (tc_generator *)gen; /* the lock is not part of the value */
    pthread_mutex_lock(&g->lock);
    *out = want_offset ? g->offset : g->seed;
    pthread_mutex_unlock(&g->lock);
    return TC_OK;
}

tc_status tc_generator_initial_seed(const tc_generator *gen, uint64_t *out)
{
    TC_API_BEGIN;
    return locked_read(gen, false, out);
}

tc_status tc_generator_offset(const tc_generator *gen, uint64_t *out)
{
    TC_API_BEGIN;
    return locked_read(gen, true, out);
}

tc_status tc_generator_device(const tc_generator *gen, tc_device *out)
{
    TC_API_BEGIN;
    TC_TRY(check_gen(gen));
    TC_CHECK_ARG(out, "out is NULL");
    *out = gen->device;
    return TC_OK;
}

/* ---- state blobs ---------------------------------------------------------- */

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void encode_state(uint64_t seed, uint64_t offset, tc_rng_state *out)
{
    memset(out, 0, sizeof *out);
    memcpy(out->bytes, "TCRS", 4);
    put_le(out->bytes + 4, TC_RNG_STATE_VERSION, 2);
    put_le(out->bytes + 6, 1, 2);
    put_le(out->bytes + 8, seed, 8);
    put_le(out->bytes + 16, offset, 8);
    put_le(out->bytes + 24, fnv1a(out->bytes, 24), 8);
}

/* Checks a blob (called `name` in messages) and reads it. */
static tc_status decode_state(const tc_rng_state *s, const char *name, uint64_t *seed,
                              uint64_t *offset)
{
    TC_CHECK_ARG(s, "%s is NULL", name);
    TC_CHECK_ARG(memcmp(s->bytes, "TCRS", 4) == 0,
                 "%s is not a tcuda RNG state: its magic bytes are not \"TCRS\"", name);
    uint64_t version = get_le(s->bytes + 4, 2), algo = get_le(s->bytes + 6, 2);
    TC_CHECK_ARG(version == TC_RNG_STATE_VERSION,
                 "%s: RNG state version %llu is not supported (this tcuda reads version %d)", name,
                 (unsigned long long)version, TC_RNG_STATE_VERSION);
    TC_CHECK_ARG(algo == 1, "%s: RNG state algorithm %llu is unknown (1 = Philox4x32-10)", name,
                 (unsigned long long)algo);
    uint64_t sum = get_le(s->bytes + 24, 8);
    TC_CHECK_ARG(sum == fnv1a(s->bytes, 24),
                 "%s: RNG state checksum mismatch: the blob was altered or truncated", name);
    *seed = get_le(s->bytes + 8, 8);
    *offset = get_le(s->bytes + 16, 8);
    return TC_OK;
}

tc_status tc_generator_get_state(const tc_generator *gen, tc_rng_state *out)
{
    TC_API_BEGIN;
    TC_TRY(check_gen(gen));
    TC_CHECK_ARG(out, "out is NULL");
    tc_generator *g = (tc_generator *)gen;
    pthread_mutex_lock(&g->lock);
    encode_state(g->seed, g->offset, out);
    pthread_mutex_unlock(&g->lock);
    return TC_OK;
}

tc_status tc_generator_set_state(tc_generator *gen, const tc_rng_state *state)
{
    TC_API_BEGIN;
    TC_TRY(check_gen(gen));
    uint64_t seed, offset;
    TC_TRY(decode_state(state, "state", &seed, &offset));
    pthread_mutex_lock(&gen->lock);
    bool busy = gen->capturing;
    if (!busy) {
        gen->seed = seed;
        gen->offset = offset;
    }
    pthread_mutex_unlock(&gen->lock);
    if (busy)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "cannot set the state of a generator while a CUDA graph capture uses it");
    return TC_OK;
}

/* ---- requests ------------------------------------------------------------- */

static tc_status check_common(tc_generator *gen, const void *data, size_t n, tc_dtype dtype)
{
    TC_TRY(check_gen(gen));
    TC_CHECK_ARG(data || n == 0, "data is NULL");
    TC_CHECK_ARG((unsigned)dtype < TC_NUM_DTYPES, "dtype %d is not a tc_dtype", (int)dtype);
    return TC_OK;
}

static tc_status need_floating(tc_dtype dtype, const char *what)
{
    if (!tc_dtype_is_floating(dtype))
        return tc__fail(TC_ERROR_DTYPE, "%s draws need a floating dtype, not %s", what,
                        tc_dtype_string(dtype));
    return TC_OK;
}

/* v rounded to a 16/32-bit float dtype (through float32) and back to float. */
static float round_to(tc_dtype dtype, double v)
{
    float f = (float)v;
    if (dtype == TC_FLOAT16)
        return tc__f16_to_f32(tc__f32_to_f16(f));
    if (dtype == TC_BFLOAT16)
        return tc__bf16_to_f32(tc__f32_to_bf16(f));
    return f;
}

/* The largest value of a 16/32-bit float dtype below hi (hi is of the dtype). */
static float below(tc_dtype dtype, float hi)
{
    if (dtype == TC_FLOAT32)
        return nextafterf(hi, -INFINITY);
    uint16_t h = dtype == TC_FLOAT16 ? tc__f32_to_f16(hi) : tc__f32_to_bf16(hi);
    if ((h & 0x7fffu) == 0)
        h = 0x8001u;
    else if (h & 0x8000u)
        h++;
    else
        h--;
    return dtype == TC_FLOAT16 ? tc__f16_to_f32(h) : tc__bf16_to_f32(h);
}

/* TC_OK when a draw of `blocks` may start at offset `used`: the offset after
 * it must still fit in 64 bits, or the counters would wrap to block 0. */
static tc_status check_room(uint64_t used, uint64_t blocks)
{
    if (TC_LIKELY(blocks <= UINT64_MAX - used))
        return TC_OK;
    return tc__fail(TC_ERROR_INVALID_STATE,
                    "the draw needs %llu Philox blocks but the generator's offset is %llu, "
                    "%llu below 2^64-1: past it the counters would wrap and repeat earlier "
                    "numbers; reseed the generator or set a state with a smaller offset",
                    (unsigned long long)blocks, (unsigned long long)used,
                    (unsigned long long)(UINT64_MAX - used));
}

/* Fills at the generator's offset under its lock (see random_internal.h). */
static tc_status fill_locked(tc_generator *gen, void *data, size_t n, const tc__rng_params *p,
                             uint64_t blocks)
{
    uint64_t *counter = gen->capturing ? &gen->capture_offset : &gen->offset;
    TC_TRY(check_room(*counter, blocks));
    if (gen->device.type == TC_CPU)
        tc__rng_cpu_fill(p, gen->seed, gen->offset, data, n);
    else
        TC_TRY(tc__dev()->rng_fill(gen, p, data, n));
    *counter += blocks;
    return TC_OK;
}

static tc_status draw(tc_generator *gen, void *data, size_t n, const tc__rng_params *p)
{
    if (n == 0)
        return TC_OK;
    pthread_mutex_lock(&gen->lock);
    tc_status st = fill_locked(gen, data, n, p, tc__rng_blocks(n, p->per_block));
    pthread_mutex_unlock(&gen->lock);
    return st;
}

/* NaN fails every comparison, so it gets its own message before the range
 * checks (which would otherwise call it "negative" or "above hi"). */
static tc_status not_nan(double v, const char *name, const char *want)
{
    TC_CHECK_ARG(!isnan(v), "%s is NaN; it must be %s", name, want);
    return TC_OK;
}

tc_status tc_generator_uniform(tc_generator *gen, void *data, size_t n, tc_dtype dtype, double lo,
                               double hi)
{
    TC_API_BEGIN;
    TC_TRY(check_common(gen, data, n, dtype));
    TC_TRY(need_floating(dtype, "uniform"));
    TC_TRY(not_nan(lo, "lo", "a finite number below hi"));
    TC_TRY(not_nan(hi, "hi", "a finite number above lo"));
    char a[32], b[32];
    fmt_double(a, lo);
    fmt_double(b, hi);
    TC_CHECK_ARG(isfinite(lo) && isfinite(hi), "uniform needs finite bounds (got lo=%s, hi=%s)", a,
                 b);
    TC_CHECK_ARG(lo < hi, "uniform needs lo < hi (got lo=%s, hi=%s)", a, b);
    tc__rng_params p = {.kind = TC__RNG_UNIFORM, .dtype = dtype, .per_block = 4};
    if (dtype == TC_FLOAT64) {
        double range = hi - lo;
        TC_CHECK_ARG(isfinite(range), "hi - lo overflows float64 (lo=%s, hi=%s)", a, b);
        p.per_block = 2;
        p.da = lo;
        p.db = range;
        p.dmax = nextafter(hi, -INFINITY);
    } else {
        float flo = round_to(dtype, lo), fhi = round_to(dtype, hi);
        TC_CHECK_ARG(isfinite(flo) && isfinite(fhi), "lo=%s or hi=%s is out of the range of %s", a,
                     b, tc_dtype_string(dtype));
        TC_CHECK_ARG(flo < fhi, "[%s, %s) holds no %s value", a, b, tc_dtype_string(dtype));
        float range = (float)((double)fhi - (double)flo);
        TC_CHECK_ARG(isfinite(range), "hi - lo overflows float32 (lo=%s, hi=%s)", a, b);
        p.fa = flo;
        p.fb = range;
        p.fmax = below(dtype, fhi);
    }
    return draw(gen, data, n, &p);
}

tc_status tc_generator_normal(tc_generator *gen, void *data, size_t n, tc_dtype dtype, double mean,
                              double std)
{
    TC_API_BEGIN;
    TC_TRY(check_common(gen, data, n, dtype));
    TC_TRY(need_floating(dtype, "normal"));
    TC_TRY(not_nan(mean, "mean", "a finite number"));
    TC_TRY(not_nan(std, "std", "a finite number >= 0"));
    char a[32], b[32];
    fmt_double(a, mean);
    fmt_double(b, std);
    TC_CHECK_ARG(std >= 0, "std=%s is negative; it must be >= 0", b);
    TC_CHECK_ARG(isfinite(mean) && isfinite(std),
                 "normal needs a finite mean and std (got mean=%s, std=%s)", a, b);
    tc__rng_params p = {.kind = TC__RNG_NORMAL, .dtype = dtype, .per_block = 4};
    if (dtype == TC_FLOAT64) {
        p.per_block = 2;
        p.da = mean;
        p.db = std;
    } else {
        p.fa = (float)mean;
        p.fb = (float)std;
        TC_CHECK_ARG(isfinite(p.fa) && isfinite(p.fb),
                     "mean=%s or std=%s is out of the range of float32", a, b);
    }
    return draw(gen, data, n, &p);
}

tc_status tc_generator_bernoulli(tc_generator *gen, void *data, size_t n, tc_dtype dtype, double p)
{
    TC_API_BEGIN;
    TC_TRY(check_common(gen, data, n, dtype));
    TC_TRY(not_nan(p, "p", "a probability in [0, 1]"));
    char a[32];
    TC_CHECK_ARG(p >= 0.0 && p <= 1.0, "bernoulli needs p in [0, 1] (got %s)", fmt_double(a, p));
    tc__rng_params q = {.kind = TC__RNG_BERNOULLI, .dtype = dtype, .per_block = 4};
    q.bthresh = (uint64_t)(ldexp(p, 32) + 0.5);
    return draw(gen, data, n, &q);
}

/* The integers a dtype holds exactly: [*mn, *mx]. */
static void int_bounds(tc_dtype dtype, int64_t *mn, int64_t *mx)
{
    switch (dtype) {
    case TC_BOOL:
        *mn = 0;
        *mx = 1;
        break;
    case TC_UINT8:
        *mn = 0;
        *mx = 255;
        break;
    case TC_INT8:
        *mn = -128;
        *mx = 127;
        break;
    case TC_INT16:
        *mn = -32768;
        *mx = 32767;
        break;
    case TC_INT32:
        *mn = INT32_MIN;
        *mx = INT32_MAX;
        break;
    case TC_FLOAT16:
        *mn = -2048;
        *mx = 2048;
        break;
    case TC_BFLOAT16:
        *mn = -256;
        *mx = 256;
        break;
    case TC_FLOAT32:
        *mn = -(1ll << 24);
        *mx = 1ll << 24;
        break;
    case TC_FLOAT64:
        *mn = -(1ll << 53);
        *mx = 1ll << 53;
        break;
    default:
        *mn = INT64_MIN;
        *mx = INT64_MAX;
        break;
    }
}

tc_status tc_generator_random_int(tc_generator *gen, void *data, size_t n, tc_dtype dtype,
                                  int64_t lo, int64_t hi)
{
    TC_API_BEGIN;
    TC_TRY(check_common(gen, data, n, dtype));
    TC_CHECK_ARG(lo < hi, "random_int needs lo < hi (got [%lld, %lld))", (long long)lo,
                 (long long)hi);
    int64_t mn, mx;
    int_bounds(dtype, &mn, &mx);
    TC_CHECK_ARG(lo >= mn && hi - 1 <= mx,
                 "[%lld, %lld) does not fit %s, which holds the integers %lld to %lld exactly",
                 (long long)lo, (long long)hi, tc_dtype_string(dtype), (long long)mn,
                 (long long)mx);
    tc__rng_params p = {.kind = TC__RNG_INT, .dtype = dtype, .per_block = 4};
    uint64_t range = (uint64_t)hi - (uint64_t)lo; /* 1 .. 2^64-1 */
    p.ilo = (uint64_t)lo;
    p.irange = range;
    if (range <= (1ull << 32)) {
        p.ithresh = range == (1ull << 32) ? 0 : (uint32_t)(-(uint32_t)range) % (uint32_t)range;
    } else {
        p.wide = 1;
        p.per_block = 2;
        p.ithresh = (0 - range) % range;
    }
    return draw(gen, data, n, &p);
}

/* ---- torch.cuda's functions ------------------------------------------------ */

static tc_status current_default(int device, tc_generator **out)
{
    return tc_default_generator((tc_device){TC_CUDA, device}, out);
}

tc_status tc_manual_seed(uint64_t seed)
{
    TC_API_BEGIN;
    if (tc__dev()->device_count() == 0)
        return TC_OK; /* as torch.cuda: nothing to seed without CUDA */
    tc_generator *g;
    TC_TRY(current_default(-1, &g));
    return tc_generator_manual_seed(g, seed);
}

tc_status tc_manual_seed_all(uint64_t seed)
{
    TC_API_BEGIN;
    int count = tc__dev()->device_count();
    for (int d = 0; d < count; d++) {
        tc_generator *g;
        TC_TRY(current_default(d, &g));
        TC_TRY(tc_generator_manual_seed(g, seed));
    }
    return TC_OK;
}

tc_status tc_seed(void)
{
    TC_API_BEGIN;
    if (tc__dev()->device_count() == 0)
        return TC_OK;
    tc_generator *g;
    TC_TRY(current_default(-1, &g));
    return tc_generator_seed(g, NULL);
}

tc_status tc_seed_all(void)
{
    TC_API_BEGIN;
    if (tc__dev()->device_count() == 0)
        return TC_OK;
    uint64_t s;
    TC_TRY(tc__os_entropy(&s));
    return tc_manual_seed_all(s);
}

tc_status tc_initial_seed(uint64_t *seed)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(seed, "seed is NULL");
    tc_generator *g;
    TC_TRY(current_default(-1, &g));
    pthread_mutex_lock(&g->lock);
    uint64_t s = g->seed;
    pthread_mutex_unlock(&g->lock);
    *seed = s;
    return TC_OK;
}

tc_status tc_get_rng_state(int device, tc_rng_state *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc_generator *g;
    TC_TRY(current_default(device, &g));
    return tc_generator_get_state(g, out);
}

tc_status tc_set_rng_state(int device, const tc_rng_state *state)
{
    TC_API_BEGIN;
    uint64_t seed, offset;
    TC_TRY(decode_state(state, "state", &seed, &offset));
    tc_generator *g;
    TC_TRY(current_default(device, &g));
    return tc_generator_set_state(g, state);
}

tc_status tc_get_rng_state_all(tc_rng_state *states, int n)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(states || n == 0, "states is NULL");
    int count = tc__dev()->device_count();
    TC_CHECK_ARG(n >= count, "n=%d is less than the %d GPUs this process sees", n, count);
    for (int d = 0; d < count; d++) {
        tc_generator *g;
        TC_TRY(current_default(d, &g));
        TC_TRY(tc_generator_get_state(g, &states[d]));
    }
    return TC_OK;
}

tc_status tc_set_rng_state_all(const tc_rng_state *states, int n)
{
    TC_API_BEGIN;
    int count = tc__dev()->device_count();
    TC_CHECK_ARG(n >= 0 && n <= count, "n=%d: this process sees %d GPUs", n, count);
    TC_CHECK_ARG(states || n == 0, "states is NULL");
    for (int d = 0; d < n; d++) {
        uint64_t seed, offset;
        char name[32];
        snprintf(name, sizeof name, "states[%d]", d);
        TC_TRY(decode_state(&states[d], name, &seed, &offset));
    }
    for (int d = 0; d < n; d++)
        TC_TRY(tc_set_rng_state(d, &states[d]));
    return TC_OK;
}
