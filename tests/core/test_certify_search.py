"""The whole-domain certificate on the shared box search (symbounds.core.search): the order and
size of the search's steps change nothing, the box budget is never exceeded, a timeout ends
undecided, and a problem may refute a box from its enclosure.  The bounds are compared with the
exact sup of ``|x - x^2|`` over each box, worked by hand."""

from fractions import Fraction as F

import pytest

from symbounds import model_to_json
from symbounds.core import boxes as boxes_mod
from symbounds.core.boxes import Box, CertifyOptions, boxes_cover_cube, certify_model
from symbounds.core.claims import Verdict
from symbounds.core.network import Embedding, FeedForward, Readout
from symbounds.core.search import Enclosure, Limits, Problem, search
from symbounds.core.transformer import Transformer

#: |x - x^2| <= 1/4, reached at x = 1/2 only: the boxes near 1/2 are halved a few times
EPS = F(251, 1000)


def identity_json() -> dict:
    ffn = FeedForward(W1=((1,),), b1=(0,), W2=((1,),), b2=(0,), skip=0)  # relu(x) = x on [0, 1]
    return model_to_json(Transformer(layers=(ffn,), embedding=Embedding(((0,),), ((1,),)), readout=Readout(0, 0)))


def exact_sup(box: Box) -> F:
    """``sup |x - x^2|`` over ``[a, b]`` in ``[0, 1]``: ``x - x^2`` rises to 1/4 at 1/2, then falls."""
    a, b = box.lo[0], box.hi[0]
    return F(1, 4) if a <= F(1, 2) <= b else max(a - a * a, b - b * b)


def tiles(res) -> list:
    return [b for b, _ in res.boxes] + res.undecided


def test_the_size_of_a_step_changes_no_box_of_the_certificate(monkeypatch):
    """Four boxes halved per step instead of 4,096 (so the levels are cut into many steps): the
    same boxes proved with the same bounds, each at least the exact sup over its box."""
    mj = identity_json()
    whole = certify_model(mj, "x1**2", 1, EPS, CertifyOptions(initial=64))
    monkeypatch.setattr(boxes_mod, "STEP", 4)
    small = certify_model(mj, "x1**2", 1, EPS, CertifyOptions(initial=64))
    assert whole.verdict == small.verdict == "proved"
    assert whole.boxes == small.boxes and whole.evaluated == small.evaluated > 64
    assert all(exact_sup(b) <= bound <= EPS for b, bound in whole.boxes)
    assert boxes_cover_cube(tiles(whole), 1) and sum(b.volume() for b in tiles(whole)) == 1
    assert any(b.width() < F(1, 64) for b, _ in whole.boxes)  # refined near 1/2


def test_at_most_max_boxes_are_evaluated_and_the_open_boxes_are_left_as_halves():
    """A budget of 70 boxes after a first grid of 64: the next step is cut to three boxes halved
    (70 evaluated, not 64 and not more than 70); the boxes left open are reported as their halves,
    and proved and undecided boxes tile the cube."""
    res = certify_model(identity_json(), "x1**2", 1, EPS, CertifyOptions(initial=64, max_boxes=70))
    assert res.verdict == "undecided" and res.stopped == "max-boxes" and res.evaluated == 70
    assert boxes_cover_cube(tiles(res), 1) and sum(b.volume() for b in tiles(res)) == 1
    assert all(exact_sup(b) <= bound <= EPS for b, bound in res.boxes)
    assert all(b.width() <= F(1, 128) for b in res.undecided)  # halves of the first grid's boxes


def test_a_first_grid_larger_than_the_budget_is_left_undecided_unevaluated():
    res = certify_model(identity_json(), "x1**2", 1, EPS, CertifyOptions(initial=64, max_boxes=63))
    assert res.verdict == "undecided" and res.evaluated == 0 and res.boxes == []
    assert res.undecided == boxes_mod._initial_boxes(1, 64)


def test_a_timeout_ends_undecided_with_the_boxes_proved_so_far():
    """A timeout of 0 s: the first grid is evaluated, then the search stops between steps."""
    res = certify_model(identity_json(), "x1**2", 1, EPS, CertifyOptions(initial=64, timeout=0))
    assert res.verdict == "undecided" and res.stopped == "timeout" and res.evaluated == 64
    assert res.boxes and all(exact_sup(b) <= bound <= EPS for b, bound in res.boxes)
    assert boxes_cover_cube(tiles(res), 1) and sum(b.volume() for b in tiles(res)) == 1


class _Exact:
    """``T(x) = x`` enclosed exactly over a box (``[lo, hi]``)."""

    batch = 2

    def __init__(self):
        self.counts: dict = {}

    def enclose(self, boxes, parents=None, deadline=None):
        return [Enclosure(b.lo, b.hi, "exact") for b in boxes]


class _Above(Problem):
    """``x <= 1/2`` proved on a box with ``hi <= 1/2``, refuted on one with ``lo > 3/4`` (its
    centre is a counterexample), else halved."""

    falsify = False
    probe = False

    def decide(self, box, enc):
        if enc.hi[0] <= F(1, 2):
            return Verdict.PROVED
        return Verdict.REFUTED if enc.lo[0] > F(3, 4) else Verdict.UNDECIDED

    def counterexample(self, box, enc):
        return {"x": box.centre}

    def objectives(self):
        return []


@pytest.mark.parametrize("initial", [None, [Box((F(k, 8),), (F(k + 1, 8),)) for k in range(8)]])
def test_a_box_the_problem_refutes_ends_the_search_with_its_counterexample(initial):
    """From the cube or from a grid of eighths (whose box ``[7/8, 1]`` is refuted as it is
    admitted): refuted, the counterexample a centre above 3/4, every decided box below 1/2, and
    the decided and open boxes still tile the cube."""
    cube = Box((F(0),), (F(1),))
    res = search(_Above(), _Exact(), cube, Limits(), None, initial)
    assert res.verdict is Verdict.REFUTED and res.counterexample["x"][0] > F(3, 4)
    assert all(b.hi[0] <= F(1, 2) for b, _ in res.decided)
    boxes = [b for b, _ in res.decided + res.open]
    assert boxes_cover_cube(boxes, 1) and sum(b.volume() for b in boxes) == 1
