#!/usr/bin/env python3
"""ONNX models built here with the onnx package (opset 13, IR 8: what Debian's libonnx reads), each
imported with `padfold import`, compiled with `padfold compile`, run whole with `padfold run
--model` and compared element-wise with ONNX Runtime on random inputs.

Usage: onnx_models_test.py PADFOLD_BIN WORK_DIR [MODEL ...]   (run with the project's .venv python)
"""
import json
import pathlib
import shutil
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

from e2e_util import run

OPSET = 13
RNG = np.random.default_rng(2026)


def tensor(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def weights(name, shape):
    return tensor(name, RNG.standard_normal(shape).astype(np.float32) * 0.5)


def model(name, nodes, inputs, output, initializers, opset=OPSET):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
        initializers)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    # The output's shape, as ONNX infers it, so the model checks in full.
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    m.graph.output[0].CopyFrom(inferred.graph.output[0])
    onnx.checker.check_model(m, full_check=True)
    return m


def conv(name, x, y, w, b=None, **attrs):
    return helper.make_node("Conv", [x, w] + ([b] if b else []), [y], name=name, **attrs)


# Each builder returns a ModelProto whose single graph input is "x" and output is "y".
def same_upper_even_strided():
    return model("same_upper_even", [
        conv("stem", "x", "c", "w", "b", kernel_shape=[4, 4], strides=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("Relu", ["c"], ["y"], name="stem_relu"),
    ], [("x", [1, 3, 7, 7])], "y", [weights("w", [8, 3, 4, 4]), weights("b", [8])])


def same_lower_stride3():
    return model("same_lower_s3", [
        conv("c3", "x", "y", "w", "b", kernel_shape=[3, 3], strides=[3, 3], auto_pad="SAME_LOWER"),
    ], [("x", [2, 4, 8, 8])], "y", [weights("w", [5, 4, 3, 3]), weights("b", [5])])


def pools_same():
    return model("pools_same", [
        helper.make_node("MaxPool", ["x"], ["m"], name="maxp", kernel_shape=[2, 2], strides=[3, 3],
                         auto_pad="SAME_UPPER"),
        helper.make_node("AveragePool", ["x"], ["a"], name="avgp", kernel_shape=[4, 4],
                         strides=[3, 3], auto_pad="SAME_LOWER", count_include_pad=0),
        helper.make_node("AveragePool", ["x"], ["a1"], name="avgp_incl", kernel_shape=[3, 3],
                         strides=[3, 3], pads=[1, 0, 1, 2], count_include_pad=1),
        helper.make_node("Concat", ["m", "a", "a1"], ["y"], name="cat", axis=1),
    ], [("x", [1, 3, 7, 7])], "y", [])


def depthwise_clip():
    return model("depthwise_clip", [
        conv("dw", "x", "c", "w", "b", kernel_shape=[3, 3], strides=[2, 2], group=6,
             auto_pad="SAME_UPPER"),
        helper.make_node("Clip", ["c", "lo", "hi"], ["d"], name="relu6"),
        conv("pw", "d", "e", "w2", kernel_shape=[1, 1]),
        helper.make_node("LeakyRelu", ["e"], ["y"], name="leaky", alpha=0.2),
    ], [("x", [1, 6, 10, 9])], "y", [
        weights("w", [6, 1, 3, 3]), weights("b", [6]), tensor("lo", np.float32(0)),
        tensor("hi", np.float32(6)), weights("w2", [8, 6, 1, 1])])


def residual_block():
    return model("residual", [
        conv("c1", "x", "a", "w1", "b1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["r"], name="r1"),
        conv("c2", "r", "c", "w2", "b2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "x"], ["s"], name="skip"),
        helper.make_node("Relu", ["s"], ["y"], name="out_relu"),
    ], [("x", [1, 4, 6, 6])], "y", [
        weights("w1", [4, 4, 3, 3]), weights("b1", [4]), weights("w2", [4, 4, 3, 3]),
        weights("b2", [4])])


def pad_reflect_conv():
    return model("pad_reflect", [
        helper.make_node("Pad", ["x", "p"], ["px"], name="pad", mode="reflect"),
        conv("conv", "px", "y", "w", kernel_shape=[3, 3]),
    ], [("x", [1, 2, 6, 7])], "y", [
        tensor("p", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)), weights("w", [3, 2, 3, 3])])


def pad_edge_and_constant():
    return model("pad_edge_constant", [
        helper.make_node("Pad", ["x", "p"], ["px"], name="pad_edge", mode="edge"),
        helper.make_node("AveragePool", ["px"], ["a"], name="avg", kernel_shape=[3, 3],
                         strides=[2, 2]),
        helper.make_node("Pad", ["a", "p2", "v"], ["pa"], name="pad_const", mode="constant"),
        conv("conv", "pa", "y", "w", "b", kernel_shape=[2, 2]),
    ], [("x", [1, 3, 8, 8])], "y", [
        tensor("p", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
        tensor("p2", np.array([0, 0, 1, 0, 0, 0, 0, 1], np.int64)), tensor("v", np.float32(0.5)),
        weights("w", [4, 3, 2, 2]), weights("b", [4])])


def conv_transpose_same():
    return model("convt_same", [
        helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="up", kernel_shape=[3, 3],
                         strides=[2, 2], auto_pad="SAME_UPPER"),
    ], [("x", [1, 4, 5, 5])], "y", [weights("w", [4, 3, 3, 3]), weights("b", [3])])


def conv_transpose_lower_and_shape():
    return model("convt_lower_shape", [
        helper.make_node("ConvTranspose", ["x", "w"], ["a"], name="up_lower", kernel_shape=[4, 4],
                         strides=[2, 2], auto_pad="SAME_LOWER"),
        helper.make_node("ConvTranspose", ["x", "w2", "b2"], ["c"], name="up_shape",
                         kernel_shape=[3, 3], strides=[2, 2], output_shape=[10, 10]),
        helper.make_node("Concat", ["a", "c"], ["y"], name="cat", axis=1),
    ], [("x", [1, 2, 5, 5])], "y", [weights("w", [2, 3, 4, 4]), weights("w2", [2, 4, 3, 3]),
                                    weights("b2", [4])])


def pools_ceil_dilated():
    return model("pools_ceil_dilated", [
        helper.make_node("MaxPool", ["x"], ["m"], name="maxp", kernel_shape=[3, 3], strides=[2, 2],
                         dilations=[2, 1], pads=[1, 1, 2, 0], ceil_mode=1),
        helper.make_node("AveragePool", ["x"], ["a"], name="avgp", kernel_shape=[3, 2],
                         strides=[2, 2], pads=[1, 0, 1, 0], ceil_mode=1, count_include_pad=0),
        helper.make_node("Add", ["m", "a"], ["y"], name="sum"),
    ], [("x", [1, 3, 9, 8])], "y", [])


# Global pools (a classifier's and squeeze-excite's): one window over the whole input.
def global_pools():
    return model("global_pools", [
        conv("c", "x", "c_pre", "w", "b", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c_pre"], ["c"], name="relu"),
        helper.make_node("GlobalAveragePool", ["c"], ["gap"], name="gap"),
        helper.make_node("GlobalMaxPool", ["c"], ["gmp"], name="gmp"),
        helper.make_node("Concat", ["gap", "gmp"], ["y"], name="cat", axis=1),
    ], [("x", [1, 3, 7, 9])], "y", [weights("w", [5, 3, 3, 3]), weights("b", [5])])


def conv3d_same():
    return model("conv3d_same", [
        conv("c3d", "x", "c", "w", "b", kernel_shape=[2, 3, 3], strides=[2, 2, 1],
             auto_pad="SAME_UPPER"),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ], [("x", [1, 2, 5, 6, 4])], "y", [weights("w", [3, 2, 2, 3, 3]), weights("b", [3])])


# A MobileNetV2 inverted residual (expand 1x1 + ReLU6, depthwise 3x3 + ReLU6, project 1x1, add),
# large enough that padfold compile --fuse auto makes expand->dw->project one kernel, then a
# strided depthwise -> pointwise pair (TF SAME, pads 0/1).
def mobilenet_v2_block():
    return model("mobilenet_v2_block", [
        conv("expand", "x", "e", "we", "be", kernel_shape=[1, 1]),
        helper.make_node("Clip", ["e", "lo", "hi"], ["e6"], name="expand_relu6"),
        conv("dw", "e6", "d", "wd", "bd", kernel_shape=[3, 3], group=96, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["d", "lo", "hi"], ["d6"], name="dw_relu6"),
        conv("project", "d6", "p", "wp", "bp", kernel_shape=[1, 1]),
        helper.make_node("Add", ["p", "x"], ["s"], name="residual"),
        conv("dw2", "s", "d2", "wd2", kernel_shape=[3, 3], strides=[2, 2], group=16,
             auto_pad="SAME_UPPER"),
        conv("pw2", "d2", "y", "wp2", "bp2", kernel_shape=[1, 1]),
    ], [("x", [1, 16, 64, 64])], "y", [
        weights("we", [96, 16, 1, 1]), weights("be", [96]), tensor("lo", np.float32(0)),
        tensor("hi", np.float32(6)), weights("wd", [96, 1, 3, 3]), weights("bd", [96]),
        weights("wp", [16, 96, 1, 1]), weights("bp", [16]), weights("wd2", [16, 1, 3, 3]),
        weights("wp2", [24, 16, 1, 1]), weights("bp2", [24])])


# Models whose compile must fuse these blocks (padfold compile --fuse auto): the residual adds go
# into the epilogue of the conv (or fused chain) before them. (dw2's 64 KB intermediate stays in
# cache: not fused.)
# The fused blocks of a default import (the layers channels last; an output's layer is renamed
# <name>_nhwc and its NCHW transpose takes its name; a graph output's layer is named after it).
EXPECTED_BLOCKS = {"mobilenet_v2_block": ["expand+dw+project+residual"],
                   "residual_block": ["c2+y_nhwc"], "convnext_block": ["linear2+y_nhwc"],
                   "layer_normalization_opset17": ["linear2+y_nhwc"],
                   "keras_convnext_block": ["pw2_matmul+residual"]}


# ONNX Runtime refuses dilation with auto_pad SAME ("Dilation not supported for
# AutoPadType::SAME_UPPER"), so the dilated layer has explicit, asymmetric pads.
def conv1d_dilated():
    return model("conv1d_dilated", [
        conv("c1", "x", "y", "w", kernel_shape=[5], strides=[2], dilations=[2], pads=[3, 5]),
    ], [("x", [1, 3, 17])], "y", [weights("w", [4, 3, 5])])


def nhwc_edges():
    """As tf2onnx writes a Keras model: NHWC input and output, each behind a layout Transpose,
    and a pair of Transposes in the middle that undo each other."""
    t = helper.make_node
    return model("nhwc_edges", [
        t("Transpose", ["x"], ["xt"], name="in_t", perm=[0, 3, 1, 2]),
        conv("c1", "xt", "c", "w", "b", kernel_shape=[4, 4], strides=[2, 2], auto_pad="SAME_UPPER"),
        t("Relu", ["c"], ["r"], name="relu"),
        t("Transpose", ["r"], ["r_nhwc"], name="mid_t1", perm=[0, 2, 3, 1]),
        t("Transpose", ["r_nhwc"], ["r2"], name="mid_t2", perm=[0, 3, 1, 2]),
        t("MaxPool", ["r2"], ["m"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
          pads=[1, 0, 1, 1]),
        t("Transpose", ["m"], ["y"], name="out_t", perm=[0, 2, 3, 1]),
    ], [("x", [1, 9, 11, 3])], "y", [weights("w", [6, 3, 4, 4]), weights("b", [6])])


def bias_of(name, n):
    return tensor(name, RNG.uniform(-0.5, 0.5, [n]).astype(np.float32))


def per_channel(name, n, lo=-1.0, hi=1.0):
    return tensor(name, RNG.uniform(lo, hi, [1, n, 1, 1]).astype(np.float32))


def conv_batchnorm():
    """BatchNormalization (inference) after a conv and per-channel Sub/Div after a ConvTranspose,
    folded into their weights and bias."""
    t = helper.make_node
    return model("conv_batchnorm", [
        conv("c1", "x", "c", "w", "b", kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
        t("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["n"], name="bn", epsilon=1e-3),
        t("Relu", ["n"], ["r"], name="relu"),
        t("ConvTranspose", ["r", "wt"], ["d"], name="up", kernel_shape=[2, 2], strides=[2, 2]),
        t("Sub", ["d", "s"], ["e"], name="sub"),
        t("Div", ["e", "q"], ["y"], name="div"),
    ], [("x", [1, 3, 9, 8])], "y", [
        weights("w", [6, 3, 3, 3]), bias_of("b", 6),
        tensor("g", RNG.uniform(0.5, 1.5, [6]).astype(np.float32)), bias_of("beta", 6),
        bias_of("mean", 6), tensor("var", RNG.uniform(0.2, 2.0, [6]).astype(np.float32)),
        weights("wt", [6, 4, 2, 2]), per_channel("s", 4), per_channel("q", 4, 0.5, 2.0)])


def affine_before_convs():
    """A per-channel scale and shift on the input of a VALID conv and, through a reflect Pad,
    of a padded one: exact there, so folded into the weights and bias."""
    t = helper.make_node
    return model("affine_before_convs", [
        t("Mul", ["x", "m"], ["a"], name="scale"),
        t("Add", ["a", "s"], ["b"], name="shift"),
        conv("valid", "b", "c", "w1", "b1", kernel_shape=[3, 3]),
        t("Relu", ["c"], ["r"], name="relu"),
        t("Mul", ["m2", "r"], ["r2"], name="scale2"),
        t("Sub", ["r2", "s2"], ["r3"], name="shift2"),
        t("Pad", ["r3", "pads"], ["p"], name="pad", mode="reflect"),
        conv("padded", "p", "y", "w2", kernel_shape=[3, 3]),
    ], [("x", [1, 3, 10, 9])], "y", [
        per_channel("m", 3, 0.5, 1.5), per_channel("s", 3), weights("w1", [5, 3, 3, 3]),
        bias_of("b1", 5), per_channel("m2", 5, 0.5, 1.5), per_channel("s2", 5),
        tensor("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64)),
        weights("w2", [4, 5, 3, 3])])


def activations():
    """Sigmoid, Tanh, HardSigmoid, HardSwish and x * Sigmoid(x) (SiLU), each fused into its conv."""
    t = helper.make_node
    nodes, inits, outs = [], [], []
    for k, act in enumerate(["Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "SiLU"]):
        c, a = f"c{k}", f"a{k}"
        nodes.append(conv(f"conv{k}", "x", c, f"w{k}", f"b{k}", kernel_shape=[3, 3],
                          auto_pad="SAME_UPPER"))
        inits += [weights(f"w{k}", [2, 3, 3, 3]), bias_of(f"b{k}", 2)]
        if act == "SiLU":
            nodes += [t("Sigmoid", [c], [f"s{k}"], name=f"sig{k}"),
                      t("Mul", [f"s{k}", c], [a], name=f"mul{k}")]
        elif act == "HardSigmoid":
            nodes.append(t(act, [c], [a], name=f"act{k}", alpha=0.3, beta=0.4))
        else:
            nodes.append(t(act, [c], [a], name=f"act{k}"))
        outs.append(a)
    nodes.append(t("Concat", outs, ["y"], name="cat", axis=1))
    return model("activations", nodes, [("x", [1, 3, 7, 6])], "y", inits, opset=14)  # HardSwish


def gelu_tanh_nodes(t, x, y, k, torch_form):
    """GELU's tanh form as torch.onnx writes it (x^3 as two Muls, halved last) or tf2onnx writes
    TensorFlow's (Pow, x halved first); constants coeff, scale, one, half, three."""
    n = [t("Mul", ["coeff", f"cube{k}"], [f"v{k}"], name=f"coeff{k}"),
         t("Add", [x, f"v{k}"], [f"u{k}"], name=f"sum{k}"),
         t("Mul", ["scale", f"u{k}"], [f"s{k}"], name=f"scale{k}"),
         t("Tanh", [f"s{k}"], [f"th{k}"], name=f"tanh{k}"),
         t("Add", ["one", f"th{k}"], [f"p{k}"], name=f"plus1_{k}")]
    if torch_form:
        return [t("Mul", [x, x], [f"sq{k}"], name=f"square{k}"),
                t("Mul", [x, f"sq{k}"], [f"cube{k}"], name=f"cube{k}")] + n + [
                t("Mul", [x, f"p{k}"], [f"g{k}"], name=f"times_x{k}"),
                t("Mul", ["half", f"g{k}"], [y], name=f"gelu{k}")]
    return [t("Mul", ["half", x], [f"hx{k}"], name=f"half_x{k}"),
            t("Pow", [x, "three"], [f"cube{k}"], name=f"pow{k}")] + n + [
            t("Mul", [f"hx{k}", f"p{k}"], [y], name=f"gelu{k}")]


def gelu_tanh():
    """GELU's tanh approximation after two convs, in torch.onnx's and in tf2onnx's form: each
    fuses into its conv as gelu_tanh (and --emit-onnx writes the chain back below opset 20)."""
    t = helper.make_node
    nodes, inits = [], []
    for k in range(2):
        nodes.append(conv(f"conv{k}", "x", f"c{k}", f"w{k}", f"b{k}", kernel_shape=[3, 3],
                          auto_pad="SAME_UPPER"))
        inits += [weights(f"w{k}", [3, 3, 3, 3]), bias_of(f"b{k}", 3)]
        nodes += gelu_tanh_nodes(t, f"c{k}", f"a{k}", k, torch_form=k == 0)
    nodes.append(t("Concat", ["a0", "a1"], ["y"], name="cat", axis=1))
    inits += [tensor(name, np.array(v, np.float32)) for name, v in
              [("coeff", 0.044715), ("scale", 0.7978846), ("one", 1), ("half", 0.5), ("three", 3)]]
    return model("gelu_tanh", nodes, [("x", [1, 3, 7, 6])], "y", inits)


def gelu_erfc():
    """GELU as Keras 3 writes it, 0.5 x erfc(-x / sqrt 2), with tf2onnx's Erfc as 1 - Erf, the
    scale a Mul by 1/sqrt 2 and a Div by sqrt 2: each fuses into its conv as gelu."""
    t = helper.make_node
    nodes, inits = [], []
    for k in range(2):
        c = f"c{k}"
        nodes.append(conv(f"conv{k}", "x", c, f"w{k}", f"b{k}", kernel_shape=[3, 3],
                          auto_pad="SAME_UPPER"))
        inits += [weights(f"w{k}", [3, 3, 3, 3]), bias_of(f"b{k}", 3)]
        scale = (t("Mul", [f"n{k}", "inv_sqrt2"], [f"s{k}"], name=f"scale{k}") if k == 0 else
                 t("Div", [f"n{k}", "sqrt2"], [f"s{k}"], name=f"scale{k}"))
        nodes += [t("Mul", ["half", c], [f"hx{k}"], name=f"half_x{k}"),
                  t("Neg", [c], [f"n{k}"], name=f"neg{k}"), scale,
                  t("Erf", [f"s{k}"], [f"e{k}"], name=f"erf{k}"),
                  t("Sub", ["one", f"e{k}"], [f"ec{k}"], name=f"erfc{k}"),
                  t("Mul", [f"hx{k}", f"ec{k}"], [f"a{k}"], name=f"gelu{k}")]
    nodes.append(t("Concat", ["a0", "a1"], ["y"], name="cat", axis=1))
    inits += [tensor(name, np.array(v, np.float32)) for name, v in
              [("inv_sqrt2", 0.70710677), ("sqrt2", 1.4142135), ("one", 1), ("half", 0.5)]]
    return model("gelu_erfc", nodes, [("x", [1, 3, 7, 6])], "y", inits)


def classifier_gemm():
    """A torchvision-style head: GlobalAveragePool, Flatten, Gemm (transB, alpha, beta and a C):
    a 1x1 conv on the pooled [N, C, 1, 1], its [N, K] output returned as ONNX shapes it."""
    t = helper.make_node
    return model("classifier_gemm", [
        conv("c", "x", "c_pre", "w", "b", kernel_shape=[3, 3], strides=[2, 2],
             auto_pad="SAME_UPPER"),
        t("Relu", ["c_pre"], ["c_out"], name="relu"),
        t("GlobalAveragePool", ["c_out"], ["gap"], name="gap"),
        t("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
        t("Gemm", ["flat", "fc_w", "fc_b"], ["y"], name="fc", transB=1, alpha=0.5, beta=2.0),
    ], [("x", [2, 3, 9, 10])], "y", [weights("w", [6, 3, 3, 3]), bias_of("b", 6),
                                     weights("fc_w", [7, 6]), bias_of("fc_b", 7)])


def classifier_nhwc_matmul():
    """As tf2onnx writes a Keras classifier: an NHWC input behind a layout Transpose, no Transpose
    at the [N, K] output, GlobalAveragePooling2D as ReduceMean over the spatial axes (keepdims 0)
    and Dense as MatMul + Add, its activation fused, then Softmax over the [N, K] scores."""
    t = helper.make_node
    return model("classifier_nhwc_matmul", [
        t("Transpose", ["x"], ["xt"], name="in_t", perm=[0, 3, 1, 2]),
        conv("c", "xt", "c_pre", "w", "b", kernel_shape=[3, 3], strides=[2, 2],
             auto_pad="SAME_UPPER"),
        t("Relu", ["c_pre"], ["c_out"], name="relu"),
        t("ReduceMean", ["c_out"], ["gap"], name="gap", axes=[2, 3], keepdims=0),
        t("MatMul", ["gap", "fc_w"], ["fc"], name="dense"),
        t("Add", ["fc", "fc_b"], ["fc_biased"], name="dense_bias"),
        t("Sigmoid", ["fc_biased"], ["fc_sig"], name="dense_sigmoid"),
        t("Softmax", ["fc_sig"], ["y"], name="predictions"),
    ], [("x", [1, 11, 8, 3])], "y", [weights("w", [5, 3, 3, 3]), bias_of("b", 5),
                                     weights("fc_w", [5, 4]), bias_of("fc_b", 4)])


def reduce_max_squeeze():
    """ReduceMax over the spatial axes (keepdims 1, negative axes), Squeeze to [N, C], and a Gemm
    with B as [C, K] and a scalar C."""
    t = helper.make_node
    return model("reduce_max_squeeze", [
        conv("c", "x", "c_out", "w", kernel_shape=[2, 2], pads=[0, 1, 1, 0]),
        t("ReduceMax", ["c_out"], ["gmp"], name="gmp", axes=[-1, -2], keepdims=1),
        t("Squeeze", ["gmp", "axes"], ["sq"], name="squeeze"),
        t("Gemm", ["sq", "fc_w", "fc_b"], ["y"], name="fc"),
    ], [("x", [3, 2, 6, 5])], "y", [weights("w", [4, 2, 2, 2]),
                                    tensor("axes", np.array([2, 3], dtype=np.int64)),
                                    weights("fc_w", [4, 3]), tensor("fc_b", np.float32(0.25))])


def squeeze_excite():
    """An EfficientNet-style block: SiLU depthwise conv, squeeze-and-excite (GlobalAveragePool,
    1x1 conv + Relu, 1x1 conv + Sigmoid, the Mul by the [N, C, 1, 1] scale, scale first), 1x1
    projection, then the classifier head."""
    t = helper.make_node
    return model("squeeze_excite", [
        conv("dw", "x", "dw_pre", "w_dw", "b_dw", kernel_shape=[3, 3], strides=[2, 2], group=4,
             auto_pad="SAME_UPPER"),
        t("Sigmoid", ["dw_pre"], ["dw_sig"], name="dw_sig"),
        t("Mul", ["dw_pre", "dw_sig"], ["dw_out"], name="dw_silu"),
        t("GlobalAveragePool", ["dw_out"], ["sq"], name="squeeze"),
        conv("se_reduce", "sq", "se_r", "w_r", "b_r", kernel_shape=[1, 1]),
        t("Relu", ["se_r"], ["se_a"], name="se_relu"),
        conv("se_expand", "se_a", "se_e", "w_e", "b_e", kernel_shape=[1, 1]),
        t("Sigmoid", ["se_e"], ["scale"], name="se_gate"),
        t("Mul", ["scale", "dw_out"], ["excited"], name="excite"),
        conv("project", "excited", "p", "w_p", "b_p", kernel_shape=[1, 1]),
        t("GlobalAveragePool", ["p"], ["gap"], name="gap"),
        t("Flatten", ["gap"], ["flat"], name="flatten"),
        t("Gemm", ["flat", "fc_w", "fc_b"], ["y"], name="fc", transB=1),
    ], [("x", [1, 4, 9, 8])], "y", [
        weights("w_dw", [4, 1, 3, 3]), bias_of("b_dw", 4), weights("w_r", [2, 4, 1, 1]),
        bias_of("b_r", 2), weights("w_e", [4, 2, 1, 1]), bias_of("b_e", 4),
        weights("w_p", [6, 4, 1, 1]), bias_of("b_p", 6), weights("fc_w", [5, 6]),
        bias_of("fc_b", 5)])


def nhwc_input_normalization():
    """tf2onnx's Keras input: Rescaling and Normalization (per channel along the last axis) on the
    NHWC input, before the layout Transpose: a depthwise 1x1 conv after the folded edge."""
    t = helper.make_node
    return model("nhwc_input_normalization", [
        t("Mul", ["x", "rescale"], ["r"], name="rescaling"),
        t("Add", ["r", "neg_mean"], ["c"], name="center"),
        t("Mul", ["c", "inv_std"], ["nrm"], name="normalize"),
        t("Transpose", ["nrm"], ["xt"], name="in_t", perm=[0, 3, 1, 2]),
        conv("stem", "xt", "s", "w", "b", kernel_shape=[3, 3], strides=[2, 2],
             auto_pad="SAME_UPPER"),
        t("Transpose", ["s"], ["y"], name="out_t", perm=[0, 2, 3, 1]),
    ], [("x", [1, 9, 10, 3])], "y", [
        tensor("rescale", np.float32(1 / 255)),
        tensor("neg_mean", RNG.uniform(-0.6, -0.3, [3]).astype(np.float32)),
        tensor("inv_std", RNG.uniform(3, 5, [1, 1, 1, 3]).astype(np.float32)),
        weights("w", [4, 3, 3, 3]), bias_of("b", 4)])


def softmax_channels():
    """Softmax over the channels of a spatial tensor (axis 1), after a SAME conv."""
    return model("softmax_channels", [
        conv("c", "x", "c_out", "w", "b", kernel_shape=[3, 3], auto_pad="SAME_UPPER"),
        helper.make_node("Softmax", ["c_out"], ["y"], name="softmax", axis=1),
    ], [("x", [2, 3, 6, 7])], "y", [weights("w", [5, 3, 3, 3]), bias_of("b", 5)])


def input_normalization():
    """Keras EfficientNet's stem: Rescaling and Normalization (Mul, Sub, Div per channel), then
    ZeroPadding2D and a VALID strided conv. The shifts cannot fold into the zero-padded conv (its
    border would be shifted too): they run as a depthwise 1x1 conv of their own."""
    t = helper.make_node
    return model("input_normalization", [
        t("Mul", ["x", "rescale"], ["r"], name="rescaling"),
        t("Sub", ["r", "mean"], ["c"], name="center"),
        t("Div", ["c", "std"], ["nrm"], name="normalize"),
        t("Pad", ["nrm", "pads"], ["p"], name="zero_padding"),
        conv("stem", "p", "y", "w", "b", kernel_shape=[3, 3], strides=[2, 2]),
    ], [("x", [1, 3, 10, 11])], "y", [
        tensor("rescale", np.float32(1 / 255)), per_channel("mean", 3, 0.3, 0.6),
        per_channel("std", 3, 0.2, 0.3),
        tensor("pads", np.array([0, 0, 0, 0, 0, 0, 1, 1], dtype=np.int64)),
        weights("w", [4, 3, 3, 3]), bias_of("b", 4)])


def resize_node(name, x, y, mode, coordinates=None, nearest=None, scales=None, sizes=None,
                opset=OPSET):
    """A Resize of opset 11 on (X, roi, scales, sizes), of opset 10 (X, scales) or an Upsample."""
    attrs = {"mode": mode}
    if coordinates:
        attrs["coordinate_transformation_mode"] = coordinates
    if nearest:
        attrs["nearest_mode"] = nearest
    if opset < 11:
        return helper.make_node("Resize" if opset == 10 else "Upsample", [x, scales], [y],
                                name=name, **attrs)
    return helper.make_node("Resize", [x, "", scales or "", sizes or ""], [y], name=name,
                            **attrs)


def resize_torch_bilinear():
    """torch's F.interpolate(x, size=skip.shape[-2:], mode='bilinear'): FCN's and LR-ASPP's
    upsampling, its sizes computed from the skip's Shape (Slice, Concat with N and C), constant
    once the input size is fixed; then an Add of the skip, as LR-ASPP's head does."""
    t = helper.make_node
    return model("resize_torch_bilinear", [
        conv("down", "x", "d", "w1", "b1", kernel_shape=[3, 3], strides=[4, 4], pads=[1, 1, 1, 1]),
        t("Shape", ["x"], ["shape"], name="shape"),
        t("Slice", ["shape", "two", "four"], ["hw"], name="hw"),
        t("Slice", ["shape", "zero", "two"], ["nc"], name="nc"),
        t("Concat", ["nc", "hw"], ["sizes"], name="sizes", axis=0),
        resize_node("up", "d", "u", "linear", "pytorch_half_pixel", sizes="sizes"),
        t("Add", ["u", "x"], ["y"], name="skip"),
    ], [("x", [1, 3, 13, 18])], "y", [
        weights("w1", [3, 3, 3, 3]), bias_of("b1", 3),
        tensor("zero", np.array([0], np.int64)), tensor("two", np.array([2], np.int64)),
        tensor("four", np.array([4], np.int64))])


def resize_keras_upsampling():
    """Keras UpSampling2D(2) through tf2onnx: nearest, asymmetric, floor, by scales; and
    UpSampling2D(interpolation='bilinear'): linear, half_pixel."""
    return model("resize_keras_upsampling", [
        resize_node("up_nearest", "x", "n", "nearest", "asymmetric", "floor",
                    scales="two_x"),
        conv("c", "n", "c_out", "w", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        resize_node("up_linear", "c_out", "y", "linear", "half_pixel", scales="three_x"),
    ], [("x", [1, 4, 5, 6])], "y", [
        tensor("two_x", np.array([1, 1, 2, 2], np.float32)),
        tensor("three_x", np.array([1, 1, 3, 1.5], np.float32)), weights("w", [5, 4, 3, 3])])


def resize_modes():
    """Every coordinate mode and nearest mode, up and down by non-integer factors, by sizes and by
    scales, one Resize each, pooled and concatenated into one output."""
    nodes, inits = [], []
    cases = [("nearest", "half_pixel", "round_prefer_floor", [1, 1, 1.7, 0.6], None),
             ("nearest", "pytorch_half_pixel", "round_prefer_ceil", None, [2, 3, 5, 11]),
             ("nearest", "align_corners", "ceil", None, [2, 3, 13, 4]),
             ("nearest", "tf_half_pixel_for_nn", "floor", [1, 1, 0.5, 2.5], None),
             ("nearest", "asymmetric", "round_prefer_floor", [1, 1, 1.5, 1.5], None),
             # W kept: ONNX Runtime maps an axis of scale 1 to itself, where ONNX's formula
             # would move it by half a pixel, rounded up.
             ("nearest", "tf_half_pixel_for_nn", "round_prefer_ceil", None, [2, 3, 16, 9]),
             ("linear", "align_corners", None, None, [2, 3, 3, 10]),
             ("linear", "asymmetric", None, [1, 1, 0.7, 1.3], None),
             ("linear", "pytorch_half_pixel", None, None, [2, 3, 1, 8]),
             ("linear", "half_pixel", None, [1, 1, 2.0, 0.45], None),
             # Sizes kept (7 x 9): ONNX Runtime copies the input, whatever the scales.
             ("nearest", "half_pixel", "round_prefer_floor", [1, 1, 1.1, 1.05], None),
             ("linear", "half_pixel", None, [1, 1, 1.1, 1.05], None)]
    for k, (mode, coords, nearest, scales, sizes) in enumerate(cases):
        nodes.append(resize_node(f"r{k}", "x", f"r{k}", mode, coords, nearest,
                                 *scales_or_sizes(k, scales, sizes, inits)))
    return pooled_model("resize_modes", nodes, len(cases), inits)


def scales_or_sizes(k, scales, sizes, inits):
    """Resize k's scales or sizes as a constant added to inits: (its name, None) or (None, its
    name)."""
    if scales:
        inits.append(tensor(f"scales{k}", np.array(scales, np.float32)))
        return f"scales{k}", None
    inits.append(tensor(f"sizes{k}", np.array(sizes, np.int64)))
    return None, f"sizes{k}"


def pooled_model(name, nodes, count, inits):
    """Resizes r0..r{count-1} of x [2, 3, 7, 9], each through a global average and a global max
    pool, concatenated: any output size reaches the sum."""
    t = helper.make_node
    outs = []
    for k in range(count):
        nodes.append(t("GlobalAveragePool", [f"r{k}"], [f"a{k}"], name=f"avg{k}"))
        nodes.append(t("GlobalMaxPool", [f"r{k}"], [f"m{k}"], name=f"max{k}"))
        outs += [f"a{k}", f"m{k}"]
    nodes.append(t("Concat", outs, ["y"], name="all", axis=1))
    return model(name, nodes, [("x", [2, 3, 7, 9])], "y", inits)


def crop_node(name, x, y, mode, nearest, roi, value, scales=None, sizes=None):
    """tf_crop_and_resize of `roi` ([starts of H, W, ends of H, W]) with extrapolation `value`."""
    node = resize_node(name, x, y, mode, "tf_crop_and_resize", nearest, scales, sizes)
    node.input[1] = f"{name}_roi"
    node.attribute.append(helper.make_attribute("extrapolation_value", value))
    h0, w0, h1, w1 = roi
    return node, tensor(f"{name}_roi", np.array([0, 0, h0, w0, 1, 1, h1, w1], np.float32))


def resize_crops():
    """tf_crop_and_resize: regions inside the input and past its edges (extrapolated), by scales
    and by sizes, an output of one pixel (the region's middle), an axis of scale 1 (ONNX Runtime
    keeps it whatever the region); one Resize each, pooled and concatenated."""
    nodes, inits = [], []
    cases = [("linear", None, [1, 1, 2, 1.5], None, [-0.2, 0.1, 0.8, 1.3], -2.0),
             ("nearest", "round_prefer_ceil", None, [2, 3, 5, 11], [0.1, 0.25, 0.9, 0.75], 0.0),
             ("nearest", "floor", [1, 1, 0.6, 2.0], None, [0.5, -0.5, 1.5, 0.5], 3.5),
             ("linear", None, None, [2, 3, 1, 6], [0.3, 0.0, 0.6, 1.0], 1.0),
             ("nearest", "round_prefer_floor", [1, 1, 1, 2], None, [0.2, 0.2, 0.7, 0.7], 9.0)]
    for k, (mode, nearest, scales, sizes, roi, value) in enumerate(cases):
        node, roi_tensor = crop_node(f"r{k}", "x", f"r{k}", mode, nearest, roi, value,
                                     *scales_or_sizes(k, scales, sizes, inits))
        nodes.append(node)
        inits.append(roi_tensor)
    return pooled_model("resize_crops", nodes, len(cases), inits)


def resize_crop_output():
    """A bilinear crop past two edges as the model's output, element by element."""
    node, roi = crop_node("crop", "x", "y", "linear", None, [-0.25, 0.2, 1.1, 0.9], -1.5,
                          scales="s")
    return model("resize_crop_output", [node], [("x", [1, 2, 6, 8])], "y",
                 [roi, tensor("s", np.array([1, 1, 1.5, 0.75], np.float32))])


def resize_3d_and_1d():
    """Trilinear (a 3-D Resize) and a 1-D nearest, each before a conv."""
    return model("resize_3d_and_1d", [
        resize_node("r3", "x", "r", "linear", "half_pixel", scales="s3"),
        conv("c3", "r", "y", "w3", kernel_shape=[3, 3, 3], pads=[1, 1, 1, 1, 1, 1]),
    ], [("x", [1, 2, 3, 4, 5])], "y", [
        tensor("s3", np.array([1, 1, 2, 1.5, 0.8], np.float32)), weights("w3", [3, 2, 3, 3, 3])])


def resize_1d_nearest():
    return model("resize_1d_nearest", [
        resize_node("r1", "x", "r", "nearest", "asymmetric", "floor", scales="s1"),
        conv("c1", "r", "y", "w1", kernel_shape=[3], pads=[1, 1]),
    ], [("x", [1, 2, 11])], "y", [tensor("s1", np.array([1, 1, 3], np.float32)),
                                   weights("w1", [3, 2, 3])])


def upsample_opset9():
    """The deprecated Upsample (opset 9) and Resize at opset 10: asymmetric coordinates; nearest
    rounds down when upsampling."""
    m1 = [resize_node("up", "x", "u", "nearest", scales="s", opset=9),
          conv("c", "u", "y", "w", kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    return model("upsample_opset9", m1, [("x", [1, 3, 4, 5])], "y",
                 [tensor("s", np.array([1, 1, 2, 3], np.float32)), weights("w", [2, 3, 3, 3])],
                 opset=9)


def resize_opset10_linear():
    return model("resize_opset10_linear", [
        resize_node("up", "x", "u", "linear", scales="s", opset=10),
        conv("c", "u", "y", "w", kernel_shape=[1, 1]),
    ], [("x", [1, 3, 4, 5])], "y",
        [tensor("s", np.array([1, 1, 2.5, 0.6], np.float32)), weights("w", [2, 3, 1, 1])],
        opset=10)


def shufflenet_units():
    """ShuffleNetV2 as torch.onnx writes it: the shuffle of a concat (Reshape to [N, 2, C/2, H, W],
    Transpose 0 2 1 3 4, Reshape back), then chunk(2) as two Slices of the channels, one half
    through a conv and concatenated with the other; a second unit after it, a conv at the end."""
    t = helper.make_node
    nodes = [conv("stem", "x", "s", "w0", "b0", kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    x = "s"
    for u in range(2):
        nodes += [
            t("Slice", [x, "zero", "half", "one"], [f"first{u}"], name=f"half1_{u}"),
            t("Slice", [x, "half", "big", "one"], [f"second{u}"], name=f"half2_{u}"),
            conv(f"branch{u}", f"second{u}", f"c{u}", f"wb{u}", kernel_shape=[1, 1]),
            t("Relu", [f"c{u}"], [f"r{u}"], name=f"relu{u}"),
            t("Concat", [f"first{u}", f"r{u}"], [f"cat{u}"], name=f"cat{u}", axis=1),
            t("Reshape", [f"cat{u}", "split_shape"], [f"g{u}"], name=f"group{u}"),
            t("Transpose", [f"g{u}"], [f"tr{u}"], name=f"swap{u}", perm=[0, 2, 1, 3, 4]),
            t("Reshape", [f"tr{u}", "merge_shape"], [f"sh{u}"], name=f"merge{u}"),
        ]
        x = f"sh{u}"
    nodes.append(conv("head", x, "y", "wh", kernel_shape=[3, 3], strides=[2, 2],
                      pads=[0, 0, 1, 1]))
    return model("shufflenet_units", nodes, [("x", [1, 3, 9, 10])], "y", [
        weights("w0", [8, 3, 3, 3]), bias_of("b0", 8), weights("wb0", [4, 4, 1, 1]),
        weights("wb1", [4, 4, 1, 1]), weights("wh", [5, 8, 3, 3]),
        tensor("zero", np.array([0], np.int64)), tensor("half", np.array([4], np.int64)),
        tensor("big", np.array([2**62], np.int64)), tensor("one", np.array([1], np.int64)),
        tensor("split_shape", np.array([1, 2, 4, 9, 10], np.int64)),
        tensor("merge_shape", np.array([1, -1, 9, 10], np.int64))])


def channel_slices():
    """Slices of the channels ONNX's way: negative starts and ends, a step of 2 and of -1, axes
    counted from the end and a whole spatial axis in the same Slice; a shuffle of 3 groups after
    which every third channel is taken (the two compose into one gather)."""
    t = helper.make_node
    return model("channel_slices", [
        conv("c", "x", "c_out", "w", kernel_shape=[3], pads=[1, 1]),
        t("Slice", ["c_out", "neg_starts", "neg_ends", "axes_13", "steps_2"], ["even"],
          name="even"),
        t("Slice", ["c_out", "last", "before_first", "axis_1", "back"], ["rev"], name="rev"),
        t("Reshape", ["c_out", "three_groups"], ["g"], name="group"),
        t("Transpose", ["g"], ["gt"], name="swap", perm=[0, 2, 1, 3]),
        t("Reshape", ["gt", "merged"], ["sh"], name="merge"),
        t("Slice", ["sh", "zero", "big", "axis_1", "three"], ["thirds"], name="thirds"),
        t("Concat", ["even", "rev", "thirds"], ["cat"], name="cat", axis=1),
        conv("head", "cat", "y", "wh", kernel_shape=[1]),
    ], [("x", [1, 2, 11])], "y", [
        weights("w", [12, 2, 3]), weights("wh", [3, 22, 1]),
        tensor("neg_starts", np.array([-12, 0], np.int64)),
        tensor("neg_ends", np.array([-1, 2**62], np.int64)),
        tensor("axes_13", np.array([1, -1], np.int64)),
        tensor("steps_2", np.array([2, 1], np.int64)), tensor("last", np.array([-1], np.int64)),
        tensor("before_first", np.array([-2**62], np.int64)),
        tensor("axis_1", np.array([1], np.int64)), tensor("back", np.array([-1], np.int64)),
        tensor("three_groups", np.array([1, 3, 4, 11], np.int64)),
        tensor("merged", np.array([1, 12, 11], np.int64)),
        tensor("zero", np.array([0], np.int64)), tensor("big", np.array([2**62], np.int64)),
        tensor("three", np.array([3], np.int64))])


def slice_opset9():
    """Slice before opset 10: starts, ends and axes as attributes."""
    t = helper.make_node
    return model("slice_opset9", [
        t("Slice", ["x"], ["s"], name="s", starts=[1], ends=[3], axes=[1]),
        conv("c", "s", "y", "w", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    ], [("x", [1, 4, 6, 5])], "y", [weights("w", [3, 2, 3, 3])], opset=9)


def split_channels():
    """Split of the channels as newer torch.onnx writes chunk and split, and tf2onnx tf.split:
    sizes from the split input, and equal parts without it; a shuffle before the first Split (the
    halves compose with it). Each part becomes a gather_channels layer."""
    t = helper.make_node
    return model("split_channels", [
        conv("c", "x", "c_out", "w", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        t("Reshape", ["c_out", "grouped"], ["g"], name="group"),
        t("Transpose", ["g"], ["gt"], name="swap", perm=[0, 2, 1, 3, 4]),
        t("Reshape", ["gt", "merged"], ["sh"], name="merge"),
        t("Split", ["sh", "sizes"], ["p0", "p1"], name="chunk", axis=1),
        t("Split", ["c_out"], ["q0", "q1", "q2"], name="thirds", axis=-3),
        conv("pc", "p1", "p1c", "wp", kernel_shape=[1, 1]),
        t("Concat", ["p0", "p1c", "q2", "q0"], ["cat"], name="cat", axis=1),
        conv("head", "cat", "y", "wh", kernel_shape=[1, 1]),
    ], [("x", [1, 3, 7, 6])], "y", [
        weights("w", [6, 3, 3, 3]), weights("wp", [4, 2, 1, 1]), weights("wh", [3, 12, 1, 1]),
        tensor("grouped", np.array([1, 2, 3, 7, 6], np.int64)),
        tensor("merged", np.array([1, 6, 7, 6], np.int64)),
        tensor("sizes", np.array([4, 2], np.int64))])


def split_opset11():
    """Split before opset 13: the sizes as an attribute."""
    t = helper.make_node
    return model("split_opset11", [
        t("Split", ["x"], ["a", "b"], name="split", axis=1, split=[1, 3]),
        conv("c", "b", "y", "w", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    ], [("x", [1, 4, 6, 5])], "y", [weights("w", [2, 3, 3, 3])], opset=11)


def layer_norm_nodes(t, x, y, prefix, axis=-1):
    """torch.onnx's LayerNorm over the last axis before opset 17."""
    def mean(a, out, name):
        return t("ReduceMean", [a], [out], name=name, axes=[axis])
    p = prefix
    return [
        mean(x, f"{p}mean", f"{p}mean"),
        t("Sub", [x, f"{p}mean"], [f"{p}dev"], name=f"{p}sub"),
        t("Pow", [f"{p}dev", "two"], [f"{p}sq"], name=f"{p}pow"),
        mean(f"{p}sq", f"{p}var", f"{p}var"),
        t("Add", [f"{p}var", "eps"], [f"{p}ve"], name=f"{p}add_eps"),
        t("Sqrt", [f"{p}ve"], [f"{p}std"], name=f"{p}sqrt"),
        t("Div", [f"{p}dev", f"{p}std"], [f"{p}n"], name=f"{p}div"),
        t("Mul", [f"{p}n", f"{p}gamma"], [f"{p}s"], name=f"{p}scale"),
        t("Add", [f"{p}s", f"{p}beta"], [y], name=f"{p}shift"),
    ]


def last_axis(name, n, lo=-1.0, hi=1.0):
    return tensor(name, RNG.uniform(lo, hi, n).astype(np.float32))


def gelu_nodes(t, x, y):
    """GELU as torch.onnx writes it before opset 20 (constants sqrt2, one, half)."""
    return [t("Div", [x, "sqrt2"], ["g0"], name="gelu_scale"),
            t("Erf", ["g0"], ["g1"], name="gelu_erf"),
            t("Add", ["g1", "one"], ["g2"], name="gelu_one"),
            t("Mul", [x, "g2"], ["g3"], name="gelu_x"),
            t("Mul", ["g3", "half"], [y], name="gelu")]


def convnext_block():
    """ConvNeXt as torch.onnx writes it: a 4x4 stride-4 stem and a LayerNorm on channels last
    (Transpose, the decomposed LayerNorm, Transpose back); the block: a 7x7 depthwise conv,
    Transpose, LayerNorm, Linear (MatMul + Add), GELU (Div, Erf, Add, Mul, Mul), Linear, Transpose,
    the layer scale ([C, 1, 1]) and the residual add."""
    t = helper.make_node
    c = 8
    nodes = [conv("stem", "x", "s", "w0", "b0", kernel_shape=[4, 4], strides=[4, 4]),
             t("Transpose", ["s"], ["s_last"], name="stem_to_last", perm=[0, 2, 3, 1])]
    nodes += layer_norm_nodes(t, "s_last", "s_ln", "stem_ln_")
    nodes += [t("Transpose", ["s_ln"], ["a"], name="stem_to_first", perm=[0, 3, 1, 2]),
              conv("dw", "a", "d", "wd", "bd", kernel_shape=[7, 7], pads=[3, 3, 3, 3], group=c),
              t("Transpose", ["d"], ["d_last"], name="to_last", perm=[0, 2, 3, 1])]
    nodes += layer_norm_nodes(t, "d_last", "ln", "ln_")
    nodes += [
        t("MatMul", ["ln", "w1"], ["h"], name="linear1"),
        t("Add", ["b1", "h"], ["hb"], name="linear1_bias"),
    ] + gelu_nodes(t, "hb", "g") + [
        t("MatMul", ["g", "w2"], ["o"], name="linear2"),
        t("Add", ["o", "b2"], ["ob"], name="linear2_bias"),
        t("Transpose", ["ob"], ["back"], name="to_first", perm=[0, 3, 1, 2]),
        t("Mul", ["back", "layer_scale"], ["ls"], name="layer_scale"),
        t("Add", ["ls", "a"], ["y"], name="residual"),
    ]
    return model("convnext_block", nodes, [("x", [1, 3, 36, 28])], "y", [
        weights("w0", [c, 3, 4, 4]), bias_of("b0", c), weights("wd", [c, 1, 7, 7]),
        bias_of("bd", c), weights("w1", [c, 4 * c]), bias_of("b1", 4 * c),
        weights("w2", [4 * c, c]), bias_of("b2", c), last_axis("stem_ln_gamma", c, 0.5, 1.5),
        last_axis("stem_ln_beta", c), last_axis("ln_gamma", c, 0.5, 1.5),
        last_axis("ln_beta", c),
        tensor("layer_scale", RNG.uniform(0.5, 1.5, (c, 1, 1)).astype(np.float32)),
        tensor("two", np.float32(2)), tensor("eps", np.float32(1e-6)),
        tensor("sqrt2", np.float32(np.sqrt(2))), tensor("one", np.float32(1)),
        tensor("half", np.float32(0.5))])


def layer_norm_head():
    """The same stretch written otherwise: ReduceMean over axis 3 (not -1), GELU scaled by Mul(x,
    1/sqrt 2) and halved first; then a LayerNorm head after a global pool (ConvNeXt's
    classifier), a Flatten and a Gemm."""
    t = helper.make_node
    c = 6
    nodes = [conv("c", "x", "a", "w0", "b0", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             t("Transpose", ["a"], ["a_last"], name="to_last", perm=[0, 2, 3, 1])]
    nodes += layer_norm_nodes(t, "a_last", "ln", "ln_", axis=3)
    nodes += [
        t("MatMul", ["ln", "w1"], ["h"], name="linear1"),
        t("Mul", ["inv_sqrt2", "h"], ["g0"], name="gelu_scale"),
        t("Erf", ["g0"], ["g1"], name="gelu_erf"),
        t("Add", ["one", "g1"], ["g2"], name="gelu_one"),
        t("Mul", ["g2", "h"], ["g3"], name="gelu_x"),
        t("Mul", ["half", "g3"], ["g"], name="gelu"),
        t("Transpose", ["g"], ["b"], name="to_first", perm=[0, 3, 1, 2]),
        t("GlobalAveragePool", ["b"], ["p"], name="pool"),
        t("Transpose", ["p"], ["p_last"], name="head_to_last", perm=[0, 2, 3, 1]),
    ]
    nodes += layer_norm_nodes(t, "p_last", "p_ln", "head_ln_")
    nodes += [t("Transpose", ["p_ln"], ["p_first"], name="head_to_first", perm=[0, 3, 1, 2]),
              t("Flatten", ["p_first"], ["f"], name="flatten"),
              t("Gemm", ["f", "wg", "bg"], ["y"], name="fc", transB=1)]
    return model("layer_norm_head", nodes, [("x", [1, 3, 11, 9])], "y", [
        weights("w0", [c, 3, 3, 3]), bias_of("b0", c), weights("w1", [c, 2 * c]),
        last_axis("ln_gamma", c, 0.5, 1.5), last_axis("ln_beta", c),
        last_axis("head_ln_gamma", 2 * c, 0.5, 1.5), last_axis("head_ln_beta", 2 * c),
        weights("wg", [5, 2 * c]), bias_of("bg", 5), tensor("two", np.float32(2)),
        tensor("eps", np.float32(1e-5)), tensor("inv_sqrt2", np.float32(np.sqrt(0.5))),
        tensor("one", np.float32(1)), tensor("half", np.float32(0.5))])

def layer_normalization_opset17():
    """ConvNeXt's block as torch 2's exporter writes it at opset 17: LayerNormalization over the
    last axis (with its Scale and B) between the Transposes, the Linears as MatMul + Add, GELU as
    Erf."""
    t = helper.make_node
    c = 5
    nodes = [
        conv("dw", "x", "d", "wd", "bd", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=c),
        t("Transpose", ["d"], ["d_last"], name="to_last", perm=[0, 2, 3, 1]),
        t("LayerNormalization", ["d_last", "gamma", "beta"], ["ln"], name="ln", axis=-1,
          epsilon=1e-6),
        t("MatMul", ["ln", "w1"], ["h"], name="linear1"),
        t("Add", ["h", "b1"], ["hb"], name="linear1_bias"),
    ] + gelu_nodes(t, "hb", "g") + [
        t("MatMul", ["g", "w2"], ["o"], name="linear2"),
        t("Transpose", ["o"], ["back"], name="to_first", perm=[0, 3, 1, 2]),
        t("Add", ["back", "x"], ["y"], name="residual"),
    ]
    return model("layer_normalization_opset17", nodes, [("x", [1, c, 10, 7])], "y", [
        weights("wd", [c, 1, 3, 3]), bias_of("bd", c), last_axis("gamma", c, 0.5, 1.5),
        last_axis("beta", c), weights("w1", [c, 3 * c]), bias_of("b1", 3 * c),
        weights("w2", [3 * c, c]), tensor("sqrt2", np.float32(np.sqrt(2))),
        tensor("one", np.float32(1)), tensor("half", np.float32(0.5))], opset=17)


def keras_unoptimized_block():
    """As tf2onnx 1.17 writes a Keras 3 MobileNetV3 block when its transpose optimizer fails (it
    does on keras.applications' MobileNetV3 under TensorFlow 2.21): each conv between Transposes
    to channels first and back, and everything else channels last: the hard swish (Add 3, Clip 0..6,
    Mul 1/6, Mul x), squeeze-and-excite (ReduceMean over axes [1, 2] with keepdims, its two 1x1
    convs each between Transposes, the Relu and the hard sigmoid channels last, the Mul by the
    [1, 1, 1, C] scale), a per-channel scale and shift, then the head: ReduceMean with keepdims, a
    1x1 conv to the classes, Transpose, Reshape to [N, K] and Softmax."""
    t = helper.make_node

    def to_first(x, y):
        return t("Transpose", [x], [y], name=f"{y}_t", perm=[0, 3, 1, 2])

    def to_last(x, y):
        return t("Transpose", [x], [y], name=f"{y}_t", perm=[0, 2, 3, 1])

    def hard_sigmoid(x, y):
        return [t("Add", [x, "three"], [f"{y}_a"], name=f"{y}_add"),
                t("Clip", [f"{y}_a", "zero", "six"], [f"{y}_c"], name=f"{y}_relu6"),
                t("Mul", [f"{y}_c", "sixth"], [y], name=f"{y}_div")]
    nodes = [to_first("x", "xt"),
             conv("c1", "xt", "c1_out", "w1", "b1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             to_last("c1_out", "c1_last")]
    nodes += hard_sigmoid("c1_last", "hs1") + [
        t("Mul", ["c1_last", "hs1"], ["hswish"], name="hswish"),
        t("ReduceMean", ["hswish"], ["pooled"], name="se_pool", axes=[1, 2], keepdims=1),
        to_first("pooled", "pooled_first"),
        conv("se_reduce", "pooled_first", "se_r", "wr", "br", kernel_shape=[1, 1]),
        to_last("se_r", "se_r_last"),
        t("Relu", ["se_r_last"], ["se_relu"], name="se_relu"),
        to_first("se_relu", "se_relu_first"),
        conv("se_expand", "se_relu_first", "se_e", "we", "be", kernel_shape=[1, 1]),
        to_last("se_e", "se_e_last")]
    nodes += hard_sigmoid("se_e_last", "gate") + [
        t("Mul", ["hswish", "gate"], ["excited"], name="excite"),
        to_first("excited", "excited_first"),
        conv("project", "excited_first", "p", "wp", "bp", kernel_shape=[1, 1]),
        to_last("p", "p_last"),
        t("Mul", ["p_last", "bn_scale"], ["p_scaled"], name="bn_scale"),
        t("Add", ["p_scaled", "bn_shift"], ["p_bn"], name="bn_shift"),
        t("ReduceMean", ["p_bn"], ["head_pool"], name="head_pool", axes=[1, 2], keepdims=1),
        to_first("head_pool", "head_first"),
        conv("logits", "head_first", "logits", "wl", "bl", kernel_shape=[1, 1]),
        to_last("logits", "logits_last"),
        t("Reshape", ["logits_last", "flat_shape"], ["flat"], name="flatten"),
        t("Softmax", ["flat"], ["y"], name="predictions", axis=-1)]
    return model("keras_unoptimized_block", nodes, [("x", [1, 9, 8, 4])], "y", [
        weights("w1", [8, 4, 3, 3]), bias_of("b1", 8), weights("wr", [4, 8, 1, 1]),
        bias_of("br", 4), weights("we", [8, 4, 1, 1]), bias_of("be", 8),
        weights("wp", [6, 8, 1, 1]), bias_of("bp", 6), last_axis("bn_scale", 6, 0.5, 1.5),
        last_axis("bn_shift", 6), weights("wl", [5, 6, 1, 1]), bias_of("bl", 5),
        tensor("three", np.float32(3)), tensor("zero", np.float32(0)),
        tensor("six", np.float32(6)), tensor("sixth", np.float32(1 / 6)),
        tensor("flat_shape", np.array([1, -1], np.int64))])


def keras_unoptimized_pool_head():
    """The head of a Keras classifier as tf2onnx writes it unoptimized: a conv between Transposes,
    then ReduceMean over [1, 2] without keepdims (GlobalAveragePooling2D: [N, C] in either layout),
    Dense as MatMul + Add, and Softmax."""
    t = helper.make_node
    return model("keras_unoptimized_pool_head", [
        t("Transpose", ["x"], ["xt"], name="in_t", perm=[0, 3, 1, 2]),
        conv("c", "xt", "c_out", "w", "b", kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1]),
        t("Transpose", ["c_out"], ["c_last"], name="c_to_last", perm=[0, 2, 3, 1]),
        t("Relu", ["c_last"], ["r"], name="relu"),
        t("ReduceMean", ["r"], ["gap"], name="gap", axes=[1, 2], keepdims=0),
        t("MatMul", ["gap", "fc_w"], ["fc"], name="dense"),
        t("Add", ["fc", "fc_b"], ["fc_biased"], name="dense_bias"),
        t("Softmax", ["fc_biased"], ["y"], name="predictions"),
    ], [("x", [1, 10, 7, 3])], "y", [weights("w", [6, 3, 3, 3]), bias_of("b", 6),
                                     weights("fc_w", [6, 4]), bias_of("fc_b", 4)])


def keras_layer_norm_nodes(t, x, y, p, beta=True, reshape=True):
    """Keras's LayerNormalization over axis 1 as tf2onnx writes it: x * s + (-mean) * s (+ beta),
    s = gamma / sqrt(var + eps), the mean through a Reshape to its own shape (inputs f"{p}gamma",
    f"{p}beta", f"{p}mean_shape", "eps")."""
    def mean(a, out):
        return t("ReduceMean", [a], [out], name=out, axes=[1], keepdims=1)
    m = f"{p}mean_r" if reshape else f"{p}mean"
    nodes = [mean(x, f"{p}mean"), t("Neg", [f"{p}mean"], [f"{p}neg"], name=f"{p}neg")]
    if reshape:
        nodes.append(t("Reshape", [f"{p}mean", f"{p}mean_shape"], [m], name=f"{p}mean_r"))
    nodes += [t("Sub", [x, m], [f"{p}dev"], name=f"{p}dev"),
              t("Mul", [f"{p}dev", f"{p}dev"], [f"{p}sq"], name=f"{p}sq"), mean(f"{p}sq", f"{p}var"),
              t("Add", [f"{p}var", "eps"], [f"{p}ve"], name=f"{p}add"),
              t("Sqrt", [f"{p}ve"], [f"{p}sd"], name=f"{p}sqrt"),
              t("Reciprocal", [f"{p}sd"], [f"{p}r"], name=f"{p}rsqrt"),
              t("Mul", [f"{p}r", f"{p}gamma"], [f"{p}s"], name=f"{p}s"),
              t("Mul", [x, f"{p}s"], [f"{p}xs"], name=f"{p}xs"),
              t("Mul", [f"{p}neg", f"{p}s"], [f"{p}ms"], name=f"{p}ms")]
    if beta:
        nodes.append(t("Add", [f"{p}ms", f"{p}beta"], [f"{p}shift"], name=f"{p}shift"))
    return nodes + [t("Add", [f"{p}xs", f"{p}shift" if beta else f"{p}ms"], [y], name=f"{p}out")]


def tensordot_nodes(t, x, y, w, b, p):
    """A Keras Dense layer on [N, H, W, C] as tf2onnx writes tf.tensordot: Reshape to [N*H*W, C],
    MatMul by the kernel, Reshape back (inputs f"{p}flat", f"{p}back"), then the bias."""
    return [t("Reshape", [x, f"{p}flat"], [f"{p}2d"], name=f"{p}reshape"),
            t("MatMul", [f"{p}2d", w], [f"{p}mm"], name=f"{p}matmul"),
            t("Reshape", [f"{p}mm", f"{p}back"], [f"{p}td"], name=f"{p}tensordot"),
            t("Add", [f"{p}td", b], [y], name=f"{p}bias")]


def keras_convnext_block():
    """Keras's ConvNeXt as tf2onnx writes it: the input normalized channels last, a 4x4 stride-4
    stem, Keras's LayerNormalization (tf.nn.moments, x * s + (-mean) * s) channels first, with and
    without beta; the block: a 7x7 depthwise conv, LayerNorm, Transpose to channels last, Dense
    layers as tf.tensordot (Reshape, MatMul, Reshape), GELU as 0.5 x erfc(-x / sqrt 2), the layer
    scale, Transpose back and the residual add; the head: global pool, Squeeze, LayerNorm of [N,
    C], Dense (Gemm) and Softmax."""
    t = helper.make_node
    c, h, w = 8, 5, 4
    nodes = [t("Sub", ["x", "in_mean"], ["xc"], name="in_sub"),
             t("Mul", ["xc", "in_scale"], ["xn"], name="in_scale"),
             t("Transpose", ["xn"], ["xf"], name="in_first", perm=[0, 3, 1, 2]),
             conv("stem", "xf", "s", "w0", "b0", kernel_shape=[4, 4], strides=[4, 4])]
    nodes += keras_layer_norm_nodes(t, "s", "a", "stem_", beta=False)
    nodes += [conv("dw", "a", "d", "wd", "bd", kernel_shape=[7, 7], pads=[3, 3, 3, 3], group=c)]
    nodes += keras_layer_norm_nodes(t, "d", "ln", "ln_")
    nodes += [t("Transpose", ["ln"], ["ln_last"], name="to_last", perm=[0, 2, 3, 1])]
    nodes += tensordot_nodes(t, "ln_last", "hb", "w1", "b1", "pw1_")
    nodes += [t("Mul", ["half", "hb"], ["hx"], name="gelu_half_x"),
              t("Neg", ["hb"], ["hn"], name="gelu_neg"),
              t("Mul", ["hn", "inv_sqrt2"], ["hs"], name="gelu_scale"),
              t("Erf", ["hs"], ["he"], name="gelu_erf"),
              t("Sub", ["one", "he"], ["hc"], name="gelu_erfc"),
              t("Mul", ["hx", "hc"], ["g"], name="gelu")]
    nodes += tensordot_nodes(t, "g", "ob", "w2", "b2", "pw2_")
    nodes += [t("Mul", ["ob", "layer_scale"], ["ls"], name="layer_scale"),
              t("Transpose", ["ls"], ["back"], name="to_first", perm=[0, 3, 1, 2]),
              t("Add", ["a", "back"], ["res"], name="residual"),
              t("GlobalAveragePool", ["res"], ["gap"], name="gap"),
              t("Squeeze", ["gap", "hw_axes"], ["pooled"], name="squeeze")]
    nodes += keras_layer_norm_nodes(t, "pooled", "head", "head_", reshape=False)
    nodes += [t("Gemm", ["head", "wg", "bg"], ["logits"], name="dense"),
              t("Softmax", ["logits"], ["y"], name="predictions")]
    hw = [1, 1, h, w]

    def per_channel_4d(lo, hi):
        return RNG.uniform(lo, hi, (1, c, 1, 1)).astype(np.float32)
    return model("keras_convnext_block", nodes, [("x", [1, 4 * h, 4 * w, 3])], "y", [
        tensor("in_mean", RNG.uniform(-0.5, 0.5, (1, 1, 1, 3)).astype(np.float32)),
        tensor("in_scale", RNG.uniform(0.5, 2, (1, 1, 1, 3)).astype(np.float32)),
        weights("w0", [c, 3, 4, 4]), bias_of("b0", c), weights("wd", [c, 1, 7, 7]),
        bias_of("bd", c), tensor("stem_gamma", per_channel_4d(0.5, 1.5)),
        tensor("stem_mean_shape", np.array(hw, np.int64)),
        tensor("ln_gamma", per_channel_4d(0.5, 1.5)), tensor("ln_beta", per_channel_4d(-1, 1)),
        tensor("ln_mean_shape", np.array(hw, np.int64)),
        tensor("pw1_flat", np.array([-1, c], np.int64)),
        tensor("pw1_back", np.array([1, h, w, 4 * c], np.int64)),
        weights("w1", [c, 4 * c]), last_axis("b1", 4 * c),
        tensor("pw2_flat", np.array([-1, 4 * c], np.int64)),
        tensor("pw2_back", np.array([1, h, w, c], np.int64)),
        weights("w2", [4 * c, c]), last_axis("b2", c), last_axis("layer_scale", c, 0.5, 1.5),
        tensor("hw_axes", np.array([2, 3], np.int64)),
        tensor("head_gamma", RNG.uniform(0.5, 1.5, (1, c)).astype(np.float32)),
        tensor("head_beta", RNG.uniform(-1, 1, (1, c)).astype(np.float32)),
        weights("wg", [c, 5]), bias_of("bg", 5), tensor("eps", np.float32(1e-6)),
        tensor("inv_sqrt2", np.float32(np.sqrt(0.5))), tensor("one", np.float32(1)),
        tensor("half", np.float32(0.5))])


def crops():
    """Crops folded as negative pads: Keras NASNet's adjust block (ZeroPadding2D(((0, 1), (0, 1)))
    and Cropping2D(((1, 0), (1, 0))) before a 1x1 stride-2 AveragePool, beside the unshifted one),
    an ONNX Pad with negative pads before a conv padding the other sides, and a Slice dropping the
    last row before a ceil_mode MaxPool."""
    t = helper.make_node
    big = 1 << 30
    return model("crops", [
        conv("c0", "x", "c0o", "w0", kernel_shape=[1, 1]),
        t("Relu", ["c0o"], ["r"], name="relu"),
        t("AveragePool", ["r"], ["p1"], name="path1", kernel_shape=[1, 1], strides=[2, 2]),
        t("Pad", ["r", "zp"], ["rp"], name="zero_padding2d"),
        t("Slice", ["rp", "cs", "ce", "ca"], ["rc"], name="cropping2d"),
        t("AveragePool", ["rc"], ["p2"], name="path2", kernel_shape=[1, 1], strides=[2, 2]),
        t("Concat", ["p1", "p2"], ["cat"], name="concat", axis=1),
        conv("c1", "cat", "c1o", "w1", "b1", kernel_shape=[1, 1]),
        t("Pad", ["c1o", "np"], ["c1c"], name="negative_pad"),
        conv("c2", "c1c", "c2o", "w2", kernel_shape=[3, 3], pads=[0, 1, 1, 0]),
        t("Slice", ["c2o", "ls", "le", "la"], ["c2c"], name="last_row"),
        t("MaxPool", ["c2c"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2],
          ceil_mode=1),
    ], [("x", [1, 4, 13, 13])], "y", [
        tensor("zp", np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64)),
        tensor("cs", np.array([0, 1, 1, 0], np.int64)),
        tensor("ce", np.array([big] * 4, np.int64)), tensor("ca", np.array([0, 2, 3, 1], np.int64)),
        weights("w0", [4, 4, 1, 1]), weights("w1", [6, 8, 1, 1]), bias_of("b1", 6),
        tensor("np", np.array([0, 0, -1, 0, 0, 0, 0, -2], np.int64)), weights("w2", [5, 6, 3, 3]),
        tensor("ls", np.array([0], np.int64)), tensor("le", np.array([-1], np.int64)),
        tensor("la", np.array([2], np.int64))])


MODELS = {f.__name__: f for f in [
    same_upper_even_strided, same_lower_stride3, pools_same, depthwise_clip, residual_block,
    pad_reflect_conv, pad_edge_and_constant, conv_transpose_same, conv_transpose_lower_and_shape,
    pools_ceil_dilated, conv3d_same, conv1d_dilated, mobilenet_v2_block, nhwc_edges,
    conv_batchnorm, affine_before_convs, activations, gelu_tanh, gelu_erfc, global_pools,
    classifier_gemm,
    classifier_nhwc_matmul, reduce_max_squeeze, squeeze_excite, input_normalization,
    softmax_channels, nhwc_input_normalization, resize_torch_bilinear, resize_keras_upsampling,
    resize_modes, resize_crops, resize_crop_output, resize_3d_and_1d, resize_1d_nearest, upsample_opset9, resize_opset10_linear,
    shufflenet_units, channel_slices, slice_opset9, split_channels, split_opset11,
    convnext_block, layer_norm_head, layer_normalization_opset17, keras_unoptimized_block,
    keras_unoptimized_pool_head, keras_convnext_block, crops]}


# Channels-first models imported also with --layout nchw and with --io-layout nhwc (OPTIONS).
RELAID = ["same_upper_even_strided", "pools_same", "mobilenet_v2_block", "residual_block",
          "conv1d_dilated", "conv3d_same", "conv_batchnorm", "global_pools", "classifier_gemm",
          "squeeze_excite", "input_normalization", "softmax_channels", "resize_torch_bilinear",
          "resize_modes", "resize_crops", "shufflenet_units", "channel_slices", "split_channels",
          "convnext_block"]


def channels_last(a):
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


# The import options of each case: the default (the layers channels last between transposes of the
# NCHW input and output), --layout nchw (channels first throughout), --io-layout nhwc (channels
# last throughout: the caller's arrays too).
OPTIONS = {None: [], "nchw": ["--layout", "nchw"], "io-nhwc": ["--io-layout", "nhwc"]}


def check(padfold, work, name, layout=None):
    d = work / (name if layout is None else f"{name}-{layout}")
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    m = MODELS[name]()
    path = d / "model.onnx"
    onnx.save(m, path)
    run([padfold, "import", path, "-o", d / "imported", "--emit-onnx", d / "normalized.onnx"] +
        OPTIONS[layout])
    specs = list((d / "imported").glob("*.json"))
    spec_file = next(p for p in specs if p.name != "import-report.json")
    spec = json.loads(spec_file.read_text())
    computed = {l["layout"] for l in spec["layers"] if l["op"] != "transpose"}
    if any(lay.endswith("C") != (layout != "nchw") for lay in computed):
        return f"{name}: the layers compute in {sorted(computed)}"
    run([padfold, "compile", spec_file, "-o", d / "bundle", "--target", "host"])
    manifest = json.loads((d / "bundle" / "manifest.json").read_text())
    blocks = ["+".join(layer["layer"] for layer in k["fused"]["layers"])
              for k in manifest["kernels"] if "fused" in k]
    if layout is None and blocks != EXPECTED_BLOCKS.get(name, []):
        return f"{name}: fused blocks {blocks}, expected {EXPECTED_BLOCKS.get(name, [])}"
    shape = [dim.dim_value for dim in m.graph.input[0].type.tensor_type.shape.dim]
    x = RNG.uniform(-1, 1, shape).astype(np.float32)
    io_last = layout == "io-nhwc"
    np.save(d / "x.npy", channels_last(x) if io_last else x)
    if spec["inputs"][0]["shape"] != list((channels_last(x) if io_last else x).shape):
        return f"{name}: the spec's input is {spec['inputs'][0]['shape']}"
    input_name = spec["inputs"][0]["name"]
    output_name = spec["outputs"][0]
    run([padfold, "run", d / "bundle", "--model", "--input", f"{input_name}={d / 'x.npy'}",
         "--output", f"{output_name}={d / 'y.npy'}"])
    got = np.load(d / "y.npy")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    # The normalized model: no auto_pad left, and ONNX Runtime computes the same on it.
    normalized = onnx.load(d / "normalized.onnx")
    auto_pads = [a.s.decode() for n in normalized.graph.node for a in n.attribute
                 if a.name == "auto_pad" and a.s.decode() != "NOTSET"]
    if auto_pads:
        return f"{name}: the normalized model still has auto_pad {auto_pads}"
    norm_session = onnxruntime.InferenceSession(str(d / "normalized.onnx"),
                                                providers=["CPUExecutionProvider"])
    # (Within float32's rounding of reordered sums: a channels-last stretch is written out relaid,
    # its MatMuls as 1x1 Convs.)
    norm_err = np.abs(norm_session.run(None, {"x": x})[0] - want).max()
    if norm_err > 1e-5 * (1 + np.abs(want).max()):
        return f"{name}: ONNX Runtime differs on the normalized model by {norm_err:.3g}"
    if io_last:
        want = channels_last(want)
    if got.shape != want.shape:
        return f"{name}: shape {got.shape}, ONNX Runtime {want.shape}"
    err = np.abs(got - want).max()
    tol = 1e-4 * (1 + np.abs(want).max())
    if not np.allclose(got, want, rtol=1e-4, atol=tol):
        return f"{name}: max |padfold - ONNX Runtime| = {err:.3g} (tolerance {tol:.3g})"
    print(f"{name} {' '.join(OPTIONS[layout])}: {len(manifest['kernels'])} kernel(s) {blocks or ''}, output {list(want.shape)}, "
          f"max |error| {err:.2g}: OK")
    return None


def main():
    padfold, work = sys.argv[1], pathlib.Path(sys.argv[2])
    names = sys.argv[3:] or list(MODELS)
    print(f"onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}")
    failures = []
    cases = [(n, None) for n in names] + [(n, variant) for variant in ("nchw", "io-nhwc")
                                          for n in RELAID if n in names]
    for name, layout in cases:
        try:
            failure = check(padfold, work, name, layout)
        except RuntimeError as e:
            failure = f"{name}: {e}"
        if failure:
            failures.append(failure + (f" ({' '.join(OPTIONS[layout])})" if layout else ""))
            print("FAIL:", failures[-1])
    print(f"{len(cases)} case(s), {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
