#!/usr/bin/env python3
"""padfold's GPU kernels against PyTorch, through ctypes on the bundle's shared library.

Loads the bundle's library for its GPU target (no padfold runtime, no Halide: the library holds the
kernels and Halide's runtime), runs every kernel on random data in host memory (Halide copies it to
the device), checks the output element-wise against PyTorch on the same data, then times both:
padfold with its buffers resident on the device (launches back to back, then a device sync),
PyTorch the same way (wall clock, torch.cuda.synchronize) and with CUDA events. Medians of
repeats after warm-up. PyTorch's way for each layer: cuDNN with its native pads when they are
symmetric and the border is zeros, else F.pad (zeros for asymmetric SAME, or the border's mode)
followed by the convolution.

usage: run_bench.py BUNDLE [--out results.md] [--layers a,b] [--quick] [--device cpu]
                    [--padfold-only]
(--device cpu with an OpenCL bundle: a smoke test of this script without an NVIDIA GPU.)
"""
import argparse
import ctypes as C
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

# ---- the C structs (runtime/include/padfold_registry.h, HalideRuntime.h) ----


class HalideDim(C.Structure):
    _fields_ = [("min", C.c_int32), ("extent", C.c_int32), ("stride", C.c_int32),
                ("flags", C.c_uint32)]


class HalideType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class HalideBuffer(C.Structure):
    _fields_ = [("device", C.c_uint64), ("device_interface", C.c_void_p), ("host", C.c_void_p),
                ("flags", C.c_uint64), ("type", HalideType), ("dimensions", C.c_int32),
                ("dim", C.POINTER(HalideDim)), ("padding", C.c_void_p)]


HOST_DIRTY = 1
BUF_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(HalideBuffer))
ARGV_FN = C.CFUNCTYPE(C.c_int, C.POINTER(C.c_void_p))
ERROR_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_char_p)
SET_ERROR_FN = C.CFUNCTYPE(C.c_void_p, ERROR_FN)
MAX_RANK = 8


class BufferDesc(C.Structure):
    _fields_ = [("name", C.c_char_p), ("role", C.c_int), ("dtype", C.c_int),
                ("layout", C.c_char_p), ("rank", C.c_int), ("shape", C.c_int64 * MAX_RANK),
                ("strides", C.c_int64 * MAX_RANK), ("source", C.c_char_p), ("data", C.c_void_p)]


class DeviceHooks(C.Structure):
    _fields_ = [("api", C.c_char_p), ("copy_to_host", BUF_FN), ("device_free", BUF_FN),
                ("device_sync", BUF_FN), ("device_release", C.c_void_p),
                ("device_interface", C.c_void_p)]


class KernelDesc(C.Structure):
    _fields_ = [("layer", C.c_char_p), ("function", C.c_char_p), ("op", C.c_char_p),
                ("argv_fn", ARGV_FN), ("num_buffers", C.c_int),
                ("buffers", C.POINTER(BufferDesc)), ("device", C.POINTER(DeviceHooks))]


class RuntimeHooks(C.Structure):
    _fields_ = [("set_custom_malloc", C.c_void_p), ("set_custom_free", C.c_void_p),
                ("set_custom_do_par_for", C.c_void_p), ("set_num_threads", C.c_void_p),
                ("set_error_handler", SET_ERROR_FN)]


class Registry(C.Structure):
    _fields_ = [("format_version", C.c_int), ("model", C.c_char_p), ("target", C.c_char_p),
                ("num_kernels", C.c_int), ("kernels", C.POINTER(KernelDesc)),
                ("hooks", RuntimeHooks), ("num_inputs", C.c_int),
                ("inputs", C.POINTER(BufferDesc)), ("num_outputs", C.c_int),
                ("outputs", C.POINTER(C.c_char_p))]


ROLE_OUTPUT = 3
errors = []


@ERROR_FN
def on_halide_error(_uc, msg):
    errors.append(msg.decode(errors="replace").strip())


class Bundle:
    """The GPU target of a bundle directory, loaded with ctypes."""

    def __init__(self, directory):
        with open(os.path.join(directory, "manifest.json")) as f:
            self.manifest = json.load(f)
        gpu = [t for t in self.manifest["targets"] if t.get("device_api")]
        if not gpu:
            raise SystemExit(f"{directory}: the bundle has no GPU target")
        self.target = gpu[0]
        self.api = self.target["device_api"]
        if self.api == "cuda":
            # Halide's CUDA runtime looks for cuInit in the process first, then dlopens
            # libcuda.so, which a driver-only machine may lack: the driver, global.
            C.CDLL("libcuda.so.1", mode=C.RTLD_GLOBAL)
            regs = self.target.get("cuda_jit_max_registers")
            if regs:
                os.environ.setdefault("HL_CUDA_JIT_MAX_REGISTERS", str(regs))
        lib = C.CDLL(os.path.join(directory, self.target["shared_library"]))
        entry = lib.padfold_bundle_registry
        entry.restype = C.POINTER(Registry)
        self.reg = entry().contents
        self.reg.hooks.set_error_handler(on_halide_error)
        self.kernels = {self.reg.kernels[i].layer.decode(): self.reg.kernels[i]
                        for i in range(self.reg.num_kernels)}


class Buffers:
    """halide_buffer_t over numpy arrays (dense, C order), in a kernel's buffer order."""

    def __init__(self, kernel, arrays):
        self.kernel, self.arrays = kernel, arrays
        self.bufs = (HalideBuffer * len(arrays))()
        self.dims = []
        self.args = (C.c_void_p * len(arrays))()
        for i, a in enumerate(arrays):
            desc = kernel.buffers[i]
            shape = [desc.shape[d] for d in range(desc.rank)]
            if list(a.shape) != shape or a.dtype != np.float32 or not a.flags.c_contiguous:
                raise SystemExit(f"{kernel.layer.decode()}: buffer {desc.name.decode()} expects "
                                 f"{shape} float32, got {list(a.shape)} {a.dtype}")
            dims = (HalideDim * a.ndim)()
            for d in range(a.ndim):  # Halide: innermost first
                dims[d] = HalideDim(0, a.shape[a.ndim - 1 - d],
                                    a.strides[a.ndim - 1 - d] // 4, 0)
            self.dims.append(dims)
            b = self.bufs[i]
            b.host = a.ctypes.data
            b.type = HalideType(2, 32, 1)  # float32
            b.dimensions = a.ndim
            b.dim = dims
            b.flags = HOST_DIRTY if desc.role != ROLE_OUTPUT else 0
            self.args[i] = C.cast(C.pointer(b), C.c_void_p)

    def call(self, what):
        rc = self.kernel.argv_fn(self.args)
        if rc:
            raise RuntimeError(f"{self.kernel.layer.decode()}: {what} failed with Halide error "
                               f"{rc}: {' | '.join(errors[-3:])}")

    def check(self, rc, what):
        if rc:
            raise RuntimeError(f"{self.kernel.layer.decode()}: {what} failed with Halide error "
                               f"{rc}: {' | '.join(errors[-3:])}")

    def output(self):
        i = len(self.arrays) - 1
        self.check(self.kernel.device.contents.copy_to_host(None, C.pointer(self.bufs[i])),
                   "halide_copy_to_host")
        return self.arrays[i]

    def sync(self):
        i = len(self.arrays) - 1
        self.check(self.kernel.device.contents.device_sync(None, C.pointer(self.bufs[i])),
                   "halide_device_sync")

    def free(self):
        for i in range(len(self.arrays)):
            if self.bufs[i].device:
                self.check(self.kernel.device.contents.device_free(None,
                                                                   C.pointer(self.bufs[i])),
                           "halide_device_free")


def timed(run, sync, reps, min_seconds, max_seconds=1.0):
    """Median seconds per run: launches back to back for about min_seconds, then a sync; fewer
    repeats (at least 3) where they would take longer than max_seconds in all."""
    for _ in range(5):
        run()
    sync()
    t = time.perf_counter()
    run()
    sync()
    once = max(time.perf_counter() - t, 1e-7)
    n = max(1, min(10000, int(min_seconds / once)))
    reps = max(3, min(reps, int(max_seconds / (n * once))))
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            run()
        sync()
        samples.append((time.perf_counter() - t) / n)
    return statistics.median(samples)


def event_timed(run, reps, n):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        start.record()
        for _ in range(n):
            run()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / n)
    return statistics.median(samples)


def ratio(a, b):
    return a / b if b > 0 else float("nan")


def torch_way(layer, pads_before, pads_after, border, x, w):
    """PyTorch's own way for the layer: (callable, description)."""
    stride, dilation, groups = tuple(layer["stride"]), tuple(layer["dilation"]), layer["groups"]
    if border == "zeros" and pads_before == pads_after:
        pad = tuple(pads_before)
        return (lambda: F.conv2d(x, w, None, stride, pad, dilation, groups),
                "cuDNN, native pads")
    mode = {"zeros": "constant", "reflect": "reflect", "replicate": "replicate",
            "circular": "circular"}[border]
    pad = (pads_before[1], pads_after[1], pads_before[0], pads_after[0])  # W then H
    return (lambda: F.conv2d(F.pad(x, pad, mode=mode), w, None, stride, 0, dilation, groups),
            f"F.pad({mode}) + cuDNN")


def geomean(values):
    values = [v for v in values if v > 0 and v == v]
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def layout_summary(rows):
    """Per batch: geometric means of torch / padfold in each layout, and of padfold's NCHW time
    over its NHWC time on the layers measured in both (zero border)."""
    out = ["", "| batch | speedup NHWC (geomean) | speedup NCHW (geomean) | padfold NCHW / NHWC "
           "time (geomean, same layers) |", "|---|---|---|---|"]
    by = {(r[0].replace("_nchw", ""), r[2]): r for r in rows}
    for n in sorted({r[1] for r in rows}):
        sp = {lay: geomean([ratio(r[8], r[7]) for r in rows if r[1] == n and r[2] == lay])
              for lay in ("NHWC", "NCHW")}
        pairs = [ratio(by[(key, "NCHW")][7], r[7]) for (key, lay), r in by.items()
                 if lay == "NHWC" and r[1] == n and (key, "NCHW") in by]
        out.append(f"| {n} | {sp['NHWC']:.2f}x | {sp['NCHW']:.2f}x | {geomean(pairs):.2f} |")
    return out


def gpu_description():
    if not torch.cuda.is_available():
        return "no CUDA device (smoke test)", "-"
    name = torch.cuda.get_device_name(0)
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                 "--format=csv,noheader"], capture_output=True, text=True,
                                timeout=30).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        driver = "unknown (no nvidia-smi)"
    return name, driver


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle")
    ap.add_argument("--out", default=None, help="results Markdown file")
    ap.add_argument("--layers", default="", help="comma-separated layer names (default: all)")
    ap.add_argument("--quick", action="store_true", help="few repeats (smoke test)")
    ap.add_argument("--device", default="cuda", help="PyTorch's device (cpu: smoke test)")
    ap.add_argument("--reps", type=int, default=15, help="timed repeats (median)")
    ap.add_argument("--min-seconds", type=float, default=0.03, help="length of one repeat")
    ap.add_argument("--padfold-only", action="store_true",
                    help="check against PyTorch but time only padfold (knob sweeps)")
    ap.add_argument("--command", default=" ".join(sys.argv))
    args = ap.parse_args()
    started = time.time()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device(args.device)
    bundle = Bundle(args.bundle)
    with open(os.path.join(args.bundle, "bench_gpu_spec.json")) as f:
        spec_layers = {L["name"]: L for L in json.load(f)["layers"]}
    wanted = [n for n in args.layers.split(",") if n]
    reps, min_s = (3, 0.005) if args.quick else (args.reps, args.min_seconds)
    rows, failures = [], 0
    for k in bundle.manifest["kernels"]:
        name = k["layer"]
        if wanted and name not in wanted:
            continue
        L = spec_layers[name]
        kernel = bundle.kernels[name]
        shapes = [b["shape"] for b in k["buffers"]]
        gen = torch.Generator().manual_seed(len(rows) + 1)
        x = (torch.rand(shapes[0], generator=gen) * 2 - 1).numpy()
        w = (torch.rand(shapes[1], generator=gen) * 2 - 1).numpy()
        out = np.full(shapes[2], -12345.0, np.float32)
        bufs = Buffers(kernel, [x, w, out])
        channels_last = L["layout"] == "NHWC"
        if channels_last:  # NHWC / HWIO data seen by PyTorch as NCHW (channels-last memory) / OIHW
            tx = torch.from_numpy(x).to(dev).permute(0, 3, 1, 2)
            tw = torch.from_numpy(w).to(dev).permute(3, 2, 0, 1).contiguous(
                memory_format=torch.channels_last)
        else:  # NCHW / OIHW as they are
            tx, tw = torch.from_numpy(x).to(dev), torch.from_numpy(w).to(dev)
        run_torch, how = torch_way(L, k["pads_before"], k["pads_after"], k["border"], tx, tw)
        try:
            with torch.no_grad():
                want = run_torch()
                want = (want.permute(0, 2, 3, 1) if channels_last else want).cpu().numpy()
                bufs.call("the first run")
                got = bufs.output()
                err = (float(np.max(np.abs(got - want))) if got.shape == want.shape
                       else float("inf"))
                tol = 1e-4 * max(float(np.max(np.abs(want))), 1e-30)
                ok = err <= tol
                sync_torch = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
                t_pf = timed(lambda: bufs.call("a timed run"), bufs.sync, reps, min_s)
                t_torch = t_events = float("nan")
                if not args.padfold_only:
                    t_torch = timed(run_torch, sync_torch, reps, min_s)
                    t_events = (event_timed(run_torch, reps,
                                            max(3, int(min_s / max(t_torch, 1e-7))))
                                if dev.type == "cuda" else float("nan"))
            bufs.free()
        except RuntimeError as e:  # a kernel that fails is a row, not the end of the run
            print(f"{name}: {e}", flush=True)
            ok, err, tol = False, float("inf"), 0.0
            t_pf = t_torch = t_events = float("nan")
            how += f"; FAILED: {e}"
        failures += not ok
        rows.append((name, shapes[0][0], L["layout"], k["pads_before"], k["pads_after"], k["border"], how,
                     t_pf, t_torch, t_events, err, tol, ok))
        print(f"{name:28s} {'ok ' if ok else 'BAD'} err {err:.2e} (tol {tol:.1e})  padfold "
              f"{t_pf * 1e3:8.4f} ms  torch {t_torch * 1e3:8.4f} ms  x{ratio(t_torch, t_pf):5.2f}"
              f"  [{how}]", flush=True)
    gpu, driver = gpu_description()
    lines = [
        "# padfold GPU kernels vs PyTorch",
        "",
        f"GPU: {gpu}; driver {driver}; PyTorch {torch.__version__}, CUDA "
        f"{torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}; host "
        f"{platform.processor() or platform.machine()}.",
        f"Bundle target: `{bundle.target['target']}` (PTX {bundle.target.get('cuda_arch')}, "
        f"JIT-compiled by the driver; HL_CUDA_JIT_MAX_REGISTERS="
        f"{os.environ.get('HL_CUDA_JIT_MAX_REGISTERS', 'unset')}).",
        f"Command: `{args.command}`; {time.time() - started:.0f} s.",
        "",
        "FP32, TF32 off, cudnn.benchmark on. Times: median over repeats of back-to-back launches "
        "followed by a device sync (wall clock, the same for both; padfold's buffers resident on "
        "the device); `torch events`: the same loop timed with CUDA events. `speedup` = torch / "
        "padfold (wall clock). Every output checked element-wise first: max |padfold - torch| "
        "<= 1e-4 * max |torch|.",
        "",
        "| layer | N | layout | pads (before / after) | border | PyTorch's way | padfold ms "
        "| torch ms | torch events ms | speedup | max err | ok |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, n, layout, pb, pa, border, how, t_pf, t_torch, t_ev, err, tol, ok) in rows:
        lines.append(f"| {name} | {n} | {layout} | {pb} / {pa} | {border} | {how} | {t_pf * 1e3:.4f} | "
                     f"{t_torch * 1e3:.4f} | {t_ev * 1e3:.4f} | {ratio(t_torch, t_pf):.2f}x | "
                     f"{err:.1e} | {'yes' if ok else 'NO'} |")
    lines.append("")
    lines.append(f"{len(rows) - failures} of {len(rows)} kernels match PyTorch.")
    lines += layout_summary(rows)
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"wrote {args.out}")
    else:
        print(text)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
