#!/usr/bin/env python3
"""Quantized ONNX models imported and run bit-exact with ONNX Runtime (tests/data/int8, written by
make_int8_data.py there) through `padfold import`, `padfold compile` and `padfold run --model` on
the float input: ort_qdq.onnx (QDQ, per-channel weights) and ort_qop.onnx (QLinearConv, int8
MaxPool, QLinearAdd), int8 activations; ort_u8qdq.onnx and ort_u8qop.onnx (uint8 activations: a
depthwise conv with asymmetric SAME_UPPER pads, QLinearAveragePool with asymmetric pads and
count_include_pad 0, QLinearAdd, QLinearGlobalAveragePool); ort_headqdq.onnx (a global pool,
Flatten and a classifier's Gemm, QDQ, uint8 activations). The int8/uint8 tensor before the last
DequantizeLinear (graph output y_int8) and every other quantized graph output
(ort_<name>_<output>.npy: the u8 models' r1_q, d1_q, p1_q, a1_q) must equal ORT's bit for bit and
the float output y exactly. The dot-product convs read weight tables the compile prepared (no
kernel builds one per call), in weight files and, for ort_qdq, baked into the library
(--embed-weights) with the same integers.

Usage: int8_onnx_test.py PADFOLD_BIN DATA_DIR WORK_DIR   (run with the project's .venv python)
"""
import json
import pathlib
import shutil
import sys

import numpy as np

from e2e_util import run, run_checks


def compare(name, what, got, want):
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{name} {what}: {got.dtype} {got.shape}, ONNX Runtime {want.dtype} {want.shape}"
    wrong = int((got != want).sum())
    if wrong:
        i = np.flatnonzero(got != want)[0]
        return (f"{name} {what}: {wrong} of {want.size} differ from ONNX Runtime (first at {i}: "
                f"{got.flat[i]} vs {want.flat[i]})")
    return None


def check(padfold, data, work, name):
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    run([padfold, "import", data / f"ort_{name}.onnx", "-o", d / "import"])
    spec = json.loads((d / "import" / f"ort_{name}.json").read_text())
    report = json.loads((d / "import" / "import-report.json").read_text())
    if report["left_to_caller"]:
        return f"{name}: nodes left to the caller: {report['left_to_caller']}"
    # The layers compute channels last (the default), transposes between them and the model's
    # NCHW input and outputs.
    compute = [l for l in spec["layers"] if l["op"] != "transpose"]
    ops = [l["op"] for l in compute]
    if ops[0] != "quantize" or ops[-1] != "dequantize":
        return f"{name}: layers {ops}; expected a quantize first and a dequantize last"
    if any(l["layout"] != "NHWC" for l in compute):
        return f"{name}: a layer is not channels last: {[l['layout'] for l in compute]}"
    # The activations' dtype: ORT's y_int8 (int8, or uint8 for the u8 models).
    dtype = np.load(data / f"ort_{name}_yq.npy").dtype.name
    if any(l.get("dtype") != dtype or l["quant"]["requantize"] != "onnx" for l in compute[1:-1]):
        return f"{name}: a layer is not {dtype} with requantize onnx"
    # ORT's other quantized graph outputs: ort_<name>_<output>.npy.
    extra = sorted(p.name[len(f"ort_{name}_"):-len(".npy")]
                   for p in data.glob(f"ort_{name}_*.npy"))
    extra = [e for e in extra if e not in ("x", "y", "yq")]
    # The layers writing graph outputs y_int8, y and the extra ones.
    out = {o["onnx_tensor"]: o["name"] for o in report["outputs"]}
    if set(out) != {"y", "y_int8", *extra}:
        return f"{name}: outputs {sorted(out)}; expected y, y_int8 and {extra}"
    compiled = run([padfold, "compile", d / "import" / f"ort_{name}.json", "-o", d / "bundle",
                    "--target", "host", "--emit-stmt"])
    # The dot-product convs read the weight table the compile prepared (WeightForm::dot_table),
    # and every conv with a bias its bias with the zero point's term folded in: the manifest
    # states both forms and no kernel builds a table or sums weights per call.
    manifest = json.loads((d / "bundle" / "manifest.json").read_text())
    # A conv with its residual add in the epilogue names its buffers after the conv.
    tables = [b for k in manifest["kernels"] for b in k["buffers"]
              if b["name"].split("_")[-1] == "weights" and b["layout"].endswith("IO4i")]
    if not tables:
        return f"{name}: no kernel reads a prepared dot-product weight table"
    biases = [b["layout"] for k in manifest["kernels"] if k["op"].startswith("conv")
              for b in k["buffers"] if b["name"].split("_")[-1] == "bias"]
    if not biases or set(biases) != {"O_zero_point_folded"}:
        return f"{name}: conv biases in layouts {biases}; expected O_zero_point_folded"
    if f"bias O_zero_point_folded {len(biases)}" not in compiled:
        return f"{name}: the compile does not count {len(biases)} folded biases:\n{compiled}"
    for per_call in ("_dot_weights", "_weight_sum"):
        built = [p.name for p in (d / "bundle").rglob("*.stmt") if per_call in p.read_text()]
        if built:
            return f"{name}: kernels computing {per_call} per call: {built}"
    run([padfold, "run", d / "bundle", "--model", "--input", f"x={data / f'ort_{name}_x.npy'}",
         "--output", f"{out['y_int8']}={d / 'yq.npy'}", "--output", f"{out['y']}={d / 'y.npy'}",
         *[a for e in extra for a in ("--output", f"{out[e]}={d / f'{e}.npy'}")]])
    # The intermediate outputs first: a mismatch there says which layer.
    checks = [(e, np.load(d / f"{e}.npy"), np.load(data / f"ort_{name}_{e}.npy")) for e in extra]
    checks += [
        ("y_int8", np.load(d / "yq.npy"), np.load(data / f"ort_{name}_yq.npy")),
        ("y", np.load(d / "y.npy"), np.load(data / f"ort_{name}_y.npy")),
    ]
    if name == "qdq":  # the prepared tables baked into the library: the same integers
        run([padfold, "compile", d / "import" / f"ort_{name}.json", "-o", d / "embedded",
             "--target", "host", "--embed-weights"])
        run([padfold, "run", d / "embedded", "--model", "--input",
             f"x={data / f'ort_{name}_x.npy'}", "--output", f"{out['y_int8']}={d / 'yq_e.npy'}",
             "--output", f"{out['y']}={d / 'y_e.npy'}"])
        checks.append(("y_int8 (embedded weights)", np.load(d / "yq_e.npy"),
                       np.load(data / f"ort_{name}_yq.npy")))
    for what, got, want in checks:
        if failure := compare(name, what, got, want):
            return failure
    print(f"{name}: {len(ops)} layers {ops}; {len(tables)} weight tables prepared; {dtype} outputs {extra + ['y_int8']} bit-exact and y "
          "exact with ONNX Runtime: OK")
    return None


def main():
    padfold, data, work = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    return run_checks(check, ["qdq", "qop", "u8qdq", "u8qop", "headqdq"], padfold, data, work)


if __name__ == "__main__":
    sys.exit(main())
