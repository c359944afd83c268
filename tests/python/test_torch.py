"""padfold.torch: layers with TensorFlow-exact SAME (and the other conventions and borders),
checked against Keras's own outputs (tests/data/keras_layers) and against explicit-pad
references; state_dicts shared with nn.Conv2d; one op in traces; the fallback and gradients."""
import json
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import padfold
import padfold.torch as pt

from conftest import DATA
from test_run import conv_ref, padded, tf_same

KERAS = DATA / "keras_layers"


def keras_case(name):
    z = np.load(KERAS / f"{name}.npz")
    return z, json.loads(str(z["config"]))


def channels_first(a):
    return np.moveaxis(a, -1, 1)


@pytest.mark.parametrize("name", ["conv2d_same_s2_odd", "conv2d_same_s2_even_kernel",
                                  "conv2d_same_s2_even_input", "conv2d_same_dilated",
                                  "conv2d_same_s3_k5", "conv2d_same_groups",
                                  "depthwise_same_s2_k5", "conv1d_causal", "conv1d_same_s2",
                                  "conv3d_same_s2"])
def test_convs_reproduce_keras(name):
    z, cfg = keras_case(name)
    x, kernel = z["x"], z["kernel"]
    dims = x.ndim - 2
    cls = {1: pt.Conv1d, 2: pt.Conv2d, 3: pt.Conv3d}[dims]
    channels = x.shape[-1]
    if cfg["layer"] == "DepthwiseConv2D":
        # (kh, kw, C, multiplier) -> (C * multiplier, 1, kh, kw)
        out_channels, groups = channels * kernel.shape[-1], channels
        weight = kernel.reshape(*kernel.shape[:2], -1).transpose(2, 0, 1)[:, None]
    else:
        out_channels, groups = cfg["filters"], cfg["groups"]
        weight = np.moveaxis(kernel, [-1, -2], [0, 1])  # spatial..., I, O -> O, I, spatial...
    layer = cls(channels, out_channels, cfg["kernel"], cfg["strides"], cfg["padding"],
                cfg["dilation"], groups, convention="tensorflow", input_size=x.shape[1:-1])
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight)))
        layer.bias.copy_(torch.from_numpy(z["bias"]))
        y = layer(torch.from_numpy(np.ascontiguousarray(channels_first(x))))
    np.testing.assert_allclose(y.numpy(), channels_first(z["y"]), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,cls", [("maxpool2d_same_s2", pt.MaxPool2d),
                                      ("avgpool2d_same_s2", pt.AvgPool2d)])
def test_pools_reproduce_keras(name, cls):
    z, cfg = keras_case(name)
    x = np.ascontiguousarray(channels_first(z["x"]))
    pool = cls(x.shape[1], cfg["kernel"], cfg["strides"], "same", input_size=x.shape[2:])
    np.testing.assert_allclose(pool(torch.from_numpy(x)).numpy(), channels_first(z["y"]),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pool.reference(torch.from_numpy(x)).numpy(),
                               channels_first(z["y"]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [(8, 8), (9, 9), (8, 11), (13, 10)])
@pytest.mark.parametrize("k", [3, 4])
def test_conv2d_tensorflow_same_stride_2_is_the_explicit_pad_reference(size, k):
    torch.manual_seed(size[0] * 10 + k)
    conv = pt.Conv2d(3, 4, k, stride=2, padding="same", convention="tensorflow",
                     input_size=size)
    pads = [tf_same(n, k, 2) for n in size]
    assert conv.pads_before == tuple(p[0] for p in pads)
    assert conv.pads_after == tuple(p[1] for p in pads)
    x = torch.rand(2, 3, *size) * 2 - 1
    with torch.no_grad():
        y = conv(x)
    want = conv_ref(x.numpy(), conv.weight.detach().numpy(), conv.bias.detach().numpy(),
                    [p[0] for p in pads], [p[1] for p in pads], stride=2)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("border", ["reflect", "symmetric", "replicate", "circular", "constant"])
def test_border_modes_and_their_fallback(border):
    torch.manual_seed(3)
    conv = pt.Conv2d(2, 3, 4, stride=1, padding="same", convention="onnx_lower",
                     input_size=(6, 7), border=border, border_value=0.25)
    x = torch.rand(1, 2, 6, 7)
    with torch.no_grad():
        y = conv(x)
    want = conv_ref(x.numpy(), conv.weight.detach().numpy(), conv.bias.detach().numpy(),
                    conv.pads_before, conv.pads_after, stride=1, border=border, value=0.25)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)
    # Where padfold cannot run (float64 here, another device likewise): F.pad + PyTorch, warned.
    with pytest.warns(UserWarning, match="no padfold kernel"):
        with torch.no_grad():
            y64 = conv.double()(x.double())
    np.testing.assert_allclose(y64.numpy(), want, rtol=1e-9, atol=1e-9)


def test_state_dict_is_nn_conv2d_s():
    ours = pt.Conv2d(4, 6, 3, stride=2, padding="same", groups=2, input_size=(9, 9))
    theirs = nn.Conv2d(4, 6, 3, stride=2, groups=2)
    theirs.load_state_dict(ours.state_dict())
    ours2 = pt.Conv2d(4, 6, 3, stride=2, padding="same", groups=2, input_size=(9, 9))
    ours2.load_state_dict(theirs.state_dict())
    x = torch.rand(1, 4, 9, 9)
    with torch.no_grad():
        # Keras SAME on 9 with k 3 s 2 is symmetric (1, 1): nn.Conv2d(padding=1) agrees.
        np.testing.assert_allclose(ours2(x).numpy(), F.conv2d(x, theirs.weight, theirs.bias, 2, 1,
                                                               1, 2).numpy(), rtol=1e-4, atol=1e-5)


def test_one_op_in_traces_and_gradients_from_the_reference():
    conv = pt.Conv2d(3, 4, 4, stride=2, padding="same", input_size=(9, 10))
    x = torch.rand(1, 3, 9, 10)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(conv, x)
    kinds = [n.kind() for n in traced.graph.nodes()]
    assert kinds.count("padfold::window") == 1 and "aten::conv2d" not in kinds
    np.testing.assert_allclose(traced(x).detach().numpy(), conv(x).detach().numpy(), rtol=1e-6)
    xg = x.clone().requires_grad_()
    conv(xg).square().sum().backward()
    xr = x.clone().requires_grad_()
    w = conv.weight.detach().clone().requires_grad_()
    conv.reference(xr, w, conv.bias.detach()).square().sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xr.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(conv.weight.grad.numpy(), w.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_input_size_is_fixed_and_required():
    with pytest.raises(ValueError, match="input_size"):
        pt.Conv2d(3, 4, 3)
    conv = pt.Conv2d(3, 4, 3, input_size=(8, 8))
    with pytest.raises(ValueError, match=r"\(N, 3, 8, 8\)"):
        conv(torch.rand(1, 3, 9, 8))
    # Each batch size gets its kernel.
    with torch.no_grad():
        assert conv(torch.rand(3, 3, 8, 8)).shape == (3, 4, 8, 8)
        assert conv(torch.rand(1, 3, 8, 8)).shape == (1, 4, 8, 8)


@pytest.mark.parametrize("make, name", [
    (lambda: pt.Conv2d(3, 4, 0, input_size=(8, 8)), "kernel_size"),
    (lambda: pt.Conv2d(3, 4, 2.5, input_size=(8, 8)), "kernel_size"),
    (lambda: pt.Conv2d(3, 4, (3, 3, 3), input_size=(8, 8)), "kernel_size"),
    (lambda: pt.Conv2d(3, 4, 3, stride=0, input_size=(8, 8)), "stride"),
    (lambda: pt.Conv2d(3, 4, 3, stride=True, input_size=(8, 8)), "stride"),
    (lambda: pt.Conv2d(3, 4, 3, dilation=-1, input_size=(8, 8)), "dilation"),
    (lambda: pt.Conv2d(3, 4, 3, groups=0, input_size=(8, 8)), "groups"),
    (lambda: pt.Conv2d(3, 4, 3, groups=2, input_size=(8, 8)), "groups=2"),
    (lambda: pt.Conv2d(0, 4, 3, input_size=(8, 8)), "in_channels"),
    (lambda: pt.Conv2d(3, 4.0, 3, input_size=(8, 8)), "out_channels"),
    (lambda: pt.Conv2d(3, 4, 3, input_size=(0, 8)), "input_size"),
    (lambda: pt.Conv2d(3, 4, 3, input_size="8x8"), "input_size"),
    (lambda: pt.Conv2d(3, 4, 3, input_size=(8, 8), border="wrap"), "border"),
    (lambda: pt.Conv2d(3, 4, 3, input_size=(8, 8), border="constant",
                       border_value=float("nan")), "border_value"),
    (lambda: pt.MaxPool2d(0, 2, input_size=(8, 8)), "channels"),
])
def test_odd_arguments_are_refused_at_construction_naming_them(make, name):
    # Refused where the module is built, with the argument named: never rounded (2.5 -> 2),
    # never a ZeroDivisionError (groups=0), never a failure at the first forward.
    with pytest.raises(ValueError, match=name):
        make()


@pytest.mark.parametrize("padding, convention", [("bogus", "tensorflow"), ("same", "bogus"),
                                                  ([1, 2, 3], None)])
def test_a_padding_padfold_cannot_resolve_is_refused_at_construction(padding, convention):
    with pytest.raises(padfold.Error):
        pt.Conv2d(3, 4, 3, padding=padding, convention=convention, input_size=(8, 8))


def test_prepared_weights_follow_the_parameter():
    """The kernel reads Winograd weights prepared once; a new value of the parameter, however it
    arrives (load_state_dict, an in-place change, a write through .data), is prepared again."""
    conv = pt.Conv2d(8, 16, 3, padding="same", input_size=(12, 12))
    x = torch.rand(1, 8, 12, 12)

    def check():
        with torch.no_grad():
            want = F.conv2d(F.pad(x, [1, 1, 1, 1]), conv.weight, conv.bias)
            np.testing.assert_allclose(conv(x).numpy(), want.numpy(), rtol=1e-4, atol=1e-4)

    check()
    assert padfold.load(conv.kernel(1)).layer("layer").prepare is not None
    prepared = conv._prepared[conv.kernel(1)][2]
    check()
    assert conv._prepared[conv.kernel(1)][2] is prepared  # not prepared again
    conv.load_state_dict(pt.Conv2d(8, 16, 3, padding="same", input_size=(12, 12)).state_dict())
    check()
    with torch.no_grad():
        conv.weight.mul_(-2)
    check()
    conv.weight.data.copy_(torch.rand(16, 8, 3, 3))
    check()
    conv.weight = nn.Parameter(torch.rand(16, 8, 3, 3))
    check()
