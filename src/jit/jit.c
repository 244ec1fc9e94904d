/* jiterator's public functions: creating a function from a code string,
 * calling it on tensors, and the in-memory cache of compiled binaries.
 *
 * A call checks its arguments, promotes and broadcasts with the core's own
 * rules (tc__result_type, tc__broadcast_shapes, tc__as_dtype: inputs of
 * another dtype are converted into a temporary first, exactly as the
 * built-in ops do), builds one tc__iter over outputs and inputs, coalesces
 * it, and runs the binary for (dtype, contiguity class, target) on it.
 *
 * Caches. Each function keeps a short list of the variants it has used
 * (dtype, class, target -> entry), looked up under its own lock. Entries
 * live in one process-wide table keyed by the binary's key (jit_cache.c),
 * so functions created twice from the same code share binaries; an entry
 * being built is marked, and other threads wanting it wait on a condition
 * variable instead of compiling it again; the build itself (disk cache,
 * compiler, NVRTC) runs with no lock held, so threads building different
 * binaries do so at once. A binary is loaded into each device's context on
 * first use, also outside the lock: two threads loading the same one at
 * once each load it, the first to publish it wins and the other unloads its
 * copy. Entries are never freed (modules
 * and shared objects stay loaded for the process, as PyTorch's do); a
 * failed build leaves its message in the entry, for the threads that waited,
 * and the next call builds again. Below the table sits the disk cache. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device_ops.h"
#include "base/handle_pool.h"
#include "tensor/tensor_internal.h"
#include "tensor/tensor_watch.h"
#include "jit_internal.h"

#define TC_JIT_MAGIC 0x7c717e11u
#define MAX_VARIANTS 64

typedef struct entry {
    char key[TC__JIT_KEY_LEN + 1];
    int state; /* 0 building, 1 ready, 2 failed (error below) */
    tc_status error;
    char message[2048];
    tc__jit_host_fn host;
    void *cubin;
    size_t cubin_size;
    void *function[TC_MAX_DEVICES]; /* per device, loaded on first use */
    struct entry *next;
} entry;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static int compiles; /* binaries compiled (not read from disk) by this process */
static pthread_cond_t table_cond = PTHREAD_COND_INITIALIZER;
static entry *table;

typedef struct variant {
    tc_dtype dtype;
    bool contiguous;
    int target; /* -1 CPU, else the architecture (major * 10 + minor) */
    entry *e;
} variant;

struct tc_jit_fn {
    uint32_t magic; /* first: handle_pool.h; bytes 8..15 are its link once dead */
    uint32_t pad;
    void *pool_link;
    char *code;
    char name[TC__JIT_NAME_MAX];
    int n_in, n_out, n_scalars;
    bool by_ref;
    double defaults[TC_JIT_MAX_SCALARS];
    pthread_mutex_t lock;
    int nvariants;
    variant variants[MAX_VARIANTS];
};

static tc__handle_pool fn_pool = TC_HANDLE_POOL_INIT(struct tc_jit_fn);

void (*tc__jit_test_build_hook)(const char *key);

/* ---- creating ------------------------------------------------------------------- */

static tc_status create(const char *code, int num_outputs, bool by_ref,
                        const tc_jit_options *options, tc_jit_fn **out)
{
    TC_CHECK_ARG(code, "the code is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(num_outputs >= 1 && num_outputs < TC_JIT_MAX_OPERANDS,
                 "num_outputs is %d; it must be 1 to %d", num_outputs, TC_JIT_MAX_OPERANDS - 1);
    tc_jit_options o = options ? *options : (tc_jit_options){0};
    tc__jit_sig sig;
    TC_TRY(tc__jit_parse(code, o.name, &sig));
    int ns = 0;
    char names[TC_JIT_MAX_SCALARS][TC__JIT_NAME_MAX];
    double values[TC_JIT_MAX_SCALARS];
    TC_TRY(tc__jit_parse_scalars(o.scalars, &ns, names, values));
    if (!by_ref && sig.returns_void)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%s returns void; a single-output function returns its value (or use "
                        "tc_jit_fn_create_multi_output with reference parameters)",
                        sig.name);
    if (by_ref && !sig.returns_void)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%s returns a value; a multi-output function returns void and writes "
                        "its last %d parameters (T &out)",
                        sig.name, num_outputs);
    int n_out_params = by_ref ? num_outputs : 0;
    int n_in = sig.nparams - ns - n_out_params;
    if (n_in < 1)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%s has %d parameters, but %d scalars%s leave no tensor input", sig.name,
                        sig.nparams, ns, by_ref ? " and the outputs" : "");
    if (n_in + num_outputs > TC_JIT_MAX_OPERANDS)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%s has %d tensor inputs and %d outputs; at most %d in all", sig.name, n_in,
                        num_outputs, TC_JIT_MAX_OPERANDS);
    for (int i = 0; i < ns; i++) {
        const char *p = sig.params[n_in + i];
        if (strcmp(p, names[i]))
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "options.scalars names \"%s\" as scalar %d, but parameter %d of %s "
                            "is %s%s%s (scalars are the parameters after the tensor inputs)",
                            names[i], i, n_in + i + 1, sig.name, p[0] ? "\"" : "",
                            p[0] ? p : "unnamed", p[0] ? "\"" : "");
    }
    for (int i = 0; i < sig.nparams; i++) {
        bool want_ref = i >= n_in + ns;
        if (by_ref && want_ref != sig.is_ref[i])
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "parameter %d of %s %s a reference; the outputs, and only they, are "
                            "references (T &out), after the inputs and scalars",
                            i + 1, sig.name, sig.is_ref[i] ? "is" : "is not");
    }
    struct tc_jit_fn *fn = tc__handle_get(&fn_pool);
    char *copy = malloc(strlen(code) + 1);
    if (!fn || !copy) {
        if (fn)
            tc__handle_put(&fn_pool, fn);
        free(copy);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    strcpy(copy, code);
    fn->code = copy;
    snprintf(fn->name, sizeof fn->name, "%s", sig.name);
    fn->n_in = n_in;
    fn->n_out = num_outputs;
    fn->n_scalars = ns;
    fn->by_ref = by_ref;
    memcpy(fn->defaults, values, sizeof values);
    pthread_mutex_init(&fn->lock, NULL);
    fn->magic = TC_JIT_MAGIC;
    *out = fn;
    return TC_OK;
}

tc_status tc_jit_fn_create(const char *code, const tc_jit_options *options, tc_jit_fn **out)
{
    TC_API_BEGIN;
    return create(code, 1, false, options, out);
}

tc_status tc_jit_fn_create_multi_output(const char *code, int num_outputs,
                                        const tc_jit_options *options, tc_jit_fn **out)
{
    TC_API_BEGIN;
    return create(code, num_outputs, true, options, out);
}

tc_status tc_jit_fn_destroy(tc_jit_fn *fn)
{
    TC_API_BEGIN;
    TC_TRY(tc__handle_check(fn, TC_JIT_MAGIC, "tc_jit_fn"));
    fn->magic = TC_DEAD_MAGIC;
    pthread_mutex_destroy(&fn->lock);
    free(fn->code);
    tc__handle_put(&fn_pool, fn);
    return TC_OK;
}

const char *tc_jit_fn_name(const tc_jit_fn *fn)
{
    return tc__handle_live(fn, TC_JIT_MAGIC) ? fn->name : NULL;
}
int tc_jit_fn_num_inputs(const tc_jit_fn *fn)
{
    return tc__handle_live(fn, TC_JIT_MAGIC) ? fn->n_in : -1;
}
int tc_jit_fn_num_scalars(const tc_jit_fn *fn)
{
    return tc__handle_live(fn, TC_JIT_MAGIC) ? fn->n_scalars : -1;
}
int tc_jit_fn_num_outputs(const tc_jit_fn *fn)
{
    return tc__handle_live(fn, TC_JIT_MAGIC) ? fn->n_out : -1;
}

/* ---- building binaries ----------------------------------------------------------- */

/* Builds e's binary from source (for the CPU when arch < 0). */
static tc_status build(entry *e, const char *source, int arch)
{
    char dir[4096];
    bool disk = tc__jit_cache_dir(dir, sizeof dir);
    const char *ext = arch < 0 ? "so" : "cubin";
    void *bin = NULL;
    size_t size = 0;
    tc_status st = TC_OK;
    if (!disk || !tc__jit_cache_read(dir, e->key, ext, &bin, &size, NULL, 0)) {
        const char *note = "";
        __atomic_add_fetch(&compiles, 1, __ATOMIC_RELAXED);
        void (*hook)(const char *) = __atomic_load_n(&tc__jit_test_build_hook, __ATOMIC_ACQUIRE);
        if (hook)
            hook(e->key);
        if (arch < 0)
            st = tc__jit_host_compile(source, &bin, &size);
        else if ((st = tc__dev()->jit->nvrtc_version(&note)) == TC_OK)
            st = tc__dev()->jit->compile(source, arch, &bin, &size);
        if (st == TC_OK && disk)
            (void)tc__jit_cache_write(dir, e->key, ext, bin, size, note);
    }
    if (st == TC_OK && arch < 0) {
        st = tc__jit_host_load(bin, size, &e->host);
        free(bin);
    } else if (st == TC_OK) {
        e->cubin = bin;
        e->cubin_size = size;
    }
    return st;
}

/* The ready entry for key, built (once per process) from source. */
static tc_status get_entry(const char *key, const char *source, int arch, entry **out)
{
    pthread_mutex_lock(&table_lock);
    entry *e = table;
    while (e && strcmp(e->key, key))
        e = e->next;
    for (;;) {
        if (e && e->state == 1) {
            pthread_mutex_unlock(&table_lock);
            *out = e;
            return TC_OK;
        }
        if (e && e->state == 0) {
            pthread_cond_wait(&table_cond, &table_lock);
            if (e->state == 2) { /* the builder failed: its error is ours */
                tc_status st = e->error;
                char msg[sizeof e->message];
                memcpy(msg, e->message, sizeof msg);
                pthread_mutex_unlock(&table_lock);
                return tc__fail(st, "%s", msg);
            }
            continue;
        }
        break; /* absent, or failed before: build it */
    }
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&table_lock);
            return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
        memcpy(e->key, key, sizeof e->key);
        e->next = table;
        table = e;
    }
    e->state = 0;
    pthread_mutex_unlock(&table_lock);

    tc_status st = build(e, source, arch);

    pthread_mutex_lock(&table_lock);
    e->state = st == TC_OK ? 1 : 2;
    if (st != TC_OK) {
        e->error = st;
        snprintf(e->message, sizeof e->message, "%s", tc_last_error());
    }
    pthread_cond_broadcast(&table_cond);
    pthread_mutex_unlock(&table_lock);
    if (st != TC_OK)
        return st;
    *out = e;
    return TC_OK;
}

/* The entry of fn's variant (dtype, class, target), from fn's list or built. */
static tc_status variant_entry(tc_jit_fn *fn, tc_dtype dtype, bool contiguous, int arch,
                               entry **out)
{
    pthread_mutex_lock(&fn->lock);
    for (int i = 0; i < fn->nvariants; i++) {
        variant *v = &fn->variants[i];
        if (v->dtype == dtype && v->contiguous == contiguous && v->target == arch) {
            *out = v->e;
            pthread_mutex_unlock(&fn->lock);
            return TC_OK;
        }
    }
    pthread_mutex_unlock(&fn->lock);

    tc__jit_spec spec = {fn->code,  fn->name,      dtype,      fn->n_in,
                         fn->n_out, fn->n_scalars, fn->by_ref, contiguous};
    if (!tc_dtype_size(dtype))
        return tc__fail(TC_ERROR_DTYPE, "%d is not a tc_dtype", (int)dtype);
    char *src = tc__jit_source(&spec, arch >= 0);
    if (!src)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    char key[TC__JIT_KEY_LEN + 1], archs[16], ver[16];
    snprintf(archs, sizeof archs, "sm_%d", arch);
    snprintf(ver, sizeof ver, "%d", tc_version_code());
    tc_status st = TC_OK;
    if (arch < 0) {
        const char *cxx, *cxx_version;
        st = tc__jit_host_compiler(&cxx, &cxx_version);
        const char *parts[] = {"host", src, cxx, cxx_version, tc__jit_host_flags(), ver};
        if (st == TC_OK)
            tc__jit_key(parts, 6, key);
    } else {
        const char *parts[] = {"cuda", src, archs, tc__dev()->jit->key_id(), ver};
        tc__jit_key(parts, 5, key);
    }
    entry *e = NULL;
    if (st == TC_OK)
        st = get_entry(key, src, arch, &e);
    free(src);
    TC_TRY(st);
    pthread_mutex_lock(&fn->lock);
    if (fn->nvariants < MAX_VARIANTS)
        fn->variants[fn->nvariants++] = (variant){dtype, contiguous, arch, e};
    pthread_mutex_unlock(&fn->lock);
    *out = e;
    return TC_OK;
}

int tc__jit_compile_count(void) { return __atomic_load_n(&compiles, __ATOMIC_RELAXED); }

/* ---- running --------------------------------------------------------------------- */

static bool aligned16(const tc__iter *it)
{
    for (int i = 0; i < it->nops; i++)
        if ((uintptr_t)it->data[i] % 16)
            return false;
    return true;
}

/* The CUDA function of e on a resolved device, loaded on first use with no
 * lock held (cuModuleLoadData takes milliseconds): the first load published
 * wins, a copy loaded meanwhile by another thread is unloaded. */
static tc_status device_function(entry *e, int device, void **out)
{
    void *f = __atomic_load_n(&e->function[device], __ATOMIC_ACQUIRE);
    if (f) {
        *out = f;
        return TC_OK;
    }
    void *mod = NULL, *expected = NULL;
    TC_TRY(tc__dev()->jit->load(device, e->cubin, e->cubin_size, &mod, &f));
    if (!__atomic_compare_exchange_n(&e->function[device], &expected, f, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        tc__dev()->jit->unload(device, mod); /* another thread's is in use: keep it */
        f = expected;
    }
    *out = f;
    return TC_OK;
}

/* Runs fn over a coalesced iter of `dtype` operands on `device`. */
static tc_status run(tc_jit_fn *fn, tc_dtype dtype, tc_device device, const tc__iter *it,
                     const double *scalars)
{
    tc__jit_args args;
    bool strided = device.type == TC_CPU || !it->contiguous; /* jit_codegen.c's layouts */
    tc__jit_args_fill(&args, it, scalars, fn->n_scalars, strided);
    entry *e;
    if (device.type == TC_CPU) {
        TC_TRY(variant_entry(fn, dtype, false, -1, &e));
        args.flat = it->contiguous;
        e->host(&args);
        return TC_OK;
    }
    /* the architecture and multiprocessors of each device, asked once */
    static int archs[TC_MAX_DEVICES], smss[TC_MAX_DEVICES];
    int dev = device.index;
    int arch = __atomic_load_n(&archs[dev], __ATOMIC_ACQUIRE);
    int sms = __atomic_load_n(&smss[dev], __ATOMIC_RELAXED);
    if (!arch) {
        TC_TRY(tc__dev()->jit->device(dev, &arch, &sms));
        __atomic_store_n(&smss[dev], sms, __ATOMIC_RELAXED);
        __atomic_store_n(&archs[dev], arch, __ATOMIC_RELEASE);
    }
    TC_TRY(variant_entry(fn, dtype, it->contiguous, arch, &e));
    void *f;
    TC_TRY(device_function(e, device.index, &f));
    args.flat = it->contiguous && aligned16(it);
    if (tc__access_on()) { /* the access layer: outputs written, inputs read */
        tc__span sp[TC__MAX_OPERANDS];
        for (int i = 0; i < it->nops; i++)
            tc__span_of_iter(it, i, dtype, i < fn->n_out, &sp[i]);
        tc__access_op op = {.dev = dev,
                            .stream = tc__dev()->current_stream(dev),
                            .spans = sp,
                            .n = it->nops,
                            .what = "jiterator kernel",
                            .label = fn->name};
        TC_TRY(tc__access_op_publish(&op));
    }
    return tc__dev()->jit->launch(device.index, f, &args,
                                  tc__jit_grid(&args, tc_dtype_size(dtype), sms));
}

/* Checks how a given output outputs[k] shares memory with the inputs and
 * the outputs before it, as PyTorch's TensorIterator does: it must not hold
 * several elements in one place, nor overlap an input other than by being
 * exactly that input (same elements, same layout: element i is read before
 * it is written), nor overlap another output. An input whose overlap cannot
 * be decided (a strided operand, byte ranges that meet) is marked to be read
 * from a copy. */
static tc_status check_output_overlap(const tc_tensor *const *in, int n_in, tc_tensor **outputs,
                                      int k, bool *copy_in)
{
    const tc_tensor *o = outputs[k];
    if (tc_tensor_numel(o) > 0 && tc__check_writable(o) != TC_OK)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "outputs[%d] has more than one element in one memory location (a "
                        "dimension of stride 0 and size > 1, as an expanded tensor has), so it "
                        "cannot be written; give a tensor of its own (tc_tensor_contiguous), or "
                        "NULL to allocate one",
                        k);
    for (int i = 0; i < n_in; i++) {
        tc__overlap ov = tc__overlap_of(o, in[i]);
        if (ov == TC__OVERLAP_PARTIAL)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "outputs[%d] and inputs[%d] share memory without being the same "
                            "elements in the same layout (e.g. a tensor and its transpose): "
                            "unsupported operation: some elements of the input tensor and the "
                            "written-to tensor refer to a single memory location; give the "
                            "input itself, a separate tensor, or NULL to allocate one",
                            k, i);
        if (ov == TC__OVERLAP_TOO_HARD)
            copy_in[i] = true;
    }
    for (int j = 0; j < k; j++) {
        if (!outputs[j])
            continue;
        tc__overlap ov = tc__overlap_of(o, outputs[j]);
        TC_CHECK_ARG(ov != TC__OVERLAP_SAME && ov != TC__OVERLAP_PARTIAL,
                     "outputs[%d] and outputs[%d] %s; each output needs memory of its own", j, k,
                     ov == TC__OVERLAP_SAME ? "are the same elements" : "share memory");
    }
    return TC_OK;
}

/* Checks the arguments of a call; writes the broadcast shape, and which
 * inputs must be read from a copy (copy_in, n_in entries, zeroed). */
static tc_status check_call(tc_jit_fn *fn, const tc_tensor *const *in, int n_in,
                            tc_tensor **outputs, int *ndim, int64_t *sizes, bool *copy_in)
{
    TC_TRY(tc__handle_check(fn, TC_JIT_MAGIC, "tc_jit_fn"));
    TC_CHECK_ARG(in, "inputs is NULL");
    TC_CHECK_ARG(outputs, "outputs is NULL (give an array of %d tensor slots, NULL to allocate)",
                 fn->n_out);
    TC_CHECK_ARG(n_in == fn->n_in,
                 "%s takes %d tensor input%s, but %d were given (its other parameters are %d "
                 "scalars and %d outputs)",
                 fn->name, fn->n_in, fn->n_in == 1 ? "" : "s", n_in, fn->n_scalars,
                 fn->by_ref ? fn->n_out : 0);
    for (int i = 0; i < n_in; i++) {
        char what[40];
        snprintf(what, sizeof what, "tc_tensor inputs[%d]", i);
        TC_TRY(tc__tensor_check(in[i], what));
        if (i > 0)
            TC_TRY(tc__check_same_device("tc_jit_fn_call", in[0], in[i]));
    }
    TC_TRY(tc__broadcast_shapes("tc_jit_fn_call", n_in, in, ndim, sizes));
    for (int k = 0; k < fn->n_out; k++) {
        const tc_tensor *o = outputs[k];
        if (!o)
            continue;
        char what[40];
        snprintf(what, sizeof what, "tc_tensor outputs[%d]", k);
        TC_TRY(tc__tensor_check(o, what));
        TC_TRY(tc__check_same_device("tc_jit_fn_call", in[0], o));
        bool same = o->ndim == *ndim;
        for (int d = 0; same && d < *ndim; d++)
            same = o->sizes[d] == sizes[d];
        if (!same)
            return tc__fail(TC_ERROR_SHAPE,
                            "outputs[%d] has %d dimensions and another shape than the "
                            "broadcast shape of the inputs (%d dimensions); give a tensor of "
                            "that shape, or NULL to allocate one",
                            k, o->ndim, *ndim);
        for (int j = 0; j < k; j++)
            TC_CHECK_ARG(outputs[j] != o, "outputs[%d] and outputs[%d] are the same tensor", j, k);
        TC_TRY(check_output_overlap(in, n_in, outputs, k, copy_in));
    }
    return TC_OK;
}

/* An input to read: converted to dtype ct, and copied when an output may
 * overlap it (copy); a new reference in *out. */
static tc_status read_operand(const tc_tensor *t, tc_dtype ct, bool copy, tc_tensor **out)
{
    if (!copy || t->dtype != ct) /* a converted input is a copy already */
        return tc__as_dtype(t, ct, out);
    tc_tensor *c;
    TC_TRY(tc__new_tensor(t->ndim, t->sizes, ct, t->storage->device, false, &c));
    tc_status st = tc__copy_local(c, t);
    if (st != TC_OK) {
        tc_tensor_release(c);
        return st;
    }
    *out = c;
    return TC_OK;
}

tc_status tc_jit_fn_call(tc_jit_fn *fn, const tc_tensor *const *inputs, int n_inputs,
                         const double *scalars, tc_tensor **outputs)
{
    TC_API_BEGIN;
    int ndim = 0;
    int64_t sizes[TC_MAX_DIMS] = {0};
    bool copy_in[TC_JIT_MAX_OPERANDS] = {0};
    TC_TRY(check_call(fn, inputs, n_inputs, outputs, &ndim, sizes, copy_in));
    tc_device device = inputs[0]->storage->device;
    if (device.type != TC_CPU && !tc__backend_of(device))
        return TC_ERROR_NO_DEVICE;
    tc_dtype ct = tc__result_type(n_inputs, inputs);
    const double *sv = scalars ? scalars : fn->defaults;

    tc_tensor *conv[TC_JIT_MAX_OPERANDS] = {0}, *res[TC_JIT_MAX_OPERANDS] = {0};
    tc_status st = TC_OK;
    for (int i = 0; i < n_inputs && st == TC_OK; i++)
        st = read_operand(inputs[i], ct, copy_in[i], &conv[i]);
    /* results: a given output of dtype ct directly, else a new tensor */
    for (int k = 0; k < fn->n_out && st == TC_OK; k++) {
        if (outputs[k] && outputs[k]->dtype == ct)
            res[k] = tc__tensor_ref(outputs[k]);
        else
            st = tc__new_tensor(ndim, sizes, ct, device, false, &res[k]);
    }
    if (st == TC_OK && tc__numel(ndim, sizes) > 0) {
        tc__iter it;
        tc__iter_init(&it, ndim, sizes, fn->n_out + n_inputs);
        for (int k = 0; k < fn->n_out; k++)
            tc__iter_set(&it, k, res[k]);
        for (int i = 0; i < n_inputs; i++)
            tc__iter_set(&it, fn->n_out + i, conv[i]);
        tc__iter_coalesce(&it);
        st = run(fn, ct, device, &it, sv);
    }
    for (int k = 0; k < fn->n_out && st == TC_OK; k++)
        if (outputs[k] && outputs[k] != res[k])
            st = tc__copy_local(outputs[k], res[k]);
    for (int i = 0; i < n_inputs; i++)
        tc_tensor_release(conv[i]);
    for (int k = 0; k < fn->n_out; k++) {
        if (st != TC_OK || outputs[k]) {
            tc_tensor_release(res[k]);
            res[k] = NULL;
        }
    }
    if (st != TC_OK)
        return st;
    for (int k = 0; k < fn->n_out; k++)
        if (!outputs[k])
            outputs[k] = res[k];
    return TC_OK;
}
