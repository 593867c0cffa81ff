"""The backward pass started from a property's rows ``c`` (linear_graph.objective_bounds): the bounds
of ``<c, Y>`` contain 300-bit values of ``<c, Y>`` at random points and corners of random boxes of
random small networks (at 128 bits and at 12, where a dropped radius is seen), a tampered start
(the coefficient's ball replaced by its midpoint) is caught by the same check, and on two outputs
``y1 = y2 + 1/100`` that are each wide the C-start proves ``y1 - y2 > 0`` on the whole box where
the per-output intervals cannot; verify and the property certificate's check decide it alike."""

import random
from fractions import Fraction

import flint
import pytest

from symbounds.core import linear_graph as lg
from symbounds.core.contexts import BallContext
from symbounds.core.graph_file import graph_from_json
from symbounds.core.property_certificate import check_property_certificate, make_property_certificate
from symbounds.core.search import Box, BoxEvaluator
from symbounds.core.vnnlib import PropertyProblem, parse_vnnlib, property_evaluator, verify


def mlp(rng, n_in, widths, acts, n_out, den=16):
    dy = lambda: str(Fraction(rng.randint(-3 * den, 3 * den), den))
    nodes, prev, w = [], "x", n_in
    for k, (width, act) in enumerate(zip(widths, acts)):
        nodes.append({"name": f"a{k}", "op": "affine", "inputs": [prev], "W": [[dy() for _ in range(w)] for _ in range(width)],
                      "b": [dy() for _ in range(width)]})
        nodes.append({"name": f"h{k}", "op": act, "inputs": [f"a{k}"]})
        prev, w = f"h{k}", width
    nodes.append({"name": "y", "op": "affine", "inputs": [prev], "W": [[dy() for _ in range(w)] for _ in range(n_out)],
                  "b": [dy() for _ in range(n_out)]})
    return graph_from_json({"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 1, "width": n_in},
                            "nodes": nodes, "output": "y"})


def objective_values(g, rows, x):
    """300-bit balls of ``<c, Y(x)>`` for each row ``c``."""
    ball = BallContext(300)
    with ball.scope():
        ys = g.evaluate(ball, x)
        out = []
        for c in rows:
            v = ball.convert(0)
            for a, y in zip(c, ys):
                v = v + ball.convert(a) * y
            out.append(v)
    return out


def violations(g, rows, c, h, prec, rng, n=12):
    """How many 300-bit values of ``<c, Y>`` at points of the box fall outside the C-start bounds
    (None: no bound)."""
    _, objs = lg.linear_graph_objective_bounds(g, c, h, rows, prec)
    if objs is None:
        return None
    m = len(c)
    pts = [[ci + hi * Fraction(rng.randint(-64, 64), 64) for ci, hi in zip(c, h)] for _ in range(n)]
    pts += [[ci + hi * s for ci, hi, s in zip(c, h, signs)] for signs in ([1] * m, [-1] * m, [(-1) ** i for i in range(m)])]
    bad = 0
    for x in pts:
        for (lo, hi), v in zip(objs, objective_values(g, rows, x)):
            if v < lo or v > hi:  # the whole 300-bit ball outside (arb comparisons are certain ones)
                bad += 1
    return bad


def random_rows(rng, k, n):
    picks = [Fraction(1), Fraction(-1), Fraction(1, 3), Fraction(-2, 7), Fraction(5, 2), Fraction(0)]
    return [[rng.choice(picks) for _ in range(k)] for _ in range(n)]


@pytest.mark.parametrize("seed,prec", [(s, 128) for s in range(8)] + [(s, 12) for s in range(8, 12)])
def test_objective_bounds_contain_300_bit_values(seed, prec):
    rng = random.Random(seed)
    n_in, k = rng.randint(1, 3), rng.randint(2, 4)
    acts = [rng.choice(["relu", "tanh", "leaky_relu", "sigmoid"]) for _ in range(rng.randint(1, 2))]
    g = graph_from_json({**_doc(mlp(rng, n_in, [rng.randint(2, 5) for _ in acts], acts, k))})
    rows = random_rows(rng, k, 3)
    checked = 0
    for _ in range(4):
        c = [Fraction(rng.randint(-32, 32), 16) for _ in range(n_in)]
        h = [Fraction(rng.choice([1, 4, 16, 48]), 64) for _ in range(n_in)]
        bad = violations(g, rows, c, h, prec, rng)
        if bad is not None:
            checked += 1
            assert bad == 0, (seed, c, h)
    assert checked


def _doc(g):
    from symbounds.core.graph_file import graph_to_json

    doc = graph_to_json(g)
    for nd in doc["nodes"]:  # leaky ReLU needs its slope
        if nd["op"] == "leaky_relu":
            nd.setdefault("alpha", "1/8")
    return doc


def _big_outputs():
    """``Y = relu(x + 1024)``: the ReLU's sign decided, the pass is exact at 128 bits up to rounding
    far below the box's width but for the start, whose 1/3, 1/5 and 2/7 are balls."""
    doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 1, "width": 2},
           "nodes": [{"name": "h", "op": "affine", "inputs": ["x"], "W": [["1", "0"], ["0", "1"]], "b": ["1024", "1024"]},
                     {"name": "y", "op": "relu", "inputs": ["h"]}],
           "output": "y"}
    return graph_from_json(doc)


def test_a_tampered_start_is_caught(monkeypatch):
    """The check can fail: with the start's coefficients taken as float64 numbers instead of balls
    holding the exact rationals (1/3 off by ~2^-55, times outputs near 1024), the bounds of ``<c, Y>``
    on a box of half-width 2^-60 exclude 300-bit values; with the outward start they do not."""
    g = _big_outputs()
    rows = [[Fraction(1, 3), Fraction(1, 5)], [Fraction(-1, 3), Fraction(2, 7)]]
    c, h = [Fraction(1, 4), Fraction(-1, 2)], [Fraction(1, 2**60)] * 2
    assert violations(g, rows, c, h, 128, random.Random(1)) == 0
    monkeypatch.setattr(lg, "_start_entry", lambda a: flint.arb(float(a)))
    assert violations(g, rows, c, h, 128, random.Random(1)) > 0


def _twins():
    """``Y_0 = f(x) + 1/100``, ``Y_1 = f(x)`` for a ReLU network ``f`` whose range over the box is wide."""
    rng = random.Random(5)
    dy = lambda: str(Fraction(rng.randint(-48, 48), 16))
    W1 = [[dy(), dy()] for _ in range(6)]
    w2 = [dy() for _ in range(6)]
    doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 1, "width": 2},
           "nodes": [{"name": "a", "op": "affine", "inputs": ["x"], "W": W1, "b": [dy() for _ in range(6)]},
                     {"name": "r", "op": "relu", "inputs": ["a"]},
                     {"name": "y", "op": "affine", "inputs": ["r"], "W": [w2, w2], "b": ["1/100", "0"]}],
           "output": "y"}
    return graph_from_json(doc)


SPEC = """(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const Y_0 Real)
(declare-const Y_1 Real)
(assert (>= X_0 -1))
(assert (<= X_0 1))
(assert (>= X_1 -1))
(assert (<= X_1 1))
(assert (<= Y_0 Y_1))
"""


def test_the_c_start_proves_what_per_output_intervals_cannot():
    g = _twins()
    spec = parse_vnnlib(SPEC)
    problem = PropertyProblem(spec, 2)
    assert problem.c_rows == [[Fraction(1), Fraction(-1)]] or problem.c_rows == [[Fraction(-1), Fraction(1)]]
    box = Box(tuple(spec.lo), tuple(spec.hi))
    (c,) = spec.unsafe[0]
    with_c = property_evaluator(g, problem, 128).enclose([box])[0]
    without = BoxEvaluator(g, 128, linear=True).enclose([box])[0]  # per-output linear bounds and Taylor models
    assert with_c.objectives is not None and without.objectives is None
    # the per-output intervals are each wide, their difference straddles 0: nothing decided
    assert min(b - a for a, b in zip(without.lo, without.hi)) > 1
    lo_without = problem._range(c, without)[0]
    assert lo_without <= 0
    # from c itself the pass is exact here: <c, Y> = Y_1 - Y_0 = -1/100, so the unsafe Y_0 <= Y_1 is never met
    lo, hi = problem._range(c, with_c)
    assert lo > 0 or hi < 0
    assert abs(abs(lo) - Fraction(1, 100)) < Fraction(1, 10**20)
    res = verify(g, spec)
    assert res.verdict == "proved" and res.boxes == 1
    off = verify(g, spec, objectives=False, max_boxes=200)
    assert off.verdict != "proved" or off.boxes > 1
    from symbounds.core.version import __version__

    cert = make_property_certificate(version=__version__, model=g, spec_text=SPEC, result=res, prec=128)
    assert check_property_certificate(cert)["leaves"] == 1


@pytest.mark.parametrize("seed,prec", [(s, 128) for s in range(4)] + [(4, 12)])
def test_objective_bounds_of_relaxed_attention_contain_300_bit_values(seed, prec, monkeypatch):
    """The C-start through softmax attention relaxed alone (its Taylor-model pass dropped): the
    bounds of ``<c, Y>`` over the rows of attention graphs (heads, masks, sequences, layouts)
    contain 300-bit values, so the relaxation is sound when the pass starts from ``c``."""
    from test_linear_graph import attention_only_graph

    passes = lg._Bounds._passes
    monkeypatch.setattr(lg._Bounds, "_passes", lambda self, upto: [p for p in passes(self, upto) if not p[1]])
    rng = random.Random(seed)
    checked = 0
    for _ in range(3):
        g = graph_from_json(attention_only_graph(rng))
        n, k = g.input_count, g.output_count
        rows = random_rows(rng, k, 3)
        for _ in range(2):
            c = [Fraction(rng.randint(-16, 16), 16) for _ in range(n)]
            h = [Fraction(rng.choice([1, 8, 32]), 256) for _ in range(n)]
            bad = violations(g, rows, c, h, prec, rng)
            if bad is not None:
                checked += 1
                assert bad == 0, (seed, c, h)
    assert checked >= 3
