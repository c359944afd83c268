# Multi-node seeds for tests/fuzz/fuzz_onnx (multi_*.onnx; the .onnx files are committed).
#   .venv/bin/python tests/fuzz/seeds/make_onnx_seeds.py tests/fuzz/seeds/onnx
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(0)

def init(name, shape, dtype=np.float32):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)

def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)

def save(graph, name, opset=13):
    m = helper.make_model(graph, producer_name="padfold-fuzz-seeds",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    onnx.save(m, f"{out}/{name}.onnx")

# A small backbone: reflect Pad -> Conv SAME_UPPER stride 2 -> Relu -> MaxPool, a second branch
# Conv -> Clip(0, 6), Add, Concat, an unsupported Sigmoid feeding a conv, Identity, Dropout.
nodes = [
    helper.make_node("Pad", ["x", "pads"], ["xp"], name="pad0", mode="reflect"),
    helper.make_node("Conv", ["xp", "w1", "b1"], ["c1"], name="conv1", auto_pad="SAME_UPPER",
                     strides=[2, 2]),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2],
                     ceil_mode=1),
    helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1], group=2),
    helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"], name="relu6"),
    helper.make_node("Identity", ["p1"], ["p1i"], name="id"),
    helper.make_node("Add", ["r2", "p1i"], ["s"], name="add"),
    helper.make_node("Sigmoid", ["s"], ["g"], name="gate"),
    helper.make_node("Dropout", ["g"], ["gd"], name="drop"),
    helper.make_node("Conv", ["gd", "w3", "b3"], ["c3"], name="conv3", kernel_shape=[1, 1]),
    helper.make_node("Concat", ["c3", "s"], ["y"], name="cat", axis=1),
]
g = helper.make_graph(
    nodes, "backbone",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "16", "W"])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    [ints("pads", [0, 0, 1, 2, 0, 0, 2, 1]), init("w1", [4, 3, 3, 3]), init("b1", [4]),
     init("w2", [4, 2, 3, 3]), numpy_helper.from_array(np.array(0, np.float32), "lo"),
     numpy_helper.from_array(np.array(6, np.float32), "hi"), init("w3", [2, 4, 1, 1]),
     init("b3", [2])])
save(g, "multi_backbone")

# Decoder-ish: ConvTranspose with output_shape and SAME_LOWER, LeakyRelu, edge Pad via a Constant,
# AveragePool SAME_LOWER counting pads, an old-opset Pad (attributes) in a second model.
nodes = [
    helper.make_node("ConvTranspose", ["x", "wt", "bt"], ["u"], name="up", strides=[2, 2],
                     auto_pad="SAME_LOWER", output_shape=[9, 9]),
    helper.make_node("LeakyRelu", ["u"], ["ul"], name="lrelu", alpha=0.2),
    helper.make_node("Constant", [], ["pp"], name="padvals",
                     value=numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))),
    helper.make_node("Pad", ["ul", "pp"], ["up_p"], name="edge", mode="edge"),
    helper.make_node("AveragePool", ["up_p"], ["a"], name="avg", kernel_shape=[3, 3],
                     auto_pad="SAME_LOWER", count_include_pad=1),
    helper.make_node("Conv", ["a", "wd"], ["y"], name="dil", dilations=[2, 2], auto_pad="VALID"),
]
g = helper.make_graph(
    nodes, "decoder",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    [init("wt", [2, 3, 3, 3]), init("bt", [3]), init("wd", [1, 3, 2, 2])])
save(g, "multi_decoder")

nodes = [
    helper.make_node("Pad", ["x"], ["xp"], name="pad_old", mode="constant", pads=[0, 0, 2, 0, 0, 1],
                     value=1.5),
    helper.make_node("MaxPool", ["xp"], ["m"], name="mp1d", kernel_shape=[3]),
    helper.make_node("Conv", ["m", "w"], ["c"], name="c1d", auto_pad="SAME_LOWER", strides=[3]),
    helper.make_node("Clip", ["c"], ["y"], name="clip_old", min=0.0, max=6.0),
]
g = helper.make_graph(
    nodes, "old_1d",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, "seq"])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [init("w", [2, 2, 2])])
save(g, "multi_1d_opset10", opset=10)

nodes = [
    helper.make_node("Conv", ["x", "w"], ["c"], name="c3d", pads=[1, 0, 1, 1, 0, 1],
                     strides=[1, 2, 2]),
    helper.make_node("MaxPool", ["c"], ["y", "idx"], name="mp3d", kernel_shape=[2, 2, 2],
                     auto_pad="SAME_UPPER"),
    helper.make_node("ConvTranspose", ["y", "wt"], ["z"], name="ct3d", strides=[2, 2, 2],
                     output_padding=[1, 0, 1], group=2),
]
g = helper.make_graph(
    nodes, "vol",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "4", 6, 6])],
    [helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
     helper.make_tensor_value_info("idx", TensorProto.INT64, None)],
    [init("w", [4, 2, 3, 3, 3]), init("wt", [4, 1, 2, 2, 2])])
save(g, "multi_3d")

# Node tests of libonnx-testdata whose weights, pads or clip bounds are graph inputs, with those
# inputs made initializers (from test_data_set_0) so that the importer gets past "computed at run
# time".
import os
node_dir = "/usr/share/libonnx-testdata/data/node"
for t in ["conv_with_autopad_same", "conv_with_strides_and_asymmetric_padding",
          "conv_with_strides_padding", "basic_conv_with_padding", "convtranspose",
          "convtranspose_1d", "convtranspose_3d", "convtranspose_autopad_same",
          "convtranspose_dilations", "convtranspose_kernel_shape", "convtranspose_output_shape",
          "convtranspose_pad", "convtranspose_pads", "constant_pad", "edge_pad", "reflect_pad",
          "clip_splitbounds"]:
    d = f"{node_dir}/test_{t}"
    m = onnx.load(f"{d}/model.onnx")
    g = m.graph
    names = [i.name for i in g.input]
    const = {n for node in g.node for n in node.input[1:] if n}
    keep = []
    for pos, vi in enumerate(list(g.input)):
        if vi.name in const:
            t_ = onnx.TensorProto()
            with open(f"{d}/test_data_set_0/input_{pos}.pb", "rb") as f:
                t_.ParseFromString(f.read())
            t_.name = vi.name
            g.initializer.append(t_)
        else:
            keep.append(vi)
    del g.input[:]
    g.input.extend(keep)
    onnx.save(m, f"{out}/{t}_init.onnx")

# Broadcasting and quantized graphs (issue 37's probes): a squeeze-and-excite Mul by a rank-2
# [N, C] scale (ONNX broadcasts it along W), an Add of [1, C, 1, 1] and its Flatten, the quantized
# models of tests/data/int8, one of them with a bias scale vector of the wrong length and one with
# a QDQ Pad constant off the input's grid.
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
g = helper.make_graph([
    helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
    helper.make_node("GlobalAveragePool", ["c"], ["g"], name="gap"),
    helper.make_node("Flatten", ["g"], ["f"], name="flat"),
    helper.make_node("Mul", ["c", "f"], ["y"], name="se_mul")], "se_rank2", [x], [y],
    [init("w", [4, 4, 1, 1])])
save(g, "regress_se_mul_rank2_scale")
g = helper.make_graph([
    helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
    helper.make_node("GlobalAveragePool", ["c"], ["g"], name="gap"),
    helper.make_node("Flatten", ["g"], ["f"], name="flat"),
    helper.make_node("Add", ["g", "f"], ["y"], name="add")], "add_flat", [x], [y],
    [init("w", [4, 4, 1, 1])])
save(g, "regress_add_flatten_broadcast")
int8_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../data/int8")
for name in ["ort_qdq", "ort_qop", "ort_u8qdq", "ort_u8qop"]:
    onnx.save(onnx.load(f"{int8_dir}/{name}.onnx"), f"{out}/int8_{name}.onnx")
m = onnx.load(f"{int8_dir}/ort_qdq.onnx")
for t in m.graph.initializer:
    if t.name == "b1_quantized_scale":
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t)[:2], t.name))
onnx.save(m, f"{out}/regress_bias_scale_of_two_values.onnx")
m = onnx.load(f"{int8_dir}/ort_qdq.onnx")
g = m.graph
conv = next(n for n in g.node if n.op_type == "Conv" and n.input[0] == "x_DequantizeLinear_Output")
pads = next(a for a in conv.attribute if a.name == "pads")
p = list(pads.ints)
pads.ints[:] = [0, 0, 0, 0]
conv.input[0] = "xp"
g.initializer.extend([ints("pp", [0, 0, p[0], p[1], 0, 0, p[2], p[3]]),
                      numpy_helper.from_array(np.array(3.0, np.float32), "pv")])
g.node.insert(list(g.node).index(conv),
              helper.make_node("Pad", ["x_DequantizeLinear_Output", "pp", "pv"], ["xp"],
                               mode="constant"))
onnx.save(m, f"{out}/regress_qdq_pad_off_grid.onnx")
