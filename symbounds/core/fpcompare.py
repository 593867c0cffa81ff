"""Float64 (or mpmath) beside the certified values: the digits that agree, and each claim that the
non-rigorous context decides wrongly or only vacuously.

Classification of a claim evaluated in float64, against the rigorous verdict:

==============  ==============================================================================
``agrees``      same verdict, and no quantity the claim rests on collapsed
``wrong``       float64 decides the opposite of the rigorous verdict
``vacuous``     same verdict, but a quantity that is certified nonzero underflowed to 0.0 (the
                claim then holds "because both sides are 0", not for the reason the proof gives)
``overflow``    a quantity is +-inf
``nan``         a quantity is NaN (e.g. inf/inf)
``undecided``   the rigorous context could not decide, so nothing can be said
==============  ==============================================================================

Nothing here invents a failure: each label is read off the two computations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import flint
import mpmath

from .claims import ClaimResult, Measured, truth
from .contexts import Context

__all__ = ["ClaimComparison", "QuantityComparison", "compare_claims", "compare_quantities", "agree_digits"]


@dataclass
class QuantityComparison:
    name: str
    certified: str
    other: str
    digits: int | None  # significant decimal digits that agree; None when not meaningful
    note: str = ""

    def as_json(self):
        return {"name": self.name, "certified": self.certified, "value": self.other, "digits": self.digits,
                **({"note": self.note} if self.note else {})}


@dataclass
class ClaimComparison:
    id: str
    rigorous: str
    other: str  # "holds" / "fails" / "undecided"
    status: str
    note: str = ""

    def as_json(self):
        return {"id": self.id, "rigorous": self.rigorous, "value": self.other, "status": self.status,
                **({"note": self.note} if self.note else {})}


def _arb_of(ctx_other: Context, v) -> flint.arb | None:
    """The other context's number as an exact arb (a float or mpf is a dyadic rational)."""
    if isinstance(v, float):
        if not math.isfinite(v):
            return None
        return flint.arb(v)  # exact: every finite double is representable
    if hasattr(v, "man_exp"):  # an mpf of any mpmath context
        if not mpmath.isfinite(v):
            return None
        man, exp = abs(v).man_exp  # |v| = man * 2^exp exactly (mpmath keeps the sign apart)
        r = flint.arb(flint.fmpz(int(man))) * flint.arb(2) ** int(exp)
        return -r if v < 0 else r
    return None


def agree_digits(ball: flint.arb, other_ctx: Context, v, prec: int) -> int | None:
    """Leading significant decimal digits of ``v`` that agree with the certified ``ball``."""
    with flint.ctx.workprec(max(prec, 64) + 64):
        o = _arb_of(other_ctx, v)
        if o is None:
            return 0
        if ball.contains(0):
            if ball.is_exact() and ball.is_zero():
                return 17 if o.is_zero() else 0
            return None
        if o.is_zero():
            return 0
        rel = abs((o - ball) / ball)
        up = rel.upper()
        if up.is_zero():
            return 17 if other_ctx.name == "fp" else int(prec * 0.30103)
        digits = -float(up.log().mid()) / math.log(10)
        cap = 17 if other_ctx.name == "fp" else int(prec * 0.30103)
        return max(0, min(cap, int(math.floor(digits))))


def _status(v) -> str | None:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "overflow"
    return None


def _collapsed(ball_ctx: Context, ball, other) -> bool:
    """``other`` is exactly 0 although the certified value is certainly nonzero (underflow)."""
    if other != 0 or ball is None or isinstance(ball, bool):
        return False
    with ball_ctx.scope():
        return bool(ball_ctx.lt(ball_ctx.zero, ball_ctx.abs(ball)))


def compare_claims(ball_ctx: Context, ball: list[Measured], rigorous: list[ClaimResult], other_ctx: Context,
                   other: list[Measured]) -> list[ClaimComparison]:
    """Each claim's verdict in ``other_ctx`` beside the rigorous verdict, classified."""
    by_id_ball = {m.id: m for m in ball}
    by_id_rig = {r.id: r for r in rigorous}
    out = []
    for m in other:
        if m.relation == "symbolic" or m.id not in by_id_rig:
            continue
        rig = by_id_rig[m.id].verdict
        t = truth(other_ctx, m)
        said = {True: "holds", False: "fails", None: "undecided"}[t]
        bm = by_id_ball.get(m.id)
        values = [("lhs", m.lhs, bm.lhs if bm else None), ("rhs", m.rhs, bm.rhs if bm else None)]
        values += [(k, v, bm.witnesses.get(k) if bm else None) for k, v in m.witnesses.items()]
        bad = [(_status(v), k) for k, v, _ in values if _status(v)]
        collapsed = [k for k, v, b in values if _collapsed(ball_ctx, b, v)]
        if rig == "undecided":
            status, note = "undecided", ""
        elif bad:
            status, note = bad[0][0], f"{bad[0][1]} is {bad[0][0]}"
        elif (rig == "proved" and t is False) or (rig == "refuted" and t is True) or t is None:
            status = "wrong"
            note = f"{', '.join(collapsed)} underflowed to 0" if collapsed else ""
        elif collapsed:
            status, note = "vacuous", f"{', '.join(collapsed)} underflowed to 0"
        else:
            status, note = "agrees", ""
        out.append(ClaimComparison(m.id, rig, said, status, note))
    return out


def compare_quantities(ball_ctx: Context, named_ball: dict, other_ctx: Context, named_other: dict) -> list[QuantityComparison]:
    """Named quantities side by side with the number of agreeing digits."""
    out = []
    for name, b in named_ball.items():
        if name not in named_other:
            continue
        o = named_other[name]
        with ball_ctx.scope():
            cert = ball_ctx.to_str(b, 15)
        note = _status(o) or ("underflow to 0" if _collapsed(ball_ctx, b, o) else "")
        digits = agree_digits(b, other_ctx, o, ball_ctx.prec)
        out.append(QuantityComparison(name, cert, other_ctx.to_str(o), digits, note))
    return out


def named_quantities(measured: list[Measured]) -> dict:
    """Quantities worth showing: every claim's two sides and its witnesses, by name."""
    q = {}
    for m in measured:
        if m.relation == "symbolic":
            continue
        q[f"{m.id} lhs"] = m.lhs
        if m.rhs is not None:
            q[f"{m.id} rhs"] = m.rhs
        for k, v in m.witnesses.items():
            q.setdefault(k, v)
    return q
