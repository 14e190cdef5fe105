#!/usr/bin/env python3
"""Fails when a module of server/ or client/ calls, through another, back into itself.

Each .c file is a module, except the files one module is split into (MODULES below, which
share a private header). A module depends on another when it names a function defined
there (calls it, or takes its address). The dependencies must form layers: this prints
every cycle and exits 1 if there is one. The emulated device (server/emu) is a library of
its own and not checked here.

Usage: check-modules.py [ROOT]"""
import os
import re
import sys

# the files of one module (they share a private header)
MODULES = {
    'client': {'conn': ['conn.c', 'conn_send.c', 'conn_read.c', 'conn_callback.c']},
    'server': {},
}

DEF = re.compile(r'^(?!static\b)[A-Za-z_][\w \*]*?\b(cr_\w+)\s*\(', re.M)
NAME = re.compile(r'\b(cr_\w+)\b')
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)


def module_graph(folder):
    group = {f: m for m, files in MODULES[os.path.basename(folder)].items() for f in files}
    sources = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith('.c'):
            with open(os.path.join(folder, f)) as fh:
                sources[f] = COMMENT.sub('', fh.read())
    owner = {}
    for f, text in sources.items():
        for name in DEF.findall(text):
            owner[name] = group.get(f, f[:-2])
    edges = {group.get(f, f[:-2]): {} for f in sources}
    for f, text in sources.items():
        me = group.get(f, f[:-2])
        for name in set(NAME.findall(text)):
            other = owner.get(name)
            if other and other != me:
                edges.setdefault(me, {}).setdefault(other, set()).add(name)
    return edges


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    bad = 0
    for folder in ('server', 'client'):
        edges = module_graph(os.path.join(root, folder))
        found = cycles(edges)
        for comp in found:
            bad += 1
            print('%s/: the modules %s call each other:' % (folder, ', '.join(comp)))
            for a in comp:
                for b in comp:
                    if b in edges.get(a, {}):
                        print('  %s -> %s (%s)' % (a, b, ', '.join(sorted(edges[a][b])[:4])))
        if not found:
            print('%s/: %d modules in layers, no cycle' % (folder, len(edges)))
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
