#!/usr/bin/env python3
"""roundup_power2_divisions: the block size each side's caching allocator
gives a request, tcuda against PyTorch, for the same PYTORCH_CUDA_ALLOC_CONF.

    python3 tests/torch/alloc_conf_check.py [path/to/libtcuda.so]   # or TCUDA_LIB=...

(scripts/gpu.sh runs it beside tests/torch/snapshot_keys.py.)

For each setting below, a child process (the allocators read the variable
once) asks both allocators for each size and reads how much their
allocated-bytes statistic grew: torch.cuda.memory_allocated() and
tc_memory_allocated(), which both count the rounded block. Every size must
give the same block on both sides. Prints the differences and one last
line, "PASS alloc_conf_check: ..." or "FAIL alloc_conf_check: ...", and
exits 0 / 1 (77 with "SKIP" when torch or a GPU is missing)."""
import ctypes
import os
import subprocess
import sys

MIB = 1 << 20
SETTINGS = [
    "roundup_power2_divisions:[256:1,512:2,>:8]",
    "roundup_power2_divisions:[2:1,8:4,>:8]",
    "roundup_power2_divisions:[>:4]",
    "roundup_power2_divisions:[1:2,64:0,128:4]",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:16",
]
SIZES = [1000, 1200 * 1024, 2 * MIB - 1, 3 * MIB + 5, 5 * MIB + 1, 9 * MIB, 10 * MIB + 1,
         70 * MIB + 3, 100 * MIB + 1, 200 * MIB + 7, 300 * MIB, 600 * MIB + 1, 1500 * MIB + 1]


def child(lib_path):
    import torch
    tc = ctypes.CDLL(lib_path)
    vp = ctypes.c_void_p
    tc.tc_caching_allocator_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, vp, ctypes.POINTER(vp)]
    tc.tc_caching_allocator_delete.argtypes = [vp]
    tc.tc_memory_allocated.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
    tc.tc_last_error.restype = ctypes.c_char_p

    def tc_allocated():
        n = ctypes.c_size_t()
        if tc.tc_memory_allocated(0, ctypes.byref(n)) != 0:
            raise RuntimeError(tc.tc_last_error().decode())
        return n.value

    for size in SIZES:
        before = torch.cuda.memory_allocated()
        t = torch.empty(size, dtype=torch.uint8, device="cuda")
        torch_block = torch.cuda.memory_allocated() - before
        del t
        before = tc_allocated()
        p = vp()
        if tc.tc_caching_allocator_alloc(size, 0, None, ctypes.byref(p)) != 0:
            raise RuntimeError(tc.tc_last_error().decode())
        tc_block = tc_allocated() - before
        tc.tc_caching_allocator_delete(p)
        print(f"{size} {torch_block} {tc_block}")
    return 0


def main():
    lib = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TCUDA_LIB", "build/libtcuda.so")
    if len(sys.argv) > 2 and sys.argv[2] == "--child":
        return child(lib)
    try:
        import torch
    except ImportError:
        print("SKIP alloc_conf_check: no torch")
        return 77
    if not torch.cuda.is_available():
        print("SKIP alloc_conf_check: no GPU")
        return 77
    compared, diffs = 0, []
    for setting in SETTINGS:
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=setting)
        env.pop("TCUDA_ALLOC_CONF", None)
        env.pop("PYTORCH_ALLOC_CONF", None)
        r = subprocess.run([sys.executable, __file__, lib, "--child"], env=env, capture_output=True,
                           text=True, timeout=120)
        if r.returncode != 0:
            diffs.append(f"{setting}: the child failed: {r.stderr.strip().splitlines()[-1:]}")
            continue
        for line in r.stdout.strip().splitlines():
            size, tb, cb = (int(x) for x in line.split())
            compared += 1
            if tb != cb:
                diffs.append(f"{setting}: {size} bytes -> torch {tb}, tcuda {cb}")
    for d in diffs:
        print(d)
    if diffs:
        print(f"FAIL alloc_conf_check: {len(diffs)} of {compared} sizes differ")
        return 1
    print(f"PASS alloc_conf_check: {compared} sizes under {len(SETTINGS)} settings, "
          f"the same block on both sides")
    return 0


if __name__ == "__main__":
    sys.exit(main())
