"""[SL26]'s softmax leakage against the attention scale ``M`` (docs/shi_liao.md, Where float64
fails): one ``symbounds pou`` run per ``M``, with the certified leakage quantities ``e^{-cM}``, L3,
L6.1, L6.2 and (``context="fp"``) their float64 values.  ``symbounds plot leakage`` draws the rows.
"""

from __future__ import annotations

import math
from fractions import Fraction

import flint

from ...core.contexts import BallContext
from ...core.modelfile import parse_number
from .constants import SYM, constants
from .construction import build
from .run import PouOptions, run

__all__ = ["LEAKAGE", "FP_NORMAL_LOG10", "default_scales", "leakage_rows", "log10_ball"]


def _number(text, what) -> Fraction:
    try:
        return parse_number(str(text), what)
    except Exception:
        raise ValueError(f"{what}: not a number: {str(text)[:40]!r}") from None


def log10_ball(v) -> float | None:
    """``log10`` of a positive certified value (an Arb ball; ``None`` if not certainly positive),
    computed in Arb, so ``1e-535`` is fine."""
    if v is None:
        return None
    with flint.ctx.workprec(128):
        if not v > 0:
            return None
        return float((v.log() / flint.arb(10).log()).mid())


def _log10_float(text: str) -> float | None:
    v = float(text)
    return math.log10(v) if v > 0 and math.isfinite(v) else None


#: quantity of the leakage plot -> (source in the pou run: "constant" or claim id, label)
LEAKAGE = {
    "emcM": ("constant", r"$e^{-cM}$"),
    "L3": ("L3", r"L3: largest off-target weight $\max_{h, j \ne h} \pi^{(h)}_{j1}$"),
    "L6.1": ("L6.1", r"L6.1: $\max_j |\tilde T_j - T_j|$"),
    "L6.2": ("L6.2", r"L6.2: $\max_j |\tilde g_j - g(c_j)|$"),
}
_FP_NAMES = {"emcM": "exp(-cM)", "L3": "L3 lhs", "L6.1": "L6.1 lhs", "L6.2": "L6.2 lhs"}
#: log10 of float64's smallest positive normal number, 2^-1022
FP_NORMAL_LOG10 = -1022 * math.log10(2)


def leakage_rows(inst, M_values, context: str = "ball", points: int = 2, progress=None) -> list[dict]:
    """One ``symbounds pou`` run per attention scale ``M`` (``inst`` with ``M`` replaced).

    Each row: ``M`` (exact string), ``cM`` (float), ``verdict``, and for each quantity ``q`` of
    ``LEAKAGE`` the certified ball ``q`` (string) and ``log10_q`` (float or None); with
    ``context="fp"`` also ``fp_q`` (the float64 value as a string) and ``fp_log10_q`` (None when it
    underflowed to 0.0).  ``progress(done, total, label)`` is called before and after each run.
    """
    from dataclasses import replace

    rows = []
    M_values = list(M_values)
    for i, M in enumerate(M_values):
        M = _number(M, "M") if not isinstance(M, Fraction) else M
        if M <= 0:
            raise ValueError(f"M = {M}: the attention scale must be positive")
        if progress is not None:
            progress(i, len(M_values), f"M = {M}")
        res = run(replace(inst, M=M), PouOptions(context=context, points=points))
        claims = {c.id: c for c in res.claims}
        row = {"M": str(M), "cM": float(_number(res.constants["c"], "c")) * float(M), "verdict": str(res.verdict)}
        ball = BallContext(res.prec)
        env = res.model.definition_values(ball)
        for q, (src, _) in LEAKAGE.items():
            if src == "constant":
                with ball.scope():
                    value = ball.from_sympy(SYM[q], env=env)
                row[q] = res.constants[q]
            else:
                value = claims[src].lhs_value
                row[q] = claims[src].lhs
            row["log10_" + q] = log10_ball(value)
        if context in ("fp", "all"):
            fp = {x.name: x for x in res.comparisons["fp"][1]}
            for q, name in _FP_NAMES.items():
                row["fp_" + q] = fp[name].other
                row["fp_log10_" + q] = _log10_float(fp[name].other)
            row["fp_claims"] = {c.id: c.status for c in res.comparisons["fp"][0]}
        rows.append(row)
        if progress is not None:
            progress(i + 1, len(M_values), f"M = {M}")
    return rows


def default_scales(inst) -> list[Fraction]:
    """``M/4, M, 4M, 16M, 64M`` around the derived scale ``M`` of ``inst`` (rounded down to an integer)."""
    K = constants(inst)
    ctx = BallContext(128)
    env = build(K).definition_values(ctx)
    base = Fraction(int(env[K.M].mid().floor().unique_fmpz()))
    return [base * f for f in (Fraction(1, 4), 1, 4, 16, 64)]
