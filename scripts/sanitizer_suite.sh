#!/usr/bin/env bash
# Runs the test suite's programs under TCUDA_SANITIZER=1 (report mode) and
# checks that the stream sanitizer reports nothing in them: correct
# multi-stream code must not raise a false alarm. test_sanitizer* are left
# out (they race on purpose, and catch their reports). Builds nothing.
#   scripts/sanitizer_suite.sh [build]
# Exit 0 when every test passed (or skipped) and no report was printed.
set -u
B=${1:-build}
LOG=${OUT:-/tmp}/sanitizer_suite
mkdir -p "$LOG"
bad=0
for t in "$B"/tests/test_*; do
  name=$(basename "$t")
  [ -x "$t" ] && [ -f "$t" ] || continue
  case $name in test_sanitizer*) continue ;; esac
  env TCUDA_SANITIZER=1 TCUDA_TOOL="$B/tools/tcuda" timeout 600 "$t" > "$LOG/$name.log" 2>&1
  rc=$?
  reports=$(grep -c "^tcuda sanitizer:" "$LOG/$name.log")
  state=passed
  [ $rc -eq 77 ] && state=skipped
  [ $rc -ne 0 ] && [ $rc -ne 77 ] && state="FAILED rc=$rc" && bad=1
  [ "$reports" -ne 0 ] && bad=1
  printf '%-28s %-14s sanitizer reports: %s\n' "$name" "$state" "$reports"
done
[ $bad -eq 0 ] && echo "sanitizer suite: no reports, no failures" || echo "sanitizer suite: see $LOG"
exit $bad
