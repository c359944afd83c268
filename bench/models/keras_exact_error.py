#!/usr/bin/env python3
"""Opt-in: how far each float32 runtime is from the exact scores of a keras.applications model.

The model as coverage_keras.py builds it (same seeds: random weights, BatchNormalization
statistics calibrated, one random input), run by Keras in float32, by ONNX Runtime and by padfold
(default import; compiled for `host` with the default schedules, with Winograd F(4,3) replaced by
F(2,3), and with every conv direct), each compared with the same Keras model in float64. Prints
the largest error of each relative to the largest exact score. Needs what coverage_keras.py
needs, and onnxruntime:

  /tmp/tfv/bin/python bench/models/keras_exact_error.py build/bin/padfold WORK_DIR MODEL
"""
import json
import pathlib
import subprocess
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import coverage_common  # noqa: E402
import coverage_keras as ck  # noqa: E402
import keras  # noqa: E402
import onnxruntime  # noqa: E402


def padfold_scores(padfold, d, spec, knobs, tag, shape):
    """padfold's scores with the knobs {layer: {knob: value}} over the defaults."""
    (d / f"{tag}.json").write_text(json.dumps(knobs))
    subprocess.run([str(padfold), "compile", str(d / "imported" / "model.json"), "-o",
                    str(d / f"bundle-{tag}"), "--target", "host", "-j", "2", "--schedules",
                    str(d / f"{tag}.json")], check=True, capture_output=True)
    subprocess.run([str(padfold), "run", str(d / f"bundle-{tag}"), "--model", "--input",
                    f"{spec['inputs'][0]['name']}={d / 'x.npy'}", "--output",
                    f"{spec['outputs'][0]}={d / f'y-{tag}.npy'}"], check=True, capture_output=True)
    return np.load(d / f"y-{tag}.npy").reshape(shape)


def main():
    padfold, work, name = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]), sys.argv[3]
    make, size = ck.MODELS[name]
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    model, x = ck.build(name)
    keras32 = model(x, training=False).numpy()
    ck.convert(model, x, d / "model.onnx")
    _, text = coverage_common.through_padfold(padfold, d, x, keras32, argmax_axis=-1)
    print(f"{name}: padfold against Keras float32: {text}")
    spec = json.loads((d / "imported" / "model.json").read_text())
    schedules = json.loads((d / "bundle" / "manifest.json").read_text())["targets"][0]["schedules"]
    ort = onnxruntime.InferenceSession(str(d / "model.onnx"), providers=["CPUExecutionProvider"])
    runs = {"Keras float32": keras32, "ONNX Runtime": ort.run(None, {"x": x})[0],
            "padfold (default schedules)": np.load(d / "y.npy").reshape(keras32.shape)}
    f43 = {k: {"winograd": 1} for k, v in schedules.items() if v.get("winograd") == 2}
    wino = {k: {"winograd": 0} for k, v in schedules.items() if v.get("winograd")}
    runs[f"padfold (F(4,3) on {len(f43)} layers as F(2,3))"] = padfold_scores(
        padfold, d, spec, f43, "f23", keras32.shape)
    runs[f"padfold (all direct: Winograd off on {len(wino)} layers)"] = padfold_scores(
        padfold, d, spec, wino, "direct", keras32.shape)
    keras.config.set_floatx("float64")
    keras.config.set_dtype_policy("float64")
    exact_model = make(input_shape=(size, size, 3), weights=None)
    exact_model.set_weights([w.astype(np.float64) for w in model.get_weights()])
    exact = exact_model(x.astype(np.float64), training=False).numpy()
    top = np.abs(exact).max()
    for label, y in runs.items():
        print(f"{name}: {label}: {np.abs(y - exact).max() / top:.2g} of the largest exact score")


if __name__ == "__main__":
    main()
