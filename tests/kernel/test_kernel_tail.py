"""The tail of the last softmax layer (symbounds_kernel/tail.py): far tokens enclosed together.

Reference values come from the 300-bit mpmath evaluator of ``tests/byon_helpers.py`` (the
model-file formulas, no code shared with the kernel).  The tail is tested where it carries real
weight: with ``CUT`` lowered to 1 or 3 nats the tail tokens hold a visible share of the softmax, so
an enclosure that dropped them, or took their values' hull wrong, misses the 300-bit values on
narrow boxes (the last test shows the check fails then).
"""

import functools
import json
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from flint import arb, ctx
from hypothesis import given, settings, strategies as st

import symbounds_kernel.tail as tail
from symbounds_kernel import verify
from symbounds_kernel.network import Network

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from byon_helpers import as_fraction, reference  # noqa: E402


@functools.lru_cache(maxsize=None)
def _model(d, eps, target):
    from sympy import Rational

    from symbounds.core.modelfile import model_to_json
    from symbounds.papers.shi_liao.constants import Instance, constants
    from symbounds.papers.shi_liao.construction import build

    return model_to_json(build(constants(Instance(d=d, C_H=1, B=1, eps=Rational(eps), target=target))), 128)


CASES = [(1, "1/20", "sin(3*x1)/2"), (2, "2/5", "sin(x1+x2)/2")]  # P = 40 and 64 tokens


def _enclose(net, lo, hi):
    old, ctx.prec = ctx.prec, verify.PREC
    try:
        return net.enclose(lo, hi)
    finally:
        ctx.prec = old


def _contains(ball, v: Fraction) -> bool:
    """A non-finite ball (a wide box's blown-up model, with or without the tail) contains all."""
    if not ball.is_finite():
        return True
    return verify._upper(ball) >= v and -verify._upper(-ball) <= v


def _box(d, corner, width):
    lo = [Fraction(c, 1024) * (1 - Fraction(1, width)) for c in corner[:d]]
    return lo, [a + Fraction(1, width) for a in lo]


def _samples(model, lo, hi, ts):
    d = len(lo)
    pts = [[a + (b - a) * Fraction(t, 8) for a, b in zip(lo, hi)] for t in ts] + [lo, hi]
    pts += [[lo[0]] + hi[1:]] if d > 1 else []
    return [as_fraction(reference(model, p)[0]) for p in pts]


def test_the_tail_applies_and_keeps_only_the_near_tokens():
    model = _model(*CASES[1])
    net = Network(model, 2)
    assert net.tail is not None
    keep, extra = net.tail.split([arb(1) / 3 + arb(0, 2**-12), arb(2) / 3 + arb(0, 2**-12)], 0)
    assert 0 in keep and len(keep) < 64 and extra is not None and len(extra) == 1
    tail.CUT, cut = 1e9, tail.CUT  # no token that far below: every column kept, no tail token
    try:
        assert net.tail.split([arb(1) / 3 + arb(0, 2**-12), arb(2) / 3 + arb(0, 2**-12)], 0) == (list(range(64)), None)
    finally:
        tail.CUT = cut


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(st.sampled_from(range(len(CASES))), st.lists(st.integers(0, 1024), min_size=2, max_size=2),
       st.sampled_from([16, 256, 2**20]), st.sampled_from([80, 3, 1]), st.lists(st.integers(0, 8), min_size=2, max_size=3))
def test_enclosures_with_the_tail_contain_the_300_bit_values(case, corner, width, cut, ts):
    d, eps, target = CASES[case]
    model = _model(d, eps, target)
    lo, hi = _box(d, corner, width)
    old = tail.CUT
    tail.CUT = cut
    try:
        net = Network(model, d)
        T = _enclose_or_fail(net, lo, hi)
    finally:
        tail.CUT = old
    if T is None:  # the kernel rejects such a box (a reciprocal of a range containing 0): sound
        return
    assert all(_contains(T, v) for v in _samples(model, lo, hi, ts))


@pytest.mark.parametrize("cut", [1, 3])
def test_the_tail_token_encloses_the_tails_sum_of_weights_and_values_at_points(cut, monkeypatch):
    """Over a box, ``e^s`` of the tail token contains ``sum_tail e^(s_k(x))`` and its value ball
    every ``v_k(x)`` of the tail, at points ``x`` of the box (the scores at a point: balls of radius
    near 0, so lower and upper ends agree there and a score ball built from the wrong end misses)."""
    monkeypatch.setattr(tail, "CUT", cut)
    d, eps, target = CASES[1]
    net = Network(_model(d, eps, target), d)
    old, ctx.prec = ctx.prec, verify.PREC
    try:
        for (x, y), w in (((0.3, 0.6), 64), ((0.8, 0.1), 16), ((0.5, 0.5), 256)):
            box = [arb(x) + arb(0, 1 / w), arb(y) + arb(0, 1 / w)]
            keep, extra = net.tail.split(box, 0)
            assert extra is not None
            tokens = [k for k in range(net.A.ncols()) if k not in keep]
            for a in (-1, 0, 1):
                for b in (-1, 1):
                    scores, values = net.tail.scores([arb(x + a / w), arb(y + b / w)], 0)
                    for (ball, vals), s, V in zip(extra, scores, values):
                        E = sum((s[k].exp() for k in tokens), arb(0))
                        assert ball.exp().contains(E), (x, y, w, a, b)
                        assert all(vals[r].contains(V[r][k]) for r in range(len(V)) for k in tokens)
    finally:
        ctx.prec = old


def _tweaked(model):
    """The model with a temperature 3/2 (W_Q times 3/2), W_K halved and b2 = 1/7 in the feed-forward
    layers: the [SL26] network has tau = 1, integer score weights and b2 = 0, on which a kernel
    that ignored tau, multiplied by a denominator or dropped b2 would agree with the right one."""
    m = json.loads(json.dumps(model))
    for L in m["layers"]:
        if L["type"] == "ffn":
            L["b2"] = ["1/7"] * len(L["b2"])
    last = [L for L in m["layers"] if L["type"] == "attention"][-1]
    last["tau"] = "3/2"
    for H in last["heads"]:
        H["W_Q"] = [[str(Fraction(v) * Fraction(3, 2)) for v in r] for r in H["W_Q"]]
        H["W_K"] = [[str(Fraction(v) / 2) for v in r] for r in H["W_K"]]
    return m


@pytest.mark.parametrize("tweak", [False, True])
def test_the_tail_token_against_the_last_layers_scores_and_values_in_mpmath(monkeypatch, tweak):
    """An independent reference for the tail (found by mutation testing: the test above reads the
    kernel's own ``scores``): the token columns entering the last attention layer at points of the
    box, from the model file's formulas in mpmath (``byon_helpers.reference`` on the layers before
    it), give each tail token's score ``s_k = (W_Q z_c) . (W_K z_k) / tau`` and value ``W_V z_k``;
    ``sum_tail e^(s_k)`` must lie in ``e^s`` of the tail token and every value in its hull."""
    import mpmath

    monkeypatch.setattr(tail, "CUT", 1)
    d, eps, target = CASES[1]
    model = _tweaked(_model(d, eps, target)) if tweak else _model(d, eps, target)
    net = Network(model, d)
    last = model["layers"][net.last_attention]
    trunc = {k: v for k, v in model.items() if k != "readout"}
    trunc["layers"] = model["layers"][:net.last_attention]
    x, w = (Fraction(3, 10), Fraction(6, 10)), 16
    old, ctx.prec = ctx.prec, verify.PREC
    try:
        box = [arb(c.numerator) / c.denominator + arb(0, 1 / w) for c in x]
        keep, extra = net.tail.split(box, 0)
    finally:
        ctx.prec = old
    tokens = [k for k in range(net.A.ncols()) if k not in keep]
    assert extra is not None and tokens
    tau = as_fraction(mpmath.mpf(1)) if "tau" not in last else Fraction(last["tau"])
    with mpmath.workprec(100):
        for corner in ((-1, -1), (1, 1), (-1, 1)):
            p = [c + a * Fraction(1, w) for c, a in zip(x, corner)]
            flat = reference(trunc, p, bits=100)
            D = len(flat) // net.A.ncols()
            col = lambda j: flat[j * D:(j + 1) * D]
            mv = lambda W, z: [mpmath.fsum(mpmath.mpf(Fraction(a).numerator) / Fraction(a).denominator * v
                                           for a, v in zip(row, z)) for row in W]
            for H, (ball, vals) in zip(last["heads"], extra):
                q = mv(H["W_Q"], col(0))
                s = [mpmath.fsum(a * b for a, b in zip(q, mv(H["W_K"], col(k)))) / (
                    mpmath.mpf(tau.numerator) / tau.denominator) for k in tokens]
                logE = max(s) + mpmath.log(mpmath.fsum(mpmath.exp(v - max(s)) for v in s))
                assert float(ball.lower()) - 1e-9 <= logE <= float(ball.upper()) + 1e-9, (corner, logE, ball)
                V = [mv(H["W_V"], col(k)) for k in tokens]
                for r, vb in enumerate(vals):
                    assert all(float(vb.lower()) - 1e-12 <= v[r] <= float(vb.upper()) + 1e-12 for v in V), (corner, r)


def _plain_at(net, p):
    """The kernel's enclosure at the point ``p`` (a box of width 0) without the tail: every token."""
    keep, net.tail = net.tail, None
    try:
        return _enclose(net, p, p)
    finally:
        net.tail = keep


@pytest.mark.parametrize("case", range(len(CASES)))
def test_enclosures_with_the_tail_contain_every_token_values_at_points(case):
    """Random boxes in random order, cuts of 80, 3 and 1 nats: the enclosure with the tail contains
    the enclosure of the same network at points of the box computed with all tokens (the plain
    path, itself tested against 300-bit values in test_kernel.py; the slow test above uses them)."""
    import random

    rng = random.Random(7 + case)
    d, eps, target = CASES[case]
    net, checked = Network(_model(d, eps, target), d), 0
    for _ in range(8):
        lo, hi = _box(d, [rng.randint(0, 1024) for _ in range(d)], rng.choice([256, 2**12, 2**20]))
        old, tail.CUT = tail.CUT, rng.choice([80, 3, 1])
        try:
            T = _enclose_or_fail(net, lo, hi)
        finally:
            tail.CUT = old
        if T is None or not T.is_finite():
            continue
        checked += 1
        for t in (0, rng.randint(1, 7), 8):
            v = _plain_at(net, [a + (b - a) * Fraction(t, 8) for a, b in zip(lo, hi)])
            assert T.contains(v), (lo, hi, T, v)
    assert checked >= 4


@pytest.mark.parametrize("case", range(len(CASES)))
def test_at_the_default_cut_the_tail_changes_no_bound(case):
    """Tail weights below e^-80: the enclosure is the plain one's to far below its radius (not to
    e^-80 of it: on a wide box the normaliser's range nears 0 and its reciprocal's remainder,
    ``spread^2 / lo^3``, magnifies the tail's share of the spread)."""
    d, eps, target = CASES[case]
    net, compared = Network(_model(d, eps, target), d), 0
    for corner, width in (([100, 700], 16), ([512, 0], 64), ([1000, 1000], 256), ([0, 300], 2**16)):
        lo, hi = _box(d, corner, width)
        a, plain = _enclose_or_fail(net, lo, hi), None
        keep, net.tail = net.tail, None
        try:
            plain = _enclose_or_fail(net, lo, hi)
        finally:
            net.tail = keep
        if plain is None or not plain.is_finite():  # a box too wide for first-order models, either way
            assert a is None or not a.is_finite()
            continue
        if plain.rad() > 1:  # a useless bound, where the choice of centres moves it by more than e^-80
            continue
        compared += 1
        assert a.overlaps(plain) and abs(a.rad() - plain.rad()) <= plain.rad() * 1e-6 + arb(2) ** -100
    assert compared >= 2


def _enclose_or_fail(net, lo, hi):
    try:
        return _enclose(net, lo, hi)
    except ArithmeticError:
        return None


def test_an_enclosure_that_drops_the_tail_misses_the_300_bit_value(monkeypatch):
    """The check above can fail: with 1 nat of cut the tail holds weight, and an enclosure with
    its weight too small (or with its values taken as 0) excludes the 300-bit value on a narrow box."""
    d, eps, target = CASES[1]
    model = _model(d, eps, target)
    lo, hi = _box(d, [300, 600], 2**30)
    v = _samples(model, lo, hi, [4])[0]
    monkeypatch.setattr(tail, "CUT", 1)
    net = Network(model, d)
    assert _contains(_enclose(net, lo, hi), v)
    split = net.tail.split
    net.tail.split = lambda box, col: (lambda k, e: (k, [(sc - 50, vs) for sc, vs in e]))(*split(box, col))
    assert not _contains(_enclose(net, lo, hi), v)  # the tail dropped (its weight e^-50 of itself)
    net.tail.split = lambda box, col: (lambda k, e: (k, [(s, [arb(0) for _ in vs]) for s, vs in e]))(*split(box, col))
    assert not _contains(_enclose(net, lo, hi), v)
