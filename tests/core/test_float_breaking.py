"""Properties at the scale where float64 breaks: answers decided by hand-worked exact values.

``relu(x + 2^53) - 2^53`` is exactly ``x`` on ``[0, 1]``, but in float64 ``1 + 2^53 = 2^53`` (ties to
even), so a float evaluation gives 0 at ``x = 1``; ``x_1 + x_2`` with ``x_1 = 1`` and ``x_2`` in
``[2^-53, 2^-52]`` is above 1 everywhere, yet ``1 + 2^-53`` rounds to 1."""

from fractions import Fraction as F

import pytest

from symbounds.core.claims import Verdict
from symbounds.core.modelfile import model_from_json
from symbounds.core.property_certificate import check_property_certificate, make_property_certificate
from symbounds.core.vnnlib import parse_vnnlib, verify


def cancel(e=53):
    B = str(2**e)
    return model_from_json({"format": "symbounds-transformer/1", "input": "vector",
                            "embedding": {"base": [["0"]], "E": [["1"]], "column": 0},
                            "layers": [{"type": "ffn", "skip": "0", "W1": [["1"]], "b1": [B], "W2": [["1"]],
                                        "b2": ["-" + B]}],
                            "readout": {"row": 0, "column": 0}})


def tiny_sum():
    return model_from_json({"format": "symbounds-transformer/1", "input": "vector",
                            "embedding": {"base": [["0"]], "E": [["1", "1"]], "column": 0},
                            "layers": [{"type": "ffn", "skip": "1", "W1": [["0"]], "b1": ["0"], "W2": [["0"]],
                                        "b2": ["0"]}],
                            "readout": {"row": 0, "column": 0}})


def prop(box, unsafe):
    xs = "".join(f"(declare-const X_{i} Real)(assert (>= X_{i} {a}))(assert (<= X_{i} {b}))"
                 for i, (a, b) in enumerate(box))
    return xs + "(declare-const Y_0 Real)" + f"(assert {unsafe})"


def test_float64_gives_zero_where_the_exact_value_is_one():
    assert float(1 + 2.0**53) - 2.0**53 == 0.0 and 1.0 + 2.0**-53 == 1.0  # the premise


@pytest.mark.parametrize("e", [53, 60])
def test_a_counterexample_the_floats_miss_is_found_exactly(e):
    res = verify(cancel(e), parse_vnnlib(prop([(0, 1)], "(>= Y_0 0.5)")), timeout=60)
    assert res.verdict is Verdict.REFUTED and res.counterexample["checked"] == "exact"
    x = F(res.counterexample["x"][0])
    assert x >= F(1, 2) and F(res.counterexample["y"][0]) == x  # Y = x exactly


def test_a_bound_the_float_rounding_hides_is_proved_with_a_certificate():
    text = prop([(0, 1)], "(>= Y_0 1.000001)")
    m = cancel()
    res = verify(m, parse_vnnlib(text), timeout=60)
    assert res.verdict is Verdict.PROVED
    info = check_property_certificate(make_property_certificate(version="t", model=m, spec_text=text,
                                                                result=res, prec=128))
    assert info["leaves"] == len(res.leaves)


def test_a_property_box_narrower_than_the_smallest_width_is_still_split():
    t = F(1, 2**53)
    text = prop([(1, 1), (t, 2 * t)], "(<= Y_0 1)")  # Y >= 1 + 2^-53 > 1 on the box
    res = verify(tiny_sum(), parse_vnnlib(text), timeout=60)
    assert res.verdict is Verdict.PROVED
    res = verify(tiny_sum(), parse_vnnlib(prop([(1, 1), (0, t)], "(> Y_0 1)")), timeout=60)
    assert res.verdict is Verdict.REFUTED and F(res.counterexample["y"][0]) == 1 + t
