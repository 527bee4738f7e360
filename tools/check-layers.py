#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The layer check: every #include points down the stack or stays in its folder, and no
header includes itself back through others (a cycle).

The stack, lowest first (docs/architecture.md draws it):

    include < base < kernel < graph < vm < probes < compiler < agent < aggregator < tools < tests

A file in folder F may include "G/x.h" only if G's rank is at most F's; a bare "x.h" is a
file of the including folder (or, for "weft.pb-c.h", the wire schema generated from
agent/weft.proto).  Run from anywhere (--root DIR checks another tree); exits 1 and names the file, the line and the rule on
the first violations, 0 when the tree is clean.  tools/check.sh runs it before building.

include/ holds the headers weft installs for the programs it traces (weft/trace.h), at the
bottom: they include nothing of weft.  "weft/x.h" and <weft/x.h> name include/weft/x.h.
"""
import os
import re
import sys

RANKS = ["include", "base", "kernel", "graph", "vm", "probes", "compiler", "agent",
         "aggregator", "tools", "tests"]
RANK = {name: i for i, name in enumerate(RANKS)}
# generated headers and where they belong
GENERATED = {"weft.pb-c.h": "agent/weft.pb-c.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+(?:"([^"]+)"|<(weft/[^>]+)>)')
SOURCE = re.compile(r"\.(c|h)$")


def folder_of(path):
    return path.split("/", 1)[0]


def resolve(src, target):
    """The repo path an include of `target` in file `src` names, or None if not ours."""
    if target in GENERATED:
        return GENERATED[target]
    if target.startswith("weft/"):
        return "include/" + target  # an installed header, as its users include it
    if target.startswith("../"):
        return os.path.normpath(os.path.join(os.path.dirname(src), target))
    if "/" in target and folder_of(target) in RANK:
        return target
    # a bare name: the including file's own directory
    return os.path.normpath(os.path.join(os.path.dirname(src), target))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if len(sys.argv) == 3 and sys.argv[1] == "--root":
        root = sys.argv[2]  # another tree (the check's own test builds one)
    elif len(sys.argv) != 1:
        print("usage: check-layers.py [--root DIR]", file=sys.stderr)
        return 2
    os.chdir(root)
    files = []
    for top in RANKS:
        for dirpath, _, names in os.walk(top):
            for n in names:
                if SOURCE.search(n):
                    files.append(os.path.join(dirpath, n))
    errors = []
    edges = {}
    for f in sorted(files):
        src_rank = RANK[folder_of(f)]
        with open(f, encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                name = m.group(1) or m.group(2)
                tgt = resolve(f, name)
                tfolder = folder_of(tgt)
                if tfolder not in RANK:
                    continue  # a system or generated header outside the tree
                if RANK[tfolder] > src_rank:
                    errors.append(
                        f"{f}:{lineno}: includes {name}: {folder_of(f)}/ (rank "
                        f"{src_rank}) may not include {tfolder}/ (rank {RANK[tfolder]}): "
                        f"layers point down ({' < '.join(RANKS)}); move the concept down"
                    )
                if os.path.exists(tgt):
                    edges.setdefault(f, []).append((tgt, lineno))
    # cycles among the tree's own headers (a depth-first search with colours)
    colour = {}
    stack = []

    def visit(node):
        colour[node] = 1
        stack.append(node)
        for nxt, lineno in edges.get(node, []):
            if colour.get(nxt) == 1:
                cyc = stack[stack.index(nxt):] + [nxt]
                errors.append(f"{node}:{lineno}: include cycle: {' -> '.join(cyc)}")
            elif not colour.get(nxt):
                visit(nxt)
        stack.pop()
        colour[node] = 2

    for f in sorted(edges):
        if not colour.get(f):
            visit(f)
    for e in errors:
        print(f"layers: {e}", file=sys.stderr)
    if errors:
        print(f"layers: {len(errors)} violation(s)", file=sys.stderr)
        return 1
    print(f"layers: {len(files)} files, every include points down ({' < '.join(RANKS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
