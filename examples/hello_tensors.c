/* The README's ten lines: the device-agnostic pattern, with tensors. */
#include <stdio.h>

#include <tcuda/tcuda.h>

int main(void)
{
    tc_device dev;
    tc_generator *g;
    tc_tensor *x, *y, *r, *m;
    double mean;
    int64_t size[2] = {256, 256};
    tc_device_parse(tc_is_available() ? "cuda" : "cpu", &dev); /* a GPU if there is one */
    tc_generator_create(dev, 42, &g); /* the same numbers on the CPU and the GPU */
    tc_tensor_randn(2, size, TC_FLOAT32, dev, g, &x);
    tc_tensor_matmul(x, x, &y);
    tc_tensor_relu(y, &r);
    tc_tensor_mean(r, TC_ALL_DIMS, false, &m);
    tc_tensor_item(m, &mean); /* waits for the GPU */
    printf("%s: mean %.4f\n", dev.type == TC_CUDA ? "cuda" : "cpu", mean);
    tc_tensor_release(x), tc_tensor_release(y), tc_tensor_release(r), tc_tensor_release(m);
    tc_generator_destroy(g);
    return 0;
}
