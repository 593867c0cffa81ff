"""The fused box kernel (symbounds/core/fused_boxes.py) against the NumPy pass and 300-bit values.

Independent computations: the network's value at sampled points of each box, evaluated here in
mpmath at 300 bits straight from the formulas (embedding ``base + E x``, softmax attention
``sum_h W_O W_V Z softmax(Z^T W_Q^T W_K Z / tau)`` plus the skip, ``W2 relu(W1 Z + b1) + b2``
plus the skip, the readout entry), never through the package's forward pass; and the NumPy float
pass of symbounds/core/float_boxes.py, run in the same process with the kernel switched off.
Both enclosures must contain every sampled value.
"""

import os
import random
import subprocess
import sys
from fractions import Fraction as F

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symbounds.core import fused_boxes
from symbounds.core import outward as fo
from symbounds.core.boxes import Box
from symbounds.core.float_boxes import evaluator
from symbounds.core.transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer, as_matrix

MARGIN = mpmath.mpf(2) ** -250  # far below any float bound's resolution, far above 300-bit error


# ------------------------------------------------------------------------------------------
# the network family: an affine prefix, then one attention layer with input-dependent scores
# (read at the readout column), then feed-forward layers


def fused_network(rng: random.Random, d: int, scale=1, tie=False) -> Transformer:
    """Rows 0..d-1 carry x, row d the constant 1, row d+1 an input-independent working row (keys
    of the first layer read it), the rest working rows.  Layer 0: heads with input-independent
    scores and values reading x (affine); optionally an FFN of linear ReLU pairs (affine); then the
    attention layer the kernel covers (queries read x, times ``scale``; skip, tau); then 0-2 FFNs
    with plain ReLUs, biases, a pair and skips.  ``tie``: two tokens with equal (or 2^-40 apart)
    key columns, so two scores are (nearly) tied."""
    n = rng.randint(3, 5)
    C, W0 = d, d + 1
    D = d + 2 + rng.randint(0, 2)
    small = lambda: F(rng.randint(-4, 4), rng.choice([1, 2, 4]))
    nonzero = lambda: F(rng.choice([-4, -3, -2, -1, 1, 2, 3, 4]), rng.choice([1, 2, 4]))
    work = [r for r in range(D) if r not in (C, W0)]
    base = [[0] * n for _ in range(D)]
    for j in range(n):
        base[C][j] = 1
        base[W0][j] = small()
        for r in work:
            base[r][j] = small() if rng.random() < 0.6 else 0
    column = rng.randrange(n)
    if tie:
        a, b = [k for k in range(n) if k != column][:2]
        for r in range(D):
            base[r][b] = base[r][a]
        if rng.random() < 0.5:
            base[W0][b] += F(1, 2**40)
    E = [[1 if r == i else 0 for i in range(d)] for r in range(D)]
    for r in work[d:]:
        if rng.random() < 0.4:
            E[r] = [small() for _ in range(d)]

    def reading(rows, k=1):
        v = [0] * D
        for r in rows:
            v[r] = nonzero() * k
        return tuple(v)

    def writer():  # never the constant rows, never all zero (a silent head)
        w = [small() if (r not in (C, W0) and rng.random() < 0.7) else 0 for r in range(D)]
        w[rng.choice(work + list(range(d)))] = nonzero()
        return tuple((v,) for v in w)

    layers = []
    heads0 = [Head((reading([C]),), (reading([C, W0]),), (reading(rng.sample(range(d), 1) + [C]),), writer())
              for _ in range(rng.randint(1, 2))]
    layers.append(Attention(tuple(heads0), "softmax", skip=1))
    if rng.random() < 0.5:  # an affine FFN: relu(y) - relu(-y) = y
        y = reading(rng.sample(work, 1))
        v = [c[0] for c in writer()]
        W2 = tuple((v[r], -v[r]) for r in range(D))
        layers.append(FeedForward((y, tuple(-w for w in y)), (0, 0), W2, (0,) * D, skip=1))
    heads = []
    for _ in range(rng.randint(1, 2)):
        WQ = (reading(rng.sample(range(d), 1) + [C], scale),)
        WK = (reading([W0] + rng.sample(work, min(1, len(work)))),)
        WV = (reading(rng.sample(range(D), 2)),)
        heads.append(Head(WQ, WK, WV, writer()))
    tau = rng.choice([None, None, F(1, 2), 2])
    layers.append(Attention(tuple(heads), "softmax", skip=rng.choice([0, 1, F(1, 2)]), tau=tau))
    for _ in range(rng.randint(0, 2)):
        W1, b1, cols = [], [], []
        y = reading(rng.sample(work + list(range(d)), 1))
        v = [c[0] for c in writer()]
        W1 += [y, tuple(-w for w in y)]
        b1 += [0, 0]
        sign = rng.choice([-1, 1])
        cols += [v, [sign * w for w in v]]
        for _ in range(rng.randint(1, 3)):
            W1.append(reading(rng.sample(range(D), 2)))
            b1.append(small())
            cols.append([c[0] for c in writer()])
        W2 = tuple(tuple(col[r] for col in cols) for r in range(D))
        b2 = tuple(small() if rng.random() < 0.3 else 0 for _ in range(D))
        layers.append(FeedForward(tuple(W1), tuple(b1), W2, b2, skip=rng.choice([0, 1])))
    return Transformer(layers=tuple(layers),
                       embedding=Embedding(base=as_matrix(base), E=as_matrix(E), column=column),
                       readout=Readout(rng.choice(work + list(range(d))), column))


# ------------------------------------------------------------------------------------------
# the independent evaluation: mpmath at 300 bits, from the formulas

def _mp(v):
    q = F(v)
    return mpmath.mpf(q.numerator) / q.denominator


def mp_value(model: Transformer, x):
    """The readout at ``x`` (exact rationals), 300-bit mpmath, written from the formulas."""
    with mpmath.workprec(300):
        emb = model.embedding
        D, n = len(emb.base), len(emb.base[0])
        Z = [[_mp(emb.base[r][k]) for k in range(n)] for r in range(D)]
        for r in range(D):
            Z[r][emb.column] += mpmath.fsum(_mp(emb.E[r][i]) * _mp(x[i]) for i in range(len(x)))
        for layer in model.layers:
            if isinstance(layer, Attention):
                out = [[_mp(layer.skip) * Z[r][k] for k in range(n)] for r in range(D)]
                inv_tau = 1 / _mp(layer.tau) if layer.tau is not None else mpmath.mpf(1)
                for hd in layer.heads:
                    def lin(W, Z=Z):
                        return [[mpmath.fsum(_mp(W[a][r]) * Z[r][k] for r in range(D)) for k in range(n)]
                                for a in range(len(W))]
                    Q, K, V = lin(hd.W_Q), lin(hd.W_K), lin(hd.W_V)
                    for j in range(n):
                        s = [inv_tau * mpmath.fsum(Q[a][j] * K[a][k] for a in range(len(Q))) for k in range(n)]
                        m = max(s)
                        e = [mpmath.exp(v - m) for v in s]
                        tot = mpmath.fsum(e)
                        A = [mpmath.fsum(V[a][k] * e[k] for k in range(n)) / tot for a in range(len(V))]
                        for r in range(D):
                            out[r][j] += mpmath.fsum(_mp(hd.W_O[r][a]) * A[a] for a in range(len(A)))
                Z = out
            else:
                H = [[max(mpmath.fsum(_mp(layer.W1[u][r]) * Z[r][k] for r in range(D)) + _mp(layer.b1[u]), 0)
                      for k in range(n)] for u in range(len(layer.W1))]
                Z = [[mpmath.fsum(_mp(layer.W2[r][u]) * H[u][k] for u in range(len(H))) + _mp(layer.b2[r])
                      + _mp(layer.skip) * Z[r][k] for k in range(n)] for r in range(D)]
        return Z[model.readout.row][model.readout.column]


def _boxes(rng, d, k):
    out = []
    for _ in range(k):
        h = rng.choice([F(1, 2), F(1, 8), F(1, 64), F(1, 2**20), F(0)])
        c = [F(rng.randint(-64, 64), 64) for _ in range(d)]
        out.append(Box(tuple(ci - h for ci in c), tuple(ci + h for ci in c)))
    rng.shuffle(out)
    return out


def _points(rng, box, k):
    d = len(box.lo)
    corners = [tuple(box.hi[i] if (m >> i) & 1 else box.lo[i] for i in range(d)) for m in range(2**d)]
    inner = [tuple(box.lo[i] + (box.hi[i] - box.lo[i]) * F(rng.randint(0, 1024), 1024) for i in range(d))
             for _ in range(k)]
    return corners + [box.centre] + inner


def plan_of(ev):
    return fused_boxes._plan(ev, ev._prefix, ev._rows_read)


def _enclose(ev, boxes, fused: bool, monkeypatch):
    monkeypatch.setattr(fused_boxes, "ENABLED", fused)
    return ev.enclose([b.lo for b in boxes], [b.hi for b in boxes])


def check_fused_against_numpy_and_mpmath(seed: int, monkeypatch, n_boxes=6, n_points=2, **kw) -> int:
    """Random boxes in random batches: the kernel's and the NumPy pass's enclosures of the
    readout (and of its value at each centre) both contain the 300-bit values at sampled points,
    agree on which boxes were enclosed, and differ by rounding only.  Returns boxes decided."""
    rng = random.Random(seed)
    d = rng.choice([1, 2])
    model = fused_network(rng, d, **kw)
    ev = evaluator(model)
    ev.setup()
    assert fused_boxes.load() is not None and plan_of(ev) is not None, "the kernel must cover the family"
    boxes = _boxes(rng, d, n_boxes)
    decided = 0
    while boxes:
        k = rng.randint(1, len(boxes))
        batch, boxes = boxes[:k], boxes[k:]
        fz = _enclose(ev, batch, True, monkeypatch)
        nz = _enclose(ev, batch, False, monkeypatch)
        assert (fz[2] == nz[2]).all(), seed
        for b, box in enumerate(batch):
            if not fz[2][b]:
                continue
            decided += 1
            for lo, hi in ((fz[0][b], fz[1][b]), (nz[0][b], nz[1][b])):
                for x in _points(rng, box, n_points):
                    v = mp_value(model, x)
                    assert lo <= v + MARGIN and v - MARGIN <= hi, (seed, box, x, lo, hi, v)
            v0 = mp_value(model, box.centre)
            for clo, chi in ((fz[3][b], fz[4][b]), (nz[3][b], nz[4][b])):
                assert clo <= v0 + MARGIN and v0 - MARGIN <= chi, (seed, box, clo, chi, v0)
            # the same enclosure up to the rounding of sums taken in another order, the kernel's
            # error term eta' = 2^-500 per step (outward.py's: 2^-1074) and a far weight's
            # [0, 2^-300] decided on one side of LN_TINY in one pass and not in the other
            width = max(nz[1][b] - nz[0][b], 2.0**-1000)
            for i in (0, 1, 3, 4):
                assert abs(fz[i][b] - nz[i][b]) <= 1e-9 * (abs(nz[i][b]) + width) + 2.0**-250, (seed, i, fz[i][b],
                                                                                                nz[i][b])
    return decided


#: Outside CI, a machine without numba (the ``fast`` extra) skips the kernel's own tests; in CI
#: (numba comes with the ``dev`` extra) they run, and fail if numba is missing.
needs_numba = pytest.mark.skipif(not fused_boxes.ENABLED and not os.environ.get("CI"),
                                 reason="numba not installed (the fast extra)")


@needs_numba
def test_fused_kernel_fixed_seeds(monkeypatch):
    decided = sum(check_fused_against_numpy_and_mpmath(s, monkeypatch, n_points=1) for s in range(12))
    assert decided >= 50


@needs_numba
def test_fused_kernel_near_ties_and_large_scales(monkeypatch):
    """Two tokens with equal or 2^-40-apart key columns; queries times 64 and 512 (scores of
    hundreds: most softmax terms underflow below e^-745 on the far tokens)."""
    decided = 0
    for s in range(6):
        decided += check_fused_against_numpy_and_mpmath(100 + s, monkeypatch, n_points=1, tie=True)
        decided += check_fused_against_numpy_and_mpmath(200 + s, monkeypatch, n_points=1, scale=64)
        decided += check_fused_against_numpy_and_mpmath(300 + s, monkeypatch, n_points=1, scale=512, tie=True)
    assert decided >= 60


@needs_numba
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32), scale=st.sampled_from([1, 8, 256]), tie=st.booleans())
def test_fused_kernel_property(seed, scale, tie):
    mp = pytest.MonkeyPatch()
    try:
        check_fused_against_numpy_and_mpmath(seed, mp, n_boxes=4, n_points=1, scale=scale, tie=tie)
    finally:
        mp.undo()


@needs_numba
def test_exp_bounds_bit_for_bit():
    """The kernel's exp bounds (scalar, and the loop bodies written out for vectorisation) are
    outward.py's, bit for bit, over the whole double range and at the special values where the
    kernel's rounding error term ``eta' = 2^-500`` is below half an ulp (bounds above 2^-390; so
    no contraction into fused multiply-adds happened, and the branch-free scaling by 2^k rounds as
    ldexp does), and enclose them below (``eta'`` larger than outward.py's ``2^-1074``)."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-800, 800, 4000), rng.uniform(-1, 1, 1000), rng.uniform(-746, -700, 2000),
                        rng.uniform(700, 710, 200),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 709.78, 709.8, -745.2, -745.1, -745.3,
                                  1e-300, -1e-300, 5e-324])])

    @fused_boxes.load().njit
    def scalar(v, up, lo):
        for k in range(v.shape[0]):
            up[k] = fused_boxes._exp_upper(v[k])
            lo[k] = fused_boxes._exp_lower(v[k])

    up, lo = np.empty_like(x), np.empty_like(x)
    up2, lo2, up3 = np.empty_like(x), np.empty_like(x), np.empty_like(x)
    scalar(x, up, lo)
    fused_boxes._exp_arrays(x, lo2, up2, len(x))
    fused_boxes._exp_upper_array(x, up3, len(x))
    with np.errstate(all="ignore"):
        want_up, want_lo = fo.exp_upper(x), fo.exp_lower(x)
    big_up, big_lo = ~(want_up < 2.0**-390), ~(want_lo < 2.0**-390)  # NaN included
    assert big_up.sum() > 3000 and (~big_up).sum() > 1000 and (want_lo[~big_lo] > 0).sum() > 500
    for got in (up, up2, up3):
        np.testing.assert_array_equal(got[big_up], want_up[big_up])
        assert (got[~big_up] >= want_up[~big_up]).all() and (got[~big_up] <= 2.0**-380).all()
    for got in (lo, lo2):
        np.testing.assert_array_equal(got[big_lo], want_lo[big_lo])
        assert (got[~big_lo] <= want_lo[~big_lo]).all() and (got[~big_lo] >= 0).all()
    assert (lo2[np.isfinite(x) & (x < -745.2)] == 0).all() and (up2[x > 709.79] == np.inf).all()


@needs_numba
def test_tampered_network_is_seen(monkeypatch):
    """One weight of the kernel's attention layer changed by 1/8: at a point box the kernel's
    enclosure of the tampered network contains the tampered value and excludes the original's."""
    rng = random.Random(7)
    for seed in range(40):
        rng = random.Random(seed)
        model = fused_network(rng, 2)
        att = next(i for i, layer in enumerate(model.layers) if i > 0 and isinstance(layer, Attention))
        layer = model.layers[att]
        hd = layer.heads[0]
        row = model.readout.row
        WO = [list(r) for r in hd.W_O]
        WO[row][0] = F(WO[row][0]) + F(1, 8)
        heads = (Head(hd.W_Q, hd.W_K, hd.W_V, as_matrix(WO)),) + layer.heads[1:]
        tampered = Transformer(layers=model.layers[:att] + (Attention(heads, "softmax", layer.skip, layer.tau),)
                               + model.layers[att + 1:], embedding=model.embedding, readout=model.readout)
        x = (F(1, 3), F(-1, 5))
        v, vt = mp_value(model, x), mp_value(tampered, x)
        if abs(v - vt) < mpmath.mpf(2) ** -20:
            continue  # the changed weight multiplies (nearly) nothing at x
        ev = evaluator(tampered)
        ev.setup()
        assert plan_of(ev) is not None
        lo, hi, ok, *_ = _enclose(ev, [Box(x, x)], True, monkeypatch)
        assert ok[0]
        assert lo[0] <= vt + MARGIN and vt - MARGIN <= hi[0]
        assert not (lo[0] <= v <= hi[0]), (seed, lo[0], hi[0], v)
        return
    pytest.fail("no tampered network changed the output")


def test_numpy_fallback_is_sound(monkeypatch):
    """With the kernel switched off, the NumPy pass serves every box (and is sound)."""
    rng = random.Random(11)
    model = fused_network(rng, 2)
    ev = evaluator(model)
    ev.setup()
    monkeypatch.setattr(fused_boxes, "ENABLED", False)
    assert fused_boxes.readout_model(ev, np.zeros((1, 2)), np.zeros((1, 2)), ev._prefix, ev._rows_read) is None
    boxes = _boxes(rng, 2, 6)
    lo, hi, ok, *_ = ev.enclose([b.lo for b in boxes], [b.hi for b in boxes])
    assert ok.sum() >= 3
    for b, box in enumerate(boxes):
        if ok[b]:
            for x in _points(rng, box, 2):
                v = mp_value(model, x)
                assert lo[b] <= v + MARGIN and v - MARGIN <= hi[b]


@needs_numba
def test_a_model_below_min_tokens_runs_the_numpy_pass(monkeypatch):
    """Below ``MIN_TOKENS`` tokens the kernel is not used (numba's start-up would cost more than a
    small certificate): ``readout_model`` declines, and the enclosures are the NumPy pass's; at the
    threshold the kernel runs again."""
    rng = random.Random(12)
    model = fused_network(rng, 2)
    ev = evaluator(model)
    ev.setup()
    n = ev.base[0].shape[1]
    x0, h = np.full((1, 2), 0.5), np.full((1, 2), 0.125)
    monkeypatch.setattr(fused_boxes, "MIN_TOKENS", n + 1)
    assert fused_boxes.readout_model(ev, x0, h, ev._prefix, ev._rows_read) is None
    monkeypatch.setattr(fused_boxes, "MIN_TOKENS", n)
    assert fused_boxes.readout_model(ev, x0, h, ev._prefix, ev._rows_read) is not None


def test_without_numba_the_numpy_pass_runs():
    """numba made unimportable in a fresh process: the kernel is off, decided once at import,
    and the evaluator's enclosures are the NumPy pass's, bit for bit (computed here in this
    process with the kernel switched off)."""
    code = (
        "import sys; sys.modules['numba'] = None\n"
        "import random, pickle\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from test_fused_kernel import fused_network, _boxes\n"
        "from symbounds.core import fused_boxes\n"
        "from symbounds.core.float_boxes import evaluator\n"
        "assert not fused_boxes.ENABLED and fused_boxes.load() is None\n"
        "rng = random.Random(3); m = fused_network(rng, 2); ev = evaluator(m); ev.setup()\n"
        "bs = _boxes(rng, 2, 5)\n"
        "out = ev.enclose([b.lo for b in bs], [b.hi for b in bs])\n"
        "sys.stdout.buffer.write(pickle.dumps([a.tolist() for a in out]))\n"
    )
    here = os.path.dirname(__file__)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-c", code, here], check=False, capture_output=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    import pickle

    got = pickle.loads(res.stdout)
    rng = random.Random(3)
    m = fused_network(rng, 2)
    ev = evaluator(m)
    ev.setup()
    bs = _boxes(rng, 2, 5)
    mp = pytest.MonkeyPatch()
    mp.setattr(fused_boxes, "ENABLED", False)
    try:
        want = ev.enclose([b.lo for b in bs], [b.hi for b in bs])
    finally:
        mp.undo()
    assert got == [a.tolist() for a in want]


@needs_numba
@pytest.mark.parametrize("seed", range(4))
def test_token_sum_covers_its_rounding_exactly(seed):
    """``_sum_tokens`` (the softmax row sum and the weighted values) on terms made to lose bits:
    with exact rationals, the model ``c + <G, delta> +- r`` it returns must cover the exact sum of
    the terms' models: ``|sum c_k - c| + sum_i |sum_k G_ik - G_i| h_i + sum_k r_k <= r``.  A one
    followed by 2^-53's rounds every small term away (ties to even), so a missing factor
    ``1 + 2nu`` on any of the three sums shows; seed 0 puts the lossy terms in ``r`` alone."""
    fused_boxes.load()
    rng = np.random.default_rng(seed)
    n, d = 200, 2
    lossy = np.concatenate([[1.0], np.full(n - 1, 2.0**-53)])
    zero = np.zeros(n)
    if seed == 0:
        c, r, G = zero, lossy.copy(), np.zeros((d, n))
    elif seed == 1:
        c, r, G = zero, zero.copy(), np.vstack([lossy, zero])
    else:
        c, r = lossy * rng.choice([-1.0, 1.0]), lossy[::-1].copy()
        G = np.vstack([lossy, rng.uniform(-1, 1, n)])
    h = np.array([0.5, 2.0**-30])
    gam = fused_boxes._gamma(n)
    gd = fused_boxes._gamma(d)[0]
    oG = np.zeros(d)
    sc, sr = fused_boxes._sum_tokens(c, G, r, h, gd, gam[0], gam[1], n, oG)
    need = abs(sum(F(v) for v in c) - F(sc)) + sum(F(v) for v in r)
    need += sum(abs(sum(F(v) for v in G[i]) - F(oG[i])) * F(h[i]) for i in range(d))
    assert need <= F(sr), (float(need), sr)


@needs_numba
@pytest.mark.parametrize("c, G, r", [(3.7, (0.3, -0.2), 0.01), (-2.5, (0.1, 0.4), 0.05), (0.75, (-0.05, 0.02), 0.0)])
def test_reciprocal_model_covers_one_over_b_exactly(c, G, r):
    """``_reciprocal_into`` against exact rationals: for ``b = c + <G, delta> + e`` (``|e| <= r``)
    at the corners and inside points of the box, ``|1/b - (q + <g, delta>)| <= R``; positive and
    negative ranges, values far from 1 (a softmax row sum is often near 1, where ``g = -G/c^2``
    and ``-G c^2`` nearly agree)."""
    fused_boxes.load()
    h = np.array([0.1, 0.2])
    gd = fused_boxes._gamma(2)[0]
    bG, oG = np.array(G), np.zeros(2)
    q, R, ok = fused_boxes._reciprocal_into(c, bG, r, h, gd, oG)
    assert ok
    rng = random.Random(1)
    pts = [(s1, s2) for s1 in (-1, 1) for s2 in (-1, 1)] + [(rng.uniform(-1, 1), rng.uniform(-1, 1)) for _ in range(6)]
    for s1, s2 in pts:
        delta = (F(s1) * F(h[0]), F(s2) * F(h[1]))
        for e in (-F(r), F(0), F(r)):
            b = F(c) + F(G[0]) * delta[0] + F(G[1]) * delta[1] + e
            model = F(q) + F(oG[0]) * delta[0] + F(oG[1]) * delta[1]
            assert abs(1 / b - model) <= F(R), (c, G, r, delta, e)
