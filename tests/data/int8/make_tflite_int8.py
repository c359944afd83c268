#!/usr/bin/env python3
"""Opt-in: Keras models quantized the way Keras users ship them to devices (TFLiteConverter with a
representative dataset, TFLITE_BUILTINS_INT8, int8 input and output), converted to ONNX by
`tf2onnx --tflite`, written here as tflite_int8_<name>.onnx with an int8 input
tflite_int8_<name>_x.npy and the TFLite interpreter's int8 output tflite_int8_<name>_y.npy.
The models are tests/data/keras/make_keras_models.py's (random weights, fixed seeds). Needs
TensorFlow and tf2onnx from PyPI, never CI: the suite reads the committed files.

  python3 -m venv /tmp/tfv && /tmp/tfv/bin/pip install tensorflow-cpu tf2onnx
  /tmp/tfv/bin/python tests/data/int8/make_tflite_int8.py [OUT_DIR [MODEL ...]]
"""
import os
import pathlib
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "keras"))
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from make_keras_models import MODELS, keras  # noqa: E402

NAMES = ["conv_pool", "strided_even", "depthwise", "residual", "conv1d", "conv_transpose"]


def int8_converter(model, representative):
    """Keras's full-integer post-training quantization: int8 ops, int8 input and output."""
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return conv


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else HERE)
    only = sys.argv[2:] or NAMES
    out.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(NAMES):
        if name not in only:
            continue
        keras.utils.set_random_seed(300 + i)
        m = MODELS[name]()
        rng = np.random.default_rng(300 + i)
        for w in m.weights:
            w.assign(rng.uniform(-0.5, 0.5, w.shape).astype(np.float32))
        shape = (1,) + tuple(m.input_shape[1:])

        def representative():
            for _ in range(32):
                yield [rng.uniform(-1, 1, shape).astype(np.float32)]
        with tempfile.TemporaryDirectory() as tmp:
            tfl = pathlib.Path(tmp) / f"{name}.tflite"
            tfl.write_bytes(int8_converter(m, representative).convert())
            it = tf.lite.Interpreter(str(tfl))
            it.allocate_tensors()
            x = np.random.default_rng(400 + i).integers(-128, 128, shape).astype(np.int8)
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
            y = it.get_tensor(it.get_output_details()[0]["index"])
            subprocess.run([sys.executable, "-m", "tf2onnx.convert", "--tflite", str(tfl),
                            "--output", str(out / f"tflite_int8_{name}.onnx"), "--opset", "13"],
                           check=True, capture_output=True)
        np.save(out / f"tflite_int8_{name}_x.npy", x)
        np.save(out / f"tflite_int8_{name}_y.npy", y)
        print(name, x.shape, "->", y.shape)


if __name__ == "__main__":
    main()
