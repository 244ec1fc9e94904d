#!/usr/bin/env bash
# torch.compile's caches carried between GPU calls, so that a call can run
# max-autotune's training row without its minutes of autotuning (bench/run.sh
# train, bench/torch/train_gpt2_bench.py):
#   inductor_cache.sh env DIR      print the exports that point Inductor and
#                                  Triton at DIR (eval "$(... env DIR)")
#   inductor_cache.sh pack DIR OUT  DIR's Inductor cache, without Triton's
#                                  kernels (compiled again from it), as
#                                  OUT/inductor.tgz.part-aa, -ab, ... of at
#                                  most 15 MiB each (a call returns files of
#                                  up to 16 MiB)
#   inductor_cache.sh unpack FROM DIR  the parts under FROM back into DIR
# The cache holds compiled graphs and each GEMM's autotuning choice, keyed by
# the GPU, the PyTorch build and the code: a different card or version only
# misses it.
set -euo pipefail
case ${1:-} in
  env)
    echo "export TORCHINDUCTOR_CACHE_DIR=$2 TRITON_CACHE_DIR=$2/triton" ;;
  pack)
    mkdir -p "$3"
    tar czf - --exclude=./triton -C "$2" . | split -b 15m - "$3/inductor.tgz.part-"
    ls -l "$3"/inductor.tgz.part-* ;;
  unpack)
    mkdir -p "$3"
    if compgen -G "$2/inductor.tgz.part-*" > /dev/null; then
      cat "$2"/inductor.tgz.part-* | tar xzf - -C "$3"
    fi ;;
  *)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
    exit 2 ;;
esac
