#!/usr/bin/env python3
"""tcuda's checkpoints (include/tcuda/checkpoint.h) against PyTorch, on a GPU.

Runs on the GPU machine against a CUDA build's libtcuda.so (ctypes; no
compiled glue; the file is read and written here with a few lines of
Python, so the `safetensors` package is not needed):

    python3 tests/torch/checkpoint_torch.py [path/to/libtcuda.so]   # or TCUDA_LIB=...

For float32, bfloat16, float16 and float64 parameters on the GPU:

1. tcuda -> PyTorch: tcuda's fused AdamW (amsgrad) takes 3 steps on given
   gradients and tc_checkpoint_save writes the file. Every parameter and
   every state tensor in the file must equal tcuda's live tensor bit for bit
   (the file is read here, not by tcuda). Then torch.optim.AdamW(fused=True)
   gets the parameters and the state (step, exp_avg, exp_avg_sq,
   max_exp_avg_sq) from the file, and the options from its metadata, and
   both take 2 more steps on the same gradients: equal within the
   tolerance of optim_torch.py (1e-6 relative for float32 and float64;
   about 4 ulps, 1.6e-2, for the 16-bit dtypes; tcuda's fused kernels
   follow PyTorch's operation by operation, so most are bit-equal).
2. PyTorch -> tcuda: torch's fused AdamW takes 3 steps; this script writes
   its state_dict in the checkpoint's layout (names, metadata) and
   tc_checkpoint_load reads it into fresh tcuda objects, whose tensors must
   then equal torch's bit for bit; 2 more steps on both: within tolerance.

Prints one line, "PASS checkpoint_torch: ..." or "FAIL checkpoint_torch: ...",
and exits 0 / 1 (77 with "SKIP" when torch or a GPU is missing)."""
import ctypes
import json
import os
import struct
import sys
import tempfile

try:
    import torch
except ImportError:
    print("SKIP checkpoint_torch: no torch")
    sys.exit(77)

if not torch.cuda.is_available():
    print("SKIP checkpoint_torch: no GPU")
    sys.exit(77)

# ---- the tcuda ABI (include/tcuda/tensor.h, optim.h, checkpoint.h) ---------------------
TC_CPU, TC_CUDA = 0, 1
TC_DT = {torch.float16: 6, torch.bfloat16: 7, torch.float32: 8, torch.float64: 9}
ST_DT = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32,
         "F64": torch.float64, "U8": torch.uint8}
DT_ST = {v: k for k, v in ST_DT.items()}
STATE_STEP, STATE_EXP_AVG, STATE_EXP_AVG_SQ, STATE_MAX_EXP_AVG_SQ = range(4)
STATES = [(STATE_STEP, "step"), (STATE_EXP_AVG, "exp_avg"), (STATE_EXP_AVG_SQ, "exp_avg_sq"),
          (STATE_MAX_EXP_AVG_SQ, "max_exp_avg_sq")]


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int)]


class AdamWOptions(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_double), ("beta1", ctypes.c_double), ("beta2", ctypes.c_double),
                ("eps", ctypes.c_double), ("weight_decay", ctypes.c_double),
                ("amsgrad", ctypes.c_bool), ("maximize", ctypes.c_bool)]


class Checkpoint(ctypes.Structure):
    _fields_ = [("names", ctypes.POINTER(ctypes.c_char_p)), ("params", ctypes.POINTER(ctypes.c_void_p)),
                ("n", ctypes.c_int), ("optimizer", ctypes.c_void_p),
                ("optimizers", ctypes.POINTER(ctypes.c_void_p)), ("n_optimizers", ctypes.c_int),
                ("scaler", ctypes.c_void_p),
                ("rng", ctypes.c_bool), ("step", ctypes.c_int64),
                ("metadata", ctypes.POINTER(ctypes.c_char_p))]


def load_tcuda():
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TCUDA_LIB", "build/libtcuda.so")
    lib = ctypes.CDLL(path)
    vp, i32 = ctypes.c_void_p, ctypes.c_int
    i64p, vpp = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_void_p)
    ckp = ctypes.POINTER(Checkpoint)
    sigs = {
        "tc_last_error": (ctypes.c_char_p, []),
        "tc_tensor_from_data": (i32, [vp, i32, i64p, i32, Device, vpp]),
        "tc_tensor_release": (i32, [vp]),
        "tc_tensor_to_host": (i32, [vp, i32, vp]),
        "tc_optimizer_create_adamw": (i32, [vpp, i32, ctypes.POINTER(AdamWOptions), vpp]),
        "tc_optimizer_destroy": (i32, [vp]),
        "tc_optimizer_step": (i32, [vp, vpp, i32]),
        "tc_optimizer_get_state": (i32, [vp, i32, i32, vpp]),
        "tc_checkpoint_save": (i32, [ctypes.c_char_p, ckp]),
        "tc_checkpoint_load": (i32, [ctypes.c_char_p, ckp]),
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
    host = t.detach().cpu().contiguous()
    sizes = (ctypes.c_int64 * max(host.dim(), 1))(*host.shape)
    out = ctypes.c_void_p()
    ok(tc.tc_tensor_from_data(ctypes.c_void_p(host.data_ptr()), host.dim(), sizes, TC_DT[host.dtype],
                              Device(TC_CUDA, torch.cuda.current_device()), ctypes.byref(out)),
       "tc_tensor_from_data")
    return out


def from_tc(h, shape, dtype):
    host = torch.empty(shape, dtype=dtype)
    ok(tc.tc_tensor_to_host(h, TC_DT[dtype], ctypes.c_void_p(host.data_ptr())), "tc_tensor_to_host")
    return host


def arr(handles):
    return (ctypes.c_void_p * len(handles))(*[h.value for h in handles])


def tc_state(opt, i, which, shape, dtype):
    h = ctypes.c_void_p()
    ok(tc.tc_optimizer_get_state(opt, i, which, ctypes.byref(h)), "get_state")
    t = from_tc(h, () if which == STATE_STEP else shape, torch.float32 if which == STATE_STEP else dtype)
    tc.tc_tensor_release(h)
    return t


# ---- safetensors, read and written here ------------------------------------------------


def read_file(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(body[b:e]), dtype=ST_DT[info["dtype"]]) if e > b else \
            torch.empty(0, dtype=ST_DT[info["dtype"]])
        tensors[name] = t.reshape(info["shape"])
    return tensors, meta


def write_file(path, tensors, meta):
    header, blobs, at = {"__metadata__": meta}, [], 0
    for name, t in tensors.items():
        raw = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": DT_ST[t.dtype], "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ---- comparisons -----------------------------------------------------------------------


def same(what, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or \
            not torch.equal(got.reshape(-1).view(torch.uint8), want.cpu().reshape(-1).view(torch.uint8)):
        failures.append(f"{what}: not bit-equal ({got.dtype} {tuple(got.shape)} vs "
                        f"{want.dtype} {tuple(want.shape)})")


def close(what, got, want, rtol):
    g, w = got.double(), want.detach().cpu().double()
    diff = ((g - w).abs() / w.abs().clamp_min(1e-30)).nan_to_num(0.0)
    worst[what] = max(worst.get(what, 0.0), float(diff.max()) if diff.numel() else 0.0)
    big = (g - w).abs() > rtol * w.abs() + rtol / 10
    if bool(big.any()):
        i = int(big.flatten().nonzero()[0])
        failures.append(f"{what}: element {i}: tcuda {float(g.flatten()[i])!r} torch "
                        f"{float(w.flatten()[i])!r}")


SHAPES = [(7,), (33, 5), (3, 4, 5)]
NAMES = ["wte.weight", "h.0.mlp.c_fc.weight", "h.0.attn.bias"]
LR, BETAS, EPS, WD = 2e-3, (0.9, 0.95), 1e-8, 0.1


def grads(step, dtype):
    g = torch.Generator(device="cpu").manual_seed(1000 + step)
    return [torch.randn(s, generator=g).to(dtype).cuda() for s in SHAPES]


def torch_adamw(params):
    return torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, amsgrad=True,
                             fused=True)


def tc_adamw(handles):
    o = AdamWOptions(LR, BETAS[0], BETAS[1], EPS, WD, True, False)
    opt = ctypes.c_void_p()
    ok(tc.tc_optimizer_create_adamw(arr(handles), len(handles), ctypes.byref(o), ctypes.byref(opt)),
       "create_adamw")
    return opt


def tc_step(opt, step, dtype):
    hg = [to_tc(g) for g in grads(step, dtype)]
    ok(tc.tc_optimizer_step(opt, arr(hg), len(hg)), "step")
    for h in hg:
        tc.tc_tensor_release(h)


def torch_step(opt, params, step, dtype):
    for p, g in zip(params, grads(step, dtype)):
        p.grad = g.clone()
    opt.step()


def checkpoint(handles, opt, step):
    """A tc_checkpoint, and the arrays it points into (keep them alive)."""
    names = (ctypes.c_char_p * len(NAMES))(*[n.encode() for n in NAMES])
    params = arr(handles)
    ck = Checkpoint(names=ctypes.cast(names, ctypes.POINTER(ctypes.c_char_p)),
                    params=ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p)), n=len(handles),
                    optimizer=opt, step=step)
    return ck, (names, params)


def resume_both(tag, topt, tp, opt, hp, dtype, rtol):
    """Steps 3 and 4 on both sides from the same state, the parameters then
    compared; tcuda's optimizer and parameters released."""
    for step in (3, 4):
        torch_step(topt, tp, step, dtype)
        tc_step(opt, step, dtype)
    for i, (name, shape) in enumerate(zip(NAMES, SHAPES)):
        close(f"{tag} resumed {name}", from_tc(hp[i], shape, dtype), tp[i], rtol)
    ok(tc.tc_optimizer_destroy(opt), "destroy")
    for h in hp:
        tc.tc_tensor_release(h)


def tcuda_to_torch(dtype, rtol, path):
    g = torch.Generator(device="cpu").manual_seed(5)
    init = [torch.randn(s, generator=g).to(dtype) for s in SHAPES]
    hp = [to_tc(p) for p in init]
    opt = tc_adamw(hp)
    for step in range(3):
        tc_step(opt, step, dtype)
    ck, _keep = checkpoint(hp, opt, 3)
    ok(tc.tc_checkpoint_save(path.encode(), ctypes.byref(ck)), "tc_checkpoint_save")
    tensors, meta = read_file(path)
    tag = f"tcuda->torch {dtype}"
    if meta.get("tcuda.step") != "3" or meta.get("tcuda.optimizer.kind") != "adamw":
        failures.append(f"{tag}: metadata {meta}")
    for i, (name, shape) in enumerate(zip(NAMES, SHAPES)):
        same(f"{tag} {name}", tensors[name], from_tc(hp[i], shape, dtype))
        for which, key in STATES:
            same(f"{tag} {name}.{key}", tensors[f"optimizer.{name}.{key}"],
                 tc_state(opt, i, which, shape, dtype))
    # PyTorch resumes from the file
    tp = [tensors[n].clone().cuda().requires_grad_(True) for n in NAMES]
    topt = torch.optim.AdamW(tp, lr=float(meta["tcuda.optimizer.lr"]),
                             betas=(float(meta["tcuda.optimizer.beta1"]), float(meta["tcuda.optimizer.beta2"])),
                             eps=float(meta["tcuda.optimizer.eps"]),
                             weight_decay=float(meta["tcuda.optimizer.weight_decay"]),
                             amsgrad=meta["tcuda.optimizer.amsgrad"] == "true", fused=True)
    sd = topt.state_dict()
    sd["state"] = {i: {key: tensors[f"optimizer.{n}.{key}"].clone().cuda() for _, key in STATES}
                   for i, n in enumerate(NAMES)}
    topt.load_state_dict(sd)
    resume_both(tag, topt, tp, opt, hp, dtype, rtol)


def torch_to_tcuda(dtype, rtol, path):
    g = torch.Generator(device="cpu").manual_seed(6)
    tp = [torch.randn(s, generator=g).to(dtype).cuda().requires_grad_(True) for s in SHAPES]
    topt = torch_adamw(tp)
    for step in range(3):
        torch_step(topt, tp, step, dtype)
    tensors = {n: p.detach() for n, p in zip(NAMES, tp)}
    for i, n in enumerate(NAMES):
        st = topt.state[tp[i]]
        for _, key in STATES:
            tensors[f"optimizer.{n}.{key}"] = st[key].detach().float() if key == "step" else st[key].detach()
    meta = {"format": "pt", "tcuda.checkpoint": "1", "tcuda.step": "3",
            "tcuda.optimizer.kind": "adamw", "tcuda.optimizer.lr": repr(LR),
            "tcuda.optimizer.beta1": repr(BETAS[0]), "tcuda.optimizer.beta2": repr(BETAS[1]),
            "tcuda.optimizer.eps": repr(EPS), "tcuda.optimizer.weight_decay": repr(WD),
            "tcuda.optimizer.amsgrad": "true", "tcuda.optimizer.maximize": "false"}
    write_file(path, tensors, meta)
    hp = [to_tc(torch.zeros(s, dtype=dtype)) for s in SHAPES]
    opt = tc_adamw(hp)
    ck, _keep = checkpoint(hp, opt, 0)
    ok(tc.tc_checkpoint_load(path.encode(), ctypes.byref(ck)), "tc_checkpoint_load")
    tag = f"torch->tcuda {dtype}"
    if ck.step != 3:
        failures.append(f"{tag}: step {ck.step}")
    for i, (name, shape) in enumerate(zip(NAMES, SHAPES)):
        same(f"{tag} {name}", from_tc(hp[i], shape, dtype), tensors[name])
        for which, key in STATES:
            same(f"{tag} {name}.{key}", tc_state(opt, i, which, shape, dtype),
                 tensors[f"optimizer.{name}.{key}"])
    resume_both(tag, topt, tp, opt, hp, dtype, rtol)


def main():
    global tc
    tc = load_tcuda()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ckpt.safetensors")
        for dtype, rtol in ((torch.float32, 1e-6), (torch.float64, 1e-6), (torch.bfloat16, 1.6e-2),
                            (torch.float16, 1.6e-2)):
            try:
                tcuda_to_torch(dtype, rtol, path)
                torch_to_tcuda(dtype, rtol, path)
            except Exception as e:  # a failed call: report it, go on with the next dtype
                failures.append(f"{dtype}: {e}")
    largest = max(worst.values()) if worst else 0.0
    if failures:
        print("\n".join(failures[:20]))
        print(f"FAIL checkpoint_torch: {len(failures)} mismatches (first: {failures[0]})")
        return 1
    print(f"PASS checkpoint_torch: 4 dtypes both ways bit-equal in the file; resumed steps within "
          f"tolerance (largest relative difference {largest:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
