"""Softmax partition of unity [SL26]: Shi & Liao's two-block Transformer, its constants and claims.

Z. Shi, W. Liao, *Learning Theory of Transformers: Local-to-Global Approximation via Softmax
Partition of Unity*, NeurIPS 2026, arXiv:2605.08811.  Concrete choices follow ``SPEC.md`` A.3-A.5.

Paper symbols and code names
============================
===================  ==============  ===========================================================
paper                code            value
===================  ==============  ===========================================================
``r_g``              ``r_g``         ``(eps / (4 C_H))^(1/alpha)``
``m``                ``m``           ``ceil(sqrt(d) / (2 r_g))`` grid points per axis
``P``                ``P``           ``m^d`` centres ``c = ((2i-1)/(2m))_i`` = tokens
``M_g``              ``M_g``         ``log(8 B P / eps) / (3 r_g^2)``
``theta_k``          ``theta(k)``    ``2 pi k / P``, ``k = 1..P`` (token ``j`` <-> ``k = j + 1``)
``c``                ``c``           ``1 - cos(2 pi / P)``
``S(M)``             ``S``           ``sum_k exp(M cos theta_k)``
``eta(M)``           ``eta``         ``e^M / S(M) = 1 / sum_k exp(M (cos theta_k - 1))``
``lambda(M)``        ``lam``         ``sum_k e^{M cos theta_k} cos theta_k / S(M)``
``M``                ``M``           ``(1/c) log(4 (P-1) B (36 d M_g + 2) / eps)``
``w_ind``            ``w_ind``       ``1 / (eta(M) - 2 e^{-cM})``
``D``, ``d_ff``      ``D``, ``d_ff`` ``d + 4``, ``2D``
===================  ==============  ===========================================================

Rows of the hidden state (0-based): ``0..d-1`` input ``x`` (after layer 1: row 0 holds ``T~``,
row 1 holds ``g~``), ``d`` constant, ``d+1`` indicator, ``d+2, d+3`` position
``p_j = (sin theta_j, cos theta_j)``.  Layers: 0 attention (``P + 2`` heads), 1 feed-forward,
2 attention (one head), 3 feed-forward.  No skip connections.

Domains: ``constants(inst)`` builds the cube grid and calls ``constants_from(inst, centres, r_g,
P_paper)``, which accepts any exact centres in ``[0,1]^{inst.d}``; with ``domain=`` (a manifold,
``papers/manifolds.py``) the covering claim, E1, the size bound and the assumption checks come from
the domain, and ``K.d`` is the ambient input dimension while ``K.d_int`` is the intrinsic one.

The eta and lambda weights are written in the max-shifted form ``exp(M (cos theta_k - 1))``:
mathematically the same numbers as ``e^M / S(M)``, and the form a float64 implementation uses.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from fractions import Fraction

import sympy
from sympy import Integer, Rational

from ..contexts import Context
from ..expr import parse_target, variables
from ..transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer, forward
from ..verify import Measured, aggregate

__all__ = [
    "Instance",
    "Constants",
    "constants",
    "symbolic_constants",
    "build",
    "measure",
    "cancellation_identity",
    "sine_cancellation",
    "default_target",
    "sample_points",
    "MAX_TOKENS",
    "ROWS",
    "constants_from",
]

#: Largest grid the command accepts (layer 1 has P + 2 heads of P x P attention).
MAX_TOKENS = 1024
#: Largest grid whose claims ``pou`` measures: every layer-1 attention matrix is kept for the
#: claims (P + 2 heads of P x P balls, ~2 GB at P = 256); larger grids go to ``certify``.
MAX_TRACED_TOKENS = 300

# layer indices
ATT1, FFN1, ATT2, FFN2 = 0, 1, 2, 3


def ROWS(d: int) -> dict:
    """Row indices of the hidden state for input dimension d."""
    return {"T": 0, "g": 1, "const": d, "ind": d + 1, "pos": (d + 2, d + 3)}


def default_target(d: int) -> str:
    """A 2-Lipschitz target bounded by 1: ``sin(2 x1)`` (d = 1), ``sin(2 (x1+..+xd) / sqrt(d))``."""
    if d == 1:
        return "sin(2*x1)"
    return f"sin(2*({'+'.join(f'x{i}' for i in range(1, d + 1))})/sqrt({d}))"


def _exact(v, what: str) -> Rational:
    """An exact SymPy Rational from an int, Fraction, SymPy Rational or a string ('1/2', '0.1')."""
    from ..io import parse_number

    if isinstance(v, float):
        raise TypeError(f"{what}: a float is not exact; pass a string such as '0.1' or a Fraction")
    if isinstance(v, str):
        v = parse_number(v, what)
    if isinstance(v, Fraction):
        return Rational(v.numerator, v.denominator)
    if isinstance(v, int) or (isinstance(v, sympy.Basic) and v.is_Rational):
        return Rational(v)
    raise TypeError(f"{what}: expected an exact rational, got {type(v).__name__}")


@dataclass(frozen=True)
class Instance:
    """The inputs of one construction: dimension, smoothness, bounds, accuracy, target, overrides."""

    d: int = 1
    alpha: Rational = Integer(1)
    C_H: Rational = Integer(2)
    B: Rational = Integer(2)
    eps: Rational = Rational(1, 10)
    target: str | None = None
    M: Rational | None = None
    M_g: Rational | None = None

    def __post_init__(self):
        if not isinstance(self.d, int) or isinstance(self.d, bool) or self.d < 1:
            raise ValueError(f"d must be an integer >= 1, got {self.d!r}")
        for name in ("alpha", "C_H", "B", "eps", "M", "M_g"):
            v = getattr(self, name)
            if v is None:
                continue
            object.__setattr__(self, name, _exact(v, name))
        if not (0 < self.alpha <= 1):
            raise ValueError(f"alpha must lie in (0, 1], got {self.alpha}")
        if self.C_H <= 0:
            raise ValueError(f"the Hoelder constant C_H must be positive, got {self.C_H}")
        if self.B <= 0:
            raise ValueError(f"the bound B must be positive, got {self.B}")
        if not (0 < self.eps < 1):
            raise ValueError(f"eps must lie in (0, 1), got {self.eps}")
        if self.M is not None and self.M <= 0:
            raise ValueError(f"the attention scale M must be positive, got {self.M}")
        if self.M_g is not None and self.M_g <= 0:
            raise ValueError(f"the partition scale M_g must be positive, got {self.M_g}")

    @property
    def target_text(self) -> str:
        return self.target if self.target is not None else default_target(self.d)

    def target_expr(self) -> sympy.Expr:
        return parse_target(self.target_text, self.d)

    def as_json(self) -> dict:
        s = lambda v: None if v is None else str(v)
        return {
            "paper": "shi_liao",
            "d": self.d,
            "alpha": s(self.alpha),
            "holder": s(self.C_H),
            "bound": s(self.B),
            "eps": s(self.eps),
            "target": self.target_text,
            "M": s(self.M),
            "Mg": s(self.M_g),
        }


# ------------------------------------------------------------------------------------------
# Constants


def symbolic_constants() -> dict:
    """Each constant of SPEC A.3 as a SymPy expression in (d, alpha, C_H, B, eps) and, where the
    grid enters, in the token count ``P`` (itself ``ceil(sqrt(d)/(2 r_g))^d``) and the scale ``M``."""
    d = sympy.Symbol("d", positive=True, integer=True)
    alpha, C_H, B, eps = sympy.symbols("alpha C_H B varepsilon", positive=True)
    P = sympy.Symbol("P", positive=True, integer=True)
    M = sympy.Symbol("M", positive=True)
    k = sympy.Symbol("k", positive=True, integer=True)
    r_g = (eps / (4 * C_H)) ** (1 / alpha)
    M_g = sympy.log(8 * B * P / eps) / (3 * r_g**2)
    c = 1 - sympy.cos(2 * sympy.pi / P)
    S = sympy.Sum(sympy.exp(M * sympy.cos(2 * sympy.pi * k / P)), (k, 1, P))
    eta = sympy.exp(M) / S
    lam = sympy.Sum(sympy.exp(M * sympy.cos(2 * sympy.pi * k / P)) * sympy.cos(2 * sympy.pi * k / P), (k, 1, P)) / S
    D = d + 4
    return {
        "r_g": r_g,
        "m": sympy.ceiling(sympy.sqrt(d) / (2 * r_g)),
        "P": sympy.ceiling(sympy.sqrt(d) / (2 * r_g)) ** d,
        "P_paper": d ** (d / 2) * (8 * C_H) ** (d / alpha) * eps ** (-d / alpha),
        "M_g": M_g,
        "c": c,
        "S": S,
        "eta": eta,
        "lambda": lam,
        "M": sympy.log(4 * (P - 1) * B * (36 * d * M_g + 2) / eps) / c,
        "w_ind": 1 / (eta - 2 * sympy.exp(-c * M)),
        "D": D,
        "d_ff": 2 * D,
        "heads_1": P + 2,
        "heads_2": Integer(1),
        "params_dense": 8 * D * (P + 2) + 4 * D + 2 * (4 * D**2 + 3 * D),
        "max_weight_paper": eps ** (-2 * d / alpha) * sympy.log(1 / eps),
    }


def sinpi(q) -> sympy.Expr:
    """sin(pi q) for rational q, kept unevaluated (Arb evaluates it with sin_pi) unless exact."""
    q = Rational(q) % 2
    if (2 * q).is_integer:
        return sympy.sin(sympy.pi * q)  # 0 or +-1
    return sympy.sin(sympy.pi * q, evaluate=False)


def cospi(q) -> sympy.Expr:
    q = Rational(q) % 2
    if (2 * q).is_integer:
        return sympy.cos(sympy.pi * q)
    return sympy.cos(sympy.pi * q, evaluate=False)


#: Named constants of a construction (symbols in the weights; definitions in ``Constants.defs``).
SYM = {name: sympy.Symbol(name, positive=True) for name in ("M_g", "c", "M", "emcM", "eta", "lambda", "w_ind")}


@dataclass
class Constants:
    """The constants of one instance.

    Rational and algebraic ones (``r_g``, ``P``, the centres) are exact SymPy numbers.  The
    transcendental ones are symbols (``SYM``) with definitions in ``defs`` (dependency order), so
    that the weights stay small expressions and each context evaluates each definition once.
    """

    inst: Instance
    g: sympy.Expr
    r_g: sympy.Expr
    m: int
    P: int
    P_paper: sympy.Expr
    defs: dict  # Symbol -> definition
    centres: list
    g_centres: list
    M_derived: sympy.Expr = None
    M_g_derived: sympy.Expr = None
    #: ``None`` for the cube; otherwise the input domain (a manifold, ``symbounds.papers.manifolds``)
    #: which supplies the covering claim, the near-field claim E1, the size bound ``P_paper`` and
    #: the checks of the target's assumptions on that domain.
    domain: object = None

    @property
    def d(self) -> int:
        """The input dimension (rows ``0..d-1``): ``d`` on the cube, the ambient ``D̄`` on a manifold."""
        return self.inst.d

    @property
    def d_int(self) -> int:
        """The intrinsic dimension that drives ``r_g`` and ``P``: ``d`` on the cube."""
        return self.inst.d if self.domain is None else self.domain.d

    @property
    def D(self) -> int:
        return self.inst.d + 4

    def __getattr__(self, name):
        # K.M, K.M_g, K.eta ... are the symbols of the named constants
        key = {"lam": "lambda"}.get(name, name)
        if key in SYM:
            return SYM[key]
        raise AttributeError(name)

    def definitions(self) -> tuple:
        return tuple(self.defs.items())

    def table(self) -> dict:
        """name -> exact SymPy value or symbol definition (the keys of the JSON ``constants``)."""
        D = self.D
        t = {"r_g": self.r_g, "m": Integer(self.m), "P": Integer(self.P), "P_paper": self.P_paper}
        t.update({str(s): e for s, e in self.defs.items()})
        t.update({"D": Integer(D), "d_ff": Integer(2 * D), "heads_1": Integer(self.P + 2), "heads_2": Integer(1)})
        if self.domain is not None:
            del t["m"]
            t.update(self.domain.table())
        return t


def _ceiling_exact(expr) -> int:
    """ceil(expr) for a positive algebraic SymPy number, checked against an Arb enclosure."""
    from ..contexts import BallContext

    n = int(sympy.ceiling(expr))
    for prec in (128, 512, 2048):
        ctx = BallContext(prec)
        v = ctx.from_sympy(expr)
        below = ctx.lt(ctx.rational(n - 1), v)
        above = ctx.le(v, ctx.rational(n))
        if below and above:
            return n
        if below is False or above is False:
            raise ArithmeticError(f"SymPy's ceiling of {expr} disagrees with its enclosure")
    raise ArithmeticError(f"cannot decide ceil({expr})")


def constants(inst: Instance) -> Constants:
    """Every constant of SPEC A.3 at ``inst``; ``inst.M`` / ``inst.M_g`` replace the derived scales."""
    d, alpha, C_H, eps = inst.d, inst.alpha, inst.C_H, inst.eps
    r_g = (eps / (4 * C_H)) ** (1 / alpha)
    m = _ceiling_exact(sympy.sqrt(d) / (2 * r_g))
    P = m**d
    if P > MAX_TOKENS:
        raise ValueError(
            f"the grid needs P = {P} tokens (m = {m} per axis), above the limit {MAX_TOKENS}; "
            "raise eps or lower the Hoelder constant"
        )
    if P < 2:
        raise ValueError("the grid has a single centre (P = 1); lower eps or raise the Hoelder constant")
    P_paper = Integer(d) ** Rational(d, 2) * (8 * C_H) ** (d / alpha) * eps ** (-d / alpha)
    centres = [
        tuple(Rational(2 * i - 1, 2 * m) for i in idx) for idx in itertools.product(range(1, m + 1), repeat=d)
    ]
    return constants_from(inst, centres, r_g, P_paper, m=m)


def constants_from(inst: Instance, centres: list, r_g, P_paper, m: int = 0, domain=None) -> Constants:
    """The constants of SPEC A.3 for given exact centres ``c_1..c_P`` in ``[0,1]^{inst.d}``.

    ``r_g`` is the covering radius the centres were chosen for (the cube grid's, or a manifold
    net's), ``P_paper`` the paper's size bound to set ``P`` against.  ``M_g``, ``M`` and the
    attention constants follow A.3 with the input dimension ``inst.d`` (``|T_h(x)| <= 3 d M_g``
    on ``[0,1]^d`` is what the leakage bound uses, so on a manifold it is the ambient ``D̄``).
    """
    d, B, eps = inst.d, inst.B, inst.eps
    g = inst.target_expr()
    P = len(centres)
    if P > MAX_TOKENS:
        raise ValueError(f"the net needs P = {P} tokens, above the limit {MAX_TOKENS}; raise eps")
    if P < 2:
        raise ValueError("a single centre (P = 1); lower eps or raise the Hoelder constant")
    if any(len(c_) != d for c_ in centres):
        raise ValueError(f"every centre needs {d} coordinates")
    M_g, c, M, emcM, eta, lam, w_ind = (SYM[k] for k in ("M_g", "c", "M", "emcM", "eta", "lambda", "w_ind"))
    M_g_derived = sympy.log(8 * B * P / eps) / (3 * r_g**2)
    M_derived = sympy.log(4 * (P - 1) * B * (36 * d * M_g + 2) / eps) / c
    cos_k = [cospi(Rational(2 * k, P)) for k in range(1, P + 1)]
    shifted = [sympy.exp(M * (ck - 1)) for ck in cos_k]  # e^{M cos theta_k} / e^M
    defs = {
        M_g: inst.M_g if inst.M_g is not None else M_g_derived,
        c: 1 - cospi(Rational(2, P)),
        M: inst.M if inst.M is not None else M_derived,
        emcM: sympy.exp(-c * M),
        eta: 1 / sympy.Add(*shifted),
        lam: sympy.Add(*[s * ck for s, ck in zip(shifted, cos_k)]) / sympy.Add(*shifted),
    }
    defs[w_ind] = 1 / (eta - 2 * emcM)
    xs = variables(d)
    centres = [tuple(Rational(v) for v in c_) for c_ in centres]
    g_centres = [g.subs(dict(zip(xs, c_))) for c_ in centres]
    for c_, gc in zip(centres, g_centres):
        if gc.has(sympy.I, sympy.zoo, sympy.nan, sympy.oo, -sympy.oo) or gc.is_extended_real is False:
            raise ValueError(f"the target is not a finite real number at the centre ({', '.join(map(str, c_))})")
    return Constants(inst, g, r_g, m, P, P_paper, defs, centres, g_centres, M_derived, M_g_derived, domain)


# ------------------------------------------------------------------------------------------
# The network


def _zeros(r, c):
    return [[Integer(0)] * c for _ in range(r)]


def build(K: Constants) -> Transformer:
    """The two-block Transformer of SPEC A.4 with exact (SymPy) weights."""
    d, P, D = K.d, K.P, K.D
    R = ROWS(d)
    p0, p1 = R["pos"]
    zero, one = Integer(0), Integer(1)
    # Embedding: column 0 = [x; 1; 0; p_1], column j = [0; 0; 0; p_{j+1}].
    base = _zeros(D, P)
    for j in range(P):
        q = Rational(2 * (j + 1), P)
        base[p0][j] = sinpi(q)
        base[p1][j] = cospi(q)
    base[R["const"]][0] = one
    E = _zeros(D, d)
    for i in range(d):
        E[i][i] = one

    def pos_reader(rot):
        W = _zeros(2, D)
        for a in range(2):
            W[a][p0], W[a][p1] = rot[a]
        return W

    W_K = pos_reader([[K.M, zero], [zero, K.M]])
    identity = pos_reader([[one, zero], [zero, one]])
    heads = []
    for h in range(P):
        # R(theta_1 - theta_{h+1}) = R(-2 pi h / P): score peaks at key 0 exactly for query h.
        phi = Rational(-2 * h, P)
        rot = [[cospi(phi), sinpi(phi)], [-sinpi(phi), cospi(phi)]]
        c_h = K.centres[h]
        W_V = _zeros(2, D)
        for i in range(d):
            W_V[0][i] = 2 * K.M_g * c_h[i]
        W_V[0][R["const"]] = -K.M_g * sum(ci**2 for ci in c_h)
        W_V[1][R["const"]] = K.g_centres[h]
        W_O = _zeros(D, 2)
        W_O[R["T"]][0] = one
        W_O[R["g"]][1] = one
        heads.append(Head(_t(pos_reader(rot)), _t(W_K), _t(W_V), _t(W_O)))
    # Indicator head: value = constant row, written to the indicator row.
    W_V = _zeros(2, D)
    W_V[0][R["const"]] = one
    W_O = _zeros(D, 2)
    W_O[R["ind"]][0] = one
    heads.append(Head(_t(identity), _t(W_K), _t(W_V), _t(W_O)))
    # Position head: value = p_k, written back to the position rows.
    W_V = _zeros(2, D)
    W_V[0][p0] = one
    W_V[1][p1] = one
    W_O = _zeros(D, 2)
    W_O[p0][0] = one
    W_O[p1][1] = one
    heads.append(Head(_t(identity), _t(W_K), _t(W_V), _t(W_O)))
    att1 = Attention(tuple(heads), "softmax", zero)

    # FFN1: z = Lambda relu(z^ - 2 e^{-cM} e_ind) - Lambda relu(-z^).
    lam_diag = [zero] * D
    lam_diag[R["T"]] = 1 / K.eta
    lam_diag[R["g"]] = 1 / K.eta
    lam_diag[R["ind"]] = K.w_ind
    lam_diag[p0] = 1 / K.lam
    lam_diag[p1] = 1 / K.lam
    ffn1 = _split_relu_ffn(D, lam_diag, {R["ind"]: -2 * K.emcM})

    # Layer 2: query = indicator, key = T~, value = g~, written to row 0.
    q = _zeros(1, D)
    q[0][R["ind"]] = one
    k = _zeros(1, D)
    k[0][R["T"]] = one
    v = _zeros(1, D)
    v[0][R["g"]] = one
    o = _zeros(D, 1)
    o[0][0] = one
    att2 = Attention((Head(_t(q), _t(k), _t(v), _t(o)),), "softmax", zero)
    pass_diag = [zero] * D
    pass_diag[0] = one
    ffn2 = _split_relu_ffn(D, pass_diag, {})
    return Transformer(
        (att1, ffn1, att2, ffn2), Embedding(_t(base), _t(E), 0), Readout(0, 0), "vector", K.definitions()
    )


def _t(rows):
    return tuple(tuple(r) for r in rows)


def _split_relu_ffn(D, diag, shifts) -> FeedForward:
    """``z -> Lambda relu(z + s) - Lambda relu(-z)`` (width 2D): the identity ``z = relu(z) -
    relu(-z)`` scaled by ``diag``, with optional shifts ``s`` of the first half's bias."""
    zero, one = Integer(0), Integer(1)
    W1 = _zeros(2 * D, D)
    for r in range(D):
        W1[r][r] = one
        W1[D + r][r] = -one
    b1 = [zero] * (2 * D)
    for r, s in shifts.items():
        b1[r] = s
    W2 = _zeros(D, 2 * D)
    for r in range(D):
        W2[r][r] = diag[r]
        W2[r][D + r] = -diag[r]
    return FeedForward(_t(W1), tuple(b1), _t(W2), tuple([zero] * D), zero)


# ------------------------------------------------------------------------------------------
# Symbolic claims (L1, L4's cancellation)


def cancellation_identity(d: int) -> bool:
    """L1: exp(M_g (r^2 - |x - c|^2)) = exp(M_g (r^2 - |x|^2)) * exp(2 M_g <x, c> - M_g |c|^2).

    The factor exp(M_g (r^2 - |x|^2)) does not depend on the centre, so it cancels between the
    numerator and the denominator of beta_i: proved by expanding the exponents in SymPy.
    """
    xs = sympy.symbols(f"x1:{d + 1}", real=True)
    cs = sympy.symbols(f"c1:{d + 1}", real=True)
    M_g, r = sympy.symbols("M_g r_g", positive=True)
    dist2 = sum((x - c) ** 2 for x, c in zip(xs, cs))
    lhs = M_g * (r**2 - dist2)
    common = M_g * (r**2 - sum(x**2 for x in xs))
    affine = 2 * M_g * sum(x * c for x, c in zip(xs, cs)) - M_g * sum(c**2 for c in cs)
    return sympy.expand(lhs - common - affine) == 0


def sine_cancellation(P: int) -> bool:
    """L4 (symbolic part): sum_k e^{M cos theta_k} sin theta_k = 0 on the uniform grid, by pairing
    k with P - k (sin flips sign, cos is unchanged) and sin theta_P = 0."""
    th = lambda k: 2 * sympy.pi * Rational(k, P)
    if sympy.sin(th(P)) != 0:
        return False
    for k in range(1, P):
        if sympy.expand(sympy.sin(th(P - k)) + sympy.sin(th(k))) != 0:
            return False
        if sympy.expand(sympy.cos(th(P - k)) - sympy.cos(th(k))) != 0:
            return False
    return True


# ------------------------------------------------------------------------------------------
# Sample points


def sample_points(d: int, per_axis: int | None = None, n_random: int = 8, seed: int = 0) -> list:
    """A grid (``per_axis`` points per axis including 0 and 1) plus seeded random dyadic points."""
    if per_axis is None:
        per_axis = {1: 9, 2: 3}.get(d, 2)
    axis = [Fraction(i, per_axis - 1) for i in range(per_axis)] if per_axis > 1 else [Fraction(1, 2)]
    pts = [tuple(p) for p in itertools.product(axis, repeat=d)]
    rng = random.Random(seed)
    for _ in range(n_random):
        pts.append(tuple(Fraction(rng.randrange(0, 2**20 + 1), 2**20) for _ in range(d)))
    return pts


# ------------------------------------------------------------------------------------------
# Claims measured from the network


class _Num:
    """The instance's constants and the target, evaluated once in a context."""

    def __init__(self, ctx: Context, K: Constants):
        self.ctx = ctx
        memo: dict = {}
        env: dict = {}
        ev = lambda e: ctx.from_sympy(Integer(e) if isinstance(e, int) else e, memo, env)
        with ctx.scope():
            for sym, e in K.defs.items():
                env[sym] = ev(e)
            self.eps = ev(K.inst.eps)
            self.B = ev(K.inst.B)
            self.C_H = ev(K.inst.C_H)
            self.alpha = ev(K.inst.alpha)
            self.r_g = ev(K.r_g)
            self.M_g = env[SYM["M_g"]]
            self.c = env[SYM["c"]]
            self.M = env[SYM["M"]]
            self.emcM = env[SYM["emcM"]]
            self.P_paper = ev(K.P_paper)
            self.g_centres = [ev(gc) for gc in K.g_centres]
            self.centres = [[ctx.convert(Fraction(int(ci.p), int(ci.q))) for ci in cen] for cen in K.centres]
            self.sqrt_d = ctx.sqrt(ctx.rational(K.d))
        self.env = env


def _max(ctx, values):
    acc = values[0]
    for v in values[1:]:
        acc = ctx.max(acc, v)
    return acc


def _min(ctx, values):
    acc = values[0]
    for v in values[1:]:
        acc = ctx.min(acc, v)
    return acc


def tolerance(ctx: Context):
    """'To working precision': 2^-(prec/2) (2^-26 in float64)."""
    return ctx.one / ctx.rational(2 ** ((ctx.prec or 53) // 2))


def measure_point(ctx: Context, K: Constants, model: Transformer, x, num: _Num | None = None) -> list[Measured]:
    """L2-L7 at one input ``x`` (exact rationals), from the network's own intermediate values."""
    num = num or _Num(ctx, K)
    d, P = K.d, K.P
    R = ROWS(d)
    p0, p1 = R["pos"]
    xs = variables(d)
    with ctx.scope():
        out, tr = forward(ctx, model, x, trace=True)
        Z0, Z1, Z2 = tr.Z[0], tr.Z[1], tr.Z[2]
        pis = tr.attention[ATT1]
        one, zero = ctx.one, ctx.zero
        e, Pm1 = num.emcM, ctx.rational(P - 1)
        tol = tolerance(ctx)
        xv = [ctx.convert(v) for v in x]
        out_m: list[Measured] = []

        # L2: eta from the indicator head's weight on token 0 at query 0; lambda_j from the
        # position head's output at column j, projected on the input's own p_j.
        eta = pis[P][0][0]
        one_m_lam = []
        perp = []
        for j in range(P):
            pj = (Z0[p0][j], Z0[p1][j])
            oj = (Z1[p0][j], Z1[p1][j])
            nrm = pj[0] * pj[0] + pj[1] * pj[1]
            one_m_lam.append(one - (oj[0] * pj[0] + oj[1] * pj[1]) / nrm)
            perp.append(ctx.abs(oj[0] * pj[1] - oj[1] * pj[0]))
        bound_lam = 2 * Pm1 * e
        bound_eta = Pm1 * e
        w = {"exp(-cM)": e}
        out_m += [
            Measured("L2.1", "0 <= 1 - lambda(M)  (min over tokens; position head)", "le", zero,
                     _min(ctx, one_m_lam), witnesses={"1-lambda": _min(ctx, one_m_lam)}),
            Measured("L2.2", "1 - lambda(M) <= 2(P-1) e^{-cM}", "le", _max(ctx, one_m_lam), bound_lam,
                     witnesses={**w, "1-lambda": _min(ctx, one_m_lam)}),
            Measured("L2.3", "0 <= 1 - eta(M)  (indicator head weight on token 1)", "le", zero, one - eta,
                     witnesses={"1-eta": one - eta}),
            Measured("L2.4", "1 - eta(M) <= (P-1) e^{-cM}", "le", one - eta, bound_eta,
                     witnesses={**w, "1-eta": one - eta}),
        ]
        # L3: off-target weights on token 0 in every layer-1 head.
        off = [pis[h][j][0] for h in range(P) for j in range(P) if j != h]
        off += [pis[h][j][0] for h in (P, P + 1) for j in range(1, P)]
        off_max = _max(ctx, off)
        out_m.append(Measured("L3", "every off-target layer-1 weight on token 1 <= e^{-cM}", "le", off_max, e,
                              witnesses={**w, "off-target weight": off_max}))
        # L4: sine component of the position head cancels; FFN1 restores p_j.
        restore = _max(ctx, [ctx.max(ctx.abs(Z2[p0][j] - Z0[p0][j]), ctx.abs(Z2[p1][j] - Z0[p1][j]))
                             for j in range(P)])
        out_m += [
            Measured("L4.2", "position head output is parallel to p_j (|cross product| <= tol)", "le",
                     _max(ctx, perp), tol),
            Measured("L4.3", "FFN1 restores p_j (max |z_pos - p_j| <= tol)", "le", restore, tol),
        ]
        # L5: the indicator after FFN1.
        H = tr.preactivation[FFN1]
        ind = R["ind"]
        pre_off = _max(ctx, [H[ind][j] for j in range(1, P)])
        out_off = _max(ctx, [ctx.abs(Z2[ind][j]) for j in range(1, P)])
        out_m += [
            Measured("L5.1", "off-target indicator pre-activation < 0 (strictly)", "lt", pre_off, zero,
                     witnesses={**w, "pre-activation": pre_off}),
            Measured("L5.2", "off-target indicator after FFN1 is exactly 0", "zero", out_off,
                     witnesses={"pre-activation": pre_off}),
            Measured("L5.3", "on-target indicator after FFN1 = 1 (|ind - 1| <= tol)", "le",
                     ctx.abs(Z2[ind][0] - one), tol),
        ]
        # L6: leakage in T~ and g~, against T_j(x) and g(c_j) computed from the formula.
        err_T, err_g = [], []
        for j in range(P):
            cj = num.centres[j]
            Tj = 2 * num.M_g * sum((ci * xi for ci, xi in zip(cj, xv)), zero) - num.M_g * sum((ci * ci for ci in cj), zero)
            err_T.append(ctx.abs(Z2[R["T"]][j] - Tj))
            err_g.append(ctx.abs(Z2[R["g"]][j] - num.g_centres[j]))
        dT, dg = _max(ctx, err_T), _max(ctx, err_g)
        out_m += [
            Measured("L6.1", "max_j |T~_j - T_j(x)| <= 6d(P-1) M_g e^{-cM}", "le", dT,
                     6 * ctx.rational(d) * Pm1 * num.M_g * e, witnesses=w),
            Measured("L6.2", "max_j |g~_j - g(c_j)| <= 2(P-1) B e^{-cM}", "le", dg, 2 * Pm1 * num.B * e,
                     witnesses=w),
        ]
        # L7: the end-to-end error.
        gx = ctx.from_sympy(K.g, env=dict(zip(xs, xv)))
        out_m.append(Measured("L7", "|T(x) - g(x)| <= eps at the sample points", "le", ctx.abs(out - gx), num.eps))
    return out_m


def constant_claims(K: Constants, model: Transformer) -> list[tuple]:
    """The ε budget (E0-E3) and the size claims (L8) as ``(id, statement, lhs, rhs, scope)`` with
    SymPy sides in the instance's numbers and named constants (``SYM``)."""
    d, P, D, m = K.d, K.P, K.D, K.m
    inst = K.inst
    M_g, emcM = SYM["M_g"], SYM["emcM"]
    dense, _ = model.count_parameters()
    shared = {
        "E2": ("E2", "far tail: 2 B P exp(-3 M_g r_g^2) <= eps/4", 2 * inst.B * P * sympy.exp(-3 * M_g * K.r_g**2),
               inst.eps / 4, "budget"),
        "E3": ("E3", "leakage: 2(P-1)B e^{-cM} + B(exp(12 d (P-1) M_g e^{-cM}) - 1) <= eps/4",
               2 * (P - 1) * inst.B * emcM + inst.B * (sympy.exp(12 * d * (P - 1) * M_g * emcM) - 1), inst.eps / 4,
               "budget"),
    }
    if K.domain is not None:
        return K.domain.constant_claims(K, dense, shared)
    return [
        ("E0", "grid covers the cube: sqrt(d)/(2m) <= r_g", sympy.sqrt(d) / (2 * m), K.r_g, "budget"),
        ("E1", "Hoelder part: C_H (2 r_g)^alpha <= eps/2", inst.C_H * (2 * K.r_g) ** inst.alpha, inst.eps / 2,
         "budget"),
        shared["E2"],
        shared["E3"],
        ("L8.1", "P <= d^{d/2} (8 C_H)^{d/alpha} eps^{-d/alpha}", Integer(P), K.P_paper, "lemma"),
        ("L8.2", "params_dense <= (8D^2 + 34D) d^{d/2} (8 C_H)^{d/alpha} eps^{-d/alpha}", Integer(dense),
         (8 * D * D + 34 * D) * K.P_paper, "lemma"),
    ]


#: Claims that can hold with equality at the derived constants; an undecided ball verdict is
#: retried exactly (SymPy) for these.
EXACT_RETRY = ("E0", "E1", "E2", "L8.1", "L8.2")


def measure_constants(ctx: Context, K: Constants, model: Transformer, num: _Num | None = None) -> list[Measured]:
    """The constant-level claims evaluated in ``ctx``."""
    num = num or _Num(ctx, K)
    out = []
    with ctx.scope():
        for cid, statement, lhs, rhs, scope in constant_claims(K, model):
            lv = ctx.from_sympy(lhs, env=num.env)
            rv = ctx.from_sympy(rhs, env=num.env)
            w = {"exp(-cM)": num.emcM} if cid == "E3" else {}
            if cid == "E2":
                w["tail"] = lv
            out.append(Measured(cid, statement, "le", lv, rv, scope, w))
    return out


def decide_exactly(K: Constants, model: Transformer, cid: str) -> bool | None:
    """Decide a constant-level claim in exact arithmetic (SymPy), for the cases where it holds with
    equality and no ball can tell.  Only claims without eta/lambda (whose definitions SymPy would
    try to "simplify" at great cost) are attempted."""
    if cid not in EXACT_RETRY:
        return None
    for c_id, _, lhs, rhs, _ in constant_claims(K, model):
        if c_id != cid:
            continue
        subs = {SYM["M_g"]: K.defs[SYM["M_g"]]}
        diff = sympy.expand((rhs - lhs).xreplace(subs))
        if diff.is_Rational:
            return bool(diff >= 0)
        return None
    return None


def measure_assumptions(ctx: Context, K: Constants, per_axis: int | None = None) -> list[Measured]:
    """A1 ``|g| <= B`` and A2 the Hoelder condition, on a fine grid (evidence unless violated)."""
    d = K.d
    if per_axis is None:
        per_axis = max(2, int(round(4096 ** (1 / d))) if d <= 3 else 4)
        per_axis = min(per_axis, 257)
    xs = variables(d)
    n = per_axis - 1
    with ctx.scope():
        num_B, C_H, alpha = ctx.convert(K.inst.B), ctx.convert(K.inst.C_H), ctx.from_sympy(K.inst.alpha)
        vals = {}
        for idx in itertools.product(range(per_axis), repeat=d):
            env = {x: ctx.rational(i, n) for x, i in zip(xs, idx)}
            vals[idx] = ctx.from_sympy(K.g, env=env)
        gmax = _max(ctx, [ctx.abs(v) for v in vals.values()])
        # Hoelder quotient excess |g(x) - g(y)| - C_H |x - y|^alpha along each axis, at spacings
        # 1, 2, 4, ... grid steps (small steps catch steep slopes, large ones catch alpha < 1).
        worst = None
        step = 1
        while step <= n:
            dist_alpha = C_H * ctx.pow(ctx.rational(step, n), alpha)
            for idx, v in vals.items():
                for a in range(d):
                    if idx[a] + step > n:
                        continue
                    jdx = idx[:a] + (idx[a] + step,) + idx[a + 1:]
                    excess = ctx.abs(v - vals[jdx]) - dist_alpha
                    worst = excess if worst is None else ctx.max(worst, excess)
            step *= 2
        out = [Measured("A1", f"|g| <= B on a {per_axis}^{d} grid", "le", gmax, num_B, scope="assumption")]
        if worst is not None:
            out.append(Measured("A2", f"|g(x)-g(y)| <= C_H |x-y|^alpha on axis pairs of a {per_axis}^{d} grid",
                                "le", worst, ctx.zero, scope="assumption"))
    return out


def symbolic_claims(K: Constants) -> list[Measured]:
    return [
        Measured("L1", "softmax POU: the |x|^2 factor cancels (SymPy expansion)", "symbolic",
                 cancellation_identity(K.d)),
        Measured("L4.1", "sum_k e^{M cos theta_k} sin theta_k = 0 (SymPy, pairing k <-> P-k)", "symbolic",
                 sine_cancellation(K.P)),
    ]


def measure(ctx: Context, K: Constants, model: Transformer, points, assumptions: bool = True,
            tick=None) -> list[Measured]:
    """Every claim of SPEC A.5 (and the ε budget) in ``ctx``, sample-point claims merged to worst
    cases.  ``tick(i)`` is called after the i-th sample point (for progress bars)."""
    num = _Num(ctx, K)
    groups = []
    for i, x in enumerate(points):
        groups.append(measure_point(ctx, K, model, x, num))
        if tick is not None:
            tick(i + 1)
    merged = aggregate(ctx, groups)
    merged += measure_constants(ctx, K, model, num)
    if K.domain is not None:
        merged += K.domain.measure_claims(ctx, K, points)
    if assumptions:
        merged += measure_assumptions(ctx, K) if K.domain is None else K.domain.measure_assumptions(ctx, K)
    return merged
