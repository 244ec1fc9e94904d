#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan, no CUDA) in
# ${BUILD:-build-fuzz} and runs each for FUZZ_TIME seconds (default 30) from
# its corpus in fuzz/corpus/<name>. New inputs go to a scratch folder, not
# into the repository; a crash leaves its input in $BUILD/fuzz/crashes/ and
# the script exits 1 after running the others. Repeat a crash with
#   build-fuzz/fuzz/fuzz_<name> <crash file>   (FUZZ_TRACE=1 prints the
# tensor harness's program). Usage: scripts/fuzz.sh [name ...]
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-fuzz}
time=${FUZZ_TIME:-30}
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(alloc_conf checkpoint_load dlpack_import ipc_handle jit_parse memviz_page memviz_read
  nn_args rng_state safetensors_file safetensors_header tensor_shape)
CC=${FUZZ_CC:-clang} cmake -S . -B "$build" -DTCUDA_CUDA=OFF -DTCUDA_FUZZ=ON -DTCUDA_WERROR=ON \
  -DTCUDA_BUILD_TESTS=OFF -DTCUDA_BUILD_BENCH=OFF -DTCUDA_BUILD_EXAMPLES=OFF > "$build.log" 2>&1 &&
  cmake --build "$build" -j "$(nproc)" >> "$build.log" 2>&1 || { tail -30 "$build.log"; exit 1; }
# Huge requests must come back as NULL (and TC_ERROR_OUT_OF_MEMORY), not abort.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
mkdir -p "$build/fuzz/crashes"
failed=()
for n in "${names[@]}"; do
  scratch=$(mktemp -d)
  echo "== fuzz_$n for ${time}s"
  if ! "$build/fuzz/fuzz_$n" -max_total_time="$time" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$build/fuzz/crashes/$n-" "$scratch" "fuzz/corpus/$n" > "$build/fuzz/$n.log" 2>&1; then
    failed+=("$n")
    grep -E 'expected|ERROR|runtime error|SUMMARY|Test unit written' "$build/fuzz/$n.log" | head -8
  else
    grep -E '^Done' "$build/fuzz/$n.log"
  fi
  rm -rf "$scratch"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (logs in $build/fuzz/, inputs in $build/fuzz/crashes/)"
  exit 1
fi
echo "fuzz: ${names[*]}: no failures"
