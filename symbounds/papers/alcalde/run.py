"""One run of exact sequence interpolation [AFZ25] (``symbounds interp``): build, prove, report.

``run(dataset, options)`` builds the Transformer (docs/alcalde.md, The construction) for the dataset, proves that every
sequence's output set equals its target set (hardmax: exact rationals, stage by stage; softmax:
Arb balls plus an exact piecewise-linear argument, see :mod:`symbounds.papers.alcalde.softmax`),
and reports the sizes against the paper's formulas, ``||theta*||^2`` and the regularised-training
bounds ``loss <= eps ||theta*||^2``.  ``as_json`` and ``render_text`` present the result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

from ...core.claims import ClaimResult, HasVerdict
from ...core.exact import decimal
from . import construction as al
from .dataset import Dataset

__all__ = ["InterpOptions", "InterpResult", "run", "EPS_DEFAULT"]

#: The authors' weight-decay values (docs/alcalde.md, Regularised training), as exact rationals.
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
class InterpResult(HasVerdict):
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
    def model(self):
        return self.construction.model

    def _title(self) -> str:
        ds = self.dataset
        return (f"[AFZ25] {self.options.attention}: N = {ds.N} sequences in R^{ds.d}, {self.sizes.get('blocks')} "
                f"blocks, width {self.sizes.get('width')}")

    def __repr__(self) -> str:
        """The verdict and its counts, the dataset and the network's size, in one line."""
        from ...core.display import short, verdict_counts

        return short(f"InterpResult({self.verdict}: {verdict_counts(self.claims)}; exact interpolation: "
                     f"{'yes' if self.exact else 'no'}; {self._title()})")

    def _repr_html_(self) -> str:
        from ...core.display import claims_html

        return claims_html(self.claims, f"{self._title()}: {self.verdict}")

    def _repr_latex_(self) -> str:
        from ...core.display import claims_latex

        return claims_latex(self.claims, f"{self._title()}: {self.verdict}")


def run(ds: Dataset, opts: InterpOptions | None = None, progress=None) -> InterpResult:
    """Build and prove.  ``progress(label)`` is called at each step (softmax: each ball step)."""
    opts = opts or InterpOptions()
    t0 = time.perf_counter()
    if opts.attention == "hardmax":
        con = al.build(ds, opts.variant, opts.seed)
    else:
        from .softmax import build_softmax

        con = build_softmax(ds, opts.tau, opts.seed)
    t1 = time.perf_counter()
    extra: dict = {}
    prec = None
    if opts.attention == "hardmax":
        claims, exact = al.verify(con, evaluator=opts.evaluator)
    else:
        from .softmax import certify_softmax

        claims, exact, info = certify_softmax(con, opts.prec, opts.max_prec, progress=progress)
        prec = info["prec"]
        extra.update(info)
    t2 = time.perf_counter()
    res = InterpResult(ds, opts, con, claims, exact, al.sizes(con), al.theta_norm_sq(con.model), prec, extra)
    res.timings = {"build": t1 - t0, "prove": t2 - t1}
    return res


def thresholds(res: InterpResult) -> list:
    """``loss(theta_eps) <= eps ||theta*||^2`` for every minimiser of ``loss + eps ||theta||^2``."""
    return [{"eps": str(e), "loss_bound": str(e * res.theta_norm_sq), "loss_bound_decimal": decimal(e * res.theta_norm_sq)}
            for e in res.options.eps]


