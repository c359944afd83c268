#!/usr/bin/env python3
"""ONNX Runtime's latency on a model: all graph optimizations, THREADS intra-op threads,
sequential execution, warm-up, then single runs timed until MIN_TIME seconds and 30 runs; prints
JSON with the median. With --check X.npy Y.npy it also writes ONNX Runtime's output for input X.
Usage: ort_time.py MODEL.onnx THREADS MIN_TIME [--check X.npy Y.npy]"""
import json
import sys
import time

import numpy as np
import onnxruntime as ort


def main():
    path, threads, min_time = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    if "--check" in sys.argv:
        i = sys.argv.index("--check")
        x = np.load(sys.argv[i + 1])
        np.save(sys.argv[i + 2], session.run(None, {inp.name: x})[0])
    x = np.random.default_rng(0).uniform(-1, 1, inp.shape).astype(np.float32)
    for _ in range(5):
        session.run(None, {inp.name: x})
    samples, start = [], time.perf_counter()
    while time.perf_counter() - start < min_time or len(samples) < 30:
        t0 = time.perf_counter()
        session.run(None, {inp.name: x})
        samples.append(time.perf_counter() - t0)
    print(json.dumps({"threads": threads, "median_ms": 1e3 * float(np.median(samples)),
                      "runs": len(samples), "onnxruntime": ort.__version__}))


if __name__ == "__main__":
    main()
