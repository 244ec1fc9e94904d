#!/usr/bin/env python3
"""The side-by-side tables of bench/run.sh: one per topic, tcuda beside the raw
CUDA floor where there is one and beside PyTorch, from what the programs
printed into the topic's log folder.

    python3 bench/compare.py TOPIC LOG [ARGS]

run.sh writes LOG/tcuda.txt (tcuda's program), LOG/torch.txt (the PyTorch
twin from bench/torch/), LOG/gpu.txt (nvidia-smi's name and driver), and for
some topics a file more; a topic's function below reads them, matches rows by
name and prints one markdown table with the notes under it. A side that is
missing or printed no table (no GPU, no torch) leaves its columns empty; when
tcuda's program printed no table, its words are printed instead. Ratios say
which way they divide in their header; BENCHMARKS.md copies these tables."""
import csv
import os
import re
import struct
import sys

# ---- reading what the programs printed -------------------------------------------------


def read_lines(path):
    """The lines of a file without their ends; none when it is missing."""
    if not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        return [line.rstrip("\n") for line in f]


NUMBER = re.compile(r"-?[0-9][0-9.,]*(e[-+]?[0-9]+)?$")


def number(text):
    """A float from a printed number ("1,234.5"), or None for "-" and words."""
    text = text.strip()
    return float(text.replace(",", "")) if NUMBER.match(text) else None


def text_rows(path, width, values=1):
    """The "name value [value] unit" rows of a file as printf's "%-28s %12.3f"
    prints them: the name padded to `width` (a longer one runs on to the next
    space), the first value right-aligned to end 11 or more columns after it.
    Returns {name: ([values], unit)} in order, and the file's other lines."""
    rows, other = {}, []
    for line in read_lines(path):
        cut = width
        while cut < len(line) and not line[cut].isspace():
            cut += 1
        tokens = list(re.finditer(r"\S+", line[cut:]))
        aligned = bool(tokens) and cut + tokens[0].end() >= width + 11
        vals = []
        while tokens and len(vals) < values and (tokens[0].group() == "-" or
                                                 number(tokens[0].group()) is not None):
            vals.append(number(tokens.pop(0).group()))
        if line[:cut].strip() and aligned and any(v is not None for v in vals):
            unit = " ".join(t.group() for t in tokens)
            rows[line[:cut].strip()] = (vals + [None] * (values - len(vals)), unit)
        elif line.strip():
            other.append(line.strip())
    return rows, other


def csv_rows(path, first):
    """The rows of a CSV file whose header starts with `first` (lines starting
    with "#" skipped), or None when the file holds no such table."""
    lines = [line for line in read_lines(path) if not line.startswith("#")]
    if not lines or not lines[0].startswith(first + ","):
        return None
    return list(csv.DictReader(lines))


def key_values(path):
    """The "key,value" lines of a file as a dict."""
    out = {}
    for line in read_lines(path):
        if "," in line:
            k, v = line.split(",", 1)
            out[k.strip()] = v.strip()
    return out


def md_rows(path, cells):
    """The markdown rows of `cells` cells in a file ("| a | b |", the last "|"
    optional; header rows, those above a |---| rule, left out), and the
    file's other lines."""
    rows, other, lines = [], [], read_lines(path)
    for i, line in enumerate(lines):
        # a closing "|" ends the row; without one the last cell runs to the end
        parts = line.strip()[1:].split("|")
        if line.endswith("|"):
            parts = parts[:-1]
        parts = [" ".join(c.split()) for c in parts]
        rule = all(c and set(c) <= set("-:") for c in parts)
        header = i + 1 < len(lines) and re.match(r"^\|[-:| ]+\|?$", lines[i + 1])
        if line.startswith("|") and len(parts) == cells:
            if not rule and not header:
                rows.append(parts)
        elif line.strip() and not rule:
            other.append(line.strip())
    return rows, other


def notes_of(path):
    """The "# ..." lines a PyTorch twin prints (its version, why it skipped)."""
    return [line[1:].strip() for line in read_lines(path) if line.startswith("#")]


def ratio(a, b):
    """a / b, or None when either is missing or b is 0."""
    return a / b if a is not None and b else None


# ---- the one table ----------------------------------------------------------------------


def table(title, head, rows, notes=()):
    """Prints a markdown table. head: (name, format) per column, format "" for
    text (left-aligned) or a format spec for numbers ("{:.2f}", right-aligned);
    a cell that is None prints "-". Then each note on a line of its own."""
    cells = [[fmt_cell(c, f) for c, (_, f) in zip(r, head)] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, (h, _) in enumerate(head)]

    def line(values):
        out = []
        for v, w, (_, f) in zip(values, widths, head):
            out.append(v.ljust(w) if not f else v.rjust(w))
        return "| " + " | ".join(out) + " |"

    if title:
        print(title)
    print(line([h for h, _ in head]))
    print("|" + "|".join("-" * (w + 1) + (":" if f else "-") for w, (_, f) in zip(widths, head)) + "|")
    for r in cells:
        print(line(r))
    for n in notes:
        print(n)


def fmt_cell(value, f):
    if value is None:
        return "-"
    if not f or isinstance(value, str):
        return str(value)
    return f.format(value)


def title_of(log, what):
    """A table's first line: what it measures and on which GPU."""
    gpu = " ".join(read_lines(os.path.join(log, "gpu.txt"))).strip()
    return f"{what} ({gpu})" if gpu else what


def tcuda_said(lines):
    """Prints what tcuda's program said when it printed no table (no GPU)."""
    print("\n".join(lines).strip() or "tcuda's program printed nothing (see its log)")


# ---- the topics ---------------------------------------------------------------------------


def topic_device(log, args):
    t, t_other = md_rows(f"{log}/tcuda.txt", 4)
    p, _ = md_rows(f"{log}/torch.txt", 2)
    if not t:
        return tcuda_said(t_other)
    rows = []
    for i, (call, ns, bare, r) in enumerate(t):
        tp = p[i] if i < len(p) else [None, None]
        rows.append([call, number(ns), bare, r, tp[0], number(tp[1] or "-")])
    table(title_of(log, "host ns per call, median of 7 runs"),
          [("call", ""), ("tcuda ns", "{:.1f}"), ("bare CUDA ns", "{}"), ("tcuda ÷ bare", "{}"),
           ("PyTorch call (from Python)", ""), ("PyTorch ns", "{:.0f}")], rows, notes_of(f"{log}/torch.txt"))


def topic_random(log, args):
    lg, reps = (args + ["28", "21"][len(args):])[:2]
    t = csv_rows(f"{log}/tcuda.txt", "op")
    if t is None:
        return tcuda_said(read_lines(f"{log}/tcuda.txt"))
    p = {r["op"]: r for r in csv_rows(f"{log}/torch.txt", "op") or []}
    rows = []
    for r in t:
        q = p.get(r["op"], {})
        ms, pms = number(r["ms"]), number(q.get("ms", "-"))
        rows.append([r["op"], ms, number(r["GB/s written"] or "-"), number(r["Gsamples/s"] or "-"),
                     pms, number(q.get("GB/s written", "-")), number(q.get("Gsamples/s", "-")),
                     ratio(pms, ms)])
    table(title_of(log, f"random fills, n = 2^{lg}, median of {reps}"),
          [("op", ""), ("ms", "{:.3f}"), ("GB/s", "{:.1f}"), ("Gsamp/s", "{:.1f}"),
           ("torch ms", "{:.3f}"), ("torch GB/s", "{:.1f}"), ("torch Gsamp/s", "{:.1f}"),
           ("torch ms ÷ tcuda ms", "{:.2f}")], rows,
          notes_of(f"{log}/torch.txt") + ["the floors are raw CUDA: cudaMemsetAsync and "
                                          "cudaMemcpyAsync of the same buffer"])


def topic_alloc(log, args):
    rows, other = md_rows(f"{log}/rows.txt", 4)
    title = " ".join(read_lines(f"{log}/trace.txt")) or "allocator"
    table(title_of(log, title + "; one core"),
          [("allocator", ""), ("cold ns/op", "{}"), ("warm ns/op", "{}"),
           ("peak reserved ÷ peak live", "{}")], rows,
          other + ["cudaMalloc/cudaFree is the raw floor: no caching at all"])


def trace_summary(path):
    """What the trace replays: its operations, allocations and peak."""
    if not os.path.exists(path):
        return "trace: missing"
    d = open(path, "rb").read()
    n = struct.unpack_from("<Q", d)[0]
    cur = peak = allocs = 0
    sz = {}
    for i in range(n):
        sid, a, s = struct.unpack_from("<IIQ", d, 8 + 16 * i)
        if a:
            sz[sid] = s
            cur += s
            allocs += 1
            peak = max(peak, cur)
        else:
            cur -= sz[sid]
    return ("trace: %d operations, %d allocations (a 20 us kernel every 50: %.1f ms of GPU work"
            " a pass), peak live %.1f MiB" % (n, allocs, allocs // 50 * 0.02, peak / 2**20))


def topic_trace(log, args):
    rows, other = md_rows(f"{log}/rows.txt", 6)
    table(title_of(log, trace_summary(f"{log}/trace.bin") +
                   "\nhost / end-to-end ms per pass (pass 1 cold; warm = median of passes 3-6)"),
          [("allocator", ""), ("pass 1 cold", "{}"), ("pass 2", "{}"), ("warm", "{}"),
           ("resv/live", "{}"), ("host waits", "")], rows, other)


def topic_tensor(log, args):
    t, t_other = text_rows(f"{log}/tcuda.txt", 28, values=2)
    if not t:
        return tcuda_said(t_other)
    p, _ = text_rows(f"{log}/torch.txt", 28)
    rows = []
    for name, ((v, floor), unit) in t.items():
        pv = p.get(name, ([None], ""))[0][0]
        r = ratio(v, pv)
        rows.append([name, unit.split(" (")[0], v, floor, pv, None if r is None else f"{r:.1%}"])
    table(title_of(log, "tensors: GPU rows timed with events around 10 to 20 calls"),
          [("row", ""), ("unit", ""), ("tcuda", "{:.1f}"), ("raw CUDA floor", "{:.1f}"),
           ("PyTorch", "{:.1f}"), ("tcuda ÷ PyTorch", "{}")], rows,
          [n for n in t_other if not n.startswith("row ")] + notes_of(f"{log}/torch.txt") +
          ["floors: cudaMemcpyAsync for the copies, a bare kernel launch for the host row"])


def mlp_rows(path):
    """examples/graph_mlp's lines as rows: its steps eager, as a graph in
    stream order and in data order, and the speedups."""
    text = "\n".join(read_lines(path))
    eager = re.search(r"eager: .*?([0-9.]+) us per step", text)
    graph = re.search(r"graph: .*?([0-9.]+) us per step", text)
    data = re.search(r"graph, data order: .*?([0-9.]+) us per step", text)
    rows = {}
    if eager and graph:
        e, g = float(eager.group(1)), float(graph.group(1))
        rows["mlp step eager, us"] = e, "us per step"
        rows["mlp step graph, us"] = g, "us per step"
        rows["mlp graph speedup"] = e / g, "x"
        if data:
            d = float(data.group(1))
            rows["mlp step data-order graph"] = d, "us per step (TC_GRAPH_ORDER_DATA)"
            rows["mlp data-order speedup"] = e / d, "x"
    checks = [line for line in text.splitlines() if "losses" in line or "did not" in line]
    return rows, checks


def topic_graph(log, args):
    t, t_other = text_rows(f"{log}/tcuda.txt", 28)
    if not t:
        return tcuda_said(t_other)
    p, p_other = text_rows(f"{log}/torch.txt", 28)
    mlp, checks = mlp_rows(f"{log}/mlp.txt")
    tv = {k: v[0][0] for k, v in t.items()}
    tv.update({k: v[0] for k, v in mlp.items()})
    units = {k: v[1] for k, v in t.items()}
    units.update({k: v[1] for k, v in mlp.items()})
    pv = {k: v[0][0] for k, v in p.items()}
    floor_of = {"add chain graph, us/op": "add chain raw graph, us/op"}
    floors = set(floor_of.values()) | {"least kernel raw graph, us/op"}
    rows = []
    for k, v in tv.items():
        if k in floor_of.values():
            continue
        if k in floors:  # a floor with no tcuda row of its own
            rows.append([k, units[k], None, v, None, None])
            continue
        fl = tv.get(floor_of.get(k, ""))
        rows.append([k, units[k], v, fl, pv.get(k), ratio(v, pv.get(k))])
    notes = [n for n in t_other if not n.startswith("bench_graph on")] + checks
    notes += [n for n in p_other if n.startswith("torch losses")] + notes_of(f"{log}/torch.txt")
    g, r = tv.get("add chain graph, us/op"), tv.get("add chain raw graph, us/op")
    if g and r:
        notes.append(f"target 1: graph / raw graph = {g / r:.3f} (<= 1.05)")
    if g and pv.get("add chain graph, us/op"):
        notes.append(f"target 2: graph replay per op below PyTorch's: {g:.3f} vs "
                     f"{pv['add chain graph, us/op']:.3f}")
    for k, how in (("mlp graph speedup", "stream order"), ("mlp data-order speedup", "data order")):
        if tv.get(k) and pv.get("mlp graph speedup"):
            notes.append(f"target 3 ({how}): MLP speedup {tv[k]:.2f}x vs PyTorch's "
                         f"{pv['mlp graph speedup']:.2f}x (at least PyTorch's)")
    title = next((n for n in t_other if n.startswith("bench_graph on")), "graphs")
    table(title_of(log, title), [("row", ""), ("unit", ""), ("tcuda", "{:.3f}"),
                                 ("raw CUDA graph", "{:.3f}"), ("PyTorch", "{:.3f}"),
                                 ("tcuda ÷ PyTorch", "{:.2f}")], rows, notes)


COLL_FILE = re.compile(r"(tcuda|nccl|torch)_(dist[0-9]+|comm)(_[0-9]+)?\.txt$")
COLL_TARGETS = {"torch": 0.98, "nccl": 0.95, "overhead_us": 5.0}


def coll_rows(log):
    """The ROW lines of the comm topic's programs (tcuda_dist2_1.txt,
    nccl_dist2_1.txt, torch_dist2_1.txt, ..., tcuda_comm_1.txt, torch_comm_1.txt;
    _R numbers a run): {(op, world, bytes, variant): (us per call, GB/s)},
    each cell the fastest of its runs, and the first run's "#" lines. A line
    may carry tools/tcuda-run's "[rank N] " in front. Also every run's
    times: {(op, world, bytes, variant): {run: us per call}}."""
    rows, notes, runs = {}, [], {}
    names = sorted(os.listdir(log)) if os.path.isdir(log) else []
    for name in filter(COLL_FILE.match, names):
        first_run = COLL_FILE.match(name).group(3) in (None, "_1")
        for line in read_lines(os.path.join(log, name)):
            line = re.sub(r"^\[rank [0-9]+\] ", "", line)
            p = line.split()
            if len(p) == 7 and p[0] == "ROW" and re.match(r"x[0-9]+$", p[2]) and p[3].isdigit():
                key, row = (p[1], int(p[2][1:]), int(p[3]), p[4]), (number(p[5]), number(p[6]))
                runs.setdefault(key, {})[COLL_FILE.match(name).group(3)] = row[0]
                old = rows.get(key)
                if old is None or (row[0] is not None and (old[0] is None or row[0] < old[0])):
                    rows[key] = row
            elif line.startswith("#") and first_run:
                notes.append(f"{name}: {line[1:].strip()}")
    return rows, notes, runs


def size_name(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def verdict(misses, compared):
    """The line under a table: how many cells missed a target."""
    if not compared:
        return "nothing to compare: a side printed no rows (see parts below)"
    return f"cells missing a target: {misses} of {compared}" if misses else \
        f"every target met ({compared} compared)"


def marked(value, ok, fmt):
    """A number formatted, with " ✗" after it when it misses its target."""
    if value is None:
        return None
    return fmt.format(value) + ("" if ok else " ✗")


def added_by_wait(runs, op, world, b):
    """tcuda_wait - tcuda_sync of each run (both timed in turn in one
    process), the median over the runs; None without tcuda_sync rows."""
    wait, sync = (runs.get((op, world, b, v), {}) for v in ("tcuda_wait", "tcuda_sync"))
    d = sorted(wait[r] - sync[r] for r in wait if r in sync and None not in (wait[r], sync[r]))
    if not d:
        return None
    return d[len(d) // 2] if len(d) % 2 else (d[len(d) // 2 - 1] + d[len(d) // 2]) / 2


def coll_table(log, rows, runs, op, world):
    """One op over one world size; returns how many cells missed a target."""
    sizes = sorted({b for (o, w, b, _) in rows if o == op and w == world})
    out, misses, compared = [], 0, 0
    for b in sizes:
        get = {v: rows.get((op, world, b, v), (None, None)) for v in (
            "tcuda_stream", "torch_stream", "nccl_stream", "tcuda_wait", "torch_wait", "nccl_wait",
            "tcuda_legacy", "tcuda_sync")}
        bus = {v: get[v][1] for v in get}
        us = {v: get[v][0] for v in get}
        vs_torch = ratio(bus["tcuda_stream"], bus["torch_stream"])
        vs_nccl = ratio(bus["tcuda_stream"], bus["nccl_stream"])
        def minus(a, b):
            return us[a] - us[b] if us[a] is not None and us[b] is not None else None
        # what tc_work_wait adds: against the floor's waits (another
        # process), and against a stream synchronize in turn with it in the
        # same process (the target's measure where the bench printed it)
        over, added = minus("tcuda_wait", "nccl_wait"), added_by_wait(runs, op, world, b)
        judged = added if added is not None else over
        oks = [vs_torch is None or vs_torch >= COLL_TARGETS["torch"],
               vs_nccl is None or vs_nccl >= COLL_TARGETS["nccl"],
               judged is None or judged <= COLL_TARGETS["overhead_us"]]
        misses += oks.count(False)
        compared += sum(x is not None for x in (vs_torch, vs_nccl, judged))
        out.append([size_name(b), bus["tcuda_stream"], bus["torch_stream"], bus["nccl_stream"],
                    marked(vs_torch, oks[0], "{:.3f}"), marked(vs_nccl, oks[1], "{:.3f}"),
                    us["tcuda_wait"], us["torch_wait"], us["nccl_wait"],
                    marked(over, oks[2] or added is not None, "{:+.1f}"),
                    marked(added, oks[2] or added is None, "{:+.1f}"), bus["tcuda_legacy"]])
    table(title_of(log, f"{op}, {world} GPUs: busbw GB/s, stream-ordered (nccl-tests' factors); "
                        "wait: us per call with a host wait; each side's best of its runs"),
          [("size", ""), ("tcuda", "{:.2f}"), ("torch", "{:.2f}"), ("nccl", "{:.2f}"),
           ("tcuda ÷ torch", "{}"), ("tcuda ÷ nccl", "{}"), ("tcuda wait us", "{:.1f}"),
           ("torch wait us", "{:.1f}"), ("nccl wait us", "{:.1f}"), ("wait - nccl wait us", "{}"),
           ("wait - own sync us", "{}"), ("tcuda, default stream", "{:.2f}")],
          out, [verdict(misses, compared)])
    return misses


def comm_table(log, rows, op, n):
    sizes = sorted({b for (o, w, b, _) in rows if o == op and w == n})
    out, misses, compared = [], 0, 0
    for b in sizes:
        (tus, tgb), (pus, pgb) = (rows.get((op, n, b, v), (None, None)) for v in ("tcuda", "torch"))
        r = ratio(tgb, pgb)
        ok = r is None or r >= COLL_TARGETS["torch"]
        misses += not ok
        compared += r is not None
        out.append([size_name(b), tgb, pgb, marked(r, ok, "{:.3f}"), tus, pus])
    what = f"GPU 0 to GPUs 0..{n - 1}" if op == "comm_broadcast" else f"GPUs 0..{n - 1} to GPU 0"
    table(title_of(log, f"tc_{op} vs torch.cuda.comm.{op[5:]}, {what}: "
                        "GB/s (bytes of one buffer / time); each side's best of its runs"),
          [("size", ""), ("tcuda GB/s", "{:.2f}"), ("torch GB/s", "{:.2f}"),
           ("tcuda ÷ torch", "{}"), ("tcuda us", "{:.1f}"), ("torch us", "{:.1f}")], out,
          [verdict(misses, compared)])
    return misses


def topic_comm(log, args):
    rows, notes, runs = coll_rows(log)
    if not rows:
        said = [line for f in ("tcuda_comm_1.txt", "tcuda_dist2_1.txt", "tcuda_comm_1.err",
                               "tcuda_dist2_1.err") for line in read_lines(os.path.join(log, f))]
        tcuda_said(said + read_lines(os.path.join(log, "parts.txt")))
        return
    misses = 0
    ops = ["all_reduce", "broadcast", "all_gather", "reduce_scatter"]
    ops += sorted({k[0] for k in rows} - set(ops) - {"comm_broadcast", "comm_reduce_add"})
    for op in ops:
        for world in sorted({w for (o, w, _, _) in rows if o == op}):
            misses += coll_table(log, rows, runs, op, world)
            print()
    for op in ("comm_broadcast", "comm_reduce_add"):
        for n in sorted({w for (o, w, _, _) in rows if o == op}):
            misses += comm_table(log, rows, op, n)
            print()
    for f in ("nccl.txt", "parts.txt"):
        notes += read_lines(os.path.join(log, f))
    for n in notes:
        print(n)
    print(f"targets (✗ marks a miss): tcuda ÷ torch >= {COLL_TARGETS['torch']} and tcuda ÷ nccl >= "
          f"{COLL_TARGETS['nccl']} at every size, stream-ordered; tc_work_wait adds <= "
          f"{COLL_TARGETS['overhead_us']:g} us (tcuda wait - tcuda's own stream synchronize, in "
          f"turn in one process; without that column, tcuda wait - nccl wait); comm: tcuda ÷ "
          f"torch >= {COLL_TARGETS['torch']}. "
          f"Cells missing: {misses}")


def topic_gpt(log, args):
    # rows.txt: "tcuda ROW N", "torch ROW N" (PyTorch eager, or its own CUDA
    # graph for the decode_graph rows) and "compile ROW N" (torch.compile)
    vals, order = {}, []
    for line in read_lines(f"{log}/rows.txt"):
        parts = line.split()
        if (len(parts) == 3 and parts[0] in ("tcuda", "torch", "compile") and
                number(parts[2]) is not None):
            if parts[1] not in order:
                order.append(parts[1])
            vals[parts[0], parts[1]] = number(parts[2])
    rows = []
    for k in order:
        t, p, c = vals.get(("tcuda", k)), vals.get(("torch", k)), vals.get(("compile", k))
        rows.append([k, t, p, ratio(t, p), c, ratio(t, c)])
    notes = [line for line in read_lines(f"{log}/check.txt") if line.startswith("check")]
    if any(side == "compile" for side, _ in vals):
        notes.append("torch.compile: prefill the forward in default mode; decode_graph the decode "
                     "step with a static KV cache in module buffers, mode=\"reduce-overhead\", "
                     "fullgraph=True (gpt-fast's recipe); compilation not timed")
    table(title_of(log, "GPT-2 small, tokens/s: prefill batch 8 x 512; decode batch 1 and 8 (_b8), "
                        "prompt 16, 256 new tokens a sequence"),
          [("row", ""), ("tcuda", "{:,.0f}"), ("PyTorch", "{:,.0f}"),
           ("tcuda ÷ PyTorch", "{:.3f}"), ("torch.compile", "{:,.0f}"),
           ("tcuda ÷ compile", "{:.3f}")],
          rows, notes)


def topic_history(log, args):
    rows = [line.strip().split(",") for f in ("tcuda.txt", "torch.txt")
            for line in read_lines(f"{log}/{f}") if line.count(",") == 2]
    rows = [r for r in rows if r[0] != "where"]
    base = {r[0]: float(r[2]) for r in rows if r[1] == "off" and number(r[2]) is not None}
    names = {"gpu": "tcuda (GPU, device 0)", "host": "tcuda algorithm (host provider)",
             "torch": "PyTorch (Python loop)"}
    out = []
    for w, m, ns in rows:
        v = number(ns)
        extra = None if m.startswith("off") or w not in base or v is None else "%+.0f" % (v - base[w])
        out.append([names.get(w, w), m, v, extra])
    table("memory history: ns per allocator operation, warm, 50,000-op trace",
          [("allocator", ""), ("history", ""), ("ns/op", "{:.0f}"), ("cost over off", "{}")], out,
          read_lines(f"{log}/tcuda.err")[-3:] + read_lines(f"{log}/torch.err")[-3:])


def topic_sanitizer(log, args):
    lines = read_lines(f"{log}/tcuda.txt")
    if not lines or not lines[0].startswith("mode,"):
        return tcuda_said(lines)
    rows = [r.split(",") for r in lines[1:] if r]
    rows += [r for r in csv.reader(read_lines(f"{log}/torch.txt")) if len(r) >= 2]
    base = {r[0]: float(r[2]) for r in rows if len(r) > 2 and r[1] != "error"}
    names = {"off": "tcuda, sanitizer off", "on": "tcuda, sanitizer on",
             "off_installed": "tcuda, on then off", "torch_off": "torch, sanitizer off",
             "torch_on": "torch, CSAN on"}
    out = []
    for r in rows:
        if len(r) < 4 or r[1] == "error":
            out.append([names.get(r[0], r[0]), None, None, None, "error (see logs)"])
            continue
        ref = base.get("torch_off" if r[0].startswith("torch") else "off")
        out.append([names.get(r[0], r[0]), float(r[1]), float(r[2]), ratio(float(r[2]), ref), r[3]])
    notes = []
    if "on" in base and "torch_on" in base:
        notes.append("tcuda on vs torch CSAN on: %.1fx faster per op" % (base["torch_on"] / base["on"]))
    table("stream sanitizer: host us per op (3 kernels + 1 event record + 1 wait per iteration)",
          [("run", ""), ("us/iter", "{:.2f}"), ("us/op", "{:.2f}"), ("x its off", "{:.2f}"),
           ("reports", "{}")], out, notes)


def topic_jit(log, args):
    t, p = key_values(f"{log}/tcuda.txt"), key_values(f"{log}/torch.txt")
    if "first_call_cold_ms" not in t:
        return tcuda_said(read_lines(f"{log}/tcuda.txt"))
    spec = [("first call, cold (load NVRTC, compile)", "first_call_cold_ms", "ms", "min"),
            ("first call, compile only", "first_call_compile_ms", "ms", "min"),
            ("second process, first call (disk cache)", "second_process_first_call_ms", "ms", "min"),
            ("warm call, host time", "warm_call_host_us", "us", "min"),
            ("kernel, 2^%s float32" % t.get("n_log2", "?"), "jit_axpy_gbs", "GB/s", "max")]
    rows = []
    for name, key, unit, better in spec:
        a, b = number(t[key]), number(p.get("torch_" + key, "-"))
        r = ratio(a, b) if better == "max" else ratio(b, a)
        rows.append([name, f"{a:.2f} {unit}", None if b is None else f"{b:.2f} {unit}", r])
    add = number(t["builtin_add_gbs"])
    rows.append(["tcuda built-in add, same bytes", f"{add:.2f} GB/s", None, None])
    if "torch_add_gbs" in p:
        rows.append(["torch.add, same bytes", None, f"{number(p['torch_add_gbs']):.2f} GB/s", None])
    table("jiterator, x + alpha*y; device %s; torch %s" % (
        t.get("device", "?"), p.get("torch_version", p.get("torch_unavailable", "?"))),
          [("", ""), ("tcuda", "{}"), ("torch", "{}"), ("ratio", "{:.2f}")], rows,
          ["jit kernel at %.3f of the built-in add" % (number(t["jit_axpy_gbs"]) / add)] +
          (["torch had loaded NVRTC before its first call (import torch loads it): its cold row "
            "holds no load"] if p.get("torch_nvrtc_loaded_before_first_call") == "1" else []) +
          ["targets: first compile <= torch's; disk-cache first call <= 5 ms; kernel >= 0.97 of "
           "torch's jiterator and of the built-in add (ratio: above 1 is tcuda better)"])


def topic_loss(log, args):
    t, t_other = text_rows(f"{log}/tcuda.txt", 34)
    if not t:
        return tcuda_said(t_other)
    p, _ = text_rows(f"{log}/torch.txt", 34)
    rows = []
    for k, ((v,), unit) in t.items():
        pv = p.get(k, ([None],))[0][0]
        rows.append([k, unit, v, pv, ratio(pv, v)])
    table(title_of(log, t_other[0] if t_other else "cross_entropy behind queued work"),
          [("row", ""), ("unit", ""), ("tcuda", "{:.3f}"), ("PyTorch", "{:.3f}"),
           ("PyTorch ÷ tcuda", "{:.2f}")], rows, t_other[1:] + notes_of(f"{log}/torch.txt"))


def topic_nn(log, args):
    t = csv_rows(f"{log}/tcuda.txt", "op")
    if t is None:
        return tcuda_said(read_lines(f"{log}/tcuda.txt"))
    p = {(r["op"], r["dtype"], r["rows"], r["cols"]): number(r["GBps"])
         for r in csv_rows(f"{log}/torch.txt", "op") or []}
    rows = []
    for r in t:
        gb, pgb = number(r["GBps"]), p.get((r["op"], r["dtype"], r["rows"], r["cols"]))
        rows.append([r["op"], r["path"], r["dtype"], f"{r['rows']}x{r['cols']}", gb, pgb,
                     number(r["floor_GBps"]), ratio(gb, pgb)])
    table(title_of(log, "softmax and layer_norm, GB/s (read once, written once); "
                        "the floor is cudaMemcpyAsync of the same bytes"),
          [("op", ""), ("path", ""), ("dtype", ""), ("shape", ""), ("tcuda GB/s", "{:.1f}"),
           ("torch GB/s", "{:.1f}"), ("floor GB/s", "{:.1f}"), ("tcuda ÷ torch", "{:.3f}")], rows,
          notes_of(f"{log}/torch.txt") + ["path: the kernel path, auto the one tcuda takes"])


GEMV_FLOOR = 0.85  # issue 28: tcuda's GB/s at least 85% of the copy floor's


def topic_gemv(log, args):
    t = csv_rows(f"{log}/tcuda.txt", "dtype")
    if t is None:
        return tcuda_said(read_lines(f"{log}/tcuda.txt"))
    p = {(r["dtype"], r["m"], r["n"], r["k"]): r for r in csv_rows(f"{log}/torch.txt", "dtype") or []}
    rows, misses = [], 0
    for r in t:
        ms, floor = number(r["ms"]), number(r["floor_GBps"])
        of_floor = ratio(number(r["GBps"]), floor)
        misses += of_floor is not None and of_floor < GEMV_FLOOR
        q = p.get((r["dtype"], r["m"], r["n"], r["k"]), {})
        pms, pe = number(q.get("ms", "-")), number(q.get("eager_ms", "-"))
        rows.append([r["dtype"], r["m"], f"{r['k']}->{r['n']}", 1e3 * ms, number(r["GBps"]),
                     floor, marked(of_floor, of_floor is None or of_floor >= GEMV_FLOOR,
                                   "{:.2f}"),
                     1e3 * number(r["cublas_ms"]), pms and 1e3 * pms, ratio(pms, ms),
                     1e3 * number(r["eager_ms"]), pe and 1e3 * pe])
    table(title_of(log, "linear at 1-16 rows (m), us a call in a graph of 20; GB/s counts the "
                        "weight, input, bias and output once; the floor copies the weight"),
          [("dtype", ""), ("m", ""), ("in->out", ""), ("tcuda us", "{:.2f}"),
           ("tcuda GB/s", "{:.0f}"), ("floor GB/s", "{:.0f}"), ("of floor", "{}"),
           ("cuBLAS us", "{:.2f}"), ("torch us", "{:.2f}"), ("torch ÷ tcuda", "{:.2f}"),
           ("tcuda eager us", "{:.2f}"), ("torch eager us", "{:.2f}")], rows,
          notes_of(f"{log}/torch.txt") +
          [f"target (✗ marks a miss): tcuda's GB/s >= {GEMV_FLOOR} of the floor's; "
           f"misses: {misses} of {len(rows)}; cuBLAS: the same graph with tcuda's kernel off; "
           "eager: the 20 calls queued from the host one by one"])


def topic_kv_attention(log, args):
    t = csv_rows(f"{log}/tcuda.txt", "dtype")
    if t is None:
        return tcuda_said(read_lines(f"{log}/tcuda.txt"))
    key = ("dtype", "b", "h", "e", "s", "n")
    p = {tuple(r[c] for c in key): r for r in csv_rows(f"{log}/torch.txt", "dtype") or []}
    rows = []
    for r in t:
        ms, floor = number(r["ms"]), number(r["floor_GBps"])
        q = p.get(tuple(r[c] for c in key), {})
        pms, psl = number(q.get("ms", "-")), number(q.get("slice_ms", "-"))
        rows.append([r["dtype"], r["b"], f"{r['h']} x {r['e']}", f"{r['n']} of {r['s']}",
                     1e3 * ms, number(r["GBps"]), floor, ratio(number(r["GBps"]), floor),
                     pms and 1e3 * pms, ratio(pms, ms), psl and 1e3 * psl, ratio(psl, ms),
                     1e3 * number(r["eager_ms"])])
    table(title_of(log, "decode's attention over a KV cache: one query a head, the new key and "
                        "value written at n, positions 0..n read; us a call in a graph of 20"),
          [("dtype", ""), ("batch", ""), ("heads x size", ""), ("n", ""), ("tcuda us", "{:.2f}"),
           ("tcuda GB/s", "{:.0f}"), ("floor GB/s", "{:.0f}"), ("of floor", "{:.2f}"),
           ("torch us", "{:.2f}"), ("torch ÷ tcuda", "{:.2f}"), ("torch sliced us", "{:.2f}"),
           ("sliced ÷ tcuda", "{:.2f}"), ("tcuda eager us", "{:.2f}")], rows,
          notes_of(f"{log}/torch.txt") +
          ["GB/s counts the keys and values of n + 1 positions, q, the new rows and the output "
           "once; the floor copies the keys' and values' bytes; torch: index_copy_ into the "
           "caches, then scaled_dot_product_attention over the whole cache with a mask (what a "
           "graph replays as n grows); sliced: over the first n + 1 positions, no mask (the "
           "length known on the host)"])


def topic_attention(log, args):
    t = csv_rows(f"{log}/tcuda.txt", "dtype")
    if t is None:
        return tcuda_said(read_lines(f"{log}/tcuda.txt"))
    p = {r["dtype"]: r for r in csv_rows(f"{log}/torch.txt", "dtype") or []}
    rows = []
    for r in t:
        ms, q = number(r["ms"]), p.get(r["dtype"], {})
        pms = number(q.get("ms", "-"))
        # PyTorch's backends forced, one by one (bench_attention_torch.py)
        forced = [number(p.get(f"{r['dtype']} {be}", {}).get("ms", "-"))
                  for be in ("flash", "cudnn", "efficient")]
        rows.append([r["dtype"], r["path"], ms, number(r["TFLOPs"]), pms,
                     number(q.get("TFLOPs", "-"))] + forced +
                    [ratio(pms, ms), ratio(forced[1], ms)])
    table(title_of(log, "attention at GPT-2 small's prefill (8 x 12 heads x 512 x 64, causal)"),
          [("dtype", ""), ("path", ""), ("tcuda ms", "{:.4f}"), ("TFLOP/s", "{:.1f}"),
           ("torch ms", "{:.4f}"), ("torch TFLOP/s", "{:.1f}"), ("flash ms", "{:.4f}"),
           ("cudnn ms", "{:.4f}"), ("efficient ms", "{:.4f}"), ("torch ms ÷ tcuda ms", "{:.2f}"),
           ("cudnn ms ÷ tcuda ms", "{:.2f}")],
          rows, notes_of(f"{log}/torch.txt") +
          ["torch: PyTorch's own choice of kernel; flash, cudnn, efficient: each of its "
           "backends forced (torch.nn.attention.sdpa_kernel), - where it does not take the case"])


# tcuda rows judged against a PyTorch row of another name: the deterministic
# embedding backward against PyTorch's one algorithm (it sorts the indices
# either way); the plain attention backward, which recomputes the forward,
# against PyTorch's backward from what its forward saved (what PyTorch's
# training step pays in its backward; examples/train_gpt2 keeps the lse
# forward's out and lse, as PyTorch does, and calls the _lse backward).
NN_BACKWARD_TWIN = {"embedding_backward det": "embedding_backward",
                    "sdpa_backward": "sdpa_backward_lse"}


def topic_nn_backward(log, args):
    t = csv_rows(f"{log}/tcuda.txt", "op")
    if t is None:
        return tcuda_said(read_lines(f"{log}/tcuda.txt"))
    pr = csv_rows(f"{log}/torch.txt", "op") or []
    p = {(r["op"], r["dtype"], r["shape"]): r for r in pr}

    def wait_us(rows):  # the host time of a synchronize behind the queue
        return next((number(r["host_us"] or "-") for r in rows if r["op"] == "synchronize"), None)
    t_wait, p_wait = wait_us(t), wait_us(pr)
    any_compile = any(number(r.get("compile_us") or "-") is not None for r in pr)
    rows, misses, compared, waited = [], 0, 0, 0
    for r in t:
        if r["op"] == "synchronize":
            continue
        q = p.get((NN_BACKWARD_TWIN.get(r["op"], r["op"]), r["dtype"], r["shape"]), {})
        us, pus = number(r["us"] or "-"), number(q.get("us") or "-")
        speed = ratio(pus, us)
        ok = speed is None or speed >= 1.0
        misses += not ok
        compared += speed is not None
        host = number(r["host_us"] or "-")
        free = host is None or not t_wait or host <= t_wait / 2
        waited += not free
        rate, prate = number(r["rate"] or "-"), number(q.get("rate") or "-")
        cells = [r["op"], r["dtype"], r["shape"], us, pus, marked(speed, ok, "{:.2f}"),
                 None if rate is None else f"{rate:.1f} {r['unit']}",
                 None if prate is None else f"{prate:.1f} {q.get('unit', '')}",
                 marked(host, free, "{:.1f}"), number(q.get("host_us") or "-")]
        if any_compile:
            cells.append(number(q.get("compile_us") or "-"))
        rows.append(cells + [q.get("what")])
    head = [("op", ""), ("dtype", ""), ("shape", ""), ("tcuda us", "{:.1f}"),
            ("torch us", "{:.1f}"), ("speed tcuda ÷ torch", "{}"), ("tcuda rate", "{}"),
            ("torch rate", "{}"), ("tcuda host us", "{}"), ("torch host us", "{:.1f}")]
    if any_compile:
        head.append(("torch.compile us", "{:.1f}"))
    head.append(("PyTorch runs", ""))
    notes = notes_of(f"{log}/tcuda.txt") + notes_of(f"{log}/torch.txt")
    notes.append(verdict(misses, compared) + " (target: every backward op at least PyTorch's "
                 "speed: torch us ÷ tcuda us >= 1.0; ✗ marks a miss)")
    if t_wait:
        notes.append(f"host us: the call's host time with a 4096^3 float32 matmul queued ahead; a "
                     f"synchronize there takes {t_wait:.0f} us in tcuda"
                     + (f" ({p_wait:.0f} us in PyTorch)" if p_wait else "")
                     + f"; ✗ marks a call over half of that, one that waited for the device: "
                     f"{waited} of {len(rows)}")
    notes.append("rates: GB/s of the bytes each op must move at least, TFLOP/s of linear's GEMM "
                 "and of attention's five products (causal half); judged against PyTorch's row of "
                 "another name: " + ", ".join(f"{a} against {b}" for a, b in NN_BACKWARD_TWIN.items()))
    table(title_of(log, "backward ops at GPT-2 small's training shapes (8 x 1024 tokens), GPU us "
                        "(median of events)"), head, rows, notes)


def train_rows(log):
    """rows.txt of train and train_ddp: [side variant, batch, tokens/s, peak MiB]."""
    rows = []
    for line in read_lines(f"{log}/rows.txt"):
        parts = line.split()
        if len(parts) == 5 and parts[0] in ("tcuda", "torch") and number(parts[3]) is not None:
            rows.append([f"{parts[0]} {parts[1]}", number(parts[2]), number(parts[3]),
                         number(parts[4])])
    return rows


def topic_train(log, args):
    # the target's yardstick: torch.compile's better mode
    rows = train_rows(log)
    base = max((r[2] for r in rows if r[0].startswith("torch compile")), default=None)
    for r in rows:
        r.append(ratio(r[2], base))
    table(title_of(log, "GPT-2 small training, seq 1024, bfloat16, largest batch that fits"),
          [("row", ""), ("batch", "{:.0f}"), ("tokens/s", "{:,.0f}"), ("peak MiB", "{:,.0f}"),
           ("÷ best torch.compile", "{:.3f}")],
          rows, notes_of(f"{log}/rows.txt"))


def topic_train_ddp(log, args):
    # scaling: N GPUs' tokens/s over N x the same side's one-GPU row
    rows = train_rows(log)
    one = {}
    for r in rows:
        side, variant = r[0].split()
        n = int(re.match(r"ddp(\d+)", variant).group(1))
        r.insert(1, n)
        if n == 1:
            one[(side, variant[len("ddp1"):])] = r[3]
    for r in rows:
        side, variant = r[0].split()
        single = one.get((side, variant[len(f"ddp{r[1]}"):]))
        r.append(ratio(r[3], single * r[1]) if single else None)
    table(title_of(log, "GPT-2 small training on several GPUs, seq 1024, bfloat16"),
          [("row", ""), ("GPUs", "{:.0f}"), ("batch a GPU", "{:.0f}"), ("tokens/s", "{:,.0f}"),
           ("peak MiB", "{:,.0f}"), ("÷ (GPUs × 1 GPU)", "{:.3f}")],
          rows, notes_of(f"{log}/rows.txt"))


TOPICS = {name[len("topic_"):]: fn for name, fn in globals().items() if name.startswith("topic_")}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in TOPICS:
        sys.exit("usage: compare.py TOPIC LOG [ARGS]; topics: " + " ".join(sorted(TOPICS)))
    TOPICS[sys.argv[1]](sys.argv[2], sys.argv[3:])
