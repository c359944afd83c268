#!/usr/bin/env python3
"""TFLite-exact int8 layers (tests/data/int8, written by make_int8_data.py there from the TFLite
interpreter's reference kernels): each spec compiled with `padfold compile`, run with
`padfold run --model` on the int8 inputs, and compared with TFLite's output bit for bit.

Usage: int8_tflite_test.py PADFOLD_BIN DATA_DIR WORK_DIR   (run with the project's .venv python)
"""
import json
import pathlib
import shutil
import sys

import numpy as np

from e2e_util import run, run_checks


def inputs_of(spec, data, name):
    """name=file for every model input: x, then x2 (the add's second input)."""
    if "inputs" in spec:
        names = [i["name"] for i in spec["inputs"]]
    else:
        names = [spec["layers"][0]["name"] + ".input"]
    files = [data / f"tfl_{name}_x.npy", data / f"tfl_{name}_x2.npy"]
    return [f"{n}={f}" for n, f in zip(names, files)]


def check(padfold, data, work, name):
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    spec_file = data / f"tfl_{name}.json"
    spec = json.loads(spec_file.read_text())
    run([padfold, "compile", spec_file, "-o", d / "bundle", "--target", "host"])
    cmd = [padfold, "run", d / "bundle", "--model", "--output", d / "y.npy"]
    for i in inputs_of(spec, data, name):
        cmd += ["--input", i]
    run(cmd)
    got, want = np.load(d / "y.npy"), np.load(data / f"tfl_{name}_y.npy")
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{name}: {got.dtype} {got.shape}, TFLite {want.dtype} {want.shape}"
    wrong = int((got != want).sum())
    if wrong:
        i = np.flatnonzero(got != want)[0]
        return (f"{name}: {wrong} of {want.size} differ from TFLite (first at {i}: "
                f"{got.flat[i]} vs {want.flat[i]})")
    print(f"{name}: {want.size} int8 outputs, bit-exact with TFLite: OK")
    return None


def main():
    padfold, data, work = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    names = sorted(p.stem[len("tfl_"):] for p in data.glob("tfl_*.json"))
    if not names:
        print(f"no tfl_*.json specs in {data}")
        return 1
    return run_checks(check, names, padfold, data, work)


if __name__ == "__main__":
    sys.exit(main())
