"""Regularised (Tikhonov) training of [AFZ25], the certified part: the teacher, its exact
interpolation, the threshold ``eps ||theta*||^2`` and the certification of a trained block.

If some ``theta*`` interpolates exactly, ``loss(theta*) = 0``, then every minimiser ``theta_eps`` of

    J_eps(theta) = (1/N) sum_j d_H(T_theta(X^j), Y^j)^2 + eps ||theta||^2

satisfies ``loss(theta_eps) <= J_eps(theta_eps) <= J_eps(theta*) = eps ||theta*||^2`` and also
``||theta_eps||^2 <= ||theta*||^2`` (docs/alcalde.md, Regularised training).  With one target per
sequence, ``d_H(T(X), {y}) = max_i ||T_i(X) - y||``.

**The experiment of [AFZ25]** (their Fig. 1): ``N = 10`` sequences of ``n = 100`` tokens in
``d = 16`` with entries uniform on ``[0, 1]``; the target of sequence ``j`` is the output token of a
*teacher* block: a softmax attention with ``Q = K = 0``, ``V = I``, ``rho = 0`` (all scores are 0,
every attention weight is exactly ``1/n``, so every token becomes the sequence mean ``mu^j``),
then a residual width-4 ReLU feed-forward layer ``eta z + W2 relu(W1 z + b1)`` with ``eta = 1`` and
``W1, b1, W2`` uniform on ``[0, 1]``::

    y^j = mu^j + W2 relu(W1 mu^j + b1).

Here every random number is a float64 from a seeded :class:`random.Random` (``k / 2^53``), held as
the exact binary rational ``Fraction(float)``; the targets are the **exact** teacher outputs
(rationals, not floats), so the teacher interpolates the dataset exactly, and
:func:`check_teacher` proves it by evaluating the teacher as a symbounds
:class:`~symbounds.core.transformer.Transformer` in exact rationals.

**The trained class** is one block of the same shape (the authors' model): rank-one ``Q = q``,
``K = k`` (``1 x d``), full ``V`` (``d x d``), scalar skips ``rho`` and ``eta``, a width-4 ReLU
layer ``W1`` (``4 x d``), ``b1`` (``4``), ``W2`` (``d x 4``) and **no** output bias ``b2`` -- that is
``2d + d^2 + 2 + 4d + 4 + 4d = 422`` parameters for ``d = 16``.  ``||theta||^2`` is the sum of
squares of all of them, skips included (every one of them is penalised in training), so
``||theta*||^2 = ||V||^2 + eta^2 + ||W1||^2 + ||b1||^2 + ||W2||^2 = d + 1 + ...`` for the teacher.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from fractions import Fraction

from ...core.claims import Verdict
from ...core.contexts import BallContext, ExactContext
from ...core.exact import decimal, decimal_down, decimal_up
from ...core.transformer import Attention, FeedForward, Head, Transformer, forward
from .dataset import Dataset, validate

__all__ = [
    "PARAMETERS",
    "Teacher",
    "TikhonovData",
    "make_data",
    "teacher_model",
    "block_model",
    "check_teacher",
    "norm_sq",
    "parameter_count",
    "certify_trained",
    "Certified",
    "params_from_floats",
    "slope",
    "construction_summary",
    "WIDTH",
]

#: The trainable tensors of the one-block class, in order (no output bias b2: the authors' model).
PARAMETERS = ("q", "k", "V", "rho", "eta", "W1", "b1", "W2")

WIDTH = 4


def parameter_count(d: int, width: int = WIDTH) -> int:
    """``2d + d^2 + 2 + width d + width + d width`` (422 for ``d = 16``, width 4)."""
    return 2 * d + d * d + 2 + 2 * width * d + width


@dataclass(frozen=True)
class Teacher:
    """Exact weights of a one-block model, by the names of :data:`PARAMETERS`: vectors and
    matrices as tuples (of rows) of Fractions, ``rho`` and ``eta`` Fractions."""

    q: tuple
    k: tuple
    V: tuple
    rho: Fraction
    eta: Fraction
    W1: tuple
    b1: tuple
    W2: tuple

    def params(self) -> dict:
        return {nm: getattr(self, nm) for nm in PARAMETERS}


@dataclass(frozen=True)
class TikhonovData:
    """The dataset (exact inputs and exact teacher targets) and the teacher that produced it."""

    dataset: Dataset
    teacher: Teacher
    seed: int

    @property
    def theta_star_sq(self) -> Fraction:
        return norm_sq(self.teacher.params())


def _flat(a):
    if isinstance(a, (tuple, list)):
        for v in a:
            yield from _flat(v)
    else:
        yield a


def norm_sq(params: dict) -> Fraction:
    """``||theta||^2``: the exact sum of squares of every entry of every tensor in ``params``
    (the convention the training penalises: all of :data:`PARAMETERS`, skips included)."""
    return sum((Fraction(v) ** 2 for nm in PARAMETERS for v in _flat(params[nm])), Fraction(0))


def _teacher_target(teacher: Teacher, X: tuple) -> tuple:
    """``mu + W2 relu(W1 mu + b1)`` in Fractions (the generator's own arithmetic; the proof is
    :func:`check_teacher`, which evaluates the Transformer instead)."""
    n, d = len(X), len(X[0])
    mu = [sum((x[r] for x in X), Fraction(0)) / n for r in range(d)]
    h = [max(Fraction(0), sum((w * m for w, m in zip(row, mu)), Fraction(0)) + b)
         for row, b in zip(teacher.W1, teacher.b1)]
    return tuple(teacher.eta * mu[r] + sum((w * hh for w, hh in zip(teacher.W2[r], h)), Fraction(0))
                 for r in range(d))


def make_data(N: int = 10, n: int = 100, d: int = 16, seed: int = 0, width: int = WIDTH) -> TikhonovData:
    """The authors' experiment, seeded: tokens and teacher weights are float64 draws uniform on
    ``[0, 1)`` held exactly (``Fraction(float)``); targets are the exact teacher outputs."""
    if N < 1 or n < 1 or d < 2 or width < 1:
        raise ValueError(f"need N >= 1, n >= 1, d >= 2, width >= 1 (got {N}, {n}, {d}, {width})")
    rng = random.Random(seed)
    u = lambda: Fraction(rng.random())
    inputs = tuple(tuple(tuple(u() for _ in range(d)) for _ in range(n)) for _ in range(N))
    zero = Fraction(0)
    teacher = Teacher(
        q=(zero,) * d, k=(zero,) * d,
        V=tuple(tuple(Fraction(int(r == c)) for c in range(d)) for r in range(d)),
        rho=zero, eta=Fraction(1),
        W1=tuple(tuple(u() for _ in range(d)) for _ in range(width)),
        b1=tuple(u() for _ in range(width)),
        W2=tuple(tuple(u() for _ in range(width)) for _ in range(d)),
    )
    targets = tuple((_teacher_target(teacher, X),) for X in inputs)
    return TikhonovData(validate(Dataset(d, inputs, targets)), teacher, seed)


def block_model(params: dict) -> Transformer:
    """One block of the trained class as a symbounds Transformer (tokens input, softmax attention
    without temperature): ``z_i <- rho z_i + sum_l pi_il V z_l`` with ``pi_il`` the softmax over
    ``l`` of ``(q . z_i)(k . z_l)``, then ``z <- eta z + W2 relu(W1 z + b1)``.  ``params`` holds the
    exact weights by the names of :data:`PARAMETERS`."""
    d = len(params["q"])
    eye = tuple(tuple(int(r == c) for c in range(d)) for r in range(d))
    head = Head(W_Q=(tuple(params["q"]),), W_K=(tuple(params["k"]),), W_V=tuple(map(tuple, params["V"])), W_O=eye)
    att = Attention(heads=(head,), kind="softmax", skip=params["rho"])
    ff = FeedForward(W1=tuple(map(tuple, params["W1"])), b1=tuple(params["b1"]), W2=tuple(map(tuple, params["W2"])),
                     b2=(0,) * d, skip=params["eta"])
    return Transformer(layers=(att, ff), input="tokens")


def teacher_model(teacher: Teacher) -> Transformer:
    return block_model(teacher.params())


def _columns(X) -> list:
    """A sequence (tuple of tokens) as the ``d x n`` state of the Transformer (tokens are columns)."""
    return [list(col) for col in zip(*X)]


@dataclass
class TeacherCheck:
    verdict: Verdict
    failures: list  # (sequence, token) pairs whose exact output differs from the target

    def as_dict(self) -> dict:
        return {"verdict": str(self.verdict), "failures": [list(f) for f in self.failures[:10]]}


def check_teacher(ds: Dataset, teacher: Teacher) -> TeacherCheck:
    """Prove in exact rationals that the teacher maps **every token** of every sequence onto that
    sequence's target, ``T_i(X^j) = y^j`` for all ``i, j`` (so ``loss(theta*) = 0``).

    The Transformer is evaluated by :func:`symbounds.core.transformer.forward` in the exact
    context: the all-zero scores give the attention weights ``1/n`` exactly (the forward pass
    recognises a row of exact zeros and never calls ``exp``), the rest is rational arithmetic.
    """
    ctx = ExactContext()
    model = teacher_model(teacher)
    failures = []
    for j, (X, Y) in enumerate(zip(ds.inputs, ds.targets)):
        if len(Y) != 1:
            raise ValueError(f"sequence {j}: the teacher experiment has one target per sequence")
        Z = forward(ctx, model, _columns(X))
        y = [ctx.convert(v) for v in Y[0]]
        for i in range(len(X)):
            if any(Z[r][i] != y[r] for r in range(ds.d)):
                failures.append((j, i))
    return TeacherCheck(Verdict.REFUTED if failures else Verdict.PROVED, failures)


# ------------------------------------------------------------------------------------------
# certification of a trained block


@dataclass
class Certified:
    """Ball enclosures (exact Fraction endpoints) of what a trained block reached.

    ``loss``: ``(1/N) sum_j max_i ||T_i(X^j) - y^j||^2``; ``hausdorff[j]``: ``d_H(T(X^j), {y^j})``;
    ``norm_sq``: ``||theta||^2`` exactly; ``objective``: ``loss + c ||theta||^2`` for the penalty
    weight ``c`` actually minimised; the verdicts compare them with the teacher's values.
    """

    prec: int
    loss: tuple
    hausdorff: list
    norm_sq: Fraction
    penalty: Fraction
    objective: tuple
    verdicts: dict

    def as_dict(self) -> dict:
        enc = lambda lo_hi: {"lower": decimal_down(lo_hi[0], 17), "upper": decimal_up(lo_hi[1], 17)}
        return {
            "prec": self.prec,
            "loss": enc(self.loss),
            "hausdorff": [enc(h) for h in self.hausdorff],
            "norm_sq": decimal(self.norm_sq),
            "penalty_weight": str(self.penalty),
            "objective": enc(self.objective),
            "verdicts": {k: str(v) for k, v in self.verdicts.items()},
        }


def _sqrt_bounds(ctx, lo: Fraction, hi: Fraction) -> tuple:
    """Exact bounds on ``sqrt`` of a number in ``[lo, hi]`` (``lo`` clipped at 0: a squared norm)."""
    lo = max(lo, Fraction(0))
    return (ctx.to_fraction_bounds(ctx.sqrt(ctx.convert(lo)))[0] if lo > 0 else Fraction(0),
            ctx.to_fraction_bounds(ctx.sqrt(ctx.convert(hi)))[1])


def _decide_le(lo: Fraction, hi: Fraction, bound: Fraction) -> Verdict:
    """``[lo, hi] <= bound``: proved, refuted, or undecided when the enclosure straddles it."""
    if hi <= bound:
        return Verdict.PROVED
    if lo > bound:
        return Verdict.REFUTED
    return Verdict.UNDECIDED


def certify_trained(data: TikhonovData, params: dict, eps: Fraction, penalty: Fraction,
                    prec: int = 128) -> Certified:
    """Certify a trained block (exact weights ``params``, e.g. ``Fraction(float)`` of float64
    weights) in Arb balls at ``prec`` bits, against the exact targets of ``data``.

    Verdicts (each decided by the enclosure or exactly, never by a float):

    * ``loss_below_threshold``: ``loss(theta) <= eps ||theta*||^2`` (the line [AFZ25] draw);
    * ``norm_below_teacher``: ``||theta||^2 <= ||theta*||^2`` (what every minimiser satisfies);
    * ``objective_below_teacher``: ``loss(theta) + c ||theta||^2 <= c ||theta*||^2 = J_c(theta*)``
      for the penalty ``c`` the optimiser actually minimised -- refuted means the trained point
      is provably **not** a global minimiser of ``J_c``.
    """
    ctx = BallContext(prec)
    model = block_model(params)
    ds = data.dataset
    star = data.theta_star_sq
    total = ctx.zero
    haus = []
    with ctx.scope():
        for X, Y in zip(ds.inputs, ds.targets):
            Z = forward(ctx, model, _columns(X))
            y = [ctx.convert(v) for v in Y[0]]
            worst = None
            for i in range(len(X)):
                s = ctx.zero
                for r in range(ds.d):
                    diff = Z[r][i] - y[r]
                    s = s + diff * diff
                worst = s if worst is None else ctx.max(worst, s)
            total = total + worst
            haus.append(_sqrt_bounds(ctx, *ctx.to_fraction_bounds(worst)))
        loss = total / ctx.rational(ds.N)
        lo, hi = ctx.to_fraction_bounds(loss)
    nsq = norm_sq(params)
    lo = max(lo, Fraction(0))  # a loss is a mean of squares
    obj = (lo + penalty * nsq, hi + penalty * nsq)
    verdicts = {
        "loss_below_threshold": _decide_le(lo, hi, eps * star),
        "norm_below_teacher": Verdict.PROVED if nsq <= star else Verdict.REFUTED,
        "objective_below_teacher": _decide_le(obj[0], obj[1], penalty * star),
    }
    return Certified(prec, (lo, hi), haus, nsq, penalty, obj, verdicts)


def params_from_floats(arrays: dict) -> dict:
    """Exact binary rationals of float weights (nested lists or floats), by parameter name."""
    conv = lambda a: tuple(conv(v) for v in a) if isinstance(a, (list, tuple)) else Fraction(float(a))
    return {nm: conv(arrays[nm]) for nm in PARAMETERS}


def slope(eps: list, losses: list) -> float | None:
    """Least-squares slope of ``log10(loss)`` against ``log10(eps)`` (float statistics of a float
    training trace; ``None`` with fewer than two positive points)."""
    pts = [(math.log10(float(e)), math.log10(v)) for e, v in zip(eps, losses) if v is not None and v > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def construction_summary(ds: Dataset) -> dict:
    """symbounds' own exact interpolant for the same dataset (hardmax, compressed; docs/alcalde.md,
    The construction), proved by :func:`symbounds.papers.alcalde.run.run`: its blocks, parameters
    and ``||theta*||^2`` -- the run's convention (weights and biases, skips excluded) and, beside
    it, with the skip weights added (the trained class's convention)."""
    from .run import run

    res = run(ds)
    skips = sum((Fraction(v) ** 2 for name, v in res.model.weight_arrays() if name.endswith(".skip")), Fraction(0))
    return {
        "verdict": str(res.verdict),
        "blocks": res.sizes["blocks"],
        "params_dense": res.sizes["params_dense"],
        "params_nonzero": res.sizes["params_nonzero"],
        "theta_norm_sq": decimal(res.theta_norm_sq),
        "theta_norm_sq_with_skips": decimal(res.theta_norm_sq + skips),
        "seconds": round(sum(res.timings.values()), 3),
    }
