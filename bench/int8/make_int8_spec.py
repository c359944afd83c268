#!/usr/bin/env python3
"""Writes the int8 twin of the benchmark spec: every layer of a float benchmark spec
(bench/make_bench_spec.py's output) as an int8 layer, TFLite arithmetic, per-channel weight scales,
input zero point -128 (a uint8 image's), bias, ReLU6 - the usual post-training quantized conv.
Scales are fixed, not calibrated: the timing does not depend on them. <name>_prepadded twins are
dropped (the int8 border tax is the same question as the float one, measured there).

usage: make_int8_spec.py bench_spec.json bench_int8_spec.json
"""
import json
import sys


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    layers = []
    for L in spec["layers"]:
        if L["name"].endswith("_prepadded"):
            continue
        q = dict(L, dtype="int8", bias=True, activation="relu6")
        q["quant"] = {
            "requantize": "tflite",
            "input": {"scale": 0.02, "zero_point": -128},
            "weight_scale": [0.004 + 0.0001 * (o % 7) for o in range(L["out_channels"])],
            "output": {"scale": 0.05, "zero_point": -128},
        }
        layers.append(q)
    out = dict(spec, model=spec["model"] + "_int8", layers=layers)
    out["defaults"] = dict(spec.get("defaults", {}), dtype="int8")
    out["description"] = "bench/int8/make_int8_spec.py: the benchmark layers as int8 (TFLite)."
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
