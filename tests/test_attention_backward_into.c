/* tc_nn_scaled_dot_product_attention_backward_lse_into (nn_backward.h): the
 * attention backward into the caller's tensors.
 *   - into the heads of one [B, L, H, 4E] buffer (three of its four column
 *     blocks, as a GPT block's qkv gradient is laid out, the fourth a
 *     sentinel that must stay as it was), q, k and v the heads of another:
 *     the same bits as the _lse call's new tensors, on the fused kernels
 *     (the GPU: written in place) and the math path (the CPU: copied);
 *   - dense destinations, and only some gradients wanted;
 *   - bad input, nothing written.
 * float32, bfloat16, float16 and float64, causal and not, on the CPU and,
 * where there is one, the GPU (with deterministic algorithms on: the
 * fused kernels would otherwise sum dq with atomic adds, whose bits may
 * differ from call to call). */
#include <string.h>

#include "nn_check.h"
#include "tcuda/backends.h"
#include "tcuda/nn_backward.h"

/* The heads of column block i of [B, L, H, 4E] memory: [B, H, L, E]. */
static tc_tensor *heads(tc_tensor *mem, int i, int64_t e)
{
    tc_tensor *part = NULL, *t = NULL;
    CHECK_OK(tc_tensor_narrow(mem, 3, i * e, e, &part));
    CHECK_OK(tc_tensor_transpose(part, 1, 2, &t));
    tc_tensor_release(part);
    return t;
}

static void test_values(tc_device dev)
{
    const int64_t b = 2, h = 3, l = 65, e = 64;
    for (int d = 0; d < 4; d++)
        for (int causal = 0; causal < 2; causal++) {
            tc_dtype dt = FLOATS[d];
            int64_t msz[4] = {b, l, h, 4 * e};
            tc_tensor *in = rnd(dev, 4, msz, dt, -1, 1, NULL), *go_mem = NULL, *go = NULL;
            int64_t gsz[4] = {b, l, h, e};
            CHECK_OK(tc_tensor_randn(4, gsz, dt, dev, NULL, &go_mem));
            CHECK_OK(tc_tensor_transpose(go_mem, 1, 2, &go));
            tc_tensor *q = heads(in, 0, e), *k = heads(in, 1, e), *v = heads(in, 2, e);
            tc_tensor *out = NULL, *lse = NULL, *want[3] = {NULL, NULL, NULL};
            CHECK_OK(tc_nn_scaled_dot_product_attention_lse(q, k, v, causal, NULL, &out, &lse));
            CHECK_OK(tc_nn_scaled_dot_product_attention_backward_lse(
                go, q, k, v, out, lse, causal, NULL, &want[0], &want[1], &want[2]));
            /* the heads of one gradient buffer, its fourth block a sentinel */
            tc_tensor *dmem = rnd(dev, 4, msz, dt, -1, 1, NULL), *sentinel = heads(dmem, 3, e);
            double *before = tc_test_values(sentinel);
            tc_tensor *dst[3] = {heads(dmem, 0, e), heads(dmem, 1, e), heads(dmem, 2, e)};
            uint64_t f0 = tc__nn_attention_backward_fused_count();
            CHECK_OK(tc_nn_scaled_dot_product_attention_backward_lse_into(
                go, q, k, v, out, lse, causal, NULL, dst[0], dst[1], dst[2]));
            uint64_t fused = tc__nn_attention_backward_fused_count() - f0;
            CHECK(fused == (dev.type == TC_CUDA && dt != TC_FLOAT64 ? 1u : 0u));
            char what[120];
            static const char *names[3] = {"dq", "dk", "dv"};
            for (int i = 0; i < 3; i++) {
                snprintf(what, sizeof what, "backward_lse_into %s heads %s%s", names[i],
                         tc_dtype_string(dt), causal ? " causal" : "");
                near_tensor(what, dst[i], want[i], 0);
            }
            near_ref("backward_lse_into: the fourth block untouched", dt, sentinel, before,
                     tc_tensor_numel(sentinel), 0);
            /* dense destinations, grad_k not wanted */
            tc_tensor *dq = NULL, *dv = NULL;
            CHECK_OK(tc_tensor_zeros(4, tc_tensor_sizes(q), dt, dev, &dq));
            CHECK_OK(tc_tensor_zeros(4, tc_tensor_sizes(v), dt, dev, &dv));
            CHECK_OK(tc_nn_scaled_dot_product_attention_backward_lse_into(
                go, q, k, v, out, lse, causal, NULL, dq, NULL, dv));
            near_tensor("backward_lse_into dense dq", dq, want[0], 0);
            near_tensor("backward_lse_into dense dv", dv, want[2], 0);
            tc_tensor *all[] = {in,       go_mem, go,      q,       k,       v,
                                out,      lse,    want[0], want[1], want[2], dmem,
                                sentinel, dst[0], dst[1],  dst[2],  dq,      dv};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                tc_tensor_release(all[i]);
            free(before);
        }
}

static void test_bad_input(tc_device dev)
{
    int64_t sz[4] = {1, 2, 8, 16}, bad[4] = {1, 2, 8, 15};
    tc_tensor *q = rnd(dev, 4, sz, TC_FLOAT32, -1, 1, NULL),
              *go = rnd(dev, 4, sz, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *out = NULL, *lse = NULL, *dq = NULL, *dk = NULL, *ds = NULL, *d64 = NULL;
    CHECK_OK(tc_nn_scaled_dot_product_attention_lse(q, q, q, true, NULL, &out, &lse));
    CHECK_OK(tc_tensor_zeros(4, sz, TC_FLOAT32, dev, &dq));
    CHECK_OK(tc_tensor_zeros(4, sz, TC_FLOAT32, dev, &dk));
    CHECK_OK(tc_tensor_zeros(4, bad, TC_FLOAT32, dev, &ds));
    CHECK_OK(tc_tensor_zeros(4, sz, TC_FLOAT64, dev, &d64));
    const char *fn = "tc_nn_scaled_dot_product_attention_backward_lse_into";
    CHECK_STATUS(tc_nn_scaled_dot_product_attention_backward_lse_into(go, q, q, q, out, lse, true,
                                                                      NULL, NULL, NULL, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), fn));
    CHECK_STATUS(tc_nn_scaled_dot_product_attention_backward_lse_into(go, q, q, q, out, lse, true,
                                                                      NULL, ds, NULL, NULL),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_scaled_dot_product_attention_backward_lse_into(go, q, q, q, out, lse, true,
                                                                      NULL, d64, NULL, NULL),
                 TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_scaled_dot_product_attention_backward_lse_into(go, q, q, q, out, lse, true,
                                                                      NULL, q, NULL, NULL),
                 TC_ERROR_INVALID_ARGUMENT); /* grad_q is q */
    CHECK_STATUS(tc_nn_scaled_dot_product_attention_backward_lse_into(go, q, q, q, out, lse, true,
                                                                      NULL, dq, dq, NULL),
                 TC_ERROR_INVALID_ARGUMENT); /* grad_k is grad_q */
    CHECK(strstr(tc_last_error(), "grad_k shares memory with grad_q"));
    CHECK_STATUS(tc_nn_scaled_dot_product_attention_backward_lse_into(go, q, q, q, out, NULL, true,
                                                                      NULL, dq, dk, NULL),
                 TC_ERROR_INVALID_ARGUMENT); /* lse missing */
    tc_tensor *dead = NULL;
    CHECK_OK(tc_tensor_zeros(4, sz, TC_FLOAT32, dev, &dead));
    tc_tensor_release(dead);
    CHECK_STATUS(tc_nn_scaled_dot_product_attention_backward_lse_into(go, q, q, q, out, lse, true,
                                                                      NULL, dq, NULL, dead),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_scaled_dot_product_attention_backward_lse_into(dead, q, q, q, out, lse, true,
                                                                      NULL, dq, NULL, NULL),
                 TC_ERROR_INVALID_HANDLE);
    double *z = tc_test_values(dq);
    bool zero = true;
    for (int64_t i = 0; i < tc_tensor_numel(dq); i++)
        zero = zero && z[i] == 0;
    CHECK(zero); /* nothing written */
    free(z);
    tc_tensor *all[] = {q, go, out, lse, dq, dk, ds, d64};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

int main(void)
{
    tc_test_init();
    test_values(CPU);
    test_bad_input(CPU);
    if (tc_is_available()) {
        CHECK_OK(tc_use_deterministic_algorithms(true));
        test_values(GPU);
        CHECK_OK(tc_use_deterministic_algorithms(false));
        test_bad_input(GPU);
        CHECK_OK(tc_synchronize(-1));
    } else {
        printf("no GPU: the GPU checks are skipped\n");
    }
    return TC_TEST_DONE();
}
