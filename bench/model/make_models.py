#!/usr/bin/env python3
"""Writes the ONNX models of the static-memory benchmark (bench/model/README section in
bench/README.md): examples/residual.json and an inverted-residual stem as ONNX graphs (NCHW,
float32, random weights, fixed seed), which `padfold import` turns into specs with weight files
and ONNX Runtime runs as they are. Usage: make_models.py OUT_DIR"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)


class Graph:
    def __init__(self):
        self.nodes, self.inits = [], []

    def weight(self, name, shape):
        fan_in = int(np.prod(shape[1:]))
        w = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        self.inits.append(numpy_helper.from_array(w, name))
        return name

    def conv(self, x, name, cin, cout, k, stride=1, pads=None, auto_pad=None, group=1, act=None):
        w = self.weight(name + "_w", [cout, cin // group, k, k])
        b = self.weight(name + "_b", [cout])
        attrs = {"kernel_shape": [k, k], "strides": [stride, stride], "group": group}
        if auto_pad:
            attrs["auto_pad"] = auto_pad
        else:
            attrs["pads"] = pads or [0, 0, 0, 0]
        out = name if act is None else name + "_pre"
        self.nodes.append(helper.make_node("Conv", [x, w, b], [out], name=name, **attrs))
        if act == "relu":
            self.nodes.append(helper.make_node("Relu", [out], [name], name=name + "_relu"))
        elif act == "relu6":
            lo, hi = name + "_lo", name + "_hi"
            self.inits += [numpy_helper.from_array(np.array(0, np.float32), lo),
                           numpy_helper.from_array(np.array(6, np.float32), hi)]
            self.nodes.append(helper.make_node("Clip", [out, lo, hi], [name], name=name + "_clip"))
        return name

    def node(self, op, inputs, name, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def save(self, path, model, x_shape, y, y_shape):
        g = helper.make_graph(
            self.nodes, model, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(y, TensorProto.FLOAT, y_shape)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, path)


def residual(out):
    """examples/residual.json in NCHW: expand, depthwise, project, add, then down | pool, concat."""
    g = Graph()
    e = g.conv("x", "expand", 16, 64, 1, act="relu6")
    d = g.conv(e, "dw", 64, 64, 3, pads=[1, 1, 1, 1], group=64, act="relu6")
    p = g.conv(d, "project", 64, 16, 1)
    blk = g.node("Add", [p, "x"], "block")
    down = g.conv(blk, "down", 16, 16, 4, stride=2, auto_pad="SAME_UPPER", act="relu")
    pool = g.node("MaxPool", [blk], "pool", kernel_shape=[3, 3], strides=[2, 2],
                  auto_pad="SAME_UPPER")
    g.node("Concat", [down, pool], "joined", axis=1)
    g.save(out + "/residual.onnx", "residual", [1, 16, 14, 14], "joined", [1, 32, 7, 7])


def ir_stem(out):
    """ResNet-50's stem (7x7/2 conv, 3x3/2 max pool) then the b2a inverted residual of
    examples/inverted_residual_blocks.json (1x1 expand to 96, 3x3/2 depthwise, 1x1 to 24)."""
    g = Graph()
    s = g.conv("x", "stem_conv", 3, 64, 7, stride=2, pads=[3, 3, 3, 3], act="relu")
    pool = g.node("MaxPool", [s], "stem_pool", kernel_shape=[3, 3], strides=[2, 2],
                  pads=[1, 1, 1, 1])
    e = g.conv(pool, "b2a_expand", 64, 96, 1, act="relu6")
    d = g.conv(e, "b2a_dw", 96, 96, 3, stride=2, auto_pad="SAME_UPPER", group=96, act="relu6")
    g.conv(d, "b2a_project", 96, 24, 1)
    g.save(out + "/ir_stem.onnx", "ir_stem", [1, 3, 224, 224], "b2a_project", [1, 24, 28, 28])


if __name__ == "__main__":
    residual(sys.argv[1])
    ir_stem(sys.argv[1])
