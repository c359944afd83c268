#!/usr/bin/env python3
"""Writes the spec of the GPU benchmark from bench/layers.json.

Every layer of layers.json becomes two independent conv2d layers, "<name>_b1" and "<name>_b32"
(batch 1 and 32; NHWC, weights HWIO, no bias, no activation, the layer's own padding, zero
border), and three layers get non-zero border variants "<name>_<border>_b<batch>" (reflect,
replicate, circular), which PyTorch runs as F.pad(mode=...) + conv.

usage: make_gpu_spec.py layers.json bench_gpu_spec.json
"""
import json
import sys

BATCHES = (1, 32)
BORDERS = {"resnet_3x3": "reflect", "effnet_dw_s1": "replicate", "effnet_dw5_s2": "circular"}


def conv_layer(L, batch, border):
    n, h, w, c = L["input"]
    name = L["name"] + ("" if border == "zeros" else "_" + border) + f"_b{batch}"
    return {"name": name, "op": "conv2d", "input_shape": [batch, h, w, c], "layout": "NHWC",
            "weight_layout": "HWIO", "out_channels": L["out_channels"], "groups": L["groups"],
            "kernel": L["kernel"], "stride": L["stride"], "dilation": L["dilation"],
            "padding": L["padding"], "border": border}


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    with open(sys.argv[1]) as f:
        layers = json.load(f)["layers"]
    out = []
    for L in layers:
        if L["layout"] != "NHWC":
            raise SystemExit(f"{L['name']}: only NHWC layers are supported, got {L['layout']}")
        for border in ["zeros"] + ([BORDERS[L["name"]]] if L["name"] in BORDERS else []):
            for batch in BATCHES:
                out.append(conv_layer(L, batch, border))
    spec = {"model": "bench_gpu",
            "description": "GPU benchmark layers (bench/gpu/make_gpu_spec.py from layers.json)",
            "layers": out}
    with open(sys.argv[2], "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
