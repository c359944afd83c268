"""padfold.resize against PyTorch's own F.interpolate: the taps it resolves for the mode torch's
options are (align_corners=False: half_pixel, True: align_corners, nearest: asymmetric with floor),
applied to random data, give torch's output; the CLI's resize --json is the same document."""
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import padfold


def apply(taps, x, linear):
    """Resizes the last axis of x by one axis's taps."""
    if not linear:
        return x[..., [t["first"] for t in taps]]
    first = x[..., [t["first"] for t in taps]]
    second = x[..., [t["second"] for t in taps]]
    return (first * np.array([t["first_weight"] for t in taps], np.float32) +
            second * np.array([t["second_weight"] for t in taps], np.float32))


TORCH_OPTIONS = [("linear", {"align_corners": False}, "half_pixel", "round_prefer_floor"),
                 ("linear", {"align_corners": True}, "align_corners", "round_prefer_floor"),
                 ("nearest", {}, "asymmetric", "floor")]


@pytest.mark.parametrize("size_in, size_out", [(5, 8), (8, 5), (4, 13), (7, 3), (6, 6), (3, 1)])
@pytest.mark.parametrize("torch_mode, options, coordinates, rounding", TORCH_OPTIONS)
def test_taps_reproduce_torch_interpolate(size_in, size_out, torch_mode, options, coordinates,
                                          rounding):
    x = torch.randn(2, 3, size_in)
    want = F.interpolate(x, size=size_out, mode=torch_mode, **options).numpy()
    r = padfold.resize(size_in, output=size_out, mode=torch_mode,
                       coordinate_transformation_mode=coordinates, nearest_mode=rounding)
    assert r["output"] == [size_out]
    got = apply(r["taps"][0], x.numpy(), torch_mode == "linear")
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    rows = {row["coordinate_transformation_mode"]: row for row in r["compare"]}
    assert rows[coordinates]["chosen"] and rows[coordinates]["differs_at"] == [[]]


def test_compare_says_where_torch_and_tensorflow_part(cli):
    # Upsampling 4 -> 8 linearly: align_corners=True reads otherwise than TF2's half_pixel on
    # every output but the two ends.
    r = padfold.resize([4, 4], scales=2.0)
    rows = {row["coordinate_transformation_mode"]: row for row in r["compare"]}
    assert rows["half_pixel"]["chosen"]
    assert rows["align_corners"]["differs_at"] == [[1, 2, 3, 4, 5, 6]] * 2
    assert "align_corners=True" in rows["align_corners"]["used_by"]
    rc, out, err = cli("resize", "--input", "4x4", "--scales", "2", "--json")
    assert rc == 0, err
    assert json.loads(out) == r


def test_crop_and_resize_marks_what_it_reads_outside(cli):
    # A region of [-0.5, 1] of 3 pixels, 4 outputs: coordinate x - 1, so output 0 is outside.
    r = padfold.resize(3, output=4, mode="nearest", nearest_mode="floor",
                       coordinate_transformation_mode="tf_crop_and_resize", roi=[(-0.5, 1)],
                       extrapolation_value=7)
    assert r["roi"] == [[-0.5, 1.0]] and r["extrapolation_value"] == 7.0
    assert r["taps"] == [[{"outside": True}, {"first": 0}, {"first": 1}, {"first": 2}]]
    rc, out, err = cli("resize", "--input", "3", "--output", "4", "--mode", "nearest",
                       "--nearest-mode", "floor", "--coordinate-transformation-mode",
                       "tf_crop_and_resize", "--roi", "-0.5:1", "--extrapolation-value", "7",
                       "--json")
    assert rc == 0, err
    assert json.loads(out) == r
    with pytest.raises(padfold.Error, match="--roi"):
        padfold.resize(3, output=4, roi=[(0, 1)])  # half_pixel reads no region
    with pytest.raises(TypeError):
        padfold.resize(3, output=4, coordinate_transformation_mode="tf_crop_and_resize", roi=[1])


def test_bad_requests_raise_with_the_cli_message():
    with pytest.raises(padfold.Error, match="--scales"):
        padfold.resize(4, scales=0.0)
    with pytest.raises(padfold.Error, match="cubic"):
        padfold.resize(4, output=8, mode="cubic")
    with pytest.raises(TypeError):
        padfold.resize(4)
