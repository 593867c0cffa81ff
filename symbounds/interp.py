"""One run of exact sequence interpolation [AFZ25] (``symbounds interp``): build, prove, report.

``run(dataset, options)`` builds the Transformer of SPEC B.5 for the dataset, proves that every
sequence's output set equals its target set (hardmax: exact rationals, stage by stage; softmax:
Arb balls plus an exact piecewise-linear argument, see :mod:`symbounds.papers.alcalde_softmax`),
and reports the sizes against the paper's formulas, ``||theta*||^2`` and the regularised-training
bounds ``loss <= eps ||theta*||^2``.  ``as_json`` and ``render_text`` present the result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

import flint

from . import __version__
from .papers import alcalde as al
from .papers.alcalde_data import Dataset
from .verify import ClaimResult, exit_code

__all__ = ["InterpOptions", "InterpResult", "run", "as_json", "render_text", "EPS_DEFAULT"]

#: The authors' weight-decay values (SPEC B.4), as exact rationals.
EPS_DEFAULT = (Fraction(1, 10), Fraction(1, 100), Fraction(1, 1000))


@dataclass
class InterpOptions:
    attention: str = "hardmax"  # or "softmax"
    variant: str = "compressed"  # hardmax only: "plain" (K + 2M blocks) or "compressed" (K + M + ceil(M/4))
    tau: Fraction = Fraction(1, 64)  # softmax temperature
    seed: int = 0  # seeds the random directions of the construction
    prec: int = 256  # softmax: starting Arb precision (bits)
    max_prec: int = 4096
    evaluator: str = "fast"  # hardmax: "fast" or "generic" (transformer.forward, O(n^2) per layer)
    eps: tuple = EPS_DEFAULT

    def __post_init__(self):
        if self.attention not in ("hardmax", "softmax"):
            raise ValueError(f"unknown attention {self.attention!r} (use hardmax or softmax)")
        if self.variant not in ("plain", "compressed"):
            raise ValueError(f"unknown variant {self.variant!r} (use plain or compressed)")
        self.tau = Fraction(self.tau)
        if self.tau <= 0:
            raise ValueError("--tau must be positive")


@dataclass
class InterpResult:
    dataset: Dataset
    options: InterpOptions
    construction: object
    claims: list[ClaimResult]
    exact: bool
    sizes: dict
    theta_norm_sq: Fraction
    prec: int | None = None
    extra: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return exit_code(self.claims)

    @property
    def model(self):
        return self.construction.model


def run(ds: Dataset, opts: InterpOptions | None = None) -> InterpResult:
    opts = opts or InterpOptions()
    t0 = time.perf_counter()
    if opts.attention == "hardmax":
        con = al.build(ds, opts.variant, opts.seed)
    else:
        from .papers.alcalde_softmax import build_softmax

        con = build_softmax(ds, opts.tau, opts.seed)
    t1 = time.perf_counter()
    extra: dict = {}
    prec = None
    if opts.attention == "hardmax":
        claims, exact = al.verify(con, evaluator=opts.evaluator)
    else:
        from .papers.alcalde_softmax import certify_softmax

        claims, exact, info = certify_softmax(con, opts.prec, opts.max_prec)
        prec = info["prec"]
        extra.update(info)
    t2 = time.perf_counter()
    res = InterpResult(ds, opts, con, claims, exact, al.sizes(con), al.theta_norm_sq(con.model), prec, extra)
    res.timings = {"build": t1 - t0, "prove": t2 - t1}
    return res


def _dec(q: Fraction, digits: int = 12) -> str:
    """A decimal rendering of an exact rational (for reading; the exact value is reported beside it)."""
    old = flint.ctx.prec
    try:
        flint.ctx.prec = 128
        return flint.arb(flint.fmpq(q.numerator, q.denominator)).str(digits, radius=False)
    finally:
        flint.ctx.prec = old


def _verdict_word(code: int) -> str:
    return {0: "proved", 1: "refuted", 3: "undecided"}[code]


def thresholds(res: InterpResult) -> list:
    """``loss(theta_eps) <= eps ||theta*||^2`` for every minimiser of ``loss + eps ||theta||^2``."""
    return [{"eps": str(e), "loss_bound": str(e * res.theta_norm_sq), "loss_bound_decimal": _dec(e * res.theta_norm_sq)}
            for e in res.options.eps]


def as_json(res: InterpResult) -> dict:
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
        "theta_norm_sq_decimal": _dec(res.theta_norm_sq),
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


def render_text(res: InterpResult) -> str:
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
        f"          ||theta*||^2 = {_dec(res.theta_norm_sq)} (exact rational, {res.theta_norm_sq.denominator.bit_length()}"
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
