#!/usr/bin/env python3
"""Records a real allocation trace for the allocator benchmarks.

On a GPU machine with PyTorch: trains a small transformer (an encoder of 6
layers, d_model 512, AdamW, mixed lengths) for a few steps with
torch.cuda.memory._record_memory_history on, takes the snapshot, and writes
its device trace in the replay format of bench/alloc_trace.h (a uint64 count,
then {uint32 slot, uint32 alloc, uint64 size} per operation; a freed block's
slot is reused, as bench_alloc does). Sequence lengths vary from step to step
(64..1024 tokens, batch 16), so the sizes change and the peak moves, which is
what makes a caching allocator reserve, split and give memory back.

    python3 bench/torch/record_trace.py OUT.bin [steps]     (default 12 steps)

Prints the number of operations and the peak live bytes. Only 'alloc' and
'free_requested' events are kept (free_completed when a trace has no
free_requested); blocks allocated before recording started are skipped."""
import struct
import sys

import torch
import torch.nn as nn


def train(steps):
    torch.manual_seed(0)
    dev = "cuda"
    vocab, d = 8192, 512
    emb = nn.Embedding(vocab, d).to(dev)
    layer = nn.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.1, batch_first=True)
    enc = nn.TransformerEncoder(layer, 6).to(dev)
    head = nn.Linear(d, vocab).to(dev)
    params = list(emb.parameters()) + list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    g = torch.Generator().manual_seed(1)
    for step in range(steps):
        seq = int(torch.randint(1, 17, (1,), generator=g)) * 64
        x = torch.randint(0, vocab, (16, seq), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = head(enc(emb(x)))
            loss = nn.functional.cross_entropy(y.float().view(-1, vocab), x.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print("step %d: seq %d, loss %.3f" % (step, seq, loss.item()), file=sys.stderr)
    torch.cuda.synchronize()


def convert(snap):
    events = []
    for dev_trace in snap.get("device_traces", []):
        events.extend(dev_trace)
        break  # device 0
    kinds = {e.get("action") for e in events}
    free_kind = "free_requested" if "free_requested" in kinds else "free_completed"
    ops, slot_of, spare, nxt = [], {}, [], 0
    cur = peak = 0
    sizes = {}
    for e in events:
        act, addr, size = e.get("action"), e.get("addr"), int(e.get("size", 0))
        if act == "alloc":
            if addr in slot_of:  # cannot happen in a sound trace: drop the old one
                continue
            sid = spare.pop() if spare else nxt
            if sid == nxt:
                nxt += 1
            slot_of[addr] = sid
            sizes[addr] = size
            ops.append((sid, 1, size))
            cur += size
            peak = max(peak, cur)
        elif act == free_kind and addr in slot_of:
            sid = slot_of.pop(addr)
            ops.append((sid, 0, 0))
            spare.append(sid)
            cur -= sizes.pop(addr)
    return ops, peak, nxt


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "trace.bin"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    try:
        torch.cuda.memory._record_memory_history(max_entries=2000000, context=None,
                                                 stacks="python")
    except TypeError:
        torch.cuda.memory._record_memory_history(max_entries=2000000)
    train(steps)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    ops, peak, slots = convert(snap)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(ops)))
        for sid, alloc, size in ops:
            f.write(struct.pack("<IIQ", sid, alloc, size))
    print("trace: %d ops (%d allocs), %d slots, peak live %.1f MiB, torch %s, %s"
          % (len(ops), sum(o[1] for o in ops), slots, peak / 2**20, torch.__version__,
             torch.cuda.get_device_name()))


if __name__ == "__main__":
    main()
