#!/usr/bin/env python3
"""Memory snapshots with history: tcuda's against PyTorch's, key by key.

Runs on the GPU machine against a CUDA build's libtcuda.so (ctypes):

    python3 tests/torch/snapshot_keys.py [path/to/libtcuda.so]   # or TCUDA_LIB=...

(scripts/gpu.sh runs it in its "snapshot" step.)

Both sides do the same things in one process, with the same allocator
settings in PYTORCH_CUDA_ALLOC_CONF (tcuda reads PyTorch's variable when
TCUDA_ALLOC_CONF is unset): record history with stacks, set user metadata,
open an annotation (PyTorch: record_function; tcuda: tc_nvtx_range_push),
allocate 1 MiB, 3 MiB and 25 MiB, free the 3 MiB, ask for 2^50 bytes (an
out-of-memory event), close the annotation, and take a snapshot (PyTorch:
torch.cuda.memory._snapshot(); tcuda: tc_memory_dump_snapshot, read back with
pickle). Then:

- every key path (segments[].blocks[].state, device_traces[][].action, ...)
  of PyTorch's snapshot must be in tcuda's, and tcuda's extra ones are listed;
- allocator_settings must hold the same values on both sides;
- each event's key set, by action, must be the same (an "oom" event has
  device_free, not addr), and user_metadata, compile_context and the
  annotations must carry the same values.

Prints what differs and one last line, "PASS snapshot_keys: ..." or
"FAIL snapshot_keys: ...", and exits 0 / 1 (77 with "SKIP" when torch or a
GPU is missing)."""
import ctypes
import os
import pickle
import sys
import tempfile

CONF = "roundup_power2_divisions:[256:1,512:2,>:8],max_split_size_mb:256,garbage_collection_threshold:0.8"
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", CONF)
os.environ.pop("TCUDA_ALLOC_CONF", None)

try:
    import torch
except ImportError:
    print("SKIP snapshot_keys: no torch")
    sys.exit(77)

MIB = 1 << 20
META = "phase=forward"


class HistoryOptions(ctypes.Structure):
    _fields_ = [("enabled", ctypes.c_bool), ("record", ctypes.c_uint), ("stacks", ctypes.c_int),
                ("max_entries", ctypes.c_size_t)]


def load_tcuda():
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TCUDA_LIB", "build/libtcuda.so")
    lib = ctypes.CDLL(path)
    vp, i32 = ctypes.c_void_p, ctypes.c_int
    sigs = {
        "tc_last_error": (ctypes.c_char_p, []),
        "tc_is_available": (ctypes.c_bool, []),
        "tc_memory_record_history": (i32, [ctypes.POINTER(HistoryOptions)]),
        "tc_memory_set_history_metadata": (i32, [ctypes.c_char_p]),
        "tc_caching_allocator_alloc": (i32, [ctypes.c_size_t, i32, vp, ctypes.POINTER(vp)]),
        "tc_caching_allocator_delete": (i32, [vp]),
        "tc_nvtx_range_push": (i32, [ctypes.c_char_p, ctypes.POINTER(i32)]),
        "tc_nvtx_range_pop": (i32, [ctypes.POINTER(i32)]),
        "tc_memory_dump_snapshot": (i32, [ctypes.c_char_p]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name, None)
        if fn is None:
            print(f"note: this libtcuda.so has no {name}")
            continue
        fn.restype, fn.argtypes = res, args
    return lib


def paths(obj, here, out):
    """Every key path under obj; a dict's keys that are numbers in strings
    (roundup_power2_divisions) count as one key "*"."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            name = "*" if isinstance(k, str) and k.isdigit() else str(k)
            p = f"{here}.{name}" if here else name
            out.add(p)
            paths(v, p, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            paths(v, here + "[]", out)
    return out


def events(snap):
    return [e for trace in snap.get("device_traces", []) for e in trace]


def torch_side():
    mem = torch.cuda.memory
    mem._record_memory_history(max_entries=1000, stacks="all")
    has_meta = hasattr(mem, "_set_memory_metadata")
    if has_meta:
        mem._set_memory_metadata(META)
    with torch.profiler.record_function("tc_step"):
        a = torch.empty(MIB, dtype=torch.uint8, device="cuda")
        b = torch.empty(3 * MIB, dtype=torch.uint8, device="cuda")
        c = torch.empty(25 * MIB, dtype=torch.uint8, device="cuda")
        del b
        try:
            torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError:
            pass
    snap = mem._snapshot()
    mem._record_memory_history(enabled=None)
    del a, c
    torch.cuda.empty_cache()
    return snap, has_meta


def tcuda_side(tc):
    def ok(st, what):
        if st != 0:
            raise RuntimeError(f"{what}: status {st}: {tc.tc_last_error().decode()}")

    opts = HistoryOptions(True, 0, 2, 1000)  # every event, stacks on all
    ok(tc.tc_memory_record_history(ctypes.byref(opts)), "tc_memory_record_history")
    if hasattr(tc, "tc_memory_set_history_metadata"):
        ok(tc.tc_memory_set_history_metadata(META.encode()), "tc_memory_set_history_metadata")
    depth = ctypes.c_int()
    ok(tc.tc_nvtx_range_push(b"tc_step", ctypes.byref(depth)), "tc_nvtx_range_push")
    ptrs = {}
    for n in (1, 3, 25):
        p = ctypes.c_void_p()
        ok(tc.tc_caching_allocator_alloc(n * MIB, 0, None, ctypes.byref(p)), "alloc")
        ptrs[n] = p
    ok(tc.tc_caching_allocator_delete(ptrs.pop(3)), "delete")
    p = ctypes.c_void_p()
    st = tc.tc_caching_allocator_alloc(1 << 50, 0, None, ctypes.byref(p))
    if st == 0:
        raise RuntimeError("2^50 bytes were allocated")
    ok(tc.tc_nvtx_range_pop(ctypes.byref(depth)), "tc_nvtx_range_pop")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "snap.pickle")
        ok(tc.tc_memory_dump_snapshot(path.encode()), "tc_memory_dump_snapshot")
        with open(path, "rb") as f:
            snap = pickle.load(f)
    ok(tc.tc_memory_record_history(ctypes.byref(HistoryOptions(False, 0, 0, 0))), "stop")
    for p in ptrs.values():
        ok(tc.tc_caching_allocator_delete(p), "delete")
    return snap


def by_action(snap):
    """action -> the set of keys its events have, and one event of each."""
    keys, one = {}, {}
    for e in events(snap):
        keys.setdefault(e["action"], set()).update(e.keys())
        one.setdefault(e["action"], e)
    return keys, one


def main():
    if not torch.cuda.is_available():
        print("SKIP snapshot_keys: no GPU")
        return 77
    tc = load_tcuda()
    if not tc.tc_is_available():
        print("SKIP snapshot_keys: tcuda sees no GPU")
        return 77
    ts, has_meta = torch_side()
    cs = tcuda_side(tc)
    if os.environ.get("SNAPSHOT_SAVE"):  # a folder: both snapshots, to read
        for name, snap in (("torch", ts), ("tcuda", cs)):
            with open(os.path.join(os.environ["SNAPSHOT_SAVE"], f"{name}_snapshot.pickle"), "wb") as f:
                pickle.dump(snap, f)
    problems = []
    tp, cp = paths(ts, "", set()), paths(cs, "", set())
    missing, extra = sorted(tp - cp), sorted(cp - tp)
    print(f"torch {torch.__version__}: {len(tp)} key paths; tcuda: {len(cp)}")
    for p in missing:
        problems.append(f"PyTorch only: {p}")
    for p in extra:
        print(f"tcuda only (extra): {p}")
    tset, cset = ts.get("allocator_settings", {}), cs.get("allocator_settings", {})
    for k in sorted(set(tset) | set(cset)):
        tv, cv = tset.get(k, "<absent>"), cset.get(k, "<absent>")
        line = f"allocator_settings.{k}: torch {tv!r} tcuda {cv!r}"
        if k in tset and k in cset and tv != cv:
            problems.append(line)
        else:
            print(line)
    tk, tone = by_action(ts)
    ck, cone = by_action(cs)
    for act in sorted(set(tk) | set(ck)):
        if act not in ck:
            problems.append(f"action {act}: PyTorch records it, tcuda does not")
            continue
        if act not in tk:
            print(f"action {act}: tcuda only")
            continue
        if tk[act] - ck[act]:
            problems.append(f"action {act}: keys {sorted(tk[act] - ck[act])} are PyTorch's only")
        for key in ("compile_context", "user_metadata"):
            tv, cv = tone[act].get(key), cone[act].get(key)
            if key == "user_metadata" and not has_meta:
                continue
            if tv != cv:
                problems.append(f"action {act}: {key} torch {tv!r} tcuda {cv!r}")
    tann = [(a.get("name"), a.get("stage")) for a in ts.get("external_annotations", [])]
    cann = [(a.get("name"), a.get("stage")) for a in cs.get("external_annotations", [])]
    tann = [x for x in tann if x[0] == "tc_step"]
    print(f"annotations: torch {tann} tcuda {cann}")
    if tann != cann:
        problems.append(f"external_annotations differ: torch {tann} tcuda {cann}")
    ann_keys_t = set().union(*[set(a) for a in ts.get("external_annotations", [])] or [set()])
    ann_keys_c = set().union(*[set(a) for a in cs.get("external_annotations", [])] or [set()])
    if ann_keys_t != ann_keys_c:
        problems.append(f"annotation keys: torch {sorted(ann_keys_t)} tcuda {sorted(ann_keys_c)}")
    for p in problems:
        print(p)
    if problems:
        print(f"FAIL snapshot_keys: {len(problems)} differences (PyTorch {torch.__version__})")
        return 1
    print(f"PASS snapshot_keys: all {len(tp)} of PyTorch {torch.__version__}'s key paths in "
          f"tcuda's snapshot, {len(extra)} extra, settings and event keys alike")
    return 0


if __name__ == "__main__":
    sys.exit(main())
