#!/bin/sh
# softmax and layer_norm GB/s: tcuda beside the copy floor and PyTorch on the
# same shapes, in one run. From the repository root after a CUDA build:
#   bench/run_nn.sh [build] [repeats]
# "vs torch" is tcuda's GB/s over PyTorch's (1.00 = equal; the issue's target
# is at least 0.97); "path" is the kernel path, "auto" the one tcuda takes
# (the others forced, for comparison). Logs under $OUT/bench_nn when OUT is set.
set -eu
B=${1:-build}
REPS=${2:-51}
LOG=${OUT:-/tmp}/bench_nn
mkdir -p "$LOG"
"$B/bench/bench_nn" "$REPS" > "$LOG/tcuda.csv"
PYTHONPATH="$(dirname "$0")/torch" python3 - "$LOG/tcuda.csv" "$REPS" <<'PY' | tee "$LOG/table.txt"
import sys
from torch_timing import median_ms, tcuda_rows
rows = tcuda_rows(sys.argv[1], "op")
if rows is None:
    sys.exit(0)
reps = int(sys.argv[2])
import torch
import torch.nn.functional as F
med = lambda fn: median_ms(fn, reps)  # noqa: E731
print(f"{'op':<11}{'path':<10}{'dtype':<9}{'shape':>12}  {'tcuda GB/s':>10}  {'torch GB/s':>10}  {'floor GB/s':>10}  vs torch")
seen = {}
for r in rows:
    R, C = int(r["rows"]), int(r["cols"])
    dt = torch.float32 if r["dtype"] == "float32" else torch.bfloat16
    x = torch.randn(R, C, device="cuda", dtype=dt)
    w = torch.randn(C, device="cuda", dtype=dt); b = torch.randn(C, device="cuda", dtype=dt)
    fn = (lambda: torch.softmax(x, -1)) if r["op"] == "softmax" else (lambda: F.layer_norm(x, (C,), w, b, 1e-5))
    key = (r["op"], r["dtype"], R, C)
    if key not in seen:
        seen[key] = 2 * R * C * x.element_size() / med(fn) / 1e6
    gb = seen[key]
    t = float(r["GBps"])
    print(f"{r['op']:<11}{r['path']:<10}{r['dtype']:<9}{R:>6}x{C:<6}  {t:>10.1f}  {gb:>10.1f}  {float(r['floor_GBps']):>10.1f}  {t / gb:.3f}")
    del x, w, b
PY
