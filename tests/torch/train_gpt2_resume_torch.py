#!/usr/bin/env python3
"""examples/train_gpt2 --resume against PyTorch resuming from the same checkpoint, on a GPU.

    python3 tests/torch/train_gpt2_resume_torch.py [--exe build-gpu/examples/train_gpt2]
        [--layers 4 --width 256 --heads 4 --vocab 512 --seq 128 --batch 4]
        [--steps 10 --cut 5] [--lr 3e-4 --warmup 2 --min-lr-frac 0.1 --weight-decay 0.1]
        [--workdir DIR]

(--exe defaults to $TRAIN_GPT2, else build-gpu/examples/train_gpt2.)

1. Tokens and initial weights as tests/torch/train_gpt2_torch.py makes them
   (its helpers, imported).
2. train_gpt2 --init init.safetensors --steps N --stop-after K --checkpoint C:
   a run cut after step K of an N-step schedule; then a new process with
   --resume C (rest.log), and one run of N steps in one go (whole.log), both
   --deterministic: rest's log lines are whole's steps K+1..N, byte for byte.
3. PyTorch reads C as a PyTorch user would: the parameters (Hugging Face's
   names and layout) into GPT-2, and torch.optim.AdamW(fused=True) with the
   two groups (weight decay on the 2-d parameters, as train_gpt2), each
   parameter's state from C: "optimizer.<name>.step / .exp_avg / .exp_avg_sq"
   for the group with decay, "optimizer1.<name>..." for the other (the
   Conv1D weights' state transposed: train_gpt2 keeps those weights as
   [out, in]). It trains steps K+1..N on the batches from where the loader
   stands after K steps, with the same schedule: each step's loss within
   1e-5 relative of tcuda's resumed one (float32, TF32 off).
4. C's metadata: "tcuda.step" K, "tcuda.optimizers" 2, each group's weight
   decay; every "optimizer*.step" tensor K.
5. bfloat16: the resumed run's log lines are the whole run's, byte for byte.

Last line "PASS train_gpt2_resume_torch: ..." or "FAIL train_gpt2_resume_torch: ...",
exit 0 / 1; 77 with "SKIP" when torch or a GPU is missing."""
import json
import os
import struct
import subprocess
import sys
import tempfile

NAME = "train_gpt2_resume_torch"
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print(f"SKIP {NAME}: no torch")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_gpt2_torch as base  # noqa: E402  (its model, tokens and loader)

CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def read_checkpoint(path):
    """The float32 tensors (on the GPU) and the metadata of a safetensors file."""
    import numpy as np
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for k, v in header.items():
        if v["dtype"] != "F32":
            continue  # the random states (U8)
        a, b = v["data_offsets"]
        arr = np.frombuffer(data[8 + n + a:8 + n + b], dtype=np.float32).copy()
        out[k] = torch.from_numpy(arr).view(v["shape"]).cuda()
    return out, meta


def run(a, name, extra):
    log = os.path.join(a.workdir, f"{name}.log")
    cmd = [a.exe, "--init", a.init, "--train", a.train, "--device", "cuda", "--deterministic",
           "--batch", str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps),
           "--lr", repr(a.lr), "--warmup", str(a.warmup), "--min-lr-frac", repr(a.min_lr_frac),
           "--weight-decay", repr(a.weight_decay), "--log", log] + extra
    base.run_logged(cmd, a.workdir, name)
    return open(log).read().splitlines()


def torch_resume(a, ck):
    """Steps cut+1..steps in PyTorch from the checkpoint's tensors: the losses."""
    model, _ = base.make_model(a)
    params = base.hf_params(model)
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(ck[n])
    decay = [n for n, p in params.items() if p.dim() >= 2]
    no_decay = [n for n, p in params.items() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": [params[n] for n in decay],
                              "weight_decay": a.weight_decay},
                             {"params": [params[n] for n in no_decay], "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    for prefix, names in (("optimizer.", decay), ("optimizer1.", no_decay)):
        for n in names:
            p = params[n]
            st = {k: ck[f"{prefix}{n}.{k}"].clone() for k in ("step", "exp_avg", "exp_avg_sq")}
            if n.endswith(CONV1D):  # train_gpt2's [out, in] to Conv1D's [in, out]
                st["exp_avg"] = st["exp_avg"].t().contiguous()
                st["exp_avg_sq"] = st["exp_avg_sq"].t().contiguous()
            assert st["exp_avg"].shape == p.shape, (n, st["exp_avg"].shape, p.shape)
            opt.state[p] = st
    loader = base.Loader(a.tokens, a.batch, a.seq)
    for _ in range(a.cut):  # where the loader stands after `cut` steps
        loader.next()
    losses = []
    for s in range(a.cut, a.steps):
        x, y = loader.next()
        loss = F.cross_entropy(model(x).float().view(-1, a.vocab), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        for g in opt.param_groups:
            g["lr"] = base.lr_at(a, s)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def check_metadata(a, ck, meta, failures):
    want = {"tcuda.step": str(a.cut), "tcuda.optimizers": "2"}
    for k, v in want.items():
        if meta.get(k) != v:
            failures.append(f"metadata {k} is {meta.get(k)!r}, want {v!r}")
    wd = (meta.get("tcuda.optimizer.weight_decay"), meta.get("tcuda.optimizer1.weight_decay"))
    if wd[0] is None or float(wd[0]) != a.weight_decay or wd[1] is None or float(wd[1]) != 0:
        failures.append(f"the groups' weight decays are {wd}, want ({a.weight_decay}, 0)")
    steps = {k: v.item() for k, v in ck.items() if k.startswith("optimizer") and
             k.endswith(".step")}
    if not steps or any(v != a.cut for v in steps.values()):
        failures.append(f"optimizer step counts {sorted(set(steps.values()))}, want {a.cut}")


def same_tail(whole, rest, cut, what, failures):
    if whole[cut:] != rest:
        failures.append(f"{what}: the resumed log lines differ from the whole run's "
                        f"{whole[cut:]} vs {rest}")


def main():
    ap = base.run_args(__doc__.split("\n")[0], 10)
    ap.add_argument("--cut", type=int, default=5)
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(f"SKIP {NAME}: no GPU")
        return 77
    if not os.access(a.exe, os.X_OK):
        print(f"FAIL {NAME}: no program at {a.exe} (--exe or TRAIN_GPT2)")
        return 1
    if not 0 < a.cut < a.steps:
        print(f"FAIL {NAME}: --cut must be in 1..--steps-1")
        return 1
    a.workdir = a.workdir or tempfile.mkdtemp(prefix=f"{NAME}.")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    a.tokens = base.make_tokens(max(a.steps * a.batch * a.seq + 1, 50000), a.vocab, a.seed)
    a.train = os.path.join(a.workdir, "train.bin")
    base.write_tokens(a.train, a.tokens)
    model, kind = base.make_model(a)
    init = {n: p.detach().float().cpu().clone() for n, p in base.hf_params(model).items()}
    del model
    a.init = os.path.join(a.workdir, "init.safetensors")
    base.save_safetensors(a.init, init, {"format": "pt", "n_head": str(a.heads)})
    print(f"{NAME}: {kind}, {a.layers} layers, width {a.width}, {a.heads} heads, vocabulary "
          f"{a.vocab}, batch {a.batch} x {a.seq}, cut after {a.cut} of {a.steps} steps; files "
          f"in {a.workdir}")
    failures = []

    # 2. tcuda: cut, resumed, whole
    ckpt = os.path.join(a.workdir, "cut.ckpt")
    run(a, "cut", ["--stop-after", str(a.cut), "--checkpoint", ckpt])
    rest = run(a, "rest", ["--resume", ckpt])
    whole = run(a, "whole", [])
    same_tail(whole, rest, a.cut, "float32", failures)

    # 3. PyTorch from the same checkpoint, 4. its metadata
    ck, meta = read_checkpoint(ckpt)
    check_metadata(a, ck, meta, failures)
    ref = torch_resume(a, ck)
    tc = [float(line.split()[1]) for line in rest]
    print(f"{'step':>4} | {'torch loss':>12} | {'tcuda loss':>12} | {'rel diff':>9}")
    worst = 0.0
    for s, (r, t) in enumerate(zip(ref, tc)):
        worst = max(worst, base.rel(t, r))
        print(f"{a.cut + s + 1:>4} | {r:>12.7f} | {t:>12.7f} | {base.rel(t, r):>9.2e}")
    if len(tc) != a.steps - a.cut or len(ref) != len(tc) or not worst <= 1e-5:
        failures.append(f"resumed float32 losses differ from PyTorch's by {worst:.2e} "
                        f"relative (1e-5 allowed)")

    # 5. bfloat16, bit for bit against its own whole run
    ckpt16 = os.path.join(a.workdir, "cut_bf16.ckpt")
    run(a, "cut_bf16", ["--dtype", "bfloat16", "--stop-after", str(a.cut), "--checkpoint", ckpt16])
    rest16 = run(a, "rest_bf16", ["--dtype", "bfloat16", "--resume", ckpt16])
    whole16 = run(a, "whole_bf16", ["--dtype", "bfloat16"])
    same_tail(whole16, rest16, a.cut, "bfloat16", failures)

    if failures:
        print(f"FAIL {NAME}: " + "; ".join(failures))
        return 1
    print(f"PASS {NAME}: steps {a.cut + 1}..{a.steps} resumed bit for bit (float32, bfloat16) "
          f"and within {worst:.1e} of PyTorch resuming from the same checkpoint")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.TimeoutExpired, KeyError, AssertionError) as e:
        print(f"FAIL {NAME}: {type(e).__name__}: {e}")
        sys.exit(1)
