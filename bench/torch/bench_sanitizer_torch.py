"""The loop of bench_sanitizer.c in PyTorch, for its CUDA sanitizer.

Run it as is (sanitizer off) and with TORCH_CUDA_SANITIZER=1 (on): one
iteration is b = a + a on a side stream and an event recorded; the current
stream waits for the event, c = b * a, b.record_stream, s = c.sum(). Host
time per iteration (GPU synchronized outside the timing), median of blocks.

    python3 bench_sanitizer_torch.py [iterations per block] [blocks]
Prints one CSV line: torch_off|torch_on,us_per_iter,us_per_op,errors
"""
import os
import sys
import time

import torch


def iteration(a, side, ev):
    with torch.cuda.stream(side):
        b = a + a
        ev.record(side)
    torch.cuda.current_stream().wait_event(ev)
    c = b * a
    b.record_stream(torch.cuda.current_stream())
    del b
    s = c.sum()
    del c, s


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    blocks = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    on = os.environ.get("TORCH_CUDA_SANITIZER", "") not in ("", "0")
    a = torch.rand(4096, device="cuda")
    side = torch.cuda.Stream()
    ev = torch.cuda.Event()
    side.wait_stream(torch.cuda.current_stream())
    errors = 0
    times = []
    try:
        for _ in range(min(iters, 200)):
            iteration(a, side, ev)
        torch.cuda.synchronize()
        for _ in range(blocks):
            t0 = time.perf_counter()
            for _ in range(iters):
                iteration(a, side, ev)
            times.append((time.perf_counter() - t0) * 1e6 / iters)
            torch.cuda.synchronize()
    except Exception as e:  # the sanitizer raises on a race: there should be none
        errors += 1
        print("error: %s" % e, file=sys.stderr)
    times.sort()
    med = times[len(times) // 2] if times else float("nan")
    print("%s,%.3f,%.3f,%d" % ("torch_on" if on else "torch_off", med, med / 3, errors))


if __name__ == "__main__":
    main()
