#!/usr/bin/env bash
# Where the GPT example's GPU time goes, beside PyTorch's, on the GPU
# machine: the kernels of one prefill (batch 8 x 512) and of one eager
# decode step, each kernel timed by Nsight Compute (ncu, NVTX ranges
# "prefill" and "decode_step" of examples/gpt.c) and PyTorch's by
# torch.profiler on the same weights. Prints the kernels that take the most
# time, grouped by name. Diagnosis, not a benchmark.
#   bash scripts/gpt_profile.sh build [dtype]
# Logs under $OUT/gpt_profile when OUT is set (else /tmp/gpt_profile).
set -u
B=${1:-build}
DT=${2:-bfloat16}
LOG=${OUT:-/tmp}/gpt_profile
M=$(mktemp -d /tmp/gpt-model.XXXX)
mkdir -p "$LOG"
python3 bench/torch/gpt_torch.py write "$M" --new 4 > "$LOG/write.txt" || exit 1
prof() { # name nvtx-range launch-count gpt-args...
  local name=$1 range=$2 count=$3
  shift 3
  timeout 240 ncu --nvtx --nvtx-include "$range/" --launch-count "$count" --clock-control none \
    --metrics gpu__time_duration.sum --print-units base --csv "$B/examples/gpt" "$M/model.safetensors" \
    --device cuda --dtype "$DT" "$@" > "$LOG/$name.csv" 2> "$LOG/$name.err"
  python3 - "$LOG/$name.csv" "$name" <<'PY'
import csv, io, sys
text = open(sys.argv[1]).read()
rows = [r for r in csv.reader(io.StringIO(text[text.find('"ID"'):]))]
if not rows:
    print(sys.argv[2], ": no kernels profiled"); sys.exit(0)
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value")
agg = {}
for r in rows[1:]:
    if len(r) <= v or r[v] in ("", "Metric Value"):
        continue
    ns = float(r[v].replace(",", ""))
    name = r[k][:90]
    c, t = agg.get(name, (0, 0.0))
    agg[name] = (c + 1, t + ns)
total = sum(t for _, t in agg.values())
print(f"== tcuda {sys.argv[2]}: {sum(c for c, _ in agg.values())} kernels, {total / 1e3:.1f} us")
for name, (c, t) in sorted(agg.items(), key=lambda x: -x[1][1])[:14]:
    print(f"{t / 1e3:9.1f} us {c:4d}x  {name}")
PY
}
prof prefill prefill 400 --bench
prof decode decode_step 400 --new 3
python3 - "$M" "$DT" <<'PY' 2>&1 | tee "$LOG/torch.txt"
import sys, torch
sys.path.insert(0, "bench/torch")
from gpt_torch import GPT, load_safetensors
dt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[sys.argv[2]]
w, meta = load_safetensors(sys.argv[1] + "/model.safetensors", "cuda")
m = GPT({k: v.to(dt) for k, v in w.items()}, int(meta["n_head"]))
V = w["wte.weight"].shape[0]
x = torch.randint(0, V, (8, 512), device="cuda")
pos = torch.arange(512, device="cuda")
from torch.profiler import profile, ProfilerActivity
with torch.no_grad():
    m.forward(x, pos)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        m.forward(x, pos)
        torch.cuda.synchronize()
ev = [e for e in p.key_averages() if e.device_time_total > 0]
tot = sum(e.self_device_time_total for e in ev)
print(f"== torch prefill: {tot:.1f} us")
for e in sorted(ev, key=lambda e: -e.self_device_time_total)[:14]:
    if e.self_device_time_total > 0:
        print(f"{e.self_device_time_total:9.1f} us {e.count:4d}x  {e.key[:90]}")
PY
rm -rf "$M"
