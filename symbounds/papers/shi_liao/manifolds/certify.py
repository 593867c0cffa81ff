"""L7 over the whole manifold: ``sup_{x in M} |T(x) - g(x)| <= eps``, certified rectangle by rectangle.

The parameter domain of M (angles over pi) is cut into rectangles.  For a rectangle ``R`` with
midpoint ``p0``, every point ``y(p)``, ``p in R``, lies within ``L(R)`` of ``y(p0)`` (the length of the
parameter segment, as for the net, claim M1), and ``Q`` is an isometry, so the image ``x(R)`` lies in
the axis-parallel box ``x(p0) +- L(R)`` (clipped to the cube, which contains M).  The network and
the target are enclosed over that box by ``symbounds.core.boxes.box_bound`` (first-order Taylor models); the
bound over the box bounds the error over ``x(R)``, a part of M.  Rectangles whose bound exceeds
``eps`` are bisected (longer side in arc length) down to ``min_length``; a failing rectangle whose
midpoint already violates ``eps`` (a ball decides it) refutes the claim with that point.

``L(R)``: circle/curve ``v pi h``; torus ``pi sqrt((rho1 h1)^2 + (rho2 h2)^2)``; sphere
``rho pi sqrt(h_th^2 + (S h_ph)^2)`` with ``S`` the largest ``sin theta`` on the rectangle (``h``:
half-widths over pi).
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

from ....core.boxes import Box, box_bound
from ....core.claims import Measured
from ....core.contexts import BallContext
from ....core.exact import arb_to_fraction, as_fraction, decimal_up
from .claims import MANIFOLD_CLAIMS

__all__ = ["certify_on_manifold", "initial_rectangles"]


def initial_rectangles(man, P: int) -> list[tuple]:
    """Rectangles ``((lo, hi), ...)`` (angles over pi) tiling the parameter domain: about 8 per
    centre."""
    if man.name in ("circle", "curve"):
        n = 8 * P
        return [((Fraction(2 * i, n), Fraction(2 * i + 2, n)),) for i in range(n)]
    if man.name == "torus":
        n = max(4, int((8 * P) ** 0.5))
        return [((Fraction(2 * i, n), Fraction(2 * i + 2, n)), (Fraction(2 * j, n), Fraction(2 * j + 2, n)))
                for i in range(n) for j in range(n)]
    nt = max(4, int((4 * P) ** 0.5))
    return [((Fraction(i, nt), Fraction(i + 1, nt)), (Fraction(2 * j, 2 * nt), Fraction(2 * j + 2, 2 * nt)))
            for i in range(nt) for j in range(2 * nt)]


def _length(ctx, man, rect):
    """``L(R)`` and the side lengths in arc length (for choosing the side to bisect)."""
    pi = ctx.pi()
    R = [ctx.convert(as_fraction(r)) for r in man.radii]
    h = [(b - a) / 2 for a, b in rect]
    if man.name in ("circle", "curve"):
        v = ctx.sqrt(ctx.convert(man.speed2))
        side = [v * pi * ctx.convert(h[0])]
        return side[0], side
    if man.name == "torus":
        side = [R[0] * pi * ctx.convert(h[0]), R[1] * pi * ctx.convert(h[1])]
        return ctx.sqrt(side[0] * side[0] + side[1] * side[1]), side
    (a, b), _ = rect
    if a <= Fraction(1, 2) <= b:
        S = ctx.one
    else:
        e = b if b < Fraction(1, 2) else a
        S = ctx.sin(pi * ctx.convert(e))
    side = [R[0] * pi * ctx.convert(h[0]), R[0] * pi * S * ctx.convert(h[1])]
    return ctx.sqrt(side[0] * side[0] + side[1] * side[1]), side


def _box(ctx, man, rect) -> tuple[Box, list]:
    mid = tuple((a + b) / 2 for a, b in rect)
    with ctx.scope():
        x = man.x_at(ctx, man.y_at(ctx, mid))
        L, side = _length(ctx, man, rect)
        lo, hi = [], []
        for xi in x:
            lo.append(max(Fraction(0), arb_to_fraction((xi - L).lower())))
            hi.append(min(Fraction(1), arb_to_fraction((xi + L).upper())))
        return Box(tuple(lo), tuple(hi)), [float(s.mid()) for s in side]


def certify_on_manifold(K, model, prec: int = 128, max_boxes: int = 200_000,
                        min_length: Fraction = Fraction(1, 2**24), progress=None) -> tuple[Measured, dict]:
    """The claim ``L7.M`` (a ball ``Measured``: the largest box bound against ``eps``) and a summary
    ``{boxes, max_bound, seconds, status, counterexample}`` (``max_bound``: the largest proved box
    bound, an exact rational as a string; ``status`` undecided when boxes ran out, never refuted
    without a counterexample).  ``progress(fraction, boxes)`` is called after each parameter
    rectangle: ``fraction`` is the exact part of the parameter domain's area proved so far."""
    man = K.domain.man
    ctx = BallContext(prec)
    eps = as_fraction(K.inst.eps)
    todo = initial_rectangles(man, K.P)

    def area(rect):
        return math.prod((Fraction(b) - Fraction(a) for a, b in rect), start=Fraction(1))

    total, done = sum((area(r) for r in todo), Fraction(0)), Fraction(0)
    worst, boxes, t0 = Fraction(0), 0, time.perf_counter()
    status, witness = "proved", None
    while todo:
        rect = todo.pop()
        boxes += 1
        if boxes > max_boxes:
            status = "undecided"
            break
        box, side = _box(ctx, man, rect)
        b = box_bound(model, K.g, man.ambient, box, prec)
        if b is not None and b <= eps:
            worst = max(worst, b)
            if progress is not None:
                done += area(rect)
                progress(done / total, boxes)
            continue
        mid = tuple((a + c) / 2 for a, c in rect)
        err = point_error_on(man, model, K, mid, prec)  # a counterexample ends the search
        if err is not None and err > eps:
            status, witness = "refuted", [str(q) for q in mid]
            worst = max(worst, err)
            break
        k = max(range(len(rect)), key=lambda i: side[i])
        if side[k] < float(min_length):
            status = "undecided"
            worst = max(worst, b if b is not None else eps + 1)
            continue
        a, c = rect[k]
        m = (a + c) / 2
        todo.append(rect[:k] + ((a, m),) + rect[k + 1:])
        todo.append(rect[:k] + ((m, c),) + rect[k + 1:])
    with ctx.scope():
        if status == "undecided":
            # Some rectangles were never proved, and no point violates the bound: the sup lies
            # somewhere in [worst, +inf).  A ball straddling eps says exactly that (undecided),
            # neither a pass nor a refutation.
            lhs = ctx.convert(min(worst, eps)).union(ctx.convert(max(worst, eps) + 1))
        else:
            lhs = ctx.convert(worst)
        claim = MANIFOLD_CLAIMS["L7.M"].stated(f"|T(x) - g(x)| <= eps for every x on the {man.name} "
                                 f"({boxes} parameter rectangles, Taylor-model boxes)").measured(lhs,
                         ctx.convert(eps))
    return claim, {"boxes": boxes, "max_bound": str(worst), "max_bound_upper": decimal_up(worst, 17),
                   "seconds": time.perf_counter() - t0,
                   "status": status, "counterexample_angles_over_pi": witness}


def point_error_on(man, model, K, params, prec: int):
    """A lower bound of ``|T(x) - g(x)|`` at the point of M with the given parameters (None if the
    ball cannot tell)."""
    from ....core.expr import variables
    from ....core.transformer import forward

    ctx = BallContext(prec)
    with ctx.scope():
        x = man.x_at(ctx, man.y_at(ctx, params))
        T = forward(ctx, model, x)
        g = ctx.from_sympy(K.g, env=dict(zip(variables(man.ambient), x)))
        e = abs(T - g)
        return arb_to_fraction(e.lower()) if e.is_finite() else None
