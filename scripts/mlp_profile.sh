#!/usr/bin/env bash
# Where the GPU time of examples/graph_mlp's training step goes, beside
# PyTorch's same step: each kernel of one eager step in order, timed by
# Nsight Compute (NVTX range "mlp_step"), and PyTorch's by torch.profiler.
# A graph replays these kernels back to back, so their sum is close to the
# replayed step's time. Diagnosis, not a benchmark.
#   bash scripts/mlp_profile.sh build
# Logs under $OUT/mlp_profile when OUT is set (else /tmp/mlp_profile).
set -u
B=${1:-build}
LOG=${OUT:-/tmp}/mlp_profile
mkdir -p "$LOG"
timeout 200 ncu --nvtx --nvtx-include "mlp_step/" --launch-skip 40 --launch-count 40 \
  --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-units base \
  --csv "$B/examples/graph_mlp" > "$LOG/tcuda.csv" 2> "$LOG/tcuda.err"
python3 - "$LOG/tcuda.csv" <<'PY'
import csv, io, sys
text = open(sys.argv[1]).read()
rows = [r for r in csv.reader(io.StringIO(text[text.find('"ID"'):]))]
if not rows:
    print("tcuda: no kernels profiled"); sys.exit(0)
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value")
ks = [(r[k], float(r[v].replace(",", ""))) for r in rows[1:] if len(r) > v and r[v] not in ("", "Metric Value")]
print(f"== tcuda: {len(ks)} kernels (about two steps), {sum(t for _, t in ks) / 1e3:.1f} us")
for name, t in ks:
    print(f"{t / 1e3:8.2f} us  {name[:100]}")
PY
PYTHONPATH="$(dirname "$0")/../bench/torch" python3 - <<'PY' 2>&1 | tee "$LOG/torch.txt"
import torch
from torch.profiler import profile, ProfilerActivity
from mlp_torch import Mlp
torch.backends.cuda.matmul.allow_tf32 = False
step = Mlp().step  # bench_graph_torch.py's step
for _ in range(5):
    step()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as p:
    step()
    torch.cuda.synchronize()
ev = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
print(f"== torch: {len(ev)} kernels, {sum(e.device_time for e in ev):.1f} us")
for e in ev:
    print(f"{e.device_time:8.2f} us  {e.name[:100]}")
PY
