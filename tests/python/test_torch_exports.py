"""Whole PyTorch classifiers and torchvision's ShuffleNetV2 and segmentation models as
torch.onnx.export writes them (Debian's torch 1.13: torchvision-style MobileNetV2, ResNet-50
bottlenecks, EfficientNet and MobileNetV3 blocks with squeeze-and-excite, MobileNetV3's hard
swish, Keras-style ZeroPad2d pads): imported, compiled and run whole with padfold.compile, from the
input image to the class scores, and compared with torch's own output in torch's shapes ([N, K] scores, not padfold's [N, K, 1, 1])."""
import json

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

import padfold
import padfold.torch


def conv_bn(cin, cout, k, stride=1, groups=1, act=nn.ReLU6):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """torchvision's MobileNetV2 block: 1x1 expand, 3x3 depthwise, 1x1 project, residual add."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.residual = stride == 1 and cin == cout
        self.body = nn.Sequential(conv_bn(cin, hidden, 1), conv_bn(hidden, hidden, 3, stride, hidden),
                                  conv_bn(hidden, cout, 1, act=None))

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2Mini(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(conv_bn(3, 8, 3, 2), InvertedResidual(8, 8, 1, 1),
                                      InvertedResidual(8, 12, 2, 6), InvertedResidual(12, 12, 1, 6),
                                      conv_bn(12, 32, 1))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class Bottleneck(nn.Module):
    """torchvision's ResNet-50 block, with the strided 1x1 downsample branch."""

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(conv_bn(cin, width, 1, act=nn.ReLU),
                                  conv_bn(width, width, 3, stride, act=nn.ReLU),
                                  conv_bn(width, cout, 1, act=None))
        self.down = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else None
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.body(x) + (self.down(x) if self.down else x))


class ResNetMini(nn.Module):
    def __init__(self, classes=7):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(Bottleneck(8, 4, 1), Bottleneck(16, 8, 2))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.avgpool(self.layers(self.stem(x))), 1))


class SqueezeExcitation(nn.Module):
    """torchvision's: GAP, 1x1 conv + SiLU, 1x1 conv + Sigmoid, times the input (MobileNetV3's:
    ReLU and Hardsigmoid)."""

    def __init__(self, channels, squeezed, act=nn.functional.silu, gate=torch.sigmoid):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(channels, squeezed, 1), nn.Conv2d(squeezed, channels, 1)
        self.act, self.gate = act, gate

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


class MBConv(nn.Module):
    """EfficientNet's block: 1x1 expand, depthwise, squeeze-and-excite, 1x1 project, residual."""

    def __init__(self, cin, cout, k, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.residual = stride == 1 and cin == cout
        self.body = nn.Sequential(conv_bn(cin, hidden, 1, act=nn.SiLU),
                                  conv_bn(hidden, hidden, k, stride, hidden, act=nn.SiLU),
                                  SqueezeExcitation(hidden, max(1, cin // 4)),
                                  conv_bn(hidden, cout, 1, act=None))

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class EfficientNetMini(nn.Module):
    def __init__(self, classes=6):
        super().__init__()
        self.features = nn.Sequential(conv_bn(3, 8, 3, 2, act=nn.SiLU), MBConv(8, 8, 3, 1, 1),
                                      MBConv(8, 12, 5, 2, 4), MBConv(12, 12, 3, 1, 4),
                                      conv_bn(12, 24, 1, act=nn.SiLU))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(24, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


class MobileNetV3Block(nn.Module):
    """torchvision's MobileNetV3 block: 1x1 expand, depthwise, squeeze-and-excite, 1x1 project,
    hard swish throughout (x * HardSigmoid(x) in torch.onnx's opset 13)."""

    def __init__(self, cin, cout, k, stride, hidden):
        super().__init__()
        self.residual = stride == 1 and cin == cout
        self.body = nn.Sequential(conv_bn(cin, hidden, 1, act=nn.Hardswish),
                                  conv_bn(hidden, hidden, k, stride, hidden, act=nn.Hardswish),
                                  SqueezeExcitation(hidden, max(8, hidden // 4), nn.functional.relu,
                                                    nn.functional.hardsigmoid),
                                  conv_bn(hidden, cout, 1, act=None))

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV3Mini(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(conv_bn(3, 8, 3, 2, act=nn.Hardswish),
                                      MobileNetV3Block(8, 12, 5, 2, 24),
                                      MobileNetV3Block(12, 12, 3, 1, 36),
                                      conv_bn(12, 40, 1, act=nn.Hardswish))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(40, 32), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(32, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


class DenseNetMini(nn.Module):
    """torchvision's DenseNet: each dense layer (BatchNorm, ReLU, 1x1 conv, BatchNorm, ReLU, 3x3
    conv) reads the concat of every earlier feature map of its block, so the concats grow to 16
    inputs; the first layer's concat has one. A transition (BN, ReLU, 1x1 conv, 2x2 average pool)
    between the blocks."""

    class DenseLayer(nn.Module):
        def __init__(self, cin, growth):
            super().__init__()
            self.body = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, 8, 1, bias=False),
                                      nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.Conv2d(8, growth, 3, 1, 1, bias=False))

        def forward(self, features):
            return self.body(torch.cat(features, 1))

    def __init__(self, classes=3, growth=2):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 6, 3, 2, 1, bias=False), nn.BatchNorm2d(6),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.block1 = nn.ModuleList(self.DenseLayer(6 + growth * i, growth) for i in range(15))
        self.transition = nn.Sequential(nn.BatchNorm2d(6 + 15 * growth), nn.ReLU(),
                                        nn.Conv2d(6 + 15 * growth, 10, 1, bias=False),
                                        nn.AvgPool2d(2, 2))
        self.block2 = nn.ModuleList(self.DenseLayer(10 + growth * i, growth) for i in range(3))
        self.norm = nn.BatchNorm2d(10 + 3 * growth)
        self.classifier = nn.Linear(10 + 3 * growth, classes)

    @staticmethod
    def block(layers, x):
        features = [x]
        for layer in layers:
            features.append(layer(features))
        return torch.cat(features, 1)

    def forward(self, x):
        x = self.transition(self.block(self.block1, self.stem(x)))
        x = nn.functional.relu(self.norm(self.block(self.block2, x)))
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class VggMini(nn.Module):
    """torchvision's VGG and AlexNet head: the feature map (here 3x4, after an adaptive average
    pool that keeps it) flattened into an MLP of Linear, ReLU and Dropout."""

    def __init__(self, classes=5):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2, 2),
                                      nn.Conv2d(8, 6, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.avgpool = nn.AdaptiveAvgPool2d((3, 4))
        self.classifier = nn.Sequential(nn.Linear(6 * 3 * 4, 16), nn.ReLU(), nn.Dropout(),
                                        nn.Linear(16, 16), nn.ReLU(), nn.Dropout(),
                                        nn.Linear(16, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


class XceptionMini(nn.Module):
    """Xception's middle flow: each block's ReLU reads the residual sum the next sum reads too
    (and a ReLU after a max pool), so they fuse into no layer and run as layers of their own."""

    def __init__(self, classes=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8))
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1, groups=8, bias=False), nn.Conv2d(8, 8, 1),
                          nn.BatchNorm2d(8)) for _ in range(2))
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(nn.functional.relu(x)) + x
        x = nn.functional.relu(self.pool(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class KerasPadded(nn.Module):
    """Keras-style SAME pads as PyTorch ports write them: nn.ZeroPad2d before a VALID stride-2 conv
    and depthwise conv, which torch 1.13 exports as a Pad whose pads a ConstantOfShape -> Concat ->
    Reshape -> Slice -> Transpose -> Reshape -> Cast subgraph computes (folded at import)."""

    def __init__(self, classes=5):
        super().__init__()
        self.features = nn.Sequential(
            nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(3, 8, 3, 2), nn.BatchNorm2d(8), nn.ReLU6(),
            nn.ZeroPad2d((1, 2, 1, 2)), nn.Conv2d(8, 8, 5, 2, groups=8), nn.BatchNorm2d(8), nn.ReLU6(),
            nn.Conv2d(8, 16, 1))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(16, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def randomized(model):
    """Eval mode with BatchNorm statistics far from the identity, so folding them matters."""
    torch.manual_seed(7)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.3, 0.3)
    return model.eval()


MODELS = {"mobilenet_v2": (MobileNetV2Mini, (2, 3, 32, 28)), "resnet": (ResNetMini, (1, 3, 29, 33)),
          "efficientnet": (EfficientNetMini, (1, 3, 30, 31)),
          "mobilenet_v3": (MobileNetV3Mini, (1, 3, 33, 27)), "densenet": (DenseNetMini, (1, 3, 34, 30)),
          "vgg": (VggMini, (2, 3, 12, 17)), "xception": (XceptionMini, (1, 3, 21, 18)),
          "keras_padded": (KerasPadded, (1, 3, 31, 30))}


def exported(name, seed, tmp_path):
    """MODELS[name] with random weights and statistics, its input, torch's output and its
    torch.onnx export (opset 13, input 'image', output 'scores')."""
    cls, shape = MODELS[name]
    torch.manual_seed(seed)
    model = randomized(cls())
    x = torch.randn(shape)
    with torch.no_grad():
        want = model(x).numpy()
    path = tmp_path / f"{name}.onnx"
    torch.onnx.export(model, x, str(path), opset_version=13, input_names=["image"],
                      output_names=["scores"])
    return x, want, path


# The default (the layers channels last, the user's NCHW arrays), channels first throughout, and
# channels last throughout (the arrays too).
@pytest.mark.parametrize("layout, io_layout", [("auto", "auto"), ("nchw", "auto"),
                                               ("auto", "nhwc")])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_torch_export_runs_whole_and_matches_torch(name, layout, io_layout, tmp_path):
    x, want, path = exported(name, 0, tmp_path)
    padfold.import_onnx(path, tmp_path / "imported", layout=layout, io_layout=io_layout)
    report = json.loads((tmp_path / "imported" / "import-report.json").read_text())
    assert report["left_to_caller"] == []
    spec = json.loads((tmp_path / "imported" / f"{name}.json").read_text())
    computed = {lay["layout"] for lay in spec["layers"] if lay["op"] != "transpose"}
    assert computed == ({"NCHW"} if layout == "nchw" else {"NHWC"}), computed
    with padfold.compile(path, layout=layout, io_layout=io_layout) as b:
        model_run = b.model()
        assert [tuple(o["shape"]) for o in model_run.outputs] == [want.shape]
        assert [o["name"] for o in model_run.outputs] == ["scores"]  # the export's output name
        feed = x.numpy() if io_layout == "auto" else np.ascontiguousarray(x.permute(0, 2, 3, 1))
        got = model_run(feed)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        # Written through out=, in torch's [N, K] and as the buffer's [N, K, 1, 1] (the same memory).
        y = torch.zeros(want.shape)
        assert model_run(torch.from_numpy(feed), out=y) is y
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)
        flat = np.zeros(want.shape + (1, 1), np.float32)
        model_run(feed, out=flat)
        np.testing.assert_allclose(flat.reshape(want.shape), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_ported_torch_export_computes_what_torch_computes(name, tmp_path):
    """padfold.torch.from_onnx on the export: plain torch ops with every pad resolved, the same
    scores as the model that was exported (the round trip a port back to PyTorch makes)."""
    x, want, path = exported(name, 1, tmp_path)
    ported = padfold.torch.from_onnx(path)
    with torch.no_grad():
        got = ported(x).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    report = padfold.port(path)
    assert report["left_to_caller"] == [] and report["layers"]


class TorchvisionSegmentation(nn.Module):
    """A torchvision segmentation model's 'out' (its forward returns a dict)."""

    def __init__(self, name):
        super().__init__()
        kwargs = {"aux_loss": False} if name.startswith("fcn") else {}
        self.model = randomized(getattr(torchvision.models.segmentation, name)(
            weights=None, weights_backbone=None, **kwargs))

    def forward(self, x):
        return self.model(x)["out"]


# torchvision 0.14's segmentation models, random weights: their upsampling is F.interpolate(
# size=input.shape[-2:], mode='bilinear'), a Resize whose sizes Shape -> Slice -> Concat computes.
SEGMENTATION = {"lraspp_mobilenet_v3_large": (1, 3, 72, 56), "fcn_resnet50": (1, 3, 40, 36)}


@pytest.mark.parametrize("name", sorted(SEGMENTATION))
def test_torchvision_segmentation_runs_whole_and_matches_torch(name, tmp_path):
    torch.manual_seed(3)
    model = TorchvisionSegmentation(name).eval()
    x = torch.randn(SEGMENTATION[name])
    with torch.no_grad():
        want = model(x).numpy()
    path = tmp_path / f"{name}.onnx"
    torch.onnx.export(model, x, str(path), opset_version=13, input_names=["image"],
                      output_names=["out"])
    padfold.import_onnx(path, tmp_path / "imported")
    report = json.loads((tmp_path / "imported" / "import-report.json").read_text())
    assert report["left_to_caller"] == []
    spec = json.loads((tmp_path / "imported" / f"{name}.json").read_text())
    assert sum(lay["op"] == "resize" for lay in spec["layers"]) >= 1
    with padfold.compile(path) as b:
        got = b.model()(x.numpy())
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def imported_whole(model, x, path):
    """Exports `model` to `path` (opset 13) and imports it beside it; nothing is left."""
    torch.onnx.export(model, x, str(path), opset_version=13, input_names=["image"],
                      output_names=["scores"])
    padfold.import_onnx(path, path.parent / "imported")
    report = json.loads((path.parent / "imported" / "import-report.json").read_text())
    assert report["left_to_caller"] == []


def runs_and_ports_like_torch(path, x, want):
    """The export, compiled and run whole, and its PyTorch port compute torch's `want`."""
    with padfold.compile(path) as b:
        got = b.model()(x.numpy())
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    with torch.no_grad():
        ported = padfold.torch.from_onnx(path)(x).numpy()
    np.testing.assert_allclose(ported, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_torchvision_shufflenet_runs_whole_and_matches_torch(tmp_path):
    """torchvision's ShuffleNetV2: its channel shuffle (Reshape, Transpose, Reshape) and chunk
    (two Slices of the channels, their bounds from Shape arithmetic) become gather_channels layers,
    each half composed with the shuffle before it; the export runs whole, and its port to PyTorch
    computes the same."""
    torch.manual_seed(5)
    model = randomized(torchvision.models.shufflenet_v2_x0_5(weights=None, num_classes=10))
    x = torch.randn(1, 3, 64, 48)
    with torch.no_grad():
        want = model(x).numpy()
    path = tmp_path / "shufflenet.onnx"
    imported_whole(model, x, path)
    spec = json.loads((tmp_path / "imported" / "shufflenet.json").read_text())
    ops = [lay["op"] for lay in spec["layers"]]
    # The two halves of each of the 13 units that chunk (the shuffle before them composed in),
    # and the shuffles that convs read (the last unit of each of the 3 stages).
    assert ops.count("gather_channels") == 2 * 13 + 3, ops
    assert "transpose" not in ops
    runs_and_ports_like_torch(path, x, want)


def test_torchvision_convnext_runs_whole_and_matches_torch(tmp_path):
    """torchvision's ConvNeXt (two stages of one block, its stem, downsampling and head): the
    channels-last stretches of its blocks (Transpose, LayerNorm as ReduceMean/Sub/Pow/Sqrt/Div,
    Linear as MatMul, GELU as Erf) computed channels first, LayerNorm as layer_norm layers, the
    Linears as 1x1 convs with GELU fused, the LayerNorm scales and layer scales folded; the export
    runs whole and matches torch, and so does its port."""
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    torch.manual_seed(9)
    model = ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 2)], num_classes=10)
    with torch.no_grad():  # LayerNorm parameters and layer scales away from their init
        for name, p in model.named_parameters():
            if "bias" in name:
                p.uniform_(-0.3, 0.3)
            elif "layer_scale" in name or p.dim() == 1:
                p.uniform_(0.5, 1.5)
    model.eval()
    x = torch.randn(1, 3, 40, 36)
    with torch.no_grad():
        want = model(x).numpy()
    path = tmp_path / "convnext.onnx"
    imported_whole(model, x, path)
    spec = json.loads((tmp_path / "imported" / "convnext.json").read_text())
    ops = [lay["op"] for lay in spec["layers"]]
    # The stem's, each block's (3), the downsampling's and the head's LayerNorm.
    assert ops.count("layer_norm") == 6, ops
    assert sum(lay.get("activation") == "gelu" for lay in spec["layers"]) == 3
    assert "transpose" not in ops
    runs_and_ports_like_torch(path, x, want)


def test_gelu_tanh_fuses_into_convs_and_matches_torch(tmp_path):
    """nn.GELU(approximate='tanh') after a conv and a depthwise conv, as torch.onnx writes it before
    opset 20 (x^3 as two Muls, then Mul, Add, Mul, Tanh, Add, Mul, Mul): each chain fuses into its
    conv as gelu_tanh; the export runs whole and matches torch, and so does its port."""
    torch.manual_seed(11)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.GELU(approximate="tanh"),
                          nn.Conv2d(8, 8, 5, 1, 2, groups=8), nn.GELU(approximate="tanh"),
                          nn.Conv2d(8, 4, 1)).eval()
    x = torch.randn(1, 3, 21, 17) * 2
    with torch.no_grad():
        want = model(x).numpy()
    path = tmp_path / "gelu_tanh.onnx"
    imported_whole(model, x, path)
    spec = json.loads((tmp_path / "imported" / "gelu_tanh.json").read_text())
    convs = [lay.get("activation") for lay in spec["layers"] if lay["op"] == "conv2d"]
    assert convs == ["gelu_tanh", "gelu_tanh", None], spec["layers"]
    runs_and_ports_like_torch(path, x, want)
