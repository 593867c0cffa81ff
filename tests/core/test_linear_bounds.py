"""Backward linear bounds over boxes (symbounds.core.linear_bounds), checked against an independent
300-bit mpmath evaluation of the model-file formulas (tests/byon_helpers.reference) at sampled
points: corners, the centre and random points of every box."""

import itertools
import random
from fractions import Fraction
from fractions import Fraction as F

import numpy as np
import pytest
from byon_helpers import as_fraction, random_model, reference

from symbounds.core import linear_bounds
from symbounds.core.bound import bound
from symbounds.core.boxes import float_evaluator
from symbounds.core.linear_bounds import linear_evaluator
from symbounds.core.modelfile import model_from_json

SLACK = Fraction(1, 2**250)  # the reference's own rounding at 300 bits
WIDTHS = [Fraction(1, 10**4), Fraction(1, 10**3), Fraction(1, 100), Fraction(1, 10), Fraction(1, 4), Fraction(1, 2)]


def _q(rng, scale=Fraction(1, 8), k=8):
    return str(Fraction(rng.randint(-k, k)) * scale)


def mlp_model(seed, d=2, D=6, hidden=(8, 8), skips=("0", "0")):
    """A ReLU MLP as a model file: one token of width ``D``, ``x`` embedded in its first ``d``
    rows... through ``E``; each layer ``z' = skip z + W2 relu(W1 z + b1) + b2``; readout row 0."""
    rng = random.Random(seed)
    mat = lambda r, c: [[_q(rng) for _ in range(c)] for _ in range(r)]
    layers = [{"type": "ffn", "skip": s, "W1": mat(h, D), "b1": [_q(rng) for _ in range(h)], "W2": mat(D, h),
               "b2": [_q(rng, Fraction(1, 16)) for _ in range(D)]} for h, s in zip(hidden, skips)]
    return {"format": "symbounds-transformer/1", "input": "vector",
            "embedding": {"base": [[_q(rng, Fraction(1, 16))] for _ in range(D)], "E": mat(D, d), "column": 0},
            "layers": layers, "readout": {"row": 0, "column": 0}}


def ffn_attention_ffn(seed, d=2, score_scale=1):
    """FFN, then softmax attention, then FFN (so the attention's input is a ReLU layer's output)."""
    m = random_model(seed, d, score_scale=score_scale)
    rng = random.Random(seed + 100)
    D = len(m["embedding"]["base"])
    mat = lambda r, c: [[_q(rng) for _ in range(c)] for _ in range(r)]
    m["layers"].insert(0, {"type": "ffn", "skip": "1", "W1": mat(5, D), "b1": [_q(rng) for _ in range(5)],
                           "W2": mat(D, 5), "b2": [_q(rng) for _ in range(D)]})
    return m


MODELS = {
    "mlp": lambda s: mlp_model(s),
    "mlp-residual-3": lambda s: mlp_model(s, d=3, hidden=(6, 10, 4), skips=("1", "1/2", "0")),
    "attention-ffn": lambda s: random_model(s, 2),
    "ffn-attention-ffn": lambda s: ffn_attention_ffn(s),
    "near-tied": lambda s: ffn_attention_ffn(s, score_scale=Fraction(1, 512)),
}


def boxes_of(rng, d, width):
    c = [Fraction(rng.randrange(-2**20, 2**20), 2**20) for _ in range(d)]
    return tuple(v - width / 2 for v in c), tuple(v + width / 2 for v in c)


def points_of(rng, lo, hi, n=12):
    corners = [tuple(p) for p in itertools.product(*zip(lo, hi))]
    centre = tuple((a + b) / 2 for a, b in zip(lo, hi))
    rand = [tuple(a + (b - a) * Fraction(rng.randrange(2**20 + 1), 2**20) for a, b in zip(lo, hi)) for _ in range(n)]
    return corners + [centre] + rand


def check_inside(mj, lo_b, hi_b, lo, hi, pts):
    for x in pts:
        v = as_fraction(reference(mj, x)[0])
        assert Fraction(float(lo)) - SLACK <= v <= Fraction(float(hi)) + SLACK, (x, lo, float(v), hi)


@pytest.mark.parametrize("kind", sorted(MODELS))
@pytest.mark.parametrize("seed", [0, 1])
def test_linear_bounds_contain_300_bit_values(kind, seed):
    mj = MODELS[kind](seed)
    model = model_from_json(mj)
    lin = linear_evaluator(model)
    assert lin is not None
    d = len(mj["embedding"]["E"][0])
    rng = random.Random(seed)
    los, his = zip(*[boxes_of(rng, d, w) for w in WIDTHS])
    lo, hi, ok = lin.ranges(los, his)
    assert ok.all()
    for k in range(len(WIDTHS)):
        check_inside(mj, los[k], his[k], lo[k], hi[k], points_of(rng, los[k], his[k]))


def relu_minus_x():
    """``T(x) = relu(x) - x = relu(-x)``: one token of width 1, an FFN with skip -1."""
    return {"format": "symbounds-transformer/1", "input": "vector", "embedding": {"base": [["0"]], "E": [["1"]], "column": 0},
            "layers": [{"type": "ffn", "skip": "-1", "W1": [["1"]], "b1": ["0"], "W2": [["1"]], "b2": ["0"]}],
            "readout": {"row": 0, "column": 0}}


def test_hand_worked_relu_network():
    """On [-1, 1], ``relu(x) - x`` ranges over exactly [0, 1].  The Taylor model replaces the
    unstable ReLU by its hull [0, 1] and gets [-1, 2]; the linear bounds use ``relu(x) >= x`` (lower
    slope 1, as ``u = 1 >= -l = 1``) below and the chord ``relu(x) <= (x + 1)/2`` above, so
    ``T >= 0`` and ``T <= (1 - x)/2 <= 1``: exact up to rounding."""
    mj = relu_minus_x()
    model = model_from_json(mj)
    lo, hi, ok = linear_evaluator(model).ranges([(Fraction(-1),)], [(Fraction(1),)])
    assert ok[0]
    assert -1e-12 < lo[0] <= 0 and 1 <= hi[0] < 1 + 1e-12
    flo, fhi, fok = float_evaluator(model, 128).ranges([(Fraction(-1),)], [(Fraction(1),)])
    assert fok[0] and flo[0] <= -1 + 1e-12 and fhi[0] >= 2 - 1e-12
    # through bound(): one box, no split
    on = bound(mj, [Fraction(-1)], [Fraction(1)], split=0, linear=True)
    off = bound(mj, [Fraction(-1)], [Fraction(1)], split=0, linear=False)
    assert -Fraction(1, 10**12) < on.lower <= 0 and 1 <= on.upper < 1 + Fraction(1, 10**12)
    assert on.method == "linear" and off.method == "taylor"
    assert off.upper - off.lower >= 3 - Fraction(1, 10**9)


def test_narrower_than_the_taylor_models_at_width_one_tenth_on_a_relu_mlp():
    """Never wider (the linear bound is met with the Taylor range), and on boxes where some ReLU is
    unstable strictly narrower: summed over 30 boxes of width 0.1, at most 95% of the Taylor width."""
    mj = mlp_model(3, d=2, D=8, hidden=(8, 8))
    model = model_from_json(mj)
    fast = float_evaluator(model, 128)
    lin = linear_evaluator(model, 128, fast)
    rng = random.Random(5)
    los, his = zip(*[boxes_of(rng, 2, Fraction(1, 10)) for _ in range(30)])
    flo, fhi, fok = fast.ranges(los, his)
    llo, lhi, lok = lin.ranges(los, his)
    assert fok.all() and lok.all()
    assert (llo >= flo).all() and (lhi <= fhi).all()
    assert (lhi - llo).sum() <= 0.95 * (fhi - flo).sum()
    for k in range(0, 30, 5):
        check_inside(mj, los[k], his[k], llo[k], lhi[k], points_of(rng, los[k], his[k], 6))


def test_a_tampered_relaxation_is_caught_by_the_sampled_values(monkeypatch):
    """An unsound pre-activation range (the ReLU declared active on the whole box) gives
    ``T = 0`` on [-1, 1]; the 300-bit values at the sampled points refute it."""
    mj = relu_minus_x()
    model = model_from_json(mj)
    real = linear_bounds.LinearBoundEvaluator._ffn

    def tampered(self, layer, Z, i):
        out = real(self, layer, Z, i)
        rec = self._recs[-1]
        rec.l = np.maximum(rec.l, 0.0)
        return out

    monkeypatch.setattr(linear_bounds.LinearBoundEvaluator, "_ffn", tampered)
    lo, hi, ok = linear_evaluator(model).ranges([(Fraction(-1),)], [(Fraction(1),)])
    assert ok[0] and hi[0] < 1e-12
    with pytest.raises(AssertionError):
        check_inside(mj, (Fraction(-1),), (Fraction(1),), lo[0], hi[0], [(Fraction(-1),), (Fraction(-1, 2),)])


def test_adaptive_bound_with_linear_bounds_encloses_sampled_values():
    mj = ffn_attention_ffn(4)
    lo, hi = [Fraction(-1, 4), Fraction(0)], [Fraction(1, 4), Fraction(1, 2)]
    res = bound(mj, lo, hi, linear=True, max_boxes=200)
    rng = random.Random(7)
    for x in points_of(rng, lo, hi, 40):
        v = as_fraction(reference(mj, x)[0])
        assert res.lower - SLACK <= v <= res.upper + SLACK


def test_linear_option_is_checked():
    from symbounds.core.bound import BoundError

    with pytest.raises(BoundError, match="linear"):
        bound(relu_minus_x(), [Fraction(0)], [Fraction(1)], linear="yes")


# ------------------------------------------------------------------------------------------
# the elementary relaxations of the attention heads, against exact rationals and 300-bit exp


def _ranges(rng, shape, spread):
    a = rng.uniform(-spread, spread, shape)
    b = a + rng.uniform(0, spread, shape) * (rng.random(shape) < 0.9)  # some degenerate ranges
    return a, b


def test_mccormick_planes_are_below_the_product_times_mu():
    from symbounds.core.linear_attention import _mccormick, _Node

    rng = np.random.default_rng(0)
    B, K, M = 3, 4, 50
    for spread in (1e-3, 1.0, 40.0):
        xl, xu = _ranges(rng, (B, M), spread)
        yl, yu = _ranges(rng, (B, M), spread)
        mu = rng.normal(size=(B, K, M)) * (rng.random((B, K, M)) < 0.9)
        sl = (slice(None), None)
        ax, ay, c = _mccormick(np.zeros((B, K)), mu, _Node(xl, xu), _Node(yl, yu), sl, sl)
        for _ in range(20):
            tx, ty = rng.random((B, M)), rng.random((B, M))
            x, y = xl + tx * (xu - xl), yl + ty * (yu - yl)
            x, y = np.clip(x, xl, xu), np.clip(y, yl, yu)
            for b in range(B):
                for k in range(K):
                    exact = sum(F(mu[b, k, j]) * F(x[b, j]) * F(y[b, j]) for j in range(M))
                    line = sum(F(ax[b, k, j]) * F(x[b, j]) + F(ay[b, k, j]) * F(y[b, j]) for j in range(M))
                    assert line + F(c[b, k]) <= exact


@pytest.mark.parametrize("kind", ["exp", "recip"])
def test_exp_and_reciprocal_lines_are_below_mu_f(kind):
    import mpmath

    from symbounds.core.linear_attention import _convex, _Node

    rng = np.random.default_rng(1)
    B, K, M = 2, 3, 30
    for spread in (1e-6, 0.5, 30.0):
        if kind == "exp":
            lo, hi = _ranges(rng, (B, M), spread)
        else:
            lo = rng.uniform(0.01, 2.0, (B, M))
            hi = lo + rng.uniform(0, spread, (B, M))
        mu = rng.normal(size=(B, K, M))
        coef, c = _convex(np.zeros((B, K)), mu, _Node(lo, hi), kind)
        with mpmath.workprec(300):
            f = mpmath.exp if kind == "exp" else (lambda v: 1 / v)
            for t in (0.0, 0.3, 0.5, 1.0):
                v = np.clip(lo + t * (hi - lo), lo, hi)
                for b in range(B):
                    for k in range(K):
                        exact = mpmath.fsum(mpmath.mpf(float(mu[b, k, j])) * f(mpmath.mpf(float(v[b, j])))
                                            for j in range(M))
                        line = sum(F(coef[b, k, j]) * F(v[b, j]) for j in range(M)) + F(c[b, k])
                        assert line <= as_fraction(exact) + SLACK * (1 + abs(line))
