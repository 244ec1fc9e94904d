/* jiterator internals (src/jit, plus the CUDA half in src/jit/cuda/nvrtc.c).
 * Not installed.
 *
 * The module is split so that everything but NVRTC and the launch runs and
 * is tested without a GPU:
 *   jit_parse.c    the code string: entry function, parameters; options
 *   jit_codegen.c  the source compiled for the GPU (NVRTC) or the CPU (c++)
 *   jit_cache.c    cache keys (a 128-bit hash) and the disk cache
 *   jit_host.c     the CPU path: compile with the host compiler, dlopen, run
 *   jit.c          the public functions, checks, promotion, the memory cache
 *   cuda/nvrtc.c        NVRTC and driver calls, behind the device seam
 * The kernel argument block tc__jit_args is packed in C into the layout the
 * generated C++ declares for its variant (only 8-byte fields). */
#ifndef TCUDA_JIT_INTERNAL_H
#define TCUDA_JIT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "tensor/iter.h"
#include "tcuda/dtype.h"
#include "tcuda/jit.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TC__JIT_MAX_PARAMS (TC_JIT_MAX_OPERANDS + TC_JIT_MAX_SCALARS)
#define TC__JIT_NAME_MAX (TC_JIT_MAX_NAME_LENGTH + 1) /* a name and its NUL */

/* ---- parsing (jit_parse.c) --------------------------------------------------- */

typedef struct tc__jit_sig {
    char name[TC__JIT_NAME_MAX]; /* the entry function */
    bool returns_void;
    int nparams;
    char params[TC__JIT_MAX_PARAMS][TC__JIT_NAME_MAX]; /* parameter names ("" if unnamed) */
    bool is_ref[TC__JIT_MAX_PARAMS];                   /* declared with & */
    /* Lengths of a name longer than TC_JIT_MAX_NAME_LENGTH, which is then
     * cut in `name` / `params` (0 when none): the entry's, and the first
     * such parameter's (long_param_index). */
    size_t long_name, long_param;
    int long_param_index;
} tc__jit_sig;

/* Finds the entry function of `code`: `name` when not NULL, else the last
 * function template defined at top level (comments and literals skipped).
 * TC_ERROR_INVALID_ARGUMENT with a message saying what is missing, or which
 * name (the entry's, a parameter's, `name`) is longer than
 * TC_JIT_MAX_NAME_LENGTH. */
tc_status tc__jit_parse(const char *code, const char *name, tc__jit_sig *out);

/* Parses "alpha=1.0, beta=2" into names and values (at most
 * TC_JIT_MAX_SCALARS). NULL or blank gives 0. TC_ERROR_INVALID_ARGUMENT for
 * anything else, saying where. */
tc_status tc__jit_parse_scalars(const char *spec, int *n, char names[][TC__JIT_NAME_MAX],
                                double *values);

/* ---- the kernel's argument block ----------------------------------------------- */

/* The block a kernel (or host function) receives: a fixed header, then
 * `packed` 8-byte words laid out for the variant, as jit_codegen.c declares
 * them:
 *   strided class only: sizes[TC_MAX_DIMS], strides[nops][TC_MAX_DIMS]
 *   data[nops]                  (outputs first, then inputs)
 *   scalars[max(nscalars, 1)]   (doubles)
 * nops is the variant's outputs + inputs, not TC__MAX_OPERANDS: the dense
 * class with 2 inputs, 1 output and 1 scalar passes 64 bytes per launch, not
 * the 736 of a block sized for the most operands and dimensions. The C
 * struct is sized for the largest variant; a launch copies only the kernel's
 * parameter, of tc__jit_args_bytes. */
#define TC__JIT_ARGS_WORDS                                                                         \
    (TC_MAX_DIMS + TC__MAX_OPERANDS * TC_MAX_DIMS + TC__MAX_OPERANDS + TC_JIT_MAX_SCALARS)
typedef struct tc__jit_args {
    int64_t numel;
    int64_t ndim;
    int64_t flat; /* GPU: 1 = dense and 16-byte aligned (vector path); CPU: 1 = dense */
    int64_t pad;  /* unused by the kernels (the emulation test passes its grid here) */
    uint64_t packed[TC__JIT_ARGS_WORDS];
} tc__jit_args;

/* Fills args from a coalesced iter (outputs first) and the scalars, in the
 * layout of the strided class or of the dense one (no sizes or strides). */
void tc__jit_args_fill(tc__jit_args *a, const tc__iter *it, const double *scalars, int nscalars,
                       bool strided);

/* Bytes of the argument block of a variant with nops operands. */
size_t tc__jit_args_bytes(int nops, int nscalars, bool strided);

/* ---- generated source (jit_codegen.c) ------------------------------------------- */

typedef struct tc__jit_spec {
    const char *code;
    const char *name;
    tc_dtype dtype; /* promoted: every input and output has it */
    int n_in, n_out, n_scalars;
    bool by_ref;     /* outputs are reference parameters */
    bool contiguous; /* GPU only: the dense kernel, else the strided one */
} tc__jit_spec;

/* The source of a kernel (cuda) or of a host shared object; caller frees.
 * NULL when memory runs out or the dtype is not a tc_dtype. The GPU kernel is extern "C" tc_jit_kernel, the
 * host function extern "C" tc_jit_host. */
char *tc__jit_source(const tc__jit_spec *spec, bool cuda);

/* Threads per block of the GPU kernel, and elements each thread moves per
 * operand on the vector path. */
#define TC__JIT_THREADS 128
#define TC__JIT_UNROLL 4

/* Grid of the GPU kernel for args (flat set or not), elements of esize
 * bytes, on a device with `sms` multiprocessors. */
unsigned tc__jit_grid(const tc__jit_args *a, size_t esize, int sms);

/* ---- keys and the disk cache (jit_cache.c) ------------------------------------- */

#define TC__JIT_KEY_LEN 32 /* hex digits */

/* The key of a binary: a 128-bit hash of every part (NULL parts skipped,
 * each length-prefixed), as hex into out[TC__JIT_KEY_LEN + 1]. */
void tc__jit_key(const char *const *parts, int nparts, char *out);

/* The disk cache directory: TCUDA_JIT_CACHE_DIR, $XDG_CACHE_HOME/tcuda/jit
 * or ~/.cache/tcuda/jit. false when it is off (the variable set to "") or
 * no home is known. */
bool tc__jit_cache_dir(char *buf, size_t n);

/* Reads the entry `key`.`ext` of dir: true and a malloc'd payload when the
 * file is whole (magic, key, size and checksum agree); a damaged file is
 * removed and gives false, as a missing one does. `note` (may be NULL)
 * receives the note stored with it (e.g. the compiler version). */
bool tc__jit_cache_read(const char *dir, const char *key, const char *ext, void **data,
                        size_t *size, char *note, size_t note_size);

/* Writes the entry (creating dir): to a temporary file, then a rename, so a
 * reader sees the old file, the new one, or none. Failure is silent (the
 * cache is an optimization) but returns false. */
bool tc__jit_cache_write(const char *dir, const char *key, const char *ext, const void *data,
                         size_t size, const char *note);

/* Binaries this process compiled (each cache miss on disk and in memory);
 * for tests of "compiled once". */
int tc__jit_compile_count(void);

/* For tests: when set, called with the key of each binary about to be
 * compiled, on the compiling thread, with no lock of jit.c held. */
extern void (*tc__jit_test_build_hook)(const char *key);

/* ---- the CPU path (jit_host.c) -------------------------------------------------- */

typedef void (*tc__jit_host_fn)(const tc__jit_args *args);

/* The host compiler's identity (its command and the first line of its
 * --version), found once per process. TC_ERROR_NOT_SUPPORTED when neither
 * $CXX nor c++ runs. */
tc_status tc__jit_host_compiler(const char **command, const char **version);

/* The flags the host compiler runs with (part of the key). */
const char *tc__jit_host_flags(void);

/* Compiles source into a shared object's bytes (malloc'd).
 * TC_ERROR_INVALID_ARGUMENT with the compiler's output on a compile error. */
tc_status tc__jit_host_compile(const char *source, void **so, size_t *size);

/* Loads shared-object bytes and finds tc_jit_host. The object stays loaded
 * for the process. */
tc_status tc__jit_host_load(const void *so, size_t size, tc__jit_host_fn *out);

/* ---- the GPU path: behind the device seam (runtime/device_ops.h: `jit`) ----- */
/* jit/cuda/nvrtc.c fills it (tc__jit_cuda_ops); without CUDA every step
 * answers TC_ERROR_NO_DEVICE (src/nocuda/device_ops.c). */
typedef struct tc__jit_ops {
    /* Architecture (major*10+minor) and multiprocessors of a resolved
     * device. */
    tc_status (*device)(int device, int *arch, int *sms);
    /* What goes into a GPU binary's key besides the source and the arch: the
     * CUDA major version tcuda was built for (the NVRTC soname it prefers),
     * the driver's version and NVRTC's options. Cheap: NVRTC is not loaded
     * for it (loading libnvrtc takes 17 ms with the file in the page cache,
     * more than a call from the disk cache may take); the full NVRTC version
     * that built a cached cubin is stored in the file's note. */
    const char *(*key_id)(void);
    /* NVRTC's full version ("13.0"); loads NVRTC (TC_ERROR_NOT_SUPPORTED
     * naming the sonames tried when it is missing). */
    tc_status (*nvrtc_version)(const char **out);
    /* Compiles source to a cubin for sm_<arch> (malloc'd).
     * TC_ERROR_INVALID_ARGUMENT with NVRTC's log on a compile error. */
    tc_status (*compile)(const char *source, int arch, void **cubin, size_t *size);
    /* For bench_jit_compile: ms the calling thread's last compile spent
     * creating the program, compiling it, and getting the cubin and
     * destroying the program (zeros before any, and without CUDA). */
    void (*compile_phases)(double ms[3]);
    /* Loads a cubin into the device's primary context and finds
     * tc_jit_kernel (*module, to unload it, and *function on success). */
    tc_status (*load)(int device, const void *cubin, size_t size, void **module, void **function);
    /* Unloads a module load gave (one that lost a race to load). */
    void (*unload)(int device, void *module);
    /* Launches function with args on the device's current stream. */
    tc_status (*launch)(int device, void *function, const tc__jit_args *args, unsigned grid);
} tc__jit_ops;

extern const tc__jit_ops tc__jit_cuda_ops;

#ifdef __cplusplus
}
#endif

#endif
