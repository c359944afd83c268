#!/usr/bin/env python3
"""int8 against float32 on the benchmark layers, padfold against itself, one run side by side.

Compiles bench/layers.json's layers as float32 (bench/make_bench_spec.py, without the prepadded
twins) and as int8 (int8_spec below), times both bundles with `padfold bench --json` at 1 and 2
threads, and writes a Markdown table of each layer's medians and the int8/float32 speedup, the CPU
named (lscpu's model and whether it has AVX512-VNNI). With --peer (bench_int8, built with
-DPADFOLD_BUILD_BENCH=ON), also padfold's int8 kernels against oneDNN's and XNNPACK's int8
convolutions, timed side by side in interleaved blocks by that program.

usage: bench/int8/run.py PADFOLD_BINARY OUT.md [--target host] [--min-time 0.3] [--work DIR]
                         [--peer BUILD/bin/bench_int8]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def cpu_line():
    info = dict(l.split(":", 1) for l in run(["lscpu"]).splitlines() if ":" in l)
    flags = info.get("Flags", "").split()
    model = " ".join(info.get("Model name", "?").split())
    family = f"family {info.get('CPU family', '?').strip()} model {info.get('Model', '?').strip()}"
    vnni = "AVX512-VNNI" if "avx512_vnni" in flags else "no AVX512-VNNI"
    isa = "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "SSE")
    simd = " ".join(sorted(f for f in flags if f.startswith(("avx", "fma", "amx"))))
    return f"{model} ({family}), {isa}, {vnni}; lscpu flags: {simd}"


def bench(padfold, spec, out, target, min_time):
    run([padfold, "compile", str(spec), "--target", target, "-o", str(out)])
    manifest = json.loads((out / "manifest.json").read_text())
    fallbacks = [k for t in manifest["targets"] for k, s in t["schedules"].items()
                 if "fallback" in s]
    if fallbacks:
        raise SystemExit(f"{spec}: kernels fell back to the conservative schedule: {fallbacks}")
    got = json.loads(run([padfold, "bench", str(out), "--threads", "1,2", "--min-time",
                          str(min_time), "--json"]))
    return {r["threads"]: {k["layer"]: k for k in r["kernels"]} for r in got["runs"]}, got


def float_spec(work):
    """The benchmark layers (bench/layers.json) as float32, without the prepadded twins."""
    work.mkdir(parents=True, exist_ok=True)
    full = work / "float_all.json"
    run([sys.executable, str(HERE.parent / "make_bench_spec.py"),
         str(HERE.parent / "layers.json"), str(full)])
    spec = json.loads(full.read_text())
    spec["layers"] = [L for L in spec["layers"] if not L["name"].endswith("_prepadded")]
    return spec


def int8_spec(spec):
    """The float benchmark spec's layers as int8: TFLite arithmetic, per-channel weight scales,
    input zero point -128 on the stems (a uint8 image's) and 5 elsewhere (-128 makes the zero
    point's term 0 once the input is offset to uint8, and Halide drops it), bias, ReLU6, the usual
    post-training quantized conv. Scales are fixed, not calibrated: the timing does not depend on
    them."""
    layers = []
    for L in spec["layers"]:
        q = dict(L, dtype="int8", bias=True, activation="relu6")
        q["quant"] = {
            "requantize": "tflite",
            "input": {"scale": 0.02, "zero_point": -128 if L["input_shape"][-1] <= 4 else 5},
            "weight_scale": [0.004 + 0.0001 * (o % 7) for o in range(L["out_channels"])],
            "output": {"scale": 0.05, "zero_point": -128},
        }
        layers.append(q)
    return dict(spec, model=spec["model"] + "_int8", layers=layers,
                defaults=dict(spec.get("defaults", {}), dtype="int8"),
                description="bench/int8/run.py: the benchmark layers as int8 (TFLite).")


def peer_tables(a, qspec, bundle):
    """padfold int8 against oneDNN and XNNPACK int8 (bench_int8's interleaved medians: padfold
    timed with each peer in a pair of its own), per thread count."""
    out = bundle.parent / "peer.json"
    run([a.peer, "--bundle", str(bundle), "--spec", str(qspec), "--threads", "1,2",
         "--min-time", str(a.min_time), "--json", str(out)])
    got = json.loads(out.read_text())
    lines = ["# int8 against oneDNN and XNNPACK int8", "",
             "`bench_int8` (bench/int8/bench_int8.cpp): the same int8 bundle against oneDNN 2.6's "
             "s8 convolution (input and output zero points, per-channel output scales, s32 bias, "
             "ReLU6 as a clip; NHWC src/dst, weights in its own layout, reordered outside timing) "
             "and XNNPACK's per-channel int8 convolution (`xnn_create_convolution2d_nhwc_qc8`, "
             "Debian's libxnnpack-dev snapshot of 2022-02, the operator TFLite's XNNPACK delegate "
             "runs; pads native, ReLU6 as its output range, a pthreadpool of the thread count), "
             "padfold timed against each in a pair of its own, interleaved blocks, medians (three "
             "thread pools interleaved on two cores starve each other). \"(busy)\": the machine "
             "was loaded through every retry.", ""]
    for r in got["runs"]:
        lines += [f"## {r['threads']} thread(s)", "",
                  "| layer | padfold ms | oneDNN ms | padfold speedup | padfold ms | "
                  "XNNPACK ms | padfold speedup | oneDNN kernel |",
                  "|---|---:|---:|---:|---:|---:|---:|---|"]
        for L in r["layers"]:
            busy_d = "" if L["onednn_quiet"] else " (busy)"
            busy_x = "" if L["xnnpack_quiet"] else " (busy)"
            lines.append(
                f"| {L['layer']} | {L['padfold_ms']:.4f} | {L['onednn_ms']:.4f} | "
                f"{L['onednn_ms'] / L['padfold_ms']:.2f}x{busy_d} | "
                f"{L['padfold_vs_xnnpack_ms']:.4f} | {L['xnnpack_ms']:.4f} | "
                f"{L['xnnpack_ms'] / L['padfold_vs_xnnpack_ms']:.2f}x{busy_x} | "
                f"{L['onednn_impl']} |")
        lines.append("")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("padfold")
    ap.add_argument("out")
    ap.add_argument("--target", default="host")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--work")
    ap.add_argument("--peer", help="bench_int8: padfold int8 against oneDNN int8")
    a = ap.parse_args()
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="padfold_int8_bench_"))
    spec = float_spec(work)
    fspec = work / "float.json"
    fspec.write_text(json.dumps(spec))
    qspec = work / "int8.json"
    qspec.write_text(json.dumps(int8_spec(spec), indent=1))
    f, fmeta = bench(a.padfold, fspec, work / "float", a.target, a.min_time)
    q, qmeta = bench(a.padfold, qspec, work / "int8", a.target, a.min_time)
    lines = [
        "# int8 against float32 (padfold against itself)", "",
        f"CPU: {cpu_line()}. Target `{qmeta['target']}`.", "",
        f"Command: `bench/int8/run.py {a.padfold} {a.out} --target {a.target} "
        f"--min-time {a.min_time}{f' --peer {a.peer}' if a.peer else ''}`. Both bundles timed "
        "in one run with `padfold bench` (medians after warm-up); int8 layers: TFLite "
        "arithmetic, per-channel weight scales, input zero point -128 on the stems (an image's) "
        "and 5 elsewhere (so that the zero point's term is computed), bias and ReLU6 in the "
        "epilogue; float32 layers: no bias or activation, default schedules (Winograd where the "
        "default table picks it).", "",
    ]
    for threads in sorted(f):
        lines += [f"## {threads} thread(s)", "",
                  "| layer | MFLOP | float32 ms | int8 ms | int8 GOP/s | int8 speedup |",
                  "|---|---:|---:|---:|---:|---:|"]
        tf = tq = 0.0
        for name, fk in f[threads].items():
            qk = q[threads][name]
            tf += fk["median_ms"]
            tq += qk["median_ms"]
            lines.append(f"| {name} | {fk['mflops']:.1f} | {fk['median_ms']:.4f} | "
                         f"{qk['median_ms']:.4f} | {qk['gflops']:.0f} | "
                         f"{fk['median_ms'] / qk['median_ms']:.2f}x |")
        lines += [f"| all | | {tf:.3f} | {tq:.3f} | | {tf / tq:.2f}x |", ""]
    if a.peer:
        lines += peer_tables(a, qspec, work / "int8")
    pathlib.Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
