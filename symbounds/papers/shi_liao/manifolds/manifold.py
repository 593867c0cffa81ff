"""Manifold inputs for [SL26] (docs/shi_liao.md, Manifolds): circle, sphere, flat torus and a closed curve, exactly.

Each manifold ``M`` is a base embedding ``y(params)`` in ``R^{n0}`` centred at 0, padded with zeros
to ``R^{D̄}``, turned by a rational orthogonal matrix ``Q`` (a Cayley transform
``Q = (I - A)(I + A)^{-1}`` of a rational skew matrix ``A``; the identity when ``D̄ = n0``) and
shifted to the centre of the cube: ``x = 1/2 + Q y``.  ``Q`` is an isometry, so reach, geodesic
distance and the covering radii are computed on ``y``.

=========  ===  ===========================================  =========================  ==============
name       d    base embedding ``y``                          reach ``tau``              ``C_M``
=========  ===  ===========================================  =========================  ==============
circle     1    ``rho (cos t, sin t)``                        ``rho``                    ``(pi+1) v / (2(1-kappa))``
sphere     2    ``rho (sin th cos ph, sin th sin ph, cos th)``  ``rho``                ``(pi^2+3pi/sqrt2+3) rho^2 / (4(1-kappa)^2)``
torus      2    ``(rho1 cos t1, rho1 sin t1, rho2 cos t2, ..)``  ``min(rho1, rho2)``     ``(pi sqrt2+1)^2 rho1 rho2 / (4(1-kappa)^2)``
curve      1    ``sum_k rho_k (cos kt, sin kt)`` in R^{2K}     estimated numerically      ``(pi+1) v / (2(1-kappa))``
=========  ===  ===========================================  =========================  ==============

(``v = sqrt(sum_k k^2 rho_k^2)`` is the curve's constant speed; ``kappa = 1/64`` is the share of
``r_g`` reserved for the rational approximation of net points.)  ``C_M`` bounds the net size:
``P <= C_M (2/r_g)^d <= C_M (16 C_H)^{d/alpha} eps^{-d/alpha}`` whenever ``r_g (1-kappa)`` is at
most ``v`` (circle, curve) or ``min rho`` (sphere, torus); it is *checked* (L8.1) at every instance.

Exactness: every centre and sample point is a rational point *on* M, from rational points of the
unit circle ``((1-s^2)/(1+s^2), 2s/(1+s^2))`` (and ``(c + i s)^k`` for the curve's harmonics) or of
the sphere (inverse stereographic projection).  Claims added to L1-L8 and E1-E3:

- M0: sample points and centres lie on M (exact rational arithmetic, residual exactly 0).
- M1: the centres form an ``r_g``-net of M: the parameter domain is cut into cells; for a cell
  with midpoint ``p0`` and centre ``c``, ``sup_{p in cell} |y(p) - c| <= |y(p0) - c| + L h`` with
  ``L h`` the length of the parameter segment (speed bound times half-width), in Arb balls.
- L7.M: ``|T - g| <= eps`` over all of M (``manifolds/certify.py``, run by ``run.run``).
- M2: ``d_M(x, y) <= 2 |x - y|`` on all of M (what E1 needs): for a great circle or the curve,
  ``v delta <= 2 chord(delta)`` for ``delta in [0, pi]``: on ``[delta_0, pi]`` by Arb on intervals,
  below ``delta_0`` from ``sin u >= u - u^3/6`` (chord >= v delta (1 - K^2 delta^2/24)), M2.0.
  The torus reduces to its two circles, the sphere to great circles.

Targets are intrinsic (the default ones are functions of the angles written as polynomials in the
base coordinates, ``y = Q^T (x - 1/2)``), so they are expressed in ``x1..xD̄`` for the network; their
geodesic Lipschitz constants are in ``DEFAULTS`` (for ``alpha < 1``: ``L^alpha (2B)^{1-alpha}``,
rounded up).  A1/A2 check ``|g| <= B`` and ``|g(p) - g(q)| <= C_H d_M(p,q)^alpha`` on a parameter
grid on M, with exact geodesic distances (meridians and the equator on the sphere).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from fractions import Fraction

import flint
import mpmath
import sympy
from sympy import Integer, Rational

from ....core.contexts import BallContext, Context
from ....core.exact import as_fraction as _F
from ....core.expr import parse_target
from ..constants import MAX_TOKENS, Constants, Instance, constants_from, exact_rational, sinpi
from .claims import ManifoldDomain

__all__ = ["Manifold", "ManifoldDomain", "ManifoldInstance", "manifold_instance", "instance_from_args", "make_manifold", "cayley", "NAMES", "KAPPA",
           "circle_point", "net_size"]

NAMES = ("circle", "sphere", "torus", "curve")
KAPPA = Rational(1, 64)
_BASE_DIM = {"circle": 2, "sphere": 3, "torus": 4, "curve": 6}
_INTRINSIC = {"circle": 1, "sphere": 2, "torus": 2, "curve": 1}
_DEFAULT_AMBIENT = {"circle": 2, "sphere": 3, "torus": 4, "curve": 10}
_DEFAULT_RADIUS = {"circle": Rational(1, 2), "sphere": Rational(1, 2), "torus": Rational(1, 4),
                   "curve": Rational(6, 13)}
#: name -> (amplitude a of the default target, its sup |g| = a, eps giving P of a few dozen)
DEFAULTS = {"circle": (Rational(1, 4), Rational(1, 2)), "sphere": (Rational(1, 4), Rational(9, 10)),
            "torus": (Rational(1, 8), Rational(9, 10)), "curve": (Rational(1, 4), Rational(1, 2))}
_MP = mpmath.MPContext()
_MP.prec = 120


def _mp_fraction(x, den: int = 10**9) -> Fraction:
    x = _MP.mpf(x)
    man, exp = abs(x).man_exp  # (mpmath keeps the sign apart from the mantissa)
    f = Fraction(int(man)) * (Fraction(2) ** int(exp))
    return (f if x >= 0 else -f).limit_denominator(den)


def circle_point(q) -> tuple[Fraction, Fraction]:
    """A rational point ``(c, s)``, ``c^2 + s^2 = 1`` exactly, within about 1e-17 of angle ``pi q``
    (stereographic parameter ``tan(pi q / 2)`` rounded to a rational)."""
    q = Fraction(q) % 2
    if q > 1:
        q -= 2  # q in (-1, 1]
    if abs(q) > Fraction(1, 2):
        c, s = circle_point(q - 1 if q > 0 else q + 1)
        return -c, -s
    t = _mp_fraction(_MP.tan(_MP.pi * _MP.mpf(q.numerator) / (2 * q.denominator)))
    return (1 - t * t) / (1 + t * t), 2 * t / (1 + t * t)


def cap_fraction(x: float) -> Fraction:
    """A dyadic rational in ``(x/2, x]`` (the sphere's polar cap angle over pi), ``0 < x``."""
    k = max(12, 4 - math.floor(math.log2(x)))
    return Fraction(math.floor(x * 2**k), 2**k)


def _sphere_point(u) -> tuple[Fraction, Fraction, Fraction]:
    """A rational point of the unit sphere near the unit vector ``u`` (inverse stereographic)."""
    if u[2] <= 0:
        U, V = _mp_fraction(u[0] / (1 - u[2])), _mp_fraction(u[1] / (1 - u[2]))
        n = 1 + U * U + V * V
        return 2 * U / n, 2 * V / n, (U * U + V * V - 1) / n
    U, V = _mp_fraction(u[0] / (1 + u[2])), _mp_fraction(u[1] / (1 + u[2]))
    n = 1 + U * U + V * V
    return 2 * U / n, 2 * V / n, (1 - U * U - V * V) / n


def _power(c: Fraction, s: Fraction, k: int) -> tuple[Fraction, Fraction]:
    """(cos kt, sin kt) from (cos t, sin t), exactly: (c + i s)^k."""
    re, im = Fraction(1), Fraction(0)
    for _ in range(k):
        re, im = re * c - im * s, re * s + im * c
    return re, im


def cayley(n: int) -> tuple:
    """A rational orthogonal ``n x n`` matrix ``(I - A)(I + A)^{-1}``, ``A`` the skew matrix with
    ``A[i][i+1] = 1/2`` (every coordinate gets mixed; exact, ``Q^T Q = I``)."""
    A = sympy.zeros(n, n)
    for i in range(n - 1):
        A[i, i + 1] = Rational(1, 2)
        A[i + 1, i] = -Rational(1, 2)
    Q = (sympy.eye(n) - A) * (sympy.eye(n) + A).inv()
    return tuple(tuple(_F(Q[i, j]) for j in range(n)) for i in range(n))


@dataclass(frozen=True)
class Manifold:
    """One embedded manifold.  ``radii``: circle/sphere ``(rho,)``, torus ``(rho1, rho2)``,
    curve ``(rho_1..rho_K)`` for the harmonics ``k = 1..K``.  ``Q`` is ``None`` (identity) or a
    rational orthogonal ``D̄ x D̄`` matrix."""

    name: str
    radii: tuple
    ambient: int
    Q: tuple | None = None

    @property
    def d(self) -> int:
        return _INTRINSIC[self.name]

    @property
    def base_dim(self) -> int:
        return 2 * len(self.radii) if self.name == "curve" else _BASE_DIM[self.name]

    @property
    def harmonics(self) -> tuple:
        """(radius, frequency) pairs of the curve (a circle is the curve with one harmonic)."""
        if self.name == "curve":
            return tuple((r, k + 1) for k, r in enumerate(self.radii))
        return ((self.radii[0], 1),)

    @property
    def speed2(self) -> Fraction:
        """``v^2 = sum_k k^2 rho_k^2`` (circle and curve)."""
        return sum((_F(r) ** 2 * k * k for r, k in self.harmonics), Fraction(0))

    def speed(self) -> sympy.Expr:
        return sympy.sqrt(Rational(self.speed2.numerator, self.speed2.denominator))

    # --- embedding (exact) -------------------------------------------------------------------
    def embed(self, y) -> tuple[Fraction, ...]:
        y = list(y) + [Fraction(0)] * (self.ambient - len(y))
        if self.Q is None:
            return tuple(Fraction(1, 2) + v for v in y)
        return tuple(Fraction(1, 2) + sum((q * v for q, v in zip(row, y) if v), Fraction(0)) for row in self.Q)

    def base_of(self, x) -> list[Fraction]:
        z = [_F(v) - Fraction(1, 2) for v in x]
        if self.Q is None:
            return z
        return [sum((self.Q[i][j] * z[i] for i in range(self.ambient)), Fraction(0)) for j in range(self.ambient)]

    def residual(self, x) -> Fraction:
        """0 exactly when ``x`` lies on M (and in the cube); otherwise a positive rational."""
        y = self.base_of(x)
        r = [abs(v) for v in y[self.base_dim:]]
        r += [max(Fraction(0), -_F(v), _F(v) - 1) for v in x]
        R = [_F(v) for v in self.radii]
        if self.name == "sphere":
            r.append(abs(y[0] ** 2 + y[1] ** 2 + y[2] ** 2 - R[0] ** 2))
        elif self.name == "torus":
            r += [abs(y[0] ** 2 + y[1] ** 2 - R[0] ** 2), abs(y[2] ** 2 + y[3] ** 2 - R[1] ** 2)]
        else:
            r.append(abs(y[0] ** 2 + y[1] ** 2 - R[0] ** 2))
            c, s = y[0] / R[0], y[1] / R[0]
            for k in range(2, len(R) + 1):
                ck, sk = _power(c, s, k)
                r += [abs(y[2 * k - 2] - R[k - 1] * ck), abs(y[2 * k - 1] - R[k - 1] * sk)]
        return max(r)

    def curve_point(self, c: Fraction, s: Fraction) -> list[Fraction]:
        out = []
        for r, k in self.harmonics:
            ck, sk = _power(c, s, k)
            out += [_F(r) * ck, _F(r) * sk]
        return out

    # --- geometry in a context ------------------------------------------------------------------
    def y_at(self, ctx: Context, qs) -> list:
        """Base coordinates at parameter angles ``pi*q`` (q exact rationals), in ``ctx``."""
        R = [ctx.convert(_F(r)) for r in self.radii]
        if self.name == "sphere":
            th, ph = (flint.fmpq(q.numerator, q.denominator) for q in qs)
            st = ctx.sin_pi_q(th)
            return [R[0] * st * ctx.cos_pi_q(ph), R[0] * st * ctx.sin_pi_q(ph), R[0] * ctx.cos_pi_q(th)]
        if self.name == "torus":
            out = []
            for r, q in zip(R, qs):
                f = flint.fmpq(q.numerator, q.denominator)
                out += [r * ctx.cos_pi_q(f), r * ctx.sin_pi_q(f)]
            return out
        out = []
        for (r, k), rv in zip(self.harmonics, R):
            f = flint.fmpq(k * qs[0].numerator, qs[0].denominator)
            out += [rv * ctx.cos_pi_q(f), rv * ctx.sin_pi_q(f)]
        return out

    def x_at(self, ctx: Context, y) -> list:
        """``1/2 + Q y`` in ``ctx``."""
        half = ctx.rational(1, 2)
        y = list(y) + [ctx.zero] * (self.ambient - len(y))
        if self.Q is None:
            return [half + v for v in y]
        return [half + sum((ctx.convert(q) * v for q, v in zip(row, y) if q), ctx.zero) for row in self.Q]

    # --- the net --------------------------------------------------------------------------------
    def net(self, r) -> list[tuple]:
        """Cells ``(centre_y, anchor_q, lip)`` covering the parameter domain, for radius ``r``
        (a SymPy number): ``lip`` is a SymPy bound of ``|y(p) - y(anchor)|`` over the cell, the
        anchor a tuple of parameter angles over pi (``None`` for a pole cap, whose bound is the
        distance itself)."""
        rr = float(r) * (1 - float(KAPPA))  # float only *chooses* the cells; M1 certifies them
        pi = sympy.pi
        if self.name in ("circle", "curve"):
            v = math.sqrt(self.speed2)
            n = max(2, math.ceil(math.pi * v / rr))
            cells = []
            for i in range(n):
                q = Fraction(2 * i + 1, n)
                c, s = circle_point(q)
                cells.append((tuple(self.curve_point(c, s)), (q,), self.speed() * pi / n))
            return cells
        if self.name == "torus":
            ns = [max(2, math.ceil(math.pi * float(rho) * math.sqrt(2) / rr)) for rho in self.radii]
            lip = sympy.sqrt(sum((Rational(rho) * pi / n) ** 2 for rho, n in zip(self.radii, ns)))
            cells = []
            for i in range(ns[0]):
                for j in range(ns[1]):
                    q1, q2 = Fraction(2 * i + 1, ns[0]), Fraction(2 * j + 1, ns[1])
                    c1, s1 = circle_point(q1)
                    c2, s2 = circle_point(q2)
                    y = (_F(self.radii[0]) * c1, _F(self.radii[0]) * s1, _F(self.radii[1]) * c2,
                         _F(self.radii[1]) * s2)
                    cells.append((y, (q1, q2), lip))
            return cells
        # sphere: two polar caps theta <= pi a, bands of width pi w in between.
        rho = _F(self.radii[0])
        a = cap_fraction(rr / (math.pi * float(rho)))
        nb = max(1, math.ceil((1 - 2 * float(a)) * math.pi * float(rho) / (math.sqrt(2) * rr)))
        w = (1 - 2 * a) / nb
        R = Rational(rho.numerator, rho.denominator)
        cap = 2 * R * sinpi(Rational(a.numerator, 2 * a.denominator))
        cells = [((Fraction(0), Fraction(0), rho), None, cap), ((Fraction(0), Fraction(0), -rho), None, cap)]
        for b in range(nb):
            lo, hi = a + b * w, a + (b + 1) * w
            if lo <= Fraction(1, 2) <= hi:
                S, Sf = Integer(1), 1.0
            else:
                e = hi if hi < Fraction(1, 2) else lo
                S, Sf = sinpi(Rational(e.numerator, e.denominator)), math.sin(math.pi * float(e))
            nphi = max(2, math.ceil(math.pi * Sf * float(rho) * math.sqrt(2) / rr))
            lip = R * sympy.sqrt((pi * Rational(w.numerator, 2 * w.denominator)) ** 2 + (S * pi / nphi) ** 2)
            th = (lo + hi) / 2
            for j in range(nphi):
                ph = Fraction(2 * j + 1, nphi)
                u = (_MP.sinpi(_MP.mpf(th.numerator) / th.denominator) * _MP.cospi(_MP.mpf(ph.numerator) / ph.denominator),
                     _MP.sinpi(_MP.mpf(th.numerator) / th.denominator) * _MP.sinpi(_MP.mpf(ph.numerator) / ph.denominator),
                     _MP.cospi(_MP.mpf(th.numerator) / th.denominator))
                p = _sphere_point(u)
                cells.append((tuple(rho * t for t in p), (th, ph), lip))
        return cells

    def C_M(self) -> sympy.Expr:
        """The per-manifold constant of ``P <= C_M (2/r_g)^d`` (module docstring)."""
        k1 = 1 - KAPPA
        R = [Rational(r) for r in self.radii]
        if self.name in ("circle", "curve"):
            return (sympy.pi + 1) * self.speed() / (2 * k1)
        if self.name == "sphere":
            return (sympy.pi**2 + 3 * sympy.pi / sympy.sqrt(2) + 3) * R[0] ** 2 / (4 * k1**2)
        return (sympy.pi * sympy.sqrt(2) + 1) ** 2 * R[0] * R[1] / (4 * k1**2)

    def reach(self):
        """Exact reach (circle, sphere: rho; flat torus: min rho_i), or ``None`` for the curve."""
        if self.name in ("circle", "sphere"):
            return Rational(self.radii[0])
        if self.name == "torus":
            return min(Rational(r) for r in self.radii)
        return None

    def reach_estimate(self) -> float:
        """Federer's ``inf |u|^2 / (2 dist(u, T))`` over chords ``u`` from one point (the curve is
        homogeneous under t -> t + a), sampled at 4000 angles: an estimate, not a certificate."""
        R, v2 = [float(r) for r in self.radii], float(self.speed2)
        best = math.inf
        for i in range(1, 4000):
            t = 2 * math.pi * i / 4000
            u2 = sum(4 * r * r * math.sin(k * t / 2) ** 2 for r, k in zip(R, range(1, len(R) + 1)))
            tang = sum(k * r * r * math.sin(k * t) for r, k in zip(R, range(1, len(R) + 1))) / math.sqrt(v2)
            normal = math.sqrt(max(u2 - tang * tang, 1e-300))
            best = min(best, u2 / (2 * normal))
        return best


def make_manifold(name: str, ambient: int | None = None, radius=None) -> Manifold:
    """Validate and build; bad parameters raise ``ValueError`` with a one-line message."""
    if name not in NAMES:
        raise ValueError(f"unknown manifold {name!r} (use {', '.join(NAMES)})")
    n0 = _BASE_DIM[name]
    ambient = _DEFAULT_AMBIENT[name] if ambient is None else ambient
    if isinstance(ambient, bool) or not isinstance(ambient, int):
        raise ValueError(f"the ambient dimension must be an integer, got {ambient!r}")
    if ambient < n0:
        raise ValueError(f"ambient dimension {ambient} is below the {n0} that the {name} needs")
    if ambient > 64:
        raise ValueError(f"ambient dimension {ambient} is above the limit 64")
    rho = _DEFAULT_RADIUS[name] if radius is None else exact_rational(radius, "radius")
    if rho <= 0:
        raise ValueError(f"the radius must be positive, got {rho}")
    radii = {"circle": (rho,), "sphere": (rho,), "torus": (rho, rho), "curve": (rho, rho / 6, rho / 6)}[name]
    if ambient == n0:
        if max(radii) > Rational(1, 2):
            raise ValueError(f"radius {rho} does not fit in the cube [0,1]^{ambient}: the {name} needs "
                             f"every radius <= 1/2")
        return Manifold(name, radii, ambient, None)
    if sum(r * r for r in radii) > Rational(1, 4):
        raise ValueError(f"radius {rho} does not fit in the cube [0,1]^{ambient} after the rotation: "
                         f"need sum of squared radii <= 1/4")
    return Manifold(name, radii, ambient, cayley(ambient))


# ------------------------------------------------------------------------------------------
# Targets


def _linear_text(man: Manifold, j: int) -> str:
    """``y_j = sum_i Q[i][j] (x_i - 1/2)`` as target text (exact rationals)."""
    if man.Q is None:
        return f"(x{j + 1}-1/2)"
    terms = [f"({q})*(x{i + 1}-1/2)" for i, q in enumerate(row[j] for row in man.Q) if q]
    return "(" + "+".join(terms) + ")"


def default_target(man: Manifold, amplitude) -> tuple[str, sympy.Expr]:
    """(text in x1..xD̄, geodesic Lipschitz constant L) of the default intrinsic target:

    circle ``a sin 2t`` (L = 2a/rho), sphere ``a cos th`` (L = a/rho), torus ``a sin t1 cos t2``
    (L = a / min rho), curve ``a sin 2t`` (L = 2a/v)."""
    a = Rational(amplitude)
    y = lambda j: _linear_text(man, j)
    R = [Rational(r) for r in man.radii]
    if man.name == "circle":
        return f"({2 * a / R[0] ** 2})*{y(0)}*{y(1)}", 2 * a / R[0]
    if man.name == "sphere":
        return f"({a / R[0]})*{y(2)}", a / R[0]
    if man.name == "torus":
        return f"({a / (R[0] * R[1])})*{y(1)}*{y(2)}", a / min(R)
    return f"({a / R[1]})*{y(3)}", 2 * a / man.speed()


def _rational_above(expr) -> Rational:
    """A rational upper bound of a positive constant (Arb upper endpoint rounded up, 2^-20 grid)."""
    ctx = BallContext(128)
    with ctx.scope():
        hi = ctx.to_fraction_bounds(ctx.from_sympy(sympy.nsimplify(expr) if expr.is_Float else expr))[1]
    return Rational(math.ceil(hi * 2**20), 2**20)


# ------------------------------------------------------------------------------------------
# Instances


@dataclass
class ManifoldInstance:
    """A manifold, the [SL26] instance on it (``inst.d`` = ambient ``D̄``) and the geodesic
    Lipschitz constant of the default target (``None`` for a user target)."""

    man: Manifold
    inst: Instance
    lipschitz: sympy.Expr | None = None
    _K: object = field(default=None, repr=False)

    @property
    def d(self) -> int:
        return self.man.d

    def r_g(self) -> sympy.Expr:
        """``(eps / (8 C_H))^(1/alpha)`` (docs/shi_liao.md, Manifolds)."""
        return (self.inst.eps / (8 * self.inst.C_H)) ** (1 / self.inst.alpha)

    def P_paper(self) -> sympy.Expr:
        d, a = self.man.d, self.inst.alpha
        return self.man.C_M() * (16 * self.inst.C_H) ** (d / a) * self.inst.eps ** (-d / a)

    def constants(self) -> Constants:
        if self._K is None:
            r_g = self.r_g()
            cells = self.man.net(r_g)
            if len(cells) > MAX_TOKENS:
                raise ValueError(f"the net needs P = {len(cells)} tokens, above the limit {MAX_TOKENS}; "
                                 "raise eps or lower the Hoelder constant")
            centres = [self.man.embed(c) for c, _, _ in cells]
            dom = ManifoldDomain(self.man, cells)
            self._K = constants_from(self.inst, centres, r_g, self.P_paper(), domain=dom)
        return self._K

    def sample_points(self, n_random: int = 8, seed: int = 0) -> list[tuple]:
        """Exact rational points on M: a few fixed ones and ``n_random`` seeded random ones."""
        rng = random.Random(seed)
        man = self.man
        fixed = [Fraction(0), Fraction(1), Fraction(-1), Fraction(1, 3), Fraction(-5, 2), Fraction(7)]
        rand = lambda: Fraction(rng.randrange(-2**12, 2**12 + 1), 2**10)
        circ = lambda t: ((1 - t * t) / (1 + t * t), 2 * t / (1 + t * t))
        ys = []
        if man.name in ("circle", "curve"):
            for t in fixed + [rand() for _ in range(n_random)]:
                ys.append(man.curve_point(*circ(t)))
        elif man.name == "torus":
            R1, R2 = (_F(r) for r in man.radii)
            params = list(zip(fixed, reversed(fixed))) + [(rand(), rand()) for _ in range(n_random)]
            for t1, t2 in params:
                (c1, s1), (c2, s2) = circ(t1), circ(t2)
                ys.append([R1 * c1, R1 * s1, R2 * c2, R2 * s2])
        else:
            rho = _F(man.radii[0])
            ys += [[Fraction(0), Fraction(0), rho], [Fraction(0), Fraction(0), -rho]]
            params = list(zip(fixed, reversed(fixed))) + [(rand(), rand()) for _ in range(n_random)]
            for U, V in params:
                n = 1 + U * U + V * V
                ys.append([rho * 2 * U / n, rho * 2 * V / n, rho * (U * U + V * V - 1) / n])
        return [man.embed(y) for y in ys]

    def check_point(self, x) -> tuple:
        """``x`` (exact rationals, ``D̄`` of them) if it lies on M exactly; else ``ValueError``."""
        if len(x) != self.man.ambient:
            raise ValueError(f"a point on the {self.man.name} needs {self.man.ambient} coordinates, got {len(x)}")
        x = tuple(_F(exact_rational(v, "point")) for v in x)
        if self.man.residual(x) != 0:
            raise ValueError(f"the point ({', '.join(map(str, x))[:60]}) does not lie on the {self.man.name} "
                             "exactly (use rational points of it)")
        return x

    def as_json(self) -> dict:
        out = self.inst.as_json()
        out.update({"manifold": self.man.name, "d": self.man.d, "ambient": self.man.ambient,
                    "radii": [str(r) for r in self.man.radii]})
        return out

    def label(self) -> str:
        i = self.inst
        return (f"manifold={self.man.name}  d={self.man.d}  ambient={self.man.ambient}  "
                f"radii=({', '.join(map(str, self.man.radii))})  alpha={i.alpha}  C_H={i.C_H}  B={i.B}  "
                f"eps={i.eps}")


def manifold_instance(name: str, ambient: int | None = None, d: int | None = None, alpha=None, C_H=None, B=None,
                      eps=None, target: str | None = None, radius=None, M=None, M_g=None) -> ManifoldInstance:
    """The instance behind ``symbounds pou --manifold NAME [--ambient D̄]``.

    ``d`` (the ``--d`` flag), if given, must equal the manifold's intrinsic dimension.  Defaults:
    the intrinsic target of :func:`default_target` with amplitude ``a`` (``B = 2a``), its geodesic
    Lipschitz constant as ``C_H`` (``alpha = 1``; for ``alpha < 1`` the rounded-up
    ``L^alpha (2B)^{1-alpha}``) and ``eps`` giving a net of a few dozen centres.  Every bad
    parameter raises ``ValueError`` with one line.
    """
    man = make_manifold(name, ambient, radius)
    if d is not None and d != man.d:
        raise ValueError(f"the {name} has intrinsic dimension {man.d}, not --d {d}")
    amp, eps0 = DEFAULTS[name]
    alpha = Integer(1) if alpha is None else exact_rational(alpha, "alpha")
    if not (0 < alpha <= 1):
        raise ValueError(f"alpha must lie in (0, 1], got {alpha}")
    B = 2 * amp if B is None else exact_rational(B, "bound")  # sup |g| = a: B = 2a leaves room for A1
    text, L = default_target(man, amp)
    lip = None
    if target is not None:
        parse_target(target, man.ambient)  # syntax errors (ExprError) before anything else
    else:
        target, lip = text, L
    if C_H is None:
        if lip is None:
            raise ValueError("a user target needs its geodesic Hoelder constant (--holder)")
        C_H = lip if alpha == 1 and lip.is_Rational else _rational_above(lip**alpha * (2 * B) ** (1 - alpha))
    inst = Instance(d=man.ambient, alpha=alpha, C_H=C_H, B=B, eps=eps0 if eps is None else eps, target=target,
                       M=M, M_g=M_g)
    inst.target_expr()
    return ManifoldInstance(man, inst, lip)


def instance_from_args(args) -> ManifoldInstance:
    """The instance of ``symbounds pou --manifold NAME ...`` from parsed arguments (``None`` or a
    missing attribute means "the manifold's default"): ``manifold, ambient, radius, d, alpha,
    holder, bound, eps, target, M, Mg``.  Numbers are read exactly (``io.parse_number``); every bad
    value raises ``ValueError`` (``ExprError`` for the target) with one line."""
    from ....core.modelfile import parse_number

    get = lambda k: getattr(args, k, None)
    num = lambda k, flag: None if get(k) is None else parse_number(str(get(k)), flag)
    return manifold_instance(
        get("manifold"), ambient=get("ambient"), d=get("d"), alpha=num("alpha", "--alpha"),
        C_H=num("holder", "--holder"), B=num("bound", "--bound"), eps=num("eps", "--eps"), target=get("target"),
        radius=num("radius", "--radius"), M=num("M", "--M"), M_g=num("Mg", "--Mg"))


def net_size(name: str, eps, C_H, alpha=1, ambient: int | None = None, radius=None) -> int:
    """``P`` of the manifold net at ``eps`` (no network built): for the ablation sweeps."""
    man = make_manifold(name, ambient, radius)
    r = (exact_rational(eps, "eps") / (8 * exact_rational(C_H, "C_H"))) ** (1 / exact_rational(alpha, "alpha"))
    if name in ("circle", "curve"):
        rr = float(r) * (1 - float(KAPPA))
        return max(2, math.ceil(math.pi * math.sqrt(man.speed2) / rr))
    return len(man.net(r))
