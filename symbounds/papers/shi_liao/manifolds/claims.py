"""The claims a manifold adds to [SL26] (docs/shi_liao.md, Manifolds), plugged into ``shi_liao.Constants.domain``.

=====  ==========================================================================================
id     claim (decided in Arb balls; M0 is an exact rational residual)
=====  ==========================================================================================
M0     sample points and centres lie on M exactly
M1     the centres form an ``r_g``-net: over each parameter cell,
       ``sup |y(p) - c| <= |y(p0) - c| + L h`` (anchor ``p0``, speed bound times half-width)
M2.0   below ``delta_0 = pi/4``: ``K^2 delta_0^2 <= 12``, so by ``sin u >= u - u^3/6`` the chord is
       at least ``v delta (1 - K^2 delta^2/24) >= v delta / 2``
M2     ``d_M <= 2 |x - y|``: ``v delta - 2 chord(delta) < 0`` on intervals covering ``[delta_0, pi]``
       (great circles of the sphere, each circle of the torus, the curve's harmonics)
E1     near field ``C_H (2 * 2 r_g)^alpha <= eps/2`` (replaces the cube's E0/E1)
L8.1   ``P <= C_M (16 C_H)^{d/alpha} eps^{-d/alpha}``
A1/A2  ``|g| <= B`` and ``|g(p) - g(q)| <= C_H d_M(p, q)^alpha`` on a parameter grid, with exact
       geodesic distances (evidence: a grid never proves a property of all of M)
=====  ==========================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import sympy
from sympy import Integer, Rational

from ....core.claims import Measured, load_claims
from ....core.contexts import Context
from ....core.exact import as_fraction as _F
from ....core.expr import variables

__all__ = ["ManifoldDomain", "MANIFOLD_CLAIMS"]

#: The claims a manifold adds, and its own E1 / L8, by id (declared in claims.toml beside this file).
MANIFOLD_CLAIMS = load_claims(Path(__file__).with_name("claims.toml"))


def _sqrt_upper(ctx: Context, s):
    """sqrt of a sum of squares ``s >= 0``, as an upper bound: ``sqrt(upper(max(0, s)))``.  A ball
    of squares around 0 reaches below 0, where Arb's sqrt is NaN (and ``t**2`` of a ball around 0
    is NaN too: write ``t*t``); the square root of the exact upper end of ``max(0, s)`` bounds the
    true ``sqrt(s)`` from above (in mp / fp, ``upper`` is the value itself)."""
    with ctx.scope():
        return ctx.sqrt(ctx.upper(ctx.max(ctx.zero, s)))


# ------------------------------------------------------------------------------------------
# The domain object plugged into shi_liao.Constants


@dataclass
class ManifoldDomain:
    """What ``shi_liao`` needs from a manifold: claims M0-M2, E1/L8 forms and the assumption checks."""

    man: object  # manifolds.Manifold
    cells: list
    q0: Fraction = Fraction(1, 4)  # M2 below delta_0 = pi q0 by the series bound
    intervals: int = 96

    @property
    def d(self) -> int:
        return self.man.d

    def table(self) -> dict:
        t = {"manifold": sympy.Symbol(self.man.name), "d_intrinsic": Integer(self.man.d),
             "ambient": Integer(self.man.ambient), "C_M": self.man.C_M()}
        for i, r in enumerate(self.man.radii):
            t[f"rho_{i + 1}"] = Rational(r)
        tau = self.man.reach()
        if tau is not None:
            t["reach"] = tau
        else:  # the curve: a sampled estimate (6 decimals), reported only; no claim rests on it
            t["reach_estimate"] = Rational(round(self.man.reach_estimate() * 10**6), 10**6)
        return t

    def constant_claims(self, K, dense: int, shared: dict) -> list[tuple]:
        inst = K.inst
        D = K.D
        return [
            (MANIFOLD_CLAIMS["E1"], inst.C_H * (4 * K.r_g) ** inst.alpha, inst.eps / 2),
            shared["E2"],
            shared["E3"],
            (MANIFOLD_CLAIMS["L8.1"], Integer(K.P), K.P_paper),
            (MANIFOLD_CLAIMS["L8.2"], Integer(dense), (8 * D * D + 34 * D) * K.P_paper),
        ]

    def measure_claims(self, ctx: Context, K, points) -> list[Measured]:
        man = self.man
        with ctx.scope():
            res = max([man.residual(x) for x in points] + [man.residual(c) for c in K.centres])
            out = [MANIFOLD_CLAIMS["M0"].stated(f"sample points ({len(points)}) and centres ({K.P}) lie on the {man.name} "
                                  "exactly (residual)").measured(ctx.convert(res))]
            # M1: the net.
            worst = None
            memo: dict = {}
            for cy, q, lip in self.cells:
                lv = ctx.from_sympy(lip, memo)
                if q is None:
                    b = lv
                else:
                    ya = man.y_at(ctx, q)
                    diffs = [u - ctx.convert(c) for u, c in zip(ya, cy)]
                    b = _sqrt_upper(ctx, sum((t * t for t in diffs), ctx.zero)) + lv
                worst = b if worst is None else ctx.max(worst, b)
            r_g = ctx.from_sympy(K.r_g)
            out.append(MANIFOLD_CLAIMS["M1"].stated(f"the {K.P} centres form an r_g-net of the {man.name} "
                                      f"({len(self.cells)} parameter cells)").measured(worst, r_g))
            out += self._chord_arc(ctx)
        return out

    def _chord_arc(self, ctx) -> list[Measured]:
        """M2.0 and M2: ``v delta <= 2 chord(delta)`` on a great circle / the curve, delta in [0, pi]."""
        man = self.man
        harm = man.harmonics if man.name == "curve" else ((Fraction(1), 1),)
        Kmax = max(k for _, k in harm)
        v = ctx.sqrt(ctx.convert(sum((_F(r) ** 2 * k * k for r, k in harm), Fraction(0))))
        pi = ctx.pi()
        q0 = ctx.convert(self.q0)
        near = MANIFOLD_CLAIMS["M2.0"].stated("below delta_0 = pi/4: K^2 delta_0^2 <= 12, so chord >= v delta/2 there").measured(ctx.rational(Kmax * Kmax) * (pi * q0) ** 2, ctx.rational(12))
        worst = None
        n = self.intervals
        for i in range(n):
            a = self.q0 + (1 - self.q0) * Fraction(i, n)
            b = self.q0 + (1 - self.q0) * Fraction(i + 1, n)
            Qi = ctx.interval(a, b)  # a ball enclosing [a, b]; the midpoint in mp / fp
            chord2 = ctx.zero
            for r, k in harm:
                s = ctx.sin(pi * Qi * ctx.rational(k, 2))
                chord2 = chord2 + 4 * ctx.convert(_F(r)) ** 2 * s * s
            gap = v * pi * ctx.convert(b) - 2 * ctx.sqrt(chord2)
            worst = gap if worst is None else ctx.max(worst, gap)
        return [near, MANIFOLD_CLAIMS["M2"].stated(f"d_M <= 2|x-y| on the {man.name}: max over {n} delta-intervals of "
                                     "v delta - 2 chord(delta) < 0").measured(worst, ctx.zero)]

    def measure_assumptions(self, ctx: Context, K) -> list[Measured]:
        """A1 ``|g| <= B`` and A2 ``|g(p)-g(q)| <= C_H d_M(p,q)^alpha`` on a parameter grid on M."""
        man, inst = self.man, K.inst
        xs = variables(man.ambient)
        with ctx.scope():
            B, C_H, alpha = ctx.convert(inst.B), ctx.convert(inst.C_H), ctx.from_sympy(inst.alpha)
            memo: dict = {}

            def g(qs):
                if qs not in memo:
                    x = man.x_at(ctx, man.y_at(ctx, qs))
                    memo[qs] = ctx.from_sympy(K.g, env=dict(zip(xs, x)))
                return memo[qs]

            pairs = []  # (qs, qs', geodesic distance / pi as an exact rational times a factor)
            if man.name in ("circle", "curve"):
                N = 256
                v = ctx.from_sympy(man.speed())
                for j in range(N):
                    for s in (1, 2, 4, 8, 16, 32, 64, 128):
                        pairs.append(((Fraction(2 * j, N),), (Fraction(2 * (j + s), N),), v, Fraction(2 * s, N)))
            elif man.name == "torus":
                N = 24
                for i in range(N):
                    for j in range(N):
                        for s in (1, 2, 4, 8):
                            p = (Fraction(2 * i, N), Fraction(2 * j, N))
                            pairs.append((p, (Fraction(2 * (i + s), N), p[1]), ctx.convert(_F(man.radii[0])),
                                          Fraction(2 * s, N)))
                            pairs.append((p, (p[0], Fraction(2 * (j + s), N)), ctx.convert(_F(man.radii[1])),
                                          Fraction(2 * s, N)))
            else:
                Nt, Nf = 32, 16
                rho = ctx.convert(_F(man.radii[0]))
                for i in range(Nt + 1):
                    for j in range(Nf):
                        for s in (1, 2, 4, 8, 16):
                            if i + s <= Nt:
                                pairs.append(((Fraction(i, Nt), Fraction(2 * j, Nf)),
                                              (Fraction(i + s, Nt), Fraction(2 * j, Nf)), rho, Fraction(s, Nt)))
                for j in range(64):
                    for s in (1, 2, 4, 8, 16, 32):
                        pairs.append(((Fraction(1, 2), Fraction(2 * j, 64)), (Fraction(1, 2), Fraction(2 * (j + s), 64)),
                                      rho, Fraction(2 * s, 64)))
            pi = ctx.pi()
            worst = None
            for p, q, scale, dq in pairs:
                dist = scale * pi * ctx.convert(dq)
                ex = ctx.abs(g(p) - g(q)) - C_H * ctx.pow(dist, alpha)
                worst = ex if worst is None else ctx.max(worst, ex)
            gmax = None
            for v_ in memo.values():
                gmax = ctx.abs(v_) if gmax is None else ctx.max(gmax, ctx.abs(v_))
            return [
                MANIFOLD_CLAIMS["A1"].stated(f"|g| <= B at {len(memo)} grid points on the {man.name}").measured(gmax, B),
                MANIFOLD_CLAIMS["A2"].stated(f"max over {len(pairs)} pairs on the {man.name} of |g(p)-g(q)| - C_H d_M(p,q)^alpha "
                                             "<= 0 (exact geodesic distances)").measured(worst, ctx.zero),
            ]
