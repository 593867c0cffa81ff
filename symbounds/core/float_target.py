"""The target ``g`` enclosed over boxes in outward-rounded float64, compiled once.

``compile_target(g, d)`` turns a parsed target (:func:`symbounds.core.expr.parse_target`) into a
list of array operations; :meth:`FloatTarget.enclose` then encloses ``g`` over a whole batch of
boxes ``[lo_b, hi_b]`` at once, in the arithmetic of :mod:`symbounds.core.outward`
(``down(fl(a op b)) <= a op b <= up(fl(a op b))`` for one correctly rounded operation).

Every operation of the target grammar is enclosed with a proved bound:

* ``+``, ``-``, ``*``, ``/``, integer powers (square-and-multiply on the ends), ``sqrt``
  (correctly rounded in IEEE 754), ``abs``, ``min``, ``max``: the exact range of the operation on
  its argument intervals, rounded outward.  ``fl`` is monotone, so the rounded extreme of the ends
  is the rounding of the exact extreme.
* ``exp``: :func:`symbounds.core.outward.exp_lower` / ``exp_upper`` at the ends.
* ``log``: ``x = 2^e m`` with ``m`` in ``[1/sqrt 2, sqrt 2)``, ``log m = 2 atanh s``,
  ``s = (m - 1)/(m + 1)``, ``|s| <= 0.1716``; ``s`` is enclosed by outward rounding, the series
  ``2 s sum_{k<11} s^{2k}/(2k+1)`` (all terms of one sign) has relative rounding error at most
  ``gamma_23 (1 + u) < 2.7e-15`` and truncation ``t^11 / (23 (1 - t)) < 7e-19`` (``t = s^2``),
  taken as :data:`_LOG_REL` ``= 2^-44``; ``e ln 2`` from adjacent doubles around ``ln 2``.
* ``sin``, ``cos``: at the float midpoint ``m`` of the argument interval (half-width ``r``), a
  point enclosure (Cody-Waite reduction by ``pi/2 = C1 + C2``, ``k C1`` exact for ``|k| < 2^21``,
  and Taylor polynomials on ``|r'| <= 0.8`` with absolute error at most :data:`_TRIG_ABS`
  ``= 2^-45``); then ``sin X`` lies in ``sin m +- r`` (``|sin'| <= 1``), in
  ``sin m + cos m [-r, r] + [-r^2/2, r^2/2]`` (Taylor, second order) and in ``[-1, 1]``: the
  intersection of the three; and where ``cos`` keeps its sign on ``X`` (``|cos m| > r``), between
  the point enclosures at the ends (``sin`` is monotone there).  Arguments beyond ``2^20`` in magnitude are not enclosed.
* constants (``pi``, ``sqrt(2)``, rationals, ...): a 200-bit ball rounded outward to doubles.

A NaN end marks a box the floats do not enclose (a division by an interval containing 0, ``log``
or ``sqrt`` of an interval reaching below 0, an overflow, a power the grammar allows but this
module does not compile): the caller then encloses ``g`` over that box in Arb balls, as before.
Each enclosure contains Arb's (ball arithmetic propagates the same ranges with mid-radius
bounds, which are never tighter than the exact range of the ends) up to rounding; the callers
fall back to Arb where the float bound misses its limit by no more than rounding could explain.
"""

from __future__ import annotations

import functools
import math

import flint
import numpy as np
import sympy as sp

from . import outward as fo
from .exact import arb_to_fraction
from .expr import variables

__all__ = ["FloatTarget", "compile_target", "cos_point", "interval_cos", "interval_sin", "log_lower", "log_upper",
           "sin_point"]

_NAN = np.nan


# ------------------------------------------------------------------------------------------
# constants as float intervals

def _ball_interval(v: flint.arb) -> tuple[float, float]:
    """Doubles ``lo <= v <= hi`` for every point of the ball ``v``."""
    if not v.is_finite():
        return _NAN, _NAN
    lo_m, lo_r = fo.from_fraction(arb_to_fraction(v.lower()))
    hi_m, hi_r = fo.from_fraction(arb_to_fraction(v.upper()))
    lo = lo_m if lo_r == 0 else float(fo.down(lo_m - lo_r))
    hi = hi_m if hi_r == 0 else float(fo.up(hi_m + hi_r))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return _NAN, _NAN
    return lo, hi


def _fraction_interval(q) -> tuple[float, float]:
    m, r = fo.from_fraction(q)
    if r == 0:
        return m, m
    if not math.isfinite(r):
        return _NAN, _NAN
    return float(fo.down(m - r)), float(fo.up(m + r))


with flint.ctx.workprec(200):
    _HALF_PI = flint.arb.pi() / 2
    _LN2 = flint.arb(2).log()
    # C1: pi/2 to 32 significant bits (k C1 is exact for |k| < 2^21)
    _m, _e = math.frexp(float(_HALF_PI.mid()))
    _PIO2_C1 = math.ldexp(math.floor(_m * 2**32), _e - 32)
    _rest = _HALF_PI - flint.arb(_PIO2_C1)
    _mid = float(_rest.mid())
    _PIO2_C2LO, _PIO2_C2HI = float(np.nextafter(_mid, -1.0)), float(np.nextafter(_mid, 1.0))
    assert flint.arb(_PIO2_C2LO) < _rest < flint.arb(_PIO2_C2HI)
    _mid = float(_LN2.mid())
    _LN2_LO, _LN2_HI = float(np.nextafter(_mid, 0.0)), float(np.nextafter(_mid, 1.0))
    assert flint.arb(_LN2_LO) < _LN2 < flint.arb(_LN2_HI)
    del _m, _e, _rest, _mid


# ------------------------------------------------------------------------------------------
# log

_LOG_TERMS = 11
_LOG_COEFFS = [1.0 / (2 * k + 1) for k in range(_LOG_TERMS)]
#: Relative error of ``2 s sum_k s^{2k}/(2k+1)`` as computed (module docstring), taken generously.
_LOG_REL = 2.0**-44
_SQRT_HALF = math.sqrt(0.5)


def _atanh_series(s):
    """``2 s sum_{k<11} s^{2k}/(2k+1)`` in floats (relative error at most :data:`_LOG_REL`)."""
    t = s * s
    q = np.full_like(s, _LOG_COEFFS[-1])
    for c in reversed(_LOG_COEFFS[:-1]):
        q = q * t + c
    return 2.0 * s * q


def _log_bound(x, upper: bool):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        ok = np.isfinite(x) & (x > 0)
        xs = np.where(ok, x, 1.0)
        m, e = np.frexp(xs)  # xs = m 2^e, m in [1/2, 1)
        low = m < _SQRT_HALF
        m = np.where(low, m * 2.0, m)  # exact
        e = np.where(low, e - 1, e).astype(np.float64)
        num = m - 1.0  # exact (Sterbenz: m in [1/2, 2])
        den = m + 1.0
        if upper:  # an upper bound of num / (m + 1): divide a positive num by a smaller denominator
            s = fo.up(num / np.where(num >= 0, fo.down(den), fo.up(den)))
        else:
            s = fo.down(num / np.where(num >= 0, fo.up(den), fo.down(den)))
        p = _atanh_series(s)  # increasing in s
        p = p + np.abs(p) * _LOG_REL + fo.ETA if upper else p - np.abs(p) * _LOG_REL - fo.ETA
        p = fo.up(p) if upper else fo.down(p)
        a1, a2 = e * _LN2_LO, e * _LN2_HI  # e ln 2 lies between them (e is an integer)
        if upper:
            out = fo.up(fo.up(np.maximum(a1, a2)) + p)
        else:
            out = fo.down(fo.down(np.minimum(a1, a2)) + p)
    out = np.where(ok, out, _NAN)
    if upper:
        out = np.where(x == np.inf, np.inf, out)
    return out


def log_lower(x):
    """A lower bound of ``log x`` for every double in ``x`` (NaN where ``x <= 0`` or not a number)."""
    return _log_bound(x, False)


def log_upper(x):
    """An upper bound of ``log x`` for every double in ``x`` (``inf`` at ``inf``, NaN where ``x <= 0``)."""
    return _log_bound(x, True)


# ------------------------------------------------------------------------------------------
# sin and cos

_SIN_COEFFS = [(-1) ** k / math.factorial(2 * k + 1) for k in range(9)]
_COS_COEFFS = [(-1) ** k / math.factorial(2 * k) for k in range(10)]
#: Absolute error of the polynomials on ``|r| <= 0.8``: truncation ``< 0.8^19/19! < 2e-19``,
#: Horner's rounding ``gamma_20 e^{0.64} < 5e-15`` (coefficients included); taken as 2^-45.
_TRIG_ABS = 2.0**-45
_TRIG_MAX = 2.0**20
_R_MAX = 0.8


def _poly(r, coeffs, odd: bool):
    t = r * r
    q = np.full_like(r, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        q = q * t + c
    return q * r if odd else q


def _reduced(m):
    """``(k mod 4, sin r', cos r')`` enclosures with ``m = k pi/2 + r'``: four arrays of ends
    ``(s_lo, s_hi, c_lo, c_hi)`` of ``sin r'``, ``cos r'``; NaN where ``|m| > 2^20``."""
    ok = np.isfinite(m) & (np.abs(m) <= _TRIG_MAX)
    m = np.where(ok, m, 0.0)
    k = np.rint(m / (_PIO2_C1 + _PIO2_C2LO))
    head = m - k * _PIO2_C1  # exact: k C1 is a double, within a factor 2 of m when k != 0
    a1, a2 = k * _PIO2_C2LO, k * _PIO2_C2HI
    rlo = fo.down(head - fo.up(np.maximum(a1, a2)))
    rhi = fo.up(head - fo.down(np.minimum(a1, a2)))
    ok &= (rlo >= -_R_MAX) & (rhi <= _R_MAX)
    # sin is increasing on [-0.8, 0.8]; cos is even and decreasing in |r|
    s_lo = fo.down(_poly(rlo, _SIN_COEFFS, True) - _TRIG_ABS)
    s_hi = fo.up(_poly(rhi, _SIN_COEFFS, True) + _TRIG_ABS)
    clo_, chi_ = _poly(rlo, _COS_COEFFS, False), _poly(rhi, _COS_COEFFS, False)
    c_lo = fo.down(np.minimum(clo_, chi_) - _TRIG_ABS)
    c_hi = np.where((rlo <= 0) & (rhi >= 0), 1.0, fo.up(np.maximum(clo_, chi_) + _TRIG_ABS))
    q = np.mod(k, 4).astype(np.int64)
    nan = ~ok
    return q, [np.where(nan, _NAN, v) for v in (s_lo, s_hi, c_lo, c_hi)]


def _quadrant(q, s_lo, s_hi, c_lo, c_hi, cosine: bool):
    """Ends of ``sin m`` (or ``cos m``) from those of ``sin r'``, ``cos r'`` and ``q = k mod 4``."""
    if cosine:
        q = (q + 1) % 4  # cos m = sin(m + pi/2)
    lo = np.choose(q, [s_lo, c_lo, -s_hi, -c_hi])
    hi = np.choose(q, [s_hi, c_hi, -s_lo, -c_lo])
    return lo, hi


def sin_point(m):
    """``(lo, hi)`` with ``lo <= sin m <= hi`` for doubles ``m`` (NaN where ``|m| > 2^20``)."""
    with np.errstate(all="ignore"):
        q, parts = _reduced(np.asarray(m, dtype=np.float64))
        return _quadrant(q, *parts, cosine=False)


def cos_point(m):
    """``(lo, hi)`` with ``lo <= cos m <= hi`` for doubles ``m`` (NaN where ``|m| > 2^20``)."""
    with np.errstate(all="ignore"):
        q, parts = _reduced(np.asarray(m, dtype=np.float64))
        return _quadrant(q, *parts, cosine=True)


def _interval_trig(lo, hi, cosine: bool):
    lo, hi = np.broadcast_arrays(lo, hi)
    shape = lo.shape
    a, b = _interval_trig_flat(lo.ravel(), hi.ravel(), cosine)
    return a.reshape(shape), b.reshape(shape)


def _interval_trig_flat(lo, hi, cosine: bool):
    with np.errstate(all="ignore"):
        m = lo * 0.5 + hi * 0.5
        m = np.minimum(np.maximum(m, lo), hi)
        r = fo.up(np.maximum(m - lo, hi - m))
        # the centres and both ends reduced in one call: each element's arithmetic is the same,
        # and a batch of a dozen boxes pays NumPy's per-call cost once instead of three times
        n = m.shape[0]
        q3, parts3 = _reduced(np.concatenate([m, lo, hi]))
        q, qa, qb = q3[:n], q3[n:2 * n], q3[2 * n:]
        s_lo, s_hi, c_lo, c_hi = (v[:n] for v in parts3)
        pa, pb = [v[n:2 * n] for v in parts3], [v[2 * n:] for v in parts3]
        f_lo, f_hi = _quadrant(q, s_lo, s_hi, c_lo, c_hi, cosine)
        # the derivative at m: cos m for sin, -sin m for cos
        d_lo, d_hi = _quadrant(q, s_lo, s_hi, c_lo, c_hi, not cosine)
        if cosine:
            d_lo, d_hi = -d_hi, -d_lo
        slope = np.maximum(np.abs(d_lo), np.abs(d_hi))
        second = fo.up(fo.up(slope * r) + fo.up(fo.up(r * r) * 0.5))
        out_lo = np.maximum(np.maximum(fo.down(f_lo - r), fo.down(f_lo - second)), -1.0)
        out_hi = np.minimum(np.minimum(fo.up(f_hi + r), fo.up(f_hi + second)), 1.0)
        # monotone on [lo, hi] when the derivative keeps its sign there (|f''| <= 1): the ends'
        # values, the exact range up to their enclosures
        inc = fo.down(d_lo - r) > 0
        dec = fo.up(d_hi + r) < 0
        if inc.any() or dec.any():
            a_lo, a_hi = _quadrant(qa, *pa, cosine=cosine)
            b_lo, b_hi = _quadrant(qb, *pb, cosine=cosine)
            mono_lo = np.where(inc, a_lo, b_lo)
            mono_hi = np.where(inc, b_hi, a_hi)
            mono = (inc | dec) & ~(np.isnan(mono_lo) | np.isnan(mono_hi))
            out_lo = np.where(mono, np.maximum(out_lo, mono_lo), out_lo)
            out_hi = np.where(mono, np.minimum(out_hi, mono_hi), out_hi)
        bad = np.isnan(f_lo) | np.isnan(f_hi) | np.isnan(r)
        return np.where(bad, _NAN, out_lo), np.where(bad, _NAN, out_hi)


def interval_sin(lo, hi):
    """``(a, b)`` with ``a <= sin x <= b`` for every ``x`` in ``[lo, hi]`` (elementwise)."""
    return _interval_trig(np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64), False)


def interval_cos(lo, hi):
    """``(a, b)`` with ``a <= cos x <= b`` for every ``x`` in ``[lo, hi]`` (elementwise)."""
    return _interval_trig(np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64), True)


# ------------------------------------------------------------------------------------------
# interval operations on arrays (ends (lo, hi); NaN propagates)

def _add(a, b):
    return fo.down(a[0] + b[0]), fo.up(a[1] + b[1])


def _mul(a, b):
    p = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    lo = np.minimum(np.minimum(p[0], p[1]), np.minimum(p[2], p[3]))
    hi = np.maximum(np.maximum(p[0], p[1]), np.maximum(p[2], p[3]))
    bad = np.isnan(p[0]) | np.isnan(p[1]) | np.isnan(p[2]) | np.isnan(p[3])
    return np.where(bad, _NAN, fo.down(lo)), np.where(bad, _NAN, fo.up(hi))


def _recip(a):
    bad = ~((a[0] > 0) | (a[1] < 0))  # 0 in the interval (or NaN)
    lo, hi = fo.down(1.0 / a[1]), fo.up(1.0 / a[0])
    return np.where(bad, _NAN, lo), np.where(bad, _NAN, hi)


def _pow_nonneg(x, n: int, upper: bool):
    """A bound of ``x^n`` for ``x >= 0`` (square-and-multiply, every product rounded outward)."""
    rnd = fo.up if upper else (lambda y: np.maximum(fo.down(y), 0.0))
    result = np.ones_like(x)
    base = x
    while n:
        if n & 1:
            result = rnd(result * base)
        n >>= 1
        if n:
            base = rnd(base * base)
    return result


def _pow_int(a, n: int):
    lo, hi = a
    if n == 0:
        return np.where(np.isnan(lo) | np.isnan(hi), _NAN, 1.0), np.where(np.isnan(lo) | np.isnan(hi), _NAN, 1.0)
    if n < 0:
        return _recip(_pow_int(a, -n))
    if n % 2 == 0:
        mag_lo = np.where(lo >= 0, lo, np.where(hi <= 0, -hi, 0.0))
        mag_hi = np.maximum(np.abs(lo), np.abs(hi))
        out_lo, out_hi = _pow_nonneg(mag_lo, n, False), _pow_nonneg(mag_hi, n, True)
    else:  # odd: increasing
        out_lo = np.where(lo >= 0, _pow_nonneg(np.abs(lo), n, False), -_pow_nonneg(np.abs(lo), n, True))
        out_hi = np.where(hi >= 0, _pow_nonneg(np.abs(hi), n, True), -_pow_nonneg(np.abs(hi), n, False))
    bad = np.isnan(lo) | np.isnan(hi)
    return np.where(bad, _NAN, out_lo), np.where(bad, _NAN, out_hi)


def _sqrt(a):
    bad = ~(a[0] >= 0)
    lo = np.maximum(fo.down(np.sqrt(np.where(bad, 0.0, a[0]))), 0.0)
    hi = fo.up(np.sqrt(np.where(bad, 0.0, a[1])))
    return np.where(bad, _NAN, lo), np.where(bad, _NAN, hi)


def _abs(a):
    lo, hi = a
    out_lo = np.where(lo >= 0, lo, np.where(hi <= 0, -hi, 0.0))
    out_hi = np.maximum(np.abs(lo), np.abs(hi))
    bad = np.isnan(lo) | np.isnan(hi)
    return np.where(bad, _NAN, out_lo), np.where(bad, _NAN, out_hi)


def _exp(a):
    return fo.exp_lower(a[0]), fo.exp_upper(a[1])


def _log(a):
    return log_lower(a[0]), log_upper(a[1])


def _minmax(args, f):
    lo, hi = args[0]
    bad = np.isnan(lo) | np.isnan(hi)
    for b in args[1:]:
        lo, hi = f(lo, b[0]), f(hi, b[1])
        bad |= np.isnan(b[0]) | np.isnan(b[1])
    return np.where(bad, _NAN, lo), np.where(bad, _NAN, hi)


# ------------------------------------------------------------------------------------------
# compilation


class FloatTarget:
    """``g`` compiled to array operations: :meth:`enclose` over a batch of boxes."""

    def __init__(self, g, d: int):
        self.d = d
        self.steps: list = []  # (op, argument slots, parameter)
        self._slot: dict = {}
        self.out = self._compile(g, variables(d))

    def _emit(self, op, args=(), param=None):
        self.steps.append((op, tuple(args), param))
        return len(self.steps) - 1

    def _compile(self, e, xs):
        if e in self._slot:
            return self._slot[e]
        slot = self._compile_node(e, xs)
        self._slot[e] = slot
        return slot

    def _compile_node(self, e, xs):
        if e.is_Symbol:
            return self._emit("var", param=xs.index(e))
        if e.is_number:
            if e.is_Rational:
                return self._emit("const", param=_fraction_interval(_fraction(e)))
            from .contexts import BallContext

            ctx = BallContext(200)
            with ctx.scope():
                try:
                    v = ctx.from_sympy(e)
                except (ValueError, TypeError, ArithmeticError, NotImplementedError):  # left to Arb per box
                    return self._emit("fail")
            return self._emit("const", param=_ball_interval(v))
        args = [self._compile(a, xs) for a in e.args]
        if isinstance(e, sp.Add):
            return self._emit("add", args)
        if isinstance(e, sp.Mul):
            return self._emit("mul", args)
        if isinstance(e, sp.Pow):
            _base, ex = e.args
            if ex.is_Integer:
                return self._emit("powi", args[:1], int(ex))
            if ex.is_Rational and ex.q == 2:
                root = self._emit("sqrt", args[:1])
                return self._emit("powi", [root], int(ex.p))
            return self._emit("fail")
        unary = {sp.exp: "exp", sp.log: "log", sp.sin: "sin", sp.cos: "cos", sp.Abs: "abs"}
        for cls, name in unary.items():
            if isinstance(e, cls) and len(args) == 1:
                return self._emit(name, args)
        if isinstance(e, sp.Min):
            return self._emit("min", args)
        if isinstance(e, sp.Max):
            return self._emit("max", args)
        return self._emit("fail")

    def enclose(self, lo, hi):
        """``(g_lo, g_hi)``: doubles enclosing ``g`` over each box ``[lo_b, hi_b]`` (arrays of
        shape ``(B, d)`` of doubles that are the boxes' exact ends); NaN where not enclosed."""
        lo = np.asarray(lo, dtype=np.float64).reshape(-1, self.d)
        hi = np.asarray(hi, dtype=np.float64).reshape(-1, self.d)
        B = lo.shape[0]
        vals: list = []
        with np.errstate(all="ignore"):
            for op, args, param in self.steps:
                a = [vals[i] for i in args]
                if op == "var":
                    v = (lo[:, param], hi[:, param])
                elif op == "const":
                    v = (np.full(B, param[0]), np.full(B, param[1]))
                elif op == "add":
                    v = a[0]
                    for b in a[1:]:
                        v = _add(v, b)
                elif op == "mul":
                    v = a[0]
                    for b in a[1:]:
                        v = _mul(v, b)
                elif op == "powi":
                    v = _pow_int(a[0], param)
                elif op == "sqrt":
                    v = _sqrt(a[0])
                elif op == "abs":
                    v = _abs(a[0])
                elif op == "exp":
                    v = _exp(a[0])
                elif op == "log":
                    v = _log(a[0])
                elif op == "sin":
                    v = interval_sin(*a[0])
                elif op == "cos":
                    v = interval_cos(*a[0])
                elif op == "min":
                    v = _minmax(a, np.minimum)
                elif op == "max":
                    v = _minmax(a, np.maximum)
                else:  # "fail"
                    v = (np.full(B, _NAN), np.full(B, _NAN))
                vals.append(v)
            g_lo, g_hi = vals[self.out]
            bad = ~(np.isfinite(g_lo) & np.isfinite(g_hi))
        return np.where(bad, _NAN, g_lo), np.where(bad, _NAN, g_hi)

    def enclose_boxes(self, boxes):
        """:meth:`enclose` for :class:`symbounds.core.boxes.Box` objects (ends as Fractions;
        an end that is not a double is rounded outward)."""
        lo = np.array([[_end(v, False) for v in b.lo] for b in boxes], dtype=np.float64).reshape(-1, self.d)
        hi = np.array([[_end(v, True) for v in b.hi] for b in boxes], dtype=np.float64).reshape(-1, self.d)
        return self.enclose(lo, hi)


def _fraction(e):
    from fractions import Fraction

    return Fraction(int(e.p), int(e.q))


def _end(q, upper: bool) -> float:
    m, r = fo.from_fraction(q)
    if r == 0:
        return m
    return float(fo.up(m + r)) if upper else float(fo.down(m - r))


@functools.lru_cache(maxsize=32)
def compile_target(g, d: int) -> FloatTarget:
    """The float enclosure of ``g`` (compiled once per process for each target)."""
    return FloatTarget(g, d)
