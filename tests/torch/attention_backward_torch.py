#!/usr/bin/env python3
"""tc_nn_scaled_dot_product_attention_backward against torch.autograd, on a GPU.

Runs on the GPU machine against a CUDA build's libtcuda.so (ctypes; no
compiled glue):

    python3 tests/torch/attention_backward_torch.py [path/to/libtcuda.so]   # or TCUDA_LIB=...

For every dtype (float16, bfloat16, float32, float64), causal and not, L == S,
L < S and L > S, scale given and None, dense [B, H, L, E] operands and head
views (the transpose(1, 2) of [B, L, H, E] memory): the same inputs (rounded
to the dtype once, on the CPU) go through
torch.nn.functional.scaled_dot_product_attention + backward(grad_out) on the
GPU (torch's own choice of kernel) and through tcuda's backward on the GPU.

Tolerances:
- float64: tcuda against torch in the same dtype with
  torch.testing.assert_close's defaults (rtol 1e-7, atol 1e-7).
- float32, float16 and bfloat16, as PyTorch's own SDPA tests judge fused
  kernels: both are measured against torch's float64 gradients on the same
  rounded inputs; tcuda's must be within rtol = the default (float32 1.3e-6,
  float16 1e-3, bfloat16 1.6e-2) and atol = max(the default 1e-5, 4 * the
  largest error of torch's own gradients in that dtype). (float32 was once
  held to torch's float32 result directly; the fused float32 kernel sums in
  another order than torch's, and a few of 32,768 elements then differed by
  a little more than 1e-5.) tcuda's largest difference from torch's result
  in the same dtype is printed beside it.

The training pair runs too: tc_nn_scaled_dot_product_attention_lse (its out
and lse against torch's float64 SDPA and logsumexp of the scaled, masked
scores on the same rounded inputs: float32 and float64 within rtol 1e-5,
atol 1e-5; 16-bit out within the dtype's rounding, 2 ** -7 of the largest
value, lse within 1e-4 as it is float32) and
tc_nn_scaled_dot_product_attention_backward_lse from them, its gradients held
to the same tolerances as the plain backward's.

Prints one last line, "PASS attention_backward_torch: ..." or
"FAIL attention_backward_torch: ...", and exits 0 / 1 (77 with "SKIP" when
torch or a GPU is missing)."""
import ctypes
import os
import sys
import zlib

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIP attention_backward_torch: no torch")
    sys.exit(77)

# ---- the tcuda ABI (include/tcuda/tensor.h, nn_backward.h) ------------------------------
TC_CUDA = 1
TC_DTYPES = {torch.float16: 6, torch.bfloat16: 7, torch.float32: 8, torch.float64: 9}
DEFAULT_TOL = {  # torch.testing.assert_close's defaults (rtol, atol)
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}
FUDGE = 4.0


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int)]


def load_tcuda():
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TCUDA_LIB", "build/libtcuda.so")
    lib = ctypes.CDLL(path)
    vp, i32, i64p = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)
    vpp = ctypes.POINTER(vp)
    sigs = {
        "tc_last_error": (ctypes.c_char_p, []),
        "tc_is_available": (ctypes.c_bool, []),
        "tc_synchronize": (i32, [i32]),
        "tc_tensor_from_data": (i32, [vp, i32, i64p, i32, Device, vpp]),
        "tc_tensor_transpose": (i32, [vp, i32, i32, vpp]),
        "tc_tensor_release": (i32, [vp]),
        "tc_tensor_ndim": (i32, [vp]),
        "tc_tensor_size": (ctypes.c_int64, [vp, i32]),
        "tc_tensor_to_host": (i32, [vp, i32, vp]),
        "tc_nn_scaled_dot_product_attention_backward": (
            i32,
            [vp, vp, vp, vp, ctypes.c_bool, ctypes.POINTER(ctypes.c_double), vpp, vpp, vpp],
        ),
        "tc_nn_scaled_dot_product_attention_lse": (
            i32, [vp, vp, vp, ctypes.c_bool, ctypes.POINTER(ctypes.c_double), vpp, vpp],
        ),
        "tc_nn_scaled_dot_product_attention_backward_lse": (
            i32,
            [vp, vp, vp, vp, vp, vp, ctypes.c_bool, ctypes.POINTER(ctypes.c_double), vpp, vpp,
             vpp],
        ),
        "tc_tensor_dtype": (i32, [vp]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


tc = None


def ok(status, what):
    if status != 0:
        raise RuntimeError(f"{what}: status {status}: {tc.tc_last_error().decode()}")


def to_tc(t, head_view):
    """A tcuda GPU tensor with t's values (t a CPU tensor [B, H, rows, cols]);
    with head_view, the transpose(1, 2) of a [B, rows, H, cols] tensor."""
    src = (t.transpose(1, 2) if head_view else t).contiguous()
    sizes = (ctypes.c_int64 * src.dim())(*src.shape)
    out = ctypes.c_void_p()
    ok(tc.tc_tensor_from_data(ctypes.c_void_p(src.data_ptr()), src.dim(), sizes,
                              TC_DTYPES[t.dtype], Device(TC_CUDA, 0), ctypes.byref(out)),
       "tc_tensor_from_data")
    if not head_view:
        return out
    view = ctypes.c_void_p()
    st = tc.tc_tensor_transpose(out, 1, 2, ctypes.byref(view))
    tc.tc_tensor_release(out)
    ok(st, "tc_tensor_transpose")
    return view


def from_tc(h, dtype):
    """A tcuda tensor's values as a CPU torch tensor of dtype."""
    shape = [tc.tc_tensor_size(h, i) for i in range(tc.tc_tensor_ndim(h))]
    out = torch.empty(shape, dtype=dtype)
    ok(tc.tc_tensor_to_host(h, TC_DTYPES[dtype], ctypes.c_void_p(out.data_ptr())),
       "tc_tensor_to_host")
    return out


def torch_grads(q, k, v, go, causal, scale, dtype):
    """(dq, dk, dv) of torch's SDPA in dtype on the GPU, as CPU float64."""
    ins = [x.to("cuda", dtype).requires_grad_() for x in (q, k, v)]
    out = F.scaled_dot_product_attention(*ins, is_causal=causal, scale=scale)
    out.backward(go.to("cuda", dtype))
    return [x.grad.double().cpu() for x in ins]


def tcuda_grads(q, k, v, go, causal, scale, head_view):
    """(dq, dk, dv) of tcuda's backward on the GPU (q, k, v, go CPU tensors
    of the dtype), as CPU tensors of that dtype."""
    hs = [to_tc(x, head_view) for x in (go, q, k, v)]
    outs = [ctypes.c_void_p() for _ in range(3)]
    sc = ctypes.byref(ctypes.c_double(scale)) if scale is not None else None
    try:
        ok(tc.tc_nn_scaled_dot_product_attention_backward(
            hs[0], hs[1], hs[2], hs[3], causal, sc, *[ctypes.byref(o) for o in outs]),
           "tc_nn_scaled_dot_product_attention_backward")
        ok(tc.tc_synchronize(-1), "tc_synchronize")
        return [from_tc(o, q.dtype) for o in outs]
    finally:
        for h in hs + outs:
            if h:
                tc.tc_tensor_release(h)


def tcuda_pair(q, k, v, go, causal, scale, head_view):
    """The training pair on the GPU: (out, lse) of
    tc_nn_scaled_dot_product_attention_lse and (dq, dk, dv) of
    tc_nn_scaled_dot_product_attention_backward_lse from them, as CPU
    tensors (out and the gradients of q's dtype, lse float64)."""
    hs = [to_tc(x, head_view) for x in (go, q, k, v)]
    out, lse = ctypes.c_void_p(), ctypes.c_void_p()
    grads = [ctypes.c_void_p() for _ in range(3)]
    sc = ctypes.byref(ctypes.c_double(scale)) if scale is not None else None
    try:
        ok(tc.tc_nn_scaled_dot_product_attention_lse(hs[1], hs[2], hs[3], causal, sc,
                                                     ctypes.byref(out), ctypes.byref(lse)),
           "tc_nn_scaled_dot_product_attention_lse")
        ok(tc.tc_nn_scaled_dot_product_attention_backward_lse(
            hs[0], hs[1], hs[2], hs[3], out, lse, causal, sc, *[ctypes.byref(g) for g in grads]),
           "tc_nn_scaled_dot_product_attention_backward_lse")
        ok(tc.tc_synchronize(-1), "tc_synchronize")
        lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        if tc.tc_tensor_dtype(lse) != TC_DTYPES[lse_dtype]:
            raise RuntimeError(f"lse is tcuda dtype {tc.tc_tensor_dtype(lse)}, not {lse_dtype}")
        return (from_tc(out, q.dtype), from_tc(lse, lse_dtype).double(),
                [from_tc(g, q.dtype) for g in grads])
    finally:
        for h in hs + grads + [out, lse]:
            if h:
                tc.tc_tensor_release(h)


def torch_forward64(q, k, v, causal, scale):
    """torch's SDPA output and each row's logsumexp of the scaled, masked
    scores, in float64 on the CPU."""
    q, k, v = q.double(), k.double(), v.double()
    sc = scale if scale is not None else q.shape[-1] ** -0.5
    scores = (q @ k.transpose(-2, -1)) * sc
    if causal:  # top-left aligned: query i sees keys j <= i
        l, s = scores.shape[-2:]
        mask = torch.ones(l, s, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                          scale=scale), torch.logsumexp(scores, -1)


def check_grads(name, dtype, ours, theirs, truth, failures):
    """ours against theirs (float64) or against truth (float64 gradients; the
    other dtypes) within the module docstring's tolerances; the largest
    |ours - theirs|."""
    rtol, atol = DEFAULT_TOL[dtype]
    worst = 0.0
    for which, a, t in zip(("dq", "dk", "dv"), ours, theirs):
        a = a.double()
        worst = max(worst, (a - t).abs().max().item())
        if dtype == torch.float64:
            try:
                torch.testing.assert_close(a, t, rtol=rtol, atol=atol)
            except AssertionError as err:
                failures.append(f"{name} {which}: {str(err).splitlines()[0:3]}")
    if dtype != torch.float64:
        for which, a, t, ref in zip(("dq", "dk", "dv"), ours, theirs, truth):
            torch_err = (t - ref).abs().max().item()
            tol_a = max(atol, FUDGE * torch_err)
            try:
                torch.testing.assert_close(a.double(), ref, rtol=rtol, atol=tol_a)
            except AssertionError as err:
                failures.append(f"{name} {which} (atol {tol_a:.3g}, torch's own error "
                                f"{torch_err:.3g}): {str(err).splitlines()[0:3]}")
    return worst


def check_pair(name, dtype, q, k, v, go, causal, scale, head_view, theirs, truth, failures):
    """The training pair against torch: out and lse, then the gradients."""
    out, lse, grads = tcuda_pair(q, k, v, go, causal, scale, head_view)
    out_ref, lse_ref = torch_forward64(q, k, v, causal, scale)
    if dtype in (torch.float32, torch.float64):
        out_tol = (1e-5, 1e-5)
    else:
        out_tol = (0.0, 2.0 ** -7 * out_ref.abs().max().item() + 1e-5)
    lse_tol = (1e-5, 1e-5) if dtype == torch.float64 else (1e-5, 1e-4)
    for which, a, t, (rtol, atol) in (("out", out.double(), out_ref, out_tol),
                                      ("lse", lse, lse_ref, lse_tol)):
        try:
            torch.testing.assert_close(a, t, rtol=rtol, atol=atol)
        except AssertionError as err:
            failures.append(f"{name} lse pair {which}: {str(err).splitlines()[0:3]}")
    worst = check_grads(name + " lse pair", dtype, grads, theirs, truth, failures)
    print(f"{name}: lse pair, largest |tcuda - torch| {worst:.3g}")


def check_case(dtype, b, h, l, s, e, ev, causal, scale, head_view, failures):
    name = (f"{str(dtype).split('.')[-1]} B={b} H={h} L={l} S={s} E={e} Ev={ev}"
            f"{' causal' if causal else ''}{' scale=' + str(scale) if scale else ''}"
            f"{' head-view' if head_view else ''}")
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    q, k, v, go = (torch.randn(b, h, n, d, generator=g, dtype=torch.float64).to(dtype)
                   for n, d in ((l, e), (s, e), (s, ev), (l, ev)))
    ours = tcuda_grads(q, k, v, go, causal, scale, head_view)
    theirs = torch_grads(q, k, v, go, causal, scale, dtype)
    truth = None
    if dtype != torch.float64:
        truth = torch_grads(q, k, v, go, causal, scale, torch.float64)
        for which, t, ref in zip(("dq", "dk", "dv"), theirs, truth):
            torch_err = (t - ref).abs().max().item()
            if torch_err > 0.05 * ref.abs().max().item() + 1e-3:  # the bound would mean little
                print(f"note: {name} {which}: torch's own {dtype} error {torch_err:.3g} is large "
                      "(another kernel or causal alignment?)")
    worst = check_grads(name, dtype, ours, theirs, truth, failures)
    print(f"{name}: largest |tcuda - torch| {worst:.3g}")
    check_pair(name, dtype, q, k, v, go, causal, scale, head_view, theirs, truth, failures)


def main():
    global tc
    if not torch.cuda.is_available():
        print("SKIP attention_backward_torch: no GPU")
        return 77
    tc = load_tcuda()
    if not tc.tc_is_available():
        print("SKIP attention_backward_torch: tcuda sees no GPU")
        return 77
    # the last two: float16 and bfloat16 on the backward's tensor core path with
    # head sizes 64 and 128, lengths off its 64-row blocks and 32- or 64-row steps
    shapes = [(2, 3, 64, 64, 32, 32), (2, 2, 37, 53, 16, 24), (1, 2, 50, 20, 16, 16),
              (1, 4, 128, 128, 64, 64), (1, 2, 130, 97, 128, 128), (2, 2, 200, 200, 64, 64)]
    failures = []
    count = 0
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        for (b, h, l, s, e, ev) in shapes:
            for causal in (False, True):
                for scale in (None, 0.3):
                    for head_view in (False, True):
                        if head_view and ev != e:
                            continue
                        check_case(dtype, b, h, l, s, e, ev, causal, scale, head_view, failures)
                        count += 1
    for f in failures[:20]:
        print("  " + f)
    if failures:
        print(f"FAIL attention_backward_torch: {len(failures)} of {count * 8} results off "
              "(dq, dk, dv twice; out and lse)")
        return 1
    print(f"PASS attention_backward_torch: {count} cases x dq, dk, dv, every dtype, "
          "causal and not, head views, the lse pair too")
    return 0


if __name__ == "__main__":
    sys.exit(main())
