#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Generates the tool sections of docs/tools.md from examples/*.wq and /usr/sbin/*.bt.

Between the markers `<!-- BEGIN tools table -->` and `<!-- END tools table -->` it writes the
table of the 38 tools (line counts of the original and of the weft query, what the example
needs here), and between `<!-- BEGIN tools side by side -->` and its END marker each tool's
original (code lines only: comments and blank lines left out) next to its weft query.

Lines are counted the same way on both sides: lines of code, not blank, not comments
(bpftrace: `//`, `/* ... */`, `#!`; weft: `--`). The status of a tool comes from its example
(a `kprobe:` source: needs kprobes) and from the PENDING table of tests/tools/test_tools.py
(syntax that other branches of issue 15 build).

    python3 docs/tools_table.py          rewrite docs/tools.md
    python3 docs/tools_table.py --check  exit 1 if docs/tools.md is out of date

The originals are read from /usr/sbin (Debian's bpftrace package); without them the
script refuses to write counts of nothing, and --check exits 77 (skipped).
"""
import importlib.util
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DOC = os.path.join(ROOT, "docs", "tools.md")
BT = "/usr/sbin"


def pending():
    spec = importlib.util.spec_from_file_location(
        "test_tools", os.path.join(ROOT, "tests", "tools", "test_tools.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m.PENDING


def bt_code(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = []
    for line in text.splitlines():
        s = line.split("//", 1)[0].rstrip() if "//" in line and '"' not in line.split(
            "//", 1)[0] else line.rstrip()
        if s.strip() and not s.startswith("#!"):
            out.append(s)
    return out


def wq_code(text):
    return [ln.rstrip() for ln in text.splitlines()
            if ln.strip() and not ln.lstrip().startswith("--")]


def ext_files(text):
    """The extension files a query names (`using 'FILE.bpf.c'`), relative to examples/."""
    return re.findall(r"^\s*using\s+'([^']+)'", text, re.M)


def wq_header(text):
    """The header comment's first part, up to its `Original:` line, without the name."""
    words = []
    for line in text.splitlines():
        line = line.lstrip("- ").rstrip()
        if line.startswith("Original:"):
            break
        words.append(line)
    first = " ".join(words)
    return first.split(":", 1)[1].strip() if ":" in first else first


def tools():
    names = sorted(f[:-3] for f in os.listdir(BT) if f.endswith(".bt"))
    if not names and "--check" in sys.argv:
        print("skipped: bpftrace's tools are not installed (%s/*.bt)" % BT, file=sys.stderr)
        sys.exit(77)
    if len(names) != 38:
        sys.exit("expected the 38 tools of bpftrace in %s, found %d" % (BT, len(names)))
    return names


def examples(name):
    """The example files of a tool: NAME.wq, and NAME_PART.wq for a tool split in two."""
    d = os.path.join(ROOT, "examples")
    return sorted(f for f in os.listdir(d)
                  if f == name + ".wq" or (f.startswith(name + "_") and f.endswith(".wq")))


def status(name, text, pend):
    if re.search(r"\bk(ret)?probe:", "\n".join(wq_code(text))):
        return "needs kprobes (skipped here)"
    if name in pend:
        return "pending: " + pend[name]
    if any("__ksym" in open(os.path.join(ROOT, "examples", f)).read()
           for f in ext_files(text)):
        return "needs data symbols in /proc/kallsyms (skipped here: CONFIG_KALLSYMS_ALL is off)"
    return "runs here"


def generate():
    pend = pending()
    rows = ["| tool | what it shows | bpftrace lines | weft lines | here |",
            "| --- | --- | ---: | ---: | --- |"]
    sides = []
    tb = tw = 0
    for name in tools():
        bt = bt_code(open(os.path.join(BT, name + ".bt")).read())
        files = examples(name)
        if not files:
            sys.exit("examples/%s.wq is missing" % name)
        texts = [open(os.path.join(ROOT, "examples", f)).read() for f in files]
        wq = [ln for t in texts for ln in wq_code(t)]
        exts = [(x, open(os.path.join(ROOT, "examples", x)).read())
                for t in texts for x in ext_files(t)]
        wq += [ln for _, x in exts for ln in bt_code(x)]  # C: counted as bpftrace's are
        tb += len(bt)
        tw += len(wq)
        rows.append("| [%s](#%s) | %s | %d | %d | %s |" % (
            name, name, wq_header(texts[0]), len(bt), len(wq),
            status(name, "\n".join(texts), pend)))
        sides.append("### %s\n" % name)
        sides.append("`/usr/sbin/%s.bt`, %d lines of code:\n" % (name, len(bt)))
        sides.append("```\n%s\n```\n" % "\n".join(bt))
        for f, t in zip(files, texts):
            sides.append("`examples/%s`, %d lines:\n" % (f, len(wq_code(t))))
            sides.append("```\n%s```\n" % t)
        for f, x in exts:
            sides.append("`examples/%s` (its extension, C), %d lines:\n" % (f, len(bt_code(x))))
            sides.append("```\n%s```\n" % x)
    rows.append("| all 38 | | %d | %d | |" % (tb, tw))
    return "\n".join(rows) + "\n", "\n".join(sides)


def splice(doc, tag, body):
    b, e = "<!-- BEGIN %s -->\n" % tag, "<!-- END %s -->" % tag
    i, j = doc.index(b) + len(b), doc.index(e)
    return doc[:i] + body + doc[j:]


def main():
    table, sides = generate()
    doc = open(DOC).read()
    new = splice(splice(doc, "tools table", table), "tools side by side", sides)
    if "--check" in sys.argv:
        if new != doc:
            print("docs/tools.md is out of date: run python3 docs/tools_table.py",
                  file=sys.stderr)
            return 1
        return 0
    open(DOC, "w").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
