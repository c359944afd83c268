"""padfold.port: a whole model's padding explained for another framework, as `padfold port --json`
gives it, with the PyTorch module that computes what the model computes."""
import json
import os
from typing import Dict, Optional, Sequence, Union

from . import _core
from ._bundle import _input_sizes

PathLike = Union[str, os.PathLike]


def port(model: PathLike, to: str = "pytorch",
         inputs: Optional[Dict[str, Sequence[int]]] = None) -> dict:
    """Every conv, conv_transpose and pool of `model` (an .onnx file or a padfold spec) resolved at
    its fixed input size (inputs= gives dynamic ONNX inputs' sizes), and for the framework `to`
    (pytorch, keras, onnx) what its own padding option gives.

    Returns the report as a dict: "layers", one per layer with "axes" (input, before, after,
    output, and the naive port's), "reads_as" (valid, same_upper, ...), "asymmetric",
    "input_dependent", "native" (the framework's option, as code), "native_exact", "fix" (exact
    code), "naive" (padding=k//2 in PyTorch, 'same' in Keras), "naive_differs", "shift" and
    "output_delta" per axis; "summary"; "left_to_caller". For to="pytorch" also "module": the
    nn.Module's source (its Model(weights) reads the folder padfold import writes); for
    to="keras" the source of build(weights), returning the keras.Model; None with
    "module_error" where the model cannot be ported whole. Errors raise padfold.Error.
    """
    return json.loads(_core.port_json(os.fspath(model), to, _input_sizes(inputs), ""))
