"""Box centres and half-widths (symbounds/core/float_boxes.py ``_centres``): the float64 path for
dyadic ends gives exactly what the Fraction path (``_ball_from_ends``, entry by entry) gives, on
random boxes with ends of every size (exponents from -1100 to 1013, integers past 2^53, thirds),
and every float box contains its exact box."""

import random
from fractions import Fraction as F

import numpy as np
import pytest

from symbounds.core import float_boxes
from symbounds.core.float_boxes import _ball_from_ends, _centres


def _end(rng):
    kind = rng.random()
    if kind < 0.5:  # a dyadic of any exponent, mantissa up to 53 bits
        return F(rng.choice([-1, 1]) * rng.randrange(0, 2 ** rng.randint(1, 53))) * F(2) ** rng.randint(-1100, 960)
    if kind < 0.65:
        return F(rng.randint(-(2**60), 2**60))  # integers, some past 2^53
    if kind < 0.8:
        return F(rng.randint(-50, 50), rng.choice([3, 5, 7, 10]))
    return F(rng.randint(-8, 8), 2 ** rng.randint(0, 12))  # small dyadics, as a bisection makes


@pytest.mark.parametrize("seed", range(8))
def test_centres_are_those_of_the_fraction_path_and_contain_the_box(seed):
    rng = random.Random(seed)
    B, d = 60, 3
    lo, hi = [], []
    for _ in range(B):
        rl, rh = [], []
        for _ in range(d):
            a = _end(rng)
            b = a if rng.random() < 0.2 else a + abs(_end(rng))
            rl.append(a)
            rh.append(b)
        lo.append(rl)
        hi.append(rh)
    x0, h = _centres(lo, hi)
    for b in range(B):
        for i in range(d):
            m, r = _ball_from_ends(lo[b][i], hi[b][i])
            assert (x0[b, i], h[b, i]) == (m, r), (lo[b][i], hi[b][i])
            if np.isfinite(h[b, i]):
                assert F(x0[b, i]) - F(h[b, i]) <= lo[b][i] and hi[b][i] <= F(x0[b, i]) + F(h[b, i])


def test_the_float_path_is_taken_only_where_exact(monkeypatch):
    """Dyadic ends whose sum and difference round in float64 (2^-60 and 1), whose sum rounds but
    difference does not (3 2^-53 and 1) and the other way round (-1 and 3 2^-53), a tiny dyadic below 2^-960, an integer past 2^53 and a
    third go through the Fraction path; plain dyadic ends do not."""
    calls = []
    real = float_boxes._ball_from_ends

    def counted(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(float_boxes, "_ball_from_ends", counted)
    lo = [[F(1, 2**60), F(3, 2**53), F(-1), F(1, 2**1000), F(2**53 + 1), F(1, 3), F(-3, 8), 0, F(5)]]
    hi = [[F(1), F(1), F(3, 2**53), F(1, 2**999), F(2**53 + 1), F(1, 2), F(1, 4), 1, F(5)]]
    x0, h = _centres(lo, hi)
    assert [c[0] for c in calls] == [F(1, 2**60), F(3, 2**53), F(-1), F(1, 2**1000), F(2**53 + 1), F(1, 3)]
    assert (x0[0, 6], x0[0, 7], x0[0, 8]) == (-1 / 16, 0.5, 5.0)
    assert h[0, 6] >= 5 / 16 and h[0, 8] > 0
    for i in range(9):
        assert (x0[0, i], h[0, i]) == real(F(lo[0][i]), F(hi[0][i]))
