"""PyTorch's side of bench_jit (bench/run.sh jit): torch.cuda.jiterator on the same code.

Rows, as bench_jit.c prints them (prefixed torch_):
  first_call_cold_ms     fresh process, empty kernel cache
                         (PYTORCH_KERNEL_CACHE_PATH in a new temp folder):
                         create + first call + synchronize on 2^20 elements;
                         NVRTC is already loaded then (`import torch` loads
                         it): nvrtc_loaded_before_first_call says so;
  first_call_compile_ms  a second code string in that process;
  second_process_first_call_ms  a new process, the kernel cache filled
                         (median of 3);
  warm_call_host_us      host time per later call (2^10 elements);
  jit_axpy_ms / _gbs     x + alpha * y on 2^n float32, median event time.
Usage: python3 bench_jit_torch.py [log2 n] [repeats]
"""
import os
import subprocess
import sys
import tempfile
import time

AXPY = "template <typename T> T axpy(T x, T y, T alpha) { return x + alpha * y; }"
AXMY = "template <typename T> T axmy(T x, T y, T alpha) { return x - alpha * y; }"


def first_call_ms(torch, code, expect):
    from torch.cuda.jiterator import _create_jit_fn
    x = torch.full((1 << 20,), 1.5, device="cuda")
    y = torch.full((1 << 20,), 2.0, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn = _create_jit_fn(code, alpha=2.0)
    out = fn(x, y)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    assert out[12345].item() == expect, out[12345].item()
    return ms


def child(mode):
    import torch
    torch.zeros(1, device="cuda")  # CUDA initialized before timing
    if mode == "cold":
        with open("/proc/self/maps") as maps:  # Linux: libraries this process has loaded
            loaded = int(any("libnvrtc" in line for line in maps))
        print("%.3f %.3f %d" % (first_call_ms(torch, AXPY, 5.5), first_call_ms(torch, AXMY, -2.5),
                                loaded))
    else:
        print("%.3f" % first_call_ms(torch, AXPY, 5.5))


def run_child(mode, cache):
    env = dict(os.environ, PYTORCH_KERNEL_CACHE_PATH=cache, USE_PYTORCH_KERNEL_CACHE="1")
    out = subprocess.run([sys.executable, __file__, "--child", mode], env=env, check=True,
                         capture_output=True, text=True).stdout
    return [float(v) for v in out.split()]


def main():
    lg = int(sys.argv[1]) if len(sys.argv) > 1 else 28
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 21
    try:
        import torch
        from torch.cuda.jiterator import _create_jit_fn
        assert torch.cuda.is_available()
    except Exception as e:  # no torch or no GPU
        print("torch_unavailable,%s" % e)
        return
    print("torch_version,%s" % torch.__version__)
    with tempfile.TemporaryDirectory() as cache:
        cold, compile_only, loaded = run_child("cold", cache)
        print("torch_first_call_cold_ms,%.3f" % cold)
        print("torch_first_call_compile_ms,%.3f" % compile_only)
        print("torch_nvrtc_loaded_before_first_call,%d" % loaded)
        # 3 runs, not 5: each new process imports torch (seconds)
        second = sorted(run_child("second", cache)[0] for _ in range(3))
        print("torch_second_process_first_call_ms,%.3f" % second[1])

    fn = _create_jit_fn(AXPY, alpha=2.0)
    x, y = torch.ones(1024, device="cuda"), torch.ones(1024, device="cuda")
    for _ in range(100):
        fn(x, y, alpha=2.0)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(2000):
        fn(x, y, alpha=2.0)
    us = (time.perf_counter() - t0) * 1e6 / 2000
    torch.cuda.synchronize()
    print("torch_warm_call_host_us,%.2f" % us)

    n = 1 << lg
    x = torch.full((n,), 1.25, device="cuda")
    y = torch.full((n,), -0.5, device="cuda")
    for _ in range(3):
        fn(x, y, alpha=3.0)
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        out = fn(x, y, alpha=3.0)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
        del out
    ts.sort()
    ms = ts[len(ts) // 2]
    print("torch_jit_axpy_ms,%.4f" % ms)
    print("torch_jit_axpy_gbs,%.1f" % (3 * 4 * n / ms / 1e6))
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        out = torch.add(x, y)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
        del out
    ts.sort()
    print("torch_add_gbs,%.1f" % (3 * 4 * n / ts[len(ts) // 2] / 1e6))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
