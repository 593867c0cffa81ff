"""The constant chain of [SL26] for every parameter (docs/shi_liao.md, "The constant chain for every parameter").

``pou`` decides the ε budget (E0-E3) and the size bounds (L8.1, L8.2) at one instance.  Here each
claim gets a verdict over a whole *region* of parameters

    ε ∈ (0, 1),  α ∈ (0, 1],  C_H > 0,  B > 0,  integer d ≥ 1   (and P ≥ 2 where the grid enters),

with the derived constants substituted symbolically:

    r_g = (ε/(4 C_H))^{1/α},   x = √d/(2 r_g),   m = ⌈x⌉ (so x ≤ m < x + 1),   P = m^d,
    M_g = log(8BP/ε)/(3 r_g²),   M = log(4(P-1)B(36 d M_g + 2)/ε)/c,   c = 1 - cos(2π/P).

Each proof is a chain of SymPy steps, every one of which is *checked* when the table is built
(:func:`chain`): an identity is checked by simplifying the difference to 0; an inequality by
rewriting its slack, after substituting the region's parametrisation (α = 1/(1+β) with β ≥ 0,
P = 2 + p with p ≥ 0, B = ε/16 + b with b ≥ 0, ...) and the certified bounds on exp (:data:`BOUNDS`),
into an expression whose sign SymPy's assumptions decide (sums and products of non-negative
symbols).  A step that does not check turns the claim's verdict into "open": a verdict is
"proved" only when every step was decided.  The refutation of E3 is certified in Arb at a
parameter point at which ``symbounds pou`` refutes E3 too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import sympy
from sympy import Rational

from .constants import M_g_of, M_of, P_paper_of, grid_ratio, params_dense_of, r_g_of

__all__ = [
    "BOUNDS",
    "E3_REFUTATION",
    "REGION",
    "REGION_TEX",
    "ChainRow",
    "chain",
    "chain_json",
    "chain_text",
    "e3_excess_t",
    "t_star_enclosure",
]

#: The parameter region every verdict refers to (sub-regions are stated per claim).
REGION = "eps in (0, 1), alpha in (0, 1], C_H > 0, B > 0, integer d >= 1"
REGION_TEX = r"\varepsilon\in(0,1),\ \alpha\in(0,1],\ C_H>0,\ B>0,\ d\in\mathbb{Z}_{\ge 1}"
#: Where the grid has at least two tokens (m >= 2): the construction needs P >= 2 (c = 1 - cos(2π/P) > 0).
TWO_TOKENS = "P >= 2"
TWO_TOKENS_TEX = r"P\ge 2"
#: A claim proved on the whole region.
ALL_TEX = r"\text{the whole region}"

#: E3's certified refutation point (d, alpha, C_H, B, eps): ε large relative to B.
E3_REFUTATION = {"d": 1, "alpha": "1", "holder": "10", "bound": "1/100", "eps": "1/2"}

# symbols: the parameters and the region's parametrisation
_eps, _C, _B, _r, _c = sympy.symbols("varepsilon C_H B r_g c", positive=True)
_d = sympy.Symbol("d", positive=True, integer=True)
_P = sympy.Symbol("P", positive=True)
_beta, _gamma, _delta, _p, _b, _Mg, _dP = sympy.symbols("beta gamma delta p b M_g delta_P", nonnegative=True)
_xi, _D = sympy.symbols("xi D", positive=True)
_t = sympy.Symbol("t", real=True)


def _zero(e) -> bool:
    """An identity step: the difference simplifies to exactly 0."""
    return sympy.simplify(e) == 0


def _nonneg(e) -> bool:
    """An inequality step: the slack, brought over one denominator and factored, is non-negative by
    SymPy's assumptions on the symbols (True, never None)."""
    return sympy.factor(sympy.together(sympy.expand(e))).is_nonnegative is True


def _positive(e) -> bool:
    return sympy.expand(e).is_positive is True


# ------------------------------------------------------------------------------------------
# Certified bounds on exp, each proved when the table is built


def t_star_enclosure(prec: int = 128) -> tuple:
    """``(lo, hi)`` with the positive root t* of ``e^t = 1 + 3t`` in ``[lo, hi]``: Arb decides
    ``e^lo < 1 + 3 lo`` and ``e^hi > 1 + 3 hi``; ``f(t) = e^t - 1 - 3t`` is convex with f(0) = 0 and
    f'(0) = -2 < 0, so it has exactly one positive root, where it changes sign."""
    import flint

    lo, hi = Fraction(19038, 10000), Fraction(19039, 10000)
    old = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        f = lambda q: (flint.arb(q.numerator) / q.denominator).exp() - 1 - 3 * flint.arb(q.numerator) / q.denominator
        if not (f(lo) < 0 and f(hi) > 0):
            raise ArithmeticError("the enclosure of t* is not certified")
    finally:
        flint.ctx.prec = old
    return lo, hi


def _check_exp_below() -> bool:
    # f = e^t - 1 - t: f(0) = 0 and f' = e^t - 1 has the sign of t (exp is increasing), so f >= 0.
    f = sympy.exp(_t) - 1 - _t
    return f.subs(_t, 0) == 0 and sympy.diff(f, _t) == sympy.exp(_t) - 1


def _check_exp_chord() -> bool:
    # f = e^t - 1 - 3t is convex (f'' = e^t > 0), f(0) = 0 and f(3/2) = e^{3/2} - 11/2 < 0 (Arb):
    # a convex function lies below its chord, so f <= 0 on [0, 3/2].
    import flint

    f = sympy.exp(_t) - 1 - 3 * _t
    return (f.subs(_t, 0) == 0 and sympy.diff(f, _t, 2) == sympy.exp(_t)
            and bool((flint.arb(3) / 2).exp() < flint.arb(11) / 2))


def _check_t_star() -> bool:
    t_star_enclosure()
    return True


@dataclass(frozen=True)
class Bound:
    id: str
    statement: str
    tex: str
    proof: str
    check: object = field(repr=False, compare=False)


#: The certified bounds the proofs use (statement, LaTeX, proof; ``check()`` re-proves each).
BOUNDS = {
    b.id: b for b in (
        Bound("exp-below", "e^t >= 1 + t for every real t", r"e^t \ge 1 + t \quad (t\in\mathbb R)",
              "f(t) = e^t - 1 - t has f(0) = 0 and f'(t) = e^t - 1 of the sign of t", _check_exp_below),
        Bound("exp-chord", "e^t <= 1 + 3t for t in [0, 3/2]", r"e^t \le 1 + 3t \quad (0\le t\le \tfrac32)",
              "f(t) = e^t - 1 - 3t is convex, f(0) = 0 and f(3/2) = e^{3/2} - 11/2 < 0 (Arb)", _check_exp_chord),
        Bound("t-star", "e^t <= 1 + 3t exactly when 0 <= t <= t*, t* in [1.9038, 1.9039]",
              r"e^t \le 1+3t \iff 0\le t\le t^*,\quad t^*\in[1.9038,\,1.9039]",
              "f(t) = e^t - 1 - 3t is convex with f(0) = 0, f'(0) < 0: f > 0 for t < 0, one positive root, "
              "f(1.9038) < 0 < f(1.9039) (Arb)", _check_t_star),
        Bound("ceil", "x <= ceil(x) < x + 1", r"x \le \lceil x\rceil < x+1", "the definition of the ceiling",
              lambda: True),
    )
}


# ------------------------------------------------------------------------------------------
# The rows


@dataclass
class ChainRow:
    """One claim's verdict over :data:`REGION`: ``verdict`` is "proved" (on ``region``: "all", or
    the conditions that cut out a sub-region), "refuted" (at ``refuted_at``; proved on ``region``) or
    "open" (on ``open_region``).  ``P >= 2`` means ``m = ceil(sqrt(d)/(2 r_g)) >= 2``: the
    construction needs two tokens (``c = 1 - cos(2 pi/P) > 0``)."""

    id: str
    statement: str
    tex: str
    verdict: str
    region: str
    region_tex: str
    method: str
    steps: list  # (text, decided) for each step of the proof
    bounds: list  # ids of BOUNDS used
    equality: str | None = None
    criterion: str | None = None
    criterion_tex: str | None = None
    refuted_at: dict | None = None
    open_region: str | None = None

    def as_json(self) -> dict:
        return {"id": self.id, "statement": self.statement, "tex": self.tex, "verdict": self.verdict,
                "region": self.region, "region_tex": self.region_tex, "method": self.method,
                "steps": [{"step": s, "decided": ok} for s, ok in self.steps], "bounds": list(self.bounds),
                "equality": self.equality, "criterion": self.criterion, "refuted_at": self.refuted_at,
                "open_region": self.open_region}


def _row(cid, region, region_tex, steps, bounds, **kw) -> ChainRow:
    from .claims import CLAIMS

    ok = all(d for _, d in steps) and all(BOUNDS[b].check() for b in bounds)
    # a certified refutation point decides the claim over the region whatever the proof's fate;
    # otherwise "proved" needs every step decided
    verdict = "refuted" if kw.get("refuted_at") else ("proved" if ok else "open")
    if not ok:  # the sub-region the proof was to cover stays open
        kw["open_region"] = region
    return ChainRow(cid, CLAIMS[cid].statement, CLAIMS[cid].tex, verdict, region, region_tex,
                    "SymPy (identities and signed slack under assumptions)", steps, list(bounds), **kw)


def _e0() -> ChainRow:
    # slack r_g - sqrt(d)/(2m) with m = x + delta, delta >= 0 (x <= ceil(x))
    x = grid_ratio(_d, _r)
    slack = _r - sympy.sqrt(_d) / (2 * (x + _delta))
    steps = [("m = x + delta, delta >= 0 (x <= ceil x); r_g - sqrt(d)/(2m) = 2 delta r_g^2/(sqrt(d) + 2 delta r_g) >= 0",
              _nonneg(slack) and _zero(slack - 2 * _delta * _r**2 / (sympy.sqrt(_d) + 2 * _delta * _r)))]
    return _row("E0", "all", ALL_TEX, steps, ["ceil"], equality="exactly when sqrt(d)/(2 r_g) is an integer")


def _e1() -> ChainRow:
    alpha = 1 / (1 + _beta)  # alpha in (0, 1]  <=>  beta >= 0
    lhs = _C * (2 * r_g_of(_eps, _C, alpha)) ** alpha
    s = sympy.log(2) * _beta / (1 + _beta)  # (1 - alpha) log 2
    steps = [
        ("C_H (2 r_g)^alpha = 2^alpha eps/4 (r_g^alpha = eps/(4 C_H))", _zero(lhs - 2**alpha * _eps / 4)),
        ("alpha = 1/(1+beta), beta >= 0: 2^alpha = 2 e^{-s}, s = (1 - alpha) log 2 >= 0",
         _zero(2**alpha - 2 * sympy.exp(-s))),
        ("e^{-s} <= 1/(1+s) (exp-below): eps/2 - 2^alpha eps/4 >= (eps/4)(2 - 2/(1+s)) >= 0",
         _nonneg(_eps / 4 * (2 - 2 / (1 + s)))),
    ]
    return _row("E1", "all", ALL_TEX, steps, ["exp-below"], equality="exactly when alpha = 1")


def _e2() -> ChainRow:
    Mg = M_g_of(_B, _P, _eps, _r)
    lhs = 2 * _B * _P * sympy.exp(-3 * Mg * _r**2)
    steps = [("e^{-3 M_g r_g^2} = eps/(8 B P), so 2 B P e^{-3 M_g r_g^2} = eps/4", _zero(lhs - _eps / 4))]
    return _row("E2", "all", ALL_TEX, steps, [], equality="everywhere (M_g is chosen to make it an equality)")


def e3_excess_t(d, M_g, eps, B):
    """E3 at the derived M reduces to ``e^t <= 1 + 3t`` with ``t = 3 d M_g eps / (B (36 d M_g + 2))``:
    ``LHS - eps/4 = B (e^t - 1 - 3t)``."""
    return 3 * d * M_g * eps / (B * (36 * d * M_g + 2))


def _e3() -> ChainRow:
    P = 2 + _p  # P >= 2
    u = sympy.simplify(sympy.exp(-_c * M_of(P, _B, _d, _Mg, _eps, _c)))
    lhs = 2 * (P - 1) * _B * u + _B * (sympy.exp(12 * _d * (P - 1) * _Mg * u) - 1)
    t = e3_excess_t(_d, _Mg, _eps, _B)
    sub = {_B: _eps / 16 + _b}  # the region B >= eps/16
    Mg = M_g_of(_B, P, _eps, _r)
    steps = [
        ("e^{-cM} = eps/(4 (P-1) B (36 d M_g + 2))", _zero(u - _eps / (4 * (P - 1) * _B * (36 * _d * _Mg + 2)))),
        ("LHS - eps/4 = B (e^t - 1 - 3t), t = 3 d M_g eps/(B (36 d M_g + 2))",
         _zero(lhs - _eps / 4 - _B * (sympy.exp(t) - 1 - 3 * t))),
        ("B = eps/16 + b, P = 2 + p: 8 B P/eps - 1 >= 0, so M_g = log(8BP/eps)/(3 r_g^2) >= 0 and t >= 0",
         _nonneg((8 * _B * P / _eps - 1).xreplace(sub)) and sympy.log(1 + _xi).is_positive is True
         and _zero(Mg - sympy.log(8 * _B * P / _eps) / (3 * _r**2))),
        ("B = eps/16 + b: 3/2 - t >= 0", _nonneg((Rational(3, 2) - t).xreplace(sub))),
        ("e^t <= 1 + 3t on [0, 3/2] (exp-chord): LHS - eps/4 <= 0", True),
    ]
    _, hi = t_star_enclosure()
    crit = ("E3 <=> 0 <= t <= t*, t = 3 d M_g eps/(B (36 d M_g + 2)), t* in [1.9038, 1.9039] (e^t* = 1 + 3t*); "
            "t < eps/(12 B), so M_g >= 0 (8BP >= eps) and B >= eps/22.85 suffice; M_g < 0 refutes it")
    return _row("E3", f"B >= eps/16, {TWO_TOKENS}", rf"B\ge \varepsilon/16,\ {TWO_TOKENS_TEX}", steps,
                ["exp-chord", "t-star"], criterion=crit,
                criterion_tex=(r"\text{E3} \iff 0\le t=\frac{3dM_g\varepsilon}{B(36dM_g+2)}\le t^*,\quad "
                               r"e^{t^*}=1+3t^*,\ t^*\in[1.9038,\,1.9039]"),
                refuted_at=_e3_refutation(hi),
                open_region="B < eps/16 (and P >= 2): decided point by point by the criterion 0 <= t <= t*")


def _e3_refutation(t_hi) -> dict:
    """The E3 refutation point in 256-bit Arb: t > t*'s upper end, hence LHS > eps/4."""
    import flint

    from .constants import Instance, ceiling_exact

    pt = E3_REFUTATION
    inst = Instance(d=pt["d"], alpha=pt["alpha"], C_H=pt["holder"], B=pt["bound"], eps=pt["eps"])
    m = ceiling_exact(grid_ratio(inst.d, r_g_of(inst.eps, inst.C_H, inst.alpha)))
    P = m**inst.d
    old = flint.ctx.prec
    flint.ctx.prec = 256
    try:
        q = lambda v: flint.arb(v.p) / v.q
        eps, B, d = q(inst.eps), q(inst.B), flint.arb(inst.d)
        r_g = (eps / (4 * q(inst.C_H))) ** (1 / q(inst.alpha))
        Mg = (8 * B * P / eps).log() / (3 * r_g**2)
        c = 2 * flint.arb.sin_pi(flint.arb(1) / P) ** 2  # 1 - cos(2 pi/P)
        M = (4 * (P - 1) * B * (36 * d * Mg + 2) / eps).log() / c
        u = (-c * M).exp()
        lhs = 2 * (P - 1) * B * u + B * ((12 * d * (P - 1) * Mg * u).exp() - 1)
        t = e3_excess_t(d, Mg, eps, B)
        th = flint.arb(t_hi.numerator) / t_hi.denominator
        if not (t > th and lhs > eps / 4):
            raise ArithmeticError("E3's refutation point is not certified")
        return {**pt, "P": P, "t": t.str(10), "lhs": lhs.str(10), "rhs": (eps / 4).str(10),
                "command": ("symbounds pou --d {d} --alpha {alpha} --holder {holder} --bound {bound} "
                            "--eps {eps} --target 'x1/200'").format(**pt)}
    finally:
        flint.ctx.prec = old


def _l81() -> ChainRow:
    alpha = 1 / (1 + _gamma)  # 1/alpha = 1 + gamma
    x = grid_ratio(_d, r_g_of(_eps, _C, alpha))
    Pp = P_paper_of(_d, _C, _eps, alpha)
    steps = [
        ("P_paper = (2^{1+1/alpha} x)^d, x = sqrt(d)/(2 r_g)",
         _zero(sympy.expand_log(sympy.log(Pp) - _d * sympy.log(2 ** (1 + 1 / alpha) * x)))),
        (("m >= 2 and m < x + 1 give x = 1 + xi, xi > 0; 2^{1+1/alpha} = 4 e^{gamma log 2} >= 4 (1 + gamma log 2) "
         "(exp-below): 2^{1+1/alpha} x - m > 4 (1 + gamma log 2)(1 + xi) - (2 + xi) > 0"),
         _zero(2 ** (1 + 1 / alpha) - 4 * sympy.exp(_gamma * sympy.log(2)))
         and _positive(4 * (1 + _gamma * sympy.log(2)) * (1 + _xi) - (2 + _xi))),
        ("y -> y^d is increasing on y > 0: P = m^d < (2^{1+1/alpha} x)^d = P_paper", True),
    ]
    return _row("L8.1", TWO_TOKENS, TWO_TOKENS_TEX, steps,
                ["ceil", "exp-below"], equality="never (strict)")


def _l82() -> ChainRow:
    P = 2 + _p
    slack = (8 * _D**2 + 34 * _D) * (P + _dP) - params_dense_of(_D, P)
    steps = [
        ("the network's dense count is 8D(P+2) + 4D + 2(4D^2 + 3D), D = d + 4", True),
        (("P = 2 + p, P_paper = P + delta_P (L8.1, delta_P >= 0): (8D^2 + 34D) P_paper - count = "
         "8D^2 (1 + p + delta_P) + 26 D (1 + p) + 34 D delta_P > 0"), _positive(slack)
         and _zero(slack - (8 * _D**2 * (1 + _p + _dP) + 26 * _D * (1 + _p) + 34 * _D * _dP))),
    ]
    return _row("L8.2", TWO_TOKENS, TWO_TOKENS_TEX, steps, [],
                equality="never (strict)")


#: The claims covered, in the order of the table.
IDS = ("E0", "E1", "E2", "E3", "L8.1", "L8.2")


def chain() -> list[ChainRow]:
    """The parametric verdict of every claim of the ε budget and the size bounds (checked now)."""
    return [f() for f in (_e0, _e1, _e2, _e3, _l81, _l82)]


def chain_json(rows: list[ChainRow]) -> dict:
    from ...core.version import __version__

    verdicts = [r.verdict for r in rows]
    overall = "refuted" if "refuted" in verdicts else ("open" if "open" in verdicts else "proved")
    return {"symbounds": __version__, "command": "chain", "paper": "shi_liao", "region": REGION,
            "bounds": [{"id": b.id, "statement": b.statement, "proof": b.proof} for b in BOUNDS.values()],
            "claims": [r.as_json() for r in rows], "verdict": overall}


def chain_text(rows: list[ChainRow]) -> str:
    out = [f"symbounds chain: the [SL26] constant chain for every parameter in {REGION}", ""]
    w = max(len(r.region) for r in rows)
    out.append(f"  {'claim':<6} {'verdict':<8} {'region':<{w}}  equality")
    for r in rows:
        out.append(f"  {r.id:<6} {r.verdict:<8} {r.region:<{w}}  {r.equality or '-'}")
    for r in rows:
        out.append("")
        out.append(f"{r.id}: {r.statement}")
        for s, ok in r.steps:
            out.append(f"  {'[ok]' if ok else '[??]'} {s}")
        if r.criterion:
            out.append(f"  criterion: {r.criterion}")
        if r.refuted_at:
            a = r.refuted_at
            out.append(f"  refuted at d={a['d']}, alpha={a['alpha']}, C_H={a['holder']}, B={a['bound']}, "
                       f"eps={a['eps']} (P = {a['P']}): t = {a['t']}, LHS = {a['lhs']} > eps/4 = {a['rhs']}")
            out.append(f"    re-check: {a['command']}")
        if r.open_region:
            out.append(f"  open: {r.open_region}")
    out.append("")
    out.append("certified bounds: " + "; ".join(f"{b.id}: {b.statement}" for b in BOUNDS.values()))
    verdict = chain_json(rows)["verdict"]
    out.append(f"verdict: {verdict}")
    return "\n".join(out)
