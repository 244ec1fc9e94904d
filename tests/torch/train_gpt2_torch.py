#!/usr/bin/env python3
"""examples/train_gpt2 against the same training in plain PyTorch, on a GPU.

    python3 tests/torch/train_gpt2_torch.py [--exe build-gpu/examples/train_gpt2]
        [--layers 4 --width 256 --heads 4 --vocab 512 --seq 128 --batch 4 --steps 20]
        [--lr 3e-4 --warmup 2 --min-lr-frac 0.1 --weight-decay 0.1 --grad-clip 1.0]
        [--ddp N] [--workdir DIR]

(--exe defaults to $TRAIN_GPT2, else build-gpu/examples/train_gpt2.)

1. Writes a token file in llm.c's format (its own writer: 256 int32 of header,
   magic 20240520, version 1, the count; uint16 tokens) holding a
   sequence with structure to learn (a fixed random Markov chain).
2. Builds GPT-2 in PyTorch: transformers' GPT2LMHeadModel(GPT2Config(...,
   every dropout 0, activation "gelu_pytorch_tanh", attention "sdpa")) when
   transformers is installed, else an equivalent plain module with the same
   parameter names. Seeded; its initial weights go to init.safetensors with
   Hugging Face's names (the tied lm_head is wte, stored once).
3. Trains it --steps steps in float32 with TF32 off: the batches train_gpt2
   reads (x = B*T consecutive tokens, y the next ones, advancing B*T),
   loss = F.cross_entropy(logits.float(), y), clip_grad_norm_, AdamW(fused=True,
   betas (0.9, 0.95), eps 1e-8) with two groups (weight decay on the 2-d
   parameters only), llm.c's warmup + cosine schedule.
4. Runs train_gpt2 --init init.safetensors on the same file and settings
   (--log, --save), and again with --graph.
5. Prints "step | torch loss | tcuda loss | rel diff" and checks every step's
   loss within 1e-5 relative (eager and --graph), and every parameter after
   the last step with torch.allclose(rtol=1e-4, atol=1e-4). (Not max |diff| /
   max |param|: the key third of each c_attn bias has a gradient of exactly
   0 in exact arithmetic, softmax being blind to a constant added to every
   key's score, so both sides' gradients there are rounding noise, which
   AdamW's normalization turns into steps of up to lr; those elements stay
   within the atol, not within 1e-4 of the bias's largest. Both numbers are
   printed.)
6. bfloat16: torch under torch.autocast("cuda", torch.bfloat16) gives a
   spread |bf16 - fp32| per step; train_gpt2 --dtype bfloat16's losses must
   be within 3 x that spread + 1e-3 of torch's float32 losses.
7. With --ddp N (N GPUs there): tools/tcuda-run -n N train_gpt2 --batch B/N
   against one process with --batch B: losses within 1e-5 relative.

Last line "PASS train_gpt2_torch: ..." or "FAIL train_gpt2_torch: ...",
exit 0 / 1; 77 with "SKIP" when torch or a GPU is missing."""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("SKIP train_gpt2_torch: no torch")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAGIC, VERSION = 20240520, 1


# ---- token files -------------------------------------------------------------------------

def write_tokens(path, toks):
    header = [0] * 256
    header[0], header[1], header[2] = MAGIC, VERSION, len(toks)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{len(toks)}H", *toks))


def make_tokens(n, vocab, seed):
    """A Markov chain over the vocabulary: each token has 4 likely successors."""
    g = torch.Generator().manual_seed(seed)
    succ = torch.randint(0, vocab, (vocab, 4), generator=g)
    choice = torch.randint(0, 4, (n,), generator=g)
    toks = [0] * n
    t = 0
    for i in range(n):
        toks[i] = t
        t = int(succ[t, choice[i]])
    return toks


class Loader:
    """train_gpt2's loader: B*T+1 tokens a batch, advancing B*T, wrapping."""

    def __init__(self, toks, B, T):
        self.toks, self.B, self.T, self.pos = torch.tensor(toks, dtype=torch.int64), B, T, 0

    def next(self):
        BT = self.B * self.T
        if self.pos + BT + 1 > len(self.toks):
            self.pos = 0
        buf = self.toks[self.pos:self.pos + BT + 1]
        self.pos += BT
        return buf[:-1].view(self.B, self.T).cuda(), buf[1:].view(self.B, self.T).cuda()


# ---- safetensors (the package when there, else a small writer and reader) --------------------

def save_safetensors(path, tensors, metadata):
    try:
        from safetensors.torch import save_file
        save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, path,
                  metadata=metadata)
        return
    except ImportError:
        pass
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for k, v in tensors.items():
        b = v.detach().cpu().contiguous().float().numpy().tobytes()
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load_safetensors(path):
    try:
        from safetensors.torch import load_file
        return load_file(path)
    except ImportError:
        pass
    import numpy as np
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        a, b = v["data_offsets"]
        out[k] = torch.from_numpy(np.frombuffer(data[8 + n + a:8 + n + b], dtype=np.float32)
                                  .copy()).view(v["shape"])
    return out


# ---- the model -------------------------------------------------------------------------------

class Conv1D(nn.Module):  # Hugging Face's: weight [in, out]
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out).normal_(0, 0.02))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(
            *x.shape[:-1], -1)


class Block(nn.Module):
    def __init__(self, C, H, L):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
        self.attn = nn.Module()
        self.attn.c_attn, self.attn.c_proj = Conv1D(C, 3 * C), Conv1D(C, C)
        self.mlp = nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = Conv1D(C, 4 * C), Conv1D(4 * C, C)
        for p in (self.attn.c_proj.weight, self.mlp.c_proj.weight):
            p.data.normal_(0, 0.02 / math.sqrt(2 * L))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class PlainGPT2(nn.Module):
    """GPT-2 with Hugging Face's parameter names, for when transformers is missing."""

    def __init__(self, a):
        super().__init__()
        self.transformer = nn.Module()
        t = self.transformer
        t.wte = nn.Embedding(a.vocab, a.width)
        t.wpe = nn.Embedding(a.ctx, a.width)
        for e in (t.wte, t.wpe):
            e.weight.data.normal_(0, 0.02)
        t.h = nn.ModuleList(Block(a.width, a.heads, a.layers) for _ in range(a.layers))
        t.ln_f = nn.LayerNorm(a.width, eps=1e-5)

    def forward(self, idx):
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in t.h:
            x = b(x)
        return F.linear(t.ln_f(x), t.wte.weight)  # the tied lm_head


def make_model(a):
    torch.manual_seed(a.seed)
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return PlainGPT2(a).cuda(), "plain PyTorch GPT-2"
    cfg = GPT2Config(vocab_size=a.vocab, n_positions=a.ctx, n_embd=a.width, n_layer=a.layers,
                     n_head=a.heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     activation_function="gelu_pytorch_tanh", layer_norm_epsilon=1e-5,
                     attn_implementation="sdpa", use_cache=False)
    m = GPT2LMHeadModel(cfg)

    class HF(nn.Module):  # logits only, as PlainGPT2
        def __init__(self, hf):
            super().__init__()
            self.hf, self.transformer = hf, hf.transformer

        def forward(self, idx):
            return self.hf(input_ids=idx, use_cache=False).logits

    return HF(m).cuda(), "transformers GPT2LMHeadModel (sdpa)"


def hf_params(model):
    """The parameters under Hugging Face's names without "transformer." (tied lm_head once)."""
    return {n: p for n, p in model.transformer.named_parameters()}


# ---- training in PyTorch ------------------------------------------------------------------

def lr_at(a, s):
    if s < a.warmup:
        return a.lr * (s + 1) / a.warmup
    ratio = (s - a.warmup) / (a.steps - a.warmup)
    min_lr = a.lr * a.min_lr_frac
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (a.lr - min_lr)


def train_torch(a, init, toks, bf16):
    model, _ = make_model(a)
    params = hf_params(model)
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(init[n])
    decay = [p for p in params.values() if p.dim() >= 2]
    no_decay = [p for p in params.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    loader, losses = Loader(toks, a.batch, a.seq), []
    for s in range(a.steps):
        x, y = loader.next()
        with torch.autocast("cuda", torch.bfloat16, enabled=bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.view(-1))
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()), a.grad_clip)
        for g in opt.param_groups:
            g["lr"] = lr_at(a, s)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, {n: p.detach().float().cpu() for n, p in params.items()}


# ---- train_gpt2 ------------------------------------------------------------------------------

def run_logged(cmd, workdir, name):
    """Runs cmd (10 minutes at most), its output kept in workdir/name.out;
    raises with the output's tail when it fails."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600)
    with open(os.path.join(workdir, f"{name}.out"), "w") as f:
        f.write(r.stdout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-2000:]}")


def run_tcuda(a, name, extra, launcher=None):
    log = os.path.join(a.workdir, f"{name}.log")
    cmd = [a.exe, "--init", a.init, "--train", a.train, "--device", "cuda",
           "--seq", str(a.seq), "--steps", str(a.steps), "--lr", repr(a.lr),
           "--warmup", str(a.warmup), "--min-lr-frac", repr(a.min_lr_frac),
           "--weight-decay", repr(a.weight_decay), "--grad-clip", repr(a.grad_clip),
           "--log", log] + extra
    if "--batch" not in extra:
        cmd += ["--batch", str(a.batch)]
    if launcher:
        cmd = launcher + ["--"] + cmd
    run_logged(cmd, a.workdir, name)
    return [float(line.split()[1]) for line in open(log)]


def rel(x, y):
    return abs(x - y) / max(abs(y), 1e-30)


def run_args(description, steps):
    """The flags both comparison scripts take: the program, the model, the
    batches and the schedule (train_gpt2_resume_torch.py adds its own)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--exe", default=os.environ.get(
        "TRAIN_GPT2", os.path.join(ROOT, "build-gpu/examples/train_gpt2")))
    for flag, default in (("--layers", 4), ("--width", 256), ("--heads", 4), ("--vocab", 512),
                          ("--ctx", 128), ("--seq", 128), ("--batch", 4), ("--steps", steps),
                          ("--seed", 1234)):
        ap.add_argument(flag, type=int, default=default)
    for flag, default in (("--lr", 3e-4), ("--min-lr-frac", 0.1), ("--weight-decay", 0.1)):
        ap.add_argument(flag, type=float, default=default)
    ap.add_argument("--warmup", type=int, default=2)
    return ap


def main():
    ap = run_args(__doc__.split("\n")[0], 20)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--ddp", type=int, default=0, help="also compare N ranks with one")
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIP train_gpt2_torch: no GPU")
        return 77
    if not os.access(a.exe, os.X_OK):
        print(f"FAIL train_gpt2_torch: no program at {a.exe} (--exe or TRAIN_GPT2)")
        return 1
    a.workdir = a.workdir or tempfile.mkdtemp(prefix="train_gpt2_torch.")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    # 1. tokens, 2. the model and its initial weights
    toks = make_tokens(max(a.steps * a.batch * a.seq + 1, 50000), a.vocab, a.seed)
    a.train = os.path.join(a.workdir, "train.bin")
    write_tokens(a.train, toks)
    model, kind = make_model(a)
    init = {n: p.detach().float().cpu().clone() for n, p in hf_params(model).items()}
    del model
    a.init = os.path.join(a.workdir, "init.safetensors")
    save_safetensors(a.init, init, {"format": "pt", "n_head": str(a.heads)})
    print(f"train_gpt2_torch: {kind}, {a.layers} layers, width {a.width}, {a.heads} heads, "
          f"vocabulary {a.vocab}, batch {a.batch} x {a.seq}, {a.steps} steps; files in "
          f"{a.workdir}")

    failures = []

    # 3. PyTorch in float32, 4. train_gpt2 eager and with --graph
    ref, ref_params = train_torch(a, init, toks, bf16=False)
    final = os.path.join(a.workdir, "tc_final.safetensors")
    tc = run_tcuda(a, "tc", ["--save", final])
    tc_graph = run_tcuda(a, "tc_graph", ["--graph"])

    # 5. the table and the checks
    print(f"{'step':>4} | {'torch loss':>12} | {'tcuda loss':>12} | {'rel diff':>9} | "
          f"{'--graph':>12} | {'rel diff':>9}")
    worst = worst_graph = 0.0
    for s, (r, t, g) in enumerate(zip(ref, tc, tc_graph)):
        worst, worst_graph = max(worst, rel(t, r)), max(worst_graph, rel(g, r))
        print(f"{s + 1:>4} | {r:>12.7f} | {t:>12.7f} | {rel(t, r):>9.2e} | {g:>12.7f} | "
              f"{rel(g, r):>9.2e}")
    if len(tc) != a.steps or not worst <= 1e-5:
        failures.append(f"float32 losses differ by {worst:.2e} relative (1e-5 allowed)")
    if len(tc_graph) != a.steps or not worst_graph <= 1e-5:
        failures.append(f"--graph losses differ by {worst_graph:.2e} relative (1e-5 allowed)")
    got = load_safetensors(final)
    worst_p, worst_name, not_close = 0.0, "", []
    for n, p in ref_params.items():
        if n not in got or tuple(got[n].shape) != tuple(p.shape):
            failures.append(f"{n} missing or misshapen in {final}")
            continue
        g = got[n].float()
        d = ((g - p).abs().max() / p.abs().max().clamp_min(1e-30)).item()
        if d > worst_p:
            worst_p, worst_name = d, n
        if not torch.allclose(g, p, rtol=1e-4, atol=1e-4):
            not_close.append(f"{n} (max abs diff {(g - p).abs().max().item():.2e})")
    print(f"parameters after {a.steps} steps: max |tcuda - torch| / max |torch| = "
          f"{worst_p:.2e} ({worst_name}); not allclose(rtol=1e-4, atol=1e-4): "
          f"{len(not_close)}")
    if not_close:
        failures.append("parameters not allclose(rtol=1e-4, atol=1e-4): " + ", ".join(not_close))

    # 6. bfloat16 against torch's own bf16 - fp32 spread
    ref16, _ = train_torch(a, init, toks, bf16=True)
    tc16 = run_tcuda(a, "tc_bf16", ["--dtype", "bfloat16"])
    print(f"{'step':>4} | {'torch fp32':>12} | {'torch bf16':>12} | {'tcuda bf16':>12} | "
          f"{'allowed':>9}")
    bad16 = 0
    for s, (r, r16, t16) in enumerate(zip(ref, ref16, tc16)):
        allowed = 3 * abs(r16 - r) + 1e-3
        bad16 += not abs(t16 - r) <= allowed
        print(f"{s + 1:>4} | {r:>12.6f} | {r16:>12.6f} | {t16:>12.6f} | {allowed:>9.2e}"
              f"{'' if abs(t16 - r) <= allowed else '  <-'}")
    if len(tc16) != a.steps or bad16:
        failures.append(f"bfloat16: {bad16} steps outside 3 x torch's bf16 spread + 1e-3")

    # 7. DDP: N ranks of batch B/N against one process of batch B
    ddp_note = ""
    if a.ddp > 1:
        if torch.cuda.device_count() < a.ddp or a.batch % a.ddp:
            ddp_note = f"; DDP x{a.ddp} not run ({torch.cuda.device_count()} GPUs, batch {a.batch})"
        else:
            tc_ddp = run_tcuda(a, f"tc_ddp{a.ddp}", ["--batch", str(a.batch // a.ddp)],
                               launcher=[os.path.join(ROOT, "tools/tcuda-run"), "-n", str(a.ddp)])
            worst_ddp = max((rel(d, t) for d, t in zip(tc_ddp, tc)), default=math.inf)
            print(f"DDP x{a.ddp} (batch {a.batch // a.ddp} each) against one GPU (batch "
                  f"{a.batch}): losses within {worst_ddp:.2e} relative")
            ddp_note = f"; DDP x{a.ddp} within {worst_ddp:.1e}"
            if len(tc_ddp) != a.steps or not worst_ddp <= 1e-5:
                failures.append(f"DDP x{a.ddp} losses differ by {worst_ddp:.2e} (1e-5 allowed)")

    summary = (f"{a.steps} steps, float32 losses within {worst:.1e} (--graph {worst_graph:.1e}), "
               f"parameters allclose(1e-4, 1e-4), bfloat16 within torch's spread{ddp_note}")
    if failures:
        print("FAIL train_gpt2_torch: " + "; ".join(failures))
        return 1
    print("PASS train_gpt2_torch: " + summary)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"FAIL train_gpt2_torch: {e}")
        sys.exit(1)
