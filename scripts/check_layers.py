#!/usr/bin/env python3
"""The architecture check (docs/architecture.md): which folder of src/ may
use which.

Every folder of the library has a layer (LAYERS below). A file may include,
and an object may call or read, only what lies in its own folder or in a
folder of a lower layer. CUDA's headers are included only in folders named
`cuda`. One symbol is exempt: tc__device_ops_builtin, the device seam's
table, which runtime/device_ops.c takes from the build's src/cuda or
src/nocuda (the table is chosen at link time). And with that edge counted
too, no cycle of calls spans two folders.

    scripts/check_layers.py                 the include rules (no build needed)
    scripts/check_layers.py BUILD [BUILD]   also the link rules, from the
                                            objects of each build folder

Exit status 0 when every rule holds, 1 otherwise (each break on a line)."""
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

# Bottom first. A folder not listed here is an error: a new module takes a
# layer before it takes code.
LAYERS = [
    ['base'],
    ['access'],
    ['memory', 'sanitizer'],
    ['runtime'],
    ['runtime/cuda'],
    ['memory/cuda'],
    ['random'],
    ['random/cuda'],
    ['tensor', 'tensor/cpu'],
    ['tensor/cuda', 'tensor/cuda/kernels'],
    ['optim'],
    ['optim/cuda'],
    ['graph'],
    ['graph/cuda'],
    ['jit'],
    ['jit/cuda'],
    ['dist'],
    ['dist/cuda'],
    ['io', 'interop'],
    ['train'],
    ['cuda', 'nocuda'],
]
RANK = {folder: i for i, group in enumerate(LAYERS) for folder in group}
# tensor and its cpu/ backend are one module: the front end names the CPU
# tables, the CPU backend uses the front end's iterator.
SAME = {'tensor/cpu': 'tensor', 'tensor/cuda/kernels': 'tensor/cuda'}
REGISTRATION = ('runtime', 'tc__device_ops_builtin')
CUDA_HEADER = re.compile(r'#\s*include\s*<(cuda[^>]*|cublas[^>]*|nccl\.h|nvrtc\.h|nvtx3/[^>]*|'
                         r'nvml\.h|cuda_runtime[^>]*)>')
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)

breaks = []


def folder_of(path):
    """src/tensor/cuda/kernels/x.cu -> tensor/cuda/kernels"""
    return os.path.dirname(os.path.relpath(path, os.path.join(ROOT, 'src')))


def unit(folder):
    return SAME.get(folder, folder)


def rank(folder, where):
    if folder not in RANK:
        breaks.append(f'{where}: folder src/{folder} has no layer in scripts/check_layers.py')
        return -1
    return RANK[folder]


def allowed(src, dst):
    return unit(src) == unit(dst) or RANK.get(dst, 99) < RANK.get(src, -1)


def sources():
    for base, _, files in os.walk(os.path.join(ROOT, 'src')):
        for f in sorted(files):
            if f.endswith(('.c', '.h', '.cu', '.cuh')):
                yield os.path.join(base, f)


def check_includes():
    for path in sources():
        rel = os.path.relpath(path, ROOT)
        folder = folder_of(path)
        rank(folder, rel)
        text = open(path, encoding='utf-8').read()
        in_cuda = 'cuda' in folder.split('/')
        for m in CUDA_HEADER.finditer(text):
            if not in_cuda:
                line = text.count('\n', 0, m.start()) + 1
                breaks.append(f'{rel}:{line}: includes <{m.group(1)}>, but only cuda/ folders '
                              f'may use CUDA')
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            if inc.startswith('tcuda/'):
                continue
            here = os.path.join(os.path.dirname(path), inc)
            target = here if os.path.exists(here) else os.path.join(ROOT, 'src', inc)
            if not os.path.exists(target):
                continue  # a header of the build (e.g. a generated one)
            line = text.count('\n', 0, m.start()) + 1
            if '../' in inc:
                breaks.append(f'{rel}:{line}: "{inc}": spell includes from src/, never ../')
            dst = folder_of(target)
            if not allowed(folder, dst):
                breaks.append(f'{rel}:{line}: src/{folder} (layer {RANK.get(folder)}) includes '
                              f'"{inc}" of src/{dst} (layer {RANK.get(dst)}), which is not below it')


# ---- the link rules ----------------------------------------------------------


def source_list(build):
    """The library's sources as this build compiled them (src/sources.cmake
    lists, CUDA or not as the build's cache says)."""
    cache = open(os.path.join(build, 'CMakeCache.txt')).read()
    have_cuda = re.search(r'^TCUDA_BUILT_WITH_CUDA:INTERNAL=ON$', cache, re.M) is not None
    text = re.sub(r'#[^\n]*', '', open(os.path.join(ROOT, 'src', 'sources.cmake')).read())
    lists = {}
    for name, body in re.findall(r'set\((TCUDA_\w*SOURCES)\s+(.*?)\)', text, re.S):
        lists[name] = [w for w in body.split() if w.startswith('src/')]
    return lists['TCUDA_SOURCES'] + lists['TCUDA_CUDA_SOURCES' if have_cuda else
                                          'TCUDA_NOCUDA_SOURCES']


def symbols(obj):
    out = subprocess.run(['nm', obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in 'TDBRCVW':
            defined.add(p[2])
        elif len(p) == 2 and p[0] == 'U':
            undefined.add(p[1])
    return defined, undefined


def check_links(build):
    objdir = os.path.join(build, 'CMakeFiles', 'tcuda_objects.dir')
    files = source_list(build)
    defs, uses = {}, {}
    for src in files:
        obj = os.path.join(objdir, src + '.o')
        if not os.path.exists(obj):
            breaks.append(f'{build}: no object for {src} (build it first)')
            continue
        d, u = symbols(obj)
        for s in d:
            defs[s] = src
        uses[src] = u
    edges = {src: set() for src in uses}
    for src, us in uses.items():
        a = folder_of(os.path.join(ROOT, src))
        for sym in sorted(us):
            dst_src = defs.get(sym)
            if not dst_src or dst_src == src:
                continue
            edges[src].add(dst_src)
            b = folder_of(os.path.join(ROOT, dst_src))
            if allowed(a, b) or (a, sym) == REGISTRATION:
                continue
            breaks.append(f'{src} (src/{a}, layer {RANK.get(a)}) uses {sym} of {dst_src} '
                          f'(src/{b}, layer {RANK.get(b)})')
    for scc in strongly_connected(edges):
        folders = sorted({unit(folder_of(os.path.join(ROOT, f))) for f in scc})
        if len(folders) > 1:
            breaks.append(f'{build}: a cycle of calls spans src/' + ', src/'.join(folders) +
                          ': ' + ' '.join(sorted(scc)))


def strongly_connected(edges):
    """Tarjan's algorithm, iterative: the components of more than one node."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            pushed = False
            for w in it:
                if w not in edges:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    pushed = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if pushed:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def main():
    check_includes()
    for build in sys.argv[1:]:
        check_links(build)
    for b in breaks:
        print('check_layers: ' + b)
    if breaks:
        print(f'check_layers: {len(breaks)} breaks of the layer rules (docs/architecture.md)')
        return 1
    what = 'includes' + (' and links (' + ', '.join(sys.argv[1:]) + ')' if sys.argv[1:] else '')
    print(f'check_layers: {what} follow the layers')
    return 0


if __name__ == '__main__':
    sys.exit(main())
