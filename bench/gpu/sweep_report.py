#!/usr/bin/env python3
"""Summarizes a GPU knob sweep (bench/gpu/sweep.sh, timed by run_bench.py --padfold-only).

For each op class (the layers' class as padfold's strategy table sees it: depthwise, pointwise,
stem, dense) and batch, every variant's speedup over the defaults (v0) on each layer of the
class, and the geometric mean over them; the best variants first, with their knobs. A variant
whose kernel failed its check counts as not a candidate.

usage: sweep_report.py sweep.md sweep_bundle/ [--top 5] [--out report.md]
"""
import argparse
import json
import math
import os
import re
from collections import defaultdict


def op_class(layer):
    c_in = layer["input_shape"][3 if layer["layout"] == "NHWC" else 1]
    if layer["groups"] > 1 and layer["groups"] == c_in:
        return "depthwise"
    if c_in <= 4:
        return "stem"
    if all(k == 1 for k in layer["kernel"]):
        return "pointwise"
    return "dense"


def read_times(path):
    """{layer name: padfold ms, or None where its check failed} from run_bench.py's table."""
    times = {}
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 12 or not re.search(r"_v\d+$", cells[0]):
                continue
            ms = float(cells[6])
            times[cells[0]] = ms if cells[11] == "yes" and math.isfinite(ms) else None
    return times


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep_md")
    ap.add_argument("bundle")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    times = read_times(args.sweep_md)
    with open(os.path.join(args.bundle, "bench_gpu_spec.json")) as f:
        layers = {L["name"]: L for L in json.load(f)["layers"]}
    with open(os.path.join(args.bundle, "knobs.json")) as f:
        knobs = json.load(f)
    # (class, batch) -> variant -> [speedup over v0 on each layer]
    speedups = defaultdict(lambda: defaultdict(list))
    variant_knobs = {}
    for name, ms in times.items():
        base, variant = re.match(r"(.*)_(v\d+)$", name).groups()
        v0 = times.get(base + "_v0")
        if v0 is None:
            continue
        L = layers[name]
        key = (op_class(L), L["input_shape"][0])
        variant_knobs.setdefault(variant, knobs.get(name, "defaults"))
        speedups[key][variant].append(v0 / ms if ms else 0.0)
    lines = ["# GPU knob sweep", "",
             f"From `{args.sweep_md}` ({len(times)} kernels). Speedup = the defaults' time / the "
             "variant's, geometric mean over the layers of the class; a variant failing on any "
             "layer of the class is left out.", ""]
    for (cls, batch) in sorted(speedups):
        per_variant = speedups[(cls, batch)]
        n_layers = max(len(v) for v in per_variant.values())
        ranked = sorted(((geomean(s), v) for v, s in per_variant.items()
                         if len(s) == n_layers and all(x > 0 for x in s)), reverse=True)
        lines += [f"## {cls}, batch {batch} ({n_layers} layers)", "",
                  "| variant | speedup | per layer | knobs |", "|---|---|---|---|"]
        for g, v in ranked[:args.top]:
            per = ", ".join(f"{x:.2f}" for x in per_variant[v])
            lines.append(f"| {v} | {g:.2f}x | {per} | {json.dumps(variant_knobs[v])} |")
        lines.append("")
    text = "\n".join(lines)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
