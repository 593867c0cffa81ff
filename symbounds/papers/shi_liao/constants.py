"""Softmax partition of unity [SL26]: Shi & Liao's two-block Transformer, its constants and claims.

Z. Shi, W. Liao, *Learning Theory of Transformers: Local-to-Global Approximation via Softmax
Partition of Unity*, NeurIPS 2026, arXiv:2605.08811.  The mathematics, in this project's words: docs/shi_liao.md.

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
``papers/shi_liao/manifolds/``) the covering claim, E1, the size bound and the assumption checks come from
the domain, and ``K.d`` is the ambient input dimension while ``K.d_int`` is the intrinsic one.

The eta and lambda weights are written in the max-shifted form ``exp(M (cos theta_k - 1))``:
mathematically the same numbers as ``e^M / S(M)``, and the form a float64 implementation uses.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

import sympy
from sympy import Integer, Rational

from ...core.exact import parse_number
from ...core.expr import parse_target, variables

__all__ = ["Instance", "Constants", "constants", "constants_from", "symbolic_constants", "default_target",
           "MAX_TOKENS", "CERTIFY_MAX_TOKENS", "MAX_TRACED_TOKENS", "ROWS", "SYM", "sinpi", "cospi", "r_g_of", "grid_ratio", "P_paper_of",
           "M_g_of", "M_of", "params_dense_of"]

#: Largest grid the commands accept (layer 1 has P + 2 heads of P x P attention).
MAX_TOKENS = 1024
#: Largest grid ``certify`` accepts; below it the memory its setup needs decides
#: (:func:`symbounds.papers.shi_liao.certificate.setup_memory_estimate`).
CERTIFY_MAX_TOKENS = 1 << 14
#: Largest grid whose claims ``pou`` measures.  The claims read layer-1 attention weights from
#: the trace, which holds the shared weights' distinct values, never P + 2 full P x P matrices
#: (docs/performance.md), so this is the command's own limit.
MAX_TRACED_TOKENS = MAX_TOKENS

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


#: Every number of an instance lies in [10^-LIMIT_EXP10, 10^LIMIT_EXP10] and is written with at
#: most LIMIT_BITS bits (numerator and denominator): far beyond any grid of at most MAX_TOKENS
#: tokens, and small enough that every derived constant stays cheap to enclose.
LIMIT_EXP10, LIMIT_BITS = 100, 1024
#: The smallest Hoelder exponent: r_g = (eps / (4 C_H))^(1/alpha) needs 1/alpha digits.
MIN_ALPHA = Rational(1, 1000)


def _in_range(v: Rational, what: str) -> None:
    if v != 0 and not (Rational(1, 10**LIMIT_EXP10) <= abs(v) <= 10**LIMIT_EXP10):
        e10 = round((len(str(abs(v.p))) - len(str(v.q))))  # order of magnitude, for the message only
        raise ValueError(f"{what}: a number of about 10^{e10} is out of range (use magnitudes between "
                         f"10^-{LIMIT_EXP10} and 10^{LIMIT_EXP10})")
    if max(abs(v.p).bit_length(), v.q.bit_length()) > LIMIT_BITS:
        raise ValueError(f"{what}: {str(v)[:40]} is written with too many digits (limit {LIMIT_BITS} bits)")


def exact_rational(v, what: str) -> Rational:
    """An exact SymPy Rational from an int, Fraction, SymPy Rational or a string ('1/2', '0.1')."""
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
            object.__setattr__(self, name, exact_rational(v, name))
            _in_range(getattr(self, name), {"C_H": "holder", "B": "bound", "M_g": "Mg"}.get(name, name))
        if not (0 < self.alpha <= 1):
            raise ValueError(f"alpha must lie in (0, 1], got {self.alpha}")
        if self.alpha.q > MIN_ALPHA.q:  # SymPy's exact roots of order ~10^6 take minutes
            raise ValueError(f"alpha {str(self.alpha)[:40]}: use a fraction with denominator at most {MIN_ALPHA.q} "
                             "(e.g. 0.999)")
        if self.alpha < MIN_ALPHA:
            raise ValueError(f"alpha {self.alpha} is below {MIN_ALPHA}: no grid of at most {MAX_TOKENS} tokens "
                             "reaches such an exponent")
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


def r_g_of(eps, C_H, alpha):
    """``r_g = (eps / (4 C_H))^(1/alpha)``: the Hölder error on a ball of radius ``2 r_g`` is at most eps/2."""
    return (eps / (4 * C_H)) ** (1 / alpha)


def grid_ratio(d, r_g):
    """``sqrt(d) / (2 r_g)``; the grid has ``m = ceil(grid_ratio)`` points per axis, so every x has a
    centre within ``sqrt(d)/(2m) <= r_g``."""
    return sympy.sqrt(d) / (2 * r_g)


def P_paper_of(d, C_H, eps, alpha):
    """The paper's size bound ``d^(d/2) (8 C_H)^(d/alpha) eps^(-d/alpha)``."""
    return d ** (d / 2) * (8 * C_H) ** (d / alpha) * eps ** (-d / alpha)


def M_g_of(B, P, eps, r_g):
    """``M_g = log(8 B P / eps) / (3 r_g^2)``: the far-field tail ``2 B P exp(-3 M_g r_g^2)`` is eps/4."""
    return sympy.log(8 * B * P / eps) / (3 * r_g**2)


def M_of(P, B, d, M_g, eps, c, hold=lambda e: e):
    """``M = log(4 (P-1) B (36 d M_g + 2) / eps) / c``: the leakage error is at most eps/4
    (``hold`` keeps ``P - 1`` together when printing)."""
    return sympy.log(4 * hold(P - 1) * B * (36 * d * M_g + 2) / eps) / c


def params_dense_of(D, P):
    """Dense parameter count of the two blocks: ``8D(P+2) + 4D + 2(4D^2 + 3D)``."""
    return 8 * D * (P + 2) + 4 * D + 2 * (4 * D**2 + 3 * D)


def symbolic_constants() -> dict:
    """Each constant (docs/shi_liao.md, Constants) as a SymPy expression in (d, alpha, C_H, B, eps) and, where the
    grid enters, in the token count ``P`` (itself ``ceil(sqrt(d)/(2 r_g))^d``) and the scale ``M``."""
    d = sympy.Symbol("d", positive=True, integer=True)
    alpha, C_H, B, eps = sympy.symbols("alpha C_H B varepsilon", positive=True)
    P = sympy.Symbol("P", positive=True, integer=True)
    M = sympy.Symbol("M", positive=True)
    k = sympy.Symbol("k", positive=True, integer=True)
    r_g = r_g_of(eps, C_H, alpha)
    M_g = M_g_of(B, P, eps, r_g)
    c = 1 - sympy.cos(2 * sympy.pi / P)
    S = sympy.Sum(sympy.exp(M * sympy.cos(2 * sympy.pi * k / P)), (k, 1, P))
    eta = sympy.exp(M) / S
    lam = sympy.Sum(sympy.exp(M * sympy.cos(2 * sympy.pi * k / P)) * sympy.cos(2 * sympy.pi * k / P), (k, 1, P)) / S
    D = d + 4
    return {
        "r_g": r_g,
        "m": sympy.ceiling(grid_ratio(d, r_g)),
        "P": sympy.ceiling(grid_ratio(d, r_g)) ** d,
        "P_paper": P_paper_of(d, C_H, eps, alpha),
        "M_g": M_g,
        "c": c,
        "S": S,
        "eta": eta,
        "lambda": lam,
        "M": M_of(P, B, d, M_g, eps, c),
        "w_ind": 1 / (eta - 2 * sympy.exp(-c * M)),
        "D": D,
        "d_ff": 2 * D,
        "heads_1": P + 2,
        "heads_2": Integer(1),
        "params_dense": params_dense_of(D, P),
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
    #: ``None`` for the cube; otherwise the input domain (a manifold, ``symbounds.papers.shi_liao.manifolds``)
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

    def __repr__(self) -> str:  # the instance and its main constants (the dataclass repr ran to pages)
        from ...core.display import short

        i = self.inst
        where = "" if self.domain is None else f", on {type(self.domain).__name__}"
        return short(f"Constants(d={i.d}, alpha={i.alpha}, C_H={i.C_H}, B={i.B}, eps={i.eps}{where}: P={self.P}, "
                     f"M~{self._approx('M')}, M_g~{self._approx('M_g')}, e^(-cM)~{self._approx('emcM')})")

    def _approx(self, name: str, digits: int = 6) -> str:
        """A short decimal of constant ``name`` (a ball midpoint: for reading, not a bound)."""
        return self.value(name, 64).mid().str(digits, radius=False)

    def _repr_latex_(self) -> str:
        """Every constant with a general formula as ``name = formula`` (SymPy's printer) and its
        value at the instance (exact, or ``\\approx`` a 10-digit ball midpoint), in notebooks."""
        lines = []
        table = self.table()
        for name in self.names():
            try:
                lhs, _, formula = self.latex(name).partition(" = ")
            except KeyError:  # a count or a domain constant without a general formula
                continue
            v = table[name]
            if isinstance(v, sympy.Basic) and v.is_Rational:
                value = "= " + sympy.latex(v)
            else:
                value = r"\approx " + _tex_decimal(self.value(name, 64).mid().str(10, radius=False))
            lines.append(f"{lhs} &= {formula} {value}")
        i = self.inst
        head = (rf"\text{{[SL26] at }} d = {i.d},\ \alpha = {sympy.latex(i.alpha)},\ C_H = {sympy.latex(i.C_H)},\ "
                rf"B = {sympy.latex(i.B)},\ \varepsilon = {sympy.latex(i.eps)}")
        return r"$$\begin{aligned}" + head + r" \\ " + r" \\ ".join(lines) + r"\end{aligned}$$"

    def __getattr__(self, name):
        # K.M, K.M_g, K.eta ... are the symbols of the named constants
        key = {"lam": "lambda"}.get(name, name)
        if key in SYM:
            return SYM[key]
        raise AttributeError(name)

    def definitions(self) -> tuple:
        return tuple(self.defs.items())

    # --- each constant from Python: its formula, its closed form, its value, its LaTeX -------------
    def names(self) -> list:
        """The names of :meth:`table` (``"r_g"``, ``"P"``, ``"M_g"``, ``"M"``, ``"eta"`` ...)."""
        return list(self.table())

    def formula(self, name: str) -> sympy.Expr:
        """The general formula of constant ``name`` (docs/shi_liao.md, Constants) as a SymPy expression
        in ``d, alpha, C_H, B, varepsilon`` and, where the grid or the scale enters, ``P`` and ``M``
        (e.g. ``M_g = log(8 B P / varepsilon) / (3 r_g^2)`` with ``r_g`` written out)."""
        general = symbolic_constants()
        if name == "emcM":
            return sympy.exp(-general["c"] * sympy.Symbol("M", positive=True))
        if name not in general or name not in self.table():
            raise KeyError(f"no general formula for {name!r}; constants: {', '.join(self.names())}")
        return general[name]

    def expr(self, name: str) -> sympy.Expr:
        """Constant ``name`` at this instance as one closed-form SymPy number: every named constant
        (``K.M``, ``K.M_g`` ... the symbols of ``K.defs``) replaced by its definition, so that
        ``sympy.N(K.expr("M"), 30)`` evaluates it."""
        table = self.table()
        if name not in table:
            raise KeyError(f"unknown constant {name!r}; constants: {', '.join(table)}")
        e = table[name]  # every entry of the table is already a SymPy object
        for _ in range(len(self.defs) + 1):  # definitions refer only to earlier ones
            if not (e.free_symbols & set(self.defs)):
                return e
            with sympy.evaluate(False):  # SymPy's automatic simplification of the nest can take minutes
                e = e.xreplace(self.defs)
        raise ArithmeticError(f"the definition of {name} does not resolve")

    def value(self, name: str, prec: int = 128):
        """An Arb ball (``flint.arb``) enclosing constant ``name`` at this instance, computed at
        ``prec`` bits (each definition of ``K.defs`` evaluated once, in order)."""
        from ...core.contexts import BallContext

        table = self.table()
        if name not in table:
            raise KeyError(f"unknown constant {name!r}; constants: {', '.join(table)}")
        ctx = BallContext(prec)
        with ctx.scope():
            env: dict = {}
            for sym, definition in self.defs.items():
                env[sym] = ctx.from_sympy(definition, env=env)
            return ctx.from_sympy(table[name], env=env)

    def latex(self, name: str) -> str:
        """LaTeX of ``name = formula`` (:meth:`formula`)."""
        symbol = {"r_g": "r_g", "M_g": "M_g", "lambda": r"\lambda", "eta": r"\eta", "emcM": "e^{-cM}",
                  "P_paper": r"P_{\mathrm{paper}}", "w_ind": r"w_{\mathrm{ind}}", "d_ff": r"d_{\mathrm{ff}}",
                  "heads_1": "H_1", "heads_2": "H_2"}.get(name, name)
        return f"{symbol} = {sympy.latex(self.formula(name))}"

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


def _tex_decimal(text: str) -> str:
    """``4.76e-10`` as LaTeX, ``4.76 \\times 10^{-10}``."""
    mant, _, exp = text.partition("e")
    return mant if not exp else rf"{mant} \times 10^{{{int(exp)}}}"


def ceiling_exact(expr) -> int:
    """ceil(expr) for a positive algebraic SymPy number, checked against an Arb enclosure."""
    from ...core.contexts import BallContext

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


def _grid_fits(per_axis, d: int, max_tokens: int = MAX_TOKENS) -> None:
    """Refuse, from a coarse enclosure, a grid with more than ``max_tokens`` tokens before its exact
    size is computed (an astronomically large ``m`` would need thousands of bits to round)."""
    from ...core.contexts import BallContext

    ctx = BallContext(64)
    v = ctx.from_sympy(per_axis)
    with ctx.scope():
        if v.is_finite() and v > ctx.rational(max_tokens + 1):
            m = v.mid().str(3, radius=False)
            raise ValueError(f"the grid needs about {m} centres per axis (above the limit of {max_tokens} tokens); "
                             "raise eps or lower the Hoelder constant")


def constants(inst: Instance, max_tokens: int = MAX_TOKENS) -> Constants:
    """Every constant (docs/shi_liao.md, Constants) at ``inst``; ``inst.M`` / ``inst.M_g`` replace the derived scales.
    A grid of more than ``max_tokens`` tokens is refused (ValueError)."""
    d, alpha, C_H, eps = inst.d, inst.alpha, inst.C_H, inst.eps
    r_g = r_g_of(eps, C_H, alpha)
    _grid_fits(grid_ratio(d, r_g), d, max_tokens)
    m = ceiling_exact(grid_ratio(d, r_g))
    P = m**d
    if P > max_tokens:
        raise ValueError(
            f"the grid needs P = {P} tokens (m = {m} per axis), above the limit {max_tokens}; "
            "raise eps or lower the Hoelder constant"
        )
    if P < 2:
        raise ValueError("the grid has a single centre (P = 1); lower eps or raise the Hoelder constant")
    P_paper = P_paper_of(Integer(d), C_H, eps, alpha)
    centres = [
        tuple(Rational(2 * i - 1, 2 * m) for i in idx) for idx in itertools.product(range(1, m + 1), repeat=d)
    ]
    return constants_from(inst, centres, r_g, P_paper, m=m, max_tokens=max_tokens)


def constants_from(inst: Instance, centres: list, r_g, P_paper, m: int = 0, domain=None,
                   max_tokens: int = MAX_TOKENS) -> Constants:
    """The constants (docs/shi_liao.md, Constants) for given exact centres ``c_1..c_P`` in ``[0,1]^{inst.d}``.

    ``r_g`` is the covering radius the centres were chosen for (the cube grid's, or a manifold
    net's), ``P_paper`` the paper's size bound to set ``P`` against.  ``M_g``, ``M`` and the
    attention constants follow A.3 with the input dimension ``inst.d`` (``|T_h(x)| <= 3 d M_g``
    on ``[0,1]^d`` is what the leakage bound uses, so on a manifold it is the ambient ``D̄``).
    """
    d, B, eps = inst.d, inst.B, inst.eps
    g = inst.target_expr()
    P = len(centres)
    if P > max_tokens:
        raise ValueError(f"the net needs P = {P} tokens, above the limit {max_tokens}; raise eps")
    if P < 2:
        raise ValueError("a single centre (P = 1); lower eps or raise the Hoelder constant")
    if any(len(c_) != d for c_ in centres):
        raise ValueError(f"every centre needs {d} coordinates")
    M_g, c, M, emcM, eta, lam, w_ind = (SYM[k] for k in ("M_g", "c", "M", "emcM", "eta", "lambda", "w_ind"))
    M_g_derived = M_g_of(B, P, eps, r_g)
    M_derived = M_of(P, B, d, M_g, eps, c)
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
