"""Tests for symbounds.contexts: the four number systems a forward pass runs in.

Every expected value is worked out independently of the code under test: exact Fractions for
rational arithmetic, a private high-precision mpmath context for transcendental constants.
"""
import math
from fractions import Fraction

import flint
import mpmath
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from symbounds.core.contexts import (
    BallContext,
    ExactContext,
    ExactUnsupported,
    FPContext,
    MPContext,
    Undecided,
    make_context,
)
from symbounds.core.transformer import Attention, Embedding, Head, Readout, Transformer, forward

PRECS = (30, 53, 128)


# ---------------------------------------------------------------------------------------- helpers




def exact_arb(a: flint.arb) -> Fraction:
    """Exact value of a radius-0 arb (our own conversion, independent of the code under test)."""
    assert a.is_exact()
    man, exp = (int(t) for t in a.man_exp())
    return Fraction(man) * Fraction(2) ** exp


def mid_rad(a: flint.arb) -> tuple[Fraction, Fraction]:
    return exact_arb(a.mid()), exact_arb(a.rad())


def bounds(ctx: BallContext, ball) -> tuple[Fraction, Fraction]:
    """to_fraction_bounds, taken inside the context's scope, cross-checked against mid +- rad."""
    with ctx.scope():
        lo, hi = ctx.to_fraction_bounds(ball)
    assert isinstance(lo, Fraction) and isinstance(hi, Fraction)
    m, r = mid_rad(ball)
    # to_fraction_bounds must be an *outer* bound of the ball
    assert lo <= m - r and m + r <= hi
    return lo, hi


def fq(x: flint.fmpq) -> Fraction:
    return Fraction(int(x.p), int(x.q))


def private_mp(bits: int = 1200) -> mpmath.MPContext:
    m = mpmath.MPContext()
    m.prec = bits
    return m


def mpf_to_fraction(v) -> Fraction:
    v = M.mpf(v)
    assert M.isfinite(v)
    sign, man, exp, _ = v._mpf_  # (man_exp drops the sign of negative numbers)
    return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp)


def assert_encloses_truth(ctx: BallContext, ball, truth: Fraction, eps: Fraction, scale=1):
    """[truth - eps, truth + eps] (where the true value lies) is inside the ball, and the ball is narrow."""
    lo, hi = bounds(ctx, ball)
    assert lo <= truth - eps and truth + eps <= hi, (ctx.to_str(ball, 30), float(truth))
    assert hi - lo <= Fraction(2) ** -(ctx.prec - 10) * (1 + abs(truth)) * scale


# ------------------------------------------------------------------ 1. inclusion principle (hypothesis)

# (name, f(ctx, a, b, c), scale(a, b, c)); b and c are nonzero.  f uses the context's own ops and
# Python operators so the same code runs on fmpq and on arb.  ``scale`` is the sum of the magnitudes
# of the rounded intermediate quantities (a bound on the size of the rounding errors).
EXPRESSIONS = [
    ("a+b", lambda C, a, b, c: a + b, lambda a, b, c: abs(a) + abs(b)),
    ("a-b", lambda C, a, b, c: a - b, lambda a, b, c: abs(a) + abs(b)),
    ("a*b", lambda C, a, b, c: a * b, lambda a, b, c: abs(a * b)),
    ("a/b", lambda C, a, b, c: a / b, lambda a, b, c: abs(a / b)),
    ("a**3+c", lambda C, a, b, c: C.pow(a, 3) + c, lambda a, b, c: abs(a) ** 3 + abs(c)),
    ("b**-2", lambda C, a, b, c: C.pow(b, -2), lambda a, b, c: 1 / b**2),
    ("(a+b)*(c-a)/b", lambda C, a, b, c: (a + b) * (c - a) / b,
     lambda a, b, c: (abs(a) + abs(b)) * (abs(c) + abs(a)) / abs(b)),
    ("relu(a-b*c)", lambda C, a, b, c: C.relu(a - b * c), lambda a, b, c: abs(a) + abs(b * c)),
    ("max(a*b,c)", lambda C, a, b, c: C.max(a * b, c), lambda a, b, c: abs(a * b) + abs(c)),
    ("min(a,b/c)", lambda C, a, b, c: C.min(a, b / c), lambda a, b, c: abs(a) + abs(b / c)),
    ("(a*b+c)/(1+a*a)", lambda C, a, b, c: (a * b + c) / (C.one + a * a),
     lambda a, b, c: (abs(a * b) + abs(c)) / (1 + a * a)),
    ("relu(a)-relu(-b)", lambda C, a, b, c: C.relu(a) - C.relu(-b), lambda a, b, c: abs(a) + abs(b)),
    ("abs(a-c)*b", lambda C, a, b, c: C.abs(a - c) * b, lambda a, b, c: (abs(a) + abs(c)) * abs(b)),
    ("1/b-1/c", lambda C, a, b, c: C.one / b - C.one / c, lambda a, b, c: abs(1 / b) + abs(1 / c)),
    ("max(min(a,b),relu(c))*a", lambda C, a, b, c: C.max(C.min(a, b), C.relu(c)) * a,
     lambda a, b, c: (abs(a) + abs(b) + abs(c)) * abs(a)),
]

fractions = st.fractions(min_value=-1000, max_value=1000, max_denominator=1000)
nonzero_fractions = fractions.filter(lambda f: f != 0)


@settings(max_examples=120, deadline=None)
@given(a=fractions, b=nonzero_fractions, c=nonzero_fractions)
def test_ball_arithmetic_encloses_exact_result_and_is_narrow(a, b, c):
    E = ExactContext()
    ea, eb, ec = (E.convert(v) for v in (a, b, c))
    for name, f, scale in EXPRESSIONS:
        exact = fq(f(E, ea, eb, ec))
        # the exact context itself must agree with plain Fraction arithmetic
        expected = f(_FractionOps, a, b, c)
        assert exact == expected, name
        S = scale(a, b, c)
        for prec in PRECS:
            B = BallContext(prec)
            with B.scope():
                ba, bb, bc = (B.convert(v) for v in (a, b, c))
                ball = f(B, ba, bb, bc)
            lo, hi = bounds(B, ball)
            assert lo <= exact <= hi, (name, prec, B.to_str(ball), exact)
            assert hi - lo <= Fraction(2) ** -(prec - 10) * (1 + S), (name, prec, float(hi - lo))


class _FractionOps:
    """The expressions above evaluated with plain Fractions (the independent reference)."""

    one = Fraction(1)

    @staticmethod
    def pow(x, n):
        return x**n

    @staticmethod
    def relu(x):
        return x if x > 0 else Fraction(0)

    @staticmethod
    def max(x, y):
        return x if x >= y else y

    @staticmethod
    def min(x, y):
        return x if x <= y else y

    @staticmethod
    def abs(x):
        return abs(x)


X, Y = sympy.symbols("x y")


@settings(max_examples=60, deadline=None)
@given(a=fractions, b=nonzero_fractions)
def test_from_sympy_with_env_encloses_exact_value(a, b):
    expr = (X + Y) ** 3 / Y - sympy.Max(X, Y) + sympy.Abs(X - 2 * Y) * sympy.Rational(1, 3)
    # reference: SymPy's own exact rational arithmetic
    ref = expr.subs({X: sympy.Rational(a.numerator, a.denominator), Y: sympy.Rational(b.numerator, b.denominator)})
    ref = Fraction(int(ref.p), int(ref.q))
    E = ExactContext()
    assert fq(E.from_sympy(expr, env={X: E.convert(a), Y: E.convert(b)})) == ref
    S = (abs(a) + abs(b)) ** 3 / abs(b) + abs(a) + abs(b) + abs(a) + 2 * abs(b)
    for prec in PRECS:
        B = BallContext(prec)
        v = B.from_sympy(expr, env={X: B.convert(a), Y: B.convert(b)})
        lo, hi = bounds(B, v)
        assert lo <= ref <= hi
        assert hi - lo <= Fraction(2) ** -(prec - 12) * (1 + S)


def test_dyadic_inputs_give_exact_balls():
    B = BallContext(53)
    with B.scope():
        v = B.convert(Fraction(3, 8)) * B.convert(5) - B.convert(Fraction(-1, 4))
    assert v.is_exact()
    assert bounds(B, v) == (Fraction(17, 8), Fraction(17, 8))


# -------------------------------------------------------------- 2. transcendentals vs independent truth

M = private_mp(1200)
EPS = Fraction(1, 2**1100)  # the 1200-bit reference values are within this of the truth (all are O(1))


@pytest.mark.parametrize("prec", [64, 256])
@pytest.mark.parametrize(
    "name, compute, truth",
    [
        ("exp(1) via ctx.exp", lambda B: B.exp(B.one), lambda: M.exp(1)),
        ("E via from_sympy", lambda B: B.from_sympy(sympy.E), lambda: M.e),
        ("exp(-1/3)", lambda B: B.from_sympy(sympy.exp(sympy.Rational(-1, 3))), lambda: M.exp(M.mpf(-1) / 3)),
        ("sin(pi/7)", lambda B: B.from_sympy(sympy.sin(sympy.pi / 7)), lambda: M.sin(M.pi / 7)),
        ("cos(2pi/7)", lambda B: B.from_sympy(sympy.cos(2 * sympy.pi / 7)), lambda: M.cos(2 * M.pi / 7)),
        ("sin(1)", lambda B: B.from_sympy(sympy.sin(sympy.Integer(1))), lambda: M.sin(1)),
        ("cos(1/10)", lambda B: B.from_sympy(sympy.cos(sympy.Rational(1, 10))), lambda: M.cos(M.mpf(1) / 10)),
        ("log(2)", lambda B: B.from_sympy(sympy.log(2)), lambda: M.log(2)),
        ("log(2) via ctx.log", lambda B: B.log(B.convert(2)), lambda: M.log(2)),
        ("sqrt(2)", lambda B: B.from_sympy(sympy.sqrt(2)), lambda: M.sqrt(2)),
        ("1/sqrt(3)", lambda B: B.from_sympy(1 / sympy.sqrt(3)), lambda: 1 / M.sqrt(3)),
        ("2**(1/3)", lambda B: B.from_sympy(sympy.Pow(2, sympy.Rational(1, 3))), lambda: M.cbrt(2)),
        ("pi", lambda B: B.from_sympy(sympy.pi), lambda: M.pi),
    ],
)
def test_ball_transcendentals_enclose_high_precision_mpmath(prec, name, compute, truth):
    B = BallContext(prec)
    with B.scope():
        ball = compute(B)
    t = mpf_to_fraction(truth())
    assert_encloses_truth(B, ball, t, EPS)


def test_cos_pi_fifth_matches_closed_form():
    # cos(pi/5) = (1 + sqrt 5)/4, checked against an independent ball for the closed form
    B = BallContext(200)
    ball = B.from_sympy(sympy.cos(sympy.pi / 5, evaluate=False))
    t = mpf_to_fraction((1 + M.sqrt(5)) / 4)
    assert_encloses_truth(B, ball, t, EPS)


def test_sqrt2_squared_contains_two_but_is_not_exact():
    B = BallContext(128)
    v = B.from_sympy(sympy.Pow(sympy.sqrt(2), 2, evaluate=False))
    with B.scope():
        w = B.sqrt(B.convert(2)) ** 2
    for ball in (v, w):
        lo, hi = bounds(B, ball)
        assert lo <= 2 <= hi and lo < hi
        assert hi - lo <= Fraction(2) ** -118


# --------------------------------------------------------------------- 3. three-valued comparisons


def test_ball_comparisons_true_false_and_none():
    B = BallContext(128)
    with B.scope():
        one, two = B.convert(1), B.convert(2)
        third = B.convert(Fraction(1, 3))
        s2 = B.sqrt(two) ** 2  # a ball around 2 that is not exactly 2
        assert not s2.is_exact()
        # certain answers
        assert B.lt(one, two) is True and B.le(one, two) is True
        assert B.gt(two, one) is True and B.ge(two, one) is True
        assert B.lt(two, one) is False and B.le(two, one) is False
        assert B.gt(one, two) is False and B.ge(one, two) is False
        # equal exact balls
        assert B.lt(one, one) is False and B.le(one, one) is True and B.ge(one, one) is True
        # overlapping balls: cannot tell, and the answer is None (not False)
        for f in (B.lt, B.le, B.gt, B.ge):
            assert f(s2, two) is None
            assert f(two, s2) is None
        assert B.le(third, third) is None  # an inexact ball compared with itself
        # boundary: a ball whose upper end is exactly u: a <= u is certain, a < u is not
        with BallContext(1000).scope():
            u = third.upper()  # at 1000 bits this is exactly mid + rad
        assert u.is_exact() and exact_arb(u) == sum(mid_rad(third))
        assert B.le(third, u) is True
        assert B.lt(third, u) is None
        assert B.ge(u, third) is True and B.gt(u, third) is None
        # far apart, inexact: still certain
        assert B.lt(third, B.convert(Fraction(1, 2))) is True


def test_exact_comparisons_are_plain_bools():
    E = ExactContext()
    a, b = E.convert(Fraction(1, 3)), E.convert(Fraction(1, 2))
    assert E.lt(a, b) is True and E.le(a, b) is True
    assert E.lt(b, a) is False and E.gt(b, a) is True
    assert E.lt(a, E.convert(Fraction(2, 6))) is False
    assert E.le(a, E.convert(Fraction(2, 6))) is True
    assert E.ge(a, E.convert(Fraction(2, 6))) is True


def test_fp_comparisons_with_nan_are_none():
    F = FPContext()
    nan = math.nan
    assert F.lt(nan, 1.0) is None and F.lt(1.0, nan) is None
    assert F.le(nan, nan) is None
    assert F.gt(nan, 0.0) is None and F.ge(0.0, nan) is None
    assert F.lt(1.0, 2.0) is True and F.lt(2.0, 1.0) is False
    assert F.le(2.0, 2.0) is True and F.lt(2.0, 2.0) is False


def test_mp_comparisons():
    P = MPContext(100)
    a, b = P.convert(Fraction(1, 3)), P.convert(Fraction(1, 2))
    assert P.lt(a, b) is True and P.ge(a, b) is False and P.le(a, a) is True


# ------------------------------------------------------------------------ 4. precision does not leak


def _tiny_softmax_model():
    h = Head(((1,),), ((1,),), ((1,),), ((1,),))
    return Transformer(
        layers=(Attention((h,), kind="softmax"),),
        embedding=Embedding(base=((0, 1),), E=((1,),), column=0),
        readout=Readout(0, 1),
    )


def test_ball_context_does_not_leak_flint_precision():
    flint.ctx.prec = 77
    B = BallContext(256)
    B.convert(Fraction(1, 3))
    B.rational(2, 7)
    B.from_sympy(sympy.sin(sympy.pi / 7) + sympy.exp(sympy.sqrt(3)))
    assert flint.ctx.prec == 77
    with B.scope():
        assert flint.ctx.prec == 256
        with BallContext(64).scope():
            assert flint.ctx.prec == 64
        assert flint.ctx.prec == 256
    assert flint.ctx.prec == 77
    forward(B, _tiny_softmax_model(), [Fraction(1, 3)])
    assert flint.ctx.prec == 77


def test_ball_scope_restores_precision_after_exception():
    flint.ctx.prec = 91
    B = BallContext(300)
    with pytest.raises(ZeroDivisionError):
        with B.scope():
            assert flint.ctx.prec == 300
            raise ZeroDivisionError("boom")
    assert flint.ctx.prec == 91
    # an error raised by the library inside a scope (a Symbol with no value) also restores it
    with pytest.raises(TypeError):
        B.from_sympy(sympy.Symbol("nope") + 1)
    assert flint.ctx.prec == 91


def test_ball_forward_uses_its_own_precision_not_the_global_one():
    flint.ctx.prec = 20  # a low ambient precision must not degrade a 256-bit evaluation
    B = BallContext(256)
    out = forward(B, _tiny_softmax_model(), [Fraction(1, 3)])
    assert flint.ctx.prec == 20
    # tokens z = (1/3, 1), scores row 1 = [1/3, 1]: out = (e^{1/3}/3 + e)/(e^{1/3} + e)
    e3, e1 = M.exp(M.mpf(1) / 3), M.e
    truth = mpf_to_fraction((e3 / 3 + e1) / (e3 + e1))
    assert_encloses_truth(B, out, truth, EPS, scale=8)


def test_mp_context_is_private():
    saved_prec, saved_dps = mpmath.mp.prec, mpmath.mp.dps
    P = MPContext(200)
    P.convert(Fraction(1, 3))
    v = P.exp(P.one)
    P.from_sympy(sympy.sin(sympy.pi / 7) + sympy.log(3))
    forward(P, _tiny_softmax_model(), [Fraction(1, 3)])
    assert mpmath.mp.prec == saved_prec and mpmath.mp.dps == saved_dps
    # and the private context really works at 200 bits
    assert abs(mpf_to_fraction(v) - mpf_to_fraction(M.e)) <= Fraction(2) ** -195
    # changing the global mpmath precision does not change the context's precision
    try:
        mpmath.mp.prec = 20
        w = P.log(P.convert(2))
    finally:
        mpmath.mp.prec = saved_prec
    assert abs(mpf_to_fraction(w) - mpf_to_fraction(M.log(2))) <= Fraction(2) ** -195


def test_precisions_give_different_radii_for_one_third():
    lo64, hi64 = bounds(BallContext(64), BallContext(64).convert(Fraction(1, 3)))
    lo256, hi256 = bounds(BallContext(256), BallContext(256).convert(Fraction(1, 3)))
    r64, r256 = BallContext(64).convert(Fraction(1, 3)).rad(), BallContext(256).convert(Fraction(1, 3)).rad()
    assert exact_arb(r64) > exact_arb(r256) > 0
    assert lo64 <= Fraction(1, 3) <= hi64 and lo256 <= Fraction(1, 3) <= hi256
    assert Fraction(2) ** -70 <= hi64 - lo64 <= Fraction(2) ** -60
    assert hi256 - lo256 <= Fraction(2) ** -250


def test_to_fraction_bounds_outside_scope_keeps_ball_precision():
    B = BallContext(128)
    ball = B.convert(Fraction(1, 3))
    flint.ctx.prec = 53  # the ambient default
    lo, hi = B.to_fraction_bounds(ball)
    assert lo <= Fraction(1, 3) <= hi
    assert hi - lo <= Fraction(2) ** -120


def test_ball_max_min_relu_enclose_all_cases_for_overlapping_balls():
    B = BallContext(128)
    with B.scope():
        two = B.convert(2)
        s2 = B.sqrt(two) ** 2  # overlaps 2 on both sides
        m, r = mid_rad(s2)
        assert r > 0 and m - r < 2 < m + r
        # max(x, 2) over x in s2 ranges over [2, m + r]; min(x, 2) over [m - r, 2]
        lo, hi = bounds(B, B.max(s2, two))
        assert lo <= 2 and hi >= m + r
        lo, hi = bounds(B, B.max(two, s2))
        assert lo <= 2 and hi >= m + r
        lo, hi = bounds(B, B.min(two, s2))
        assert lo <= m - r and hi >= 2
        lo, hi = bounds(B, B.min(s2, two))
        assert lo <= m - r and hi >= 2
        # relu of a ball straddling 0: encloses [0, upper]; below 0 at most the rounding of the
        # radius (mid-rad form), far less than the input's own negative part
        eps = s2 - two
        em, er = mid_rad(eps)
        assert em - er < 0 < em + er
        lo, hi = bounds(B, B.relu(eps))
        assert lo <= 0 <= hi and hi >= em + er
        assert lo >= -(em + er) * Fraction(2) ** -20
        assert em - er < -(em + er) * Fraction(2) ** -20  # (so returning eps itself would fail)


def test_ball_is_zero_only_for_exact_zero():
    B = BallContext(128)
    with B.scope():
        two = B.convert(2)
        tiny = B.sqrt(two) ** 2 - two  # a ball containing 0 with a positive radius
        assert tiny.contains(0) and not tiny.is_exact()
        assert B.is_zero(tiny) is False
        assert B.is_zero(B.convert(Fraction(1, 3))) is False
        assert B.is_zero(B.convert(0)) is True
        assert B.is_zero(B.relu(B.convert(Fraction(-1, 3)))) is True  # certainly negative -> exact 0
    assert ExactContext().is_zero(flint.fmpq(0)) and not ExactContext().is_zero(flint.fmpq(1, 3))


def test_to_str_reports_values():
    E = ExactContext()
    assert E.to_str(E.convert(Fraction(-7, 3))) == "-7/3"
    assert E.to_str(E.convert(5)) == "5"
    B = BallContext(128)
    txt = B.to_str(B.convert(Fraction(1, 3)), 10)
    assert txt.startswith("[0.3333333333") and "+/-" in txt
    assert FPContext().to_str(0.1) == "0.1"
    assert MPContext(100).to_str(MPContext(100).convert(Fraction(1, 4))) == "0.25"


# ---------------------------------------------------------------------- 5. conversions are rigorous


def test_ball_convert_one_tenth_contains_it_exactly():
    for prec in (24, 53, 200):
        B = BallContext(prec)
        for v in (B.convert(Fraction(1, 10)), B.from_sympy(sympy.Rational(1, 10)), B.rational(1, 10),
                  B.convert(sympy.Rational(1, 10)), B.convert(flint.fmpq(1, 10))):
            lo, hi = bounds(B, v)
            assert lo < Fraction(1, 10) < hi  # 1/10 is not dyadic: the ball must have a radius
            assert hi - lo <= Fraction(2) ** -(prec - 2)


@pytest.mark.parametrize("ctx", [ExactContext(), BallContext(64), MPContext(64), FPContext()],
                         ids=lambda c: c.name)
def test_python_floats_and_bools_are_rejected(ctx):
    with pytest.raises(TypeError):
        ctx.convert(0.1)
    with pytest.raises(TypeError):
        ctx.convert(True)
    with pytest.raises(TypeError):
        ctx.from_sympy(sympy.Float(0.1))
    with pytest.raises(TypeError):
        ctx.convert(sympy.Float("0.5") * sympy.pi)


def test_exact_context_conversions_and_refusals():
    E = ExactContext()
    assert E.convert(Fraction(1, 10)) == flint.fmpq(1, 10)
    assert E.from_sympy(sympy.Rational(-7, 3)) == flint.fmpq(-7, 3)
    assert E.convert(12) == flint.fmpq(12)
    assert E.sqrt(E.convert(Fraction(9, 4))) == flint.fmpq(3, 2)
    assert E.sqrt(E.convert(0)) == 0
    s = sympy.Symbol("s")
    assert E.from_sympy(sympy.sqrt(s), env={s: E.convert(Fraction(49, 16))}) == flint.fmpq(7, 4)
    for bad in (2, Fraction(2, 9), Fraction(-4)):
        with pytest.raises(ExactUnsupported):
            E.sqrt(E.convert(bad))
    with pytest.raises(ExactUnsupported):
        E.exp(E.one)
    with pytest.raises(ExactUnsupported):
        E.log(E.convert(2))
    with pytest.raises(ExactUnsupported):
        E.sin(E.one)
    with pytest.raises(ExactUnsupported):
        E.cos(E.one)
    with pytest.raises(ExactUnsupported):
        E.pi()
    for expr in (sympy.sqrt(2), sympy.sin(sympy.pi / 7), sympy.exp(sympy.Rational(1, 2)), sympy.E):
        with pytest.raises(ExactUnsupported):
            E.from_sympy(expr)
    # integer powers stay exact
    assert E.from_sympy(sympy.Pow(sympy.Rational(2, 3), -3, evaluate=False)) == flint.fmpq(27, 8)
    assert E.pow(E.convert(Fraction(-1, 2)), 3) == flint.fmpq(-1, 8)


def test_mp_and_fp_conversions_round_correctly():
    P = MPContext(200)
    v = P.convert(Fraction(1, 10))
    assert abs(mpf_to_fraction(v) - Fraction(1, 10)) <= Fraction(1, 10) * Fraction(2) ** -200
    F = FPContext()
    assert F.convert(Fraction(1, 10)) == 0.1
    assert F.convert(Fraction(10**30 + 1, 3 * 10**30)) == (10**30 + 1) / (3 * 10**30)
    assert F.from_sympy(sympy.Rational(1, 3)) == 1 / 3


def test_make_context_by_name():
    assert isinstance(make_context("exact"), ExactContext)
    b = make_context("ball", 99)
    assert isinstance(b, BallContext) and b.prec == 99
    assert make_context("mp", 70).prec == 70
    assert isinstance(make_context("fp"), FPContext)
    with pytest.raises(ValueError):
        make_context("double")


# -------------------------------------------------------------------------------------- 6. float64


def test_fp_exp_overflow_and_underflow():
    F = FPContext()
    big = F.exp(F.convert(1000))
    assert isinstance(big, float) and big == math.inf
    assert F.exp(F.convert(-1000)) == 0.0
    assert F.exp(F.convert(1)) == math.e
    assert F.from_sympy(sympy.exp(1000)) == math.inf
    assert F.relu(F.convert(-3)) == 0.0 and F.relu(F.convert(Fraction(5, 2))) == 2.5


def test_fp_convert_huge_rational_overflows_to_inf():
    F = FPContext()
    assert F.convert(Fraction(10**400)) == math.inf
    assert F.convert(Fraction(-(10**400), 3)) == -math.inf


def test_fp_from_sympy_integer_power_overflows_to_inf():
    F = FPContext()
    assert F.from_sympy(sympy.Pow(sympy.pi, 1000)) == math.inf
    assert F.from_sympy(sympy.Pow(sympy.pi, -1000)) == 0.0


def test_fp_pow_overflow_keeps_sign():
    F = FPContext()
    assert F.pow(10.0, 400) == math.inf
    assert F.pow(-10.0, 401) == -math.inf


def test_fp_max_propagates_nan():
    F = FPContext()
    assert math.isnan(F.max(math.nan, 1.0)) and math.isnan(F.max(1.0, math.nan))
    assert math.isnan(F.relu(math.nan))


def test_fp_min_propagates_nan():
    F = FPContext()
    assert math.isnan(F.min(1.0, math.nan))
    assert math.isnan(F.min(math.nan, 1.0))


# ------------------------------------------------------------------------------------ 7. argmax_set


def test_exact_argmax_set_returns_all_ties():
    E = ExactContext()
    s = [E.convert(v) for v in (Fraction(1, 3), Fraction(-2), Fraction(2, 6), Fraction(1, 4))]
    assert E.argmax_set(s) == [0, 2]
    assert E.argmax_set([E.convert(v) for v in (0, 5, 1)]) == [1]


def test_ball_argmax_set_decides_or_raises_undecided():
    B = BallContext(128)
    with B.scope():
        third, half, two3 = (B.convert(Fraction(p, q)) for p, q in ((1, 3), (1, 2), (2, 3)))
        # separated (inexact) scores: the unique winner
        assert B.argmax_set([third, two3, half]) == [1]
        assert B.argmax_set([two3, third]) == [0]
        # exact ties between exact balls are decided (and averaged later by the hardmax)
        one = B.convert(1)
        assert B.argmax_set([one, B.convert(0), B.convert(1)]) == [0, 2]
        # overlapping top scores: cannot be decided
        s2 = B.sqrt(B.convert(2)) ** 2
        with pytest.raises(Undecided):
            B.argmax_set([s2, B.convert(2), one])
        with pytest.raises(Undecided):
            B.argmax_set([third, third])  # identical but inexact balls
        # an inexact top score separated from the others is decided
        assert B.argmax_set([s2, one, B.sqrt(B.convert(2))]) == [0]
        # shift point is an exact number
        m = B.shift_point([third, two3, half])
        assert m.is_exact() and exact_arb(m) == mid_rad(two3)[0]


def test_fp_argmax_set_with_nan_is_never_empty():
    F = FPContext()
    try:
        winners = F.argmax_set([math.nan, 1.0, 0.5])
    except Undecided:
        return
    assert winners != []
