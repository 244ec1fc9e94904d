#!/usr/bin/env bash
# Checks that the C, CUDA and C++ sources follow .clang-format; lists the
# files that do not and exits 1. `scripts/check_format.sh --fix` formats them
# in place instead. CLANG_FORMAT picks the binary (default clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format}
mapfile -t files < <(find src include tests tools bench examples fuzz -type f \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \) | sort)
if [ "${1:-}" = --fix ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$cf" --dry-run -Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} of ${#files[@]} files differ from .clang-format ($("$cf" --version)):"
  printf '  %s\n' "${bad[@]}"
  echo "the first differences:"
  "$cf" --dry-run "${bad[0]}" 2>&1 | head -20
  echo "fix with: scripts/check_format.sh --fix"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted as .clang-format says"
