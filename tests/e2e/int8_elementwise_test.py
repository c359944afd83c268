#!/usr/bin/env python3
"""Quantized Sigmoid and Mul as ONNX Runtime computes them (QLinearSigmoid's table of MLAS's
logistic, QLinearMul's float product), imported, compiled and run whole with `padfold run --model`,
bit-exact with ONNX Runtime run here on the same model:
- sweeps: integer in and out (DequantizeLinear -> Sigmoid or Mul -> QuantizeLinear), int8 and
  uint8, every integer of the dtype through the sigmoid and every pair through the mul, with
  random scales and zero points (and the 1/256 output scale quantizers give a sigmoid, and a choice
  whose table the logistic's fused multiply-adds change); SiLU (Sigmoid, QuantizeLinear,
  DequantizeLinear, Mul by x: one table); a mul of a
  tensor and one value per channel, the per-channel one first as torchvision's squeeze-and-excite
  writes it;
- an EfficientNet block (SiLU as Sigmoid and Mul, squeeze-and-excite) quantized by
  onnxruntime.quantization.quantize_static in both formats (QDQ; QOperator with com.microsoft
  QLinearSigmoid and QLinearMul), float in and out, uint8 activations, per-channel int8 weights.

Usage: int8_elementwise_test.py PADFOLD_BIN WORK_DIR   (the project's .venv python)
"""
import json
import pathlib
import shutil
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from e2e_util import run, run_checks

RANGE = {np.int8: (-128, 127), np.uint8: (0, 255)}
F32 = np.float32


def logistic_table(sx, zx, sy, zy, npq, fused):
    """MLAS's logistic of each dequantized integer, quantized half to even; its multiply-adds fused
    (as ORT's FMA3 kernel) or not (its SSE2 kernel). numpy's double product of two floats is exact,
    so the fused form rounds twice only where the double sum rounds."""
    lo, hi = RANGE[npq]
    v = np.clip(F32(sx) * (np.arange(lo, hi + 1) - zx).astype(F32), F32(-18), F32(18)).astype(F32)
    v2 = (v * v).astype(F32)

    def mad(a, b, c):
        return ((a.astype(np.float64) * b + c).astype(F32) if fused
                else ((a * F32(b)).astype(F32) + F32(c)).astype(F32))

    alpha = [4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
             8.51377133304701e-03, 2.48287947061529e-01]
    beta = [6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
            1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01]
    p = np.full_like(v2, F32(alpha[0]))
    for a in alpha[1:]:
        p = mad(p, v2, F32(a)) if fused else mad(p, v2, a)
    q = np.full_like(v2, F32(beta[0]))
    for b in beta[1:]:
        q = mad(q, v2, F32(b)) if fused else mad(q, v2, b)
    y = np.clip(((p * v).astype(F32) / q).astype(F32) + F32(0.5), F32(0), F32(1)).astype(F32)
    return np.clip(np.rint((y / F32(sy)).astype(F32)) + zy, lo, hi)


def fma_sensitive(npq, rng):
    """Scales and a zero point whose sigmoid table differs with and without fused multiply-adds:
    a kernel built without them (or with another logistic) fails there (about 1 choice in 4000)."""
    lo, hi = RANGE[npq]
    while True:
        sx, sy = float(F32(np.exp(rng.uniform(-7, -1)))), float(F32(np.exp(rng.uniform(-8, -2))))
        zx, zy = int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))
        if (logistic_table(sx, zx, sy, zy, npq, True) !=
                logistic_table(sx, zx, sy, zy, npq, False)).any():
            return sx, zx, sy, zy


def sweep_model(npq, seed):
    """Integer inputs and outputs: four sigmoids over every integer, two muls over every pair and
    a per-channel mul; the inputs' arrays and the model."""
    rng = np.random.default_rng(seed)
    qt = TensorProto.UINT8 if npq == np.uint8 else TensorProto.INT8
    lo, hi = RANGE[npq]
    levels = np.arange(lo, hi + 1)
    inits, nodes, inputs, outputs, feeds = [], [], [], [], {}

    def params(name, scale, zero):
        inits.extend([numpy_helper.from_array(np.array(scale, np.float32), name + "_s"),
                      numpy_helper.from_array(np.array(zero, npq), name + "_z")])
        return [name + "_s", name + "_z"]

    def scale(a, b):
        return float(np.exp(rng.uniform(np.log(a), np.log(b))))

    def integer_input(name, values, scale_zero=None):
        inputs.append(helper.make_tensor_value_info(name, qt, list(values.shape)))
        feeds[name] = values.astype(npq)
        s, z = scale_zero or (scale(3e-3, 0.2), int(rng.integers(lo, hi + 1)))
        nodes.append(helper.make_node("DequantizeLinear", [name] + params(name, s, z),
                                      [name + "_f"], name=name + "_dq"))
        return name + "_f"

    def integer_output(name, t, out_scale, out_zero):
        nodes.append(helper.make_node("QuantizeLinear", [t] + params(name, out_scale, out_zero),
                                      [name], name=name + "_q"))
        outputs.append(helper.make_tensor_value_info(name, qt, None))

    for k in range(4):
        sensitive = fma_sensitive(npq, rng) if k == 3 else None
        x = integer_input(f"sx{k}", levels.reshape(1, 1, 16, 16), sensitive and sensitive[:2])
        nodes.append(helper.make_node("Sigmoid", [x], [f"sig{k}"], name=f"sigmoid{k}"))
        typical = k % 2 == 0  # the scale and zero point quantizers give a sigmoid's output
        out = (sensitive[2:] if sensitive else (1 / 256, lo) if typical
               else (scale(2e-3, 1e-2), int(rng.integers(lo, hi + 1))))
        integer_output(f"sy{k}", f"sig{k}", *out)
    for k in range(2):  # SiLU: the sigmoid's own quantization, then the product with x
        x = integer_input(f"fx{k}", levels.reshape(1, 1, 16, 16))
        nodes.append(helper.make_node("Sigmoid", [x], [f"fsig{k}"], name=f"silu_sigmoid{k}"))
        gate = (1 / 256, lo) if k == 0 else (scale(2e-3, 1e-2), int(rng.integers(lo, hi + 1)))
        nodes += [helper.make_node("QuantizeLinear", [f"fsig{k}"] + params(f"fg{k}", *gate),
                                   [f"fgq{k}"], name=f"silu_q{k}"),
                  helper.make_node("DequantizeLinear", [f"fgq{k}", f"fg{k}_s", f"fg{k}_z"],
                                   [f"fgd{k}"], name=f"silu_dq{k}"),
                  helper.make_node("Mul", [x, f"fgd{k}"], [f"fprod{k}"], name=f"silu_mul{k}")]
        integer_output(f"fy{k}", f"fprod{k}", scale(1e-2, 0.1), int(rng.integers(lo, hi + 1)))
    for k in range(2):
        a = integer_input(f"ma{k}", np.repeat(levels, 256).reshape(1, 1, 256, 256))
        b = integer_input(f"mb{k}", np.tile(levels, 256).reshape(1, 1, 256, 256))
        nodes.append(helper.make_node("Mul", [a, b], [f"prod{k}"], name=f"mul{k}"))
        integer_output(f"my{k}", f"prod{k}", scale(1e-4, 1e-2), int(rng.integers(lo, hi + 1)))
    x = integer_input("cx", rng.integers(lo, hi + 1, [1, 8, 6, 5]))
    s = integer_input("cs", rng.integers(lo, hi + 1, [1, 8, 1, 1]))
    nodes.append(helper.make_node("Mul", [s, x], ["cprod"], name="channel_mul"))
    integer_output("cy", "cprod", scale(1e-4, 1e-2), int(rng.integers(lo, hi + 1)))
    g = helper.make_graph(nodes, "sweep", inputs, outputs, inits)
    mdl = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    mdl.ir_version = 8
    return mdl, feeds


def run_padfold(padfold, d, mdl, feeds):
    """Imports, compiles for the host and runs `mdl` with `feeds`; its outputs by name."""
    onnx.save(mdl, d / "m.onnx")
    run([padfold, "import", d / "m.onnx", "-o", d / "imported"])
    report = json.loads((d / "imported" / "import-report.json").read_text())
    spec = d / "imported" / f"{report['model']}.json"
    run([padfold, "compile", spec, "-o", d / "bundle", "--target", "host"])
    args = []
    for name, value in feeds.items():
        np.save(d / f"{name}.npy", value)
        args += ["--input", f"{name}={d / f'{name}.npy'}"]
    names = [o.name for o in mdl.graph.output]
    for name in names:
        args += ["--output", f"{name}={d / f'{name}_out.npy'}"]
    run([padfold, "run", d / "bundle", "--model"] + args)
    return {name: np.load(d / f"{name}_out.npy") for name in names}, json.loads(spec.read_text())


def compare(name, got, mdl, feeds):
    session = ort.InferenceSession(mdl.SerializeToString(), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in mdl.graph.output], session.run(None, feeds)))
    for out, w in want.items():
        g = got[out]
        if g.dtype != w.dtype or g.shape != w.shape:
            return f"{name}: output {out} is {g.dtype} {g.shape}, ONNX Runtime's {w.dtype} {w.shape}"
        if (g != w).any():
            return f"{name}: output {out}: {int((g != w).sum())} of {w.size} differ from ONNX Runtime"
    return None


def check_sweep(padfold, work, name):
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    mdl, feeds = sweep_model(np.uint8 if name == "sweep_u8" else np.int8, len(name))
    got, spec = run_padfold(padfold, d, mdl, feeds)
    acts = sorted(layer.get("activation", "") for layer in spec["layers"] if layer["op"] == "activation")
    muls = sum(layer["op"] == "mul" for layer in spec["layers"])
    if acts != ["sigmoid"] * 4 + ["silu"] * 2 or muls != 3:
        return f"{name}: activations {acts} and {muls} mul layers; expected 4 sigmoids, 2 silus, 3 muls"
    return compare(name, got, mdl, feeds)


def mbconv_block():
    """A float EfficientNet block: stem conv, SiLU, depthwise conv, SiLU, squeeze-and-excite
    (global pool, 1x1 conv, SiLU, 1x1 conv, Sigmoid, the scale first in the Mul), 1x1 projection."""
    rng = np.random.default_rng(5)
    inits = []

    def weight(name, shape):
        inits.append(numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name))
        inits.append(numpy_helper.from_array(rng.normal(0, 0.1, shape[0]).astype(np.float32),
                                             name + "_b"))
        return [name, name + "_b"]

    def silu(x, name):
        return [helper.make_node("Sigmoid", [x], [name + "_sig"], name=name + "_sigmoid"),
                helper.make_node("Mul", [x, name + "_sig"], [name], name=name + "_mul")]

    nodes = [helper.make_node("Conv", ["x"] + weight("w0", [16, 3, 3, 3]), ["c0"], pads=[1, 1, 1, 1],
                              strides=[2, 2], name="stem")]
    nodes += silu("c0", "a0")
    nodes += [helper.make_node("Conv", ["a0"] + weight("w1", [16, 1, 3, 3]), ["c1"], group=16,
                               pads=[1, 1, 1, 1], name="depthwise")]
    nodes += silu("c1", "a1")
    nodes += [helper.make_node("GlobalAveragePool", ["a1"], ["p"], name="squeeze"),
              helper.make_node("Conv", ["p"] + weight("w2", [4, 16, 1, 1]), ["c2"], name="reduce")]
    nodes += silu("c2", "a2")
    nodes += [helper.make_node("Conv", ["a2"] + weight("w3", [16, 4, 1, 1]), ["c3"], name="expand"),
              helper.make_node("Sigmoid", ["c3"], ["gate"], name="gate"),
              helper.make_node("Mul", ["gate", "a1"], ["excited"], name="excite"),
              helper.make_node("Conv", ["excited"] + weight("w4", [8, 16, 1, 1]), ["y"],
                               name="project")]
    g = helper.make_graph(nodes, "mbconv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
                          inits)
    mdl = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    mdl.ir_version = 8
    return mdl


def check_quantize_static(padfold, work, name):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            r = np.random.default_rng(6)
            self.data = iter([{"x": r.uniform(-1, 1, [1, 3, 16, 16]).astype(np.float32)}
                              for _ in range(8)])

        def get_next(self):
            return next(self.data, None)

    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save(mbconv_block(), f"{tmp}/f.onnx")
        quantize_static(f"{tmp}/f.onnx", f"{tmp}/q.onnx", Reader(),
                        quant_format=QuantFormat.QDQ if name == "block_qdq" else QuantFormat.QOperator,
                        per_channel=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8)
        mdl = onnx.load(f"{tmp}/q.onnx")
    ops = {n.op_type for n in mdl.graph.node}
    want_ops = {"Sigmoid", "Mul"} if name == "block_qdq" else {"QLinearSigmoid", "QLinearMul"}
    if not want_ops <= ops:
        return f"{name}: the quantizer wrote {sorted(ops)}, without {sorted(want_ops - ops)}"
    feeds = {"x": np.random.default_rng(7).uniform(-1, 1, [1, 3, 16, 16]).astype(np.float32)}
    got, spec = run_padfold(padfold, d, mdl, feeds)
    # Each SiLU one table (QDQ's Sigmoid and Mul, QOperator's QLinearSigmoid and QLinearMul), the
    # gate's Mul a layer.
    acts = sorted(layer.get("activation", "") for layer in spec["layers"] if layer["op"] == "activation")
    muls = sum(layer["op"] == "mul" for layer in spec["layers"])
    want = (["sigmoid"] + ["silu"] * 3, 1)
    if (acts, muls) != want:
        return f"{name}: activations {acts} and {muls} mul layers; expected {want[0]} and {want[1]}"
    return compare(name, got, mdl, feeds)


def main():
    padfold, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    work.mkdir(parents=True, exist_ok=True)
    status = run_checks(check_sweep, ["sweep_i8", "sweep_u8"], padfold, work)
    status |= run_checks(check_quantize_static, ["block_qdq", "block_qop"], padfold, work)
    print("quantized sigmoid and mul", "failed" if status else "match ONNX Runtime")
    return status


if __name__ == "__main__":
    sys.exit(main())
