"""Context methods interval(lo, hi), upper(x), lower(x).

Containment is checked on exact endpoints (Fractions from the ball's midpoint and radius), and
the values a Taylor model stands for are computed exactly at sampled points of its box.
"""
import random
from fractions import Fraction as F

import flint
import mpmath
import pytest

from symbounds.core.contexts import BallContext, ExactContext, ExactUnsupported, FPContext, MPContext
from symbounds.core.exact import arb_to_fraction
from symbounds.core.taylor import TM, TaylorContext


def ends(v: flint.arb) -> tuple[F, F]:
    """Exact endpoints mid -+ rad of a ball (computed here, not by the context)."""
    m, r = arb_to_fraction(v.mid()), arb_to_fraction(v.rad())
    return m - r, m + r


def rand_q(rng, big=False):
    den = rng.choice([1, 3, 7, 2**20, 10**9 + 7]) if not big else rng.randint(1, 10**30)
    return F(rng.randint(-10**6, 10**6), den)


def pairs(seed, count=25):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        a, b = rand_q(rng, big=i % 3 == 0), rand_q(rng)
        if i % 5 == 0:
            b = a + F(1, 10**40)  # a very short interval
        if i % 7 == 0:
            b = a  # a point
        out.append((min(a, b), max(a, b), rng))
    return out


def between(rng, lo, hi, k=12):
    return [lo, hi] + [lo + (hi - lo) * F(rng.randint(0, 10**6), 10**6) for _ in range(k)]


@pytest.mark.parametrize("prec", [24, 64, 256])
def test_ball_interval_encloses_every_point(prec):
    ctx = BallContext(prec)
    for lo, hi, rng in pairs(prec):
        v = ctx.interval(lo, hi)
        a, b = ends(v)
        for q in between(rng, lo, hi):
            assert a <= q <= b
        # not absurdly wide: a few ulps beyond [lo, hi] (Arb rounds a radius to 30 bits)
        slack = F(2) ** (8 - prec) * (1 + abs(lo) + abs(hi)) + (hi - lo) * F(2) ** -28
        assert lo - slack <= a and b <= hi + slack


@pytest.mark.parametrize("prec", [24, 64, 256])
def test_ball_upper_and_lower_are_exact_bounds(prec):
    ctx = BallContext(prec)
    with ctx.scope():
        for lo, hi, _ in pairs(prec + 1):
            for x in (ctx.interval(lo, hi), ctx.convert(lo) / 3, ctx.convert(hi).exp() - ctx.convert(lo)):
                a, b = ends(x)
                u, lw = ctx.upper(x), ctx.lower(x)
                assert u.is_exact() and lw.is_exact()
                assert arb_to_fraction(u) >= b and arb_to_fraction(lw) <= a
                assert not (x > u) and not (x < lw)


def test_taylor_interval_upper_lower():
    rng = random.Random(5)
    x0, h = [F(1, 3), F(-2, 5)], [F(1, 8), F(1, 16)]
    ctx = TaylorContext(128, x0, h)
    with ctx.scope():
        for lo, hi, r in pairs(11, 10):
            v = ctx.interval(lo, hi)
            assert isinstance(v, TM) and v.g is None and v.r is None  # a constant model
            a, b = ends(v.c)
            assert all(a <= q <= b for q in between(r, lo, hi))
        u, w = ctx.inputs()
        f = u * 3 - w * w + ctx.convert(F(1, 7))  # f(p) = 3 p0 - p1^2 + 1/7 over the box
        up, low = ctx.upper(f), ctx.lower(f)
        assert up.is_const() and low.is_const() and up.c.is_exact() and low.c.is_exact()
        U, Lo = arb_to_fraction(up.c), arb_to_fraction(low.c)
        for _ in range(200):
            p = [c + hh * F(rng.randint(-1000, 1000), 1000) for c, hh in zip(x0, h)]
            val = 3 * p[0] - p[1] ** 2 + F(1, 7)
            assert Lo <= val <= U
        # the bounds are near the true extremes (f is monotone on the box; first-order models
        # overestimate by the remainder of the square, h_1^2 <= 1/256, and more)
        top = 3 * (x0[0] + h[0]) - (x0[1] - h[1]) ** 2 + F(1, 7)
        bottom = 3 * (x0[0] - h[0]) - (x0[1] + h[1]) ** 2 + F(1, 7)
        assert 0 <= U - top < F(1, 4) and 0 <= bottom - Lo < F(1, 4)


def test_exact_interval_is_a_point_or_refused():
    ctx = ExactContext()
    for lo, hi, _ in pairs(3):
        if lo == hi:
            assert ctx.interval(lo, hi) == flint.fmpq(lo.numerator, lo.denominator)
        else:
            with pytest.raises(ExactUnsupported):
                ctx.interval(lo, hi)
        x = ctx.convert(lo)
        assert ctx.upper(x) == x and ctx.lower(x) == x


def test_non_rigorous_contexts_return_the_midpoint():
    mp, fp = MPContext(100), FPContext()
    M = mpmath.MPContext()
    M.prec = 100
    for lo, hi, _ in pairs(4):
        mid = (lo + hi) / 2
        v = mp.interval(lo, hi)
        sign, man, exp, _ = M.mpf(v)._mpf_
        got = (-1) ** sign * F(int(man)) * F(2) ** int(exp) if man else F(0)
        assert abs(got - mid) <= F(2) ** -99 * abs(mid)
        assert fp.interval(lo, hi) == float(mid)
        assert mp.upper(v) is v and mp.lower(v) is v
        assert fp.upper(1.5) == 1.5 and fp.lower(1.5) == 1.5


@pytest.mark.parametrize("ctx", [ExactContext(), BallContext(64), MPContext(64), FPContext(),
                                 TaylorContext(64, [0], [1])], ids=["exact", "ball", "mp", "fp", "taylor"])
def test_bad_intervals_are_refused(ctx):
    with pytest.raises(ValueError):
        ctx.interval(F(1, 2), F(1, 3))
    with pytest.raises(TypeError):
        ctx.interval(0.5, 1)
