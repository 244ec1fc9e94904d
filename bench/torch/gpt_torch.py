#!/usr/bin/env python3
"""The PyTorch side of examples/gpt.c (run on the GPU machine).

  gpt_torch.py write DIR [--layers 12 --embd 768 --heads 12 --vocab 50257
                          --ctx 1024 --batch 1 --prompt 16 --new 32 --seed 0]
      Writes DIR/model.safetensors, a randomly initialised GPT-2 (Hugging
      Face's tensor names, n_head in the metadata), and DIR/ref.safetensors:
      the prompt (int64 [B, T]), PyTorch's float32 logits for it ([B, T, V])
      and its greedy continuation (int64 [B, new]).
  gpt_torch.py bench DIR [--dtype float32|bfloat16]
      Prefill tokens/s (batch 8 x 512) and decode tokens/s (batch 1, 256 new
      tokens) of the same weights in PyTorch eager and with the decode step
      as a CUDA graph; one line per row: "torch <row> <tokens/s>".

The model below is GPT-2 written plainly (the same math as transformers'
GPT2LMHeadModel with gelu_new); `write` also checks it against
transformers when that is installed, so the reference is PyTorch's own.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F


def save_safetensors(path, tensors, metadata=None):
    """The format written by hand, so no package is needed."""
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.float64: "F64", torch.int64: "I64", torch.int32: "I32"}
    header, blobs, off = {}, [], 0
    for k, t in tensors.items():
        b = t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.shape),
                     "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def load_safetensors(path, device):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "F64": torch.float64, "I64": torch.int64, "I32": torch.int32}
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=dtypes[v["dtype"]])
        out[k] = t.reshape(v["shape"]).to(device)
    return out, header.get("__metadata__", {})


class GPT:
    """GPT-2 over a dict of Hugging Face-named weights (Conv1D: x @ W + b)."""

    def __init__(self, w, n_head):
        self.w, self.n_head = w, n_head
        self.n_layer = len({k.split(".")[1] for k in w if k.startswith("h.")})
        self.C = w["wte.weight"].shape[1]

    def ln(self, x, p):
        return F.layer_norm(x, (self.C,), self.w[p + ".weight"], self.w[p + ".bias"], 1e-5)

    def lin(self, x, p):
        return torch.addmm(self.w[p + ".bias"], x.reshape(-1, x.shape[-1]),
                           self.w[p + ".weight"]).reshape(*x.shape[:-1], -1)

    def forward(self, idx, pos, cache=None, cache_pos=None):
        """idx [B, T]; pos [T] positions. With cache (list of (k, v) [B, H,
        S, hd]), writes this step's k, v at cache_pos and attends over the
        cache with a mask that hides positions beyond pos (static shapes, so
        the step can be a CUDA graph)."""
        B, T = idx.shape
        H, C = self.n_head, self.C
        x = self.w["wte.weight"][idx] + self.w["wpe.weight"][pos]
        for i in range(self.n_layer):
            p = f"h.{i}."
            qkv = self.lin(self.ln(x, p + "ln_1"), p + "attn.c_attn")
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, 2))
            if cache is None:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                kc, vc = cache[i]
                kc.index_copy_(2, cache_pos, k)
                vc.index_copy_(2, cache_pos, v)
                S = kc.shape[2]
                mask = torch.arange(S, device=idx.device)[None, :] <= pos[:, None]
                y = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask)
            y = y.transpose(1, 2).reshape(B, T, C)
            x = x + self.lin(y, p + "attn.c_proj")
            h = F.gelu(self.lin(self.ln(x, p + "ln_2"), p + "mlp.c_fc"), approximate="tanh")
            x = x + self.lin(h, p + "mlp.c_proj")
        x = self.ln(x, "ln_f")
        return x @ self.w["wte.weight"].t()

    def new_cache(self, B, S, dtype, device):
        hd = self.C // self.n_head
        return [(torch.zeros(B, self.n_head, S, hd, dtype=dtype, device=device),
                 torch.zeros(B, self.n_head, S, hd, dtype=dtype, device=device))
                for _ in range(self.n_layer)]


def generate(m, prompt, new, graph=False):
    """Greedy: prefill the prompt into a static cache, then one token a step.
    Returns the new tokens [B, new] and the seconds the decode steps took."""
    B, T = prompt.shape
    dev, dt = prompt.device, m.w["wte.weight"].dtype
    cache = m.new_cache(B, T + new, dt, dev)
    pos = torch.arange(T, device=dev)
    logits = m.forward(prompt, pos, cache, pos)
    tok = logits[:, -1].argmax(-1, keepdim=True)
    out = [tok]
    step_tok = tok.clone()
    step_pos = torch.tensor([T], device=dev)

    def step():
        return m.forward(step_tok, step_pos, cache, step_pos)[:, -1].argmax(-1, keepdim=True)

    g = None
    if graph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm up outside the graph, as PyTorch asks
            step()
        torch.cuda.current_stream().wait_stream(s)
        # the warm-up wrote position T's k, v; the real steps rewrite them
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            g_out = step()
    if dev != "cpu":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(1, new):
        step_tok.copy_(tok)
        step_pos.fill_(T + i - 1)
        if g is not None:
            g.replay()
            tok = g_out.clone()
        else:
            tok = step()
        out.append(tok)
    out = torch.cat(out, 1)
    if dev != "cpu":
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def write(a):
    torch.manual_seed(a.seed)
    C, L, V, S = a.embd, a.layers, a.vocab, a.ctx
    std = 0.02
    w = {"wte.weight": torch.randn(V, C) * std, "wpe.weight": torch.randn(S, C) * 0.01}
    for i in range(L):
        p = f"h.{i}."
        for ln in ("ln_1", "ln_2"):
            w[p + ln + ".weight"] = 1 + 0.1 * torch.randn(C)
            w[p + ln + ".bias"] = 0.1 * torch.randn(C)
        for name, shape in (("attn.c_attn", (C, 3 * C)), ("attn.c_proj", (C, C)),
                            ("mlp.c_fc", (C, 4 * C)), ("mlp.c_proj", (4 * C, C))):
            w[p + name + ".weight"] = torch.randn(*shape) * std
            w[p + name + ".bias"] = torch.randn(shape[1]) * std
    w["ln_f.weight"] = 1 + 0.1 * torch.randn(C)
    w["ln_f.bias"] = 0.1 * torch.randn(C)
    os.makedirs(a.dir, exist_ok=True)
    save_safetensors(os.path.join(a.dir, "model.safetensors"), w,
                     {"n_head": str(a.heads), "format": "pt"})

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    m = GPT({k: v.to(dev) for k, v in w.items()}, a.heads)
    g = torch.Generator().manual_seed(a.seed + 1)
    prompt = torch.randint(0, V, (a.batch, a.prompt), generator=g).to(dev)
    with torch.no_grad():
        logits = m.forward(prompt, torch.arange(a.prompt, device=dev))
        gen, _ = generate(m, prompt, a.new)
        check_transformers(w, a, prompt, logits, gen)
    save_safetensors(os.path.join(a.dir, "ref.safetensors"),
                     {"prompt": prompt, "logits": logits.float(), "generated": gen})
    print(f"wrote {a.dir}: {L} layers, width {C}, {a.heads} heads, vocab {V}; "
          f"prompt {tuple(prompt.shape)}, {a.new} new tokens")


def check_transformers(w, a, prompt, logits, gen):
    """The plain model against transformers' GPT2LMHeadModel, when present."""
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        print("transformers: not installed, plain model not cross-checked")
        return
    cfg = GPT2Config(vocab_size=a.vocab, n_positions=a.ctx, n_embd=a.embd, n_layer=a.layers,
                     n_head=a.heads, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0,
                     activation_function="gelu_new", layer_norm_epsilon=1e-5)
    hf = GPT2LMHeadModel(cfg).to(prompt.device).eval()
    missing, unexpected = hf.transformer.load_state_dict(
        {k: v.to(prompt.device) for k, v in w.items()}, strict=False)
    missing = [k for k in missing if not k.endswith("attn.bias") and "masked_bias" not in k]
    if missing or unexpected:
        sys.exit(f"transformers: names differ: missing {missing} unexpected {unexpected}")
    hf.tie_weights()
    ref = hf(prompt).logits
    err = ((ref - logits).abs().max() / ref.abs().max()).item()
    print(f"transformers: GPT2LMHeadModel logits differ by {err:.2e} (relative to max)")
    if err > 1e-4:
        sys.exit("transformers: the plain model does not match GPT2LMHeadModel")


def bench(a):
    dt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[a.dtype]
    # --tf32: TF32 for float32 matrix products, as tcuda's gpt --tf32
    torch.set_float32_matmul_precision("high" if a.tf32 else "highest")
    name = a.dtype + ("_tf32" if a.tf32 else "")
    w, meta = load_safetensors(os.path.join(a.dir, "model.safetensors"), "cuda")
    m = GPT({k: v.to(dt) for k, v in w.items()}, int(meta["n_head"]))
    V = w["wte.weight"].shape[0]

    def timed(fn, reps):
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / reps

    with torch.no_grad():
        x = torch.randint(0, V, (8, 512), device="cuda")
        pos = torch.arange(512, device="cuda")
        s = timed(lambda: m.forward(x, pos), 5)
        print(f"torch prefill_{name} {8 * 512 / s:.0f}")
        p = torch.randint(0, V, (1, 16), device="cuda")
        for graph in (False, True):
            generate(m, p, 257, graph)  # warm
            _, s = generate(m, p, 257, graph)
            print(f"torch decode{'_graph' if graph else ''}_{name} {256 / s:.0f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("write", "bench"))
    ap.add_argument("dir")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--tf32", action="store_true")
    a = ap.parse_args()
    write(a) if a.what == "write" else bench(a)


if __name__ == "__main__":
    main()
