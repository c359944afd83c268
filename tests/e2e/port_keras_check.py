#!/usr/bin/env python3
"""Opt-in (needs TensorFlow/Keras 3 from PyPI, never CI): the Keras models `padfold port --to keras
--emit` writes compute what their sources compute. After tests/e2e/port_test.py has run (its work
directory holds the torch exports with torch's outputs and the border spec with `padfold run
--model`'s): every Keras model of tests/data/keras against Keras's own output, the torch exports
against torch, the border spec against padfold.

  python3 -m venv /tmp/tfv && /tmp/tfv/bin/pip install tensorflow-cpu
  /tmp/tfv/bin/python tests/e2e/port_keras_check.py build/bin/padfold . build/tests/e2e/port
"""
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402

TOL = 1e-5


def build(padfold, model, py, extra=()):
    cmd = [str(padfold), "port", str(model), "--to", "keras", "--emit", str(py), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr)
    spec = importlib.util.spec_from_file_location(py.stem, py)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m.build()


def compare(label, got, want):
    got = np.asarray(got)
    err = (float(np.max(np.abs(got.reshape(want.shape) - want))) if got.size == want.size
           else float("inf"))
    ok = err <= TOL * max(float(np.max(np.abs(want))), 1e-30)
    print(f"{'ok  ' if ok else 'FAIL'} {label:28s} max |error| {err:.2e}")
    return ok


def main():
    padfold, repo, work = (pathlib.Path(a).resolve() for a in sys.argv[1:4])
    out = work / "keras"
    out.mkdir(parents=True, exist_ok=True)
    ok = True
    data = repo / "tests/data/keras"
    for model in sorted(data.glob("*.onnx")):
        name = model.stem
        x = np.load(data / f"x_{name}.npy")
        r = subprocess.run([str(padfold), "port", str(model)], capture_output=True, text=True)
        inp = re.search(r"graph input '([^']+)'", r.stderr) if r.returncode else None
        extra = ["--input", f"{inp.group(1)}={'x'.join(map(str, x.shape))}"] if inp else []
        ok &= compare(name, build(padfold, model, out / f"{name}.py", extra)(x),
                      np.load(data / f"y_{name}.npy"))
    for name in ("torch_net", "torch_dilated"):
        d = work / name
        ok &= compare(name, build(padfold, d / f"{name}.onnx", out / f"{name}.py")(
            np.load(d / "x.npy")), np.load(d / "want.npy"))
    d = work / "borders"
    got = build(padfold, d / "borders.json", out / "borders.py")(np.load(d / "x.npy"))
    for g, o in zip(got, ["up", "nchw"]):
        ok &= compare(f"borders/{o}", g, np.load(d / f"{o}.npy"))
    print("Keras ports", "match" if ok else "DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
