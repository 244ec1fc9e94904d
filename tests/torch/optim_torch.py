#!/usr/bin/env python3
"""tcuda's optimizers against PyTorch's, on a GPU.

Runs on the GPU machine against a CUDA build's libtcuda.so (ctypes; no
compiled glue):

    python3 tests/torch/optim_torch.py [path/to/libtcuda.so]   # or TCUDA_LIB=...

The same initial parameters and the same gradients, 10 steps, through:

1. torch.optim.AdamW(fused=True) and tc_optimizer_create_adamw: defaults,
   then amsgrad + maximize, then lr as a CUDA tensor; torch.optim.Adam(fused=True)
   with weight_decay (L2) and tc_optimizer_create_adam; float32 and bfloat16
   parameters (state of the parameters' dtype in both).
2. torch.optim.SGD(foreach=True) with momentum, dampening, weight decay, and
   with nesterov + maximize, and tc_optimizer_create_sgd (float32).
3. torch.nn.utils.clip_grad_norm_(foreach=True), norm 2 and inf, and
   tc_clip_grad_norm_: the total norms and the clipped gradients.
4. torch.amp.GradScaler("cuda", growth_interval=3) around the fused AdamW,
   an infinity in the gradients at step 4, unscale_ before the step on odd
   steps, and tc_grad_scaler_*: the scale, the tracker and the parameters.

What to expect: float32 values equal within 1e-6 relative, plus 1e-7
absolute for values near 0. tcuda follows the fused kernels operation by
operation, so many are bit-equal; it differs where beta^t is computed by
repeated squaring rather than pow, where the norms' sums run in another
order, and, if this torch's fused Adam casts lr and the betas to float
first (PyTorch's main branch of 2026 does), by about a rounding per step.
Each comparison's largest relative difference is printed. bfloat16: within
about 4 ulps (1.6e-2 relative, 1.6e-3 absolute). The scaler's scale and
tracker: equal.

Prints one line, "PASS optim_torch: ..." or "FAIL optim_torch: ...", and exits
0 / 1 (77 with "SKIP" when torch or a GPU is missing)."""
import ctypes
import math
import os
import sys

try:
    import torch
except ImportError:
    print("SKIP optim_torch: no torch")
    sys.exit(77)

if not torch.cuda.is_available():
    print("SKIP optim_torch: no GPU")
    sys.exit(77)

# ---- the tcuda ABI (include/tcuda/tensor.h, optim.h, amp.h) ----------------------------
TC_CPU, TC_CUDA = 0, 1
TC_DT = {torch.float16: 6, torch.bfloat16: 7, torch.float32: 8, torch.float64: 9}
STATE_STEP, STATE_EXP_AVG, STATE_EXP_AVG_SQ, STATE_MAX_EXP_AVG_SQ, STATE_MOMENTUM = range(5)


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int)]


class AdamWOptions(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_double), ("beta1", ctypes.c_double), ("beta2", ctypes.c_double),
                ("eps", ctypes.c_double), ("weight_decay", ctypes.c_double),
                ("amsgrad", ctypes.c_bool), ("maximize", ctypes.c_bool)]


class SGDOptions(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_double), ("momentum", ctypes.c_double),
                ("dampening", ctypes.c_double), ("weight_decay", ctypes.c_double),
                ("nesterov", ctypes.c_bool), ("maximize", ctypes.c_bool)]


class ScalerOptions(ctypes.Structure):
    _fields_ = [("init_scale", ctypes.c_double), ("growth_factor", ctypes.c_double),
                ("backoff_factor", ctypes.c_double), ("growth_interval", ctypes.c_int),
                ("enabled", ctypes.c_bool)]


class ScalerState(ctypes.Structure):
    _fields_ = [("scale", ctypes.c_double), ("growth_factor", ctypes.c_double),
                ("backoff_factor", ctypes.c_double), ("growth_interval", ctypes.c_int),
                ("growth_tracker", ctypes.c_int)]


def load_tcuda():
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TCUDA_LIB", "build/libtcuda.so")
    lib = ctypes.CDLL(path)
    vp, i32, dbl, b = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_bool
    i64p, vpp = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_void_p)
    sigs = {
        "tc_last_error": (ctypes.c_char_p, []),
        "tc_synchronize": (i32, [i32]),
        "tc_tensor_from_data": (i32, [vp, i32, i64p, i32, Device, vpp]),
        "tc_tensor_full": (i32, [i32, i64p, dbl, i32, Device, vpp]),
        "tc_tensor_fill_": (i32, [vp, dbl]),
        "tc_tensor_release": (i32, [vp]),
        "tc_tensor_to_host": (i32, [vp, i32, vp]),
        "tc_tensor_item": (i32, [vp, ctypes.POINTER(dbl)]),
        "tc_optimizer_create_adamw": (i32, [vpp, i32, ctypes.POINTER(AdamWOptions), vpp]),
        "tc_optimizer_create_adam": (i32, [vpp, i32, ctypes.POINTER(AdamWOptions), vpp]),
        "tc_optimizer_create_sgd": (i32, [vpp, i32, ctypes.POINTER(SGDOptions), vpp]),
        "tc_optimizer_destroy": (i32, [vp]),
        "tc_optimizer_step": (i32, [vp, vpp, i32]),
        "tc_optimizer_set_lr_tensor": (i32, [vp, vp]),
        "tc_optimizer_get_state": (i32, [vp, i32, i32, vpp]),
        "tc_clip_grad_norm_": (i32, [vpp, i32, dbl, dbl, b, vpp]),
        "tc_grad_scaler_create": (i32, [Device, ctypes.POINTER(ScalerOptions), vpp]),
        "tc_grad_scaler_destroy": (i32, [vp]),
        "tc_grad_scaler_unscale_": (i32, [vp, vp, vpp, i32]),
        "tc_grad_scaler_step": (i32, [vp, vp, vpp, i32]),
        "tc_grad_scaler_update": (i32, [vp]),
        "tc_grad_scaler_get_state": (i32, [vp, ctypes.POINTER(ScalerState)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


tc = None
failures = []
worst = {}


def ok(status, what):
    if status != 0:
        raise RuntimeError(f"{what}: status {status}: {tc.tc_last_error().decode()}")


def to_tc(t):
    """A tcuda CUDA tensor holding torch tensor t's values (same dtype)."""
    host = t.detach().cpu().contiguous()
    sizes = (ctypes.c_int64 * max(host.dim(), 1))(*host.shape)
    out = ctypes.c_void_p()
    ok(tc.tc_tensor_from_data(ctypes.c_void_p(host.data_ptr()), host.dim(), sizes, TC_DT[host.dtype],
                              Device(TC_CUDA, torch.cuda.current_device()), ctypes.byref(out)),
       "tc_tensor_from_data")
    return out


def from_tc(h, like):
    """A CPU torch tensor with tcuda tensor h's values, shaped and typed as `like`."""
    host = torch.empty(like.shape, dtype=like.dtype)
    ok(tc.tc_tensor_to_host(h, TC_DT[like.dtype], ctypes.c_void_p(host.data_ptr())), "tc_tensor_to_host")
    return host


def arr(handles):
    return (ctypes.c_void_p * len(handles))(*[h.value for h in handles])


def compare(what, got, want, rtol):
    """got, want: CPU tensors; |got - want| <= rtol * |want| + rtol / 10 (the
    absolute part for values that cancel to near 0). Records the largest
    relative difference."""
    g, w = got.double(), want.detach().cpu().double()
    diff = ((g - w).abs() / w.abs().clamp_min(1e-30)).nan_to_num(0.0)
    both_nan = g.isnan() & w.isnan()
    diff[both_nan] = 0.0
    big = (g - w).abs() > rtol * w.abs() + rtol / 10
    big &= ~both_nan
    worst[what] = max(worst.get(what, 0.0), float(diff.max()) if diff.numel() else 0.0)
    if bool(big.any()):
        i = int(big.flatten().nonzero()[0])
        failures.append(f"{what}: element {i}: tcuda {float(g.flatten()[i])!r} torch "
                        f"{float(w.flatten()[i])!r}")


SHAPES = [(7,), (33, 5), (1,), (1024,), (3, 4, 5)]


def make_params(dtype, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(s, generator=g).to(dtype).cuda() for s in SHAPES]


def grads_for(step, dtype, seed, scale=1.0):
    g = torch.Generator(device="cpu").manual_seed(seed * 1000 + step)
    return [(torch.randn(s, generator=g) * scale).to(dtype).cuda() for s in SHAPES]


# ---- 1 and 2: the optimizers -----------------------------------------------------------


def run_optimizer(name, dtype, make_torch, make_tc, rtol, lr_tensor=None):
    params = make_params(dtype, 1)
    tp = [p.clone().requires_grad_(True) for p in params]
    opt = make_torch(tp)
    hp = [to_tc(p) for p in params]
    o = ctypes.c_void_p()
    ok(make_tc(arr(hp), len(hp), ctypes.byref(o)), f"{name}: create")
    lr_h = None
    if lr_tensor is not None:
        lr_h = to_tc(torch.tensor(lr_tensor, dtype=torch.float32))
        ok(tc.tc_optimizer_set_lr_tensor(o, lr_h), "set_lr_tensor")
    for step in range(10):
        grads = grads_for(step, dtype, 2)
        for p, g in zip(tp, grads):
            p.grad = g.clone()
        opt.step()
        hg = [to_tc(g) for g in grads]
        ok(tc.tc_optimizer_step(o, arr(hg), len(hg)), f"{name}: step")
        for h in hg:
            tc.tc_tensor_release(h)
    for i, (h, p) in enumerate(zip(hp, tp)):
        compare(f"{name} {dtype} param", from_tc(h, p), p, rtol)
    # the first moments, where PyTorch keeps them
    st = opt.state[tp[0]]
    if "exp_avg" in st:
        s = ctypes.c_void_p()
        ok(tc.tc_optimizer_get_state(o, 0, STATE_EXP_AVG, ctypes.byref(s)), "get_state")
        compare(f"{name} {dtype} exp_avg", from_tc(s, st["exp_avg"]), st["exp_avg"], rtol)
        tc.tc_tensor_release(s)
    if "momentum_buffer" in st and st["momentum_buffer"] is not None:
        s = ctypes.c_void_p()
        ok(tc.tc_optimizer_get_state(o, 0, STATE_MOMENTUM, ctypes.byref(s)), "get_state")
        compare(f"{name} {dtype} momentum_buffer", from_tc(s, st["momentum_buffer"]),
                st["momentum_buffer"], rtol)
        tc.tc_tensor_release(s)
    tc.tc_optimizer_destroy(o)
    for h in hp:
        tc.tc_tensor_release(h)
    if lr_h is not None:
        tc.tc_tensor_release(lr_h)


def adam_opts(lr=1e-3, wd=1e-2, amsgrad=False, maximize=False):
    return AdamWOptions(lr, 0.9, 0.999, 1e-8, wd, amsgrad, maximize)


def test_optimizers():
    for dtype, rtol in ((torch.float32, 1e-6), (torch.bfloat16, 1.6e-2)):
        run_optimizer("adamw", dtype,
                      lambda ps: torch.optim.AdamW(ps, fused=True),
                      lambda a, n, o: tc.tc_optimizer_create_adamw(a, n, ctypes.byref(adam_opts()), o), rtol)
        run_optimizer("adamw amsgrad maximize", dtype,
                      lambda ps: torch.optim.AdamW(ps, lr=0.01, amsgrad=True, maximize=True, fused=True),
                      lambda a, n, o: tc.tc_optimizer_create_adamw(
                          a, n, ctypes.byref(adam_opts(0.01, amsgrad=True, maximize=True)), o), rtol)
        run_optimizer("adam L2", dtype,
                      lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=0.1, fused=True),
                      lambda a, n, o: tc.tc_optimizer_create_adam(a, n, ctypes.byref(adam_opts(0.01, 0.1)), o),
                      rtol)
    run_optimizer("adamw lr tensor", torch.float32,
                  lambda ps: torch.optim.AdamW(ps, lr=torch.tensor(0.01, device="cuda"), fused=True),
                  lambda a, n, o: tc.tc_optimizer_create_adamw(a, n, ctypes.byref(adam_opts(0.5)), o),
                  1e-6, lr_tensor=0.01)
    sgd1 = SGDOptions(0.1, 0.9, 0.1, 0.01, False, False)
    run_optimizer("sgd momentum", torch.float32,
                  lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01,
                                             foreach=True),
                  lambda a, n, o: tc.tc_optimizer_create_sgd(a, n, ctypes.byref(sgd1), o), 1e-6)
    sgd2 = SGDOptions(0.05, 0.8, 0.0, 0.0, True, True)
    run_optimizer("sgd nesterov maximize", torch.float32,
                  lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True, maximize=True,
                                             foreach=True),
                  lambda a, n, o: tc.tc_optimizer_create_sgd(a, n, ctypes.byref(sgd2), o), 1e-6)


# ---- 3: clip_grad_norm_ -------------------------------------------------------------------


def test_clip():
    for dtype, rtol in ((torch.float32, 1e-6), (torch.bfloat16, 1.6e-2)):
        for norm_type, max_norm in ((2.0, 1.0), (math.inf, 0.5), (2.0, 1e6)):
            grads = grads_for(0, dtype, 3)
            ps = [torch.zeros_like(g, requires_grad=True) for g in grads]
            for p, g in zip(ps, grads):
                p.grad = g.clone()
            want = torch.nn.utils.clip_grad_norm_(ps, max_norm, norm_type, foreach=True)
            hg = [to_tc(g) for g in grads]
            total = ctypes.c_void_p()
            ok(tc.tc_clip_grad_norm_(arr(hg), len(hg), max_norm, norm_type, False, ctypes.byref(total)),
               "tc_clip_grad_norm_")
            what = f"clip {dtype} norm {norm_type} max {max_norm}"
            compare(what + " total", from_tc(total, want), want, rtol)
            for h, p in zip(hg, ps):
                compare(what + " grad", from_tc(h, p.grad), p.grad, rtol)
                tc.tc_tensor_release(h)
            tc.tc_tensor_release(total)


# ---- 4: GradScaler -------------------------------------------------------------------------


def test_scaler():
    params = make_params(torch.float32, 4)
    tp = [p.clone().requires_grad_(True) for p in params]
    opt = torch.optim.AdamW(tp, fused=True)
    scaler = torch.amp.GradScaler("cuda", init_scale=1024.0, growth_interval=3)
    hp = [to_tc(p) for p in params]
    o, s = ctypes.c_void_p(), ctypes.c_void_p()
    ok(tc.tc_optimizer_create_adamw(arr(hp), len(hp), ctypes.byref(adam_opts()), ctypes.byref(o)), "create")
    so = ScalerOptions(1024.0, 2.0, 0.5, 3, True)
    ok(tc.tc_grad_scaler_create(Device(TC_CUDA, torch.cuda.current_device()), ctypes.byref(so),
                                ctypes.byref(s)), "tc_grad_scaler_create")
    for step in range(10):
        scaler.scale(torch.ones((), device="cuda"))  # the loss scaling that starts torch's scaler
        scale = scaler.get_scale()
        grads = grads_for(step, torch.float32, 5, scale)
        if step == 4:
            grads[1][0, 0] = math.inf
        for p, g in zip(tp, grads):
            p.grad = g.clone()
        hg = [to_tc(g) for g in grads]
        if step % 2:
            scaler.unscale_(opt)
            ok(tc.tc_grad_scaler_unscale_(s, o, arr(hg), len(hg)), "unscale_")
        scaler.step(opt)
        scaler.update()
        ok(tc.tc_grad_scaler_step(s, o, arr(hg), len(hg)), "step")
        ok(tc.tc_grad_scaler_update(s), "update")
        st = ScalerState()
        ok(tc.tc_grad_scaler_get_state(s, ctypes.byref(st)), "get_state")
        want = scaler.state_dict()
        if st.scale != want["scale"] or st.growth_tracker != want["_growth_tracker"]:
            failures.append(f"scaler step {step}: tcuda scale {st.scale} tracker {st.growth_tracker}, "
                            f"torch {want['scale']} {want['_growth_tracker']}")
        for h in hg:
            tc.tc_tensor_release(h)
    for h, p in zip(hp, tp):
        compare("scaler adamw param", from_tc(h, p), p, 1e-6)
    tc.tc_grad_scaler_destroy(s)
    tc.tc_optimizer_destroy(o)
    for h in hp:
        tc.tc_tensor_release(h)


def main():
    global tc
    tc = load_tcuda()
    try:
        test_optimizers()
        test_clip()
        test_scaler()
    except Exception as e:  # a tcuda call failed
        failures.append(str(e))
    for what, w in sorted(worst.items()):
        print(f"  {what}: largest relative difference {w:.3g}")
    if failures:
        print(f"FAIL optim_torch: {len(failures)} mismatches; first: {failures[0]}")
        return 1
    print(f"PASS optim_torch: {len(worst)} comparisons (AdamW, Adam, SGD, clip_grad_norm_, GradScaler)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
