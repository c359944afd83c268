"""Arrays reach the kernels without a copy: out= is written in place, and an array that does not
fit a buffer (dtype, shape, strides, read-only output) is refused naming the buffer, before
anything runs. Bad specs, layers and closed bundles raise padfold.Error with the CLI's message."""
import importlib.metadata
import json
import os
import pathlib
import sys

import numpy as np
import pytest
import torch

import padfold

SPEC = {"model": "py_buffers", "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
        "layers": [{"name": "stem", "op": "conv2d", "input_shape": [1, 7, 7, 3],
                    "out_channels": 8, "kernel": 4, "stride": 2, "padding": "same",
                    "bias": True}]}


@pytest.fixture(scope="module")
def bundle():
    with padfold.compile(SPEC) as b:
        yield b


@pytest.fixture
def args(rng):
    return (rng.uniform(-1, 1, (1, 7, 7, 3)).astype(np.float32),
            rng.uniform(-1, 1, (4, 4, 3, 8)).astype(np.float32),
            rng.uniform(-1, 1, 8).astype(np.float32))


def test_out_is_written_in_place(bundle, args):
    x, w, b = args
    layer = bundle.layer("stem")
    want = layer(x, weights=w, bias=b)
    out = np.full((1, 4, 4, 8), np.nan, np.float32)
    address = out.__array_interface__["data"][0]
    assert layer(x, weights=w, bias=b, out=out) is out
    assert out.__array_interface__["data"][0] == address
    np.testing.assert_array_equal(out, want)
    # A PyTorch output tensor too: the same memory, written by the kernel.
    t = torch.full((1, 4, 4, 8), float("nan"))
    ptr = t.data_ptr()
    assert layer(torch.from_numpy(x), weights=torch.from_numpy(w), bias=torch.from_numpy(b),
                 out=t) is t
    assert t.data_ptr() == ptr
    np.testing.assert_array_equal(t.numpy(), want)


def test_an_input_is_read_where_it_is(bundle, args):
    # The kernel reads the caller's memory: writing the input array between two calls (same
    # buffer object) changes the result, which a copy made at binding time could not show.
    x, w, b = args
    layer = bundle.layer("stem")
    first = layer(x, weights=w, bias=b)
    x[...] = 0
    second = layer(x, weights=w, bias=b)
    np.testing.assert_allclose(second, np.broadcast_to(b, second.shape), rtol=1e-6, atol=1e-6)
    assert not np.allclose(first, second)


def test_a_non_contiguous_view_is_refused_not_copied(bundle, args):
    x, w, b = args
    wide = np.zeros((1, 7, 14, 3), np.float32)
    view = wide[:, :, ::2, :]
    assert view.shape == x.shape
    with pytest.raises(padfold.TensorError, match=r"buffer 'input'.*stride"):
        bundle.layer("stem")(view, weights=w, bias=b)
    transposed = np.ascontiguousarray(w.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    with pytest.raises(padfold.TensorError, match=r"buffer 'weights'.*stride"):
        bundle.layer("stem")(x, weights=transposed, bias=b)


def test_dtype_shape_and_read_only_output_are_refused(bundle, args):
    x, w, b = args
    layer = bundle.layer("stem")
    with pytest.raises(padfold.TensorError, match=r"buffer 'input': dtype float64"):
        layer(x.astype(np.float64), weights=w, bias=b)
    with pytest.raises(padfold.TensorError, match=r"buffer 'bias'.*(shape|dim)"):
        layer(x, weights=w, bias=np.zeros(7, np.float32))
    with pytest.raises(padfold.TensorError, match=r"buffer 'output'"):
        layer(x, weights=w, bias=b, out=np.zeros((1, 4, 4, 9), np.float32))
    ro = np.zeros((1, 4, 4, 8), np.float32)
    ro.setflags(write=False)
    with pytest.raises(padfold.TensorError, match=r"buffer 'output'.*writable"):
        layer(x, weights=w, bias=b, out=ro)
    with pytest.raises(padfold.TensorError, match=r"buffer 'input'.*list"):
        layer([[1.0]], weights=w, bias=b)
    with pytest.raises(TypeError, match=r"missing bias"):
        layer(x, weights=w)
    with pytest.raises(TypeError, match=r"no buffer 'kernel'"):
        layer(x, kernel=w, bias=b)


def test_an_output_overlapping_an_input_is_refused(bundle, args):
    # The kernels read their inputs while they write (tile by tile): out= may not share memory
    # with an input, as the C runtime refuses (PF_ERR_OVERLAP). Arrays that only touch are apart.
    x, w, b = args
    layer = bundle.layer("stem")
    mem = np.zeros(147 + 128, np.float32)
    mem[:147] = x.ravel()
    x_in = mem[:147].reshape(x.shape)
    with pytest.raises(padfold.TensorError, match=r"buffer 'output' .* overlaps buffer 'input'"):
        layer(x_in, weights=w, bias=b, out=mem[100:228].reshape(1, 4, 4, 8))
    np.testing.assert_array_equal(mem[:147], x.ravel())  # nothing ran
    t = torch.from_numpy(mem)
    with pytest.raises(padfold.TensorError, match=r"overlaps"):
        layer(t[:147].view(x.shape), weights=torch.from_numpy(w), bias=torch.from_numpy(b),
              out=t[19:147].view(1, 4, 4, 8))
    out = mem[147:].reshape(1, 4, 4, 8)
    assert layer(x_in, weights=w, bias=b, out=out) is out
    np.testing.assert_array_equal(out, layer(x, weights=w, bias=b))


def test_missing_layer_and_closed_bundle(args):
    x, w, b = args
    bundle = padfold.compile(SPEC)
    with pytest.raises(padfold.Error, match=r"nope"):
        bundle.layer("nope")
    layer = bundle.layer("stem")
    bundle.close()
    assert bundle.closed
    with pytest.raises(padfold.Error, match=r"closed"):
        layer(x, weights=w, bias=b)
    with pytest.raises(padfold.Error, match=r"closed"):
        bundle.model()
    with pytest.raises(padfold.Error, match=r"closed"):
        bundle.layer("stem")
    with pytest.raises(padfold.Error, match=r"closed"):
        bundle.set_num_threads(1)
    with pytest.raises(padfold.Error, match=r"closed"):
        bundle.layers
    bundle.close()  # twice is no error
    assert "closed" in repr(bundle)


def test_compile_errors_are_the_cli_messages_and_nothing_is_written(cli, tmp_path):
    bad = json.loads(json.dumps(SPEC))
    bad["layers"][0]["padding"] = "samee"
    spec = tmp_path / "bad.json"
    spec.write_text(json.dumps(bad))
    out = tmp_path / "out"
    rc, _, err = cli("compile", spec, "-o", out)
    assert rc != 0
    with pytest.raises(padfold.Error) as e:
        padfold.compile(spec, out=out)
    assert err.strip() == "padfold: error: " + str(e.value)
    assert "padding" in str(e.value) and not out.exists()
    with pytest.raises(padfold.Error, match=r"padding"):
        padfold.compile(bad, out=out)
    assert not out.exists()
    with pytest.raises(padfold.Error, match=r"missing\.onnx"):
        padfold.compile(tmp_path / "missing.onnx", out=out)
    assert not out.exists()


def test_a_bundle_written_to_out_loads_again(tmp_path, args):
    x, w, b = args
    out = tmp_path / "stem"
    first = padfold.compile(SPEC, out=out)
    assert (out / "manifest.json").is_file() and first.reports
    y = first.layer("stem")(x, weights=w, bias=b)
    first.close()
    with padfold.load(out) as again:
        np.testing.assert_array_equal(again.layer("stem")(x, weights=w, bias=b), y)
        assert again.layers == ["stem"]


def test_one_version_everywhere(cli, tmp_path):
    rc, out, _ = cli("--version")
    assert rc == 0 and out.strip() == "padfold " + padfold.__version__
    assert importlib.metadata.version("padfold") == padfold.__version__
    with padfold.compile(SPEC, out=tmp_path / "b") as b:
        manifest = json.loads((b.dir / "manifest.json").read_text())
    assert manifest["padfold_version"] == padfold.__version__


def test_the_package_is_the_installed_wheel():
    # scripts/test-python.sh installs the wheel into a fresh venv: the tests import that, not the
    # source tree.
    here = pathlib.Path(padfold.__file__).resolve()
    assert pathlib.Path(sys.prefix).resolve() in here.parents
    assert (here.parent / "bin" / "padfold").is_file()
    assert os.access(here.parent / "bin" / "padfold", os.X_OK)
