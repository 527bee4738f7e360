#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where a JIT-compiled BPF program's time goes, instruction by instruction.

Reads the samples of a `perf record` (cpu-clock) that fell in a BPF program and places them on
the program's machine code, as tools/bench/jitdump wrote it while the program was loaded
(IMAGE, at ADDRESS), disassembled by objdump.  For what Debian's perf cannot annotate itself
(docs/performance.md, "Kernel edges at ~28,000 requests a second": inside weft's program).

Usage: jit-annotate.py PERF_DATA IMAGE ADDRESS [CONTEXT]   (a program without subprograms:
  weft's are, their helpers inlined; a subprogram's code is elsewhere in the kernel)
  IMAGE, ADDRESS  a line of jitdump's output: the .bin file and the hex address
  CONTEXT         instructions shown before each hot one (default 6)
Prints the program's samples, then each instruction with at least 2 % of them, with the
instructions before it: a sampled address is where the interrupt found the CPU, usually just
after an instruction that waited (a load that missed in the cache, a call returning).
Needs perf and objdump (binutils).
"""
import collections
import signal
import subprocess
import sys


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    data, image = sys.argv[1], sys.argv[2]
    try:
        base = int(sys.argv[3], 16)
        context = int(sys.argv[4]) if len(sys.argv) == 5 else 6
    except ValueError:
        sys.exit("jit-annotate: ADDRESS is a hex address and CONTEXT a count (run it without arguments for its usage)")
    try:
        with open(image, "rb") as f:
            size = len(f.read())
        perf = subprocess.run(["perf", "script", "-i", data, "-F", "ip"],
                              capture_output=True, text=True)
    except OSError as e:
        sys.exit("jit-annotate: %s" % e)
    if perf.returncode:
        sys.exit("jit-annotate: perf script -i %s: %s" % (data, perf.stderr.strip()))
    out = perf.stdout
    hits = collections.Counter()
    for line in out.split():
        try:
            ip = int(line, 16)
        except ValueError:
            continue
        if base <= ip < base + size:
            hits[ip] += 1
    total = sum(hits.values())
    asm = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64",
                          "--adjust-vma=%#x" % base, image], check=True,
                         capture_output=True, text=True).stdout
    insns = []
    for line in asm.splitlines():
        head, _, rest = line.partition(":")
        head = head.strip()
        if not rest or "<" in head:
            continue
        try:
            insns.append((int(head, 16), rest.strip()))
        except ValueError:
            continue
    print("%s at %#x (%d bytes): %d samples" % (image, base, size, total))
    if not total:
        return
    shown = -1
    for i, (addr, text) in enumerate(insns):
        if hits[addr] * 50 < total:
            continue
        if i - context > shown + 1:
            print("   ...")
        for j in range(max(i - context, shown + 1), i + 1):
            a, t = insns[j]
            mark = "%5.1f%%" % (hits[a] * 100.0 / total) if hits[a] else "      "
            print("%s  +%-5x %s" % (mark, a - base, t))
        shown = i


if __name__ == "__main__":
    main()
