#!/usr/bin/env bash
# The comm oracle: runs the same cases through torch.cuda.comm
# (tests/torch/comm_torch.py) and through tc_comm_* (comm_cases, built with
# the tests when CUDA is on) and compares their lines. Exits 0 when every
# case answers alike (results' devices, dtypes, sizes, aliasing and value
# checksums; or both refuse), 1 on a difference, 77 where python3 has no
# torch or there is no GPU.
#
#   tests/torch/comm_check.sh [path/to/comm_cases]   (default: build/tests/comm_cases)
#
# ctest runs it as the test comm_torch. Both sides use min(GPUs, 4) GPUs;
# run it with 2 and with 4 (CUDA_VISIBLE_DEVICES=0,1) to cover both.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cases=${1:-build/tests/comm_cases}

# Cases where tcuda differs from PyTorch on purpose (include/tcuda/comm.h
# lists them), and where PyTorch's answer depends on its NCCL. They are
# shown, not failed.
declare -A deliberate=(
  [bcoal.cpu]="tcuda takes CPU tensors, as torch.cuda.comm's documentation says; PyTorch's code refuses them"
  [bcoal.not_first]="tcuda takes tensors that are not on devices[0]; PyTorch refuses them"
  [reduce_add.dest_not_input]="tcuda sums onto any GPU; PyTorch wants an input's device"
  [rcoal.dest_not_input]="tcuda sums onto any GPU; PyTorch wants an input's device"
  [scatter.neg_cpu]="tcuda refuses device -1; PyTorch leaves that chunk of a CPU tensor on the CPU"
  [scatter.unused_missing]="tcuda checks every device listed; PyTorch only those it copies to"
  [broadcast_out.dtype]="tcuda refuses another dtype; PyTorch refuses it where NCCL copies, converts otherwise"
  [reduce_add.dtype]="tcuda refuses mixed dtypes; PyTorch refuses them where NCCL reduces, promotes otherwise"
)

if ! python3 -c 'import torch' > /dev/null 2>&1; then
  echo "SKIP comm_check: python3 has no torch"
  exit 77
fi
if [ ! -x "$cases" ]; then
  echo "FAIL comm_check: $cases is not built (a CUDA build's tests/comm_cases)"
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME OUT COMMAND...: COMMAND's output to $tmp/OUT.out; a skip (77)
# or a failure ends the check with NAME's word for it.
run() {
  local name=$1 out=$2 rc
  shift 2
  "$@" > "$tmp/$out.out" 2> "$tmp/$out.err"
  rc=$?
  if [ $rc -eq 77 ]; then
    echo "SKIP comm_check: $(tail -1 "$tmp/$out.out")"
    exit 77
  elif [ $rc -ne 0 ]; then
    echo "FAIL comm_check: $name exited $rc"
    tail -20 "$tmp/$out.err"
    exit 1
  fi
}
run comm_torch.py torch python3 "$here/comm_torch.py"
run comm_cases tcuda "$cases"

# The case lines only ("name.case ok|error|skip ..."); comments and other
# output (the NCCL that was found) are not compared.
pattern='^[a-z_]+\.[a-z0-9_]+ (ok|error|skip)'
grep -E "$pattern" "$tmp/torch.out" > "$tmp/torch.lines"
grep -E "$pattern" "$tmp/tcuda.out" > "$tmp/tcuda.lines"
grep '^#' "$tmp/torch.out" | head -1
grep '^#' "$tmp/tcuda.out" | head -1

names() { cut -d' ' -f1 "$1"; }
if ! diff <(names "$tmp/torch.lines") <(names "$tmp/tcuda.lines") > /dev/null; then
  echo "FAIL comm_check: the two sides ran different cases (comm_torch.py and comm_cases.c differ)"
  diff <(names "$tmp/torch.lines") <(names "$tmp/tcuda.lines") | head -20
  exit 1
fi

failed=0 same=0 shown=0
while IFS= read -r name; do
  t=$(awk -v n="$name" '$1 == n { print; exit }' "$tmp/torch.lines")
  c=$(awk -v n="$name" '$1 == n { print; exit }' "$tmp/tcuda.lines")
  if [ "$t" = "$c" ]; then
    same=$((same + 1))
    continue
  fi
  why=${deliberate[$name]:-}
  if [ -n "$why" ]; then
    shown=$((shown + 1))
    echo "differs on purpose: $name ($why)"
  else
    failed=$((failed + 1))
    echo "DIFFERS: $name"
  fi
  echo "  torch: $t"
  awk -v n="# $name:" 'index($0, n) == 1 { print "  torch " $0; exit }' "$tmp/torch.out"
  echo "  tcuda: $c"
  awk -v n="# $name:" 'index($0, n) == 1 { print "  tcuda " $0; exit }' "$tmp/tcuda.out"
done < <(names "$tmp/torch.lines")

total=$(wc -l < "$tmp/torch.lines")
skipped=$(grep -c ' skip$' "$tmp/torch.lines")
if [ $failed -ne 0 ]; then
  echo "FAIL comm_check: $failed of $total cases differ ($shown more on purpose, $skipped skipped)"
  exit 1
fi
echo "PASS comm_check: $same of $total cases alike ($skipped skipped for want of GPUs), $shown differ on purpose"
