"""padfold.pads and padfold.compare against the CLI's pads --json, on a brute-forced grid, and
TensorFlow's SAME rule written out here as an independent oracle."""
import itertools
import json
import math

import pytest

import padfold

MODES = [("same", "tensorflow"), ("same", "onnx_lower"), ("same", "pytorch"), ("same", "scipy"),
         ("causal", None), ("valid", None), ("full", None)]


def cli_json(cli, size, k, s, d, padding, convention):
    args = ["pads", "--input", size, "--kernel", k, "--stride", s, "--dilation", d, "--padding",
            padding, "--json"]
    if convention:
        args += ["--convention", convention]
    rc, out, err = cli(*args)
    return (json.loads(out), None) if rc == 0 else (None, err.strip())


def test_grid_matches_the_cli(cli):
    checked = refused = 0
    for size, k, s, d, (padding, convention) in itertools.product(
            (1, 2, 5, 6), range(1, 5), range(1, 4), range(1, 3), MODES):
        want, err = cli_json(cli, size, k, s, d, padding, convention)
        if err:
            with pytest.raises(padfold.Error) as e:
                padfold.pads(size, k, s, d, padding, convention)
            assert err == "padfold: error: " + str(e.value)
            refused += 1
            continue
        got = padfold.pads(size, k, s, d, padding, convention)
        axes = want["axes"]
        assert got.before == tuple(a["before"] for a in axes)
        assert got.after == tuple(a["after"] for a in axes)
        assert got.output == tuple(want["output"])
        assert (got.mode, got.asymmetric, got.input_dependent) == (
            want["mode"], want["asymmetric"], want["input_dependent"])
        checked += 1
    # 672 requests (each CLI run loads libHalide: about 0.1 s); torch_same and scipy_same refuse
    # every stride over 1 (128 requests), and some requests are refused by every mode's limits.
    assert checked + refused == 672 and checked > 400 and refused >= 128


def test_two_dims_and_explicit_pads_match_the_cli(cli):
    for size, k, s in [((7, 10), (4, 3), (2, 3)), ((1, 9), (2, 5), (1, 2)), ((16, 5), 3, 2)]:
        for padding, convention in [("same", "tensorflow"), ("same", "onnx_lower"),
                                    ([1, 0, 2, 3], None), (1, None)]:
            text = lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v)
            pad = padding if isinstance(padding, str) else ",".join(
                map(str, padding if isinstance(padding, list) else [padding]))
            want, err = cli_json(cli, text(size), text(k), text(s), 1, pad, convention)
            assert err is None
            got = padfold.pads(size, k, s, 1, padding, convention)
            assert got.before == tuple(a["before"] for a in want["axes"])
            assert got.after == tuple(a["after"] for a in want["axes"])


@pytest.mark.parametrize("size", range(1, 20))
@pytest.mark.parametrize("k,s,d", [(1, 1, 1), (2, 2, 1), (3, 2, 1), (4, 2, 1), (3, 1, 2),
                                   (5, 3, 1), (4, 3, 2)])
def test_tensorflow_same_is_the_documented_rule(size, k, s, d):
    out = math.ceil(size / s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    p = padfold.pads(size, k, s, d, "same", "tensorflow")
    assert p == (p._replace(before=(total // 2,), after=(total - total // 2,), output=(out,)))
    lower = padfold.pads(size, k, s, d, "same", "onnx_lower")
    assert lower.before == (total - total // 2,) and lower.after == (total // 2,)


def test_compare_is_the_cli_table(cli):
    table = padfold.compare(7, 4, 2)
    want, _ = cli_json(cli, 7, 4, 2, 1, "same", "tensorflow")
    assert [r["convention"] for r in table["rows"]] == [c["convention"] for c in want["compare"]]
    for row, c in zip(table["rows"], want["compare"]):
        assert row["chosen"] == c["chosen"]
        if "error" in c:
            assert row["error"] == c["error"]
        else:
            assert row["before"] == tuple(a["before"] for a in c["axes"])
            assert row["after"] == tuple(a["after"] for a in c["axes"])
    assert table["reproduce"] == want["reproduce"]
    chosen = [r for r in table["rows"] if r["chosen"]]
    assert len(chosen) == 1 and chosen[0]["before"] == (1,) and chosen[0]["after"] == (2,)


def test_bad_requests_raise_with_the_cli_message(cli):
    with pytest.raises(padfold.Error, match="stride"):
        padfold.pads(7, 3, 2, 1, "same", "pytorch")
    with pytest.raises(TypeError, match="kernel"):
        padfold.pads(7, "3", 1)
    rc, _, err = cli("pads", "--input", "7", "--kernel", "3", "--padding", "bogus")
    with pytest.raises(padfold.Error) as e:
        padfold.pads(7, 3, 1, 1, "bogus", None)
    assert rc != 0 and err.strip() == "padfold: error: " + str(e.value)
