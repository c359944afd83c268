#!/usr/bin/env python3
"""A real model: PaddleOCR's PP-OCRv4 text detector (from the rapidocr-onnxruntime wheel; see
scripts/setup-debian.sh), with dynamic dims fixed by --input. The import must account for every
node exactly once, leave to the caller exactly the nodes padfold does not generate (derived here
from the model, independently of the importer), and its kernels must compile; a whole-model run is
refused, naming a node padfold does not generate.

Usage: onnx_real_model_test.py PADFOLD_BIN MODEL WORK_DIR
"""
import json
import pathlib
import shutil
import subprocess
import sys

import onnx
from onnx import numpy_helper

NEVER_GENERATED = {"Mul", "Div", "GlobalAveragePool", "HardSigmoid", "Resize",
                   "BatchNormalization", "Sigmoid"}
SIZE = [1, 3, 160, 160]


def run(cmd):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True)


def expected_left(model):
    """Node indices padfold must leave to the caller: ops it never generates; an Add that reads a
    constant (a broadcast bias) or tensors of different shapes; a Relu or Clip(0, 6) it cannot fuse
    (its input is not the only use of a conv's or add's output); a Constant read by such nodes."""
    g = model.graph
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    producer = {out: i for i, n in enumerate(g.node) for out in n.output}
    consumers = {}
    for i, n in enumerate(g.node):
        for t in n.input:
            consumers.setdefault(t, []).append(i)
    constants = {i.name for i in g.initializer}
    constant_values = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for n in g.node:
        if n.op_type == "Constant":
            constants.update(n.output)
            constant_values[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    left = set()
    for i, n in enumerate(g.node):
        if n.op_type in NEVER_GENERATED:
            left.add(i)
        elif n.op_type == "Add":
            a, b = n.input
            if a in constants or b in constants or shapes.get(a) != shapes.get(b):
                left.add(i)
    # Activations fuse into a conv or add layer producing their input alone.
    for i, n in enumerate(g.node):
        if n.op_type not in ("Relu", "Clip"):
            continue
        src = producer.get(n.input[0])
        fusible = (src is not None and g.node[src].op_type in ("Conv", "ConvTranspose", "Add")
                   and src not in left and len(consumers[n.input[0]]) == 1)
        if n.op_type == "Clip":
            lo, hi = (constant_values.get(t) for t in n.input[1:3])
            fusible = fusible and lo is not None and hi is not None and lo == 0 and hi == 6
        if not fusible:
            left.add(i)
    for i, n in enumerate(g.node):
        if n.op_type == "Constant" and any(c in left for c in consumers.get(n.output[0], [])):
            left.add(i)
    return left


def main():
    padfold, model_path, work = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what)

    r = run([padfold, "import", model_path, "-o", work / "no_size"])
    expect(r.returncode == 1 and "'x'" in r.stderr and "--input" in r.stderr,
           f"import without --input: {r.returncode} {r.stderr[-300:]}")
    expect(not (work / "no_size").exists(), "a failed import wrote its output directory")

    size = "x=" + "x".join(map(str, SIZE))
    r = run([padfold, "import", model_path, "-o", work / "imported", "--input", size])
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        return 1
    report = json.loads((work / "imported" / "import-report.json").read_text())
    model = onnx.load(model_path)
    model.graph.input[0].type.tensor_type.shape.Clear()
    for d in SIZE:
        model.graph.input[0].type.tensor_type.shape.dim.add().dim_value = d
    n_nodes = len(model.graph.node)

    in_layers = [n["index"] for L in report["layers"] for n in L["onnx_nodes"]]
    absorbed = [n["index"] for n in report["absorbed"]]
    left = [n["index"] for n in report["left_to_caller"]]
    every = in_layers + absorbed + left
    expect(sorted(every) == list(range(n_nodes)),
           f"nodes not accounted for exactly once: {len(every)} entries for {n_nodes} nodes")
    want_left = expected_left(model)
    expect(set(left) == want_left,
           f"left to the caller: {len(left)} nodes; expected {len(want_left)}; extra "
           f"{sorted(set(left) - want_left)[:10]}, missing {sorted(want_left - set(left))[:10]}")
    for i, n in enumerate(model.graph.node):
        if n.op_type in ("Conv", "ConvTranspose"):
            expect(i in in_layers, f"{n.op_type} node {i} '{n.name}' is not a layer")
    kinds = {}
    for i in left:
        kinds[model.graph.node[i].op_type] = kinds.get(model.graph.node[i].op_type, 0) + 1
    print(f"{n_nodes} nodes: {len(report['layers'])} layers, {len(absorbed)} absorbed, "
          f"{len(left)} left to the caller {dict(sorted(kinds.items()))}")

    spec = next(p for p in (work / "imported").glob("*.json") if p.name != "import-report.json")
    r = run([padfold, "check", spec])
    expect(r.returncode == 0 and "whole-model run: no: input" in r.stdout,
           f"check: {r.returncode} {r.stdout[-300:]} {r.stderr[-300:]}")
    r = run([padfold, "compile", spec, "-o", work / "bundle", "--target", "host"])
    expect(r.returncode == 0, f"compile: {r.stderr[-600:]}")
    if r.returncode == 0:
        manifest = json.loads((work / "bundle" / "manifest.json").read_text())
        expect(len(manifest["kernels"]) == len(report["layers"]),
               f"{len(manifest['kernels'])} kernels for {len(report['layers'])} layers")
        r = run([padfold, "run", work / "bundle", "--model", "--input", "x=missing.npy",
                 "--output", "y.npy"])
        expect(r.returncode == 1 and "which padfold does not generate" in r.stderr,
               f"whole-model run of a partial model: {r.returncode} {r.stderr[-400:]}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
