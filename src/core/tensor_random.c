/* Random fills of tensors (uniform_, normal_, bernoulli_, random_) through
 * the generators of random.h.
 *
 * The generator fills a dense buffer on its device: a dense tensor is filled
 * in place, a strided one through a dense temporary and a copy. Compiled only
 * when random.h is part of the build (TCUDA_HAVE_RANDOM_H); until then this
 * file is empty. */
#if defined(TCUDA_HAVE_RANDOM_H)
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
    TC_CHECK_ARG(t, "%s: the tensor is NULL", fn);
    if ((p.k == UNIFORM || p.k == NORMAL) && !tc_dtype_is_floating(t->dtype))
        return tc__fail(TC_ERROR_DTYPE, "%s: needs a floating tensor, not %s", fn,
                        tc_dtype_name(t->dtype));
    if (!gen)
        TC_TRY(tc_default_generator(t->storage->device, &gen));
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
    TC_CHECK_ARG(lo <= hi, "tc_tensor_uniform_: lo %g is above hi %g", lo, hi);
    return fill("tc_tensor_uniform_", t, gen, (params){UNIFORM, lo, hi, 0, 0});
}
tc_status tc_tensor_normal_(tc_tensor *t, double mean, double std, tc_generator *gen)
{
    TC_CHECK_ARG(std >= 0, "tc_tensor_normal_: std %g is negative", std);
    return fill("tc_tensor_normal_", t, gen, (params){NORMAL, mean, std, 0, 0});
}
tc_status tc_tensor_bernoulli_(tc_tensor *t, double p, tc_generator *gen)
{
    TC_CHECK_ARG(p >= 0 && p <= 1, "tc_tensor_bernoulli_: p %g is outside [0, 1]", p);
    return fill("tc_tensor_bernoulli_", t, gen, (params){BERNOULLI, p, 0, 0, 0});
}
tc_status tc_tensor_random_(tc_tensor *t, int64_t lo, int64_t hi, tc_generator *gen)
{
    TC_CHECK_ARG(lo < hi, "tc_tensor_random_: the range [%lld, %lld) is empty", (long long)lo,
                 (long long)hi);
    return fill("tc_tensor_random_", t, gen, (params){RANDOM_INT, 0, 0, lo, hi});
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int tc__tensor_random_unused;
#endif
