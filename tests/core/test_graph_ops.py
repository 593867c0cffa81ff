"""Inclusion of every layer-graph operation (symbounds.core.activations, symbounds.core.graph) in
Arb balls and Arb Taylor models, against an independent 300-bit mpmath evaluation of the textbook
formula, at random points and over random boxes, including the extremes: GELU and tanh far out
(+-30), sigmoid and softplus saturated (+-40, +-800), LayerNorm of a nearly constant row."""

import random
from fractions import Fraction

import flint
import mpmath
import pytest

from symbounds.core import activations as act
from symbounds.core.contexts import BallContext, ExactContext, ExactUnsupported, FPContext, MPContext
from symbounds.core.graph import Graph, Node
from symbounds.core.taylor import TaylorContext

MP = mpmath.MPContext()
MP.prec = 300
PREC = 128
GELU_A = Fraction(44715, 10**6)

#: the textbook formulas, evaluated by mpmath at 300 bits (independent of the code under test)
REF = {
    "relu": lambda x: max(x, MP.mpf(0)),
    "leaky_relu": lambda x: x if x >= 0 else x / 100,
    "tanh": lambda x: MP.tanh(x),
    "erf": lambda x: MP.erf(x),
    "sigmoid": lambda x: 1 / (1 + MP.exp(-x)),
    "softplus": lambda x: MP.log(1 + MP.exp(x)),
    "exp": lambda x: MP.exp(x),
    "gelu": lambda x: x * MP.ncdf(x),  # x Phi(x): another formula than x/2 (1 + erf(x/sqrt 2))
    "gelu_tanh": lambda x: x / 2 * (1 + MP.tanh(MP.sqrt(2 / MP.pi) * (x + MP.mpf(44715) / 10**6 * x**3))),
}

CALL = {
    "relu": act.relu, "tanh": act.tanh, "erf": act.erf, "sigmoid": act.sigmoid, "softplus": act.softplus,
    "exp": act.exp, "gelu": act.gelu, "gelu_tanh": act.gelu_tanh,
    "leaky_relu": lambda ctx, x: act.leaky_relu(ctx, x, flint.fmpq(1, 100)),
}

EXTREMES = [Fraction(v) for v in (-800, -40, -30, -5, -1, Fraction(-3, 4), 0, Fraction(1, 3), 1, 5, 30, 40, 800)]


def mpq(q: Fraction):
    return MP.mpf(q.numerator) / q.denominator


def exact(v) -> Fraction:
    """The exact value of a 300-bit mpf."""
    sign, man, exp, _ = MP.mpf(v)._mpf_
    man = -int(man) if sign else int(man)
    return Fraction(man * 2 ** int(exp)) if exp >= 0 else Fraction(man, 2 ** int(-exp))


def contains(y: flint.arb, v) -> bool:
    """``v`` (300 bits) in the ball ``y``, up to the reference's own rounding (2^-280 relative);
    compared as exact Arb endpoints (a saturated value such as e^-10^7 would be a Fraction of
    millions of digits)."""
    sign, man, exp, _ = MP.mpf(v)._mpf_
    old = flint.ctx.prec
    flint.ctx.prec = 4000
    try:
        q = flint.arb(-int(man) if sign else int(man)) * flint.arb(2) ** int(exp)
        slack = abs(q) * flint.arb(2) ** -280 + flint.arb(2) ** -1000
        lo, hi = flint.arb(y.lower()), flint.arb(y.upper())
        return bool(lo <= q + slack) and bool(q - slack <= hi)
    finally:
        flint.ctx.prec = old


def points(n, rng, lo=-8, hi=8):
    return [Fraction(rng.randint(lo * 1000, hi * 1000), 1000) + Fraction(rng.randint(0, 999), 10**7) for _ in range(n)]


def skip_huge(op, x):
    return op == "exp" and abs(x) > 100  # e^800 is fine in balls, but the test keeps it readable


@pytest.mark.parametrize("op", sorted(REF))
def test_ball_at_points_contains_the_300_bit_value(op):
    ball = BallContext(PREC)
    rng = random.Random(hash(op) % 1000)
    for x in EXTREMES + points(40, rng):
        with ball.scope():
            y = CALL[op](ball, ball.convert(x))
        assert contains(y, REF[op](mpq(x))), (op, x, y)
        if op not in ("relu", "leaky_relu"):
            assert y.rad() <= abs(y.mid()) * flint.arb(2) ** -100 + flint.arb(2) ** -100, (op, x, y)


@pytest.mark.parametrize("op", sorted(REF))
def test_ball_over_an_interval_contains_every_sampled_value(op):
    ball = BallContext(PREC)
    rng = random.Random(7 + len(op))
    for c in EXTREMES + points(15, rng):
        for w in (Fraction(1, 10**6), Fraction(1, 10), Fraction(2)):
            a, b = c - w, c + w
            with ball.scope():
                y = CALL[op](ball, ball.interval(a, b))
            for t in [a, b, c] + [a + (b - a) * Fraction(rng.randint(0, 1000), 1000) for _ in range(12)]:
                assert contains(y, REF[op](mpq(t))), (op, a, b, t)


def _tm_at(tm, delta):
    """The ball of a Taylor model at the offset ``delta`` from its centre (exact rationals)."""
    v = tm.c
    if tm.g is not None:
        for gi, di in zip(tm.g, delta):
            v = v + gi * flint.arb(flint.fmpq(di.numerator, di.denominator))
    if tm.r is not None:
        v = v + flint.arb(0, tm.r)
    return v


@pytest.mark.parametrize("hull_factor", [None, act.HULL_FACTOR])
@pytest.mark.parametrize("op", sorted(REF))
def test_taylor_model_contains_the_value_at_every_sampled_point(op, hull_factor):
    """``f(u)`` for a non-linear model ``u = a x1 + b x2 + x1 x2`` (gradient and remainder): the model
    of the result, evaluated at each sampled point's offset, contains the 300-bit value there; with
    the model kept, and with it replaced by its hull where that is narrower (the search's rule)."""
    rng = random.Random(11 + len(op))
    for c in EXTREMES + points(10, rng):
        for h in (Fraction(1, 10**5), Fraction(1, 20), Fraction(1, 2), Fraction(4)):
            x0 = [c, Fraction(rng.randint(-1000, 1000), 1000)]
            hs = [h, h / 3]
            ctx = TaylorContext(PREC, x0, hs)
            ctx.hull_factor = hull_factor
            with ctx.scope():
                x1, x2 = ctx.inputs()
                u = x1 + x2 * ctx.convert(Fraction(1, 2)) + (x1 - ctx.convert(c)) * x2
                y = CALL[op](ctx, u)
                rng_ball = y.range()
                for _ in range(15):
                    d = [hi * Fraction(rng.randint(-1000, 1000), 1000) for hi in hs]
                    p = [x0[0] + d[0], x0[1] + d[1]]
                    ut = p[0] + p[1] / 2 + (p[0] - c) * p[1]
                    ref = REF[op](mpq(ut))
                    assert contains(_tm_at(y, d), ref), (op, c, h, d)
                    assert contains(rng_ball, ref), (op, c, h, d)


@pytest.mark.parametrize("op", ["tanh", "gelu", "gelu_tanh", "sigmoid", "softplus", "erf"])
def test_taylor_model_is_first_order_tight_on_small_boxes(op):
    """On a box of half-width h the model's range is the true range up to O(h^2): its width is
    within a factor 1.01 (plus 1e-20) of |f'| 2h (the first-order width), far out as well."""
    for c in (Fraction(-30), Fraction(-1), Fraction(1, 3), Fraction(2), Fraction(30)):
        h = Fraction(1, 10**4)
        ctx = TaylorContext(PREC, [c], [h])
        with ctx.scope():
            y = CALL[op](ctx, ctx.inputs()[0])
            lo, hi = ctx.ball.to_fraction_bounds(y.range())
        true_lo = min(exact(REF[op](mpq(c - h))), exact(REF[op](mpq(c + h))))
        true_hi = max(exact(REF[op](mpq(c - h))), exact(REF[op](mpq(c + h))))
        assert lo <= true_lo and hi >= true_hi
        assert hi - lo <= (true_hi - true_lo) * Fraction(101, 100) + Fraction(1, 10**20), (op, c)


def test_gelu_unit_minimum_is_a_lower_bound_and_close():
    """``min_t t (1 + erf t)/2`` found by mpmath (the root of the derivative, 300 bits): the
    code's bound lies below it and within 1/100 of it."""
    t = MP.findroot(lambda t: (1 + MP.erf(t)) / 2 + t * MP.exp(-t * t) / MP.sqrt(MP.pi), -0.5)
    true_min = t * (1 + MP.erf(t)) / 2
    bound = act.gelu_unit_min()
    assert bound.rad() == 0
    m = exact(true_min)
    assert bool(bound <= flint.arb(flint.fmpq(m.numerator, m.denominator)))
    assert bool(bound >= flint.arb(flint.fmpq(m.numerator, m.denominator)) - flint.arb(1) / 100), (bound, true_min)


@pytest.mark.parametrize("divisor", [None, Fraction(6369051672525773, 4503599627370496)])
def test_gelu_over_a_wide_interval_is_its_quasi_convex_hull(divisor):
    """Over ``[a, b]`` straddling GELU's minimum the ball is within 0.01 of the true range (the
    minimum ``~ -0.17`` and the larger end, from mpmath), not the product of ``x`` and ``Phi``'s
    ranges (``[-4, 4]`` over ``[-4, 4]``); and it contains every sampled value."""
    ball = BallContext(PREC)
    s = MP.sqrt(2) if divisor is None else mpq(divisor)
    f = lambda x: x * (1 + MP.erf(x / s)) / 2
    dv = None if divisor is None else flint.fmpq(divisor.numerator, divisor.denominator)
    for a, b in [(Fraction(-4), Fraction(4)), (Fraction(-3), Fraction(1, 2)), (Fraction(-9), Fraction(-2)),
                 (Fraction(1, 4), Fraction(6)), (Fraction(-1), Fraction(-1, 2))]:
        with ball.scope():
            y = act.gelu(ball, ball.interval(a, b), divisor=dv)
        xs = [a + (b - a) * Fraction(k, 400) for k in range(401)]
        vals = [f(mpq(x)) for x in xs]
        for v in vals:
            assert contains(y, v), (a, b, v)
        true_lo = min(vals)
        if a < 0 < b or (a < -1 < b):
            tm = MP.findroot(lambda x: (1 + MP.erf(x / s)) / 2 + x * MP.exp(-(x / s) ** 2) / (s * MP.sqrt(MP.pi)), -0.7)
            if mpq(a) <= tm <= mpq(b):
                true_lo = min(true_lo, f(tm))
        width = float(y.upper() - y.lower())
        assert width <= float(max(vals) - true_lo) + 0.01, (a, b, y)


def test_search_rule_takes_the_gelu_hull_where_the_model_is_wide():
    """GELU of a model over a box of half-width 4 around 0: with the search's rule the result is
    within 0.05 of the true range ``[-0.17, 4]``; the model alone is wider than twice that (so the
    rule is what makes the difference); both contain the sampled values."""
    widths = {}
    for factor in (None, act.HULL_FACTOR):
        ctx = TaylorContext(PREC, [Fraction(0)], [Fraction(4)])
        ctx.hull_factor = factor
        with ctx.scope():
            y = act.gelu(ctx, ctx.inputs()[0])
            r = y.range()
        for k in range(-40, 41):
            x = Fraction(k, 10)
            assert contains(r, REF["gelu"](mpq(x)))
        widths[factor] = float(r.upper() - r.lower())
    true_width = 4 - float(min(REF["gelu"](mpq(Fraction(k, 1000))) for k in range(-1000, 1)))
    assert widths[act.HULL_FACTOR] <= true_width + 0.05, widths
    assert widths[None] > 2 * true_width, widths


def test_exact_context_refuses_transcendental_ops_and_keeps_relu_exact():
    ex = ExactContext()
    for op in ("tanh", "erf", "sigmoid", "softplus", "gelu", "gelu_tanh"):
        with pytest.raises(ExactUnsupported):
            CALL[op](ex, ex.convert(Fraction(1, 3)))
    assert CALL["leaky_relu"](ex, ex.convert(Fraction(-3))) == flint.fmpq(-3, 100)
    assert CALL["relu"](ex, ex.convert(Fraction(-3))) == 0


@pytest.mark.parametrize("op", sorted(REF))
def test_mp_and_fp_contexts_agree_with_the_reference(op):
    mp, fp = MPContext(200), FPContext()
    for x in [Fraction(-5), Fraction(-1, 3), Fraction(0), Fraction(7, 4), Fraction(30)]:
        ref = REF[op](mpq(x))
        assert abs(MP.mpf(CALL[op](mp, mp.convert(x))) - ref) <= MP.mpf(2) ** -190 * max(1, abs(ref))
        assert abs(CALL[op](fp, fp.convert(x)) - float(ref)) <= 1e-14 * max(1.0, abs(float(ref)))


# ------------------------------------------------------------------------------------------
# normalisations (one-node graphs)


def _one_node(op, width, params):
    return Graph("x", 1, width, (Node("y", op, ("x",), params),), "y", {"x": width, "y": width})


def _ref_layer_norm(xs, eps, w, b):
    n = len(xs)
    mu = sum(xs) / n
    var = sum((x - mu) ** 2 for x in xs) / n
    return [(x - mu) / MP.sqrt(var + eps) * wi + bi for x, wi, bi in zip(xs, w, b)]


def _ref_rms_norm(xs, eps, w):
    n = len(xs)
    ms = sum(x * x for x in xs) / n
    return [x / MP.sqrt(ms + eps) * wi for x, wi in zip(xs, w)]


def _norm_case(rng, op, n, spread, base):
    eps = Fraction(1, 10**5)
    w = tuple(Fraction(rng.randint(-2000, 2000), 1000) for _ in range(n))
    b = tuple(Fraction(rng.randint(-2000, 2000), 1000) for _ in range(n))
    params = {"eps": eps, "weight": w}
    if op == "layer_norm":
        params["bias"] = b
    g = _one_node(op, n, params)
    xs = [base + spread * Fraction(rng.randint(-10**6, 10**6), 10**6) for _ in range(n)]

    def ref(pt):
        v = [mpq(t) for t in pt]
        if op == "layer_norm":
            return _ref_layer_norm(v, mpq(eps), [mpq(q) for q in w], [mpq(q) for q in b])
        return _ref_rms_norm(v, mpq(eps), [mpq(q) for q in w])

    return g, xs, ref


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("spread,base", [(Fraction(3), Fraction(0)), (Fraction(1, 10**8), Fraction(1)),
                                         (Fraction(0), Fraction(5)), (Fraction(1, 10**3), Fraction(-40))])
def test_normalisation_in_balls_and_taylor_models(op, spread, base):
    """Balls at a point and over a box, Taylor models over a box: each output contains the 300-bit
    value at every sampled point; a nearly constant row (spread 1e-8, and exactly constant) included."""
    rng = random.Random(int(spread * 10**9) + len(op))
    for n in (1, 3, 6):
        g, xs, ref = _norm_case(rng, op, n, spread, base)
        ball = BallContext(PREC)
        out = g.evaluate(ball, [ball.convert(x) for x in xs])
        for y, r in zip(out, ref(xs)):
            assert contains(y, r), (op, n, xs)
        h = max(spread, Fraction(1, 10**6)) / 10
        lo, hi = [x - h for x in xs], [x + h for x in xs]
        with ball.scope():
            out_b = g.evaluate(ball, [ball.interval(a, c) for a, c in zip(lo, hi)])
        ctx = TaylorContext(PREC, xs, [h] * n)
        with ctx.scope():
            out_t = g.evaluate(ctx, ctx.inputs())
        for _ in range(10):
            d = [h * Fraction(rng.randint(-1000, 1000), 1000) for _ in range(n)]
            pt = [x + di for x, di in zip(xs, d)]
            for k, r in enumerate(ref(pt)):
                assert contains(out_b[k], r), (op, n, k)
                assert contains(_tm_at(out_t[k], d), r), (op, n, k)


def test_layer_norm_of_a_nearly_constant_row_stays_finite_and_narrow():
    """Rows 1 + 1e-9 u over a box of half-width 1e-12: the deviations cancel in the Taylor models,
    so the enclosure is finite and its width a small multiple of the true spread of the outputs."""
    rng = random.Random(3)
    n = 4
    g, xs, ref = _norm_case(rng, "layer_norm", n, Fraction(1, 10**9), Fraction(1))
    h = Fraction(1, 10**12)
    ctx = TaylorContext(PREC, xs, [h] * n)
    with ctx.scope():
        out = g.evaluate(ctx, ctx.inputs())
        widths = [ctx.ball.to_fraction_bounds(y.range()) for y in out]
    for lo, hi in widths:
        assert hi - lo < Fraction(1, 10)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_normalisation_in_mp_and_fp_agrees_with_the_reference(op):
    rng = random.Random(17)
    g, xs, ref = _norm_case(rng, op, 5, Fraction(2), Fraction(1, 3))
    mp, fp = MPContext(200), FPContext()
    for got, r in zip(g.evaluate(mp, [mp.convert(x) for x in xs]), ref(xs)):
        assert abs(MP.mpf(got) - r) <= MP.mpf(2) ** -180 * max(1, abs(r))
    for got, r in zip(g.evaluate(fp, [fp.convert(x) for x in xs]), ref(xs)):
        assert abs(got - float(r)) <= 1e-13 * max(1.0, abs(float(r)))

