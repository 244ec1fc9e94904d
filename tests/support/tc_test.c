/* The test kit's counters, seed, random numbers and GPU check. */
#include "tc_test.h"

#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int tc_test_passed, tc_test_failed;
static uint64_t seed, rng_state;
static bool seeded;

static uint64_t seed_from_env_or_clock(void)
{
    const char *env = getenv("TCUDA_TEST_SEED");
    if (env && *env) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(env, &end, 0);
        if (errno || *end || *env == '-') {
            fprintf(stderr, "TCUDA_TEST_SEED='%s' is not a seed: give a number such as 1234\n",
                    env);
            exit(2);
        }
        return v;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void tc_test_init(void)
{
    if (seeded)
        return;
    seed = seed_from_env_or_clock();
    rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
    seeded = true;
    printf("TCUDA_TEST_SEED=%llu (set it to repeat this run's random inputs)\n",
           (unsigned long long)seed);
    fflush(stdout);
}

uint64_t tc_test_seed(void)
{
    tc_test_init();
    return seed;
}

void tc_test_fail_at(const char *file, int line, const char *what)
{
    tc_test_failed++;
    fprintf(stderr, "FAIL %s:%d: %s (TCUDA_TEST_SEED=%llu)\n", file, line, what,
            (unsigned long long)tc_test_seed());
}

void tc_test_require_gpu(void)
{
    if (!tc_is_available()) {
        printf("skipped: no GPU: %s\n", tc_last_error());
        exit(77);
    }
}

void tc_test_require_gpu_after(void (*checks)(void))
{
    if (tc_is_available())
        return;
    checks();
    printf("no GPU: %d checks of the answers without one passed\n", tc_test_passed);
    if (tc_test_failed)
        exit(TC_TEST_DONE());
    tc_test_require_gpu(); /* exits 77 */
}

uint64_t tc_test_rand(void)
{
    tc_test_init();
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double tc_test_rand_uniform(void) { return (double)(tc_test_rand() >> 11) * 0x1.0p-53; }

double tc_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double *tc_test_values(const tc_tensor *t)
{
    int64_t n = tc_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    CHECK_OK(tc_tensor_to_host(t, TC_FLOAT64, v));
    return v;
}

uint64_t tc_test_gen_offset(const tc_generator *g)
{
    uint64_t v = 0;
    CHECK_OK(tc_generator_offset(g, &v));
    return v;
}

uint64_t tc_test_gen_seed(const tc_generator *g)
{
    uint64_t v = 0;
    CHECK_OK(tc_generator_initial_seed(g, &v));
    return v;
}

size_t tc_test_bytes(tc_status (*getter)(int device, size_t *out), int device)
{
    size_t v = 0;
    CHECK_OK(getter(device, &v));
    return v;
}

int64_t tc_test_stat(int device, const char *key)
{
    int64_t v = -1;
    CHECK_OK(tc_memory_stats_get(device, key, &v));
    return v;
}

int tc_test_current_device(void)
{
    int d = -1;
    CHECK_OK(tc_current_device(&d));
    return d;
}

tc_stream *tc_test_current_stream(int device)
{
    tc_stream *s = NULL;
    CHECK_OK(tc_current_stream(device, &s));
    return s;
}

static int saved_stderr = -1;
static FILE *capture_file;

void tc_test_capture_stderr_begin(void)
{
    fflush(stderr);
    capture_file = tmpfile();
    saved_stderr = dup(2);
    dup2(fileno(capture_file), 2);
}

const char *tc_test_capture_stderr_end(void)
{
    static char text[4096];
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    rewind(capture_file);
    size_t n = fread(text, 1, sizeof text - 1, capture_file);
    text[n] = '\0';
    fclose(capture_file);
    return text;
}

void *tc_test_garbage(size_t size)
{
    unsigned char *p = malloc(size);
    if (!p)
        abort();
    for (size_t i = 0; i < size; i++)
        p[i] = (unsigned char)tc_test_rand();
    p[0] = 0;
    return p;
}

char *tc_test_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    char *s = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (!s)
        abort();
    size_t got = 0;
    if (f && n > 0 && fseek(f, 0, SEEK_SET) == 0)
        got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    if (f)
        fclose(f);
    return s;
}

const char *tc_test_find_tool(const char *self, char *buf, size_t size)
{
    const char *env = getenv("TCUDA_TOOL");
    if (env && *env)
        return env;
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", self);
    snprintf(buf, size, "%s/../tools/tcuda", dirname(copy));
    return access(buf, X_OK) == 0 ? buf : NULL;
}
