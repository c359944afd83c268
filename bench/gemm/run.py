#!/usr/bin/env python3
"""The GEMM-like pointwise implementation against the direct loops, one run side by side.

Writes a spec of the pointwise convs (1x1, no padding, NHWC, weights HWIO with weight files, as a
model bundle holds them) of ResNet-50, MobileNetV2 and EfficientNet-B0 that differ in shape,
compiles it once per way of computing them, checks every bundle's kernels against NumPy, and times
them with `padfold bench --json` at THREADS, interleaved (each round times every bundle once;
medians over the rounds):
  direct        gemm_pixels 0
  gemm PxV      gemm_pixels P, gemm_vectors V (one column per --tiles entry)
and writes a Markdown table of the medians and each way's speedup over direct, the CPU named.

usage: bench/gemm/run.py PADFOLD_BINARY OUT.md [--target host] [--tiles 6x4,4x4]
                         [--threads 1] [--min-time 0.2] [--rounds 3]
"""
import argparse
import json
import pathlib
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "int8"))
from run import cpu_line, run  # noqa: E402  (bench/int8/run.py)

# name, plane, input channels, output channels, stride
LAYERS = [("r50_s56_256_64", 56, 256, 64, 1), ("r50_s28_512_128", 28, 512, 128, 1),
          ("r50_s14_1024_256", 14, 1024, 256, 1), ("r50_s14_256_1024", 14, 256, 1024, 1),
          ("r50_s7_2048_512", 7, 2048, 512, 1), ("r50_s7_512_2048", 7, 512, 2048, 1),
          ("r50_down_28_512_1024_s2", 28, 512, 1024, 2), ("mb2_s14_96_576", 14, 96, 576, 1),
          ("mb2_s7_960_160", 7, 960, 160, 1), ("eb0_s14_112_672", 14, 112, 672, 1),
          ("eb0_s7_1152_192", 7, 1152, 192, 1), ("eb0_head_7_320_1280", 7, 320, 1280, 1)]


def write_spec(work):
    rng = np.random.default_rng(1)
    layers = []
    for name, hw, ci, co, s in LAYERS:
        path = work / f"{name}_w.npy"
        np.save(path, rng.uniform(-1, 1, (1, 1, ci, co)).astype(np.float32))
        layers.append({"name": name, "op": "conv2d", "input": f"{name}_in", "out_channels": co,
                       "kernel": 1, "stride": s, "bias": True, "activation": "relu",
                       "weight_files": {"weights": str(path)}})
        bias = work / f"{name}_b.npy"
        np.save(bias, rng.uniform(-1, 1, (co,)).astype(np.float32))
        layers[-1]["weight_files"]["bias"] = str(bias)
    spec = {"model": "pointwise", "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
            "inputs": [{"name": f"{n}_in", "shape": [1, hw, hw, ci]} for n, hw, ci, _, _ in LAYERS],
            "layers": layers}
    path = work / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def check(padfold, bundle, work, rng):
    """Every kernel of the bundle against NumPy on random inputs (relative to the largest)."""
    worst = 0.0
    for name, hw, ci, _, s in LAYERS:
        x = rng.uniform(-1, 1, (1, hw, hw, ci)).astype(np.float32)
        np.save(work / "x.npy", x)
        run([padfold, "run", str(bundle), "--layer", name, "--input", str(work / "x.npy"),
             "--output", str(work / "y.npy")])
        w = np.load(work / f"{name}_w.npy")[0, 0].astype(np.float64)
        b = np.load(work / f"{name}_b.npy").astype(np.float64)
        want = np.maximum(x[:, ::s, ::s, :].astype(np.float64) @ w + b, 0)
        err = float(np.abs(np.load(work / "y.npy") - want).max() / np.abs(want).max())
        if err > 1e-5:
            raise SystemExit(f"{bundle.name} {name}: error {err:.2e} of the largest output")
        worst = max(worst, err)
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("padfold")
    ap.add_argument("out")
    ap.add_argument("--target", default="host")
    ap.add_argument("--tiles", default="6x4,4x4")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="padfold_gemm_"))
    spec = write_spec(work)
    ways = {"direct": {"gemm_pixels": 0}}
    for tile in a.tiles.split(","):
        p, v = (int(t) for t in tile.split("x"))
        ways[f"gemm {tile}"] = {"gemm_pixels": p, "gemm_vectors": v}
    bundles, worst = {}, 0.0
    rng = np.random.default_rng(2)
    for way, knobs in ways.items():
        overrides = work / "knobs.json"
        overrides.write_text(json.dumps({n: knobs for n, *_ in LAYERS}))
        out = work / way.replace(" ", "_")
        run([a.padfold, "compile", str(spec), "--target", a.target, "-o", str(out),
             "--schedules", str(overrides)])
        schedules = json.loads((out / "manifest.json").read_text())["targets"][0]["schedules"]
        want = "direct" if way == "direct" else "gemm"
        for n, *_ in LAYERS:
            got = schedules[n].get("implementation")
            if got != want and not (want == "gemm" and got == "direct"):
                raise SystemExit(f"{way}: {n} is computed by '{got}'")
        worst = max(worst, check(a.padfold, out, work, rng))
        bundles[way] = (out, {n: schedules[n]["implementation"] for n, *_ in LAYERS})
    times = {way: {n: [] for n, *_ in LAYERS} for way in bundles}
    for _ in range(a.rounds):
        for way, (out, _) in bundles.items():
            for name, *_ in LAYERS:
                got = json.loads(run([a.padfold, "bench", str(out), "--layer", name, "--threads",
                                      str(a.threads), "--min-time", str(a.min_time), "--json"]))
                times[way][name].append(got["runs"][0]["kernels"][0]["median_ms"])
    med = {w: {n: statistics.median(v) for n, v in t.items()} for w, t in times.items()}
    lines = ["# GEMM-like pointwise convs against the direct loops (bench/gemm/run.py)", "",
             f"CPU: {cpu_line()}", "",
             f"Command: `bench/gemm/run.py {a.padfold} {a.out} --target {a.target} --tiles "
             f"{a.tiles} --threads {a.threads} --min-time {a.min_time} --rounds {a.rounds}` "
             f"(medians of {a.rounds} interleaved rounds of `padfold bench --layer`; every kernel "
             f"checked against NumPy first, largest error {worst:.1e} of the largest output). "
             "`(direct)`: the plane has fewer than 4 tiles, so the knobs choose the direct loops.",
             "", "| layer | direct ms | " + " | ".join(w for w in ways if w != "direct") + " |",
             "|---|---:|" + "---:|" * (len(ways) - 1)]
    for name, hw, ci, co, s in LAYERS:
        d = med["direct"][name]
        cells = []
        for w in ways:
            if w == "direct":
                continue
            note = "" if bundles[w][1][name] == "gemm" else " (direct)"
            cells.append(f"{med[w][name]:.3f} ({d / med[w][name]:.2f}x){note}")
        shape = f"{hw}x{hw}x{ci} -> {co}" + (f" stride {s}" if s > 1 else "")
        lines.append(f"| {name} {shape} | {d:.3f} | " + " | ".join(cells) + " |")
    pathlib.Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
