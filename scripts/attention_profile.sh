#!/usr/bin/env bash
# What limits the fused attention kernels (attention.cu) at GPT-2 small's
# prefill shape: Nsight Compute's throughput, occupancy and warp-stall
# sections for one launch of the bfloat16 (tensor core) kernel and one of
# the float32 kernel, from bench_attention. Diagnosis, not a benchmark.
#   bash scripts/attention_profile.sh build
# Logs under $OUT/attention_profile when OUT is set (else /tmp/...).
set -u
B=${1:-build}
LOG=${OUT:-/tmp}/attention_profile
mkdir -p "$LOG"
for k in attention_mma attention_f32; do
  timeout 120 ncu --kernel-name "regex:$k" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    "$B/bench/bench_attention" 5 > "$LOG/$k.txt" 2>&1
  echo "== $k"
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Dynamic Shared|Static Shared" "$LOG/$k.txt" | sed 's/  */ /g' | head -24
  grep -E "^ +(OPT|WRN|INF) " -A2 "$LOG/$k.txt" | grep -iE "stall|bank|latency|occupancy|uncoalesced" | sed 's/  */ /g' | head -8
done
