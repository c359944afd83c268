#!/usr/bin/env python3
"""`padfold port`: the PyTorch module it writes computes what the source model computes, and its
report is right about every layer.

- Keras models converted by tf2onnx (tests/data/keras): the ported module on Keras's input equals
  Keras's own output; every layer whose pads read as a named convention resolves to the same pads
  under `padfold pads` with that convention; for every zero-border conv and pool the naive PyTorch
  port (padding=dilation*(k-1)//2) is run beside the exact pads, and the report's naive_differs
  says exactly whether the two outputs differ.
- torch.onnx exports of small networks (asymmetric ZeroPad2d, ceil_mode and count_include_pad
  pools, transposed convs, squeeze-and-excite, concat, F.interpolate nearest and bilinear): the
  ported module equals torch's output.
- A padfold spec with every border mode, ceil_mode pools, a cropped and an extended transposed
  conv, resize layers and a transpose layer: the ported module equals `padfold run --model` on the same input.
- Refusals: an int8 model, a model with nodes left to the caller, --emit with --to keras, a spec
  without weight files: a clear error naming the layer or node, and nothing written.

Usage: port_test.py PADFOLD_BIN REPO_DIR WORK_DIR   (Debian's /usr/bin/python3: torch and onnx)
"""
import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from e2e_util import run, run_checks

TOL = 1e-5  # of the largest output value


def load_module(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def close(got, want):
    got = np.asarray(got)
    if got.size != want.size:
        return f"shape {got.shape}, expected {want.shape}"
    err = float(np.max(np.abs(got.reshape(want.shape) - want)))
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return None if err <= TOL * scale else f"max |error| {err:.3g} > {TOL} x {scale:.3g}"


def port(padfold, model, work, *extra):
    py = work / (pathlib.Path(model).stem + ".py")
    run([padfold, "port", model, "--emit", py, *extra])
    report = json.loads(run([padfold, "port", model, "--json", *extra]))
    return load_module(py), report


def padded(x, before, after, value=0.0):
    pads = []
    for b, a in zip(reversed(before), reversed(after)):
        pads += [b, a]
    return F.pad(x, pads, value=value)


def naive_matches_exact(layer, dims):
    """Runs the layer's op with its exact pads and with the naive port's symmetric k//2 pads on
    random data: whether the two outputs are the same."""
    axes = layer["axes"]
    spatial = [a["input"] for a in axes]
    k, s, d = layer["kernel"], layer["stride"], layer["dilation"]
    half = [di * (ki - 1) // 2 for ki, di in zip(k, d)]
    if all(a["before"] == 0 and a["after"] == 0 for a in axes):
        half = [0] * dims
    before, after = [a["before"] for a in axes], [a["after"] for a in axes]
    if [(a["naive_before"], a["naive_after"]) for a in axes] != [(h, h) for h in half]:
        raise RuntimeError(f"{layer['name']}: the report's naive pads are not {half}: {axes}")
    g = torch.Generator().manual_seed(7)
    x = torch.rand([1, 2, *spatial], generator=g) - 0.5
    op = layer["op"]
    conv = {1: F.conv1d, 2: F.conv2d}[dims]
    if op.startswith("conv") and not op.startswith("conv_transpose"):
        w = torch.rand([3, 2, *k], generator=g) - 0.5
        exact = conv(padded(x, before, after), w, stride=s, dilation=d)
        naive = conv(x, w, stride=s, padding=half, dilation=d)
    elif op.startswith("max_pool"):
        pool = {1: F.max_pool1d, 2: F.max_pool2d}[dims]
        exact = pool(padded(x, before, after, float("-inf")), k, s, 0, d)
        naive = pool(x, k, s, half, d)
    else:
        pool = {1: F.avg_pool1d, 2: F.avg_pool2d}[dims]
        ones = torch.ones_like(x)
        exact = pool(padded(x, before, after), k, s) / pool(padded(ones, before, after), k, s)
        naive = pool(x, k, s, half, count_include_pad=False)
    return exact.shape == naive.shape and bool(torch.allclose(exact, naive, atol=1e-6))


def check_keras(padfold, repo, work, name):
    data = repo / "tests/data/keras"
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    x = np.load(data / f"x_{name}.npy")
    extra = []
    # tf2onnx --tflite may leave the batch dynamic: the error names the input to size.
    r = subprocess.run([padfold, "port", data / f"{name}.onnx"], capture_output=True, text=True)
    if r.returncode:
        inp = re.search(r"graph input '([^']+)'.*give its size with --input", r.stderr)
        if not inp:
            return f"{name}: {r.stderr.strip()}"
        extra = ["--input", f"{inp.group(1)}={'x'.join(map(str, x.shape))}"]
    module, report = port(padfold, data / f"{name}.onnx", d, *extra)
    # The Keras model's source (run against Keras by port_keras_check.py, where TensorFlow is).
    keras_py = d / f"{name}_keras.py"
    run([padfold, "port", data / f"{name}.onnx", "--to", "keras", "--emit", keras_py, *extra])
    compile(keras_py.read_text(), str(keras_py), "exec")
    with torch.no_grad():
        got = module.Model().eval()(torch.from_numpy(x)).numpy()
    failure = close(got, np.load(data / f"y_{name}.npy"))
    if failure:
        return f"{name}: the ported module differs from Keras: {failure}"
    for L in report["layers"]:
        axes = L["axes"]
        if not L["reads_as"].startswith("explicit"):
            args = ["--input", ",".join(str(a["input"]) for a in axes),
                    "--kernel", ",".join(map(str, L["kernel"])),
                    "--stride", ",".join(map(str, L["stride"])),
                    "--dilation", ",".join(map(str, L["dilation"])),
                    "--padding", L["reads_as"], "--json"]
            if L["op"].startswith("conv_transpose"):
                args.append("--transposed")
            p = json.loads(run([padfold, "pads", *args]))
            got = [(a["before"], a["after"], a["output"]) for a in p["axes"]]
            want = [(a["before"], a["after"], a["output"]) for a in axes]
            if got != want:
                return f"{name}/{L['name']}: reads as {L['reads_as']}, whose pads are {got}, not {want}"
        if L["border"] == "zeros" and not L["op"].startswith("conv_transpose") and len(axes) <= 2:
            same = naive_matches_exact(L, len(axes))
            if same == L["naive_differs"]:
                return (f"{name}/{L['name']}: the naive port {'equals' if same else 'differs from'}"
                        f" the exact pads, but the report says naive_differs={L['naive_differs']}")
    # A Keras model's own 'same', 'valid' and 'causal' layers are Keras's native options.
    for L in json.loads(run([padfold, "port", data / f"{name}.onnx", "--to", "keras", "--json",
                             *extra]))["layers"]:
        if L["reads_as"] in ("valid", "same_upper", "causal") and L["border"] == "zeros" and \
                not L["native_exact"]:
            return f"{name}/{L['name']}: Keras's padding='{L['reads_as']}' not found: {L['native']}"
    n_exact = sum(not L["native_exact"] for L in report["layers"])
    if f"{n_exact} need explicit padding" not in report["summary"]:
        return f"{name}: summary '{report['summary']}' does not count {n_exact} layers"
    return None


class TorchNet(nn.Module):
    """Pads PyTorch users write that padfold resolves: an asymmetric ZeroPad2d before a strided
    conv, a ceil_mode max pool, a count_include_pad=False avg pool, a transposed conv with
    output_padding, depthwise + squeeze-and-excite, a concat and a global pool head."""

    def __init__(self):
        super().__init__()
        self.pad = nn.ZeroPad2d((0, 1, 0, 1))
        self.stem = nn.Conv2d(3, 8, 3, 2)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(3, 2, 1, ceil_mode=True)
        self.dw = nn.Conv2d(8, 8, 5, 1, 2, groups=8)
        self.se1, self.se2 = nn.Conv2d(8, 4, 1), nn.Conv2d(4, 8, 1)
        self.avg = nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)
        self.up = nn.ConvTranspose2d(8, 6, 3, 2, 1, output_padding=1)
        self.side = nn.ConvTranspose2d(8, 6, 2, 2)
        self.head = nn.Conv2d(12, 10, 1)

    def forward(self, x):
        y = self.pool(F.relu(self.bn(self.stem(self.pad(x)))))
        y = F.hardswish(self.dw(y))
        s = torch.sigmoid(self.se2(F.relu(self.se1(F.adaptive_avg_pool2d(y, 1)))))
        y = self.avg(y * s)
        y = torch.cat([F.relu(self.up(y)), self.side(y)], 1)
        return self.head(y).mean((2, 3))


class DilatedNet(nn.Module):
    """A reflect-padded dilated conv (ONNX Pad reflect, folded as the border), a (3, 5) kernel of
    stride (2, 1), a count_include_pad avg pool and a 1-D tail."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(4, 6, 3, 1, 2, dilation=2, padding_mode="reflect")
        self.b = nn.Conv2d(6, 6, (3, 5), (2, 1), (1, 2))
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=True)

    def forward(self, x):
        return torch.tanh(self.pool(F.leaky_relu(self.b(F.relu6(self.a(x))), 0.1)))


class UpsamplingNet(nn.Module):
    """F.interpolate as segmentation heads use it: nearest by 2, bilinear to an odd size
    (align_corners False and True), exported as Resize nodes the port gathers exactly."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, 2, 1)
        self.b = nn.Conv2d(4, 5, 1)

    def forward(self, x):
        y = self.b(F.interpolate(torch.relu(self.a(x)), scale_factor=2, mode="nearest"))
        return (F.interpolate(y, size=(23, 17), mode="bilinear", align_corners=False) +
                F.interpolate(y, size=(23, 17), mode="bilinear", align_corners=True))


def check_torch(padfold, repo, work, name):
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    torch.manual_seed(3)
    net, shape = {"torch_net": (TorchNet, [1, 3, 35, 33]),
                  "torch_dilated": (DilatedNet, [1, 4, 17, 19]),
                  "torch_upsampling": (UpsamplingNet, [1, 3, 18, 13])}[name]
    net = net().eval()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    x = torch.rand(shape) - 0.5
    with torch.no_grad():
        want = net(x).numpy()
    torch.onnx.export(net, x, d / f"{name}.onnx", opset_version=13, input_names=["x"])
    np.save(d / "x.npy", x.numpy())  # for tests/e2e/port_keras_check.py (opt-in, TensorFlow)
    np.save(d / "want.npy", want)
    module, _ = port(padfold, d / f"{name}.onnx", d)
    with torch.no_grad():
        got = module.Model().eval()(x).numpy()
    failure = close(got, want)
    return f"{name}: the ported module differs from torch: {failure}" if failure else None


def border_spec(d):
    rng = np.random.default_rng(5)
    (d / "weights").mkdir(parents=True, exist_ok=True)
    layers = []

    def conv(name, inp, cin, cout, k, s, padding, border, dil=1, extra=None):
        w = (rng.random((k, k, cin, cout), dtype=np.float32) - 0.5)
        b = (rng.random((cout,), dtype=np.float32) - 0.5)
        np.save(d / "weights" / f"{name}_w.npy", w)
        np.save(d / "weights" / f"{name}_b.npy", b)
        L = {"name": name, "op": "conv2d", "input": inp, "layout": "NHWC",
             "weight_layout": "HWIO", "out_channels": cout, "kernel": [k, k], "stride": [s, s],
             "dilation": [dil, dil], "padding": padding, "border": border, "bias": True,
             "weight_files": {"weights": f"weights/{name}_w.npy", "bias": f"weights/{name}_b.npy"}}
        L.update(extra or {})
        layers.append(L)

    conv("reflect", "x", 3, 4, 3, 2, "same_upper", "reflect", extra={"activation": "silu"})
    conv("symmetric", "reflect", 4, 4, 4, 1, "same_lower", "symmetric",
         extra={"activation": "gelu_tanh"})
    conv("replicate", "symmetric", 4, 5, 3, 1, [2, 1, 0, 2], "replicate", dil=2)
    conv("circular", "replicate", 5, 4, 3, 1, "same", "circular")
    conv("constant", "circular", 4, 4, 2, 1, "same_upper",
         {"mode": "constant", "value": 0.5}, extra={"activation": "hard_swish"})
    # Negative pads crop: a conv padding the other sides, an average pool counting its pads.
    conv("cropc", "constant", 4, 4, 2, 1, [-1, 1, 0, -1], "zeros")
    layers.append({"name": "maxp", "op": "max_pool2d", "input": "cropc", "kernel": [3, 3],
                   "stride": [2, 2], "padding": [1, 1], "ceil_mode": True, "border": "reflect"})
    layers.append({"name": "avgp", "op": "avg_pool2d", "input": "constant", "kernel": [2, 3],
                   "stride": [2, 2], "padding": [1, -1, 0, 1], "ceil_mode": True,
                   "count_include_pad": True})
    w = rng.random((4, 3, 3, 3), dtype=np.float32) - 0.5  # IOHW
    np.save(d / "weights" / "up_w.npy", w)
    np.save(d / "weights" / "up_b.npy", rng.random((3,), dtype=np.float32) + 0.5)
    # output_shape past the full output: zeros there, plus the bias as everywhere.
    layers.append({"name": "up", "op": "conv_transpose2d", "input": "maxp", "layout": "NHWC",
                   "weight_layout": "IOHW", "out_channels": 3, "kernel": [3, 3], "stride": [2, 2],
                   "padding": [1, 0, 0, 0], "output_shape": [7, 8], "bias": True,
                   "weight_files": {"weights": "weights/up_w.npy", "bias": "weights/up_b.npy"}})
    layers.append({"name": "near", "op": "resize", "input": "avgp", "mode": "nearest",
                   "coordinate_transformation_mode": "tf_half_pixel_for_nn",
                   "nearest_mode": "round_prefer_ceil", "scales": [1.5, 1.0]})
    layers.append({"name": "lin", "op": "resize", "input": "near", "mode": "linear",
                   "coordinate_transformation_mode": "half_pixel", "output_size": [11, 3]})
    layers.append({"name": "nchw", "op": "transpose", "input": "lin", "perm": [0, 3, 1, 2]})
    # A crop past two edges: those outputs are the extrapolation value.
    layers.append({"name": "crop", "op": "resize", "input": "near", "mode": "linear",
                   "coordinate_transformation_mode": "tf_crop_and_resize",
                   "roi": [[-0.2, 0.9], [0.3, 1.25]], "extrapolation_value": -3.5,
                   "output_size": [6, 7]})
    spec = {"model": "borders", "inputs": [{"name": "x", "shape": [1, 11, 10, 3], "layout": "NHWC"}],
            "outputs": ["up", "nchw", "crop"], "layers": layers}
    (d / "borders.json").write_text(json.dumps(spec))
    return d / "borders.json"


def check_spec(padfold, repo, work, name):
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    spec = border_spec(d)
    x = (np.random.default_rng(9).random((1, 11, 10, 3), dtype=np.float32) - 0.5)
    np.save(d / "x.npy", x)
    run([padfold, "compile", spec, "-o", d / "bundle", "--target", "host"])
    run([padfold, "run", d / "bundle", "--model", "--input", d / "x.npy",
         "--output", f"up={d / 'up.npy'}", f"nchw={d / 'nchw.npy'}", f"crop={d / 'crop.npy'}"])
    module, report = port(padfold, spec, d)
    with torch.no_grad():
        got = module.Model()(torch.from_numpy(x))
    for out_name, g in zip(["up", "nchw", "crop"], got):
        failure = close(g.numpy(), np.load(d / f"{out_name}.npy"))
        if failure:
            return f"{name}: output {out_name} differs from padfold run --model: {failure}"
    if not (np.load(d / "crop.npy") == -3.5).any():
        return f"{name}: the crop reads nothing outside its input"
    fixes = {L["name"]: L for L in report["layers"]}
    if fixes["symmetric"]["native_exact"] or "symmetric" not in fixes["symmetric"]["fix"]:
        return f"{name}: a symmetric border has no PyTorch padding_mode: {fixes['symmetric']}"
    if not fixes["circular"]["native_exact"]:
        return f"{name}: a symmetric circular pad is nn.Conv2d's padding_mode: {fixes['circular']}"
    return None


def refused(padfold, cmd, want, nothing_in):
    before = sorted(p.name for p in nothing_in.iterdir())
    r = subprocess.run([str(c) for c in [padfold, *cmd]], capture_output=True, text=True)
    after = sorted(p.name for p in nothing_in.iterdir())
    if r.returncode == 0:
        return f"{cmd} succeeded; expected an error naming {want}"
    if any(w not in r.stderr for w in want):
        return f"{cmd}: error '{r.stderr.strip()}' does not name {want}"
    if before != after:
        return f"{cmd} wrote {set(after) - set(before)} although it failed"
    return None


class ErfNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)

    def forward(self, x):
        return torch.erf(self.conv(x))


def check_refusals(padfold, repo, work, name):
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    int8 = repo / "tests/data/int8/ort_qdq.onnx"
    failure = (refused(padfold, ["port", int8, "--emit", d / "q.py"], ["int8", "layer '"], d) or
               refused(padfold, ["port", repo / "tests/data/keras/conv_pool.onnx", "--emit",
                                 d / "missing" / "m.py"], ["does not exist"], d))
    if failure:
        return failure
    model = d / "erf.onnx"
    torch.onnx.export(ErfNet(), torch.rand(1, 1, 5, 5), model, opset_version=13,
                      input_names=["x"])
    failure = (refused(padfold, ["port", model, "--emit", d / "erf.py"], ["(Erf)", "caller"], d) or
               refused(padfold, ["port", model, "--to", "onnx", "--emit", d / "k.py"],
                       ["--to pytorch"], d))
    if failure:
        return failure
    text = run([padfold, "port", model])
    if not re.search(r"left to the caller: ONNX node '[^']*' \(Erf\)", text) or \
            "1 layers with a window" not in text:
        return f"the report of a partly imported model:\n{text}"
    spec = d / "noweights.json"
    spec.write_text(json.dumps({"model": "m", "layers": [
        {"name": "c1", "op": "conv2d", "input_shape": [1, 3, 8, 8], "out_channels": 2,
         "kernel": [3, 3], "padding": "same"}]}))
    return refused(padfold, ["port", spec, "--emit", d / "m.py"], ["layer 'c1'", "weight"], d)


def check_hostile_text(padfold, repo, work, name):
    """Names, descriptions and file names come from the model: in the generated code's comments and
    docstring none of it may become code (a carriage return ends a comment, three quotes a
    docstring)."""
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    (d / "weights").mkdir()
    np.save(d / "weights" / "w.npy", np.ones((1, 2, 1, 1), np.float32))  # OIHW
    payload = 'x\rraise SystemExit(7)\n"""\nraise SystemExit(8)\\N{'
    spec = d / 'odd """ name.json'
    spec.write_text(json.dumps({"model": "m", "description": payload, "layers": [
        {"name": "c1", "op": "conv2d", "input_shape": [1, 2, 3, 3], "layout": "NCHW",
         "out_channels": 1, "kernel": [1, 1], "padding": "valid", "description": payload,
         "weight_files": {"weights": "weights/w.npy"}}]}))
    for to in ("pytorch", "keras"):
        py = d / f"m_{to}.py"
        run([padfold, "port", spec, "--to", to, "--emit", py])
        text = py.read_text()
        try:
            tree = compile(text, str(py), "exec", flags=0x400)  # ast.PyCF_ONLY_AST
        except SyntaxError as e:
            return f"{to}: the module does not parse: {e}"
        if "SystemExit" in "".join(type(n).__name__ + getattr(n, "id", "") for n in
                                   __import__("ast").walk(tree)):
            return f"{to}: the payload became code:\n{text}"
    module = load_module(d / "m_pytorch.py")
    with torch.no_grad():
        y = module.Model()(torch.ones(1, 2, 3, 3))
    return None if float(y.sum()) == 18.0 else f"the module computes {y}"


def main():
    padfold, repo, work = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    keras = sorted(p.stem for p in (repo / "tests/data/keras").glob("*.onnx"))
    status = run_checks(check_keras, keras, padfold, repo, work)
    status |= run_checks(check_torch, ["torch_net", "torch_dilated", "torch_upsampling"], padfold,
                         repo, work)
    status |= run_checks(check_spec, ["borders"], padfold, repo, work)
    status |= run_checks(check_refusals, ["refusals"], padfold, repo, work)
    status |= run_checks(check_hostile_text, ["hostile_text"], padfold, repo, work)
    print("port checks", "failed" if status else "passed", f"({len(keras)} Keras models)")
    return status


if __name__ == "__main__":
    sys.exit(main())
