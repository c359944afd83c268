#!/usr/bin/env python3
"""Opt-in: every CNN classifier and segmentation model of torchvision (Debian's 0.14, torch 1.13)
as a user runs it through padfold: torch.onnx.export (opset 13, random weights, BatchNorm
statistics randomized), `padfold import` with default options, `padfold compile --target host`,
`padfold run --model`, the output compared with torch's own. Prints one line per model: whether it
imports whole (no node left to the caller), the layers, the largest error relative to the largest
output, and the argmax agreement; exit status 1 if any model is not whole or differs by more than
1e-4. Run with Debian's python (it has torch and torchvision):

  /usr/bin/python3 bench/models/coverage_torchvision.py build/bin/padfold WORK_DIR [MODEL ...]
"""
import pathlib
import sys

import torch
import torchvision
from torch import nn
from torchvision import models

import coverage_common

CLASSIFIERS = ["alexnet", "vgg11", "vgg16_bn", "resnet18", "resnet50", "resnext50_32x4d",
               "wide_resnet50_2", "densenet121", "googlenet", "inception_v3", "squeezenet1_0",
               "squeezenet1_1", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
               "mnasnet0_5", "mnasnet1_0", "efficientnet_b0", "efficientnet_v2_s",
               "regnet_x_400mf", "regnet_y_400mf", "shufflenet_v2_x1_0", "convnext_tiny"]
SEGMENTATION = ["fcn_resnet50", "lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large"]


class Segmenter(nn.Module):
    """The 'out' map of a segmentation model (its forward returns a dict)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def build(name):
    torch.manual_seed(0)
    if name in SEGMENTATION:
        model = Segmenter(getattr(models.segmentation, name)(weights=None, weights_backbone=None))
    elif name in ("googlenet", "inception_v3"):
        model = getattr(models, name)(weights=None, aux_logits=False, init_weights=True)
    else:
        model = getattr(models, name)(weights=None)
    for m in model.modules():  # statistics far from the identity, so folding them matters
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.3, 0.3)
    return model.eval()


def check(padfold, work, name):
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    size = 299 if name == "inception_v3" else 224
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1))
    model = build(name)
    with torch.no_grad():
        want = model(x).numpy()
    torch.onnx.export(model, x, str(d / "model.onnx"), opset_version=13, input_names=["x"],
                      output_names=["y"])
    return coverage_common.through_padfold(padfold, d, x.numpy(), want, argmax_axis=1)


if __name__ == "__main__":
    padfold, work = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2])
    coverage_common.main(lambda name: check(padfold, work, name),
                         sys.argv[3:] or CLASSIFIERS + SEGMENTATION,
                         f"torch {torch.__version__}, torchvision {torchvision.__version__}")
