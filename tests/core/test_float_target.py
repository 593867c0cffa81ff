"""The target enclosed over boxes in outward-rounded floats (symbounds.core.float_target).

Every enclosure is checked against an independent evaluation: 300-bit Arb balls at points of
the box (its corners, its centre and random points), for each operation alone over doubles of
every size (huge, tiny, subnormal, near the zeros of log, sqrt and division) and for random
expressions of the target grammar.  A float enclosure that excludes a 300-bit value is unsound.
"""

import math
import random
from fractions import Fraction as F

import flint
import numpy as np
import pytest
import sympy
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from symbounds.core import float_target as ft
from symbounds.core.boxes import Box, box_bounds, float_evaluator
from symbounds.core.contexts import BallContext
from symbounds.core.expr import ExprError, parse_target, variables

PREC = 300


def arb_of(f):
    return flint.arb(F(float(f)).numerator) / flint.arb(F(float(f)).denominator)


def inside(v, lo, hi) -> bool:
    """Is the 300-bit ball ``v`` (a true value) not proved outside ``[lo, hi]``?  Both ends
    must be numbers: a NaN end means "not enclosed" and is checked separately."""
    assert not (math.isnan(lo) or math.isnan(hi))
    lo_ok = lo == -math.inf or not (v < arb_of(lo))
    hi_ok = hi == math.inf or not (v > arb_of(hi))
    return lo_ok and hi_ok


def wide_doubles():
    """Doubles of every magnitude, both signs, and the values near 0 and 1."""
    return st.one_of(
        st.floats(-10, 10),
        st.floats(-1e300, 1e300),
        st.floats(-1e-300, 1e-300),
        st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1.0, 1.0 - 2**-53, 1.0 + 2**-52, 2.0**-1022, 1e308]),
        st.builds(lambda m, e: math.ldexp(m, e), st.floats(-1, 1), st.integers(-1074, 1023)),
    )


# ------------------------------------------------------------------------------------------
# one operation at a time


@settings(max_examples=300, deadline=None)
@given(wide_doubles())
def test_log_bounds_contain_log(x):
    lo, hi = float(ft.log_lower(np.array([x]))[0]), float(ft.log_upper(np.array([x]))[0])
    if not x > 0:
        assert math.isnan(lo) and math.isnan(hi)
        return
    with flint.ctx.workprec(PREC):
        v = arb_of(x).log()
        assert inside(v, lo, hi), (x, lo, hi)
    assert hi - lo <= 1e-12 * (abs(math.log(x)) + 1)  # not trivially wide


@settings(max_examples=300, deadline=None)
@given(wide_doubles())
def test_sin_and_cos_points(x):
    for f, name in ((ft.sin_point, "sin"), (ft.cos_point, "cos")):
        lo, hi = (float(a[0]) for a in f(np.array([x])))
        if abs(x) > 2.0**20:
            assert math.isnan(lo) and math.isnan(hi)
            continue
        with flint.ctx.workprec(PREC):
            v = getattr(arb_of(x), name)()
            assert inside(v, lo, hi), (name, x, lo, hi)
        assert hi - lo <= 2.0**-42


def intervals():
    """``(lo, hi)`` pairs: narrow and wide, around 0, at large arguments."""
    centre = st.one_of(st.floats(-10, 10), st.floats(-1e6, 1e6), st.floats(-1e-8, 1e-8))
    width = st.one_of(st.floats(0, 1e-9), st.floats(0, 1), st.floats(0, 20), st.just(0.0))
    return st.builds(lambda c, w: (c, c + w), centre, width).filter(lambda t: math.isfinite(t[1]))


@settings(max_examples=300, deadline=None)
@given(intervals(), st.randoms(use_true_random=False))
def test_interval_sin_and_cos(iv, rng):
    a, b = iv
    for f, name in ((ft.interval_sin, "sin"), (ft.interval_cos, "cos")):
        lo, hi = (float(v[0]) for v in f(np.array([a]), np.array([b])))
        if max(abs(a), abs(b)) > 2.0**20:
            continue
        assert not (math.isnan(lo) or math.isnan(hi)), (name, a, b)
        with flint.ctx.workprec(PREC):
            for x in [a, b, a * 0.5 + b * 0.5] + [rng.uniform(a, b) for _ in range(3)]:
                x = min(max(x, a), b)
                assert inside(getattr(arb_of(x), name)(), lo, hi), (name, a, b, x, lo, hi)
        assert -1.0 <= lo <= hi <= 1.0


def test_interval_sin_is_tight_on_monotone_pieces():
    """On [0.1, 0.2] sin is increasing: the enclosure is [sin 0.1, sin 0.2] within 2^-44."""
    lo, hi = (float(v[0]) for v in ft.interval_sin(np.array([0.1]), np.array([0.2])))
    assert abs(lo - math.sin(0.1)) < 2**-44 and abs(hi - math.sin(0.2)) < 2**-44


# ------------------------------------------------------------------------------------------
# random expressions of the grammar over random boxes

LEAVES = ["x1", "x2", "pi", "1/3", "2", "0.5", "1e-8", "1e8"]


@st.composite
def expressions(draw, depth=3):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(LEAVES))
    kind = draw(st.sampled_from(["+", "-", "*", "/", "^", "abs", "sqrt", "exp", "log", "sin", "cos", "min", "max"]))
    a = draw(expressions(depth=depth - 1))
    if kind in "+-*/":
        b = draw(expressions(depth=depth - 1))
        return f"({a}){kind}({b})"
    if kind == "^":
        return f"({a})^{draw(st.sampled_from(['2', '3', '-1', '-2', '7', '1/2', '3/2']))}"
    if kind in ("min", "max"):
        b = draw(expressions(depth=depth - 1))
        return f"{kind}({a},{b})"
    if kind == "exp":
        return f"exp(({a})/8)"
    return f"{kind}({a})"


def boxes_2d():
    """Boxes of [0,1]^2 (dyadic ends: the certificates' boxes), narrow and wide, near 0."""
    end = st.builds(lambda k, j: F(k, 2**j), st.integers(0, 2**12), st.just(12))
    return st.builds(lambda a, b, c, e: Box((min(a, b), min(c, e)), (max(a, b), max(c, e))), end, end, end, end)


def _points(box, rng):
    corners = [(box.lo[0], box.lo[1]), (box.hi[0], box.hi[1]), (box.lo[0], box.hi[1]), (box.hi[0], box.lo[1])]
    rand = [tuple(a + (b - a) * F(rng.randint(0, 1000), 1000) for a, b in zip(box.lo, box.hi)) for _ in range(3)]
    return corners + [box.centre] + rand


@settings(max_examples=300, deadline=None)
@given(expressions(), st.lists(boxes_2d(), min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_random_targets_enclosed_over_random_boxes(text, boxes, rng):
    try:
        g = parse_target(text, 2)
    except ExprError:
        assume(False)
    gt = ft.compile_target(g, 2)
    glo, ghi = gt.enclose_boxes(boxes)
    ctx = BallContext(PREC)
    xs = variables(2)
    for box, lo, hi in zip(boxes, glo, ghi):
        if math.isnan(lo):  # not enclosed in floats: the caller uses Arb
            assert math.isnan(hi)
            continue
        with ctx.scope():
            for p in _points(box, rng):
                try:
                    v = ctx.from_sympy(g, env={x: ctx.convert(c) for x, c in zip(xs, p)})
                except (ValueError, ArithmeticError, ZeroDivisionError):
                    continue  # undefined at this point
                if not v.is_finite():
                    continue
                assert inside(v, float(lo), float(hi)), (text, box, p, lo, hi)


@pytest.mark.parametrize("text,box,expect_nan", [
    ("1/(x1 - 1/2)", Box((F(1, 4),), (F(3, 4),)), True),  # a denominator containing 0
    ("log(x1)", Box((F(0),), (F(1, 2),)), True),  # log reaching 0
    ("sqrt(x1 - 1/4)", Box((F(0),), (F(1, 2),)), True),  # sqrt of a partly negative interval
    ("log(x1)", Box((F(1, 2**40),), (F(1, 2),)), False),
    ("sqrt(x1)", Box((F(0),), (F(1, 2),)), False),
    ("1/x1", Box((F(1, 2**1000),), (F(1),)), False),
    ("exp(1000*x1)", Box((F(0),), (F(1),)), True),  # overflows
])
def test_undefined_or_overflowing_boxes_are_left_to_arb(text, box, expect_nan):
    g = parse_target(text, 1)
    glo, ghi = ft.compile_target(g, 1).enclose_boxes([box])
    assert math.isnan(glo[0]) == expect_nan and math.isnan(ghi[0]) == expect_nan
    if not expect_nan:
        ctx = BallContext(PREC)
        with ctx.scope():
            for p in (box.lo[0], box.hi[0], box.centre[0]):
                v = ctx.from_sympy(g, env={variables(1)[0]: ctx.convert(p)})
                assert inside(v, float(glo[0]), float(ghi[0]))


def test_powers_at_extremes():
    """Even, odd and negative powers of intervals around 0 and of huge/tiny magnitude."""
    rng = random.Random(3)
    for n in (2, 3, 4, 7, -1, -2, -3):
        g = sympy.Pow(variables(1)[0], n)
        gt = ft.compile_target(g, 1)
        for lo, hi in ((-2.0, 3.0), (-1e-150, 1e-150), (1e-200, 1e-100), (-1e100, -1e50), (0.5, 0.5)):
            glo, ghi = gt.enclose(np.array([[lo]]), np.array([[hi]]))
            a, b = float(glo[0]), float(ghi[0])
            if n < 0 and lo <= 0 <= hi:
                assert math.isnan(a)
                continue
            if math.isnan(a):  # overflow
                continue
            with flint.ctx.workprec(PREC):
                for x in (lo, hi, rng.uniform(lo, hi)):
                    assert inside(arb_of(x) ** n, a, b), (n, lo, hi, x, a, b)


def test_float_target_bounds_against_arb_target_bounds():
    """On a d = 2 model the box bound with the float target is at least the 300-bit error at
    the box's centre and at most the Arb target's bound plus rounding (the float enclosure of
    sin is the exact range of the ends where sin is monotone)."""
    from test_float_boxes import _shi_liao_model

    from symbounds.core import boxes as bx
    from symbounds.core.boxes import point_error

    _inst, K, model = _shi_liao_model(2, "1/4")
    fast = float_evaluator(model, 128)
    boxes = [Box((F(i, 16), F(j, 16)), (F(i + 1, 16), F(j + 1, 16))) for i in range(0, 16, 5) for j in range(0, 16, 7)]
    fb = box_bounds(model, K.g, 2, boxes, 128, fast)
    ball = BallContext(128)
    xs = variables(2)
    lo, hi, ok = fast.ranges([b.lo for b in boxes], [b.hi for b in boxes])
    for k, (box, f) in enumerate(zip(boxes, fb)):
        assert f is not None and ok[k]
        a = bx._float_box_bound(ball, K.g, xs, box, lo[k], hi[k])
        least = point_error(model, K.g, 2, box.centre, 300).lower()
        assert arb_of(float(f)) >= least or flint.arb(f.numerator) / f.denominator >= least
        assert f <= a * (1 + F(1, 10**9)), (float(f), float(a))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**10), st.integers(0, 2**10), st.floats(-1, 1), st.floats(0, 0.3)),
                min_size=1, max_size=8),
       st.sampled_from([F(1, 100), F(9, 50), F(1, 2)]))
def test_centre_verdicts_in_floats_agree_with_300_bit_balls(rows, eps):
    """A centre's verdict from the float target: "disproved" (False) only when ``|T - g(c)| <= eps``
    holds for every ``T`` in the model's centre enclosure, a violation only when ``> eps`` holds
    for all of them (both decided again here in 300-bit balls)."""
    from symbounds.core import boxes as bx

    g = parse_target("sin(x1+x2)/2 + log(1 + x1)", 2)
    xs = variables(2)
    cs = [(F(a, 2**10), F(b, 2**10)) for a, b, _, _ in rows]
    lo = np.array([t - w for _, _, t, w in rows])
    hi = np.array([t + w for _, _, t, w in rows])
    verdicts, est = bx._centre_verdicts(BallContext(128), g, xs, ft.compile_target(g, 2), cs, lo, hi,
                                        [eps] * len(cs))
    ctx = BallContext(PREC)
    with ctx.scope():
        e = ctx.convert(eps)
        for c, a, b, v, m in zip(cs, lo, hi, verdicts, est):
            gv = ctx.from_sympy(g, env={x: ctx.convert(q) for x, q in zip(xs, c)})
            worst = max(arb_of(b) - gv, gv - arb_of(a))  # the largest |T - g(c)| over [a, b]
            least = max(arb_of(a) - gv, gv - arb_of(b))  # its smallest, when positive
            if v is False:
                assert not (worst > e), (c, a, b)
            elif v:
                assert least > e, (c, a, b, v)
            assert m is not None and abs(m - abs(float((arb_of(a) + arb_of(b)).mid()) / 2 - float(gv.mid()))) < 1e-9
