/* Random numbers on the GPU: for the same state, every distribution and dtype
 * gives the CPU's bytes (normal: bitwise expected, within 2 ulp required),
 * on aligned and unaligned buffers and with an odd tail; offsets advance as
 * on the CPU; torch.cuda's seeding and state functions; and the CUDA graph
 * hook, through a real capture replayed twice. Skips (77) without a GPU.
 * Uses cudaMalloc/cudaMemcpy until the caching allocator lands. */
#include <math.h>
#include <stdlib.h>

#include "tc_rng_forge.h"
#include "tc_test.h"

#include <cuda_runtime_api.h>

#include "random/cuda/random_cuda.h"

enum { UNIFORM, NORMAL, BERNOULLI, INT };

/* The draw of `kind`: a, b are (lo, hi), (mean, std) or (p, -); integers use ia, ib. */
static tc_status draw(tc_generator *g, int kind, void *p, size_t n, tc_dtype dt, double a, double b,
                      int64_t ia, int64_t ib)
{
    switch (kind) {
    case UNIFORM: return tc_generator_uniform(g, p, n, dt, a, b);
    case NORMAL: return tc_generator_normal(g, p, n, dt, a, b);
    case BERNOULLI: return tc_generator_bernoulli(g, p, n, dt, a);
    default: return tc_generator_random_int(g, p, n, dt, ia, ib);
    }
}

/* Distance in ulps between two values of a floating dtype given as bytes. */
static double ulps(const unsigned char *x, const unsigned char *y, tc_dtype dt)
{
    int64_t a = 0, b = 0;
    size_t s = tc_dtype_size(dt);
    memcpy(&a, x, s);
    memcpy(&b, y, s);
    int bits = (int)s * 8;
    int64_t sign = (int64_t)1 << (bits - 1);
    /* sign-magnitude to a monotone integer line */
    a = (a & sign) ? -(a & (sign - 1)) : a;
    b = (b & sign) ? -(b & (sign - 1)) : b;
    return fabs((double)(a - b));
}

static void parity(const char *what, int kind, tc_dtype dt, double a, double b, int64_t ia,
                   int64_t ib, size_t n, size_t shift)
{
    size_t es = tc_dtype_size(dt);
    uint64_t seed = tc_test_rand();
    tc_generator *cpu = NULL, *gpu = NULL;
    CHECK_OK(tc_generator_create((tc_device){TC_CPU, -1}, seed, &cpu));
    CHECK_OK(tc_generator_create((tc_device){TC_CUDA, -1}, 0, &gpu));
    /* start both at the same non-zero offset */
    float warm[5];
    CHECK_OK(tc_generator_uniform(cpu, warm, 5, TC_FLOAT32, 0, 1));
    tc_rng_state st;
    CHECK_OK(tc_generator_get_state(cpu, &st));
    CHECK_OK(tc_generator_set_state(gpu, &st));
    unsigned char *host = malloc(n * es), *back = malloc(n * es);
    void *dev = NULL;
    if (cudaMalloc(&dev, (n + shift) * es + 16) != cudaSuccess) {
        CHECK(!"cudaMalloc");
        return;
    }
    unsigned char *d = (unsigned char *)dev + shift * es;
    CHECK_OK(draw(cpu, kind, host, n, dt, a, b, ia, ib));
    CHECK_OK(draw(gpu, kind, d, n, dt, a, b, ia, ib));
    CHECK(cudaMemcpy(back, d, n * es, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(tc_test_gen_offset(cpu) == tc_test_gen_offset(gpu));
    size_t diff = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(host + i * es, back + i * es, es) != 0) {
            diff++;
            if (kind == NORMAL)
                worst = fmax(worst, ulps(host + i * es, back + i * es, dt));
        }
    }
    if (diff)
        fprintf(stderr, "%s %s: %zu of %zu elements differ (worst %.0f ulp)\n", what,
                tc_dtype_string(dt), diff, n, worst);
    if (kind == NORMAL)
        CHECK(worst <= 2);
    else
        CHECK(diff == 0);
    cudaFree(dev);
    free(host);
    free(back);
    CHECK_OK(tc_generator_destroy(cpu));
    CHECK_OK(tc_generator_destroy(gpu));
}

static void test_parity(void)
{
    size_t n = (1u << 20) + 3;
    static const tc_dtype fl[] = {TC_FLOAT16, TC_BFLOAT16, TC_FLOAT32, TC_FLOAT64};
    for (int k = 0; k < 4; k++) {
        parity("uniform", UNIFORM, fl[k], -1.5, 2.25, 0, 0, n, 0);
        parity("uniform-unaligned", UNIFORM, fl[k], -1.5, 2.25, 0, 0, n, 1);
        parity("uniform-narrow", UNIFORM, fl[k], 1.0, 1.01, 0, 0, n, 0);
        parity("normal", NORMAL, fl[k], 0.5, 2.0, 0, 0, n, 0);
        parity("normal-unaligned", NORMAL, fl[k], -3, 0.1, 0, 0, n, 1);
    }
    int64_t lo[] = {0,         0,     -128, -32768,     INT32_MIN,
                    INT64_MIN, -2048, -256, -(1 << 24), -(1ll << 53)};
    int64_t hi[] = {2,         256,  128, 32768,         INT32_MAX,
                    INT64_MAX, 2049, 257, (1 << 24) + 1, (1ll << 53) + 1};
    for (int d = 0; d < TC_NUM_DTYPES; d++) {
        parity("bernoulli", BERNOULLI, (tc_dtype)d, 0.37, 0, 0, 0, n, 0);
        parity("bernoulli-unaligned", BERNOULLI, (tc_dtype)d, 0.37, 0, 0, 0, n, 3);
        parity("random_int", INT, (tc_dtype)d, 0, 0, lo[d], hi[d], n, 0);
        parity("random_int-small", INT, (tc_dtype)d, 0, 0, 0, 2, n, 1);
    }
    /* rejection paths: narrow (2^31+1) and wide (2^62+8) ranges */
    parity("random_int-reject32", INT, TC_INT64, 0, 0, 0, (1ll << 31) + 1, n, 0);
    parity("random_int-reject64", INT, TC_INT64, 0, 0, -5, (1ll << 62) + 3, n, 0);
    parity("random_int-wide-f64", INT, TC_FLOAT64, 0, 0, -(1ll << 53), 1ll << 53, n, 1);
}

static void test_torch_functions(void)
{
    int count = tc_device_count();
    CHECK_OK(tc_manual_seed(123));
    uint64_t seed0 = 0;
    CHECK_OK(tc_initial_seed(&seed0));
    CHECK(seed0 == 123);
    tc_rng_state s, t;
    CHECK_OK(tc_get_rng_state(-1, &s));
    tc_generator *g = NULL;
    CHECK_OK(tc_default_generator((tc_device){TC_CUDA, -1}, &g));
    CHECK(tc_test_gen_offset(g) == 0);
    float *d = NULL;
    CHECK(cudaMalloc((void **)&d, 4096 * sizeof(float)) == cudaSuccess);
    float a[4096], b[4096];
    CHECK_OK(tc_generator_normal(g, d, 4096, TC_FLOAT32, 0, 1));
    CHECK(cudaMemcpy(a, d, sizeof a, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(tc_test_gen_offset(g) == 1024);
    CHECK_OK(tc_set_rng_state(-1, &s));
    CHECK_OK(tc_generator_normal(g, d, 4096, TC_FLOAT32, 0, 1));
    CHECK(cudaMemcpy(b, d, sizeof b, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* the _all forms */
    tc_rng_state *all = calloc((size_t)count, sizeof *all);
    CHECK_OK(tc_manual_seed_all(77));
    CHECK_OK(tc_get_rng_state_all(all, count));
    CHECK_STATUS(tc_get_rng_state_all(all, count - 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_get_rng_state(count - 1, &t));
    CHECK(memcmp(&t, &all[count - 1], sizeof t) == 0);
    CHECK_OK(tc_generator_normal(g, d, 8, TC_FLOAT32, 0, 1));
    CHECK_OK(tc_set_rng_state_all(all, count));
    CHECK(tc_test_gen_offset(g) == 0 && tc_test_gen_seed(g) == 77);
    all[0].bytes[20] ^= 4;
    CHECK_OK(tc_generator_normal(g, d, 8, TC_FLOAT32, 0, 1));
    CHECK_STATUS(tc_set_rng_state_all(all, count), TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_test_gen_offset(g) == 2);
    CHECK_STATUS(tc_set_rng_state_all(all, count + 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_get_rng_state(count, &t), TC_ERROR_INVALID_DEVICE);
    CHECK_OK(tc_seed());
    uint64_t s1 = 0, s2 = 0;
    CHECK_OK(tc_initial_seed(&s1));
    CHECK_OK(tc_seed_all());
    CHECK_OK(tc_initial_seed(&s2));
    CHECK(s2 != s1);
    CHECK_STATUS(tc_initial_seed(NULL), TC_ERROR_INVALID_ARGUMENT);
    free(all);
    cudaFree(d);
}

/* A real graph: capture a uniform and a normal draw, replay twice; each replay
 * equals the CPU at the offset the prologue handed it, and they differ. */
static void test_graph_hook(void)
{
    size_t n = 10001, m = 4099;
    tc_generator *gpu = NULL, *cpu = NULL;
    uint64_t seed = tc_test_rand();
    CHECK_OK(tc_generator_create((tc_device){TC_CUDA, -1}, seed, &gpu));
    CHECK_OK(tc_generator_create((tc_device){TC_CPU, -1}, seed, &cpu));
    float *d = NULL;
    uint64_t *buf = NULL;
    CHECK(cudaMalloc((void **)&d, (n + m) * sizeof(float)) == cudaSuccess);
    CHECK(cudaMalloc((void **)&buf, 2 * sizeof(uint64_t)) == cudaSuccess);
    cudaStream_t cs;
    CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) == cudaSuccess);
    tc_stream *ts = NULL;
    CHECK_OK(tc_stream_create_external(cs, -1, &ts));
    CHECK_OK(tc_set_stream(ts));

    CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    CHECK_STATUS(tc_generator_uniform(gpu, d, n, TC_FLOAT32, 0, 1), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc__generator_capture_begin(gpu, buf));
    CHECK_OK(tc_generator_uniform(gpu, d, n, TC_FLOAT32, 0, 1));
    CHECK_OK(tc_generator_normal(gpu, d + n, m, TC_FLOAT32, 0, 1));
    uint64_t blocks = 0;
    CHECK_OK(tc__generator_capture_end(gpu, &blocks));
    CHECK(blocks == (n + 3) / 4 + (m + 3) / 4);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamEndCapture(cs, &graph) == cudaSuccess);
    CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    CHECK(tc_test_gen_offset(gpu) == 0);

    float *want = malloc((n + m) * sizeof(float)), *got = malloc((n + m) * sizeof(float));
    float *first = malloc((n + m) * sizeof(float));
    for (int rep = 0; rep < 2; rep++) {
        CHECK_OK(tc__generator_replay_prologue(gpu, buf, blocks, cs));
        CHECK(cudaGraphLaunch(exec, cs) == cudaSuccess);
        CHECK(cudaStreamSynchronize(cs) == cudaSuccess);
        CHECK(tc_test_gen_offset(gpu) == (uint64_t)(rep + 1) * blocks);
        CHECK(cudaMemcpy(got, d, (n + m) * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
        CHECK_OK(tc_generator_uniform(cpu, want, n, TC_FLOAT32, 0, 1));
        CHECK_OK(tc_generator_normal(cpu, want + n, m, TC_FLOAT32, 0, 1));
        CHECK(memcmp(want, got, (n + m) * sizeof(float)) == 0);
        if (rep == 0)
            memcpy(first, got, (n + m) * sizeof(float));
        else
            CHECK(memcmp(first, got, (n + m) * sizeof(float)) != 0);
    }
    CHECK_STATUS(tc__generator_capture_end(gpu, &blocks), TC_ERROR_INVALID_STATE);
    /* a replay whose blocks would pass 2^64-1 is refused, the offset unchanged */
    tc_rng_state top;
    tc_test_forge_state(seed, UINT64_MAX - blocks + 1, &top);
    CHECK_OK(tc_generator_set_state(gpu, &top));
    CHECK_STATUS(tc__generator_replay_prologue(gpu, buf, blocks, cs), TC_ERROR_INVALID_STATE);
    CHECK(tc_test_gen_offset(gpu) == UINT64_MAX - blocks + 1);
    tc_stream *def = NULL;
    CHECK_OK(tc_default_stream(-1, &def));
    CHECK_OK(tc_set_stream(def));
    CHECK_OK(tc_stream_destroy(ts));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(cs);
    cudaFree(d);
    cudaFree(buf);
    free(want);
    free(got);
    free(first);
    CHECK_OK(tc_generator_destroy(gpu));
    CHECK_OK(tc_generator_destroy(cpu));
}

/* Near the end of the counter space the GPU gives the CPU's numbers from the
 * last blocks, and refuses, as the CPU does, a draw that would wrap. */
static void test_offset_wrap(void)
{
    uint64_t seed = tc_test_rand(), top = UINT64_MAX - 5;
    tc_rng_state st;
    tc_test_forge_state(seed, top, &st);
    tc_generator *cpu = NULL, *gpu = NULL;
    CHECK_OK(tc_generator_create((tc_device){TC_CPU, -1}, 1, &cpu));
    CHECK_OK(tc_generator_create((tc_device){TC_CUDA, -1}, 1, &gpu));
    CHECK_OK(tc_generator_set_state(cpu, &st));
    CHECK_OK(tc_generator_set_state(gpu, &st));
    enum { N = 20 }; /* 5 blocks: up to offset 2^64-1 exactly */
    float want[N], got[N];
    float *d = NULL;
    CHECK(cudaMalloc((void **)&d, sizeof got) == cudaSuccess);
    CHECK_STATUS(tc_generator_uniform(gpu, d, N + 1, TC_FLOAT32, 0, 1), TC_ERROR_INVALID_STATE);
    CHECK(tc_test_gen_offset(gpu) == top);
    CHECK_OK(tc_generator_uniform(cpu, want, N, TC_FLOAT32, 0, 1));
    CHECK_OK(tc_generator_uniform(gpu, d, N, TC_FLOAT32, 0, 1));
    CHECK(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(want, got, sizeof got) == 0);
    CHECK(tc_test_gen_offset(gpu) == UINT64_MAX && tc_test_gen_offset(cpu) == UINT64_MAX);
    CHECK_STATUS(tc_generator_normal(gpu, d, 1, TC_FLOAT32, 0, 1), TC_ERROR_INVALID_STATE);
    cudaFree(d);
    CHECK_OK(tc_generator_destroy(cpu));
    CHECK_OK(tc_generator_destroy(gpu));
}

int main(void)
{
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    test_offset_wrap();
    double t0 = tc_test_now_ms();
    test_parity();
    test_torch_functions();
    test_graph_hook();
    printf("test_random_cuda: %.0f ms\n", tc_test_now_ms() - t0);
    return TC_TEST_DONE();
}
