"""The box search (symbounds.core.search): enclosures that never widen under refinement, the
numeric cache shared between boxes, the adaptive bound, falsification with rigorous re-checks,
limits, and exact decisions at non-dyadic points.  Every value is compared with an independent
300-bit evaluation of the model-file formulas (tests/byon_helpers.py)."""

import random
import time
from fractions import Fraction

import pytest
from byon_helpers import as_fraction, load, random_model, reference

from symbounds.core.bound import bound
from symbounds.core.boxes import Box
from symbounds.core.claims import Verdict
from symbounds.core.modelfile import model_from_json
from symbounds.core.search import BoxEvaluator, random_points
from symbounds.core.vnnlib import parse_vnnlib, verify

SLACK = Fraction(1, 2**250)  # the reference's own rounding at 300 bits
CUBE12 = ([Fraction(0)] * 12, [Fraction(1)] * 12)


def attention_relu_12():
    """A softmax attention + ReLU model over [0,1]^12 (random weights, fixed seed)."""
    return random_model(12, 12, score_scale=Fraction(1, 2), embed_scale=Fraction(1, 4))


def residual_1d():
    """A one-input residual model (attention and feed-forward layers with skips) whose one-box
    Taylor enclosure over [0,1] is about 300 times wider than its range."""
    return random_model(6, 1, D=3, score_scale=1, embed_scale=1)


def reference_values(mj, points):
    return [as_fraction(reference(mj, x)[0]) for x in points]


def test_numeric_cache_shared_between_boxes_in_random_order():
    """The weights are converted once per context and precision and reused for every box
    (constant models carry no box).  Boxes of different sizes, in random order, on one model
    object: each enclosure equals the one a fresh model gives, and contains the 300-bit values."""
    rng = random.Random(5)
    for mj, d in ((random_model(3, 2, constant_head=True), 2), (load("residual_model.json"), 2)):
        shared = BoxEvaluator(model_from_json(mj), 128, fast=False)
        boxes = []
        for _ in range(12):
            lo = [Fraction(rng.randrange(0, 64), 64) for _ in range(d)]
            w = Fraction(1, 2 ** rng.randrange(1, 9))
            boxes.append(Box(tuple(lo), tuple(v + w for v in lo)))
        rng.shuffle(boxes)
        for box in boxes:
            enc = shared.enclose([box])[0]
            fresh = BoxEvaluator(model_from_json(mj), 128, fast=False).enclose([box])[0]
            assert enc.method in ("taylor", "ball") and (enc.lo, enc.hi) == (fresh.lo, fresh.hi)
            for q in reference_values(mj, random_points(box, 5, rng) + [box.lo, box.hi]):
                assert enc.lo[0] - SLACK <= q <= enc.hi[0] + SLACK


def test_a_tampered_parent_enclosure_is_caught():
    """Meeting a child's enclosure with a parent's that cannot hold is reported, not hidden."""
    mj = load("residual_model.json")
    ev = BoxEvaluator(model_from_json(mj), 128)
    box = Box((Fraction(0), Fraction(0)), (Fraction(1, 4), Fraction(1, 4)))
    good = ev.enclose([box])[0]
    wrong = type(good)((good.hi[0] + 1,), (good.hi[0] + 2,), "float")
    with pytest.raises(ArithmeticError, match="disjoint"):
        ev.enclose([box], [wrong])


@pytest.mark.parametrize("fast, depth", [(True, 8), (False, 5)])
def test_refining_never_widens_bound(fast, depth):
    """Splits 0..8 (0..5 in Arb alone) of a softmax attention + ReLU model over [0,1]^12: each
    partition's enclosure lies inside the coarser one, and every one contains the 300-bit values
    at sampled points.  (Evaluated box by box without the parent's enclosure, three bisections in
    Arb gave [-5.2e6, 1.9e7] where the whole box gave [-82, 308].)"""
    mj = attention_relu_12()
    rng = random.Random(7)
    box = Box(tuple(CUBE12[0]), tuple(CUBE12[1]))
    values = reference_values(mj, random_points(box, 60, rng) + [box.lo, box.hi])
    first = prev = None
    for split in range(depth + 1):
        res = bound(mj, *CUBE12, split=split, fast=fast)
        assert res.boxes == 2**split
        assert res.lower - SLACK <= min(values) and max(values) <= res.upper + SLACK
        if prev is not None:
            assert prev.lower <= res.lower <= res.upper <= prev.upper, split
        first = first or res
        prev = res
    assert prev.upper - prev.lower < Fraction(2, 3) * (first.upper - first.lower)


@pytest.mark.parametrize("mj, lo, hi", [
    (residual_1d(), [Fraction(0)], [Fraction(1)]),
    (load("residual_model.json"), [Fraction(0)] * 2, [Fraction(1)] * 2),
])
def test_default_bound_is_within_1_5_of_the_sampled_range(mj, lo, hi):
    rng = random.Random(11)
    box = Box(tuple(lo), tuple(hi))
    pts = [tuple(Fraction(i, 256) for _ in lo) for i in range(257)] + random_points(box, 200, rng)
    values = reference_values(mj, pts)
    spread = max(values) - min(values)
    coarse = bound(mj, lo, hi, split=0)
    res = bound(mj, lo, hi)
    assert res.mode == "adaptive" and res.stopped is None
    assert res.lower - SLACK <= min(values) and max(values) <= res.upper + SLACK
    assert res.upper - res.lower <= Fraction(3, 2) * spread
    assert res.upper - res.lower < coarse.upper - coarse.lower
    # the sampled range: values at points, inside the certified one, close to the reference's
    assert res.lower <= res.sampled_lower <= res.sampled_upper <= res.upper
    assert res.sampled_upper - res.sampled_lower >= Fraction(9, 10) * spread


def test_one_dimensional_residual_model_was_hopeless_in_one_box(monkeypatch):
    """What the adaptive default replaces: the one-box plain Taylor enclosure is over 100 times
    the range (the tight softmax-weighted values, float_boxes._weighted_values, narrow it but
    still contain the values); the backward linear bounds (symbounds.core.linear_bounds) bring it
    within 10 times."""
    from symbounds.core import float_boxes

    mj = residual_1d()
    values = reference_values(mj, [(Fraction(i, 256),) for i in range(257)])
    tight = bound(mj, [0], [1], split=0, linear=False)
    for switch in ("CENTRE_VALUES", "RATIO_VALUES", "HULL_VALUES"):
        monkeypatch.setattr(float_boxes, switch, False)
    coarse = bound(mj, [0], [1], split=0, linear=False)
    monkeypatch.undo()
    assert coarse.upper - coarse.lower > 100 * (max(values) - min(values))
    assert coarse.lower <= tight.lower <= min(values) and max(values) <= tight.upper <= coarse.upper
    linear = bound(mj, [0], [1], split=0, linear=True)
    assert linear.lower <= min(values) and max(values) <= linear.upper
    assert linear.upper - linear.lower < 10 * (max(values) - min(values))


def _third_violated(mj):
    """A threshold ``q`` that about a third of uniform random inputs exceed (300-bit values)."""
    rng = random.Random(3)
    box = Box(tuple(CUBE12[0]), tuple(CUBE12[1]))
    values = sorted(reference_values(mj, random_points(box, 90, rng)))
    return values[60]


def _spec12(unsafe: str) -> str:
    decl = "".join(f"(declare-const X_{i} Real)(assert (>= X_{i} 0))(assert (<= X_{i} 1))" for i in range(12))
    return decl + "(declare-const Y_0 Real)" + unsafe


def test_property_a_third_of_inputs_violate_is_refuted_before_the_search():
    mj = attention_relu_12()
    q = _third_violated(mj)
    spec = parse_vnnlib(_spec12(f"(assert (>= Y_0 {q.numerator}/{q.denominator}))"))
    res = verify(model_from_json(mj), spec)
    assert res.verdict is Verdict.REFUTED
    assert res.boxes <= 1  # found by the falsification pass, not by splitting boxes
    x = [Fraction(v) for v in res.counterexample["x"]]
    assert all(0 <= v <= 1 for v in x) and res.counterexample["checked"] == "ball"
    assert as_fraction(reference(mj, x)[0]) >= q  # independent 300-bit re-check


def test_tampered_threshold_is_not_refuted():
    """Above every value the model reaches (its certified bound) nothing may be reported."""
    mj = attention_relu_12()
    top = bound(mj, *CUBE12, split=4).upper
    spec = parse_vnnlib(_spec12(f"(assert (>= Y_0 {top.numerator}/{top.denominator}))"))
    res = verify(model_from_json(mj), spec, max_boxes=200)
    assert res.verdict is not Verdict.REFUTED and res.counterexample is None


def _hard_spec(mj):
    """True but far from provable quickly: no input exceeds a value a tenth of the way from the
    sampled to the certified maximum."""
    res = bound(mj, *CUBE12, split=4)
    mid = res.sampled_upper + (res.upper - res.sampled_upper) / 10
    return parse_vnnlib(_spec12(f"(assert (>= Y_0 {mid.numerator}/{mid.denominator}))"))


def test_timeout_ends_undecided_with_a_partial_report():
    mj = attention_relu_12()
    spec = _hard_spec(mj)
    t0 = time.monotonic()
    res = verify(model_from_json(mj), spec, max_boxes=10**8, timeout=2)
    elapsed = time.monotonic() - t0
    assert res.verdict is Verdict.UNDECIDED and res.stopped == "timeout"
    assert 2 <= res.seconds and elapsed < 2 + 6  # the clock is read between batches
    assert res.boxes > 1 and res.undecided and 0 <= res.proved_fraction < 1


@pytest.mark.slow
def test_timeout_10_seconds_ends_within_12():
    mj = attention_relu_12()
    spec = _hard_spec(mj)
    t0 = time.monotonic()
    res = verify(model_from_json(mj), spec, max_boxes=10**8, timeout=10)
    elapsed = time.monotonic() - t0
    assert res.verdict is Verdict.UNDECIDED and res.stopped == "timeout"
    assert 10 <= elapsed <= 12


# ------------------------------------------------------------------------------------------------
# a point that is not dyadic, decided exactly


def identity_model():
    """T(x) = x: rational weights and a ReLU pair, relu(x) - relu(-x), so exactly evaluable."""
    return model_from_json({
        "format": "symbounds-transformer/1", "input": "vector", "precision_bits": 128,
        "embedding": {"base": [["0"]], "E": [["1"]], "column": 0},
        "layers": [{"type": "ffn", "skip": "0", "W1": [["1"], ["-1"]], "b1": ["0", "0"],
                    "W2": [["1", "-1"]], "b2": ["0"]}],
        "readout": {"row": 0, "column": 0}})


def _spec1(lo, hi, unsafe):
    return parse_vnnlib(f"(declare-const X_0 Real)(declare-const Y_0 Real)(assert (>= X_0 {lo}))"
                        f"(assert (<= X_0 {hi})){unsafe}")


def test_identity_at_three_tenths_is_decided_exactly():
    m = identity_model()
    # T(3/10) = 3/10 reaches Y_0 >= 0.3: a counterexample, found and checked in exact rationals
    res = verify(m, _spec1("0.3", "0.3", "(assert (>= Y_0 0.3))"))
    assert res.verdict is Verdict.REFUTED
    assert res.counterexample["x"] == ["3/10"] and res.counterexample["checked"] == "exact"
    assert res.counterexample["y"] == ["3/10"]
    # ... but not Y_0 > 0.3, nor Y_0 >= 0.3 + 10^-30: proved, also exactly
    for unsafe in ("(assert (> Y_0 0.3))", "(assert (>= Y_0 0.300000000000000000000000000001))"):
        res = verify(m, _spec1("0.3", "0.3", unsafe))
        assert res.verdict is Verdict.PROVED and res.counterexample is None, unsafe
    # the only counterexample of [0, 0.3] is its corner 3/10
    res = verify(m, _spec1("0", "0.3", "(assert (>= Y_0 0.3))"))
    assert res.verdict is Verdict.REFUTED and res.counterexample["x"] == ["3/10"]


def test_adaptive_bound_with_a_timeout_is_still_an_enclosure():
    mj = attention_relu_12()
    rng = random.Random(8)
    box = Box(tuple(CUBE12[0]), tuple(CUBE12[1]))
    values = reference_values(mj, random_points(box, 40, rng))
    res = bound(mj, *CUBE12, timeout=1, max_boxes=10**6)
    assert res.stopped == "timeout" and res.seconds < 1 + 6
    assert res.lower - SLACK <= min(values) and max(values) <= res.upper + SLACK
    assert res.lower <= res.sampled_lower <= res.sampled_upper <= res.upper
    assert bound(mj, *CUBE12, max_boxes=5).stopped == "max-boxes"


def test_tighter_tolerance_is_no_wider():
    mj = residual_1d()
    loose = bound(mj, [0], [1], tol=Fraction(1, 2))
    tight = bound(mj, [0], [1], tol=Fraction(1, 100))
    assert tight.upper - tight.lower <= loose.upper - loose.lower
    spread = tight.sampled_upper - tight.sampled_lower
    assert tight.upper - tight.lower <= Fraction(101, 100) * spread * (1 + Fraction(1, 10**6))
