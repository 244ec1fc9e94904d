#!/usr/bin/env python3
"""nn_backward.h against torch.autograd, on a GPU (and the CPU in float64).

Runs on the GPU machine against a CUDA build's libtcuda.so (ctypes; no
compiled glue):

    python3 tests/torch/nn_backward_torch.py [path/to/libtcuda.so]   # or TCUDA_LIB=...

The same inputs go through tcuda and through PyTorch, in float32, bfloat16
and float16 on the GPU and float64 on the CPU:

- gelu_backward (exact and tanh) against x.grad of F.gelu;
- softmax_backward / log_softmax_backward, given torch's forward output y
  (what ATen's _softmax_backward_data takes), against x.grad, along the
  last dim and along a middle one;
- native_layer_norm's out, mean and rstd against torch.native_layer_norm's;
  layer_norm_backward, given torch's mean and rstd, against x.grad,
  weight.grad and bias.grad of F.layer_norm (with and without affine);
- cross_entropy_fused (loss and dlogits) and cross_entropy_backward against
  F.cross_entropy's loss and logits.grad, for mean, sum and none, with some
  rows ignored, on a GPT-2 sized vocabulary too, and every row ignored;
- cross_entropy_fused_autocast on 16-bit logits against autocast's
  F.cross_entropy(logits.float()): its float32 loss and logits.grad;
- add_layer_norm against x + residual, native_layer_norm and .to(out_dtype),
  with autocast's mixed pairs for float32 x;
- linear_gelu (pre and out) against F.linear and F.gelu(approximate="tanh"),
  linear_backward_gelu against pre.grad through a second linear and its
  column sums.

Tolerances are torch.testing.assert_close's defaults for each dtype; in
16-bit, a gradient outside them still passes when its error from the same
computation in float64 is at most twice torch's own (printed as a note).
Prints
one last line, "PASS nn_backward_torch: ..." or "FAIL nn_backward_torch:
...", and exits 0 / 1 (77 with "SKIP" when torch or a GPU is missing)."""
import ctypes
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIP nn_backward_torch: no torch")
    sys.exit(77)

# ---- the tcuda ABI (include/tcuda/tensor.h, nn.h, nn_backward.h) ------------------------
TC_CPU, TC_CUDA = 0, 1
TC_INT64, TC_FLOAT16, TC_BFLOAT16, TC_FLOAT32, TC_FLOAT64 = 5, 6, 7, 8, 9
TC_REDUCTION = {"none": 0, "mean": 1, "sum": 2}
TC_OF = {torch.float16: TC_FLOAT16, torch.bfloat16: TC_BFLOAT16, torch.float32: TC_FLOAT32,
         torch.float64: TC_FLOAT64, torch.int64: TC_INT64}
# torch.testing.assert_close's defaults: (rtol, atol)
TOL = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5),
       torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int)]


def load_tcuda():
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TCUDA_LIB", "build/libtcuda.so")
    lib = ctypes.CDLL(path)
    vp, i32, i64, dbl = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_double
    i64p, vpp = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_void_p)
    sigs = {
        "tc_last_error": (ctypes.c_char_p, []),
        "tc_is_available": (ctypes.c_bool, []),
        "tc_synchronize": (i32, [i32]),
        "tc_tensor_from_data": (i32, [vp, i32, i64p, i32, Device, vpp]),
        "tc_tensor_to": (i32, [vp, Device, i32, ctypes.c_bool, vpp]),
        "tc_tensor_release": (i32, [vp]),
        "tc_tensor_ndim": (i32, [vp]),
        "tc_tensor_size": (i64, [vp, i32]),
        "tc_tensor_numel": (i64, [vp]),
        "tc_tensor_to_host": (i32, [vp, i32, vp]),
        "tc_nn_gelu_backward": (i32, [vp, vp, i32, vpp]),
        "tc_nn_softmax_backward": (i32, [vp, vp, i32, vpp]),
        "tc_nn_log_softmax_backward": (i32, [vp, vp, i32, vpp]),
        "tc_nn_native_layer_norm": (i32, [vp, i32, i64p, vp, vp, dbl, vpp, vpp, vpp]),
        "tc_nn_layer_norm_backward": (i32, [vp, vp, i32, i64p, vp, vp, vp, vpp, vpp, vpp]),
        "tc_nn_cross_entropy_fused": (i32, [vp, vp, i64, i32, dbl, vpp, vpp]),
        "tc_nn_cross_entropy_fused_autocast": (i32, [vp, vp, i64, i32, dbl, vpp, vpp]),
        "tc_nn_cross_entropy_backward": (i32, [vp, vp, vp, i64, i32, vpp]),
        "tc_nn_add_layer_norm": (i32, [vp, vp, i32, i64p, vp, vp, dbl, i32, vpp, vpp, vpp, vpp]),
        "tc_nn_linear_gelu": (i32, [vp, vp, vp, i32, vpp, vpp]),
        "tc_nn_linear_backward_gelu": (i32, [vp, vp, vp, i32, vpp, vpp]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


tc = None
failures = []
checked = 0
held = []  # tcuda tensors to release at the end of a case


def ok(status, what):
    if status != 0:
        raise RuntimeError(f"{what}: status {status}: {tc.tc_last_error().decode()}")


def sizes_of(shape):
    return (ctypes.c_int64 * max(len(shape), 1))(*shape)


def to_tc(t):
    """A tcuda tensor with t's values, dtype and device."""
    dev = Device(TC_CUDA if t.is_cuda else TC_CPU, t.device.index if t.is_cuda else -1)
    src = t.detach().to("cpu", torch.int64 if t.dtype == torch.int64 else torch.float64)
    src = src.contiguous()
    host, out = ctypes.c_void_p(), ctypes.c_void_p()
    code = TC_INT64 if t.dtype == torch.int64 else TC_FLOAT64
    ok(tc.tc_tensor_from_data(src.data_ptr(), src.dim(), sizes_of(src.shape), code,
                              Device(TC_CPU, -1), ctypes.byref(host)), "tc_tensor_from_data")
    try:
        ok(tc.tc_tensor_to(host, dev, TC_OF[t.dtype], False, ctypes.byref(out)), "tc_tensor_to")
    finally:
        tc.tc_tensor_release(host)
    held.append(out)
    return out


def from_tc(h):
    """A tcuda tensor's values as a float64 CPU torch tensor of its shape."""
    shape = [tc.tc_tensor_size(h, i) for i in range(tc.tc_tensor_ndim(h))]
    out = torch.empty(shape, dtype=torch.float64)
    ok(tc.tc_tensor_to_host(h, TC_FLOAT64, out.data_ptr()), "tc_tensor_to_host")
    return out


def new_out():
    p = ctypes.c_void_p()
    held.append(p)
    return p


def release_held():
    for h in held:
        if h.value:
            tc.tc_tensor_release(h)
    held.clear()


def close(what, got_h, want, dtype, ref=None):
    """got (a tcuda tensor) against torch's `want`, within dtype's defaults.
    For 16-bit dtypes `ref` is the same computation in float64 on the same
    (rounded) inputs: where got and want differ beyond the defaults, got
    passes when its largest error from ref is at most twice torch's own (the
    two round differently: tcuda keeps float32 where torch rounds an
    intermediate, such as the log_softmax it differentiates, to 16 bits)."""
    global checked
    checked += 1
    got = from_tc(got_h)
    want = want.detach().to("cpu", torch.float64)
    if list(got.shape) != list(want.shape):
        failures.append(f"{what} ({dtype}): shape {list(got.shape)}, torch {list(want.shape)}")
        return
    rtol, atol = TOL[dtype]
    bad = ~((got - want).abs() <= atol + rtol * want.abs()) & ~(got.isnan() & want.isnan())
    if bad.any() and ref is not None:
        ref = ref.detach().to("cpu", torch.float64)
        fin = ~ref.isnan()
        err_tc = (got - ref).abs()[fin].max().item() if fin.any() else 0.0
        err_torch = (want - ref).abs()[fin].max().item() if fin.any() else 0.0
        if err_tc <= 2 * err_torch + atol:
            print(f"note: {what} ({dtype}): {bad.sum().item()} elements differ from torch; "
                  f"largest error from float64: tcuda {err_tc:.3g}, torch {err_torch:.3g}")
            return
    if bad.any():
        i = bad.flatten().nonzero()[0].item()
        failures.append(f"{what} ({dtype}): {bad.sum().item()} of {got.numel()} differ, e.g. "
                        f"element {i}: {got.flatten()[i].item():.9g} vs torch "
                        f"{want.flatten()[i].item():.9g}")


# ---- the cases --------------------------------------------------------------------------


def leaf64(t):
    """A float64 copy of t that autograd treats as a leaf of its own: for a float64
    t, t.double() is t itself, and requires_grad_ on it would turn every later
    t.clone() into a non-leaf whose .grad stays None."""
    return t.detach().double().clone().requires_grad_()


def case_gelu(dev, dt):
    for shape in ((64, 768), (7, 1001)):  # 7,007 elements: a ragged tail after the packs
        gelu_shape(dev, dt, shape)


def gelu_shape(dev, dt, shape):
    x = (torch.randn(shape, dtype=torch.float64) * 3).to(dev, dt)
    g = torch.randn(shape, dtype=torch.float64).to(dev, dt)
    for ap, name in ((0, "none"), (1, "tanh")):
        xr = x.clone().requires_grad_()
        F.gelu(xr, approximate=name).backward(g)
        x64 = leaf64(x)
        F.gelu(x64, approximate=name).backward(g.double())
        out = new_out()
        ok(tc.tc_nn_gelu_backward(to_tc(g), to_tc(x), ap, ctypes.byref(out)), "gelu_backward")
        close(f"gelu_backward {name} {list(shape)}", out, xr.grad, dt, x64.grad)


def case_softmax(dev, dt):
    for shape, dim in (((32, 1000), -1), ((4, 16, 8), 1), ((8, 3000), 1), ((6, 2053), 1),
                       ((3, 40009), 1)):
        x = (torch.randn(shape, dtype=torch.float64) * 2).to(dev, dt)
        g = torch.randn(shape, dtype=torch.float64).to(dev, dt)
        for log in (False, True):
            xr = x.clone().requires_grad_()
            y = (F.log_softmax if log else F.softmax)(xr, dim)
            y.backward(g)
            fn = tc.tc_nn_log_softmax_backward if log else tc.tc_nn_softmax_backward
            out = new_out()
            ok(fn(to_tc(g), to_tc(y), dim, ctypes.byref(out)), "softmax_backward")
            y64, g64 = y.detach().double(), g.double()
            ref = (g64 - y64.exp() * g64.sum(dim, keepdim=True) if log
                   else y64 * (g64 - (g64 * y64).sum(dim, keepdim=True)))
            close(f"{'log_' if log else ''}softmax_backward {list(shape)} dim {dim}", out,
                  xr.grad, dt, ref)


def case_layer_norm(dev, dt):
    for shape, nshape, affine in (((8, 64, 768), 1, True), ((16, 4, 50), 2, True),
                                  ((100, 33), 1, False)):
        x = (torch.randn(shape, dtype=torch.float64) * 2 + 0.5).to(dev, dt)
        g = torch.randn(shape, dtype=torch.float64).to(dev, dt)
        ns = list(shape[-nshape:])
        w = (torch.rand(ns, dtype=torch.float64) + 0.5).to(dev, dt) if affine else None
        b = torch.randn(ns, dtype=torch.float64).to(dev, dt) if affine else None
        eps = 1e-5
        out_t, mean_t, rstd_t = torch.native_layer_norm(x, ns, w, b, eps)
        y, mean, rstd = new_out(), new_out(), new_out()
        tw, tb = (to_tc(w), to_tc(b)) if affine else (None, None)
        ok(tc.tc_nn_native_layer_norm(to_tc(x), nshape, sizes_of(ns), tw, tb, eps,
                                      ctypes.byref(y), ctypes.byref(mean), ctypes.byref(rstd)),
           "native_layer_norm")
        what = f"native_layer_norm {list(shape)}"
        close(f"{what} out", y, out_t, dt)
        close(f"{what} mean", mean, mean_t, mean_t.dtype)
        close(f"{what} rstd", rstd, rstd_t, rstd_t.dtype)
        xr = x.clone().requires_grad_()
        wr = w.clone().requires_grad_() if affine else None
        br = b.clone().requires_grad_() if affine else None
        F.layer_norm(xr, ns, wr, br, eps).backward(g)
        x64 = leaf64(x)
        w64 = leaf64(w) if affine else None
        b64 = leaf64(b) if affine else None
        F.layer_norm(x64, ns, w64, b64, eps).backward(g.double())
        dx, dw, db = new_out(), new_out(), new_out()
        ok(tc.tc_nn_layer_norm_backward(to_tc(g), to_tc(x), nshape, sizes_of(ns),
                                        to_tc(mean_t), to_tc(rstd_t), tw, ctypes.byref(dx),
                                        ctypes.byref(dw) if affine else None,
                                        ctypes.byref(db) if affine else None),
           "layer_norm_backward")
        what = f"layer_norm_backward {list(shape)}"
        close(f"{what} dx", dx, xr.grad, dt, x64.grad)
        if affine:
            close(f"{what} dweight", dw, wr.grad, dt, w64.grad)
            close(f"{what} dbias", db, br.grad, dt, b64.grad)


def case_cross_entropy(dev, dt):
    for n, c in ((128, 100), (64, 50257), (4, 7)):
        x = (torch.randn(n, c, dtype=torch.float64) * 3).to(dev, dt)
        t = torch.randint(0, c, (n,), device=dev)
        t[::5] = -100
        if n == 4:
            t[:] = -100  # every row ignored: mean NaN, gradient 0
        for red in ("mean", "sum", "none"):
            scale = 0.5
            xr = x.clone().requires_grad_()
            loss_t = F.cross_entropy(xr, t, ignore_index=-100, reduction=red)
            gl = (torch.randn(n, dtype=torch.float64).to(dev, dt) if red == "none"
                  else torch.tensor(scale, dtype=dt, device=dev))
            x64 = leaf64(x)
            loss64 = F.cross_entropy(x64, t, ignore_index=-100, reduction=red)
            if red == "none":
                loss_t.backward(gl)
                loss64.backward(gl.double())
            else:
                (loss_t * scale).backward()
                (loss64 * scale).backward()
            what = f"cross_entropy [{n}, {c}] {red}"
            if red != "none":
                loss, dl = new_out(), new_out()
                ok(tc.tc_nn_cross_entropy_fused(to_tc(x), to_tc(t), -100, TC_REDUCTION[red],
                                                scale, ctypes.byref(loss), ctypes.byref(dl)),
                   "cross_entropy_fused")
                close(f"{what} fused loss", loss, loss_t, dt, loss64)
                close(f"{what} fused dlogits", dl, xr.grad, dt, x64.grad)
            dl2 = new_out()
            ok(tc.tc_nn_cross_entropy_backward(to_tc(gl), to_tc(x), to_tc(t), -100,
                                               TC_REDUCTION[red], ctypes.byref(dl2)),
               "cross_entropy_backward")
            close(f"{what} backward", dl2, xr.grad, dt, x64.grad)


def case_cross_entropy_autocast(dev, dt):
    if dt not in (torch.bfloat16, torch.float16):
        return
    for n, c in ((128, 100), (64, 50257)):
        x = (torch.randn(n, c, dtype=torch.float64) * 3).to(dev, dt)
        t = torch.randint(0, c, (n,), device=dev)
        t[::5] = -100
        for red in ("mean", "sum"):
            scale = 0.5
            xr = x.clone().requires_grad_()
            loss_t = F.cross_entropy(xr.float(), t, ignore_index=-100, reduction=red)
            (loss_t * scale).backward()  # xr.grad: float32's gradient cast back to dt
            x64 = leaf64(x)
            loss64 = F.cross_entropy(x64, t, ignore_index=-100, reduction=red)
            (loss64 * scale).backward()
            what = f"cross_entropy_fused_autocast [{n}, {c}] {red}"
            loss, dl = new_out(), new_out()
            ok(tc.tc_nn_cross_entropy_fused_autocast(to_tc(x), to_tc(t), -100, TC_REDUCTION[red],
                                                     scale, ctypes.byref(loss), ctypes.byref(dl)),
               "cross_entropy_fused_autocast")
            close(f"{what} loss", loss, loss_t, torch.float32, loss64)
            close(f"{what} dlogits", dl, xr.grad, dt, x64.grad)


def case_add_layer_norm(dev, dt):
    """x + residual and layer_norm of it in out_dtype: against torch's add,
    native_layer_norm and .to(out_dtype); with float32 x also 16-bit
    residuals and outputs (autocast's pairs)."""
    pairs = [(dt, dt)]
    if dt == torch.float32:
        pairs += [(torch.bfloat16, torch.bfloat16), (torch.float32, torch.bfloat16),
                  (torch.float16, torch.float16)]
    shape, ns, eps = (4, 64, 768), [768], 1e-5
    for rdt, odt in pairs:
        x = (torch.randn(shape, dtype=torch.float64) * 2).to(dev, dt)
        r = torch.randn(shape, dtype=torch.float64).to(dev, rdt)
        w = (torch.rand(ns, dtype=torch.float64) + 0.5).to(dev, dt)
        b = torch.randn(ns, dtype=torch.float64).to(dev, dt)
        s_t = x + r
        out_t, mean_t, rstd_t = torch.native_layer_norm(s_t, ns, w, b, eps)
        s, y, mean, rstd = new_out(), new_out(), new_out(), new_out()
        ok(tc.tc_nn_add_layer_norm(to_tc(x), to_tc(r), 1, sizes_of(ns), to_tc(w), to_tc(b), eps,
                                   TC_OF[odt], ctypes.byref(s), ctypes.byref(y),
                                   ctypes.byref(mean), ctypes.byref(rstd)), "add_layer_norm")
        what = f"add_layer_norm {dt} x + {rdt} residual -> {odt}"
        close(f"{what} sum", s, s_t, dt)
        close(f"{what} out", y, out_t.to(odt), odt)
        close(f"{what} mean", mean, mean_t, mean_t.dtype)
        close(f"{what} rstd", rstd, rstd_t, rstd_t.dtype)


def case_linear_gelu(dev, dt):
    """linear + tanh gelu forward (pre and out) and the backward through a
    second linear down to pre (grad_pre and its column sums)."""
    m, k, n = 256, 768, 3072
    x = torch.randn(m, k, dtype=torch.float64).to(dev, dt)
    w = (torch.randn(n, k, dtype=torch.float64) * 0.03).to(dev, dt)
    b = (torch.randn(n, dtype=torch.float64) * 0.1).to(dev, dt)
    pre_t = F.linear(x, w, b)
    out_t = F.gelu(pre_t, approximate="tanh")
    pre64 = F.linear(x.double(), w.double(), b.double())
    out, pre = new_out(), new_out()
    ok(tc.tc_nn_linear_gelu(to_tc(x), to_tc(w), to_tc(b), 1, ctypes.byref(out),
                            ctypes.byref(pre)), "linear_gelu")
    close(f"linear_gelu [{m}, {k}] x [{n}, {k}] pre", pre, pre_t, dt, pre64)
    close(f"linear_gelu [{m}, {k}] x [{n}, {k}] out", out, out_t, dt,
          F.gelu(pre64, approximate="tanh"))
    # the backward: y = linear(gelu(pre), w2 [k, n]); grad_output [m, k]
    w2 = (torch.randn(k, n, dtype=torch.float64) * 0.03).to(dev, dt)
    go = torch.randn(m, k, dtype=torch.float64).to(dev, dt)
    pr = pre_t.detach().clone().requires_grad_()
    F.linear(F.gelu(pr, approximate="tanh"), w2).backward(go)
    p64 = leaf64(pre_t)
    F.linear(F.gelu(p64, approximate="tanh"), w2.double()).backward(go.double())
    gp, gb = new_out(), new_out()
    ok(tc.tc_nn_linear_backward_gelu(to_tc(go), to_tc(w2), to_tc(pre_t), 1, ctypes.byref(gp),
                                     ctypes.byref(gb)), "linear_backward_gelu")
    close(f"linear_backward_gelu [{m}, {n}] grad_pre", gp, pr.grad, dt, p64.grad)
    close(f"linear_backward_gelu [{n}] grad_bias", gb, pr.grad.sum(0), dt, p64.grad.sum(0))


CASES = (case_gelu, case_softmax, case_layer_norm, case_cross_entropy,
         case_cross_entropy_autocast, case_add_layer_norm, case_linear_gelu)


def main():
    global tc
    if not torch.cuda.is_available():
        print("SKIP nn_backward_torch: torch sees no GPU")
        return 77
    tc = load_tcuda()
    if not tc.tc_is_available():
        print(f"SKIP nn_backward_torch: tcuda sees no GPU: {tc.tc_last_error().decode()}")
        return 77
    torch.manual_seed(27)
    runs = [("cuda:0", dt) for dt in (torch.float32, torch.bfloat16, torch.float16)]
    runs.append(("cpu", torch.float64))
    for dev, dt in runs:
        for case in CASES:
            try:
                case(dev, dt)
                ok(tc.tc_synchronize(-1), "tc_synchronize")
            except Exception as e:
                failures.append(f"{case.__name__} {dev} {dt}: {type(e).__name__}: {e}")
            finally:
                release_held()
    if failures:
        for f in failures:
            print("  " + f)
        print(f"FAIL nn_backward_torch: {len(failures)} of {checked} comparisons: {failures[0]}")
        return 1
    print(f"PASS nn_backward_torch: {checked} comparisons (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
