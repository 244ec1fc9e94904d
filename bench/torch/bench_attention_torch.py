"""PyTorch's side of bench_attention: F.scaled_dot_product_attention (its
own choice of kernel), causal, at GPT-2 small's prefill shape (batch 8, 12
heads, 512 tokens, head size 64), q, k and v the head views of one
projection as in bench_attention.c; the median of event-timed calls.
Prints CSV: dtype,ms,TFLOPs (the causal half of both products). Then the
backward at batch 8, 12 heads, 1024 tokens, head size 64, causal, in
float32, float16 and bfloat16 (torch's flash or efficient kernel, its own
choice): torch.autograd.grad of the output for q, k and v, the forward done
once outside the timing; rows "<dtype> backward 1024" as bench_attention.c
prints them (TFLOP/s: the causal half of five products).
Each forward and backward row is repeated with each of PyTorch's fused
backends forced (torch.nn.attention.sdpa_kernel: flash, cudnn, efficient),
its dtype cell followed by the backend's name ("bfloat16 cudnn", "bfloat16
backward 1024 flash"); a backend that does not take the case prints no row.
Usage: python3 bench_attention_torch.py [repeats]"""
import sys

from torch_timing import median_ms, torch_or_exit

torch = torch_or_exit()
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

BACKENDS = (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION))


def forced(fn):
    """fn() once on PyTorch's own choice (name ""), then under each backend:
    (name, its result) for each that runs."""
    out = [("", fn())]
    for name, be in BACKENDS:
        try:
            with sdpa_kernel([be]):
                out.append((" " + name, fn()))
        except RuntimeError:  # this backend does not take the case
            pass
    return out

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 51
torch.backends.cuda.matmul.allow_tf32 = False
B, H, T, D = 8, 12, 512, 64
flops = 2.0 * 2.0 * B * H * T * T * D / 2
print(f"# torch {torch.__version__}")
print("dtype,ms,TFLOPs")
for name, dt in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
    p = torch.randn(B, T, 3 * H * D, device="cuda", dtype=dt)
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in p.split(H * D, 2))
    for be, ms in forced(lambda: median_ms(
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps)):
        print(f"{name}{be},{ms:.4f},{flops / ms / 1e9:.1f}")

BT = 1024
bflops = 5.0 * 2.0 * B * H * BT * BT * D / 2
for name, dt in (("float32", torch.float32), ("float16", torch.float16),
                 ("bfloat16", torch.bfloat16)):
    p = torch.randn(B, BT, 3 * H * D, device="cuda", dtype=dt, requires_grad=True)
    q, k, v = (t.view(B, BT, H, D).transpose(1, 2) for t in p.split(H * D, 2))
    go = torch.randn(B, BT, H, D, device="cuda", dtype=dt).transpose(1, 2)

    def backward():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return median_ms(lambda: torch.autograd.grad(out, (q, k, v), go, retain_graph=True), reps)
    for be, ms in forced(backward):
        print(f"{name} backward {BT}{be},{ms:.4f},{bflops / ms / 1e9:.1f}")
