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

ACTIVATIONS = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish"}
AFFINE = {"BatchNormalization", "Mul", "Add", "Sub", "Div"}
SIZE = [1, 3, 160, 160]


def run(cmd):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True)


def expected_left(model):
    """Node indices padfold must leave to the caller, worked out here from the import rules:
    - ops it never generates;
    - an Add that is no join (it reads a constant, or tensors of different shapes) and does not
      fold as an affine op; a Mul of two computed tensors is a layer where one is the other's
      [N, C, 1, 1] (a channel scale: squeeze-and-excite);
    - affine ops (BatchNormalization; Mul/Add/Sub/Div by a scalar or per-channel constant) fold
      into the conv whose output they alone read, or (backwards) into the conv that alone reads
      theirs when that is exact (no shift, or a conv without padding); the others become
      depthwise 1x1 convs, into which the affine ops after them fold in turn;
    - activations fuse into the conv or add layer whose output (after its folds) they alone read,
      one per layer; Sigmoid with the Mul of x * Sigmoid(x) fuses as SiLU;
    - a Constant read by a node left to the caller."""
    g = model.graph
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    consumers = {}
    for i, n in enumerate(g.node):
        for t in n.input:
            consumers.setdefault(t, []).append(i)
    graph_outputs = {o.name for o in g.output}
    constant_values = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for n in g.node:
        if n.op_type == "Constant":
            constant_values[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)

    def single_reader(t):
        readers = consumers.get(t, [])
        return readers[0] if len(readers) == 1 and t not in graph_outputs else None

    def affine(i):
        """(data input, shifts) of an affine node, or None."""
        n = g.node[i]
        if n.op_type == "BatchNormalization":
            return (n.input[0], True) if all(t in constant_values for t in n.input[1:5]) else None
        if len(n.input) != 2 or (n.input[0] in constant_values) == (n.input[1] in constant_values):
            return None
        k = 0 if n.input[1] in constant_values else 1
        if n.op_type == "Div" and k == 1:
            return None
        data, const = n.input[k], constant_values[n.input[1 - k]]
        shape = shapes.get(data)
        if not shape or const.ndim > len(shape) or const.size not in (1, shape[1]):
            return None
        lead = len(shape) - const.ndim
        if any(d != 1 and lead + j != 1 for j, d in enumerate(const.shape)):
            return None
        return data, n.op_type != "Mul" and n.op_type != "Div"

    layers = {}  # layer node -> the tensor it produces now
    for i, n in enumerate(g.node):
        if n.op_type in ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
                         "GlobalMaxPool", "Concat", "Resize"):  # its FPN's nearest upsampling
            layers[i] = n.output[0]
        elif n.op_type == "Add":
            a, b = n.input
            if a not in constant_values and b not in constant_values and shapes.get(a) == shapes.get(b):
                layers[i] = n.output[0]
        elif n.op_type == "Mul":
            a, b = (shapes.get(t) for t in n.input)
            computed = all(t not in constant_values for t in n.input)
            per_channel = lambda s, x: x and s == x[:2] + [1] * (len(x) - 2) and s != x
            if computed and a and b and (per_channel(a, b) or per_channel(b, a)):
                layers[i] = n.output[0]
    producing = lambda t: next((L for L, out in layers.items() if out == t), None)
    convs = {i for i in layers if g.node[i].op_type in ("Conv", "ConvTranspose")}
    handled = set()
    for i, n in enumerate(g.node):  # affine ops after a conv
        a = affine(i) if n.op_type in AFFINE and i not in layers else None
        src = producing(a[0]) if a else None
        if src in convs and single_reader(a[0]) == i:
            layers[src] = n.output[0]
            handled.add(i)
    into = {}  # folded before a conv -> the conv
    for i in reversed(range(len(g.node))):  # affine ops before a conv
        n = g.node[i]
        a = affine(i) if n.op_type in AFFINE and i not in layers and i not in handled else None
        r = single_reader(n.output[0]) if a else None
        r = into.get(r, r)
        if r is None or g.node[r].op_type != "Conv":
            continue
        conv = g.node[r]
        padded = any(x.name == "pads" and any(x.ints) for x in conv.attribute) or any(
            x.name == "auto_pad" and x.s.decode() not in ("NOTSET", "VALID") for x in conv.attribute)
        if a[1] and padded:
            continue
        into[i] = r
        handled.add(i)
    affine_layers = set()  # affine ops that fold nowhere: depthwise 1x1 convs of their own
    for i, n in enumerate(g.node):
        a = affine(i) if n.op_type in AFFINE and i not in layers and i not in handled else None
        if a is None or not 3 <= len(shapes.get(a[0], [])) <= 5:
            continue
        src = producing(a[0])
        if src in affine_layers and single_reader(a[0]) == i:
            layers[src] = n.output[0]
            handled.add(i)
        else:
            layers[i] = n.output[0]
            affine_layers.add(i)
    activated = set()
    for i, n in enumerate(g.node):
        if n.op_type not in ACTIVATIONS:
            continue
        src = producing(n.input[0])
        ok = src is not None and (g.node[src].op_type in ("Conv", "ConvTranspose", "Add", "Mul")
                                  or src in affine_layers) and src not in activated
        if n.op_type == "Clip":
            lo, hi = (constant_values.get(t) for t in n.input[1:3])
            ok = ok and lo is not None and hi is not None and lo == 0 and hi == 6
        readers = consumers.get(n.input[0], [])
        if ok and n.op_type == "Sigmoid" and len(readers) == 2 and n.input[0] not in graph_outputs:
            m = readers[0] if readers[1] == i else readers[1]
            mul = g.node[m]
            if mul.op_type == "Mul" and sorted(mul.input) == sorted([n.input[0], n.output[0]]) \
                    and single_reader(n.output[0]) == m:
                handled.update({i, m})
                activated.add(src)
                layers[src] = mul.output[0]
                continue
        if ok and single_reader(n.input[0]) == i:
            handled.add(i)
            activated.add(src)
            layers[src] = n.output[0]
    left = {i for i, n in enumerate(g.node)
            if i not in layers and i not in handled and n.op_type != "Constant"}
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
