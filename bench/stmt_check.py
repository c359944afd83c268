#!/usr/bin/env python3
"""Checks that the steady-state innermost loops of padfold kernels are free of boundary tests.

Reads the lowered statements `padfold compile --emit-stmt` writes (<target>/<layer>.stmt) and,
for every innermost `for` loop (a loop containing no other loop), looks for bounds tests:
select(...), likely(...), if (...) and clamped indices (min/max). Loops are counted apart by
where Halide's loop partitioning put them: the branches of the partition chain in the parallel
row loop that hold the border rows, and the steady state (the branch with the most rows; the
whole kernel where there is no such chain). Prints one line per kernel; exits 1 if a steady-state loop has a test.
With --verbose, prints each loop with a test, where it is and the test.

usage: stmt_check.py [--verbose] (file.stmt | bundle_dir) ...
"""
import glob
import os
import re
import sys

TEST = re.compile(r"\bselect\(|\blikely\(|\bif \(|\bmin\(|\bmax\(")


def loops(lines):
    """Yields (header index, body lines, enclosing headers) for each innermost for loop."""
    stack = []  # [index, is_for, has_inner_for]
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("}"):
            idx, is_for, has_inner = stack.pop()
            if is_for and not has_inner:
                yield idx, lines[idx + 1:i], [lines[k].strip() for k, _, _ in stack]
            if s.endswith("{"):  # "} else {", "} else if (...) {"
                stack.append([i, False, False])
            continue
        if s.endswith("{"):
            is_for = s.startswith("for (") or s.startswith("parallel for (")
            if is_for:
                for entry in stack:
                    if entry[1]:
                        entry[2] = True
            stack.append([i, is_for, False])


def partition_rows(lines):
    """The rows each branch of the top-level partition chain covers, keyed by its header line.

    Inside a kernel's parallel row loop, Halide's loop partitioning leaves a chain
    `if (y < a) {...} else if (y < b) {...} else {...}` (prologue, steady state, epilogue; a
    side without padding has no branch of its own). The branch covering the most rows is the
    steady state."""
    par = re.search(r"halide_do_par_for\(\(void \*\)[^,]*_par_for_[^,]*, (-?\d+), (\d+),",
                    "\n".join(lines))
    if not par:
        return {}
    lo, hi = int(par.group(1)), int(par.group(1)) + int(par.group(2))
    rows, start = {}, lo
    for line in lines:
        m = re.match(r"(?:if|\} else if) \([\w.$]+ < (-?\d+)\) \{$", line)
        if m:
            end = max(start, min(hi, int(m.group(1))))
            rows[line.strip()] = end - start
            start = end
        elif line == "} else {" and rows:
            rows[line.strip()] = hi - start
    return rows


def branch(outer, rows):
    """'steady' or 'border' for a loop inside the given enclosing headers."""
    if not rows:
        return "steady"
    most = max(rows.values())
    for o in outer:
        if o in rows:
            return "steady" if rows[o] == most else "border"
    return "steady"


def main():
    args = sys.argv[1:]
    verbose = "--verbose" in args
    files = []
    for a in args:
        if a == "--verbose":
            continue
        if os.path.isdir(a):  # a bundle directory: every target's statements
            files += sorted(glob.glob(os.path.join(a, "*", "*.stmt")))
        else:
            files.append(a)
    if not files:
        raise SystemExit(__doc__)
    failed = False
    for path in files:
        with open(path) as f:
            lines = f.read().split("\n")
        counts = {"steady": [0, 0], "border": [0, 0]}  # [loops, loops with tests]
        rows = partition_rows(lines)
        for idx, body, outer in loops(lines):
            kind = branch(outer, rows)
            bad = [b for b in body if TEST.search(b)]
            counts[kind][0] += 1
            if bad:
                counts[kind][1] += 1
                if verbose:
                    where = " / ".join(o[:60] for o in outer if o.startswith(("if", "}", "for")))
                    m = TEST.search(bad[0])
                    print(f"  line {idx + 1} ({kind}): {lines[idx].strip()[:70]}\n"
                          f"    inside: {where}\n"
                          f"    test: ...{bad[0][max(0, m.start() - 40):m.start() + 110]}...")
        steady, border = counts["steady"], counts["border"]
        failed = failed or steady[1] > 0
        print(f"{path.split('/')[-1]:<36} steady-state innermost loops {steady[0]:3d}, with tests "
              f"{steady[1]:2d} | border branches: loops {border[0]:3d}, with tests {border[1]:2d}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
