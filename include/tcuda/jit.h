/* tcuda: jiterator, element-wise kernels of your own from a string of C++
 * (torch.cuda.jiterator._create_jit_fn and _create_multi_output_jit_fn).
 *
 * The code is a C++ function template computing one element, as in PyTorch:
 *
 *     template <typename T> T axpy(T x, T y, T alpha) { return x + alpha * y; }
 *
 * Its parameters are, in order: one per tensor input, then the extra scalar
 * parameters named in the options (with their default values), then, for a
 * multi-output function, one reference (T &out) per output. A single-output
 * function returns its value; a multi-output one returns void and writes its
 * references. When the code defines several functions, the last one is the
 * entry (helpers come first, as C++ wants), unless the options name it.
 *
 * A call broadcasts the inputs and promotes their dtypes exactly as tcuda's
 * own element-wise ops do (tc_tensor_add): T is the promoted dtype (float for
 * float16 and bfloat16, which are computed in float and rounded to nearest
 * even, as the built-in kernels do), and the outputs have that dtype. Inputs
 * may be strided, 0-d or empty. On a GPU the kernel runs on the current
 * stream of the tensors' device and the call returns before it finishes.
 *
 * Compilation happens at the first call for each (dtype, contiguity, device
 * architecture): with NVRTC for a GPU (loaded at run time: libnvrtc.so.13, .12
 * or libnvrtc.so; compiled to a cubin for the device's own sm_XX, with
 * -fmad=false so that results equal the built-in ops bit for bit), and with
 * the host C++ compiler ($CXX, then c++) into a shared object for the CPU, so
 * the same program runs on CPU tensors. Binaries are cached in memory and on
 * disk: in $TCUDA_JIT_CACHE_DIR, else $XDG_CACHE_HOME/tcuda/jit, else
 * ~/.cache/tcuda/jit; TCUDA_JIT_CACHE_DIR set to "" turns the disk cache off.
 * Cache files are checksummed (a damaged one is ignored and replaced) and
 * written through a temporary file and a rename (processes may share them).
 * A name in the cache directory that is not a regular file (a FIFO) is a
 * miss, never waited on. On the CPU the code is compiled as C++17 with
 * <math.h>; __device__, __host__ and __forceinline__ are accepted and ignored
 * there, and ::min / ::max are provided. Functions are thread-safe: two
 * threads creating and calling the same code compile it once.
 *
 * The environment read: CXX (the host compiler, run without a shell: split
 * at blanks into words, with no quoting, escapes or expansion, the first
 * word looked up in PATH, e.g. "ccache g++"), PATH, TMPDIR (where the CPU
 * path compiles and loads, else /tmp), TCUDA_JIT_CACHE_DIR, XDG_CACHE_HOME
 * and HOME (the disk cache, as above), LD_LIBRARY_PATH (below) and
 * TCUDA_JIT_READAHEAD.
 *
 * NVRTC loads at the first GPU compile. Its files (about 110 MB) are read
 * ahead before that: when CUDA initializes (the first call that needs it, or
 * tc_init), a thread of tcuda's finds them (LD_LIBRARY_PATH, then
 * /etc/ld.so.cache) and asks the kernel to read them into the page cache, so
 * a first compile on a machine that has not read them yet does not wait
 * 150-200 ms for the disk. Nothing of NVRTC runs before a compile.
 * TCUDA_JIT_READAHEAD=0 (false, no, off, or empty) turns this off; a value
 * that is not a boolean fails initialization with TC_ERROR_INVALID_ARGUMENT
 * naming it. */
#ifndef TCUDA_JIT_H
#define TCUDA_JIT_H

#include "dtype.h"
#include "status.h"
#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* Most tensor operands (inputs + outputs) and extra scalars of a function. */
#define TC_JIT_MAX_OPERANDS 8
#define TC_JIT_MAX_SCALARS 8
/* Longest name (entry function, parameter, scalar, options.name) in
 * characters; a longer one is TC_ERROR_INVALID_ARGUMENT, never cut. */
#define TC_JIT_MAX_NAME_LENGTH 127

/* ---- making a function ---------------------------------------------------- */

/* A function made from a string of code. */
typedef struct tc_jit_fn tc_jit_fn;

/* Options of tc_jit_fn_create; NULL means all defaults (a zeroed struct). */
typedef struct tc_jit_options {
    /* The extra scalar parameters and their default values, in the order the
     * function takes them: "alpha=1.0" or "alpha=1, beta=-0.5" (PyTorch's
     * kwargs). Each name must be the name of the matching parameter in the
     * code. NULL or "" for none. */
    const char *scalars;
    /* The entry function's name; NULL takes the last function the code
     * defines. */
    const char *name;
} tc_jit_options;

/* Parses and checks `code` (not yet compiled) into a new function with one
 * output. The code is copied. Errors: TC_ERROR_INVALID_ARGUMENT for NULL
 * code or out, code without a function template, a function that returns
 * void, a bad scalars string, scalar names that differ from the code's
 * parameters, no tensor input left, or a name longer than
 * TC_JIT_MAX_NAME_LENGTH; TC_ERROR_OUT_OF_MEMORY. */
TCUDA_API tc_status tc_jit_fn_create(const char *code, const tc_jit_options *options,
                                     tc_jit_fn **out);

/* The same for a function with `num_outputs` (1..7) outputs, returned
 * through its last num_outputs reference parameters. */
TCUDA_API tc_status tc_jit_fn_create_multi_output(const char *code, int num_outputs,
                                                  const tc_jit_options *options, tc_jit_fn **out);

/* ---- calling it and ending it --------------------------------------------- */

/* Runs fn element-wise over `n_inputs` tensors (all on one device; as many
 * as the function has tensor parameters). `scalars` holds the values of the
 * extra scalar parameters, in order, or is NULL for their defaults.
 * `outputs` has one slot per output: a NULL slot receives a new tensor of
 * the broadcast shape and promoted dtype (the caller releases it); a tensor
 * already there is written (it must have the broadcast shape and the
 * inputs' device; any dtype, values are converted). A given output may be
 * an input itself (the same elements in the same layout: computed in place),
 * but must not otherwise overlap an input or another output (e.g. a.T as the
 * output of a), nor hold several elements in one place (an expanded, stride-0
 * tensor), as PyTorch refuses. New tensors are written only on success.
 * Compiles on the first call for a dtype. Errors:
 * TC_ERROR_INVALID_ARGUMENT (NULL arguments, wrong number of inputs, an
 * output that overlaps as above, naming it; a compile error: the message
 * holds the compiler's log; code that compiles but does not load, e.g. a
 * function declared and never defined: the loader's message),
 * TC_ERROR_INVALID_HANDLE (a destroyed fn or tensor), TC_ERROR_SHAPE (shapes
 * that do not broadcast, an output of another shape),
 * TC_ERROR_DEVICE_MISMATCH, TC_ERROR_NOT_SUPPORTED (no NVRTC, or no host
 * C++ compiler for CPU tensors; the message names what was looked for),
 * TC_ERROR_NO_DEVICE, TC_ERROR_OUT_OF_MEMORY, TC_ERROR_CUDA. */
TCUDA_API tc_status tc_jit_fn_call(tc_jit_fn *fn, const tc_tensor *const *inputs, int n_inputs,
                                   const double *scalars, tc_tensor **outputs);

/* Destroys fn (compiled kernels stay cached for the process). NULL is
 * TC_ERROR_INVALID_ARGUMENT, a destroyed fn TC_ERROR_INVALID_HANDLE. */
TCUDA_API tc_status tc_jit_fn_destroy(tc_jit_fn *fn);

/* What the code says: the entry function's name, the number of tensor
 * inputs, of extra scalars and of outputs. These cannot fail: NULL / -1 for
 * a NULL, destroyed or foreign fn, leaving tc_last_error() as it was. */
TCUDA_API const char *tc_jit_fn_name(const tc_jit_fn *fn);
TCUDA_API int tc_jit_fn_num_inputs(const tc_jit_fn *fn);
TCUDA_API int tc_jit_fn_num_scalars(const tc_jit_fn *fn);
TCUDA_API int tc_jit_fn_num_outputs(const tc_jit_fn *fn);

TCUDA_EXTERN_C_END

#endif
