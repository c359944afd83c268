#!/usr/bin/env python3
"""Differential fuzzer of `padfold import` against ONNX Runtime.

Builds small random ONNX graphs of the ops padfold imports: convs and pools of every padding form
next to Pads of every mode (folds at every border), per-channel affine ops, activations, binary ops
whose operands broadcast in every way ONNX allows (rank-2 [N, C] scales among them), global pools,
Flatten -> Gemm -> Softmax heads, maps flattened (through a channels-last Transpose, as tf2onnx
writes Keras's Flatten) into MatMul/Gemm, Keras's hard sigmoid as relu6(x + 3) / 6 (and hard swish)
and GELU's tanh form (as torch.onnx and tf2onnx write it), channels-last stretches between
Transposes (LayerNorm, Linear, GELU as Erf or tanh: ConvNeXt's block), Keras's LayerNormalization
and Dense layers as tf2onnx writes them (x * s + (-mean) * s, tf.tensordot), and QDQ groups
(int8/uint8, Pad constants on and off the grid).
Each graph ONNX Runtime accepts is imported, compiled and run with `padfold run --model
--partial`; every output padfold writes is compared with ONNX Runtime's value of the same ONNX
tensor (a spec input a node left to the caller computes is fed from ONNX Runtime). A finding is:
padfold crashing, an internal error, an output of another shape, or values that differ (float: by
more than 1e-4 of the largest; int8: by more than 1 step, the rounding ONNX Runtime's own float
and fused paths differ by). A refusal naming a node, and a node left to the caller with its
reason, are not findings.

Usage: diff_onnx_ort.py PADFOLD_BIN WORK_DIR [--seconds S] [--seed N] [--graphs N]
Findings are kept in WORK_DIR/findings/<seed>-<k>/ (the model, the input, what differed); the
exit status is 1 if there was any. Run with the project's .venv python (onnx, onnxruntime).
"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
ACTIVATIONS = ["Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish",
               "GeluTanh"]


class Graph:
    """A graph being built: nodes, initializers and the float tensors made so far with shapes."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes, self.inits, self.tensors = [], [], {}
        self.count = 0
        self.output_type = TensorProto.FLOAT  # a quantized graph's: its integers

    def name(self, prefix):
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, array, prefix="k"):
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def weights(self, shape, scale=0.5):
        return self.const(self.rng.standard_normal(shape).astype(np.float32) * scale, "w")

    def node(self, op, inputs, shape, **attrs):
        out = self.name(op.lower()[:4])
        self.nodes.append(helper.make_node(op, inputs, [out], name=out + "_node", **attrs))
        if shape is not None:
            self.tensors[out] = list(shape)
        return out

    def pick(self, rank=None, unit_spatial=None):
        names = [t for t, s in self.tensors.items()
                 if (rank is None or len(s) == rank)
                 and (unit_spatial is None or all(d == 1 for d in s[2:]) == unit_spatial)]
        return str(self.rng.choice(names)) if names else None


def window(rng, size, k, d):
    """Random explicit pads (before, after) that leave at least one output, or None."""
    span = (k - 1) * d + 1
    for _ in range(20):
        before, after = int(rng.integers(0, 3)), int(rng.integers(0, 3))
        if size + before + after >= span:
            return before, after
    return None


def padding_attrs(rng, spatial, kernel, strides, dilations, pool=False):
    """auto_pad, or explicit pads (asymmetric ones included)."""
    choice = rng.integers(0, 4)
    if choice == 0:
        return {"auto_pad": str(rng.choice(["SAME_UPPER", "SAME_LOWER"]))}
    if choice == 1 and all(n >= (k - 1) * d + 1 for n, k, d in zip(spatial, kernel, dilations)):
        return {"auto_pad": "VALID"}
    del strides  # any stride leaves one output where the padded size holds the window
    pads = [window(rng, n, k, d) for n, k, d in zip(spatial, kernel, dilations)]
    if None in pads:
        return {"auto_pad": "SAME_UPPER"}
    if pool:  # ONNX: pads smaller than the kernel
        pads = [(min(b, k - 1), min(a, k - 1)) for (b, a), k in zip(pads, kernel)]
        if any(n + b + a < (k - 1) * d + 1
               for n, (b, a), k, d in zip(spatial, pads, kernel, dilations)):
            return {"auto_pad": "SAME_UPPER"}
    return {"pads": [b for b, _ in pads] + [a for _, a in pads]}


def out_size(n, k, s, d, attrs, ceil=False):
    span = (k - 1) * d + 1
    if attrs.get("auto_pad", "NOTSET").startswith("SAME"):
        return -(-n // s)
    before = after = 0
    if "pads" in attrs:
        half = len(attrs["pads"]) // 2
        before, after = attrs["pads"][0], attrs["pads"][half]  # caller passes one axis' pads
    total = n + before + after - span
    o = (-(-total // s) if ceil else total // s) + 1
    if ceil and (o - 1) * s >= n + before:
        o -= 1
    return o


def spatial_out(shape, kernel, strides, dilations, attrs, ceil=False):
    dims = len(shape) - 2
    out = []
    for a in range(dims):
        ax = dict(attrs)
        if "pads" in attrs:
            ax["pads"] = [attrs["pads"][a], attrs["pads"][dims + a]]
        out.append(out_size(shape[2 + a], kernel[a], strides[a], dilations[a], ax, ceil))
    return out


def add_pad(g, x):
    """A Pad of a spatial tensor (constant, reflect, edge): folded into the convs or pools after."""
    rng, s = g.rng, g.tensors[x]
    mode = str(rng.choice(["constant", "reflect", "edge"]))
    pads = [[0, 0] for _ in s]
    for a in range(2, len(s)):
        limit = s[a] - 1 if mode == "reflect" else 2
        # A constant Pad's negative pads crop (folded as such), leaving at least one position.
        low = -min(2, (s[a] - 1) // 2) if mode == "constant" and rng.random() < 0.3 else 0
        pads[a] = [int(rng.integers(low, limit + 1)), int(rng.integers(low, limit + 1))]
    flat = [p[0] for p in pads] + [p[1] for p in pads]
    inputs = [x, g.const(np.array(flat, np.int64), "pads")]
    if mode == "constant":
        inputs.append(g.const(np.array(rng.choice([0.0, 0.5, -1.25]), np.float32), "pv"))
    shape = [d + p[0] + p[1] for d, p in zip(s, pads)]
    return g.node("Pad", inputs, shape, mode=mode)


def add_crop(g, x):
    """A Slice cropping spatial axes (Keras's Cropping2D; after a Pad, NASNet's shifted pools):
    folded into the convs or pools after as negative pads. Starts and ends counted either way."""
    rng, s = g.rng, g.tensors[x]
    starts, ends, axes, shape = [], [], [], list(s)
    for a in range(2, len(s)):
        if s[a] < 3 or rng.random() < 0.3:
            continue
        b, e = int(rng.integers(0, 2)), int(rng.integers(0, 2))
        if b + e >= s[a]:
            continue
        starts.append(b if rng.random() < 0.5 else b - s[a])
        ends.append(s[a] - e if rng.random() < 0.5 else (-e if e else 1 << 30))
        axes.append(a if rng.random() < 0.5 else a - len(s))
        shape[a] = s[a] - b - e
    if not axes:
        return x
    ins = [x] + [g.const(np.array(v, np.int64), n) for v, n in
                 ((starts, "cs"), (ends, "ce"), (axes, "ca"))]
    return g.node("Slice", ins, shape)


def add_conv(g, x):
    rng, s = g.rng, g.tensors[x]
    dims, c = len(s) - 2, s[1]
    k = [int(rng.integers(1, 5)) for _ in range(dims)]
    st = [int(rng.integers(1, 4)) for _ in range(dims)]
    dl = [int(rng.integers(1, 3)) if rng.random() < 0.3 else 1 for _ in range(dims)]
    group = c if (c > 1 and rng.random() < 0.3) else 1
    m = group * int(rng.integers(1, 3)) if group > 1 else int(rng.integers(1, 6))
    attrs = padding_attrs(rng, s[2:], k, st, dl)
    if max(dl) > 1 and attrs.get("auto_pad", "").startswith("SAME"):
        dl = [1] * dims  # ONNX Runtime refuses dilation with auto_pad SAME
    attrs.update(kernel_shape=k, strides=st, dilations=dl, group=group)
    out = spatial_out(s, k, st, dl, attrs)
    if min(out) < 1:
        return None
    inputs = [x, g.weights([m, c // group] + k)]
    if rng.random() < 0.6:
        inputs.append(g.weights([m]))
    return g.node("Conv", inputs, [s[0], m] + out, **attrs)


def add_conv_transpose(g, x):
    rng, s = g.rng, g.tensors[x]
    dims, c = len(s) - 2, s[1]
    k = [int(rng.integers(1, 4)) for _ in range(dims)]
    st = [int(rng.integers(1, 3)) for _ in range(dims)]
    m = int(rng.integers(1, 4))
    attrs = {"kernel_shape": k, "strides": st}
    if rng.random() < 0.5:
        # Mostly not where the kernel spans less than the stride: there ONNX Runtime gives
        # (in - 1) x stride + k, the ONNX spec in x stride, and padfold leaves the node (its
        # output, ORT's shape, is then computed by ORT and fed to what reads it).
        if rng.random() < 0.8:
            st = [min(t, kk) for t, kk in zip(st, k)]
        attrs = {"kernel_shape": k, "strides": st}
        attrs["auto_pad"] = str(rng.choice(["SAME_UPPER", "SAME_LOWER"]))
        out = [n * t if kk >= t else (n - 1) * t + kk for n, t, kk in zip(s[2:], st, k)]
    else:
        pads = [[int(rng.integers(0, kk)), int(rng.integers(0, kk))] for kk in k]
        op = [int(rng.integers(0, t)) for t in st]
        attrs["pads"] = [p[0] for p in pads] + [p[1] for p in pads]
        attrs["output_padding"] = op
        out = [(n - 1) * t + kk - p[0] - p[1] + o
               for n, t, kk, p, o in zip(s[2:], st, k, pads, op)]
        if min(out) < 1:
            return None
    return g.node("ConvTranspose", [x, g.weights([c, m] + k)], [s[0], m] + out, **attrs)


def add_pool(g, x):
    rng, s = g.rng, g.tensors[x]
    dims = len(s) - 2
    op = str(rng.choice(["MaxPool", "AveragePool"]))
    k = [int(rng.integers(1, 4)) for _ in range(dims)]
    st = [int(rng.integers(1, 3)) for _ in range(dims)]
    attrs = padding_attrs(rng, s[2:], k, st, [1] * dims, pool=True)
    ceil = bool(rng.random() < 0.3) and "pads" in attrs
    attrs.update(kernel_shape=k, strides=st)
    if ceil:
        attrs["ceil_mode"] = 1
    if op == "AveragePool":
        attrs["count_include_pad"] = int(rng.integers(0, 2))
    out = spatial_out(s, k, st, [1] * dims, attrs, ceil)
    if min(out) < 1:
        return None
    return g.node(op, [x], s[:2] + out, **attrs)


def add_global(g, x):
    rng, s = g.rng, g.tensors[x]
    choice = rng.integers(0, 3)
    if choice == 0:
        return g.node(str(rng.choice(["GlobalAveragePool", "GlobalMaxPool"])), [x],
                      s[:2] + [1] * (len(s) - 2))
    keep = int(rng.integers(0, 2))
    op = str(rng.choice(["ReduceMean", "ReduceMax"]))
    shape = s[:2] + [1] * (len(s) - 2) if keep else s[:2]
    return g.node(op, [x], shape, axes=list(range(2, len(s))), keepdims=keep)


def gelu_tanh(g, x, shape):
    """GELU's tanh form as torch.onnx writes it (x^3 as two Muls, halved last) or as tf2onnx
    writes TensorFlow's (Pow, x halved first)."""
    f32, rng = np.float32, g.rng
    torch_form = rng.random() < 0.5
    if torch_form:
        cube = g.node("Mul", [x, g.node("Mul", [x, x], shape)], shape)
    else:
        half_x = g.node("Mul", [g.const(np.array(0.5, f32)), x], shape)
        cube = g.node("Pow", [x, g.const(np.array(3.0, f32))], shape)
    v = g.node("Mul", [g.const(np.array(0.044715, f32)), cube], shape)
    u = g.node("Mul", [g.const(np.array(0.7978846, f32)), g.node("Add", [x, v], shape)], shape)
    p = g.node("Add", [g.const(np.array(1.0, f32)), g.node("Tanh", [u], shape)], shape)
    if torch_form:
        return g.node("Mul", [g.const(np.array(0.5, f32)), g.node("Mul", [x, p], shape)], shape)
    return g.node("Mul", [half_x, p], shape)


def add_activation(g, x):
    rng = g.rng
    op = str(rng.choice(ACTIVATIONS))
    if op == "GeluTanh":
        return gelu_tanh(g, x, g.tensors[x])
    if op == "Clip":
        lo, hi = [(0.0, 6.0), (0.0, None), (-1.0, 1.0)][int(rng.integers(0, 3))]
        inputs = [x, g.const(np.array(lo, np.float32), "lo")]
        if hi is not None:
            inputs.append(g.const(np.array(hi, np.float32), "hi"))
        return g.node(op, inputs, g.tensors[x])
    attrs = {"alpha": float(rng.choice([0.1, 0.2]))} if op in ("LeakyRelu", "HardSigmoid") else {}
    return g.node(op, [x], g.tensors[x], **attrs)


def broadcast_shape(rng, s):
    """A constant's shape that broadcasts against s: scalar, per channel, along W, [H, W]..."""
    c, rank = s[1], len(s)
    options = [[], [1], [c] + [1] * (rank - 2), [1, c] + [1] * (rank - 2), [s[-1]],
               [1] * (rank - 1) + [s[-1]], s[2:], [c], list(s)]
    return options[int(rng.integers(0, len(options)))]


def add_affine(g, x):
    rng, s = g.rng, g.tensors[x]
    if rng.random() < 0.3:
        c = s[1]
        return g.node("BatchNormalization", [
            x, g.weights([c]), g.weights([c]), g.weights([c], 0.2),
            g.const((rng.random(c) + 0.5).astype(np.float32), "var")], s, epsilon=1e-3)
    op = str(rng.choice(["Mul", "Add", "Sub", "Div"]))
    shape = broadcast_shape(rng, s)
    # float32 after the sign too: a 0-d array times a NumPy int is a float64 scalar, which made
    # ONNX Runtime refuse the graph (Div/Sub of float and double).
    value = ((rng.random(shape) + 0.5) * rng.choice([1, -1])).astype(np.float32)
    k = g.const(value, "aff")
    inputs = [k, x] if (op in ("Mul", "Add") and rng.random() < 0.3) else [x, k]
    try:
        out = list(np.broadcast_shapes(tuple(s), tuple(shape)))
    except ValueError:
        return None
    return g.node(op, inputs, out)


def add_binary(g, x):
    """Add or Mul of two computed tensors that broadcast (a squeeze-and-excite scale among them)."""
    rng, s = g.rng, g.tensors[x]
    op = str(rng.choice(["Add", "Mul"]))
    others = []
    for t, shape in g.tensors.items():
        if t == x:
            continue
        try:
            out = list(np.broadcast_shapes(tuple(s), tuple(shape)))
        except ValueError:
            continue
        if out == s or rng.random() < 0.2:
            others.append((t, out))
    if not others:
        return None
    y, out = others[int(rng.integers(0, len(others)))]
    inputs = [x, y] if rng.random() < 0.5 else [y, x]
    return g.node(op, inputs, out)


def add_concat(g, x):
    s = g.tensors[x]
    mates = [t for t, shape in g.tensors.items()
             if len(shape) == len(s) and shape[0] == s[0] and shape[2:] == s[2:]]
    parts = [str(t) for t in g.rng.choice(mates, size=min(len(mates), 3), replace=True)]
    if len(parts) < 2:
        return None
    return g.node("Concat", parts, [s[0], sum(g.tensors[t][1] for t in parts)] + s[2:], axis=1)


def add_head(g, x):
    """A unit-spatial tensor flattened (Flatten, Reshape or Squeeze), then Gemm or MatMul, maybe
    Softmax; or a Flatten used as a rank-2 operand of a Mul or Add (ONNX broadcasts it along W)."""
    rng, s = g.rng, g.tensors[x]
    n, c = s[0], s[1]
    how = rng.integers(0, 3)
    if len(s) == 2:
        flat = x
    elif how == 0:
        flat = g.node("Flatten", [x], [n, c])
    elif how == 1:
        flat = g.node("Reshape", [x, g.const(np.array([n, c], np.int64), "shape")], [n, c])
    else:
        flat = g.node("Squeeze", [x, g.const(np.array(list(range(2, len(s))), np.int64), "axes")],
                      [n, c])
    if rng.random() < 0.4:
        mates = [t for t, shape in g.tensors.items() if len(shape) >= 3 and shape[-1] == c]
        if mates:
            t = str(rng.choice(mates))
            out = list(np.broadcast_shapes(tuple(g.tensors[t]), (n, c)))
            return g.node(str(rng.choice(["Mul", "Add"])), [t, flat], out)
    k = int(rng.integers(1, 6))
    if rng.random() < 0.5:
        inputs = [flat, g.weights([k, c]), g.weights([k])]
        y = g.node("Gemm", inputs, [n, k], transB=1, alpha=float(rng.choice([1.0, 0.5])))
    else:
        y = g.node("MatMul", [flat, g.weights([c, k])], [n, k])
    if rng.random() < 0.5:
        y = g.node("Softmax", [y], [n, k], axis=-1)
    return y


def add_hard_sigmoid_chain(g, x):
    """Keras's hard sigmoid as tf2onnx writes it, relu6(x + 3) / 6 (Add, Clip, Mul by 1/6 or Div
    by 6; now and then an offset other than 3), maybe gating x as hard swish x * that."""
    rng, s = g.rng, g.tensors[x]
    offset = 3.0 if rng.random() < 0.8 else 2.5
    three = g.const(np.array(offset, np.float32), "three")
    a = g.node("Add", [x, three] if rng.random() < 0.5 else [three, x], s)
    r = g.node("Clip", [a, g.const(np.array(0.0, np.float32), "lo"),
                        g.const(np.array(6.0, np.float32), "hi")], s)
    if rng.random() < 0.5:
        h = g.node("Div", [r, g.const(np.array(6.0, np.float32), "six")], s)
    else:
        h = g.node("Mul", [r, g.const(np.array(1 / 6, np.float32), "sixth")], s)
    return g.node("Mul", [x, h], s) if rng.random() < 0.5 else h


def add_flatten_dense(g, x):
    """A feature map flattened as Keras's Flatten through tf2onnx (a channels-last Transpose, then
    Reshape to [N, H*W*C]) or in its own order, then MatMul or Gemm."""
    rng, s = g.rng, g.tensors[x]
    n, features = s[0], int(np.prod(s[1:]))
    src = x
    if rng.random() < 0.7:
        perm = [0] + list(range(2, len(s))) + [1]
        src = g.node("Transpose", [x], [s[i] for i in perm], perm=perm)
    shape = np.array([n, -1 if rng.random() < 0.5 else features], np.int64)
    flat = g.node("Reshape", [src, g.const(shape, "shape")], [n, features])
    k = int(rng.integers(1, 6))
    if rng.random() < 0.5:
        return g.node("MatMul", [flat, g.weights([features, k])], [n, k])
    return g.node("Gemm", [flat, g.weights([k, features]), g.weights([k])], [n, k], transB=1)


RESIZE_COORDINATES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                      "tf_half_pixel_for_nn", "tf_crop_and_resize"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def add_resize(g, x):
    """A Resize of the spatial axes: nearest or linear, any coordinate mode, by scales or by sizes
    (constant, or computed from a tensor's Shape as torch's F.interpolate(size=...) writes it);
    tf_crop_and_resize with a region inside or past the edges and an extrapolation value."""
    rng = g.rng
    s = g.tensors[x]
    spatial = s[2:]
    # ONNX Runtime's linear takes 2 or 3 resized axes (rank 4 or 5).
    mode = "linear" if rng.random() < 0.5 and len(s) >= 4 else "nearest"
    coords = str(rng.choice(RESIZE_COORDINATES))
    if mode == "linear" and coords == "tf_half_pixel_for_nn":
        coords = "half_pixel"
    attrs = {"mode": mode, "coordinate_transformation_mode": coords}
    if mode == "nearest":
        attrs["nearest_mode"] = str(rng.choice(NEAREST_MODES))
    roi = ""
    if coords == "tf_crop_and_resize":
        starts = rng.uniform(-0.4, 0.7, len(spatial)).round(2)
        ends = (starts + rng.uniform(-0.3, 1.3, len(spatial))).round(2)
        roi = g.const(np.array([0, 0] + list(starts) + [1, 1] + list(ends), np.float32), "roi")
        attrs["extrapolation_value"] = float(rng.choice([0.0, -1.5, 2.25]))
    kind = rng.random()
    if kind < 0.4:
        # 1.1 of a small axis keeps its size (ONNX Runtime then copies the input); 0.3 and 2.4
        # put nearest coordinates an ulp off a half (ties in real numbers).
        scales = [float(rng.choice([0.3, 0.5, 0.75, 1.1, 1.5, 2.0, 2.4, 2.5, 3.0]))
                  for _ in spatial]
        # The size as ONNX Runtime computes it: the product in float32.
        out = [max(int(np.float32(f) * np.float32(n)), 0) for n, f in zip(spatial, scales)]
        if min(out) < 1:
            return None
        inputs = [x, roi, g.const(np.array([1.0, 1.0] + scales, np.float32), "scales")]
    else:
        out = [int(rng.integers(1, 2 * n + 3)) for n in spatial]
        sizes = g.const(np.array(s[:2] + out, np.int64), "sizes")
        if kind > 0.75:  # the batch and channels from the tensor's own Shape
            shape = g.node("Shape", [x], None)
            nc = g.node("Slice", [shape, g.const(np.array([0], np.int64)),
                                  g.const(np.array([2], np.int64))], None)
            hw = g.node("Slice", [sizes, g.const(np.array([2], np.int64)),
                                  g.const(np.array([len(s)], np.int64))], None)
            sizes = g.node("Concat", [nc, hw], None, axis=0)
        inputs = [x, roi, "", sizes]
    return g.node("Resize", inputs, s[:2] + out, **attrs)


def add_channel_slice(g, x):
    """A Slice of the channels (any start, end and step, signs included; an extra whole spatial
    axis at times), a Split of them, or a channel shuffle: Reshape to [N, g, C/g, ...], Transpose,
    Reshape back."""
    rng, s = g.rng, g.tensors[x]
    c = s[1]
    groups = [k for k in range(2, c + 1) if c % k == 0]
    if groups and rng.random() < 0.35:
        k = int(rng.choice(groups))
        split = g.node("Reshape", [x, g.const(np.array([s[0], k, c // k] + s[2:], np.int64))],
                       None)
        perm = [0, 2, 1] + list(range(3, len(s) + 1))
        swapped = g.node("Transpose", [split], None, perm=perm)
        return g.node("Reshape", [swapped, g.const(np.array([s[0], -1] + s[2:], np.int64))], s)
    if c >= 2 and rng.random() < 0.3:  # a Split of the channels, sizes given or equal parts
        parts = int(rng.integers(2, min(c, 4) + 1))
        cuts = sorted(rng.choice(np.arange(1, c), size=parts - 1, replace=False).tolist())
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [c])]
        inputs = [x, g.const(np.array(sizes, np.int64))]
        if c % parts == 0 and rng.random() < 0.5:
            sizes, inputs = [c // parts] * parts, [x]
        outs = [g.name("spl") for _ in sizes]
        g.nodes.append(helper.make_node("Split", inputs, outs, name=outs[0] + "_node", axis=1))
        for o, size in zip(outs, sizes):
            g.tensors[o] = [s[0], size] + s[2:]
        return outs[int(rng.integers(0, len(outs)))]
    step = int(rng.choice([1, 1, 2, 3, -1, -2]))
    start = int(rng.integers(-c - 2, c + 2))
    end = int(rng.choice([int(rng.integers(-c - 2, c + 2)), 2**62, -2**62]))
    taken = len(range(c)[slice(start, end, step)])
    if taken == 0:
        return None
    starts, ends, axes, steps = [start], [end], [1], [step]
    if rng.random() < 0.3:
        starts, ends, axes, steps = starts + [0], ends + [2**62], axes + [-1], steps + [1]
    return g.node("Slice", [x] + [g.const(np.array(v, np.int64)) for v in (starts, ends, axes,
                                                                          steps)],
                  [s[0], taken] + s[2:])


def keras_layer_norm(g, x, axis, c, shape):
    """Keras's LayerNormalization over `axis` as tf2onnx writes it: x * s + (-mean) * s (+ beta),
    s = gamma / sqrt(var + eps) (gamma and beta each optional, of `c` values along `axis`), the
    mean sometimes through a Reshape to its own shape."""
    rng, f32 = g.rng, np.float32
    mean = g.node("ReduceMean", [x], None, axes=[axis])
    neg = g.node("Neg", [mean], None)
    m = mean
    if shape is not None and rng.random() < 0.5:
        mean_shape = list(shape)
        mean_shape[axis] = 1
        m = g.node("Reshape", [mean, g.const(np.array(mean_shape, np.int64), "shape")], None)
    d = g.node("Sub", [x, m], None)
    var = g.node("ReduceMean", [g.node("Mul", [d, d], None)], None, axes=[axis])
    eps = g.const(np.array(float(rng.choice([1e-6, 1e-3])), f32))
    s = g.node("Reciprocal", [g.node("Sqrt", [g.node("Add", [var, eps], None)], None)], None)
    along = [1] * (len(shape) if shape is not None else 1)
    along[axis] = c
    if rng.random() < 0.8:
        gamma = g.const((rng.random(along) + 0.5).astype(f32))
        s = g.node("Mul", [s, gamma] if rng.random() < 0.5 else [gamma, s], None)
    shift = g.node("Mul", [neg, s], None)
    if rng.random() < 0.7:
        shift = g.node("Add", [shift, g.const((rng.random(along) - 0.5).astype(f32))], None)
    scaled = g.node("Mul", [x, s] if rng.random() < 0.5 else [s, x], None)
    return g.node("Add", [scaled, shift] if rng.random() < 0.5 else [shift, scaled], shape)


def add_keras_layer_norm(g, x):
    """Keras's LayerNormalization over the channels of a channels-first tensor (as tf2onnx leaves
    it after moving the Transposes: ConvNeXt's). Over one channel the variance is 0 and the file's
    x * s - mean * s cancels terms of |x| / sqrt(eps) (ONNX Runtime's own value then is off by
    their rounding, up to 1e-4 of beta): two channels or more, as a model normalizes."""
    s = g.tensors[x]
    if s[1] < 2:
        return None
    return keras_layer_norm(g, x, 1, s[1], s)


def add_channels_last_stretch(g, x):
    """torch code on channels last, as ConvNeXt's block, or a Keras graph whose Transposes tf2onnx
    failed to move: Transpose to channels last, then some of LayerNorm (ReduceMean, Sub, Pow,
    ReduceMean, Add, Sqrt, Div, its scale and shift), a Linear (MatMul, Add of a bias), GELU as Erf
    (Div by sqrt 2 or Mul by 1/sqrt 2), Relu, a per-channel or scalar Mul, x * sigmoid(x) or
    another op of two of its tensors, a squeeze-and-excite style Mul by ReduceMean/ReduceMax over
    the spatial axes, a join with another conv's output moved channels last, an op padfold leaves
    to the caller (Exp, a lone Erf), and Transpose back."""
    rng, s = g.rng, g.tensors[x]
    r, c = len(s), s[1]
    last = [0] + list(range(2, r)) + [1]
    t = g.node("Transpose", [x], None, perm=last)
    f32 = np.float32
    for _ in range(int(rng.integers(1, 5))):
        kind = int(rng.integers(0, 9))
        if kind == 0 and c >= 2 and rng.random() < 0.3:  # Keras's LayerNorm over the last axis
            t = keras_layer_norm(g, t, r - 1, c, [s[0]] + s[2:] + [c])
        elif kind == 0:  # LayerNorm over the last axis
            axes = [-1] if rng.random() < 0.5 else [r - 1]
            m = g.node("ReduceMean", [t], None, axes=axes)
            d = g.node("Sub", [t, m], None)
            p = g.node("Pow", [d, g.const(np.array(2.0, f32))], None)
            v = g.node("ReduceMean", [p], None, axes=axes)
            e = g.node("Add", [v, g.const(np.array(float(rng.choice([1e-6, 1e-5])), f32))], None)
            t = g.node("Div", [d, g.node("Sqrt", [e], None)], None)
            if rng.random() < 0.7:
                t = g.node("Mul", [t, g.const((rng.random(c) + 0.5).astype(f32))], None)
                t = g.node("Add", [t, g.const((rng.random(c) - 0.5).astype(f32))], None)
        elif kind == 1:  # Linear; as Keras's Dense writes it, tf.tensordot (Reshape, MatMul, back)
            k = int(rng.integers(1, 9))
            if rng.random() < 0.3:
                rows = g.node("Reshape", [t, g.const(np.array([-1, c], np.int64), "shape")], None)
                back = np.array([s[0]] + s[2:] + [k], np.int64)
                t = g.node("Reshape", [g.node("MatMul", [rows, g.weights([c, k])], None),
                                       g.const(back, "shape")], None)
            else:
                t = g.node("MatMul", [t, g.weights([c, k])], None)
            if rng.random() < 0.7:
                b = g.const((rng.random(k) - 0.5).astype(f32))
                t = g.node("Add", [b, t] if rng.random() < 0.5 else [t, b], None)
            c = k
        elif kind == 2 and rng.random() < 0.3:  # GELU's tanh form
            t = gelu_tanh(g, t, None)
        elif kind == 2:  # GELU as Erf
            if rng.random() < 0.5:
                a = g.node("Div", [t, g.const(np.array(np.sqrt(2), f32))], None)
            else:
                a = g.node("Mul", [t, g.const(np.array(np.sqrt(0.5), f32))], None)
            e = g.node("Add", [g.node("Erf", [a], None), g.const(np.array(1.0, f32))], None)
            t = g.node("Mul", [g.node("Mul", [t, e], None), g.const(np.array(0.5, f32))], None)
        elif kind == 3:
            t = g.node("Relu", [t], None)
        elif kind == 5:  # two tensors of the stretch
            op = str(rng.choice(["Mul", "Mul", "Add", "Sub", "Div"]))
            other = g.node(str(rng.choice(["Sigmoid", "Relu", "Tanh"])), [t], None)
            if op == "Div":
                other = g.node("Add", [g.node("Sigmoid", [other], None),
                                       g.const(np.array(0.5, f32))], None)
            t = g.node(op, [t, other] if rng.random() < 0.5 else [other, t], None)
        elif kind == 6:  # a squeeze-and-excite style scale from the spatial axes
            op = "ReduceMean" if rng.random() < 0.7 else "ReduceMax"
            pooled = g.node(op, [t], None, axes=list(range(1, r - 1)), keepdims=1)
            gate = g.node("Sigmoid", [pooled], None)
            t = g.node("Mul", [gate, t] if rng.random() < 0.5 else [t, gate], None)
        elif kind == 7:  # joined with another conv's output, moved channels last
            side = g.node("Conv", [x, g.weights([c, s[1]] + [1] * (r - 2))], None)
            side_last = g.node("Transpose", [side], None, perm=last)
            t = g.node("Add" if rng.random() < 0.5 else "Mul", [t, side_last], None)
        elif kind == 8:  # an op padfold leaves to the caller: the stretch stays as the file has it
            if rng.random() < 0.5:
                t = g.node("Exp", [g.node("Tanh", [t], None)], None)  # bounded
            else:
                t = g.node("Erf", [t], None)
        else:
            scale = (rng.random(c) + 0.5).astype(f32) if rng.random() < 0.5 else f32(1.5)
            t = g.node("Mul", [t, g.const(scale)], None)
    first = [0, r - 1] + list(range(1, r - 1))
    return g.node("Transpose", [t], [s[0], c] + s[2:], perm=first)


def float_graph(rng):
    g = Graph(rng)
    rank = 4 if rng.random() < 0.85 else 3
    shape = [1, int(rng.integers(1, 6))] + [int(rng.integers(3, 10)) for _ in range(rank - 2)]
    g.tensors["x"] = shape
    steps = [add_conv] * 4 + [add_pool] * 2 + [add_conv_transpose, add_global, add_activation,
                                               add_activation, add_affine, add_affine, add_binary,
                                               add_binary, add_concat, add_head,
                                               add_hard_sigmoid_chain, add_flatten_dense,
                                               add_resize, add_channel_slice,
                                               add_channels_last_stretch, add_keras_layer_norm]
    last = "x"
    for _ in range(int(rng.integers(2, 8))):
        spatial = g.pick(unit_spatial=False) if rng.random() < 0.7 else None
        x = spatial or last
        step = steps[int(rng.integers(0, len(steps)))]
        if step in (add_conv, add_pool) and rng.random() < 0.4 and len(g.tensors[x]) >= 3:
            x = add_pad(g, x)
            if rng.random() < 0.4:  # a second reader: NASNet pads once for two convs
                (add_conv if rng.random() < 0.5 else add_pool)(g, x)
        if step in (add_conv, add_pool) and rng.random() < 0.25 and len(g.tensors[x]) >= 3:
            x = add_crop(g, x)
        if step is add_head and not all(d == 1 for d in g.tensors[x][2:]):
            x = add_global(g, x)
        if len(g.tensors[x]) < 3 and step is not add_activation:
            continue
        y = step(g, x)
        if y is not None:
            last = y
    if rng.random() < 0.3:
        last = g.node(str(rng.choice(["Identity", "Dropout"])), [last], g.tensors[last])
    outputs = [last] + [t for t in g.tensors if t not in ("x", last) and rng.random() < 0.15]
    return g, ["x"], shape, outputs


def quantized_graph(rng):
    """x -> QuantizeLinear -> DequantizeLinear -> [Pad, float or requantized] -> Conv (int8
    weights, int32 bias) -> [Relu] -> Q -> DQ -> then a pool, an add of two such groups, a
    classifier head (global pool, Flatten, int8 Gemm) or an elementwise tail (SiLU, sigmoid,
    squeeze-and-excite, a product of two groups), Q -> DQ at the end."""
    g = Graph(rng)
    u8 = rng.random() < 0.5
    qtype, zero_range = (np.uint8, (0, 255)) if u8 else (np.int8, (-128, 127))
    g.output_type = TensorProto.UINT8 if u8 else TensorProto.INT8

    def qparams():
        scale = g.const(np.array(float(rng.choice([0.02, 0.05, 0.013])), np.float32), "qs")
        zp = g.const(np.array(int(rng.integers(zero_range[0] // 2, zero_range[1] // 2 + 1)),
                              qtype), "qz")
        return scale, zp

    quantized_of = {}  # a DequantizeLinear's output -> the quantized tensor it reads

    def qdq(t, params):
        q = g.node("QuantizeLinear", [t, *params], g.tensors.get(t))  # None: a constant
        dq = g.node("DequantizeLinear", [q, *params], g.tensors.get(t))
        quantized_of[dq] = q
        return dq

    shape = [1, int(rng.integers(1, 5)), int(rng.integers(4, 9)), int(rng.integers(4, 9))]
    g.tensors["x"] = shape
    x_params = qparams()
    x = qdq("x", x_params)

    def scale_of(params):
        return float(numpy_helper.to_array(next(i for i in g.inits if i.name == params[0])))

    def requantized_pad(t, params):
        """DQ -> Pad -> Q -> DQ, as ONNX Runtime's quantizer writes a Pad (its constant, if any,
        a float Constant it quantizes too: Q -> DQ of it, on the data's grid or off it)."""
        s = g.tensors[t]
        pads = [0, 0, int(rng.integers(0, 3)), int(rng.integers(0, 3)),
                0, 0, int(rng.integers(0, 3)), int(rng.integers(0, 3))]
        mode = str(rng.choice(["constant", "constant", "reflect", "edge"]))
        inputs = [t, g.const(np.array(pads, np.int64), "pads")]
        if mode == "constant" and rng.random() < 0.7:
            grid = np.float32(int(rng.integers(-3, 4))) * np.float32(scale_of(params))
            value = grid if rng.random() < 0.5 else np.float32(rng.uniform(-0.3, 0.3))
            inputs.append(qdq(g.const(np.array(value, np.float32), "pv"), params))
        shape = [s[0], s[1], s[2] + pads[2] + pads[6], s[3] + pads[3] + pads[7]]
        return qdq(g.node("Pad", inputs, shape, mode=mode), params)

    def classifier_head(t, params):
        """GlobalAveragePool -> Q -> DQ -> Flatten -> Gemm (int8 B per output channel, transB 1,
        int32 C) -> Q -> DQ: the head quantize_static writes for a torch classifier."""
        s = g.tensors[t]
        c = s[1]
        pool_params = qparams()
        p = qdq(g.node("GlobalAveragePool", [t], [s[0], c, 1, 1]), pool_params)
        flat = g.node("Flatten", [p], [s[0], c])
        k = int(rng.integers(1, 7))
        w_scale = (rng.random(k) * 0.02 + 0.005).astype(np.float32)
        w = g.const(rng.integers(-127, 128, [k, c]).astype(np.int8), "wq")
        wd = g.node("DequantizeLinear",
                    [w, g.const(w_scale, "ws"), g.const(np.zeros(k, np.int8), "wz")], None, axis=0)
        b = g.const(rng.integers(-500, 500, [k]).astype(np.int32), "bq")
        bd = g.node("DequantizeLinear",
                    [b, g.const((w_scale * np.float32(scale_of(pool_params))).astype(np.float32),
                                "bs"), g.const(np.zeros(k, np.int32), "bz")], None, axis=0)
        y = g.node("Gemm", [flat, wd, bd], [s[0], k], transB=1)
        return qdq(y, qparams())

    def conv_group(t, in_params):
        s = g.tensors[t]
        c = s[1]
        if rng.random() < 0.3:
            t = requantized_pad(t, in_params)
            s = g.tensors[t]
        elif rng.random() < 0.4:
            mode = str(rng.choice(["constant", "reflect", "edge"]))
            pads = [0, 0, int(rng.integers(0, 2)), int(rng.integers(0, 2)),
                    0, 0, int(rng.integers(0, 2)), int(rng.integers(0, 2))]
            inputs = [t, g.const(np.array(pads, np.int64), "pads")]
            if mode == "constant":
                scale = float(numpy_helper.to_array(next(i for i in g.inits
                                                         if i.name == in_params[0])))
                steps = int(rng.integers(-3, 4))
                on_grid = np.float32(steps) * np.float32(scale)
                value = on_grid if rng.random() < 0.6 else np.float32(0.37)
                inputs.append(g.const(np.array(value, np.float32), "pv"))
            t = g.node("Pad", inputs, [s[0], c, s[2] + pads[2] + pads[6], s[3] + pads[3] + pads[7]],
                       mode=mode)
            s = g.tensors[t]
        m = int(rng.integers(1, 5))
        k = int(rng.integers(1, 4))
        stride = int(rng.integers(1, 3))
        attrs = padding_attrs(rng, s[2:], [k, k], [stride, stride], [1, 1])
        out = spatial_out(s, [k, k], [stride, stride], [1, 1], attrs)
        if min(out) < 1:
            return None
        w_scale = (rng.random(m) * 0.02 + 0.005).astype(np.float32)
        w = g.const(rng.integers(-127, 128, [m, c, k, k]).astype(np.int8), "wq")
        wd = g.node("DequantizeLinear",
                    [w, g.const(w_scale, "ws"), g.const(np.zeros(m, np.int8), "wz")], None, axis=0)
        in_scale = float(numpy_helper.to_array(next(i for i in g.inits if i.name == in_params[0])))
        b = g.const(rng.integers(-500, 500, [m]).astype(np.int32), "bq")
        bd = g.node("DequantizeLinear", [b, g.const((w_scale * np.float32(in_scale))
                                                    .astype(np.float32), "bs"),
                                         g.const(np.zeros(m, np.int32), "bz")], None, axis=0)
        y = g.node("Conv", [t, wd, bd], [s[0], m] + out, kernel_shape=[k, k],
                   strides=[stride, stride], **attrs)
        if rng.random() < 0.5:
            y = g.node("Relu", [y], g.tensors[y])
        params = qparams()
        return qdq(y, params), params

    def gate_params():
        if rng.random() < 0.5:  # what quantizers give a sigmoid: 1/256 from the dtype's minimum
            return (g.const(np.array(1 / 256, np.float32), "gs"),
                    g.const(np.array(zero_range[0], qtype), "gz"))
        return qparams()

    def mul(a, b):  # a: the full tensor; the inputs in either order
        shape = g.tensors[a]
        if rng.random() < 0.5:
            a, b = b, a
        return qdq(g.node("Mul", [a, b], shape), qparams())

    def elementwise(t, params):
        """SiLU, a sigmoid alone, squeeze-and-excite's gate, or a product of two conv groups."""
        kind = int(rng.integers(0, 4))
        s = g.tensors[t]
        if kind == 0:  # SiLU: Sigmoid -> Q -> DQ -> Mul by its own input, either order
            return mul(t, qdq(g.node("Sigmoid", [t], s), gate_params()))
        if kind == 1:
            return qdq(g.node("Sigmoid", [t], s), gate_params())
        if kind == 2:  # GlobalAveragePool -> Q -> DQ -> Sigmoid -> Q -> DQ -> Mul by the map
            p = qdq(g.node("GlobalAveragePool", [t], [s[0], s[1], 1, 1]), qparams())
            return mul(t, qdq(g.node("Sigmoid", [p], [s[0], s[1], 1, 1]), gate_params()))
        second = conv_group(t, params)
        if second is None or g.tensors[second[0]] != s:
            return t
        return mul(t, second[0])

    first = conv_group(x, x_params)
    if first is None:
        return None
    y, params = first
    choice = rng.integers(0, 5)
    if choice == 0:
        s = g.tensors[y]
        k = int(rng.integers(1, 3))
        op = str(rng.choice(["MaxPool", "AveragePool"]))
        attrs = {"kernel_shape": [k, k], "strides": [1, 1]}
        p = g.node(op, [y], s, **attrs) if k == 1 else g.node(
            op, [y], s, auto_pad="SAME_UPPER", **attrs)
        y = qdq(p, params if op == "MaxPool" else qparams())
    elif choice == 1:
        second = conv_group(y, params)
        if second is not None:
            z, _ = second
            if g.tensors[z][1:] == g.tensors[y][1:]:
                y = qdq(g.node("Add", [y, z], g.tensors[y]), qparams())
            else:
                y = z
    elif choice == 2:
        y = classifier_head(y, params)
    elif choice == 3:
        y = elementwise(y, params)
    return g, ["x"], shape, [quantized_of[y]]  # the integers: compared step for step


def build(rng):
    made = quantized_graph(rng) if rng.random() < 0.3 else float_graph(rng)
    if made is None:
        return None
    g, inputs, shape, outputs = made
    graph = helper.make_graph(
        g.nodes, "diff", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(o, g.output_type, None) for o in outputs], g.inits)
    # HardSwish came with opset 14.
    opset = 14 if any(n.op_type == "HardSwish" for n in g.nodes) else OPSET
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def ort_values(model, x, names):
    """ONNX Runtime's value of each tensor in `names` (made graph outputs), or None if ORT refuses
    the model (the generator made an invalid graph: not a finding)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(helper.make_empty_tensor_value_info(n))
    values = {}
    for level in (onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL,
                  onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL):
        so = onnxruntime.SessionOptions()
        so.graph_optimization_level = level
        so.intra_op_num_threads = 1
        try:
            sess = onnxruntime.InferenceSession(m.SerializeToString(), so)
            got = sess.run(names, {"x": x})
        except Exception:  # noqa: BLE001 - any refusal means an invalid generated graph
            return None
        for n, v in zip(names, got):
            values.setdefault(n, []).append(v)
    return values


def run(cmd, timeout=600):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)


def compare(name, got, refs, quantized):
    """'' when `got` equals one of ONNX Runtime's values within the tolerance, else what differs."""
    why = ""
    for ref in refs:
        if got.shape != ref.shape:
            return f"{name}: shape {got.shape}, ONNX Runtime {ref.shape}"
        if quantized:
            diff = int(np.abs(got.astype(np.int64) - ref.astype(np.int64)).max(initial=0))
            if diff <= 1:
                return ""
            why = f"{name}: max |diff| {diff} steps"
        else:
            # Where ONNX Runtime's value is not finite (a division by 0), the same value.
            finite = np.isfinite(ref)
            same_rest = np.array_equal(got[~finite], ref[~finite], equal_nan=True)
            scale = max(1.0, float(np.abs(ref[finite]).max(initial=0)))
            diff = float(np.abs(got[finite].astype(np.float64) - ref[finite]).max(initial=0))
            if diff <= 1e-4 * scale and same_rest and not np.isnan(got[finite]).any():
                return ""
            why = (f"{name}: max |diff| {diff:.3g} (largest |value| {scale:.3g})" if same_rest
                   else f"{name}: {int((~finite).sum())} values ONNX Runtime gives as inf or nan "
                        "differ")
    return why


def channels_last(buffer):
    """Whether a manifest buffer's layout puts the channels last (NHWC, NWC, NDHWC)."""
    layout = buffer.get("layout", "")
    return len(layout) >= 3 and layout.startswith("N") and layout.endswith("C")


def as_buffer(value, shape, channels_last):
    """ONNX Runtime's value of a tensor as a padfold buffer of `shape` holds it: channels moved
    last for a channels-last layer, unit dims dropped or added ([N, K] as [N, K, 1, 1])."""
    if channels_last and value.ndim == len(shape) and value.ndim >= 3:
        value = np.moveaxis(value, 1, -1)
    if [d for d in value.shape if d != 1] != [d for d in shape if d != 1]:
        return None
    return np.ascontiguousarray(value.reshape(shape))


def check(padfold, work, model, rng):
    """None (agrees), 'invalid' (ORT refuses the graph), 'refused' (padfold's clear refusal), or
    the finding's text. Every layer is run on its own on ONNX Runtime's values of its inputs and
    compared with ONNX Runtime's value of its output; a model with no input left to the caller
    is also run whole, its outputs compared in the shape ONNX gives them."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    onnx.save(model, work / "model.onnx")
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = rng.standard_normal(shape).astype(np.float32)
    np.save(work / "x.npy", x)
    if ort_values(model, x, [model.graph.output[0].name]) is None:
        return "invalid"
    r = run([padfold, "import", work / "model.onnx", "-o", work / "imported", "--emit-onnx",
             work / "imported.onnx"])
    if r.returncode != 0:
        text = r.stdout + r.stderr
        if r.returncode < 0 or r.returncode > 1 or "internal error" in text:
            return f"import exited {r.returncode}: {text[-2000:]}"
        return "refused"
    report = json.loads((work / "imported/import-report.json").read_text())
    spec = json.loads((work / "imported/model.json").read_text())
    tensor_of = {i["name"]: i["onnx_tensor"] for i in report["inputs"]}
    tensor_of.update({layer["name"]: layer["output_tensor"] for layer in report["layers"]})
    # Layers of a channels-last stretch computed channels first: ONNX's tensor has C last.
    moved = {layer["name"] for layer in report["layers"]
             if layer.get("output_tensor_layout") == "channels_last"}
    outputs = {o["name"]: o["onnx_tensor"] for o in report["outputs"]}  # what the user reads
    wanted = (set(tensor_of.values()) | set(outputs.values())) - {"x"}
    # Tensors padfold's rewrites made (Keras's LayerNorm normalized before its scale): ONNX
    # Runtime's values on the model padfold imported (--emit-onnx), which computes them.
    in_file = {t for n in model.graph.node for t in n.output}
    made = wanted - in_file
    refs = ort_values(model, x, sorted(wanted - made))
    if refs is None:
        return "invalid"
    if made:
        made_refs = ort_values(onnx.load(work / "imported.onnx"), x, sorted(made))
        if made_refs is None:
            return f"ONNX Runtime refuses the imported model (--emit-onnx), which has {sorted(made)}"
        refs.update(made_refs)
    refs["x"] = [x]
    for name in moved:
        if tensor_of[name] not in made:  # the imported model has them channels first already
            refs[tensor_of[name]] = [np.moveaxis(v, -1, 1) for v in refs[tensor_of[name]]]
    r = run([padfold, "compile", work / "imported/model.json", "-o", work / "bundle", "-j", "2",
             "--target", "host"])
    if r.returncode != 0:
        return f"compile of the imported spec exited {r.returncode}: {(r.stdout + r.stderr)[-2000:]}"
    manifest = json.loads((work / "bundle/manifest.json").read_text())
    kernels = {k["layer"]: k for k in manifest["kernels"] if "->" not in k["op"]}
    for layer in spec["layers"]:
        kernel = kernels.get(layer["name"])
        if kernel is None:  # inside a fused block: checked with the model's outputs
            continue
        buffers = {b["name"]: b for b in kernel["buffers"]}
        ins = layer["input"] if isinstance(layer["input"], list) else [layer["input"]]
        ins_buffers = [b for b in kernel["buffers"] if b["name"].startswith("input")]
        cmd = [padfold, "run", work / "bundle", "--layer", layer["name"]]
        for k, (name, buf) in enumerate(zip(ins, ins_buffers)):
            # Each buffer in its own layout: a transpose layer's input and output differ.
            value = as_buffer(refs[tensor_of[name]][0], buf["shape"], channels_last(buf))
            if value is None:
                return f"layer '{layer['name']}' input '{name}': {buf['shape']} for ONNX's " \
                       f"{refs[tensor_of[name]][0].shape}"
            np.save(work / f"lin_{k}.npy", value)
            cmd += ["--input", work / f"lin_{k}.npy"]
        cmd += ["--output", work / "lout.npy"]
        r = run(cmd)
        if r.returncode != 0:
            return f"run --layer {layer['name']} exited {r.returncode}: {(r.stdout + r.stderr)[-2000:]}"
        got = np.load(work / "lout.npy")
        wanted = [as_buffer(v, buffers["output"]["shape"], channels_last(buffers["output"]))
                  for v in refs[tensor_of[layer["name"]]]]
        if any(w is None for w in wanted):
            return f"layer '{layer['name']}': output {got.shape} for ONNX's " \
                   f"{refs[tensor_of[layer['name']]][0].shape}"
        why = compare(f"layer '{layer['name']}' (ONNX tensor '{tensor_of[layer['name']]}')", got,
                      wanted, got.dtype != np.float32)
        if why:
            return why
    if any(i.get("produced_by") for i in report["inputs"]):
        return None
    cmd = [padfold, "run", work / "bundle", "--model", "--partial", "--input",
           f"{report['inputs'][0]['name']}={work / 'x.npy'}"]
    for name in outputs:
        cmd += ["--output", f"{name}={work / f'out_{name}.npy'}"]
    r = run(cmd)
    if r.returncode != 0:
        return f"run --model exited {r.returncode}: {(r.stdout + r.stderr)[-2000:]}"
    for name, tensor in outputs.items():
        got = np.load(work / f"out_{name}.npy")
        why = compare(f"model output '{name}' (ONNX tensor '{tensor}')", got, refs[tensor],
                      got.dtype != np.float32)
        if why:
            return why
    return None


def main():
    onnxruntime.set_default_logger_severity(4)  # its refusals of invalid graphs are counted
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("padfold")
    ap.add_argument("work", type=pathlib.Path)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--graphs", type=int, default=0, help="stop after this many (0: no limit)")
    ap.add_argument("--replay", type=pathlib.Path,
                    help="check this saved model (a finding's model.onnx) instead of drawing")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    if a.replay:
        result = check(a.padfold, a.work / "replay", onnx.load(a.replay), rng)
        print(f"{a.replay}: {result or 'agrees'}")
        return 0 if result in (None, "refused") else 1
    a.work.mkdir(parents=True, exist_ok=True)
    counts = {"agree": 0, "invalid": 0, "refused": 0, "finding": 0}
    start, k, relaid = time.monotonic(), 0, 0  # relaid: agreeing graphs with an input_layout
    while time.monotonic() - start < a.seconds and (a.graphs == 0 or k < a.graphs):
        k += 1
        model = build(rng)
        if model is None:
            continue
        case = a.work / "case"
        try:
            result = check(a.padfold, case, model, rng)
        except subprocess.TimeoutExpired as e:
            result = f"timed out: {e.cmd}"
        if result in ("invalid", "refused"):
            counts[result] += 1
        elif result is None:
            counts["agree"] += 1
            spec = json.loads((case / "imported/model.json").read_text())
            relaid += any("input_layout" in layer for layer in spec["layers"])
        else:
            counts["finding"] += 1
            kept = a.work / "findings" / f"{a.seed}-{k}"
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(case, kept)
            (kept / "finding.txt").write_text(result + "\n")
            print(f"FINDING {kept}: {result}", flush=True)
    print(f"diff_onnx_ort seed {a.seed}: {k} graphs in {time.monotonic() - start:.0f} s: "
          + ", ".join(f"{v} {n}" for n, v in counts.items())
          + f" ({relaid} of those that agree read an input in its own layout by convs or pools)")
    return 1 if counts["finding"] else 0


if __name__ == "__main__":
    sys.exit(main())
