#!/usr/bin/env python3
"""PyTorch layer by layer on the chains of a block spec (examples/inverted_residual_blocks.json),
for bench_blocks' table: batch 1, float32, channels_last, torch.set_num_threads(n), F.pad where
SAME is asymmetric (the pads padfold resolved, from the unfused bundle's manifest), default
torch.backends.mkldnn. Timing as bench_blocks: warm-up (3 calls, then ~20 ms), then every call
timed on its own until --min-time seconds and 30 calls; the median call, in ms.

  bench_blocks_torch.py SPEC --manifest unfused/manifest.json --threads 1,2 --json torch.json
  bench_blocks_torch.py SPEC --fuse-list      # prints the --fuse argument listing every chain

A chain starts at every layer with an explicit "input"; the layers after it continue it.
Needs Debian's python3-torch (/usr/bin/python3) for timing, nothing for --fuse-list.
"""
import argparse
import json
import statistics
import sys
import time


def chains_of(spec):
    chains = []
    for layer in spec["layers"]:
        if "input" in layer or not chains:
            chains.append([])
        chains[-1].append(layer)
    return chains


def pair(v, default):
    if v is None:
        return (default, default)
    if isinstance(v, int):
        return (v, v)
    return tuple(v)


def build(chain, kernels, torch):
    """The chain as a list of callables on a channels_last tensor, and its input."""
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(20261201)
    steps = []
    first = kernels[chain[0]["name"]]
    n, h, w, c = next(b for b in first["buffers"] if b["name"] == "input")["shape"]
    x = (torch.rand(n, c, h, w, generator=gen) * 2 - 1).contiguous(memory_format=torch.channels_last)
    for layer in chain:
        k = kernels[layer["name"]]
        (pt, pl), (pb, pr) = k["pads_before"], k["pads_after"]
        stride = pair(layer.get("stride"), 1)
        kern = pair(layer.get("kernel"), 1)
        sym = pt == pb and pl == pr
        act = layer.get("activation", "none")
        if layer["op"] == "conv2d":
            kh, kw, ig, oc = next(b for b in k["buffers"] if b["name"] == "weights")["shape"]
            in_c = next(b for b in k["buffers"] if b["name"] == "input")["shape"][3]
            groups = in_c // ig
            wt = ((torch.rand(oc, ig, kh, kw, generator=gen) * 2 - 1) / (kh * kw * ig) ** 0.5)
            wt = wt.contiguous(memory_format=torch.channels_last)
            bias = torch.rand(oc, generator=gen) * 2 - 1 if layer.get("bias") else None

            def conv(x, wt=wt, bias=bias, stride=stride, groups=groups, sym=sym,
                     pads=(pl, pr, pt, pb), act=act):
                if sym:
                    y = F.conv2d(x, wt, bias, stride, (pads[2], pads[0]), 1, groups)
                else:
                    y = F.conv2d(F.pad(x, pads), wt, bias, stride, 0, 1, groups)
                if act == "relu":
                    y = F.relu(y)
                elif act == "relu6":
                    y = F.relu6(y)
                return y

            steps.append(conv)
        elif layer["op"] == "max_pool":
            def pool(x, kern=kern, stride=stride, sym=sym, pads=(pl, pr, pt, pb)):
                if sym:
                    return F.max_pool2d(x, kern, stride, (pads[2], pads[0]))
                return F.max_pool2d(F.pad(x, pads, value=float("-inf")), kern, stride, 0)

            steps.append(pool)
        else:
            sys.exit(f"bench_blocks_torch: op {layer['op']} is not benchmarked")
    return steps, x


def time_chain(steps, x, min_time):
    def run():
        y = x
        for s in steps:
            y = s(y)
        return y

    for _ in range(3):
        run()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.02:
        run()
    samples, total = [], 0.0
    while total < min_time or len(samples) < 30:
        a = time.perf_counter()
        run()
        dt = time.perf_counter() - a
        samples.append(dt)
        total += dt
    return 1e3 * statistics.median(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("spec")
    ap.add_argument("--fuse-list", action="store_true", help="print --fuse listing every chain")
    ap.add_argument("--manifest", help="the unfused (--fuse none) bundle's manifest.json")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--json", help="write {threads: {chain: median ms}} here")
    args = ap.parse_args()
    spec = json.load(open(args.spec))
    chains = chains_of(spec)
    if args.fuse_list:
        print(",".join("+".join(l["name"] for l in c) for c in chains if len(c) > 1))
        return
    import torch

    kernels = {k["layer"]: k for k in json.load(open(args.manifest))["kernels"]}
    out = {"version": torch.__version__, "mkldnn": torch.backends.mkldnn.is_available()}
    with torch.inference_mode():
        for n in [int(t) for t in args.threads.split(",")]:
            torch.set_num_threads(n)
            out[str(n)] = {}
            for chain in chains:
                name = chain[0]["name"].split("_")[0]
                steps, x = build(chain, kernels, torch)
                out[str(n)][name] = time_chain(steps, x, args.min_time)
                print(f"torch {name} {n}T {out[str(n)][name]:.4f} ms", file=sys.stderr)
    if args.json:
        json.dump(out, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
