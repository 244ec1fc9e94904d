/* jiterator: two element-wise ops of your own, from strings of C++.
 *
 *   fused_axpby: alpha * x + beta * y, with default scalars overridden per
 *                call, over a broadcast row;
 *   polar:       two outputs at once (r and theta from x and y).
 *
 * On a GPU the kernels are compiled by NVRTC at the first call and cached
 * (memory and ~/.cache/tcuda/jit); on a machine without one the very same
 * code runs on CPU tensors, compiled by the host C++ compiler.
 * Run: ./examples/jit_ops */
#include <stdio.h>

#include "tcuda/tcuda.h"

#define TRY(call)                                                                                  \
    do {                                                                                           \
        tc_status st_ = (call);                                                                    \
        if (st_ != TC_OK) {                                                                        \
            fprintf(stderr, "%s failed: %s\n", #call, tc_last_error());                            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static void print(const char *name, const tc_tensor *t)
{
    double v[12];
    int64_t n = tc_tensor_numel(t);
    if (n > 12 || tc_tensor_to_host(t, TC_FLOAT64, v) != TC_OK)
        return;
    printf("%-6s", name);
    for (int64_t i = 0; i < n; i++)
        printf(" %8.4f", v[i]);
    printf("\n");
}

int main(void)
{
    tc_device dev = tc_is_available() ? (tc_device){TC_CUDA, 0} : (tc_device){TC_CPU, -1};
    char where[32];
    tc_device_format(dev, where, sizeof where);
    printf("running on %s\n", where);

    /* 1. one output, two extra scalars with defaults */
    tc_jit_fn *axpby = NULL;
    tc_jit_options opts = {.scalars = "alpha=1.0, beta=1.0"};
    TRY(tc_jit_fn_create(
        "template <typename T>\n"
        "T fused_axpby(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }",
        &opts, &axpby));

    int64_t mat[2] = {2, 4}, row[1] = {4};
    float xs[8] = {1, 2, 3, 4, 5, 6, 7, 8}, ys[4] = {0.5f, -0.5f, 0.25f, -0.25f};
    tc_tensor *x = NULL, *y = NULL;
    TRY(tc_tensor_from_data(xs, 2, mat, TC_FLOAT32, dev, &x));
    TRY(tc_tensor_from_data(ys, 1, row, TC_FLOAT32, dev, &y));
    const tc_tensor *in[2] = {x, y};
    tc_tensor *out[1] = {NULL};
    TRY(tc_jit_fn_call(axpby, in, 2, NULL, out)); /* defaults: x + y, y broadcast */
    print("x+y", out[0]);
    tc_tensor_release(out[0]);
    out[0] = NULL;
    double scalars[2] = {2.0, 10.0};
    TRY(tc_jit_fn_call(axpby, in, 2, scalars, out)); /* 2x + 10y */
    print("2x+10y", out[0]);
    tc_tensor_release(out[0]);

    /* 2. two outputs, returned through reference parameters */
    tc_jit_fn *polar = NULL;
    TRY(tc_jit_fn_create_multi_output("template <typename T>\n"
                                      "void polar(T x, T y, T &r, T &theta) {\n"
                                      "    r = sqrt(x * x + y * y);\n"
                                      "    theta = atan2(y, x);\n"
                                      "}",
                                      2, NULL, &polar));
    tc_tensor *pr[2] = {NULL, NULL};
    TRY(tc_jit_fn_call(polar, in, 2, NULL, pr));
    print("r", pr[0]);
    print("theta", pr[1]);

    tc_tensor_release(pr[0]);
    tc_tensor_release(pr[1]);
    tc_tensor_release(x);
    tc_tensor_release(y);
    TRY(tc_jit_fn_destroy(axpby));
    TRY(tc_jit_fn_destroy(polar));
    return 0;
}
