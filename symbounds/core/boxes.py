"""Whole-domain bounds: ``sup_{x in [0,1]^d} |T(x) - g(x)| <= eps`` proved box by box.

The network is evaluated on each input box with first-order Taylor models, so the output model
encloses ``T`` over the whole box: first in outward-rounded float64 over a batch of boxes at once
(:mod:`symbounds.core.float_boxes`), and in Arb balls (:mod:`symbounds.core.taylor`) for a box the
floats cannot enclose once it can no longer be split.  The target is enclosed over the box by
evaluating its SymPy expression on Arb balls.  A box is proved when the upper end of
``|T(box) - g(box)|`` is at most ``eps``; otherwise it is split (along its widest side, or the
side the gradient picks), down to ``min_width``.  A box whose centre violates the bound (decided
rigorously, in floats rounded outward or in balls) refutes the claim with a counterexample.  The
boxes are searched by the shared best-first search of :mod:`symbounds.core.search`
(:class:`CertifyProblem`, :class:`CertifyEvaluator`), which owns the queue, the verdicts, the
limits and the progress; the evaluator here owns the worker processes and Dask.

The certified network is a concrete rational one: a model file (``symbounds-transformer/1``)
read back exactly.  Certificates built on these boxes are in :mod:`symbounds.core.certificate`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import multiprocessing
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from . import outward as fo
from .claims import Verdict
from .contexts import BallContext, Undecided
from .exact import arb_to_fraction
from .expr import parse_target, variables
from .float_boxes import FloatBoxEvaluator
from .float_target import compile_target
from .modelfile import model_from_json
from .search import Box, Limits, Problem, float_evaluator, search
from .taylor import TaylorContext
from .transformer import forward

__all__ = [
    "Box",
    "CertifyOptions",
    "CertifyResult",
    "LocalPool",
    "WorkersLost",
    "box_bound",
    "box_bounds",
    "boxes_cover_cube",
    "certify_model",
    "digest",
    "point_error",
    "round_up_record",
]


#: Boxes per batch of the float pass (a worker's unit of work).
BATCH = 256
#: The box budget of :class:`CertifyOptions` when ``max_boxes`` is None.
DEFAULT_MAX_BOXES = 200_000


@dataclass
class CertifyOptions:
    prec: int = 128
    initial: int | None = None  # boxes per axis to start with (default by dimension)
    min_width: Fraction = Fraction(1, 2**20)
    max_boxes: int | None = DEFAULT_MAX_BOXES  # None: DEFAULT_MAX_BOXES (callers that know P scale it)
    workers: int = 1  # local processes
    scheduler: str | None = None  # a Dask scheduler address (optional extra "dask")
    model_prec: int = 192
    fast: bool = True  # float64 Taylor models first (Arb for the boxes they cannot decide)
    split: str = "widest"  # or "gradient": the side a box that missed eps is halved along (BENCHMARKS.md)
    timeout: float | None = None  # seconds of wall clock (checked between steps of the search)
    #: the softmax-weighted values centred, as a ratio of sums and met with their convex hull
    #: (float_boxes._weighted_values), from a coarser first grid: 10 to 70 times fewer boxes
    #: (BENCHMARKS.md, "Fewer boxes"); the checker kernel re-derives the same three tightenings
    #: (symbounds_kernel/hull.py), so the certificates stay kernel-checked; False: the plain pass
    tight: bool = True


@dataclass
class CertifyResult:
    verdict: Verdict  # proved / refuted / undecided
    boxes: list  # [(Box, Fraction bound)] for the proved boxes
    max_bound: Fraction | None
    counterexample: dict | None
    undecided: list  # boxes that could not be decided
    seconds: float
    evaluated: int
    extra: dict = field(default_factory=dict)
    #: why the search ended before every box was decided: None, "timeout", "max-boxes" or "min-width"
    stopped: str | None = None

    def __repr__(self) -> str:
        """The verdict, the box counts and the largest certified bound (rounded up), in one line."""
        from .display import short
        from .exact import decimal_up

        mb = "-" if self.max_bound is None else decimal_up(self.max_bound, 8)
        ce = "" if not self.counterexample else f", counterexample at x = ({', '.join(self.counterexample['x'])})"
        return short(f"CertifyResult({self.verdict}: {len(self.boxes)} boxes proved, {len(self.undecided)} "
                     f"undecided, {self.evaluated} evaluated, sup |T - g| <= {mb}{ce}, {self.seconds:.1f} s)")

    def _repr_latex_(self) -> str:
        from .display import tex_text
        from .exact import decimal_up

        mb = r"\text{-}" if self.max_bound is None else decimal_up(self.max_bound, 8)
        return (rf"$$\sup_{{x}} |T(x) - g(x)| \le {mb} \quad \text{{{tex_text(self.verdict)}: "
                rf"{len(self.boxes)} boxes proved, {len(self.undecided)} undecided}}$$")

    def _repr_html_(self) -> str:
        from .display import bold, html_table
        from .exact import decimal_up

        rows = [["verdict", bold(self.verdict)], ["boxes proved", str(len(self.boxes))],
                ["undecided boxes", str(len(self.undecided))], ["boxes evaluated", str(self.evaluated)],
                ["largest certified bound", "-" if self.max_bound is None else decimal_up(self.max_bound, 8)],
                ["time", f"{self.seconds:.1f} s"]]
        if self.counterexample:
            rows.append(["counterexample x", ", ".join(self.counterexample["x"])])
        return html_table(["", ""], rows, "whole-domain certificate")


# ------------------------------------------------------------------------------------------
# evaluating one box


def box_bound(model, g, d: int, box: Box, prec: int) -> Fraction | None:
    """An exact upper bound of ``|T(x) - g(x)|`` over ``box``, or None if the Taylor models fail
    (a division by a model whose range contains 0, a non-finite enclosure)."""
    ctx = TaylorContext(prec, box.centre, box.half)
    try:
        T = forward(ctx, model, ctx.inputs())
    except Undecided:
        return None
    with ctx.ball.scope():
        return _error_bound(ctx.ball, g, variables(d), box, T.range())


#: Float bounds are recorded rounded up to this many significant bits: re-running the float pass
#: (e.g. with another BLAS thread count, which may sum in another order) then stays below them.
RECORD_BITS = 30
#: A float bound that misses its limit by at most this much (relative to the sizes involved) is
#: recomputed with the target in Arb balls, which can differ from the floats only by rounding.
ARB_SLACK = 2.0**-36


def box_bounds(model, g, d: int, boxes: list, prec: int, fast=None, limits=None, recheck=False,
               centres: list | None = None, axes: list | None = None, arb: bool = True,
               estimates: list | None = None) -> list:
    """``[bound or None]`` for each box: :func:`box_bound` for a batch.

    With a float evaluator ``fast`` (:func:`float_evaluator`), every box is first enclosed in
    outward-rounded float64; a box goes to :func:`box_bound` (Arb) when the floats fail, and with
    ``recheck`` also when its float bound is above its limit (``limits``: one exact number per
    box).  Arb rarely does better on a box the floats bound (the float pass shifts each softmax by
    the weight-averaged gradient, which is tighter), so certification does not recheck; ``check``
    does, because a certificate made in Arb records Arb's bounds.  A float bound under its limit
    is rounded up to :data:`RECORD_BITS` bits, but never above the limit.

    With ``arb=False`` a box the floats cannot enclose is left at None (certification splits it
    instead: at a large ``P`` the Arb setup alone takes many minutes).

    ``centres``, a list, receives for each box whose bound is above its limit whether the model's
    own enclosure at the box's centre proves ``|T - g| >`` the limit (the error's enclosure as
    text), disproves it (False) or cannot tell (None); see :func:`centre_refutes` for a tighter
    second look.  ``axes``, a list, receives for each box the input whose linear term widens
    the enclosure most (None where the floats did not enclose the box).  ``estimates``, a list,
    receives for those boxes the distance of the model's centre value from ``g``'s there (a
    float; None where unknown): a likely violation when it exceeds the limit.

    The target is enclosed over the boxes in outward-rounded floats, compiled once
    (:func:`symbounds.core.float_target.compile_target`); in Arb balls where the floats cannot
    enclose it, or where the float bound misses its limit by no more than rounding could explain
    (relative :data:`ARB_SLACK`), or, with ``recheck``, wherever it misses."""
    out: list = [None] * len(boxes)
    todo = range(len(boxes))
    if centres is not None:
        centres[:] = [None] * len(boxes)
    if axes is not None:
        axes[:] = [None] * len(boxes)
    if estimates is not None:
        estimates[:] = [None] * len(boxes)
    if fast is not None and boxes:
        ends = _double_ends(boxes) if isinstance(fast, FloatBoxEvaluator) else None
        if ends is not None:  # the ends as exact doubles: the same floats as from the Fractions
            lo, hi, ok, clo, chi, ax = fast.enclose(*ends)
        else:
            lo, hi, ok, clo, chi, ax = fast.enclose([b.lo for b in boxes], [b.hi for b in boxes])
        if axes is not None:
            axes[:] = [int(a) if a >= 0 else None for a in ax]
        ball = BallContext(prec)
        xs = variables(d)
        gt = compile_target(g, d)
        glo, ghi = gt.enclose_boxes(boxes) if ends is None else gt.enclose(*ends)
        with np.errstate(all="ignore"):
            fbound = np.maximum(fo.up(hi - glo), fo.up(ghi - lo))  # |T - g| <= max(T_hi - g_lo, g_hi - T_lo)
            scale = np.abs(glo) + np.abs(ghi) + np.abs(lo) + np.abs(hi)
        todo = []
        missed = []
        below = _LimitFloor()
        for i, box in enumerate(boxes):
            bound = None
            lim = None if limits is None else limits[i]
            fb = None  # the bound while it is the float one (a double), else None
            if ok[i]:
                fb = float(fbound[i])
                if np.isfinite(fb):
                    bound = Fraction(fb)
                else:
                    fb = None
                if bound is None or (lim is not None and not below(fb, lim)
                                     and (recheck or fb - float(lim) <= ARB_SLACK * float(scale[i]) + ARB_SLACK**2)):
                    # undefined in floats, or missed by no more than rounding: g in Arb balls
                    arb_bound = _float_box_bound(ball, g, xs, box, lo[i], hi[i])
                    if bound is None or (arb_bound is not None and arb_bound < bound):
                        bound, fb = arb_bound, None
            if bound is not None and lim is not None:
                under = below(fb, lim) if fb is not None else bound <= lim
                if centres is not None and ok[i] and not under:
                    missed.append(i)
                if under:
                    bound = _record(fb, bound, lim, below)
                elif recheck:
                    bound = None
            elif centres is not None and ok[i] and limits is not None:
                missed.append(i)
            if bound is None:
                todo.append(i)
            else:
                out[i] = bound
        if missed:
            verdicts, est = _centre_verdicts(ball, g, xs, gt, None, clo[missed], chi[missed],
                                             [limits[i] for i in missed], boxes=[boxes[i] for i in missed])
            for i, v, e in zip(missed, verdicts, est):
                centres[i] = v
                if estimates is not None:
                    estimates[i] = e
    if fast is None or arb:
        for i in todo:
            out[i] = box_bound(model, g, d, boxes[i], prec)
    return out


def _float_box_bound(ball, g, xs, box: Box, lo: float, hi: float):
    """The exact upper end of ``|[lo, hi] - g(box)|`` (``g`` enclosed over the box in balls)."""
    with ball.scope():
        return _error_bound(ball, g, xs, box, ball.interval(Fraction(lo), Fraction(hi)))


def _error_bound(ball, g, xs, box: Box, T):
    """The exact upper end of ``|T - g(box)|`` for a ball ``T`` enclosing the network over the box
    (None if not finite); call inside ``ball.scope()``.  The union of the balls of a side's two
    exact ends contains the whole side, so ``g`` is enclosed over the box."""
    env = {x: ball.convert(a).union(ball.convert(b)) for x, a, b in zip(xs, box.lo, box.hi)}
    err = abs(T - ball.from_sympy(g, env=env))
    return arb_to_fraction(err.upper()) if err.is_finite() else None


def _violation(err, eps):
    """For a ball ``err`` of ``|T - g|``: its text when ``> eps`` is proved (a counterexample),
    False when ``<= eps`` is, None when undecided."""
    return err.str(20, radius=True) if err > eps else (False if err <= eps else None)


def round_up_record(q: Fraction) -> Fraction:
    """``q >= 0`` rounded up to :data:`RECORD_BITS` significant bits."""
    if q <= 0:
        return q
    e = q.numerator.bit_length() - q.denominator.bit_length() - RECORD_BITS
    scale = Fraction(2) ** (-e)
    n = -((-q * scale).numerator // (q * scale).denominator)
    return Fraction(n) / scale


def _double_ends(boxes: list):
    """``(lo, hi)``: float64 arrays of shape ``(B, d)`` equal to the boxes' ends exactly
    (:meth:`symbounds.core.search.Box.doubles`), or None when some end is not such a double."""
    los, his = [], []
    for b in boxes:
        e = b.doubles()
        if e is None:
            return None
        los.append(e[0])
        his.append(e[1])
    return np.array(los, dtype=np.float64), np.array(his, dtype=np.float64)


class _LimitFloor:
    """``below(x, lim)``: ``x <= lim`` exactly, for a double ``x`` and a rational ``lim``, as the
    float comparison ``x <= f`` with ``f`` the largest double ``<= lim`` (found once per limit): a
    double is at most ``lim`` exactly when it is at most ``f``.  (A limit outside the double range
    or not rational is compared as a Fraction.)"""

    def __init__(self):
        self.lim, self.floor = _UNSET, None  # the last limit seen (most calls repeat one object)

    def __call__(self, x: float, lim) -> bool:
        if lim is not self.lim:
            self.lim, self.floor = lim, _floor_double(lim)
        f = self.floor
        if f is None:
            return Fraction(x) <= lim
        return x <= f


_UNSET = object()


def _floor_double(lim):
    """The largest double ``<= lim`` for a rational ``lim`` in the double range, else None."""
    q = _rational(lim)
    if q is None:
        return None
    try:
        f = float(q)  # correctly rounded
    except OverflowError:
        return None
    if not math.isfinite(f):
        return None
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def _rational(v):
    """``v`` as a Fraction when it is an int, Fraction or SymPy Rational (exactly), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, Fraction)):
        return Fraction(v)
    p, q = getattr(v, "p", None), getattr(v, "q", None)
    if getattr(v, "is_Rational", False) and isinstance(p, int) and isinstance(q, int):
        return Fraction(p, q)
    return None


def _record(fb, bound: Fraction, lim, below: _LimitFloor) -> Fraction:
    """``min(round_up_record(bound), lim)`` for a bound at most ``lim``; ``fb``, when not None,
    is the bound as a double (``bound == fb``), rounded up in floats: for ``2^-1000 <= fb <=
    2^1000``, with ``e`` as :func:`round_up_record` finds it from the bound's numerator and
    denominator, ``fb 2^-e`` (about ``2^30``), its ceiling and the ceiling times ``2^e`` are all
    exact doubles (powers of two scale exactly in the normal range, and the result has at most
    31 significant bits), so the result is :func:`round_up_record`'s, and it is compared with
    ``lim`` exactly through ``below`` (a :class:`_LimitFloor`)."""
    if fb is not None and _TINY <= fb <= _HUGE:
        n, den = fb.as_integer_ratio()
        e = n.bit_length() - den.bit_length() - RECORD_BITS
        r = math.ldexp(math.ceil(math.ldexp(fb, -e)), e)
        return Fraction(r) if below(r, lim) else lim
    return min(round_up_record(bound), lim)


_TINY, _HUGE = 2.0**-1000, 2.0**1000


def _centre_verdict(ball, g, xs, c, lo: float, hi: float, eps):
    """Is ``|[lo, hi] - g(c)| > eps``: the enclosure of that error as text when proved (a
    counterexample), False when disproved, None when undecided."""
    with ball.scope():
        gv = ball.from_sympy(g, env={x: ball.convert(v) for x, v in zip(xs, c)})
        return _violation(abs(ball.interval(Fraction(lo), Fraction(hi)) - gv), ball.convert(eps))


def _centre_verdicts(ball, g, xs, gt, cs, lo, hi, lims, boxes: list | None = None):
    """:func:`_centre_verdict` for the centres ``cs`` with ``T(c)`` in ``[lo_k, hi_k]``, ``g(c)``
    enclosed by the compiled float target ``gt`` (balls where it cannot, or to write out a
    violation); also each centre's estimate ``|mid T - mid g|`` (a float).  With ``boxes`` (and
    ``cs`` None) the centres are the boxes': as exact doubles where they are
    (:meth:`symbounds.core.search.Box.centre_doubles`, the same floats the Fractions give), as
    Fractions only for a ball."""
    if boxes is not None:
        cd = [b.centre_doubles() for b in boxes]
        if all(c is not None for c in cd):
            pts = np.array(cd, dtype=np.float64).reshape(len(boxes), -1)
            glo, ghi = gt.enclose(pts, pts)
            cs = _Centres(boxes)
        else:
            cs = [b.centre for b in boxes]
            glo, ghi = gt.enclose_boxes([Box(c, c) for c in cs])
    else:
        glo, ghi = gt.enclose_boxes([Box(c, c) for c in cs])
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    with np.errstate(all="ignore"):
        e_lo = np.maximum(fo.down(lo - ghi), fo.down(glo - hi))
        e_hi = np.maximum(fo.up(hi - glo), fo.up(ghi - lo))
        est = np.abs((lo * 0.5 + hi * 0.5) - (glo * 0.5 + ghi * 0.5))
    verdicts, ests = [], []
    below = _LimitFloor()
    for k in range(len(cs)):
        a, b = float(e_lo[k]), float(e_hi[k])
        if not (np.isfinite(a) and np.isfinite(b)) or not below(a, lims[k]):
            v = _centre_verdict(ball, g, xs, cs[k], lo[k], hi[k], lims[k])
        else:
            v = False if below(b, lims[k]) else None
        verdicts.append(v)
        e = float(est[k])
        ests.append(e if np.isfinite(e) else None)
    return verdicts, ests


class _Centres:
    """The boxes' exact centres, each found when read."""

    def __init__(self, boxes):
        self.boxes = boxes

    def __len__(self):
        return len(self.boxes)

    def __getitem__(self, k):
        return self.boxes[k].centre


def centre_refutes(model, g, d: int, boxes: list, prec: int, fast, eps) -> list:
    """For each box: the enclosure of ``|T - g|`` at its centre as text when ``> eps`` is proved
    there in outward-rounded floats, False when disproved, None when the floats cannot decide (no
    evaluator, or too wide)."""
    if fast is None or not boxes:
        return [None] * len(boxes)
    cs = [b.centre for b in boxes]
    lo, hi, ok = fast.ranges(cs, cs)
    ball = BallContext(prec)
    xs = variables(d)
    idx = [i for i in range(len(cs)) if ok[i]]
    out: list = [None] * len(cs)
    if idx:
        verdicts, _ = _centre_verdicts(ball, g, xs, compile_target(g, d), [cs[i] for i in idx], lo[idx], hi[idx],
                                       [eps] * len(idx))
        for i, v in zip(idx, verdicts):
            out[i] = v
    return out


def point_error(model, g, d: int, x, prec: int):
    """The ball ``|T(x) - g(x)|`` at a point (for counterexamples)."""
    ctx = BallContext(prec)
    with ctx.scope():
        T = forward(ctx, model, x)
        gv = ctx.from_sympy(g, env={s: ctx.convert(v) for s, v in zip(variables(d), x)})
        return abs(T - gv)


# worker processes: the model and target are set once per process
_W: dict = {}


def _worker_init(model_json, target_text, d, prec, eps=None, fast=True, key=None, tight=True):
    """Parse the model and target and build the float setup, unless this process has them for
    ``key`` already (a forked process inherits the parent's; a Dask worker keeps them between
    batches)."""
    key = key or (digest(model_json), target_text, d, prec, eps, fast)
    if _W.get("key") == key:
        if _W["fast"] is not None:
            _W["fast"].tight = tight
        return
    _W.clear()
    _W["model"] = model_from_json(model_json)
    _W["g"] = parse_target(target_text, d)
    compile_target(_W["g"], d)  # once per process (cached; forked workers inherit it)
    _W["d"] = d
    _W["prec"] = prec
    q = None if eps is None else _rational(eps)
    _W["eps"] = eps if q is None else q  # compared with every box's bound: a Fraction
    _W["fast"] = float_evaluator(_W["model"], prec) if fast else None
    if _W["fast"] is not None:
        _W["fast"].tight = tight
    _W["key"] = key


def _pool_init(*setup):
    """A pool process: Ctrl-C goes to the parent alone (which stops the pool and reports once)."""
    ignore_sigint()
    _worker_init(*setup)


def ignore_sigint() -> None:
    """Initializer of worker processes: ignore SIGINT, so that an interrupt is reported by the
    parent only, not once more by every worker.  (Workers are forked inside :func:`sigint_blocked`:
    an interrupt that arrives before this runs stays pending, and is dropped here.)"""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def sigint_blocked():
    """Block SIGINT in this thread while worker processes are forked: a child inherits the mask,
    so Ctrl-C (sent to the whole process group) cannot reach it between the fork and
    :func:`ignore_sigint`; the parent receives a pending interrupt when the block ends."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _worker_eval(boxes):
    """``[(box, bound, centre, axis)]`` for a batch.  ``bound`` is None where the box could not be
    enclosed (in floats; Arb is left to the parent for boxes that cannot be split); ``centre``
    is, for the boxes whose bound misses ``eps``, a counterexample's error (text), False, or None
    (undecided); ``axis`` is the side the float pass suggests halving."""
    W = _W
    eps = W["eps"]
    fast = W["fast"]
    first: list = []
    axes: list = []
    est: list = []
    bounds = box_bounds(W["model"], W["g"], W["d"], boxes, W["prec"], fast, [eps] * len(boxes), centres=first,
                        axes=axes, arb=False, estimates=est)
    missed = [i for i, b in enumerate(bounds) if b is None or b > eps]
    if fast is None:  # balls at every centre, as the boxes were
        ceps = BallContext(W["prec"]).convert(eps)
        for i in missed:
            first[i] = _violation(point_error(W["model"], W["g"], W["d"], boxes[i].centre, W["prec"]), ceps)
    else:
        # the centre: first the box's own model at delta = 0, then (if that cannot tell, and its
        # centre value is more than eps from g's, a likely violation) a float point pass; else the
        # halves' centres, with tighter models, take over (also, unless CENTRE_PASS_NO_MODEL, for a
        # box the float pass could not enclose)
        feps = float(eps)
        again = [i for i in missed
                 if first[i] is None and (est[i] > feps if est[i] is not None else CENTRE_PASS_NO_MODEL)]
        for i, v in zip(again, centre_refutes(W["model"], W["g"], W["d"], [boxes[i] for i in again], W["prec"],
                                              fast, eps)):
            first[i] = v
    return [(box, bound, first[i], axes[i]) for i, (box, bound) in enumerate(zip(boxes, bounds))]


#: Whether a box whose float pass failed (no model: a softmax normaliser's range contains 0, or
#: a bound overflowed, as on the wide first boxes of the tight pass) still gets the float point
#: pass at its centre (:func:`centre_refutes`).  False: only a box with a model whose centre
#: enclosure cannot decide and whose centre value is more than eps from g's gets it; a box with
#: no model leaves its centre to its halves (each evaluated with its own model), and a box that
#: can no longer be split to the balls at its centre (:class:`CertifyEvaluator`).
CENTRE_PASS_NO_MODEL = False


def _pool_task(boxes):
    """One batch in a local worker process (the function is looked up when the task runs)."""
    return _worker_eval(boxes)


class WorkersLost(RuntimeError):
    """Worker processes kept dying (killed, out of memory): the run stopped, undecided."""


#: How many times a local pool whose worker died is replaced (its lost batches re-run) before
#: the run stops with :class:`WorkersLost`.
MAX_RESTARTS = 3


class LocalPool:
    """``imap``-like evaluation of batches in forked worker processes (``task(batch)``, results in
    the order they complete; by default the box batches of :func:`certify_model`).

    A :class:`multiprocessing.pool.Pool` replaces a worker that dies but loses its task, so the
    run would wait for it forever.  A :class:`ProcessPoolExecutor` instead fails every pending
    task with :class:`BrokenProcessPool`; then the batches whose results are missing are re-run on
    a fresh pool, at most :data:`MAX_RESTARTS` times in one run (a batch that kills its worker
    each time stops the run with :class:`WorkersLost`)."""

    def __init__(self, workers: int, initargs, task=None, initializer=None):
        self.workers, self.initargs = workers, initargs
        self.task, self.initializer = task or _pool_task, initializer or _pool_init
        self.restarts = 0
        self.ex = None

    def _start(self):
        self.ex = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"),
                                      initializer=self.initializer, initargs=self.initargs)

    def imap(self, batches):
        todo = dict(enumerate(batches))
        while todo:
            if self.ex is None:
                self._start()
            pending: dict = {}
            broken = False
            with sigint_blocked():  # the workers are forked at the first submit
                try:
                    for i, b in todo.items():
                        pending[self.ex.submit(self.task, b)] = i
                except BrokenProcessPool:  # a worker died while the pool was idle
                    broken = True
            while pending and not broken:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    i = pending.pop(fut)
                    try:
                        res = fut.result()
                    except BrokenProcessPool:
                        broken = True
                        continue
                    del todo[i]
                    yield res
            if broken:
                # results already computed before the break are kept; the rest run again
                for fut, i in list(pending.items()):
                    if fut.done() and not fut.cancelled() and fut.exception() is None:
                        del todo[i]
                        yield fut.result()
                self.close()
                self.restarts += 1
                if self.restarts > MAX_RESTARTS:
                    raise WorkersLost(f"worker processes kept dying (killed or out of memory; the pool broke "
                                      f"{self.restarts} times): stopped, undecided, no certificate written")

    def close(self):
        """Stop the workers now (a running batch is abandoned, as ``Pool.terminate`` does)."""
        ex, self.ex = self.ex, None
        if ex is None:
            return
        # the executor has no public way to stop running tasks: end its processes first, then its
        # manager thread sees them gone and shutdown() returns at once
        procs = list((ex._processes or {}).values())
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join()
        ex.shutdown(wait=True, cancel_futures=True)


def _dask_batch(setup, boxes):
    """One Dask task: a batch of boxes (the model is parsed once per worker process)."""
    _worker_init(*setup)
    return _worker_eval(boxes)


class _DaskMap:
    """``imap``-like evaluation of boxes on a Dask cluster, in batches."""

    def __init__(self, address, model_json, target_text, d, prec, eps, fast, key, tight=True):
        try:
            from distributed import Client
        except ImportError:
            raise ValueError("--scheduler needs the optional dependency: pip install 'symbounds[dask]'") from None
        try:
            self.client = Client(address, timeout="10s")
        except OSError as e:
            raise ValueError(f"cannot reach the Dask scheduler at {address}: {str(e).splitlines()[0]}") from None
        self.setup = (model_json, target_text, d, prec, eps, fast, key, tight)
        self.setup_future = self.client.scatter(self.setup, broadcast=True)
        self.workers = max(1, len(self.client.ncores()))

    def imap(self, batches):
        """Results as they complete.  A task whose worker dies is rescheduled by the Dask scheduler
        itself (up to its ``allowed-failures``, then :class:`KilledWorker`, reported here as
        :class:`WorkersLost`)."""
        from distributed import KilledWorker, as_completed

        futures = [self.client.submit(_dask_batch, self.setup_future, b, pure=False) for b in batches]
        for fut in as_completed(futures):
            try:
                res = fut.result()
            except KilledWorker:
                raise WorkersLost("Dask workers kept dying running a batch of boxes (the scheduler gave up "
                                  "re-running it): stopped, undecided, no certificate written") from None
            yield res

    def close(self):
        self.client.close()


def _initial_boxes(d: int, per_axis: int) -> list[Box]:
    import itertools

    edges = [Fraction(i, per_axis) for i in range(per_axis + 1)]
    out = []
    for idx in itertools.product(range(per_axis), repeat=d):
        out.append(Box(tuple(edges[i] for i in idx), tuple(edges[i + 1] for i in idx)))
    return out


class ErrorBound:
    """One box's own bound ``|T - g| <= bound`` over it (None when nothing bounds it), never met
    with its parent's: a box's recorded bound is the one ``check`` recomputes from the box alone
    (an enclosure of :func:`symbounds.core.search.search`: ``lo = (0,)``, ``hi = (bound,)``, or
    both empty).  ``centre``: for a box whose bound misses ``eps``, the enclosure of the error at
    its centre as text when ``> eps`` is proved there (a counterexample), False when disproved,
    None when undecided; ``axis``: the side the float pass suggests halving.  ``size`` is the
    box's width as a float (its priority) and ``last`` whether it can no longer be split, found
    once per box.  (Slots: a d = 2 certificate holds some 15,000 of them.)"""

    __slots__ = ("axis", "bound", "centre", "last", "method", "size")

    def __init__(self, bound, method: str, centre=None, axis=None, size: float = 0.0, last: bool = False):
        self.bound, self.method, self.centre, self.axis, self.size, self.last = bound, method, centre, axis, size, last

    @property
    def lo(self) -> tuple:
        return () if self.bound is None else (Fraction(0),)

    @property
    def hi(self) -> tuple:
        return () if self.bound is None else (self.bound,)


#: Boxes halved per step of the search (each step's halves are evaluated in batches of at most
#: :data:`BATCH`, spread over the workers).
STEP = 4096


class CertifyEvaluator:
    """The evaluator of :func:`symbounds.core.search.search` for ``|T - g|``: each box's own
    bound (:func:`_worker_eval`: the float pass and the float target, in this process, in forked
    worker processes (:class:`LocalPool`) or on a Dask cluster), and, for a box that can no longer
    be split (half-width below ``min_width``), Arb where the floats could not enclose it and balls
    at its centre where nothing decided it.  The halves of a step go out in batches of
    ``min(BATCH, n / (4 workers))``; the batches are read as they complete, and none after one
    whose box centre refutes the bound (:meth:`stream`; the search stops reading there)."""

    descent = (0, 0)

    def __init__(self, model, g, d: int, eps: Fraction, opts: CertifyOptions, pool=None, dask=None):
        self.model, self.g, self.d, self.eps = model, g, d, eps
        self.prec, self.min_width = opts.prec, opts.min_width
        self.method = "float" if opts.fast else "taylor"
        self.pool, self.dask = pool, dask
        self.workers = dask.workers if dask is not None else max(1, opts.workers if pool is not None else 1)
        self.ceps = BallContext(opts.prec).convert(eps)
        self.batch = STEP
        self.counts: dict = {}

    def stream(self, boxes: list, parents: list | None = None, deadline=None):
        """``[(index, ErrorBound)]`` chunks, one per batch as it completes; a chunk ends at a box
        whose centre refutes the bound (and nothing is read after it)."""
        size = max(1, min(BATCH, len(boxes) // (4 * self.workers)))
        batches = [boxes[i:i + size] for i in range(0, len(boxes), size)]
        if self.dask is not None:
            results = self.dask.imap(batches)
        elif self.pool is not None:
            results = self.pool.imap(batches)
        else:
            results = (_worker_eval(b) for b in batches)
        start = {b[0]: k * size for k, b in enumerate(batches)}
        for batch in results:
            at = start[batch[0][0]]
            chunk = []
            for k, (box, bound, centre, axis) in enumerate(batch):
                method = self.method
                last = box.half_width_below(self.min_width)
                if bound is None and last:  # the floats could not enclose it and no split is left: Arb
                    bound, method = box_bound(self.model, self.g, self.d, box, self.prec), "taylor"
                if (bound is None or bound > self.eps) and centre is None and last:  # nothing decided the centre: balls
                    centre = _violation(point_error(self.model, self.g, self.d, box.centre, self.prec), self.ceps) or None
                chunk.append((at + k, ErrorBound(bound, method, centre, axis, box.size(), last)))
                self.counts[method] = self.counts.get(method, 0) + 1
                if centre:
                    break
            yield chunk
            if centre:
                return

    def enclose(self, boxes: list, parents: list | None = None, deadline=None) -> list:
        """Every box's :class:`ErrorBound` (None for the boxes after a refuting one)."""
        out: list = [None] * len(boxes)
        for chunk in self.stream(boxes, parents, deadline):
            for i, e in chunk:
                out[i] = e
        return out


class CertifyProblem(Problem):
    """``|T - g| <= eps`` over every box, as a problem of :func:`symbounds.core.search.search`: a
    box is proved when its own bound is at most ``eps``, refuted when its centre violates the
    bound, else halved; the boxes that cannot be split (``min_width``) and are not proved are
    kept, in the order they were decided (:attr:`undecided`)."""

    falsify = False  # the centre of every box is decided with the box
    probe = False
    stable = True  # a box is decided on its own bound alone

    def __init__(self, eps: Fraction, min_width: Fraction, rule: str = "widest"):
        self.eps, self.min_width, self.rule = eps, min_width, rule
        self.undecided: list = []
        self._kept: set = set()

    def decide(self, box, enc) -> Verdict:
        bound = enc.bound
        if bound is not None and bound <= self.eps:
            return Verdict.PROVED
        if enc.centre:
            return Verdict.REFUTED
        if enc.last and box not in self._kept:
            self._kept.add(box)
            self.undecided.append(box)
        return Verdict.UNDECIDED

    def priority(self, box, enc) -> float:
        """Widest first (the box's width, found once by the evaluator)."""
        return -box.size() if enc is None else -enc.size

    def counterexample(self, box, enc) -> dict:
        return {"x": [str(v) for v in box.centre], "error": enc.centre}

    def split(self, box, enc) -> tuple:
        return box.split(_split_axis(box, None if enc is None else enc.axis, self.rule))

    def objectives(self) -> list:
        return []


def certify_model(model_json: dict, target_text: str, d: int, eps: Fraction, opts: CertifyOptions,
                  progress=None) -> CertifyResult:
    """Prove ``|T - g| <= eps`` on ``[0,1]^d`` for the model file ``model_json``: the search of
    :mod:`symbounds.core.search` over :class:`CertifyProblem` with :class:`CertifyEvaluator`,
    from a grid of ``initial`` boxes per axis (widest boxes first, so the boxes are evaluated
    level by level).

    At most ``max_boxes`` boxes are evaluated (none when the first grid alone has more); the
    search also stops after ``timeout`` seconds (checked between steps).  A box that was evaluated
    and neither proved nor refuted is reported undecided as its two halves (the boxes that were
    to be evaluated next), one that cannot be split as itself.

    ``progress(fraction, evaluated)`` is called after each step of the search: ``fraction`` is the
    exact part of the cube's volume proved so far (the sum of the proved boxes' volumes, a Fraction
    in [0, 1]) and ``evaluated`` the number of boxes evaluated (the queue grows as boxes are
    bisected, so a count of boxes has no fixed total)."""
    t0 = time.perf_counter()
    q = _rational(eps)
    eps = eps if q is None else q  # a SymPy Rational as the same Fraction (compared per box)
    # tight: a coarse first grid (the hull encloses wide boxes; BENCHMARKS.md, "Fewer boxes")
    per_axis = opts.initial or ({1: 8, 2: 4}.get(d, 2) if opts.tight else {1: 64, 2: 16}.get(d, 4))
    grid = _initial_boxes(d, per_axis)
    setup = (model_json, target_text, d, opts.prec, eps, opts.fast,
             (digest(model_json), target_text, d, opts.prec, eps, opts.fast), opts.tight)
    pool = dask = None
    if opts.scheduler:
        dask = _DaskMap(opts.scheduler, *setup)
        model, g = model_from_json(model_json), parse_target(target_text, d)
    else:
        # the model and its one-off float setup, built once here: forked workers inherit them
        _worker_init(*setup)
        model, g = _W["model"], _W["g"]
        if opts.workers > 1:
            pool = LocalPool(opts.workers, setup)
    max_boxes = opts.max_boxes if opts.max_boxes is not None else DEFAULT_MAX_BOXES
    ev = CertifyEvaluator(model, g, d, eps, opts, pool, dask)
    problem = CertifyProblem(eps, opts.min_width, opts.split)
    try:
        if len(grid) > max_boxes:
            res = None
        else:
            cube = Box((Fraction(0),) * d, (Fraction(1),) * d)
            limits = Limits(max_boxes=max_boxes, timeout=opts.timeout, min_width=opts.min_width)
            res = search(problem, ev, cube, limits, progress, grid)
    finally:
        if pool is not None:
            pool.close()
        if dask is not None:
            dask.close()
    extra = {"worker_restarts": pool.restarts} if pool is not None else {}
    if res is None:
        return CertifyResult(Verdict.UNDECIDED, [], None, None, grid, time.perf_counter() - t0, 0, extra,
                             "max-boxes")
    proved = [(b, e.bound) for b, e in res.decided]
    if res.verdict is Verdict.REFUTED:
        undecided = problem.undecided
    else:
        undecided = []
        for b, e in res.open:
            if b.half_width_below(opts.min_width):
                undecided.append(b)
            else:
                undecided.extend(problem.split(b, e))
        _sort_boxes(undecided)
    counter = res.counterexample
    max_bound = max((b for _, b in proved), default=None)
    _sort_boxes(proved, lambda t: t[0])
    return CertifyResult(res.verdict, proved, max_bound, counter, undecided, time.perf_counter() - t0, res.evaluated,
                         extra, res.stopped)


def _sort_boxes(items: list, box_of=None) -> None:
    """Sort ``items`` (boxes, or records whose box is ``box_of(item)``) by the boxes' ``(lo, hi)``,
    in place; for dyadic boxes by their numerators over one common denominator (the same order,
    exactly: :meth:`symbounds.core.search.Box.sort_key`)."""
    box_of = box_of or (lambda b: b)
    forms = [box_of(t).dyadic() for t in items]
    k = max((f[0] for f in forms), default=0) if all(f is not None for f in forms) else None
    items.sort(key=lambda t: box_of(t).sort_key(k))


#: A box is halved along its widest side when that is this many times the side its gradient picks.
MAX_ASPECT = 4


def _split_axis(box: Box, axis, rule: str):
    """The side to halve: with ``rule == "gradient"`` the input whose linear term widens the
    enclosure most (``axis``, from the float pass), unless the widest side is more than
    :data:`MAX_ASPECT` times longer (the remainder grows with every side); else the widest."""
    if rule != "gradient" or axis is None:
        return None
    widths = [b - a for a, b in zip(box.lo, box.hi)]
    return None if max(widths) > MAX_ASPECT * widths[axis] else axis


def digest(obj) -> str:
    """SHA-256 of the canonical JSON text of ``obj`` (a model file, in certificates)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def boxes_cover_cube(boxes: list[Box], d: int) -> bool:
    """Do the closed boxes cover ``[0,1]^d``?  Exact: split the cube at box faces until every
    piece lies inside one box (or some piece meets no box)."""
    cube = Box(tuple([Fraction(0)] * d), tuple([Fraction(1)] * d))
    stack = [(cube, boxes)]
    steps = 0
    while stack:
        cell, cand = stack.pop()
        steps += 1
        if steps > 50 * (len(boxes) + 10) * d:
            return False
        cand = [b for b in cand if all(b.lo[i] < cell.hi[i] and b.hi[i] > cell.lo[i] for i in range(d))]
        if not cand:
            return False
        if any(all(b.lo[i] <= cell.lo[i] and b.hi[i] >= cell.hi[i] for i in range(d)) for b in cand):
            continue
        # split at a face of a candidate box that lies strictly inside the cell, on the axis and
        # at the position nearest the middle of the cell's widest side
        best = None
        for b in cand:
            for i in range(d):
                mid = (cell.lo[i] + cell.hi[i]) / 2
                for v in (b.lo[i], b.hi[i]):
                    if cell.lo[i] < v < cell.hi[i]:
                        key = (-(cell.hi[i] - cell.lo[i]), abs(v - mid))
                        if best is None or key < best[0]:
                            best = (key, i, v)
        if best is None:
            return False
        _, i, v = best
        left = Box(cell.lo, cell.hi[:i] + (v,) + cell.hi[i + 1:])
        right = Box(cell.lo[:i] + (v,) + cell.lo[i + 1:], cell.hi)
        stack.append((left, cand))
        stack.append((right, cand))
    return True


