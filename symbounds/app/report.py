"""Text and JSON reports of ``symbounds pou``, ``symbounds interp`` and ``symbounds tighten`` runs.

The runs (:mod:`symbounds.papers.shi_liao.run`, :mod:`symbounds.papers.alcalde.run`) return
results with numbers; this module is where they become text.
"""

from __future__ import annotations

import re
import shlex
from fractions import Fraction

import flint

from ..core.claims import Scope, Verdict
from ..core.exact import NumberError, decimal, decimal_down, decimal_up, parse_number
from ..core.version import __version__
from ..papers import shi_liao as sl
from ..papers.alcalde.run import InterpResult, thresholds
from ..papers.alcalde.tighten import fraction_text
from ..papers.shi_liao.run import PouResult
from ..papers.shi_liao.tighten import Outcome, Tightened, exact_text, round_sig

__all__ = ["tau_text", "pou_json", "pou_text", "interp_json", "interp_text", "tighten_json", "tighten_text"]


#: significant digits of numbers in the text reports (``--digits``)
DIGITS = 12

_DECIMAL = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")


def enclosure_text(text: str, digits: int = DIGITS) -> str:
    """A certified number (Arb's ``[m +/- r]``, or a plain decimal that is an exact value) cut to
    ``digits`` significant digits, **outward**: the printed ball contains the one given.  Exact
    rationals ``p/q`` and anything that is not a number are returned unchanged."""
    t = text.strip()
    if not t or "/" in t.replace("+/-", ""):
        return text
    if not t.startswith("["):
        if not _DECIMAL.fullmatch(t):
            return text
        try:
            q = parse_number(t)
        except NumberError:
            return text
        lo, hi = decimal_down(q, digits), decimal_up(q, digits)
        if lo == hi:  # exactly representable in `digits` digits
            return lo
    with flint.ctx.workprec(max(64, 4 * len(t) + 64)):
        try:
            ball = flint.arb(t)  # rounded outward on reading
        except (ValueError, TypeError):
            return text
        return ball.str(digits)  # Arb widens the radius to cover the digits it drops


def approx_text(text: str, digits: int = DIGITS) -> str:
    """An approximate decimal (a ball's midpoint, reported as such) rounded to ``digits``
    significant digits; exact rationals and integers are returned unchanged."""
    t = text.strip()
    if "/" in t or not _DECIMAL.fullmatch(t) or "." not in t and "e" not in t:
        return text
    try:
        q = parse_number(t)
    except NumberError:  # an exponent beyond the bound on a user's numbers (e^2400 ~ 1e1042): Arb reads it
        with flint.ctx.workprec(max(64, 4 * digits + 16)):
            return flint.arb(t).str(digits, radius=False)
    return decimal(q, digits)


def _table(rows: list, align: str, indent: str = "  ") -> list:
    """Rows of cells as lines with aligned columns (``align``: one of ``<``/``>`` per column; a
    left-aligned last column is not padded)."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(align))]
    out = []
    for r in rows:
        cells = [f"{str(c):{a}{w}}" for c, a, w in zip(r, align, widths)]
        if align[-1] == "<":
            cells[-1] = str(r[len(align) - 1])
        out.append((indent + "  ".join(cells)).rstrip())
    return out


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
    if not isinstance(inst, sl.Instance):  # a manifold
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
    lines += _table([(name, approx_text(v, digits)) for name, v in res.constants.items()], "<<")
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
        lines += _table(rows, "<><<")
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


def interp_json(res: InterpResult) -> dict:
    sz, con = res.sizes, res.construction
    out = {
        "symbounds": __version__,
        "command": "interp",
        "dataset": res.dataset.summary(),
        "attention": res.options.attention,
        "variant": con.variant,
        "blocks": sz["blocks"],
        "blocks_formula": sz["blocks_formula"],
        "width": sz["width"],
        "params_dense": sz["params_dense"],
        "params_nonzero": sz["params_nonzero"],
        "params_bound": sz["params_bound"],
        "max_numerator_bits": sz["max_numerator_bits"],
        "max_denominator_bits": sz["max_denominator_bits"],
        "resnet_blocks": sz["resnet_blocks"],
        "theta_norm_sq": str(res.theta_norm_sq),
        "theta_norm_sq_decimal": decimal(res.theta_norm_sq),
        "regularisation": thresholds(res),
        "claims": [c.as_json() for c in res.claims],
        "exact": res.exact,
        "verdict": str(res.verdict),
        "timings": {k: round(v, 3) for k, v in res.timings.items()},
    }
    if res.options.attention == "softmax":
        out["tau"] = str(res.options.tau)
        out["tau_star"] = None  # interp does not search tau*: `symbounds tighten --what tau` does (docs/alcalde.md)
        out["prec"] = res.prec
        out["final_ball_distance"] = res.extra.get("final_ball_distance")
    return out


def interp_text(res: InterpResult, digits: int = DIGITS) -> str:
    """The text report; numbers cut to ``digits`` significant digits (enclosures outward, upper
    bounds rounded up)."""
    def enc(t):
        return enclosure_text(t, digits)

    ds, sz, con = res.dataset, res.sizes, res.construction
    f = sz["blocks_formula"]
    att = res.options.attention
    lines = [
        "symbounds interp: Alcalde, Fantuzzi & Zuazua, exact sequence interpolation",
        f"dataset   N={ds.N}  d={ds.d}  n_j in [{min(ds.n)}, {max(ds.n)}]  M=sum m_j={ds.M}",
        f"model     {att}" + (f" (tau = {res.options.tau})" if att == "softmax" else f", {con.variant}")
        + f"  blocks L={sz['blocks']} = {f['construction_text']} (K={f['K']})"
        f"  paper {f['paper_text']} = {f['paper']}  token-wise ResNet: {sz['resnet_blocks']}",
        f"          width {sz['width']}  parameters {sz['params_dense']} dense, {sz['params_nonzero']} nonzero"
        f" (the non-zero count's guide (10d+8)L = {sz['params_bound']}; not a claim)"
        f"  largest bits: numerator {sz['max_numerator_bits']},"
        f" denominator {sz['max_denominator_bits']}",
        f"          ||theta*||^2 = {decimal(res.theta_norm_sq, digits)} (exact rational, {res.theta_norm_sq.denominator.bit_length()}"
        "-bit denominator)",
        "",
        "claims" + (f" (Arb balls up to {res.prec} bits + exact rationals)" if att == "softmax" else " (exact rationals)"),
    ]
    for c in res.claims:
        where = c.context if c.prec is None else f"{c.context}@{c.prec}"
        lines.append(f"  {c.id:<3} {c.verdict:<9} {where:<14} {c.statement}")
        if c.lhs or c.rhs:
            lines.append(f"      lhs {enc(c.lhs)}   rhs {enc(c.rhs)}")
        if c.note:
            lines.append(f"      {c.note}")
    lines += ["", "regularised training: every minimiser of loss + eps ||theta||^2 has loss <= eps ||theta*||^2"]
    lines += _table([(f"eps = {t['eps']}", f"loss <= {decimal_up(parse_number(t['loss_bound']), digits)}")
                     for t in thresholds(res)], "<<")
    timing = "  ".join(f"{k} {v:.2f} s" for k, v in res.timings.items())
    lines += ["", f"timings: {timing}",
              f"verdict: {res.verdict} (exact interpolation of every sequence: {'yes' if res.exact else 'no'})"]
    return "\n".join(lines)


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
