#!/usr/bin/env bash
# GPT-2-small on tcuda (examples/gpt from a CUDA build) beside PyTorch on the
# same GPU in the same run: first the check (logits and greedy tokens against
# PyTorch's, eager and with the decode step as a graph), then prefill
# (batch 8 x 512) and decode (batch 1, 256 new tokens) tokens/s in float32
# and bfloat16, eager and with graphs. From the repository root:
#     bash bench/run_gpt.sh build
# Logs go to "$OUT" when set (else a temporary folder). A few minutes.
# GPT_CHECK_ONLY=1 stops after the checks (no timing).
set -u
BUILD="${1:-build}"
LOG="${OUT:-$(mktemp -d)}"
MODEL="$LOG/gpt2"
GPT="$BUILD/examples/gpt"
if [ ! -x "$GPT" ]; then
    echo "missing $GPT: build first (cmake --build $BUILD, with CUDA)" >&2
    exit 1
fi
mkdir -p "$MODEL"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG/gpu.txt"
rc=0
python3 bench/torch/gpt_torch.py write "$MODEL" | tee "$LOG/write.txt" || exit 1
for g in "" --graph; do
    "$GPT" "$MODEL/model.safetensors" --device cuda $g --check "$MODEL/ref.safetensors" \
        2>&1 | tee -a "$LOG/check.txt" || rc=1
done
"$GPT" "$MODEL/model.safetensors" --device cpu --check "$MODEL/ref.safetensors" \
    2>&1 | tee -a "$LOG/check.txt" || rc=1
[ "${GPT_CHECK_ONLY:-0}" = 1 ] && exit $rc
for dt in float32 bfloat16; do
    python3 bench/torch/gpt_torch.py bench "$MODEL" --dtype $dt 2>&1 | tee -a "$LOG/rows.txt" || rc=1
    "$GPT" "$MODEL/model.safetensors" --device cuda --dtype $dt --bench 2>&1 |
        grep '^tcuda' | tee -a "$LOG/rows.txt" || rc=1
    "$GPT" "$MODEL/model.safetensors" --device cuda --dtype $dt --graph --bench 2>&1 |
        grep '^tcuda decode' | tee -a "$LOG/rows.txt" || rc=1
done
exit $rc
