#!/usr/bin/env python3
"""nn_backward.h's layers against torch.autograd, on a GPU.

Runs on the GPU machine against a CUDA build's libtcuda.so (ctypes; no
compiled glue):

    python3 tests/torch/nn_layers_torch.py [path/to/libtcuda.so]   # or TCUDA_LIB=...

The same inputs (made by torch in each dtype, handed to tcuda as float32,
which holds every 16-bit value exactly) go through both:

1. embedding: F.embedding(idx, W, padding_idx, scale_grad_by_freq)
   .backward(G) against tc_nn_embedding_backward (padding_idx none and 3,
   scale_grad_by_freq off and on; repeated indices),
   with tc_use_deterministic_algorithms off and on (twice: equal bits),
   and the accumulate form tc_nn_embedding_backward_ (weight tying: the
   gradient added to an existing one).
2. linear: F.linear(x, W, b).backward(G) against tc_nn_linear_backward
   (grad_x, grad_weight, grad_bias) and tc_nn_linear_backward_into with
   accumulate.
3. dropout: the bits differ from PyTorch's (other Philox counters), so its
   statistics: over 2^22 elements the keep rate is within 4 sigma of 1 - p
   and every kept element equals PyTorch's own kept value (the scale, as
   F.dropout gives it); the backward equals aten's native_dropout_backward
   on tcuda's mask.

Every dtype: float32, bfloat16, float16 (and float64). Prints one last line,
"PASS nn_layers_torch: ..." or "FAIL nn_layers_torch: ...", and exits 0 / 1
(77 with "SKIP" when torch or a GPU is missing)."""
import ctypes
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIP nn_layers_torch: no torch")
    sys.exit(77)

TC_BOOL, TC_INT64, TC_FLOAT32 = 0, 5, 8
TC_CODES = {torch.float16: 6, torch.bfloat16: 7, torch.float32: 8, torch.float64: 9}
# rtol, atol of tcuda's gradient against torch's, per dtype
TOL = {
    torch.float16: (5e-3, 5e-3),
    torch.bfloat16: (3e-2, 3e-2),
    torch.float32: (2e-5, 2e-5),
    torch.float64: (1e-10, 1e-10),
}


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int)]


CPU, GPU = Device(0, -1), Device(1, 0)


def load_tcuda():
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TCUDA_LIB", "build/libtcuda.so")
    lib = ctypes.CDLL(path)
    vp, i32, i64, b = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_bool
    i64p, vpp = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_void_p)
    sigs = {
        "tc_last_error": (ctypes.c_char_p, []),
        "tc_is_available": (b, []),
        "tc_synchronize": (i32, [i32]),
        "tc_tensor_from_data": (i32, [vp, i32, i64p, i32, Device, vpp]),
        "tc_tensor_to": (i32, [vp, Device, i32, b, vpp]),
        "tc_tensor_release": (i32, [vp]),
        "tc_tensor_numel": (i64, [vp]),
        "tc_tensor_to_host": (i32, [vp, i32, vp]),
        "tc_use_deterministic_algorithms": (i32, [b]),
        "tc_nn_embedding_backward": (i32, [vp, vp, i64, i64, b, vpp]),
        "tc_nn_embedding_backward_": (i32, [vp, vp, vp, i64, b]),
        "tc_nn_linear_backward": (i32, [vp, vp, vp, ctypes.c_uint, vpp, vpp, vpp]),
        "tc_nn_linear_backward_into": (i32, [vp, vp, vp, b, vp, vp, vp]),
        "tc_nn_dropout": (i32, [vp, ctypes.c_double, b, vp, vpp, vpp]),
        "tc_nn_dropout_backward": (i32, [vp, vp, ctypes.c_double, vpp]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


tc = None
failures = []
checked = 0


def ok(status, what):
    if status != 0:
        raise RuntimeError(f"{what}: status {status}: {tc.tc_last_error().decode()}")


def to_tc(t, dtype=None):
    """A tcuda GPU tensor of t's values in `dtype` (t's by default)."""
    dtype = dtype or t.dtype
    host_dtype = torch.int64 if dtype == torch.int64 else (torch.float64 if dtype == torch.float64 else torch.float32)
    h = t.detach().to("cpu", host_dtype).contiguous()
    sizes = (ctypes.c_int64 * max(h.dim(), 1))(*h.shape)
    code = TC_INT64 if host_dtype == torch.int64 else TC_CODES[host_dtype]
    ht, gt = ctypes.c_void_p(), ctypes.c_void_p()
    ok(tc.tc_tensor_from_data(ctypes.c_void_p(h.data_ptr()), h.dim(), sizes, code, CPU, ctypes.byref(ht)), "from_data")
    target = TC_INT64 if dtype == torch.int64 else (TC_BOOL if dtype == torch.bool else TC_CODES[dtype])
    ok(tc.tc_tensor_to(ht, GPU, target, False, ctypes.byref(gt)), "to")
    tc.tc_tensor_release(ht)
    return gt


def from_tc(t, shape, as_bool=False):
    """A tcuda tensor's values as a torch CPU tensor (float64, or bool)."""
    out = torch.empty(shape, dtype=torch.bool if as_bool else torch.float64)
    ok(tc.tc_tensor_to_host(t, TC_BOOL if as_bool else 9, ctypes.c_void_p(out.data_ptr())), "to_host")
    return out


def close(what, got, want, dtype):
    global checked
    checked += 1
    rtol, atol = TOL[dtype]
    want = want.detach().to("cpu", torch.float64)
    if got.shape != want.shape:
        failures.append(f"{what} ({dtype}): shape {tuple(got.shape)} != {tuple(want.shape)}")
        return
    err = (got - want).abs() - (atol + rtol * want.abs())
    if (err > 0).any():
        i = int(err.flatten().argmax())
        failures.append(f"{what} ({dtype}): element {i} is {got.flatten()[i]:.8g}, torch {want.flatten()[i]:.8g}")


def release(*ts):
    for t in ts:
        tc.tc_tensor_release(t)


def check_embedding(dtype):
    V, C = 50, 16
    idx = torch.randint(0, V, (4, 9), device="cuda")
    idx[0, :4] = 3  # repeats, and the padding row when padding_idx is 3
    for pad, freq in ((None, False), (3, False), (None, True), (3, True)):
        W = torch.randn(V, C, device="cuda", dtype=dtype, requires_grad=True)
        G = torch.randn(4, 9, C, device="cuda", dtype=dtype)
        F.embedding(idx, W, padding_idx=pad, scale_grad_by_freq=freq).backward(G)
        g, i = to_tc(G), to_tc(idx)
        last = None
        for det in (False, True, True):
            ok(tc.tc_use_deterministic_algorithms(det), "deterministic")
            gw = ctypes.c_void_p()
            ok(tc.tc_nn_embedding_backward(g, i, V, -1 if pad is None else pad, freq, ctypes.byref(gw)), "embedding_backward")
            got = from_tc(gw, (V, C))
            close(f"embedding_backward pad={pad} freq={freq} det={det}", got, W.grad, dtype)
            if det:
                if last is not None and not torch.equal(last, got):
                    failures.append(f"embedding_backward ({dtype}): deterministic runs differ")
                last = got
            release(gw)
        # weight tying: torch's gradient accumulated twice against tcuda adding into its own
        W.grad = None
        F.embedding(idx, W, padding_idx=pad, scale_grad_by_freq=freq).backward(G)
        base = torch.randn(V, C, device="cuda", dtype=dtype)
        acc = to_tc(base)
        ok(tc.tc_nn_embedding_backward_(acc, g, i, -1 if pad is None else pad, freq), "embedding_backward_")
        close(f"embedding_backward_ pad={pad}", from_tc(acc, (V, C)), (base.double() + W.grad.double()).to(dtype), dtype)
        release(acc, g, i)
    ok(tc.tc_use_deterministic_algorithms(False), "deterministic")


def check_linear(dtype):
    x = torch.randn(3, 7, 32, device="cuda", dtype=dtype, requires_grad=True)
    W = torch.randn(24, 32, device="cuda", dtype=dtype, requires_grad=True)
    b = torch.randn(24, device="cuda", dtype=dtype, requires_grad=True)
    G = torch.randn(3, 7, 24, device="cuda", dtype=dtype)
    F.linear(x, W, b).backward(G)
    g, tx, tw = to_tc(G), to_tc(x), to_tc(W)
    out = [ctypes.c_void_p() for _ in range(3)]
    ok(tc.tc_nn_linear_backward(g, tx, tw, 7, *[ctypes.byref(o) for o in out]), "linear_backward")
    scale = 1 if dtype == torch.float64 else 4  # sums of 32 and 21 products
    for o, want, name, shape in zip(out, (x.grad, W.grad, b.grad), ("grad_x", "grad_weight", "grad_bias"),
                                    ((3, 7, 32), (24, 32), (24,))):
        close(f"linear_backward {name}", from_tc(o, shape) / scale, want / scale, dtype)
    # gradient accumulation: the same backward added into the results
    ok(tc.tc_nn_linear_backward_into(g, tx, tw, True, *out), "linear_backward_into")
    for o, want, name, shape in zip(out, (x.grad, W.grad, b.grad), ("grad_x", "grad_weight", "grad_bias"),
                                    ((3, 7, 32), (24, 32), (24,))):
        close(f"linear_backward_into {name}", from_tc(o, shape) / (2 * scale), want / scale, dtype)
    release(g, tx, tw, *out)


def check_dropout(dtype):
    global checked
    n, p = 1 << 22, 0.3
    ones = torch.ones(n, device="cuda", dtype=dtype)
    x = to_tc(ones)
    out, mask = ctypes.c_void_p(), ctypes.c_void_p()
    ok(tc.tc_nn_dropout(x, p, True, None, ctypes.byref(out), ctypes.byref(mask)), "dropout")
    got, m = from_tc(out, (n,)), from_tc(mask, (n,), as_bool=True)
    kept = int(m.sum())
    sigma = (n * p * (1 - p)) ** 0.5
    checked += 3
    if abs(kept - n * (1 - p)) > 4 * sigma:
        failures.append(f"dropout ({dtype}): kept {kept} of {n}, expected {n * (1 - p):.0f} +- {4 * sigma:.0f}")
    tv = F.dropout(ones, p, training=True).double().cpu()
    scale_torch = float(tv[tv != 0][0])
    if not torch.equal(got[m], torch.full((kept,), scale_torch, dtype=torch.float64)):
        failures.append(f"dropout ({dtype}): kept values differ from torch's {scale_torch!r}")
    if not bool((got[~m] == 0).all()):
        failures.append(f"dropout ({dtype}): dropped values are not 0")
    G = torch.randn(n, device="cuda", dtype=dtype)
    g, gin = to_tc(G), ctypes.c_void_p()
    ok(tc.tc_nn_dropout_backward(g, mask, p, ctypes.byref(gin)), "dropout_backward")
    want = torch.ops.aten.native_dropout_backward(G, m.cuda(), 1 / (1 - p))
    close("dropout_backward", from_tc(gin, (n,)), want, dtype)
    release(x, out, mask, g, gin)


def main():
    global tc
    if not torch.cuda.is_available():
        print("SKIP nn_layers_torch: torch sees no GPU")
        return 77
    tc = load_tcuda()
    if not tc.tc_is_available():
        print(f"SKIP nn_layers_torch: tcuda sees no GPU: {tc.tc_last_error().decode()}")
        return 77
    torch.manual_seed(20240527)
    try:
        for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
            check_embedding(dtype)
            check_linear(dtype)
            check_dropout(dtype)
        ok(tc.tc_synchronize(-1), "synchronize")
    except Exception as e:
        failures.append(f"{type(e).__name__}: {e}")
    if failures:
        print("FAIL nn_layers_torch: " + "; ".join(failures[:8]))
        return 1
    print(f"PASS nn_layers_torch: {checked} checks against torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
