"""padfold.pads and padfold.compare: the padding module of the CLI (padfold pads --json), as
data."""
import json
from typing import NamedTuple, Optional, Sequence, Tuple, Union

from . import _core

Sizes = Union[int, Sequence[int]]


class Pads(NamedTuple):
    """The resolved padding of one layer, per spatial axis (D, H, W order)."""
    before: Tuple[int, ...]  # pad before each axis (transposed: cropped before)
    after: Tuple[int, ...]   # pad after (transposed: cropped after; negative extends)
    output: Tuple[int, ...]  # output size
    mode: str                # the mode it resolved to: same_upper, torch_same, explicit, ...
    asymmetric: bool         # before != after on some axis
    input_dependent: bool    # the pads would change with the input size
    convention: str          # who defines the mode ("TensorFlow/Keras SAME, ONNX SAME_UPPER")


def _sizes(value: Sizes, name: str) -> str:
    values = [value] if isinstance(value, int) else list(value)
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise TypeError(f"{name}: expected an int or a sequence of ints, got {value!r}")
    return "x".join(str(v) for v in values)


def _report(input, kernel, stride, dilation, padding, convention, ceil_mode, transposed,
            output_padding):
    if isinstance(padding, str):
        padding_text = padding
    else:
        padding_text = _sizes(padding, "padding").replace("x", ",")
    text = _core.pads_json(_sizes(input, "input"), _sizes(kernel, "kernel"),
                           _sizes(stride, "stride"), _sizes(dilation, "dilation"), padding_text,
                           convention or "", bool(ceil_mode), bool(transposed),
                           "" if output_padding is None else _sizes(output_padding,
                                                                    "output_padding"))
    return json.loads(text)


def _axes(axes):
    return (tuple(a["before"] for a in axes), tuple(a["after"] for a in axes),
            tuple(a["output"] for a in axes))


def pads(input: Sizes, kernel: Sizes, stride: Sizes = 1, dilation: Sizes = 1,
         padding: Union[str, Sizes] = "same", convention: Optional[str] = None, *,
         ceil_mode: bool = False, transposed: bool = False,
         output_padding: Optional[Sizes] = None) -> Pads:
    """Resolves a padding request for a known input size, as `padfold pads` does.

    input, kernel, stride, dilation: an int (every axis) or one per spatial axis; input sets the
    number of axes. padding: valid, same, same_upper, same_lower, torch_same, scipy_same, causal,
    full, or explicit pads (an int, one per axis, or all befores then all afters as ONNX writes
    them). convention, for 'same' only: tensorflow (None: the default), keras, onnx, onnx_lower,
    pytorch, scipy. Raises padfold.Error with the CLI's message when it cannot be resolved.
    """
    j = _report(input, kernel, stride, dilation, padding, convention, ceil_mode, transposed,
                output_padding)
    before, after, output = _axes(j["axes"])
    return Pads(before, after, output, j["mode"], j["asymmetric"], j["input_dependent"],
                j["convention"])


def compare(input: Sizes, kernel: Sizes, stride: Sizes = 1, dilation: Sizes = 1,
            padding: Union[str, Sizes] = "same", convention: Optional[str] = None, *,
            ceil_mode: bool = False, transposed: bool = False,
            output_padding: Optional[Sizes] = None):
    """The table `padfold pads --compare` prints, as data: one dict per convention with its
    label, whether it is the one asked for ("chosen"), and its mode and per-axis before/after/
    output, or the "error" that says why that convention cannot pad this layer; and the code
    reproducing the request in PyTorch, Keras, ONNX and NumPy ("reproduce")."""
    j = _report(input, kernel, stride, dilation, padding, convention, ceil_mode, transposed,
                output_padding)
    rows = []
    for row in j["compare"]:
        r = {"convention": row["convention"], "chosen": row["chosen"]}
        if "axes" in row:
            r["mode"] = row["mode"]
            r["before"], r["after"], r["output"] = _axes(row["axes"])
        else:
            r["error"] = row["error"]
        rows.append(r)
    return {"rows": rows, "reproduce": j["reproduce"]}
