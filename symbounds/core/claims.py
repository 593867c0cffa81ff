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

import enum
import functools
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import flint

from .contexts import BallContext, Context
from .exact import arb_to_fraction, as_fraction, decimal_down, decimal_up

__all__ = ["Claim", "Measured", "ClaimResult", "Verdict", "Relation", "Scope", "decide", "aggregate", "escalate",
           "exit_code", "overall", "three_and", "enclosure", "conclude", "load_claims", "HasVerdict"]


class Verdict(enum.StrEnum):
    """The outcome of one claim; the string is what reports print."""

    PROVED = "proved"  # a rigorous context decided that it holds
    REFUTED = "refuted"  # a rigorous context decided that it fails
    UNDECIDED = "undecided"  # the balls overlap the boundary even at the largest precision tried
    EVIDENCE = "evidence"  # holds in a non-rigorous context, or an assumption holds on a finite grid
    AGAINST = "against"  # fails in a non-rigorous context

    @property
    def exit_code(self) -> int:
        """0 proved, 1 refuted, 3 anything short of a proof (the command's exit code)."""
        return {"proved": 0, "refuted": 1}.get(self.value, 3)


class Relation(enum.StrEnum):
    LE = "le"  # lhs <= rhs
    LT = "lt"  # lhs < rhs
    ZERO = "zero"  # lhs is exactly 0
    SYMBOLIC = "symbolic"  # lhs is the verdict of a SymPy proof (True / False / None)
    HOLDS = "holds"  # a property decided in exact arithmetic by the construction (lhs: True/False)


RELATIONS = tuple(r.value for r in Relation)

#: LaTeX of each relation between the two sides.
RELATION_TEX = {Relation.LE: r"\le", Relation.LT: "<"}


class Scope(enum.StrEnum):
    LEMMA = "lemma"  # a step of the proof
    BUDGET = "budget"  # an inequality between the constants that the proof needs
    ASSUMPTION = "assumption"  # a property of the target, checked on a finite grid only


@dataclass(frozen=True)
class Claim:
    """One claim of a proof, declared once beside the code that measures it.

    ``statement`` is plain text; ``tex`` is the claim in the paper's notation (LaTeX, math mode);
    ``exact_retry``: when balls cannot decide it (an inequality that holds with equality), the
    construction can decide it in exact arithmetic.  ``claim.measured(lhs, rhs)`` is one measurement.
    """

    id: str
    statement: str
    tex: str
    relation: Relation
    scope: Scope = Scope.LEMMA
    exact_retry: bool = False

    def __post_init__(self):
        object.__setattr__(self, "relation", Relation(self.relation))
        object.__setattr__(self, "scope", Scope(self.scope))

    def measured(self, lhs, rhs=None, witnesses: dict | None = None, note: str = "", statement: str | None = None):
        """A :class:`Measured` of this claim (``statement``: the instance's wording, if it differs)."""
        return Measured(self.id, statement or self.statement, self.relation, lhs, rhs, self.scope,
                        dict(witnesses or {}), note, self)

    def stated(self, statement: str) -> "_Stated":
        """This claim with the instance's wording: ``claim.stated(f"... {n} points").measured(lhs, rhs)``."""
        return _Stated(self, statement)

    def _latex(self, printer=None) -> str:  # SymPy's printer protocol: sympy.latex(claim)
        return self.tex

    def _repr_latex_(self) -> str:  # notebooks
        return f"${self.tex}$"

    def __repr__(self) -> str:
        from .display import short

        return short(f"Claim({self.id}: {self.statement!r}, {self.relation}, {self.scope})")


@functools.lru_cache(maxsize=None)
def _claims_file(path: str) -> dict[str, Claim]:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    fields = {"statement", "tex", "relation", "scope", "exact_retry"}
    out = {}
    for cid, spec in data.items():
        extra = set(spec) - fields
        if extra:
            raise ValueError(f"{path}: claim {cid}: unknown field {sorted(extra)[0]!r}")
        out[cid] = Claim(cid, spec["statement"], spec["tex"], Relation(spec["relation"]),
                         Scope(spec.get("scope", "lemma")), bool(spec.get("exact_retry", False)))
    return out


def load_claims(path) -> dict[str, Claim]:
    """The claims declared in a TOML file beside a construction's code (one table per claim id:
    ``statement``, ``tex``, ``relation``, optional ``scope`` and ``exact_retry``), in file order.
    Each file is read once: every caller gets the same :class:`Claim` objects."""
    return dict(_claims_file(str(Path(path).resolve())))


@dataclass(frozen=True)
class _Stated:
    claim: Claim
    statement: str

    def measured(self, lhs, rhs=None, witnesses: dict | None = None, note: str = ""):
        return self.claim.measured(lhs, rhs, witnesses, note, self.statement)


@dataclass
class Measured:
    """One claim measured in one context.

    ``relation``: see :class:`Relation`.  ``scope``: see :class:`Scope`.  ``witnesses``: the
    quantities the claim rests on (used to tell when float64 decided a claim only vacuously).
    """

    id: str
    statement: str
    relation: str
    lhs: object
    rhs: object = None
    scope: str = "lemma"
    witnesses: dict = field(default_factory=dict)
    note: str = ""
    claim: Claim | None = None

    def __post_init__(self):
        if self.relation not in RELATIONS:
            raise ValueError(f"unknown relation {self.relation!r}")
        self.relation = Relation(self.relation)
        self.scope = Scope(self.scope)


def enclosure(v) -> dict | None:
    """A number as JSON: an Arb ball as ``{"mid", "rad", "lower", "upper"}``, an exact rational as
    ``{"exact", "lower", "upper"}``; ``lower``/``upper`` are decimals rounded outward (17 digits),
    so ``lower <= value <= upper`` holds for the true value.  None for anything else."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, flint.arb):
        if not v.is_finite():
            return {"mid": "nan" if v.mid().is_nan() else str(v.mid()), "rad": "inf", "lower": "-inf", "upper": "inf"}
        lo, hi = arb_to_fraction(v.lower()), arb_to_fraction(v.upper())
        return {"mid": v.mid().str(20, radius=False), "rad": v.rad().str(3, radius=False),
                "lower": decimal_down(lo), "upper": decimal_up(hi)}
    try:
        q = as_fraction(v)
    except (AttributeError, TypeError):
        return None
    return {"exact": str(q), "lower": decimal_down(q), "upper": decimal_up(q)}


@dataclass
class ClaimResult:
    """The verdict on one claim.  ``lhs``/``rhs`` are the two sides as printed text (kept for
    readers of earlier reports); ``lhs_value``/``rhs_value`` the numbers themselves (a ball, an
    exact rational, or None), which reports format and JSON writes as :func:`enclosure`."""

    id: str
    statement: str
    context: str
    prec: int | None
    verdict: Verdict
    lhs: str
    rhs: str
    scope: Scope = Scope.LEMMA
    note: str = ""
    relation: Relation | None = None
    lhs_value: object = None
    rhs_value: object = None
    claim: Claim | None = None

    def __post_init__(self):
        self.verdict = Verdict(self.verdict)
        self.scope = Scope(self.scope)
        if self.relation is not None:
            self.relation = Relation(self.relation)

    def __repr__(self) -> str:
        """``ClaimResult(L3 proved by ball, 128 bits: lhs [...] le rhs [...])``, sides cut short."""
        from .display import short

        rel = {"le": "<=", "lt": "<"}.get(str(self.relation), "")
        sides = f": {short(self.lhs, 60)} {rel} {short(self.rhs, 60)}".rstrip() if self.lhs else ""
        who = f"{self.context}, {self.prec} bits" if self.prec else self.context
        return short(f"ClaimResult({self.id} {self.verdict} by {who}{sides})")

    def _repr_latex_(self) -> str:
        """The claim in the paper's notation beside its verdict (notebooks)."""
        from .display import claims_latex

        return claims_latex([self])

    def _repr_html_(self) -> str:
        from .display import claims_html

        return claims_html([self])

    def as_json(self) -> dict:
        out = {
            "id": self.id,
            "statement": self.statement,
            "context": self.context,
            "prec": self.prec,
            "verdict": str(self.verdict),
            "lhs": self.lhs,
            "rhs": self.rhs,
            "scope": str(self.scope),
            **({"note": self.note} if self.note else {}),
        }
        if self.relation is not None:
            out["relation"] = str(self.relation)
        encl = {k: enclosure(v) for k, v in (("lhs", self.lhs_value), ("rhs", self.rhs_value))}
        encl = {k: v for k, v in encl.items() if v is not None}
        if encl:
            out["enclosure"] = encl
        return out


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
    if m.relation in ("symbolic", "holds"):
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


_RIGOROUS = {True: Verdict.PROVED, False: Verdict.REFUTED, None: Verdict.UNDECIDED}
_NUMERIC = {True: Verdict.EVIDENCE, False: Verdict.AGAINST, None: Verdict.UNDECIDED}


def conclude(claim: Claim, holds: bool | None, context: str, prec: int | None = None, note: str = "",
             statement: str | None = None, lhs: str = "", rhs: str = "", lhs_value=None,
             rhs_value=None) -> ClaimResult:
    """The verdict on ``claim`` when a rigorous computation (exact, or balls at ``prec`` bits) has
    decided ``holds`` (True / False / None for undecided) by itself: the one place where a truth
    value becomes a verdict outside :func:`decide`."""
    return ClaimResult(claim.id, statement or claim.statement, context, prec, _RIGOROUS[holds], lhs, rhs,
                       claim.scope, note, claim.relation, lhs_value, rhs_value, claim)


def decide(ctx: Context, m: Measured) -> ClaimResult:
    """The verdict of one measured claim in ``ctx``."""
    with ctx.scope():
        t = truth(ctx, m)
    if m.relation in ("symbolic", "holds"):
        verdict = _RIGOROUS[t]
        context, prec = ("symbolic", None) if m.relation == "symbolic" else (ctx.name, ctx.prec)
    elif ctx.rigorous:
        verdict = _RIGOROUS[t]
        if m.scope == "assumption" and t is True:
            verdict = Verdict.EVIDENCE  # a finite grid never proves a property of the whole domain
        context, prec = ctx.name, ctx.prec
    else:
        verdict = _NUMERIC[t]
        context, prec = ctx.name, ctx.prec
    fmt = lambda v: "" if v is None or isinstance(v, bool) else ctx.to_str(v)
    keep = lambda v: v if ctx.rigorous and not isinstance(v, bool) else None
    rhs = "0" if m.relation == "zero" else fmt(m.rhs)  # "x = 0": the right side is an exact 0
    return ClaimResult(m.id, m.statement, context, prec, verdict, fmt(m.lhs), rhs, m.scope, m.note,
                       m.relation, keep(m.lhs), keep(m.rhs), m.claim)


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
                    m.id, m.statement, m.relation, _absify(ctx, m), m.rhs, m.scope, dict(m.witnesses), m.note, m.claim
                )
                order.append(m.id)
                continue
            if m.relation in ("symbolic", "holds"):
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


def _nan(v) -> bool:
    """A ball that encloses nothing useful: NaN midpoint or infinite radius."""
    return isinstance(v, flint.arb) and not v.is_finite()


#: The note on a claim whose measurement stayed NaN: doubling the precision again cannot help.
NAN_NOTE = ("its enclosure is NaN at two successive precisions (an undefined or unbounded operation, "
            "e.g. a root of a ball straddling 0): not escalated further")


def escalate(measure, prec: int, max_prec: int, progress=None, exact=None):
    """Run ``measure(ctx) -> list[Measured]`` in ball contexts of doubling precision.

    ``exact(claim_id) -> True | False | None`` (or ``(verdict, lhs, rhs)`` with the two sides as
    exact rationals, which then replace the balls in the report) is tried for a claim the first
    time it is undecided (an inequality that holds with equality can never be decided by balls of
    nonzero radius, but may be decided in exact arithmetic).

    A claim whose measurement is NaN (a side is a non-finite ball) at two successive precisions
    is not escalated further: NaN comes from an operation outside its domain (a root or a
    logarithm of a ball straddling 0, a division by one), which more bits rarely cure.  It stays
    undecided with a note saying so, and the doubling stops once every undecided claim is such a
    NaN.  ``measure`` may accept ``only=`` (a set of claim ids) to re-measure just those claims.

    Returns the verdicts (each from the lowest precision that decided it), the measurements at
    the last precision used, and that precision.
    """
    import inspect

    try:
        selective = "only" in inspect.signature(measure).parameters
    except (TypeError, ValueError):
        selective = False
    results: dict[str, ClaimResult] = {}
    order: list[str] = []
    p = prec
    last: dict[str, Measured] = {}
    tried: set = set()
    nan_before: set = set()
    hopeless: set = set()
    while True:
        ctx = BallContext(p)
        pending = {i for i in order if results[i].verdict == "undecided" and i not in hopeless}
        measured = measure(ctx, only=pending) if (selective and order) else measure(ctx)
        nan_now = set()
        for m in measured:
            last[m.id] = m
            if m.id not in results:
                order.append(m.id)
            if m.id in results and results[m.id].verdict != "undecided":
                continue
            r = decide(ctx, m)
            results[m.id] = r
            if r.verdict == "undecided" and (_nan(m.lhs) or _nan(m.rhs)):
                nan_now.add(m.id)
        for i in nan_now & nan_before:
            hopeless.add(i)
            results[i].note = f"{results[i].note}; {NAN_NOTE}" if results[i].note else NAN_NOTE
        nan_before = nan_now
        if exact is not None:
            for i in order:
                r = results[i]
                if r.verdict == "undecided" and i not in tried:
                    tried.add(i)
                    t = exact(i)
                    sides = None
                    if isinstance(t, tuple):  # (verdict, lhs, rhs): the exact sides, to print
                        t, sides = t[0], t[1:]
                    if t is not None:
                        r.verdict = _RIGOROUS[t]
                        r.context, r.prec = "exact", None
                        if sides is not None:
                            r.lhs, r.rhs = (str(v) for v in sides)
                            r.lhs_value, r.rhs_value = (as_fraction(v) for v in sides)
        if progress is not None:
            progress(p)
        open_ = [i for i in order if results[i].verdict == "undecided" and i not in hopeless]
        if not open_ or p * 2 > max_prec:
            break
        p *= 2
    return [results[i] for i in order], [last[i] for i in order], p


def overall(results: list[ClaimResult]) -> Verdict:
    """The verdict of a whole run: refuted if any claim is refuted; proved if every claim is proved
    (an assumption on the target: not violated on its grid); otherwise undecided."""
    if any(r.verdict == Verdict.REFUTED for r in results):
        return Verdict.REFUTED
    for r in results:
        ok = r.verdict == Verdict.PROVED or (r.scope == Scope.ASSUMPTION and r.verdict == Verdict.EVIDENCE)
        if not ok:
            return Verdict.UNDECIDED
    return Verdict.PROVED


class HasVerdict:
    """``verdict`` and ``exit_code`` of a run, from its ``claims`` (a list of ClaimResult)."""

    @property
    def verdict(self) -> Verdict:
        return overall(self.claims)

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code


def exit_code(results: list[ClaimResult]) -> int:
    """0 every claim proved (assumptions: not violated), 1 some refuted, 3 some undecided."""
    return overall(results).exit_code


def is_nonfinite(x) -> bool:
    return isinstance(x, float) and not math.isfinite(x)
