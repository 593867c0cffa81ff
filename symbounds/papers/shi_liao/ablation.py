"""The ablation of [SL26] (docs/shi_liao.md, Manifolds) as numbers: a net of the manifold against a grid of the cube.

For the same target (Hoelder constant ``C_H``, exponent ``alpha``) and accuracy ``eps``:

=============  ================================================  ==========================================
covering       centres                                            paper's order
=============  ================================================  ==========================================
manifold       the certified net of ``manifolds.py`` at           ``C_M (16 C_H)^{d/alpha} eps^{-d/alpha}``
               ``r_g = (eps/(8 C_H))^{1/alpha}``
ambient cube   the grid (docs/shi_liao.md, Constants) in ``[0,1]^{D̄}``:             ``D̄^{D̄/2} (8 C_H)^{D̄/alpha} eps^{-D̄/alpha}``
               ``m = ceil(sqrt(D̄)/(2 r))``, ``r = (eps/(4C_H))^{1/alpha}``, ``P = m^{D̄}``
=============  ================================================  ==========================================

Parameters (dense) of the network with ``P`` tokens and ``D = D̄ + 4`` rows:
``8D(P+2) + 4D + 2(4D^2 + 3D)``.  ``slope`` fits ``log P`` against ``log(1/eps)`` by least squares
over a sweep: ``d/alpha`` for the net, ``D̄/alpha`` for the cube.
"""

from __future__ import annotations

import math
from fractions import Fraction

import sympy

from .constants import ceiling_exact, exact_rational, grid_ratio, params_dense_of, r_g_of
from .manifolds import manifold as mf

__all__ = ["params_dense", "cube_P", "net_count", "ablation_row", "sweep", "slope"]


def params_dense(P: int, inputs: int) -> int:
    D = inputs + 4
    return int(params_dense_of(D, P))


def cube_P(D: int, eps, C_H, alpha=1) -> int:
    """``m^D`` with ``m = ceil(sqrt(D)/(2 r))``, ``r = (eps/(4 C_H))^{1/alpha}`` (exact ceiling)."""
    eps, C_H, alpha = (exact_rational(v, w) for v, w in ((eps, "eps"), (C_H, "C_H"), (alpha, "alpha")))
    return ceiling_exact(grid_ratio(D, r_g_of(eps, C_H, alpha))) ** D


def net_count(man: mf.Manifold, r: float) -> int:
    """The number of cells ``Manifold.net(r)`` would make (same float choices, no points built)."""
    rr = r * (1 - float(mf.KAPPA))
    if man.name in ("circle", "curve"):
        return max(2, math.ceil(math.pi * math.sqrt(man.speed2) / rr))
    if man.name == "torus":
        out = 1
        for rho in man.radii:
            out *= max(2, math.ceil(math.pi * float(rho) * math.sqrt(2) / rr))
        return out
    rho = float(man.radii[0])
    a = mf.cap_fraction(rr / (math.pi * rho))
    nb = max(1, math.ceil((1 - 2 * float(a)) * math.pi * rho / (math.sqrt(2) * rr)))
    w = (1 - 2 * a) / nb
    total = 2
    for b in range(nb):
        lo, hi = a + b * w, a + (b + 1) * w
        if lo <= Fraction(1, 2) <= hi:
            Sf = 1.0
        else:
            Sf = math.sin(math.pi * float(hi if hi < Fraction(1, 2) else lo))
        total += max(2, math.ceil(math.pi * Sf * rho * math.sqrt(2) / rr))
    return total


def ablation_row(name: str, eps, C_H, alpha=1, ambient: int | None = None) -> dict:
    """P, parameter counts and the paper's orders for the manifold net and the ambient cube."""
    man = mf.make_manifold(name, ambient)
    eps, C_H, alpha = (exact_rational(v, w) for v, w in ((eps, "eps"), (C_H, "C_H"), (alpha, "alpha")))
    r = (eps / (8 * C_H)) ** (1 / alpha)
    P_man = net_count(man, float(r))
    Db, d = man.ambient, man.d
    P_cube = cube_P(Db, eps, C_H, alpha)
    paper_man = man.C_M() * (16 * C_H) ** (d / alpha) * eps ** (-d / alpha)
    paper_cube = sympy.Integer(Db) ** sympy.Rational(Db, 2) * (8 * C_H) ** (Db / alpha) * eps ** (-Db / alpha)
    return {
        "manifold": name, "d": d, "ambient": Db, "alpha": str(alpha), "C_H": str(C_H), "eps": str(eps),
        "P_manifold": P_man, "params_manifold": params_dense(P_man, Db),
        "P_manifold_paper": float(paper_man),
        "P_cube": P_cube, "params_cube": params_dense(P_cube, Db),
        "P_cube_paper": float(paper_cube),
    }


def sweep(name: str, C_H, alpha=1, ambient: int | None = None, ks=range(1, 11)) -> list[tuple]:
    """``(eps, P_manifold, P_cube)`` at ``eps = 2^-k`` (``eps < 1``)."""
    man = mf.make_manifold(name, ambient)
    C_H, alpha = exact_rational(C_H, "C_H"), exact_rational(alpha, "alpha")
    out = []
    for k in ks:
        eps = sympy.Rational(1, 2**k)
        r = (eps / (8 * C_H)) ** (1 / alpha)
        out.append((eps, net_count(man, float(r)), cube_P(man.ambient, eps, C_H, alpha)))
    return out


def slope(xs, ys) -> float:
    """Least-squares slope of ``log y`` against ``log(1/x)``."""
    lx = [-math.log(float(x)) for x in xs]
    ly = [math.log(float(y)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
