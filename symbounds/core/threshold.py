"""The certified threshold of a parameter: the furthest value, in one direction, that still passes.

A construction's constant (``M``, ``M_g`` or the grid of [SL26]; the temperature ``tau`` of
[AFZ25]) is certified or not at each value, by a rigorous evaluation that says **pass**, **fail**
or **undecided**.  :func:`find_threshold` looks for the extreme passing value in ``direction``
(``-1``: the smallest, ``+1``: the largest) to a relative resolution ``R`` (or to one unit for
an integer parameter):

1. **Scan.** The values ``first`` are evaluated (the first is the construction's own value), then
   ``further(v)`` from the last one while it passes (at most ``max_scan`` values in all, never
   beyond ``limit``).  When none of them passes and ``back`` is given, the scan steps back from
   the last one with ``back(v)`` until a value passes.
2. **Bracket.** ``good`` is the furthest passing value of the scan and ``bad`` the nearest value
   beyond it that did not pass.  They are bisected (``midpoint(a, b)`` of ``a < b``) until the
   step beyond ``good``, ``good (1 + direction R)`` (integer: ``good + direction``), is not
   strictly between them.
3. **The step beyond** is evaluated itself: a failure (or an undecided value) ends the search with
   ``good`` the threshold; a pass is a **non-monotone flip** (a non-passing value with a passing
   one beyond it), recorded as ``(non-passing outcome, passing outcome)``; ``good`` moves to the
   step and the search goes on beyond it (bracketed by the nearest non-passing value already
   tried beyond it, or by ``further`` steps until one does not pass).

An undecided value is never a pass: it counts as a failure for the bisection, so the threshold
is always a certified pass.  Flips of the scan (a non-passing scanned value with a passing one
beyond it) are recorded too.  Every value is whatever the evaluation takes (Fractions, ints);
the search only compares, multiplies by ``1 +- R`` and calls ``midpoint``/``further``/``back``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

__all__ = ["PASS", "FAIL", "UNDECIDED", "Threshold", "find_threshold"]

PASS, FAIL, UNDECIDED = "pass", "fail", "undecided"


@dataclass
class Threshold:
    """The outcome of :func:`find_threshold`.

    ``reason`` says how the search ended: ``"found"`` (the step beyond ``best`` failed),
    ``"step-undecided"`` (it is undecided), ``"scan-end"`` (the scan still passed at its last
    value), ``"limit"`` (``best`` is the ``limit`` itself, or the step beyond it lies past it),
    ``"no-pass"`` (no value passed) or ``"budget"`` (``max_evaluations`` used up; ``best`` is
    then None)."""

    best: object = None  # a certified pass, or None
    best_outcome: object = None
    step: object = None  # one resolution step beyond best
    step_outcome: object = None
    scan: list = field(default_factory=list)  # outcomes of the scan, in order
    scan_values: list = field(default_factory=list)  # their values
    flips: list = field(default_factory=list)  # (non-passing outcome, passing outcome beyond it)
    tried: dict = field(default_factory=dict)  # value -> outcome, in the order evaluated
    reason: str = ""

    @property
    def later(self) -> list:
        """The outcomes evaluated after the scan (bisection and steps beyond), in order."""
        scanned = set(self.scan_values)
        return [o for v, o in self.tried.items() if v not in scanned]

    @property
    def undecided(self) -> list:
        """The undecided outcomes, in the order evaluated."""
        return [o for o in self.tried.values() if _status(o) == UNDECIDED]


class _Budget(Exception):
    pass


def _status(o) -> str:
    return o.status


def _exact_midpoint(a, b):
    return (a + b) / 2


def find_threshold(evaluate: Callable, first: list, *, direction: int, resolution: Fraction,
                   further: Callable, back: Callable | None = None, integer: bool = False,
                   midpoint: Callable | None = None, limit=None, max_scan: int = 40,
                   max_evaluations: int | None = None) -> Threshold:
    """The furthest passing value in ``direction`` (module docstring).

    ``evaluate(v)`` returns an outcome with a ``status`` of :data:`PASS`, :data:`FAIL` or
    :data:`UNDECIDED`; each value is evaluated once.  ``first`` lists the scan's first values in
    the search direction; ``further(v)`` is the next scan value beyond ``v`` and ``back(v)`` the
    next one on the other side.  ``midpoint(a, b)`` (``a < b``) defaults to ``(a + b) / 2``
    (integer: ``(a + b) // 2``).  ``limit`` is the last value allowed in the direction."""
    if direction not in (-1, 1):
        raise ValueError("direction is -1 (the smallest passing value) or +1 (the largest)")
    R = Fraction(resolution)
    if not integer and not (0 < R < 1):
        raise ValueError(f"the resolution must lie in (0, 1), got {R}")
    if midpoint is None:
        midpoint = (lambda a, b: (a + b) // 2) if integer else _exact_midpoint
    res = Threshold()
    tried = res.tried

    def beyond(a, b) -> bool:  # a lies strictly beyond b in the search direction
        return a < b if direction < 0 else a > b

    def past_limit(v) -> bool:
        return limit is not None and beyond(v, limit)

    def ev(v):
        if v in tried:
            return tried[v]
        if max_evaluations is not None and len(tried) >= max_evaluations:
            raise _Budget()
        tried[v] = evaluate(v)
        return tried[v]

    def passes(v) -> bool:
        return _status(ev(v)) == PASS

    def step_of(v):
        return v + direction if integer else v * (1 + direction * R)

    try:
        # 1. the scan
        scan = res.scan_values

        def scan_at(v) -> None:
            res.scan.append(ev(v))
            scan.append(v)

        for v in first:
            scan_at(v)
        while passes(scan[-1]) and len(scan) <= max_scan and not past_limit(further(scan[-1])):
            scan_at(further(scan[-1]))
        if back is not None and not any(passes(v) for v in scan):
            for _ in range(max_scan):
                scan_at(back(scan[-1]))
                if passes(scan[-1]):
                    break
        ordered = sorted(set(scan), key=lambda v: v * direction)  # from the start of the search on
        for near, far in zip(ordered, ordered[1:]):
            if not passes(near) and passes(far):
                res.flips.append((tried[near], tried[far]))
        passing = [v for v in scan if passes(v)]
        if not passing:
            res.reason = "no-pass"
            return res
        good = min(passing) if direction < 0 else max(passing)
        if not any(beyond(v, good) for v in scan):
            res.best, res.best_outcome = good, tried[good]
            res.reason = "limit" if past_limit(further(good)) or good == limit else "scan-end"
            return res
        # 2. bisection and the step beyond, until that step does not pass
        while True:
            bad = _nearest_non_pass(tried, good, beyond)
            if bad is None:  # every value tried beyond good passes: step further until one does not
                while True:
                    nxt = further(good)
                    if past_limit(nxt):
                        res.best, res.best_outcome = good, tried[good]
                        res.reason = "limit"
                        return res
                    if not passes(nxt):
                        bad = nxt
                        break
                    good = nxt
            while beyond(bad, step_of(good)):  # the step beyond good lies strictly inside the bracket
                mid = midpoint(min(good, bad), max(good, bad))
                if passes(mid):
                    good = mid
                else:
                    bad = mid
            step = step_of(good)
            if past_limit(step):
                res.best, res.best_outcome = good, tried[good]
                res.reason = "limit"
                return res
            o = ev(step)
            if _status(o) != PASS:
                res.best, res.best_outcome = good, tried[good]
                res.step, res.step_outcome = step, o
                res.reason = "step-undecided" if _status(o) == UNDECIDED else "found"
                return res
            res.flips.append((tried.get(bad, o), o))  # bad did not pass, the step beyond it does
            good = step
    except _Budget:
        res.best = res.best_outcome = None
        res.reason = "budget"
        return res


def _nearest_non_pass(tried: dict, good, beyond):
    """The non-passing value tried beyond ``good`` that lies nearest to it, or None."""
    cands = [v for v, o in tried.items() if beyond(v, good) and _status(o) != PASS]
    if not cands:
        return None
    near = cands[0]
    for v in cands[1:]:
        if beyond(near, v):
            near = v
    return near
