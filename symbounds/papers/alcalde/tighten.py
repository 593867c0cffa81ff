"""How much softer the softmax interpolation of [AFZ25] could be: the largest certified temperature.

The softmax variant (:mod:`symbounds.papers.alcalde.softmax`, docs/alcalde.md, The softmax variant)
replaces every hardmax attention by a softmax at temperature ``tau`` (scores ``<A x_i, x_l> / tau``)
and is built with ``tau = 1/64``.  A larger ``tau`` is a softer attention: the separation shifts
and the collapse leak, and eventually a token misses its cluster's segment of the line.  This
module finds the largest ``tau`` at which the certificate still holds:

* **pass** at ``tau``: claim X1 (every token, after the line layer, lies on a segment of its own
  sequence's clusters, and every cluster receives one; Arb balls) and the end-to-end claim I1
  (``T(X^j) = Y^j`` as sets; X1 and the exact X2) are both *proved* for
  ``build_softmax(ds, tau, seed)``, at the precisions ``symbounds interp`` uses;
* **fail**: X1 or I1 is *refuted* (a token certainly on none of its segments, or certainly away
  from every target of its sequence);
* **undecided** otherwise.  An undecided temperature is never a pass: for the search it counts as
  a failure (so ``tau*`` stays a certified pass) and it is listed.

Search (:func:`symbounds.core.threshold.find_threshold`, upwards).  From ``tau_0 = 1/64`` the temperature doubles while it passes (it halves while ``tau_0``
fails), giving a passing ``lo`` and a non-passing ``hi = 2 lo``; exact dyadic midpoints bisect the
bracket until ``hi <= lo (1 + R)`` (``R`` the relative resolution).  ``tau* = lo`` is then a
certified pass and the step above, ``tau* (1 + R)``, is evaluated itself: a certified failure
(its evidence: the token and where it landed) ends the search; a pass there (the criterion is not
monotone in ``tau``) moves ``lo`` up and the search goes on above it; an undecided step is
reported as such (``above_status = "undecided"``) and the result is not counted as tight.

Every value is an exact rational, so ``symbounds interp --attention softmax --tau <tau*>``
rebuilds the very network that passed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

from ...core.exact import decimal
from ...core.threshold import FAIL, PASS, UNDECIDED, find_threshold
from .dataset import Dataset
from .softmax import build_softmax, certify_softmax

__all__ = ["TAU_CONSTRUCTION", "TauOptions", "TauOutcome", "TauTightened", "evaluate_tau", "tighten_tau",
           "tau_json", "fraction_text"]

#: The temperature the construction uses (``build_softmax``'s default).
TAU_CONSTRUCTION = Fraction(1, 64)

@dataclass
class TauOptions:
    resolution: Fraction = Fraction(1, 100)
    seed: int = 0  # the construction's random directions (as ``symbounds interp --seed``)
    prec: int = 256  # starting Arb precision of the certificate (as ``symbounds interp``)
    max_prec: int = 4096
    max_doublings: int = 400  # doublings (or halvings) of tau before giving up
    max_evaluations: int = 600

    def __post_init__(self):
        self.resolution = Fraction(self.resolution)
        if not (0 < self.resolution < Fraction(1, 2)):
            raise ValueError(f"the resolution must lie in (0, 1/2), got {self.resolution}")


@dataclass
class TauOutcome:
    """One temperature: status pass / fail / undecided, the verdicts of X1 and I1, and the note
    of the first of them that is not proved (where a token landed)."""

    tau: Fraction
    status: str
    x1: str
    i1: str
    overall: str  # the verdict of every claim of ``symbounds interp`` (sizes B1-B3 included)
    note: str = ""
    prec: int | None = None
    seconds: float = 0.0

    def as_json(self) -> dict:
        return {"tau": fraction_text(self.tau), "tau_decimal": decimal(self.tau, 10), "status": self.status,
                "X1": self.x1, "I1": self.i1, "verdict": self.overall, "note": self.note, "prec": self.prec,
                "seconds": round(self.seconds, 3)}


@dataclass
class TauTightened:
    construction_tau: Fraction
    construction_outcome: TauOutcome
    tau_star: Fraction | None = None  # a certified pass, or None
    star_outcome: TauOutcome | None = None
    above: Fraction | None = None  # tau_star (1 + R)
    above_outcome: TauOutcome | None = None
    scan: list = field(default_factory=list)  # the doublings (or halvings), in order
    bisection: list = field(default_factory=list)  # every later evaluation, in order
    flips: list = field(default_factory=list)  # (non-passing tau, passing tau above it)
    undecided: list = field(default_factory=list)
    note: str = ""
    evaluations: int = 0
    seconds: float = 0.0

    @property
    def slack(self) -> Fraction | None:
        """``tau* / tau_construction``: how many times softer the attention could be."""
        return None if self.tau_star is None else self.tau_star / self.construction_tau

    @property
    def tight(self) -> bool:
        """``tau*`` is a certified pass and the step above it a certified failure."""
        return self.tau_star is not None and self.above_outcome is not None and self.above_outcome.status == FAIL


def fraction_text(q: Fraction) -> str:
    """An exact rational as ``symbounds interp --tau`` reads it: ``p`` or ``p/q``."""
    q = Fraction(q)
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def evaluate_tau(ds: Dataset, tau: Fraction, opts: TauOptions | None = None) -> TauOutcome:
    """Build the softmax network at ``tau`` and certify it (pass / fail / undecided, module docstring)."""
    opts = opts or TauOptions()
    t0 = time.perf_counter()
    con = build_softmax(ds, tau, opts.seed)
    claims, _, info = certify_softmax(con, opts.prec, opts.max_prec)
    by = {c.id: c for c in claims}
    x1, i1 = str(by["X1"].verdict), str(by["I1"].verdict)
    if x1 == "proved" and i1 == "proved":
        status = PASS
    elif "refuted" in (x1, i1):
        status = FAIL
    else:
        status = UNDECIDED
    note = next((by[k].note for k in ("X1", "I1") if str(by[k].verdict) != "proved"), "")
    verdicts = {str(c.verdict) for c in claims}
    overall = "refuted" if "refuted" in verdicts else ("proved" if verdicts == {"proved"} else "undecided")
    return TauOutcome(Fraction(tau), status, x1, i1, overall, note, info.get("prec"), time.perf_counter() - t0)


def tighten_tau(ds: Dataset, opts: TauOptions | None = None, progress=None) -> TauTightened:
    """The largest certified temperature ``tau*`` (module docstring).  ``progress(done, total,
    label)`` is called after each evaluation (``total`` an estimate)."""
    opts = opts or TauOptions()
    t0 = time.perf_counter()
    count = [0]

    def ev(tau) -> TauOutcome:
        o = evaluate_tau(ds, Fraction(tau), opts)
        count[0] += 1
        if progress is not None:
            progress(count[0], max(count[0] + 1, 40), "tau")
        return o

    t = find_threshold(ev, [TAU_CONSTRUCTION], direction=+1, resolution=opts.resolution,
                       further=lambda tau: tau * 2, back=lambda tau: tau / 2, max_scan=opts.max_doublings,
                       max_evaluations=opts.max_evaluations)
    res = TauTightened(TAU_CONSTRUCTION, t.tried.get(TAU_CONSTRUCTION))
    res.scan, res.flips, res.bisection = t.scan, t.flips, t.later
    res.tau_star, res.star_outcome = t.best, t.best_outcome
    res.above, res.above_outcome = t.step, t.step_outcome
    res.note = {
        "no-pass": f"no temperature passes down to tau_0 / 2^{opts.max_doublings}",
        "scan-end": f"still passes after {opts.max_doublings} doublings",
        "step-undecided": "the step above tau* is undecided (neither a certified pass nor a certified failure)",
        "budget": f"stopped after {opts.max_evaluations} evaluations",
    }.get(t.reason, "")
    res.undecided = sorted(t.undecided, key=lambda o: o.tau)
    res.evaluations = len(t.tried)
    res.seconds = time.perf_counter() - t0
    return res


# ------------------------------------------------------------------------------------------
# reports


def tau_json(ds: Dataset, res: TauTightened, opts: TauOptions, source: str) -> dict:
    """One JSON object (``symbounds tighten --what tau --json``)."""
    oj = lambda o: None if o is None else o.as_json()
    return {
        "command": "tighten",
        "what": "tau",
        "construction": "softmax interpolation [AFZ25]",
        "dataset": dict(ds.summary(), M=ds.M, source=source),
        "seed": opts.seed,
        "resolution": fraction_text(opts.resolution),
        "tau_construction": fraction_text(res.construction_tau),
        "construction_status": res.construction_outcome.status if res.construction_outcome else None,
        "tau_star": None if res.tau_star is None else fraction_text(res.tau_star),
        "tau_star_decimal": None if res.tau_star is None else decimal(res.tau_star, 10),
        "slack": None if res.slack is None else decimal(res.slack, 6),
        "star": oj(res.star_outcome),
        "above": oj(res.above_outcome),
        "tight": res.tight,
        "scan": [oj(o) for o in res.scan],
        "bisection": [oj(o) for o in res.bisection],
        "flips": [{"fails": fraction_text(a.tau), "passes": fraction_text(b.tau)} for a, b in res.flips],
        "undecided": [oj(o) for o in res.undecided],
        "evaluations": res.evaluations,
        "seconds": round(res.seconds, 3),
        **({"note": res.note} if res.note else {}),
    }
