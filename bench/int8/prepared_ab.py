#!/usr/bin/env python3
"""int8 kernels reading weights the compile prepared against the same kernels preparing them per
call, side by side: the benchmark layers as int8 (run.py's int8_spec), compiled once with weight
files (the dot-product convs store their weight table prepared, WeightForm::dot_table, and every
conv its bias with the zero point's term folded in, zero_point_in_bias) and once without (the
caller's weights, the table and the weights' sums built on every call). ROUNDS rounds of `padfold bench
--json` on either bundle, the order alternating; per layer the median time of each and the median
of the per-round ratios; a Markdown table with the CPU named.

usage: bench/int8/prepared_ab.py PADFOLD_BINARY OUT.md [--threads 1] [--rounds 5]
                                 [--min-time 0.2] [--work DIR]
"""
import argparse
import json
import pathlib
import statistics
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import cpu_line, float_spec, int8_spec, run  # noqa: E402


def with_weight_files(spec, work):
    """The spec with every conv's weights and bias in files (random int8 and int32 values)."""
    rng = np.random.default_rng(7)
    out = json.loads(json.dumps(spec))
    for L in out["layers"]:
        if not L["op"].startswith("conv"):
            continue
        groups = L.get("groups", 1)
        k = L["kernel"] if isinstance(L["kernel"], list) else [L["kernel"]] * 2
        w = rng.integers(-127, 128, size=(*k, L["input_shape"][-1] // groups, L["out_channels"]),
                         dtype=np.int8)
        b = rng.integers(-5000, 5000, size=(L["out_channels"],), dtype=np.int32)
        np.save(work / f"{L['name']}_w.npy", w)
        np.save(work / f"{L['name']}_b.npy", b)
        L["weight_files"] = {"weights": f"{L['name']}_w.npy", "bias": f"{L['name']}_b.npy"}
    return out


def times(padfold, bundle, threads, min_time):
    got = json.loads(run([padfold, "bench", str(bundle), "--threads", str(threads),
                          "--min-time", str(min_time), "--json"]))
    return {k["layer"]: k["median_ms"] for k in got["runs"][0]["kernels"]}, got["target"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("padfold")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--work")
    a = ap.parse_args()
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="padfold_int8_prepared_"))
    qspec = int8_spec(float_spec(work))
    bundles = {}
    for name, s in (("per_call", qspec), ("prepared", with_weight_files(qspec, work))):
        (work / f"{name}.json").write_text(json.dumps(s, indent=1))
        bundles[name] = work / name
        run([a.padfold, "compile", str(work / f"{name}.json"), "--target", "host", "-o",
             str(bundles[name])])
    manifest = json.loads((bundles["prepared"] / "manifest.json").read_text())
    tables = {k["layer"] for k in manifest["kernels"] for b in k["buffers"]
              if b["name"] == "weights" and b["layout"].endswith("IO4i")}
    samples = {"per_call": [], "prepared": []}
    target = "?"
    for r in range(a.rounds):
        order = ("per_call", "prepared") if r % 2 == 0 else ("prepared", "per_call")
        for which in order:
            got, target = times(a.padfold, bundles[which], a.threads, a.min_time)
            samples[which].append(got)
    lines = [
        "## int8: weight tables prepared at compile against built per call", "",
        f"CPU: {cpu_line()}. Target `{target}`.", "",
        f"Command: `bench/int8/prepared_ab.py {a.padfold} {a.out} --threads {a.threads} "
        f"--rounds {a.rounds} --min-time {a.min_time}`: the int8 benchmark layers compiled with "
        "weight files (the dot-product convs read the table the compile prepared, every conv "
        "its bias with the zero point's term folded in) and without "
        "(the table and the weights' sums built on every call); `padfold bench` on either "
        f"bundle, {a.rounds} rounds alternating, medians; the speedup is the median of the "
        "per-round ratios.", "",
        f"### {a.threads} thread(s)", "",
        "| layer | table prepared | per call ms | prepared ms | speedup |",
        "|---|---|---:|---:|---:|",
    ]
    total = {"per_call": 0.0, "prepared": 0.0}
    for layer in samples["per_call"][0]:
        pc = [s[layer] for s in samples["per_call"]]
        pr = [s[layer] for s in samples["prepared"]]
        ratio = statistics.median(x / y for x, y in zip(pc, pr))
        total["per_call"] += statistics.median(pc)
        total["prepared"] += statistics.median(pr)
        lines.append(f"| {layer} | {'yes' if layer in tables else 'no'} | "
                     f"{statistics.median(pc):.4f} | {statistics.median(pr):.4f} | "
                     f"{ratio:.2f}x |")
    lines += [f"| all | | {total['per_call']:.3f} | {total['prepared']:.3f} | "
              f"{total['per_call'] / total['prepared']:.2f}x |", ""]
    pathlib.Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
