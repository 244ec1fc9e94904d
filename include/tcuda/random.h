/* tcuda: reproducible random numbers (torch.cuda's manual_seed, seed,
 * initial_seed, get/set_rng_state and their _all forms, and generators).
 *
 * Every generator is Philox4x32-10 with state = (seed, offset): a draw of n
 * elements uses Philox blocks offset .. offset+ceil(n/E)-1 (E = 4 values per
 * block, 2 for float64 uniform/normal and for integer ranges above 2^32) and
 * then advances the offset past them, so consecutive draws never share
 * counters. Element i of a draw depends only on (seed, offset, i): the CPU
 * and every GPU give bitwise identical uniform, integer and bernoulli values
 * for the same state, and normal values within 2 ulp (in practice bitwise:
 * both sides evaluate the same Box-Muller formulas operation by operation;
 * src/random/philox.h documents the transforms).
 *
 * Default generators: one for the CPU and one per GPU, seeded with
 * TC_DEFAULT_SEED until reseeded. tc_manual_seed and friends act on the GPU
 * ones, as torch.cuda.manual_seed does (it does not touch the CPU generator;
 * seed that with tc_generator_manual_seed on tc_default_generator({TC_CPU,-1})).
 * Like torch.cuda's, the seeding functions are no-ops returning TC_OK when
 * CUDA is not available. All functions are thread-safe. */
#ifndef TCUDA_RANDOM_H
#define TCUDA_RANDOM_H

#include <stdbool.h>
#include <stdint.h>

#include "device.h"
#include "dtype.h"

TCUDA_EXTERN_C_BEGIN

/* The seed of every default generator until it is reseeded (PyTorch's). */
#define TC_DEFAULT_SEED 67280421310721ull

typedef struct tc_generator tc_generator;

/* ---- generator state as bytes ------------------------------------------ */

/* A generator's state as a portable, versioned blob (little-endian):
 *   bytes  0..3   magic "TCRS"
 *   bytes  4..5   version (TC_RNG_STATE_VERSION)
 *   bytes  6..7   algorithm (1 = Philox4x32-10)
 *   bytes  8..15  seed
 *   bytes 16..23  offset (Philox blocks used so far)
 *   bytes 24..31  FNV-1a 64-bit checksum of bytes 0..23
 * A state taken from any generator (CPU or GPU) can be set into any other. */
#define TC_RNG_STATE_SIZE 32
#define TC_RNG_STATE_VERSION 1
typedef struct tc_rng_state {
    uint8_t bytes[TC_RNG_STATE_SIZE];
} tc_rng_state;

/* ---- generators ---------------------------------------------------------- */

/* Creates a generator on `device` ({TC_CPU,-1}, or {TC_CUDA,i}, i =
 * TC_CURRENT_DEVICE for
 * the current GPU) with `seed` and offset 0, into *out (written only on
 * success). The caller destroys it. TC_ERROR_NO_DEVICE for a CUDA generator
 * without CUDA. */
TCUDA_API tc_status tc_generator_create(tc_device device, uint64_t seed, tc_generator **out);
/* Destroys a generator from tc_generator_create (default ones are refused
 * with TC_ERROR_INVALID_ARGUMENT). The handle is dead afterwards: using it,
 * or destroying it again, gives TC_ERROR_INVALID_HANDLE. */
TCUDA_API tc_status tc_generator_destroy(tc_generator *gen);
/* The default generator of `device` (borrowed, lives as long as the process).
 * device.index TC_CURRENT_DEVICE = the current CUDA device; {TC_CPU,-1} =
 * the CPU one. */
TCUDA_API tc_status tc_default_generator(tc_device device, tc_generator **out);

/* Sets gen's seed and resets its offset to 0. */
TCUDA_API tc_status tc_generator_manual_seed(tc_generator *gen, uint64_t seed);
/* Seeds from the operating system's entropy (getrandom); the chosen seed is
 * written to *seed when not NULL. */
TCUDA_API tc_status tc_generator_seed(tc_generator *gen, uint64_t *seed);
/* The generator's seed as last set, its offset (Philox blocks used so far)
 * and its device ({TC_CPU,-1} or {TC_CUDA,i}, i resolved), into *out.
 * TC_ERROR_INVALID_ARGUMENT for a NULL gen or out, TC_ERROR_INVALID_HANDLE
 * for a destroyed generator. */
TCUDA_API tc_status tc_generator_initial_seed(const tc_generator *gen, uint64_t *out);
TCUDA_API tc_status tc_generator_offset(const tc_generator *gen, uint64_t *out);
TCUDA_API tc_status tc_generator_device(const tc_generator *gen, tc_device *out);

/* The state as a blob, and back. A blob with a wrong magic, version,
 * algorithm or checksum is TC_ERROR_INVALID_ARGUMENT naming what is wrong;
 * the generator is then unchanged. Any offset is accepted, up to 2^64-1 (a
 * state taken from a generator must go back into it), but draws refuse to
 * run past 2^64 blocks (see below). */
TCUDA_API tc_status tc_generator_get_state(const tc_generator *gen, tc_rng_state *out);
TCUDA_API tc_status tc_generator_set_state(tc_generator *gen, const tc_rng_state *state);

/* ---- draws into buffers --------------------------------------------------- */
/* Fill n elements of `data` (host memory for a CPU generator, device memory
 * of the generator's device for a CUDA one; CUDA work goes on the current
 * stream of that device and returns before it finishes). Bad arguments give
 * TC_ERROR_INVALID_ARGUMENT (NULL, unknown dtype, empty interval, ...) or
 * TC_ERROR_DTYPE (a dtype the distribution does not take) and leave the
 * offset unchanged. A draw whose blocks would take the offset past 2^64-1
 * is TC_ERROR_INVALID_STATE (Philox counters would wrap and repeat numbers):
 * reseed or set a state with a smaller offset. n == 0 is a no-op. lo and hi
 * are first rounded to the dtype; results lie in [lo, hi). */

/* uniform in [lo, hi): floating dtypes only. */
TCUDA_API tc_status tc_generator_uniform(tc_generator *gen, void *data, size_t n, tc_dtype dtype,
                                         double lo, double hi);
/* normal(mean, std), finite mean, finite std >= 0: floating dtypes only. */
TCUDA_API tc_status tc_generator_normal(tc_generator *gen, void *data, size_t n, tc_dtype dtype,
                                        double mean, double std);
/* 1 with probability p in [0, 1] (resolved to 2^-32), else 0: any dtype.
 * NaN for lo, hi, mean, std or p is refused with a message saying so. */
TCUDA_API tc_status tc_generator_bernoulli(tc_generator *gen, void *data, size_t n, tc_dtype dtype,
                                           double p);
/* Unbiased integers in [lo, hi): any dtype that holds lo and hi-1 exactly
 * (for floats: |v| <= 2^11, 2^8, 2^24, 2^53 for float16, bfloat16, float32,
 * float64; bool: [0, 2)). */
TCUDA_API tc_status tc_generator_random_int(tc_generator *gen, void *data, size_t n, tc_dtype dtype,
                                            int64_t lo, int64_t hi);

/* ---- torch.cuda's functions (the default GPU generators) ----------------- */

/* Seeds the current GPU's default generator (torch.cuda.manual_seed), or
 * every GPU's (manual_seed_all). The offset goes back to 0. */
TCUDA_API tc_status tc_manual_seed(uint64_t seed);
TCUDA_API tc_status tc_manual_seed_all(uint64_t seed);
/* Seeds the current GPU's default generator with a seed from getrandom; _all
 * seeds every GPU with one such seed (as torch.cuda.seed_all). */
TCUDA_API tc_status tc_seed(void);
TCUDA_API tc_status tc_seed_all(void);
/* The current GPU's default generator's seed, into *seed (written only on
 * success). TC_ERROR_NO_DEVICE without CUDA (there is no such generator). */
TCUDA_API tc_status tc_initial_seed(uint64_t *seed);

/* The state of `device`'s (TC_CURRENT_DEVICE: current) default generator,
 * and back. */
TCUDA_API tc_status tc_get_rng_state(int device, tc_rng_state *out);
TCUDA_API tc_status tc_set_rng_state(int device, const tc_rng_state *state);
/* Every GPU's state: n must be at least tc_device_count(); fills the first
 * tc_device_count() entries. */
TCUDA_API tc_status tc_get_rng_state_all(tc_rng_state *states, int n);
/* Sets GPUs 0..n-1 (n <= tc_device_count()) from states[0..n-1]; all blobs
 * are checked before any generator changes. */
TCUDA_API tc_status tc_set_rng_state_all(const tc_rng_state *states, int n);

TCUDA_EXTERN_C_END

#endif
