#!/usr/bin/env python3
"""Writes the spec of the GPU benchmark from bench/layers.json.

Every layer of layers.json becomes two independent conv2d layers, "<name>_b1" and "<name>_b32"
(batch 1 and 32; NHWC, weights HWIO, no bias, no activation, the layer's own padding, zero
border), and three layers get non-zero border variants "<name>_<border>_b<batch>" (reflect,
replicate, circular), which PyTorch runs as F.pad(mode=...) + conv. Every zero-border layer also
has a channels-first twin "<name>_nchw_b<batch>" (NCHW, weights OIHW): which layout the GPU
kernels are faster in is measured, not assumed.

usage: make_gpu_spec.py layers.json bench_gpu_spec.json
       make_gpu_spec.py layers.json sweep_spec.json --sweep N --schedules sweep_knobs.json
                        [--layers a,b] [--seed S]

--sweep: a knob sweep instead (bench/gpu/sweep.sh): for each named layer (default: all) at each
batch, "<name>_b<batch>_v0" with the default knobs and "_v1".."_v<N-1>", the same N-1 random sets
of GPU knobs on every layer, written as a --schedules file.
"""
import argparse
import json
import random

BATCHES = (1, 32)
BORDERS = {"resnet_3x3": "reflect", "effnet_dw_s1": "replicate", "effnet_dw5_s2": "circular"}


def conv_layer(L, batch, border, channels_first=False):
    n, h, w, c = L["input"]
    tag = ("" if border == "zeros" else "_" + border) + ("_nchw" if channels_first else "")
    name = L["name"] + tag + f"_b{batch}"
    shape = [batch, c, h, w] if channels_first else [batch, h, w, c]
    return {"name": name, "op": "conv2d", "input_shape": shape,
            "layout": "NCHW" if channels_first else "NHWC",
            "weight_layout": "OIHW" if channels_first else "HWIO",
            "out_channels": L["out_channels"], "groups": L["groups"],
            "kernel": L["kernel"], "stride": L["stride"], "dilation": L["dilation"],
            "padding": L["padding"], "border": border}


SWEEP = {"gpu_threads_x": [8, 16, 32, 64], "gpu_threads_y": [2, 4, 8, 16],
         "gpu_tile_x": [1, 2, 4], "gpu_tile_y": [1, 2, 4], "gpu_unroll_channels": [1, 2, 4, 8, 16],
         "gpu_stage_kb": [0, 40]}


def sweep(layers, n, seed, names):
    """The same N-1 random knob sets on every layer (comparable across the layers of a class)."""
    rng = random.Random(seed)
    variants = [None]
    while len(variants) < n:
        k = {name: rng.choice(values) for name, values in SWEEP.items()}
        if 64 <= k["gpu_threads_x"] * k["gpu_threads_y"] <= 512 and k not in variants:
            variants.append(k)
    out, knobs = [], {}
    for L in layers:
        if names and L["name"] not in names:
            continue
        for batch in BATCHES:
            for i, k in enumerate(variants):
                layer = conv_layer(L, batch, "zeros")
                layer["name"] += f"_v{i}"
                out.append(layer)
                if k:
                    knobs[layer["name"]] = k
    return out, knobs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("layers_json")
    ap.add_argument("spec_json")
    ap.add_argument("--sweep", type=int, default=0)
    ap.add_argument("--schedules", default=None)
    ap.add_argument("--layers", default="")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with open(args.layers_json) as f:
        layers = json.load(f)["layers"]
    if args.sweep:
        if not args.schedules:
            raise SystemExit("--sweep needs --schedules")
        out, knobs = sweep(layers, args.sweep, args.seed, [n for n in args.layers.split(",") if n])
        with open(args.schedules, "w") as f:
            json.dump(knobs, f, indent=1)
            f.write("\n")
        write_spec(out, args.spec_json)
        return
    out = []
    for L in layers:
        if L["layout"] != "NHWC":
            raise SystemExit(f"{L['name']}: only NHWC layers are supported, got {L['layout']}")
        for border in ["zeros"] + ([BORDERS[L["name"]]] if L["name"] in BORDERS else []):
            for batch in BATCHES:
                out.append(conv_layer(L, batch, border))
        for batch in BATCHES:
            out.append(conv_layer(L, batch, "zeros", channels_first=True))
    write_spec(out, args.spec_json)


def write_spec(out, path):
    spec = {"model": "bench_gpu",
            "description": "GPU benchmark layers (bench/gpu/make_gpu_spec.py from layers.json)",
            "layers": out}
    with open(path, "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
