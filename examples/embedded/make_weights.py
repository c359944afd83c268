#!/usr/bin/env python3
"""Writes the .npy weight files that a padfold graph spec names (weight_files), filled with the
deterministic data of lcg.h, so that `padfold compile --embed-weights` can bake them in.

    python3 examples/embedded/make_weights.py out/g/model_graph.json

Each file goes where the spec names it, relative to the spec's folder: float32, C order, the
layer's weight shape in its weight_layout (HWIO: kernel H, kernel W, in channels / groups, out
channels) or the bias shape [out channels]. Values: lcg.h's generator seeded with
"<layer>/weights" or "<layer>/bias", bit-identical to what the tests compute. Standard library
only (no NumPy). Handles what the example's specs use: conv2d with 2-D kernels, pools, add, concat.
"""
import json
import os
import struct
import sys


def lcg_seed(layer, buffer):
    h = 2166136261
    for c in (layer + "/" + buffer).encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


def lcg_fill(n, seed):
    s, out = seed, []
    for _ in range(n):
        s = (s * 1664525 + 1013904223) & 0xFFFFFFFF
        out.append(((s >> 8) - 8388608) / 8388608.0)
    return out


def write_npy(path, shape, values):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({dims}), }}"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack(f"<{len(values)}f", *values))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_weights.py SPEC.json")
    spec_path = sys.argv[1]
    with open(spec_path) as f:
        spec = json.load(f)
    defaults = spec.get("defaults", {})
    channels = {}  # tensor name -> channel count
    for x in spec.get("inputs", []):
        layout = x.get("layout", defaults.get("layout", "NCHW"))
        channels[x["name"]] = x["shape"][layout.index("C")]
    previous = None
    for L in spec["layers"]:
        layout = L.get("layout", defaults.get("layout", "NCHW"))
        inputs = L.get("input", previous)
        if "input_shape" in L and "input" not in L:
            inputs = L["name"] + ".input"
            channels[inputs] = L["input_shape"][layout.index("C")]
        inputs = inputs if isinstance(inputs, list) else [inputs]
        cin = [channels[i] for i in inputs]
        op = L["op"]
        if op == "conv2d":
            channels[L["name"]] = L["out_channels"]
        elif op == "concat":
            channels[L["name"]] = sum(cin)
        elif op in ("max_pool", "avg_pool", "add"):
            channels[L["name"]] = cin[0]
        else:
            sys.exit(f"layer '{L['name']}': op {op} is not handled by this script")
        previous = L["name"]
        files = L.get("weight_files")
        if not files:
            continue
        if op != "conv2d":
            sys.exit(f"layer '{L['name']}': weight_files on a {op}")
        k = L["kernel"] if isinstance(L["kernel"], list) else [L["kernel"]] * 2
        extent = {"H": k[0], "W": k[1], "I": cin[0] // L.get("groups", 1), "O": L["out_channels"]}
        order = L.get("weight_layout", defaults.get("weight_layout", "OIHW"))
        shapes = {"weights": [extent[a] for a in order], "bias": [L["out_channels"]]}
        base = os.path.dirname(spec_path)
        for buffer, shape in shapes.items():
            if buffer not in files:
                continue
            n = 1
            for d in shape:
                n *= d
            path = os.path.join(base, files[buffer])
            write_npy(path, shape, lcg_fill(n, lcg_seed(L["name"], buffer)))
            print(f"{path}: {L['name']}/{buffer} {shape}")


if __name__ == "__main__":
    main()
