"""The weighted values of the last attention layer met with their convex hull.

Over a box a softmax row's weights satisfy ``pi_k >= 0``, ``sum_k pi_k = 1`` and ``pi_k <= u_k``
(:func:`caps`), and each value ``v_k`` lies in ``[lo_k, hi_k]``.  Then for every number ``t``,
``sum_k pi_k v_k - t = sum_k pi_k (v_k - t) <= sum_k u_k (hi_k - t)_+``, so
``sum_k pi_k v_k <= t + sum_k u_k (hi_k - t)_+`` (and the lower end likewise, with ``-v``).  This
does not depend on how much the scores vary over the box, where a first-order model of the
softmax is poor; :func:`meet` keeps whichever of the two enclosures is narrower (both are sound).
"""

from flint import arb

from . import taylor as tm


def caps(a, h) -> list:
    """Exact ``u_k >= pi_k = e^{a_k} / sum_j e^{a_j}`` over the box, from the ranges
    ``[lo_k, hi_k]`` of the shifted scores' models ``a_k``: ``x / (x + R)`` grows with
    ``x = e^{a_k}`` and falls with ``R = sum_{j != k} e^{a_j}``, so
    ``pi_k <= e^{hi_k} / (e^{hi_k} + sum_{j != k} e^{lo_j})``, and ``pi_k <= 1``."""
    ends = [(t.c - tm.spread(t, h), t.c + tm.spread(t, h)) for t in a]
    elo = [lo.lower().exp() for lo, _ in ends]
    total = sum(elo, arb(0))
    out = []
    for (_, hi), e in zip(ends, elo):
        rest = (total - e).lower().max(arb(0))  # at most sum_{j != k} e^{lo_j}
        up = hi.upper().exp()
        u = (up / (up + rest)).upper()
        out.append(u if u.is_finite() and u < 1 else arb(1))
    return out


def _upper(u, v) -> arb:
    """``t + sum_k u_k (v_k - t)_+`` rounded up, ``t`` the value at which the caps of the largest
    values first add up to 1 (where the bound is least; any ``t`` is sound)."""
    order = sorted(range(len(v)), key=lambda k: float(v[k]), reverse=True)
    t, cum = v[order[-1]], 0.0
    for k in order:
        cum += float(u[k])
        if cum >= 1:
            t = v[k]
            break
    return (t + sum((uk * (vk - t).max(arb(0)) for uk, vk in zip(u, v)), arb(0))).upper()


def bounds(u, lo, hi):
    """Exact ``(L, H)`` with ``L <= sum_k pi_k v_k <= H`` for ``0 <= pi_k <= u_k``,
    ``sum_k pi_k = 1`` and ``lo_k <= v_k <= hi_k`` (exact balls)."""
    return -_upper(u, [-x for x in lo]), _upper(u, hi)


def meet(t, u, vals, h):
    """The model ``t`` of ``sum_k pi_k v_k`` (``vals`` the models of ``v_k``), or the constant
    model of the hull :func:`bounds` where that is narrower: centre the hull's midpoint, no
    gradient, rest its radius (``[c - r, c + r]`` contains ``[L, H]``)."""
    ends = [tm.enclosure(v, h) for v in vals]
    L, H = bounds(u, [e.lower() for e in ends], [e.upper() for e in ends])
    if not (H.is_finite() and L.is_finite() and H - L < 2 * tm.spread(t, h)):
        return t
    ball = L.union(H)
    return tm.TM(ball.mid(), [arb(0)] * len(t.g), ball.rad())
