"""padfold.resize: the resize conventions of the CLI (padfold resize --json), as data."""
import json
from typing import Optional, Sequence, Union

from . import _core
from ._pads import Sizes, _sizes

Scales = Union[float, Sequence[float]]


def _scales(value: Scales) -> str:
    values = [value] if isinstance(value, (int, float)) else list(value)
    if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                             for v in values):
        raise TypeError(f"scales: expected a number or a sequence of numbers, got {value!r}")
    return "x".join(repr(float(v)) for v in values)


def _roi(value) -> str:
    try:
        pairs = [(float(start), float(end)) for start, end in value]
    except (TypeError, ValueError):
        raise TypeError(f"roi: expected one (start, end) pair per axis, got {value!r}") from None
    return ",".join(f"{start!r}:{end!r}" for start, end in pairs)


def resize(input: Sizes, output: Optional[Sizes] = None, scales: Optional[Scales] = None,
           mode: str = "linear", coordinate_transformation_mode: str = "half_pixel",
           nearest_mode: str = "round_prefer_floor",
           roi: Optional[Sequence[Sequence[float]]] = None,
           extrapolation_value: float = 0.0) -> dict:
    """Where each output pixel of a resize reads its input, as `padfold resize` resolves it.

    input: an int (one axis) or one size per spatial axis; output or scales (one of them): an int
    or float for every axis, or one per axis. mode: nearest or linear; the coordinate and nearest
    modes are ONNX's names (PyTorch's align_corners=True is align_corners, its nearest asymmetric
    with floor, TF2's tf.image.resize half_pixel: the "compare" rows say who writes each). roi
    and extrapolation_value: tf_crop_and_resize's region, one (start, end) per axis (1 is the
    last pixel), and the value where it leaves the input.

    Returns a dict: "output" and "scales" per axis; "taps": per axis, per output index, the input
    index "first" (nearest) or "first"/"second" with their weights, or "outside": True where
    tf_crop_and_resize writes extrapolation_value (linear: output = first_weight
    * input[first] + second_weight * input[second], along each axis in turn); "compare": one row
    per coordinate mode with who writes it ("used_by") and the output indices per axis where it
    reads otherwise ("differs_at"). Raises padfold.Error with the CLI's message.
    """
    if (output is None) == (scales is None):
        raise TypeError("resize: give output or scales (one of them)")
    text = _core.resize_json(_sizes(input, "input"),
                             "" if output is None else _sizes(output, "output"),
                             "" if scales is None else _scales(scales), mode,
                             coordinate_transformation_mode, nearest_mode,
                             "" if roi is None else _roi(roi), float(extrapolation_value))
    return json.loads(text)
