"""The rate, measured (docs/shi_liao.md, Generalisation rate): a softmax-partition-of-unity estimator on noisy samples.

Evidence, not proof: float64 through numpy (imported lazily; numpy is not a dependency of the
certifying code).  The estimator is the [SL26] network's output with ``g(c_k)`` replaced by local
averages:

    f_hat(x) = sum_k softmax_k(2 M_g <c_k, x> - M_g |c_k|^2) * ybar_k,
    ybar_k   = mean of the y_i whose nearest centre is c_k (0 for an empty cell),

with ``eps(n) = n^{-alpha/(2 alpha + d)}``, ``r_g`` and the centres as in the construction (cube:
the grid (docs/shi_liao.md, Constants); manifold: the certified net of ``papers/shi_liao/manifolds/``) and
``M_g = log(8 B P / eps)/(3 r_g^2)``.  The excess risk ``E (f_hat - g)^2`` is averaged over a fixed
evaluation set (uniform in the cube, uniform in the angle on the curve) and over repetitions; the
fitted slope of ``log risk`` against ``log n`` is set beside ``-2 alpha/(2 alpha + d)``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import sympy

from .constants import M_g_of, grid_ratio, r_g_of

__all__ = ["CASES", "measure", "fit_slope"]


def _F(v) -> sympy.Float:
    """A float as a SymPy number, to evaluate the construction's formulas (constants.py) here."""
    return sympy.Float(float(v))


def _np():
    import numpy

    return numpy


def _estimate(C, X, y, Xe, M_g):
    np = _np()
    cn = (C * C).sum(1)
    assign = np.argmax(2 * X @ C.T - cn, axis=1)
    sums = np.bincount(assign, weights=y, minlength=len(C))
    counts = np.bincount(assign, minlength=len(C))
    ybar = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    S = M_g * (2 * Xe @ C.T - cn)
    S -= S.max(1, keepdims=True)  # max-shifted softmax
    Wt = np.exp(S)
    return (Wt @ ybar) / Wt.sum(1)


def _cube_case(d, C_H, B):
    np = _np()

    def g(X):
        return np.sin(X.sum(1) / math.sqrt(d)) / 2  # Lipschitz 1/2 <= C_H, |g| <= 1/2 <= B

    def centres(eps, alpha):
        r = float(r_g_of(_F(eps), _F(C_H), _F(alpha)))
        m = math.ceil(float(grid_ratio(d, r)))
        axis = (2 * np.arange(1, m + 1) - 1) / (2 * m)
        grids = np.meshgrid(*([axis] * d), indexing="ij")
        return np.stack([gr.ravel() for gr in grids], 1), r

    def sample(rng, n):
        return rng.random((n, d))

    def eval_points(rng):
        return rng.random((4000, d))

    return g, centres, sample, eval_points


def _curve_case(ambient, C_H, B):
    np = _np()
    import sympy

    from .manifolds import manifold as mf

    man = mf.make_manifold("curve", ambient)
    Q = np.array([[float(v) for v in row] for row in man.Q])
    R = [float(r) for r in man.radii]

    def embed(t):
        Y = np.zeros((len(t), ambient))
        for k, r in enumerate(R, 1):
            Y[:, 2 * k - 2] = r * np.cos(k * t)
            Y[:, 2 * k - 1] = r * np.sin(k * t)
        return 0.5 + Y @ Q.T

    def g_t(t):
        return np.sin(2 * t) / 4  # geodesic Lipschitz 2 (1/4) / v = 13/14

    def centres(eps, alpha):
        r = (sympy.Rational(Fraction(eps).limit_denominator(10**12)) / (8 * sympy.Rational(C_H))) ** (1 / sympy.Rational(alpha))
        cells = man.net(r)
        C = np.array([[float(v) for v in man.embed(c)] for c, _, _ in cells])
        return C, float(r)

    def sample(rng, n):
        return rng.random(n) * 2 * math.pi

    def eval_points(rng):
        return (np.arange(4000) + 0.5) * 2 * math.pi / 4000

    return g_t, centres, sample, eval_points, embed


CASES = {
    # key: (label, d intrinsic, ambient, C_H, B)
    "cube-d1": ("cube [0,1]^1, g = sin(x1)/2", 1, 1, Fraction(1), Fraction(1)),
    "cube-d2": ("cube [0,1]^2, g = sin((x1+x2)/sqrt 2)/2", 2, 2, Fraction(1), Fraction(1)),
    "curve-10": ("closed curve in [0,1]^10 (d = 1), g = sin(2t)/4", 1, 10, Fraction(13, 14), Fraction(1, 2)),
}


def measure(key: str, ns, reps: int = 10, sigma: float = 0.5, alpha=Fraction(1), seed: int = 0) -> list[dict]:
    """Rows ``{n, eps, P, risk, risk_sd}`` for the case ``key`` of ``CASES``."""
    np = _np()
    label, d, ambient, C_H, B = CASES[key]
    a = float(alpha)
    rng = np.random.default_rng(seed)
    if key.startswith("cube"):
        g, centres, sample, eval_points = _cube_case(d, float(C_H), float(B))
        embed = lambda X: X
        Xe_param = eval_points(rng)
        Xe, ge = Xe_param, g(Xe_param)
        gfun = g
    else:
        g_t, centres, sample, eval_points, embed = _curve_case(ambient, C_H, B)
        te = eval_points(rng)
        Xe, ge = embed(te), g_t(te)
        gfun = None
    rows = []
    for n in ns:
        eps = n ** (-a / (2 * a + d))
        C, r = centres(eps, a)
        P = len(C)
        M_g = float(M_g_of(_F(B), P, _F(eps), _F(r)))
        risks = []
        for _ in range(reps):
            par = sample(rng, n)
            X = embed(par)
            y = (gfun(X) if gfun is not None else g_t(par)) + sigma * rng.standard_normal(n)
            fh = _estimate(C, X, y, Xe, M_g)
            risks.append(float(((fh - ge) ** 2).mean()))
        rows.append({"n": n, "eps": eps, "P": P, "risk": sum(risks) / reps,
                     "risk_sd": float(np.std(risks)) / math.sqrt(reps)})
    return rows


def fit_slope(rows) -> float:
    """Least-squares slope of ``log risk`` against ``log n``."""
    lx = [math.log(r["n"]) for r in rows]
    ly = [math.log(r["risk"]) for r in rows]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((u - mx) * (v - my) for u, v in zip(lx, ly)) / sum((u - mx) ** 2 for u in lx)
