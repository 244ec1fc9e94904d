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
python3 - "$LOG/tcuda.csv" "$REPS" <<'PY' | tee "$LOG/table.txt"
import csv, sys
text = open(sys.argv[1]).read()
if not text.startswith("op,"):
    print(text.strip()); sys.exit(0)
rows = list(csv.DictReader(text.splitlines()))
reps = int(sys.argv[2])
import torch
import torch.nn.functional as F
def med(fn):
    for _ in range(3): fn()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    ts.sort(); return ts[len(ts) // 2]
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
