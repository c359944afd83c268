#!/usr/bin/env python3
"""Opt-in: the three CNNs of make_models.py as Keras users convert them: keras.applications'
MobileNetV2, EfficientNetB0 and ResNet50 (v1: stride on the first 1x1 conv; ZeroPadding2D before
the stem conv and the max pool), and MobileNetV3Large, with their classifiers (softmax included), random weights, fixed
seeds, 224x224x3 NHWC input, batch 1, converted by tf2onnx.convert.from_keras (its layout
Transposes, BatchNormalization as tf2onnx writes it). Written as keras_<name>.onnx, input "x" of
shape [1, 224, 224, 3]. Needs TensorFlow and tf2onnx (PyPI), in a venv outside the repository:

  python3 -m venv /tmp/tfv && /tmp/tfv/bin/pip install tensorflow-cpu tf2onnx
  /tmp/tfv/bin/python bench/models/make_keras_models.py OUT_DIR [MODEL ...]

(run.sh calls it for MODELS named keras_*, with TF_PYTHON, default /tmp/tfv/bin/python.)
"""
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402

keras = tf.keras
SIZE = 224
OPSET = 15  # tf2onnx 1.17's default; padfold reads opsets up to 17

MODELS = {
    "mobilenet_v2": lambda: keras.applications.MobileNetV2(
        input_shape=(SIZE, SIZE, 3), weights=None),
    # With its Rescaling and Normalization layers on the input.
    "efficientnet_b0": lambda: keras.applications.EfficientNetB0(
        input_shape=(SIZE, SIZE, 3), weights=None),
    "resnet50": lambda: keras.applications.ResNet50(input_shape=(SIZE, SIZE, 3), weights=None),
    # Hard swish (x * relu6(x + 3) / 6), squeeze-and-excite with hard sigmoid, Rescaling.
    "mobilenet_v3_large": lambda: keras.applications.MobileNetV3Large(
        input_shape=(SIZE, SIZE, 3), weights=None),
}


def calibrate(model, rng):
    """Random BatchNormalization and LayerNormalization scales and shifts (a LayerNorm left at 1
    and 0 lets tf2onnx fold its shift away), then BatchNormalization's moving statistics measured
    on a batch of inputs like run.sh's (uniform 0..1): with Keras's initial statistics (mean 0,
    variance 1) the activations of random weights grow or vanish through 50 layers, and the
    outputs of 1000 softmax classes all come out equal."""
    norms = (keras.layers.BatchNormalization, keras.layers.LayerNormalization)
    for bn in [L for L in model.layers if isinstance(L, norms)]:
        if bn.gamma is not None:  # InceptionV3's have none (scale=False)
            bn.gamma.assign(rng.uniform(0.5, 1.5, bn.gamma.shape).astype(np.float32))
        if bn.beta is not None:
            bn.beta.assign(rng.uniform(-0.1, 0.1, bn.beta.shape).astype(np.float32))
        if isinstance(bn, keras.layers.BatchNormalization):
            bn.momentum = 0.0  # the moving statistics become this batch's
    for layer in model.layers:
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0  # training=True below must not drop
        bias = getattr(layer, "bias", None)  # ResNet50's conv biases, the Dense's: not zero
        if bias is not None and not isinstance(layer, norms):
            bias.assign(rng.uniform(-0.1, 0.1, bias.shape).astype(np.float32))
    batch = rng.uniform(0, 1, (4, SIZE, SIZE, 3)).astype(np.float32)
    model(batch, training=True)


def main():
    out = pathlib.Path(sys.argv[1])
    only = sys.argv[2:]  # model names; all when none
    out.mkdir(parents=True, exist_ok=True)
    for i, (name, make) in enumerate(MODELS.items()):
        if only and name not in only:
            continue
        keras.utils.set_random_seed(300 + i)
        m = make()
        calibrate(m, np.random.default_rng(400 + i))
        x = np.random.default_rng(1).uniform(0, 1, (1, SIZE, SIZE, 3)).astype(np.float32)
        y = m(x, training=False).numpy()
        if not np.isfinite(y).all() or np.ptp(y) < 1e-4:
            sys.exit(f"{name}: degenerate output (min {y.min()}, max {y.max()})")
        spec = (tf.TensorSpec((1, SIZE, SIZE, 3), tf.float32, name="x"),)
        tf2onnx.convert.from_keras(m, input_signature=spec, opset=OPSET,
                                   output_path=str(out / f"keras_{name}.onnx"))
        print(f"keras_{name}: {m.count_params() / 1e6:.1f} M parameters, output {y.shape}, "
              f"max {y.max():.3g}, min {y.min():.3g}")


if __name__ == "__main__":
    main()
