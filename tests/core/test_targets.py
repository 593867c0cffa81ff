"""Targets on their true domain: roots of quantities >= 0 by construction, points where the target
as written is undefined, and precision escalation that stops on NaN enclosures."""

from fractions import Fraction as F

import flint
import mpmath
import pytest
import sympy

from symbounds.core.claims import NAN_NOTE, Claim, Relation, escalate
from symbounds.core.contexts import BallContext, ExactContext, FPContext, UndefinedValue, nonnegative_by_construction
from symbounds.core.expr import parse_target, variables

X1, X2 = variables(2)


def _ball(text, *x, prec=64, d=1):
    ctx = BallContext(prec)
    env = {s: ctx.convert(v) for s, v in zip(variables(d), x)}
    return ctx.from_sympy(parse_target(text, d), env=env)


# ---------------------------------------------------------------- roots on their true domain

def test_root_of_abs_at_its_zero_is_a_finite_ball_containing_zero():
    # 1/3 is not a binary number: x1 - 1/3 is an inexact ball around 0, so is |x1 - 1/3|
    v = _ball("sqrt(abs(x1-1/3))", F(1, 3))
    assert v.is_finite() and v.contains(0)
    # the true value is 0; the ball is tiny: its radius is about sqrt(2^-64)
    assert v.upper() < flint.arb(2) ** -25


@pytest.mark.parametrize("text", ["(x1 - 1/3)^2", "abs(x1-1/3) + abs(x1 - 1/3)", "max(abs(x1-1/3), x1-1)",
                                  "sqrt(abs(x1-1/3))*abs(x1-1/3)"])
def test_roots_and_powers_of_nonnegative_forms(text):
    for expo in ("1/2", "1/3", "3/4"):
        v = _ball(f"({text})^({expo})", F(1, 3))
        assert v.is_finite() and v.contains(0), (text, expo, v)


def test_enclosures_agree_with_mpmath_away_from_zero():
    # independent computation: mpmath at 60 digits must lie in the ball
    for x in (F(1, 7), F(5, 9), F(9, 10)):
        v = _ball("sqrt(abs(x1-1/3)) + abs(x1 - 1/2)^(1/4)", x, prec=128)
        with mpmath.workdps(60):
            xm = mpmath.mpf(x.numerator) / x.denominator
            ref = mpmath.sqrt(abs(xm - mpmath.mpf(1) / 3)) + abs(xm - mpmath.mpf(1) / 2) ** (mpmath.mpf(1) / 4)
            ref_ball = flint.arb(mpmath.nstr(ref, 50), "1e-45")
        assert v.overlaps(ref_ball) and v.rad() < flint.arb(2) ** -100


def test_root_of_a_quantity_not_known_nonnegative_stays_nan():
    # x1 - 1/3 could be negative: its root is not clipped (soundness), the ball stays NaN
    ctx = BallContext(64)
    g = sympy.sqrt(X1 - sympy.Rational(1, 3))  # built directly: the parser would refuse nothing here
    v = ctx.from_sympy(g, env={X1: ctx.convert(F(1, 3))})
    assert not v.is_finite()


@pytest.mark.parametrize("expr, expected", [
    (sympy.Abs(X1 - 1), True), ((X1 - 1) ** 2, True), ((X1 - 1) ** 3, False), (sympy.sqrt(X1), True),
    (sympy.exp(X1) + X1 ** 2, True), (X1 * sympy.Abs(X1), False), (sympy.Max(X1, sympy.Abs(X2)), True),
    (sympy.Min(X1, sympy.Abs(X2)), False), (X1 - X1 ** 2, False), (sympy.Rational(-1, 2), False),
])
def test_nonnegative_by_construction(expr, expected):
    assert nonnegative_by_construction(expr) is expected


# ---------------------------------------------------------------- targets as written

@pytest.mark.parametrize("text, at, what", [
    ("x1/x1", 0, "divides by zero"),
    ("exp(log(x1))", 0, "logarithm"),
    ("log(x1) - log(x1)", 0, "logarithm"),
    ("x1^2/x1", 0, "divides by zero"),
    ("(x1/x1)^0", 0, "divides by zero"),
    ("0*log(x1)", 0, "logarithm"),
    ("sqrt(x1)^2 + 1", 0, None),  # defined at 0
])
def test_undefined_points_are_reported(text, at, what):
    g = parse_target(text, 1)
    if what is None:
        ctx = BallContext(64)
        assert ctx.from_sympy(g, env={X1: ctx.convert(at)}).contains(1)
        return
    for ctx in (BallContext(64), ExactContext()):
        if ctx.name == "exact" and "log" in text:
            continue  # the exact context has no logarithm
        with pytest.raises(UndefinedValue, match=what) as err:
            ctx.from_sympy(g, env={X1: ctx.convert(at)})
        assert "x1 = 0" in str(err.value) and "\n" not in str(err.value)


def test_written_target_keeps_its_value_where_defined():
    # the tree as written evaluates to the same number as the simplified one, away from the bad point
    for text, simple in [("x1/x1", "1"), ("exp(log(x1))", "x1"), ("x1^2/x1", "x1"), ("log(x1) - log(x1)", "0")]:
        for x in (F(1, 4), F(2, 3)):
            a, b = _ball(text, x, prec=128), _ball(simple, x, prec=128)
            assert a.overlaps(b) and a.rad() < flint.arb(2) ** -100


@pytest.mark.parametrize("text, expected", [
    ("sin(2*x1)", sympy.sin(2 * X1)),
    ("sin(x1+x2)/2", sympy.sin(X1 + X2) / 2),
    ("x1^3 - 2*x1*x2 + 1/7", X1**3 - 2 * X1 * X2 + sympy.Rational(1, 7)),
    ("min(x1, x2)", sympy.Min(X1, X2)),
    ("max(x1, 1 - x2)", sympy.Max(X1, 1 - X2)),
    ("abs(x1 - x2)", sympy.Abs(X1 - X2)),
    ("sin(2*(x1+x2)/sqrt(2))", sympy.sin(2 * (X1 + X2) / sympy.sqrt(2))),
    ("sqrt(x1^2 + x2^2)", sympy.sqrt(X1**2 + X2**2)),
    ("x1/(x2 + 1)", X1 / (X2 + 1)),
])
def test_common_targets_keep_their_simplified_form(text, expected):
    # no partial operation was lost: the target is SymPy's usual (simplified) expression
    assert parse_target(text, 2) == expected


def test_fp_context_is_not_judged():
    # float64 is evidence only: its 0.0 may be a rounded non-zero, so it never raises
    ctx = FPContext()
    v = ctx.from_sympy(parse_target("log(x1) - log(x1) + 1", 1), env={X1: 0.0})
    assert v != v or v in (float("inf"), float("-inf"))  # nan or inf, no exception


# ---------------------------------------------------------------- escalation stops on NaN

def test_escalation_stops_when_every_undecided_claim_is_nan():
    claim = Claim("T1", "a NaN claim", "x", Relation.LE)
    ok = Claim("T2", "an easy claim", "y", Relation.LE)
    seen = []

    def measure(ctx):
        seen.append(ctx.prec)
        with ctx.scope():
            nan = flint.arb("nan")
            return [claim.measured(nan, ctx.one), ok.measured(ctx.zero, ctx.one)]

    results, last, prec = escalate(measure, 64, 8192)
    assert seen == [64, 128]  # NaN at two successive precisions: no more doubling
    r = {x.id: x for x in results}
    assert r["T1"].verdict == "undecided" and NAN_NOTE in r["T1"].note
    assert r["T2"].verdict == "proved"


def test_escalation_still_doubles_for_a_claim_that_narrows():
    claim = Claim("T3", "decided at 512 bits", "x", Relation.LE)

    def measure(ctx):
        with ctx.scope():
            # a ball of radius 2^-prec/2 around 1 - 2^-300 against 1: decided once prec > ~300
            x = flint.arb(1) - flint.arb(2) ** -300
            return [claim.measured(flint.arb(x.mid(), flint.arb(2) ** (-ctx.prec // 2 + 100)), ctx.one)]

    results, _, prec = escalate(measure, 64, 8192)
    assert results[0].verdict == "proved" and prec > 128


def test_escalation_keeps_going_when_nan_clears():
    claim = Claim("T4", "NaN at low precision only", "x", Relation.LE)

    def measure(ctx):
        with ctx.scope():
            v = flint.arb("nan") if ctx.prec < 256 else ctx.zero
            return [claim.measured(v, ctx.one)]

    results, _, prec = escalate(measure, 128, 8192)
    assert results[0].verdict == "proved" and prec == 256


def test_escalation_remeasures_only_the_undecided_claims_when_it_can():
    easy = Claim("T5", "decided at once", "x", Relation.LE)
    hard = Claim("T6", "decided at 256 bits", "y", Relation.LE)
    calls = []

    def measure(ctx, only=None):
        calls.append((ctx.prec, None if only is None else set(only)))
        with ctx.scope():
            out = [] if only is not None and "T5" not in only else [easy.measured(ctx.zero, ctx.one)]
            hv = flint.arb(0, 1) if ctx.prec < 256 else ctx.zero  # [-1, 1] against 0, then exactly 0
            return out + [hard.measured(hv, ctx.zero)]

    results, last, prec = escalate(measure, 128, 1024)
    assert calls == [(128, None), (256, {"T6"})]
    assert [r.verdict for r in results] == ["proved", "proved"] and prec == 256
    assert [m.id for m in last] == ["T5", "T6"]  # the latest measurement of every claim
