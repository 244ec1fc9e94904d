/* tensor_demo: the device-agnostic pattern of PyTorch's CUDA semantics notes,
 * in C. Pick "cuda" when a GPU is there, else "cpu"; make tensors there; run
 * a small computation (a softmax-free logistic layer: sigmoid(x W + b), its
 * mean, and the best class of each row); bring the result back and print it;
 * then, on a GPU, the caching allocator's memory summary. */
#include <stdio.h>
#include <stdlib.h>

#include "tcuda/tcuda.h"

#define TRY(call)                                                                                  \
    do {                                                                                           \
        tc_status st_ = (call);                                                                    \
        if (st_ != TC_OK) {                                                                        \
            fprintf(stderr, "%s failed: %s\n", #call, tc_last_error());                            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    tc_device dev;
    TRY(tc_device_parse(tc_is_available() ? "cuda" : "cpu", &dev));

    /* x: 4 samples of 3 features, W: 3 x 2, b: 2 */
    float xs[12] = {0.5f, -1, 2, 1, 0, -0.5f, -2, 1, 0.25f, 3, -1, 1};
    float ws[6] = {0.1f, -0.3f, 0.8f, 0.2f, -0.5f, 0.4f};
    float bs[2] = {0.05f, -0.1f};
    int64_t xsz[2] = {4, 3}, wsz[2] = {3, 2}, bsz[1] = {2};
    tc_tensor *x, *w, *b, *xw, *z, *y, *m, *best, *ycpu;
    TRY(tc_tensor_from_data(xs, 2, xsz, TC_FLOAT32, dev, &x));
    TRY(tc_tensor_from_data(ws, 2, wsz, TC_FLOAT32, dev, &w));
    TRY(tc_tensor_from_data(bs, 1, bsz, TC_FLOAT32, dev, &b));
    TRY(tc_tensor_matmul(x, w, &xw));
    TRY(tc_tensor_add(xw, b, &z)); /* b broadcasts over the rows */
    TRY(tc_tensor_sigmoid(z, &y));
    TRY(tc_tensor_mean(y, TC_ALL_DIMS, false, &m));
    TRY(tc_tensor_argmax(y, 1, false, &best));
    TRY(tc_tensor_cpu(y, &ycpu)); /* waits for the GPU */

    char name[32];
    tc_device_format(tc_tensor_device(y), name, sizeof name);
    printf("device: %s\n", name);
    const float *yv = tc_tensor_data_ptr(ycpu);
    int64_t cls[4];
    double mean;
    TRY(tc_tensor_to_host(best, TC_INT64, cls));
    TRY(tc_tensor_item(m, &mean));
    for (int i = 0; i < 4; i++)
        printf("sample %d: p = [%.4f %.4f], class %lld\n", i, yv[2 * i], yv[2 * i + 1],
               (long long)cls[i]);
    printf("mean probability %.4f\n", mean);

    if (dev.type == TC_CUDA) { /* tensors' GPU memory comes from the caching allocator */
        char *summary;
        if (tc_memory_summary(TC_CURRENT_DEVICE, true, &summary) == TC_OK) {
            printf("%s\n", summary);
            tc_free(summary);
        }
    }
    tc_tensor *all[] = {x, w, b, xw, z, y, m, best, ycpu};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
    return 0;
}
