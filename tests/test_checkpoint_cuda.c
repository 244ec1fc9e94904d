/* Training checkpoints on a GPU: the resume of support/checkpoint_train.h
 * (AdamW under a GradScaler on the GPU, gradients and dropout masks drawn
 * from the GPU's default generator) takes the same steps, bit for bit, as
 * a run that never stopped; the parameters, the optimizer's state, the
 * scaler and the GPU's and the CPU's random states all come back. Also a
 * checkpoint saved from the GPU loads into CPU tensors with the same bytes
 * (the file holds host bytes, whatever the device). Exits 77 without a GPU;
 * test_checkpoint runs the same resume on the CPU. */
#include <stdlib.h>
#include <unistd.h>

#include "checkpoint_train.h"

static char dir[] = "/tmp/tcuda_ckpt_cuda_XXXXXX";

/* The GPU run's parameters, loaded into CPU tensors without an optimizer. */
static void test_gpu_to_cpu(const char *path)
{
    const tc_device gpu = {TC_CUDA, 0}, cpu = {TC_CPU, -1};
    trainer t;
    train_seed(gpu, 3);
    train_make(&t, gpu, 3);
    train_step(&t);
    tc_checkpoint ck = train_ck(&t);
    CHECK_OK(tc_checkpoint_save(path, &ck));
    tc_tensor *q[TRAIN_N];
    for (int i = 0; i < TRAIN_N; i++)
        CHECK_OK(tc_tensor_zeros(train_ndim[i], train_sizes[i], TC_FLOAT32, cpu, &q[i]));
    tc_checkpoint ck2 = {.names = train_names, .params = q, .n = TRAIN_N};
    CHECK_OK(tc_checkpoint_load(path, &ck2));
    CHECK(ck2.step == 1);
    for (int i = 0; i < TRAIN_N; i++) {
        size_t n = (size_t)tc_tensor_numel(q[i]) * 4;
        unsigned char *a = malloc(n), *b = malloc(n);
        CHECK_OK(tc_tensor_to_host(t.p[i], TC_FLOAT32, a));
        CHECK_OK(tc_tensor_to_host(q[i], TC_FLOAT32, b));
        CHECK(!memcmp(a, b, n));
        free(a), free(b);
        tc_tensor_release(q[i]);
    }
    train_free(&t);
}

int main(void)
{
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/resume.safetensors", dir);
    train_resume_check((tc_device){TC_CUDA, 0}, path, tc_test_seed());
    test_gpu_to_cpu(path);
    unlink(path);
    rmdir(dir);
    return TC_TEST_DONE();
}
