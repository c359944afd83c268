#!/usr/bin/python3
"""Validates every example spec against generator/frontend/spec.schema.json and checks that the
schema rejects a few invalid specs. Usage: schema_test.py SCHEMA EXAMPLES_DIR"""
import copy
import json
import pathlib
import sys

import jsonschema


def main() -> int:
    schema = json.loads(pathlib.Path(sys.argv[1]).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    failures = []

    examples = sorted(pathlib.Path(sys.argv[2]).glob("*.json"))
    if not examples:
        failures.append(f"no examples in {sys.argv[2]}")
    for path in examples:
        for error in validator.iter_errors(json.loads(path.read_text())):
            failures.append(f"{path.name}: {error.json_path}: {error.message}")

    base = {"model": "m", "layers": [{"name": "c", "op": "conv2d", "input_shape": [1, 3, 8, 8],
                                      "out_channels": 4, "kernel": 3}]}
    if not validator.is_valid(base):
        failures.append("the minimal valid spec is rejected")
    invalid = {
        "unknown field": ("strides", 2),
        "missing op": ("op", None),
        "bad padding name": ("padding", "sam"),
        "zero kernel": ("kernel", 0),
        "bad weight layout": ("weight_layout", "OIWH"),
        "non-identifier name": ("name", "1st"),
        "ceil_mode on conv": ("ceil_mode", True),
        "value with non-constant border": ("border", {"mode": "reflect", "value": 1}),
        "convention without same": ("convention", "pytorch"),
    }
    for what, (field, value) in invalid.items():
        spec = copy.deepcopy(base)
        if value is None:
            del spec["layers"][0][field]
        else:
            spec["layers"][0][field] = value
        if validator.is_valid(spec):
            failures.append(f"schema accepts a spec with {what}")
    no_input = copy.deepcopy(base)
    del no_input["layers"][0]["input_shape"]
    if validator.is_valid(no_input):
        failures.append("schema accepts a first layer without input_shape")
    pool_with_bias = copy.deepcopy(base)
    pool_with_bias["layers"].append({"name": "p", "op": "max_pool", "kernel": 2, "bias": True})
    if validator.is_valid(pool_with_bias):
        failures.append("schema accepts bias on a pool")

    graph = {"model": "g", "inputs": [{"name": "x", "shape": [1, 4, 8, 8]}],
             "layers": [{"name": "a", "op": "conv2d", "input": "x", "out_channels": 4,
                         "kernel": 3, "padding": "same", "bias": True,
                         "weight_files": {"weights": "a_w.npy", "bias": "a_b.npy"}},
                        {"name": "s", "op": "add", "input": ["a", "x"], "activation": "relu"},
                        {"name": "c", "op": "concat", "input": ["s", "x", "a"]}],
             "outputs": ["c"]}
    if not validator.is_valid(graph):
        failures.append("the graph spec is rejected: " +
                        "; ".join(e.message for e in validator.iter_errors(graph)))
    bad_graphs = {
        "add with a kernel": (1, "kernel", 3),
        "add with one input": (1, "input", "a"),
        "concat with an activation": (2, "activation", "relu"),
        "a conv reading a list": (0, "input", ["x", "x"]),
    }
    for what, (index, field, value) in bad_graphs.items():
        spec = copy.deepcopy(graph)
        spec["layers"][index][field] = value
        if validator.is_valid(spec):
            failures.append(f"schema accepts a graph with {what}")
    no_bias = copy.deepcopy(graph)
    no_bias["layers"][0]["bias"] = False
    if validator.is_valid(no_bias):
        failures.append("schema accepts a bias file on a layer without bias")

    for failure in failures:
        print("FAIL:", failure)
    print(f"{len(examples)} examples checked, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
