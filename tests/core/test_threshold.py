"""The certified-threshold search on hand-made criteria whose thresholds are known exactly."""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction as F

import pytest

from symbounds.core.threshold import FAIL, PASS, UNDECIDED, find_threshold


@dataclass
class O:
    value: object
    status: str


def criterion(rule, log=None):
    """An evaluation from ``rule(v) -> status`` that records every value it is asked for."""

    def ev(v):
        if log is not None:
            log.append(v)
        return O(v, rule(v))

    return ev


def halving(v0, k):
    return [v0 / 2**i for i in range(k + 1)]


R = F(1, 100)


@pytest.mark.parametrize("c", [F(7, 3), F(1), F(12345, 1000), F(1, 7)])
def test_smallest_passing_value_of_a_monotone_criterion(c):
    log = []
    t = find_threshold(criterion(lambda v: PASS if v >= c else FAIL, log), halving(F(100), 10),
                       direction=-1, resolution=R, further=lambda v: v / 2)
    assert t.reason == "found" and t.flips == []
    assert c <= t.best and t.step == t.best * (1 - R) < c  # a pass, and one step below it fails
    assert t.best_outcome.status == PASS and t.step_outcome.status == FAIL
    assert len(log) == len(set(log)) == len(t.tried)  # each value evaluated once
    assert t.best * (1 - 2 * R) < c  # within the resolution (the bracket closed)


@pytest.mark.parametrize("c", [F(1, 3), F(5), F(1000, 7)])
def test_largest_passing_value_upwards(c):
    t = find_threshold(criterion(lambda v: PASS if v <= c else FAIL), [F(1, 64)], direction=1,
                       resolution=R, further=lambda v: v * 2, back=lambda v: v / 2)
    assert t.reason == "found"
    assert t.best <= c < t.step == t.best * (1 + R)
    assert [o.value for o in t.scan] == [F(1, 64) * 2**k for k in range(len(t.scan))]  # doublings


def test_upwards_from_a_failing_start_steps_back():
    c = F(1, 1000)
    t = find_threshold(criterion(lambda v: PASS if v <= c else FAIL), [F(1, 64)], direction=1,
                       resolution=R, further=lambda v: v * 2, back=lambda v: v / 2)
    assert [o.value for o in t.scan] == [F(1, 64), F(1, 128), F(1, 256), F(1, 512), F(1, 1024)]
    assert t.reason == "found" and t.best <= c < t.step
    assert t.flips == []  # failures above a pass are what a threshold is, not a flip


def test_integer_parameter_with_a_floor():
    t = find_threshold(criterion(lambda m: PASS if m >= 37 else FAIL), [100, 50, 25, 12, 6, 3, 2],
                       direction=-1, resolution=R, further=lambda m: m // 2, integer=True, limit=2)
    assert (t.best, t.step, t.reason) == (37, 36, "found")
    t = find_threshold(criterion(lambda m: PASS), [100, 50, 25, 12, 6, 3, 2], direction=-1, resolution=R,
                       further=lambda m: m // 2, integer=True, limit=2)
    assert (t.best, t.reason) == (2, "limit") and 1 not in t.tried  # never below the floor


def test_non_monotone_criterion_records_the_flip_and_goes_below_it():
    # passes on [20, 40) and from 300 on: the scan 400, 200, ..., 25 sees the lower region
    rule = lambda v: PASS if (20 <= v < 40 or v >= 300) else FAIL  # noqa: E731
    t = find_threshold(criterion(rule), halving(F(400), 6), direction=-1, resolution=R, further=lambda v: v / 2)
    assert 20 <= t.best < 40 and t.step < 20 and t.reason == "found"
    assert t.flips, "the pass below a failure is recorded"
    for bad, good in t.flips:
        assert bad.status != PASS and good.status == PASS and good.value < bad.value


def test_a_pass_one_step_below_continues_downwards():
    # the bisection of (5, 10) closes at (10, 9.921875); the step below 10, 9.9, lies on a narrow
    # passing island under a failure: a flip, and the minimum moves to 9.9
    c = F(10)
    rule = lambda v: PASS if v >= c or c * (1 - R) <= v < c * (1 - R) + F(1, 10000) else FAIL  # noqa: E731
    t = find_threshold(criterion(rule), halving(F(80), 4), direction=-1, resolution=R, further=lambda v: v / 2)
    assert t.best == F(99, 10) and t.step == F(99, 10) * (1 - R) and t.reason == "found"
    assert [(bad.value, good.value) for bad, good in t.flips] == [(F(635, 64), F(99, 10))]


def test_undecided_is_never_a_pass():
    rule = lambda v: PASS if v >= 8 else (UNDECIDED if v >= 5 else FAIL)  # noqa: E731
    t = find_threshold(criterion(rule), halving(F(64), 5), direction=-1, resolution=R, further=lambda v: v / 2)
    assert t.best >= 8 and t.step_outcome.status == UNDECIDED and t.reason == "step-undecided"
    assert t.undecided and all(5 <= o.value < 8 for o in t.undecided)


def test_no_pass_scan_end_and_budget():
    t = find_threshold(criterion(lambda v: FAIL), halving(F(8), 3), direction=-1, resolution=R,
                       further=lambda v: v / 2)
    assert (t.best, t.reason) == (None, "no-pass")
    t = find_threshold(criterion(lambda v: PASS), halving(F(8), 3), direction=-1, resolution=R,
                       further=lambda v: v / 2, max_scan=6)
    assert t.reason == "scan-end" and t.best == F(8, 2**6) and len(t.scan) == 7
    t = find_threshold(criterion(lambda v: PASS if v >= 3 else FAIL), halving(F(8), 3), direction=-1,
                       resolution=R, further=lambda v: v / 2, max_evaluations=6)
    assert (t.best, t.reason, len(t.tried)) == (None, "budget", 6)


def test_bad_direction_or_resolution():
    with pytest.raises(ValueError):
        find_threshold(criterion(lambda v: PASS), [F(1)], direction=0, resolution=R, further=lambda v: v)
    with pytest.raises(ValueError):
        find_threshold(criterion(lambda v: PASS), [F(1)], direction=1, resolution=F(1), further=lambda v: v)


def test_random_integer_criteria_against_brute_force():
    rng = random.Random(19)
    for _ in range(200):
        status = {m: rng.choice([PASS, PASS, FAIL, UNDECIDED]) for m in range(2, 129)}
        t = find_threshold(criterion(lambda m: status[m]), [128, 64, 32, 16, 8, 4, 2], direction=-1,
                           resolution=R, further=lambda m: m // 2, integer=True, limit=2)
        if t.best is None:
            assert all(status[m] != PASS for m in (128, 64, 32, 16, 8, 4, 2))
            continue
        assert status[t.best] == PASS  # the threshold is always a certified pass
        if t.reason in ("found", "step-undecided"):
            assert t.step == t.best - 1 and status[t.step] != PASS
        else:
            assert t.reason == "limit" and t.best == 2
        for bad, good in t.flips:
            assert status[bad.value] != PASS and status[good.value] == PASS and good.value < bad.value
