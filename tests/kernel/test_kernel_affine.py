"""The kernel's affine stage in O(H n) rows (symbounds_kernel/affine.py) against every head's full
n x n scores (network._head) and against a 300-bit evaluation of the same exact weights.

The shortcuts are the values' support (only the columns where a head's values are non-zero) and the
normalisers shared by rows whose queries lie in one widened ball.  Each is tested where it can go
wrong: queries that agree to 2^-60 (the same name at the 2^-40 grid, but outside the 2^-112
widening, so they must not share), queries that agree exactly, heads of wide support (the full
path), heads whose values are exactly zero, and random networks in random head order.
"""

import random
from fractions import Fraction

import mpmath
import pytest
from flint import arb, ctx

from symbounds_kernel import affine
from symbounds_kernel.network import Network, _head, embed, parse_model


def _num(q: Fraction) -> str:
    return f"{q.numerator}/{q.denominator}"


def _model(rng, n, heads, near=None, dq=4, skip=0):
    """A vector-input model (d = 2) whose first layer's scores read the rows 4.. only (no x):
    rows 0, 1 carry x at column 0, row 2 is the constant row (1 at column 0), row 3 a marker at
    columns 1 and 2, rows 4..4+dq the positions.  ``near``: the queries of all heads are one matrix
    times ``1 + near (h + 1)``."""
    D = 4 + dq
    base = [[Fraction(0)] * n for _ in range(4)] + [[Fraction(rng.randint(-64, 64), 64) for _ in range(n)]
                                                  for _ in range(dq)]
    base[2][0], base[3][1], base[3][2] = Fraction(1), Fraction(rng.randint(1, 9), 4), Fraction(-rng.randint(1, 9), 4)
    E = [[Fraction(int(r == i)) for i in range(2)] for r in range(D)]
    WQ0 = [[Fraction(0)] * 4 + [Fraction(rng.randint(-8, 8), 8) for _ in range(dq)] for _ in range(2)]
    WK = [[Fraction(0)] * 4 + [Fraction(rng.randint(-40, 40), 4) for _ in range(dq)] for _ in range(2)]
    hs = []
    w = lambda: Fraction(rng.randint(-4, 4), 4)
    for h in range(heads):
        if near is None:
            WQ = [[Fraction(0)] * 4 + [Fraction(rng.randint(-8, 8), 8) for _ in range(dq)] for _ in range(2)]
        else:
            WQ = [[v * (1 + near * (h + 1)) for v in row] for row in WQ0]
        kind = h % 4
        if kind == 3:  # values of wide support: the positions
            WV = [[Fraction(0)] * 4 + [w() for _ in range(dq)]]
        elif kind == 2:  # values read a row that is exactly 0: no contribution
            WV = [[Fraction(0)] * D]
        elif kind == 1:  # the constant row and the marker: columns 0, 1, 2
            WV = [[Fraction(0), Fraction(0), Fraction(1) + w() ** 2, Fraction(1) + w() ** 2] + [Fraction(0)] * dq]
        else:  # x and the constant row: column 0 only
            WV = [[w(), w(), w(), Fraction(0)] + [Fraction(0)] * dq]
        WO = [[Fraction(rng.randint(-4, 4), 4)] for _ in range(D)]
        hs.append({k: [[_num(v) for v in r] for r in M] for k, M in
                   (("W_Q", WQ), ("W_K", WK), ("W_V", WV), ("W_O", WO))})
    rng.shuffle(hs)
    return {"format": "symbounds-transformer/1", "input": "vector", "precision_bits": 64,
            "embedding": {"base": [[_num(v) for v in r] for r in base], "E": [[_num(v) for v in r] for r in E],
                          "column": 0},
            "layers": [{"type": "attention", "kind": "softmax", "skip": _num(Fraction(skip)), "tau": "1/2", "heads": hs}],
            "readout": {"row": 0, "column": 0}}


def _stage(model, fast):
    base, E, col, layers, _ = parse_model(model, 2)
    A, B = embed(base, E, col, 2)
    assert Network._constant_scores(layers[0], B)
    if fast:
        return Network._affine_attention(layers[0], A, B)
    return Network._affine_attention(layers[0], A, B, record=[])  # every head's full n x n scores


def _reference(model, x):
    """Column by column, the layer's output at the input ``x`` in 300-bit mpmath, from the JSON."""
    with mpmath.workprec(300):
        f = lambda s: mpmath.mpf(Fraction(s).numerator) / Fraction(s).denominator
        emb, L = model["embedding"], model["layers"][0]
        Z = [[f(v) for v in r] for r in emb["base"]]
        for r, row in enumerate(emb["E"]):
            Z[r][0] += sum(f(w) * xi for w, xi in zip(row, x))
        n, D, inv_tau = len(Z[0]), len(Z), 1 / f(L["tau"])
        out = [[f(L["skip"]) * Z[r][j] for j in range(n)] for r in range(D)]
        for H in L["heads"]:
            WQ, WK, WV, WO = ([[f(v) for v in r] for r in H[k]] for k in ("W_Q", "W_K", "W_V", "W_O"))
            mul = lambda W, j: [mpmath.fsum(w * Z[c][j] for c, w in enumerate(row)) for row in W]
            keys = [mul(WK, k) for k in range(n)]
            vals = [mul(WV, k) for k in range(n)]
            for j in range(n):
                q = mul(WQ, j)
                s = [inv_tau * mpmath.fsum(a * b for a, b in zip(q, kk)) for kk in keys]
                m = max(s)
                e = [mpmath.exp(v - m) for v in s]
                t = mpmath.fsum(e)
                v = [mpmath.fsum(e[k] * vals[k][a] for k in range(n)) / t for a in range(len(WV))]
                for r in range(D):
                    out[r][j] += mpmath.fsum(WO[r][a] * v[a] for a in range(len(WV)))
        return out


def _contains(ball: arb, v) -> bool:
    """Is the 300-bit value ``v`` (to 90 digits, far inside radii of 1e-30 and more) in ``ball``?"""
    old = ctx.prec
    ctx.prec = 320
    try:
        return ball.contains(arb(mpmath.nstr(v, 90, strip_zeros=False)))
    finally:
        ctx.prec = old


@pytest.mark.parametrize("seed, near", [(0, None), (1, None), (2, Fraction(0)), (3, Fraction(1, 2**60)),
                                        (4, Fraction(1, 2**200)), (5, Fraction(1, 2**120))])
def test_the_affine_stage_contains_the_300_bit_layer_and_the_full_stage(seed, near):
    rng = random.Random(seed)
    model = _model(rng, n=rng.randint(12, 16), heads=rng.randint(5, 9), near=near, skip=rng.choice((0, 1)))
    ctx.prec = 128
    try:
        A1, B1 = _stage(model, fast=True)
        A0, B0 = _stage(model, fast=False)
    finally:
        ctx.prec = 53
    for M0, M1 in zip([A0] + B0, [A1] + B1):
        for a, b in zip(M0.entries(), M1.entries()):
            assert a.overlaps(b)
            assert b.rad() <= 1e6 * a.rad() + arb(2) ** -90  # the widening costs digits far below the scores'
    for x in ([Fraction(0), Fraction(0)], [Fraction(1), Fraction(0)], [Fraction(0), Fraction(1)],
              [Fraction(rng.randint(0, 64), 64), Fraction(rng.randint(0, 64), 64)]):
        ref = _reference(model, x)
        for r, row in enumerate(ref):
            for j, v in enumerate(row):
                ball = A1[r, j] + sum((b[r, j] * (arb(xi.numerator) / xi.denominator) for b, xi in zip(B1, x)), arb(0))
                assert _contains(ball, v), (r, j)


def test_queries_that_agree_to_2_to_the_minus_60_do_not_share_a_normaliser(monkeypatch):
    """Same name at the 2^-40 grid, outside the 2^-112 widening: each row gets its own sum.  Were the
    containment not checked, the second head's normalisers would be the first's, wrong by about
    2^-60 |q| |kappa| relative, and the 300-bit values fall outside the ~1e-25 balls."""
    rng = random.Random(7)
    model = _model(rng, n=12, heads=4, near=Fraction(1, 2**60))
    made = []
    real = affine._normaliser

    def counting(classes, wk, q, K):
        before = len(classes), [id(v) for v in classes.values()]
        t = real(classes, wk, q, K)
        made.append((len(classes), [id(v) for v in classes.values()]) != before)
        return t

    monkeypatch.setattr(affine, "_normaliser", counting)
    ctx.prec = 128
    try:
        A1, B1 = _stage(model, fast=True)
    finally:
        ctx.prec = 53
    heads_small = sum(1 for H in model["layers"][0]["heads"] if H["W_V"][0][4:] == ["0/1"] * 4
                      and any(v != "0/1" for v in H["W_V"][0]))
    assert heads_small == 2 and sum(made) == heads_small * 12  # a new sum for every row: nothing shared
    ref = _reference(model, [Fraction(1, 3), Fraction(2, 3)])
    x = [arb(1) / 3, arb(2) / 3]
    assert all(_contains(A1[r, j] + B1[0][r, j] * x[0] + B1[1][r, j] * x[1], ref[r][j])
               for r in range(len(ref)) for j in range(len(ref[0])))


@pytest.mark.parametrize("near", [Fraction(0), Fraction(1, 2**120)])
def test_equal_queries_share_one_normaliser_per_row(monkeypatch, near):
    """Queries equal, or equal to 8 2^-120 (as a model file's independently rounded heads are, and
    inside the 2^-112 widening): one sum per query column for all the heads."""
    rng = random.Random(8)
    model = _model(rng, n=12, heads=8, near=near)
    ctx.prec = 128
    try:
        base, E, col, layers, _ = parse_model(model, 2)
        A, B = embed(base, E, col, 2)
        classes = {}
        calls = []
        real = affine._normaliser
        monkeypatch.setattr(affine, "_normaliser", lambda c, wk, q, K: calls.append(len(c)) or real(classes, wk, q, K))
        affine.affine_softmax(layers[0], A, B, lambda *H: _head("softmax", layers[0][3], H, [A] + B))
    finally:
        ctx.prec = 53
    assert len(classes) == 12 and len(calls) == 12 * sum(1 for k in range(8) if k % 4 in (0, 1))


def test_a_tampered_normaliser_is_caught_by_the_reference(monkeypatch):
    """The comparison can fail: a normaliser 2^-80 too large moves every weight out of its ball."""
    rng = random.Random(9)
    model = _model(rng, n=12, heads=5)
    real = affine._normaliser
    monkeypatch.setattr(affine, "_normaliser", lambda *a: real(*a) * (1 + arb(2) ** -80))
    ctx.prec = 128
    try:
        A1, B1 = _stage(model, fast=True)
    finally:
        ctx.prec = 53
    ref = _reference(model, [Fraction(0), Fraction(0)])
    assert not all(_contains(A1[r, j], ref[r][j]) for r in range(len(ref)) for j in range(len(ref[0])))
