#!/usr/bin/env python3
"""Opt-in: int8 reference data for padfold's quantized layers (docs/int8.md), made with TFLite and
ONNX Runtime themselves. Needs TensorFlow, the LiteRT interpreter, onnx and onnxruntime (PyPI),
never CI: the suite reads the committed files. Fixed seeds: rerunning rewrites the same files
(with the same package versions).

  python3 -m venv /tmp/tfv && /tmp/tfv/bin/pip install tensorflow-cpu tf2onnx \
      ai-edge-litert onnxruntime onnx
  /tmp/tfv/bin/python tests/data/int8/make_int8_data.py [OUT_DIR]

Part a, TFLite ("requantize": "tflite"): tiny Keras models converted with full-integer
post-training quantization (int8 in and out, per-channel weights). For each, tfl_<name>.json is a
padfold spec of the one quantized op, with the int8 weights and int32 bias that TFLite holds
(tfl_<name>_w.npy, HWIO; tfl_<name>_b.npy), and tfl_<name>_x.npy (x2 for add) / tfl_<name>_y.npy
the int8 input and the output of TFLite's REFERENCE kernels (OpResolverType.BUILTIN_REF). The
script checks, in numpy, that the TFLite reference arithmetic of docs/int8.md evaluated on the
spec file's parameters reproduces that output bit-exactly, and records whether TFLite's optimized
kernels (with and without the default XNNPACK delegate) agree with the reference ones
(results.json).

Part b, ONNX Runtime ("requantize": "onnx"): two float ONNX models quantized by
onnxruntime.quantization.quantize_static (per-channel int8 weights), each into <p>qdq.onnx (QDQ)
and <p>qop.onnx (QOperator), with the int8/uint8 tensor before the last DequantizeLinear added as
a second graph output "y_int8". <p>float.onnx is the float model, <p>{qdq,qop}_x.npy the float
input, _y.npy ORT's float output and _yq.npy its y_int8 (graph optimizations ALL, one thread).
- p = ort_: int8 activations; Conv with explicit asymmetric pads, stride 2, bias, Relu; MaxPool;
  a SAME_UPPER Conv; an Add of the two branches (QLinearConv, MaxPool, QLinearAdd).
- p = ort_u8: uint8 activations (QUInt8 with QInt8 weights, what ORT's quantization docs advise
  for x86-64 CPUs and get_qdq_config's default; quantize_static's own default is QInt8); a 1x1
  Conv + Relu, then a depthwise 5x5 stride-2 Conv with auto_pad SAME_UPPER (asymmetric pads) and an
  AveragePool 3x3 stride 2 with asymmetric pads and count_include_pad 0, their Add and a
  GlobalAveragePool (QLinearConv, QLinearAveragePool, QLinearAdd, QLinearGlobalAveragePool). Its
  intermediate quantized tensors are graph outputs too, written as ort_u8<fmt>_<output>.npy.
The script checks each int8/uint8 tensor of the QOperator models against docs/int8.md's "onnx"
arithmetic (ORT's x86 kernels) in numpy. See README.md for the results.
"""
import json
import math
import os
import pathlib
import sys
import tempfile
from fractions import Fraction

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402

I32_MIN, I32_MAX = -(2 ** 31), 2 ** 31 - 1
QRANGE = {"int8": (-128, 127), "uint8": (0, 255)}


# ----------------------------------------------------------------------------------------------
# TFLite's reference integer arithmetic (tensorflow/lite/kernels/internal/common.h,
# quantization_util.cc, reference_integer_ops/*.h), in numpy int64, as docs/int8.md states it.

def round_away(x):
    """TfLiteRound / std::round: half away from zero."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def quantize_multiplier(real):
    """QuantizeMultiplier: real = m * 2^(shift - 31), m in [2^30, 2^31)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    m = round_away(q * (1 << 31))
    assert m <= (1 << 31)
    if m == (1 << 31):
        m //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return int(m), int(shift)


def quantize_multiplier_smaller_than_one_exp(real):
    """QuantizeMultiplierSmallerThanOneExp: as QuantizeMultiplier, the shift <= 0 (a left shift
    of the result, i.e. MultiplyByQuantizedMultiplierSmallerThanOneExp takes it as is)."""
    assert 0.0 < real < 1.0
    m, shift = quantize_multiplier(real)
    assert shift <= 0
    return m, shift


def srdhm(a, b):
    """SaturatingRoundingDoublingHighMul on int32 values held in int64 arrays."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    assert a.min(initial=0) >= I32_MIN and a.max(initial=0) <= I32_MAX
    overflow = (a == I32_MIN) & (b == I32_MIN)
    # a * b fits int64 except for INT32_MIN * INT32_MIN, which is replaced below.
    ab = np.where(overflow, 0, a) * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    s = ab + nudge
    q = np.where(s >= 0, s // (1 << 31), -((-s) // (1 << 31)))  # C division truncates to zero
    return np.where(overflow, I32_MAX, q)


def rounding_divide_by_pot(x, exponent):
    """RoundingDivideByPOT: x / 2^exponent rounded half away from zero."""
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, m, shift):
    """MultiplyByQuantizedMultiplier (double rounding): per-channel m, shift broadcast."""
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    xs = np.asarray(x, np.int64) * (np.int64(1) << left)
    assert xs.min(initial=0) >= I32_MIN and xs.max(initial=0) <= I32_MAX, "int32 overflow"
    return rounding_divide_by_pot(srdhm(xs, m), right)


def multiply_by_quantized_multiplier_smaller_than_one_exp(x, m, left_shift):
    return rounding_divide_by_pot(srdhm(x, m), -left_shift)


def activation_range(activation, out_q, dtype):
    """CalculateActivationRangeQuantized: quantize(f) = zp + round(f / scale), f / scale in float."""
    qmin, qmax = QRANGE[dtype]
    scale = np.float32(out_q["scale"])
    zp = int(out_q["zero_point"])

    def quantize(f):
        return zp + int(round_away(float(np.float32(f) / scale)))

    if activation == "none":
        return qmin, qmax
    if activation == "relu":
        return max(qmin, quantize(0.0)), qmax
    if activation == "relu6":
        return max(qmin, quantize(0.0)), min(qmax, quantize(6.0))
    raise ValueError(activation)


def same_pads(size, k, s, d=1):
    """TensorFlow SAME: (before, after), before = total // 2."""
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return out, total // 2, total - total // 2


def windows(x, k, s, pad_value):
    """x [1, H, W, C] padded SAME (TF) with pad_value; returns [1, OH, OW, kh, kw, C] and the
    matching mask of the taps inside the input."""
    _, h, w, c = x.shape
    kh, kw = k
    sh, sw = s
    oh, th, _ = same_pads(h, kh, sh)
    ow, tw, _ = same_pads(w, kw, sw)
    xp = np.full((1, (oh - 1) * sh + kh, (ow - 1) * sw + kw, c), pad_value, np.int64)
    inside = np.zeros(xp.shape, bool)
    hh = min(h, xp.shape[1] - th)
    ww = min(w, xp.shape[2] - tw)
    xp[:, th:th + hh, tw:tw + ww] = x[:, :hh, :ww]
    inside[:, th:th + hh, tw:tw + ww] = True
    win = np.empty((1, oh, ow, kh, kw, c), np.int64)
    msk = np.empty((1, oh, ow, kh, kw, c), bool)
    for i in range(kh):
        for j in range(kw):
            win[:, :, :, i, j] = xp[:, i:i + (oh - 1) * sh + 1:sh, j:j + (ow - 1) * sw + 1:sw]
            msk[:, :, :, i, j] = inside[:, i:i + (oh - 1) * sh + 1:sh, j:j + (ow - 1) * sw + 1:sw]
    return win, msk


def per_dim(v, n=2):
    return list(v) if isinstance(v, list) else [v] * n


def check_layer(spec_path, inputs):
    """Evaluates the spec's single layer with TFLite's reference arithmetic from the spec file's
    own parameters and weight files; returns the int8 output."""
    spec = json.loads(spec_path.read_text())
    layer = spec["layers"][0]
    defaults = spec.get("defaults", {})
    dtype = layer.get("dtype", defaults.get("dtype"))
    assert layer.get("layout", defaults.get("layout")) == "NHWC"
    q = layer["quant"]
    assert q["requantize"] == "tflite"
    out_q = q["output"]
    act = layer.get("activation", "none")
    lo, hi = activation_range(act, out_q, dtype)
    op = layer["op"]
    if op == "add":
        (q1, q2) = q["inputs"]
        x1, x2 = (np.asarray(a, np.int64) for a in inputs)
        left_shift = 20
        twice_max = 2 * max(float(np.float32(q1["scale"])), float(np.float32(q2["scale"])))
        m1, s1 = quantize_multiplier_smaller_than_one_exp(float(np.float32(q1["scale"])) / twice_max)
        m2, s2 = quantize_multiplier_smaller_than_one_exp(float(np.float32(q2["scale"])) / twice_max)
        my, sy = quantize_multiplier_smaller_than_one_exp(
            twice_max / ((1 << left_shift) * float(np.float32(out_q["scale"]))))
        a1 = multiply_by_quantized_multiplier_smaller_than_one_exp(
            (x1 - q1["zero_point"]) * (1 << left_shift), m1, s1)
        a2 = multiply_by_quantized_multiplier_smaller_than_one_exp(
            (x2 - q2["zero_point"]) * (1 << left_shift), m2, s2)
        y = multiply_by_quantized_multiplier_smaller_than_one_exp(a1 + a2, my, sy) + out_q["zero_point"]
        return np.clip(y, lo, hi).astype(dtype)
    (x,) = inputs
    x = np.asarray(x, np.int64)
    in_q = q["input"]
    zx = in_q["zero_point"]
    assert layer["padding"] == "same" and layer["convention"] == "tensorflow"
    k = per_dim(layer["kernel"])
    s = per_dim(layer.get("stride", 1))
    assert per_dim(layer.get("dilation", 1)) == [1, 1]
    if op in ("max_pool", "avg_pool"):
        assert out_q == in_q, "TFLite pools keep the input's quantization"
        win, msk = windows(x, k, s, 0)
        if op == "max_pool":
            y = np.where(msk, win, np.iinfo(np.int64).min).max(axis=(3, 4))
        else:
            assert layer.get("count_include_pad", False) is False
            n = msk.sum(axis=(3, 4))
            total = np.where(msk, win, 0).sum(axis=(3, 4))  # the raw q values, as TFLite sums
            pos = total > 0
            num = np.where(pos, total + n // 2, total - n // 2)
            y = np.where(num >= 0, num // n, -((-num) // n))  # C division
        return np.clip(y, lo, hi).astype(dtype)
    assert op == "conv2d" and layer["weight_layout"] == "HWIO"
    base = spec_path.parent
    w = np.load(base / layer["weight_files"]["weights"]).astype(np.int64)  # [kh, kw, I/g, O]
    b = np.load(base / layer["weight_files"]["bias"]).astype(np.int64)
    groups = layer.get("groups", 1)
    cout = layer["out_channels"]
    ws = np.asarray(q["weight_scale"], np.float32).reshape(-1)
    ws = np.broadcast_to(ws, (cout,))
    mult = [quantize_multiplier(float(np.float32(in_q["scale"])) * float(wsc)
                                / float(np.float32(out_q["scale"]))) for wsc in ws]
    m = np.array([a for a, _ in mult], np.int64)
    sh = np.array([b_ for _, b_ in mult], np.int64)
    win, _ = windows(x, k, s, zx)  # padding reads the input zero point
    win = win - zx
    cin = x.shape[-1]
    cpg_in, cpg_out = cin // groups, cout // groups
    acc = np.zeros(win.shape[:3] + (cout,), np.int64)
    for g in range(groups):
        xi = win[..., g * cpg_in:(g + 1) * cpg_in]
        wi = w[..., g * cpg_out:(g + 1) * cpg_out]
        acc[..., g * cpg_out:(g + 1) * cpg_out] = np.einsum("nhwijc,ijco->nhwo", xi, wi)
    acc += b
    assert acc.min() >= I32_MIN and acc.max() <= I32_MAX
    y = multiply_by_quantized_multiplier(acc, m, sh) + out_q["zero_point"]
    return np.clip(y, lo, hi).astype(dtype)


# ----------------------------------------------------------------------------------------------
# Part a: TFLite.

def f32(v):
    """A float32 value written as the double it is exactly (JSON round-trips it bit-exactly)."""
    return float(np.float32(v))


def qparams(detail):
    qp = detail["quantization_parameters"]
    assert len(qp["scales"]) == 1 and len(qp["zero_points"]) == 1, detail["name"]
    return {"scale": f32(qp["scales"][0]), "zero_point": int(qp["zero_points"][0])}


def tfl_models():
    import tensorflow as tf
    keras = tf.keras
    L = keras.layers

    def seq(shape, layer):
        inp = keras.Input(shape=shape, batch_size=1, name="x")
        return keras.Model(inp, layer(inp))

    def add_model(shape):
        a = keras.Input(shape=shape, batch_size=1, name="x")
        b = keras.Input(shape=shape, batch_size=1, name="x2")
        return keras.Model([a, b], L.Add()([a, b]))

    # name: (model, [(lo, hi) of each input's representative data], TFLite op)
    return {
        "conv_same_s2": (lambda: seq((15, 17, 3), L.Conv2D(8, 3, strides=2, padding="same",
                                                           activation="relu6")),
                         [(0.0, 1.0)], "CONV_2D"),
        "dw5_s2": (lambda: seq((14, 11, 6), L.DepthwiseConv2D(5, strides=2, padding="same",
                                                              activation="relu")),
                   [(-1.0, 2.0)], "DEPTHWISE_CONV_2D"),
        "avg_pool": (lambda: seq((13, 10, 5), L.AveragePooling2D(3, strides=2, padding="same")),
                     [(-2.0, 3.0)], "AVERAGE_POOL_2D"),
        "max_pool": (lambda: seq((13, 10, 5), L.MaxPooling2D(3, strides=2, padding="same")),
                     [(-2.0, 3.0)], "MAX_POOL_2D"),
        "add": (lambda: add_model((6, 7, 4)), [(0.0, 1.0), (-3.0, 5.0)], "ADD"),
    }


ACTIVATIONS = {0: "none", 1: "relu", 3: "relu6"}  # tflite ActivationFunctionType


def tflite_graph(flat):
    """The flatbuffer's ops: [(op name, options object, inputs, outputs)]."""
    from tensorflow.lite.python import schema_py_generated as schema
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(flat, 0))
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    (sub,) = model.subgraphs
    ops = []
    for op in sub.operators:
        code = model.operatorCodes[op.opcodeIndex]
        ops.append((names[max(code.builtinCode, code.deprecatedBuiltinCode)], op.builtinOptions,
                    list(op.inputs), list(op.outputs)))
    return ops


def run_tflite(flat, feeds, resolver):
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_content=flat, num_threads=1, experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], feeds[input_key(d["name"])])
    it.invoke()
    (od,) = it.get_output_details()
    return it, it.get_tensor(od["index"]).copy()


def input_key(tensor_name):
    # serving_default_x:0, serving_default_x2:0
    return "x2" if "x2" in tensor_name else "x"


def make_tflite(out, results):
    import tensorflow as tf
    from ai_edge_litert.interpreter import OpResolverType
    from make_tflite_int8 import int8_converter  # this folder's
    keras = tf.keras
    for i, (name, (make, ranges, op_name)) in enumerate(tfl_models().items()):
        keras.utils.set_random_seed(200 + i)
        m = make()
        rng = np.random.default_rng(300 + i)
        for w in m.weights:
            w.assign(rng.uniform(-0.5, 0.5, w.shape).astype(np.float32))
        keys = ["x", "x2"][:len(ranges)]
        shapes = [(1,) + tuple(t.shape[1:]) for t in m.inputs]

        def rep(ranges=ranges, shapes=shapes, seed=400 + i):
            # A dict by input name: a list is matched to the .tflite file's inputs in its own
            # order, which for the add model is [x2, x], not Keras's [x, x2].
            r = np.random.default_rng(seed)
            for _ in range(32):
                yield {k: r.uniform(lo, hi, sh).astype(np.float32)
                       for k, (lo, hi), sh in zip(keys, ranges, shapes)}

        flat = int8_converter(m, rep).convert()

        ops = tflite_graph(flat)
        assert [o[0] for o in ops] == [op_name], (name, [o[0] for o in ops])
        _, options, op_inputs, op_outputs = ops[0]

        xr = np.random.default_rng(500 + i)
        feeds = {k: xr.integers(-128, 128, sh).astype(np.int8) for k, sh in zip(keys, shapes)}
        it, y_ref = run_tflite(flat, feeds, OpResolverType.BUILTIN_REF)
        _, y_auto = run_tflite(flat, feeds, OpResolverType.AUTO)
        _, y_opt = run_tflite(flat, feeds, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        assert y_ref.dtype == np.int8

        details = {d["index"]: d for d in it.get_tensor_details()}
        ins = {input_key(d["name"]): d for d in it.get_input_details()}
        (od,) = it.get_output_details()
        assert op_outputs == [od["index"]]
        out_q = qparams(od)
        act = ACTIVATIONS[getattr(options, "fusedActivationFunction", 0)]
        layer = {"name": name, "op": None, "dtype": "int8"}
        quant = {"requantize": "tflite"}
        files = {"x": f"tfl_{name}_x.npy", "y": f"tfl_{name}_y.npy"}
        info = {"op": op_name, "fused_activation": act}
        if op_name == "ADD":
            assert [details[t]["name"] for t in op_inputs] == [ins["x"]["name"], ins["x2"]["name"]]
            layer.update({"op": "add", "input": ["x", "x2"], "activation": act})
            quant["inputs"] = [qparams(ins["x"]), qparams(ins["x2"])]
            files["x2"] = f"tfl_{name}_x2.npy"
        else:
            assert op_inputs[0] == ins["x"]["index"]
            in_q = qparams(ins["x"])
            quant["input"] = in_q
            stride = [options.strideH, options.strideW]
            layer.update({"input_shape": list(shapes[0])})
            if op_name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
                assert [options.dilationHFactor, options.dilationWFactor] == [1, 1]
                wd, bd = details[op_inputs[1]], details[op_inputs[2]]
                wq = it.get_tensor(wd["index"])
                bq = it.get_tensor(bd["index"])
                assert wq.dtype == np.int8 and bq.dtype == np.int32
                wqp, bqp = wd["quantization_parameters"], bd["quantization_parameters"]
                assert not np.any(wqp["zero_points"]) and not np.any(bqp["zero_points"])
                ws = np.asarray(wqp["scales"], np.float32)
                # The bias's scale is the input's times the weights' (per channel).
                np.testing.assert_allclose(np.asarray(bqp["scales"], np.float32),
                                           np.float32(in_q["scale"]) * ws, rtol=1e-6)
                if op_name == "CONV_2D":
                    kh, kw = wq.shape[1:3]
                    cout = wq.shape[0]
                    assert wqp["quantized_dimension"] == 0  # filter OHWI, scales along O
                    w_hwio = np.ascontiguousarray(wq.transpose(1, 2, 3, 0))
                    groups = 1
                else:
                    # TFLite's depthwise filter is [1, kh, kw, C * multiplier], output channel
                    # c * multiplier + j; with multiplier 1, HWIO [kh, kw, 1, C], groups = C.
                    assert wq.shape[0] == 1 and options.depthMultiplier == 1
                    kh, kw, cout = wq.shape[1:4]
                    assert wqp["quantized_dimension"] == 3
                    w_hwio = np.ascontiguousarray(wq[0][:, :, None, :])
                    groups = cout
                info["tflite_filter_shape"] = list(wq.shape)
                assert ws.shape == (cout,), "per-channel weight scales"
                layer.update({"op": "conv2d", "weight_layout": "HWIO", "out_channels": int(cout),
                              "kernel": [int(kh), int(kw)], "stride": stride})
                if groups > 1:
                    layer["groups"] = int(groups)
                layer.update({"padding": "same", "convention": "tensorflow", "bias": True,
                              "activation": act})
                quant["weight_scale"] = [f32(v) for v in ws]
                layer["weight_files"] = {"weights": f"tfl_{name}_w.npy", "bias": f"tfl_{name}_b.npy"}
                np.save(out / f"tfl_{name}_w.npy", w_hwio)
                np.save(out / f"tfl_{name}_b.npy", bq.astype(np.int32))
            else:
                assert act == "none", "a pool with a fused activation"
                layer.update({"op": "avg_pool" if op_name == "AVERAGE_POOL_2D" else "max_pool",
                              "kernel": [options.filterHeight, options.filterWidth],
                              "stride": stride, "padding": "same", "convention": "tensorflow"})
                if op_name == "AVERAGE_POOL_2D":
                    layer["count_include_pad"] = False
            assert options.padding == 0  # tflite Padding.SAME
        quant["output"] = out_q
        layer["quant"] = quant
        info["activation_range"] = list(activation_range(act, out_q, "int8"))
        # Inputs calibrated on [0, 1] get the zero point -128 (scale 1/255).
        for k, q_in in zip(keys, quant["inputs"] if "inputs" in quant else [quant["input"]]):
            if ranges[keys.index(k)] == (0.0, 1.0):
                assert q_in["zero_point"] == -128, (name, k, q_in)
        spec = {"$schema": "../../../generator/frontend/spec.schema.json",
                "model": f"tfl_{name}",
                "description": f"TFLite {op_name} (int8, full-integer post-training quantization); "
                               f"input {files['x']}"
                               + (f" and {files['x2']}" if "x2" in files else "")
                               + f", TFLite reference kernels' output {files['y']} "
                               "(tests/data/int8/make_int8_data.py).",
                "defaults": {"layout": "NHWC", "dtype": "int8"}}
        if op_name == "ADD":
            spec["inputs"] = [{"name": k, "shape": list(sh)} for k, sh in zip(keys, shapes)]
        spec["layers"] = [layer]
        spec_path = out / f"tfl_{name}.json"
        spec_path.write_text(dump_spec(spec))
        for k in keys:
            np.save(out / files[k], feeds[k])
        np.save(out / files["y"], y_ref)

        y_np = check_layer(spec_path, [feeds[k] for k in keys])
        exact = y_np.shape == y_ref.shape and np.array_equal(y_np, y_ref)
        info.update({
            "numpy_matches_reference": bool(exact),
            "numpy_mismatches": int((y_np != y_ref).sum()) if y_np.shape == y_ref.shape else -1,
            "optimized_matches_reference": bool(np.array_equal(y_opt, y_ref)),
            "optimized_max_abs_diff": int(np.abs(y_opt.astype(int) - y_ref).max()),
            "optimized_mismatches": int((y_opt != y_ref).sum()),
            "xnnpack_matches_reference": bool(np.array_equal(y_auto, y_ref)),
            "xnnpack_max_abs_diff": int(np.abs(y_auto.astype(int) - y_ref).max()),
            "xnnpack_mismatches": int((y_auto != y_ref).sum()),
            "output_elements": int(y_ref.size),
            "input_quant": quant.get("input", quant.get("inputs")),
            "output_quant": out_q,
        })
        results[f"tfl_{name}"] = info
        print(f"tfl_{name}: {op_name} act={act} in={info['input_quant']} out={out_q} "
              f"y{y_ref.shape} numpy==ref {exact} ({info['numpy_mismatches']} differ), "
              f"optimized==ref {info['optimized_matches_reference']} "
              f"({info['optimized_mismatches']} differ, max {info['optimized_max_abs_diff']}), "
              f"xnnpack==ref {info['xnnpack_matches_reference']} "
              f"({info['xnnpack_mismatches']} differ, max {info['xnnpack_max_abs_diff']})")


def dump_spec(spec):
    """JSON with one layer field per line and short lists inline, like examples/."""
    def inline(v):
        return json.dumps(v, separators=(", ", ": "))
    lines = ["{"]
    items = list(spec.items())
    for i, (k, v) in enumerate(items):
        end = "," if i + 1 < len(items) else ""
        if k in ("layers", "inputs"):
            lines.append(f'  "{k}": [')
            for j, item in enumerate(v):
                end2 = "," if j + 1 < len(v) else ""
                if k == "inputs":
                    lines.append(f"    {inline(item)}{end2}")
                    continue
                lines.append("    {")
                fields = list(item.items())
                for n, (fk, fv) in enumerate(fields):
                    end3 = "," if n + 1 < len(fields) else ""
                    if fk == "quant":
                        lines.append('     "quant": {')
                        qf = list(fv.items())
                        for p, (qk, qv) in enumerate(qf):
                            end4 = "," if p + 1 < len(qf) else ""
                            lines.append(f'       "{qk}": {inline(qv)}{end4}')
                        lines.append(f"     }}{end3}")
                    else:
                        lines.append(f'     "{fk}": {inline(fv)}{end3}')
                lines.append(f"    }}{end2}")
            lines.append(f"  ]{end}")
        else:
            lines.append(f'  "{k}": {inline(v)}{end}')
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == spec
    return text


# ----------------------------------------------------------------------------------------------
# Part b: ONNX Runtime.

def checked_model(nodes, inits, name, x_shape, y_shape):
    """An opset-13 float model of graph input x and output y, checked by onnx.checker."""
    import onnx
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="padfold make_int8_data.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def float_onnx_model():
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(600)

    def init(name, shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    inits = [init("w1", (8, 3, 3, 3)), init("b1", (8,)), init("w2", (8, 8, 3, 3)), init("b2", (8,))]
    nodes = [
        # pads [h_begin, w_begin, h_end, w_end]: 16x15 -> 9x7
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 0, 2, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool", kernel_shape=[3, 3],
                         strides=[1, 1], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3],
                         auto_pad="SAME_UPPER"),
        helper.make_node("Add", ["r1", "c2"], ["y"], name="add"),
    ]
    return checked_model(nodes, inits, "padfold_int8", [1, 3, 16, 15], [1, 8, 9, 7])


def float_onnx_model_u8():
    """The second float model (quantized with uint8 activations): a 1x1 Conv + Relu (r1), then
    two branches of r1 with the same output size, a depthwise 5x5 stride-2 Conv with auto_pad
    SAME_UPPER (d1; pads 1/2 in both dims) and an AveragePool 3x3 stride 2 with explicit
    asymmetric pads, count_include_pad 0 (p1), their Add (a1) and a GlobalAveragePool (y)."""
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(610)

    def init(name, shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    inits = [init("w1", (8, 4, 1, 1)), init("b1", (8,)), init("w2", (8, 1, 5, 5)), init("b2", (8,))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        # 16x14 -> 8x7: the SAME total pad is 3 in both dims, 1 before and 2 after (SAME_UPPER).
        helper.make_node("Conv", ["r1", "w2", "b2"], ["d1"], name="dw", kernel_shape=[5, 5],
                         strides=[2, 2], auto_pad="SAME_UPPER", group=8),
        # pads [h_begin, w_begin, h_end, w_end]: 16x14 -> 8x7, the last column's windows have 2
        # taps inside, the first row's 2 rows.
        helper.make_node("AveragePool", ["r1"], ["p1"], name="pool", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 0, 0, 2], count_include_pad=0),
        helper.make_node("Add", ["d1", "p1"], ["a1"], name="add"),
        helper.make_node("GlobalAveragePool", ["a1"], ["y"], name="gap"),
    ]
    return checked_model(nodes, inits, "padfold_uint8", [1, 4, 16, 14], [1, 8, 1, 1])


def float_onnx_model_head():
    """A classifier's end (quantized with uint8 activations, QDQ only: QOperator writes the Gemm
    as com.microsoft QGemm): a 3x3 Conv + Relu, a GlobalAveragePool, Flatten to [N, C] and a Gemm
    with transB 1 (torch.onnx's Linear), y of shape [1, 10]."""
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(620)

    def init(name, shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    inits = [init("w1", (16, 3, 3, 3)), init("b1", (16,)), init("fc_w", (10, 16)),
             init("fc_b", (10,))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("GlobalAveragePool", ["r1"], ["g1"], name="gap"),
        helper.make_node("Flatten", ["g1"], ["f1"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f1", "fc_w", "fc_b"], ["y"], name="fc", transB=1),
    ]
    return checked_model(nodes, inits, "padfold_uint8_head", [1, 3, 12, 10], [1, 10])


# prefix: (float model, input shape, activation type, calibration seed, input seed, the
# intermediate quantized tensors added as graph outputs: {output: (float tensor, QDQ's quantized
# tensor, QOperator's)}[, formats]). The files are <prefix>float.onnx, <prefix>qdq.onnx,
# <prefix>qop.onnx (the formats made: both unless named).
ORT_MODELS = {
    "ort_": (float_onnx_model, (1, 3, 16, 15), "QInt8", 700, 800, {}),
    "ort_u8": (float_onnx_model_u8, (1, 4, 16, 14), "QUInt8", 710, 810, {
        "r1_q": ("r1", "r1_QuantizeLinear_Output", "c1_quantized"),
        "d1_q": ("d1", "d1_QuantizeLinear_Output", "d1_quantized"),
        "p1_q": ("p1", "p1_QuantizeLinear_Output", "p1_quantized"),
        "a1_q": ("a1", "a1_QuantizeLinear_Output", "a1_quantized"),
    }),
    "ort_head": (float_onnx_model_head, (1, 3, 12, 10), "QUInt8", 720, 820, {}, ("qdq",)),
}


def ort_session(path_or_bytes, optimized_path=None):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    if optimized_path:
        so.optimized_model_filepath = str(optimized_path)
    return ort.InferenceSession(path_or_bytes, so, providers=["CPUExecutionProvider"])


def activation_elem_type(model):
    """The TensorProto type of the quantized activations: the zero point's of the last
    DequantizeLinear."""
    (out,) = [o for o in model.graph.output if o.name == "y"]
    (deq,) = [n for n in model.graph.node if out.name in n.output]
    assert deq.op_type == "DequantizeLinear", deq.op_type
    (zp,) = [t for t in model.graph.initializer if t.name == deq.input[2]]
    return zp.data_type


def add_int8_output(model, extra=None):
    """Adds the int8/uint8 input of the last DequantizeLinear as the graph output "y_int8", and
    each tensor of extra ({output name: (tensor, shape)}) as the graph output of that name."""
    import onnx
    from onnx import helper
    model = onnx.ModelProto.FromString(model.SerializeToString())
    elem = activation_elem_type(model)
    (out,) = model.graph.output
    (deq,) = [n for n in model.graph.node if out.name in n.output]
    shape = [d.dim_value for d in out.type.tensor_type.shape.dim]
    outputs = {"y_int8": (deq.input[0], shape)}
    outputs.update(extra or {})
    for name, (q, shape) in outputs.items():
        assert any(q in n.output for n in model.graph.node), q
        # Rename the producer's output so the graph output is a plain name (y_int8).
        for n in model.graph.node:
            for lst in (n.input, n.output):
                for k, v in enumerate(lst):
                    if v == q:
                        lst[k] = name
        model.graph.output.append(helper.make_tensor_value_info(name, elem, shape))
    onnx.checker.check_model(model)
    return model


# The "onnx" arithmetic of docs/int8.md, checked against ORT's own int8/uint8 tensors.

def qrange(zero_point):
    """(qmin, qmax) of a zero point's dtype (int8 or uint8)."""
    info = np.iinfo(np.asarray(zero_point).dtype)
    return int(info.min), int(info.max)


def same_pads_onnx(size, k, s, upper):
    """auto_pad SAME_UPPER / SAME_LOWER: (before, after); the odd one out goes after (UPPER)."""
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def onnx_conv_pads(attrs, shape):
    """QLinearConv / QLinearAveragePool pads [h_begin, w_begin, h_end, w_end] from the
    attributes, for the NCHW input shape."""
    k = attrs["kernel_shape"]
    s = attrs.get("strides", [1, 1])
    auto = attrs.get("auto_pad", b"NOTSET")
    if auto in (b"SAME_UPPER", b"SAME_LOWER"):
        (hb, he), (wb, we) = (same_pads_onnx(shape[2 + d], k[d], s[d], auto == b"SAME_UPPER")
                              for d in range(2))
        return [hb, wb, he, we]
    assert auto in (b"NOTSET", b"VALID"), auto
    return list(attrs.get("pads", [0, 0, 0, 0]))


def onnx_qlinear_conv(xq, sx, zx, w, sw, b, sy, zy, pads, stride, group=1, pad_value=None):
    """QLinearConv, NCHW, OIHW weights: int32 accumulation with the input zero point in the
    padding; scale = sx * sw[o] / sy in float32; round half to even; saturate. stride: one or
    one per dim. pad_value: what the padding reads (the input zero point unless given)."""
    qmin, qmax = qrange(zy)
    sh, sw_ = per_dim(stride)
    xq = xq.astype(np.int64)
    n, c, h, wd = xq.shape
    o, cg, kh, kw = w.shape
    assert c == cg * group and o % group == 0
    og = o // group
    xp = np.full((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]),
                 int(zx) if pad_value is None else pad_value, np.int64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = xq
    oh = (xp.shape[2] - kh) // sh + 1
    ow = (xp.shape[3] - kw) // sw_ + 1
    acc = np.zeros((n, o, oh, ow), np.int64)
    for g in range(group):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * og:(g + 1) * og].astype(np.int64)
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i:i + (oh - 1) * sh + 1:sh, j:j + (ow - 1) * sw_ + 1:sw_]
                acc[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch - int(zx),
                                                         wg[:, :, i, j])
    acc += b.astype(np.int64)[None, :, None, None]
    assert acc.min() >= I32_MIN and acc.max() <= I32_MAX
    scale = (np.float32(sx) * np.asarray(sw, np.float32)) / np.float32(sy)
    v = acc.astype(np.float32) * scale[None, :, None, None]
    return np.clip(np.round(v) + int(zy), qmin, qmax).astype(np.asarray(zy).dtype)  # half to even


def onnx_max_pool(xq, k, pads, stride):
    n, c, h, w = xq.shape
    xp = np.pad(xq.astype(np.int64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
                constant_values=np.iinfo(np.int64).min)
    oh = (xp.shape[2] - k) // stride + 1
    ow = (xp.shape[3] - k) // stride + 1
    return np.max([xp[:, :, i:i + (oh - 1) * stride + 1:stride, j:j + (ow - 1) * stride + 1:stride]
                   for i in range(k) for j in range(k)], axis=0).astype(xq.dtype)


def round_to_f32(exact):
    """The float32 nearest to the Fraction exact, ties to even."""
    f = np.float32(float(exact))
    cands = [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - exact),
                                     int(np.asarray(c).view(np.uint32)) & 1))


def fma32(a, b, c):
    """fmaf: a * b + c rounded once to float32 (elementwise, exact in Fractions)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float32) for v in (a, b, c)))
    out = [round_to_f32(Fraction(float(p)) * Fraction(float(q)) + Fraction(float(r)))
           for p, q, r in zip(a.ravel(), b.ravel(), c.ravel())]
    return np.array(out, np.float32).reshape(a.shape)


def onnx_qlinear_add(a, sa, za, b, sb, zb, sc, zc, fused=True):
    """MLAS QLinearAdd on AVX2 (qladd_avx2.cpp): ra = sa / sc, rb = sb / sc, fixed = float(zc) -
    (ra * za + rb * zb) (GCC contracts it to fma(ra, za, rb * zb)), y = fma(a, ra, fma(b, rb,
    fixed)), round half to even, saturate. fused=False: the same without fma,
    ra * (a - za) + rb * (b - zb) + zc."""
    qmin, qmax = qrange(zc)
    ra = np.float32(sa) / np.float32(sc)
    rb = np.float32(sb) / np.float32(sc)
    if fused:
        fixed = np.float32(zc) - fma32(ra, np.float32(za), rb * np.float32(zb))
        v = fma32(a.astype(np.float32), ra, fma32(b.astype(np.float32), rb, fixed))
        return np.clip(np.round(v), qmin, qmax).astype(np.asarray(zc).dtype)
    v = ra * (a.astype(np.float32) - np.float32(za)) + rb * (b.astype(np.float32) - np.float32(zb))
    return np.clip(np.round(v) + int(zc), qmin, qmax).astype(np.asarray(zc).dtype)


def onnx_qlinear_global_avg_pool(xq, sx, zx, sy, zy):
    """MlasQLinearGlobalAveragePoolNchw: acc = sum(x) - zx * n in int32, requantized by
    MlasRequantizeOutput with scale = sx / (sy * float(n)): round_half_even(clamp(float(acc) *
    scale, qmin - zy, qmax - zy)) + zy."""
    qmin, qmax = qrange(zy)
    n_taps = xq.shape[2] * xq.shape[3]
    acc = xq.astype(np.int64).sum(axis=(2, 3), keepdims=True) - int(zx) * n_taps
    scale = np.float32(sx) / (np.float32(sy) * np.float32(n_taps))
    assert n_taps < (1 << 24) and 2.0 ** -32 <= scale < 256.0
    v = np.clip(acc.astype(np.float32) * scale, np.float32(qmin - int(zy)),
                np.float32(qmax - int(zy)))
    return (np.round(v) + int(zy)).astype(np.asarray(zy).dtype)


def onnx_qlinear_avg_pool(xq, sx, zx, sy, zy, k, pads, strides, count_include_pad,
                          variant="ort", global_path=True):
    """QLinearAveragePool (qlinear_pool.cc): each input dequantized, sx * float(x - zx); a window
    sums those floats from 0.f over its taps inside the input in row-major order; then
    nearbyint(sum / float(count) / sy + float(zy)) (count: the taps inside, or the kernel size
    with count_include_pad), saturated. A kernel the size of the input with no pads is ORT's
    global path (global_path=False: the float path all the same). variant: "int_sum" sums the
    integers and multiplies by sx once; "zp_after" adds the zero point after rounding (what the
    data can tell apart)."""
    qmin, qmax = qrange(zy)
    n, c, h, w = xq.shape
    if global_path and list(k) == [h, w] and not any(pads):
        return onnx_qlinear_global_avg_pool(xq, sx, zx, sy, zy)
    oh = (h + pads[0] + pads[2] - k[0]) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - k[1]) // strides[1] + 1
    xi = xq.astype(np.int64) - int(zx)
    xf = np.float32(sx) * xi.astype(np.float32)
    total = np.zeros((n, c, oh, ow), np.float32)
    itotal = np.zeros((n, c, oh, ow), np.int64)
    count = np.zeros((oh, ow), np.int64)
    rows0 = np.arange(oh)[:, None] * strides[0] - pads[0]
    cols0 = np.arange(ow)[None, :] * strides[1] - pads[1]
    for i in range(k[0]):
        for j in range(k[1]):
            r, cc = rows0 + i, cols0 + j
            inside = (r >= 0) & (r < h) & (cc >= 0) & (cc < w)
            rr, ccc = np.clip(r, 0, h - 1), np.clip(cc, 0, w - 1)
            total = np.where(inside, total + xf[:, :, rr, ccc], total).astype(np.float32)
            itotal += np.where(inside, xi[:, :, rr, ccc], 0)
            count += inside
    div = np.float32(k[0] * k[1]) if count_include_pad else count.astype(np.float32)
    if variant == "int_sum":
        total = np.float32(sx) * itotal.astype(np.float32)
    avg = (total / div).astype(np.float32)
    if variant == "zp_after":
        q = np.round(avg / np.float32(sy)) + int(zy)
    else:
        q = np.round(avg / np.float32(sy) + np.float32(zy))
    return np.clip(q, qmin, qmax).astype(np.asarray(zy).dtype)


def check_ort_qop(model, x):
    """Runs the QOperator model with its int8/uint8 intermediates as extra outputs and recomputes
    each from its inputs with the numpy above; returns ({tensor: mismatches}, {a different
    arithmetic: mismatches}), the second saying what the data tells apart."""
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.ModelProto.FromString(model.SerializeToString())
    elem = activation_elem_type(m)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    have = {o.name for o in m.graph.output}
    for node in m.graph.node:
        if node.op_type != "DequantizeLinear" and node.output[0] not in have:
            m.graph.output.append(helper.make_tensor_value_info(node.output[0], elem, None))
    names = [o.name for o in m.graph.output]
    got = dict(zip(names, ort_session(m.SerializeToString()).run(None, {"x": x})))
    assert np.array_equal(got["y"], ort_session(model.SerializeToString()).run(None, {"x": x})[0])
    res, alt = {}, {}

    def differ(ref, want):
        assert ref.dtype == want.dtype and ref.shape == want.shape, (ref.dtype, ref.shape,
                                                                     want.dtype, want.shape)
        return int((ref != want).sum())

    for node in m.graph.node:
        a = lambda i: inits[node.input[i]] if node.input[i] in inits else got[node.input[i]]  # noqa: E731
        attrs = {t.name: helper.get_attribute_value(t) for t in node.attribute}
        key = f"{node.op_type} -> {node.output[0]}"
        want = got[node.output[0]] if node.op_type != "DequantizeLinear" else None
        if node.op_type == "QuantizeLinear":
            qmin, qmax = qrange(a(2))
            ref = np.clip(np.round(x / a(1)) + a(2), qmin, qmax).astype(np.asarray(a(2)).dtype)
        elif node.op_type == "QLinearConv":
            pads = onnx_conv_pads(attrs, a(0).shape)
            conv = lambda p, **kw: onnx_qlinear_conv(  # noqa: E731
                a(0), a(1), a(2), a(3), a(4), a(8), a(6), a(7), p, attrs.get("strides", [1, 1]),
                attrs.get("group", 1), **kw)
            ref = conv(pads)
            if pads[:2] != pads[2:]:
                alt[f"{key}: the pads before and after swapped"] = differ(
                    conv(pads[2:] + pads[:2]), want)
            if any(pads) and int(a(2)) != 0:
                alt[f"{key}: padding with integer 0, not the zero point"] = differ(
                    conv(pads, pad_value=0), want)
        elif node.op_type == "MaxPool":
            ref = onnx_max_pool(a(0), attrs["kernel_shape"][0], attrs["pads"], attrs["strides"][0])
        elif node.op_type == "QLinearAdd":
            ref = onnx_qlinear_add(a(0), a(1), a(2), a(3), a(4), a(5), a(6), a(7))
            alt[f"{key}: without fma"] = differ(onnx_qlinear_add(
                a(0), a(1), a(2), a(3), a(4), a(5), a(6), a(7), fused=False), want)
        elif node.op_type == "QLinearAveragePool":
            assert attrs.get("channels_last", 0) == 0 and attrs.get("ceil_mode", 0) == 0
            pool = lambda **kw: onnx_qlinear_avg_pool(  # noqa: E731
                a(0), a(1), a(2), a(3), a(4), attrs["kernel_shape"],
                onnx_conv_pads(attrs, a(0).shape), attrs.get("strides", [1, 1]),
                attrs.get("count_include_pad", 0), **kw)
            ref = pool()
            for variant, what in (("int_sum", "sx times the integer sum"),
                                  ("zp_after", "the zero point added after rounding")):
                alt[f"{key}: {what}"] = differ(pool(variant=variant), want)
        elif node.op_type == "QLinearGlobalAveragePool":
            assert attrs.get("channels_last", 0) == 0
            ref = onnx_qlinear_global_avg_pool(a(0), a(1), a(2), a(3), a(4))
            h, w = a(0).shape[2:]
            alt[f"{key}: QLinearAveragePool's float path"] = differ(onnx_qlinear_avg_pool(
                a(0), a(1), a(2), a(3), a(4), [h, w], [0, 0, 0, 0], [1, 1], 0,
                global_path=False), want)
        else:
            continue
        res[key] = differ(ref, want)
    return res, alt


def make_ort(out, results):
    for prefix, spec in ORT_MODELS.items():
        make_ort_model(out, results, prefix, *spec)


def make_ort_model(out, results, prefix, make_float, shape, act_type, cal_seed, x_seed, extra,
                   formats=("qdq", "qop")):
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            r = np.random.default_rng(cal_seed)
            self.data = iter([{"x": r.uniform(-1, 1, shape).astype(np.float32)}
                              for _ in range(32)])

        def get_next(self):
            return next(self.data, None)

    fmodel = make_float()
    x = np.random.default_rng(x_seed).uniform(-1, 1, shape).astype(np.float32)
    results[f"{prefix}float"] = {"ops": [n.op_type for n in fmodel.graph.node]}
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in onnx.shape_inference.infer_shapes(fmodel).graph.value_info}
    yqs = {}
    (out / f"{prefix}float.onnx").write_bytes(fmodel.SerializeToString())
    for fi, (name, fmt) in enumerate((("qdq", QuantFormat.QDQ), ("qop", QuantFormat.QOperator))):
        if name not in formats:
            continue
        key = f"{prefix}{name}"
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            onnx.save(fmodel, tmp / "f.onnx")
            quantize_static(str(tmp / "f.onnx"), str(tmp / "q.onnx"), Reader(), quant_format=fmt,
                            per_channel=True, activation_type=getattr(QuantType, act_type),
                            weight_type=QuantType.QInt8)
            qmodel = onnx.load(tmp / "q.onnx")
            (y_plain,) = ort_session(qmodel.SerializeToString()).run(None, {"x": x})
            ext = {o: (t[1 + fi], shapes[t[0]]) for o, t in extra.items()}
            model = add_int8_output(qmodel, ext)
            data = model.SerializeToString()
            outs = ort_session(data, tmp / "opt.onnx").run(None, {"x": x})
            got = dict(zip([o.name for o in model.graph.output], outs))
            y, yq = got["y"], got["y_int8"]
            opt_ops = [(n.domain + "." if n.domain else "") + n.op_type
                       for n in onnx.load(tmp / "opt.onnx").graph.node]
            if extra:
                # The extra outputs change neither y_int8 nor the ops ORT optimizes the model to.
                only = add_int8_output(qmodel)
                (_, yq_only) = ort_session(only.SerializeToString(), tmp / "opt1.onnx").run(
                    None, {"x": x})
                assert np.array_equal(yq, yq_only), "the extra outputs changed y_int8"
                assert opt_ops == [(n.domain + "." if n.domain else "") + n.op_type
                                   for n in onnx.load(tmp / "opt1.onnx").graph.node]
        dtype = {"QInt8": np.int8, "QUInt8": np.uint8}[act_type]
        assert yq.dtype == dtype
        assert np.array_equal(y, y_plain), "the extra output changed ORT's result"
        (out / f"{key}.onnx").write_bytes(data)
        np.save(out / f"{key}_x.npy", x)
        np.save(out / f"{key}_y.npy", y)
        np.save(out / f"{key}_yq.npy", yq)
        for o in extra:
            assert got[o].dtype == dtype
            np.save(out / f"{key}_{o}.npy", got[o])
        ops = [n.op_type for n in model.graph.node]
        inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
        deq = [n for n in model.graph.node if n.op_type == "DequantizeLinear" and "y" in n.output][0]
        results[key] = {
            "ops": ops, "ops_after_ort_optimization": opt_ops,
            "y_int8_scale": f32(inits[deq.input[1]]), "y_int8_zero_point": int(inits[deq.input[2]]),
            "y_equals_dequantized_y_int8": bool(np.array_equal(
                y, ((yq.astype(np.float32) - inits[deq.input[2]].astype(np.float32))
                    * inits[deq.input[1]]).astype(np.float32))),
        }
        if extra:
            results[key]["quantization"] = quant_params(model)
        yqs[name] = yq
        if name == "qop":
            chk, alt = check_ort_qop(model, x)
            results[key]["numpy_onnx_arithmetic_mismatches"] = chk
            results[key]["numpy_other_arithmetic_mismatches"] = alt
            print(f"  numpy onnx-mode arithmetic vs ORT's {np.dtype(dtype).name} tensors "
                  f"(mismatches): {chk}\n  other arithmetic (mismatches): {alt}")
        print(f"{key}: ops {ops}\n  after ORT's optimizations: {opt_ops}\n"
              f"  y {y.shape} yq {yq.dtype} scale {results[key]['y_int8_scale']} "
              f"zp {results[key]['y_int8_zero_point']}")
    if len(yqs) < 2:
        return
    diff = int((yqs["qdq"] != yqs["qop"]).sum())
    results[f"{prefix}qdq_vs_qop_y_int8_mismatches"] = diff
    print(f"{prefix}: y_int8 of qdq and qop differ in {diff} of {yqs['qdq'].size}")


def quant_params(model):
    """{tensor: [scale, zero point]} of each activation (per tensor) and {weights: [scales]} (per
    output channel), from the model's <name>_scale / <name>_zero_point initializers."""
    from onnx import numpy_helper
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    q = {}
    for name, v in sorted(inits.items()):
        base = name[:-len("_scale")]
        if not name.endswith("_scale") or base.endswith("_quantized"):  # the biases' scales
            continue
        if v.ndim == 0:
            q[base] = [f32(v), int(inits[base + "_zero_point"])]
        else:
            q[base] = [f32(s) for s in v]
    return q


def versions():
    import importlib.metadata as md
    v = {}
    for pkg in ("tensorflow-cpu", "tensorflow", "ai-edge-litert", "onnxruntime", "onnx", "numpy"):
        try:
            v[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return v


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
    out.mkdir(parents=True, exist_ok=True)
    results = {"versions": versions()}
    make_tflite(out, results)
    make_ort(out, results)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    bad = [k for k, v in results.items() if k.startswith("tfl_") and not v["numpy_matches_reference"]]
    bad += [f"{m}: {k}" for m in ORT_MODELS for k, v in
            results.get(f"{m}qop", {}).get("numpy_onnx_arithmetic_mismatches", {}).items() if v]
    if bad:
        sys.exit(f"the numpy arithmetic differs from TFLite's / ORT's: {bad}")


if __name__ == "__main__":
    main()
