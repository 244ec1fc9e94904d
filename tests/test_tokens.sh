#!/usr/bin/env bash
# tools/tcuda-tokens: bytes mode writes llm.c's header and the text's bytes,
# val first; bad arguments exit 2, an unreadable input 1. (GPT-2 tokens need
# tiktoken, which CI lacks: the bytes mode is what is checked here.)
set -u
tool=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
expect_rc() { # want got what
  [ "$1" = "$2" ] || { echo "FAIL: $3 exited $2, want $1"; fail=1; }
}
head -c 1000 /dev/zero | tr '\0' 'a' > "$dir/in.txt"
printf 'xyz' >> "$dir/in.txt"
"$tool" --bytes --val-tokens 50 "$dir/in.txt" "$dir/t" > "$dir/out.txt" 2>&1
expect_rc 0 $? "a good input"
grep -q "1003 bytes tokens" "$dir/out.txt" || { echo "FAIL: $(cat "$dir/out.txt")"; fail=1; }
python3 - "$dir" << 'PY' || fail=1
import struct, sys
d = sys.argv[1]
for name, n, tail in (("t_val.bin", 50, b"a"), ("t_train.bin", 953, b"xyz")):
    data = open(f"{d}/{name}", "rb").read()
    h = struct.unpack("<256i", data[:1024])
    toks = struct.unpack(f"<{(len(data) - 1024) // 2}H", data[1024:])
    assert h[0] == 20240520 and h[1] == 1 and h[2] == n and not any(h[3:]), (name, h[:4])
    assert len(toks) == n and bytes(toks[-len(tail):]) == tail, (name, len(toks))
print("token files: headers and tokens as written")
PY
"$tool" --bytes "$dir/missing.txt" "$dir/m" > /dev/null 2>&1
expect_rc 1 $? "a missing input"
"$tool" --bytes --val-tokens -1 "$dir/in.txt" "$dir/m" > /dev/null 2>&1
expect_rc 2 $? "--val-tokens -1"
printf 'a' > "$dir/one.txt"
"$tool" --bytes "$dir/one.txt" "$dir/m" > /dev/null 2>&1
expect_rc 1 $? "a one-token input"
[ $fail = 0 ] && echo "test_tokens: passed"
exit $fail
