#!/usr/bin/env bash
# Multi-GPU communication benchmark: tcuda (bench/bench_comm from a CUDA
# build, tools/tcuda-run for the process groups) beside PyTorch
# (torch.cuda.comm, torch.distributed on NCCL) and raw NCCL on the same
# machine: broadcast and reduce_add of 256 MiB over 2 and 4 GPUs, all_reduce
# of 256 MiB in 2- and 4-process groups. From the repository root, with the
# build folder as argument (it builds nothing):
#     bash bench/run_comm.sh build
# Skips cleanly (exit 0) with fewer than 2 GPUs. Logs go to "$OUT" when set.
# About 30 s on 4 GPUs. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -u
BUILD="${1:-build}"
LOG="${OUT:-$(mktemp -d)}"
mkdir -p "$LOG"
HERE="$(cd "$(dirname "$0")" && pwd)"
BENCH="$BUILD/bench/bench_comm"
if [ ! -x "$BENCH" ]; then
    echo "missing $BENCH: build first (cmake --build $BUILD, with CUDA)" >&2
    exit 1
fi
export NCCL_NVLS_ENABLE=0
gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU')
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$LOG/gpu.txt" 2>&1 || true
cat "$LOG/gpu.txt"
if [ "$gpus" -lt 2 ]; then
    echo "skipped: the comm benchmark needs 2 or more GPUs, this machine has $gpus"
    exit 0
fi
# NCCL: the system's, else the one PyTorch ships (nvidia-nccl wheel).
if [ -z "${TCUDA_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2'; then
    lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
    [ -n "$lib" ] && [ -f "$lib" ] && export TCUDA_NCCL_LIBRARY="$lib"
fi
echo "NCCL: ${TCUDA_NCCL_LIBRARY:-libnccl.so.2 from the system}"

echo "== tcuda =="
rc=0
"$BENCH" comm | tee "$LOG/tcuda.txt" || rc=1
for w in 2 4; do
    [ "$w" -le "$gpus" ] || break
    "$HERE/../tools/tcuda-run" -n "$w" --master-port $((29700 + w)) -- "$BENCH" dist \
        | sed 's/^\[rank 0\] //' | tee -a "$LOG/tcuda.txt" || rc=1
done

echo "== PyTorch =="
python3 "$HERE/torch/bench_comm_torch.py" 2>&1 | tee "$LOG/torch.txt" || rc=1

echo "== side by side =="
python3 - "$LOG/tcuda.txt" "$LOG/torch.txt" <<'PY' | tee "$LOG/summary.txt"
import re, sys
def parse(path):
    rows = {}
    for line in open(path):
        m = re.match(r"(.{34})\s+([0-9.]+)\s+GB/s", line)
        if m:
            rows[m.group(1).strip()] = float(m.group(2))
    return rows
t, p = parse(sys.argv[1]), parse(sys.argv[2])
print(f"{'row':<34} {'tcuda':>9} {'torch':>9} {'t/torch':>8} {'raw nccl':>9} {'t/raw':>7}")
raw_of = {"comm broadcast": "raw nccl broadcast", "comm reduce_add": "raw nccl reduce",
          "dist all_reduce bus": "raw nccl all_reduce bus", "dist all_reduce": "raw nccl all_reduce"}
for k, v in t.items():
    if k.startswith("raw"):
        continue
    base, n = k.rsplit(" ", 1)
    r = t.get(f"{raw_of.get(base, '?')} {n}")
    tp = f"{v / p[k]:8.3f}" if p.get(k) else f"{'':>8}"
    rr = f"{r:9.2f} {v / r:7.3f}" if r else f"{'':>9} {'':>7}"
    print(f"{k:<34} {v:9.2f} {p.get(k, 0):9.2f} {tp} {rr}")
print("targets: t/torch >= 0.97, t/raw >= 0.95")
PY
echo "logs in $LOG"
exit $rc
