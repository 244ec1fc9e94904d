#!/usr/bin/env bash
# tools/tcuda-run without a GPU: its ranks are shell commands. Each rank
# sees RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and
# NCCL_NVLS_ENABLE=0 unless set); all succeeding is 0; a failing rank stops
# the others (SIGTERM to each rank's process group, so what a rank started
# goes too) and the launcher exits with its status, naming it; a rank that
# ignores SIGTERM is SIGKILLed after --kill-after; SIGTERM and Ctrl-C to the
# launcher stop every rank the same way and exit 143 and 130. Time bounds
# here only tell a stop from a hang (the sleeping ranks would run 60 s).
#
#   tests/test_tcuda_run.sh path/to/tcuda-run
# shellcheck disable=SC2016 # the ranks' commands expand in the ranks
set -u
run=${1:?usage: test_tcuda_run.sh path/to/tcuda-run}
run=$(cd "$(dirname "$run")" && pwd)/$(basename "$run")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fails=0

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
# expect WHAT GOT WANTED
expect() { [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"; }
# has WHAT FILE TEXT: the file holds that line fragment
has() { grep -qF -- "$3" "$2" || { fail "$1: no '$3' in $2:"; sed 's/^/    /' "$2"; }; }
hasnt() { ! grep -qF -- "$3" "$2" || { fail "$1: '$3' in $2:"; sed 's/^/    /' "$2"; }; }

# True once every pid in the files $tmp/pids.* is gone (or a zombie), within 5 s.
all_gone() {
    for ((i = 0; i < 50; i++)); do
        local left=0
        for p in $(cat "$tmp"/pids.* 2> /dev/null); do
            local st
            st=$(sed 's/.*) //' "/proc/$p/stat" 2> /dev/null | cut -d' ' -f1)
            [ -n "$st" ] && [ "$st" != Z ] && left=1
        done
        [ "$left" = 0 ] && return 0
        sleep 0.1
    done
    return 1
}
# Waits (10 s at most) until N ranks wrote their ready files.
wait_ready() {
    for ((i = 0; i < 100; i++)); do
        [ "$(ls "$tmp"/ready.* 2> /dev/null | wc -l)" -ge "$1" ] && return 0
        sleep 0.1
    done
    return 1
}
now() { date +%s%N; }
secs_since() { echo $((($(now) - $1) / 1000000000)); }

# A rank that sleeps 60 s in a child (which it records), says "got TERM"
# when it gets SIGTERM, and exits 0. With IGNORE=1 it ignores SIGTERM.
cat > sleeper.sh << 'EOF'
trap 'echo "got TERM"; exit 0' TERM
[ "${IGNORE:-0}" = 1 ] && trap '' TERM
sleep 60 &
echo "$$ $!" > "$T/pids.$RANK"
touch "$T/ready.$RANK"
wait
EOF
export T="$tmp"

# ---- every rank's environment; all succeed
"$run" -n 3 --master-addr 10.9.8.7 --master-port 23456 -- \
    bash -c 'echo "env $RANK $LOCAL_RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT"' \
    > out.txt 2> err.txt
expect "all succeed" $? 0
for r in 0 1 2; do
    has "rank $r's environment" out.txt "[rank $r] env $r $r 3 10.9.8.7 23456"
done
[ ! -s err.txt ] || fail "all succeed: the launcher said: $(cat err.txt)"
unset NCCL_NVLS_ENABLE
"$run" -n 2 -- bash -c 'echo "nvls=$NCCL_NVLS_ENABLE"' > out.txt 2>&1
has "NCCL_NVLS_ENABLE unset" out.txt "[rank 1] nvls=0"
NCCL_NVLS_ENABLE=1 "$run" -n 2 -- bash -c 'echo "nvls=$NCCL_NVLS_ENABLE"' > out.txt 2>&1
has "NCCL_NVLS_ENABLE set" out.txt "[rank 0] nvls=1"
"$run" -n 1 --timeout 2.5 -- bash -c 'echo "timeout=$TCUDA_DIST_TIMEOUT"' > out.txt 2>&1
has "--timeout" out.txt "[rank 0] timeout=2.5"

# ---- rank 1 fails: the others are stopped, rank 1's status is the launcher's
rm -f pids.* ready.*
t0=$(now)
"$run" -n 3 -- bash -c 'if [ "$RANK" = 1 ]; then
    while [ "$(ls "$T"/ready.* 2> /dev/null | wc -l)" -lt 2 ]; do sleep 0.05; done; echo bye; exit 3; fi
    exec bash "$T/sleeper.sh"' > out.txt 2> err.txt
expect "rank 1 fails: status" $? 3
[ "$(secs_since "$t0")" -lt 30 ] || fail "rank 1 fails: the others were not stopped"
has "rank 1 fails" err.txt "tcuda-run: rank 1 exited with status 3; stopping the others"
has "rank 1 fails" out.txt "[rank 1] bye"
has "rank 0 stopped" out.txt "[rank 0] got TERM"
has "rank 2 stopped" out.txt "[rank 2] got TERM"
hasnt "no SIGKILL needed" err.txt "sending SIGKILL"
all_gone || fail "rank 1 fails: a rank or its child still runs"

# ---- a rank killed by a signal: 128 + N, and the signal named
rm -f pids.* ready.*
"$run" -n 2 -- bash -c 'if [ "$RANK" = 0 ]; then
    while [ ! -e "$T/ready.1" ]; do sleep 0.05; done; kill -KILL $$; fi
    exec bash "$T/sleeper.sh"' > out.txt 2> err.txt
expect "rank 0 killed: status" $? 137
has "rank 0 killed" err.txt "tcuda-run: rank 0 exited with status 137 (signal 9, KILL); stopping the others"
has "rank 1 stopped" out.txt "[rank 1] got TERM"
all_gone || fail "rank 0 killed: a rank or its child still runs"

# ---- a rank that ignores SIGTERM is SIGKILLed after --kill-after
rm -f pids.* ready.*
t0=$(now)
"$run" -n 3 --kill-after 1 -- bash -c 'if [ "$RANK" = 1 ]; then
    while [ "$(ls "$T"/ready.* 2> /dev/null | wc -l)" -lt 2 ]; do sleep 0.05; done; exit 1; fi
    [ "$RANK" = 2 ] && export IGNORE=1; exec bash "$T/sleeper.sh"' > out.txt 2> err.txt
expect "ignores SIGTERM: status" $? 1
[ "$(secs_since "$t0")" -lt 30 ] || fail "ignores SIGTERM: rank 2 was not killed"
has "ignores SIGTERM" err.txt "tcuda-run: rank 1 exited with status 1; stopping the others (SIGTERM, SIGKILL after 1 s)"
has "ignores SIGTERM" err.txt "tcuda-run: rank 2 still runs 1 s after SIGTERM; sending SIGKILL"
has "rank 0 stopped" out.txt "[rank 0] got TERM"
hasnt "rank 2 ignored it" out.txt "[rank 2] got TERM"
hasnt "rank 0 stopped by SIGTERM" err.txt "rank 0 still runs"
all_gone || fail "ignores SIGTERM: a rank or its child still runs"

# ---- SIGTERM to the launcher: every rank stopped (KILL for the stubborn), 143
rm -f pids.* ready.*
"$run" -n 3 --kill-after 1 -- bash -c '[ "$RANK" = 2 ] && export IGNORE=1
    exec bash "$T/sleeper.sh"' > out.txt 2> err.txt &
launcher=$!
wait_ready 3 || fail "SIGTERM: the ranks did not start"
t0=$(now)
kill -TERM "$launcher"
wait "$launcher"
expect "SIGTERM: status" $? 143
[ "$(secs_since "$t0")" -lt 30 ] || fail "SIGTERM: the ranks were not stopped"
has "SIGTERM" err.txt "tcuda-run: got SIGTERM; stopping every rank"
has "SIGTERM" err.txt "tcuda-run: rank 2 still runs 1 s after SIGTERM; sending SIGKILL"
has "rank 0 stopped" out.txt "[rank 0] got TERM"
has "rank 1 stopped" out.txt "[rank 1] got TERM"
all_gone || fail "SIGTERM: a rank or its child still runs"

# ---- Ctrl-C (SIGINT) to the launcher: 130; a second one kills at once. Job
# control (set -m) keeps SIGINT from being ignored by the background
# launcher; where this test itself was started with SIGINT ignored (in the
# background of a shell), so is the launcher, and there is nothing to test.
if [ -n "$(trap -p INT)" ]; then
    echo "test_tcuda_run: SIGINT is ignored here; Ctrl-C not tried"
else
    rm -f pids.* ready.*
    set -m
    "$run" -n 2 --kill-after 100 -- bash -c '[ "$RANK" = 1 ] && export IGNORE=1
        exec bash "$T/sleeper.sh"' > out.txt 2> err.txt &
    launcher=$!
    set +m
    wait_ready 2 || fail "SIGINT: the ranks did not start"
    t0=$(now)
    kill -INT "$launcher"
    sleep 0.5
    kill -INT "$launcher"
    wait "$launcher"
    expect "SIGINT: status" $? 130
    [ "$(secs_since "$t0")" -lt 30 ] || fail "SIGINT: the second one did not kill rank 1"
    has "SIGINT" err.txt "tcuda-run: got SIGINT; stopping every rank"
    has "rank 0 stopped" out.txt "[rank 0] got TERM"
    has "second SIGINT" err.txt "tcuda-run: rank 1 still runs 100 s after SIGTERM; sending SIGKILL"
    all_gone || fail "SIGINT: a rank or its child still runs"
fi

# ---- the launcher SIGKILLed: where setpriv can set a parent-death signal,
# the ranks die with it (what they started is orphaned: cleaned up here)
if setpriv --help 2> /dev/null | grep -q -- --pdeathsig; then
    rm -f pids.* ready.*
    "$run" -n 2 -- bash "$T/sleeper.sh" > out.txt 2> err.txt &
    launcher=$!
    wait_ready 2 || fail "SIGKILL: the ranks did not start"
    kill -KILL "$launcher"
    wait "$launcher" 2> /dev/null
    for f in pids.*; do
        read -r rank child < "$f"
        echo "$rank" > "rank.$f"
        echo "$child" > "child.$f"
    done
    rm -f pids.*
    for f in rank.pids.*; do mv "$f" "pids.${f#rank.pids.}"; done
    all_gone || fail "SIGKILL to the launcher: a rank still runs"
    for f in child.pids.*; do kill "$(cat "$f")" 2> /dev/null; done
    rm -f child.pids.*
fi

# ---- bad options
"$run" -n 0 -- true > out.txt 2>&1
expect "-n 0" $? 2
has "-n 0" out.txt "-n needs a positive number"
"$run" --kill-after soon -- true > out.txt 2>&1
expect "--kill-after soon" $? 2
has "--kill-after soon" out.txt "needs seconds, not 'soon'"
"$run" -n > out.txt 2>&1
expect "-n without a value" $? 2

if [ "$fails" -ne 0 ]; then
    echo "test_tcuda_run: $fails failed"
    exit 1
fi
echo "test_tcuda_run: all passed"
