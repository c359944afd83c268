#!/usr/bin/env python3
"""Whole CNNs in int8 as ONNX Runtime's own quantizer writes them, padfold against ONNX Runtime.

Each float model of bench/models (run.sh's work directory: run it once first) is quantized by
onnxruntime.quantization.quantize_static (QDQ, per-channel int8 weights, uint8 activations: the
quantizer's advice for x86-64, 8 random calibration inputs), imported with `padfold import`'s
default options, compiled for the target, and checked against ONNX Runtime's int8 output; then,
per thread count, ONNX Runtime int8 (before and after), padfold int8, ONNX Runtime float32 and
padfold float32 (the float model imported with default options and compiled by this padfold,
beside the int8 bundle) are timed in one run: `padfold bench --model-only` and ort_time.py,
medians. A model padfold refuses is listed with the reason.
Opt-in, never part of the test suite.

usage: bench/models/int8_run.py PADFOLD_BINARY OUT.md [--models resnet50 ...] [--target host]
                                [--threads 1,2] [--min-time 0.3] [--work DIR]
"""
import argparse
import json
import pathlib
import subprocess
import sys

import numpy as np
import onnx
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "int8"))
from run import cpu_line  # noqa: E402  (bench/int8/run.py)


class RandomImages(CalibrationDataReader):
    def __init__(self, name, shape, count=8):
        rng = np.random.default_rng(3)
        self.batches = iter([{name: rng.uniform(-1, 1, shape).astype(np.float32)}
                             for _ in range(count)])

    def get_next(self):
        return next(self.batches, None)


def quantize(src, dst):
    model = onnx.load(str(src))
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    quantize_static(str(src), str(dst), RandomImages(inp.name, shape), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    return inp.name, shape


def ort_ms(onnx_path, threads, min_time, check=None):
    cmd = [sys.executable, str(HERE / "ort_time.py"), str(onnx_path), str(threads), str(min_time)]
    if check:
        cmd += ["--check", str(check[0]), str(check[1])]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def padfold_ms(padfold, bundle, threads, min_time):
    out = subprocess.run([padfold, "bench", str(bundle), "--model-only", "--threads", str(threads),
                          "--min-time", str(min_time), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["runs"][0]["model_median_ms"]


def prepare(a, m, work, models_dir):
    """Quantizes, imports, compiles and checks model m; returns (bundle, None) or (None, reason)."""
    d = work / m
    d.mkdir(parents=True, exist_ok=True)
    q = d / f"{m}_int8.onnx"
    name, shape = quantize(models_dir / f"{m}.onnx", q)
    r = subprocess.run([a.padfold, "import", str(q), "-o", str(d / "imported")],
                       capture_output=True, text=True)
    if r.returncode:
        return None, (r.stderr or r.stdout).strip().splitlines()[-1]
    report = json.loads((d / "imported" / "import-report.json").read_text())
    spec = d / "imported" / f"{m}_int8.json"
    subprocess.run([a.padfold, "compile", str(spec), "-o", str(d / "bundle"), "--target",
                    a.target], check=True, capture_output=True, text=True)
    x = np.random.default_rng(5).uniform(-1, 1, shape).astype(np.float32)
    np.save(d / "x.npy", x)
    ort_ms(q, 1, 0.01, check=(d / "x.npy", d / "y_ort.npy"))
    inputs = [i["name"] for i in report["inputs"]]
    outputs = [o["name"] for o in report["outputs"]]
    if len(inputs) != 1 or len(outputs) != 1:
        return None, f"inputs {inputs}, outputs {outputs}: expected one of each"
    r = subprocess.run([a.padfold, "run", str(d / "bundle"), "--model", "--input",
                        f"{inputs[0]}={d / 'x.npy'}", "--output", f"{outputs[0]}={d / 'y.npy'}"],
                       capture_output=True, text=True)
    if r.returncode:
        return None, (r.stderr or r.stdout).strip().splitlines()[-1]
    want = np.load(d / "y_ort.npy")
    got = np.load(d / "y.npy").reshape(want.shape)
    return d / "bundle", float(np.abs(got - want).max() / np.abs(want).max())


def float_bundle_of(a, m, work, models_dir):
    """The float32 model imported (default options) and compiled by this padfold, beside the int8
    one: never a bundle an earlier padfold left."""
    d = work / m
    subprocess.run([a.padfold, "import", str(models_dir / f"{m}.onnx"), "-o", str(d / "float")],
                   check=True, capture_output=True, text=True)
    subprocess.run([a.padfold, "compile", str(d / "float" / f"{m}.json"), "-o",
                    str(d / "float_bundle"), "--target", a.target], check=True,
                   capture_output=True, text=True)
    return d / "float_bundle"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("padfold")
    ap.add_argument("out")
    ap.add_argument("--models", nargs="+", default=["mobilenet_v2", "efficientnet_b0", "resnet50"])
    ap.add_argument("--target", default="host")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--work")
    a = ap.parse_args()
    build = pathlib.Path(a.padfold).resolve().parent.parent
    models_dir = build / "bench" / "models"
    work = pathlib.Path(a.work) if a.work else models_dir / "int8"
    rows, refused, errors = [], [], {}
    for m in a.models:
        bundle, check = prepare(a, m, work, models_dir)
        if bundle is None:  # the message without this machine's paths
            refused.append(f"- {m}: {check.replace(str(work / m) + '/', '')}")
            continue
        errors[m] = check
        float_bundle = float_bundle_of(a, m, work, models_dir)
        for n in (int(t) for t in a.threads.split(",")):
            q = work / m / f"{m}_int8.onnx"
            ort_before = ort_ms(q, n, a.min_time)["median_ms"]
            pf_int8 = padfold_ms(a.padfold, bundle, n, a.min_time)
            ort_after = ort_ms(q, n, a.min_time)["median_ms"]
            ort_float = ort_ms(models_dir / f"{m}.onnx", n, a.min_time)["median_ms"]
            pf_float = padfold_ms(a.padfold, float_bundle, n, a.min_time)
            rows.append((m, n, ort_before, ort_after, pf_int8, ort_float, pf_float))
    lines = ["# Whole models in int8: padfold against ONNX Runtime's own int8", "",
             f"CPU: {cpu_line()}", "",
             f"Command: `bench/models/int8_run.py PADFOLD OUT.md --target {a.target} --threads "
             f"{a.threads} --min-time {a.min_time}` (the method: the script's docstring)."]
    if rows:
        lines += ["", "| model | threads | ORT int8 ms (before / after) | padfold int8 ms | ORT / "
                  "padfold int8 | ORT float32 ms | padfold float32 ms | padfold float32 / int8 | "
                  "max rel. error against ORT int8 |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m, n, b, af, pi, of, pf in rows:
        lines.append(f"| {m} | {n} | {b:.2f} / {af:.2f} | {pi:.2f} | {min(b, af) / pi:.2f} | "
                     f"{of:.2f} | {'n/a' if pf is None else f'{pf:.2f}'} | "
                     f"{'n/a' if pf is None else f'{pf / pi:.2f}'} | {errors[m]:.1e} |")
    if refused:
        lines += ["", f"Not imported or not run whole ({len(refused)} of {len(a.models)}):", ""]
        lines += refused
    pathlib.Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
