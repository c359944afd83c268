"""padfold.port and padfold.torch.from_onnx: the report as data, and the PyTorch module of a whole
model computing what the source model computes (Keras's own outputs, tests/data/keras)."""
import numpy as np
import pytest
import torch

import padfold
import padfold.torch
from conftest import DATA


def test_port_reports_every_window_layer_and_the_module():
    r = padfold.port(DATA / "keras" / "strided_even.onnx", to="pytorch")
    layers = {L["name"].split("_")[-2]: L for L in r["layers"]}
    assert len(r["layers"]) == 3
    conv = r["layers"][0]  # Conv2D(4, strides=2, padding='same') on 16x13: TF puts the odd pixel after
    assert [(a["before"], a["after"]) for a in conv["axes"]] == [(1, 1), (1, 2)]
    assert conv["reads_as"] == "same_upper" and conv["asymmetric"] and conv["input_dependent"]
    assert not conv["native_exact"] and conv["naive_differs"] and "F.pad(x, (1, 2, 1, 1))" in conv["fix"]
    assert conv["output_delta"] == [0, -1]
    assert "2 need explicit padding in PyTorch" in r["summary"], layers
    assert "class Model(nn.Module)" in r["module"]
    keras = padfold.port(DATA / "keras" / "strided_even.onnx", to="keras")
    assert all(L["native_exact"] for L in keras["layers"])  # a Keras model's own 'same' layers
    assert "def build(weights=WEIGHTS)" in keras["module"]
    assert "module" not in padfold.port(DATA / "keras" / "strided_even.onnx", to="onnx")


@pytest.mark.parametrize("name", ["conv_pool", "depthwise", "residual", "conv_transpose",
                                  "mobilenet_v3_app"])
def test_from_onnx_computes_what_keras_computes(name):
    module = padfold.torch.from_onnx(DATA / "keras" / f"{name}.onnx")
    x = np.load(DATA / "keras" / f"x_{name}.npy")
    want = np.load(DATA / "keras" / f"y_{name}.npy")
    with torch.no_grad():
        got = module.eval()(torch.from_numpy(x)).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
    assert all(isinstance(p, torch.nn.Parameter) for p in module.parameters())


def test_an_int8_model_is_reported_but_not_ported():
    r = padfold.port(DATA / "int8" / "ort_qdq.onnx")
    assert r["layers"] and r["module"] is None and "int8" in r["module_error"]
    with pytest.raises(padfold.Error, match="int8"):
        padfold.torch.from_onnx(DATA / "int8" / "ort_qdq.onnx")
    with pytest.raises(padfold.Error, match="--to 'caffe'"):
        padfold.port(DATA / "int8" / "ort_qdq.onnx", to="caffe")
