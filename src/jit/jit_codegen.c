/* The source around the user's function: what NVRTC compiles into a kernel,
 * and what the host compiler compiles into a shared object.
 *
 * Both get the same prelude: the argument block (the layout of tc__jit_args
 * for the variant: sizes and strides only in the strided class, one data
 * pointer and stride row per operand the function has), the element types,
 * and for float16 and bfloat16 only, their conversions, round to nearest
 * even: on the CPU in integer operations, on the GPU the hardware's cvt
 * instructions, the same bits (base/half.h's functions, which give what
 * the built-in kernels' __float2half_rn / __float2bfloat16_rn give), and no
 * header (cuda_fp16.h is large to parse). Nothing else: NVRTC parses every
 * line of it on each compile. 16-bit floats are loaded into float, computed
 * in float and rounded back, as the built-in kernels do. Then the user's
 * code, under a #line so compiler messages point into it, then the loop:
 *   GPU, dense class: when args.flat (dense, 16-byte aligned), each thread
 *     of a 128-thread block moves TC__JIT_UNROLL 16-byte vectors per operand,
 *     all loads before any store, one pass over the tensor (the built-in
 *     elementwise.cu vec_kernel's shape); otherwise a grid-stride loop.
 *   GPU, strided class: a grid-stride loop computing offsets per element.
 *   CPU: a flat loop when dense, else an odometer over the dimensions.
 * Operand k < n_out is output k; n_out + j is input j (tc__iter's order). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "jit_internal.h"

static const char args_struct[] = "typedef long long tcj_i64;\n"
                                  "typedef unsigned int tcj_u32;\n"
                                  "typedef unsigned short tcj_u16;\n"
                                  "typedef unsigned char tcj_u8;\n"
                                  "struct tcj_args {\n"
                                  "    tcj_i64 numel, ndim, flat, pad;\n"
                                  "#if TCJ_STRIDED\n"
                                  "    tcj_i64 sizes[%d];\n"
                                  "    tcj_i64 strides[NIN + NOUT][%d];\n"
                                  "#endif\n"
                                  "    void *data[NIN + NOUT];\n"
                                  "    double scalars[TCJ_NSCALARS];\n"
                                  "};\n";

/* The bits of a float, and back: only 16-bit dtypes need them. */
static const char pun_cuda[] =
    "union tcj_pun { float f; unsigned int u; };\n"
    "TCJ_HD unsigned int tcj_f2u(float f) { tcj_pun p; p.f = f; return p.u; }\n"
    "TCJ_HD float tcj_u2f(unsigned int u) { tcj_pun p; p.u = u; return p.f; }\n";
static const char pun_host[] =
    "TCJ_HD unsigned int tcj_f2u(float f) { unsigned int u; __builtin_memcpy(&u, &f, 4); "
    "return u; }\n"
    "TCJ_HD float tcj_u2f(unsigned int u) { float f; __builtin_memcpy(&f, &u, 4); return f; }\n";

/* float16 in integer operations (the CPU's, base/half.h's *_soft). */
static const char f16_soft[] =
    "TCJ_HD tcj_u16 tcj_f32_to_f16(float f)\n"
    "{\n"
    "    tcj_u32 x = tcj_f2u(f);\n"
    "    tcj_u32 sign = (x >> 16) & 0x8000u;\n"
    "    x &= 0x7fffffffu;\n"
    "    if (x >= 0x7f800000u)\n"
    "        return (tcj_u16)(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));\n"
    "    if (x >= 0x477ff000u)\n"
    "        return (tcj_u16)(sign | 0x7c00u);\n"
    "    tcj_u32 h, rem, half;\n"
    "    if (x < 0x38800000u) {\n"
    "        if (x < 0x33000000u)\n"
    "            return (tcj_u16)sign;\n"
    "        tcj_u32 e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;\n"
    "        tcj_u32 shift = 126u - e;\n"
    "        h = m >> shift;\n"
    "        rem = m & ((1u << shift) - 1u);\n"
    "        half = 1u << (shift - 1u);\n"
    "    } else {\n"
    "        h = (((x >> 23) - 112u) << 10) | ((x & 0x7fffffu) >> 13);\n"
    "        rem = x & 0x1fffu;\n"
    "        half = 0x1000u;\n"
    "    }\n"
    "    if (rem > half || (rem == half && (h & 1u)))\n"
    "        h++;\n"
    "    return (tcj_u16)(sign | h);\n"
    "}\n"
    "TCJ_HD float tcj_f16_to_f32(tcj_u16 h)\n"
    "{\n"
    "    tcj_u32 sign = (tcj_u32)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
    "    if (e == 0x1f)\n"
    "        return tcj_u2f(sign | 0x7f800000u | (m << 13));\n"
    "    if (e == 0) {\n"
    "        float v = (float)m * 5.9604644775390625e-08f;\n"
    "        return sign ? -v : v;\n"
    "    }\n"
    "    return tcj_u2f(sign | ((e + 112u) << 23) | (m << 13));\n"
    "}\n";

/* float16 on the GPU: the hardware's conversions (base/half.h's
 * tc__f32_to_f16 and tc__f16_to_f32), the same bits as f16_soft for every
 * input: a NaN keeps the software's quiet NaN, or its sign and payload
 * (sign | 0x7f800000 | m << 13, from h sign-extended), selected without a
 * branch. A few instructions instead of f16_soft's fifteen and branches,
 * inlined for each of the 32 elements a thread of the vector path moves: the
 * float16 kernel compiles in a quarter of the time (bench_jit_compile). */
static const char f16_cuda[] =
    "TCJ_HD tcj_u16 tcj_f32_to_f16(float f)\n"
    "{\n"
    "    unsigned short h;\n"
    "    asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "    tcj_u16 nan = (tcj_u16)(((tcj_f2u(f) >> 16) & 0x8000u) | 0x7e00u);\n"
    "    return f != f ? nan : (tcj_u16)h;\n"
    "}\n"
    "TCJ_HD float tcj_f16_to_f32(tcj_u16 h)\n"
    "{\n"
    "    float f;\n"
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"((unsigned short)h));\n"
    "    tcj_u32 nan = ((tcj_u32)(int)(short)h << 13) | 0x7f800000u;\n"
    "    return (h & 0x7fffu) > 0x7c00u ? tcj_u2f(nan) : f;\n"
    "}\n";

/* bfloat16: round to nearest even in integer operations, or (GPU, sm_80 and
 * later) the hardware's cvt.rn.bf16.f32 with the software's NaN, as
 * base/half.h's tc__f32_to_bf16. */
static const char bf16_common[] =
    "TCJ_HD tcj_u16 tcj_f32_to_bf16(float f)\n"
    "{\n"
    "    tcj_u32 x = tcj_f2u(f);\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
    "    unsigned short b;\n"
    "    asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(b) : \"f\"(f));\n"
    "    return f != f ? (tcj_u16)((x >> 16) | 0x40u) : (tcj_u16)b;\n"
    "#else\n"
    "    if ((x & 0x7fffffffu) > 0x7f800000u)\n"
    "        return (tcj_u16)((x >> 16) | 0x40u);\n"
    "    return (tcj_u16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);\n"
    "#endif\n"
    "}\n"
    "TCJ_HD float tcj_bf16_to_f32(tcj_u16 b) { return tcj_u2f((tcj_u32)b << 16); }\n";

static const char prelude_host[] =
    "#include <math.h>\n"
    "#define __device__\n"
    "#define __host__\n"
    "#define __forceinline__ inline\n"
    "#define TCJ_HD static inline\n"
    "template <typename A, typename B> static inline A min(A a, B b) { return b < a ? (A)b : a; "
    "}\n"
    "template <typename A, typename B> static inline A max(A a, B b) { return a < b ? (A)b : a; "
    "}\n";

/* Storage type, compute type, load and store expressions of a dtype. */
static void types_of(tc_dtype d, const char **s, const char **c, const char **ld, const char **st)
{
    static const char *const names[] = {"bool", "tcj_u8", "signed char", "short", "int", "tcj_i64",
                                        "",     "",       "float",       "double"};
    *ld = "v";
    *st = "v";
    switch (d) {
    case TC_BOOL:
        *s = "tcj_u8";
        *c = "bool";
        *ld = "v != 0";
        *st = "(tcj_u8)(v ? 1 : 0)";
        break;
    case TC_FLOAT16:
        *s = "tcj_u16";
        *c = "float";
        *ld = "tcj_f16_to_f32(v)";
        *st = "tcj_f32_to_f16(v)";
        break;
    case TC_BFLOAT16:
        *s = "tcj_u16";
        *c = "float";
        *ld = "tcj_bf16_to_f32(v)";
        *st = "tcj_f32_to_bf16(v)";
        break;
    default: *s = *c = names[d]; break;
    }
}

/* tcj_apply: x -> o through the user's function. */
static void put_apply(tc__strbuf *b, const tc__jit_spec *sp)
{
    tc__strbuf_printf(
        b, "TCJ_HD void tcj_apply(const tcj_args &a, const tcj_C *x, tcj_C *o)\n{\n    (void)a;\n");
    tc__strbuf_printf(b, "    %s%s<tcj_C>(", sp->by_ref ? "" : "o[0] = ", sp->name);
    int k = 0;
    for (int i = 0; i < sp->n_in; i++)
        tc__strbuf_printf(b, "%sx[%d]", k++ ? ", " : "", i);
    for (int i = 0; i < sp->n_scalars; i++)
        tc__strbuf_printf(b, "%sa.scalars[%d]", k++ ? ", " : "", i);
    if (sp->by_ref)
        for (int i = 0; i < sp->n_out; i++)
            tc__strbuf_printf(b, "%so[%d]", k++ ? ", " : "", i);
    tc__strbuf_printf(b, ");\n}\n");
}

/* tcj_elem: one element at operand offsets off[]. */
static void put_elem(tc__strbuf *b)
{
    tc__strbuf_printf(b,
                      "TCJ_HD void tcj_elem(const tcj_args &a, const tcj_i64 *off)\n"
                      "{\n"
                      "    tcj_C x[NIN], o[NOUT];\n"
                      "    for (int k = 0; k < NIN; k++)\n"
                      "        x[k] = tcj_ld(((const tcj_S *)a.data[NOUT + k])[off[NOUT + k]]);\n"
                      "    tcj_apply(a, x, o);\n"
                      "    for (int k = 0; k < NOUT; k++)\n"
                      "        ((tcj_S *)a.data[k])[off[k]] = tcj_st(o[k]);\n"
                      "}\n"
                      "TCJ_HD void tcj_elem_flat(const tcj_args &a, tcj_i64 i)\n"
                      "{\n"
                      "    tcj_i64 off[NIN + NOUT];\n"
                      "    for (int k = 0; k < NIN + NOUT; k++)\n"
                      "        off[k] = i;\n"
                      "    tcj_elem(a, off);\n"
                      "}\n"
                      "#if TCJ_STRIDED\n"
                      "TCJ_HD void tcj_elem_strided(const tcj_args &a, tcj_i64 i)\n"
                      "{\n"
                      "    tcj_i64 off[NIN + NOUT];\n"
                      "    for (int k = 0; k < NIN + NOUT; k++)\n"
                      "        off[k] = 0;\n"
                      "    for (int d = (int)a.ndim - 1; d >= 0; d--) {\n"
                      "        tcj_i64 s = a.sizes[d], idx = i %% s;\n"
                      "        i /= s;\n"
                      "        for (int k = 0; k < NIN + NOUT; k++)\n"
                      "            off[k] += idx * a.strides[k][d];\n"
                      "    }\n"
                      "    tcj_elem(a, off);\n"
                      "}\n"
                      "#endif\n");
}

static void put_cuda_kernel(tc__strbuf *b, const tc__jit_spec *sp)
{
    tc__strbuf_printf(
        b, "extern \"C\" __global__ void __launch_bounds__(%d) tc_jit_kernel(tcj_args a)\n{\n",
        TC__JIT_THREADS);
    tc__strbuf_printf(b, "    const tcj_i64 T = %d, U = %d;\n", TC__JIT_THREADS, TC__JIT_UNROLL);
    tc__strbuf_printf(b, "    tcj_i64 tid = (tcj_i64)blockIdx.x * blockDim.x + threadIdx.x;\n"
                         "    tcj_i64 step = (tcj_i64)gridDim.x * blockDim.x;\n");
    if (sp->contiguous) {
        tc__strbuf_printf(
            b,
            "    if (a.flat) {\n"
            "        enum { N = 16 / sizeof(tcj_S) };\n"
            "        struct alignas(16) V { tcj_S v[N]; };\n"
            "        tcj_i64 nv = a.numel / N, base = (tcj_i64)blockIdx.x * T * U + threadIdx.x;\n"
            "        V vi[U][NIN];\n"
            "#pragma unroll\n"
            "        for (int u = 0; u < U; u++) {\n"
            "            tcj_i64 i = base + u * T;\n"
            "            if (i < nv) {\n"
            "#pragma unroll\n"
            "                for (int k = 0; k < NIN; k++)\n"
            "                    vi[u][k] = ((const V *)a.data[NOUT + k])[i];\n"
            "            }\n"
            "        }\n"
            "#pragma unroll\n"
            "        for (int u = 0; u < U; u++) {\n"
            "            tcj_i64 i = base + u * T;\n"
            "            if (i < nv) {\n"
            "                V vo[NOUT];\n"
            "#pragma unroll\n"
            "                for (int e = 0; e < N; e++) {\n"
            "                    tcj_C x[NIN], o[NOUT];\n"
            "#pragma unroll\n"
            "                    for (int k = 0; k < NIN; k++)\n"
            "                        x[k] = tcj_ld(vi[u][k].v[e]);\n"
            "                    tcj_apply(a, x, o);\n"
            "#pragma unroll\n"
            "                    for (int k = 0; k < NOUT; k++)\n"
            "                        vo[k].v[e] = tcj_st(o[k]);\n"
            "                }\n"
            "#pragma unroll\n"
            "                for (int k = 0; k < NOUT; k++)\n"
            "                    ((V *)a.data[k])[i] = vo[k];\n"
            "            }\n"
            "        }\n"
            "        tcj_i64 e = nv * N + base;\n"
            "        if (blockIdx.x == 0 && e < a.numel)\n"
            "            tcj_elem_flat(a, e);\n"
            "        return;\n"
            "    }\n"
            "    for (tcj_i64 i = tid; i < a.numel; i += step)\n"
            "        tcj_elem_flat(a, i);\n");
    } else {
        tc__strbuf_printf(b, "    for (tcj_i64 i = tid; i < a.numel; i += step)\n"
                             "        tcj_elem_strided(a, i);\n");
    }
    tc__strbuf_printf(b, "}\n");
}

static void put_host_function(tc__strbuf *b)
{
    tc__strbuf_printf(
        b,
        "extern \"C\" __attribute__((visibility(\"default\"))) void tc_jit_host(const tcj_args "
        "*ap)\n"
        "{\n"
        "    const tcj_args &a = *ap;\n"
        "    if (a.flat) {\n"
        "        for (tcj_i64 i = 0; i < a.numel; i++)\n"
        "            tcj_elem_flat(a, i);\n"
        "        return;\n"
        "    }\n"
        "    tcj_i64 idx[%d] = {0}, off[NIN + NOUT] = {0};\n"
        "    for (tcj_i64 n = 0; n < a.numel; n++) {\n"
        "        tcj_elem(a, off);\n"
        "        for (int d = (int)a.ndim - 1; d >= 0; d--) {\n"
        "            for (int k = 0; k < NIN + NOUT; k++)\n"
        "                off[k] += a.strides[k][d];\n"
        "            if (++idx[d] < a.sizes[d])\n"
        "                break;\n"
        "            for (int k = 0; k < NIN + NOUT; k++)\n"
        "                off[k] -= a.strides[k][d] * a.sizes[d];\n"
        "            idx[d] = 0;\n"
        "        }\n"
        "    }\n"
        "}\n",
        TC_MAX_DIMS);
}

char *tc__jit_source(const tc__jit_spec *sp, bool cuda)
{
    if ((unsigned)sp->dtype >= TC_NUM_DTYPES)
        return NULL;
    tc__strbuf b = {0};
    tc__strbuf_printf(&b, "%s",
                      cuda ? "#define TCJ_HD static __device__ __forceinline__\n" : prelude_host);
    /* the CPU path always takes the strided block (its loop picks flat or not) */
    tc__strbuf_printf(&b, "#define NIN %d\n#define NOUT %d\n#define TCJ_STRIDED %d\n", sp->n_in,
                      sp->n_out, !cuda || !sp->contiguous);
    tc__strbuf_printf(&b, "#define TCJ_NSCALARS %d\n", sp->n_scalars > 0 ? sp->n_scalars : 1);
    tc__strbuf_printf(&b, args_struct, TC_MAX_DIMS, TC_MAX_DIMS);
    /* 16-bit conversions only where the dtype needs them */
    if (sp->dtype == TC_FLOAT16 || sp->dtype == TC_BFLOAT16)
        tc__strbuf_printf(&b, "%s", cuda ? pun_cuda : pun_host);
    if (sp->dtype == TC_FLOAT16 && cuda) /* (the soft one for a host-compiled kernel) */
        tc__strbuf_printf(&b, "#ifdef __CUDA_ARCH__\n%s#else\n%s#endif\n", f16_cuda, f16_soft);
    else if (sp->dtype == TC_FLOAT16)
        tc__strbuf_printf(&b, "%s", f16_soft);
    if (sp->dtype == TC_BFLOAT16)
        tc__strbuf_printf(&b, "%s", bf16_common);
    const char *s, *c, *ld, *st;
    types_of(sp->dtype, &s, &c, &ld, &st);
    tc__strbuf_printf(&b, "typedef %s tcj_S;\ntypedef %s tcj_C;\n", s, c);
    tc__strbuf_printf(&b, "TCJ_HD tcj_C tcj_ld(tcj_S v) { return %s; }\n", ld);
    tc__strbuf_printf(&b, "TCJ_HD tcj_S tcj_st(tcj_C v) { return %s; }\n", st);
    tc__strbuf_printf(&b, "#line 1 \"jit_code\"\n%s\n#line 1 \"tcuda_jit_kernel\"\n", sp->code);
    put_apply(&b, sp);
    put_elem(&b);
    if (cuda)
        put_cuda_kernel(&b, sp);
    else
        put_host_function(&b);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

unsigned tc__jit_grid(const tc__jit_args *a, size_t esize, int sms)
{
    int64_t blocks;
    if (a->flat) {
        int64_t nv = a->numel / (int64_t)(16 / esize);
        int64_t per = (int64_t)TC__JIT_THREADS * TC__JIT_UNROLL;
        blocks = (nv + per - 1) / per;
    } else {
        blocks = (a->numel + TC__JIT_THREADS - 1) / TC__JIT_THREADS;
        int64_t cap = (int64_t)(sms > 0 ? sms : 80) * 32;
        if (blocks > cap)
            blocks = cap;
    }
    return (unsigned)(blocks > 0 ? blocks : 1);
}

_Static_assert(sizeof(void *) == sizeof(uint64_t), "the argument block packs pointers as words");

size_t tc__jit_args_bytes(int nops, int nscalars, bool strided)
{
    size_t words = 4 + (strided ? (size_t)(1 + nops) * TC_MAX_DIMS : 0) + (size_t)nops +
                   (size_t)(nscalars > 0 ? nscalars : 1);
    return words * sizeof(uint64_t);
}

void tc__jit_args_fill(tc__jit_args *a, const tc__iter *it, const double *scalars, int nscalars,
                       bool strided)
{
    a->numel = it->numel;
    a->ndim = it->ndim;
    a->flat = 0;
    a->pad = 0;
    uint64_t *w = a->packed;
    if (strided) { /* unused dimensions are 0; the kernels loop to ndim */
        memset(w, 0, sizeof(uint64_t) * (size_t)(1 + it->nops) * TC_MAX_DIMS);
        for (int d = 0; d < it->ndim; d++)
            w[d] = (uint64_t)it->sizes[d];
        w += TC_MAX_DIMS;
        for (int k = 0; k < it->nops; k++, w += TC_MAX_DIMS)
            for (int d = 0; d < it->ndim; d++)
                w[d] = (uint64_t)it->strides[k][d];
    }
    for (int k = 0; k < it->nops; k++)
        memcpy(w++, &it->data[k], sizeof(uint64_t));
    w[0] = 0;
    for (int i = 0; i < nscalars; i++)
        memcpy(w++, &scalars[i], sizeof(double));
}
