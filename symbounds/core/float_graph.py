"""A layer graph over many boxes at once: first-order Taylor models in outward-rounded float64.

The float box pass of :mod:`symbounds.core.float_boxes`, for the layer graphs of
:mod:`symbounds.core.graph`.  Every tensor of shape ``[tokens, width]`` is an :class:`FTM` whose
arrays are ``c`` and ``r`` of shape ``(B, width, tokens)`` and ``G`` of shape
``(B, d, width, tokens)`` (``B`` boxes, ``d = tokens * in_width`` inputs): over the box
``x0 +- h`` each entry is ``c + <G, delta> + [-r, r]`` for every ``|delta_i| <= h_i``.  The
arithmetic is :class:`symbounds.core.float_boxes.Boxes`' (affine maps, sums, products, ``exp``,
ReLU), every float operation rounded outward with the a-priori bounds of
:mod:`symbounds.core.outward` (``up``, ``down``, ``err``, the matrix-product bound
``gamma_n |A||B| + n eta``), so each model encloses the exact graph on every box of the batch.

The operations (each rule's formula is in its function's docstring):

* exact in the reals, rounded outward: ``affine`` (``W`` and ``b`` as float balls, any widths),
  ``add``, ``add_constant``, ``mul_constant``, ``div_constant`` (times the ball of ``1/c``),
  ``relu`` (:meth:`Boxes.relu`: the model where the sign is decided, else the hull ``[0, hi]``),
  ``leaky_relu`` as ``alpha x + (1 - alpha) relu(x)`` (an identity for every ``alpha``),
  ``slice``, ``concat``, ``select_tokens`` (moves), ``mean_tokens`` (a sum times the ball of
  ``1/L``);
* smooth ``f`` by the Taylor rule of :func:`_unary` (value and derivative at the centre with
  proven float bounds, a global bound of ``f''`` or of the variation of ``f'``), met with the hull
  of ``f`` at the ends of the range where ``f`` is monotone: ``exp``, ``sigmoid``, ``tanh``,
  ``softplus``, ``erf``; ``gelu`` (``x/2 (1 + erf(x/s))``) by the same rule with its own
  bounds (:func:`_gelu`: ``f'`` over the range from its ends and its extremes ``f'(+-s)``,
  ``|f''| <= 2/(s sqrt pi)``, the quasi-convex hull); ``gelu_tanh`` composed from products and
  tanh (``x/2 (1 + tanh(k (x + a x^3)))``, each step rounded outward; the products are first
  order exact, so the composition is first-order tight);
* ``layer_norm`` and ``rms_norm``: the deviations ``x_i - mu`` formed first as models (the common
  linear part cancels), the mean of their products, ``+ eps``, and ``t^(-1/2)`` by
  :func:`_rsqrt` on ``[max(lo, eps), hi]`` (the true value is at least ``eps``); each output then
  met with its a-priori bound ``b_i +- sqrt(n - 1) |w_i|`` (RMSNorm: ``+- sqrt(n) |w_i|``;
  :func:`symbounds.core.graph.norm_cap_square`), the ends rounded outward (:func:`_meet_cap`).

The values at a point come from correctly rounded operations only (``+ - * /`` and ``sqrt``,
which IEEE 754 rounds to nearest, and :func:`symbounds.core.outward.exp_bounds`): ``sigmoid``
from ``1 / (1 + e^-x)``, ``tanh x = sigma(2x) - sigma(-2x)``, ``erf`` from its series of positive
terms, ``log1p`` from ``2 atanh(y / (2 + y))``.  No libm ``tanh``, ``erf`` or ``log`` is used.

A graph holding an operation without a float rule (``attention``) has no float evaluator
(:func:`evaluator` returns None): every box goes to the Arb path.  A box on which a step is not
finite (an overflow, a NaN) is reported not ``ok`` and goes to the Arb path too; nothing is
guessed.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import flint
import numpy as np

from . import outward as fo
from .activations import HULL_FACTOR as HULL_FACTOR_ARB, gelu_unit_min
from .exact import arb_to_fraction
from .float_boxes import FTM, Boxes, add_bias, centres
from . import graph as gr
from .graph import CONSTANT_OPS, Graph

__all__ = ["FLOAT_OPS", "FloatGraphEvaluator", "evaluator", "erf_bounds", "erf_directed", "log1p_bounds", "rsqrt_bounds",
           "sigmoid_bounds", "softplus_bounds", "tanh_bounds"]

#: Largest number of array entries one batch may create in its widest operation.
_BATCH_ENTRIES = 1 << 22

#: the operations with a float rule (any other makes :func:`evaluator` return None)
FLOAT_OPS = frozenset({"affine", "add", *CONSTANT_OPS, "relu", "leaky_relu", "exp", "sigmoid", "tanh", "softplus",
                       "erf", "gelu", "gelu_tanh", "layer_norm", "rms_norm", "slice", "concat", "select_tokens",
                       "mean_tokens"})


# ------------------------------------------------------------------------------------------
# constants and float balls


def _ball(q) -> tuple[float, float]:
    """``(m, r)``: a double and a radius with the exact rational ``q`` in ``m +- r``."""
    return fo.from_fraction(Fraction(q))


def _arb_bounds(make) -> tuple[float, float]:
    """``(lo, hi)`` doubles with ``lo <= v <= hi`` for the real ``v`` that the Arb ball ``make()``
    (at 200 bits) encloses: each end's nearest double moved outward by :func:`outward.down`/``up``."""
    with flint.ctx.workprec(200):
        b = make()
        lo_q, hi_q = arb_to_fraction(b.lower()), arb_to_fraction(b.upper())
    m, r = fo.from_fraction(lo_q)
    lo = float(fo.down(m - r))
    m, r = fo.from_fraction(hi_q)
    hi = float(fo.up(m + r))
    return lo, hi


def _ball_of_bounds(lo: float, hi: float) -> tuple[float, float]:
    """``(m, r)`` with ``[lo, hi]`` inside ``m +- r``."""
    m = lo * 0.5 + hi * 0.5
    return m, float(max(fo.up(hi - m), fo.up(m - lo)))


#: 2/sqrt(pi), 1/sqrt(2) and sqrt(2/pi) as outward doubles
_C_ERF = _arb_bounds(lambda: 2 / flint.arb.pi().sqrt())
_INV_SQRT2 = _ball_of_bounds(*_arb_bounds(lambda: 1 / flint.arb(2).sqrt()))
_K_TANH = _ball_of_bounds(*_arb_bounds(lambda: (2 / flint.arb.pi()).sqrt()))
#: global bounds (rounded up): |tanh''| <= 4/(3 sqrt 3) = 0.7698 (at tanh x = 1/sqrt 3);
#: |sigma''| <= sqrt(3)/18 = 0.0962; |erf''| = (2/sqrt pi) 2|x| e^(-x^2) <= (2/sqrt pi) sqrt(2/e) = 0.9679;
#: |softplus''| = sigma' <= 1/4
_M2 = {"tanh": 0.77, "sigmoid": 0.0963, "erf": 0.968, "softplus": 0.25}
#: bounds of |f'(xi) - f'(c)|: f' lies in [0, sup f'] for these increasing functions
_D1 = {"tanh": 1.0, "sigmoid": 0.25, "erf": _C_ERF[1], "softplus": 1.0}
#: the model is replaced by the hull of a monotone function's ends where it is this many times wider
#: (the same factor as the Arb Taylor models' in the box search)
HULL_FACTOR = float(HULL_FACTOR_ARB)
_ONE = FTM(np.ones((1, 1, 1)), None, np.zeros((1, 1, 1)))
_HALF = (0.5, 0.0)


def _mid(lo, hi):
    """``(m, e)``: a double per entry and an upper bound of ``|v - m|`` for every ``v`` in ``[lo, hi]``."""
    m = lo * 0.5 + hi * 0.5
    return m, np.maximum(fo.up(hi - m), fo.up(m - lo))


def _interval(lo, hi) -> FTM:
    """The constant model (no gradient) of the interval ``[lo, hi]``."""
    c, r = _mid(lo, hi)
    return FTM(c, None, r)


# ------------------------------------------------------------------------------------------
# values at points, with proven bounds: each returns (lo, hi) with lo <= f(x) <= hi elementwise


def sigmoid_bounds(x):
    """``sigma(x) = 1 / (1 + e^-x)``: with ``e^-x`` in ``[el, eh]`` (:func:`outward.exp_bounds`),
    ``sigma`` lies in ``[down(1 / up(1 + eh)), up(1 / down(1 + el))]`` (each ``up``/``down`` bounds
    the exact result of the one operation before it; ``sigma`` falls as ``e^-x`` grows), met with
    ``[0, 1]``."""
    el, eh = fo.exp_bounds(-x)
    lo = fo.down(1.0 / fo.up(1.0 + eh))
    hi = fo.up(1.0 / fo.down(1.0 + el))
    return np.maximum(lo, 0.0), np.minimum(hi, 1.0)


def _sigmoid_deriv(x):
    """``sigma'(x) = sigma(x) sigma(-x)`` (a product of positive bounds, no cancellation), in ``[0, 1/4]``."""
    pl, ph = sigmoid_bounds(x)
    ml, mh = sigmoid_bounds(-x)
    return np.maximum(fo.down(pl * ml), 0.0), np.minimum(fo.up(ph * mh), 0.25)


def tanh_bounds(x):
    """``tanh x = sigma(2x) - sigma(-2x)`` (``2x`` exact), from :func:`sigmoid_bounds`, met with
    ``[-1, 1]``: an absolute error of a few units of ``2^-53``."""
    pl, ph = sigmoid_bounds(2.0 * x)
    ml, mh = sigmoid_bounds(-2.0 * x)
    return np.maximum(fo.down(pl - mh), -1.0), np.minimum(fo.up(ph - ml), 1.0)


def _tanh_deriv(x):
    """``tanh'(x) = 1 - tanh^2 x = 4 sigma(2x) sigma(-2x)``, in ``[0, 1]``."""
    pl, ph = sigmoid_bounds(2.0 * x)
    ml, mh = sigmoid_bounds(-2.0 * x)
    return np.maximum(fo.down(4.0 * fo.down(pl * ml)), 0.0), np.minimum(fo.up(4.0 * fo.up(ph * mh)), 1.0)


_ERF_BIG = 6.0
_ERF_ONE_LO = float(np.nextafter(1.0, 0.0))  # 1 - 2^-53 < 1 - erfc(6) = 1 - 2.15e-17


def _erf_terms(zmax: float) -> tuple[int, float]:
    """``(N, T)``: the series ``S(z) = sum_n z^n / (2n+1)!!`` cut after ``n = N`` leaves a tail
    ``sum_{n > N} t_n <= t_{N+1} / (1 - z / (2N+5)) <= T`` for every ``0 <= z <= zmax`` (the
    ratio ``t_{n+1}/t_n = z/(2n+3)`` falls with ``n``; the tail grows with ``z``); ``t_{N+1}``
    is formed upward, ``N`` the first with ``2N + 5 >= 2 zmax`` and ``t_{N+1} <= 2^-60``."""
    t, n = 1.0, 0
    while True:
        n += 1
        t = float(fo.up(float(fo.up(t * zmax)) / (2 * n + 1)))  # >= t_n(zmax)
        if 2 * n + 3 >= 2 * zmax and t <= 2.0**-60:
            N = n - 1
            q = float(fo.up(zmax / (2 * N + 5)))
            return N, float(fo.up(t / float(fo.down(1.0 - q))))


def _directed(y, sg):
    """``up(y)`` where ``sg = 1``, ``down(y)`` where ``sg = -1`` (:mod:`symbounds.core.outward`:
    ``y +- (|y| 2^-51 + eta)``, a bound of the exact result of the one operation rounded to ``y``)."""
    return y + sg * (np.abs(y) * 2.0**-51 + fo.ETA)


@functools.lru_cache(maxsize=128)
def _erf_plan(zceil: int) -> tuple[int, float, float, float]:
    """``(N, T, f_lo, f_hi)`` for ``0 <= z <= zceil``: :func:`_erf_terms`, and the factors that turn
    a Horner value computed in round-to-nearest into bounds: each of the ``3N`` operations
    (``z p``, ``/ (2n+1)``, ``1 + .``) of positive operands has a relative error at most ``u``, so
    the computed ``p^ = sum_n t_n prod (1 + delta)`` (at most ``3N`` factors a term) lies in
    ``[S_N (1 - g), S_N (1 + g)]``, ``g = gamma_{3N} = 3Nu / (1 - 3Nu)`` (Higham, *Accuracy and
    Stability*, Lemma 3.1), hence ``S_N in [p^ / (1 + g), p^ / (1 - g)]``, inside
    ``[p^ f_lo, p^ f_hi]`` with ``f_lo = 1 - g`` and ``f_hi = 1 + 2g`` (``g <= 1/2``), both rounded
    outward; an underflow's absolute error (at most ``3N eta``, against ``S >= 1``) is paid by
    ``2^-1000`` added to ``g``."""
    N, tail = _erf_terms(float(zceil))
    m = 3 * N + 1
    g = float(fo.up(float(fo.up(m * fo.U)) / float(fo.down(1.0 - m * fo.U)))) + 2.0**-1000
    return N, tail, float(fo.down(1.0 - g)), float(fo.up(1.0 + 2.0 * g))


def _erf_series(z, sg, zmax: float):
    """``S(z) = sum_n z^n / (2n+1)!!`` bounded from above (``sg = 1``) or below (``sg = -1``), per
    entry, for ``0 <= z <= zmax``: Horner's rule ``p <- 1 + z p / (2n + 1)`` from ``n = N`` down to
    1 in round-to-nearest, times the factor of :func:`_erf_plan` in the entry's direction, the
    tail of :func:`_erf_terms` added to the upper bounds (``S`` grows with ``z``, and ``z`` is
    already rounded in the direction)."""
    N, tail, f_lo, f_hi = _erf_plan(int(math.ceil(zmax)))
    p = np.ones_like(z)
    for n in range(N, 0, -1):
        p = 1.0 + (z * p) / float(2 * n + 1)
    return np.where(sg > 0, fo.up(fo.up(p * f_hi) + tail), fo.down(p * f_lo))


#: entries with ``z = 2a^2`` up to this take the short series (about 40 terms), the others the long one
_ERF_SPLIT = 8.0


def erf_directed(x, upper):
    """An upper bound of ``erf x`` where ``upper`` (a bool per entry, or one bool), else a lower
    bound.  ``erf`` is odd, so the bound is taken at ``a = |x|`` in the direction ``upper XOR (x <
    0)``.  For ``a >= 6``, ``erf a`` lies in ``[1 - 2^-53, 1]`` (``erfc 6 = 2.15e-17``, ``erfc``
    decreasing).  Below, the series of positive terms (Abramowitz & Stegun 7.1.6)

        erf a = (2/sqrt pi) a e^(-a^2) S(2a^2),    S(z) = sum_{n >= 0} z^n / (1 . 3 ... (2n+1)),

    with ``a^2`` rounded in the direction (down for an upper bound of ``e^(-a^2)``, up in ``S``),
    ``e^(-a^2)`` from :func:`outward.exp_bounds`, ``2/sqrt pi`` as outward doubles (200-bit Arb),
    :func:`_erf_series` (short for ``z <= 8``, long above), each product rounded in the direction.
    Relative error about ``12 N u``."""
    x = np.asarray(x, dtype=np.float64)
    upper = np.broadcast_to(np.asarray(upper, dtype=bool), x.shape)
    neg = x < 0
    ua = upper ^ neg  # an upper bound of erf(|x|) is needed there
    sg = np.where(ua, 1.0, -1.0)
    a = np.abs(x)
    big = ~(a < _ERF_BIG)  # NaN too (restored below)
    am = np.where(big, 0.0, a)
    sq = am * am
    z = 2.0 * np.maximum(_directed(sq, sg), 0.0)  # S grows with z
    small = z <= _ERF_SPLIT
    S = np.empty_like(z)
    if small.any():
        S[small] = _erf_series(z[small], sg[small], _ERF_SPLIT)
    if (~small).any():
        zl = z[~small]
        S[~small] = _erf_series(zl, sg[~small], min(float(np.max(zl)), 80.0))
    sqe = np.maximum(_directed(sq, -sg), 0.0)  # e^(-a^2) falls with a^2
    E = np.where(ua, fo.exp_upper(-sqe), fo.exp_lower(-sqe))
    C = np.where(ua, _C_ERF[1], _C_ERF[0])
    v = _directed(_directed(_directed(C * am, sg) * E, sg) * S, sg)
    v = np.where(ua, np.minimum(v, 1.0), np.maximum(v, 0.0))
    v = np.where(big, np.where(ua, 1.0, _ERF_ONE_LO), v)
    v = np.where(neg, -v, v)
    return np.where(np.isnan(x), np.nan, v)


def erf_bounds(x):
    """``(lo, hi)`` with ``lo <= erf x <= hi`` (:func:`erf_directed` both ways)."""
    x = np.asarray(x, dtype=np.float64)
    both = erf_directed(np.concatenate([x.ravel(), x.ravel()]),
                        np.concatenate([np.zeros(x.size, dtype=bool), np.ones(x.size, dtype=bool)]))
    return both[:x.size].reshape(x.shape), both[x.size:].reshape(x.shape)


def _erf_deriv(x):
    """``erf'(x) = (2/sqrt pi) e^(-x^2)``, ``x^2`` rounded outward, in ``[0, 2/sqrt pi]``."""
    sq = x * x
    El, Eh = fo.exp_lower(-fo.up(sq)), fo.exp_upper(-np.maximum(fo.down(sq), 0.0))
    return np.maximum(fo.down(_C_ERF[0] * El), 0.0), np.minimum(fo.up(_C_ERF[1] * Eh), _C_ERF[1])


_LOG_TERMS = 20
_LOG_CL = [float(fo.down(1.0 / (2 * k + 1))) for k in range(_LOG_TERMS + 1)]
_LOG_CH = [float(fo.up(1.0 / (2 * k + 1))) for k in range(_LOG_TERMS + 1)]
#: w = z^2 <= 1/9 for z = y / (2 + y), 0 <= y <= 1: the tail sum_{k > 20} w^k / (2k+1)
#: <= w^21 / (43 (1 - w)) < 3e-22 < 2^-64
_LOG_TAIL = 2.0**-64
_W_MAX = float(fo.up(1.0 / 9.0))


def log1p_bounds(yl, yh):
    """``log(1 + y)`` for every ``y`` in ``[yl, yh]`` with ``0 <= y <= 1``: ``log(1 + y) =
    2 atanh z = 2 z sum_k w^k / (2k + 1)``, ``z = y / (2 + y)`` (increasing in ``y``, at most 1/3),
    ``w = z^2 <= 1/9``; 21 terms by Horner's rule with positive operands, rounded down for the
    lower bound and up for the upper one (coefficients ``1/(2k+1)`` as outward doubles), the tail
    below ``2^-64`` added to the upper one."""
    yl, yh = np.maximum(yl, 0.0), np.minimum(yh, 1.0)
    zl = np.maximum(fo.down(yl / fo.up(2.0 + yl)), 0.0)
    zh = fo.up(yh / fo.down(2.0 + yh))
    wl, wh = fo.down(zl * zl), np.minimum(fo.up(zh * zh), _W_MAX)
    ql, qh = np.full_like(wl, _LOG_CL[-1]), np.full_like(wh, _LOG_CH[-1])
    for k in range(_LOG_TERMS - 1, -1, -1):
        qh = fo.up(_LOG_CH[k] + fo.up(wh * qh))
        ql = fo.down(_LOG_CL[k] + fo.down(wl * ql))
    qh = fo.up(qh + _LOG_TAIL)
    return np.maximum(2.0 * fo.down(zl * ql), 0.0), 2.0 * fo.up(zh * qh)


def softplus_bounds(x):
    """``softplus x = log(1 + e^x) = max(x, 0) + log(1 + e^(-|x|))``, ``e^(-|x|)`` in ``[0, 1]``
    from :func:`outward.exp_bounds` and ``log1p`` from :func:`log1p_bounds`; the sum rounded
    outward."""
    xp = np.maximum(x, 0.0)
    el, eh = fo.exp_bounds(-np.abs(x))
    ll, lh = log1p_bounds(el, eh)
    lo, hi = fo.down(xp + ll), fo.up(xp + lh)
    nan = np.isnan(x)
    return np.where(nan, np.nan, np.maximum(lo, 0.0)), np.where(nan, np.nan, hi)


def rsqrt_bounds(t):
    """``t^(-1/2)`` for doubles ``t > 0``: ``sqrt`` is correctly rounded (IEEE 754), so ``sqrt t``
    lies in ``[down(s), up(s)]`` for ``s = fl(sqrt t)``, and ``t^(-1/2)`` in
    ``[down(1 / up(s)), up(1 / down(s))]``."""
    s = np.sqrt(t)
    return fo.down(1.0 / fo.up(s)), fo.up(1.0 / fo.down(s))


_VALUES = {"sigmoid": sigmoid_bounds, "tanh": tanh_bounds, "erf": erf_bounds, "softplus": softplus_bounds}
_DERIVS = {"sigmoid": _sigmoid_deriv, "tanh": _tanh_deriv, "erf": _erf_deriv, "softplus": sigmoid_bounds}


# ------------------------------------------------------------------------------------------
# the rules over boxes


def _choose(bx: Boxes, tm: FTM, lo, hi, force=None) -> FTM:
    """Per entry, the model ``tm`` or the interval ``[lo, hi]`` (both enclose the same values, so
    either is sound): the interval where the model is more than :data:`HULL_FACTOR` times wider
    (its remainder dominates: a wide box, a saturated function), where the model is not finite,
    and where ``force``; else the model, whose gradient keeps the correlation with later steps."""
    c, r = _mid(lo, hi)
    tdev = bx.dev(tm)
    with np.errstate(invalid="ignore"):
        use = ~(fo.up(2.0 * tdev) <= HULL_FACTOR * (hi - lo))  # NaN in the model: the interval
    if force is not None:
        use = use | force
    if not use.any():
        return tm
    G = None if tm.G is None else np.where(use[:, None], 0.0, tm.G)
    return FTM(np.where(use, c, tm.c), G, np.where(use, r, tm.r))


def _unary(bx: Boxes, a: FTM, val, der, D1, M2, increasing: bool = True, centre_ok=None, domain_lo=None,
           drange=None, hull=None) -> FTM:
    """``f(a)`` for a smooth ``f``.  With ``v = c + u`` a value of the model (``u = <g, delta> + e``,
    ``|e| <= r``, ``|u| <= dev``) and ``xi`` between ``c`` and ``v`` (Taylor, or the mean value):

        f(v) = f(c) + f'(c) <g, delta> + f'(c) e + rho,    |rho| <= min(M2 dev^2 / 2, D1 dev),

    ``M2 >= sup |f''|`` and ``D1 >= sup |f'(xi) - f'(c)|`` over the range.  ``f(c)`` in
    ``[vl, vh]`` and ``f'(c)`` in ``[dl, dh]`` come from ``val`` and ``der`` (proven float
    bounds at the double ``c``); the model keeps their midpoints ``fc``, ``g'`` and adds the
    half-widths ``e0``, ``e1``:

        f(a) in fc + <g' g, delta> + [-R, R],  R = e0 + |g'| r + e1 dev + min(M2 dev^2/2, D1 dev)

    plus the rounding of ``g' g``.  Where ``f`` is monotone on the range ``[lo, hi]`` the hull
    ``[f(lo), f(hi)]`` (decreasing: ``[f(hi), f(lo)]``) encloses too, and the narrower of the two
    is kept per entry (:func:`_choose`); ``centre_ok`` False forces the hull.  ``domain_lo``
    replaces the range's lower end (a known lower bound of the true values, ``eps`` of a norm).
    ``drange(lo, hi)`` bounds ``f'`` over the range, ``[pl, ph]``: then also
    ``|f'(xi) - f'(c)| <= max(ph - dl, dh - pl)``, the local form of ``D1`` (first order in the
    box's width, where the global one is not).  ``hull(lo, hi)`` replaces the monotone hull (a
    function that is not monotone)."""
    lo, hi = bx.range(a)
    if domain_lo is not None:
        lo = np.maximum(lo, domain_lo)
    if hull is not None:
        hlo, hhi = hull(lo, hi)
    elif increasing:
        hlo, hhi = val(lo)[0], val(hi)[1]
    else:
        hlo, hhi = val(hi)[0], val(lo)[1]
    if a.G is None and centre_ok is None:
        return _interval(hlo, hhi)
    cc = a.c if centre_ok is None else np.where(centre_ok, a.c, hi)
    vl, vh = val(cc)
    fc, e0 = _mid(vl, vh)
    dl, dh = der(cc)
    g, e1 = _mid(dl, dh)
    dev = bx.dev(a)
    if drange is not None:
        pl, ph = drange(lo, hi)
        D1 = np.minimum(D1, np.maximum(fo.up(ph - dl), fo.up(dh - pl)))
    rho = np.minimum(fo.up(fo.up(M2 * fo.up(dev * dev)) * 0.5), fo.up(D1 * dev))
    rem = fo.up(e0 + fo.up(np.abs(g) * a.r))
    rem = fo.up(rem + fo.up(e1 * dev))
    rem = fo.up(rem + rho)
    if a.G is None:
        tm = FTM(fc, None, rem)
    else:
        G = a.G * g[:, None]
        tm = bx.fold(fc, G, rem, None, fo.err(G))
    return _choose(bx, tm, hlo, hhi, None if centre_ok is None else ~centre_ok)


def _even_drange(der):
    """``f'`` over ``[lo, hi]`` for ``f'`` even and falling in ``|x|`` (``tanh' = sech^2``,
    ``sigma'``, ``erf'``): between ``f'`` at the largest ``|x|`` and at the smallest (0 where the
    interval holds 0)."""

    def rng(lo, hi):
        amin = np.where((lo <= 0) & (hi >= 0), 0.0, np.minimum(np.abs(lo), np.abs(hi)))
        amax = np.maximum(np.abs(lo), np.abs(hi))
        return der(amax)[0], der(amin)[1]

    return rng


def _increasing_drange(der):
    """``f'`` over ``[lo, hi]`` for an increasing ``f'`` (``softplus' = sigma``)."""
    return lambda lo, hi: (der(lo)[0], der(hi)[1])


_DRANGE = {"tanh": _even_drange(_tanh_deriv), "sigmoid": _even_drange(_sigmoid_deriv),
           "erf": _even_drange(_erf_deriv), "softplus": _increasing_drange(sigmoid_bounds)}


def _smooth(bx: Boxes, op: str, a: FTM) -> FTM:
    """``sigmoid``, ``tanh``, ``erf``, ``softplus`` (increasing) by :func:`_unary`, with the local
    bound of ``|f'(xi) - f'(c)|`` from ``f'`` over the range (:func:`_even_drange`,
    :func:`_increasing_drange`)."""
    return _unary(bx, a, _VALUES[op], _DERIVS[op], _D1[op], _M2[op], drange=_DRANGE[op])


def _exp(bx: Boxes, a: FTM) -> FTM:
    """``e^a``: :meth:`Boxes.exp` (the one-sided remainder of float_boxes), met per entry with the
    hull ``[e^lo, e^hi]`` of the range's ends (:func:`outward.exp_bounds`)."""
    lo, hi = bx.range(a)
    hlo, hhi = fo.exp_lower(lo), fo.exp_upper(hi)
    if a.G is None:
        return _interval(hlo, hhi)
    return _choose(bx, bx.exp(a), hlo, hhi)


def _rsqrt(bx: Boxes, a: FTM, eps_lo: float) -> FTM:
    """``t^(-1/2)`` of a model whose true values are at least ``eps_lo > 0``: on ``[l, hi]``,
    ``l = max(lo, eps_lo)``, ``f' = -t^(-3/2)/2`` lies in ``[-l^(-3/2)/2, 0]`` (so ``D1 =
    l^(-3/2)/2``) and ``f'' = 3 t^(-5/2)/4 <= 3 l^(-5/2)/4 = M2``, both from the upper bound of
    ``l^(-1/2)``; the derivative at the centre is ``-f(c)^3 / 2``.  :func:`_unary`'s rule where
    the centre lies in ``[l, hi]``, else the decreasing hull ``[f(hi), f(l)]``."""
    lo, hi = bx.range(a)
    l = np.maximum(lo, eps_lo)
    fl_hi = rsqrt_bounds(l)[1]
    f3 = fo.up(fo.up(fl_hi * fl_hi) * fl_hi)
    D1 = fo.up(0.5 * f3)
    M2 = fo.up(0.75 * fo.up(fo.up(f3 * fl_hi) * fl_hi))

    def der(t):
        vl, vh = rsqrt_bounds(t)
        return -fo.up(0.5 * fo.up(fo.up(vh * vh) * vh)), -fo.down(0.5 * fo.down(fo.down(vl * vl) * vl))

    ok = (a.c >= l) & (a.c <= hi)
    return _unary(bx, a, rsqrt_bounds, der, D1, M2, increasing=False, centre_ok=ok, domain_lo=eps_lo,
                  drange=lambda lo_, hi_: (der(lo_)[0], der(hi_)[1]))  # f' rises with t


def _const(vals) -> FTM:
    """A row of constant balls ``(m, r)`` (one per column) as a model of shape ``(1, W, 1)``."""
    m = np.array([v[0] for v in vals], dtype=np.float64)
    r = np.array([v[1] for v in vals], dtype=np.float64)
    return FTM(m[None, :, None], None, r[None, :, None])


_INV_SQRT_PI = _arb_bounds(lambda: 1 / flint.arb.pi().sqrt())
#: GELU's derivative at its critical points ``x = s`` and ``x = -s`` (whatever ``s``:
#: ``x e^(-x^2/s^2) / (s sqrt pi) = +-1/(e sqrt pi)`` there): its maximum and minimum
_GELU_DMAX = _arb_bounds(lambda: (1 + flint.arb(1).erf()) / 2 + 1 / (flint.arb(1).exp() * flint.arb.pi().sqrt()))
_GELU_DMIN = _arb_bounds(lambda: (1 - flint.arb(1).erf()) / 2 - 1 / (flint.arb(1).exp() * flint.arb.pi().sqrt()))


def _gelu_min_unit() -> float:
    """A double at or below ``min_t t (1 + erf t) / 2`` (about -0.1200):
    :func:`symbounds.core.activations.gelu_unit_min` moved down to a double."""
    m, r = fo.from_fraction(arb_to_fraction(gelu_unit_min().lower()))
    return float(fo.down(m - r))


_GELU_GMIN = _gelu_min_unit()


def _gelu_params(divisor) -> dict:
    """The float constants of a GELU of divisor ``s`` (None: sqrt 2): the ball of ``1/s``,
    ``s`` as outward doubles, ``K = 1/(s sqrt pi)`` likewise, and ``min f >= s_hi gmin``."""
    if divisor is None:
        s_lo, s_hi = _arb_bounds(lambda: flint.arb(2).sqrt())
        inv_s = _INV_SQRT2
    else:
        m, r = _ball(Fraction(divisor))
        s_lo, s_hi = float(fo.down(m - r)), float(fo.up(m + r))
        inv_s = _ball(1 / Fraction(divisor))
    im, ir = inv_s
    k_lo = float(fo.down(float(fo.down(im - ir)) * _INV_SQRT_PI[0]))
    k_hi = float(fo.up(float(fo.up(im + ir)) * _INV_SQRT_PI[1]))
    if not (s_lo > 0 and k_lo > 0 and np.isfinite(s_hi) and np.isfinite(k_hi)):
        raise ValueError("GELU's divisor is outside the float64 range")
    return {"inv_s": inv_s, "s": (s_lo, s_hi), "K": (k_lo, k_hi), "fmin": float(fo.down(s_hi * _GELU_GMIN))}


def _gelu_parts(x, P):
    """``u = x/s`` in ``[ul, uh]`` and ``erf u`` in ``[El, Eh]`` (erf increasing)."""
    m, r = P["inv_s"]
    p = x * m
    e = fo.up(np.abs(x) * r)
    ul, uh = fo.down(fo.down(p) - e), fo.up(fo.up(p) + e)
    n = ul.size
    E = erf_directed(np.concatenate([ul.ravel(), uh.ravel()]),
                     np.concatenate([np.zeros(n, dtype=bool), np.ones(n, dtype=bool)]))
    return ul, uh, E[:n].reshape(ul.shape), E[n:].reshape(uh.shape)


def _gelu_value(P):
    """``f(x) = x/2 (1 + erf(x/s))`` at doubles: ``1 + erf`` in ``[max(0, down(1 + El)), up(1 + Eh)]``
    times ``x`` (its larger end for ``x < 0``), halved, each product rounded outward."""

    def val(x):
        _, _, El, Eh = _gelu_parts(x, P)
        ol, oh = np.maximum(fo.down(1.0 + El), 0.0), fo.up(1.0 + Eh)
        pos = x >= 0
        lo = np.where(pos, fo.down(x * ol), fo.down(x * oh))
        hi = np.where(pos, fo.up(x * oh), fo.up(x * ol))
        return fo.down(0.5 * lo), fo.up(0.5 * hi)

    return val


def _gelu_deriv(P):
    """``f'(x) = (1 + erf(x/s))/2 + x K e^(-x^2/s^2)``, ``K = 1/(s sqrt pi)``: the first term from
    the bounds of ``erf``, the second from ``u^2`` over ``[ul, uh]`` rounded outward, ``K``'s ends
    and the sign of ``x``; met with ``[f'(-s), f'(s)]``."""
    k_lo, k_hi = P["K"]

    def der(x):
        ul, uh, El, Eh = _gelu_parts(x, P)
        fl, fh = fo.down(0.5 * fo.down(1.0 + El)), fo.up(0.5 * fo.up(1.0 + Eh))
        straddle = (ul <= 0) & (uh >= 0)
        a = np.where(straddle, 0.0, np.minimum(np.abs(ul), np.abs(uh)))
        b = np.maximum(np.abs(ul), np.abs(uh))
        gl, gh = fo.exp_lower(-fo.up(b * b)), fo.exp_upper(-fo.down(a * a))
        pos = x >= 0
        tl = np.where(pos, fo.down(fo.down(x * k_lo) * gl), fo.down(fo.down(x * k_hi) * gh))
        th = np.where(pos, fo.up(fo.up(x * k_hi) * gh), fo.up(fo.up(x * k_lo) * gl))
        return (np.maximum(fo.down(fl + tl), _GELU_DMIN[0]), np.minimum(fo.up(fh + th), _GELU_DMAX[1]))

    return der


def _gelu(bx: Boxes, a: FTM, P: dict) -> FTM:
    """``x/2 (1 + erf(x / s))`` by :func:`_unary`, with ``f'' = e^(-x^2/s^2) (2 - 2x^2/s^2)/(s sqrt pi)``:
    ``|f''| <= 2K`` (``|(2 - 2t) e^(-t)| <= 2`` for ``t >= 0``) and ``f'`` rising on ``[-s, s]``,
    falling outside, so over ``[lo, hi]`` it lies between its values at the ends, met with
    ``f'(s)`` (``f'(-s)``) where the interval holds ``s`` (``-s``); ``D1 = f'(s) - f'(-s)``.
    The hull: ``f`` is quasi-convex (one minimum, in ``(-s, 0)``: ``f'(-s) < 0 < f'(0) = 1/2``), so
    ``f <= max(f(lo), f(hi))``, ``f >= f(lo)`` for ``lo >= 0``, ``f >= f(hi)`` for ``hi <= -s``, and
    ``f >= min(f(lo), f(hi), s min_t t (1 + erf t)/2)`` otherwise."""
    val, der = _gelu_value(P), _gelu_deriv(P)
    s_lo, s_hi = P["s"]

    def drange(lo, hi):
        (l0, h0), (l1, h1) = der(lo), der(hi)
        pl, ph = np.minimum(l0, l1), np.maximum(h0, h1)
        ph = np.where((lo <= s_hi) & (hi >= s_lo), _GELU_DMAX[1], ph)
        pl = np.where((lo <= -s_lo) & (hi >= -s_hi), _GELU_DMIN[0], pl)
        return pl, ph

    def hull(lo, hi):
        (l0, h0), (l1, h1) = val(lo), val(hi)
        low = np.where(lo >= 0, l0, np.where(hi <= -s_hi, l1, np.minimum(np.minimum(l0, l1), P["fmin"])))
        return low, np.maximum(h0, h1)

    D1 = float(fo.up(_GELU_DMAX[1] - _GELU_DMIN[0]))
    return _unary(bx, a, val, der, D1, float(fo.up(2.0 * P["K"][1])), drange=drange, hull=hull)


def _gelu_tanh(bx: Boxes, a: FTM, k, al) -> FTM:
    """``x/2 (1 + tanh(k (x + a x^3)))`` from products, sums and :func:`_smooth` tanh."""
    x3 = bx.mul(bx.mul(a, a), a)
    u = bx.scale(k, bx.add(a, bx.scale(al, x3)))
    t = _smooth(bx, "tanh", u)
    return bx.scale(_HALF, bx.mul(a, bx.add(t, _ONE)))


def _row_vector(a: FTM) -> FTM:
    """A per-row quantity ``(B, T)`` as ``(B, 1, T)`` (to broadcast over the columns)."""
    return FTM(a.c[:, None], None if a.G is None else a.G[:, :, None], a.r[:, None])


def _norm(bx: Boxes, p: dict, a: FTM, layer: bool) -> FTM:
    """LayerNorm ``(x_i - mu) s w_i + b_i`` or RMSNorm ``x_i s w_i``, ``s = (m + eps)^(-1/2)``,
    ``m`` the mean of ``(x_i - mu)^2`` (of ``x_i^2``): the deviations as models first (the common
    linear part of a nearly constant row cancels in them), the squares as products of models,
    ``1/n`` and ``eps`` as float balls, :func:`_rsqrt` with the lower bound of ``eps`` as the
    domain's end (the true ``m + eps`` is at least ``eps``)."""
    inv_n = p["inv_n"]
    if layer:
        mu = _row_vector(bx.scale(inv_n, bx.sum(a, 0)))
        d = bx.add(a, mu, -1.0)
    else:
        d = a
    m = bx.scale(inv_n, bx.sum(bx.mul(d, d), 0))
    em, er = p["eps"]
    v = bx.add(m, FTM(np.full((1, 1), em), None, np.full((1, 1), er)))
    s = _rsqrt(bx, v, p["eps_lo"])
    y = bx.mul(bx.mul(d, _row_vector(s)), p["weight"])
    if layer:
        y = bx.add(y, p["bias"])
    return _meet_cap(bx, y, p["cap_lo"], p["cap_hi"])


def _norm_cap(op: str, weight, bias):
    """The a-priori bounds of a norm's outputs as doubles of shape ``(1, W, 1)``, ``lo <= b_i -
    sqrt(k) |w_i|`` and ``hi >= b_i + sqrt(k) |w_i|`` (``k = n - 1`` for LayerNorm, ``n`` for
    RMSNorm, :func:`symbounds.core.graph.norm_cap_square`; ``b = 0`` for RMSNorm): each end
    enclosed in 200-bit Arb from the exact weights and moved outward to a double
    (:func:`_arb_bounds`)."""
    k = gr.norm_cap_square(op, len(weight))
    q = lambda v: flint.arb(flint.fmpq(Fraction(v).numerator, Fraction(v).denominator))
    with flint.ctx.workprec(200):
        caps = gr.norm_caps([q(w) for w in weight], None if bias is None else [q(b) for b in bias], k)
    ends = [_arb_bounds(lambda c=c: c) for c in caps]
    return np.array([e[0] for e in ends])[None, :, None], np.array([e[1] for e in ends])[None, :, None]


def _meet_cap(bx: Boxes, y: FTM, cap_lo, cap_hi) -> FTM:
    """Per box and entry, the model ``y`` where its range lies inside ``[cap_lo, cap_hi]``, else
    the interval (range ∩ cap) (:func:`_choose`; the constant model: a model met with an interval
    cannot keep its gradient in general); where the range is not finite, or misses the cap (which
    a sound model cannot), the cap itself, which holds the norm's value for every input."""
    lo, hi = bx.range(y)
    with np.errstate(invalid="ignore"):
        inside = (lo >= cap_lo) & (hi <= cap_hi)  # False where NaN
        ilo = np.where(lo > cap_lo, lo, cap_lo)  # NaN: the cap's end
        ihi = np.where(hi < cap_hi, hi, cap_hi)
        miss = ~(ilo <= ihi)
    ilo = np.where(miss, cap_lo, ilo)
    ihi = np.where(miss, cap_hi, ihi)
    return _choose(bx, y, ilo, ihi, ~inside)


def _concat(parts: list) -> FTM:
    if any(t.G is not None for t in parts):
        B, d = next(t.G.shape[:2] for t in parts if t.G is not None)
        Gs = [t.G if t.G is not None else np.zeros((B, d) + t.c.shape[1:]) for t in parts]
        Gs = [np.broadcast_to(g, (B, d) + g.shape[2:]) for g in Gs]
        G = np.concatenate(Gs, axis=2)
    else:
        G = None
    B = max(t.c.shape[0] for t in parts)
    cs = [np.broadcast_to(t.c, (B,) + t.c.shape[1:]) for t in parts]
    rs = [np.broadcast_to(t.r, (B,) + t.r.shape[1:]) for t in parts]
    return FTM(np.concatenate(cs, axis=1), G, np.concatenate(rs, axis=1))


def _mean_tokens(bx: Boxes, p: dict, a: FTM) -> FTM:
    """One row per sequence: the sum of its rows (:meth:`Boxes.sum`) times the ball of ``1/L``;
    ``batch_major`` sequence ``s`` is rows ``s L .. s L + L - 1``, ``sequence_major`` rows
    ``s, s + S, ...``."""
    T = a.c.shape[2]
    L = p["L"] or T
    S = T // L
    shape = (S, L) if p["layout"] == "batch_major" else (L, S)
    axis = 2 if p["layout"] == "batch_major" else 1
    G = None if a.G is None else a.G.reshape(a.G.shape[:3] + shape)
    t = FTM(a.c.reshape(a.c.shape[:2] + shape), G, a.r.reshape(a.r.shape[:2] + shape))
    return bx.scale(p["inv_L"], bx.sum(t, axis))


# ------------------------------------------------------------------------------------------
# the evaluator


def _ball_matrix(M):
    rows = [[_ball(v) for v in row] for row in M]
    Wm = np.array([[m for m, _ in row] for row in rows], dtype=np.float64).reshape(len(M), -1)
    Wr = np.array([[r for _, r in row] for row in rows], dtype=np.float64).reshape(len(M), -1)
    return Wm, (Wr if Wr.any() else None)


def _ball_vector(v):
    balls = [_ball(q) for q in v]
    m = np.array([b[0] for b in balls], dtype=np.float64)
    r = np.array([b[1] for b in balls], dtype=np.float64)
    return m, (r if r.any() else None)


def _params(nd, width: int) -> dict:
    """Node ``nd``'s parameters as float balls."""
    p = nd.params
    op = nd.op
    if op == "affine":
        W = _ball_matrix(p["W"])
        b = None if p.get("b") is None else _ball_vector(p["b"])
        return {"W": W, "b": b}
    if op in CONSTANT_OPS:
        cs = list(p["c"]) if len(p["c"]) == width else list(p["c"]) * width
        if op == "div_constant":
            cs = [1 / Fraction(v) for v in cs]
        return {"c": _const([_ball(v) for v in cs])}
    if op == "leaky_relu":
        al = Fraction(p["alpha"])
        return {"alpha": _ball(al), "beta": _ball(1 - al)}
    if op == "gelu":
        return _gelu_params(p.get("divisor"))
    if op == "gelu_tanh":
        k, a = p.get("k"), p.get("a")
        return {"k": _K_TANH if k is None else _ball(Fraction(k)),
                "a": _ball(Fraction(44715, 10**6) if a is None else Fraction(a))}
    if op in ("layer_norm", "rms_norm"):
        eps = Fraction(p["eps"])
        em, er = _ball(eps)
        eps_lo = float(fo.down(em - er))
        if not eps_lo > 0:  # a subnormal eps: no float rule (the caller refuses the graph)
            raise ValueError("eps below the float64 range")
        out = {"eps": (em, er), "eps_lo": eps_lo, "inv_n": _ball(Fraction(1, len(p["weight"]))),
               "weight": _const([_ball(v) for v in p["weight"]])}
        if op == "layer_norm":
            out["bias"] = _const([_ball(v) for v in p["bias"]])
        out["cap_lo"], out["cap_hi"] = _norm_cap(op, p["weight"], p.get("bias") if op == "layer_norm" else None)
        return out
    if op == "mean_tokens":
        L = p.get("sequence_length")
        return {"L": L, "layout": p.get("layout") or "batch_major", "inv_L": None}
    return dict(p)


class FloatGraphEvaluator:
    """A layer graph's weights as float balls and its box pass (build it with :func:`evaluator`).

    :meth:`ranges` gives ``(lo, hi, ok)``: ``lo[b, k] <= Y_k(x) <= hi[b, k]`` for every ``x`` of box
    ``b`` and every output ``k`` (row by row, as :meth:`Graph.evaluate` lists them) where
    ``ok[b]``; elsewhere the box goes to the Arb path."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.nodes = _needed(graph)
        self.params = {nd.name: _params(nd, graph.widths[nd.inputs[0]]) for nd in self.nodes}
        for nd in self.nodes:
            if nd.op == "mean_tokens":
                L = self.params[nd.name]["L"] or graph.tokens_of[nd.inputs[0]]
                self.params[nd.name]["inv_L"] = _ball(Fraction(1, L))
        self.d = graph.input_count

    def _entries_per_box(self) -> int:
        g = self.graph
        worst = max([g.tokens * g.in_width] + [g.tokens_of[nd.name] * g.widths[nd.name] for nd in self.nodes])
        return worst * (self.d + 1)

    def ranges(self, lo, hi):
        """``(lo, hi, ok)`` over the boxes ``[lo_b, hi_b]`` (sequences of exact rationals, one per
        input, row by row): arrays ``(B, k)``, ``(B, k)``, ``(B,)``."""
        B = len(lo)
        k = self.graph.output_count
        x0, h = centres(lo, hi)
        out_lo, out_hi = np.full((B, k), -np.inf), np.full((B, k), np.inf)
        ok = np.zeros(B, dtype=bool)
        step = max(1, _BATCH_ENTRIES // self._entries_per_box())
        for s in range(0, B, step):
            sl = slice(s, s + step)
            with np.errstate(all="ignore"):
                a, b, bad = self._batch(x0[sl], h[sl])
            fin = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1) & ~bad
            out_lo[sl], out_hi[sl], ok[sl] = np.where(fin[:, None], a, -np.inf), np.where(fin[:, None], b, np.inf), fin
        return out_lo, out_hi, ok

    def forward(self, bx: Boxes, x0) -> FTM:
        """The output's model ``(B, out_width, out_tokens)`` over the boxes ``x0 +- bx.h``."""
        g = self.graph
        B, d = x0.shape
        T, W = g.tokens, g.in_width
        c = x0.reshape(B, T, W).transpose(0, 2, 1).copy()  # entry t W + col -> [col, t]
        G = np.zeros((B, d, W, T))
        idx = np.arange(d)
        G[:, idx, idx % W, idx // W] = 1.0
        vals = {g.input_name: FTM(c, G, np.zeros((B, W, T)))}
        for nd in self.nodes:
            vals[nd.name] = _node(bx, nd, self.params[nd.name], [vals[i] for i in nd.inputs])
        return vals[g.output]

    def _batch(self, x0, h):
        bx = Boxes(h)
        Y = self.forward(bx, x0)
        lo, hi = bx.range(Y)
        B = x0.shape[0]
        lo = np.broadcast_to(lo, (B,) + lo.shape[1:]).transpose(0, 2, 1).reshape(B, -1)
        hi = np.broadcast_to(hi, (B,) + hi.shape[1:]).transpose(0, 2, 1).reshape(B, -1)
        return lo, hi, bx.bad


def _needed(graph: Graph) -> list:
    """The nodes the output reads (directly or through others), in evaluation order."""
    need = {graph.output}
    for nd in reversed(graph.nodes):
        if nd.name in need:
            need.update(nd.inputs)
    return [nd for nd in graph.nodes if nd.name in need]


def _node(bx: Boxes, nd, p: dict, args: list) -> FTM:
    """Node ``nd``'s model from its inputs' (the rules of the module docstring)."""
    op = nd.op
    a = args[0]
    if op == "affine":
        y = bx.linear(p["W"], a)
        return y if p["b"] is None else add_bias(bx, y, p["b"])
    if op == "add":
        return bx.add(a, args[1])
    if op in ("add_constant",):
        return bx.add(a, p["c"])
    if op in ("mul_constant", "div_constant"):
        return bx.mul(a, p["c"])
    if op == "relu":
        return bx.relu(a)
    if op == "leaky_relu":
        return bx.add(bx.scale(p["alpha"], a), bx.scale(p["beta"], bx.relu(a)))
    if op == "exp":
        return _exp(bx, a)
    if op in _VALUES:
        return _smooth(bx, op, a)
    if op == "gelu":
        return _gelu(bx, a, p)
    if op == "gelu_tanh":
        return _gelu_tanh(bx, a, p["k"], p["a"])
    if op == "layer_norm":
        return _norm(bx, p, a, True)
    if op == "rms_norm":
        return _norm(bx, p, a, False)
    if op == "slice":
        return a[slice(p["start"], p["stop"])]
    if op == "concat":
        return _concat(args)
    if op == "select_tokens":
        return a[(slice(None), list(p["indices"]))]
    if op == "mean_tokens":
        return _mean_tokens(bx, p, a)
    raise ValueError(f"node {nd.name!r}: no float rule for {op!r}")


def evaluator(graph: Graph):
    """A :class:`FloatGraphEvaluator`, or None where some operation the output reads has no float
    rule (``attention``) or a parameter is outside the float64 range: then the Arb path runs."""
    if not isinstance(graph, Graph):
        return None
    if any(nd.op not in FLOAT_OPS for nd in _needed(graph)):
        return None
    try:
        return FloatGraphEvaluator(graph)
    except (ValueError, OverflowError):
        return None
