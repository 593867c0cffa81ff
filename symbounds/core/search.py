"""One best-first branch and bound over input boxes, and the evaluation of a model over a box.

A *problem* says what an enclosure of the outputs over a box decides and what a point refutes;
:func:`search` does the rest, for every property decided box by box (VNN-LIB properties in
:mod:`symbounds.core.vnnlib`, adaptive output bounds in :mod:`symbounds.core.bound`, and a
construction's own bound over boxes with its own evaluator, such as the bound of [SL26] for
every target of a Hölder class):

* **Enclosures.**  :class:`BoxEvaluator` encloses the outputs ``T(x)``, ``x in B``, over each box
  ``B = x0 +- h``: in outward-rounded float64 first-order Taylor models over a batch of boxes at
  once where the model supports it (:mod:`symbounds.core.float_boxes`; a layer graph's:
  :mod:`symbounds.core.float_graph`, where a box keeps its float enclosure alone when that decides
  it and is enclosed in Arb too, the two met, when it does not), else (or where the floats
  fail) in Arb Taylor models (:mod:`symbounds.core.taylor`) met with plain Arb balls (one ball
  per input side), either alone where the other fails -- and in Arb as well where a box's float
  enclosure is not a tenth narrower than its parent's (the float rounding dominates there); a box that is a single point is
  evaluated exactly where the network admits it (rational weights, ReLU, hardmax:
  :class:`symbounds.core.contexts.ExactContext`).  A child's
  enclosure is intersected with its parent's -- the parent's encloses ``T`` over the child too --
  so refining a box never widens what is known on it.
* **Best first.**  The open boxes sit in a heap ordered by the problem's priority (recomputed
  when a box comes up, as what the problem knows may have changed); a box the problem decides
  is set aside, any other is halved along its widest side and both halves evaluated.
* **Falsification.**  Before the search, the box's two extreme corners (exactly, where the
  network admits it) and its centre (exactly, else in Arb balls), whatever the floats say there:
  a float evaluation can be far off (``relu(x + 2^53) - 2^53`` is 0 at ``x = 1`` in float64 and 1
  exactly); then random points of the box and a signed-gradient descent (finite differences in
  float) on the problem's violation
  score; during it, the centre of every new box and, about once a second, a descent from the best
  points seen (at most a fifth of the search's time).  Points are exact rationals; every
  candidate is re-checked rigorously (exactly when the network admits it, else in Arb balls, once
  more at four times the precision) before it is reported.
* **Limits.**  At most ``max_boxes`` evaluated boxes (the last step is cut to the budget), a
  wall-clock ``timeout`` (checked between batches, and between boxes on the Arb path), and
  ``min_width``: the search then ends ``undecided`` and says why (``stopped``), with what was
  decided so far.

Verdicts are :class:`symbounds.core.claims.Verdict`.

Recorded bounds.  A problem whose boxes are written to a certificate and re-derived one by one
(``check``) must decide and record each box on its **own** enclosure: an evaluator may then
return the box's enclosure without meeting it with the parent's.  The class bound's evaluator
does, and so does the whole-domain ``certify`` (``symbounds.core.boxes.certify_model``): its
problem decides a box on its own bound ``|T - g| <= eps`` and refutes it where the evaluator
proved the centre violates it (:meth:`Problem.decide` returning REFUTED), and its evaluator
hands the boxes back batch by batch as worker processes complete them (``ev.stream``), so the
search admits each box as it comes (progress after each) and reads no more after a refuted box.

The weights' numeric cache is shared between boxes (no purge): a weight is a constant Taylor
model, the same number in every box, and the box of a result is the box of the operand with a
gradient (see ``symbounds.core.taylor._box``).  ``tests/core/test_search.py`` evaluates boxes in
random order against fresh models and an independent 300-bit evaluation.
"""

from __future__ import annotations

import heapq
import math
import operator
import random
import time
from dataclasses import dataclass, field
from fractions import Fraction

import flint
import numpy as np

from .activations import HULL_FACTOR
from .claims import Verdict
from .contexts import BallContext, ExactContext, ExactUnsupported, Undecided
from .float_boxes import evaluator
from .graph import Graph
from .taylor import TaylorContext
from .transformer import Transformer, forward

__all__ = [
    "Box",
    "BoxEvaluator",
    "Enclosure",
    "Limits",
    "Problem",
    "SearchResult",
    "descend",
    "flat_output",
    "float_ends",
    "float_evaluator",
    "measure",
    "output_count",
    "partition",
    "random_points",
    "search",
    "shape_input",
]

#: Boxes halved per float batch (twice as many evaluated), and per Arb step.
FLOAT_BATCH, ARB_BATCH = 32, 1
#: A float enclosure at least this fraction of its parent's width is "stalled": Arb is tried too.
STALL = Fraction(9, 10)
#: The most of a search's time the descents started during it may take.
DESCENT_SHARE = 0.2


@dataclass(frozen=True)
class Box:
    """The closed box ``[lo_i, hi_i]`` (exact rationals).

    **Dyadic boxes.**  The boxes of a search are halves of halves of a dyadic grid, so their ends
    are ``n / 2^k``.  Where every end is an ``int`` or a ``Fraction`` with a power-of-two
    denominator, the box also holds (found once, or handed down by :meth:`split`) its dyadic form
    ``(k, nlo, nhi)``: ``lo_i = nlo_i / 2^k``, ``hi_i = nhi_i / 2^k`` with integers ``nlo_i``,
    ``nhi_i`` and the least such ``k >= 0``.  Widths, halves, volumes and centres are then integer
    arithmetic over the one denominator ``2^k`` (the same rationals the Fractions give), and the
    ends and centres are exact doubles where ``|n| < 2^53`` and ``k <= 960`` (``n`` converts
    exactly and ``ldexp`` scales by a power of two exactly in the normal range).  Equality,
    hashing and the ends ``lo``, ``hi`` are unchanged: the form is a cache, never a field."""

    lo: tuple
    hi: tuple

    def dyadic(self):
        """``(k, nlo, nhi)`` (see the class docstring), or None when an end is not a dyadic
        rational given as an ``int`` or ``Fraction``."""
        dy = self.__dict__.get("_dy", _UNSET)
        if dy is _UNSET:
            dy = _dyadic_form(self.lo, self.hi)
            object.__setattr__(self, "_dy", dy)
        return dy

    @property
    def centre(self):
        dy = self.dyadic()
        if dy is not None:
            k, nlo, nhi = dy
            den = 1 << (k + 1)
            return tuple(Fraction(a + b, den) for a, b in zip(nlo, nhi))
        return tuple((a + b) / 2 for a, b in zip(self.lo, self.hi))

    @property
    def half(self):
        dy = self.dyadic()
        if dy is not None:
            k, nlo, nhi = dy
            den = 1 << (k + 1)
            return tuple(Fraction(b - a, den) for a, b in zip(nlo, nhi))
        return tuple((b - a) / 2 for a, b in zip(self.lo, self.hi))

    def split(self, axis: int | None = None) -> tuple[Box, Box]:
        """The two halves along ``axis`` (default: the widest side, the first of equals).  A
        dyadic box hands its halves their dyadic forms (``mid = (nlo_k + nhi_k) / 2^(k+1)``)."""
        dy = self.dyadic()
        if dy is None:
            k = max(range(len(self.lo)), key=lambda i: self.hi[i] - self.lo[i]) if axis is None else axis
            mid = (self.lo[k] + self.hi[k]) / 2
            left = Box(self.lo, self.hi[:k] + (mid,) + self.hi[k + 1:])
            right = Box(self.lo[:k] + (mid,) + self.lo[k + 1:], self.hi)
            return left, right
        e, nlo, nhi = dy
        if axis is None:  # one denominator: the widest side of the numerators is the widest side
            ws = [b - a for a, b in zip(nlo, nhi)]
            axis = ws.index(max(ws))
        k = axis
        m = nlo[k] + nhi[k]
        mid = Fraction(m, 1 << (e + 1))
        left = Box(self.lo, self.hi[:k] + (mid,) + self.hi[k + 1:])
        right = Box(self.lo[:k] + (mid,) + self.lo[k + 1:], self.hi)
        lo2, hi2 = tuple(2 * a for a in nlo), tuple(2 * b for b in nhi)
        object.__setattr__(left, "_dy", _reduced(e + 1, lo2, hi2[:k] + (m,) + hi2[k + 1:]))
        object.__setattr__(right, "_dy", _reduced(e + 1, lo2[:k] + (m,) + lo2[k + 1:], hi2))
        return left, right

    def _dyadic_width(self):
        """``(k, w)``: the width is ``w / 2^k`` (found once), or None when the box is not dyadic."""
        dw = self.__dict__.get("_dw", _UNSET)
        if dw is _UNSET:
            dy = self.dyadic()
            dw = None if dy is None else (dy[0], max(map(operator.sub, dy[2], dy[1])))
            object.__setattr__(self, "_dw", dw)
        return dw

    def width(self):
        dw = self._dyadic_width()
        if dw is not None:
            return Fraction(dw[1], 1 << dw[0])
        return max(b - a for a, b in zip(self.lo, self.hi))

    def size(self) -> float:
        """The width as a float (``float(width())``, without the Fraction on a dyadic box)."""
        dw = self._dyadic_width()
        if dw is not None and dw[1] < _EXACT and dw[0] <= 960:
            return math.ldexp(dw[1], -dw[0])
        return float(self.width())

    def half_width_below(self, q) -> bool:
        """``width() / 2 < q`` (exact; in integers on a dyadic box and an int or Fraction ``q``)."""
        if type(q) is Fraction or type(q) is int:
            dw = self._dyadic_width()
            if dw is not None:
                return dw[1] * q.denominator < q.numerator << (dw[0] + 1)
        return self.width() / 2 < q

    def volume(self) -> Fraction:
        """``prod_i (hi_i - lo_i)``, exact."""
        dy = self.dyadic()
        if dy is not None:
            return _dyadic_measure(dy, range(len(self.lo)))
        v = Fraction(1)
        for a, b in zip(self.lo, self.hi):
            v *= Fraction(b - a)
        return v

    def doubles(self):
        """``(lo, hi)``, tuples of doubles equal to the ends exactly, or None when some end is not
        such a double (or not known to be: see the class docstring)."""
        dy = self.dyadic()
        if dy is None:
            return None
        k, nlo, nhi = dy
        ends = nlo + nhi
        if k > 960 or min(ends) <= -_EXACT or max(ends) >= _EXACT:
            return None
        s = 2.0**-k  # a normal power of two: the products are exact
        return tuple([a * s for a in nlo]), tuple([b * s for b in nhi])

    def centre_doubles(self):
        """The centre as a tuple of doubles equal to it exactly, or None (as :meth:`doubles`)."""
        dy = self.dyadic()
        if dy is None or dy[0] >= 960:
            return None
        k, nlo, nhi = dy
        c = [a + b for a, b in zip(nlo, nhi)]
        if min(c) <= -_EXACT or max(c) >= _EXACT:
            return None
        s = 2.0 ** -(k + 1)
        return tuple([v * s for v in c])

    def sort_key(self, k: int | None = None):
        """A key ordering boxes as ``(lo, hi)`` does (lexicographic, exact): for dyadic boxes the
        numerators over the common denominator ``2^k`` (``k`` at least every box's), else the
        ends themselves."""
        dy = self.dyadic()
        if dy is None or k is None:
            return (self.lo, self.hi)
        s = k - dy[0]
        return (tuple(a << s for a in dy[1]), tuple(b << s for b in dy[2]))

    def as_json(self):
        return {"lo": [str(v) for v in self.lo], "hi": [str(v) for v in self.hi]}


_UNSET = object()
#: Integers of magnitude below this convert to doubles exactly.
_EXACT = 2**53


def _reduced(k: int, nlo: tuple, nhi: tuple):
    """``(k, nlo, nhi)`` with the common factors of two taken out (the least ``k >= 0``)."""
    z = 0
    for v in nlo + nhi:
        z |= v
    if z == 0:
        return (0, nlo, nhi)
    s = min(k, (z & -z).bit_length() - 1)
    if s == 0:
        return (k, nlo, nhi)
    return (k - s, tuple(v >> s for v in nlo), tuple(v >> s for v in nhi))


def _dyadic_form(lo, hi):
    """The dyadic form of a box's ends (see :class:`Box`), or None."""
    ks = []
    for v in lo + hi:
        if isinstance(v, bool) or not isinstance(v, (int, Fraction)):
            return None
        den = v.denominator
        if den & (den - 1):
            return None
        ks.append(den.bit_length() - 1)
    k = max(ks, default=0)
    n = [v.numerator << (k - j) for v, j in zip(lo + hi, ks)]
    return _reduced(k, tuple(n[:len(lo)]), tuple(n[len(lo):]))


def _dyadic_measure(dy, axes) -> Fraction:
    """``prod_{i in axes} (hi_i - lo_i)`` of a dyadic form, exact."""
    k, nlo, nhi = dy
    v, m = 1, 0
    for i in axes:
        v *= nhi[i] - nlo[i]
        m += k
    return Fraction(v, 1 << m)


def float_evaluator(model, prec: int):
    """The model's float box evaluator with its one-off setup done, or None when the float path
    does not apply or cannot enclose the setup (then every box is evaluated in Arb balls).  A layer
    graph's is :class:`symbounds.core.float_graph.FloatGraphEvaluator` (None when an operation the
    output reads has no float rule)."""
    if isinstance(model, Graph):
        from .float_graph import evaluator as graph_evaluator

        return graph_evaluator(model)
    fast = evaluator(model, prec)
    if fast is not None:
        try:
            fast.setup()
        except ValueError:
            return None
    return fast


def shape_input(model: Transformer, xs: list):
    """The forward pass's input from flat coordinates (column-major ``D x n`` for tokens)."""
    if model.input == "vector":
        return xs
    D = model.width
    n = len(xs) // D
    return [[xs[j * D + r] for j in range(n)] for r in range(D)]


def flat_output(model: Transformer, out) -> list:
    """The readout as a one-element list, else every entry of ``Z_L`` column by column."""
    if model.readout is not None:
        return [out]
    D, n = len(out), len(out[0])
    return [out[r][j] for j in range(n) for r in range(D)]


def output_count(model: Transformer, m: int) -> int:
    """How many outputs the model has on ``m`` input coordinates (the readout, or ``Z_L``)."""
    if model.readout is not None:
        return 1
    if model.input == "vector":
        return model.width * len(model.embedding.base[0])
    return m


@dataclass
class Enclosure:
    """``lo[k] <= T_k(x) <= hi[k]`` for every ``x`` of a box (exact rationals), and the numbers of
    the rigorous context that produced it (``ctx``, ``vals``: Taylor models keep the correlation
    between outputs; None for the float pass and for an enclosure inherited from the parent).
    ``objectives``: ``(lo, hi)`` (exact) of ``<c, T(x)>`` for each objective row ``c`` of the
    evaluator (:attr:`BoxEvaluator.objectives`), or None where none was bounded on its own."""

    lo: tuple
    hi: tuple
    method: str  # "float", "linear", "taylor", "ball", "exact" or "parent"
    ctx: object = None
    vals: list | None = None
    objectives: tuple | None = None

    def meet(self, parent: Enclosure | None) -> Enclosure:
        """The intersection with the parent's enclosure (which also holds on this box)."""
        if parent is None:
            return self
        lo = tuple(max(a, b) for a, b in zip(self.lo, parent.lo))
        hi = tuple(min(a, b) for a, b in zip(self.hi, parent.hi))
        if any(a > b for a, b in zip(lo, hi)):
            raise ArithmeticError("two enclosures of one box are disjoint: an evaluation is unsound")
        return Enclosure(lo, hi, self.method, self.ctx, self.vals, _meet_pairs(self.objectives, parent.objectives))

    def width(self) -> Fraction:
        return max(b - a for a, b in zip(self.lo, self.hi))


def _meet_pairs(a: tuple | None, b: tuple | None) -> tuple | None:
    """Two lists of ``(lo, hi)`` bounds of the same quantities met (either alone where the other is None)."""
    if a is None or b is None:
        return a if b is None else b
    out = tuple((max(x[0], y[0]), min(x[1], y[1])) for x, y in zip(a, b))
    if any(lo > hi for lo, hi in out):
        raise ArithmeticError("two bounds of one objective are disjoint: an evaluation is unsound")
    return out


def _is_point(box: Box) -> bool:
    return all(a == b for a, b in zip(box.lo, box.hi))


def measure(box: Box, axes) -> Fraction:
    """The volume of ``box`` along ``axes`` (the sides of positive width of the searched box)."""
    dy = box.dyadic()
    if dy is not None:
        return _dyadic_measure(dy, axes)
    v = Fraction(1)
    for i in axes:
        v *= box.hi[i] - box.lo[i]
    return v


class BoxEvaluator:
    """A model's outputs enclosed over boxes (float batch, Arb Taylor models, balls, exact at a
    point), evaluated at points for sampling (float, not rigorous), and rigorously at a point."""

    def __init__(self, model: Transformer, prec: int = 128, fast: bool = True, linear: bool | str = False,
                 objectives: list | None = None):
        self.model = model
        #: rows ``c`` (exact, one entry per output) whose ``<c, T(x)>`` a layer graph's backward
        #: linear bounds start from (:func:`symbounds.core.linear_graph.linear_graph_objective_bounds`),
        #: recorded in each enclosure's ``objectives``
        self.objectives = [list(c) for c in objectives] if objectives else None
        self.prec = int(prec)
        self.fast = float_evaluator(model, self.prec) if fast else None
        #: backward linear bounds met with the float pass (:mod:`symbounds.core.linear_bounds`):
        #: True, False, or "auto" (on for networks small enough that it costs a few float passes)
        self.linear = None
        if linear and self.fast is not None and not isinstance(model, Graph):
            from .linear_bounds import linear_evaluator

            lin = linear_evaluator(model, self.prec, self.fast)
            if lin is not None and (linear is True or lin.small()):
                self.linear = lin
        #: a layer graph's backward linear bounds (:mod:`symbounds.core.linear_graph`), met with its
        #: Arb Taylor models box by box
        self.graph_linear = False
        if linear and isinstance(model, Graph):
            from .linear_graph import small_graph

            self.graph_linear = linear is True or small_graph(model)
        self._exact_ok = True  # False once the network is seen to need a transcendental function
        self.counts: dict = {}
        #: boxes halved per step of the search, and (starts, steps) of a descent
        self.batch = FLOAT_BATCH if self.fast is not None else ARB_BATCH
        self.descent = (3, 12) if self.fast is not None else (1, 4)

    #: :meth:`enclose` takes the problem's ``decide`` (:func:`search` passes it)
    takes_decide = True

    # --- rigorous -------------------------------------------------------------------------------
    def enclose(self, boxes: list, parents: list | None = None, deadline: float | None = None,
                decide=None) -> list:
        """``[Enclosure or None]``, each met with its parent's (None: nothing encloses the box and
        it has no parent's).  Past ``deadline`` the remaining Arb boxes keep their parents'.

        A layer graph's boxes go through the float pass first (:mod:`symbounds.core.float_graph`);
        a box keeps its float enclosure alone where ``decide(box, enclosure met with the
        parent's)`` is not UNDECIDED, and is enclosed in Arb as well (Taylor models, balls, the
        backward linear bounds) and met with the float enclosure everywhere else: where the floats
        fail or do not decide it, and on every box when no ``decide`` is given (a fixed partition,
        a certificate's check), so the enclosure is never wider than without the float pass."""
        parents = parents or [None] * len(boxes)
        out: list = [None] * len(boxes)
        arb = []
        wide = [i for i, b in enumerate(boxes) if not _is_point(b)]
        for i, b in enumerate(boxes):
            if _is_point(b):
                e = self._exact(b.lo)
                if e is not None:
                    out[i] = e
                else:
                    arb.append(i)
        if self.fast is not None and wide and isinstance(self.model, Graph):
            los, his = [boxes[i].lo for i in wide], [boxes[i].hi for i in wide]
            lo, hi, ok = self.fast.ranges(los, his)
            for k, i in enumerate(wide):
                if not ok[k]:
                    arb.append(i)
                    continue
                out[i] = Enclosure(tuple(Fraction(float(v)) for v in lo[k]), tuple(Fraction(float(v)) for v in hi[k]),
                                   "float")
                if decide is None or decide(boxes[i], out[i].meet(parents[i])) is Verdict.UNDECIDED:
                    arb.append(i)
            for i in sorted(arb):
                if deadline is not None and time.monotonic() >= deadline:
                    break
                a = self._arb(boxes[i])
                if a is not None:
                    out[i] = a if out[i] is None else a.meet(out[i])
            return self._with_parents(out, parents)
        if self.fast is not None and wide:
            los, his = [boxes[i].lo for i in wide], [boxes[i].hi for i in wide]
            lo, hi, ok, _, _, _ = self.fast.enclose(los, his)
            method = np.full(len(wide), "float", dtype=object)
            if self.linear is not None:
                lo, hi, ok, method = _meet_linear(self.linear.ranges(los, his), lo, hi, ok, method)
            for k, i in enumerate(wide):
                if ok[k]:
                    out[i] = Enclosure((Fraction(float(lo[k])),), (Fraction(float(hi[k])),), str(method[k]))
                else:
                    arb.append(i)
        else:
            arb.extend(wide)
        for i in sorted(arb):
            if deadline is not None and time.monotonic() >= deadline:
                break
            out[i] = self._arb(boxes[i])
        for i in self._stalled(out, parents, arb):
            if deadline is not None and time.monotonic() >= deadline:
                break
            a = self._arb(boxes[i])
            if a is not None:
                out[i] = a.meet(out[i])
        return self._with_parents(out, parents)

    def _with_parents(self, out: list, parents: list) -> list:
        """Each enclosure met with its parent's (the parent's alone where there is none), counted."""
        for i, e in enumerate(out):
            p = parents[i]
            if e is None:
                out[i] = None if p is None else Enclosure(p.lo, p.hi, "parent", objectives=p.objectives)
            else:
                out[i] = e.meet(p)
            if out[i] is not None:
                self.counts[out[i].method] = self.counts.get(out[i].method, 0) + 1
        return out

    @staticmethod
    def _stalled(out: list, parents: list, arb: list) -> list:
        """The boxes whose float enclosure narrows their parent's by less than a tenth: there the float
        pass's own rounding dominates (``x + 2^53`` on a box of ``x`` in ``[0, 1]`` is enclosed
        no tighter than ``ulp(2^53) = 2`` however small the box), so Arb, at the evaluator's
        precision, is tried as well and the two are met."""
        done = set(arb)
        stalled = []
        for i, (e, p) in enumerate(zip(out, parents)):
            if e is None or p is None or i in done or e.method not in ("float", "linear"):
                continue
            if e.width() >= STALL * p.width() > 0:
                stalled.append(i)
        return stalled

    def _arb(self, box: Box) -> Enclosure | None:
        """Arb Taylor models met with plain balls over the box (either alone where the other fails;
        the balls are the cheaper pass, and at times the tighter on a wide box)."""
        taylor = ball_enc = None
        ctx = TaylorContext(self.prec, box.centre, box.half)
        ctx.hull_factor = HULL_FACTOR
        try:
            with ctx.scope():
                vals = flat_output(self.model, forward(ctx, self.model, shape_input(self.model, ctx.inputs())))
            rngs = [v.range() for v in vals]
            if all(_usable(r) for r in rngs):
                taylor = _from_balls(ctx.ball, rngs, "taylor", ctx, vals)
        except (Undecided, ZeroDivisionError, TypeError, ValueError):
            pass
        ball = BallContext(self.prec)
        try:
            with ball.scope():
                xs = [ball.convert(a).union(ball.convert(b)) for a, b in zip(box.lo, box.hi)]
                vals = flat_output(self.model, forward(ball, self.model, shape_input(self.model, xs)))
            if all(_usable(v) for v in vals):
                ball_enc = _from_balls(ball, vals, "ball", ball, vals)
        except (Undecided, ZeroDivisionError):
            pass
        enc = ball_enc if taylor is None else taylor.meet(ball_enc)
        if self.graph_linear:
            enc = meet_graph_linear(self.model, box, self.prec, enc, self.objectives)
        return enc

    def _exact(self, x) -> Enclosure | None:
        if not self._exact_ok:
            return None
        ctx = ExactContext()
        try:
            with ctx.scope():
                xs = shape_input(self.model, [ctx.convert(v) for v in x])
                vals = flat_output(self.model, forward(ctx, self.model, xs))
        except (ExactUnsupported, TypeError, ZeroDivisionError):
            self._exact_ok = False
            return None
        ends = [ctx.to_fraction_bounds(v) for v in vals]
        return Enclosure(tuple(e[0] for e in ends), tuple(e[1] for e in ends), "exact", ctx, vals)

    def at(self, x, prec: int | None = None) -> Enclosure | None:
        """The outputs at the exact point ``x``: exactly where the network admits it, else in
        balls at ``prec`` (default the evaluator's)."""
        e = self._exact(x)
        if e is not None:
            return e
        ball = BallContext(prec or self.prec)
        try:
            with ball.scope():
                vals = flat_output(self.model, forward(ball, self.model,
                                                       shape_input(self.model, [ball.convert(v) for v in x])))
        except (Undecided, ZeroDivisionError):
            return None
        if not all(_usable(v) for v in vals):
            return None
        return _from_balls(ball, vals, "ball", ball, vals)

    # --- sampling (floats, not rigorous) ----------------------------------------------------------
    def sample(self, points: list) -> np.ndarray:
        """``(P, k)`` float approximations of the outputs at exact points (NaN where no value)."""
        if not points:
            return np.zeros((0, 1))
        if self.fast is not None and isinstance(self.model, Graph):
            lo, hi, ok = self.fast.ranges(points, points)
            with np.errstate(invalid="ignore"):
                y = (lo + hi) / 2
            for i in np.flatnonzero(~ok):  # the floats failed there: balls
                y[i] = self._sample_balls([points[i]])[0]
            return y
        if self.fast is not None:
            lo, hi, ok = self.fast.ranges(points, points)
            y = np.where(ok, (np.asarray(lo) + np.asarray(hi)) / 2, np.nan)
            return y.reshape(-1, 1)
        return self._sample_balls(points)

    def _sample_balls(self, points: list) -> np.ndarray:
        ball = BallContext(64)
        rows = []
        for x in points:
            try:
                with ball.scope():
                    vals = flat_output(self.model, forward(ball, self.model,
                                                           shape_input(self.model, [ball.convert(v) for v in x])))
                rows.append([float(v.mid()) if v.is_finite() else np.nan for v in vals])
            except (Undecided, ZeroDivisionError):
                rows.append(None)
        k = max((len(r) for r in rows if r is not None), default=1)
        return np.array([r if r is not None else [np.nan] * k for r in rows], dtype=float)


def _meet_linear(linear, lo, hi, ok, method):
    """The float enclosures met with the linear ones (either alone where the other failed); the
    method is "linear" where the linear bound narrowed the float one."""
    llo, lhi, lok = linear
    both = ok & lok
    nlo = np.where(both, np.maximum(lo, llo), np.where(lok, llo, lo))
    nhi = np.where(both, np.minimum(hi, lhi), np.where(lok, lhi, hi))
    if (both & (nlo > nhi)).any():
        raise ArithmeticError("two enclosures of one box are disjoint: an evaluation is unsound")
    tighter = lok & (~ok | (nlo > lo) | (nhi < hi))
    return nlo, nhi, ok | lok, np.where(tighter, "linear", method)


#: Balls reaching beyond ``2^4096`` in magnitude enclose nothing useful, and their exact ends
#: would be integers of astronomical size (a Taylor model's remainder of ``e^(rad^2)`` reached
#: ``10^(7.5·10^12)``, and turning it into a Fraction never ended): such an enclosure is dropped.
_HUGE = flint.arb(2) ** 4096


def _usable(b) -> bool:
    """Whether the ball ``b`` is finite and below :data:`_HUGE` in magnitude."""
    return b.is_finite() and abs(b).upper() < _HUGE


def meet_graph_linear(graph, box: Box, prec: int, enc: Enclosure | None,
                       rows: list | None = None) -> Enclosure | None:
    """``enc`` met with the graph's backward linear bounds over ``box`` (method "linear" where those
    are narrower at some output; Taylor models, which keep the outputs' correlation, stay with it);
    with objective ``rows``, also the bounds of ``<c, T>`` from the pass started at each row ``c``
    (the enclosure's ``objectives``)."""
    from .linear_graph import linear_graph_objective_bounds

    try:
        lin, objs = linear_graph_objective_bounds(graph, box.centre, box.half, rows, prec)
    except (Undecided, ZeroDivisionError, ValueError):
        lin = objs = None
    ball = BallContext(prec)
    pairs = None
    if objs is not None and all(_usable(a) and _usable(b) for a, b in objs):
        pairs = tuple((ball.to_fraction_bounds(a)[0], ball.to_fraction_bounds(b)[1]) for a, b in objs)
    if lin is None or not all(_usable(a) and _usable(b) for a, b in lin):
        if enc is None or pairs is None:
            return enc
        return Enclosure(enc.lo, enc.hi, enc.method, enc.ctx, enc.vals, _meet_pairs(enc.objectives, pairs))
    lo = tuple(ball.to_fraction_bounds(a)[0] for a, _ in lin)
    hi = tuple(ball.to_fraction_bounds(b)[1] for _, b in lin)
    if enc is None:
        return Enclosure(lo, hi, "linear", objectives=pairs)
    met = enc.meet(Enclosure(lo, hi, "linear", objectives=pairs))
    narrower = any(a > b for a, b in zip(met.lo, enc.lo)) or any(a < b for a, b in zip(met.hi, enc.hi))
    if not narrower:
        return met
    # the Taylor models stay with a "linear" enclosure (a property's constraint reads them); balls do not
    keep = (enc.ctx, enc.vals) if enc.method == "taylor" else (None, None)
    return Enclosure(met.lo, met.hi, "linear", *keep, met.objectives)


def _from_balls(ball: BallContext, balls, method, ctx, vals) -> Enclosure:
    ends = [ball.to_fraction_bounds(b) for b in balls]
    return Enclosure(tuple(e[0] for e in ends), tuple(e[1] for e in ends), method, ctx, vals)


# ------------------------------------------------------------------------------------------------
# points


def random_points(box: Box, n: int, rng: random.Random, bits: int = 20) -> list:
    """``n`` exact points of the box, each coordinate ``lo + (hi - lo) k / 2^bits``."""
    N = 1 << bits
    return [tuple(a + (b - a) * Fraction(rng.randrange(N + 1), N) for a, b in zip(box.lo, box.hi))
            for _ in range(n)]


def _clip(box: Box, x) -> tuple:
    """The exact point of the box nearest the float point ``x``."""
    return tuple(min(max(Fraction(float(v)), a), b) for v, a, b in zip(x, box.lo, box.hi))


def descend(evaluator: BoxEvaluator, score, box: Box, starts: list, steps: int = 12,
            deadline: float | None = None) -> tuple[list, np.ndarray]:
    """Signed-gradient descent of ``score`` (a function of the ``(P, k)`` outputs, one float per
    point, lower is better) from all starts at once: finite differences in float, a step of a
    quarter of the box's sides that halves (per start) when it does not improve.  Returns the
    visited points and their scores."""
    widths = np.array([float(b - a) for a, b in zip(box.lo, box.hi)])
    axes = np.flatnonzero(widths > 0)
    if not starts or not len(axes):
        return [], np.zeros(0)
    his = np.array([float(b) for b in box.hi])
    xs = [tuple(x) for x in starts]
    f = score(evaluator.sample(xs))
    step = np.full(len(xs), 0.25)
    seen, scores = [], []
    for _ in range(steps):
        live = [i for i in range(len(xs)) if np.isfinite(f[i]) and step[i] >= 1e-6]
        if not live or (deadline is not None and time.monotonic() >= deadline):
            break
        probes, where = [], []
        for i in live:
            xf = np.array([float(v) for v in xs[i]])
            for a in axes:
                p = xf.copy()
                h = max(widths[a] * 1e-6, 1e-12)
                p[a] = p[a] + h if p[a] + h <= his[a] else p[a] - h
                probes.append(_clip(box, p))
                where.append((i, a, xf))
        fs = score(evaluator.sample(probes))
        grads = {i: np.zeros(len(widths)) for i in live}
        for (i, a, xf), p, fi in zip(where, probes, fs):
            dx = float(p[a]) - xf[a]
            if np.isfinite(fi) and dx != 0:
                grads[i][a] = (fi - f[i]) / dx
        moved = [i for i in live if grads[i].any()]
        if not moved:
            break
        ys = [_clip(box, np.array([float(v) for v in xs[i]]) - step[i] * widths * np.sign(grads[i])) for i in moved]
        fy = score(evaluator.sample(ys))
        for i, y, v in zip(moved, ys, fy):
            seen.append(y)
            scores.append(v)
            if np.isfinite(v) and v < f[i]:
                xs[i], f[i] = y, v
            else:
                step[i] /= 2
    return seen, np.array(scores, dtype=float)


# ------------------------------------------------------------------------------------------------
# the search


@dataclass
class Limits:
    max_boxes: int = 20000  # boxes evaluated
    timeout: float | None = None  # seconds of wall clock
    min_width: Fraction = Fraction(1, 2**20)  # a box whose half-width is below this is not split
    samples: int = 64  # random points of the falsification pass before the search
    seed: int = 0


@dataclass
class SearchResult:
    verdict: Verdict
    counterexample: dict | None
    decided: list  # [(Box, Enclosure)] the problem decided
    open: list  # [(Box, Enclosure or None)] left undecided (unsplit or too small)
    evaluated: int
    seconds: float
    stopped: str | None = None  # None (finished), "timeout", "max-boxes" or "min-width"
    decided_fraction: Fraction = Fraction(0)  # of the searched box's volume (sides of positive width)
    methods: dict = field(default_factory=dict)  # enclosures kept, by evaluator


class Problem:
    """What a search decides.  Subclasses override what they need."""

    #: run the falsification pass (random points, corners, descents) before the search
    falsify = True
    #: sample the centres of the starting boxes and of every new box, re-checking the most
    #: violating rigorously (False for a problem whose evaluator decides a box's centre with the box)
    probe = True
    #: what :meth:`decide` and :meth:`priority` say of a box depends on the box and its enclosure
    #: alone (never on what the search has learnt since), so a queued box is not asked again
    stable = False

    def decide(self, box: Box, enc: Enclosure) -> Verdict:
        """PROVED when nothing is left to do on the box, REFUTED when its enclosure shows a
        counterexample (:meth:`counterexample` gives it), else UNDECIDED (refine it)."""
        return Verdict.UNDECIDED

    def split(self, box: Box, enc: Enclosure | None) -> tuple:
        """The two halves a box is refined into (default: along its widest side)."""
        return box.split()

    def counterexample(self, box: Box, enc: Enclosure) -> dict | None:
        """The counterexample record of a box :meth:`decide` found REFUTED."""
        return None

    def priority(self, box: Box, enc: Enclosure | None) -> float:
        """Smaller first."""
        return -float(box.width())

    def score(self, ys: np.ndarray) -> np.ndarray:
        """A float per sampled point, ``<= 0`` where it looks like a counterexample (lower is
        more violating); ``+inf`` everywhere for a problem without counterexamples."""
        return np.full(len(ys), np.inf)

    def observe(self, points: list, ys: np.ndarray) -> None:
        """Sampled outputs at exact points (what a bound's sampled range is made of)."""

    def refutes(self, x, enc: Enclosure) -> dict | None:
        """A counterexample record when the rigorous outputs ``enc`` at ``x`` violate the
        property, else None."""
        return None

    def objectives(self) -> list:
        """Scores to descend on during the search (default: :meth:`score`; none: no descents)."""
        return [self.score]

    def stop(self) -> str | None:
        """A reason to end the search undecided now (read before each step), else None: for a
        problem that learns from what it has seen that no box left can be decided."""
        return None


def _probe(problem: Problem, ev: BoxEvaluator, points: list, ys: np.ndarray | None = None,
           recheck: int = 3) -> dict | None:
    """Sample ``points``, and re-check the most violating ones rigorously."""
    if not points:
        return None
    ys = ev.sample(points) if ys is None else ys
    problem.observe(points, ys)
    s = problem.score(ys)
    order = [i for i in np.argsort(s, kind="stable")[:recheck] if s[i] <= 0]
    for i in order:
        hit = _rigorous(problem, ev, points[i])
        if hit is not None:
            return hit
    return None


def _rigorous(problem: Problem, ev: BoxEvaluator, x) -> dict | None:
    for prec in (ev.prec, 4 * ev.prec):
        enc = ev.at(x, prec)
        if enc is None:
            continue
        hit = problem.refutes(x, enc)
        if hit is not None or enc.method == "exact":
            return hit
    return None


def _falsify(problem: Problem, ev: BoxEvaluator, box: Box, rng, n: int, pool: list,
             deadline: float | None) -> dict | None:
    """The pass before the search: corners, centre, random points, then descents."""
    pts = [box.lo, box.hi, box.centre] + random_points(box, n, rng)
    for k, p in enumerate(pts[:3]):  # the extreme corners exactly (where the network admits it) and
        enc = ev.at(p) if k == 2 else ev._exact(p)  # the centre in balls too, whatever the floats say
        hit = None if enc is None else problem.refutes(p, enc)
        if hit is not None:
            return hit
    ys = ev.sample(pts)
    hit = _probe(problem, ev, pts, ys)
    if hit is not None:
        return hit
    _remember(pool, pts, ys, problem)
    return _descents(problem, ev, box, pool, deadline)


def _remember(pool: list, pts, ys, problem: Problem, keep: int = 8) -> None:
    """The best points seen for each objective (``pool``: one list per objective)."""
    for k, obj in enumerate(problem.objectives()):
        s = obj(ys)
        while len(pool) <= k:
            pool.append([])
        pool[k].extend((float(v), p) for v, p in zip(s, pts) if np.isfinite(v))
        pool[k].sort(key=lambda t: t[0])
        del pool[k][keep:]


def _descents(problem: Problem, ev: BoxEvaluator, box: Box, pool: list, deadline):
    """A descent on each objective from its best points so far (fewer and shorter in balls)."""
    starts, steps = ev.descent
    for k, obj in enumerate(problem.objectives()):
        if k >= len(pool):
            break
        seen, _ = descend(ev, obj, box, [p for _, p in pool[k][:starts]], steps, deadline)
        if seen:
            ys = ev.sample(seen)
            hit = _probe(problem, ev, seen, ys)
            if hit is not None:
                return hit
            _remember(pool, seen, ys, problem)
    return None


def search(problem: Problem, ev: BoxEvaluator, box: Box, limits: Limits | None = None,
           progress=None, initial: list | None = None) -> SearchResult:
    """Decide ``problem`` over ``box`` (see the module docstring).

    ``ev`` is a :class:`BoxEvaluator` or any object with its members ``enclose``, ``sample``,
    ``at``, ``prec``, ``counts``, ``batch`` and ``descent`` (``enclose``, ``counts`` and ``batch``
    suffice for a problem without falsification, probes or objectives).  An evaluator with a
    ``stream(boxes, parents, deadline)`` method, yielding ``[(index, enclosure)]`` chunks as they
    complete, has each box admitted as it is read, with progress after each (for a problem
    without probes).  ``initial``: boxes
    partitioning ``box`` to start from (default ``[box]``); their centres are probed like those
    of new boxes.
    ``progress(fraction, evaluated)``: the exact part of the box's volume decided so far, and the
    number of boxes evaluated.  A refuted result's ``open`` holds every box not decided (with the
    ones being refined replaced by their halves), so ``decided + open`` covers ``box`` whatever
    the verdict."""
    limits = limits or Limits()
    t0 = time.monotonic()
    deadline = None if limits.timeout is None else t0 + limits.timeout
    rng = random.Random(limits.seed)
    axes = [i for i, (a, b) in enumerate(zip(box.lo, box.hi)) if b > a]
    total = measure(box, axes)
    pool: list = []
    decided: list = []
    small: list = []
    done_volume = Fraction(0)
    heap: list = []
    tick = 0
    stopped = None
    # an evaluator that encloses in stages (floats first) is told what decides a box
    decides = {"decide": problem.decide} if getattr(ev, "takes_decide", False) else {}

    def finish(verdict, cex=None, opened=()):
        frac = done_volume / total if total else Fraction(int(not opened and verdict is not Verdict.REFUTED))
        return SearchResult(verdict, cex, decided, list(opened), evaluated, time.monotonic() - t0, stopped, frac,
                            dict(ev.counts))

    def still_open(extra=()):
        return [(b, e) for _, _, b, e in heap] + small + list(extra)

    def admit(pairs):
        """Each new ``(box, enclosure)``: decided (recorded with its volume), or queued by priority.
        A box the problem refutes ends the admission: ``(counterexample, the pairs not admitted)``
        is returned, else None."""
        nonlocal done_volume, tick
        pairs = list(pairs)
        for k, (b, e) in enumerate(pairs):
            verdict = Verdict.UNDECIDED if e is None else problem.decide(b, e)
            if verdict is Verdict.PROVED:
                decided.append((b, e))
                done_volume += measure(b, axes)
                continue
            if verdict is Verdict.REFUTED:
                return problem.counterexample(b, e), pairs[k:]
            tick += 1
            heapq.heappush(heap, (problem.priority(b, e), tick, b, e))
        if progress is not None:
            progress(done_volume if total == 1 else done_volume / total if total else Fraction(0), evaluated)
        return None

    evaluated = 0
    if problem.falsify:
        cex = _falsify(problem, ev, box, rng, limits.samples, pool, deadline)
        if cex is not None:
            return finish(Verdict.REFUTED, cex, [(box, None)])
    stream = getattr(ev, "stream", None) if not problem.probe else None

    def streamed(boxes, parents, dl):
        """Enclose ``boxes`` batch by batch, as ``ev.stream`` completes them, and admit each box as
        it is read (progress after each); stop reading at a refuted box (the boxes not read stay
        open, unevaluated): the refuted result, else None."""
        nonlocal evaluated
        read = [False] * len(boxes)
        chunks = stream(boxes, parents, dl)
        try:
            for chunk in chunks:
                for n, (i, e) in enumerate(chunk):
                    read[i] = True
                    evaluated += 1
                    refuted = admit([(boxes[i], e)])
                    if refuted is not None:
                        rest = [(boxes[j], f) for j, f in chunk[n + 1:]]
                        for j, _ in chunk[n + 1:]:
                            read[j] = True
                        unread = [(b, None) for b, r in zip(boxes, read) if not r]
                        return finish(Verdict.REFUTED, refuted[0], still_open(list(refuted[1]) + rest + unread))
        finally:
            chunks.close()
        return None

    starts = [box] if initial is None else list(initial)
    if stream is not None:
        done = streamed(starts, None, None)
        if done is not None:
            return done
    else:
        encs = ev.enclose(starts, deadline=None, **decides)
        evaluated += len(starts)
        if initial is not None and problem.probe:
            cs = [b.centre for b in starts]
            ys = ev.sample(cs)
            hit = _probe(problem, ev, cs, ys)
            if hit is not None:
                return finish(Verdict.REFUTED, hit, list(zip(starts, encs)))
            _remember(pool, cs, ys, problem)
        refuted = admit(zip(starts, encs))
        if refuted is not None:
            return finish(Verdict.REFUTED, refuted[0], still_open(refuted[1]))
    batch = ev.batch
    last_descent = time.monotonic()
    descending = 0.0
    while heap:
        if deadline is not None and time.monotonic() >= deadline:
            stopped = "timeout"
            break
        reason = problem.stop()
        if reason is not None:
            stopped = reason
            break
        room = (limits.max_boxes - evaluated) // 2  # boxes that can be halved within the budget
        if room < 1:
            stopped = "max-boxes"
            break
        pick = []
        while heap and len(pick) < min(batch, room):
            pr, _, b, e = heapq.heappop(heap)
            if not problem.stable:
                if e is not None and problem.decide(b, e) is Verdict.PROVED:
                    decided.append((b, e))
                    done_volume += measure(b, axes)
                    continue
                now = problem.priority(b, e)
                if now > pr and heap and now > heap[0][0]:  # it fell behind another box: back in line
                    tick += 1
                    heapq.heappush(heap, (now, tick, b, e))
                    continue
            if b.half_width_below(limits.min_width):
                small.append((b, e))
                continue
            pick.append((b, e))
        if not pick:
            continue
        children, parents = [], []
        for b, e in pick:
            for c in problem.split(b, e):
                children.append(c)
                parents.append(e)
        if stream is not None:
            done = streamed(children, parents, deadline)
            if done is not None:
                return done
            continue
        if problem.probe:
            cs = [c.centre for c in children]  # the centres first: cheaper than the enclosures
            ys = ev.sample(cs)
            hit = _probe(problem, ev, cs, ys)
            if hit is not None:
                return finish(Verdict.REFUTED, hit, still_open(pick))
        encs = ev.enclose(children, parents, deadline, **decides)
        evaluated += len(children)
        if problem.probe:
            _remember(pool, cs, ys, problem)
        now = time.monotonic()
        if now - last_descent > 1.0 and descending <= DESCENT_SHARE * (now - t0) and problem.objectives():
            hit = _descents(problem, ev, box, pool, deadline)
            last_descent = time.monotonic()
            descending += last_descent - now
            if hit is not None:
                return finish(Verdict.REFUTED, hit, still_open(zip(children, encs)))
        refuted = admit(zip(children, encs))
        if refuted is not None:
            return finish(Verdict.REFUTED, refuted[0], still_open(refuted[1]))
    opened = still_open()
    if stopped is None and small:
        stopped = "min-width"
    if opened:
        return finish(Verdict.UNDECIDED, None, opened)
    return finish(Verdict.PROVED)


def partition(ev: BoxEvaluator, box: Box, split: int = 0, width=None, progress=None) -> tuple[list, int]:
    """``([(Box, Enclosure)], evaluated)``: the fixed partition of ``box`` (halving the widest side
    ``split`` times, or until every side is at most ``width``), level by level, every box's
    enclosure met with its parent's -- so a finer partition never gives a wider union."""
    level = [(box, None)]
    leaves: list = []
    evaluated = 0
    depth = 0
    while level:
        encs = ev.enclose([b for b, _ in level], [e for _, e in level])
        evaluated += len(level)
        nxt = []
        for (b, _), e in zip(level, encs):
            more = b.width() > width if width is not None else depth < split
            if more:
                nxt.extend((c, e) for c in b.split())
            else:
                leaves.append((b, e))
        if progress is not None:
            progress(len(leaves), evaluated)
        level = nxt
        depth += 1
    return leaves, evaluated


def float_ends(enc: Enclosure) -> tuple[list, list]:
    """The enclosure's ends as floats (for steering, never for a result)."""
    return [_f(v) for v in enc.lo], [_f(v) for v in enc.hi]


def _f(q: Fraction) -> float:
    try:
        return float(q)
    except OverflowError:
        return math.inf if q > 0 else -math.inf
