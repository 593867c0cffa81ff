"""The box pass after the affine prefix, fused into compiled loops (numba), with NumPy's enclosure.

:mod:`symbounds.core.float_boxes` evaluates a batch of boxes one NumPy operation at a time: every
step of the Taylor-model arithmetic and every outward rounding is a pass over a temporary array.
For the networks whose pass after the affine prefix ``Z(x) = F_0 + sum_i x_i F_i`` is *one
attention layer read at the readout's column followed by feed-forward layers* (the [SL26]
network: layer 2 at the readout column, then FFN2), this module runs the same pass box by box
and token by token in loops compiled by numba, with no temporaries.

**The same enclosure.**  Every formula is the one of :mod:`symbounds.core.float_boxes`, step for
step (the product, ``exp`` with its centred one-sided remainder, the reciprocal with
``(L + r)^2 / min|b|^3``, the ReLU hull, the linear ReLU pairs evaluated as ``y``, the softmax
shifted by the row's largest centre and the weight-averaged gradient, the values centred at their
weighted mean and summed as a ratio ``m + (sum_k E_k (V_k - m)) / N`` where
``float_boxes.CENTRE_VALUES`` and ``RATIO_VALUES`` say so, biases and skips), and every
rounding is bounded by the same a-priori bounds (:mod:`symbounds.core.outward`, Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., §2.2, §3.1):

* one operation ``+ - * /`` rounded to nearest to ``y``: the exact result lies in
  ``[down(y), up(y)]``, ``up(y) = y + (4u|y| + eta')`` (``u = 2^-53``), and
  ``err(y) = up(2u|y| + eta')`` bounds its error.  outward.py's ``eta`` is ``2^-1074`` (the
  rounding error of an underflow is at most ``2^-1075``); here ``eta' = 2^-500``, a larger and so
  still valid bound, normal: then ``up(0)``, ``err(0)`` and every remainder are normal doubles,
  and no multiplication by ``4u`` of one of them underflows (an operand or result below
  ``2^-1022`` costs a microcode assist per multiplication on x86 cores, some 50 times an ordinary
  one).  The kernel's bounds are thus those of NumPy's pass or wider by ``2^-500`` per step: an
  enclosure of them;
* a far token's softmax weight below ``TINY = 2^-300`` on the whole box is the constant
  ``[0, TINY]`` in both passes (``float_boxes._tiny_constant``, the same decision from the same
  formula), and the shift's weights and the hull's weight bounds treat scores below ``ln TINY``
  as there: no subnormal double is computed for them;
* a sum of ``n`` terms ``a_k b_k`` computed in **any order**:
  ``|fl(sum) - sum| <= gamma_n sum |a_k||b_k| + n eta`` with ``gamma_n = nu / (1 - nu)``,
  bounded by ``up(up(up(up(T g_n) + 2n eta) c_n) + n eta)`` with ``T`` the float sum of the
  absolute values, ``g_n = up(1 + 2nu) >= 1 / (1 - gamma_n)`` and ``c_n = up(2nu)``; a sum of
  nonnegative terms is at most ``up(fl(sum) g_n)``.  The loops below sum in their own order
  (tokens and rows one by one), NumPy and BLAS in theirs: the bound holds for both, so the two
  passes' enclosures are both sound and differ only by the rounding of those sums (a few units
  in the last place of the coefficients, which the remainders cover);
* ``exp`` from correctly rounded operations only (the same Cody-Waite reduction, degree-13
  Taylor polynomial with relative error ``2^-44`` and outward scaling as
  :func:`symbounds.core.outward.exp_upper`): elementwise, bit for bit the NumPy bound where
  ``eta'`` is below half an ulp of the result (results above ``2^-390``), an enclosure of it below;
* no fused multiply-add is formed (numba's default: no ``fastmath``, so LLVM contracts nothing
  and keeps IEEE semantics, subnormals included: no flush to zero).  A NaN or an infinity
  propagates as in NumPy (the maxima and minima below return NaN when either side is NaN), and
  makes the box fail, never pass.

The gradient-weighted shift of each softmax row is any exact affine function (the softmax does not
depend on it), so it is computed in plain floats here as there.

**One code path, chosen once.**  When numba is not installed, :func:`readout_model` returns
None for every evaluator and the NumPy pass runs; when it is, the kernel serves every evaluator
whose structure it covers (:func:`_plan`), and the others run the NumPy pass.  numba is imported
and the kernel compiled (or loaded from numba's cache) at the first box, not at import.
"""

# The selects ``a if a >= b else b`` and the NaN tests ``x != x`` are deliberate: they keep
# NumPy's NaN semantics (Python's max and min do not) and compile to branch-free selects.
# ruff: noqa: FURB136, PLR0124

from __future__ import annotations

import importlib.util
import math
import weakref

import flint
import numpy as np

from . import outward as fo
from .float_layers import FloatAttention, FloatFeedForward

__all__ = ["ENABLED", "MIN_TOKENS", "readout_model"]


def _numba_present() -> bool:
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


#: Whether the compiled kernel is used (numba, the ``fast`` extra, is installed); decided once, at
#: import.  numba itself is imported (about 1.5 s) and the kernel compiled or loaded from its cache
#: only when a box first needs it (:func:`load`), so commands that evaluate no box do not pay.
ENABLED = _numba_present()
#: The fewest tokens (columns of the embedding) of a model the kernel is used for.  Loading numba
#: and the compiled kernel costs 0.55-0.7 s of CPU per process; a smaller model's whole
#: certificate takes about that long in NumPy (the default one, P = 40: 273 boxes), so it would
#: only get slower (BENCHMARKS.md, "The whole-certificate table beside the previous release").
MIN_TOKENS = 128
#: The numba module once :func:`load` has run (None before, or without numba).
numba = None

_FOUR_U = 2.0**-51
_TWO_U = 2.0**-52
#: The error term of one rounding: ``2^-500`` here, not ``eta = 2^-1074`` (see below).
_ETA = 2.0**-500
#: ``exp_upper``'s value below ``e^-745.2`` (outward.py's, the smallest subnormal).
_ETA_EXP = fo.ETA
#: The constant enclosure ``[0, TINY]`` of a weight below ``TINY`` (outward.py: ``e^a < TINY``
#: for ``a < LN_TINY``).
_TINY, _LN_TINY = fo.TINY, fo.LN_TINY
_NAN = math.nan
_INF = math.inf
# The constants of outward.py's exp bounds (the same values: the tests check the bounds bit for
# bit against outward.exp_lower / exp_upper over the whole double range).
_X_MIN, _X_MAX, _MAXD = -745.2, 709.79, float(np.finfo(np.float64).max)
_C1 = float.fromhex("0x1.62e42fee00000p-1")  # ln 2 with its last 21 bits cleared (Cody and Waite)


def _ln2_rest() -> tuple[float, float]:
    """Adjacent doubles ``C2lo < ln 2 - C1 < C2hi``, decided in 200-bit balls."""
    with flint.ctx.workprec(200):
        rest = flint.arb(2).log() - flint.arb(_C1)
        mid = float(rest.mid())
        lo, hi = float(np.nextafter(mid, -1.0)), float(np.nextafter(mid, 1.0))
        assert flint.arb(lo) < rest < flint.arb(hi)
    return lo, hi


_C2LO, _C2HI = _ln2_rest()
_LN2 = _C1 + _C2LO
_REL = 2.0**-44  # the polynomial's relative error bound (outward.py: below 2^-47, taken as 2^-44)
_UP_REL, _DOWN_REL = float(np.nextafter(1.0 + _REL, 2.0)), float(np.nextafter(1.0 - _REL, 0.0))
_COEFFS = [1.0 / math.factorial(j) for j in range(14)]  # degree 13
_TOP = _COEFFS[-1]
_HORNER = np.array(list(reversed(_COEFFS[:-1])), dtype=np.float64)


def _gamma(n: int) -> tuple[float, float]:
    """``(g_n, c_n)``: ``g_n = up(1 + 2nu) >= 1 / (1 - gamma_n)`` (for ``nu <= 1/4``) and
    ``c_n = up(2nu)``, the factors of outward.py's sums."""
    if n * fo.U > 0.25:
        raise ValueError(f"a sum of {n} terms is too long for the float64 error bound")
    return float(fo.up(1.0 + 2 * n * fo.U)), float(fo.up(2 * n * fo.U))


# ------------------------------------------------------------------------------------------
# the scalar primitives (compiled when numba is present; plain Python otherwise, for the tests)

def _up(y):
    return y + (abs(y) * _FOUR_U + _ETA)


def _down(y):
    return y - (abs(y) * _FOUR_U + _ETA)


def _err(y):
    return _up(abs(y) * _TWO_U + _ETA)


def _maximum(a, b):
    """``np.maximum``: NaN if either is NaN."""
    if a != a or b != b:
        return _NAN
    return a if a >= b else b


def _minimum(a, b):
    if a != a or b != b:
        return _NAN
    return a if a <= b else b


def _mm_up(T, g, n):
    """``matmul_up``: an upper bound of an exact sum of ``n`` nonnegative products whose float sum
    (any order) is ``T``."""
    return _up(_up(T * g) + 2 * n * _ETA)


def _mm_err(T, g, c, n):
    """``matmul_err``: an upper bound of the rounding error of a sum of ``n`` products whose
    absolute values have the float sum ``T``."""
    return _up(_up(_mm_up(T, g, n) * c) + n * _ETA)


def _sum_err(T, g, c):
    """The error bound of ``bx.sum``: ``up(sum_up(|a|) c_n)`` with ``sum_up = up(fl(sum) g_n)``."""
    return _up(_up(T * g) * c)


def _taylor(r):
    p = _TOP
    for c in _HORNER:
        p = p * r + c
    return p


#: ``2^j`` for ``|j| <= 540``: ``2^k = 2^(k - k//2) 2^(k//2)`` for every ``k`` of the reduction
_POW2_OFF = 540
_POW2 = np.array([math.ldexp(1.0, j) for j in range(-_POW2_OFF, _POW2_OFF + 1)])


def _scale2(y, k):
    """``ldexp(y, k)`` for ``0.5 <= y <= 2`` and ``|k| <= 1076``: ``y 2^(k - k//2)`` is exact (a
    normal double), and the product with ``2^(k//2)`` rounds once, as ``ldexp`` does."""
    k1 = k >> 1
    return (y * _POW2[k - k1 + _POW2_OFF]) * _POW2[k1 + _POW2_OFF]


def _exp_upper(x):
    """:func:`symbounds.core.outward.exp_upper` of one double, bit for bit, without branches (the
    special cases are selected at the end), so that loops over it vectorise."""
    xc = x if x > _X_MIN else _X_MIN
    xc = xc if xc < _X_MAX else _X_MAX
    k = np.rint(xc / _LN2)
    head = xc - k * _C1
    a1, a2 = k * _C2LO, k * _C2HI
    r = _up(head - _down(a1 if a1 < a2 else a2))
    v = _up(_scale2(_up(_taylor(r) * _UP_REL), int(k)))
    v = _ETA_EXP if x < _X_MIN else v
    v = 0.0 if x == -_INF else v
    v = _INF if x > _X_MAX else v
    return _NAN if x != x else v


def _exp_lower(x):
    """:func:`symbounds.core.outward.exp_lower` of one double, bit for bit, without branches."""
    xc = x if x > _X_MIN else _X_MIN
    xc = xc if xc < _X_MAX else _X_MAX
    k = np.rint(xc / _LN2)
    head = xc - k * _C1
    a1, a2 = k * _C2LO, k * _C2HI
    r = _down(head - _up(a1 if a1 > a2 else a2))
    scaled = _scale2(_down(_taylor(r) * _DOWN_REL), int(k))
    v = _MAXD if abs(scaled) == _INF else _down(scaled)
    v = v if v > 0.0 else 0.0
    v = 0.0 if x < _X_MIN else v
    v = _MAXD if x > _X_MAX else v
    v = _INF if x == _INF else v
    return _NAN if x != x else v


def _lin(G, h, gd):
    """``lin``: an upper bound of ``|<G, delta>|`` over the box, ``up(sum_i up(|G_i| h_i) g_d)``."""
    s = 0.0
    for i in range(h.shape[0]):
        s += _up(abs(G[i]) * h[i])
    return _up(s * gd)


# ------------------------------------------------------------------------------------------
# Taylor-model steps on one box.  A vector of models: c[m], G[m, d], r[m].

def _linear(Wm, Wr, has_r, rows, ic, iG, ir, h, gd, gD, cD, nD, oc, oG, orr, gbuf):
    """``W @ a`` over the columns of ``a`` (``ic`` of shape ``(Din, ncol)``, ``iG`` of
    ``(Din, ncol, d)``), reading only the input rows ``rows`` (the others are exact zeros):
    ``c = Wm c``, ``g = Wm g``, remainder ``|Wm| r + Wr (|c| + L + r)`` plus the rounding of
    ``Wm c`` and ``Wm g`` (``float_boxes._Boxes.linear``)."""
    d = h.shape[0]
    ncol = ic.shape[1]
    for o in range(Wm.shape[0]):
        for k in range(ncol):
            c = 0.0
            Tc = 0.0
            rr = 0.0
            rs = 0.0
            for i in range(d):
                gbuf[i] = 0.0
                gbuf[d + i] = 0.0
            for q in rows:
                w = Wm[o, q]
                aw = abs(w)
                x = ic[q, k]
                c += w * x
                Tc += aw * abs(x)
                rr += aw * ir[q, k]
                if has_r:
                    size = _up(_up(abs(x) + _lin(iG[q, k], h, gd)) + ir[q, k])
                    rs += Wr[o, q] * size
                for i in range(d):
                    g = iG[q, k, i]
                    gbuf[i] += w * g
                    gbuf[d + i] += aw * abs(g)
            r = _mm_up(rr, gD, nD)
            if has_r:
                r = _up(r + _mm_up(rs, gD, nD))
            r = _up(r + _mm_err(Tc, gD, cD, nD))
            s = 0.0
            for i in range(d):
                oG[o, k, i] = gbuf[i]
                s += _up(_mm_err(gbuf[d + i], gD, cD, nD) * h[i])
            oc[o, k] = c
            orr[o, k] = _up(r + _up(s * gd))


def _scale_into(km, kr, ac, aG, ar, h, gd, oG):
    """``k a`` for a float ball ``k = (km, kr)`` (``_Boxes.scale``); returns ``(c, r)``."""
    d = h.shape[0]
    c = km * ac
    r = _up(abs(km) * ar)
    if kr != 0.0:
        size = _up(_up(abs(ac) + _lin(aG, h, gd)) + ar)
        r = _up(r + _up(kr * size))
    r = _up(r + _err(c))
    s = 0.0
    for i in range(d):
        g = km * aG[i]
        oG[i] = g
        s += _up(_err(g) * h[i])
    return c, _up(r + _up(s * gd))


def _add_into(ac, aG, ar, bc, bG, br, h, gd, oG):
    """``a + b`` with both gradients (``_Boxes.add``); ``oG`` may be ``aG``. Returns ``(c, r)``."""
    d = h.shape[0]
    c = ac + bc
    r = _up(ar + br)
    r = _up(r + _err(c))
    s = 0.0
    for i in range(d):
        g = aG[i] + bG[i]
        oG[i] = g
        s += _up(_err(g) * h[i])
    return c, _up(r + _up(s * gd))


def _reciprocal_into(bc, bG, br, h, gd, oG):
    """``1/b`` (``_Boxes.reciprocal``): ``1/c - g/c^2`` plus ``r/c^2 + (L + r)^2 / min|b|^3``;
    returns ``(c, r, ok)``, ``ok`` False where the range of ``b`` contains 0."""
    d = h.shape[0]
    dv = _up(_lin(bG, h, gd) + br)
    lo = _down(bc - dv)
    hi = _up(bc + dv)
    ok = (lo > 0) or (hi < 0)
    min_abs = lo if lo > 0 else (-hi if hi < 0 else 1.0)
    q = 1.0 / bc
    e_q = _err(q)
    q2 = q * q
    e_q2 = _up(_up(e_q * _up(2 * abs(q) + e_q)) + _err(q2))
    s = 0.0
    for i in range(d):
        g = -bG[i] * q2
        oG[i] = g
        eg = _up(_up(abs(bG[i]) * e_q2) + _err(g))
        s += _up(eg * h[i])
    m3 = _down(_down(min_abs * min_abs) * min_abs)
    rem = _up(_up(dv * dv) / (m3 if ok else 1.0))
    rem = _up(rem + _up(br * _up(q2 + e_q2)))
    rem = _up(rem + e_q)
    return q, _up(rem + _up(s * gd)), ok


def _exp_arrays(x, lo, hi, n):
    """``lo[k] <= e^x[k] <= hi[k]`` for ``k < n``: :func:`_exp_lower` and :func:`_exp_upper`
    written out in one loop body (so that the loop vectorises), bit for bit the same."""
    for k in range(n):
        v = x[k]
        xc = v if v > _X_MIN else _X_MIN
        xc = xc if xc < _X_MAX else _X_MAX
        kk = np.rint(xc / _LN2)
        ki = int(kk)
        k1 = ki >> 1
        p1 = _POW2[ki - k1 + _POW2_OFF]
        p2 = _POW2[k1 + _POW2_OFF]
        head = xc - kk * _C1
        a1, a2 = kk * _C2LO, kk * _C2HI
        ru = _up(head - _down(a1 if a1 < a2 else a2))
        rd = _down(head - _up(a1 if a1 > a2 else a2))
        pu = _TOP
        pd = _TOP
        for c in _HORNER:
            pu = pu * ru + c
            pd = pd * rd + c
        u = _up((_up(pu * _UP_REL) * p1) * p2)
        u = _ETA_EXP if v < _X_MIN else u
        u = 0.0 if v == -_INF else u
        u = _INF if v > _X_MAX else u
        hi[k] = _NAN if v != v else u
        scaled = (_down(pd * _DOWN_REL) * p1) * p2
        w = _MAXD if abs(scaled) == _INF else _down(scaled)
        w = w if w > 0.0 else 0.0
        w = 0.0 if v < _X_MIN else w
        w = _MAXD if v > _X_MAX else w
        w = _INF if v == _INF else w
        lo[k] = _NAN if v != v else w


def _exp_upper_array(x, out, n):
    """``out[k] >= e^x[k]``: :func:`_exp_upper` written out in the loop body."""
    for k in range(n):
        v = x[k]
        xc = v if v > _X_MIN else _X_MIN
        xc = xc if xc < _X_MAX else _X_MAX
        kk = np.rint(xc / _LN2)
        ki = int(kk)
        k1 = ki >> 1
        head = xc - kk * _C1
        a1, a2 = kk * _C2LO, kk * _C2HI
        ru = _up(head - _down(a1 if a1 < a2 else a2))
        pu = _TOP
        for c in _HORNER:
            pu = pu * ru + c
        u = _up((_up(pu * _UP_REL) * _POW2[ki - k1 + _POW2_OFF]) * _POW2[k1 + _POW2_OFF])
        u = _ETA_EXP if v < _X_MIN else u
        u = 0.0 if v == -_INF else u
        u = _INF if v > _X_MAX else u
        out[k] = _NAN if v != v else u


def _lin_tokens(G, h, gd, out, n):
    """``out[k] = lin(G[:, k])`` for a gradient ``G`` of shape ``(d, n)``."""
    for k in range(n):
        out[k] = 0.0
    for i in range(h.shape[0]):
        hi = h[i]
        for k in range(n):
            out[k] += _up(abs(G[i, k]) * hi)
    for k in range(n):
        out[k] = _up(out[k] * gd)


def _linear_tokens(w, wr, has_r, rows, zc, zr, zs, Fc, h, gd, gD, cD, nD, oc, oG, orr, T1, T2, T3, TG):
    """One output row ``a`` of ``W @ Z`` at every token (``w = Wm[a]``, ``wr = Wr[a]``), ``Z`` the
    prefix's model (gradient ``Fc[i, q, k]``, sizes ``zs = |c| + L + r`` rounded up): the formula
    of :func:`_linear`, the loops over tokens innermost."""
    d = h.shape[0]
    n = zc.shape[1]
    for k in range(n):
        oc[k] = 0.0
        T1[k] = 0.0
        T2[k] = 0.0
        T3[k] = 0.0
    for i in range(d):
        for k in range(n):
            oG[i, k] = 0.0
            TG[i, k] = 0.0
    for q in rows:
        wq = w[q]
        aw = abs(wq)
        if wq == 0.0 and not (has_r and wr[q] != 0.0):
            continue  # adds exact zeros only
        for k in range(n):
            x = zc[q, k]
            oc[k] += wq * x
            T1[k] += aw * abs(x)
            T2[k] += aw * zr[q, k]
        if has_r:
            wrq = wr[q]
            for k in range(n):
                T3[k] += wrq * zs[q, k]
        for i in range(d):
            for k in range(n):
                g = Fc[i, q, k]
                oG[i, k] += wq * g
                TG[i, k] += aw * abs(g)
    for k in range(n):
        r = _mm_up(T2[k], gD, nD)
        if has_r:
            r = _up(r + _mm_up(T3[k], gD, nD))
        orr[k] = _up(r + _mm_err(T1[k], gD, cD, nD))
        T1[k] = 0.0
    for i in range(d):
        hi = h[i]
        for k in range(n):
            T1[k] += _up(_mm_err(TG[i, k], gD, cD, nD) * hi)
    for k in range(n):
        orr[k] = _up(orr[k] + _up(T1[k] * gd))


def _mul_tokens(ac, aG, ar, La, bc, bG, br, Lb, h, gd, oc, oG, orr, s, n):
    """``a_k b_k`` at every token (``_Boxes.mul``): ``c = ca cb``, ``g = ga cb + gb ca``, remainder
    ``|La||Lb| + ra (|cb| + Lb) + rb (|ca| + La) + ra rb`` plus the roundings of ``c`` and ``g``;
    ``a`` and ``b`` of shapes ``(n,)``, gradients ``(d, n)``, their ``lin`` given (``La``,
    ``Lb``); the output may be ``a`` itself."""
    for k in range(n):
        s[k] = 0.0
    for i in range(h.shape[0]):
        hi = h[i]
        for k in range(n):
            p = aG[i, k] * bc[k]
            q = bG[i, k] * ac[k]
            g = p + q
            e = _up(_up(_err(p) + _err(q)) + _err(g))
            oG[i, k] = g
            s[k] += _up(e * hi)
    for k in range(n):
        c = ac[k] * bc[k]
        rem = _up(La[k] * Lb[k])
        rem = _up(rem + _up(ar[k] * _up(abs(bc[k]) + Lb[k])))
        rem = _up(rem + _up(br[k] * _up(abs(ac[k]) + La[k])))
        rem = _up(rem + _up(ar[k] * br[k]))
        rem = _up(rem + _err(c))
        oc[k] = c
        orr[k] = _up(rem + _up(s[k] * gd))


def _sum_tokens(c, G, r, h, gd, g, cc, n, oG):
    """``bx.sum`` over the tokens: returns ``(c, r)``, the gradient in ``oG`` (``g, cc`` the
    factors of ``n`` terms)."""
    sc = 0.0
    sT = 0.0
    sr = 0.0
    for k in range(n):
        sc += c[k]
        sT += abs(c[k])
        sr += r[k]
    rr = _up(_up(sr * g) + _sum_err(sT, g, cc))
    s = 0.0
    for i in range(h.shape[0]):
        a = 0.0
        aT = 0.0
        for k in range(n):
            a += G[i, k]
            aT += abs(G[i, k])
        oG[i] = a
        s += _up(_sum_err(aT, g, cc) * h[i])
    return sc, _up(rr + _up(s * gd))


def _weight_bounds(Sc, SG, Sr, h, gd, sdown, lo, hi, elo, ehi, u, n):
    """``u[k] >= pi_k`` over the box from the ranges of the shifted scores ``(Sc, SG, Sr)``
    (``float_boxes._weight_bounds``): ``e^{a_k^+} / (e^{a_k^+} + sum_{j != k} e^{a_j^-})``, at most 1;
    ``sdown`` is ``down(1 - 2 n u)``, the factor of a lower bound of a sum of ``n`` terms."""
    _lin_tokens(SG, h, gd, u, n)
    for k in range(n):
        dv = _up(u[k] + Sr[k])
        lo[k] = _down(Sc[k] - dv)
        hi[k] = _up(Sc[k] + dv)
    # ends below LN_TINY: e^lo >= 0 and e^hi <= TINY, no subnormal computed
    for k in range(n):
        u[k] = _maximum(lo[k], _LN_TINY)
        ehi[k] = _maximum(hi[k], _LN_TINY)
    _exp_arrays(u, elo, u, n)  # u: the upper bounds at lo, not needed (each read before written)
    _exp_upper_array(ehi, ehi, n)
    for k in range(n):
        elo[k] = 0.0 if lo[k] < _LN_TINY else elo[k]
        ehi[k] = _TINY if hi[k] < _LN_TINY else ehi[k]
    tot = 0.0
    for k in range(n):
        tot += elo[k]
    tot = _down(tot * sdown)
    for k in range(n):
        rest = _maximum(_down(tot - elo[k]), 0.0)
        den = _down(ehi[k] + rest)
        v = _up(ehi[k] / den) if den > 0 else 1.0
        v = _minimum(v, 1.0)
        u[k] = v if abs(v) < _INF else 1.0  # NaN and inf both give 1


def _hull_upper(u, v, gap, n, gsum):
    """``t + sum_k u_k (v_k - t)_+`` rounded up, ``t`` where the weights of the largest values
    first reach 1 (``float_boxes._hull``; any ``t`` is sound); ``gsum`` is ``sum_up``'s factor."""
    order = np.argsort(-v, kind="mergesort")
    cum = 0.0
    t = v[order[n - 1]]
    for i in range(n):
        cum += u[order[i]]
        if not cum < 1.0:
            t = v[order[i]]
            break
    tot = 0.0
    for k in range(n):
        gap[k] = _maximum(_up(v[k] - t), 0.0)
        tot += _up(u[k] * gap[k])
    return _up(t + _up(tot * gsum))


def _meet_hull(u, vc, vG, vr, Lv, h, gd, gsum, vlo, vhi, gap, n, c, G, r):
    """``(c, r, replaced)``: the model ``c + <G, delta> + [-r, r]`` of ``sum_k pi_k V_k``, or the
    interval of the values' hull where that is narrower (``float_boxes._meet_hull``; ``G`` is then
    zeroed in place).  ``Lv[k]`` is ``lin`` of ``V_k``'s gradient."""
    for k in range(n):
        dv = _up(Lv[k] + vr[k])
        vhi[k] = _up(vc[k] + dv)
        vlo[k] = -_down(vc[k] - dv)
    hi = _hull_upper(u, vhi, gap, n, gsum)
    lo = -_hull_upper(u, vlo, gap, n, gsum)
    if not (abs(hi) < _INF and abs(lo) < _INF):
        return c, r, False
    dv = _up(_lin(G, h, gd) + r)
    alo, ahi = _down(c - dv), _up(c + dv)
    if not (hi - lo < ahi - alo):
        return c, r, False
    c2 = lo * 0.5 + hi * 0.5
    for i in range(h.shape[0]):
        G[i] = 0.0
    return c2, _maximum(_up(hi - c2), _up(c2 - lo)), True


def _centre_values(Sc, f, vc, vr, Vc, Vr, n):
    """``m = sum_k (Sc_k f) vc_k`` (0 where not finite), and the centred values ``Vc = vc - m`` with
    their radii ``Vr = up(up(vr) + err(Vc))`` in place; returns ``m``.  (``Sc_k f`` is the weight's
    centre: ``f`` the reciprocal of the unnormalised sum, or 1 for weights already normalised.)"""
    m = 0.0
    for k in range(n):
        m += (Sc[k] * f) * vc[k]
    m = m if abs(m) < _INF else 0.0  # NaN and inf both give 0
    for k in range(n):
        c = vc[k] - m
        Vc[k] = c
        Vr[k] = _up(_up(vr[k] + 0.0) + _err(c))
    return m


def _attention_box(x0, h, rows, F0c, F0r, Fc, Fr, cols, skip_m, skip_r, has_tau, tau_m, tau_r,
                   WQm, WQr, WKm, WKr, WVm, WVr, WOm, WOr, has_r, gam, any_r, ws, wG, qc, qG, qr,
                   kc, kG, kr, vc, vG, vr, ac, aG, ar, tc, tG, tr, oc, oG, orr, gbuf, g1, g2, vrows, qo, qG3, qro,
                   centre, ratio, hull, m1, mG):
    """One box: the affine prefix at its rows ``rows``, then the attention layer at the query
    columns ``cols``, every token-wise step a loop over the tokens; the result in ``oc, oG, orr``
    (``(D, nq)``, gradient ``(D, nq, d)``).  Returns False where a softmax normaliser's range
    contains 0.  ``ws`` (``(16, n)``) and ``wG`` (``(8, d, n)``) are work arrays."""
    d = h.shape[0]
    D, n = F0c.shape
    gd = gam[0, 0]
    gp, cp = gam[1, 0], gam[1, 1]
    gD, cD = gam[2, 0], gam[2, 1]
    gk, ck = gam[3, 0], gam[3, 1]
    gn, cn = gam[4, 0], gam[4, 1]
    gv, cv = gam[5, 0], gam[5, 1]
    nk = WQm.shape[1]
    nv = WVm.shape[1]
    good = True
    zc, zr, zs = ws[0:D], ws[D:2 * D], ws[2 * D:3 * D]
    t = 3 * D
    T1, T2, T3, La, Lb, s1 = ws[t], ws[t + 1], ws[t + 2], ws[t + 3], ws[t + 4], ws[t + 5]
    Sc, Sr, Pc, Pr, w, X = ws[t + 6], ws[t + 7], ws[t + 8], ws[t + 9], ws[t + 10], ws[t + 11]
    Vc, Vr = ws[t + 12], ws[t + 13]
    Wu, Wlo, Whi, Welo, Wehi, Wt = ws[t + 17], ws[t + 18], ws[t + 19], ws[t + 20], ws[t + 21], ws[t + 22]
    sdown = gam[6, 0]
    Ql, Qc, Qr = ws[t + 14], ws[t + 15], ws[t + 16]
    TG, SG, PG, AG, QG = wG[0], wG[1], wG[2], wG[3], wG[4]
    # Z = F_0 + sum_i x_i F_i at the rows read: c = [1, x0] . [F0c; Fc], r = [1, |x0| + h] . [F0r; Fr]
    for q in rows:
        for k in range(n):
            c = F0c[q, k]
            zc[q, k] = c
            T1[k] = abs(c)
            T2[k] = F0r[q, k]
        for i in range(d):
            xi = x0[i]
            axi = abs(xi)
            si = _up(axi + h[i])
            for k in range(n):
                f = Fc[i, q, k]
                zc[q, k] += xi * f
                T1[k] += axi * abs(f)
                T2[k] += si * Fr[i, q, k]
        for k in range(n):
            zr[q, k] = _up(_mm_up(T2[k], gp, d + 1) + _mm_err(T1[k], gp, cp, d + 1))
        if any_r:
            _lin_tokens(Fc[:, q], h, gd, T3, n)
            for k in range(n):
                zs[q, k] = _up(_up(abs(zc[q, k]) + T3[k]) + zr[q, k])
    nq = cols.shape[0]
    first = True
    if skip_m != 0.0 or skip_r != 0.0:
        for q in range(D):
            for jj in range(nq):
                for i in range(d):
                    g1[i] = Fc[i, q, cols[jj]]
                c, r = _scale_into(skip_m, skip_r, zc[q, cols[jj]], g1, zr[q, cols[jj]], h, gd, oG[q, jj])
                oc[q, jj] = c
                orr[q, jj] = r
        first = False
    for hd in range(WQm.shape[0]):
        for a in range(nk):
            _linear_tokens(WKm[hd, a], WKr[hd, a], has_r[hd, 1], rows, zc, zr, zs, Fc, h, gd, gD, cD, D,
                           kc[a], kG[a], kr[a], T1, T2, T3, TG)
        for a in range(nv):
            _linear_tokens(WVm[hd, a], WVr[hd, a], has_r[hd, 2], rows, zc, zr, zs, Fc, h, gd, gD, cD, D,
                           vc[a], vG[a], vr[a], T1, T2, T3, TG)
        for jj in range(nq):
            j = cols[jj]
            # Q at the query column
            for q in range(D):
                tc[q, 0] = zc[q, j]
                tr[q, 0] = zr[q, j]
                for i in range(d):
                    tG[q, 0, i] = Fc[i, q, j]
            _linear(WQm[hd], WQr[hd], has_r[hd, 0], rows, tc[:, :1], tG[:, :1], tr[:, :1], h, gd, gD, cD, D,
                    qo[:, :1], qG3[:, :1], qro[:, :1], gbuf)
            for a in range(nk):
                qc[a] = qo[a, 0]
                qr[a] = qro[a, 0]
                for i in range(d):
                    qG[a, i] = qG3[a, 0, i]
            # scores S_k = sum_a Q_a K_ak (bx.sum of the products), then / tau
            for k in range(n):
                Sc[k] = 0.0
                Sr[k] = 0.0
                X[k] = 0.0
            for i in range(d):
                for k in range(n):
                    SG[i, k] = 0.0
                    AG[i, k] = 0.0
            for a in range(nk):
                la = _lin(qG[a], h, gd)
                for k in range(n):
                    Qc[k] = qc[a]
                    Qr[k] = qr[a]
                    Ql[k] = la
                for i in range(d):
                    for k in range(n):
                        QG[i, k] = qG[a, i]
                _lin_tokens(kG[a], h, gd, Lb, n)
                _mul_tokens(Qc, QG, Qr, Ql, kc[a], kG[a], kr[a], Lb, h, gd, Pc, PG, Pr, s1, n)
                for k in range(n):
                    Sc[k] += Pc[k]
                    X[k] += abs(Pc[k])
                    Sr[k] += Pr[k]
                for i in range(d):
                    for k in range(n):
                        SG[i, k] += PG[i, k]
                        AG[i, k] += abs(PG[i, k])
            for k in range(n):
                s1[k] = 0.0
            for i in range(d):
                hi = h[i]
                for k in range(n):
                    s1[k] += _up(_sum_err(AG[i, k], gk, ck) * hi)
            for k in range(n):
                r = _up(_up(Sr[k] * gk) + _sum_err(X[k], gk, ck))
                Sr[k] = _up(r + _up(s1[k] * gd))
            if has_tau:
                _lin_tokens(SG, h, gd, La, n)
                for k in range(n):
                    s1[k] = 0.0
                for i in range(d):
                    hi = h[i]
                    for k in range(n):
                        g = tau_m * SG[i, k]
                        SG[i, k] = g
                        s1[k] += _up(_err(g) * hi)
                for k in range(n):
                    c0 = Sc[k]
                    c = tau_m * c0
                    r = _up(abs(tau_m) * Sr[k])
                    if tau_r != 0.0:
                        r = _up(r + _up(tau_r * _up(_up(abs(c0) + La[k]) + Sr[k])))
                    r = _up(r + _err(c))
                    Sc[k] = c
                    Sr[k] = _up(r + _up(s1[k] * gd))
            # the shift: the largest centre and the softmax-weighted gradient (any exact affine model)
            cm = Sc[0]
            for k in range(1, n):
                cm = _maximum(cm, Sc[k])
            for k in range(n):
                X[k] = _maximum(Sc[k] - cm, _LN_TINY)
            _exp_upper_array(X, w, n)
            for k in range(n):  # far tokens: weight 0 (float_boxes._shift), no subnormal computed
                w[k] = 0.0 if Sc[k] - cm < _LN_TINY else w[k]
            tot = 0.0
            for k in range(n):
                tot += w[k]
            for k in range(n):
                v = w[k] / tot
                w[k] = v if abs(v) < _INF else 0.0  # NaN and inf both give 0
            for i in range(d):
                a = 0.0
                for k in range(n):
                    a += SG[i, k] * w[k]
                g2[i] = a
            # the argument S_k - shift (bx.add with the exact shift), in place
            for k in range(n):
                s1[k] = 0.0
            for i in range(d):
                hi = h[i]
                gm = g2[i]
                for k in range(n):
                    g = SG[i, k] - gm
                    SG[i, k] = g
                    s1[k] += _up(_err(g) * hi)
            for k in range(n):
                c = Sc[k] - cm
                r = _up(_up(Sr[k] + 0.0) + _err(c))
                Sc[k] = c
                Sr[k] = _up(r + _up(s1[k] * gd))
            if hull:
                _weight_bounds(Sc, SG, Sr, h, gd, sdown, Wlo, Whi, Welo, Wehi, Wu, n)
            # E_k = e^{S_k - shift} (_Boxes.exp: ec (1 + t) + ec <g, delta>, remainder
            # ec t' + er (1 + U + Rmax) + e^c_hi e^{U + r} r), in place
            _lin_tokens(SG, h, gd, La, n)  # U
            # below TINY on the whole box: the constant TINY/2 +- TINY/2 (float_boxes._tiny_constant),
            # the exp bounds taken at 0 and discarded
            for k in range(n):
                tn = _up(Sc[k] + _up(La[k] + Sr[k])) < _LN_TINY
                Wt[k] = 1.0 if tn else 0.0
                X[k] = 0.0 if tn else Sc[k]
            _exp_arrays(X, Pc, Pr, n)  # lo, hi of e^c
            for k in range(n):
                X[k] = _up(La[k] + Sr[k])
            _exp_upper_array(X, Lb, n)  # e^{U + r}
            for k in range(n):
                s1[k] = 0.0
            for i in range(d):
                hi = h[i]
                for k in range(n):
                    g = SG[i, k] * Pr[k]
                    SG[i, k] = g
                    s1[k] += _up(_err(g) * hi)
            for k in range(n):
                lo = Pc[k]
                hi = Pr[k]
                ec = hi
                er = _up(hi - lo)
                U = La[k]
                eUr = Lb[k]
                Rmax = _minimum(_up(_up(_up(U * U) * 0.5) * eUr), _up(_up(eUr - 1.0) - U))
                tt = Rmax * 0.5
                tp = _maximum(tt, _up(Rmax - tt))
                one_t = 1.0 + tt
                c = ec * one_t
                e_c = _up(_err(one_t) * ec + _err(c))
                rem = _up(ec * tp)
                rem = _up(rem + _up(er * _up(_up(1.0 + U) + Rmax)))
                rem = _up(rem + _up(_up(hi * eUr) * Sr[k]))
                rem = _up(rem + e_c)
                Sc[k] = c
                Sr[k] = _up(rem + _up(s1[k] * gd))
            for k in range(n):
                if Wt[k] != 0.0:
                    Sc[k] = _TINY * 0.5
                    Sr[k] = _TINY * 0.5
            for i in range(d):
                for k in range(n):
                    SG[i, k] = 0.0 if Wt[k] != 0.0 else SG[i, k]
            # the row sum N and 1/N
            Nc, Nr = _sum_tokens(Sc, SG, Sr, h, gd, gn, cn, n, g1)
            ic, ir, ok = _reciprocal_into(Nc, g1, Nr, h, gd, g2)
            if not ok:
                good = False
            # pi_k = E_k / N (the product with 1/N), then A_a = sum_k pi_k V_ak
            li = _lin(g2, h, gd)
            for k in range(n):
                Qc[k] = ic
                Qr[k] = ir
                Ql[k] = li
            for i in range(d):
                for k in range(n):
                    QG[i, k] = g2[i]
            _lin_tokens(SG, h, gd, La, n)
            if centre and ratio:
                # A_a = m + (sum_k E_k (V_ak - m)) (1/N), m = sum_k pi_k.c V_ak.c (float_boxes._weighted_values)
                for a in range(nv):
                    _lin_tokens(vG[a], h, gd, Lb, n)
                    m = _centre_values(Sc, ic, vc[a], vr[a], Vc, Vr, n)
                    _mul_tokens(Sc, SG, Sr, La, Vc, vG[a], Vr, Lb, h, gd, Pc, PG, Pr, s1, n)
                    c, r = _sum_tokens(Pc, PG, Pr, h, gd, gn, cn, n, g1)
                    m1[0, 0], m1[1, 0], m1[2, 0] = c, r, _lin(g1, h, gd)
                    m1[3, 0], m1[4, 0], m1[5, 0] = ic, ir, li
                    for i in range(d):
                        mG[0, i, 0] = g1[i]
                        mG[1, i, 0] = g2[i]
                    _mul_tokens(m1[0], mG[0], m1[1], m1[2], m1[3], mG[1], m1[4], m1[5], h, gd, m1[6], mG[2], m1[7],
                                m1[8], 1)
                    c = m1[6, 0] + m
                    r = _up(_up(m1[7, 0] + 0.0) + _err(c))
                    for i in range(d):
                        aG[a, jj, i] = mG[2, i, 0]
                    if hull:
                        c, r, _ = _meet_hull(Wu, vc[a], vG[a], vr[a], Lb, h, gd, gn, Wlo, Whi, Welo, n, c, aG[a, jj], r)
                    ac[a, jj] = c
                    ar[a, jj] = r
                continue
            _mul_tokens(Sc, SG, Sr, La, Qc, QG, Qr, Ql, h, gd, Sc, SG, Sr, s1, n)
            _lin_tokens(SG, h, gd, La, n)
            for a in range(nv):
                _lin_tokens(vG[a], h, gd, Lb, n)
                if centre:
                    # the values centred at m = sum_k pi_k.c V_ak.c (sum pi = 1: A = m + sum pi (V - m))
                    m = _centre_values(Sc, 1.0, vc[a], vr[a], Vc, Vr, n)
                    _mul_tokens(Sc, SG, Sr, La, Vc, vG[a], Vr, Lb, h, gd, Pc, PG, Pr, s1, n)
                else:
                    m = 0.0
                    _mul_tokens(Sc, SG, Sr, La, vc[a], vG[a], vr[a], Lb, h, gd, Pc, PG, Pr, s1, n)
                c, r = _sum_tokens(Pc, PG, Pr, h, gd, gn, cn, n, g1)
                if centre:
                    c = c + m
                    r = _up(_up(r + 0.0) + _err(c))
                for i in range(d):
                    aG[a, jj, i] = g1[i]
                if hull:
                    c, r, _ = _meet_hull(Wu, vc[a], vG[a], vr[a], Lb, h, gd, gn, Wlo, Whi, Welo, n, c, aG[a, jj], r)
                ac[a, jj] = c
                ar[a, jj] = r
        # the head's output W_O A, added to the layer's
        _linear(WOm[hd], WOr[hd], has_r[hd, 3], vrows, ac, aG, ar, h, gd, gv, cv, nv, tc[:, :nq],
                tG[:, :nq], tr[:, :nq], gbuf)
        for q in range(D):
            for jj in range(nq):
                if first:
                    oc[q, jj] = tc[q, jj]
                    orr[q, jj] = tr[q, jj]
                    for i in range(d):
                        oG[q, jj, i] = tG[q, jj, i]
                else:
                    c, r = _add_into(oc[q, jj], oG[q, jj], orr[q, jj], tc[q, jj], tG[q, jj], tr[q, jj], h, gd,
                                     oG[q, jj])
                    oc[q, jj] = c
                    orr[q, jj] = r
        first = False
    return good


def _attention_batch(x0, h, rows, F0c, F0r, Fc, Fr, cols, skip_m, skip_r, has_tau, tau_m, tau_r,
                     WQm, WQr, WKm, WKr, WVm, WVr, WOm, WOr, has_r, gam, out_c, out_G, out_r, bad, centre, ratio, hull):
    """:func:`_attention_box` over a batch; ``out_*`` of shapes ``(B, D, nq)``, ``(B, D, nq, d)``."""
    B, d = h.shape
    D, n = F0c.shape
    nq = cols.shape[0]
    nk, nv = WQm.shape[1], WVm.shape[1]
    any_r = False
    for hd in range(has_r.shape[0]):
        any_r = any_r or has_r[hd, 0] or has_r[hd, 1] or has_r[hd, 2]
    ws = np.zeros((3 * D + 23, n))
    wG = np.zeros((5, d, n))
    qc, qG, qr = np.zeros(nk), np.zeros((nk, d)), np.zeros(nk)
    qo, qG3, qro = np.zeros((nk, 1)), np.zeros((nk, 1, d)), np.zeros((nk, 1))
    kc, kG, kr = np.zeros((nk, n)), np.zeros((nk, d, n)), np.zeros((nk, n))
    vc, vG, vr = np.zeros((nv, n)), np.zeros((nv, d, n)), np.zeros((nv, n))
    ac, aG, ar = np.zeros((nv, nq)), np.zeros((nv, nq, d)), np.zeros((nv, nq))
    m = max(nq, 1)
    tc, tG, tr = np.zeros((D, m)), np.zeros((D, m, d)), np.zeros((D, m))
    gbuf, g1, g2 = np.zeros(2 * d), np.zeros(d), np.zeros(d)
    vrows = np.arange(nv)
    m1, mG = np.zeros((9, 1)), np.zeros((3, d, 1))
    for b in range(B):
        ok = _attention_box(x0[b], h[b], rows, F0c, F0r, Fc, Fr, cols, skip_m, skip_r, has_tau, tau_m, tau_r,
                            WQm, WQr, WKm, WKr, WVm, WVr, WOm, WOr, has_r, gam, any_r, ws, wG, qc, qG, qr,
                            kc, kG, kr, vc, vG, vr, ac, aG, ar, tc, tG, tr, out_c[b], out_G[b], out_r[b],
                            gbuf, g1, g2, vrows, qo, qG3, qro, centre, ratio, hull, m1, mG)
        if not ok:
            bad[b] = True


def _ffn_batch(h, zc, zG, zr, W1m, W1r, has1, b1m, b1r, has_b1, W2m, W2r, has2, b2m, b2r, has_b2,
               pair_keep, pair_zero, skip_m, skip_r, gam, out_c, out_G, out_r):
    """A feed-forward layer over a batch (``FeedForwardWeights.apply`` over ``float_boxes.FloatBoxOps``):
    ``W2 relu(W1 z + b1) + b2`` plus the skip, the linear pairs' first units passed through and their
    second units zero."""
    B, d = h.shape
    D, nq = zc.shape[1], zc.shape[2]
    Hn = W1m.shape[0]
    gd = gam[0, 0]
    gD, cD = gam[1, 0], gam[1, 1]
    gH, cH = gam[2, 0], gam[2, 1]
    hc, hG, hr = np.zeros((Hn, nq)), np.zeros((Hn, nq, d)), np.zeros((Hn, nq))
    gbuf = np.zeros(2 * d)
    rowsD, rowsH = np.arange(D), np.arange(Hn)
    g = np.zeros(d)
    for b in range(B):
        hb = h[b]
        _linear(W1m, W1r, has1, rowsD, zc[b], zG[b], zr[b], hb, gd, gD, cD, D, hc, hG, hr, gbuf)
        for u in range(Hn):
            for j in range(nq):
                if has_b1:
                    c = hc[u, j] + b1m[u]
                    r = _up(hr[u, j] + b1r[u])
                    hc[u, j] = c
                    hr[u, j] = _up(r + _err(c))
                if pair_zero[u]:
                    hc[u, j] = 0.0
                    hr[u, j] = 0.0
                    hG[u, j] = 0.0
                elif not pair_keep[u]:  # relu: the model where >= 0, 0 where <= 0, else [0, hi]
                    dv = _up(_lin(hG[u, j], hb, gd) + hr[u, j])
                    lo = _down(hc[u, j] - dv)
                    hi = _up(hc[u, j] + dv)
                    if lo >= 0:
                        pass
                    elif hi <= 0:
                        hc[u, j] = 0.0
                        hr[u, j] = 0.0
                        hG[u, j] = 0.0
                    else:
                        half = hi * 0.5
                        hc[u, j] = half
                        hr[u, j] = _maximum(half, _up(hi - half))
                        hG[u, j] = 0.0
        _linear(W2m, W2r, has2, rowsH, hc, hG, hr, hb, gd, gH, cH, Hn, out_c[b], out_G[b], out_r[b], gbuf)
        for q in range(D):
            for j in range(nq):
                if has_b2:
                    c = out_c[b, q, j] + b2m[q]
                    r = _up(out_r[b, q, j] + b2r[q])
                    out_c[b, q, j] = c
                    out_r[b, q, j] = _up(r + _err(c))
                if skip_m != 0.0 or skip_r != 0.0:
                    sc, sr = _scale_into(skip_m, skip_r, zc[b, q, j], zG[b, q, j], zr[b, q, j], hb, gd, g)
                    c, r = _add_into(out_c[b, q, j], out_G[b, q, j], out_r[b, q, j], sc, g, sr, hb, gd,
                                     out_G[b, q, j])
                    out_c[b, q, j] = c
                    out_r[b, q, j] = r


_SCALARS = [_up, _down, _err, _maximum, _minimum, _mm_up, _mm_err, _sum_err, _taylor, _scale2, _exp_upper, _exp_lower,
            _lin, _linear, _scale_into, _add_into, _reciprocal_into, _exp_arrays, _exp_upper_array,
            _lin_tokens, _linear_tokens, _mul_tokens, _sum_tokens, _weight_bounds, _hull_upper, _meet_hull, _centre_values,
            _attention_box]
_BATCHES = [_attention_batch, _ffn_batch]



def load():
    """Import numba and put the compiled functions in place of the Python ones (once); returns
    the numba module, or None when it cannot be imported (then :data:`ENABLED` becomes False).

    IEEE semantics: no ``fastmath`` (no contraction into fused multiply-adds, no reassociation,
    no flush to zero); ``error_model="numpy"``: a division by zero gives inf or NaN as in NumPy."""
    global numba, ENABLED
    if numba is None and ENABLED:
        try:
            import numba as nb
        except ImportError:  # pragma: no cover - a broken installation
            ENABLED = False
            return None
        jit = nb.njit(cache=True, fastmath=False, error_model="numpy")
        for f in _SCALARS + _BATCHES:
            globals()[f.__name__] = jit(f)
        numba = nb
    return numba


# ------------------------------------------------------------------------------------------
# the plan: the evaluator's structure as the kernel's arrays

def _normal_ball(c, r):
    """Balls ``c +- r`` (arrays) containing the given ones with no subnormal double: a centre
    below ``2^-900`` in magnitude becomes 0 with ``|c|`` added to the radius, and a nonzero radius
    is at least the kernel's error term ``2^-500`` (the NumPy pass's radii of exact entries are
    ``eta = 2^-1074``; every product with one would cost a microcode assist)."""
    c, r = np.asarray(c, dtype=np.float64), np.asarray(r, dtype=np.float64)
    small = (c != 0) & (np.abs(c) < 2.0**-900)
    r = np.where(small, fo.up(r + np.abs(c)), r)
    c = np.where(small, 0.0, c)
    return c, np.where(r != 0, np.maximum(r, _ETA), r)


class _Plan:
    """The arrays the kernel reads for one evaluator (built once)."""

    def __init__(self, ev, att_index, maps, rows):
        d = ev.d
        F0c, F0r, Fc, Fr = maps
        F0c, F0r = _normal_ball(F0c, F0r)
        Fc, Fr = _normal_ball(Fc, Fr)
        self.F = tuple(np.ascontiguousarray(a, dtype=np.float64) for a in (F0c, F0r, Fc, Fr))
        D, n = F0c.shape
        self.rows = np.array(rows, dtype=np.int64)
        self.cols = np.array(ev.needed[att_index], dtype=np.int64)
        layer = ev.layers[att_index]
        heads, skip, tau = layer.heads, layer.skip, layer.tau
        mats = [(hd.W_Q, hd.W_K, hd.W_V, hd.W_O) for hd in heads]

        def stack(j):
            Wm = np.stack([m[j][0] for m in mats])
            Wr = np.stack([np.zeros_like(m[j][0]) if m[j][1] is None else m[j][1] for m in mats])
            Wm, Wr = _normal_ball(Wm, Wr)
            return np.ascontiguousarray(Wm, dtype=np.float64), np.ascontiguousarray(Wr, dtype=np.float64)

        self.W = [stack(j) for j in range(4)]
        self.has_r = np.array([[bool(self.W[j][1][hd].any()) for j in range(4)] for hd in range(len(mats))],
                              dtype=np.bool_)
        self.skip = (float(skip[0]), float(skip[1]))
        self.tau = (True, float(tau[0]), float(tau[1])) if tau is not None else (False, 1.0, 0.0)
        nk, nv = self.W[0][0].shape[1], self.W[2][0].shape[1]
        self.gam = np.array([_gamma(d) if d else (1.0, 0.0), _gamma(d + 1), _gamma(D), _gamma(nk), _gamma(n),
                             _gamma(nv), (float(fo.down(1.0 - 2 * n * fo.U)), 0.0)])
        self.ffns = []
        for layer in ev.layers[att_index + 1:]:
            W1, b1, W2, b2, skip2, pairs = layer.W1, layer.b1, layer.W2, layer.b2, layer.skip, layer.pairs
            Hn = W1[0].shape[0]
            keep, zero = np.zeros(Hn, dtype=np.bool_), np.zeros(Hn, dtype=np.bool_)
            for u, u2 in pairs:
                keep[u], zero[u2] = True, True

            def mat(W):
                Wm, Wr = _normal_ball(W[0], np.zeros_like(W[0]) if W[1] is None else W[1])
                return (np.ascontiguousarray(Wm, dtype=np.float64), np.ascontiguousarray(Wr, dtype=np.float64),
                        bool(Wr.any()))

            def bias(bv):
                bm, br = _normal_ball(bv[0], np.zeros_like(bv[0]) if bv[1] is None else bv[1])
                has = bool(bm.any() or br.any())
                return np.ascontiguousarray(bm, dtype=np.float64), np.ascontiguousarray(br, dtype=np.float64), has

            gam = np.array([_gamma(d) if d else (1.0, 0.0), _gamma(D), _gamma(Hn)])
            self.ffns.append(mat(W1) + bias(b1) + mat(W2) + bias(b2) + (keep, zero, float(skip2[0]),
                                                                         float(skip2[1]), gam))
        self.kept = list(ev.needed[att_index])
        self.D = D

    def run(self, x0, h, flags=(True, True, True)):
        """``(c, G, r, bad)`` of the state after the last layer, ``(B, D, nq)``, gradient
        ``(B, d, D, nq)``, for boxes ``x0 +- h``."""
        B, d = h.shape
        nq = self.cols.shape[0]
        x0 = np.ascontiguousarray(x0, dtype=np.float64)
        h = np.ascontiguousarray(h, dtype=np.float64)
        c, G, r = np.zeros((B, self.D, nq)), np.zeros((B, self.D, nq, d)), np.zeros((B, self.D, nq))
        bad = np.zeros(B, dtype=np.bool_)
        (WQm, WQr), (WKm, WKr), (WVm, WVr), (WOm, WOr) = self.W
        _attention_batch(x0, h, self.rows, *self.F, self.cols, self.skip[0], self.skip[1], *self.tau,
                         WQm, WQr, WKm, WKr, WVm, WVr, WOm, WOr, self.has_r, self.gam, c, G, r, bad,
                         *flags)
        for f in self.ffns:
            oc, oG, orr = np.zeros_like(c), np.zeros_like(G), np.zeros_like(r)
            _ffn_batch(h, c, G, r, *f, oc, oG, orr)
            c, G, r = oc, oG, orr
        return c, np.moveaxis(G, 3, 1), r, bad


_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _plan(ev, prefix_maps, rows_read):
    """The kernel's plan for a :class:`~symbounds.core.float_boxes.FloatBoxEvaluator`, or None
    when its pass after the prefix is not one attention layer pruned to the readout's columns
    (with at least one head, all of one shape) followed only by feed-forward layers.
    ``prefix_maps()`` gives the prefix ``(F0c, F0r, Fc, Fr)`` and ``rows_read()`` the rows of the
    state after it that the next layer reads (the evaluator's own, called once)."""
    if ev in _PLANS:
        return _PLANS[ev]
    plan = None
    i = ev.prefix
    if (0 < i < len(ev.layers) and isinstance(ev.layers[i], FloatAttention) and i in ev.needed
            and ev.readout is not None):
        heads = ev.layers[i].heads
        shapes = {tuple(m[0].shape for m in (hd.W_Q, hd.W_K, hd.W_V, hd.W_O)) for hd in heads}
        rest = ev.layers[i + 1:]
        if heads and len(shapes) == 1 and all(isinstance(layer, FloatFeedForward) for layer in rest):
            plan = _Plan(ev, i, prefix_maps(), rows_read())
    _PLANS[ev] = plan
    return plan


def readout_model(ev, x0, h, prefix_maps, rows_read, flags=(True, True, True)):
    """``(c, G, r, bad)``: the readout's model over the boxes ``x0 +- h`` (shapes ``(B,)``,
    ``(B, d)``, ``(B,)``; ``bad[b]`` where a step could not be enclosed), or None when the kernel
    does not apply (numba missing, or a structure it does not cover): then the NumPy pass runs.
    ``prefix_maps``, ``rows_read``: as for :func:`_plan`."""
    if not ENABLED or ev.base[0].shape[1] < MIN_TOKENS:
        return None
    plan = _plan(ev, prefix_maps, rows_read)  # the structure first: numba is imported only for a model the kernel covers
    if plan is None or load() is None:
        return None
    c, G, r, bad = plan.run(x0, h, flags)
    j = plan.kept.index(ev.readout.column)
    row = ev.readout.row
    return c[:, row, j], G[:, :, row, j], r[:, row, j], bad
