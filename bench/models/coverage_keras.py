#!/usr/bin/env python3
"""Opt-in: keras.applications' CNNs as a Keras user runs them through padfold: random weights,
BatchNormalization statistics measured on random inputs (make_keras_models.calibrate),
tf2onnx.convert.from_keras (opset 15), `padfold import` with default options, `padfold compile
--target host`, `padfold run --model`, the scores compared with Keras's own. Prints one line per
model (whole or what is left, the largest error relative to the largest score, argmax); exit
status 1 if any model is not whole or differs by more than 1e-4. VGG16/19 at 64x64 (their 224x224
Flatten -> Dense weights exhaust tf2onnx's memory on a 24 GiB machine). Where onnxruntime is
installed too, each line also gives ONNX Runtime's own error on the same file (float32 summed in
another order: deep nets with softmax heads differ from Keras by 1e-4 of the largest score in
either runtime). Needs TensorFlow and tf2onnx (and optionally onnxruntime) in a venv outside the
repository (see make_keras_models.py):

  /tmp/tfv/bin/python bench/models/coverage_keras.py build/bin/padfold WORK_DIR [MODEL ...]

Two tf2onnx gaps are bridged before conversion, neither changing what the model computes (the
scores compared are the original model's): Keras 3's exact GELU calls Erfc, which tf2onnx has no
handler for (converted here as 1 - Erf), and a Conv2D with one group per channel (ConvNeXt's
depthwise convs) runs as an XLA function tf2onnx cannot inline, so it is converted as the
DepthwiseConv2D it is, with the same weights.
"""
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402
from tf2onnx import utils as tf2onnx_utils  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import coverage_common  # noqa: E402
import make_keras_models  # noqa: E402

A = tf.keras.applications
MODELS = {"xception": (A.Xception, 299), "vgg16": (A.VGG16, 64), "vgg19": (A.VGG19, 64),
          "resnet50": (A.ResNet50, 224), "resnet50v2": (A.ResNet50V2, 224),
          "resnet101": (A.ResNet101, 224), "inception_v3": (A.InceptionV3, 299),
          "inception_resnet_v2": (A.InceptionResNetV2, 299), "mobilenet": (A.MobileNet, 224),
          "mobilenet_v2": (A.MobileNetV2, 224), "mobilenet_v3_small": (A.MobileNetV3Small, 224),
          "mobilenet_v3_large": (A.MobileNetV3Large, 224), "densenet121": (A.DenseNet121, 224),
          "nasnet_mobile": (A.NASNetMobile, 224), "efficientnet_b0": (A.EfficientNetB0, 224),
          "efficientnet_v2_b0": (A.EfficientNetV2B0, 224), "convnext_tiny": (A.ConvNeXtTiny, 224)}


def erfc_as_erf(ctx, node, name, args):
    """tf2onnx handler: Erfc(x) as Sub(1, Erf(x))."""
    erf = ctx.make_node("Erf", [node.input[0]])
    one = ctx.make_const(tf2onnx_utils.make_name("one"), np.array(1, np.float32))
    node.type = "Sub"
    ctx.replace_inputs(node, [one.output[0], erf.output[0]])


def depthwise_as_such(model):
    """The model with every Conv2D of one group per channel a DepthwiseConv2D of its weights."""
    def is_depthwise(layer):
        c = layer.get_config()
        return (isinstance(layer, keras.layers.Conv2D) and c.get("groups", 1) > 1 and
                c["groups"] == c["filters"])
    if not any(is_depthwise(layer) for layer in model.layers):
        return model

    def clone(layer):
        c = layer.get_config()
        if not is_depthwise(layer):
            return layer.__class__.from_config(c)
        return keras.layers.DepthwiseConv2D(
            kernel_size=c["kernel_size"], strides=c["strides"], padding=c["padding"],
            dilation_rate=c["dilation_rate"], use_bias=c["use_bias"], name=c["name"])
    copy = keras.models.clone_model(model, clone_function=clone)
    for a, b in zip(model.layers, copy.layers):
        w = a.get_weights()
        if isinstance(b, keras.layers.DepthwiseConv2D):  # HW1C -> HWC1
            w = [np.transpose(w[0], (0, 1, 3, 2))] + w[1:]
        b.set_weights(w)
    return copy


def build(name):
    """Model `name` with its fixed seeds (random weights, calibrated BatchNormalization) and the
    one random input: (model, x)."""
    make, size = MODELS[name]
    tf.keras.utils.set_random_seed(3)
    model = make(input_shape=(size, size, 3), weights=None)
    make_keras_models.SIZE = size
    make_keras_models.calibrate(model, np.random.default_rng(5))
    return model, np.random.default_rng(1).uniform(0, 1, (1, size, size, 3)).astype(np.float32)


def convert(model, x, path):
    """The model through tf2onnx (opset 15, the two gaps bridged) to `path`."""
    spec = (tf.TensorSpec(x.shape, tf.float32, name="x"),)
    tf2onnx.convert.from_keras(depthwise_as_such(model), input_signature=spec, opset=15,
                               output_path=str(path),
                               custom_op_handlers={"Erfc": (erfc_as_erf, [])})


def check(padfold, work, name):
    size = MODELS[name][1]
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    model, x = build(name)
    want = model(x, training=False).numpy()
    try:
        convert(model, x, d / "model.onnx")
    except Exception as e:  # noqa: BLE001 (tf2onnx's own failure: not padfold's)
        return False, f"tf2onnx fails: {str(e)[:200]}"
    ok, text = coverage_common.through_padfold(padfold, d, x, want, argmax_axis=-1)
    try:  # how far ONNX Runtime's float32 is from Keras's on the same file, where installed
        import onnxruntime  # noqa: PLC0415
        session = onnxruntime.InferenceSession(str(d / "model.onnx"),
                                               providers=["CPUExecutionProvider"])
        theirs = session.run(None, {"x": x})[0]
        text += (f"; ONNX Runtime's own error "
                 f"{float(np.abs(theirs - want).max() / np.abs(want).max()):.2g}")
    except ImportError:
        pass
    return ok, f"({size}x{size}) {text}"


if __name__ == "__main__":
    padfold, work = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2])
    coverage_common.main(lambda name: check(padfold, work, name), sys.argv[3:] or list(MODELS),
                         f"tensorflow {tf.__version__}, tf2onnx {tf2onnx.__version__}")
