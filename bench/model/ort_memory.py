#!/usr/bin/env python3
"""ONNX Runtime's peak memory for one run of an ONNX model (bench/run_model.sh): in a fresh
process (this script, once per model), the peak resident set size (getrusage ru_maxrss) that
creating the session (1 intra-op thread, default CPU provider and memory arena) and one run on
random inputs add to the process after numpy and onnxruntime are imported. Also the part the run
adds beyond the session's peak. Prints JSON. Usage: ort_memory.py MODEL.onnx"""
import json
import resource
import sys

import numpy as np
import onnxruntime as ort


def max_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


path = sys.argv[1]
opts = ort.SessionOptions()
opts.intra_op_num_threads = 1
opts.inter_op_num_threads = 1
rng = np.random.default_rng(3)
base = max_rss()
sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
inputs = {i.name: rng.uniform(-1, 1, i.shape).astype(np.float32) for i in sess.get_inputs()}
after_session = max_rss()
sess.run(None, inputs)
after_run = max_rss()
print(json.dumps({"model": path, "onnxruntime": ort.__version__,
                  "session_and_run_bytes": after_run - base,
                  "run_bytes": after_run - after_session}))
