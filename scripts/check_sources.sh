#!/usr/bin/env bash
# The build lists its sources by name (no globs). This check finds a file
# that no CMakeLists.txt names: a library source, a test, a benchmark, an
# example, a fuzz harness or a test kernel that would silently not be built;
# and a PyTorch twin or interop check that no script runs.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=0
check() { # file, the CMakeLists.txt that must name it, the name it goes by there
  if ! grep -qE "(^|[[:space:]/(])$3([[:space:])]|\$)" "$2"; then
    echo "check_sources: $1 is not listed in $2"
    missing=1
  fi
}
for f in $(find src -name '*.c' -o -name '*.cu' | sort); do check "$f" src/sources.cmake "${f//./\\.}"; done
for f in $(find tests -maxdepth 1 -name 'test_*.c' | sort); do check "$f" tests/CMakeLists.txt "$(basename "$f" .c)"; done
for f in $(find tests/support -name '*.c' -o -name '*.cu' | sort); do check "$f" tests/CMakeLists.txt "${f#tests/}"; done
for f in $(find bench -name 'bench_*.c' | sort); do check "$f" bench/CMakeLists.txt "$(basename "$f" .c)"; done
for f in $(find examples -name '*.c' | sort); do check "$f" CMakeLists.txt "$(basename "$f" .c)"; done
for f in $(find fuzz -name 'fuzz_*.c' | sort); do check "$f" fuzz/CMakeLists.txt "$(basename "$f" .c)"; done
# The PyTorch side of the benchmarks and the GPU interop checks are no build
# target: each must be run (or imported) by a script of scripts/, bench/ or tests/.
for f in $(find bench/torch tests/torch -type f \( -name '*.py' -o -name '*.cpp' \) | sort); do
  name=$(basename "$f")
  if ! grep -rqw --include='*.sh' --include='*.py' --exclude="$name" "${name%.*}" scripts bench tests; then
    echo "check_sources: $f is run by no script in scripts/, bench/ or tests/"
    missing=1
  fi
done
[ $missing = 0 ] && echo "check_sources: every source is listed"
# Every kernel of the library waits first (runtime/cuda/pdl.cuh): graphs make the
# edges into tcuda's kernels programmatic (src/graph/cuda/graph_pdl.c).
for f in $(find src -path "*/cuda/*.cu" | sort); do
  n_global=$(grep -c "__global__" "$f" || true)
  n_entry=$(grep -A8 "__global__" "$f" | grep -c "^    tck_pdl_entry();" || true)
  if [ "$n_global" != "$n_entry" ] || ! grep -q "^namespace tcuda_kernels" "$f"; then
    echo "check_sources: $f: every __global__ function must start with tck_pdl_entry() and live in namespace tcuda_kernels"
    missing=1
  fi
done
exit $missing
