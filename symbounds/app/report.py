"""Text and JSON reports of ``symbounds pou`` and ``symbounds interp`` runs.

The runs (:mod:`symbounds.papers.shi_liao.run`, :mod:`symbounds.papers.alcalde.run`) return
results with numbers; this module is where they become text.
"""

from __future__ import annotations

from fractions import Fraction

from ..core.claims import Scope, Verdict
from ..core.exact import decimal, decimal_up
from ..core.version import __version__
from ..papers import shi_liao as sl
from ..papers.alcalde.run import InterpResult, thresholds
from ..papers.shi_liao.run import PouResult

__all__ = ["pou_json", "pou_text", "interp_json", "interp_text"]


def _short(text: str, n: int = 100) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _verdict_word(code: int) -> str:
    return {0: "proved", 1: "refuted", 3: "undecided"}[code]


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


def pou_json(res: PouResult) -> dict:
    out = {
        "symbounds": __version__,
        "command": "pou",
        "instance": res.instance.as_json(),
        "constants": res.constants,
        "claims": [c.as_json() for c in res.claims],
        "verdict": _verdict_word(res.exit_code),
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
        out["whole_manifold"] = {k: v for k, v in res.whole.items() if k != "seconds"}
    for name, ev in res.evidence.items():
        claims_cmp, quantities = res.comparisons[name]
        out[{"fp": "float64", "mp": "mpmath"}[name]] = {
            "claims": [c.as_json() for c in claims_cmp],
            "quantities": [q.as_json() for q in quantities],
        }
    return out


def pou_text(res: PouResult) -> str:
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
    for name, v in res.constants.items():
        lines.append(f"  {name:<24} {v}")
    lines += ["", f"claims (Arb balls; decided at up to {res.prec} bits; {res.samples} sample points)"]
    for c in res.claims:
        where = c.context if c.prec is None else f"{c.context}@{c.prec}"
        lines.append(f"  {c.id:<5} {c.verdict:<9} {where:<10} {c.statement}")
        if c.lhs or c.rhs:
            lines.append(f"        lhs {c.lhs}   rhs {c.rhs}")
        if c.note and c.verdict == Verdict.UNDECIDED:  # why it stayed undecided
            lines.append(f"        note: {c.note}")
    lines += ["", f"max |T(x) - g(x)| over the sample points: {res.max_error}"]
    if res.whole:
        w = res.whole
        lines.append(f"over the whole manifold ({w['boxes']} boxes): {w['status']}, largest box bound "
                     f"{decimal_up(Fraction(w['max_bound']), 6)}" + (f", counterexample at angles/pi {w['counterexample_angles_over_pi']}"
                                                if w["counterexample_angles_over_pi"] else ""))
    for p in res.points:
        lines.append(f"  at x = ({', '.join(p['x'])}):  T = {p['T']}  g = {p['g']}  |T-g| = {p['error']}")
    for name in res.comparisons:
        claims_cmp, quantities = res.comparisons[name]
        label = {"fp": "float64", "mp": f"mpmath ({res.prec} bits)"}[name]
        lines += ["", f"{label} beside the certified values"]
        lines.append(f"  {'quantity':<22} {'digits':>6}  {'certified':<40} {label}")
        shown = [q for q in quantities if not q.name.endswith((" lhs", " rhs")) or q.note or q.name == "L7 lhs"]
        for q in shown:
            dg = "-" if q.digits is None else str(q.digits)
            note = f"   <- {q.note}" if q.note else ""
            lines.append(f"  {q.name:<22} {dg:>6}  {q.certified:<40} {q.other}{note}")
        bad = [c for c in claims_cmp if c.status not in ("agrees",)]
        lines.append(f"  claims: {sum(c.status == 'agrees' for c in claims_cmp)} of {len(claims_cmp)} decided "
                     f"the same way for the same reason")
        for c in bad:
            lines.append(f"    {c.id:<5} {c.status:<9} rigorous: {c.rigorous}, {label}: {c.other}"
                         + (f" ({c.note})" if c.note else ""))
    code = res.exit_code
    n_proved = sum(c.verdict == "proved" for c in res.claims)
    status, ids = _assumptions(res)
    if status == "grid evidence":
        why = f"assumptions {', '.join(ids)} on g: grid evidence only"
    else:
        why = f"assumptions on g: {status}" + (f" ({', '.join(ids)})" if ids else "")
    lines += ["", f"verdict: {_verdict_word(code)} ({n_proved} of {len(res.claims)} claims proved; {why})"]
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
        "verdict": _verdict_word(res.exit_code),
        "timings": {k: round(v, 3) for k, v in res.timings.items()},
    }
    if res.options.attention == "softmax":
        out["tau"] = str(res.options.tau)
        out["tau_star"] = None  # no tau* is certified; the proof holds at the tau used
        out["prec"] = res.prec
        out["final_ball_distance"] = res.extra.get("final_ball_distance")
    return out


def interp_text(res: InterpResult) -> str:
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
        f" (bound (10d+8)L = {sz['params_bound']})  largest bits: numerator {sz['max_numerator_bits']},"
        f" denominator {sz['max_denominator_bits']}",
        f"          ||theta*||^2 = {decimal(res.theta_norm_sq)} (exact rational, {res.theta_norm_sq.denominator.bit_length()}"
        "-bit denominator)",
        "",
        "claims" + (f" (Arb balls up to {res.prec} bits + exact rationals)" if att == "softmax" else " (exact rationals)"),
    ]
    for c in res.claims:
        where = c.context if c.prec is None else f"{c.context}@{c.prec}"
        lines.append(f"  {c.id:<3} {c.verdict:<9} {where:<14} {c.statement}")
        if c.lhs or c.rhs:
            lines.append(f"      lhs {c.lhs}   rhs {c.rhs}")
        if c.note:
            lines.append(f"      {c.note}")
    lines += ["", "regularised training: every minimiser of loss + eps ||theta||^2 has loss <= eps ||theta*||^2"]
    for t in thresholds(res):
        lines.append(f"  eps = {t['eps']:<7} loss <= {t['loss_bound_decimal']}")
    timing = "  ".join(f"{k} {v:.2f} s" for k, v in res.timings.items())
    code = res.exit_code
    lines += ["", f"timings: {timing}",
              f"verdict: {_verdict_word(code)} (exact interpolation of every sequence: {'yes' if res.exact else 'no'})"]
    return "\n".join(lines)
