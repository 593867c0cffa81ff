"""Activation functions and normalisations of a layer graph, in every scalar context.

Each function takes the context first, like the rest of the engine (``tanh(ctx, x)``):

=================  =====================================================================
exact              ReLU, leaky ReLU (piecewise linear: exact); the others raise
                   :class:`~symbounds.core.contexts.ExactUnsupported`
ball (Arb)         Arb's own ``tanh``, ``erf``, ``exp``, ``log1p``, ``rsqrt``: every result
                   encloses the value at every point of the argument's ball
taylor             a first-order Taylor model ``f(c) + f'(c) <g, delta> + [-r', r']`` of a
                   Taylor model ``a = c + <g, delta> + [-r, r]`` (see :func:`taylor_unary`)
mp, fp             mpmath / ``math`` (evidence, never a proof)
=================  =====================================================================

**The Taylor model of a unary function.**  Write ``R`` for a ball enclosing every value of ``a``
over the box and ``dev`` for a bound of ``|a - c|``.  For a value ``v = c* + u`` of ``a``
(``c*`` a point of the ball ``c``, ``u`` in ``<g, delta> + [-r, r]``), Taylor's theorem with the
mean-value remainder gives, for some ``xi`` between ``c*`` and ``v`` (so in ``R``)::

    f(v) = f(c*) + f'(c*) u + (f'(xi) - f'(c*)) u                      (first form)
         = f(c*) + f'(c*) u + f''(xi) u^2 / 2                          (second form)

so ``f(v)`` lies in ``f(c) + f'(c) <g, delta> + [-r', r']`` with
``r' = |f'(c)| r + min(|f'(R) - f'(c)| dev, |f''(R)| dev^2 / 2)`` (the second form only where
``f''`` is given).  Every ball (``f(c)``, ``f'(c)``, ``f'(R)``) is Arb's enclosure, so the
rounding is carried along.  A function defined on ``[lo, inf)`` only (``1/sqrt`` of a variance
plus ``eps``) is given ``R`` clipped to ``[lo, inf)`` (the true values lie there by
construction); when the centre ball itself reaches below ``lo`` the model is the constant hull
``f(R)``.

GELU is ``x/2 (1 + erf(x/s))`` with ``s = sqrt 2`` (or the divisor the file gives: an exported
graph divides by float64's ``sqrt 2``), its tanh form ``x/2 (1 + tanh(k (x + a x^3)))`` with
``k = sqrt(2/pi)``, ``a = 0.044715`` unless given.
"""

from __future__ import annotations

import math

import flint

from .contexts import BallContext, ExactContext, ExactUnsupported, FPContext, MPContext
from .taylor import TM, TaylorContext

__all__ = ["relu", "leaky_relu", "tanh", "erf", "sigmoid", "softplus", "exp", "gelu", "gelu_tanh",
           "rsqrt_from", "square_ball", "clip_below", "taylor_unary", "gelu_unit_min", "GELU_A",
           "HULL_FACTOR"]

#: a unary function's Taylor model is replaced by its constant hull where the model's range is
#: more than this many times wider, in a Taylor context whose ``hull_factor`` is set (the float64
#: pass's ``float_graph.HULL_FACTOR``)
HULL_FACTOR = 2

#: the cubic coefficient of the tanh form of GELU (PyTorch's and the original paper's)
GELU_A = flint.fmpq(44715, 1000000)


# ------------------------------------------------------------------------------------------
# the Taylor model of a unary function


def taylor_unary(a: TM, f, df, d2f=None, domain_lo=None, hull=None) -> TM:
    """The model of ``f(a)`` (see the module docstring); ``f``, ``df``, ``d2f`` map an Arb ball to
    a ball enclosing ``f``, ``f'``, ``f''`` over it; ``domain_lo`` an exact lower bound of ``a``'s
    true values where ``f`` is defined on ``[domain_lo, inf)`` only; ``hull`` maps a ball to a
    ball enclosing ``f`` over it, narrower than ``f`` of it (GELU's quasi-convex hull; ``f``
    itself unless given).  Where the context's ``hull_factor`` is set (the box search's Arb pass:
    :data:`HULL_FACTOR`, as the float64 pass does) the model is replaced by the constant hull
    where its range is that many times wider (a wide argument: the remainder dominates).  A
    constant hull loses the model's correlation with the argument, so contexts whose later steps
    need it (``f(x) - s x`` in the linear relaxations) leave it unset: the model is kept."""
    ctx = a.ctx
    hull = f if hull is None else hull
    with ctx.scope():
        if a.is_const() and domain_lo is None:
            return TM(ctx, f(a.c))
        R = a.range()
        if domain_lo is not None:
            lo = _down(domain_lo)
            R = clip_below(R, lo)
            if not (a.c.lower() >= lo) or a.is_const():
                return ctx.hull(hull(R))
        D = df(a.c)
        dev = a.dev()
        rem = abs(df(R) - D) * dev
        if d2f is not None:
            rem2 = abs(d2f(R)) * dev * dev / 2
            if rem2.upper() < rem.upper():
                rem = rem2
        if a.r is not None:
            rem = rem + abs(D) * a.r
        g = None if a.g is None else tuple(x * D for x in a.g)
        out = TM(ctx, f(a.c), g, _up(rem))
        rng = out.range()
        if not rng.is_finite():
            return ctx.hull(hull(R))
        factor = getattr(ctx, "hull_factor", None)
        if factor is not None:
            H = hull(R)
            if not rng.rad() <= factor * H.rad():
                return ctx.hull(H)
        return out


def square_ball(x: flint.arb) -> flint.arb:
    """A ball of ``x^2`` over the ball ``x``: the hull of ``[m^2, M^2]`` with ``m <= |x| <= M``
    (Arb's ``abs_lower``, ``abs_upper``: 0 and the larger end for a ball around 0), so its lower
    end is ``m^2`` up to the hull's rounding.  (Arb's ``x * x`` is a product of two independent
    balls, and ``abs(x)`` of a ball around 0 is a mid-radius ball: around 0 both reach below 0,
    and ``e^(-x*x)`` then reaches ``e^(rad^2)``.)"""
    m, M = x.abs_lower(), x.abs_upper()
    return (m * m).union(M * M)


def clip_below(t: flint.arb, lo: flint.arb) -> flint.arb:
    """The hull of ``[max(l, lo), max(u, lo)]`` for ``t = [l, u]`` and an exact ``lo`` (up to the
    hull's rounding; Arb's ``max`` of two balls is a mid-radius ball that reaches far below ``lo``,
    and below 0)."""
    a, b = t.lower(), t.upper()
    a = lo if a < lo else a
    b = lo if b < lo else b
    return a.union(b)


def _increasing(f):
    """``f`` over a ball, for an increasing ``f``: Arb's own enclosure, or, where that is not finite
    (Arb's ``tanh``, ``erf`` and ``1/(1 + e^-x)`` of a ball of radius ``10^7`` are NaN), the hull of
    ``f`` at the ball's two ends, which encloses ``f`` over it by monotonicity."""
    def g(b: flint.arb) -> flint.arb:
        r = f(b)
        if r.is_finite() or not b.is_finite():
            return r
        return f(b.lower()).union(f(b.upper()))
    return g


def _bounded(f, lo, hi):
    """``f`` over a ball, or, where Arb's enclosure is not finite, the ball ``[lo, hi]`` that
    bounds ``f`` on the whole line (exact rationals)."""
    def g(b: flint.arb) -> flint.arb:
        r = f(b)
        return r if r.is_finite() else flint.arb(flint.fmpq(*lo)).union(flint.arb(flint.fmpq(*hi)))
    return g


def _up(x: flint.arb) -> flint.arb:
    """An exact upper bound (a radius-0 ball) of a nonnegative quantity."""
    return flint.arb(x.upper())


def _down(q) -> flint.arb:
    """An exact ball at or below the rational ``q`` (``arb(q)`` alone rounds to nearest)."""
    return flint.arb(flint.arb(q).lower())


# ------------------------------------------------------------------------------------------
# one function, every context


def _dispatch(ctx, x, name, ball, tm, mp, fp):
    if isinstance(ctx, TaylorContext):
        return tm(ctx.convert(x))
    if isinstance(ctx, BallContext):
        with ctx.scope():
            return ball(x)
    if isinstance(ctx, MPContext):
        return mp(ctx.mp, x)
    if isinstance(ctx, FPContext):
        return fp(x)
    if isinstance(ctx, ExactContext):
        raise ExactUnsupported(f"the exact context cannot evaluate {name}")
    raise TypeError(f"the {ctx.name} context has no {name}")


def relu(ctx, x):
    """``max(0, x)``."""
    return ctx.relu(x)


def leaky_relu(ctx, x, alpha):
    """``x`` for ``x >= 0``, ``alpha x`` below: ``alpha x + (1 - alpha) relu(x)`` for every
    ``alpha`` (exact in every context, the ReLU's own enclosure elsewhere)."""
    al = ctx.convert(alpha)
    return al * x + (ctx.one - al) * ctx.relu(x)


# --- tanh -------------------------------------------------------------------------------------

def _tanh_d2_arb(x):
    s = x.sech()
    return -2 * x.tanh() * s * s


#: ``tanh'' = -2 tanh sech^2``, of absolute value at most ``4 / (3 sqrt 3) < 0.7699``
_tanh_d2 = _bounded(_tanh_d2_arb, (-7699, 10000), (7699, 10000))
_tanh_ball = _increasing(lambda b: b.tanh())


def _fp_tanh(x):
    return math.tanh(x) if not math.isnan(x) else math.nan


def tanh(ctx, x):
    """``tanh x``; ``tanh' = sech^2``, ``tanh'' = -2 tanh sech^2``."""
    return _dispatch(ctx, x, "tanh", _tanh_ball, lambda a: taylor_unary(a, _tanh_ball, _sech2, _tanh_d2),
                     lambda mp, v: mp.tanh(v), _fp_tanh)


def _sech2(x):
    s = x.sech()
    if s.is_finite() or not x.is_finite():
        return square_ball(s)
    m, M = x.abs_lower(), x.abs_upper()  # sech^2 is even and decreasing in |x|: between its values there
    return square_ball(M.sech()).union(square_ball(m.sech()))


# --- erf --------------------------------------------------------------------------------------

def _erf_d(x):
    return 2 * (-square_ball(x)).exp() / flint.arb.pi().sqrt()


def _erf_d2(x):
    return -2 * x * _erf_d(x)


_erf_ball = _increasing(lambda b: b.erf())


def erf(ctx, x):
    """``erf x``; ``erf' = 2/sqrt(pi) e^(-x^2)``, ``erf'' = -2 x erf'``."""
    return _dispatch(ctx, x, "erf", _erf_ball, lambda a: taylor_unary(a, _erf_ball, _erf_d, _erf_d2),
                     lambda mp, v: mp.erf(v), lambda v: math.erf(v) if not math.isnan(v) else math.nan)


# --- sigmoid ----------------------------------------------------------------------------------

_sig = _increasing(lambda x: 1 / (1 + (-x).exp()))


def _sig_d_arb(x):
    return _sig(x) * _sig(-x)


def _sig_d2_arb(x):
    s = _sig(x)
    return s * _sig(-x) * (1 - 2 * s)


#: ``sigma' = sigma(x) sigma(-x)`` lies in ``[0, 1/4]``; ``|sigma''| <= 1/(6 sqrt 3) < 1/10``
_sig_d = _bounded(_sig_d_arb, (0, 1), (1, 4))
_sig_d2 = _bounded(_sig_d2_arb, (-1, 10), (1, 10))


def _fp_sigmoid(v):
    if math.isnan(v):
        return math.nan
    if v >= 0:
        return 1.0 / (1.0 + math.exp(-v))
    e = math.exp(v)
    return e / (1.0 + e)


def sigmoid(ctx, x):
    """``1 / (1 + e^-x)``; ``sigma' = sigma(x) sigma(-x)``, ``sigma'' = sigma' (1 - 2 sigma)``."""
    return _dispatch(ctx, x, "sigmoid", _sig, lambda a: taylor_unary(a, _sig, _sig_d, _sig_d2),
                     lambda mp, v: 1 / (1 + mp.exp(-v)), _fp_sigmoid)


# --- softplus ---------------------------------------------------------------------------------

_softplus = _increasing(lambda x: x.exp().log1p())


def _fp_softplus(v):
    if math.isnan(v):
        return math.nan
    return v + math.log1p(math.exp(-v)) if v > 0 else math.log1p(math.exp(v))


def softplus(ctx, x):
    """``log(1 + e^x)``; its derivative is the sigmoid, the second ``sigma(x) sigma(-x)``."""
    return _dispatch(ctx, x, "softplus", _softplus, lambda a: taylor_unary(a, _softplus, _sig, _sig_d),
                     lambda mp, v: mp.log1p(mp.exp(v)), _fp_softplus)


# --- exp --------------------------------------------------------------------------------------

def exp(ctx, x):
    """``e^x``: the context's own (Taylor models: the one-sided remainder of :mod:`taylor`)."""
    return ctx.exp(x)


# --- GELU -------------------------------------------------------------------------------------

def _gelu_f(s):
    return lambda x: x * (1 + _erf_ball(x / s)) / 2


def _gelu_d(s):
    k = 1 / (s * flint.arb.pi().sqrt())
    return lambda x: (1 + _erf_ball(x / s)) / 2 + x * (-square_ball(x / s)).exp() * k


def _gelu_d2(s):
    k = 1 / (s * flint.arb.pi().sqrt())
    return lambda x: (-square_ball(x / s)).exp() * k * (2 - 2 * square_ball(x / s))


def gelu_unit_min() -> flint.arb:
    """An exact lower bound (a radius-0 ball) of ``min_t t (1 + erf t) / 2`` (about -0.1200, at
    ``t = -0.53``).  ``h(t) = t (1 + erf t)/2`` has ``h'(t) = (1 + erf t)/2 + t e^(-t^2)/sqrt(pi)``,
    negative at ``t = -1`` and ``1/2`` at ``0``: one minimum, in ``(-1, 0)``, bounded below by 256
    Arb balls of width 1/256 covering ``[-1, 0]`` at 100 bits."""
    global _GELU_UNIT_MIN
    if _GELU_UNIT_MIN is None:
        with flint.ctx.workprec(100):
            low = None
            for i in range(256):
                t = flint.arb(flint.fmpq(-256 + i, 256)).union(flint.arb(flint.fmpq(-255 + i, 256)))
                v = (t * (1 + t.erf()) / 2).lower()
                low = v if low is None or v < low else low
            _GELU_UNIT_MIN = flint.arb(low)
    return _GELU_UNIT_MIN


_GELU_UNIT_MIN = None


def _gelu_hull(s):
    """GELU over a ball ``[lo, hi]``, ``f(x) = s h(x/s)`` with ``s > 0``: ``f`` is quasi-convex
    (falling for ``x <= -s``, rising for ``x >= 0``, its one minimum between), so
    ``f <= max(f(lo), f(hi))``, ``f >= f(lo)`` where ``lo >= 0``, ``f >= f(hi)`` where ``hi <= -s``
    and ``f >= min(f(lo), f(hi), s min h)`` otherwise; the ends' values are Arb balls at the exact
    ends.  (Arb's ``x (1 + erf(x/s))/2`` of a wide ball multiplies two independent ranges: over
    ``[-4, 4]`` it is ``[-4, 4]``, the hull ``[-0.17, 4]``.)"""
    f = _gelu_f(s)

    def hull(b: flint.arb) -> flint.arb:
        if not b.is_finite():
            return f(b)
        lo, hi = b.lower(), b.upper()
        flo, fhi = f(lo), f(hi)
        top = flo.upper() if flo.upper() > fhi.upper() else fhi.upper()
        if lo >= 0:
            bottom = flo.lower()
        elif hi <= -s:
            bottom = fhi.lower()
        else:
            bottom = flo.lower() if flo.lower() < fhi.lower() else fhi.lower()
            m = (s.upper() * gelu_unit_min()).lower()
            bottom = m if m < bottom else bottom
        return bottom.union(top)
    return hull


def gelu(ctx, x, divisor=None):
    """``x/2 (1 + erf(x / s))``, ``s = sqrt 2`` unless ``divisor`` (an exact rational) is given;
    ``f' = (1 + erf(x/s))/2 + x e^(-x^2/s^2) / (s sqrt pi)``,
    ``f'' = e^(-x^2/s^2) (2 - 2 x^2/s^2) / (s sqrt pi)``."""
    def sb():
        return flint.arb(2).sqrt() if divisor is None else flint.arb(divisor)

    def ball(b):
        s = sb()
        v = _gelu_f(s)(b)
        if b.rad() == 0 or not b.is_finite():
            return v
        h = _gelu_hull(s)(b)
        return h if h.rad() < v.rad() else v

    def tm(a):
        with a.ctx.scope():
            s = sb()
            return taylor_unary(a, _gelu_f(s), _gelu_d(s), _gelu_d2(s), hull=_gelu_hull(s))

    def mp(m, v):
        s = m.sqrt(2) if divisor is None else m.mpf(int(divisor.p)) / int(divisor.q)
        return v * (1 + m.erf(v / s)) / 2

    def fp(v):
        s = math.sqrt(2) if divisor is None else float(divisor.p) / float(divisor.q)
        return v * (1 + math.erf(v / s)) / 2 if not math.isnan(v) else math.nan

    return _dispatch(ctx, x, "GELU", ball, tm, mp, fp)


def _gelu_tanh_f(k, a):
    return lambda x: x * (1 + _tanh_ball(k * (x + a * x * x * x))) / 2


def _gelu_tanh_d(k, a):
    def d(x):
        t = _tanh_ball(k * (x + a * x * x * x))
        return (1 + t) / 2 + x * (1 - square_ball(t)) * k * (1 + 3 * a * square_ball(x)) / 2
    return d


def gelu_tanh(ctx, x, k=None, a=None):
    """``x/2 (1 + tanh(k (x + a x^3)))``, ``k = sqrt(2/pi)`` and ``a = 0.044715`` unless given
    (exact rationals); ``f' = (1 + t)/2 + x (1 - t^2) k (1 + 3 a x^2) / 2``, ``t`` the tanh."""
    a = GELU_A if a is None else a

    def consts():
        kb = (2 / flint.arb.pi()).sqrt() if k is None else flint.arb(k)
        return kb, flint.arb(a)

    def ball(b):
        return _gelu_tanh_f(*consts())(b)

    def tm(m):
        with m.ctx.scope():
            kb, ab = consts()
            return taylor_unary(m, _gelu_tanh_f(kb, ab), _gelu_tanh_d(kb, ab))

    def mp(m, v):
        kk = m.sqrt(2 / m.pi) if k is None else m.mpf(int(k.p)) / int(k.q)
        aa = m.mpf(int(a.p)) / int(a.q)
        return v * (1 + m.tanh(kk * (v + aa * v ** 3))) / 2

    def fp(v):
        kk = math.sqrt(2 / math.pi) if k is None else float(k.p) / float(k.q)
        aa = float(a.p) / float(a.q)
        try:
            return v * (1 + math.tanh(kk * (v + aa * v ** 3))) / 2
        except OverflowError:
            return v if v > 0 else -0.0

    return _dispatch(ctx, x, "GELU", ball, tm, mp, fp)


# --- 1/sqrt for the normalisations -------------------------------------------------------------

def _rsqrt_d(x):
    return -x.rsqrt() / (2 * x)


def _rsqrt_d2(x):
    return 3 * x.rsqrt() / (4 * x * x)


def rsqrt_from(ctx, t, lo):
    """``1/sqrt(t)`` for a quantity ``t`` known to be ``>= lo > 0`` by construction (a variance
    plus ``eps``): balls and Taylor ranges are clipped to ``[lo, inf)`` before the root;
    ``(t^-1/2)' = -t^-3/2 / 2``, ``'' = 3 t^-5/2 / 4``.  Exact where ``t`` is a square."""
    if isinstance(ctx, TaylorContext):
        return taylor_unary(ctx.convert(t), lambda b: b.rsqrt(), _rsqrt_d, _rsqrt_d2, domain_lo=lo)
    if isinstance(ctx, BallContext):
        with ctx.scope():
            return clip_below(t, _down(lo)).rsqrt()
    if isinstance(ctx, ExactContext):
        return 1 / ctx.sqrt(t)
    return 1 / ctx.sqrt(t)
