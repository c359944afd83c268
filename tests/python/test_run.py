"""Compile specs from Python and run every op family on NumPy arrays and PyTorch tensors, checked
element-wise against float64 references written here (np.pad + torch's ops)."""
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import padfold

from conftest import DATA

NP_MODES = {"zeros": "constant", "constant": "constant", "reflect": "reflect",
            "symmetric": "symmetric", "replicate": "edge", "circular": "wrap"}


def tf_same(size, k, s, d=1):
    out = math.ceil(size / s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2


def padded(x, before, after, border="zeros", value=0.0):
    width = [(0, 0), (0, 0)] + list(zip(before, after))
    if NP_MODES[border] == "constant":
        return np.pad(x, width, constant_values=value if border == "constant" else 0.0)
    return np.pad(x, width, mode=NP_MODES[border])


def conv_ref(x, w, b, before, after, stride, dilation=1, groups=1, border="zeros", value=0.0,
             activation=None):
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[x.ndim]
    xp = torch.from_numpy(padded(x.astype(np.float64), before, after, border, value))
    y = conv(xp, torch.from_numpy(w.astype(np.float64)),
             None if b is None else torch.from_numpy(b.astype(np.float64)), stride, 0,
             dilation, groups).numpy()
    return np.maximum(y, 0) if activation == "relu" else y


# (layer spec, before, after, reference kwargs): NCHW-style layouts, OI... weights.
CONVS = {
    "tf_same_even_kernel": ({"op": "conv2d", "input_shape": [2, 3, 9, 10], "out_channels": 5,
                             "kernel": 4, "stride": 2, "padding": "same",
                             "convention": "tensorflow", "bias": True, "activation": "relu"},
                            dict(stride=2, activation="relu")),
    "explicit_reflect_dilated": ({"op": "conv2d", "input_shape": [1, 4, 8, 9], "out_channels": 3,
                                  "kernel": 3, "dilation": 2, "padding": [0, 1, 2, 3],
                                  "border": "reflect", "bias": True},
                                 dict(stride=1, dilation=2, border="reflect")),
    "depthwise_lower_replicate": ({"op": "conv2d", "input_shape": [1, 6, 11, 7],
                                   "out_channels": 6, "groups": 6, "kernel": 5, "stride": 2,
                                   "padding": "same", "convention": "onnx_lower",
                                   "border": "replicate", "bias": True},
                                  dict(stride=2, groups=6, border="replicate")),
    "symmetric": ({"op": "conv2d", "input_shape": [1, 3, 6, 6], "out_channels": 4, "kernel": 4,
                   "padding": "same", "convention": "scipy", "border": "symmetric"},
                  dict(stride=1, border="symmetric")),
    "circular_grouped": ({"op": "conv2d", "input_shape": [1, 4, 7, 5], "out_channels": 6,
                          "groups": 2, "kernel": 3, "padding": [1, 1, 2, 2],
                          "border": "circular", "bias": True},
                         dict(stride=1, groups=2, border="circular")),
    "constant": ({"op": "conv2d", "input_shape": [1, 2, 5, 6], "out_channels": 3, "kernel": 3,
                  "padding": 1, "border": {"mode": "constant", "value": 0.5}},
                 dict(stride=1, border="constant", value=0.5)),
    "conv1d_causal": ({"op": "conv1d", "input_shape": [2, 3, 12], "layout": "NCW",
                       "weight_layout": "OIW", "out_channels": 4, "kernel": 3, "dilation": 2,
                       "padding": "causal", "bias": True}, dict(stride=1, dilation=2)),
    "conv3d_same": ({"op": "conv3d", "input_shape": [1, 2, 5, 6, 7], "layout": "NCDHW",
                     "weight_layout": "OIDHW", "out_channels": 3, "kernel": 3, "stride": 2,
                     "padding": "same", "bias": True}, dict(stride=2)),
}


def explicit_pads(layer):
    """The pads of a case, computed here (not by padfold)."""
    shape, k = layer["input_shape"][2:], layer["kernel"]
    dims = len(shape)
    ks = [k] * dims if isinstance(k, int) else k
    s = layer.get("stride", 1)
    d = layer.get("dilation", 1)
    p = layer.get("padding")
    if p == "same" and layer.get("convention") in ("tensorflow", None):
        pads = [tf_same(n, kk, s, d) for n, kk in zip(shape, ks)]
    elif p == "same" and layer.get("convention") in ("onnx_lower", "scipy"):
        pads = [tuple(reversed(tf_same(n, kk, s, d))) for n, kk in zip(shape, ks)]
    elif p == "causal":
        pads = [((kk - 1) * d, 0) for kk in ks]
    elif isinstance(p, int):
        pads = [(p, p)] * dims
    else:
        pads = list(zip(p[:dims], p[dims:]))
    return [a for a, _ in pads], [b for _, b in pads]


@pytest.fixture(scope="module")
def convs():
    layers = []
    for name, (layer, _) in CONVS.items():
        layers.append(dict(layer, name=name))
    spec = {"model": "py_convs", "defaults": {"layout": "NCHW", "weight_layout": "OIHW"},
            "layers": layers}
    with padfold.compile(spec, fuse="none") as b:
        yield b


@pytest.mark.parametrize("name", list(CONVS))
def test_conv_matches_the_reference(convs, name, rng):
    layer_spec, kw = CONVS[name]
    layer = convs.layer(name)
    bufs = {b["name"]: b for b in layer.buffers}
    x = rng.uniform(-1, 1, bufs["input"]["shape"]).astype(np.float32)
    w = rng.uniform(-1, 1, bufs["weights"]["shape"]).astype(np.float32)
    b = rng.uniform(-1, 1, bufs["bias"]["shape"]).astype(np.float32) if "bias" in bufs else None
    before, after = explicit_pads(layer_spec)
    want = conv_ref(x, w, b, before, after, **kw)
    y = layer(x, weights=w, **({"bias": b} if b is not None else {}))
    assert isinstance(y, np.ndarray) and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    # The same kernel on torch tensors returns a torch tensor.
    yt = layer(torch.from_numpy(x), weights=torch.from_numpy(w),
               **({"bias": torch.from_numpy(b)} if b is not None else {}))
    assert isinstance(yt, torch.Tensor)
    np.testing.assert_array_equal(yt.numpy(), y)


POOLS = {
    "max_same": {"op": "max_pool", "input_shape": [1, 3, 9, 10], "kernel": 3, "stride": 2,
                 "padding": "same"},
    "avg_same_real_taps": {"op": "avg_pool", "input_shape": [2, 3, 9, 10], "kernel": 3,
                           "stride": 2, "padding": "same", "count_include_pad": False},
    "avg_counting_pads": {"op": "avg_pool", "input_shape": [1, 2, 7, 8], "kernel": 3,
                          "stride": 2, "padding": [1, 0, 2, 1], "count_include_pad": True},
}


def pool_ref(layer, x):
    before, after = explicit_pads(layer)
    k, s = layer["kernel"], layer["stride"]
    if layer["op"] == "max_pool":
        xp = padded(x.astype(np.float64), before, after, "constant", -np.inf)
        return F.max_pool2d(torch.from_numpy(xp), k, s).numpy()
    total = F.avg_pool2d(torch.from_numpy(padded(x.astype(np.float64), before, after)), k, s,
                         divisor_override=1)
    ones = np.ones_like(x, dtype=np.float64)
    count = F.avg_pool2d(torch.from_numpy(
        padded(ones, before, after, "constant", 1.0 if layer["count_include_pad"] else 0.0)),
        k, s, divisor_override=1)
    return (total / count).numpy()


def test_pools_match_the_reference(rng):
    spec = {"model": "py_pools", "defaults": {"layout": "NCHW"},
            "layers": [dict(layer, name=n) for n, layer in POOLS.items()]}
    with padfold.compile(spec, fuse="none") as b:
        for name, layer in POOLS.items():
            x = rng.uniform(-1, 1, layer["input_shape"]).astype(np.float32)
            np.testing.assert_allclose(b.layer(name)(x), pool_ref(layer, x), rtol=1e-5,
                                       atol=1e-6, err_msg=name)


def test_transposed_conv_add_and_concat(rng):
    spec = {"model": "py_graph", "defaults": {"layout": "NCHW", "weight_layout": "OIHW"},
            "inputs": [{"name": "x", "shape": [1, 4, 5, 6]}],
            "layers": [
                {"name": "up", "op": "conv_transpose2d", "input": "x", "weight_layout": "IOHW",
                 "out_channels": 3, "kernel": 3, "stride": 2, "padding": 1,
                 "output_padding": 1, "bias": True},
                {"name": "side", "op": "conv2d", "input": "x", "out_channels": 3, "kernel": 1,
                 "stride": 1},
                {"name": "sum", "op": "add", "input": ["side", "side"]},
                {"name": "cat", "op": "concat", "input": ["side", "sum"]}]}
    with padfold.compile(spec, fuse="none") as b:
        x = rng.uniform(-1, 1, (1, 4, 5, 6)).astype(np.float32)
        w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
        bias = rng.uniform(-1, 1, 3).astype(np.float32)
        want = F.conv_transpose2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                                  torch.from_numpy(bias).double(), 2, 1, 1).numpy()
        np.testing.assert_allclose(b.layer("up")(x, weights=w, bias=bias), want, rtol=1e-4,
                                   atol=1e-4)
        s = rng.uniform(-1, 1, (1, 3, 5, 6)).astype(np.float32)
        t = rng.uniform(-1, 1, (1, 3, 5, 6)).astype(np.float32)
        np.testing.assert_allclose(b.layer("sum")(s, t), s + t, rtol=1e-6)
        np.testing.assert_array_equal(b.layer("cat")(s, t), np.concatenate([s, t], axis=1))


@pytest.mark.parametrize("name", ["conv_pool", "strided_even", "depthwise", "residual",
                                  "batchnorm", "mobilenet_v2_app", "mobilenet_v3_app",
                                  "flatten_dense", "efficientnet_app", "conv1d",
                                  "conv_transpose"])
def test_whole_keras_model_from_onnx_matches_keras(name, tmp_path):
    """A Keras model as tf2onnx converts it: padfold.compile imports the .onnx, the model runs
    whole on the user's NHWC array and matches Keras's own output (tests/data/keras)."""
    x = np.load(DATA / "keras" / f"x_{name}.npy")
    want = np.load(DATA / "keras" / f"y_{name}.npy")
    with padfold.compile(DATA / "keras" / f"{name}.onnx", out=tmp_path / "bundle") as b:
        model = b.model()
        assert [tuple(i["shape"]) for i in model.inputs] == [x.shape]
        np.testing.assert_allclose(model(x), want, rtol=1e-4, atol=1e-5)
        y = torch.zeros(want.shape)
        assert model(torch.from_numpy(x), out=y) is y
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)


def test_an_int8_models_integers_say_what_they_stand_for(tmp_path):
    """A Keras model through TFLite full-int8 and tf2onnx takes and gives int8 integers: its
    input and output carry their scale and zero point (the bundle manifest's graph.quant, checked
    against the file by tests/e2e/int8_io_test.py), and it runs on the integers as TFLite does
    (within the 1 step where TFLite and ONNX Runtime differ)."""
    name = "tflite_int8_conv_pool"
    x = np.load(DATA / "int8" / f"{name}_x.npy")
    want = np.load(DATA / "int8" / f"{name}_y.npy")
    with padfold.compile(DATA / "int8" / f"{name}.onnx", out=tmp_path / "bundle") as b:
        model = b.model()
        quant = json.loads((tmp_path / "bundle" / "manifest.json").read_text())["graph"]["quant"]
        for edge in model.inputs + model.outputs:
            assert edge["dtype"] == "int8", edge
            assert quant[edge["name"]] == {"scale": edge["scale"],
                                           "zero_point": edge["zero_point"]}, edge
            assert edge["scale"] > 0 and -128 <= edge["zero_point"] <= 127, edge
        got = model(x)
        assert got.dtype == np.int8 and got.shape == want.shape
        assert np.abs(got.astype(np.int32) - want).max() <= 1


def test_an_onnx_model_in_other_layouts(tmp_path):
    """layout= and io_layout= (padfold import --layout, --io-layout): the Keras model's NHWC
    edges are its layout already; io_layout="nchw" takes and gives NCHW arrays instead (a
    transpose each way), and the same values come back."""
    x = np.load(DATA / "keras" / "x_conv_pool.npy")
    want = np.load(DATA / "keras" / "y_conv_pool.npy")
    with padfold.compile(DATA / "keras" / "conv_pool.onnx", layout="nhwc") as b:
        np.testing.assert_allclose(b.model()(x), want, rtol=1e-4, atol=1e-5)
    with padfold.compile(DATA / "keras" / "conv_pool.onnx", io_layout="nchw") as b:
        got = b.model()(np.ascontiguousarray(np.moveaxis(x, -1, 1)))
        np.testing.assert_allclose(np.moveaxis(got, 1, -1), want, rtol=1e-4, atol=1e-5)
    for option in ("layout", "io_layout"):
        with pytest.raises(padfold.Error, match=f"--{option.replace('_', '-')} 'sideways'"):
            padfold.compile(DATA / "keras" / "conv_pool.onnx", **{option: "sideways"})


def test_threads_are_settable(rng):
    spec = {"model": "py_threads", "defaults": {"layout": "NCHW", "weight_layout": "OIHW"},
            "layers": [dict(CONVS["tf_same_even_kernel"][0], name="c")]}
    with padfold.compile(spec) as b:
        layer = b.layer("c")
        x = rng.uniform(-1, 1, (2, 3, 9, 10)).astype(np.float32)
        w = rng.uniform(-1, 1, (5, 3, 4, 4)).astype(np.float32)
        bias = np.zeros(5, np.float32)
        b.set_num_threads(1)
        one = layer(x, weights=w, bias=bias)
        assert b.set_num_threads(2) == 1
        np.testing.assert_allclose(layer(x, weights=w, bias=bias), one, rtol=1e-6, atol=1e-6)


def test_a_pool_runs_the_kernels_as_halides_does(rng):
    """padfold.Pool: the same outputs on padfold's pool as on Halide's, the pool outliving the
    Python object while a bundle uses it, and bad options refused with the range."""
    spec = {"model": "py_pool", "defaults": {"layout": "NCHW", "weight_layout": "OIHW"},
            "layers": [{"name": "c", "op": "conv2d", "input_shape": [1, 8, 40, 36],
                        "out_channels": 16, "kernel": 3, "stride": 1, "padding": "same",
                        "convention": "tensorflow", "bias": True}]}
    x = rng.uniform(-1, 1, (1, 8, 40, 36)).astype(np.float32)
    w = rng.uniform(-1, 1, (16, 8, 3, 3)).astype(np.float32)
    bias = rng.uniform(-1, 1, 16).astype(np.float32)
    with padfold.compile(spec) as b:
        layer = b.layer("c")
        halide = layer(x, weights=w, bias=bias)
        pool = padfold.Pool(threads=2, spin_us=0)
        assert pool.threads == 2
        b.use_pool(pool)
        del pool  # the bundle keeps it
        np.testing.assert_array_equal(layer(x, weights=w, bias=bias), halide)
        b.use_pool(None)
        np.testing.assert_array_equal(layer(x, weights=w, bias=bias), halide)
    want = conv_ref(x, w, bias, [1, 1], [1, 1], stride=1)
    np.testing.assert_allclose(halide, want, rtol=1e-4, atol=1e-4)
    for bad in ({"threads": -1}, {"threads": 257}, {"spin_us": 2_000_000}):
        with pytest.raises(padfold.Error, match="expected 0 .the cores. to 256 threads"):
            padfold.Pool(**bad)


def test_a_prepare_kernel_writes_the_weights_its_layer_reads(rng):
    """prepare_entry=True: a 3x3 conv computed as Winograd F(4,3) from weights the caller passes
    gets Layer.prepare; the layer then reads what it writes (not the raw weights, refused) and
    computes what the per-call kernel and the reference compute."""
    spec = {"model": "py_prepare", "defaults": {"layout": "NCHW", "weight_layout": "OIHW"},
            "layers": [{"name": "c", "op": "conv2d", "input_shape": [1, 8, 12, 12],
                        "out_channels": 16, "kernel": 3, "padding": "same",
                        "border": "reflect", "bias": True}]}
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    with padfold.compile(spec, prepare_entry=True, fuse="none") as entry, \
            padfold.compile(spec, fuse="none") as per_call:
        layer, plain = entry.layer("c"), per_call.layer("c")
        assert plain.prepare is None
        assert layer.prepare is not None
        assert layer.prepare.op == "prepare_weights"
        assert layer.prepare.buffers[0]["shape"] == [16, 8, 3, 3]
        prepared = layer.prepare(w)
        weights = next(d for d in layer.buffers if d["name"] == "weights")
        assert weights["layout"].startswith("winograd_f")
        assert list(prepared.shape) == weights["shape"]
        y = layer(x, weights=prepared, bias=b)
        want = conv_ref(x, w, b, [1, 1], [1, 1], 1, border="reflect")
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        np.testing.assert_allclose(y, plain(x, weights=w, bias=b), rtol=1e-5,
                                   atol=1e-5 * np.abs(want).max())
        with pytest.raises(padfold.TensorError, match="weights"):
            layer(x, weights=w, bias=b)
