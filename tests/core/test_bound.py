"""Certified output bounds over a box (symbounds.core.bound), checked against an independent
300-bit evaluation of the model-file formulas at sampled points."""

import random
from fractions import Fraction

import mpmath
import pytest
from byon_helpers import load, reference

from symbounds.core.contexts import Undecided
from symbounds.core import search
from symbounds.core.bound import BoundError, bound, sub_boxes
from symbounds.core.boxes import Box
from symbounds.core.modelfile import model_from_json
from symbounds.core.taylor import TaylorContext

SLACK = Fraction(1, 2**250)  # the reference's own rounding at 300 bits
#: Taylor models, some boxes met with the linear bounds (symbounds.core.linear_bounds)
TAYLOR = ("taylor", "linear", "taylor+linear")


def as_fraction(v):
    p, q = mpmath.libmp.to_rational(v._mpf_)
    return Fraction(int(p), int(q))


def sample(rng, lo, hi):
    return [a + (b - a) * Fraction(rng.randrange(0, 2**20 + 1), 2**20) for a, b in zip(lo, hi)]


def encloses(res, model_json, points):
    lows = res.lower if isinstance(res.lower, tuple) else (res.lower,)
    highs = res.upper if isinstance(res.upper, tuple) else (res.upper,)
    for x in points:
        for lo, hi, v in zip(lows, highs, reference(model_json, x)):
            q = as_fraction(v)
            assert lo - SLACK <= q <= hi + SLACK, (x, lo, q, hi)


def test_residual_model_bound_encloses_1000_sampled_points():
    mj = load("residual_model.json")
    lo, hi = [Fraction(-1, 2), Fraction(0)], [Fraction(1, 2), Fraction(1)]
    res = bound(mj, lo, hi, split=4)
    assert res.boxes == 16 and res.method in TAYLOR  # not the ball fallback
    rng = random.Random(1)
    pts = [sample(rng, lo, hi) for _ in range(996)] + [lo, hi, [lo[0], hi[1]], [hi[0], lo[1]]]
    encloses(res, mj, pts)
    # the enclosure is not vacuous: within a modest factor of the sampled spread
    vals = [as_fraction(reference(mj, x)[0]) for x in pts[:200]]
    assert res.upper - res.lower < 4 * (max(vals) - min(vals)) + Fraction(1, 10)


def test_splitting_tightens_and_width_counts_boxes():
    mj = load("residual_model.json")
    lo, hi = [Fraction(0), Fraction(0)], [Fraction(1), Fraction(1)]
    coarse = bound(mj, lo, hi, split=0)
    fine = bound(mj, lo, hi, width=Fraction(1, 4))
    assert coarse.boxes == 1 and fine.boxes == 16
    assert coarse.lower <= fine.lower <= fine.upper <= coarse.upper
    assert fine.upper - fine.lower < coarse.upper - coarse.lower


def test_sub_boxes_partition_the_box():
    box = Box((Fraction(0), Fraction(0)), (Fraction(1), Fraction(1, 4)))
    parts = sub_boxes(box, width=Fraction(1, 8))
    assert len(parts) == 8 * 2
    assert sum((b.hi[0] - b.lo[0]) * (b.hi[1] - b.lo[1]) for b in parts) == Fraction(1, 4)
    assert all(b.width() <= Fraction(1, 8) for b in parts)
    assert len(sub_boxes(box, split=3)) == 8


def test_token_model_box_is_token_by_token():
    mj = load("token_model.json")
    # two tokens of width 2: intervals for Z0[0,0], Z0[1,0], Z0[0,1], Z0[1,1]
    lo = [Fraction(0), Fraction(-1, 2), Fraction(1, 4), Fraction(0)]
    hi = [Fraction(1, 2), Fraction(0), Fraction(1, 2), Fraction(1, 2)]
    res = bound(mj, lo, hi, split=3)
    assert res.shape == (2, 2) and len(res.lower) == 4
    rng = random.Random(2)
    encloses(res, mj, [sample(rng, lo, hi) for _ in range(300)])
    # a point box: the enclosure is tight around the value there
    x = [Fraction(1, 4), Fraction(-1, 4), Fraction(1, 3), Fraction(1, 5)]
    pt = bound(mj, x, x)
    for lo_, hi_, v in zip(pt.lower, pt.upper, reference(mj, x)):
        assert hi_ - lo_ < Fraction(1, 2**100)
        assert lo_ - SLACK <= as_fraction(v) <= hi_ + SLACK


def test_ball_fallback_when_taylor_models_fail(monkeypatch):
    mj = load("residual_model.json")

    def refuse(self, a):
        raise Undecided("no Taylor model of exp here")

    monkeypatch.setattr(TaylorContext, "exp", refuse)
    monkeypatch.setattr(search, "float_evaluator", lambda model, prec: None)  # the float pass too
    lo, hi = [Fraction(0), Fraction(0)], [Fraction(1, 8), Fraction(1, 8)]
    res = bound(model_from_json(mj), lo, hi, split=1)
    assert res.method == "ball"
    rng = random.Random(3)
    encloses(res, mj, [sample(rng, lo, hi) for _ in range(50)])


@pytest.mark.parametrize("lo, hi, words", [
    ([0], [1], "2 inputs"),
    ([0, 1], [1, 0], "above the upper end"),
    ([0, 0], [1], "as many"),
])
def test_bad_boxes(lo, hi, words):
    with pytest.raises(BoundError, match=words):
        bound(load("residual_model.json"), [Fraction(v) for v in lo], [Fraction(v) for v in hi])


def test_token_box_must_fit_the_width():
    with pytest.raises(BoundError, match="multiple"):
        bound(load("token_model.json"), [Fraction(0)] * 3, [Fraction(1)] * 3)


def test_one_model_object_over_boxes_of_different_sizes():
    """The weights are cached per context and precision: a later, smaller box must still be
    enclosed with its own half-widths."""
    mj = load("residual_model.json")
    model = model_from_json(mj)
    bound(model, [Fraction(0), Fraction(0)], [Fraction(1, 1024), Fraction(1, 1024)])
    lo, hi = [Fraction(-1, 2), Fraction(0)], [Fraction(1, 2), Fraction(1)]
    res = bound(model, lo, hi, split=2)
    assert res.method in TAYLOR
    rng = random.Random(4)
    encloses(res, mj, [sample(rng, lo, hi) for _ in range(300)] + [lo, hi, [lo[0], hi[1]], [hi[0], lo[1]]])


def test_box_ends_are_exact():
    mj = load("residual_model.json")
    a = bound(mj, ["0", "1/4"], ["0.5", "1/2"])
    b = bound(mj, [0, Fraction(1, 4)], [Fraction(1, 2), Fraction(1, 2)])
    assert (a.lower, a.upper) == (b.lower, b.upper)
    with pytest.raises(BoundError, match="not exact"):
        bound(mj, [0.0, 0.25], [0.5, 0.5])
