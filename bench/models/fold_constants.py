#!/usr/bin/env python3
"""Folds a model's constant subgraphs with ONNX Runtime's basic (standard-ONNX) optimizations:
torch 1.13 exports an explicit pad (ZeroPad2d) as a Pad whose pads are computed at run time from
constants (ConstantOfShape, Concat, Reshape, Slice, Transpose), which padfold import does not
evaluate. Usage: fold_constants.py IN.onnx OUT.onnx (the .venv's onnxruntime)."""
import sys

import onnxruntime as ort

options = ort.SessionOptions()
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
options.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
