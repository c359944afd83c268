#!/usr/bin/env python3
"""Writes the three real CNNs of bench/results-models.md as ONNX (random weights, fixed seeds,
224x224, batch 1, eval mode, so torch.onnx.export folds BatchNorm into the convs), whole
classifiers from the image to 1000 class scores: MobileNetV2 with Keras-style SAME padding on its
strided convs (nn.ZeroPad2d, which torch 1.13 exports as a Pad of computed pads), EfficientNet-B0
(MBConv blocks with squeeze-and-excite, SiLU) with TensorFlow SAME pads, and ResNet-50 v1.5.
Torchvision's architectures, written out here for Debian's torch 1.13. Also torchvision 0.14's
(Debian's python3-torchvision) segmentation models LR-ASPP MobileNetV3-Large and FCN-ResNet50
(their 'out': 21 classes per pixel, upsampled by F.interpolate(mode='bilinear')), and its
ShuffleNetV2 x1.0 (channel shuffles and chunks: gather_channels layers) and ConvNeXt-T (LayerNorm
and Linear layers on channels-last stretches, GELU).
Usage: /usr/bin/python3 make_models.py OUT_DIR [NAME...] (default: every model)"""
import math
import pathlib
import sys

import torch
from torch import nn


def same_pad(k, s, size):
    """TensorFlow SAME for a square input of `size`: (left, right, top, bottom) for ZeroPad2d."""
    out = math.ceil(size / s)
    total = max((out - 1) * s + k - size, 0)
    return (total // 2, total - total // 2) * 2


class ConvBN(nn.Sequential):
    """conv -> BN -> activation; TensorFlow SAME through an explicit pad where it is asymmetric
    (an ONNX Pad that padfold folds into the conv)."""

    def __init__(self, cin, cout, k, s=1, groups=1, act=nn.ReLU6, size=None, tf_same=False):
        layers = []
        if tf_same:
            pad = same_pad(k, s, size)
            if pad[0] != pad[1]:
                layers.append(nn.ZeroPad2d(pad))
                padding = 0
            else:
                padding = pad[0]
        else:
            padding = (k - 1) // 2
        layers += [nn.Conv2d(cin, cout, k, s, padding, groups=groups, bias=False),
                   nn.BatchNorm2d(cout)]
        if act is not None:
            layers.append(act())
        super().__init__(*layers)


class SqueezeExcite(nn.Module):
    """EfficientNet's: global average pool -> 1x1 conv -> SiLU -> 1x1 conv -> sigmoid, scaling the
    channels."""

    def __init__(self, channels, squeezed):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.act = nn.SiLU()
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        return x * torch.sigmoid(self.expand(self.act(self.reduce(self.pool(x)))))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, s, expand, k, size, act, tf_same, se):
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [ConvBN(cin, hidden, 1, act=act)]
        layers.append(ConvBN(hidden, hidden, k, s, groups=hidden, act=act, size=size,
                             tf_same=tf_same))
        if se:
            layers.append(SqueezeExcite(hidden, max(1, cin // 4)))
        layers.append(ConvBN(hidden, cout, 1, act=None))
        self.block = nn.Sequential(*layers)
        self.residual = s == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


def classifier(features, channels, classes=1000):
    return nn.Sequential(features, nn.AdaptiveAvgPool2d(1), nn.Flatten(1),
                         nn.Linear(channels, classes))


def inverted_residual_net(stem, blocks, head, act, se=False, size=224):
    layers = [ConvBN(3, stem, 3, 2, act=act, size=size, tf_same=True)]
    cin, size = stem, math.ceil(size / 2)
    for expand, cout, repeats, k, stride in blocks:
        for i in range(repeats):
            s = stride if i == 0 else 1
            layers.append(InvertedResidual(cin, cout, s, expand, k, size, act, True, se))
            cin, size = cout, math.ceil(size / s)
    layers.append(ConvBN(cin, head, 1, act=act))
    return classifier(nn.Sequential(*layers), head)


def mobilenet_v2():
    return inverted_residual_net(32, [(1, 16, 1, 3, 1), (6, 24, 2, 3, 2), (6, 32, 3, 3, 2),
                                      (6, 64, 4, 3, 2), (6, 96, 3, 3, 1), (6, 160, 3, 3, 2),
                                      (6, 320, 1, 3, 1)], 1280, nn.ReLU6)


def efficientnet_b0():
    return inverted_residual_net(32, [(1, 16, 1, 3, 1), (6, 24, 2, 3, 2), (6, 40, 2, 5, 2),
                                      (6, 80, 3, 3, 2), (6, 112, 3, 5, 1), (6, 192, 4, 5, 2),
                                      (6, 320, 1, 3, 1)], 1280, nn.SiLU, se=True)


class Bottleneck(nn.Module):
    def __init__(self, cin, width, s):
        super().__init__()
        cout = width * 4
        self.block = nn.Sequential(ConvBN(cin, width, 1, act=nn.ReLU),
                                   ConvBN(width, width, 3, s, act=nn.ReLU),  # v1.5: stride here
                                   ConvBN(width, cout, 1, act=None))
        self.down = None if s == 1 and cin == cout else ConvBN(cin, cout, 1, s, act=None)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.block(x) + (x if self.down is None else self.down(x)))


def resnet50():
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, repeats, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(repeats):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    return classifier(nn.Sequential(*layers), cin)


def torchvision_classifier(name):
    import torchvision  # only these models need it
    return getattr(torchvision.models, name)(weights=None)


class Segmentation(nn.Module):
    """A torchvision segmentation model's 'out' (its forward returns a dict)."""

    def __init__(self, name):
        super().__init__()
        import torchvision  # only these models need it
        kwargs = {"aux_loss": False} if name.startswith("fcn") else {}
        self.model = getattr(torchvision.models.segmentation, name)(
            weights=None, weights_backbone=None, **kwargs)

    def forward(self, x):
        return self.model(x)["out"]


MODELS = {"mobilenet_v2": mobilenet_v2, "efficientnet_b0": efficientnet_b0,
          "resnet50": resnet50,
          "lraspp_mobilenet_v3_large": lambda: Segmentation("lraspp_mobilenet_v3_large"),
          "fcn_resnet50": lambda: Segmentation("fcn_resnet50"),
          "shufflenet_v2_x1_0": lambda: torchvision_classifier("shufflenet_v2_x1_0"),
          "convnext_tiny": lambda: torchvision_classifier("convnext_tiny")}
# The other torchvision classifiers that run whole (results-coverage.md), by name.
for _name in ("mobilenet_v3_large", "mnasnet1_0", "regnet_y_400mf", "squeezenet1_1", "googlenet",
              "densenet121", "resnext50_32x4d", "regnet_x_400mf"):
    MODELS[_name] = lambda name=_name: torchvision_classifier(name)


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):  # non-trivial statistics, so the folding matters
            m.running_mean.uniform_(-0.1, 0.1, generator=g)
            m.running_var.uniform_(0.5, 1.5, generator=g)
            m.weight.data.uniform_(0.5, 1.5, generator=g)
            m.bias.data.uniform_(-0.1, 0.1, generator=g)
        if isinstance(m, nn.LayerNorm):  # ConvNeXt's: away from the identity, as trained
            m.weight.data.uniform_(0.5, 1.5, generator=g)
            m.bias.data.uniform_(-0.1, 0.1, generator=g)
        if hasattr(m, "layer_scale"):  # ConvNeXt's, 1e-6 at init
            m.layer_scale.data.uniform_(0.05, 0.5, generator=g)


def main(out, names):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for i, (name, make) in enumerate(MODELS.items()):
        if names and name not in names:
            continue
        torch.manual_seed(100 + i)
        model = make().eval()
        randomize(model, 200 + i)
        x = torch.rand(1, 3, 224, 224)
        with torch.no_grad():
            torch.onnx.export(model, x, str(out / f"{name}.onnx"), input_names=["x"],
                              output_names=["y"], opset_version=13, do_constant_folding=True)
        print(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
