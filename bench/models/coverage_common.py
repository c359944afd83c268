"""What coverage_torchvision.py and coverage_keras.py share: a model's ONNX file through `padfold
import` (default options), `padfold compile --target host` and `padfold run --model`, its output
compared with the framework's, and the loop over models."""
import json
import pathlib
import subprocess
import sys

import numpy as np

TOLERANCE = 1e-4  # of the largest output, as issue 41's goal states it


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{pathlib.Path(str(cmd[0])).name} {cmd[1]} failed: "
                           f"{(r.stdout + r.stderr)[-400:]}")


def through_padfold(padfold, d, x, want, argmax_axis):
    """(ok, text) for d/model.onnx run by padfold on `x` against the framework's `want`."""
    run([padfold, "import", d / "model.onnx", "-o", d / "imported"])
    report = json.loads((d / "imported" / "import-report.json").read_text())
    left = report["left_to_caller"]
    if left:
        ops = sorted({n["op_type"] for n in left})
        return False, f"{len(left)} node(s) left to the caller ({', '.join(ops)})"
    spec_file = d / "imported" / "model.json"
    spec = json.loads(spec_file.read_text())
    run([padfold, "compile", spec_file, "-o", d / "bundle", "--target", "host", "-j", "2"])
    np.save(d / "x.npy", x)
    run([padfold, "run", d / "bundle", "--model", "--input",
         f"{spec['inputs'][0]['name']}={d / 'x.npy'}", "--output",
         f"{spec['outputs'][0]}={d / 'y.npy'}"])
    got = np.load(d / "y.npy").reshape(want.shape)
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    same = bool((got.argmax(argmax_axis) == want.argmax(argmax_axis)).all())
    ok = rel <= TOLERANCE
    return ok, (f"whole, {len(spec['layers'])} layers, max error {rel:.2g} of the largest "
                f"output, argmax {'the same' if same else 'differs'}"
                f"{'' if ok else f' (> {TOLERANCE:g})'}")


def main(check, names, header):
    """Runs check(name) -> (ok, text) for each model; exit status 1 if any is not ok."""
    print(header)
    bad = 0
    for name in names:
        try:
            ok, line = check(name)
        except Exception as e:  # noqa: BLE001 (a model the framework cannot build or convert)
            ok, line = False, f"{type(e).__name__}: {str(e)[:300]}"
        bad += not ok
        print(("" if ok else "FAIL: ") + f"{name}: {line}", flush=True)
    print(f"{len(names)} model(s), {bad} not whole or not matching")
    sys.exit(1 if bad else 0)
