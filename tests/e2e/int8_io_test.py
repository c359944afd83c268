#!/usr/bin/env python3
"""Quantized ONNX models whose input and output are the integers themselves (TFLite's converter
writes them so: int8 or uint8 graph input -> DequantizeLinear ... QuantizeLinear -> integer graph
output, no float edge), imported, compiled and run whole with `padfold run --model` on the
integers, bit-exact with ONNX Runtime run here on the same model: a 3-channel stem reading the
NCHW input as it lies, 8- and 16-channel inputs through a transpose layer, int8 and uint8,
asymmetric pads, a max pool; the bundle's manifest says the input's and output's scale and zero
point as the file's DequantizeLinear and QuantizeLinear do. Refused with the node named: an input dequantized with two different
parameter sets, or per channel.
Keras models as Keras users quantize them (TFLite full-int8 with int8 input and output, then
`tf2onnx --tflite`: tests/data/int8/tflite_int8_*, made by make_tflite_int8.py there): imported
whole with tf2onnx's layout Transposes folded (the NHWC integers in and out, no transpose layer),
equal to ONNX Runtime's integers, and to the TFLite interpreter's wherever ONNX Runtime's are.

Usage: int8_io_test.py PADFOLD_BIN DATA_DIR WORK_DIR   (the project's .venv python)
"""
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from e2e_util import run, run_checks


def model(channels, u8, second_dq=None):
    rng = np.random.default_rng(channels)
    qt, npq = (TensorProto.UINT8, np.uint8) if u8 else (TensorProto.INT8, np.int8)
    m = 5
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
             numpy_helper.from_array(np.array(130 if u8 else 3, npq), "xz"),
             numpy_helper.from_array(rng.integers(-127, 128, [m, channels, 3, 3]).astype(np.int8),
                                     "w"),
             numpy_helper.from_array((rng.random(m) * 0.02 + 0.005).astype(np.float32), "ws"),
             numpy_helper.from_array(np.zeros(m, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.1, np.float32), "ys"),
             numpy_helper.from_array(np.array(120 if u8 else -5, npq), "yz")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"], name="input_dequant"),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0, name="wdq"),
             helper.make_node("Conv", ["xd", "wd"], ["c"], pads=[0, 0, 1, 1], strides=[2, 2],
                              name="conv"),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["q"], name="q"),
             helper.make_node("DequantizeLinear", ["q", "ys", "yz"], ["qd"], name="dq"),
             helper.make_node("MaxPool", ["qd"], ["p"], kernel_shape=[2, 2], name="pool"),
             helper.make_node("QuantizeLinear", ["p", "ys", "yz"], ["y"], name="output_quant")]
    outputs = [helper.make_tensor_value_info("y", qt, None)]
    if second_dq == "other":  # the same input read with another scale
        inits.append(numpy_helper.from_array(np.array(0.07, np.float32), "xs2"))
        nodes += [helper.make_node("DequantizeLinear", ["x", "xs2", "xz"], ["xd2"], name="dq2"),
                  helper.make_node("MaxPool", ["xd2"], ["p2"], kernel_shape=[1, 1], name="pool2"),
                  helper.make_node("QuantizeLinear", ["p2", "xs2", "xz"], ["y2"], name="q2")]
        outputs.append(helper.make_tensor_value_info("y2", qt, None))
    if second_dq == "per_channel":
        inits[0] = numpy_helper.from_array(np.full(channels, 0.05, np.float32), "xs")
        inits[1] = numpy_helper.from_array(np.full(channels, 3, npq), "xz")
        nodes[0] = helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"], axis=1,
                                    name="input_dequant")
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", qt, [1, channels, 9, 8])],
                          outputs, inits)
    mdl = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    mdl.ir_version = 8
    lo, hi = (0, 256) if u8 else (-128, 128)
    return mdl, rng.integers(lo, hi, [1, channels, 9, 8]).astype(npq)


CASES = {"stem_i8": (3, False), "c8_i8": (8, False), "c16_u8": (16, True), "stem_u8": (3, True)}


def edge_quant(mdl):
    """The scale and zero point of the model's integer input and output as its DequantizeLinear
    and QuantizeLinear say (through a layout Transpose at either edge, and TFLite's Conv1D
    output Reshape)."""
    inits = {i.name: numpy_helper.to_array(i) for i in mdl.graph.initializer}
    producer = {o: n for n in mdl.graph.node for o in n.output}
    x, y = mdl.graph.input[0].name, mdl.graph.output[0].name
    near_x = {x} | {n.output[0] for n in mdl.graph.node if n.op_type == "Transpose"
                    and n.input[0] == x}
    dq = next(n for n in mdl.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in near_x)
    q = producer[y]
    while q.op_type in ("Transpose", "Reshape"):
        q = producer[q.input[0]]
    as_params = lambda n: (float(np.float32(inits[n.input[1]])), int(inits[n.input[2]]))
    return as_params(dq), as_params(q)


def check_manifest_quant(bundle, mdl, name):
    """The bundle says what the integers of its input and output stand for, as the file does."""
    graph = json.loads((bundle / "manifest.json").read_text())["graph"]
    got = [(float(np.float32(q["scale"])), q["zero_point"])
           for q in (graph["quant"].get(graph["inputs"][0]["name"]),
                     graph["quant"].get(graph["outputs"][0])) if q]
    want = list(edge_quant(mdl))
    return None if got == want else f"{name}: manifest graph.quant {graph['quant']}, the file's {want}"


def check(padfold, work, name):
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    mdl, x = model(*CASES[name])
    onnx.save(mdl, d / "m.onnx")
    np.save(d / "x.npy", x)
    want = ort.InferenceSession(str(d / "m.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    run([padfold, "import", d / "m.onnx", "-o", d / "imported"])
    spec = json.loads((d / "imported" / "m.json").read_text())
    if [i["dtype"] for i in spec["inputs"]] != [str(x.dtype)]:
        return f"{name}: spec inputs {spec['inputs']}, expected one {x.dtype} input"
    run([padfold, "compile", d / "imported" / "m.json", "-o", d / "bundle", "--target", "host"])
    if why := check_manifest_quant(d / "bundle", mdl, name):
        return why
    out = run([padfold, "run", d / "bundle", "--model", "--input", d / "x.npy", "--output",
               d / "y.npy"])
    scale, zero = edge_quant(mdl)[1]
    said = f"output 'y': integers q standing for {scale:.6g} * (q - {zero})"
    if said not in out:
        return f"{name}: `run --model` does not say \"{said}\": {out}"
    got = np.load(d / "y.npy")
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{name}: {got.dtype} {got.shape}, ONNX Runtime {want.dtype} {want.shape}"
    wrong = int((got != want).sum())
    return f"{name}: {wrong} of {want.size} integers differ from ONNX Runtime" if wrong else None


def check_refused(padfold, work, name):
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    mdl, _ = model(8, False, name)
    onnx.save(mdl, d / "m.onnx")
    r = subprocess.run([str(padfold), "import", str(d / "m.onnx"), "-o", str(d / "imported")],
                       capture_output=True, text=True)
    want = {"other": ["'dq2'", "scale 0.07"], "per_channel": ["'input_dequant'", "per tensor"]}
    if r.returncode != 1 or any(w not in r.stderr for w in want[name]):
        return f"{name}: exit {r.returncode}, '{r.stderr.strip()}'; expected a refusal naming {want[name]}"
    return None if not (d / "imported").exists() else f"{name}: a refused import wrote its folder"


TFLITE = ["conv_pool", "strided_even", "depthwise", "residual", "conv1d"]


def check_tflite(padfold, data, work, name):
    d = work / f"tflite_{name}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    model = data / f"tflite_int8_{name}.onnx"
    x = np.load(data / f"tflite_int8_{name}_x.npy")
    tflite = np.load(data / f"tflite_int8_{name}_y.npy")
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: x})[0]
    run([padfold, "import", model, "-o", d / "imported"])
    report = json.loads((d / "imported" / "import-report.json").read_text())
    spec = json.loads((d / "imported" / f"{report['model']}.json").read_text())
    channels_last = "NWC" if x.ndim == 3 else "NHWC"  # TFLite's own layout: no transpose
    if [(i["layout"], i["dtype"]) for i in spec["inputs"]] != [(channels_last, "int8")]:
        return f"{name}: spec inputs {spec['inputs']}, expected one {channels_last} int8 input"
    if any(layer["op"] == "transpose" for layer in spec["layers"]):
        return f"{name}: a transpose layer is left; the layout Transposes should fold"
    run([padfold, "compile", d / "imported" / f"{report['model']}.json", "-o", d / "bundle",
         "--target", "host"])
    if why := check_manifest_quant(d / "bundle", onnx.load(model), name):
        return why
    np.save(d / "x.npy", x)
    run([padfold, "run", d / "bundle", "--model", "--input", d / "x.npy", "--output", d / "y.npy"])
    got = np.load(d / "y.npy")
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{name}: {got.dtype} {got.shape}, ONNX Runtime {want.dtype} {want.shape}"
    if (got != want).any():
        return f"{name}: {int((got != want).sum())} integers differ from ONNX Runtime"
    agree = want == tflite
    if (got[agree] != tflite[agree]).any():
        return f"{name}: differs from TFLite where ONNX Runtime does not"
    return None


def main():
    padfold, data, work = (pathlib.Path(a) for a in sys.argv[1:4])
    work.mkdir(parents=True, exist_ok=True)
    status = run_checks(check, sorted(CASES), padfold, work)
    status |= run_checks(check_refused, ["other", "per_channel"], padfold, work)
    status |= run_checks(check_tflite, TFLITE, padfold, data, work)
    print("int8 model inputs and outputs", "failed" if status else "match ONNX Runtime")
    return status


if __name__ == "__main__":
    sys.exit(main())
