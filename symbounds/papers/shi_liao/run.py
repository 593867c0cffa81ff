"""One verification run of Shi & Liao's construction (``symbounds pou``): build, certify, compare.

``run(instance, options)`` builds the network for the instance, measures every claim (docs/shi_liao.md, Claims)
in Arb ball arithmetic with precision escalation (SymPy for the symbolic ones, exact arithmetic
for budget inequalities that hold with equality), evaluates requested points, and optionally sets
mpmath and float64 beside the certified values.  ``as_json`` and ``render_text`` present it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import sympy

from ...core.claims import ClaimResult, HasVerdict, decide, escalate
from ...core.contexts import BallContext, FPContext, MPContext
from ...core.expr import variables
from ...core.fpcompare import compare_claims, compare_quantities, named_quantities
from ...core.layers import AttentionWeights
from ...core.transformer import forward
from .claims import decide_exactly, sample_points, symbolic_claims
from .claims import measure as measure_claims
from .constants import MAX_TRACED_TOKENS, Constants, Instance, constants
from .construction import build

__all__ = ["PouOptions", "PouResult", "run", "constants_json"]


@dataclass
class PouOptions:
    context: str = "ball"  # ball | mp | fp | all: which non-rigorous contexts to set beside the balls
    prec: int = 128
    max_prec: int = 8192
    points: int = 8  # seeded random sample points, on top of the grid
    grid: int | None = None  # grid points per axis (None: a default by dimension)
    seed: int = 0
    at: tuple = ()  # user points (tuples of Fractions), also checked as sample points
    assumptions: bool = True
    whole: bool = True  # manifolds only: also certify L7 over the whole manifold (L7.M)

    def __post_init__(self):
        if self.context not in ("ball", "mp", "fp", "all"):
            raise ValueError(f"unknown context {self.context!r} (use ball, mp, fp or all)")


@dataclass
class PouResult(HasVerdict):
    instance: Instance
    K: Constants
    model: object
    claims: list[ClaimResult]
    prec: int
    samples: int
    max_error: str
    constants: dict
    points: list
    evidence: dict = field(default_factory=dict)  # context name -> list[ClaimResult]
    comparisons: dict = field(default_factory=dict)  # context name -> (claims, quantities)
    timings: dict = field(default_factory=dict)
    whole: dict = field(default_factory=dict)  # manifolds: the L7.M run (boxes, bound, status)
    max_error_value: object = None  # the ball of max |T(x) - g(x)| over the sample points

    def __repr__(self) -> str:
        """The verdict and its counts, the instance, P and the measured error, in one line."""
        from ...core.display import short, verdict_counts

        i = self.instance
        return short(f"PouResult({self.verdict}: {verdict_counts(self.claims)}; d={i.d}, eps={i.eps}, "
                     f"P={self.K.P}, {self.samples} sample points, max |T - g| = {short(self.max_error, 40)}, "
                     f"{self.prec} bits)")

    def _repr_html_(self) -> str:
        """The claims table with verdicts (notebooks)."""
        from ...core.display import claims_html, verdict_counts

        i = self.instance
        return claims_html(self.claims, f"[SL26] at d = {i.d}, eps = {i.eps}, P = {self.K.P}: {self.verdict} "
                                        f"({verdict_counts(self.claims)})")

    def _repr_latex_(self) -> str:
        from ...core.display import claims_latex, verdict_counts

        i = self.instance
        return claims_latex(self.claims, f"[SL26] at d = {i.d}, eps = {i.eps}, P = {self.K.P}: {self.verdict} "
                                         f"({verdict_counts(self.claims)})")



def constants_json(K: Constants, model, ctx: BallContext) -> dict:
    """Every constant as a decimal string (exact ``p/q`` when rational), at ``ctx``'s precision."""
    env = model.definition_values(ctx)
    out = {}
    digits = max(20, int(ctx.prec * 0.30103) - 5)
    digits = min(digits, 40)
    with ctx.scope():
        for name, v in K.table().items():
            if isinstance(v, sympy.Basic) and (v.is_Rational or v.is_Symbol):
                out[name] = str(v)
            else:
                out[name] = ctx.from_sympy(v, env=env).mid().str(digits, radius=False)
        dense, nonzero = model.count_parameters()
        out["params_dense"] = str(dense)
        out["params_nonzero"] = str(nonzero)
        out["max_weight"] = max_weight(model, ctx).str(digits, radius=False)
        out["max_weight_paper_order"] = ctx.from_sympy(
            K.inst.eps ** (-2 * K.d_int / K.inst.alpha) * sympy.log(1 / K.inst.eps)
        ).mid().str(digits, radius=False)
    return out


def max_weight(model, ctx: BallContext):
    """An upper bound of the largest |weight| (attention and feed-forward, biases included)."""
    num = model.numeric(ctx)
    best = ctx.zero
    with ctx.scope():
        for layer in num.layers:
            if isinstance(layer, AttentionWeights):
                arrays = [m for head in layer.heads for m in (head.W_Q, head.W_K, head.W_V, head.W_O)]
            else:
                arrays = [layer.W1, [layer.b1], layer.W2, [layer.b2]]
            for arr in arrays:
                for row in arr:
                    for v in row:
                        best = best.max(abs(v))
        return best.upper() if hasattr(best, "upper") else best


def _point_values(ctx, K, model, x):
    xs = variables(K.d)
    with ctx.scope():
        T = forward(ctx, model, x)
        g = ctx.from_sympy(K.g, env={s: ctx.convert(v) for s, v in zip(xs, x)})
        return T, g, ctx.abs(T - g)


def run(inst, opts: PouOptions | None = None, progress=None, whole_progress=None) -> PouResult:
    """Build, certify and compare.  ``progress(done, total, prec)`` is called after each sample point;
    on a manifold, ``whole_progress(fraction, boxes)`` during the whole-manifold part (L7.M).

    ``inst`` is a cube :class:`~symbounds.papers.shi_liao.Instance` or a
    :class:`~symbounds.papers.shi_liao.manifolds.manifold.ManifoldInstance` (sample points then lie on the manifold;
    ``opts.grid`` does not apply; ``opts.at`` points are evaluated and checked as given).
    """
    opts = opts or PouOptions()
    t0 = time.perf_counter()
    on_cube = isinstance(inst, Instance)
    K = constants(inst) if on_cube else inst.constants()
    if K.P > MAX_TRACED_TOKENS:
        raise ValueError(f"P = {K.P} tokens: pou measures the claims up to P = {MAX_TRACED_TOKENS}")
    model = build(K)
    t_build = time.perf_counter() - t0
    if on_cube:
        points = sample_points(inst.d, opts.grid, opts.points, opts.seed)
    else:
        points = inst.sample_points(opts.points, opts.seed)
    points += [tuple(p) for p in opts.at]

    def measure(ctx):
        tick = None
        if progress is not None:
            tick = lambda i: progress(i, len(points), ctx.prec)
        return measure_claims(ctx, K, model, points, assumptions=opts.assumptions, tick=tick)

    t1 = time.perf_counter()
    sym = [decide(BallContext(opts.prec), m) for m in symbolic_claims(K)]
    results, last, prec = escalate(
        measure, opts.prec, opts.max_prec, exact=lambda cid: decide_exactly(K, model, cid)
    )
    # keep only the last precision's numbers in memory
    model.keep_numeric_only(("ball", prec))
    t_ball = time.perf_counter() - t1
    ball = BallContext(prec)
    l7 = next(m for m in last if m.id == "L7")
    with ball.scope():
        max_error = ball.to_str(l7.lhs, 20)
    pts = []
    for x in opts.at:
        T, g, err = _point_values(ball, K, model, x)
        with ball.scope():
            pts.append({"x": [str(v) for v in x], "T": ball.to_str(T, 25), "g": ball.to_str(g, 25),
                        "error": ball.to_str(err, 10)})
    res = PouResult(inst, K, model, sym + results, prec, len(points), max_error, constants_json(K, model, ball), pts)
    res.max_error_value = l7.lhs
    res.timings = {"build": t_build, "ball": t_ball}
    if not on_cube and opts.whole:
        from .manifolds.certify import certify_on_manifold

        claim, info = certify_on_manifold(K, model, prec, progress=whole_progress)
        res.claims.append(decide(BallContext(prec), claim))
        res.whole = info
        res.timings["whole"] = info["seconds"]
    others = {"ball": [], "mp": ["mp"], "fp": ["fp"], "all": ["mp", "fp"]}[opts.context]
    ball_named = named_quantities(last)
    for name in others:
        ctx = MPContext(prec) if name == "mp" else FPContext()
        t2 = time.perf_counter()
        measured = measure(ctx)
        res.timings[name] = time.perf_counter() - t2
        res.evidence[name] = [decide(ctx, m) for m in measured]
        res.comparisons[name] = (
            compare_claims(ball, last, results, ctx, measured),
            compare_quantities(ball, ball_named, ctx, named_quantities(measured)),
        )
    return res


