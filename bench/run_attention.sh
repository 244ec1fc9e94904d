#!/bin/sh
# Attention at GPT-2 small's prefill shape: tcuda's fused kernel and its
# unfused path beside PyTorch's F.scaled_dot_product_attention (its own
# choice of kernel) on the same head views, in one run. From the repository
# root after a CUDA build:
#   bench/run_attention.sh [build] [repeats]
# "vs torch" is PyTorch's time over tcuda's (above 1: tcuda is faster).
# Logs under $OUT/bench_attention when OUT is set.
set -eu
B=${1:-build}
REPS=${2:-51}
LOG=${OUT:-/tmp}/bench_attention
mkdir -p "$LOG"
"$B/bench/bench_attention" "$REPS" > "$LOG/tcuda.csv"
PYTHONPATH="$(dirname "$0")/torch" python3 - "$LOG/tcuda.csv" "$REPS" <<'PY' | tee "$LOG/table.txt"
import sys
from torch_timing import median_ms, tcuda_rows
rows = tcuda_rows(sys.argv[1], "dtype")
if rows is None:
    sys.exit(0)
reps = int(sys.argv[2])
import torch
import torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = False
B, H, T, D = 8, 12, 512, 64
med = lambda fn: median_ms(fn, reps)  # noqa: E731
torch_ms = {}
for name, dt in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
    p = torch.randn(B, T, 3 * H * D, device="cuda", dtype=dt)
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in p.split(H * D, 2))
    torch_ms[name] = med(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
flops = 2.0 * 2.0 * B * H * T * T * D / 2
print(f"{'dtype':<9}{'path':<9}{'tcuda ms':>9}{'TFLOP/s':>9}{'torch ms':>10}{'TFLOP/s':>9}  vs torch")
for r in rows:
    t = torch_ms[r["dtype"]]
    print(f"{r['dtype']:<9}{r['path']:<9}{float(r['ms']):9.4f}{float(r['TFLOPs']):9.1f}"
          f"{t:10.4f}{flops / t / 1e9:9.1f}  {t / float(r['ms']):.2f}")
PY
