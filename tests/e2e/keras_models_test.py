#!/usr/bin/env python3
"""Keras models as tf2onnx converts them, from Keras and from TFLite files (tests/data/keras, written
by make_keras_models.py there): each imported whole with `padfold import` (no node left to the
caller; its layout Transposes folded), compiled, run with `padfold run --model` on Keras's NHWC
input and compared element-wise with Keras's (or the TFLite interpreter's) own NHWC output.

Usage: keras_models_test.py PADFOLD_BIN DATA_DIR WORK_DIR   (run with the project's .venv python)
"""
import json
import pathlib
import shutil
import sys

import numpy as np
import onnx

from e2e_util import run, run_checks


def check(padfold, data, work, name):
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    x = np.load(data / f"x_{name}.npy")
    # tf2onnx --tflite leaves the batch dynamic: the user gives it, as padfold requires.
    graph = onnx.load(data / f"{name}.onnx").graph
    weights = {t.name for t in graph.initializer}
    (graph_input,) = [i.name for i in graph.input if i.name not in weights]
    sizes = f"{graph_input}={'x'.join(map(str, x.shape))}"
    run([padfold, "import", data / f"{name}.onnx", "-o", d / "imported", "--input", sizes])
    report = json.loads((d / "imported" / "import-report.json").read_text())
    if report["left_to_caller"]:
        return f"{name}: nodes left to the caller: {report['left_to_caller']}"
    # Layout Transposes: absorbed, or the node of the layer that takes in the affine ops before
    # one (a Keras Rescaling/Normalization on the NHWC input).
    layout = [n["name"] for n in report["absorbed"] + [m for L in report["layers"]
                                                       for m in L["onnx_nodes"]]
              if n["role"] == "layout"]
    want = np.load(data / f"y_{name}.npy")
    # A classifier's [N, K] output needs no Transpose: tf2onnx writes none.
    edges = 1 if want.ndim == 2 else 2
    if len(layout) != edges:
        return f"{name}: expected {edges} layout Transpose(s) folded at the edges, got {layout}"
    spec_file = d / "imported" / f"{report['model']}.json"
    spec = json.loads(spec_file.read_text())
    channels_last = {3: "NWC", 4: "NHWC", 5: "NDHWC"}[x.ndim]  # Keras's, as the user feeds it
    if [i["layout"] for i in spec["inputs"]] != [channels_last]:
        return f"{name}: spec inputs {spec['inputs']}, expected one {channels_last} input"
    run([padfold, "compile", spec_file, "-o", d / "bundle", "--target", "host"])
    run([padfold, "run", d / "bundle", "--model", "--input", data / f"x_{name}.npy",
         "--output", d / "y.npy"])
    got = np.load(d / "y.npy")
    if got.shape != want.shape:
        return f"{name}: shape {got.shape}, Keras {want.shape} (input {x.shape})"
    err = np.abs(got - want).max()
    tol = 1e-4 * (1 + np.abs(want).max())
    if not np.allclose(got, want, rtol=1e-4, atol=tol):
        return f"{name}: max |padfold - Keras| = {err:.3g} (tolerance {tol:.3g})"
    print(f"{name}: {len(spec['layers'])} layer(s), {channels_last} {list(x.shape)} -> {list(want.shape)}, "
          f"max |error| {err:.2g}: OK")
    return None


def main():
    padfold, data, work = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    names = sorted(p.stem for p in data.glob("*.onnx"))
    if not names:
        print(f"no .onnx files in {data}")
        return 1
    status = run_checks(check, names, padfold, data, work)
    print(f"{len(names)} Keras model(s): {'a failure' if status else 'all passed'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
