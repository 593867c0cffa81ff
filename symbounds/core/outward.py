"""Outward-rounded float64 arithmetic on NumPy arrays: the primitives of the fast box evaluator.

NumPy rounds every ``+``, ``-``, ``*`` and ``/`` to the nearest double (IEEE 754).  So the exact
result ``z`` of one such operation and its computed value ``y`` satisfy
``|z - y| <= u |y| + eta/2`` (``u = 2^-53`` the unit roundoff, ``eta = 2^-1074`` the smallest
subnormal, which covers underflow), hence::

    down(y) <= z <= up(y),      up(y) = y + (|y| 2^-51 + eta),  down(y) = y - (|y| 2^-51 + eta),

with the two extra roundings inside ``up`` and ``down`` paid for by the factor 4 (``2^-51 = 4u``;
additions of subnormals are exact).  That is four vectorised passes, where ``numpy.nextafter``
(one ulp, the tightest) is a slow scalar loop.  ``up(-inf)`` is NaN, and a NaN anywhere makes
an enclosure fail (never pass).  ``err(y) = up(2u |y| + eta)`` bounds ``|z - y|``.  Sums and
matrix products are bounded with the a-priori bound of any summation order, with or without
fused multiply-add (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1 and
§3.5): for ``n`` terms,

    |fl(sum_k a_k b_k) - sum_k a_k b_k| <= gamma_n sum_k |a_k| |b_k| + n eta,  gamma_n = n u / (1 - n u).

Every bound below is computed from floats and rounded up once more, so it is itself an upper
bound.  ``exp`` is not correctly rounded in any library, so :func:`exp_bounds` encloses it from
correctly rounded operations only: ``e^x = 2^k e^r`` with ``|r| <= 0.35`` and a Taylor polynomial
whose rounding and truncation errors are bounded a priori.

Nothing here decides anything: a caller turns these enclosures into a verdict, and falls back to
Arb balls when a float enclosure is too wide or not finite.
"""

from __future__ import annotations

import math

import flint
import numpy as np

__all__ = [
    "ETA",
    "LN_TINY",
    "TINY",
    "U",
    "down",
    "err",
    "exp_bounds",
    "exp_lower",
    "exp_upper",
    "from_fraction",
    "matmul_err",
    "matmul_up",
    "sum_down",
    "sum_up",
    "up",
]

U = 2.0**-53
ETA = 2.0**-1074
_INF = np.inf

#: The threshold below which a positive quantity of the box pass (a softmax weight ``e^a`` of a
#: far token; :mod:`symbounds.core.float_boxes` and its fused kernel) is replaced by the constant
#: enclosure ``[0, TINY]``: ``2^-300``.  Why: a multiplication with a subnormal operand or result
#: costs a microcode assist on x86 cores (some 50 times an ordinary one), and a far token's
#: weight ``e^a``, ``a < -708``, is subnormal, and so are its products.  ``[0, 2^-300]`` is a
#: normal constant: its product with a radius (at least the fused kernel's error term
#: ``2^-500``) and then with ``4u`` (the next outward rounding) is ``2^-851`` or more, so it stays
#: normal for further factors down to ``2^-171``.  What it costs: a weight below ``2^-300`` loses
#: its gradient, and the readout's enclosure widens by at most ``n 2^-300`` times the values'
#: size (about ``10^-87`` at ``n = 1024``), far below any claim's resolution.
TINY = 2.0**-300
#: A double below ``ln TINY = -300 ln 2 = -207.944...`` (checked at import in 200-bit balls):
#: ``a < LN_TINY`` implies ``e^a < TINY``.
LN_TINY = -208.0


_FOUR_U = 2.0**-51


def up(y):
    """An upper bound of the exact result of the one operation that rounded to ``y``."""
    return y + (np.abs(y) * _FOUR_U + ETA)


def down(y):
    """A lower bound of the exact result of the one operation that rounded to ``y``."""
    return y - (np.abs(y) * _FOUR_U + ETA)


def err(y):
    """An upper bound of ``|z - y|`` for the exact result ``z`` of one operation rounded to ``y``."""
    return up(np.abs(y) * (2 * U) + ETA)


def _gamma_factor(n: int) -> float:
    """A double ``>= 1 + 2 n u``, which is ``>= 1 / (1 - gamma_n)`` for ``n u <= 1/4``."""
    if n * U > 0.25:
        raise ValueError(f"a sum of {n} terms is too long for the float64 error bound")
    return float(up(1.0 + 2 * n * U))


def sum_up(a, axis):
    """An upper bound of the exact sum of the nonnegative ``a`` along ``axis``.

    Float additions of doubles never underflow (a sum of multiples of ``eta`` below the normal
    range is exact), so ``sum <= fl(sum) / (1 - gamma_{n-1})``."""
    n = a.shape[axis]
    return up(a.sum(axis=axis) * _gamma_factor(n))


def sum_down(a, axis):
    """A lower bound of the exact sum of the nonnegative ``a`` along ``axis``: with ``n`` terms,
    ``fl(sum) <= sum (1 + gamma_{n-1})``, so ``sum >= fl(sum) (1 - 2 n u)`` for ``n u <= 1/4``."""
    n = a.shape[axis]
    _gamma_factor(n)  # the same range check as sum_up
    return down(a.sum(axis=axis) * float(down(1.0 - 2 * n * U)))


def matmul_up(A, B):
    """An upper bound of the exact ``A @ B`` for nonnegative ``A`` and ``B`` (NumPy broadcasting).

    With ``T = fl(A @ B)``: ``A B <= (T + n eta) / (1 - gamma_n) <= T (1 + 2nu) + 2 n eta``."""
    n = A.shape[-1]
    T = np.matmul(A, B)
    return up(up(T * _gamma_factor(n)) + 2 * n * ETA)


def matmul_err(absA, absB):
    """An upper bound of ``|fl(A @ B) - A @ B|`` given ``|A|`` and ``|B|``:
    ``gamma_n |A||B| + n eta <= 2 n u (T (1 + 2nu) + 2 n eta) + n eta``."""
    n = absA.shape[-1]
    bound = matmul_up(absA, absB)
    return up(up(bound * float(up(2 * n * U))) + n * ETA)


# ------------------------------------------------------------------------------------------
# exp

def _ln2_split() -> tuple[float, float, float]:
    """``(C1, C2lo, C2hi)`` with ``C1 + C2lo < ln 2 < C1 + C2hi``: ``C1`` is ln 2 with its last 21
    bits cleared (so ``k C1`` is exact for ``|k| < 2^11``, Cody and Waite), ``C2lo < C2hi`` adjacent
    doubles around ``ln 2 - C1``; decided in 200-bit balls."""
    c1 = float.fromhex("0x1.62e42fee00000p-1")
    with flint.ctx.workprec(200):
        rest = flint.arb(2).log() - flint.arb(c1)
        mid = float(rest.mid())
        lo, hi = float(np.nextafter(mid, -1.0)), float(np.nextafter(mid, 1.0))
        assert flint.arb(lo) < rest < flint.arb(hi)
    return c1, lo, hi


_LN2_C1, _LN2_C2LO, _LN2_C2HI = _ln2_split()
_DEGREE = 13
_COEFFS = [1.0 / math.factorial(j) for j in range(_DEGREE + 1)]
#: Relative error of the polynomial on |r| <= 0.36: Horner's rounding gamma_{2N} e^{|r|} (Higham
#: Eq. 5.3), the coefficients' u e^{|r|}, and the truncation |r|^{N+1} / (N+1)! e^{|r|} < 1.1e-17,
#: over e^r >= e^{-|r|}: at most (2N+1) u (1.01) e^{0.72} + 1.6e-17 < 2^-47.  Taken as 2^-44.
_REL = 2.0**-44
#: Below this, e^x < 2^-1075 (half the smallest subnormal); above, e^x exceeds the largest double
#: (ln of the largest double is 709.7827...).
_X_MIN = -745.2
_X_MAX = 709.79
_MAX = float(np.finfo(np.float64).max)


def _exp_bound(x, upper: bool):
    """``e^x`` bounded from above (``upper``) or below, elementwise, for doubles ``x``.

    ``k = round(x / ln 2)``; ``r = x - k ln 2`` is enclosed in ``[r_lo, r_hi]`` (``ln 2 = C1 + C2``
    split as in :func:`_ln2_split`, every inexact product and difference rounded outward) and
    ``e^x`` lies in
    ``[2^k e^{r_lo}, 2^k e^{r_hi}]`` (``exp`` is increasing); the polynomial's error is ``_REL``,
    and scaling by ``2^k`` is exact apart from underflow and overflow, which ``down``/``up`` cover."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _exp_bound_raw(np.asarray(x, dtype=np.float64), upper)


def _exp_bound_raw(x, upper: bool):
    lowx, highx, nan = x < _X_MIN, x > _X_MAX, np.isnan(x)
    out = np.empty_like(x)
    if upper:
        out[lowx] = ETA
        out[highx] = _INF
        out[x == -_INF] = 0.0
    else:
        out[lowx] = 0.0
        out[highx] = _MAX
        out[x == _INF] = _INF
    out[nan] = np.nan
    mid = ~(lowx | highx | nan)
    if mid.all():
        out = _exp_bound_finite(x, upper)
    elif mid.any():  # e.g. a softmax row at a large scale: most terms underflow and cost nothing
        out[mid] = _exp_bound_finite(x[mid], upper)
    return out


def _reduced(x, upper: bool):
    """``(k, r)``: ``k = round(x / ln 2)`` and a bound ``r >= x - k ln 2`` (``upper``) or
    ``r <= x - k ln 2``, for doubles ``|x| < 2^11 ln 2``."""
    k = np.rint(x / (_LN2_C1 + _LN2_C2LO))
    # x - k C1 is exact: k C1 is a double (|k| < 2^11) within a factor 2 of x when k != 0 (Sterbenz)
    head = x - k * _LN2_C1
    a1, a2 = k * _LN2_C2LO, k * _LN2_C2HI  # k (ln 2 - C1) lies between them
    if upper:
        return k, up(head - down(np.minimum(a1, a2)))  # >= x - k ln 2
    return k, down(head - up(np.maximum(a1, a2)))  # <= x - k ln 2


def _taylor(r):
    """``sum_{j <= N} r^j / j!`` by Horner's rule in float64 (within ``_REL`` of ``e^r`` relatively
    for ``|r| <= 0.36``)."""
    p = np.full_like(r, _COEFFS[-1])
    for c in reversed(_COEFFS[:-1]):
        p = p * r + c
    return p


def _exp_bound_finite(x, upper: bool):
    """:func:`_exp_bound` for doubles in ``[_X_MIN, _X_MAX]``."""
    k, r = _reduced(x, upper)
    p = _taylor(r)
    ki = k.astype(np.int64)
    if upper:
        return up(np.ldexp(up(p * _UP_REL), ki))
    scaled = np.ldexp(down(p * _DOWN_REL), ki)
    return np.maximum(np.where(np.isinf(scaled), _MAX, down(scaled)), 0.0)  # down(inf) would be NaN


_UP_REL = float(np.nextafter(1.0 + _REL, 2.0))
_DOWN_REL = float(np.nextafter(1.0 - _REL, 0.0))


def exp_upper(x):
    """An upper bound of ``e^x`` for every double in ``x`` (NaN in, NaN out)."""
    return _exp_bound(x, True)


def exp_lower(x):
    """A lower bound of ``e^x`` for every double in ``x`` (NaN in, NaN out)."""
    return _exp_bound(x, False)


def exp_bounds(x):
    """``(lo, hi)`` with ``lo <= e^x <= hi`` elementwise."""
    return exp_lower(x), exp_upper(x)


def from_fraction(q) -> tuple[float, float]:
    """``(m, r)``: the double nearest the exact rational ``q`` and an upper bound of ``|q - m|``
    (``inf`` radius if ``q`` is outside the double range)."""
    num, den = q.numerator, q.denominator
    if den & (den - 1) == 0 and abs(num) < 2**53 and den <= 2**1000:  # a dyadic double: exact
        return num / den, 0.0
    try:
        m = float(q)
    except OverflowError:
        return (_MAX if q > 0 else -_MAX, math.inf)
    if not math.isfinite(m):
        return (0.0, math.inf)
    from fractions import Fraction

    d = abs(Fraction(q) - Fraction(m))
    if d == 0:
        return m, 0.0
    return m, float(up(float(d)))


def _check_ln_tiny():
    """``LN_TINY < ln TINY``, decided in 200-bit balls."""
    with flint.ctx.workprec(200):
        assert flint.arb(LN_TINY) < flint.arb(2).log() * (-300) and math.ldexp(1.0, -300) == TINY


_check_ln_tiny()
