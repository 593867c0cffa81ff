"""How much smaller each constant of [SL26] could be while the network still certifies.

Shi & Liao's construction derives its constants from the accuracy ``eps`` (docs/shi_liao.md,
"Constants"):

==========  =================================================  ====================================
constant    derived value                                      varied here
==========  =================================================  ====================================
``M``       ``(1/c) log(4 (P-1) B (36 d M_g + 2) / eps)``      ``M`` alone (``M_g`` as derived)
``Mg``      ``log(8 B P / eps) / (3 r_g^2)``                   ``M_g``; ``M`` follows it through its
                                                               formula, as ``certify --Mg`` does
``grid``    ``m = ceil(sqrt(d) / (2 r_g))`` points per axis    ``m``; the grid's covering radius
                                                               ``r = sqrt(d)/(2m)`` replaces ``r_g``
                                                               in ``M_g``, and ``M`` follows
==========  =================================================  ====================================

For each constant and criterion, :func:`tighten` finds the smallest value that still works:

* ``proof``: every lemma and budget claim (L1-L8, E0-E3) is proved at that value
  (:func:`symbounds.papers.shi_liao.run.run`; the assumptions A1/A2 on the target do not
  depend on the constants and are not re-checked);
* ``domain``: ``sup_{x in [0,1]^d} |T(x) - g(x)| <= eps`` is certified box by box
  (:func:`symbounds.papers.shi_liao.certificate.certify_instance`);
* ``class``: the same bound for every target of the Hölder class ``(alpha, C_H, B)``
  (:func:`symbounds.papers.shi_liao.class_certificate.class_verdict`; docs/shi_liao.md, "Every
  target of the class"): a pass is a class certificate, a fail the worst target ``g_0`` at a point
  with its certified error above ``eps``, confirmed by certifying ``g_0``'s own network, which
  comes out refuted with a counterexample point.

The grid has no ``proof`` criterion: ``m`` is defined by the covering claim E0 and the
Hoelder budget E1 (``C_H (2 r)^alpha <= eps/2`` with ``r = sqrt(d)/(2m)`` holds exactly when
``m >= sqrt(d)/(2 r_g)``), so every coarser grid refutes the budget by arithmetic alone.

Search (:func:`symbounds.core.threshold.find_threshold`, downwards).  Certified-ness need not be
monotone in a constant, so the values ``v_0 / 2^k`` (``v_0`` the derived value rounded up,
``k = 1..scan``) are tried first; the lowest passing value of that scan and the failing one below
it form the bracket that is bisected (midpoints rounded to short decimals) until the two ends are
within the relative resolution ``R``.  The reported minimum ``v`` is a certified pass and
``v (1 - R)`` (the grid: ``m - 1``) is then evaluated itself: a certified failure with its
evidence (the refuted claim, or a counterexample point whose ball error exceeds ``eps``) ends the
search; a pass there is a non-monotone flip and the search continues below it.  An undecided
value is never a pass: it counts as a failure for the bisection (so the minimum stays a certified
pass) and is listed.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import sympy

from ...core.boxes import CertifyOptions, certify_model
from ...core.claims import Scope, decide
from ...core.contexts import BallContext
from ...core.exact import decimal_up
from ...core.modelfile import model_to_json
from ...core.threshold import FAIL, PASS, UNDECIDED, find_threshold
from .certificate import certify_instance
from .claims import measure_assumptions
from .constants import SYM, Instance, constants, constants_from
from .construction import build
from .run import PouOptions, run

__all__ = ["CONSTANTS", "CRITERIA", "TightenOptions", "Outcome", "Tightened", "tighten", "tighten_all",
           "grid_constants", "evaluate", "paper_value", "exact_text", "round_sig", "tighten_map", "consistency",
           "map_values"]

#: The constants that can be tightened and the criteria that have a meaning for each.
CONSTANTS = ("M", "Mg", "grid")
CRITERIA = {"M": ("proof", "domain", "class"), "Mg": ("proof", "domain", "class"), "grid": ("domain", "class")}

@dataclass
class TightenOptions:
    resolution: Fraction = Fraction(1, 100)
    scan: int = 10  # halvings below the derived value before bisecting
    max_scan: int = 40  # halvings in all while the scan still passes
    prec: int = 128  # ball precision (claims and boxes)
    max_prec: int = 2048  # claims: largest precision of the escalation
    points: int = 8  # proof: seeded random sample points (on top of the default grid)
    max_boxes: int = 200_000  # domain: boxes before the certificate gives up (undecided)
    max_evaluations: int = 200  # per constant and criterion

    def __post_init__(self):
        self.resolution = Fraction(self.resolution)
        if not (0 < self.resolution < Fraction(1, 2)):
            raise ValueError(f"the resolution must lie in (0, 1/2), got {self.resolution}")
        if self.scan < 1:
            raise ValueError("scan needs at least one halving")


@dataclass
class Outcome:
    """One evaluation: ``value`` (a Fraction, an int for the grid, ``None`` for the derived value
    itself), ``status`` pass / fail / undecided and the evidence."""

    value: object
    status: str
    evidence: dict = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class Tightened:
    constant: str
    criterion: str
    paper: Fraction  # the derived value (rational approximation; exact for the grid)
    paper_text: str  # the derived value as a decimal (irrational for M and Mg)
    paper_outcome: Outcome
    minimum: object = None  # a certified pass, or None
    minimum_outcome: Outcome | None = None
    below: object = None  # one resolution step under the minimum
    below_outcome: Outcome | None = None
    scan: list = field(default_factory=list)  # Outcomes of the logarithmic scan, largest value first
    bisection: list = field(default_factory=list)  # every later evaluation, in order (bisection, steps below)
    flips: list = field(default_factory=list)  # non-monotone flips: (failing value, passing value below)
    undecided: list = field(default_factory=list)  # values that neither passed nor failed
    note: str = ""
    seconds: float = 0.0
    evaluations: int = 0

    @property
    def slack(self) -> Fraction | None:
        """paper / minimum (the factor by which the derived value is larger than needed)."""
        if self.minimum is None:
            return None
        return self.paper / Fraction(self.minimum)


# ------------------------------------------------------------------------------------------
# Exact numbers


def round_sig(q: Fraction, digits: int, up: bool | None = None) -> Fraction:
    """``q > 0`` rounded to ``digits`` significant decimal digits (up, down, or to nearest)."""
    q = Fraction(q)
    e = math.floor(math.log10(q.numerator) - math.log10(q.denominator))
    while Fraction(10) ** e > q:
        e -= 1
    while Fraction(10) ** (e + 1) <= q:
        e += 1
    unit = Fraction(10) ** (e - digits + 1)
    n = q / unit
    if up is None:
        k = math.floor(n + Fraction(1, 2))
    elif up:
        k = math.ceil(n)
    else:
        k = math.floor(n)
    return k * unit


def exact_text(v) -> str:
    """An exact decimal when ``v`` has one (denominator 2^a 5^b), otherwise ``p/q``."""
    v = Fraction(v)
    q = v.denominator
    a = b = 0
    while q % 2 == 0:
        q //= 2
        a += 1
    while q % 5 == 0:
        q //= 5
        b += 1
    if q != 1:
        return f"{v.numerator}/{v.denominator}"
    k = max(a, b)
    n = v * 10**k
    assert n.denominator == 1
    s = str(abs(n.numerator)).rjust(k + 1, "0")
    whole, frac = (s[:-k], s[-k:].rstrip("0")) if k else (s, "")
    return ("-" if v < 0 else "") + whole + (f".{frac}" if frac else "")


def _between(lo, hi) -> Fraction:
    """A short decimal strictly between ``lo < hi`` (near their midpoint)."""
    mid = (Fraction(lo) + Fraction(hi)) / 2
    for digits in range(2, 60):
        r = round_sig(mid, digits)
        if lo < r < hi:
            return r
    return mid


# ------------------------------------------------------------------------------------------
# The constants at one value


def grid_constants(inst: Instance, m: int):
    """The construction on the grid of ``m`` points per axis: centres ``(2i-1)/(2m)``, covering
    radius ``r = sqrt(d)/(2m)`` in place of ``r_g`` (so ``M_g = log(8BP/eps)/(3 r^2)`` and ``M``
    follow from the grid as in A.3); ``P_paper`` stays the instance's."""
    d = inst.d
    K0 = constants(inst)
    r = sympy.sqrt(d) / (2 * sympy.Integer(m))
    centres = [tuple(sympy.Rational(2 * i - 1, 2 * m) for i in idx)
               for idx in itertools.product(range(1, m + 1), repeat=d)]
    return constants_from(inst, centres, r, K0.P_paper, m=m)


def paper_value(inst: Instance, constant: str, prec: int = 256) -> tuple[Fraction, str]:
    """The derived value of ``constant`` at ``inst``: a rational within ``2^-prec`` relative of it
    and its decimal (20 digits)."""
    K = constants(inst)
    if constant == "grid":
        return Fraction(K.m), str(K.m)
    sym = SYM["M"] if constant == "M" else SYM["M_g"]
    ctx = BallContext(prec)
    env: dict = {}
    memo: dict = {}
    with ctx.scope():
        for s, e in K.defs.items():
            env[s] = ctx.from_sympy(e, memo, env)
        v = env[sym]
        lo, hi = ctx.to_fraction_bounds(v)
        return (lo + hi) / 2, v.mid().str(20, radius=False)


def _instance_at(inst: Instance, constant: str, value) -> Instance:
    base = dataclasses.replace(inst, M=None, M_g=None)
    if value is None or constant == "grid":
        return base
    v = sympy.Rational(Fraction(value).numerator, Fraction(value).denominator)
    return dataclasses.replace(base, M=v) if constant == "M" else dataclasses.replace(base, M_g=v)


def _claims_outcome(claims) -> tuple[str, dict]:
    """pass / fail / undecided from the verdicts of the lemma and budget claims."""
    relevant = [c for c in claims if c.scope != Scope.ASSUMPTION]
    refuted = [c for c in relevant if c.verdict == "refuted"]
    if refuted:
        c = refuted[0]
        return FAIL, {"claim": c.id, "statement": c.statement, "lhs": c.lhs, "rhs": c.rhs,
                      "refuted": [r.id for r in refuted]}
    open_ = [c.id for c in relevant if c.verdict != "proved"]
    if open_:
        return UNDECIDED, {"undecided": open_}
    return PASS, {"claims_proved": len(relevant)}


def _prove(inst: Instance, constant: str, value, opts: TightenOptions) -> tuple[str, dict]:
    pou = PouOptions(prec=opts.prec, max_prec=opts.max_prec, points=opts.points, assumptions=False)
    res = run(_instance_at(inst, constant, value), pou)
    return _claims_outcome(res.claims)


def _certify_grid(inst: Instance, m: int, cert: CertifyOptions):
    """:func:`certify_instance` for the grid of ``m`` points per axis (same steps, other centres)."""
    K = grid_constants(inst, m)
    mj = model_to_json(build(K), cert.model_prec)
    ball = BallContext(cert.prec)
    assumptions = [decide(ball, a) for a in measure_assumptions(ball, K)]
    res = certify_model(mj, inst.target_text, inst.d, inst.eps, cert)
    return res, assumptions


def _domain(inst: Instance, constant: str, value, opts: TightenOptions) -> tuple[str, dict]:
    cert = CertifyOptions(prec=opts.prec, max_boxes=opts.max_boxes)
    if constant == "grid" and value is not None:
        res, assumptions = _certify_grid(inst, int(value), cert)
    else:
        _, res = certify_instance(_instance_at(inst, constant, value), cert)
        assumptions = []
    if any(a.verdict == "refuted" for a in assumptions):
        bad = next(a for a in assumptions if a.verdict == "refuted")
        return FAIL, {"claim": bad.id, "statement": bad.statement}
    if res.counterexample is not None:
        return FAIL, {"x": list(res.counterexample["x"]), "error": res.counterexample["error"]}
    if res.verdict == "proved":
        return PASS, {"boxes": len(res.boxes), "max_bound": decimal_up(res.max_bound)}
    if res.verdict == "refuted":  # an assumption on the target failed
        return FAIL, {"note": "an assumption on the target is refuted"}
    return UNDECIDED, {"undecided_boxes": len(res.undecided), "boxes_proved": len(res.boxes)}


def _class(inst: Instance, constant: str, value, opts: TightenOptions) -> tuple[str, dict]:
    from .class_bound import ClassOptions
    from .class_certificate import class_verdict

    base = dataclasses.replace(inst, target="0")
    if constant == "grid" and value is not None:
        K = grid_constants(base, int(value))
    else:
        K = constants(_instance_at(base, constant, value))
    return class_verdict(K, K.inst, ClassOptions(prec=max(opts.prec, 128), max_boxes=opts.max_boxes))


def evaluate(inst: Instance, constant: str, criterion: str, value, opts: TightenOptions) -> Outcome:
    """Evaluate one value (``None``: the derived value itself)."""
    t0 = time.perf_counter()
    try:
        if criterion == "proof":
            status, ev = _prove(inst, constant, value, opts)
        elif criterion == "class":
            status, ev = _class(inst, constant, value, opts)
        else:
            status, ev = _domain(inst, constant, value, opts)
    except (ArithmeticError, ZeroDivisionError) as e:  # an enclosure that cannot be decided
        status, ev = UNDECIDED, {"note": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    return Outcome(value, status, ev, time.perf_counter() - t0)


# ------------------------------------------------------------------------------------------
# The search


def tighten(inst: Instance, constant: str, criterion: str, opts: TightenOptions | None = None,
            progress=None) -> Tightened:
    """The smallest value of ``constant`` that passes ``criterion`` (module docstring).

    ``progress(done, total, label)`` is called after each evaluation (``total`` an estimate).
    """
    opts = opts or TightenOptions()
    if constant not in CONSTANTS:
        raise ValueError(f"unknown constant {constant!r} (use {', '.join(CONSTANTS)})")
    if criterion not in CRITERIA[constant]:
        raise ValueError(f"the criterion {criterion!r} has no meaning for {constant}: the grid is fixed by the "
                         "covering claim E0 and the Hoelder budget E1, so every coarser grid refutes them; use domain")
    t0 = time.perf_counter()
    integer = constant == "grid"
    R = opts.resolution
    paper, paper_text = paper_value(inst, constant)
    count = [0]
    estimate = 1 + opts.scan + 2 * max(1, math.ceil(math.log2(1 / float(R)) + 4))

    def ev(v) -> Outcome:
        out = evaluate(inst, constant, criterion, v, opts)
        count[0] += 1
        if progress is not None:
            progress(count[0], max(estimate, count[0] + 1), f"{constant} {criterion}")
        return out

    res = Tightened(constant, criterion, paper, paper_text, None)
    if opts.max_evaluations < 1:
        res.note = f"stopped after {opts.max_evaluations} evaluations"
        return res
    res.paper_outcome = ev(None)
    if integer:
        first, further = _grid_scan(int(paper), opts.max_scan), (lambda m: m // 2)
    else:
        v0 = round_sig(paper, 6, up=True)
        first = [v0] + [round_sig(v0 / 2**k, 4) for k in range(1, opts.scan + 1)]
        further = lambda v: round_sig(v / 2, 4)  # noqa: E731
    t = find_threshold(ev, first, direction=-1, resolution=R, further=further, integer=integer,
                       midpoint=None if integer else _between, limit=2 if integer else None,
                       max_scan=opts.max_scan, max_evaluations=opts.max_evaluations - 1)
    res.scan, res.flips, res.bisection = t.scan, t.flips, t.later
    res.minimum, res.minimum_outcome = t.best, t.best_outcome
    res.below, res.below_outcome = t.step, t.step_outcome
    res.note = {
        "no-pass": "no value of the scan passes, the rounded derived value included",
        "scan-end": "still passes at the lowest value tried",
        "limit": "the coarsest grid (m = 2) passes",
        "step-undecided": "the value one step below the minimum is undecided (neither certified pass nor fail)",
        "budget": f"stopped after {opts.max_evaluations} evaluations",
    }.get(t.reason, "")
    res.evaluations = 1 + len(t.tried)
    res.undecided = sorted(t.undecided, key=lambda o: o.value, reverse=True)
    res.seconds = time.perf_counter() - t0
    return res


def _grid_scan(v0: int, max_scan: int) -> list[int]:
    """``m_0, m_0 / 2, m_0 / 4, ...`` (integer halvings, each once) down to the coarsest grid, 2."""
    values = [v0]
    k = 1
    while v0 >> k >= 2 and k <= max_scan:
        if (v0 >> k) != values[-1]:
            values.append(v0 >> k)
        k += 1
    if values[-1] > 2:
        values.append(2)
    return values


def tighten_all(inst: Instance, what: list[str], criteria: list[str], opts: TightenOptions | None = None,
                progress=None) -> list[Tightened]:
    """:func:`tighten` for every constant in ``what`` and every criterion of ``criteria`` that
    has a meaning for it."""
    out = []
    for c in what:
        for crit in criteria:
            if crit in CRITERIA[c]:
                out.append(tighten(inst, c, crit, opts, progress))
    return out


def tighten_map(inst: Instance, Mg_values: list, M_values: list, opts: TightenOptions | None = None,
                progress=None) -> list[dict]:
    """The domain criterion on a grid of ``(M_g, M)`` pairs: pass / fail / undecided with evidence."""
    opts = opts or TightenOptions()
    cert = CertifyOptions(prec=opts.prec, max_boxes=opts.max_boxes)
    out = []
    total = len(Mg_values) * len(M_values)
    for i, mg in enumerate(Mg_values):
        for j, m in enumerate(M_values):
            t0 = time.perf_counter()
            q = dataclasses.replace(inst, M_g=sympy.Rational(mg.numerator, mg.denominator),
                                    M=sympy.Rational(m.numerator, m.denominator))
            try:
                _, r = certify_instance(q, cert)
                if r.counterexample is not None:
                    status, ev = FAIL, {"x": list(r.counterexample["x"]), "error": r.counterexample["error"]}
                elif r.verdict == "proved":
                    status, ev = PASS, {"max_bound": decimal_up(r.max_bound)}
                else:
                    status, ev = (FAIL if r.verdict == "refuted" else UNDECIDED), {}
            except (ArithmeticError, ZeroDivisionError) as e:
                status, ev = UNDECIDED, {"note": type(e).__name__}
            out.append({"Mg": exact_text(mg), "M": exact_text(m), "status": status, "evidence": ev,
                        "seconds": round(time.perf_counter() - t0, 3)})
            if progress is not None:
                progress(i * len(M_values) + j + 1, total, "map")
    return out


def consistency(inst: Instance, results: list[Tightened], opts: TightenOptions | None = None) -> list[dict]:
    """For each constant with both criteria: is the proof's minimum at least the domain's?

    The proof's claims imply the domain bound, so a proof minimum below the domain minimum can
    only come from a non-monotone domain criterion or an undecided box certificate; the domain
    criterion is then evaluated at the proof's minimum to say which.  Otherwise the claim that
    refutes the proof one step below its minimum is the one stronger than the network needs.
    """
    opts = opts or TightenOptions()
    by = {(r.constant, r.criterion): r for r in results}
    out = []
    for c in CONSTANTS:
        pr, dm = by.get((c, "proof")), by.get((c, "domain"))
        if pr is None or dm is None or pr.minimum is None or dm.minimum is None:
            continue
        pmin, dmin = Fraction(pr.minimum), Fraction(dm.minimum)
        claim = (pr.below_outcome.evidence.get("claim") if pr.below_outcome is not None else None)
        statement = (pr.below_outcome.evidence.get("statement", "") if pr.below_outcome is not None else "")
        row = {"constant": c, "proof_minimum": pmin, "domain_minimum": dmin, "holds": pmin >= dmin,
               "binding_claim": claim}
        if pmin >= dmin:
            row["explanation"] = (
                f"the proof needs {c} >= {exact_text(pmin)}: one step below, claim {claim} ({statement}) is refuted; "
                f"the network is certified over the whole cube down to {exact_text(dmin)}, so {claim}'s "
                f"bound is stronger than needed by a factor of about {exact_text(round_sig(pmin / dmin, 4))}")
        else:
            o = evaluate(inst, c, "domain", pmin, opts)
            row["domain_at_proof_minimum"] = o.status
            row["explanation"] = {
                PASS: "the domain criterion also passes at the proof's minimum: it is not monotone in "
                      f"{c} there (a pass below a failure)",
                UNDECIDED: "the box certificate is undecided at the proof's minimum: there the proof is "
                           "stronger than the box search",
                FAIL: "the domain criterion fails at a value where every claim is proved: a claim of the chain "
                      "does not imply the next (a bug to report)",
            }[o.status]
        out.append(row)
    return out


def map_values(paper: Fraction, lowest: Fraction | None, steps: int) -> list[Fraction]:
    """``steps`` values from ``paper`` down to ``lowest / 2`` (``paper / 2^(steps-1)`` without a
    ``lowest``), evenly spaced in log scale and rounded to 3 digits (largest first).  Floats only
    place the grid points; every point is an exact rational evaluated on its own."""
    bottom = Fraction(lowest) / 2 if lowest is not None else paper / 2 ** (steps - 1)
    if steps == 1:
        return [round_sig(paper, 3)]
    ratio = (float(paper) / float(bottom)) ** (1 / (steps - 1))
    out = []
    for k in range(steps):
        v = round_sig(Fraction(float(paper) / ratio**k), 3)
        if v not in out:
            out.append(v)
    return out
