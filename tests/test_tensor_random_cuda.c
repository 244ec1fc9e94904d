/* Random fills of GPU tensors: the same generator state gives the same
 * tensor on the GPU as on the CPU (bitwise for uniform, integer and bernoulli
 * fills, within 2 ulp for normal ones), contiguous or strided; a generator of
 * another device is refused; rand/randn on the GPU. Needs a GPU. */
#include <math.h>
#include <stdlib.h>

#include "tc_test.h"

static const tc_device CPU = {TC_CPU, -1}, GPU = {TC_CUDA, -1};

/* Distance in units in the last place of `dt` between two values of dt. */
static double ulps(double a, double b, tc_dtype dt)
{
    if (a == b)
        return 0;
    int mant = dt == TC_FLOAT64 ? 52 : dt == TC_FLOAT32 ? 23 : dt == TC_FLOAT16 ? 10 : 7;
    int e;
    (void)frexp(fmax(fabs(a), fabs(b)), &e);
    return fabs(a - b) / ldexp(1.0, e - 1 - mant);
}

/* Fills a tensor of sizes sz (transposed view when strided) on `dev`. */
static tc_tensor *filled(tc_device dev, int strided, int kind, tc_dtype dt, double a, double b,
                         uint64_t seed)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_create(dev, seed, &g));
    int64_t sz[2] = {strided ? 301 : 173, strided ? 173 : 301};
    tc_tensor *base = NULL, *t = NULL;
    CHECK_OK(tc_tensor_zeros(2, sz, dt, dev, &base));
    if (strided) {
        CHECK_OK(tc_tensor_transpose(base, 0, 1, &t));
    } else {
        CHECK_OK(tc_tensor_retain(base));
        t = base;
    }
    tc_tensor_release(base);
    tc_status st = kind == 0   ? tc_tensor_uniform_(t, a, b, g)
                   : kind == 1 ? tc_tensor_normal_(t, a, b, g)
                   : kind == 2 ? tc_tensor_bernoulli_(t, a, g)
                               : tc_tensor_random_(t, (int64_t)a, (int64_t)b, g);
    CHECK_OK(st);
    tc_generator_destroy(g);
    return t;
}

static void test_cpu_equals_gpu(void)
{
    struct {
        int kind;
        tc_dtype dt;
        double a, b;
    } cases[] = {{0, TC_FLOAT32, -1, 1},  {0, TC_FLOAT16, 0, 1},  {0, TC_FLOAT64, 2, 3},
                 {1, TC_FLOAT32, 0, 1},   {1, TC_BFLOAT16, 1, 2}, {1, TC_FLOAT64, 0, 1},
                 {2, TC_BOOL, 0.25, 0},   {2, TC_INT8, 0.5, 0},   {3, TC_INT64, -9, 1 << 20},
                 {3, TC_INT16, -300, 300}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int strided = 0; strided < 2; strided++) {
            tc_tensor *tc = filled(CPU, strided, cases[c].kind, cases[c].dt, cases[c].a, cases[c].b,
                                   77 + c);
            tc_tensor *tg = filled(GPU, strided, cases[c].kind, cases[c].dt, cases[c].a, cases[c].b,
                                   77 + c);
            double *vc = tc_test_values(tc), *vg = tc_test_values(tg);
            double worst = 0;
            for (int64_t i = 0; i < tc_tensor_numel(tc); i++)
                worst = fmax(worst, ulps(vc[i], vg[i], cases[c].dt));
            if (cases[c].kind == 1)
                CHECK(worst <= 2);
            else
                CHECK(worst == 0);
            if ((cases[c].kind == 1 && worst > 2) || (cases[c].kind != 1 && worst > 0))
                fprintf(stderr, "case %zu strided %d: %g ulp apart\n", c, strided, worst);
            free(vc), free(vg);
            tc_tensor_release(tc), tc_tensor_release(tg);
        }
}

static void test_generators_and_factories(void)
{
    int64_t sz[2] = {64, 64};
    tc_tensor *g = NULL, *c = NULL, *r = NULL;
    CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT32, GPU, &g));
    CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT32, CPU, &c));
    tc_generator *cpu = NULL, *gpu = NULL;
    CHECK_OK(tc_default_generator(CPU, &cpu));
    CHECK_OK(tc_default_generator(GPU, &gpu));
    uint64_t oc = tc_test_gen_offset(cpu), og = tc_test_gen_offset(gpu);
    CHECK_STATUS(tc_tensor_uniform_(g, 0, 1, cpu), TC_ERROR_DEVICE_MISMATCH);
    CHECK_STATUS(tc_tensor_normal_(c, 0, 1, gpu), TC_ERROR_DEVICE_MISMATCH);
    CHECK(tc_test_gen_offset(cpu) == oc && tc_test_gen_offset(gpu) == og);
    /* NULL: the tensor's device's default generator (torch.cuda.manual_seed's) */
    CHECK_OK(tc_manual_seed(11));
    CHECK_OK(tc_tensor_uniform_(g, 0, 1, NULL));
    CHECK(tc_test_gen_offset(gpu) == 64 * 64 / 4);
    CHECK_OK(tc_manual_seed(11));
    CHECK_OK(tc_tensor_rand(2, sz, TC_FLOAT32, GPU, NULL, &r));
    double *a = tc_test_values(g), *b = tc_test_values(r);
    bool same = true;
    for (int i = 0; i < 64 * 64; i++)
        same &= a[i] == b[i] && a[i] >= 0 && a[i] < 1;
    CHECK(same);
    free(a), free(b);
    tc_tensor_release(r);
    CHECK_OK(tc_tensor_randn(2, sz, TC_FLOAT16, GPU, NULL, &r));
    CHECK(tc_tensor_is_cuda(r) && tc_tensor_dtype(r) == TC_FLOAT16);
    tc_tensor_release(r), tc_tensor_release(g), tc_tensor_release(c);
}

int main(void)
{
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    test_cpu_equals_gpu();
    test_generators_and_factories();
    return TC_TEST_DONE();
}
