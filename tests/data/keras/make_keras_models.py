#!/usr/bin/env python3
"""Opt-in: small Keras models of the patterns Keras users convert with tf2onnx, written here as
<name>.onnx with an input x_<name>.npy and Keras's own output y_<name>.npy (random weights, fixed
seeds); for the TFLITE models also tflite_<name>.onnx, the model converted to a .tflite file and
that by `tf2onnx --tflite`, with the TFLite interpreter's output. Needs TensorFlow and tf2onnx
(PyPI), never CI: the suite reads the committed files.

  python3 -m venv /tmp/tfv && /tmp/tfv/bin/pip install tensorflow-cpu tf2onnx
  /tmp/tfv/bin/python tests/data/keras/make_keras_models.py [OUT_DIR [MODEL ...]]
"""
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402
from keras.src.applications import efficientnet  # noqa: E402  (B0 takes no width/depth)

keras = tf.keras
L = keras.layers


def seq(shape, layers):
    inp = keras.Input(shape=shape, batch_size=1, name="x")
    y = inp
    for layer in layers:
        y = layer(y)
    return keras.Model(inp, y)


def residual(shape):
    inp = keras.Input(shape=shape, batch_size=1, name="x")
    a = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    b = L.Conv2D(8, 3, padding="same")(a)
    c = L.Add()([a, b])
    d = L.ReLU()(c)
    return keras.Model(inp, L.MaxPooling2D(3, strides=2, padding="same")(d))


MODELS = {
    # The classic block: 3x3 SAME convs and a SAME 2x2 max pool of stride 2, on odd sizes.
    "conv_pool": lambda: seq((15, 17, 3), [
        L.Conv2D(8, 3, padding="same", activation="relu"),
        L.MaxPooling2D(2, strides=2, padding="same"),
        L.Conv2D(6, 3, padding="same")]),
    # Even kernels with strides under SAME: the asymmetric pads TensorFlow puts after.
    "strided_even": lambda: seq((16, 13, 4), [
        L.Conv2D(8, 4, strides=2, padding="same", activation="relu6"),
        L.Conv2D(5, (2, 3), strides=(2, 1), padding="same"),
        L.AveragePooling2D(3, strides=2, padding="same")]),
    # Depthwise SAME stride 2 (tf2onnx: a grouped Conv), then a pointwise conv.
    "depthwise": lambda: seq((14, 11, 6), [
        L.DepthwiseConv2D(5, strides=2, padding="same", activation="relu"),
        L.Conv2D(7, 1)]),
    # Two branches joined by Add.
    "residual": lambda: residual((12, 10, 4)),
    # BatchNormalization after convs (tf2onnx writes a per-channel Mul and Add), as in
    # MobileNetV2's conv -> BN -> ReLU6 blocks.
    "batchnorm": lambda: seq((10, 9, 3), [
        L.Conv2D(8, 3, padding="same"), L.BatchNormalization(), L.ReLU(),
        L.DepthwiseConv2D(3, strides=2, padding="same"), L.BatchNormalization(), L.ReLU(6.0),
        L.Conv2D(4, 1), L.BatchNormalization()]),
    # EfficientNet's swish (tf2onnx: x * Sigmoid(x)), sigmoid and tanh. Keras 3's hard_sigmoid
    # is relu6(x + 3) / 6 as three ops, whose last padfold does not fold yet.
    "activations": lambda: seq((11, 10, 3), [
        L.Conv2D(8, 3, strides=2, padding="same", activation="swish"),
        L.DepthwiseConv2D(3, padding="same", activation="sigmoid"),
        L.Conv2D(6, 1, activation="tanh")]),
    # keras.applications' MobileNetV2 whole, with its classifier head (GlobalAveragePooling2D,
    # Dense, softmax): width 0.35, 64x64 (its last feature map 2x2), 10 classes.
    "mobilenet_v2_app": lambda: keras.applications.MobileNetV2(
        input_shape=(64, 64, 3), alpha=0.35, weights=None, classes=10),
    # keras.applications' EfficientNet (B0's blocks, squeeze-and-excite, swish, the Rescaling and
    # Normalization layers on the input, the softmax head) at width and depth 0.25, 64x64.
    "efficientnet_app": lambda: efficientnet.EfficientNet(
        0.25, 0.25, 64, 0.2, name="efficientnet_small", weights=None, input_shape=(64, 64, 3),
        classes=10),
    # Conv1D, which tf2onnx writes as Unsqueeze -> Conv with a unit axis -> Squeeze: causal
    # (Keras pads before, as a Pad on the NWC input) and dilated, then SAME stride 2 with an even
    # kernel, and a SAME MaxPooling1D.
    "conv1d": lambda: seq((23, 3), [
        L.Conv1D(8, 3, padding="causal", dilation_rate=2, activation="relu"),
        L.Conv1D(6, 4, strides=2, padding="same"),
        L.MaxPooling1D(2, padding="same")]),
    # Conv2DTranspose SAME stride 2 (tf2onnx: ConvTranspose with explicit asymmetric pads).
    "conv_transpose": lambda: seq((7, 9, 3), [
        L.Conv2DTranspose(5, 3, strides=2, padding="same", activation="relu"),
        L.Conv2D(4, 3, padding="same")]),
    # VGG's head: Flatten of a 3x3 map (tf2onnx: a channels-last Transpose and a Reshape), Dense
    # layers (MatMul) and the softmax on [1, 10].
    "flatten_dense": lambda: seq((12, 10, 3), [
        L.Conv2D(8, 3, padding="same", activation="relu"),
        L.MaxPooling2D(2, strides=2),
        L.Conv2D(12, 3, strides=2, padding="same", activation="relu"),
        L.Flatten(),
        L.Dense(16, activation="relu"),
        L.Dense(10, activation="softmax")]),
    # keras.applications' MobileNetV3Small whole: hard swish written as x * relu6(x + 3) / 6,
    # squeeze-and-excite with hard sigmoid, the Rescaling layer on the input, the classifier as
    # 1x1 convs on the pooled map; width 0.35, 64x64, 10 classes.
    "mobilenet_v3_app": lambda: keras.applications.MobileNetV3Small(
        input_shape=(64, 64, 3), alpha=0.35, weights=None, classes=10),
}

# Also written through TFLite (save_tflite).
TFLITE = ["conv_pool", "conv1d", "mobilenet_v2_app"]


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
    only = sys.argv[2:]  # model names; all when none
    out.mkdir(parents=True, exist_ok=True)
    for i, (name, make) in enumerate(MODELS.items()):
        keras.utils.set_random_seed(100 + i)
        if only and name not in only:
            continue
        m = make()
        rng = np.random.default_rng(i)
        for w in m.weights:  # biases and BatchNormalization's statistics too
            lo, hi = (0.2, 1.5) if "variance" in w.name else (-0.5, 0.5)
            if name.endswith("_app") and len(w.shape) > 1:  # a deep net: keep activations O(1)
                fan_in = np.prod(w.shape[:-1]) if "depthwise" not in w.name else np.prod(w.shape[:2])
                lo, hi = -np.sqrt(3 / fan_in), np.sqrt(3 / fan_in)
            w.assign(rng.uniform(lo, hi, w.shape).astype(np.float32))
        shape = (1,) + tuple(m.input_shape[1:])
        x = np.random.default_rng(50 + i).uniform(-1, 1, shape).astype(np.float32)
        y = m(x, training=False).numpy()
        spec = (tf.TensorSpec(shape, tf.float32, name="x"),)
        tf2onnx.convert.from_keras(m, input_signature=spec, opset=13,
                                   output_path=str(out / f"{name}.onnx"))
        np.save(out / f"x_{name}.npy", x)
        np.save(out / f"y_{name}.npy", y)
        print(name, x.shape, "->", y.shape)
        if name in TFLITE:
            save_tflite(m, x, out, name)


def save_tflite(m, x, out, name):
    """The model as Keras users ship it to devices: a float .tflite file, converted to ONNX by
    tf2onnx's --tflite path, with the TFLite interpreter's own output."""
    flat = tf.lite.TFLiteConverter.from_keras_model(m).convert()
    interpreter = tf.lite.Interpreter(model_content=flat)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    y = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    path = out / f"tflite_{name}.tflite"
    path.write_bytes(flat)
    try:
        tf2onnx.convert.from_tflite(str(path), opset=13, output_path=str(out / f"tflite_{name}.onnx"))
    finally:
        path.unlink()
    np.save(out / f"x_tflite_{name}.npy", x)
    np.save(out / f"y_tflite_{name}.npy", y)
    print(f"tflite_{name}", x.shape, "->", y.shape)


if __name__ == "__main__":
    main()
