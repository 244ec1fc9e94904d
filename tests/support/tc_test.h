/* A tiny assertion kit for tcuda's tests.
 *
 * CHECK(cond) and friends print the place and go on counting failures;
 * TC_TEST_DONE() prints "N passed, N failed" and returns the exit code.
 * TC_TEST_REQUIRE_GPU() exits with 77 (CTest: skipped) when there is no GPU.
 * Random inputs come from tc_test_rand*(), seeded by tc_test_seed(): the
 * environment's TCUDA_TEST_SEED, or the clock. The seed is printed when a
 * test starts and with every failure, so any run can be repeated:
 *   TCUDA_TEST_SEED=1234 build/tests/test_x */
#ifndef TC_TEST_H
#define TC_TEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tcuda/tcuda.h"

extern int tc_test_passed, tc_test_failed;

void tc_test_fail_at(const char *file, int line, const char *what);

/* A GPU test's one way to skip. TC_TEST_REQUIRE_GPU() exits with 77 when no
 * GPU is usable: none is there, no driver, or the build is without CUDA, so
 * one test source skips alike in both builds. TC_TEST_REQUIRE_GPU_AFTER(checks)
 * first runs checks() (what can be checked without a GPU), prints their
 * count and exits 1 if any failed, else 77. With a GPU both return.
 * tests/CMakeLists.txt labels every test that says either "gpu"; a test that
 * needs CUDA to compile is listed there as well (TCUDA_CUDA_TESTS). */
#define TC_TEST_REQUIRE_GPU() tc_test_require_gpu()
#define TC_TEST_REQUIRE_GPU_AFTER(checks) tc_test_require_gpu_after(checks)
void tc_test_require_gpu(void);
void tc_test_require_gpu_after(void (*checks)(void));

/* Seeds the test's random numbers and prints the seed (main calls it first). */
void tc_test_init(void);
/* The seed of this run: TCUDA_TEST_SEED (decimal or 0x-hex) when set, else
 * taken from the clock. The one seed every random input derives from: a test
 * that needs its own generator (one per thread, say) seeds it from this. */
uint64_t tc_test_seed(void);
uint64_t tc_test_rand(void);
double tc_test_rand_uniform(void); /* [0, 1) */
double tc_test_now_ms(void);       /* monotonic wall clock */
/* A tensor's elements as doubles, row-major (caller frees); a failed read
 * counts as a failed check. */
double *tc_test_values(const tc_tensor *t);
/* A generator's offset and seed as values (tc_generator_offset and
 * tc_generator_initial_seed); a failed read counts as a failed check. */
uint64_t tc_test_gen_offset(const tc_generator *g);
uint64_t tc_test_gen_seed(const tc_generator *g);
/* The status getters as values, for expressions: a byte count such as
 * tc_test_bytes(tc_memory_reserved, 0), one statistic (tc_memory_stats_get),
 * the current device and the current stream of a device. A failed read
 * counts as a failed check (and gives 0, -1, -1 or NULL). */
size_t tc_test_bytes(tc_status (*getter)(int device, size_t *out), int device);
int64_t tc_test_stat(int device, const char *key);
int tc_test_current_device(void);
tc_stream *tc_test_current_stream(int device);
/* Sends stderr to a temporary file until capture_end, which returns what was
 * written (static buffer, NUL-terminated). */
void tc_test_capture_stderr_begin(void);
const char *tc_test_capture_stderr_end(void);
/* A malloc'd block of `size` random bytes (caller frees), as a program with
 * a stray pointer would pass for a handle. Its first byte is 0, so its first
 * word is neither a live handle's magic word (tcuda's end in 0x11 or 0x71)
 * nor the dead one (0xdeadbeef). */
void *tc_test_garbage(size_t size);
/* The whole of a file, NUL-terminated (caller frees); an empty string when
 * it cannot be read. */
char *tc_test_read_file(const char *path);
/* The built `tcuda` program: TCUDA_TOOL when set, else ../tools/tcuda
 * beside the test program `self` (written into buf); NULL when neither. */
const char *tc_test_find_tool(const char *self, char *buf, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond)                                                                                  \
            tc_test_passed++;                                                                      \
        else                                                                                       \
            tc_test_fail_at(__FILE__, __LINE__, #cond);                                            \
    } while (0)

/* A call that must succeed; on failure prints the status and message. */
#define CHECK_OK(call)                                                                             \
    do {                                                                                           \
        tc_status st_ = (call);                                                                    \
        if (st_ == TC_OK)                                                                          \
            tc_test_passed++;                                                                      \
        else {                                                                                     \
            char buf_[1400];                                                                       \
            snprintf(buf_, sizeof buf_, "%s -> %s: %s", #call, tc_status_string(st_),              \
                     tc_last_error());                                                             \
            tc_test_fail_at(__FILE__, __LINE__, buf_);                                             \
        }                                                                                          \
    } while (0)

/* A call that must fail with `expected` and leave a non-empty message. */
#define CHECK_STATUS(call, expected)                                                               \
    do {                                                                                           \
        tc_status st_ = (call);                                                                    \
        if (st_ == (expected) && tc_last_error()[0] != '\0')                                       \
            tc_test_passed++;                                                                      \
        else {                                                                                     \
            char buf_[1400];                                                                       \
            snprintf(buf_, sizeof buf_, "%s -> %s (wanted %s): %s", #call, tc_status_string(st_),  \
                     tc_status_string(expected), tc_last_error());                                 \
            tc_test_fail_at(__FILE__, __LINE__, buf_);                                             \
        }                                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol) CHECK(fabs((double)(a) - (double)(b)) <= (tol))

#define TC_TEST_DONE()                                                                             \
    (printf("%d passed, %d failed\n", tc_test_passed, tc_test_failed), tc_test_failed ? 1 : 0)

#endif
