"""Text and JSON reports of ``symbounds pou``, ``symbounds interp`` and ``symbounds tighten`` runs.

The runs (:mod:`symbounds.papers.shi_liao.run`, :mod:`symbounds.papers.alcalde.run`) return
results with numbers.  The ``pou`` and ``interp`` reports are their papers' own
(:mod:`symbounds.papers.shi_liao.report`, :mod:`symbounds.papers.alcalde.report`), with the
number formatting of :mod:`symbounds.core.text`; the ``tighten`` reports are here.
"""

from __future__ import annotations

import shlex

from ..core.exact import decimal
from ..core.text import DIGITS, approx_text, enclosure_text, table_lines
from ..core.version import __version__
from ..papers.alcalde.report import interp_json, interp_text
from ..papers.alcalde.tighten import fraction_text
from ..papers.shi_liao.report import pou_json, pou_text
from ..papers.shi_liao.tighten import Outcome, Tightened, exact_text, round_sig

__all__ = ["tau_text", "pou_json", "pou_text", "interp_json", "interp_text", "tighten_json", "tighten_text",
           "DIGITS", "approx_text", "enclosure_text"]

#: the aligned table of the text reports (:func:`symbounds.core.text.table_lines`)
_table = table_lines


# ------------------------------------------------------------------------------------------
# symbounds tighten


def _value_text(v) -> str | None:
    return None if v is None else exact_text(v)


def _instance_flags(inst) -> str:
    flags = f"--d {inst.d} --alpha {inst.alpha} --holder {inst.C_H} --bound {inst.B} --eps {inst.eps}"
    if inst.target is not None:
        flags += f" --target {shlex.quote(inst.target)}"
    return flags


def _recheck(inst, r: Tightened, v) -> str | None:
    """The command that re-checks ``v`` by itself (None for the grid, which has no flag)."""
    if v is None or r.constant == "grid":
        return None
    flag = {"M": "--M", "Mg": "--Mg"}[r.constant]
    if r.criterion == "class":
        flags = f"--d {inst.d} --alpha {inst.alpha} --holder {inst.C_H} --bound {inst.B} --eps {inst.eps}"
        return f"symbounds certify --holder-class {flags} {flag} {exact_text(v)}"
    cmd = "certify" if r.criterion == "domain" else "pou"
    return f"symbounds {cmd} {_instance_flags(inst)} {flag} {exact_text(v)}"


def _outcome_json(o: Outcome | None) -> dict | None:
    if o is None:
        return None
    return {"value": _value_text(o.value) if o.value is not None else "paper", "status": o.status,
            "evidence": o.evidence, "seconds": round(o.seconds, 3)}


def _slack_text(r: Tightened) -> str | None:
    s = r.slack
    if s is None:
        return None
    return exact_text(s) if r.constant == "grid" else exact_text(round_sig(s, 6))


def tighten_json(inst, results: list[Tightened], checks: list[dict], resolution, grid_map: dict | None = None) -> dict:
    out = {
        "symbounds": __version__,
        "command": "tighten",
        "instance": inst.as_json(),
        "resolution": exact_text(resolution),
        "results": [],
        "consistency": [],
    }
    for r in results:
        entry = {
            "constant": r.constant,
            "criterion": r.criterion,
            "paper": r.paper_text,
            "paper_status": r.paper_outcome.status if r.paper_outcome else None,
            "minimum": _value_text(r.minimum),
            "below": _value_text(r.below),
            "slack": _slack_text(r),
            "minimum_evidence": r.minimum_outcome.evidence if r.minimum_outcome else None,
            "below_status": r.below_outcome.status if r.below_outcome else None,
            "below_evidence": r.below_outcome.evidence if r.below_outcome else None,
            "recheck_minimum": _recheck(inst, r, r.minimum),
            "recheck_below": _recheck(inst, r, r.below),
            "scan": [{"value": _value_text(o.value), "status": o.status} for o in r.scan],
            "bisection": [{"value": _value_text(o.value), "status": o.status} for o in r.bisection],
            "flips": [{"fails": _value_text(a.value), "passes": _value_text(b.value)} for a, b in r.flips],
            "undecided": [_outcome_json(o) for o in r.undecided],
            "evaluations": r.evaluations,
            "seconds": round(r.seconds, 3),
        }
        if r.constant != "grid":
            entry["held"] = ("M_g as derived" if r.constant == "M"
                             else "M derived from the given M_g through its formula")
        else:
            entry["held"] = "M_g and M derived from the grid (covering radius sqrt(d)/(2m))"
        if r.note:
            entry["note"] = r.note
        out["results"].append(entry)
    for c in checks:
        out["consistency"].append({k: (exact_text(v) if k.endswith("minimum") else v) for k, v in c.items()})
    if grid_map is not None:
        out["map"] = grid_map
    return out


def tighten_text(inst, results: list[Tightened], checks: list[dict], resolution, grid_map: dict | None = None) -> str:
    lines = [
        "symbounds tighten: the smallest constants of Shi & Liao's construction that still certify",
        f"instance  d={inst.d}  alpha={inst.alpha}  C_H={inst.C_H}  B={inst.B}  eps={inst.eps}"
        f"  target: {inst.target_text}   resolution {exact_text(resolution)}",
        "",
    ]
    table = [("constant", "criterion", "paper", "minimum", "below", "slack", "evidence below")]
    extra = []
    for r in results:
        paper = r.paper_text if r.constant == "grid" else f"{float(r.paper):.6g}"
        mn = "-" if r.minimum is None else exact_text(r.minimum)
        bl = "-" if r.below is None else exact_text(r.below)
        sl_ = _slack_text(r) or "-"
        ev = "-"
        if r.below_outcome is not None:
            e = r.below_outcome.evidence
            if r.below_outcome.status == "undecided":
                ev = "undecided"
            elif "target" in e:  # the class criterion: the worst target at a point
                ev = f"|T - g0| {e['error']} at x = ({', '.join(e['x'])}), g0 = {e['target']}"
            elif "x" in e:
                ev = f"|T - g| = {e['error']} at x = ({', '.join(e['x'])})"
            elif "claim" in e:
                ev = f"{e['claim']} refuted: lhs {e.get('lhs', '')} > rhs {e.get('rhs', '')}"
        table.append((r.constant, r.criterion, paper, mn, bl, sl_, ev))
        more = []
        if r.paper_outcome is not None and r.paper_outcome.status != "pass":
            more.append(f"the derived value itself: {r.paper_outcome.status}")
        more += _search_remarks(r, lambda o: exact_text(o.value), lambda o: "")
        extra.append(more)
    rendered = _table(table, "<<>>>><")
    lines.append(rendered[0])
    for row, more in zip(rendered[1:], extra):
        lines.append(row)
        lines += [f"           {m}" for m in more]
    if checks:
        lines += ["", "proof against domain"]
        for c in checks:
            lines.append(f"  {c['constant']}: {c['explanation']}")
    recheck = [(r, _recheck(inst, r, r.minimum), _recheck(inst, r, r.below)) for r in results]
    recheck = [t for t in recheck if t[1]]
    if recheck:
        lines += ["", "re-check"]
        for r, a, b in recheck:
            lines.append(f"  {a}   (passes)")
            if b:
                lines.append(f"  {b}   (fails)")
    if grid_map is not None:
        lines += ["", "map of the domain criterion (rows M_g, columns M; + pass, x fail, ? undecided)"]
        Ms = grid_map["M_values"]
        head = "M_g \\ M"
        mark = {"pass": "+", "fail": "x", "undecided": "?"}
        cells = {(c["Mg"], c["M"]): mark[c["status"]] for c in grid_map["cells"]}
        grid = [(head, *Ms)] + [(mg, *(cells[(mg, m)] for m in Ms)) for mg in grid_map["Mg_values"]]
        lines += _table(grid, ">" * (len(Ms) + 1))
    return "\n".join(lines)


def _search_remarks(res, show, detail) -> list[str]:
    """What a minimum/maximum search met besides its answer: non-monotone flips (a failure with a
    pass beyond it), undecided values (never counted as a pass), and its note."""
    out = [f"non-monotone: fails at {show(a)}, passes at {show(b)}" for a, b in res.flips]
    out += [f"undecided at {show(o)}{detail(o)}" for o in res.undecided]
    return out + ([res.note] if res.note else [])


def tau_text(ds, res, opts, source: str) -> str:
    """``symbounds tighten --what tau`` as text (the search of :mod:`symbounds.papers.alcalde.tighten`)."""
    s = ds.summary()
    lines = [
        "symbounds tighten: the largest temperature of the softmax interpolation [AFZ25] that still certifies",
        f"dataset {source}: N={s['N']} d={s['d']} M={ds.M}  seed {opts.seed}  resolution "
        f"{fraction_text(opts.resolution)}",
        "",
        f"  tau used by the construction   {fraction_text(res.construction_tau):>14}   "
        f"{res.construction_outcome.status if res.construction_outcome else '-'}",
    ]
    if res.tau_star is None:
        lines.append("  tau*                           -   (no certified temperature)")
    else:
        lines.append(f"  tau* (X1 and I1 proved)        {decimal(res.tau_star, 10):>14}   exact {fraction_text(res.tau_star)}")
        lines.append(f"  slack tau* / tau_construction  {decimal(res.slack, 6):>14}")
    if res.above_outcome is not None:
        o = res.above_outcome
        what = {"fail": "refuted", "undecided": "UNDECIDED"}.get(o.status, o.status)
        lines.append(f"  step above, tau* (1 + R)       {decimal(o.tau, 10):>14}   {what}: X1 {o.x1}, I1 {o.i1}")
        if o.note:
            lines.append(f"      {o.note}")
    lines += [f"  {m}" for m in _search_remarks(res, lambda o: decimal(o.tau, 10), lambda o: f" (X1 {o.x1}, I1 {o.i1})")]
    lines.append(f"  {res.evaluations} certificates, {res.seconds:.1f} s")
    lines.append("verdict: " + ("tight (tau* certified, the step above refuted)" if res.tight else "not tight"))
    return "\n".join(lines)
