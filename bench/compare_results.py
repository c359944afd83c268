#!/usr/bin/env python3
"""Compares the padfold/oneDNN ratios of two bench_conv result tables (bench/results.md format),
layer by layer and in geometric mean, for each thread count: e.g. the same machine before and
after a Halide or schedule change. Both runs measured padfold and oneDNN side by side, so their
ratios are comparable across runs even when the machine's speed drifted between them.

usage: compare_results.py BEFORE.md[,BEFORE2.md,...] AFTER.md[,AFTER2.md,...]
                          [--names before,after] [--tolerance 0.05]
Several comma-separated tables per side (repeated runs, ideally interleaved A B A B ...) are
combined by taking each layer's median ratio.
Exits 1 if a layer's ratio dropped by more than the tolerance (relative), or the geomean did.
"""
import math
import re
import sys


def ratios(path):
    """{threads: {layer: padfold/oneDNN}} from a results table."""
    out, threads, col = {}, None, None
    for line in open(path):
        m = re.match(r"### (\d+) thread", line)
        if m:
            threads, col = int(m.group(1)), None
            out[threads] = {}
            continue
        if threads is None or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "layer":
            col = cells.index("padfold/oneDNN")
        elif col is not None and not cells[0].startswith("-"):
            out[threads][cells[0]] = float(cells[col].strip("*"))
    return out


def median_ratios(paths):
    """The per-layer median of several tables' ratios."""
    tables = [ratios(p) for p in paths.split(",")]
    out = {}
    for threads in tables[0]:
        out[threads] = {}
        for layer in tables[0][threads]:
            values = sorted(t[threads][layer] for t in tables if layer in t.get(threads, {}))
            n = len(values)
            out[threads][layer] = (values[n // 2] if n % 2 else
                                   (values[n // 2 - 1] + values[n // 2]) / 2)
    return out


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main():
    args = sys.argv[1:]
    names, tol = ["before", "after"], 0.05
    if "--names" in args:
        i = args.index("--names")
        names = args[i + 1].split(",")
        del args[i:i + 2]
    if "--tolerance" in args:
        i = args.index("--tolerance")
        tol = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    before, after = median_ratios(args[0]), median_ratios(args[1])
    worse = []
    for threads in sorted(before):
        b, a = before[threads], after.get(threads, {})
        print(f"\n{threads} thread(s): padfold/oneDNN")
        print(f"| layer | {names[0]} | {names[1]} | change |\n|---|---:|---:|---:|")
        for layer in b:
            if layer not in a:
                continue
            change = a[layer] / b[layer]
            flag = " (worse)" if change < 1 - tol else ""
            if flag:
                worse.append(f"{layer} at {threads} thread(s)")
            print(f"| {layer} | {b[layer]:.2f} | {a[layer]:.2f} | {change:.2f}x{flag} |")
        common = [layer for layer in b if layer in a]
        gb, ga = geomean([b[x] for x in common]), geomean([a[x] for x in common])
        flag = " (worse)" if ga / gb < 1 - tol else ""
        if flag:
            worse.append(f"geomean at {threads} thread(s)")
        print(f"| **geomean** | **{gb:.3f}** | **{ga:.3f}** | {ga / gb:.2f}x{flag} |")
    if worse:
        print("\nworse than the tolerance: " + ", ".join(worse))
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
