/* Random fills of tensors (uniform_, normal_, bernoulli_, random_) and the
 * rand/randn factories, through the generators of random.h.
 *
 * The generator fills a dense buffer on its device: a dense tensor is filled
 * in place, a strided one through a dense temporary and a copy, so element i
 * of a fill is element i of the tensor in row-major order whatever its
 * strides. */
#include <math.h>

#include "tcuda/random.h"
#include "tensor_internal.h"

typedef enum { UNIFORM, NORMAL, BERNOULLI, RANDOM_INT } kind;

typedef struct params {
    kind k;
    double a, b;
    int64_t ia, ib;
} params;

static tc_status generate(tc_generator *gen, void *data, size_t n, tc_dtype dt, params p)
{
    switch (p.k) {
    case UNIFORM: return tc_generator_uniform(gen, data, n, dt, p.a, p.b);
    case NORMAL: return tc_generator_normal(gen, data, n, dt, p.a, p.b);
    case BERNOULLI: return tc_generator_bernoulli(gen, data, n, dt, p.a);
    default: return tc_generator_random_int(gen, data, n, dt, p.ia, p.ib);
    }
}

static tc_status fill(const char *fn, tc_tensor *t, tc_generator *gen, params p)
{
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    if ((p.k == UNIFORM || p.k == NORMAL) && !tc_dtype_is_floating(t->dtype))
        return tc__fail(TC_ERROR_DTYPE, "%s: needs a floating tensor, not %s", fn,
                        tc_dtype_string(t->dtype));
    tc_device td = t->storage->device;
    if (!gen)
        TC_TRY(tc_default_generator(td, &gen));
    tc_device gd = {TC_CPU, -1}; /* as for a bad gen, which generate() then names */
    (void)tc_generator_device(gen, &gd);
    if (gd.type != td.type || (td.type == TC_CUDA && gd.index != td.index)) {
        char gs[16], ts[16];
        tc_device_format(gd, gs, sizeof gs);
        tc_device_format(td, ts, sizeof ts);
        return tc__fail(TC_ERROR_DEVICE_MISMATCH, "%s: the generator is on %s, the tensor on %s",
                        fn, gs, ts);
    }
    int64_t n = tc__numel(t->ndim, t->sizes);
    if (n == 0)
        return TC_OK;
    if (tc__is_contiguous(t))
        return generate(gen, tc__data(t), (size_t)n, t->dtype, p);
    tc_tensor *tmp;
    TC_TRY(tc_tensor_empty_like(t, &tmp));
    tc_status st = generate(gen, tc__data(tmp), (size_t)n, t->dtype, p);
    if (st == TC_OK)
        st = tc__copy_local(t, tmp);
    tc_tensor_release(tmp);
    return st;
}

tc_status tc_tensor_uniform_(tc_tensor *t, double lo, double hi, tc_generator *gen)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(!isnan(lo) && !isnan(hi), "lo or hi is NaN; both must be numbers, lo <= hi");
    TC_CHECK_ARG(lo <= hi, "lo %.17g is above hi %.17g", lo, hi);
    return fill("tc_tensor_uniform_", t, gen, (params){UNIFORM, lo, hi, 0, 0});
}

tc_status tc_tensor_normal_(tc_tensor *t, double mean, double std, tc_generator *gen)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(!isnan(mean), "mean is NaN; it must be a number");
    TC_CHECK_ARG(!isnan(std), "std is NaN; it must be a number >= 0");
    TC_CHECK_ARG(std >= 0, "std %.17g is negative", std);
    return fill("tc_tensor_normal_", t, gen, (params){NORMAL, mean, std, 0, 0});
}

tc_status tc_tensor_bernoulli_(tc_tensor *t, double p, tc_generator *gen)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(!isnan(p), "p is NaN; it must be in [0, 1]");
    TC_CHECK_ARG(p >= 0 && p <= 1, "p %.17g is outside [0, 1]", p);
    return fill("tc_tensor_bernoulli_", t, gen, (params){BERNOULLI, p, 0, 0, 0});
}

tc_status tc_tensor_random_(tc_tensor *t, int64_t lo, int64_t hi, tc_generator *gen)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(lo < hi, "the range [%lld, %lld) is empty", (long long)lo, (long long)hi);
    return fill("tc_tensor_random_", t, gen, (params){RANDOM_INT, 0, 0, lo, hi});
}

static tc_status make(const char *fn, int ndim, const int64_t *sizes, tc_dtype dtype,
                      tc_device device, tc_generator *gen, params p, tc_tensor **out)
{
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    if (tc_dtype_size(dtype) && !tc_dtype_is_floating(dtype))
        return tc__fail(TC_ERROR_DTYPE, "%s: needs a floating dtype, not %s", fn,
                        tc_dtype_string(dtype));
    tc_tensor *t;
    TC_TRY(tc_tensor_empty(ndim, sizes, dtype, device, &t));
    tc_status st = fill(fn, t, gen, p);
    if (st != TC_OK) {
        tc_tensor_release(t);
        return st;
    }
    *out = t;
    return TC_OK;
}

tc_status tc_tensor_rand(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                         tc_generator *gen, tc_tensor **out)
{
    TC_API_BEGIN;
    return make("tc_tensor_rand", ndim, sizes, dtype, device, gen, (params){UNIFORM, 0, 1, 0, 0},
                out);
}

tc_status tc_tensor_randn(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                          tc_generator *gen, tc_tensor **out)
{
    TC_API_BEGIN;
    return make("tc_tensor_randn", ndim, sizes, dtype, device, gen, (params){NORMAL, 0, 1, 0, 0},
                out);
}
