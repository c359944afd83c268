#!/usr/bin/env python3
"""The GPU tests' case sets on a real GPU: every layer of each set's bundle (written by
gpu_cases_export on the CPU machine: the op x convention x border x layout matrix, windows wider
than the input, random in-range knobs) run on the device through ctypes and compared element-wise
with the naive reference's output computed there: max |got - ref| <= 1e-4 max |ref|, as
gpu_kernels_test asks of PoCL.

usage: check_cases.py CASES_DIR [--out results.md]   (each set in a process of its own, so a
crash is a failed set, not the end of the run)
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import Buffers, Bundle, errors  # noqa: E402


def check_set(directory):
    """Runs one set; prints a line per failing layer and a summary; returns (ran, failed)."""
    bundle = Bundle(directory)
    with open(os.path.join(directory, "cases.json")) as f:
        cases = json.load(f)
    ran = failed = 0
    for case in cases:
        name = case["layer"]
        kernel = bundle.kernels[name]
        arrays = []
        for i, t in enumerate(case["inputs"] + [case["reference"]]):
            desc = kernel.buffers[i]
            shape = [desc.shape[d] for d in range(desc.rank)]
            a = np.fromfile(os.path.join(directory, t["file"]), np.float32)
            arrays.append(a.reshape(shape) if i < len(case["inputs"]) else a)
        want = arrays.pop()
        desc = kernel.buffers[len(arrays)]
        out = np.full([desc.shape[d] for d in range(desc.rank)], -12345.0, np.float32)
        bufs = Buffers(kernel, arrays + [out])
        ran += 1
        try:
            bufs.call("the run")
            got = bufs.output().reshape(-1)
            bufs.free()
        except RuntimeError as e:
            failed += 1
            print(f"{name}: FAILED {e}\n  {case['describe']}", flush=True)
            continue
        tol = 1e-4 * max(float(np.max(np.abs(want))), 0.0)
        diff = np.abs(got.astype(np.float64) - want) if got.size == want.size else None
        bad = int(np.sum(~(diff <= tol))) if diff is not None else got.size
        if bad:
            failed += 1
            worst = float(np.nanmax(diff)) if diff is not None else float("inf")
            print(f"{name}: {bad} of {want.size} elements differ by more than {tol:.3g} (worst "
                  f"{worst:.3g})\n  {case['describe']}", flush=True)
    if errors:
        print("Halide errors: " + " | ".join(errors[-3:]))
    print(f"{os.path.basename(directory)}: {ran - failed} of {ran} layers match the reference "
          f"({bundle.target['target']})", flush=True)
    return ran, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases_dir")
    ap.add_argument("--out", default=None)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: one set
    args = ap.parse_args()
    if args.one:
        ran, failed = check_set(args.cases_dir)
        sys.exit(1 if failed or not ran else 0)
    sets = sorted(d for d in os.listdir(args.cases_dir)
                  if os.path.isfile(os.path.join(args.cases_dir, d, "cases.json")))
    if not sets:
        raise SystemExit(f"{args.cases_dir}: no case sets (run gpu_cases_export first)")
    started, lines, failures = time.time(), [], 0
    for s in sets:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--one",
                            os.path.join(args.cases_dir, s)], capture_output=True, text=True)
        sys.stdout.write(r.stdout + r.stderr)
        summary = (r.stdout.strip().splitlines() or [f"{s}: no output"])[-1]
        if r.returncode:
            failures += 1
            summary = f"{s}: FAILED (exit {r.returncode}): {summary}"
        lines.append(f"- {summary}")
    text = (f"GPU case sets (bench/gpu/check_cases.py, {time.time() - started:.0f} s):\n\n" +
            "\n".join(lines) + "\n")
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
