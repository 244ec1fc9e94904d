#!/usr/bin/env python3
"""GPT-2 small training throughput: examples/train_gpt2 beside PyTorch (bench/run.sh train).

    train_gpt2_bench.py tcuda EXE DIR [--graph]   largest batch train_gpt2 fits, then its row
    train_gpt2_bench.py torch DIR                 PyTorch's rows: eager, eager + CUDA graphs,
                                                  torch.compile default and max-autotune
    train_gpt2_bench.py tcuda_fit EXE DIR          the largest batch train_gpt2 fits (on stdout;
                                                  notes before it)
    train_gpt2_bench.py batches_from B             the batches tried, from B down
    train_gpt2_bench.py tcuda_ddp EXE DIR N B [--graph]   N ranks (tools/tcuda-run), B each
    torchrun --nproc-per-node N train_gpt2_bench.py torch_ddp DIR B
                                                  N ranks of PyTorch DDP, B each

Both sides train GPT-2 small (124M: 12 layers, 12 heads, width 768,
vocabulary 50257) on sequences of 1024 tokens in bfloat16 mixed precision
(float32 master weights, autocast), with fused AdamW in two groups (weight
decay on the 2-d parameters), clip_grad_norm_(1.0), and the loss read on the
host every step (as train_gpt2 prints it). DIR gets a token file of random
tokens (written once). Each side takes the largest micro-batch of 64, 48, 32,
24, 16, 12, 8, 4, 2, 1 that fits: train_gpt2 tries them (3 steps each); PyTorch
finds it in eager mode (at most TORCH_MAX_BATCH), and each variant starts there and
takes the next smaller batch while it runs out of memory (max-autotune's CUDA graphs
keep more memory than eager: on an H100 it ran out at 64). Rows, one a line:

    SIDE VARIANT BATCH TOKENS_PER_S PEAK_MIB

measured over STEPS (20) steps after WARMUP (5; torch.compile's compilation
happens there); PEAK_MIB is the allocator's peak (tc_max_memory_allocated,
torch.cuda.max_memory_allocated). Lines starting "#" are notes. TORCH_VARIANTS
picks PyTorch's variants (default: "eager graphs compile compile_max_autotune").

The DDP rows (bench/run.sh train_ddp) name their variant ddpN (ddpN_graph for
train_gpt2 --graph); TOKENS_PER_S counts every rank's tokens, PEAK_MIB is
rank 0's. PyTorch's side is DistributedDataParallel over NCCL in eager mode
with its default buckets (25 MiB), started by torchrun. Each side's batch a
GPU is the largest it fits (run.sh finds them: tcuda_fit, then torchrun at
that batch and smaller ones until one runs)."""
import os
import re
import struct
import subprocess
import sys
import time

BATCHES = (64, 48, 32, 24, 16, 12, 8, 4, 2, 1)
SEQ, VOCAB = 1024, 50257
STEPS, WARMUP = int(os.environ.get("STEPS", 20)), int(os.environ.get("WARMUP", 5))
# PyTorch's variants, in order (max-autotune's compilation alone can take 5 minutes)
VARIANTS = os.environ.get("TORCH_VARIANTS", "eager graphs compile compile_max_autotune").split()
# torch.compile's mode for each compile variant
COMPILE_MODES = {"compile": None, "compile_max_autotune": "max-autotune"}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tokens(workdir):
    """A token file of random GPT-2 tokens in llm.c's format (made once)."""
    path = os.path.join(workdir, "train_tokens.bin")
    if not os.path.exists(path):
        import random
        rng = random.Random(1)
        n = 4 * 1024 * 1024
        header = [0] * 256
        header[0], header[1], header[2] = 20240520, 1, n
        with open(path, "wb") as f:
            f.write(struct.pack("<256i", *header))
            f.write(struct.pack(f"<{n}H", *(rng.randrange(VOCAB) for _ in range(n))))
    return path


# ---- tcuda ---------------------------------------------------------------------------------

def run_tcuda(exe, train, batch, steps, graph, ranks=0):
    """train_gpt2's run; with RANKS, that many processes under tools/tcuda-run."""
    launcher = [os.path.join(ROOT, "tools", "tcuda-run"), "-n", str(ranks), "--"] if ranks else []
    cmd = launcher + [exe, "--train", train, "--device", "cuda", "--dtype", "bfloat16", "--batch",
           str(batch), "--seq", str(SEQ), "--steps", str(steps), "--lr", "6e-4",
           "--warmup", "0", "--min-lr-frac", "1"] + (["--graph"] if graph else [])
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def measured_row(workdir, name, batch, ranks, graph, exe):
    """train_gpt2's measured run (WARMUP + STEPS steps, RANKS processes, 0 for
    none): its row, tokens/s over every rank's tokens and rank 0's peak."""
    r = run_tcuda(exe, tokens(workdir), batch, WARMUP + STEPS, graph, ranks)
    with open(os.path.join(workdir, f"tcuda_{name}.txt"), "w") as f:
        f.write(r.stdout)
    # under tools/tcuda-run each line starts with its rank: "[rank 0] step 1/25 | ..."
    lead = r"\[rank 0\] " if ranks else ""
    steps = re.findall("^" + lead + r"step (\d+)/\d+ .*\| ([\d.]+) ms \| \d+ tok/s \| peak (\d+) MiB",
                       r.stdout, re.M)
    if r.returncode != 0 or len(steps) != WARMUP + STEPS:
        print(f"# tcuda {name} failed (rc={r.returncode}): {r.stdout[-500:]}", file=sys.stderr)
        return 1
    ms = sum(float(s[1]) for s in steps[WARMUP:])
    tps = max(ranks, 1) * batch * SEQ * STEPS / (ms / 1e3)
    print(f"tcuda {name} {batch} {tps:.0f} {steps[-1][2]}")
    return 0


def largest_batch(exe, workdir, name, graph=False):
    """The largest of BATCHES that train_gpt2 fits (3 steps on one GPU), or
    None; a note for each batch refused."""
    for b in BATCHES:
        trial = run_tcuda(exe, tokens(workdir), b, 3, graph)
        if trial.returncode == 0:
            return b
        # why a batch did not fit, as a note under the table
        why = [ln for ln in trial.stdout.splitlines() if "train_gpt2" in ln][:1]
        print(f"# tcuda {name}: batch {b} refused: {(why or ['rc=%d' % trial.returncode])[0][:200]}")
    print(f"# tcuda {name}: no batch fits", file=sys.stderr)
    return None


def bench_tcuda(exe, workdir, graph):
    name = "graph" if graph else "eager"
    b = largest_batch(exe, workdir, name, graph)
    return 1 if b is None else measured_row(workdir, name, b, 0, graph, exe)


def bench_tcuda_ddp(exe, workdir, ranks, batch, graph):
    """train_gpt2 on RANKS processes, BATCH sequences each."""
    name = f"ddp{ranks}" + ("_graph" if graph else "")
    return measured_row(workdir, name, batch, ranks, graph, exe)


# ---- PyTorch -------------------------------------------------------------------------------

def torch_model(torch):
    """GPT-2 small in PyTorch (tests/torch/train_gpt2_torch.py's PlainGPT2) on the GPU."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "torch"))
    from train_gpt2_torch import PlainGPT2
    import types
    torch.manual_seed(0)
    return PlainGPT2(types.SimpleNamespace(layers=12, heads=12, width=768, vocab=VOCAB,
                                           ctx=SEQ)).cuda()


def torch_optimizer(torch, params, lr, capturable=False):
    """Fused AdamW in train_gpt2's two groups (weight decay on the 2-d parameters)."""
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True,
                             capturable=capturable)


def torch_step(torch, fwd, params, opt, x, y, set_to_none=True):
    """One training step of fwd (the model, compiled or DDP-wrapped) under
    bfloat16 autocast: the loss tensor (not read)."""
    import torch.nn.functional as F
    with torch.autocast("cuda", torch.bfloat16):
        logits = fwd(x)
    loss = F.cross_entropy(logits.float().view(-1, VOCAB), y.view(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=set_to_none)
    return loss


def bench_torch_ddp(workdir, batch):
    """One rank of PyTorch DDP (run by torchrun): rank 0 prints the row."""
    import torch
    import torch.distributed as dist
    rank, ranks = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    model = torch_model(torch)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    params = list(model.parameters())
    opt = torch_optimizer(torch, params, 6e-4)
    data = torch.randint(0, VOCAB, (ranks * batch * SEQ + 1,),
                         generator=torch.Generator().manual_seed(1))
    lo = rank * batch * SEQ
    x = data[lo:lo + batch * SEQ].view(batch, SEQ).cuda()
    y = data[lo + 1:lo + batch * SEQ + 1].view(batch, SEQ).cuda()

    def step():
        return torch_step(torch, ddp, params, opt, x, y).item()

    torch.cuda.reset_peak_memory_stats()
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(STEPS):
        step()
    dt = time.perf_counter() - t0
    if rank == 0:
        print(f"torch ddp{ranks} {batch} {ranks * batch * SEQ * STEPS / dt:.0f} "
              f"{torch.cuda.max_memory_allocated() >> 20}", flush=True)
    dist.destroy_process_group()
    return 0


def bench_torch(workdir):
    try:
        import torch
    except ImportError:
        print("# PyTorch: not installed")
        return 0
    print(f"# torch {torch.__version__}, GPU {torch.cuda.get_device_name()}")
    data = torch.randint(0, VOCAB, (64 * SEQ + 1,), generator=torch.Generator().manual_seed(1))

    def setup(batch, variant):
        model = torch_model(torch)
        params = list(model.parameters())
        graphs = variant == "graphs"
        opt = torch_optimizer(torch, params, torch.tensor(6e-4, device="cuda") if graphs else 6e-4,
                              graphs)
        fwd = model
        if variant.startswith("compile"):
            torch._dynamo.reset()  # a batch tried before is not a recompile (dynamic shapes)
            fwd = torch.compile(model, mode=COMPILE_MODES[variant])
        x = data[:batch * SEQ].view(batch, SEQ).cuda()
        y = data[1:batch * SEQ + 1].view(batch, SEQ).cuda()

        def step():
            return torch_step(torch, fwd, params, opt, x, y, set_to_none=not graphs)

        if not graphs:
            return lambda: step().item()
        s = torch.cuda.Stream()  # warm up on a side stream, then capture the whole step
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_loss = step()

        def replay():
            g.replay()
            return static_loss.item()
        return replay

    def measure(batch, variant):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        run = setup(batch, variant)
        for _ in range(WARMUP):
            run()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(STEPS):
            run()
        dt = time.perf_counter() - t0
        return batch * SEQ * STEPS / dt, torch.cuda.max_memory_allocated() >> 20

    batch = None
    for b in (b for b in BATCHES if b <= int(os.environ.get("TORCH_MAX_BATCH", BATCHES[0]))):
        try:
            measure_fit = setup(b, "eager")
            for _ in range(2):
                measure_fit()
            batch = b
            break
        except torch.cuda.OutOfMemoryError:
            pass
        finally:
            measure_fit = None
            torch.cuda.empty_cache()
    if batch is None:
        print("# PyTorch: no batch fits")
        return 0
    for variant in VARIANTS:
        for b in (b for b in BATCHES if b <= batch):  # eager's batch, or the largest that fits
            try:
                tps, peak = measure(b, variant)
                print(f"torch {variant} {b} {tps:.0f} {peak}", flush=True)
                break
            except torch.cuda.OutOfMemoryError:
                print(f"# torch {variant}: batch {b} ran out of memory", flush=True)
            except Exception as e:  # a variant that fails leaves its row empty
                print(f"# torch {variant} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
                break
            finally:
                torch.cuda.empty_cache()
    return 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "tcuda":
        return bench_tcuda(sys.argv[2], sys.argv[3], "--graph" in sys.argv[4:])
    if len(sys.argv) == 3 and sys.argv[1] == "torch":
        return bench_torch(sys.argv[2])
    if len(sys.argv) == 3 and sys.argv[1] == "batches_from":
        print(" ".join(str(b) for b in BATCHES if b <= int(sys.argv[2])))
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "tcuda_fit":
        b = largest_batch(sys.argv[2], sys.argv[3], "fit")
        print(b or 0)
        return 0 if b else 1
    if len(sys.argv) >= 6 and sys.argv[1] == "tcuda_ddp":
        return bench_tcuda_ddp(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
                               "--graph" in sys.argv[6:])
    if len(sys.argv) == 4 and sys.argv[1] == "torch_ddp":
        return bench_torch_ddp(sys.argv[2], int(sys.argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
