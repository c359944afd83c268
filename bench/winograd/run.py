#!/usr/bin/env python3
"""Winograd against direct convolution on ResNet-50's 3x3 stride-1 stages, one run side by side.

Writes a spec of the four distinct 3x3 stride-1 convs of ResNet-50 (NHWC, weights HWIO, SAME, no
bias), compiles it once per way of computing them, and times every bundle's kernels with
`padfold bench --json` at 1 thread, interleaved (each round times every bundle once; medians over
the rounds):
  direct             winograd 0
  f2 per call / f4 per call   F(2,3) / F(4,3), the layer's own weights passed per call (no weight
                     files: the kernel transforms them, G g GT, on every call)
  f2 prepared / f4 prepared   the same, with weight files: the compile stores U = G g GT and the
                     kernel reads it (docs/prepared-weights.md)
and writes a Markdown table of the medians and each way's speedup over direct, the CPU named.

usage: bench/winograd/run.py PADFOLD_BINARY OUT.md [--target host] [--min-time 0.3] [--rounds 3]
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "int8"))
from run import cpu_line, run  # noqa: E402  (bench/int8/run.py)

STAGES = [("s56", 56, 64), ("s28", 28, 128), ("s14", 14, 256), ("s7", 7, 512)]
WAYS = [("direct", 0, False), ("f2 per call", 1, False), ("f4 per call", 2, False),
        ("f2 prepared", 1, True), ("f4 prepared", 2, True)]


def write_spec(work, files):
    rng = np.random.default_rng(1)
    layers = []
    for name, hw, c in STAGES:
        L = {"name": name, "op": "conv2d", "input_shape": [1, hw, hw, c], "out_channels": c,
             "kernel": 3, "padding": "same"}
        if files:
            path = work / f"{name}_w.npy"
            np.save(path, rng.uniform(-1, 1, (3, 3, c, c)).astype(np.float32))
            L["weight_files"] = {"weights": str(path)}
        layers.append(L)
    spec = {"model": "resnet50_3x3", "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
            "inputs": [{"name": f"{n}_in", "shape": [1, hw, hw, c]} for n, hw, c in STAGES],
            "layers": [dict(L, input=f"{L['name']}_in") for L in layers]}
    for L in spec["layers"]:
        del L["input_shape"]
    path = work / ("files.json" if files else "per_call.json")
    path.write_text(json.dumps(spec))
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("padfold")
    ap.add_argument("out")
    ap.add_argument("--target", default="host")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="padfold_winograd_"))
    specs = {files: write_spec(work, files) for files in (False, True)}
    bundles = {}
    for way, knob, files in WAYS:
        knobs = work / f"knobs_{knob}.json"
        knobs.write_text(json.dumps({n: {"winograd": knob, "winograd_min_tiles": 0}
                                     for n, _, _ in STAGES}))
        out = work / way.replace(" ", "_")
        run([a.padfold, "compile", str(specs[files]), "--target", a.target, "-o", str(out),
             "--schedules", str(knobs)])
        manifest = json.loads((out / "manifest.json").read_text())
        for k in manifest["kernels"]:
            form = k["buffers"][1]["layout"]
            if files and knob and not form.startswith("winograd"):
                raise SystemExit(f"{way}: {k['layer']}'s weights are not prepared ({form})")
        bundles[way] = out
    times = {way: {n: [] for n, _, _ in STAGES} for way in bundles}
    for _ in range(a.rounds):
        for way, out in bundles.items():
            for name, _, _ in STAGES:
                got = json.loads(run([a.padfold, "bench", str(out), "--layer", name, "--threads",
                                      "1", "--min-time", str(a.min_time), "--json"]))
                times[way][name].append(got["runs"][0]["kernels"][0]["median_ms"])
    med = {w: {n: statistics.median(v) for n, v in t.items()} for w, t in times.items()}
    lines = ["# Winograd against direct convolution (bench/winograd/run.py)", "",
             f"CPU: {cpu_line()}", "",
             f"Command: `bench/winograd/run.py {a.padfold} {a.out} --target {a.target} "
             f"--min-time {a.min_time} --rounds {a.rounds}` (1 thread; medians of {a.rounds} "
             "interleaved rounds of `padfold bench --layer`).", "",
             "| layer | direct ms | " + " | ".join(w for w, _, _ in WAYS[1:]) + " |",
             "|---|---:|" + "---:|" * (len(WAYS) - 1)]
    for name, hw, c in STAGES:
        d = med["direct"][name]
        cells = [f"{med[w][name]:.3f} ({d / med[w][name]:.2f}x)" for w, _, _ in WAYS[1:]]
        lines.append(f"| {hw}x{hw}x{c} -> {c} | {d:.3f} | " + " | ".join(cells) + " |")
    pathlib.Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
