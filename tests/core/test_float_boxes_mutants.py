"""Tests written against surviving mutants of the float64 box pass (core/outward.py, core/float_boxes.py).

Each test checks one property that an edit of the code broke without any other test noticing
(docs/mutation-testing.md lists the edits).  Independent computations only: exact rationals
(Fraction), 300-bit Arb balls, or exact values of functions inside the operand models.
"""

import random
from fractions import Fraction as F

import flint
import numpy as np
import pytest
from test_float_boxes import _exp_exact, _inside, _model, _points, _value, apply_op, exact_elementwise

from symbounds.core import outward as fo
from symbounds.core.float_boxes import FTM, _Boxes

MAX = float(np.finfo(np.float64).max)


def exact(v) -> F:
    return F(float(v))


def arb(q: F) -> flint.arb:
    return flint.arb(flint.fmpq(q.numerator, q.denominator))


# ------------------------------------------------------------------------------------------
# outward.py


def test_ln2_split_brackets_ln2_with_a_short_head():
    """``C1 + C2lo < ln 2 < C1 + C2hi`` in 300-bit balls, ``C2lo``, ``C2hi`` two doubles apart
    at most, and ``C1`` with its last 21 bits zero (so ``k C1`` is exact for ``|k| < 2^11``)."""
    c1, lo, hi = fo._ln2_split()
    with flint.ctx.workprec(300):
        ln2 = flint.arb(2).log()
        assert arb(exact(c1) + exact(lo)) < ln2 < arb(exact(c1) + exact(hi))
    assert lo < hi and np.nextafter(np.nextafter(lo, 1.0), 1.0) == hi
    m, _ = np.frexp(c1)
    assert F(int(m * 2**53)) % 2**21 == 0
    assert (fo._LN2_C1, fo._LN2_C2LO, fo._LN2_C2HI) == (c1, lo, hi)


def test_from_fraction_is_exact_on_doubles_and_tight_elsewhere():
    """A rational that is a double converts with radius 0; any other to its nearest double with
    a radius of at most a few ulps (``|q - m| <= ulp(m) / 2``, rounded up)."""
    doubles = [F(3, 4), F(-5), F(2**60), F(-(2**53) + 1, 2**20), F(1, 2**1074), F(2**52 + 1, 2**1000)]
    for q in doubles:
        m, r = fo.from_fraction(q)
        assert exact(m) == q and r == 0.0, q
    for q in [F(1, 3), F(-7, 10), F(2**53 + 1), F(2**54 + 1), F(2**53 + 1, 2), F(10**30 + 1), F(1, 2**1100)]:
        m, r = fo.from_fraction(q)
        assert abs(q - exact(m)) <= exact(r), q
        ulp = exact(np.spacing(abs(m))) if m != 0 else F(2) ** -1074
        assert 0 < exact(r) <= 2 * ulp, (q, m, r)


def test_from_fraction_outside_the_double_range_keeps_the_sign():
    for q, s in [(F(10) ** 400, 1), (-(F(10) ** 400), -1), (F(10**400 + 1, 3), 1)]:
        m, r = fo.from_fraction(q)
        assert r == np.inf and m == s * MAX


def test_exp_bounds_are_within_the_stated_margin():
    """``exp_lower(x) >= e^x (1 - 2^-44 - 2^-49)`` and ``exp_upper(x) <= e^x (1 + 2^-44 + 2^-49)``
    where the reduced argument is largest (``|r|`` near 0.35): the polynomial's own error is far
    below ``2^-49`` there, so a dropped or misplaced Taylor coefficient shows."""
    xs = [0.34, -0.34, 0.3465, -0.3465, 0.33, float(np.log(2)) + 0.34, float(np.log(2)) - 0.34, 3 * 0.6931 + 0.345]
    lo, hi = fo.exp_lower(np.array(xs)), fo.exp_upper(np.array(xs))
    with flint.ctx.workprec(300):
        for x, a, b in zip(xs, lo, hi):
            e = arb(exact(x)).exp()
            margin = flint.arb(2) ** -44 + flint.arb(2) ** -49
            assert arb(exact(a)) < e < arb(exact(b)), x
            assert arb(exact(b)) <= e * (1 + margin), x
            assert arb(exact(a)) >= e * (1 - margin), x


def test_exp_bounds_of_integers_are_those_of_doubles():
    """Integer input is read as doubles (``e^1`` is not truncated to an integer)."""
    xs = [1, -1, 2, 1000, -1000]
    lo, hi = fo.exp_bounds(xs)
    with flint.ctx.workprec(300):
        for x, a, b in zip(xs[:3], lo, hi):
            e = flint.arb(x).exp()
            assert arb(exact(a)) < e < arb(exact(b)) and b - a < 1e-12 * b, x
    assert lo[3] == MAX and hi[3] == np.inf and lo[4] == 0.0 and 0 < hi[4] <= 2.0**-1074


def _subnormal_products(n: int):
    """``n`` products ``(3/2 2^-537)^2 = 9/4 eta`` (``eta = 2^-1074``), each rounded to ``2 eta``:
    the float sum misses ``n eta / 4``, an error only the ``n eta`` terms of the bounds cover."""
    a = np.full(n, 1.5 * 2.0**-537)
    return a, F(9, 4) * n * F(2) ** -1074


def test_matmul_bounds_cover_underflow_in_batched_and_single_row_products():
    """``A @ B`` with ``A`` of shape ``(1, n)`` or ``(1, 1, n)`` (the length of the sum is the last
    axis, not the first or the second) and products in the subnormal range."""
    n = 64
    eta = F(2) ** -1074
    a, true = _subnormal_products(n)
    for A in (a.reshape(1, n), a.reshape(1, 1, n)):
        B = a.reshape(n, 1)
        T = (A @ B).reshape(-1)[0]
        up_ = fo.matmul_up(A, B).reshape(-1)[0]
        e = fo.matmul_err(A, B).reshape(-1)[0]
        assert exact(T) < true <= exact(up_), A.shape
        assert abs(true - exact(T)) <= exact(e), A.shape
        # and no looser than the documented T (1 + 2nu) + 2 n eta (rounded up twice)
        assert exact(up_) - true <= (2 * n + 3) * eta, A.shape


def test_rounding_error_bounds_are_not_loose():
    """``err(y)`` is at most ``2.5 u |y| + 2 eta`` (one rounding errs by ``u |y| + eta/2`` at most);
    ``matmul_err`` at most ``2.5 n u |A||B| + 2 n eta``, the a-priori bound ``gamma_n`` with the
    factor 2 the docstring states."""
    u, eta = F(2) ** -53, F(2) ** -1074
    y = np.array([1.0, -3.5, 1e300, 1e-300, 2.0**-1070, 0.0, 7.25])
    for v, e in zip(y, fo.err(y)):
        assert exact(e) <= F(5, 2) * u * abs(exact(v)) + 2 * eta, v
    rng = np.random.default_rng(4)
    for n in (1, 7, 100):
        A, B = rng.uniform(0, 3, (3, n)), rng.uniform(0, 3, (n, 2))
        E = fo.matmul_err(A, B)
        for i in range(3):
            for j in range(2):
                s = sum(exact(A[i, k]) * exact(B[k, j]) for k in range(n))
                assert exact(E[i, j]) <= F(5, 2) * n * u * s + 2 * n * eta, (n, i, j)


def test_sum_and_product_upper_bounds_are_not_loose():
    """Where the float sum is exact (small dyadic terms), ``sum_up`` and ``matmul_up`` exceed the
    exact value by at most the documented factor ``1 + 2nu`` (and the ``4u`` of each upward rounding, and ``eta``)."""
    u, eta = F(2) ** -53, F(2) ** -1074
    rng = np.random.default_rng(5)
    for n in (3, 50, 400):
        a = rng.integers(1, 1000, (2, n)) / 8.0
        b = rng.integers(1, 1000, (n, 1)) / 8.0
        S, M = fo.sum_up(a, axis=1), fo.matmul_up(a, b)
        for i in range(2):
            s = sum(exact(v) for v in a[i])
            assert s <= exact(S[i]) <= s * (1 + (2 * n + 24) * u) + 2 * eta, n
            p = sum(exact(a[i, k]) * exact(b[k, 0]) for k in range(n))
            assert p <= exact(M[i, 0]) <= p * (1 + (2 * n + 24) * u) + (2 * n + 2) * eta, n


# ------------------------------------------------------------------------------------------
# float_boxes.py: the Taylor-model operations with no remainder and exact weights, so that
# every rounding error is the whole of the remainder and a dropped one shows.


def _exact_model(rng, B, d, shape, grad=True, zeros=True):
    """Operands with remainder 0, centres of every size (some exactly 0), non-dyadic gradients."""
    size = B * int(np.prod(shape))
    c = np.array(
        [0.0 if zeros and rng.random() < 0.25 else rng.uniform(-2, 2) * 10.0 ** rng.randint(-3, 2) for _ in range(size)]
    ).reshape((B,) + shape)
    G = None
    if grad:
        G = np.array([rng.uniform(-3, 3) for _ in range(B * d * int(np.prod(shape)))]).reshape((B, d) + shape)
    return FTM(c, G, np.zeros(c.shape))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "exp", "reciprocal", "relu", "sum", "linear", "scale"])
def test_operations_without_remainders_cover_their_rounding_errors(op, seed):
    rng = random.Random(7000 * seed + sum(map(ord, op)))
    B, d, shape = 3, rng.choice([1, 2, 3]), (2, 3)
    h = np.array([[rng.choice([1 / 64, 1 / 8, 1 / 2, 3.0]) for _ in range(d)] for _ in range(B)])
    bx = _Boxes(h)
    # gradients: both (seeds 0, 1, 4), only b (3), only a (2), neither (5)
    a = _exact_model(rng, B, d, shape, grad=seed not in (3, 5) or op == "exp", zeros=op not in ("reciprocal", "exp"))
    b = _exact_model(rng, B, d, shape, grad=seed % 3 != 2)
    if op == "reciprocal":
        a.c = a.c + np.sign(a.c) * 20
    if op == "exp":
        a.c = a.c * 3
    W = (np.array([[rng.uniform(-2, 2) for _ in range(2)] for _ in range(4)]), None)
    k = (rng.uniform(-3, 3), 0.0)
    res, ok = apply_op(bx, op, a, b, W, k)
    checked = 0
    for bi in range(B):
        for delta in _points(rng, h[bi]):
            for idx in np.ndindex(*res.c.shape[1:]):
                va = _value(a, bi, idx, delta, 0) if op not in ("sum", "linear") else None
                if op == "exp":
                    centre = exact(res.c[(bi,) + idx])
                    if res.G is not None:
                        centre += sum(exact(res.G[(bi, i) + idx]) * delta[i] for i in range(d))
                    # 1200 bits: a weight below 2^-300 is the constant 2^-301 +- 2^-301 (float_boxes.TINY),
                    # a margin of e^va itself, far below 300 bits of the centre
                    with flint.ctx.workprec(1200):
                        assert abs(_exp_exact(va) - arb(centre)) <= arb(exact(res.r[(bi,) + idx])), (idx, delta)
                    checked += 1
                    continue
                if op == "reciprocal" and not ok[(bi,) + idx]:
                    continue
                vb = _value(b, bi, idx, delta, 0) if op in ("add", "sub", "mul") else None
                if op in ("add", "sub", "mul", "reciprocal", "relu", "scale"):
                    true = exact_elementwise(op, va, vb, exact(k[0]))
                elif op == "sum":
                    true = sum(_value(a, bi, (idx[0], j), delta, 0) for j in range(shape[1]))
                else:
                    true = sum(exact(W[0][idx[0], q]) * _value(a, bi, (q, idx[1]), delta, 0) for q in range(shape[0]))
                assert _inside(res, bi, idx, delta, true), (op, bi, idx, delta)
                checked += 1
    assert checked > 20


# ------------------------------------------------------------------------------------------
# softmax of interval scores (the affine prefix's points)


def _interval(rng, shape, radius):
    c = np.array([rng.uniform(-2, 2) for _ in range(int(np.prod(shape)))]).reshape(shape)
    r = np.array([rng.choice([0.0, radius, 2 * radius]) for _ in range(c.size)]).reshape(shape)
    return FTM(c, None, r)


def _pick_in(rng, m: FTM, idx):
    return exact(m.c[idx]) + F(rng.choice([-1, 1, 0, F(1, 3)])) * exact(m.r[idx])


@pytest.mark.parametrize("seed", range(6))
def test_softmax_of_interval_scores_encloses_the_softmax_of_every_point(seed):
    """``pi[b, j, k] = softmax_k(t <q_j, k_k>)`` for ``q``, ``k`` and the attention factor ``t``
    anywhere in their intervals, in 300-bit balls; the same for any block size."""
    from symbounds.core.float_boxes import _softmax_interval

    rng = random.Random(seed)
    B, dk, nq, n = 2, rng.choice([1, 2]), rng.choice([1, 3]), rng.choice([2, 4])
    Q, K = _interval(rng, (B, dk, nq), 0.01), _interval(rng, (B, dk, n), 0.02)
    tau = [None, (2.5, 0.0), (0.7, 0.05), (-1.5, 0.01)][seed % 4]
    keep = sorted(rng.sample(range(n), rng.randint(1, n)))
    for block in (1 << 22, 1, 2):
        pi, ok = _softmax_interval(Q, K, tau, keep, block=block)
        assert pi.c.shape == (B, nq, len(keep)) and ok.shape == (B, nq) and ok.all()
        for b in range(B):
            for _ in range(4):
                q = [[_pick_in(rng, Q, (b, a, j)) for j in range(nq)] for a in range(dk)]
                k = [[_pick_in(rng, K, (b, a, m)) for m in range(n)] for a in range(dk)]
                t = F(1) if tau is None else exact(tau[0]) + F(rng.choice([-1, 1, 0])) * exact(tau[1])
                with flint.ctx.workprec(300):
                    for j in range(nq):
                        e = [(arb(t * sum(q[a][j] * k[a][m] for a in range(dk)))).exp() for m in range(n)]
                        total = sum(e)
                        for col, m in enumerate(keep):
                            p = e[m] / total
                            assert abs(p - arb(exact(pi.c[b, j, col]))) <= arb(exact(pi.r[b, j, col])), (b, j, m, block)


def _softmax_arb(scores, k):
    e = [arb(s).exp() for s in scores]
    return e[k] / sum(e)


def test_softmax_of_interval_scores_at_the_corners():
    """Hand-worked: one query ``q in [1/2, 3/2]``, keys ``k0 in [-11/2, -9/2]`` and ``k1 = 5``,
    factor ``t in [3/4, 5/4]`` (or 1): the scores ``t q k`` are bilinear, so their extremes, and
    those of the softmax, are at the corners; each corner's softmax lies in the enclosure."""
    from itertools import product

    from symbounds.core.float_boxes import _softmax_interval

    Q = FTM(np.array([[[1.0]]]), None, np.array([[[0.5]]]))
    K = FTM(np.array([[[-5.0, 5.0]]]), None, np.array([[[0.5, 0.0]]]))
    for tau, ts in [(None, [F(1)]), ((1.0, 0.25), [F(3, 4), F(5, 4)])]:
        pi, ok = _softmax_interval(Q, K, tau, [0, 1])
        assert ok.all()
        with flint.ctx.workprec(300):
            for q, k0, t in product([F(1, 2), F(3, 2)], [F(-11, 2), F(-9, 2)], ts):
                for m in (0, 1):
                    p = _softmax_arb([t * q * k0, t * q * 5], m)
                    assert abs(p - arb(exact(pi.c[0, 0, m]))) <= arb(exact(pi.r[0, 0, m])), (tau, q, k0, t, m)


def test_softmax_of_exact_large_scores_covers_their_rounding():
    """Exact queries and keys whose scores are near-ties of size ~1000 after an inexact factor
    ``t`` (and scores that cancel from products of size 1e6): the rounding errors of the scores
    exceed the exp bounds' own margin, so each must be in the remainder."""
    from symbounds.core.float_boxes import _softmax_interval

    rng = np.random.default_rng(9)
    B = 400
    for tau in (None, (float(F(1, 3)), 0.0), (0.7, 0.0)):
        q = rng.uniform(500, 1000, (B, 2, 1))
        k = np.empty((B, 2, 3))
        k[:, :, 0] = rng.uniform(-2, 2, (B, 2))
        k[:, 0, 1] = rng.uniform(500, 1000, B)
        k[:, 1, 1] = -(q[:, 0, 0] * k[:, 0, 1]) / q[:, 1, 0] + rng.uniform(-0.01, 0.01, B)  # cancels
        k[:, :, 2] = k[:, :, 0] + rng.uniform(-1e-9, 1e-9, (B, 2))  # a near-tie with key 0
        Q, K = FTM(q, None, np.zeros_like(q)), FTM(k, None, np.zeros_like(k))
        pi, ok = _softmax_interval(Q, K, tau, [0, 1, 2])
        assert ok.all()
        t = F(1) if tau is None else exact(tau[0])
        with flint.ctx.workprec(300):
            for b in range(B):
                s = [t * sum(exact(q[b, a, 0]) * exact(k[b, a, m]) for a in range(2)) for m in range(3)]
                e = [arb(v).exp() for v in s]
                for m in range(3):
                    p = e[m] / sum(e)
                    assert abs(p - arb(exact(pi.c[b, 0, m]))) <= arb(exact(pi.r[b, 0, m])), (tau, b, m)


def test_softmax_of_interval_scores_flags_a_row_whose_sum_underflows():
    """Scores ``s_A in [-743.75, 743.75]`` and ``s_B = -800``, shifted by the larger centre 0: the
    lower bounds of ``e^(s - 0)`` are ``2^-1074`` and 0, so the row's sum has no positive lower
    bound (0 once rounded down) and the row must be flagged: at ``s_A = -743.75`` the weight of
    ``B`` is ``e^-56.25 / (1 + e^-56.25)``, which its upper bound ``e^-800`` (0), divided by
    anything at most 1, does not reach."""
    from symbounds.core.float_boxes import _softmax_interval

    Q = FTM(np.array([[[1.0]]]), None, np.zeros((1, 1, 1)))
    K = FTM(np.array([[[0.0, -800.0]]]), None, np.array([[[743.75, 0.0]]]))
    pi, ok = _softmax_interval(Q, K, None, [0, 1])
    if ok[0, 0]:
        with flint.ctx.workprec(300):
            p = _softmax_arb([F(-743.75), F(-800)], 1)
            assert abs(p - arb(exact(pi.c[0, 0, 1]))) <= arb(exact(pi.r[0, 0, 1]))


# ------------------------------------------------------------------------------------------
# whole networks, the embedding and the affine prefix, with weights that are not doubles


def _inexact(model, k=F(7, 5), tau=None):
    """``model`` with every weight times ``k`` (structure kept: zeros, ReLU pairs, constant rows
    and heads), so the weights and the embedding are rationals with no exact double (of the
    type of ``k * Fraction``: a SymPy ``k`` gives SymPy weights)."""
    import dataclasses

    from symbounds.core.transformer import Attention, Embedding, FeedForward, Head

    def m(M):
        return tuple(tuple(k * F(v) for v in row) for row in M)

    layers = []
    for layer in model.layers:
        if isinstance(layer, Attention):
            heads = tuple(Head(m(h.W_Q), m(h.W_K), m(h.W_V), m(h.W_O)) for h in layer.heads)
            layers.append(Attention(heads, "softmax", skip=k * F(layer.skip), tau=tau))
        else:
            layers.append(
                FeedForward(
                    m(layer.W1),
                    tuple(k * F(v) for v in layer.b1),
                    m(layer.W2),
                    tuple(k * F(v) for v in layer.b2),
                    skip=k * F(layer.skip),
                )
            )
    emb = model.embedding
    return dataclasses.replace(
        model, layers=tuple(layers), embedding=Embedding(base=m(emb.base), E=m(emb.E), column=emb.column)
    )


def _box_models(seed):
    from test_soundness import random_network

    rng = random.Random(seed)
    d = rng.choice([1, 2])
    tau = [None, F(5, 3), F(-3, 7)][seed % 3]
    return rng, d, _inexact(random_network(rng, d), tau=tau)


@pytest.mark.parametrize("seed", range(12))
def test_embedding_and_affine_prefix_models_enclose_the_exact_state(seed):
    """The float models of ``Z_0 = base + E x`` (every entry) and of the affine prefix ``Z_p(x)``
    (the rows the next layer reads) contain the exact state at points of each box, including its
    corners: exact rationals for ``Z_0``, 300-bit balls of the network's own forward pass for
    ``Z_p``."""
    from test_soundness import random_boxes

    from symbounds.core.boxes import Box
    from symbounds.core.contexts import BallContext
    from symbounds.core.float_boxes import _centres, evaluator
    from symbounds.core.transformer import forward

    rng, d, model = _box_models(seed)
    ev = evaluator(model)
    ev.setup()
    boxes = random_boxes(rng, d, 4) + [Box(tuple(F(-3, 2) for _ in range(d)), tuple(F(5, 2) for _ in range(d)))]
    x0, h = _centres([b.lo for b in boxes], [b.hi for b in boxes])
    bx = _Boxes(h)
    Z0 = ev._embed(bx, x0)
    ZP = ev._from_prefix(_Boxes(h), x0) if ev.prefix > 0 else None
    rows = ev._rows_read() if ev.prefix > 0 else []
    emb = model.embedding
    ball = BallContext(300)
    for b, box in enumerate(boxes):
        pts = [box.lo, box.hi, tuple(F(rng.randint(0, 8), 8) * (hi - lo) + lo for lo, hi in zip(box.lo, box.hi))]
        for x in pts:
            delta = [xi - exact(ci) for xi, ci in zip(x, x0[b])]
            for r in range(len(emb.base)):
                for j in range(len(emb.base[0])):
                    true = F(emb.base[r][j]) + (sum(F(emb.E[r][i]) * x[i] for i in range(d)) if j == emb.column else 0)
                    assert _inside(Z0, b, (r, j), delta, true), (seed, b, x, r, j)
            if ZP is None:
                continue
            with ball.scope():
                Z = forward(ball, model, list(x), stop=ev.prefix)
                if not isinstance(Z, list):  # the prefix is the whole network: its readout
                    ro = model.readout
                    Z = {ro.row: {ro.column: Z}}
                for r in rows:
                    for j in Z[r] if isinstance(Z[r], dict) else range(len(Z[r])):
                        centre = exact(ZP.c[b, r, j]) + sum(exact(ZP.G[b, i, r, j]) * delta[i] for i in range(d))
                        assert abs(Z[r][j] - arb(centre)) <= arb(exact(ZP.r[b, r, j])), (seed, b, x, r, j)


@pytest.mark.parametrize("seed", range(12))
def test_networks_with_inexact_weights_float_ranges_contain_the_values(seed):
    """Whole networks whose weights are not doubles (every weight a double ball of nonzero
    radius): the float range of each box contains the exact (or 300-bit) value at its corners
    and at inner points."""
    from test_soundness import random_boxes, true_value

    from symbounds.core.float_boxes import evaluator

    rng, d, model = _box_models(seed)
    ev = evaluator(model)
    ev.setup()
    boxes = random_boxes(rng, d, 5)
    lo, hi, ok = ev.ranges([b.lo for b in boxes], [b.hi for b in boxes])
    for box, a, z, good in zip(boxes, lo, hi, ok):
        if not good:
            continue
        for x in [box.lo, box.hi, tuple((l + u) / 2 for l, u in zip(box.lo, box.hi))]:
            vlo, vhi = true_value(model, x)
            assert vlo <= exact(z) and exact(a) <= vhi, (seed, box, x)
    assert ok.sum() >= 3


@pytest.mark.parametrize("seed", range(8))
def test_softmax_with_gradients_encloses_the_softmax_at_points(seed):
    """``_softmax`` of linear scores ``t <Q_j(x), K_k(x)>`` (exact functions inside the operand
    models, no remainders) contains the 300-bit softmax at the corners and inner points of wide
    boxes, with and without an inexact factor ``t``."""
    from symbounds.core.float_boxes import _softmax

    rng = random.Random(300 + seed)
    B, d, dk, nq, n = 2, rng.choice([1, 2]), rng.choice([1, 2]), 2, rng.choice([2, 3])
    h = np.array([[rng.choice([1 / 4, 1 / 2, 1.0]) for _ in range(d)] for _ in range(B)])
    bx = _Boxes(h)

    def operand(shape):
        c = np.array([rng.uniform(-1, 1) for _ in range(B * dk * shape)]).reshape(B, dk, shape)
        G = np.array([rng.uniform(-0.5, 0.5) for _ in range(B * d * dk * shape)]).reshape(B, d, dk, shape)
        return FTM(c, G if seed < 6 else None, np.zeros(c.shape))  # seeds 6, 7: interval scores

    Q, K = operand(nq), operand(n)
    tau = [None, (1 / 3, 0.0), (2.5, 0.0), (0.7, 0.0)][seed % 4]
    pi, ok = _softmax(bx, Q, K, tau)
    assert ok.all()
    t = F(1) if tau is None else exact(tau[0])
    for b in range(B):
        for delta in _points(rng, h[b]):
            with flint.ctx.workprec(300):
                for j in range(nq):
                    s = [
                        t * sum(_value(Q, b, (a, j), delta, 0) * _value(K, b, (a, m), delta, 0) for a in range(dk))
                        for m in range(n)
                    ]
                    for m in range(n):
                        centre = exact(pi.c[b, j, m])
                        if pi.G is not None:
                            centre += sum(exact(pi.G[b, i, j, m]) * delta[i] for i in range(d))
                        assert abs(_softmax_arb(s, m) - arb(centre)) <= arb(exact(pi.r[b, j, m])), (b, j, m, delta)


def test_reciprocal_of_small_operands_and_tiny_boxes():
    """``1/b`` for ``b`` in ``(0, 1)`` and ``(-1, 0)`` (where ``1/min|b|^3`` is larger than 1, so
    the remainder must divide by it) and for boxes so small that the rounding of ``g / c^2`` is
    the largest error: exact values at points."""
    rng = random.Random(17)
    B, d, shape = 4, 2, (2, 3)
    for h_val in (2.0**-60, 2.0**-30, 1 / 64):
        h = np.full((B, d), h_val)
        c = np.array([rng.choice([-1, 1]) * rng.uniform(0.3, 0.9) for _ in range(B * 6)]).reshape((B,) + shape)
        G = np.array([rng.uniform(-1, 1) for _ in range(B * d * 6)]).reshape((B, d) + shape)
        for r_val in (0.0, 1e-3):
            a = FTM(c, G, np.full(c.shape, r_val))
            res, ok = _Boxes(h).reciprocal(a)
            assert ok.all()
            for bi in range(B):
                for delta in _points(rng, h[bi]):
                    for idx in np.ndindex(*shape):
                        for frac in (-1, 1):
                            va = _value(a, bi, idx, delta, frac)
                            assert _inside(res, bi, idx, delta, 1 / va), (h_val, r_val, bi, idx, delta)


def test_reciprocal_flags_a_small_range_through_zero():
    """A range ``[-1/4, 3/4]`` (upper end below 1) contains 0: flagged."""
    bx = _Boxes(np.array([[1.0]]))
    for c, g in [(0.25, 0.5), (-0.25, 0.5), (0.0, 1e-3)]:
        _, ok = bx.reciprocal(FTM(np.array([[c]]), np.array([[[g]]]), np.array([[0.0]])))
        assert not ok[0, 0], (c, g)


def test_interval_matmul_encloses_every_product_of_interval_entries():
    """``V pi^T`` with both factors intervals: the exact extremes (each term ``p_k v_k`` is
    bilinear, so its extremes are at the corners of its own two intervals) lie inside; and with
    point factors the rounding error alone must be covered."""
    from symbounds.core.float_boxes import _interval_matmul

    rng = random.Random(23)
    B, dv, nq, n = 2, 3, 2, 5
    for vr_val, pr_val in [(0.1, 0.05), (0.0, 0.0), (0.0, 0.01), (0.02, 0.0)]:
        vc = np.array([rng.uniform(-2, 2) for _ in range(B * dv * n)]).reshape(B, dv, n) / 3
        pc = np.array([rng.uniform(0, 1) for _ in range(B * nq * n)]).reshape(B, nq, n) / 7
        V = FTM(vc, None, np.full(vc.shape, vr_val))
        P = FTM(pc, None, np.full(pc.shape, pr_val))
        A = _interval_matmul(P, V)
        for b in range(B):
            for a in range(dv):
                for j in range(nq):
                    lo = hi = F(0)
                    for k in range(n):
                        corners = [
                            (exact(pc[b, j, k]) + s * exact(pr_val)) * (exact(vc[b, a, k]) + t * exact(vr_val))
                            for s in (-1, 1)
                            for t in (-1, 1)
                        ]
                        lo, hi = lo + min(corners), hi + max(corners)
                    c, r = exact(A.c[b, a, j]), exact(A.r[b, a, j])
                    assert c - r <= lo and hi <= c + r, (vr_val, pr_val, b, a, j)


def test_centres_and_half_widths_contain_the_exact_box():
    from symbounds.core.float_boxes import _centres

    los = [[F(1, 3), F(-2, 7)], [F(1, 10), F(0)], [F(10**20, 3), F(-1, 2**70)]]
    his = [[F(1, 3) + F(1, 2**60), F(-2, 7)], [F(3, 10), F(1, 3)], [F(10**20, 3) + 1, F(1, 2**70)]]
    x0, h = _centres(los, his)
    for b in range(3):
        for i in range(2):
            assert exact(x0[b, i]) - exact(h[b, i]) <= los[b][i] and his[b][i] <= exact(x0[b, i]) + exact(h[b, i])


def test_exp_of_an_interval_is_its_exact_image():
    """``exp`` of an interval model (no gradient) is ``[e^(c-r), e^(c+r)]``: contains both ends
    and is no wider than them by more than the exp bounds' own ``2^-44`` margin."""
    c = np.array([[-3.0, 0.0, 0.5, 2.0, 20.0]])
    r = np.array([[0.0, 0.25, 1e-9, 1.0, 0.5]])
    res = _Boxes(np.zeros((1, 1))).exp(FTM(c, None, r))
    with flint.ctx.workprec(300):
        for k in range(c.shape[1]):
            lo, hi = _exp_exact(exact(c[0, k]) - exact(r[0, k])), _exp_exact(exact(c[0, k]) + exact(r[0, k]))
            mc, mr = arb(exact(res.c[0, k])), arb(exact(res.r[0, k]))
            assert mc - mr <= lo and hi <= mc + mr, k
            assert 2 * mr <= (hi - lo) + hi * flint.arb(2) ** -42, k


def test_relu_of_a_range_through_zero_is_the_hull_from_zero_to_its_top():
    """Where the range ``[lo, hi]`` of ``a`` contains 0 in its interior, ``relu(a)`` is the constant
    hull ``[0, hi]``: it contains every value of ``max(a, 0)``, and is no wider than
    ``[-2^-45 hi, hi (1 + 2^-45)]`` around it (``hi`` the exact top of the model)."""
    h = np.array([[0.5, 0.25]])
    c = np.array([[0.1, -0.2, 1.0]])
    G = np.array([[[1.0, 1.0, 4.0], [0.5, 2.0, 0.0]]])
    a = FTM(c, G, np.array([[0.01, 0.0, 0.5]]))
    res = _Boxes(h).relu(a)
    for k in range(3):
        top = exact(c[0, k]) + sum(abs(exact(G[0, i, k])) * exact(h[0, i]) for i in range(2)) + exact(a.r[0, k])
        lo, hi = exact(res.c[0, k]) - exact(res.r[0, k]), exact(res.c[0, k]) + exact(res.r[0, k])
        assert res.G is None or not res.G[0, :, k].any()
        assert lo <= 0 and top <= hi, k
        assert lo >= -top * F(2) ** -45 and hi <= top * (1 + F(2) ** -45), k


def test_model_entries_by_integer_and_tuple_index():
    c, G, r = np.arange(6.0).reshape(1, 2, 3), np.arange(12.0).reshape(1, 2, 2, 3), np.ones((1, 2, 3))
    m = FTM(c, G, r)
    row = m[1]
    assert row.c.tolist() == [[3.0, 4.0, 5.0]] and row.G.tolist() == [[[3.0, 4.0, 5.0], [9.0, 10.0, 11.0]]]
    one = m[1, 2]
    assert one.c.tolist() == [5.0] and one.G.tolist() == [[5.0, 11.0]] and one.r.tolist() == [1.0]


@pytest.mark.parametrize("grads", [(True, True), (True, False), (False, True), (False, False)])
def test_weighted_values_with_and_without_gradients(grads):
    """``A[b, a, j] = sum_k pi[b, j, k] V[b, a, k]`` for every combination of operands with and
    without gradients: exact values of functions inside the operands, at points."""
    from symbounds.core.float_boxes import _weighted_values

    rng = random.Random(sum(grads) + 2 * grads[0])
    B, d, dv, nq, n = 2, 2, 3, 2, 4
    h = np.full((B, d), 0.125)
    pi = _model(rng, B, d, (nq, n), grad=grads[0])
    V = _model(rng, B, d, (dv, n), grad=grads[1])
    A = _weighted_values(_Boxes(h), pi, V)
    for b in range(B):
        for delta in _points(rng, h[b]):
            for fp, fv in [(1, -1), (-1, 1), (F(1, 3), 0)]:
                for a in range(dv):
                    for j in range(nq):
                        true = sum(_value(pi, b, (j, k), delta, fp) * _value(V, b, (a, k), delta, fv) for k in range(n))
                        assert _inside(A, b, (a, j), delta, true), (grads, b, a, j)


def test_bias_radius_is_added_even_with_a_zero_midpoint():
    """A bias ball ``0 +- 1e-3`` (a weight rounded to 0) and ``1/2 +- 1e-3`` widen the model by their radius."""
    from symbounds.core.float_boxes import _add_bias

    a = FTM(np.array([[[1.0], [2.0]]]), None, np.zeros((1, 2, 1)))
    for bm in (np.zeros(2), np.array([0.5, 0.0])):
        out = _add_bias(_Boxes(np.zeros((1, 1))), a, (bm, np.full(2, 1e-3)))
        for i in range(2):
            for s in (-1, 1):
                true = exact(a.c[0, i, 0]) + exact(bm[i]) + s * exact(1e-3)
                assert abs(true - exact(out.c[0, i, 0])) <= exact(out.r[0, i, 0]), (bm, i, s)


# ------------------------------------------------------------------------------------------
# the evaluator: weight conversion, the prefix's attention, the rows read, the ok flags


def test_ball_of_encloses_every_kind_of_weight():
    """``_ball_of(v) = (m, r)`` with ``|v - m| <= r`` for ints, Fractions, SymPy and FLINT
    rationals and Arb balls (every point of the ball), radius 0 exactly on doubles, and an
    infinite radius for a non-finite ball."""
    import sympy

    from symbounds.core.contexts import BallContext
    from symbounds.core.float_boxes import _ball_of

    ball = BallContext(128)
    for v, q in [
        (3, F(3)),
        (F(1, 3), F(1, 3)),
        (sympy.Rational(1, 3), F(1, 3)),
        (flint.fmpq(1, 3), F(1, 3)),
        (sympy.Rational(-7, 5), F(-7, 5)),
        (flint.fmpq(-7, 5), F(-7, 5)),
    ]:
        m, r = _ball_of(v, ball)
        assert abs(q - exact(m)) <= exact(r) and exact(r) < F(1, 2**50), v
    for v, q in [(F(3, 4), F(3, 4)), (sympy.Rational(-5, 8), F(-5, 8)), (flint.fmpq(5, 8), F(5, 8)), (7, F(7))]:
        assert _ball_of(v, ball) == (float(q), 0.0), v
    # Arb balls: both ends of [1/2, 3/2] and of [-3/2 - 2^-40, -1/2 + 2^-40] inside, and 1/3
    for x, ends in [
        (flint.arb(1, 0.5), (F(1, 2), F(3, 2))),
        (flint.arb(-1, 0.5 + 2.0**-40), (F(-3, 2) - F(1, 2**40), F(-1, 2) + F(1, 2**40))),
    ]:
        m, r = _ball_of(x, ball)
        for q in ends:
            assert abs(q - exact(m)) <= exact(r), (x, q)
        assert exact(r) <= (ends[1] - ends[0]) / 2 + F(1, 2**20), x  # not looser than the ball
    with flint.ctx.workprec(128):
        third = flint.arb(1) / 3
    m, r = _ball_of(third, ball)
    assert abs(F(1, 3) - exact(m)) <= exact(r) and exact(r) < F(1, 2**50)
    assert _ball_of(flint.arb("nan"), ball)[1] == np.inf


def _check_ranges(model, boxes, least_ok=1, prec=128):
    """Float ranges of ``model`` over ``boxes`` (named constants as ``prec``-bit balls) against
    the exact (or 300-bit) value at the ends and the centre of each box; returns the ``ok``
    flags."""
    from test_soundness import true_value

    from symbounds.core.float_boxes import evaluator

    ev = evaluator(model, prec)
    ev.setup()
    lo, hi, ok = ev.ranges([b.lo for b in boxes], [b.hi for b in boxes])
    for box, a, z, good in zip(boxes, lo, hi, ok):
        if good:
            for x in [box.lo, box.hi, tuple((u + v) / 2 for u, v in zip(box.lo, box.hi))]:
                vlo, vhi = true_value(model, x)
                assert vlo <= exact(z) and exact(a) <= vhi, (box, x, (a, z), (vlo, vhi))
    assert ok.sum() >= least_ok
    return ok


@pytest.mark.parametrize("prec", [128, 12])
@pytest.mark.parametrize("seed", range(6))
def test_networks_with_irrational_weights_and_factors(seed, prec):
    """Every weight times ``sqrt 2`` and an attention factor ``sqrt 3`` (or the SymPy rational
    ``5/3``): the weights, skips, biases and factors come from the numeric model (Arb balls),
    each from its own slot; the ranges contain the 300-bit values.  At 12 bits the balls' radii
    are far above float64 rounding, so a radius left out shows."""
    import sympy
    from test_soundness import random_boxes, random_network

    rng = random.Random(100 + seed)
    d = rng.choice([1, 2])
    tau = sympy.sqrt(3) if seed % 2 == 0 else sympy.Rational(5, 3)
    model = _inexact(random_network(rng, d), k=sympy.sqrt(2), tau=tau)
    _check_ranges(model, random_boxes(rng, d, 4), prec=prec)


def _ffn_bias_model(b):
    from symbounds.core.transformer import Embedding, FeedForward, Readout, Transformer

    ffn = FeedForward(((1,),), (b,), ((1,),), (b,), skip=0)
    return Transformer(layers=(ffn,), embedding=Embedding(base=((0,),), E=((1,),), column=0), readout=Readout(0, 0))


def test_bias_radii_reach_the_output():
    """``T(x) = relu(x + b) + b`` with ``b = sqrt 2 / 3`` held as a 10-bit ball (radius about
    ``2^-10``, far above any rounding error) at the points ``x = 0`` and ``x = 1/4``: without
    the bias's radius the range misses the value."""
    import sympy

    from symbounds.core.boxes import Box

    for b in (sympy.sqrt(2) / 3, -sympy.sqrt(3) / 7):
        model = _ffn_bias_model(b)
        ok = _check_ranges(model, [Box((F(0),), (F(0),)), Box((F(1, 4),), (F(1, 4),))], least_ok=2, prec=10)
        assert ok.all()


@pytest.mark.parametrize("prec", [128, 10])
@pytest.mark.parametrize("tau", ["sqrt(3)", "5/3", "-3/7", "-sqrt(2)/5"])
def test_attention_factor_on_a_query_that_depends_on_x(tau, prec):
    """``T(x) = (x e^(x/tau) + e^(1/tau)) / (e^(x/tau) + e^(1/tau))`` (one head, scores ``(x, 1)``
    divided by ``tau``, values ``(x, 1)``) at points, where the range is a few ulps wide (or the
    radius of a 10-bit ball) and any other factor shows."""
    import sympy

    from symbounds.core.boxes import Box
    from symbounds.core.transformer import Attention, Embedding, Head, Readout, Transformer

    head = Head(W_Q=((0, 1),), W_K=((1, 0),), W_V=((1, 0),), W_O=((1,), (0,)))
    att = Attention((head,), "softmax", skip=0, tau=sympy.sympify(tau))
    emb = Embedding(base=((0, 1), (1, 0)), E=((1,), (0,)), column=0)
    model = Transformer(layers=(att,), embedding=emb, readout=Readout(0, 0))
    boxes = [Box((x,), (x,)) for x in (F(0), F(1, 4), F(-3, 5))]
    assert _check_ranges(model, boxes, least_ok=3, prec=prec).all()


def _two_attention_prefix(tau):
    """Rows ``(x-row, constant row)``, 3 tokens, ``x`` in token 0 of row 0.  Two attention
    layers whose scores read only the constant row ``(1, 2, 3)`` (input independent, so both
    are in the affine prefix); the first layer's values are nonzero in token 0 only, the second
    layer's in every token.  Then a ReLU layer reading row 0 through weights 1 only (exact) and
    row 1 through 1/3 (inexact), no skip."""
    from symbounds.core.transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer

    head = Head(W_Q=((0, 1),), W_K=((0, 1),), W_V=((1, 0),), W_O=((1,), (0,)))
    att = Attention((head,), "softmax", skip=1, tau=tau)
    ffn = FeedForward(((1, 0), (1, F(1, 3))), (F(-1, 2), 0), ((1, 1), (0, 0)), (0, 0), skip=0)
    emb = Embedding(base=((0, 0, 0), (1, 2, 3)), E=((1,), (0,)), column=0)
    return Transformer(layers=(att, att, ffn), embedding=emb, readout=Readout(0, 1))


@pytest.mark.parametrize("tau", [None, F(1, 2), F(-3, 7)])
def test_affine_prefix_of_two_attention_layers(tau):
    """The prefix's second attention layer reads values in every token (the first layer's
    value columns do not apply to it), with its factor ``tau``; the next layer reads row 0
    through exact weights 1 and row 1 through an inexact one: both rows are read."""
    from symbounds.core.boxes import Box
    from symbounds.core.float_boxes import evaluator

    model = _two_attention_prefix(tau)
    assert model.affine_prefix() == 2
    ev = evaluator(model)
    assert set(ev._rows_read()) == {0, 1}
    boxes = [Box((F(a, 8),), (F(a, 8) + F(1, 16),)) for a in range(-8, 8, 3)] + [Box((F(3, 4),), (F(3, 4),))]
    _check_ranges(model, boxes, least_ok=len(boxes))


def test_a_flagged_box_stays_flagged_through_later_heads():
    """``bx.bad`` accumulates: a box already flagged (by an earlier layer) is still flagged
    after an attention layer whose softmax is enclosed on every box, and the others are not."""
    from symbounds.core.float_boxes import _centres, evaluator

    model = _two_attention_prefix(F(1, 2))
    ev = evaluator(model)
    x0, h = _centres([(F(0),), (F(1, 4),)], [(F(1, 8),), (F(1, 2),)])
    bx = _Boxes(h)
    bx.bad = np.array([True, False])
    Z = ev._embed(bx, x0)
    ev._attention(bx, ev.layers[0], Z, None, False)
    assert bx.bad.tolist() == [True, False]


def test_enclose_marks_flagged_or_infinite_boxes_not_ok():
    """``enclose`` on a pass reporting box 0 flagged (finite ends), box 1 with an infinite end
    and box 2 fine: only box 2 is ok, and the others get the centre enclosure ``(-inf, inf)``
    and no split axis."""
    from symbounds.core.float_boxes import evaluator

    ev = evaluator(_ffn_bias_model(F(1, 3)))

    def fake_batch(x0, h):
        assert len(x0) == 3
        lo, hi = np.array([0.0, -np.inf, 0.5]), np.array([1.0, 1.0, 0.75])
        return lo, hi, np.array([True, False, False]), lo + 0.25, hi - 0.125, np.array([0, 0, 0])

    ev._batch = fake_batch
    lo, hi, ok, ca, cb, axis = ev.enclose([(F(0),)] * 3, [(F(1),)] * 3)
    assert lo.tolist() == [0.0, -np.inf, 0.5] and hi.tolist() == [1.0, 1.0, 0.75]
    assert ok.dtype == bool and ok.tolist() == [False, False, True]
    assert ca.tolist() == [-np.inf, -np.inf, 0.75] and cb.tolist() == [np.inf, np.inf, 0.625]
    assert axis.tolist() == [-1, -1, 0]


def test_no_float_path_without_a_readout_or_for_tokens_with_an_embedding():
    """The float path needs vector input and a readout: a model without a readout, or a token
    model (even with an embedding and a readout), gets None."""
    import dataclasses

    from symbounds.core.float_boxes import evaluator

    model = _ffn_bias_model(F(1, 3))
    assert evaluator(model) is not None
    assert evaluator(dataclasses.replace(model, readout=None)) is None
    assert evaluator(dataclasses.replace(model, input="tokens")) is None


@pytest.mark.parametrize("seed", range(6))
def test_rational_weights_are_converted_exactly_whatever_the_precision(seed):
    """Rational weights (Fractions, or SymPy rationals) go to doubles directly, not through the
    ``prec``-bit balls of the numeric model: at 10 bits the range over a point is still only
    rounding wide (``<= 2^-30`` relative), where a 10-bit ball would make it ``~2^-10`` wide."""
    import sympy
    from test_soundness import random_network

    from symbounds.core.float_boxes import evaluator

    rng = random.Random(200 + seed)
    d = rng.choice([1, 2])
    k = F(7, 5) if seed % 2 else sympy.Rational(7, 5)
    tau = F(5, 3) if seed % 2 else sympy.Rational(-3, 7)
    model = _inexact(random_network(rng, d), k=k, tau=tau)
    ev = evaluator(model, 10)
    ev.setup()
    pts = [tuple(F(rng.randint(-8, 8), 8) for _ in range(d)) for _ in range(3)]
    lo, hi, ok = ev.ranges(pts, pts)
    assert ok.all()
    for a, z in zip(lo, hi):
        assert exact(z) - exact(a) <= F(1, 2**30) * max(1, abs(exact(z))), (seed, a, z)


def test_a_model_without_layers_reads_its_embedding():
    """``T(x) = x`` (the embedding read out, no layer) over ``[1/3, 1/2]``: the range contains
    both ends and is no wider than a few ulps beyond them."""
    from symbounds.core.float_boxes import evaluator
    from symbounds.core.transformer import Embedding, Readout, Transformer

    model = Transformer(layers=(), embedding=Embedding(base=((0,),), E=((1,),), column=0), readout=Readout(0, 0))
    ev = evaluator(model)
    ev.setup()
    lo, hi, ok = ev.ranges([(F(1, 3),)], [(F(1, 2),)])
    assert ok.all() and exact(lo[0]) <= F(1, 3) and exact(hi[0]) >= F(1, 2)
    assert F(1, 3) - exact(lo[0]) < F(1, 2**48) and exact(hi[0]) - F(1, 2) < F(1, 2**48)


@pytest.mark.parametrize("kind", ["Fraction", "SymPy"])
def test_rational_feed_forward_weights_are_converted_exactly_whatever_the_precision(kind):
    """``T(x) = 2/7 relu(x/3 + 1/5) + 1/9 + 3/11 x`` (every unit active) at 10 bits: the range at
    a point is rounding wide, ``<= 2^-30``, where 10-bit balls of ``W1``, ``b1``, ``W2``, ``b2`` or
    the skip would make it ``~2^-10`` wide; and it contains the exact value."""
    import sympy

    from symbounds.core.boxes import Box
    from symbounds.core.float_boxes import evaluator
    from symbounds.core.transformer import Embedding, FeedForward, Readout, Transformer

    def q(a, b):
        return F(a, b) if kind == "Fraction" else sympy.Rational(a, b)

    ffn = FeedForward(((q(1, 3),),), (q(1, 5),), ((q(2, 7),),), (q(1, 9),), skip=q(3, 11))
    model = Transformer(layers=(ffn,), embedding=Embedding(base=((0,),), E=((1,),), column=0), readout=Readout(0, 0))
    boxes = [Box((x,), (x,)) for x in (F(0), F(1, 4), F(-1, 2))]
    _check_ranges(model, boxes, least_ok=3, prec=10)
    lo, hi, _ = evaluator(model, 10).ranges([b.lo for b in boxes], [b.hi for b in boxes])
    for a, z in zip(lo, hi):
        assert exact(z) - exact(a) <= F(1, 2**30)


def test_prefix_followed_by_a_head_with_three_value_rows():
    """The two-attention prefix, then a head whose scores depend on ``x`` and whose values have
    three rows (``W_O`` is 2 x 3): the rows read are those of ``W_Q``, ``W_K`` and ``W_V`` (the
    state's rows), and the ranges contain the 300-bit values."""
    import dataclasses

    from symbounds.core.boxes import Box
    from symbounds.core.transformer import Attention, Head

    base = _two_attention_prefix(F(1, 2))
    head = Head(W_Q=((1, 0),), W_K=((1, 0),), W_V=((1, 0), (0, 1), (1, F(1, 3))), W_O=((1, 0, 0), (0, 1, 1)))
    model = dataclasses.replace(base, layers=base.layers[:2] + (Attention((head,), "softmax", skip=1),))
    assert model.affine_prefix() == 2
    boxes = [Box((F(a, 8),), (F(a, 8) + F(1, 32),)) for a in range(-8, 8, 5)] + [Box((F(1, 3),), (F(1, 3),))]
    _check_ranges(model, boxes, least_ok=len(boxes))


# ------------------------------------------------------------------------------------------
# found by the fourth mutation pass (docs/mutation-testing.md): with the exp bounds as tight as
# their contract allows, the rounding terms of the model's exp are the whole margin


def _directed_exp(upper: bool):
    """``exp_upper`` (or ``exp_lower``) as tight as its contract allows: ``e^x`` rounded to the
    next double above (below), from a 300-bit ball."""
    def bound(x):
        x = np.asarray(x, dtype=np.float64)
        out = np.empty(x.shape)
        with flint.ctx.workprec(300):
            for i, v in np.ndenumerate(x):
                e = arb(exact(v)).exp()
                f = float(e.mid())
                while not (arb(exact(f)) >= e if upper else arb(exact(f)) <= e):
                    f = float(np.nextafter(f, np.inf if upper else -np.inf))
                out[i] = f
        return out
    return bound


def test_exp_of_an_interval_contains_its_image_with_exp_bounds_one_ulp_wide(monkeypatch):
    """``exp`` of an interval ``c +- r`` with ``exp_lower``/``exp_upper`` one ulp outside
    ``e^(c-r)`` and ``e^(c+r)``: the midpoint's rounding (``err`` of the centre) is then part of
    the margin, and ``[c - R, c + R]`` must still contain both ends exactly."""
    monkeypatch.setattr(fo, "exp_lower", _directed_exp(False))
    monkeypatch.setattr(fo, "exp_upper", _directed_exp(True))
    rng = np.random.default_rng(44)
    c = rng.uniform(2.0**-21, 2.0**-19, 40)[None, :]  # e^c in [1, 2): the ends one ulp (2u) apart at most
    r = c * rng.uniform(0.05, 0.5, 40)[None, :]
    res = _Boxes(np.zeros((1, 1))).exp(FTM(c, None, r))
    with flint.ctx.workprec(300):
        for k in range(c.shape[1]):
            lo = arb(exact(c[0, k]) - exact(r[0, k])).exp()
            hi = arb(exact(c[0, k]) + exact(r[0, k])).exp()
            mc, mr = exact(res.c[0, k]), exact(res.r[0, k])
            assert arb(mc - mr) <= lo and hi <= arb(mc + mr), k


def test_exp_model_at_zero_covers_the_rounding_of_its_centre(monkeypatch):
    """``exp`` of ``0 + g delta`` (no remainder) with the exp bounds one ulp wide: ``e^0 = 1`` is a
    double, so ``exp_bounds`` gives ``[1, 1]`` and the enclosure of ``e^c`` has no width; the
    model's value at the centre, ``fl(1 + t)``, must then be within its remainder of ``e^0 = 1``
    (exactly, at ``delta = 0``, which is in every box), for every slope: the rounding of
    ``1 + t`` is charged nowhere else."""
    lower, upper = _directed_exp(False), _directed_exp(True)
    monkeypatch.setattr(fo, "exp_bounds", lambda x: (lower(x), upper(x)))
    monkeypatch.setattr(fo, "exp_upper", upper)
    assert tuple(fo.exp_bounds(np.array([0.0]))) == (1.0, 1.0)
    rng = np.random.default_rng(45)
    g = np.concatenate([2.0 ** rng.uniform(-30, -1, 300), rng.uniform(0.5, 2, 50)])
    bx = _Boxes(np.ones((1, 1)))
    m = bx.exp(FTM(np.zeros((1, len(g))), g[None, None, :], np.zeros((1, len(g)))))
    for k in range(len(g)):
        assert abs(exact(m.c[0, k]) - 1) <= exact(m.r[0, k]), g[k]


@pytest.mark.parametrize("size", [1.0, 20.0, 30.0])
def test_softmax_of_equal_large_scores_is_tight(size):
    """Two scores ``size (size + delta)``, equal on the whole box (of half-width ``1 / (2 size)``,
    so each score moves by 1/2): their softmax is exactly ``(1/2, 1/2)``.  The shift by the
    softmax-weighted gradient cancels the scores' common slope exactly, so the enclosure must be
    as narrow as the exp bounds, even where ``e^(2 size^2)`` overflows."""
    from symbounds.core.float_boxes import _softmax

    bx = _Boxes(np.array([[0.5 / size]]))
    Q = FTM(np.array([[[size]]]), np.array([[[[1.0]]]]), np.zeros((1, 1, 1)))
    K = FTM(np.full((1, 1, 2), size), None, np.zeros((1, 1, 2)))
    pi, ok = _softmax(bx, Q, K, None)
    assert ok.all()
    for m in range(2):
        width = exact(pi.r[0, 0, m]) + (0 if pi.G is None else abs(exact(pi.G[0, 0, 0, m])) * exact(bx.h[0, 0]))
        assert abs(exact(pi.c[0, 0, m]) - F(1, 2)) <= width <= F(2) ** -40, (size, m)


def test_sum_of_exact_terms_charges_no_more_than_its_documented_factor():
    """``_Boxes.sum`` of ``n`` exact dyadic terms (their float sum is exact): the remainder is the
    a-priori rounding bound alone, at most ``(2n + 24) u`` times the sum of ``|c|`` and of
    ``|g| h`` (the ``2nu`` of the sum's error and the ``4u`` of the upward roundings)."""
    u = F(2) ** -53
    rng = np.random.default_rng(46)
    for n in (30, 400):
        c = rng.integers(1, 1000, (1, n)) / 8.0
        G = rng.integers(1, 1000, (1, 1, n)) / 8.0
        bx = _Boxes(np.array([[0.25]]))
        s = bx.sum(FTM(c, G, np.zeros((1, n))), 0)
        total = sum(exact(v) for v in c[0]) + sum(exact(v) for v in G[0, 0]) * F(1, 4)
        assert exact(s.c[0]) == sum(exact(v) for v in c[0])
        assert exact(s.r[0]) <= (2 * n + 24) * u * total + F(2) ** -1000, n


@pytest.mark.parametrize("skip", [1, F(1, 2), -2])
def test_a_feed_forward_skip_that_is_a_double_is_added(skip):
    """``T(x) = relu(x) + s x`` with a skip weight ``s`` that is a double (so its float ball has
    radius 0): the skip term must be in the output, whichever part of the ball is zero."""
    from symbounds.core.boxes import Box
    from symbounds.core.transformer import Embedding, FeedForward, Readout, Transformer

    ffn = FeedForward(((1,),), (0,), ((1,),), (0,), skip=skip)
    model = Transformer(layers=(ffn,), embedding=Embedding(base=((0,),), E=((1,),), column=0), readout=Readout(0, 0))
    boxes = [Box((F(a, 4),), (F(a, 4) + F(1, 8),)) for a in (-3, 0, 2)] + [Box((F(1, 3),), (F(1, 3),))]
    _check_ranges(model, boxes, least_ok=len(boxes))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_reciprocal_flags_a_range_whose_end_rounds_to_zero(sign):
    """``b = +-2 eta`` exactly (no remainder): its range rounded outward is ``[0, 4 eta]`` (or the
    mirror image), which contains 0, so ``1/b`` must be flagged, not enclosed."""
    b = FTM(np.array([[sign * 2.0**-1073]]), None, np.zeros((1, 1)))
    bx = _Boxes(np.zeros((1, 1)))
    lo, hi = bx.range(b)
    assert (lo[0, 0] == 0.0) if sign > 0 else (hi[0, 0] == 0.0)
    with np.errstate(all="ignore"):
        _, ok = bx.reciprocal(b)
    assert not ok.any()


def test_an_affine_prefix_whose_softmax_row_sum_underflows_is_refused():
    """A one-input affine prefix (one attention layer, scores input independent) whose scores
    are ``1.4e6 +- 1400`` and ``7e5 +- 700`` in the first query row (``sqrt 2`` held as a
    10-bit ball): every lower bound ``e^(s - m - r)`` of that row underflows to 0, so the row's
    sum has no positive lower bound and the prefix cannot be enclosed (setup raises), although
    the kept weights (the token whose value is nonzero) are finite."""
    import sympy

    from symbounds.core.float_boxes import evaluator
    from symbounds.core.transformer import Attention, Embedding, Head, Readout, Transformer

    # rows: x (token 0), the value row (0 at token 0), the score row
    head = Head(W_Q=((0, 0, 1),), W_K=((0, 0, sympy.sqrt(2)),), W_V=((0, 1, 0),), W_O=((1,), (0,), (0,)))
    emb = Embedding(base=((0, 0), (0, 1), (1000, 500)), E=((1,), (0,), (0,)), column=0)
    model = Transformer(layers=(Attention((head,), "softmax", skip=1),), embedding=emb, readout=Readout(0, 0))
    assert model.affine_prefix() == 1
    ev = evaluator(model, 10)
    with pytest.raises(ValueError):
        ev.setup()


@pytest.mark.parametrize("prec", [10, 16])
def test_affine_prefix_radius_at_zero_is_the_one_of_the_state_at_zero(prec):
    """``T(x) = relu(sqrt 2 (1 - x)) - relu(-sqrt 2 (1 - x)) = sqrt 2 (1 - x)`` (a linear ReLU
    pair, so the layer is the affine prefix), ``sqrt 2`` as a ``prec``-bit ball: the state at
    ``x = 0`` carries that ball's radius, the state at ``x = 1`` (where ``1 - x = 0``) none, so
    the prefix's ``F_0`` must take its radius from ``Z(0)``: on boxes near 0 it is the whole
    margin for the ball's midpoint."""
    import sympy

    from symbounds.core.boxes import Box
    from symbounds.core.transformer import Embedding, FeedForward, Readout, Transformer

    s = sympy.sqrt(2)
    ffn = FeedForward(((s,), (-s,)), (0, 0), ((1, -1),), (0,), skip=0)
    model = Transformer(layers=(ffn,), embedding=Embedding(base=((1,),), E=((-1,),), column=0), readout=Readout(0, 0))
    assert model.affine_prefix() == 1
    boxes = [Box((F(0),), (F(0),)), Box((F(0),), (F(1, 2**12),)), Box((F(-1, 2**11),), (F(1, 2**11),))]
    _check_ranges(model, boxes, least_ok=len(boxes), prec=prec)


def test_prefix_followed_by_a_feed_forward_layer_without_bias():
    """The two-attention prefix, then the ReLU layer with a zero first bias and no skip: the rows
    read after the prefix are those of ``W1`` (not of the zero bias), and the ranges contain the
    300-bit values."""
    import dataclasses

    from symbounds.core.boxes import Box

    base = _two_attention_prefix(F(1, 2))
    ffn = dataclasses.replace(base.layers[2], b1=(0, 0))
    model = dataclasses.replace(base, layers=base.layers[:2] + (ffn,))
    assert model.affine_prefix() == 2
    boxes = [Box((F(a, 8),), (F(a, 8) + F(1, 32),)) for a in range(-8, 8, 5)] + [Box((F(1, 3),), (F(1, 3),))]
    _check_ranges(model, boxes, least_ok=len(boxes))


def test_prefix_followed_by_a_weight_whose_ball_has_midpoint_zero():
    """The two-attention prefix, then a ReLU unit reading the constant row only through
    ``w = sqrt 2 - 181/128`` (about ``1.5e-4``): at 10 bits ``sqrt 2`` is the ball
    ``181/128 +- 2^-9``, so ``w``'s float ball is ``0 +- 0.00195``, with a zero midpoint.  The row
    is read through that radius alone and must be kept after the prefix."""
    import dataclasses

    import sympy

    from symbounds.core.boxes import Box
    from symbounds.core.contexts import BallContext
    from symbounds.core.float_boxes import _ball_of
    from symbounds.core.transformer import FeedForward

    w = sympy.sqrt(2) - sympy.Rational(181, 128)
    m, r = _ball_of(w, BallContext(10))
    assert m == 0.0 and r > 1e-3
    base = _two_attention_prefix(F(1, 2))
    ffn = FeedForward(((1, w),), (F(2),), ((1,), (0,)), (0, 0), skip=0)  # the unit is active
    model = dataclasses.replace(base, layers=base.layers[:2] + (ffn,))
    assert model.affine_prefix() == 2
    boxes = [Box((F(a, 8),), (F(a, 8) + F(1, 32),)) for a in range(-8, 8, 5)] + [Box((F(1, 3),), (F(1, 3),))]
    _check_ranges(model, boxes, least_ok=len(boxes), prec=10)


@pytest.mark.parametrize("skip", [1, F(3, 2)])
def test_prefix_followed_by_a_skip_that_is_a_double(skip):
    """The two-attention prefix, then a ReLU layer reading row 0 only, with a skip weight that is
    a double (radius 0) and the readout on row 1: the skip carries row 1 to the output, so every
    row of the prefix's state is read."""
    import dataclasses

    from symbounds.core.boxes import Box
    from symbounds.core.transformer import FeedForward, Readout

    base = _two_attention_prefix(F(1, 2))
    ffn = FeedForward(((1, 0),), (F(-1, 2),), ((0,), (1,)), (0, 0), skip=skip)
    model = dataclasses.replace(base, layers=base.layers[:2] + (ffn,), readout=Readout(1, 1))
    assert model.affine_prefix() == 2
    boxes = [Box((F(a, 8),), (F(a, 8) + F(1, 32),)) for a in range(-8, 8, 5)] + [Box((F(1, 3),), (F(1, 3),))]
    _check_ranges(model, boxes, least_ok=len(boxes))


@pytest.mark.parametrize("block", [2, 4])
def test_softmax_of_interval_scores_in_blocks_of_rows(block):
    """Five query rows in blocks of ``block // n`` rows (one or two): every row is computed once,
    in order, as in one block (up to the last bits: BLAS may round a smaller product otherwise)."""
    from symbounds.core.float_boxes import _softmax_interval

    rng = random.Random(7)
    Q, K = _interval(rng, (2, 2, 5), 0.01), _interval(rng, (2, 2, 2), 0.02)
    pi, ok = _softmax_interval(Q, K, None, [0, 1], block=block)
    assert pi.c.shape == (2, 5, 2) and ok.shape == (2, 5) and ok.all()
    whole, ok_whole = _softmax_interval(Q, K, None, [0, 1])
    assert ok_whole.all()
    assert np.allclose(pi.c, whole.c, rtol=1e-12, atol=0) and np.allclose(pi.r, whole.r, rtol=1e-6, atol=1e-15)


def test_softmax_of_interval_scores_charges_the_rounding_of_long_dot_products():
    """One query row, ``dk = 64``: the scores ``sum_a K[a, k]`` of two keys holding the same 64
    doubles in opposite orders are equal, so the softmax is exactly ``(1/2, 1/2)``; the float
    sums differ by their rounding, which the score's radius (``2 dk u`` times the sum of
    ``|q| |K|``, ``dk`` the length of the dot product) must cover.  Scores of size ``2^15`` and
    ``2^20``, so that this rounding exceeds the exp bounds' own margin; the first key is
    ``2^20 (1, x, ..., x)`` with ``x = 3u/2``, whose sum taken in order rounds up at every step
    (about ``30 u`` in all, where a shorter sum's ``2u`` would be charged)."""
    from symbounds.core.float_boxes import _softmax_interval

    rng = np.random.default_rng(64)
    B, dk = 300, 64
    col = rng.uniform(1, 2, (B, dk)) * 2.0**8
    col[0] = 2.0**20 * np.array([1.0] + [1.5 * 2.0**-53] * (dk - 1))
    Kc = np.stack([col, col[:, ::-1]], axis=2)  # (B, dk, 2)
    Q = FTM(np.ones((B, dk, 1)), None, np.zeros((B, dk, 1)))
    K = FTM(Kc, None, np.zeros(Kc.shape))
    pi, ok = _softmax_interval(Q, K, None, [0, 1])
    assert ok.all()
    differ = 0
    for b in range(B):
        differ += (Q.c[b, :, 0] @ Kc[b, :, 0]) != (Q.c[b, :, 0] @ Kc[b, :, 1])
        for m in range(2):
            assert abs(exact(pi.c[b, 0, m]) - F(1, 2)) <= exact(pi.r[b, 0, m]), (b, m)
    assert differ > 0


@pytest.mark.parametrize("far", [False, True])
@pytest.mark.parametrize("tau", [None, (0.7, 0.0), (-1.3, 0.0)])
def test_softmax_of_large_single_product_scores_covers_their_rounding(tau, far):
    """``dk = 1``: each score is one product ``t q k`` (rounded once, then once more by the factor
    ``t``, then shifted by the row's largest centre).  Scores of size ``2^20`` that differ by a
    few units (each rounding about ``2^-33``, far above the exp bounds' margin), or (``far``)
    scores near 900 and 300, whose difference ``-600`` is itself rounded (they are more than a
    factor 2 apart): each rounding must be charged, and the softmax of the exact products lies in
    the enclosure."""
    from symbounds.core.float_boxes import _softmax_interval

    rng = np.random.default_rng(20)
    B = 400
    if far:
        q = rng.uniform(1, 2, B) * 2.0**5
        k0 = 900 / q * rng.uniform(0.999, 1.001, B)
        k1 = k0 / 3 * rng.uniform(0.999, 1.001, B)
    else:
        q = rng.uniform(1, 2, B) * 2.0**10
        k0 = rng.uniform(1, 2, B) * 2.0**10
        k1 = k0 + rng.uniform(-4, 4, B) / q
    Q = FTM(q.reshape(B, 1, 1), None, np.zeros((B, 1, 1)))
    Kc = np.stack([k0, k1], axis=1).reshape(B, 1, 2)
    pi, ok = _softmax_interval(Q, FTM(Kc, None, np.zeros(Kc.shape)), tau, [0, 1])
    assert ok.all()
    t = F(1) if tau is None else exact(tau[0])
    with flint.ctx.workprec(300):
        for b in range(B):
            s = [t * exact(q[b]) * exact(Kc[b, 0, m]) for m in range(2)]
            for m in range(2):
                assert abs(_softmax_arb(s, m) - arb(exact(pi.c[b, 0, m]))) <= arb(exact(pi.r[b, 0, m])), (b, m)


def test_a_batch_of_boxes_of_different_widths_through_input_dependent_scores():
    """``T(x) = softmax(x^2, x) . (x, 1)`` (one head whose scores depend on ``x``) over one batch
    whose first box is a point and whose later boxes are wide: each box's scores are enclosed
    over its own half-widths (only input-independent scores are shared from the first box)."""
    from symbounds.core.boxes import Box
    from symbounds.core.transformer import Attention, Embedding, Head, Readout, Transformer

    head = Head(W_Q=((1,),), W_K=((1,),), W_V=((1,),), W_O=((1,),))
    model = Transformer(layers=(Attention((head,), "softmax", skip=0),),
                        embedding=Embedding(base=((0, 1),), E=((1,),), column=0), readout=Readout(0, 0))
    boxes = [Box((F(1, 2),), (F(1, 2),)), Box((F(-1, 2),), (F(1, 2),)), Box((F(0),), (F(1),)), Box((F(-1),), (F(-1, 2),))]
    _check_ranges(model, boxes, least_ok=len(boxes))


@pytest.mark.parametrize("before_last_attention", [True, False])
def test_an_attention_layer_whose_heads_are_all_silent_and_no_skip(before_last_attention):
    """An attention layer with one silent head (``W_O = 0``) and skip 0 outputs exact zeros of
    the state's shape: before the last attention layer (all columns) or after an input-dependent
    ReLU layer as the last one (the readout's column only); a ReLU layer with bias ``1/3`` and
    skip 1 follows."""
    from symbounds.core.boxes import Box
    from symbounds.core.transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer

    silent = Attention((Head(W_Q=((1, 0),), W_K=((1, 0),), W_V=((1, 0),), W_O=((0,), (0,))),), "softmax", skip=0)
    att = Attention((Head(W_Q=((0, 1),), W_K=((0, 1),), W_V=((0, 1),), W_O=((1,), (0,))),), "softmax", skip=1)
    last = FeedForward(((1, 0),), (F(1, 3),), ((1,), (0,)), (0, 0), skip=1)
    first = FeedForward(((1, 0),), (0,), ((1,), (0,)), (0, 0), skip=1)
    layers = (first, silent, att, last) if before_last_attention else (first, silent, last)
    # two rows, three tokens (the zero output has the state's shape, not a square one)
    model = Transformer(layers=layers, embedding=Embedding(base=((0, 0, 0), (1, 2, 3)), E=((1,), (0,)), column=0),
                        readout=Readout(0, 0))
    assert model.structure().silent_heads  # the head is silent
    boxes = [Box((F(a, 4),), (F(a, 4) + F(1, 8),)) for a in (-3, 0, 2)] + [Box((F(1, 3),), (F(1, 3),))]
    _check_ranges(model, boxes, least_ok=len(boxes))


def test_enclose_of_an_output_with_no_gradient_names_no_split_axis():
    """A network ending in an attention layer whose heads are all silent (skip 0): its output is
    exactly 0 with no gradient, so ``enclose`` gives ``[0, 0]``-wide ranges and the split axis
    -1 (none) for every box."""
    from symbounds.core.float_boxes import evaluator
    from symbounds.core.transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer

    silent = Attention((Head(W_Q=((1, 0),), W_K=((1, 0),), W_V=((1, 0),), W_O=((0,), (0,))),), "softmax", skip=0)
    first = FeedForward(((1, 0),), (0,), ((1,), (0,)), (0, 0), skip=1)
    model = Transformer(layers=(first, silent), embedding=Embedding(base=((0, 0, 0), (1, 2, 3)), E=((1,), (0,)), column=0),
                        readout=Readout(0, 0))
    ev = evaluator(model)
    ev.setup()
    lo, hi, ok, clo, chi, axis = ev.enclose([(F(0),), (F(-1, 2),)], [(F(1, 4),), (F(1, 2),)])
    assert ok.all() and axis.tolist() == [-1, -1]
    assert all(a <= 0 <= b and b - a < 1e-300 for a, b in zip(lo, hi))


@pytest.mark.parametrize("prec", [10, 128])
def test_enclose_gives_a_centre_enclosure_that_contains_the_value_at_the_centre(prec):
    """The centre enclosure ``c +- r`` of ``enclose`` (used to refute a box at its centre) must
    contain the network's value at the box's centre: ``T(x) = sqrt 2 (1 - x)`` with ``sqrt 2``
    as a ``prec``-bit ball, whose radius (at 10 bits, ``2^-9``) is far above the error of its
    midpoint (``1.5e-4``)."""
    import sympy
    from test_soundness import true_value

    from symbounds.core.float_boxes import evaluator
    from symbounds.core.transformer import Embedding, FeedForward, Readout, Transformer

    s = sympy.sqrt(2)
    ffn = FeedForward(((s,), (-s,)), (0, 0), ((1, -1),), (0,), skip=0)
    model = Transformer(layers=(ffn,), embedding=Embedding(base=((1,),), E=((-1,),), column=0), readout=Readout(0, 0))
    ev = evaluator(model, prec)
    ev.setup()
    los, his = [(F(-1, 2),), (F(0),), (F(1, 3),)], [(F(-1, 4),), (F(1, 8),), (F(1, 3),)]
    lo, hi, ok, clo, chi, axis = ev.enclose(los, his)
    assert ok.all()
    for b in range(3):
        vlo, vhi = true_value(model, ((los[b][0] + his[b][0]) / 2,))
        assert exact(clo[b]) <= vlo and vhi <= exact(chi[b]), b


# ------------------------------------------------------------------------------------------
# found by the fourth pass's second run (the evaluator's weight slots, batching and refusals)


def test_enclose_returns_arrays_of_doubles_flags_and_indices():
    """``enclose`` gives its ends and centre enclosures as float64 arrays, ``ok`` as bools and
    the split axis as int64: not object arrays holding Python floats (what NumPy makes of an
    array first filled with ``None`` and then given the batch's values)."""
    from symbounds.core.float_boxes import evaluator

    ev = evaluator(_ffn_bias_model(F(1, 3)))
    ev.setup()
    lo, hi, ok, clo, chi, axis = ev.enclose([(F(0),), (F(-1, 2),)], [(F(1, 4),), (F(1, 2),)])
    assert [a.dtype for a in (lo, hi, clo, chi)] == [np.float64] * 4
    assert ok.dtype == bool and ok.all() and axis.dtype == np.int64
    assert all(a <= b for a, b in zip(lo, hi))


def test_enclose_in_batches_encloses_every_box_as_one_batch_does(monkeypatch):
    """With the batch size forced to 2, five boxes go in three batches (the last one short):
    every box must get the values it gets in a single batch, and be ok."""
    from symbounds.core import float_boxes as fb

    ev = fb.evaluator(_ffn_bias_model(F(1, 3)))
    ev.setup()
    los = [(F(k, 4) - 1,) for k in range(5)]
    his = [(F(k, 4) - F(7, 8),) for k in range(5)]
    monkeypatch.setattr(fb, "_BATCH_ENTRIES", 2 * ev._entries_per_box())
    seen = []
    batch = ev._batch
    ev._batch = lambda x0, h: (seen.append(len(x0)), batch(x0, h))[1]
    parts = ev.enclose(los, his)
    assert seen == [2, 2, 1] and parts[2].all()
    monkeypatch.undo()
    ev._batch = batch
    whole = ev.enclose(los, his)
    for a, b in zip(whole, parts):
        assert a.tolist() == b.tolist()
