"""First-order Taylor models over one box, with Arb balls.

A model ``(c, g, r)`` of ``f`` over the box ``x0 + delta``, ``|delta_i| <= h_i``, says: there are
fixed ``c* in c`` and ``g*_i in g_i`` with ``|f(x0 + delta) - c* - sum_i g*_i delta_i| <= r`` for
every ``delta`` of the box.  Products and functions keep the first-order part and bound the rest:
for ``phi(c + t)``, ``|t| <= s`` (the spread),
``phi(c + t) = phi(c) + phi'(c) t + phi''(xi) t^2 / 2`` with ``xi in c + [-s, s]``.
"""

from flint import arb


class TM:
    __slots__ = ("c", "g", "r")

    def __init__(self, c, g, r):
        self.c, self.g, self.r = c, g, r


def const(v, d: int) -> TM:
    return TM(v, [arb(0)] * d, arb(0))


def spread(t: TM, h) -> arb:
    """An upper bound of ``|f - c|`` over the box: ``sum_i |g_i| h_i + r``."""
    s = t.r
    for gi, hi in zip(t.g, h):
        s = s + gi.abs_upper() * hi
    return s.abs_upper()


def enclosure(t: TM, h) -> arb:
    """A ball containing ``f`` over the whole box."""
    s = spread(t, h)
    return (t.c - s).union(t.c + s)


def lin(terms, b, d: int) -> TM:
    """``b + sum w_k t_k`` for ``terms = [(w_k, t_k)]`` (``w_k``, ``b`` balls)."""
    c, g, r = b, None, arb(0)
    for w, t in terms:
        c = c + w * t.c
        g = [w * e for e in t.g] if g is None else [a + w * e for a, e in zip(g, t.g)]
        r = r + w.abs_upper() * t.r
    return TM(c, g or [arb(0)] * d, r)


def add(a: TM, b: TM) -> TM:
    return TM(a.c + b.c, [x + y for x, y in zip(a.g, b.g)], a.r + b.r)


def mul(a: TM, b: TM, h) -> TM:
    """``(c_a + L_a + e_a)(c_b + L_b + e_b)``: the part ``L_a L_b + c_a e_b + ...`` goes to the rest."""
    la, lb = spread(TM(0, a.g, arb(0)), h), spread(TM(0, b.g, arb(0)), h)
    ca, cb = a.c.abs_upper(), b.c.abs_upper()
    r = la * lb + (ca + la) * b.r + (cb + lb) * a.r + a.r * b.r
    return TM(a.c * b.c, [a.c * y + b.c * x for x, y in zip(a.g, b.g)], r)


def _unary(t: TM, h, f0, f1, f2_bound) -> TM:
    """``phi(t)`` from ``phi(c)``, ``phi'(c)`` and a bound of ``|phi''| / 2`` over the range."""
    s = spread(t, h)
    rng = (t.c - s).union(t.c + s)
    d1 = f1(t.c)
    return TM(f0(t.c), [d1 * x for x in t.g], d1.abs_upper() * t.r + f2_bound(rng) * s * s)


def exp(t: TM, h) -> TM:
    """``e^(c + t) = e^c (1 + t + R)`` with ``R = e^t - 1 - t`` in ``[0, e^s - 1 - s]`` for
    ``|t| <= s``: the rest is centred, ``R = Rmax / 2 +- Rmax / 2``."""
    s = spread(t, h)
    ec, half = t.c.exp(), (s.exp() - 1 - s).abs_upper() / 2
    return TM(ec * (1 + half), [ec * x for x in t.g], ec.abs_upper() * (t.r + half))


def recip(t: TM, h) -> TM:
    """``1/t``; ``|phi''| / 2 = 1/|xi|^3``: the range must not contain 0."""
    s = spread(t, h)
    if not ((t.c - s) > 0 or (t.c + s) < 0):
        raise ArithmeticError("a reciprocal of a range containing 0")
    return _unary(t, h, lambda c: 1 / c, lambda c: -1 / (c * c), lambda rng: (1 / rng).abs_upper() ** 3)


def relu(t: TM, h) -> TM:
    """``max(t, 0)``: exact when the range has one sign, else ``relu(y) = s y + [0, m]`` with a
    slope ``s`` in [0, 1] near ``hi / (hi - lo)`` and ``m = max(-s lo, (1 - s) hi)``."""
    spr = spread(t, h)
    lo, hi = t.c - spr, t.c + spr
    if lo >= 0:
        return t
    if hi <= 0:
        return const(arb(0), len(t.g))
    up, down = hi.abs_upper(), lo.abs_upper()
    s = arb((up / (up + down)).mid())
    s = s.min(arb(1)).max(arb(0))
    m = (s * down).max((1 - s) * up).abs_upper()
    return TM(s * t.c + m / 2, [s * x for x in t.g], s * t.r + m / 2)
