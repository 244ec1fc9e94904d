#!/bin/sh
# Stream sanitizer: host time per op of a two-stream loop with events, off
# (never enabled), on, and off again with the hooks installed, beside PyTorch
# with and without TORCH_CUDA_SANITIZER=1 on the same loop. Builds
# nothing; run from the repository root after a CUDA build:
#   bash bench/run_sanitizer.sh [build]
# Logs go under $OUT/bench_sanitizer if OUT is set (else /tmp). Under 60 s:
# PyTorch's sanitizer is slow, so its loop runs fewer iterations.
set -eu
B=${1:-build}
LOG=${OUT:-/tmp}/bench_sanitizer
mkdir -p "$LOG"
env -u TCUDA_SANITIZER "$B/bench/bench_sanitizer" 20000 7 > "$LOG/tcuda.csv"
: > "$LOG/torch.csv"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    env -u TORCH_CUDA_SANITIZER timeout 60 python3 bench/torch/bench_sanitizer_torch.py 5000 5 \
        >> "$LOG/torch.csv" 2> "$LOG/torch_off.err" || echo "torch_off,error" >> "$LOG/torch.csv"
    TORCH_CUDA_SANITIZER=1 timeout 60 python3 bench/torch/bench_sanitizer_torch.py 300 3 \
        >> "$LOG/torch.csv" 2> "$LOG/torch_on.err" || echo "torch_on,error" >> "$LOG/torch.csv"
fi
python3 - "$LOG/tcuda.csv" "$LOG/torch.csv" <<'PY' | tee "$LOG/table.txt"
import sys
text = open(sys.argv[1]).read()
if not text.startswith("mode,"):  # skipped (no GPU): say why
    print(text.strip()); sys.exit(0)
rows = [l.split(",") for l in text.split()[1:]]
rows += [l.split(",") for l in open(sys.argv[2]).read().split()]
base = {r[0]: float(r[2]) for r in rows if len(r) > 2 and r[1] != "error"}
print("stream sanitizer: host us per op (3 kernels + 1 event record + 1 wait per iteration)")
hdr = "%-22s %10s %10s %12s %8s" % ("run", "us/iter", "us/op", "x its off", "reports")
print(hdr); print("-" * len(hdr))
names = {"off": "tcuda, sanitizer off", "on": "tcuda, sanitizer on",
         "off_installed": "tcuda, on then off",
         "torch_off": "torch, sanitizer off", "torch_on": "torch, CSAN on"}
for r in rows:
    if len(r) < 3 or r[1] == "error":
        print("%-22s error (see logs)" % names.get(r[0], r[0])); continue
    ref = base.get("torch_off" if r[0].startswith("torch") else "off")
    ratio = float(r[2]) / ref if ref else float("nan")
    print("%-22s %10.2f %10.2f %12.2f %8s" % (names.get(r[0], r[0]), float(r[1]), float(r[2]), ratio, r[3]))
if "on" in base and "torch_on" in base:
    print("tcuda on vs torch CSAN on: %.1fx faster per op" % (base["torch_on"] / base["on"]))
PY
