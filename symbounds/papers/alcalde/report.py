"""The text and JSON reports of one ``symbounds interp`` run of [AFZ25]'s construction
(:class:`~.run.InterpResult`): sizes against the paper's block formulas, the stage claims and the
regularised-training bounds.  Numbers are cut with :mod:`symbounds.core.text`; the command line
prints what these return."""

from __future__ import annotations

from ...core.exact import decimal, decimal_up, parse_number
from ...core.text import DIGITS, enclosure_text, table_lines
from ...core.version import __version__
from .run import InterpResult, thresholds

__all__ = ["interp_json", "interp_text"]


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
    lines += table_lines([(f"eps = {t['eps']}", f"loss <= {decimal_up(parse_number(t['loss_bound']), digits)}")
                     for t in thresholds(res)], "<<")
    timing = "  ".join(f"{k} {v:.2f} s" for k, v in res.timings.items())
    lines += ["", f"timings: {timing}",
              f"verdict: {res.verdict} (exact interpolation of every sequence: {'yes' if res.exact else 'no'})"]
    return "\n".join(lines)
