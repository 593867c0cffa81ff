"""Certified output bounds of a user's network over an input box, and whole-cube certificates of it.

:func:`bound` encloses ``{T(x) : x in B}`` for a box ``B = [lo_1, hi_1] x ... x [lo_m, hi_m]``
with the box search of :mod:`symbounds.core.search`: each sub-box ``x0 +- h`` is enclosed with
first-order Taylor models (``T(x0 + delta) in c + <g, delta> + [-r, r]``; outward-rounded float64
where the model allows, else Arb), with plain Arb balls where those fail (a hardmax whose winner
is not decided on it, a reciprocal of a model whose range contains 0), exactly at a point box
when the network admits it, and every sub-box's enclosure is intersected with its parent's.

* **Adaptive** (the default): the sub-box whose enclosure sticks out of the *sampled range* most
  (relative to that range) is halved first, until the union is within a factor ``1 + tol`` of
  the sampled range, or a box limit or timeout is reached.  The sampled range is made of values
  the output certainly reaches (rigorous values at the extreme points found by random sampling and
  a gradient descent): ``min T <= sampled_lower`` and ``max T >= sampled_upper``, so the true
  range lies between the sampled range and the certified enclosure.
* **Fixed partitions**: bisect the widest side ``split`` times, or until every side is at most
  ``width``; every level is evaluated, so a finer partition never gives a wider result.

The union of the sub-box enclosures is returned with exact rational endpoints; the result says
which evaluations were kept.

Input coordinates:

* vector-input model (``"input": "vector"``): the box has one interval per coordinate ``x_1..x_d``;
* token-set model (``"input": "tokens"``, ``Z_0`` given as a ``D x n`` matrix, tokens as columns):
  the box lists the ``D n`` entries of ``Z_0`` **token by token** (column-major): interval
  ``j D + r`` (0-based) bounds ``Z_0[r, j]``, feature ``r`` of token ``j``.

The output is the readout ``Z_L[row, column]`` when the model has one, else every entry of
``Z_L``, listed in the same column-major order.

:func:`certify` proves ``sup_{x in [0,1]^d} |T(x) - g(x)| <= eps`` for a vector-input model file
with :func:`symbounds.core.boxes.certify_model`, and writes the same certificate as the
constructions (construction ``"model"``; the network is the embedded model itself, so
:func:`rebuild` returns it and there are no assumptions on ``g`` to re-check).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from .boxes import Box, CertifyOptions, CertifyResult, certify_model
from .certificate import CertificateError, make_certificate
from .claims import Verdict
from .contexts import MAX_PREC, MIN_PREC, BallContext
from .exact import NumberError, parse_number
from .graph import Graph
from .graph_file import network_from_json
from .networks import load_network
from .modelfile import ModelFileError, model_from_json, model_to_json
from .search import (BoxEvaluator, Limits, Problem, descend, flat_output, float_ends, output_count, partition,
                     random_points, search, shape_input)
from .transformer import Transformer, forward

__all__ = ["BoundError", "BoundResult", "bound", "check_box", "input_dimension", "sub_boxes", "outputs_at", "certify", "rebuild",
           "MAX_BOXES", "DEFAULT_TOL", "DEFAULT_MAX_BOXES"]

#: The most sub-boxes one call may evaluate.
MAX_BOXES = 1 << 16


class BoundError(NumberError):
    """A box or option that cannot be used (one line naming the problem)."""


class BoundUndecided(ArithmeticError):
    """A sub-box on which neither Taylor models nor interval balls could evaluate the model."""


@dataclass
class BoundResult:
    """``lower <= T(x) <= upper`` for every ``x`` of the box (exact rationals; one pair per output
    when the model has no readout, as tuples in column-major order)."""

    lower: Fraction | tuple
    upper: Fraction | tuple
    boxes: int
    seconds: float
    method: str  # "taylor", "linear", "ball", "exact" or several joined by "+" (the evaluators the sub-boxes kept)
    shape: tuple | None = None  # (D, n) of the output matrix, None for a readout
    #: values the output certainly reaches (``min T <= sampled_lower``, ``max T >= sampled_upper``):
    #: rigorous values at the sampled extreme points (None where none could be evaluated); the true
    #: range lies between these and the bound
    sampled_lower: Fraction | tuple | None = None
    sampled_upper: Fraction | tuple | None = None
    evaluated: int = 0  # boxes evaluated (a partition evaluates its coarser levels too)
    mode: str = "adaptive"  # or "partition" (--split / --width)
    stopped: str | None = None  # adaptive: None (tolerance reached), "timeout", "max-boxes", "min-width"
    evaluators: dict = field(default_factory=dict)  # enclosures by evaluator: float, taylor, ball, exact, parent
    tol: Fraction | None = None

    def _pairs(self) -> list:
        if isinstance(self.lower, tuple):
            return list(zip(self.lower, self.upper))
        return [(self.lower, self.upper)]

    def __repr__(self) -> str:
        """The enclosure as outward-rounded 12-digit decimals (the exact ends are ``lower`` and
        ``upper``); an output matrix shows its first entries and its shape."""
        from .display import enclosure_text, short

        pairs = self._pairs()
        ends = ", ".join(enclosure_text(a, b) for a, b in pairs[:3]) + (", ..." if len(pairs) > 3 else "")
        what = "T(x) in " + ends if self.shape is None else f"Z ({self.shape[0]}x{self.shape[1]}) in {ends}"
        return short(f"BoundResult({what}; {self.boxes} boxes, {self.method}, {self.seconds:.2f} s)")

    def _repr_latex_(self) -> str:
        """``T(x) \\in [lower, upper]`` (one row per entry of an output matrix), outward-rounded."""
        from .display import enclosure_text

        pairs = self._pairs()
        if self.shape is None:
            rows = [rf"T(x) \in {enclosure_text(*pairs[0])}"]
        else:
            D = self.shape[0]
            rows = [rf"Z_{{{k % D},{k // D}}} \in {enclosure_text(a, b)}" for k, (a, b) in enumerate(pairs)]
        note = rf"\text{{{self.boxes} sub-boxes, {self.method}}}"
        return r"$$\begin{aligned}" + r" \\ ".join(rows + [note]) + r"\end{aligned}$$"


def input_dimension(model: Transformer) -> int:
    """How many real inputs the model takes (``d``, or ``D n`` for a token-set model, or
    ``tokens x width`` for a layer graph)."""
    if isinstance(model, Graph):
        return model.input_count
    if model.input == "vector":
        return len(model.embedding.E[0])
    raise BoundError("a token-set model file does not record its number of tokens: give the box")


def _token_shape(model: Transformer, m: int) -> tuple[int, int]:
    D = model.width
    if m % D:
        raise BoundError(f"the box has {m} intervals, not a multiple of the token width D = {D}")
    return D, m // D


def _end(v, what) -> Fraction:
    if isinstance(v, str):
        return parse_number(v, what, BoundError)
    if isinstance(v, (int, Fraction)) and not isinstance(v, bool):
        return Fraction(v)
    raise BoundError(f"{what}: expected an int, a Fraction or a string like '1/2' "
                     f"(a {type(v).__name__} is not exact)")


def check_box(model: Transformer, lo, hi) -> Box:
    """The box ``[lo_1, hi_1] x ... x [lo_d, hi_d]`` with exact ends, checked against the model's
    inputs (one interval per input coordinate or token entry); :class:`BoundError` names the problem."""
    lo = tuple(_end(v, f"lower end {i}") for i, v in enumerate(lo))
    hi = tuple(_end(v, f"upper end {i}") for i, v in enumerate(hi))
    if len(lo) != len(hi) or not lo:
        raise BoundError("the box needs as many lower as upper ends (at least one)")
    for i, (a, b) in enumerate(zip(lo, hi)):
        if a > b:
            raise BoundError(f"interval {i}: lower end {a} is above the upper end {b}")
    if isinstance(model, Graph):
        if len(lo) != model.input_count:
            raise BoundError(f"the box has {len(lo)} intervals, the graph has {model.input_count} inputs "
                             f"({model.tokens} row(s) of width {model.in_width}, listed row by row)")
    elif model.input == "vector":
        d = input_dimension(model)
        if len(lo) != d:
            raise BoundError(f"the box has {len(lo)} intervals, the model has {d} inputs")
    else:
        _token_shape(model, len(lo))
    return Box(lo, hi)


def sub_boxes(box: Box, split: int = 0, width=None) -> list[Box]:
    """Bisect the widest side ``split`` times (``2^split`` sub-boxes), or, with ``width``, until
    every side is at most ``width``."""
    if width is not None:
        width = Fraction(width)
        if width <= 0:
            raise BoundError("the width must be positive")
        n = 1
        for a, b in zip(box.lo, box.hi):
            k = 0
            while (b - a) / 2**k > width:
                k += 1
            n *= 2**k
            if n > MAX_BOXES:
                raise BoundError(f"width {width} needs more than {MAX_BOXES} sub-boxes")
        out, queue = [], [box]
        while queue:
            b = queue.pop()
            if b.width() > width:
                queue.extend(b.split())
            else:
                out.append(b)
        return out
    if not (0 <= split <= 16):
        raise BoundError(f"split depth {split}: use 0..16")
    boxes = [box]
    for _ in range(split):
        boxes = [half for b in boxes for half in b.split()]
    return boxes


def _shape_input(model: Transformer, xs: list):
    """The forward pass's input from the flat coordinates (column-major for tokens)."""
    if model.input != "vector":
        _token_shape(model, len(xs))
    return shape_input(model, xs)


def outputs_at(model: Transformer, x, prec: int = 128) -> list:
    """The outputs at the exact point ``x`` (flat coordinates) as Arb balls."""
    ball = BallContext(prec)
    with ball.scope():
        out = forward(ball, model, _shape_input(model, [ball.convert(Fraction(v)) for v in x]))
        return flat_output(model, out)


#: The relative tolerance of the adaptive bound: each end at most ``tol/2`` of the sampled range
#: outside it.
DEFAULT_TOL = Fraction(1, 10)
#: Boxes the adaptive bound evaluates at most (by default).
DEFAULT_MAX_BOXES = 4000


class _Range(Problem):
    """The adaptive bound as a search problem: a box is settled when its enclosure sticks out of
    the sampled range ``[s_lo, s_hi]`` by at most ``tol/2 (s_hi - s_lo)`` on either side (then the
    union over boxes is within ``(1 + tol)`` of the sampled range); the box sticking out most,
    relative to the range, is refined first.  The sampled range only grows, so a settled box stays
    settled."""

    def __init__(self, k: int, tol: Fraction):
        self.half_tol = float(tol) / 2
        self.lo = np.full(k, np.inf)
        self.hi = np.full(k, -np.inf)
        self.argmin: list = [None] * k
        self.argmax: list = [None] * k

    def observe(self, points, ys):
        for k in range(min(ys.shape[1], len(self.lo))):
            col = ys[:, k]
            if not np.isfinite(col).any():
                continue
            i, j = int(np.nanargmin(col)), int(np.nanargmax(col))
            if col[i] < self.lo[k]:
                self.lo[k], self.argmin[k] = col[i], points[i]
            if col[j] > self.hi[k]:
                self.hi[k], self.argmax[k] = col[j], points[j]

    def excess(self, enc) -> float:
        if enc is None or not np.isfinite(self.lo).all():
            return math.inf
        lo, hi = float_ends(enc)
        worst = 0.0
        for k in range(len(self.lo)):
            span = max(self.hi[k] - self.lo[k], 1e-12 * max(1.0, abs(self.lo[k]), abs(self.hi[k])))
            worst = max(worst, (self.lo[k] - lo[k]) / span, (hi[k] - self.hi[k]) / span)
        return worst

    def decide(self, box, enc):
        return Verdict.PROVED if self.excess(enc) <= self.half_tol else Verdict.UNDECIDED

    def priority(self, box, enc):
        return -self.excess(enc)

    def objectives(self):
        return [obj for k in range(len(self.lo)) for obj in (lambda ys, k=k: ys[:, k], lambda ys, k=k: -ys[:, k])]


def bound(model, lo, hi, split: int | None = None, width=None, prec: int = 128, tol=None,
          max_boxes: int | None = None, timeout: float | None = None, progress=None, seed: int = 0,
          fast: bool = True, linear: bool | str = "auto") -> BoundResult:
    """A certified enclosure of the model's output over the box ``[lo, hi]`` (see the module
    docstring); ``model`` is a :class:`Transformer`, a layer :class:`~symbounds.core.graph.Graph`,
    a model-file dict (either format) or a path (a model file or an ``.onnx`` graph).

    With ``split`` or ``width``: that fixed partition.  Otherwise adaptive: boxes are refined
    where the enclosure sticks out of the sampled range most, until it is within ``tol`` (default
    :data:`DEFAULT_TOL`) of it, or ``max_boxes`` boxes were evaluated, or ``timeout`` seconds
    passed (``stopped`` says which).  ``progress(done, evaluated)`` is called as boxes are
    evaluated (``done``: the settled fraction of the box's volume, or of the partition's leaves).
    ``fast=False`` encloses every box in Arb (no float pass).  ``linear``: meet each float
    enclosure with the backward linear bounds of :mod:`symbounds.core.linear_bounds` (True,
    False, or "auto": for networks small enough that they cost a few float passes)."""
    t0 = time.perf_counter()
    model = _as_model(model)
    if not (MIN_PREC <= int(prec) <= MAX_PREC):
        raise BoundError(f"precision {prec}: use between {MIN_PREC} and {MAX_PREC} bits")
    box = check_box(model, lo, hi)
    k = model.output_count if isinstance(model, Graph) else output_count(model, len(box.lo))
    if tol is not None:
        tol = _end(tol, "the tolerance")
        if not (0 < tol <= 100):
            raise BoundError(f"tolerance {tol}: use a number in (0, 100]")
    if linear not in (True, False, "auto"):
        raise BoundError(f"linear: expected True, False or 'auto', not {str(linear)[:20]!r}")
    ev = BoxEvaluator(model, prec, fast, linear)
    problem = _Range(k, DEFAULT_TOL if tol is None else tol)
    stopped = None
    if split is None and width is None:
        res = search(problem, ev, box, Limits(max_boxes=max_boxes or DEFAULT_MAX_BOXES, timeout=timeout,
                                              seed=seed), progress)
        leaves, evaluated, stopped = res.decided + res.open, res.evaluated, res.stopped
        mode = "adaptive"
    else:
        n = len(sub_boxes(box, split or 0, width))  # checks the options and the box count
        leaves, evaluated = partition(ev, box, split or 0, width,
                                      None if progress is None else lambda done, m: progress(Fraction(done, n), m))
        assert len(leaves) == n
        mode = "partition"
        sample_range(problem, ev, box, seed)
    for b, e in leaves:
        if e is None:
            raise BoundUndecided(f"the model cannot be enclosed over the sub-box "
                                 f"[{', '.join(f'{a}:{c}' for a, c in zip(b.lo, b.hi))}]; split the box further")
    los = [min(e.lo[j] for _, e in leaves) for j in range(k)]
    his = [max(e.hi[j] for _, e in leaves) for j in range(k)]
    slo, shi = _attained(problem, ev, los, his)
    kinds = {_KIND.get(e.method, e.method) for _, e in leaves} - {"parent"}
    method = "+".join(m for m in ("exact", "taylor", "linear", "ball") if m in kinds) or "taylor"
    common = dict(boxes=len(leaves), seconds=time.perf_counter() - t0, method=method, evaluated=evaluated,
                  mode=mode, stopped=stopped, evaluators=dict(ev.counts),
                  tol=None if mode == "partition" else (DEFAULT_TOL if tol is None else tol))
    if model.readout is not None:
        return BoundResult(los[0], his[0], sampled_lower=slo[0], sampled_upper=shi[0], **common)
    D = model.out_width if isinstance(model, Graph) else model.width
    return BoundResult(tuple(los), tuple(his), shape=(D, len(los) // D), sampled_lower=tuple(slo),
                       sampled_upper=tuple(shi), **common)


_KIND = {"float": "taylor", "linear": "linear", "taylor": "taylor", "ball": "ball", "exact": "exact"}


def sample_range(problem: Problem, ev: BoxEvaluator, box: Box, seed: int = 0, n: int = 64) -> None:
    """The falsification pass of a search, for a fixed partition's sampled range."""
    import random

    pts = [box.lo, box.hi, box.centre] + random_points(box, n, random.Random(seed))
    problem.observe(pts, ev.sample(pts))
    for k, obj in enumerate(problem.objectives()):
        start = problem.argmin[k // 2] if k % 2 == 0 else problem.argmax[k // 2]
        if start is not None:
            seen, _ = descend(ev, obj, box, [start])
            if seen:
                problem.observe(seen, ev.sample(seen))


def _attained(problem: _Range, ev: BoxEvaluator, los, his) -> tuple[list, list]:
    """Values the outputs certainly reach: at the sampled minimiser of output ``k``, the upper end
    of its rigorous value (so ``min T_k <=`` it), at the maximiser the lower end, clipped into the
    certified enclosure; None where no point could be evaluated rigorously."""
    slo, shi = [], []
    for k in range(len(los)):
        a = None if problem.argmin[k] is None else ev.at(problem.argmin[k])
        b = None if problem.argmax[k] is None else ev.at(problem.argmax[k])
        slo.append(None if a is None else min(max(a.hi[k], los[k]), his[k]))
        shi.append(None if b is None else max(min(b.lo[k], his[k]), los[k]))
    return slo, shi


def _as_model(model):
    if isinstance(model, (Transformer, Graph)):
        return model
    if isinstance(model, dict):
        return network_from_json(model)
    if isinstance(model, str):
        return load_network(model)
    raise TypeError("model: expected a Transformer, a Graph, a model-file dict or a path")


# ------------------------------------------------------------------------------------------
# whole-cube certificates of a user's model


def certify(model, target: str, eps, opts: CertifyOptions | None = None, progress=None,
            version: str | None = None) -> tuple[dict, CertifyResult]:
    """Prove ``sup_{x in [0,1]^d} |T(x) - g(x)| <= eps`` for a vector-input model; returns
    ``(certificate, result)`` (construction ``"model"``, the model file embedded)."""
    from .version import __version__

    opts = opts or CertifyOptions()
    if isinstance(model, Transformer):
        mj = model_to_json(model, opts.model_prec)
    elif isinstance(model, dict):
        mj = model
    else:
        from .files import read_json_file

        mj = read_json_file(model, ModelFileError, _reject_float, _reject_float)
    m = model_from_json(mj)
    if m.input != "vector":
        raise BoundError("certify over the cube needs a vector-input model (a token-set model has no cube)")
    d = input_dimension(m)
    if not (1 <= d <= 8):
        raise BoundError(f"the model has {d} inputs: certificates cover dimensions 1..8")
    eps = Fraction(eps)
    if not (0 < eps < 1):
        raise BoundError("eps must lie in (0, 1)")
    res = certify_model(mj, target, d, eps, opts, progress)
    cert = make_certificate(version=version or __version__, construction="model", instance={"inputs": d}, d=d,
                            eps=eps, target=target, prec=opts.prec, model_prec=int(mj.get("precision_bits", 0)),
                            model_json=mj, res=res, assumptions=[])
    return cert, res


def _reject_float(text):
    raise ModelFileError(f"JSON number {text!r}: numbers must be strings (exact '3', '7/8' or decimals)")


def rebuild(cert: dict, d: int, eps, target: str, model_prec: int, prec: int):
    """The ``rebuild`` of a user model's certificate: the network is the embedded model itself
    (checked against its digest by the caller), and no assumptions on the target are made.  The
    instance must be exactly ``{"inputs": d}``."""
    inst = cert.get("instance")
    if not isinstance(inst, dict) or set(inst) != {"inputs"} or type(inst["inputs"]) is not int:
        raise CertificateError(f"the instance does not fit the construction 'model' (it is exactly "
                               f"{{\"inputs\": {d}}})")
    if inst["inputs"] != d:
        raise CertificateError("the instance disagrees with the claim (instance.inputs is not d)")
    mj = cert.get("model")
    m = model_from_json(mj)
    if m.input != "vector" or input_dimension(m) != d:
        raise CertificateError(f"the embedded model does not take {d} inputs")
    return mj, []
