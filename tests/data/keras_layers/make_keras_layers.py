#!/usr/bin/env python3
"""Opt-in: reference data from single Keras layers with TensorFlow's SAME (and Conv1D's causal)
padding, for tests of padfold.torch's convention="tensorflow". Each case is written as
<name>.npz holding x (Keras's input, channels-last, batch dim first), y (Keras's output), for
convolutions kernel and bias exactly as layer.get_weights() gives them (spatial..., in/groups,
out; DepthwiseConv2D: kh, kw, in, multiplier), and config: a JSON string of the layer's
geometry (layer, kernel, strides, dilation, padding, filters, groups, tf_version,
keras_version; DepthwiseConv2D adds depth_multiplier and has groups = its channel count).
Random inputs in [-1, 1], random weights and nonzero random biases, fixed seeds.
Needs TensorFlow (PyPI), never CI: the suite reads the committed files.

  python3 -m venv /tmp/tfv && /tmp/tfv/bin/pip install tensorflow-cpu
  /tmp/tfv/bin/python tests/data/keras_layers/make_keras_layers.py [OUT_DIR]
"""
import json
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

keras = tf.keras
L = keras.layers

# name: (batch, input shape without batch, layer factory)
CASES = {
    "conv2d_same_s2_odd": (2, (9, 11, 3), lambda: L.Conv2D(5, 3, strides=2, padding="same")),
    # Even kernel under SAME: TensorFlow puts the odd pad after.
    "conv2d_same_s2_even_kernel": (2, (10, 7, 3),
                                   lambda: L.Conv2D(4, 4, strides=2, padding="same")),
    "conv2d_same_s2_even_input": (2, (8, 8, 2), lambda: L.Conv2D(6, 3, strides=2, padding="same")),
    "conv2d_same_dilated": (1, (9, 8, 3), lambda: L.Conv2D(4, 3, dilation_rate=2, padding="same")),
    "conv2d_same_s3_k5": (1, (13, 10, 4), lambda: L.Conv2D(3, 5, strides=3, padding="same")),
    "conv2d_same_groups": (1, (9, 9, 4),
                           lambda: L.Conv2D(6, 3, strides=2, padding="same", groups=2)),
    "depthwise_same_s2_k5": (1, (11, 12, 3),
                             lambda: L.DepthwiseConv2D(5, strides=2, padding="same")),
    "conv1d_causal": (2, (10, 3), lambda: L.Conv1D(4, 3, dilation_rate=2, padding="causal")),
    "conv1d_same_s2": (2, (11, 2), lambda: L.Conv1D(4, 4, strides=2, padding="same")),
    "conv3d_same_s2": (1, (5, 6, 7, 2), lambda: L.Conv3D(3, 3, strides=2, padding="same")),
    "maxpool2d_same_s2": (2, (9, 10, 3), lambda: L.MaxPooling2D(3, strides=2, padding="same")),
    # Keras leaves the padding out of the average (count_include_pad=False in PyTorch's terms).
    "avgpool2d_same_s2": (2, (9, 10, 3),
                          lambda: L.AveragePooling2D(3, strides=2, padding="same")),
}


def geometry(layer):
    c = layer.get_config()
    if "pool_size" in c:  # pooling
        k = list(c["pool_size"])
        cfg = {"kernel": k, "strides": list(c["strides"] or k), "dilation": [1] * len(k)}
    else:
        cfg = {"kernel": list(c["kernel_size"]), "strides": list(c["strides"]),
               "dilation": list(c["dilation_rate"])}
    cfg = {"layer": type(layer).__name__, **cfg, "padding": c["padding"]}
    if isinstance(layer, L.DepthwiseConv2D):
        cfg["depth_multiplier"] = c["depth_multiplier"]
        cfg["filters"] = layer.kernel.shape[2] * c["depth_multiplier"]
        cfg["groups"] = layer.kernel.shape[2]
    elif "filters" in c:
        cfg["filters"] = c["filters"]
        cfg["groups"] = c.get("groups", 1)
    cfg["tf_version"] = tf.__version__
    cfg["keras_version"] = keras.__version__
    return cfg


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
    out.mkdir(parents=True, exist_ok=True)
    for i, (name, (batch, shape, make)) in enumerate(CASES.items()):
        keras.utils.set_random_seed(200 + i)
        layer = make()
        x = np.random.default_rng(60 + i).uniform(-1, 1, (batch, *shape)).astype(np.float32)
        layer.build(x.shape)
        rng = np.random.default_rng(10 + i)
        arrays = {}
        if layer.weights:
            kernel, bias = layer.get_weights()
            kernel = rng.uniform(-0.5, 0.5, kernel.shape).astype(np.float32)
            # Nonzero biases: magnitudes in [0.1, 0.5], random signs.
            bias = (rng.uniform(0.1, 0.5, bias.shape) *
                    rng.choice([-1.0, 1.0], bias.shape)).astype(np.float32)
            layer.set_weights([kernel, bias])
            kernel, bias = layer.get_weights()
            arrays = {"kernel": kernel, "bias": bias}
        y = np.asarray(layer(x)).astype(np.float32)
        cfg = geometry(layer)
        np.savez(out / f"{name}.npz", x=x, y=y, **arrays, config=np.array(json.dumps(cfg)))
        print(name, x.shape, "->", y.shape, json.dumps(cfg))


if __name__ == "__main__":
    main()
