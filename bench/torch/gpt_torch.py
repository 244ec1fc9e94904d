#!/usr/bin/env python3
"""The PyTorch side of examples/gpt.c (run on the GPU machine).

  gpt_torch.py write DIR [--layers 12 --embd 768 --heads 12 --vocab 50257
                          --ctx 1024 --batch 1 --prompt 16 --new 32 --seed 0]
      Writes DIR/model.safetensors, a randomly initialised GPT-2 (Hugging
      Face's tensor names, n_head in the metadata), and DIR/ref.safetensors:
      the prompt (int64 [B, T]), PyTorch's float32 logits for it ([B, T, V])
      and its greedy continuation (int64 [B, new]).
  gpt_torch.py bench DIR [--dtype float32|bfloat16] [--tf32] [--no-compile]
      Prefill tokens/s (batch 8 x 512) and decode tokens/s (batch 1 and 8,
      prompt 16, 256 new tokens; tokens/s counts every sequence) of the same
      weights in PyTorch eager and with the decode step as a CUDA graph, one
      line per row: "torch <row> <tokens/s>" (rows prefill_D, decode_D,
      decode_graph_D, decode_b8_D, decode_graph_b8_D; D the dtype, plus _tf32
      with --tf32). Then torch.compile's rows, "compile <row> <tokens/s>":
      prefill_D (the forward in default mode) and decode_graph_D,
      decode_graph_b8_D (the decode step with its static KV cache held as
      module buffers, under mode="reduce-overhead", fullgraph=True, as
      gpt-fast does). Compilation is not timed; it takes a minute or two
      cold (TORCHINDUCTOR_CACHE_DIR, when set, keeps Inductor's cache between
      runs). A compile row that fails says why on stderr and is left out;
      --no-compile leaves them all out.

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


class DecodeStep(torch.nn.Module):
    """One greedy decode step of GPT as torch.compile wants it (gpt-fast's
    shape): the weights and the KV caches ([B, H, S, hd] per layer, static
    shapes) are registered buffers, so that CUDA graph trees take their
    addresses as fixed: nothing is copied in a step, and the caches may be
    written in place. forward(tok [B, 1], pos [1]) writes this step's k, v at
    pos, attends over the cache with positions beyond pos hidden and returns
    the next token [B, 1]: the same math as GPT.forward with a cache."""

    def __init__(self, m, B, S):
        super().__init__()
        self.n_head, self.n_layer, self.C = m.n_head, m.n_layer, m.C
        for k, t in m.w.items():  # buffer names take no dots
            self.register_buffer(k.replace(".", "_"), t)
        w = m.w["wte.weight"]
        for i, (kc, vc) in enumerate(m.new_cache(B, S, w.dtype, w.device)):
            self.register_buffer(f"k_cache_{i}", kc)
            self.register_buffer(f"v_cache_{i}", vc)

    def w(self, name):
        """A weight by its Hugging Face name."""
        return getattr(self, name.replace(".", "_"))

    def caches(self):
        """The caches as GPT.forward takes them, for an eager prefill."""
        return [(getattr(self, f"k_cache_{i}"), getattr(self, f"v_cache_{i}"))
                for i in range(self.n_layer)]

    def ln(self, x, p):
        return F.layer_norm(x, (self.C,), self.w(p + ".weight"), self.w(p + ".bias"), 1e-5)

    def lin(self, x, p):
        return torch.addmm(self.w(p + ".bias"), x.reshape(-1, x.shape[-1]),
                           self.w(p + ".weight")).reshape(*x.shape[:-1], -1)

    def forward(self, tok, pos):
        B, H, C = tok.shape[0], self.n_head, self.C
        x = self.w("wte.weight")[tok] + self.w("wpe.weight")[pos]
        S = self.k_cache_0.shape[2]
        mask = torch.arange(S, device=tok.device)[None, :] <= pos[:, None]
        for i in range(self.n_layer):
            p = f"h.{i}."
            qkv = self.lin(self.ln(x, p + "ln_1"), p + "attn.c_attn")
            # a list, not a generator: older Dynamo breaks the graph on those
            q, k, v = [t.view(B, 1, H, C // H).transpose(1, 2) for t in qkv.split(C, 2)]
            kc, vc = getattr(self, f"k_cache_{i}"), getattr(self, f"v_cache_{i}")
            kc.index_copy_(2, pos, k)
            vc.index_copy_(2, pos, v)
            y = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask)
            y = y.transpose(1, 2).reshape(B, 1, C)
            x = x + self.lin(y, p + "attn.c_proj")
            h = F.gelu(self.lin(self.ln(x, p + "ln_2"), p + "mlp.c_fc"), approximate="tanh")
            x = x + self.lin(h, p + "mlp.c_proj")
        logits = self.ln(x, "ln_f") @ self.w("wte.weight").t()
        return logits[:, -1].argmax(-1, keepdim=True)


def compiled_decode(m, prompt, new):
    """generate()'s decode under torch.compile: DecodeStep compiled with
    mode="reduce-overhead" (CUDA graph trees), fullgraph=True. Each run
    prefills the prompt eagerly into the step's caches, then times new - 1
    steps with one synchronize at the end, each step's token fed back as the
    next input, as gpt-fast does. Two runs, the first a warm-up (the
    compilation, graph trees' warm-up and recording fall in its first
    steps); returns the second's new tokens [B, new] and the seconds its
    steps took. Raises what torch.compile raises."""
    B, T = prompt.shape
    dev = prompt.device
    torch._dynamo.reset()  # another batch's graphs: not recompiled with dynamic shapes
    d = DecodeStep(m, B, T + new)
    step = torch.compile(d, mode="reduce-overhead", fullgraph=True, dynamic=False)
    # each call a new step for CUDA graph trees: the last one's outputs may go
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", lambda: None)

    def run():
        pos = torch.arange(T, device=dev)
        tok = m.forward(prompt, pos, d.caches(), pos)[:, -1].argmax(-1, keepdim=True)
        step_pos = torch.tensor([T], device=dev)
        out = [tok]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(1, new):
            mark()
            tok = step(tok, step_pos).clone()  # the graph's output is overwritten next step
            step_pos += 1
            out.append(tok)
        torch.cuda.synchronize()
        return torch.cat(out, 1), time.perf_counter() - t0

    run()  # warm
    return run()


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
        print(f"torch prefill_{name} {8 * 512 / s:.0f}", flush=True)
        # decode at batch 1 and 8: a prompt of 16 random tokens a sequence,
        # 256 steps timed; tokens/s counts every sequence's tokens
        prompts = {B: torch.randint(0, V, (B, 16), device="cuda") for B in (1, 8)}
        eager_tokens = {}
        for B, p in prompts.items():
            b = "" if B == 1 else f"_b{B}"
            for graph in (False, True):
                generate(m, p, 257, graph)  # warm
                tokens, s = generate(m, p, 257, graph)
                if not graph:
                    eager_tokens[B] = tokens
                print(f"torch decode{'_graph' if graph else ''}{b}_{name} {B * 256 / s:.0f}",
                      flush=True)
        if a.no_compile:
            return

        # torch.compile; a row that fails to compile says why and is left out
        def compile_row(row, fn):
            try:
                print(f"compile {row}_{name} {fn():.0f}", flush=True)
            except Exception as e:  # noqa: BLE001 (Dynamo and Inductor raise many kinds)
                first = (str(e).strip().splitlines() or [""])[0][:160]
                print(f"gpt_torch: torch.compile {row}_{name} failed: {type(e).__name__}: "
                      f"{first}", file=sys.stderr, flush=True)

        def prefill():
            fwd = torch.compile(m.forward)  # default mode; compiles in timed()'s warm-up call
            s = timed(lambda: fwd(x, pos), 5)
            ref, got = m.forward(x, pos).float(), fwd(x, pos).float()
            err = ((got - ref).abs().max() / ref.abs().max()).item()
            print(f"gpt_torch: compile prefill_{name}: logits differ from eager's by {err:.2e} "
                  f"(relative to max)", file=sys.stderr)
            return 8 * 512 / s

        def decode(B):
            tokens, s = compiled_decode(m, prompts[B], 257)
            same = (tokens == eager_tokens[B]).all(0).long().cumprod(0).sum().item()
            print(f"gpt_torch: compile decode_graph batch {B}, {name}: the first {same} of 257 "
                  f"tokens of every sequence are eager's", file=sys.stderr)
            return B * 256 / s

        compile_row("prefill", prefill)
        compile_row("decode_graph", lambda: decode(1))
        compile_row("decode_graph_b8", lambda: decode(8))


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
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    write(a) if a.what == "write" else bench(a)


if __name__ == "__main__":
    main()
