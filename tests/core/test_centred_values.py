"""The softmax-weighted values centred at their weighted mean, taken as a ratio of sums, and met
with their convex hull.

``symbounds/core/float_boxes.py`` (``_weighted_values``, switches ``CENTRE_VALUES``,
``RATIO_VALUES`` and ``HULL_VALUES``) and the fused kernel (``fused_boxes._attention_box``)
enclose ``A = sum_k pi_k V_k`` as ``m + (sum_k E_k (V_k - m)) / N``, sound because
``sum_k pi_k = 1`` exactly, and met with ``t + sum_k u_k (V_k - t)_+`` (``u_k >= pi_k`` over the
box, any ``t``).  Independent computations: the network's value at sampled points of each box, in
300-bit balls on a fresh model (test_soundness.true_value) or in mpmath at 300 bits straight from
the formulas (test_fused_kernel.mp_value); random networks, random boxes, random batch order.
Every switch setting must enclose those values; the centred enclosure must also be the tighter
one on the [SL26] network, where the values are the target's values at the grid points.
"""

import random
from fractions import Fraction as F

import pytest
from test_float_boxes import _shi_liao_model, check_float_enclosures
from test_fused_kernel import check_fused_against_numpy_and_mpmath, needs_numba

from symbounds.core import float_boxes, fused_boxes
from symbounds.core.boxes import Box

SWITCHES = [(True, True, True), (True, True, False), (True, False, False), (False, False, True)]


def _switch(monkeypatch, centre, ratio, hull):
    monkeypatch.setattr(float_boxes, "CENTRE_VALUES", centre)
    monkeypatch.setattr(float_boxes, "RATIO_VALUES", ratio)
    monkeypatch.setattr(float_boxes, "HULL_VALUES", hull)


@pytest.mark.parametrize(("centre", "ratio", "hull"), SWITCHES)
def test_numpy_pass_encloses_random_networks(centre, ratio, hull, monkeypatch):
    _switch(monkeypatch, centre, ratio, hull)
    monkeypatch.setattr(fused_boxes, "ENABLED", False)
    decided = sum(check_float_enclosures(s, n_boxes=6, n_points=1) for s in range(500, 520))
    assert decided >= 60


@needs_numba
@pytest.mark.parametrize(("centre", "ratio", "hull"), SWITCHES[:3])
def test_fused_kernel_encloses_random_networks_and_matches_numpy(centre, ratio, hull, monkeypatch):
    """The kernel and the NumPy pass, under each switch setting: both contain the 300-bit values,
    and differ by the rounding of sums taken in another order only."""
    _switch(monkeypatch, centre, ratio, hull)
    decided = 0
    for s in range(3):
        decided += check_fused_against_numpy_and_mpmath(700 + s, monkeypatch, n_boxes=4, n_points=1)
        decided += check_fused_against_numpy_and_mpmath(800 + s, monkeypatch, n_boxes=4, n_points=1, scale=64)
    assert decided >= 12


def _widths(ev, boxes, centre, ratio, hull, monkeypatch):
    _switch(monkeypatch, centre, ratio, hull)
    lo, hi, ok = ev.ranges([b.lo for b in boxes], [b.hi for b in boxes])
    assert ok.all()
    return hi - lo


def test_centring_narrows_the_shi_liao_enclosures(monkeypatch):
    """On the [SL26] network (d = 2, P = 36) over boxes of side 1/16 (the first grid at d = 2),
    the centred values give narrower enclosures than the plain product on most boxes, the ratio
    of sums narrower still in total, the hull narrower again (here a box's first-order model of the
    softmax is poor: the scores' spread varies by about 3 over the box); each contains the value at
    the box's centre and corners (300-bit balls)."""
    from test_soundness import true_value

    _, _, model = _shi_liao_model(2, "1/2")
    ev = float_boxes.evaluator(model)
    ev.setup()
    rng = random.Random(3)
    boxes = []
    for _ in range(24):
        c = [F(rng.randint(1, 15), 16) for _ in range(2)]
        boxes.append(Box(tuple(ci - F(1, 32) for ci in c), tuple(ci + F(1, 32) for ci in c)))
    plain = _widths(ev, boxes, False, False, False, monkeypatch)
    centred = _widths(ev, boxes, True, False, False, monkeypatch)
    ratio = _widths(ev, boxes, True, True, False, monkeypatch)
    hull = _widths(ev, boxes, True, True, True, monkeypatch)
    assert (centred < plain).mean() > 0.75, (centred, plain)
    assert hull.sum() < ratio.sum() < centred.sum() < plain.sum()
    assert (hull <= ratio).all()
    lo, hi, _ = ev.ranges([b.lo for b in boxes], [b.hi for b in boxes])
    for b, a, z in zip(boxes, lo, hi):
        for x in [b.centre, b.lo, b.hi, (b.lo[0], b.hi[1]), (b.hi[0], b.lo[1])]:
            vlo, vhi = true_value(model, x)
            assert F(a) <= vhi and vlo <= F(z), (b, x, a, z, vlo, vhi)


def _lp_max(u, v):
    """``max sum_k p_k v_k`` over ``0 <= p_k <= u_k``, ``sum p_k = 1`` (``sum u >= 1``), exactly:
    the mass goes to the largest values first."""
    left, total = F(1), F(0)
    for k in sorted(range(len(v)), key=lambda k: -v[k]):
        take = min(F(u[k]), left)
        total += take * F(v[k])
        left -= take
    return total


@pytest.mark.parametrize("seed", range(40))
def test_hull_bounds_the_worst_weights_and_is_attained(seed):
    """``_hull`` against the exact linear-programming extremes of the weighted sum: it contains
    them (the greedy weights are feasible) and is within rounding of them (they are attained)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    u = np.minimum(rng.exponential(0.3, n) * rng.choice([1e-30, 1.0], n, p=[0.3, 0.7]), 1.0)
    u[rng.integers(n)] = 1.0  # the weights can reach 1 (sum u >= 1)
    vlo = rng.normal(0, 1, n)
    vhi = vlo + rng.exponential(0.1, n)
    lo, hi = float_boxes._hull(u[None], vlo[None], vhi[None])
    best, worst = _lp_max(u, vhi), -_lp_max(u, -vlo)
    assert F(float(hi[0])) >= best and F(float(lo[0])) <= worst
    assert float(hi[0]) - float(best) <= 1e-12 * (1 + abs(float(best)))
    assert float(worst) - float(lo[0]) <= 1e-12 * (1 + abs(float(worst)))
    if fused_boxes.ENABLED:
        fused_boxes.load()
        gsum = float(fused_boxes.fo.up(1.0 + 2 * n * fused_boxes.fo.U))
        up = fused_boxes._hull_upper(u, vhi.copy(), np.zeros(n), n, gsum)
        assert up == float(hi[0])


def test_weight_bounds_contain_the_softmax_at_points():
    """``_weight_bounds`` over boxes of affine scores: every exact softmax weight at sampled
    points of the box (300-bit balls) is at most its bound."""
    import flint
    import numpy as np

    from symbounds.core.float_boxes import FTM, _Boxes

    rng = np.random.default_rng(1)
    for _ in range(20):
        B, d, n = 3, 2, int(rng.integers(2, 12))
        h = np.abs(rng.normal(0, 0.1, (B, d)))
        c = rng.normal(0, 3, (B, 1, n))
        G = rng.normal(0, 20, (B, d, 1, n))
        bx = _Boxes(h)
        u = float_boxes._weight_bounds(bx, FTM(c, G, np.zeros_like(c)))
        for b in range(B):
            for _ in range(4):
                delta = rng.uniform(-1, 1, d) * h[b]
                with flint.ctx.workprec(300):
                    s = [flint.arb(float(c[b, 0, k])) + sum(flint.arb(float(G[b, i, 0, k])) * flint.arb(float(delta[i]))
                                                            for i in range(d)) for k in range(n)]
                    e = [x.exp() for x in s]
                    tot = sum(e)
                    for k in range(n):
                        assert e[k] / tot <= flint.arb(float(u[b, 0, k])), (k, u[b, 0, k])


# ------------------------------------------------------------------------------------------
# whole certificates with CertifyOptions(tight=True)


def test_tight_certificate_checks_and_a_tampered_model_is_refuted():
    """``certify`` with the tight enclosures (the hull, a coarse first grid): fewer boxes than the
    plain pass (``tight=False``), the boxes tile the square, ``check_certificate`` re-derives every recorded bound; the
    network with one centre's value shifted by 1 is refuted at a point whose error, in 300-bit
    balls, exceeds eps."""
    from symbounds.core.boxes import CertifyOptions, certify_model, point_error
    from symbounds.core.certificate import check_certificate
    from symbounds.core.modelfile import model_from_json, model_to_json
    from symbounds.papers import shi_liao as sl
    from symbounds.papers.shi_liao.certificate import certify_instance, rebuild

    inst = sl.Instance(d=2, C_H=1, B=1, eps="1/2", target="sin(x1+x2)/2")
    cert, res = certify_instance(inst, CertifyOptions(tight=True))
    _, plain = certify_instance(inst, CertifyOptions(tight=False))
    assert res.verdict == "proved" and len(res.boxes) < len(plain.boxes)
    assert sum(b.volume() for b, _ in res.boxes) == 1
    assert check_certificate(cert, rebuild)["boxes"] == len(res.boxes)
    K = sl.constants(inst)
    mj = model_to_json(sl.build(K), 192)
    mj["layers"][0]["heads"][3]["W_V"][1][K.d] = str(F(mj["layers"][0]["heads"][3]["W_V"][1][K.d]) + 1)
    bad = certify_model(mj, inst.target_text, 2, inst.eps, CertifyOptions(tight=True))
    assert bad.verdict == "refuted" and bad.counterexample is not None
    x = [F(v) for v in bad.counterexample["x"]]
    assert point_error(model_from_json(mj), inst.target_expr(), 2, x, 300) > inst.eps
