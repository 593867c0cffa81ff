"""The text and JSON reports of one ``symbounds pou`` run of [SL26]'s construction
(:class:`~.run.PouResult`): constants, claims, sample points, the float64 and mpmath comparisons.
Numbers are cut with :mod:`symbounds.core.text`; the command line prints what these return."""

from __future__ import annotations

from fractions import Fraction

from ...core.claims import Scope, Verdict
from ...core.exact import decimal_up
from ...core.text import DIGITS, approx_text, enclosure_text, table_lines
from ...core.version import __version__
from .constants import Instance
from .run import PouResult

__all__ = ["pou_json", "pou_text", "COUNT_CONSTANTS"]


def _short(text: str, n: int = 100) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _assumptions(res: PouResult) -> tuple[str, list[str]]:
    """How the assumptions on g stand: "grid evidence" (checked on a finite grid only, not
    violated there), "refuted", "undecided" or "not checked"; and their claim ids."""
    mine = [c for c in res.claims if c.scope == Scope.ASSUMPTION]
    ids = [c.id for c in mine]
    if not mine:
        return "not checked", ids
    if any(c.verdict == Verdict.REFUTED for c in mine):
        return "refuted", ids
    if any(c.verdict == Verdict.UNDECIDED for c in mine):
        return "undecided", ids
    return "grid evidence", ids


#: constants of ``pou``'s report that are counts (JSON integers; every other constant is a string)
COUNT_CONSTANTS = frozenset({"m", "P", "D", "d_ff", "heads_1", "heads_2", "params_dense", "params_nonzero",
                             "d_intrinsic", "ambient"})


def pou_json(res: PouResult) -> dict:
    out = {
        "symbounds": __version__,
        "command": "pou",
        "instance": res.instance.as_json(),
        "constants": {k: int(v) if k in COUNT_CONSTANTS else v for k, v in res.constants.items()},
        "claims": [c.as_json() for c in res.claims],
        "verdict": str(res.verdict),
        # a proof of the theorem's conclusion rests on the assumptions on g, which are only
        # checked on a finite grid: the conclusion can fail if they fail between grid points
        "assumptions": _assumptions(res)[0],
        "prec": res.prec,
        "samples": res.samples,
        "max_error": res.max_error,
        "points": res.points,
        "timings": {k: round(v, 3) for k, v in res.timings.items()},
    }
    if res.whole:
        whole = {k: v for k, v in res.whole.items() if k not in ("seconds", "max_bound_upper")}
        if "max_bound_upper" in res.whole:  # a bound is a decimal string, rounded up
            whole["max_bound"] = res.whole["max_bound_upper"]
        out["whole_manifold"] = whole
    for name, ev in res.evidence.items():
        claims_cmp, quantities = res.comparisons[name]
        out[{"fp": "float64", "mp": "mpmath"}[name]] = {
            "claims": [c.as_json() for c in claims_cmp],
            "quantities": [q.as_json() for q in quantities],
        }
    return out


def pou_text(res: PouResult, digits: int = DIGITS) -> str:
    """The text report; numbers cut to ``digits`` significant digits (enclosures outward)."""
    def enc(t):
        return enclosure_text(t, digits)

    inst = res.instance
    if not isinstance(inst, Instance):  # a manifold
        head = f"instance  {inst.label()}  target: {_short(inst.inst.target_text)}"
        inst = inst.inst
    else:
        head = None
    lines = [
        "symbounds pou: Shi & Liao, softmax partition of unity (two-block Transformer)",
        head or f"instance  d={inst.d}  alpha={inst.alpha}  C_H={inst.C_H}  B={inst.B}  eps={inst.eps}"
        f"  target: {inst.target_text}"
        + (f"  M={inst.M} (user)" if inst.M is not None else "")
        + (f"  M_g={inst.M_g} (user)" if inst.M_g is not None else ""),
        "",
        "constants",
    ]
    lines += table_lines([(name, approx_text(v, digits)) for name, v in res.constants.items()], "<<")
    lines += ["", f"claims (Arb balls; decided at up to {res.prec} bits; {res.samples} sample points)"]
    for c in res.claims:
        where = c.context if c.prec is None else f"{c.context}@{c.prec}"
        lines.append(f"  {c.id:<5} {c.verdict:<9} {where:<10} {c.statement}")
        if c.lhs or c.rhs:
            lines.append(f"        lhs {enc(c.lhs)}   rhs {enc(c.rhs)}")
        if c.note and c.verdict == Verdict.UNDECIDED:  # why it stayed undecided
            lines.append(f"        note: {c.note}")
    lines += ["", f"max |T(x) - g(x)| over the sample points: {enc(res.max_error)}"]
    if res.whole:
        w = res.whole
        lines.append(f"over the whole manifold ({w['boxes']} boxes): {w['status']}, largest box bound "
                     f"{decimal_up(Fraction(w['max_bound']), 6)}" + (f", counterexample at angles/pi {w['counterexample_angles_over_pi']}"
                                                if w["counterexample_angles_over_pi"] else ""))
    for p in res.points:
        lines.append(f"  at x = ({', '.join(p['x'])}):  T = {enc(p['T'])}  g = {enc(p['g'])}  "
                     f"|T-g| = {enc(p['error'])}")
    for name in res.comparisons:
        claims_cmp, quantities = res.comparisons[name]
        label = {"fp": "float64", "mp": f"mpmath ({res.prec} bits)"}[name]
        lines += ["", f"{label} beside the certified values"]
        shown = [q for q in quantities if not q.name.endswith((" lhs", " rhs")) or q.note or q.name == "L7 lhs"]
        rows = [("quantity", "digits", "certified", label)]
        for q in shown:
            dg = "-" if q.digits is None else str(q.digits)
            note = f"   <- {q.note}" if q.note else ""
            rows.append((q.name, dg, enc(q.certified), f"{q.other}{note}"))
        lines += table_lines(rows, "<><<")
        bad = [c for c in claims_cmp if c.status not in ("agrees",)]
        lines.append(f"  claims: {sum(c.status == 'agrees' for c in claims_cmp)} of {len(claims_cmp)} decided "
                     f"the same way for the same reason")
        for c in bad:
            lines.append(f"    {c.id:<5} {c.status:<9} rigorous: {c.rigorous}, {label}: {c.other}"
                         + (f" ({c.note})" if c.note else ""))
    n_proved = sum(c.verdict == "proved" for c in res.claims)
    status, ids = _assumptions(res)
    if status == "grid evidence":
        why = f"assumptions {', '.join(ids)} on g: grid evidence only"
    else:
        why = f"assumptions on g: {status}" + (f" ({', '.join(ids)})" if ids else "")
    lines += ["", f"verdict: {res.verdict} ({n_proved} of {len(res.claims)} claims proved; {why})"]
    return "\n".join(lines)
