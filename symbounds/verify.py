"""Claims -> verdicts, with precision escalation.

A construction measures each claim in a context as a :class:`Measured`: the two sides of an
inequality (or a value that must be exactly zero) computed *from the network's own intermediate
values*, plus "witnesses" (the quantities the claim rests on, used to tell when float64 decided a
claim only vacuously).  This module turns measurements into verdicts:

==============  ============================================================================
verdict         meaning
==============  ============================================================================
``proved``      a rigorous context (exact rationals, Arb balls, or SymPy for a symbolic
                identity) decided that the claim holds
``refuted``     a rigorous context decided that it fails
``undecided``   the balls overlap the boundary even at the largest precision tried
``evidence``    a non-rigorous context (mpmath, float64) says it holds; or an assumption on
                the target that was checked on a finite grid only and not violated there
``against``     a non-rigorous context says it fails
==============  ============================================================================

Precision escalation (Arb's habit): start at ``prec``, double while any claim is undecided, up
to ``max_prec``; a verdict reached at a lower precision is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .contexts import BallContext, Context

__all__ = ["Measured", "ClaimResult", "decide", "aggregate", "escalate", "exit_code", "three_and"]

RELATIONS = ("le", "lt", "zero", "symbolic")


@dataclass
class Measured:
    """One claim measured in one context.

    ``relation``: ``"le"`` (lhs <= rhs), ``"lt"`` (lhs < rhs), ``"zero"`` (lhs is exactly 0),
    ``"symbolic"`` (``lhs`` is the verdict of a SymPy proof: True, False or None).
    ``scope``: ``"lemma"`` (a step of the proof), ``"budget"`` (an inequality between the
    constants that the proof needs) or ``"assumption"`` (a property of the target checked on a
    finite grid only).
    """

    id: str
    statement: str
    relation: str
    lhs: object
    rhs: object = None
    scope: str = "lemma"
    witnesses: dict = field(default_factory=dict)
    note: str = ""

    def __post_init__(self):
        if self.relation not in RELATIONS:
            raise ValueError(f"unknown relation {self.relation!r}")


@dataclass
class ClaimResult:
    id: str
    statement: str
    context: str
    prec: int | None
    verdict: str
    lhs: str
    rhs: str
    scope: str = "lemma"
    note: str = ""

    def as_json(self) -> dict:
        return {
            "id": self.id,
            "statement": self.statement,
            "context": self.context,
            "prec": self.prec,
            "verdict": self.verdict,
            "lhs": self.lhs,
            "rhs": self.rhs,
            "scope": self.scope,
            **({"note": self.note} if self.note else {}),
        }


def three_and(values) -> bool | None:
    """Kleene conjunction: False if any is False, else None if any is None, else True."""
    values = list(values)
    if any(v is False for v in values):
        return False
    if any(v is None for v in values):
        return None
    return True


def truth(ctx: Context, m: Measured) -> bool | None:
    """Does the claim hold in ``ctx``?  True / False / None (cannot tell)."""
    if m.relation == "symbolic":
        return m.lhs
    if m.relation == "le":
        return ctx.le(m.lhs, m.rhs)
    if m.relation == "lt":
        return ctx.lt(m.lhs, m.rhs)
    # "zero": exactly zero is True; certainly nonzero is False; otherwise undecided.
    if ctx.is_zero(m.lhs):
        return True
    nz = ctx.lt(ctx.zero, ctx.abs(m.lhs))
    return False if nz else None


def decide(ctx: Context, m: Measured) -> ClaimResult:
    """The verdict of one measured claim in ``ctx``."""
    with ctx.scope():
        t = truth(ctx, m)
    if m.relation == "symbolic":
        verdict = {True: "proved", False: "refuted", None: "undecided"}[t]
        context, prec = "symbolic", None
    elif ctx.rigorous:
        verdict = {True: "proved", False: "refuted", None: "undecided"}[t]
        if m.scope == "assumption" and t is True:
            verdict = "evidence"  # a finite grid never proves a property of the whole domain
        context, prec = ctx.name, ctx.prec
    else:
        verdict = {True: "evidence", False: "against", None: "undecided"}[t]
        context, prec = ctx.name, ctx.prec
    fmt = lambda v: "" if v is None or isinstance(v, bool) else ctx.to_str(v)
    return ClaimResult(m.id, m.statement, context, prec, verdict, fmt(m.lhs), fmt(m.rhs), m.scope, m.note)


def aggregate(ctx: Context, groups: list[list[Measured]]) -> list[Measured]:
    """Merge the measurements of the same claims at several sample points into worst cases:
    the largest lhs and the smallest rhs (for ``zero``: the largest |lhs|)."""
    with ctx.scope():
        return _aggregate(ctx, groups)


def _aggregate(ctx, groups):
    merged: dict[str, Measured] = {}
    order: list[str] = []
    for group in groups:
        for m in group:
            cur = merged.get(m.id)
            if cur is None:
                merged[m.id] = Measured(
                    m.id, m.statement, m.relation, _absify(ctx, m), m.rhs, m.scope, dict(m.witnesses), m.note
                )
                order.append(m.id)
                continue
            if m.relation == "symbolic":
                cur.lhs = three_and([cur.lhs, m.lhs])
                continue
            cur.lhs = ctx.max(cur.lhs, _absify(ctx, m))
            if m.rhs is not None:
                cur.rhs = ctx.min(cur.rhs, m.rhs)
            for k, v in m.witnesses.items():
                cur.witnesses[k] = ctx.min(cur.witnesses[k], v) if k in cur.witnesses else v
    return [merged[i] for i in order]


def _absify(ctx, m: Measured):
    return ctx.abs(m.lhs) if m.relation == "zero" else m.lhs


def escalate(measure, prec: int, max_prec: int, progress=None, exact=None):
    """Run ``measure(ctx) -> list[Measured]`` in ball contexts of doubling precision.

    ``exact(claim_id) -> True | False | None`` is a last resort for claims still undecided at
    ``max_prec`` (an inequality that holds with equality can never be decided by balls of
    nonzero radius, but may be decided in exact arithmetic).

    Returns the verdicts (each from the lowest precision that decided it), the measurements at
    the last precision used, and that precision.
    """
    results: dict[str, ClaimResult] = {}
    order: list[str] = []
    p = prec
    last: list[Measured] = []
    tried: set = set()
    while True:
        ctx = BallContext(p)
        last = measure(ctx)
        for m in last:
            r = decide(ctx, m)
            if m.id not in results:
                order.append(m.id)
            if m.id not in results or results[m.id].verdict == "undecided":
                results[m.id] = r
        if exact is not None:
            for i in order:
                r = results[i]
                if r.verdict == "undecided" and i not in tried:
                    tried.add(i)
                    t = exact(i)
                    if t is not None:
                        r.verdict = "proved" if t else "refuted"
                        r.context, r.prec = "exact", None
        if progress is not None:
            progress(p)
        if all(results[i].verdict != "undecided" for i in order) or p * 2 > max_prec:
            break
        p *= 2
    return [results[i] for i in order], last, p


def exit_code(results: list[ClaimResult]) -> int:
    """0 every claim proved (assumptions: not violated), 1 some refuted, 3 some undecided."""
    if any(r.verdict == "refuted" for r in results):
        return 1
    if any(r.verdict == "undecided" for r in results):
        return 3
    for r in results:
        ok = r.verdict == "proved" or (r.scope == "assumption" and r.verdict == "evidence")
        if not ok:
            return 3
    return 0


def is_nonfinite(x) -> bool:
    return isinstance(x, float) and not math.isfinite(x)
