"""The dyadic fast paths of a certificate's box bookkeeping (``search.Box``'s dyadic form and exact
doubles, ``float_boxes._centres`` on float ends, ``boxes._record`` and ``boxes._LimitFloor``), each
against the exact computation in Fractions done here, on random boxes in random order; and a
certificate computed with the fast paths against the same certificate with them switched off
(the Fraction code path, in the same test), box for box."""

import math
import pickle
import random
from fractions import Fraction as F

import numpy as np
import pytest
import sympy

from symbounds.core import boxes as bx
from symbounds.core.boxes import _LimitFloor, _record, round_up_record
from symbounds.core.float_boxes import _centres
from symbounds.core.search import Box, _dyadic_form


def _random_dyadic_box(rng, d):
    """Ends ``n / 2^k`` with a denominator of its own per end (so the common one is found)."""
    lo, hi = [], []
    for _ in range(d):
        k = rng.randrange(0, 60)
        a = F(rng.randrange(-(2**40), 2**40), 2**k)
        w = F(rng.randrange(0, 2**20), 2 ** rng.randrange(0, 60))
        lo.append(a)
        hi.append(a + w)
    return Box(tuple(lo), tuple(hi))


def _boxes(seed, n=300):
    rng = random.Random(seed)
    return [_random_dyadic_box(rng, rng.randrange(1, 5)) for _ in range(n)]


def test_the_dyadic_form_is_the_ends_over_one_least_power_of_two():
    for box in _boxes(1):
        k, nlo, nhi = box.dyadic()
        assert all(F(n, 2**k) == v for n, v in zip(nlo + nhi, box.lo + box.hi))
        if k > 0:  # the least k: some numerator is odd
            assert any(n % 2 for n in nlo + nhi)
    assert Box((F(1, 3),), (F(1, 2),)).dyadic() is None
    assert Box((0.5,), (F(1, 2),)).dyadic() is None  # a float end is not taken as a rational here
    assert Box((0, 0), (1, 2)).dyadic() == (0, (0, 0), (1, 2))
    assert Box((F(0),), (F(0),)).dyadic() == (0, (0,), (0,))


def test_widths_halves_volumes_and_centres_are_the_fraction_ones():
    rng = random.Random(2)
    for box in _boxes(2):
        ws = [b - a for a, b in zip(box.lo, box.hi)]
        assert box.width() == max(ws)
        assert box.size() == float(max(ws))
        assert box.centre == tuple((a + b) / 2 for a, b in zip(box.lo, box.hi))
        assert box.half == tuple((b - a) / 2 for a, b in zip(box.lo, box.hi))
        v = F(1)
        for w in ws:
            v *= w
        assert box.volume() == v
        axes = [i for i in range(len(ws)) if rng.random() < 0.5]
        m = F(1)
        for i in axes:
            m *= ws[i]
        from symbounds.core.search import measure

        assert measure(box, axes) == m
        for q in (max(ws) / 2, max(ws) / 2 + F(1, 2**90), max(ws) / 2 - F(1, 2**90), F(1, 2**20), 0, 1):
            assert box.half_width_below(q) == (max(ws) / 2 < q)
        assert box.half_width_below(sympy.Rational(1, 2**20)) == (max(ws) / 2 < F(1, 2**20))


def test_the_halves_are_the_fraction_halves_and_carry_their_own_dyadic_form():
    for box in _boxes(3):
        d = len(box.lo)
        ws = [b - a for a, b in zip(box.lo, box.hi)]
        for axis in [None, *range(d)]:
            k = ws.index(max(ws)) if axis is None else axis
            mid = (box.lo[k] + box.hi[k]) / 2
            want = (Box(box.lo, box.hi[:k] + (mid,) + box.hi[k + 1:]),
                    Box(box.lo[:k] + (mid,) + box.lo[k + 1:], box.hi))
            got = box.split(axis)
            assert got == want
            for half in got:
                assert half.dyadic() == _dyadic_form(half.lo, half.hi)  # handed down = found afresh
            assert got[0].volume() + got[1].volume() == box.volume()
    non = Box((F(1, 3), F(0)), (F(1, 2), F(1, 7)))  # not dyadic (widths 1/6, 1/7): the Fraction path
    assert non.split() == (Box((F(1, 3), 0), (F(5, 12), F(1, 7))), Box((F(5, 12), 0), (F(1, 2), F(1, 7))))
    assert Box((0,), (1,)).split() == (Box((0,), (F(1, 2),)), Box((F(1, 2),), (1,)))  # int ends: exact halves


def test_the_doubles_equal_the_ends_exactly_or_are_refused():
    for box in _boxes(4):
        e = box.doubles()
        c = box.centre_doubles()
        k, nlo, nhi = box.dyadic()
        if k <= 960 and all(abs(n) < 2**53 for n in nlo + nhi):
            assert e is not None and all(isinstance(x, float) for x in e[0] + e[1])
            assert tuple(map(F, e[0])) == box.lo and tuple(map(F, e[1])) == box.hi
        else:
            assert e is None
        if c is not None:
            assert tuple(map(F, c)) == box.centre
    big = Box((F(2**53 + 1, 2**60),), (F(1),))  # 2^53 + 1 is no double's numerator
    assert big.doubles() is None and big.centre_doubles() is None
    edge = Box((F(2**53 - 1, 2**60),), (F(2**53 - 1, 2**60),))  # the largest numerator a double has
    assert tuple(map(F, edge.doubles()[0])) == edge.lo
    assert Box((F(1, 2**961),), (F(1),)).doubles() is None  # outside the range kept for doubles
    assert Box((F(1, 3),), (F(1),)).doubles() is None


def test_the_sort_key_orders_boxes_as_their_ends_do():
    rng = random.Random(5)
    boxes = [b for b in _boxes(5) if len(b.lo) == 2]
    boxes += [Box(b.lo, b.hi) for b in boxes[:20]]  # equal boxes: a stable sort keeps their order
    rng.shuffle(boxes)
    k = max(b.dyadic()[0] for b in boxes)
    assert sorted(boxes, key=lambda b: b.sort_key(k)) == sorted(boxes, key=lambda b: (b.lo, b.hi))
    items = [(b, i) for i, b in enumerate(boxes)]
    want = sorted(items, key=lambda t: (t[0].lo, t[0].hi))
    bx._sort_boxes(items, lambda t: t[0])
    assert items == want
    mixed = [Box((F(1, 3),), (F(1, 2),)), Box((F(1, 4),), (F(1, 2),))]  # one not dyadic: by the Fractions
    bx._sort_boxes(mixed)
    assert mixed == [Box((F(1, 4),), (F(1, 2),)), Box((F(1, 3),), (F(1, 2),))]


def test_a_box_pickles_with_its_form():
    box = _boxes(6)[0].split()[1]
    again = pickle.loads(pickle.dumps(box))
    assert again == box and hash(again) == hash(box) and again.dyadic() == box.dyadic()


def test_float_centres_from_double_ends_are_the_fraction_ones_on_dyadic_boxes():
    """``_centres`` of the ends as exact doubles equals ``_centres`` of the same ends as Fractions,
    entry for entry, on random dyadic boxes taken in random order."""
    rng = random.Random(7)
    for d in (1, 2, 3):
        boxes = [b for b in _boxes(7 + d, 400) if len(b.lo) == d and b.doubles() is not None]
        rng.shuffle(boxes)
        flo = np.array([b.doubles()[0] for b in boxes])
        fhi = np.array([b.doubles()[1] for b in boxes])
        x0, h = _centres(flo, fhi)
        y0, g = _centres([b.lo for b in boxes], [b.hi for b in boxes])
        assert np.array_equal(x0, y0) and np.array_equal(h, g)


def test_float_centres_from_any_double_ends_enclose_the_box():
    """On random doubles of every magnitude (subnormal ones, sums that round, halves that would
    round), the float box ``x0 +- h`` contains the exact ``[lo, hi]``."""
    rng = random.Random(8)

    def rnd():
        e = rng.choice([-1074, -1070, -1030, -1022, -1021, -900, -60, -1, 0, 30, 500, 1000])
        return math.ldexp(rng.random(), e + rng.randrange(0, 4)) * rng.choice([1, -1]) if e > -1074 else 5e-324

    lo, hi = [], []
    for _ in range(500):
        a, b = sorted((rnd(), rnd()))
        lo.append((a,))
        hi.append((b,))
    x0, h = _centres(np.array(lo), np.array(hi))
    for (a,), (b,), c, r in zip(lo, hi, x0[:, 0], h[:, 0]):
        assert F(c) - F(r) <= F(a) and F(b) <= F(c) + F(r)
    with pytest.raises(ValueError):
        _centres(np.array([[math.inf]]), np.array([[1.0]]))


def _rand_double(rng):
    return math.ldexp(1 + rng.random(), rng.randrange(-1100, 1023))


def test_a_float_bound_is_compared_with_its_limit_exactly():
    rng = random.Random(9)
    below = _LimitFloor()
    for _ in range(3000):
        x = _rand_double(rng) if rng.random() < 0.9 else rng.choice([0.0, 5e-324, 1.0, 2.0**-1022])
        q = F(x)
        lim = rng.choice([q, q + F(1, 2**1200), q - F(1, 2**1200), F(math.nextafter(x, math.inf)),
                          F(math.nextafter(x, -math.inf)), F(rng.randrange(1, 10**6), rng.randrange(1, 10**6)),
                          F(10) ** 400, -(F(10) ** 400)])
        assert below(x, lim) == (q <= lim)
    assert below(0.18, sympy.Rational(9, 50)) == (F(0.18) <= F(9, 50))
    assert below(0.5, sympy.sqrt(2) / 2) == (F(0.5) <= F(1, 2))  # not rational: compared exactly anyway


def test_a_float_bound_is_recorded_as_the_fraction_rounding_records_it():
    """``_record(fb, Fraction(fb), lim)`` is ``min(round_up_record(Fraction(fb)), lim)`` on random
    doubles (inside and outside the range rounded in floats) and limits around the rounded value."""
    rng = random.Random(10)
    below = _LimitFloor()
    for _ in range(3000):
        x = _rand_double(rng) if rng.random() < 0.95 else rng.choice([0.0, 5e-324, 2.0**-1000, 2.0**1000])
        q = F(x)
        r = round_up_record(q)
        lim = rng.choice([r, r - F(1, 2**1200), r + F(1, 2**1200), q, F(1, 5), F(10) ** 400])
        got = _record(x, q, lim, below)
        assert got == min(r, lim) and isinstance(got, F)
        assert got >= min(q, lim)  # never below the bound (or its limit)


def _old_paths(monkeypatch):
    """Every fast path off: no dyadic form (the Box methods, the float ends and the sort keys take
    their Fractions), the limit compared as a Fraction and the record rounded as a Fraction."""
    monkeypatch.setattr(Box, "dyadic", lambda self: None)
    monkeypatch.setattr(bx._LimitFloor, "__call__", lambda self, x, lim: F(x) <= lim)
    monkeypatch.setattr(bx, "_TINY", math.inf)


@pytest.mark.parametrize(("tight", "eps", "max_boxes"), [(False, None, None), (True, F(1, 10), None),
                                                         (False, F(1, 20), 1000)])
def test_a_certificate_is_the_same_box_for_box_with_the_fast_paths_and_without(monkeypatch, tight, eps, max_boxes):
    """``certify_model`` of the [SL26] network at d = 2, P = 64 (built for eps = 2/5; certified at
    2/5 given as the instance's SymPy Rational, at 1/10 with the tight pass, and at 1/20 stopped
    undecided at 1,000 boxes): the proved boxes, their recorded bounds, the undecided boxes and the
    counts are the same with the fast paths and with the Fraction paths, computed here in turn."""
    from symbounds.core.boxes import CertifyOptions, certify_model
    from symbounds.core.modelfile import model_to_json
    from symbounds.papers import shi_liao as sl

    inst = sl.Instance(d=2, C_H=1, B=1, eps="2/5", target="sin(x1+x2)/2")
    mj = model_to_json(sl.build(sl.constants(inst)), 192)
    eps = inst.eps if eps is None else eps
    opts = CertifyOptions(workers=1, tight=tight, max_boxes=max_boxes or 200_000, min_width=F(1, 2**9))
    new = certify_model(mj, inst.target_text, 2, eps, opts)
    with monkeypatch.context() as m:
        _old_paths(m)
        old = certify_model(mj, inst.target_text, 2, eps, opts)
    assert new.verdict == old.verdict == ("undecided" if max_boxes else "proved")
    assert new.evaluated == old.evaluated and len(new.boxes) == len(old.boxes) >= 70
    assert [(b.lo, b.hi, bd) for b, bd in new.boxes] == [(b.lo, b.hi, bd) for b, bd in old.boxes]
    assert all(isinstance(bd, F) for _, bd in new.boxes)
    assert new.undecided == old.undecided and new.max_bound == old.max_bound and new.stopped == old.stopped
    covered = sum(b.volume() for b, _ in new.boxes) + sum(b.volume() for b in new.undecided)
    assert covered == 1


def test_box_bounds_on_double_ends_are_the_fraction_ones_and_enclose_the_error(monkeypatch):
    """``box_bounds`` with its float ends and float centres against the Fraction path on random
    dyadic boxes of ``[0, 1]^2`` in random order, with limits at, just above and just below the
    bounds (the comparisons and the rounding at their edges); and each bound above the 300-bit
    ``|T - g|`` at points of its box."""
    from symbounds.core.boxes import box_bounds, float_evaluator, point_error
    from symbounds.core.exact import arb_to_fraction
    from symbounds.core.modelfile import model_from_json, model_to_json
    from symbounds.papers import shi_liao as sl

    inst = sl.Instance(d=2, C_H=1, B=1, eps="2/5", target="sin(x1+x2)/2")
    K = sl.constants(inst)
    model = model_from_json(model_to_json(sl.build(K), 192))
    fast = float_evaluator(model, 128)
    rng = random.Random(11)
    boxes = []
    for _ in range(60):
        k = rng.randrange(2, 9)
        a = [F(rng.randrange(0, 2**k), 2**k) for _ in range(2)]
        w = [F(1, 2 ** rng.randrange(k, k + 4)) for _ in range(2)]
        boxes.append(Box(tuple(a), tuple(min(F(1), x + y) for x, y in zip(a, w))))
    plain = box_bounds(model, K.g, 2, boxes, 128, fast, arb=False)
    lims = []
    for b in plain:
        lims.append(rng.choice([b, b + F(1, 2**80), b - F(1, 2**80), F(2, 5), F(1, 10), round_up_record(b)]))
    outs = []
    for paths in ("fast", "old"):
        with monkeypatch.context() as m:
            if paths == "old":
                _old_paths(m)
            got = {}
            for key in ("centres", "axes", "estimates"):
                got[key] = []
            got["bounds"] = box_bounds(model, K.g, 2, boxes, 128, fast, lims, centres=got["centres"], axes=got["axes"],
                                       arb=False, estimates=got["estimates"])
            got["plain"] = box_bounds(model, K.g, 2, boxes, 128, fast, arb=False)
            outs.append(got)
    assert outs[0] == outs[1]
    assert outs[0]["plain"] == plain
    for box, bound in zip(boxes, plain):
        for x in (box.lo, box.hi, box.centre, (box.lo[0], box.hi[1])):
            err = point_error(model, K.g, 2, x, 300)
            assert arb_to_fraction(err.upper()) <= bound
