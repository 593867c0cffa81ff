"""The claims of [SL26] measured on the network itself (see docs/shi_liao.md, "Claims").

L1-L8 are the steps of the proof, E0-E3 the inequalities between the constants that the proof
needs (the epsilon budget), A1/A2 the assumptions on the target checked on a grid.  Every
quantity is read from the network's own attention matrices and pre-activations, never from the
formula it should equal.
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import sympy
from sympy import Integer, Rational

from ...core.claims import Measured, aggregate, load_claims
from ...core.contexts import Context
from ...core.exact import as_fraction
from ...core.expr import variables
from ...core.shared_weights import entry_values
from ...core.transformer import Transformer, forward
from .constants import ATT1, ATT2, FFN1, ROWS, SYM, Constants

# ------------------------------------------------------------------------------------------
# The claims (statement, LaTeX in the paper's notation, relation, scope: claims.toml)

#: Every claim of the partition-of-unity proof, by id, declared in claims.toml beside this file.
CLAIMS = load_claims(Path(__file__).with_name("claims.toml"))

#: Claims that can hold with equality at the derived constants; an undecided ball verdict is
#: retried exactly (SymPy) for these.
EXACT_RETRY = tuple(c.id for c in CLAIMS.values() if c.exact_retry)


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
            self.centres = [[ctx.convert(as_fraction(ci)) for ci in cen] for cen in K.centres]
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
        # the claims read layers 1 and 2 (traced); the output continues from Z2 untraced, so the
        # second attention layer evaluates only the readout's query row
        Z2, tr = forward(ctx, model, x, trace=True, stop=ATT2)
        out = forward(ctx, model, Z2, start=ATT2)
        Z0, Z1 = tr.Z[0], tr.Z[1]
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
            CLAIMS["L2.1"].measured(zero,
                     _min(ctx, one_m_lam), witnesses={"1-lambda": _min(ctx, one_m_lam)}),
            CLAIMS["L2.2"].measured(_max(ctx, one_m_lam), bound_lam,
                     witnesses={**w, "1-lambda": _min(ctx, one_m_lam)}),
            CLAIMS["L2.3"].measured(zero, one - eta,
                     witnesses={"1-eta": one - eta}),
            CLAIMS["L2.4"].measured(one - eta, bound_eta,
                     witnesses={**w, "1-eta": one - eta}),
        ]
        # L3: off-target weights on token 0 in every layer-1 head.
        # (entry_values gives one value per exactly distinct weight: the same maximum)
        rows = np.arange(P)
        off = entry_values([(pis[h], np.delete(rows, h), 0) for h in range(P)]
                           + [(pis[h], rows[1:], 0) for h in (P, P + 1)])
        off_max = _max(ctx, off)
        out_m.append(CLAIMS["L3"].measured(off_max, e,
                              witnesses={**w, "off-target weight": off_max}))
        # L4: sine component of the position head cancels; FFN1 restores p_j.
        restore = _max(ctx, [ctx.max(ctx.abs(Z2[p0][j] - Z0[p0][j]), ctx.abs(Z2[p1][j] - Z0[p1][j]))
                             for j in range(P)])
        out_m += [
            CLAIMS["L4.2"].measured(_max(ctx, perp), tol),
            CLAIMS["L4.3"].measured(restore, tol),
        ]
        # L5: the indicator after FFN1.
        H = tr.preactivation[FFN1]
        ind = R["ind"]
        pre_off = _max(ctx, [H[ind][j] for j in range(1, P)])
        out_off = _max(ctx, [ctx.abs(Z2[ind][j]) for j in range(1, P)])
        out_m += [
            CLAIMS["L5.1"].measured(pre_off, zero,
                     witnesses={**w, "pre-activation": pre_off}),
            CLAIMS["L5.2"].measured(out_off,
                     witnesses={"pre-activation": pre_off}),
            CLAIMS["L5.3"].measured(ctx.abs(Z2[ind][0] - one), tol),
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
            CLAIMS["L6.1"].measured(dT,
                     6 * ctx.rational(d) * Pm1 * num.M_g * e, witnesses=w),
            CLAIMS["L6.2"].measured(dg, 2 * Pm1 * num.B * e,
                     witnesses=w),
        ]
        # L7: the end-to-end error.
        gx = ctx.from_sympy(K.g, env=dict(zip(xs, xv)))
        out_m.append(CLAIMS["L7"].measured(ctx.abs(out - gx), num.eps))
    return out_m


def constant_claims(K: Constants, model: Transformer) -> list[tuple]:
    """The ε budget (E0-E3) and the size claims (L8) as ``(claim, lhs, rhs)`` with SymPy sides in
    the instance's numbers and named constants (``SYM``); a manifold domain supplies its own."""
    d, P, D, m = K.d, K.P, K.D, K.m
    inst = K.inst
    M_g, emcM = SYM["M_g"], SYM["emcM"]
    dense, _ = model.count_parameters()
    shared = {
        "E2": (CLAIMS["E2"], 2 * inst.B * P * sympy.exp(-3 * M_g * K.r_g**2), inst.eps / 4),
        "E3": (CLAIMS["E3"], 2 * (P - 1) * inst.B * emcM + inst.B * (sympy.exp(12 * d * (P - 1) * M_g * emcM) - 1),
               inst.eps / 4),
    }
    if K.domain is not None:
        return K.domain.constant_claims(K, dense, shared)
    return [
        (CLAIMS["E0"], sympy.sqrt(d) / (2 * m), K.r_g),
        (CLAIMS["E1"], inst.C_H * (2 * K.r_g) ** inst.alpha, inst.eps / 2),
        shared["E2"],
        shared["E3"],
        (CLAIMS["L8.1"], Integer(P), K.P_paper),
        (CLAIMS["L8.2"], Integer(dense), (8 * D * D + 34 * D) * K.P_paper),
    ]


def measure_constants(ctx: Context, K: Constants, model: Transformer, num: _Num | None = None) -> list[Measured]:
    """The constant-level claims evaluated in ``ctx``."""
    num = num or _Num(ctx, K)
    out = []
    with ctx.scope():
        for claim, lhs, rhs in constant_claims(K, model):
            lv = ctx.from_sympy(lhs, env=num.env)
            rv = ctx.from_sympy(rhs, env=num.env)
            w = {"exp(-cM)": num.emcM} if claim.id == "E3" else {}
            if claim.id == "E2":
                w["tail"] = lv
            out.append(claim.measured(lv, rv, w))
    return out


def decide_exactly(K: Constants, model: Transformer, cid: str):
    """Decide a constant-level claim in exact arithmetic (SymPy), for the cases where it holds with
    equality and no ball can tell.  Only claims declared ``exact_retry`` (no eta/lambda, whose
    definitions SymPy would try to "simplify" at great cost) are attempted."""
    for claim, lhs, rhs in constant_claims(K, model):
        if claim.id != cid or not claim.exact_retry:
            continue
        subs = {SYM["M_g"]: K.defs[SYM["M_g"]]}
        diff = sympy.expand((rhs - lhs).xreplace(subs))
        if diff.is_Rational:
            sides = [sympy.expand(v.xreplace(subs)) for v in (lhs, rhs)]
            if all(v.is_Rational for v in sides):  # both sides exact: report them (e.g. 1/20 <= 1/20)
                return bool(diff >= 0), sides[0], sides[1]
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
        out = [CLAIMS["A1"].measured(gmax, num_B, statement=f"|g| <= B on a {per_axis}^{d} grid")]
        if worst is not None:
            out.append(CLAIMS["A2"].measured(
                worst, ctx.zero, statement=f"max over axis pairs of a {per_axis}^{d} grid of |g(x)-g(y)| - C_H |x-y|^alpha <= 0"))
    return out


def symbolic_claims(K: Constants) -> list[Measured]:
    return [
        CLAIMS["L1"].measured(cancellation_identity(K.d)),
        CLAIMS["L4.1"].measured(sine_cancellation(K.P)),
    ]


def measure(ctx: Context, K: Constants, model: Transformer, points, assumptions: bool = True,
            tick=None) -> list[Measured]:
    """Every claim (docs/shi_liao.md, Claims; and the ε budget) in ``ctx``, sample-point claims merged to worst
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
