#!/usr/bin/env bash
# examples/train_gpt2 on a tiny GPT-2 (2 layers, width 64, 4 heads,
# vocabulary 256, 32 positions, batch 2) and a token file of bytes this test
# writes (tools/tcuda-tokens --bytes):
#   cpu: 10 steps exit 0 with finite losses, the last below the first; the
#        same run twice gives the same log; --save of an untrained model
#        then --init of that file gives the same first loss (the Hugging
#        Face layout round-trips), also under GPT2LMHeadModel's names
#        ("transformer.", lm_head.weight); batch 2 equals batch 1 with
#        --grad-accum 2;
#        bad flags, token files and checkpoints exit 2 with a message;
#        resume: 10 steps in one go against a run cut after step 5
#        (--stop-after 5 --checkpoint C, the schedule still of 10 steps) and
#        a new process with --resume C: the log lines (loss, lr, grad norm)
#        of steps 6..10 byte for byte the same, in float32, bfloat16, with
#        --grad-accum 2, on a token file the loader wraps around; also
#        --steps 5 then --steps 10 under a schedule that does not depend on
#        --steps; --checkpoint-every; the checkpoint is a model file in
#        --save's layout (--init reads it); --resume of a missing file, of
#        another model, of a weights-only --save file, with another weight
#        decay, or past the last step exits 2 with a message.
#   cuda: exits 77 without a GPU; else 10 steps on the GPU, float32 losses
#        within 1e-4 relative of the CPU's, --graph's within 1e-5 of eager's,
#        bfloat16 finite and within 0.05 of float32's (--graph's within 1e-4 of
#        eager's: embedding's and attention's atomic adds may round bfloat16
#        copies apart); DDP on 2 GPUs (when there are) as one process of the
#        global batch, also with --grad-accum and with --graph; resume bit for
#        bit as on the CPU (with --deterministic: embedding's backward and
#        attention's dq in a fixed order), eager, with --graph, bfloat16, and
#        under DDP on 2 GPUs
#        (rank 0's checkpoint, every rank resuming from it), also with --graph.
#   test_train_gpt2.sh TRAIN_GPT2 TCUDA_TOKENS cpu|cuda
# (The comparison with PyTorch, step by step, is tests/torch/train_gpt2_torch.py,
# and PyTorch resuming from train_gpt2's checkpoint is
# tests/torch/train_gpt2_resume_torch.py, both for a GPU machine.)
set -u
train=$1
tokens=$2
device=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }

# a text with some structure to learn: numbered lines of repeated words
python3 - "$dir/in.txt" << 'PY'
import sys
words = ["tensor", "stream", "graph", "kernel", "device", "memory", "event", "block"]
with open(sys.argv[1], "w") as f:
    for i in range(4000):
        f.write(f"{i % 97} {words[i % 8]} {words[(i * 3) % 8]} {words[(i * 5) % 8]}.\n")
PY
"$tokens" --bytes --val-tokens 4096 "$dir/in.txt" "$dir/tok" > /dev/null || {
    echo "FAIL: tcuda-tokens"
    exit 1
}
tiny=(--train "$dir/tok_train.bin" --layers 2 --width 64 --heads 4 --vocab 256 --ctx 32
    --seq 32 --batch 2 --lr 1e-3)

# run NAME ARGS...: runs train_gpt2, output in $dir/NAME.out, log $dir/NAME.log
run() { # NAME ARGS... [--launch]: with --launch (last), under ${launch[@]}
    local name=$1 pre=()
    shift
    if [ "${*: -1}" = "--launch" ]; then
        pre=("${launch[@]}")
        set -- "${@:1:$#-1}"
    fi
    "${pre[@]}" "$train" "${tiny[@]}" --log "$dir/$name.log" "$@" > "$dir/$name.out" 2>&1
    local rc=$?
    [ $rc = 0 ] || say_fail "$name exited $rc: $(tail -3 "$dir/$name.out")"
    return $rc
}
# compare A B TOL: the logs' losses within TOL relative, step by step
compare() {
    python3 - "$dir/$1.log" "$dir/$2.log" "$3" << 'PY' || say_fail "$1 vs $2"
import math, sys
a = [float(l.split()[1]) for l in open(sys.argv[1])]
b = [float(l.split()[1]) for l in open(sys.argv[2])]
tol = float(sys.argv[3])
assert len(a) == len(b) and a, (len(a), len(b))
for i, (x, y) in enumerate(zip(a, b)):
    assert math.isfinite(x) and math.isfinite(y), (i, x, y)
    assert abs(x - y) <= tol * abs(y), f"step {i + 1}: {x!r} vs {y!r} (tolerance {tol})"
print(f"{sys.argv[1].split('/')[-1]} vs {sys.argv[2].split('/')[-1]}: {len(a)} steps within {tol}")
PY
}
# resume_check NAME ARGS... [--launch]: ARGS for 10 steps in one go (NAME_whole),
# cut after step 5 with a checkpoint (NAME_first), and resumed from it in a
# new process (NAME_rest): steps 1..5 and 6..10 are the whole run's log
# lines, byte for byte
resume_check() {
    local n=$1
    shift
    run "${n}_whole" --steps 10 "$@" &&
        run "${n}_first" --steps 10 --stop-after 5 --checkpoint "$dir/$n.ckpt" "$@" &&
        run "${n}_rest" --steps 10 --resume "$dir/$n.ckpt" "$@" || return
    same_lines "$n" "${n}_whole" "${n}_first" "${n}_rest"
}
# same_lines WHAT WHOLE FIRST REST: FIRST's log is WHOLE's lines 1..5, REST's its 6..10
same_lines() {
    if ! cmp -s <(head -5 "$dir/$2.log") "$dir/$3.log"; then
        say_fail "$1: the cut run's steps 1..5 differ: $(diff <(head -5 "$dir/$2.log") "$dir/$3.log")"
    elif ! cmp -s <(sed -n 6,10p "$dir/$2.log") "$dir/$4.log"; then
        say_fail "$1: the resumed steps differ: $(diff <(sed -n 6,10p "$dir/$2.log") "$dir/$4.log")"
    else
        echo "$1: steps 6..10 resumed bit for bit"
    fi
}
# decreasing NAME: finite losses, the last below the first
decreasing() {
    python3 - "$dir/$1.log" << 'PY' || say_fail "$1's loss did not go down"
import math, sys
loss = [float(l.split()[1]) for l in open(sys.argv[1])]
assert len(loss) == 10 and all(math.isfinite(x) for x in loss), loss
assert loss[-1] < loss[0], loss
print(f"loss {loss[0]:.4f} -> {loss[-1]:.4f}")
PY
}

if [ "$device" = cuda ]; then
    "$train" "${tiny[@]}" --device cuda --steps 1 > "$dir/probe.out" 2>&1
    if grep -q "no GPU" "$dir/probe.out"; then
        echo "skipped: no GPU"
        exit 77
    fi
    run gpu --device cuda --steps 10 && decreasing gpu
    run cpu --device cpu --steps 10 && compare gpu cpu 1e-4
    run graph --device cuda --steps 10 --graph && compare graph gpu 1e-5
    run bf16 --device cuda --steps 10 --dtype bfloat16 && python3 - "$dir/bf16.log" \
        "$dir/gpu.log" << 'PY' || say_fail "bfloat16 strays from float32"
import math, sys
a = [float(l.split()[1]) for l in open(sys.argv[1])]
b = [float(l.split()[1]) for l in open(sys.argv[2])]
assert all(math.isfinite(x) and abs(x - y) < 0.05 for x, y in zip(a, b)), (a, b)
print("bfloat16 within 0.05 of float32")
PY
    run graph_bf16 --device cuda --steps 10 --graph --dtype bfloat16 && compare graph_bf16 bf16 1e-4
    grep -q "peak [0-9]* MiB" "$dir/gpu.out" || say_fail "no peak memory: $(head -3 "$dir/gpu.out")"
    # resume bit for bit (--deterministic: embedding's backward and attention's dq without
    # atomic adds)
    resume_check resume_gpu --device cuda --deterministic
    resume_check resume_graph --device cuda --deterministic --graph
    resume_check resume_gpu_bf16 --device cuda --deterministic --dtype bfloat16
    # DDP on 2 GPUs (when there are): 2 ranks of batch 1 train as one process of batch 2,
    # also with gradient accumulation (the first micro-step without communication)
    # and with the step captured as a graph
    ngpu=$( (nvidia-smi -L 2> /dev/null || true) | grep -c '^GPU')
    if [ "$ngpu" -ge 2 ]; then
        launch=("$(dirname "$tokens")/tcuda-run" -n 2 --timeout 120 --)
        run batch2 --device cuda --steps 10 --batch 2 &&
            run ddp2 --steps 10 --batch 1 --launch && compare ddp2 batch2 1e-5
        run accum2 --device cuda --steps 5 --batch 2 --grad-accum 2 &&
            run ddp2_accum --steps 5 --batch 1 --grad-accum 2 --launch &&
            compare ddp2_accum accum2 1e-5
        # the whole step as a graph under DDP: the buckets' all_reduces replayed
        run ddp2_graph --steps 10 --batch 1 --graph --launch && compare ddp2_graph ddp2 1e-5
        # rank 0 writes the checkpoint, both ranks resume from it
        resume_check resume_ddp2 --batch 1 --deterministic --launch
        resume_check resume_ddp2_graph --batch 1 --deterministic --graph --launch
    else
        echo "DDP not checked: $ngpu GPU(s)"
    fi
    [ $fail = 0 ] && echo "test_train_gpt2 (cuda): passed"
    exit $fail
fi

run train --device cpu --steps 10 --val "$dir/tok_val.bin" --val-every 5 && decreasing train
grep -q "^val loss" "$dir/train.out" || say_fail "no validation loss: $(cat "$dir/train.out")"
run again --device cpu --steps 10 --val "$dir/tok_val.bin" --val-every 5 && compare again train 0
# an untrained model saved (lr 0 changes nothing), then read back
run saved --device cpu --steps 1 --lr 0 --save "$dir/init.safetensors"
run loaded --device cpu --steps 1 --init "$dir/init.safetensors" && compare loaded saved 0
# the same weights under Hugging Face's GPT2LMHeadModel names ("transformer."
# and the tied lm_head.weight); a missing tensor; a tensor of the wrong shape
python3 - "$dir" << 'PY' || say_fail "rewriting the checkpoint"
import json, struct, sys
d = sys.argv[1]
data = open(f"{d}/init.safetensors", "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header, body = json.loads(data[8:8 + n]), data[8 + n:]
def write(name, h, extra=b""):
    raw = json.dumps(h).encode()
    raw += b" " * (-len(raw) % 8)
    open(f"{d}/{name}", "wb").write(struct.pack("<Q", len(raw)) + raw + body + extra)
meta = header.pop("__metadata__")
hf = {"transformer." + k: v for k, v in header.items()}
a, b = header["wte.weight"]["data_offsets"]  # lm_head: a copy of wte's bytes at the end
hf["lm_head.weight"] = dict(header["wte.weight"], data_offsets=[len(body), len(body) + b - a])
write("prefixed.safetensors", dict(hf, __metadata__=meta), body[a:b])
missing = dict(header)
missing["unused"] = missing.pop("h.1.mlp.c_fc.weight")
write("missing.safetensors", missing)
bad = dict(header)
bad["wpe.weight"] = dict(bad["wpe.weight"], shape=bad["wpe.weight"]["shape"][::-1])
write("misshapen.safetensors", dict(bad, __metadata__=meta))
PY
run prefixed --device cpu --steps 1 --init "$dir/prefixed.safetensors" && compare prefixed saved 0
run bf16 --device cpu --steps 3 --dtype bfloat16
run accum --device cpu --steps 3 --batch 1 --grad-accum 2
run batch2 --device cpu --steps 3 && compare accum batch2 1e-6

# resume: steps 6..10 of a resumed run are those of a run that never stopped
resume_check resume --device cpu
resume_check resume_bf16 --device cpu --dtype bfloat16
resume_check resume_accum --device cpu --batch 1 --grad-accum 2
# 300 tokens hold 4 global micro-batches: the loader wraps twice in 10 steps,
# and the resumed one must stand where it would have
python3 - "$dir/tok_train.bin" "$dir/small.bin" << 'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
h = list(struct.unpack("<256i", data[:1024]))
h[2] = 300
open(sys.argv[2], "wb").write(struct.pack("<256i", *h) + data[1024:1024 + 600])
PY
resume_check resume_wrap --device cpu --train "$dir/small.bin"
# --steps 5, then --steps 10: the same steps where the schedule does not
# depend on --steps (warmup, then a constant rate)
flat=(--device cpu --warmup 2 --min-lr-frac 1)
run flat_whole --steps 10 "${flat[@]}" &&
    run flat_first --steps 5 --checkpoint "$dir/flat.ckpt" "${flat[@]}" &&
    run flat_rest --steps 10 --resume "$dir/flat.ckpt" "${flat[@]}" &&
    same_lines "--steps 5 then 10" flat_whole flat_first flat_rest
# --checkpoint-every 3, cut after 7: saved after steps 3, 6 and 7; then resumed
if run every_first --device cpu --steps 10 --stop-after 7 --checkpoint "$dir/every.ckpt" \
    --checkpoint-every 3 --save "$dir/every.safetensors" &&
    run every_rest --device cpu --steps 10 --resume "$dir/every.ckpt"; then
    cmp -s <(sed -n 8,10p "$dir/resume_whole.log") "$dir/every_rest.log" ||
        say_fail "--checkpoint-every: steps 8..10 differ from the whole run's"
fi
[ "$(grep -c '^checkpoint .*every.ckpt (step [367])$' "$dir/every_first.out")" = 3 ] ||
    say_fail "--checkpoint-every 3 --stop-after 7 did not save after steps 3, 6, 7: \
$(grep ^checkpoint "$dir/every_first.out")"
# the checkpoint is a model file: its parameters are --save's, byte for byte
# (Hugging Face's names and layout), and --init reads it
python3 - "$dir/every.ckpt" "$dir/every.safetensors" << 'PY' || say_fail "the checkpoint is not --save's model"
import json, struct, sys
def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    h = json.loads(data[8:8 + n])
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items()}
ck, model = read(sys.argv[1]), read(sys.argv[2])
assert model and all(ck[k] == v for k, v in model.items()), [k for k, v in model.items() if ck.get(k) != v]
assert "optimizer1.ln_f.weight.exp_avg" in ck and "rng.cpu" in ck, sorted(ck)[:8]
print(f"checkpoint: {len(model)} parameters as --save writes them")
PY
run init_ckpt --device cpu --steps 1 --lr 0 --init "$dir/every.ckpt" &&
    run init_saved --device cpu --steps 1 --lr 0 --init "$dir/every.safetensors" &&
    compare init_ckpt init_saved 0

# bad input: exit 2 and a message naming the problem
expect_bad() { # WHAT PATTERN ARGS...
    local what=$1 pattern=$2
    shift 2
    "$train" "$@" > "$dir/bad.out" 2>&1
    local rc=$?
    if [ $rc != 2 ]; then
        say_fail "$what exited $rc, want 2: $(tail -2 "$dir/bad.out")"
    elif ! grep -q -- "$pattern" "$dir/bad.out"; then
        say_fail "$what: no \"$pattern\" in: $(cat "$dir/bad.out")"
    fi
}
printf 'not a token file at all, and long enough to hold a header? no.' > "$dir/junk.bin"
head -c 2000 "$dir/tok_train.bin" > "$dir/short.bin"
python3 - "$dir" << 'PY'
import struct, sys
d = sys.argv[1]
def write(name, magic, version, toks, count=None):
    h = [0] * 256
    h[0], h[1], h[2] = magic, version, len(toks) if count is None else count
    with open(f"{d}/{name}", "wb") as f:
        f.write(struct.pack("<256i", *h) + struct.pack(f"<{len(toks)}H", *toks))
write("magic.bin", 12345, 1, [1] * 100)
write("version.bin", 20240520, 7, [1] * 100)
write("big_token.bin", 20240520, 1, [1] * 100 + [300] + [1] * 100)
write("few.bin", 20240520, 1, [1] * 40)
write("count.bin", 20240520, 1, [1] * 100, count=1000)
PY
cpu=(--device cpu)
expect_bad "an unknown flag" "unknown flag" "${tiny[@]}" "${cpu[@]}" --frobnicate 1
expect_bad "--batch 0" "--batch wants" "${tiny[@]}" "${cpu[@]}" --batch 0
expect_bad "--lr abc" "--lr wants" "${tiny[@]}" "${cpu[@]}" --lr abc
expect_bad "--dtype float16" "unknown flag or value" "${tiny[@]}" "${cpu[@]}" --dtype float16
expect_bad "--steps without a value" "needs a value" "${tiny[@]}" "${cpu[@]}" --steps
expect_bad "no --train" "--train is required" --layers 2 "${cpu[@]}"
expect_bad "a missing token file" "cannot open" "${tiny[@]}" "${cpu[@]}" --train "$dir/none.bin"
expect_bad "a file too short for a header" "shorter than" "${tiny[@]}" "${cpu[@]}" \
    --train "$dir/junk.bin"
expect_bad "a bad magic" "magic 20240520" "${tiny[@]}" "${cpu[@]}" --train "$dir/magic.bin"
expect_bad "a bad version" "version 1" "${tiny[@]}" "${cpu[@]}" --train "$dir/version.bin"
expect_bad "a truncated file" "does not match" "${tiny[@]}" "${cpu[@]}" --train "$dir/short.bin"
expect_bad "a wrong token count" "does not match" "${tiny[@]}" "${cpu[@]}" --train "$dir/count.bin"
expect_bad "a token past the vocabulary" "outside the model's vocabulary" "${tiny[@]}" "${cpu[@]}" \
    --train "$dir/big_token.bin"
expect_bad "too few tokens for a batch" "needs 65" "${tiny[@]}" "${cpu[@]}" --train "$dir/few.bin"
expect_bad "a bad validation file" "magic 20240520" "${tiny[@]}" "${cpu[@]}" --val "$dir/magic.bin"
expect_bad "--seq past the positions" "longer than the model" "${tiny[@]}" "${cpu[@]}" --seq 33
expect_bad "heads that do not divide the width" "not one" "${tiny[@]}" "${cpu[@]}" --heads 5
expect_bad "--graph on the CPU" "needs --device cuda" "${tiny[@]}" "${cpu[@]}" --graph
expect_bad "--init of a text file" "in.txt" "${tiny[@]}" "${cpu[@]}" --init "$dir/in.txt"
expect_bad "--init of a missing file" "none.safetensors" "${tiny[@]}" "${cpu[@]}" \
    --init "$dir/none.safetensors"
expect_bad "--init without a tensor" "no tensor \"h.1.mlp.c_fc.weight\"" "${tiny[@]}" \
    "${cpu[@]}" --init "$dir/missing.safetensors"
expect_bad "--init with a misshapen tensor" "wpe.weight\" is 2-d \[64, 32\]" "${tiny[@]}" \
    "${cpu[@]}" --init "$dir/misshapen.safetensors"
if [ -f "$dir/init.safetensors" ]; then # a checkpoint of another vocabulary than the tokens need
    expect_bad "tokens past an --init model's vocabulary" "outside the model's vocabulary" \
        "${tiny[@]}" "${cpu[@]}" --init "$dir/init.safetensors" --train "$dir/big_token.bin"
fi
# --resume's bad input
if [ -f "$dir/resume.ckpt" ]; then
    ck=(--resume "$dir/resume.ckpt" --steps 10)
    expect_bad "--resume of a missing file" "none.ckpt" "${tiny[@]}" "${cpu[@]}" \
        --resume "$dir/none.ckpt"
    expect_bad "--resume into another width" "has shape \[256, 64\] in the file, \[256, 32\] live" \
        "${tiny[@]}" "${cpu[@]}" "${ck[@]}" --width 32
    expect_bad "--resume into another depth" "no tensor \"h.2.ln_1.weight\"" "${tiny[@]}" \
        "${cpu[@]}" "${ck[@]}" --layers 3
    expect_bad "--resume into other heads" "model of 4 heads, this one has 2" "${tiny[@]}" \
        "${cpu[@]}" "${ck[@]}" --heads 2
    expect_bad "--resume with another weight decay" "weight_decay" "${tiny[@]}" "${cpu[@]}" \
        "${ck[@]}" --weight-decay 0.2
    expect_bad "--resume of a weights-only --save file" "not a checkpoint" "${tiny[@]}" \
        "${cpu[@]}" --resume "$dir/init.safetensors"
    expect_bad "--resume of a text file" "in.txt" "${tiny[@]}" "${cpu[@]}" --resume "$dir/in.txt"
    expect_bad "--resume past the last step" "at step 5: --steps 5 leaves nothing" "${tiny[@]}" \
        "${cpu[@]}" --resume "$dir/resume.ckpt" --steps 5
fi
expect_bad "--checkpoint-every without --checkpoint" "needs --checkpoint" "${tiny[@]}" \
    "${cpu[@]}" --checkpoint-every 2
expect_bad "--stop-after 0" "--stop-after wants" "${tiny[@]}" "${cpu[@]}" --stop-after 0
[ $fail = 0 ] && echo "test_train_gpt2: passed"
exit $fail
