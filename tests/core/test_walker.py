"""The walker (``forward``: the numeric layers' ``apply`` over an evaluator) against an independent
evaluation written here from the formulas alone.

Random networks with skips, input-independent ("constant") heads, silent heads, ReLU pairs and
near-tied softmax scores are evaluated

* exactly (hardmax and feed-forward networks: the same rational as the reference),
* in Arb balls at points (the ball contains the reference),
* in first-order Taylor models over boxes and in the float box evaluator over a batch of boxes,
  the boxes in random order (the enclosure contains the reference at the box's corners and centre
  and at random points, and does not depend on the order of the batch); both evaluators walk the
  same layer objects' ``apply`` (the scalar one over each box's Taylor models, the float one over
  the batch: ``FloatBoxOps``), with their shortcuts and without,

against a 300-bit mpmath (or exact ``Fraction``) evaluation of ``Z_0 = base + E x``,
``out_j = rho z_j + sum_h W_O^h sum_k pi_h[j, k] W_V^h z_k`` and
``out_j = eta z_j + W2 relu(W1 z_j + b1) + b2`` that shares no code with the engine.  A tampered
network (one weight moved) must give a different value.
"""

from __future__ import annotations

import dataclasses
import random
from fractions import Fraction

import mpmath
import pytest

from symbounds.core import float_boxes, fused_boxes
from symbounds.core.contexts import BallContext, ExactContext, Undecided
from symbounds.core.evaluator import ScalarEvaluator
from symbounds.core.exact import arb_to_fraction, as_fraction
from symbounds.core.layers import AttentionWeights, FeedForwardWeights
from symbounds.core.taylor import TaylorContext
from symbounds.core.transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer, embed, forward

F = Fraction


# ------------------------------------------------------------------------------------------
# the independent reference


def ref_forward(model_spec, x, exact: bool):
    """The readout of the network described by ``model_spec`` (plain nested lists of Fractions) at
    ``x``, computed from the formulas: in Fractions (``exact``, no softmax) or mpmath at 300 bits."""
    with mpmath.workprec(300):
        num = (lambda v: F(v)) if exact else (lambda v: mpmath.mpf(v.numerator) / v.denominator)
        base, E, col, layers, (ro_r, ro_c) = model_spec
        D, n = len(base), len(base[0])
        Z = [[num(v) for v in row] for row in base]
        for r in range(D):
            Z[r][col] = Z[r][col] + sum((num(e) * num(xi) for e, xi in zip(E[r], x)), num(F(0)))
        for layer in layers:
            if layer[0] == "att":
                _, kind, skip, tau, heads = layer
                out = [[num(skip) * Z[r][j] for j in range(n)] for r in range(D)]
                for WQ, WK, WV, WO in heads:
                    q = [[sum((num(w) * Z[c][j] for c, w in enumerate(row)), num(F(0))) for j in range(n)] for row in WQ]
                    k = [[sum((num(w) * Z[c][j] for c, w in enumerate(row)), num(F(0))) for j in range(n)] for row in WK]
                    v = [[sum((num(w) * Z[c][j] for c, w in enumerate(row)), num(F(0))) for j in range(n)] for row in WV]
                    for j in range(n):
                        s = [sum((q[a][j] * k[a][kk] for a in range(len(q))), num(F(0))) / num(tau) for kk in range(n)]
                        if kind == "softmax":
                            m = max(s)
                            e = [mpmath.exp(si - m) for si in s]
                            tot = sum(e)
                            pi = [ei / tot for ei in e]
                        else:
                            m = max(s)
                            win = [kk for kk in range(n) if s[kk] == m]
                            pi = [num(F(1, len(win))) if kk in win else num(F(0)) for kk in range(n)]
                        a = [sum((pi[kk] * v[b][kk] for kk in range(n)), num(F(0))) for b in range(len(v))]
                        for r in range(D):
                            out[r][j] = out[r][j] + sum((num(WO[r][b]) * a[b] for b in range(len(a))), num(F(0)))
                Z = out
            else:
                _, W1, b1, W2, b2, skip = layer
                out = [[num(skip) * Z[r][j] for j in range(n)] for r in range(D)]
                for j in range(n):
                    h = [sum((num(w) * Z[c][j] for c, w in enumerate(row)), num(F(0))) + num(b) for row, b in zip(W1, b1)]
                    h = [max(v, num(F(0))) for v in h]
                    for r in range(D):
                        out[r][j] = out[r][j] + sum((num(W2[r][u]) * h[u] for u in range(len(h))), num(F(0))) + num(b2[r])
                Z = out
        return Z[ro_r][ro_c]


# ------------------------------------------------------------------------------------------
# random networks


def _rat(rng, lo=-2, hi=2, den=4):
    return F(rng.randint(lo * den, hi * den), den)


def _mat(rng, rows, cols, density=0.6, **kw):
    return [[_rat(rng, **kw) if rng.random() < density else F(0) for _ in range(cols)] for _ in range(rows)]


def random_spec(rng, kind="softmax", d=None):
    """``(base, E, column, layers, readout)``: a vector-input network whose rows ``0..p-1`` are
    positional (no input reaches them: heads reading only them are input independent), with
    near-tied positional scores, silent heads, skips and ReLU pairs."""
    d = d or rng.randint(1, 2)
    n = rng.randint(2, 4)
    p = 2  # positional rows
    D = p + rng.randint(2, 3)
    col = rng.randrange(n)
    base = _mat(rng, D, n, 0.8)
    # near ties: two tokens' positional entries differ by 2^-40
    if n >= 3:
        base[0][2] = base[0][1] + F(1, 2**40)
    E = [[F(0)] * d for _ in range(p)] + _mat(rng, D - p, d, 0.9)
    layers = []
    for li in range(rng.randint(1, 3)):
        if rng.random() < 0.6:
            heads = []
            for _ in range(rng.randint(1, 3)):
                dk, dv = rng.randint(1, 2), rng.randint(1, 2)
                constant = rng.random() < (0.85 if li == 0 else 0.4)
                reads = p if constant else D
                WQ = [row[:reads] + [F(0)] * (D - reads) for row in _mat(rng, dk, D)]
                WK = [row[:reads] + [F(0)] * (D - reads) for row in _mat(rng, dk, D)]
                WV = _mat(rng, dv, D)
                WO = _mat(rng, D, dv, 0.5)
                if rng.random() < 0.2:  # a silent head: W_O W_V = 0
                    WO = [[F(0)] * dv for _ in range(D)]
                heads.append((WQ, WK, WV, WO))
            skip = rng.choice([F(0), F(1), F(1, 2)])
            tau = rng.choice([F(1), F(1, 2), F(3)])
            layers.append(("att", kind, skip, tau, heads))
        else:
            m = rng.randint(1, 3)
            W1, b1 = _mat(rng, m, D), [_rat(rng) for _ in range(m)]
            W2 = _mat(rng, D, m)
            if rng.random() < 0.7:  # a ReLU pair (u, u'): W1[u'] = -W1[u], zero biases, W2[:, u'] = -W2[:, u]
                w = _mat(rng, 1, D, 0.8)[0]
                w[rng.randrange(D)] = F(1)
                W1 += [w, [-v for v in w]]
                b1 += [F(0), F(0)]
                c = [_rat(rng) for _ in range(D)]
                W2 = [row + [c[r], -c[r]] for r, row in enumerate(W2)]
            b2 = [_rat(rng) for _ in range(D)]
            layers.append(("ffn", W1, b1, W2, b2, rng.choice([F(0), F(1)])))
    return base, E, col, layers, (rng.randrange(D), rng.randrange(n))


def build(spec) -> Transformer:
    base, E, col, layers, (r, c) = spec
    T = lambda M: tuple(tuple(row) for row in M)
    out = []
    for layer in layers:
        if layer[0] == "att":
            _, kind, skip, tau, heads = layer
            out.append(Attention(tuple(Head(T(a), T(b), T(v), T(o)) for a, b, v, o in heads), kind, skip, tau))
        else:
            _, W1, b1, W2, b2, skip = layer
            out.append(FeedForward(T(W1), tuple(b1), T(W2), tuple(b2), skip))
    return Transformer(tuple(out), Embedding(T(base), T(E), col), Readout(r, c))


def _mp_of_arb(v):
    """The ends of a ball as Fractions (taken at 300 bits: the ends of a 128-bit ball are exact)."""
    with BallContext(300).scope():
        return arb_to_fraction(v.lower()), arb_to_fraction(v.upper())


def _inside(ref, lo: Fraction, hi: Fraction, slack=F(1, 10**60)) -> bool:
    """``lo - slack <= ref <= hi + slack`` (``ref`` a Fraction or a 300-bit mpf: the slack covers
    its rounding)."""
    with mpmath.workprec(300):
        q = lambda v: mpmath.mpf(v.numerator) / v.denominator
        val = q(ref) if isinstance(ref, Fraction) else ref
        return q(lo) - q(slack) <= val <= q(hi) + q(slack)


# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_exact_walk_equals_the_exact_reference_on_hardmax_networks(seed):
    """Hardmax attention and feed-forward layers at rational inputs: the exact walk returns the
    reference's rational (ties averaged, ReLU pairs, skips, silent and constant heads)."""
    rng = random.Random(seed)
    spec = random_spec(rng, kind="hardmax")
    model = build(spec)
    d = len(spec[1][0])
    for _ in range(3):
        x = [_rat(rng, -1, 1, 8) for _ in range(d)]
        got = forward(ExactContext(), model, x)
        assert as_fraction(got) == ref_forward(spec, x, exact=True)


@pytest.mark.parametrize("seed", range(16))
def test_ball_walk_contains_the_300_bit_reference(seed):
    rng = random.Random(100 + seed)
    spec = random_spec(rng)
    model = build(spec)
    d = len(spec[1][0])
    ball = BallContext(128)
    for _ in range(3):
        x = [_rat(rng, -1, 1, 8) for _ in range(d)]
        v = forward(ball, model, x)
        lo, hi = _mp_of_arb(v)
        assert _inside(ref_forward(spec, x, exact=False), lo, hi)
        assert hi - lo < F(1, 2**60)  # a point evaluation is tight


def _boxes(rng, d, count):
    out = []
    for _ in range(count):
        lo = [_rat(rng, -1, 1, 16) for _ in range(d)]
        out.append((lo, [a + F(rng.randint(0, 4), 64) for a in lo]))
    return out


def _points(rng, lo, hi):
    d = len(lo)
    pts = [list(lo), list(hi), [(a + b) / 2 for a, b in zip(lo, hi)]]
    for _ in range(2):
        pts.append([a + (b - a) * F(rng.randint(0, 16), 16) for a, b in zip(lo, hi)])
    return pts[: 3 + 2 * (d > 0)]


@pytest.mark.parametrize("seed", range(10))
def test_taylor_walk_and_float_boxes_enclose_the_reference_in_random_box_order(seed):
    """Over boxes: the Taylor-model walk and the float box evaluator each enclose the reference at
    points of every box; the float enclosures of a batch do not depend on the order of its boxes."""
    rng = random.Random(200 + seed)
    spec = random_spec(rng)
    model = build(spec)
    d = len(spec[1][0])
    boxes = _boxes(rng, d, 6)
    ev = float_boxes.evaluator(model)
    assert ev is not None
    ev.setup()
    order = list(range(len(boxes)))
    rng.shuffle(order)
    lo_a, hi_a, ok_a = ev.ranges([boxes[i][0] for i in order], [boxes[i][1] for i in order])
    order2 = order[::-1]
    lo_b, hi_b, ok_b = ev.ranges([boxes[i][0] for i in order2], [boxes[i][1] for i in order2])
    fl = {}
    for pos, i in enumerate(order):
        fl[i] = (ok_a[pos], F(float(lo_a[pos])), F(float(hi_a[pos])))
    for pos, i in enumerate(order2):
        assert (ok_b[pos], F(float(lo_b[pos])), F(float(hi_b[pos]))) == fl[i]
    for i in order:
        lo, hi = boxes[i]
        centre = [(a + b) / 2 for a, b in zip(lo, hi)]
        half = [(b - a) / 2 for a, b in zip(lo, hi)]
        ctx = TaylorContext(128, centre, half)
        try:
            T = forward(ctx, model, ctx.inputs())
            with ctx.ball.scope():
                t_lo, t_hi = _mp_of_arb(T.range())
        except Undecided:
            t_lo = t_hi = None
        ok, f_lo, f_hi = fl[i]
        for x in _points(rng, lo, hi):
            ref = ref_forward(spec, x, exact=False)
            if t_lo is not None:
                assert _inside(ref, t_lo, t_hi)
            if ok:
                assert _inside(ref, f_lo, f_hi)


def _spy_on_apply(monkeypatch):
    """Record ``(evaluator class, layer index)`` for every call of a layer's ``apply``."""
    calls = []
    for cls in (AttentionWeights, FeedForwardWeights):
        real = cls.apply

        def spy(self, ev, Z, run, cols=None, _real=real):
            calls.append((type(ev), self.index))
            return _real(self, ev, Z, run, cols)

        monkeypatch.setattr(cls, "apply", spy)
    return calls


@pytest.mark.parametrize("seed", range(14))
def test_both_evaluators_walk_the_same_layers_and_enclose_the_reference(seed, monkeypatch):
    """Random networks (skips, input-independent heads, silent heads, ReLU pairs, near-tied
    positional scores) over boxes in random order: the scalar evaluator (Taylor models over each
    box, from the model input and from the embedded state) and the float box evaluator (the batch,
    with its affine prefix and without it) walk the same layers' ``apply`` -- every layer by each
    -- and every enclosure contains the 300-bit reference at the corners, centre and random points
    of its box; the float ones do not depend on the batch's order.  A network whose readout bias is
    moved by 1/7 gets a float enclosure on a point box that excludes the original's value."""
    rng = random.Random(500 + seed)
    spec = _with_final_ffn(rng, random_spec(rng)) if seed % 3 == 0 else random_spec(rng)
    model = build(spec)
    d = len(spec[1][0])
    L = len(spec[3])
    monkeypatch.setattr(fused_boxes, "ENABLED", False)  # the walk after the prefix, not the kernel
    calls = _spy_on_apply(monkeypatch)
    ev = float_boxes.evaluator(model)
    ev.setup()  # the affine prefix: its layers walked at the points x = 0, e_i
    scalar_layers = model.numeric(BallContext(128)).layers
    for fl, nl in zip(ev.layers, scalar_layers):
        assert isinstance(fl, type(nl)) and type(fl).apply is type(nl).apply
    assert {i for cls, i in calls if cls is float_boxes.FloatBoxOps} == set(range(ev.prefix))
    boxes = _boxes(rng, d, 7)
    order = list(range(len(boxes)))
    rng.shuffle(order)
    got = {}
    for name, run in (("prefix", ev.ranges), ("walk", ev.walk)):
        for perm in (order, order[::-1]):
            del calls[:]
            lo_f, hi_f, ok_f = run([boxes[i][0] for i in perm], [boxes[i][1] for i in perm])
            walked = {i for cls, i in calls if cls is float_boxes.FloatBoxOps}
            assert walked == set(range(ev.prefix if name == "prefix" else 0, L))
            for pos, i in enumerate(perm):
                res = (bool(ok_f[pos]), F(float(lo_f[pos])), F(float(hi_f[pos])))
                assert got.setdefault((name, i), res) == res  # the same whatever the order
    for name in ("prefix", "walk"):  # most boxes are enclosed (not handed to Arb), so the checks below bite
        assert sum(got[(name, i)][0] for i in order) >= len(order) // 2
    for i in order:
        lo, hi = boxes[i]
        centre = [(a + b) / 2 for a, b in zip(lo, hi)]
        half = [(b - a) / 2 for a, b in zip(lo, hi)]
        ctx = TaylorContext(128, centre, half)
        taylor = []
        for kw in ({}, {"start": 0}):
            del calls[:]
            try:
                xs = ctx.inputs() if not kw else embed(ctx, model, ctx.inputs())
                T = forward(ctx, model, xs, **kw)
                with ctx.ball.scope():
                    taylor.append(_mp_of_arb(T.range()))
            except Undecided:
                continue
            walked = {j for cls, j in calls if cls is ScalarEvaluator}
            assert walked >= set(range(model.affine_prefix() if not kw else 0, L))
        for x in _points(rng, lo, hi):
            ref = ref_forward(spec, x, exact=False)
            for t_lo, t_hi in taylor:
                assert _inside(ref, t_lo, t_hi)
            for name in ("prefix", "walk"):
                ok, f_lo, f_hi = got[(name, i)]
                if ok:
                    assert _inside(ref, f_lo, f_hi), (name, i, x)
    # a tampered readout bias: the float enclosure on a point box excludes the original's value
    full = _with_final_ffn(rng, spec)
    x = [F(1, 5)] * d
    ref = ref_forward(full, x, exact=False)
    for net, inside in ((full, True), (_tamper(full, "readout"), False)):
        fev = float_boxes.evaluator(build(net))
        fev.setup()
        for run in (fev.ranges, fev.walk):
            lo_t, hi_t, ok_t = run([x], [x])
            assert ok_t[0] and _inside(ref, F(float(lo_t[0])), F(float(hi_t[0]))) == inside


def test_a_near_tie_of_softmax_scores_is_enclosed():
    """Two tokens whose positional scores differ by 2^-40: both evaluators enclose the reference."""
    rng = random.Random(7)
    for _ in range(20):
        spec = random_spec(rng, d=1)
        if len(spec[0][0]) >= 3 and any(layer[0] == "att" for layer in spec[3]):
            break
    model = build(spec)
    x = [F(1, 3)]
    v = forward(BallContext(128), model, x)
    assert _inside(ref_forward(spec, x, exact=False), *_mp_of_arb(v))


def _with_final_ffn(rng, spec):
    """``spec`` followed by a feed-forward layer with skip 1 (``z + W2 relu(W1 z + b1) + b2``)."""
    base, E, col, layers, ro = spec
    D = len(base)
    W1, b1, W2 = _mat(rng, 2, D), [_rat(rng), _rat(rng)], _mat(rng, D, 2)
    b2 = [_rat(rng) for _ in range(D)]
    return base, E, col, list(layers) + [("ffn", W1, b1, W2, b2, F(1))], ro


def _tamper(spec, where: str, by=F(1, 7)):
    """A copy with one weight moved by ``by``: the readout row's bias of the last layer
    (``"readout"``), or the first nonzero weight of the first layer (``"first"``)."""
    base, E, col, layers, ro = spec
    layers = [list(layer) for layer in layers]
    if where == "readout":
        b2 = list(layers[-1][4])
        b2[ro[0]] += by
        layers[-1][4] = b2
    else:
        first = layers[0]
        M = first[4][0][2] if first[0] == "att" else first[1]  # W_V of head 0, or W1
        M = [list(row) for row in M]
        r, c = next((r, c) for r, row in enumerate(M) for c, v in enumerate(row) if v != 0)
        M[r][c] += by
        if first[0] == "att":
            h0 = list(first[4][0])
            h0[2] = M
            first[4] = [tuple(h0)] + list(first[4][1:])
        else:
            first[1] = M
    return base, E, col, [tuple(layer) for layer in layers], ro


@pytest.mark.parametrize("seed", range(6))
def test_a_tampered_network_gives_another_value(seed):
    """A weight moved by 1/7: the walk follows the tampered reference, never the cached results of
    the original; moving the readout's bias moves the value by exactly 1/7 (exact) or to a
    disjoint ball."""
    rng = random.Random(300 + seed)
    for kind in ("hardmax", "softmax"):
        spec = _with_final_ffn(rng, random_spec(rng, kind=kind))
        d = len(spec[1][0])
        x = [F(1, 5)] * d
        model = build(spec)
        if kind == "hardmax":
            ctx = ExactContext()
            a = forward(ctx, model, x)
            b = forward(ctx, build(_tamper(spec, "readout")), x)
            assert as_fraction(b) - as_fraction(a) == F(1, 7)
            moved = _tamper(spec, "first")
            c = forward(ctx, build(moved), x)
            assert as_fraction(c) == ref_forward(moved, x, exact=True)
        else:
            ball = BallContext(128)
            a = forward(ball, model, x)
            b = forward(ball, build(_tamper(spec, "readout")), x)
            assert not a.overlaps(b)
            assert _inside(ref_forward(_tamper(spec, "readout"), x, exact=False), *_mp_of_arb(b))
            moved = _tamper(spec, "first")
            c = forward(ball, build(moved), x)
            ref_c = ref_forward(moved, x, exact=False)
            assert _inside(ref_c, *_mp_of_arb(c))
            if abs(ref_c - ref_forward(spec, x, exact=False)) > mpmath.mpf(2) ** -50:
                assert not a.overlaps(c)


def test_the_shared_softmax_option_changes_no_value():
    """``share_softmax=False`` (every weight entry by entry) and the shared path enclose the same
    reference, and the option is the model's, not a global switch."""
    rng = random.Random(11)
    spec = random_spec(rng, d=1)
    model = build(spec)
    plain = dataclasses.replace(model, share_softmax=False)
    assert plain.structure().shared_softmax is None
    x = [F(2, 9)]
    ref = ref_forward(spec, x, exact=False)
    for m in (model, plain):
        assert _inside(ref, *_mp_of_arb(forward(BallContext(128), m, x)))
    assert model.share_softmax and model.structure().share_softmax


@pytest.mark.parametrize("seed", range(4))
def test_the_matrix_product_primitive_of_each_context(seed):
    """``Context.matmul``: exact in the exact context, a containing ball in Arb (by ``arb_mat``),
    the same value for a prepared operand (``ctx.matrix``), against products of Fractions."""
    rng = random.Random(400 + seed)
    a, b, c = rng.randint(1, 4), rng.randint(1, 4), rng.randint(1, 4)
    A, B = _mat(rng, a, b, 0.7, den=7), _mat(rng, b, c, 0.9, den=5)
    ref = [[sum((A[i][k] * B[k][j] for k in range(b)), F(0)) for j in range(c)] for i in range(a)]
    ex = ExactContext()
    conv = lambda ctx, M: [[ctx.convert(v) for v in row] for row in M]
    assert [[as_fraction(v) for v in row] for row in ex.matmul(conv(ex, A), conv(ex, B))] == ref
    ball = BallContext(64)
    with ball.scope():
        Ab, Bb = conv(ball, A), conv(ball, B)
        for out in (ball.matmul(Ab, Bb), ball.matmul(ball.matrix(Ab), ball.matrix(Bb))):
            for i in range(a):
                for j in range(c):
                    lo, hi = _mp_of_arb(out[i][j])
                    assert lo <= ref[i][j] <= hi


def test_the_structure_of_a_hand_worked_network():
    """Every field of ``ModelStructure`` on a network worked by hand, found once per model."""
    base = ((1, 0), (0, 1), (0, 0))
    E = ((0,), (0,), (1,))  # the input reaches row 2 of column 0 only
    values = Head(((1, 0, 0),), ((1, 0, 0),), ((0, 0, 1),), ((0,), (0,), (1,)))  # scores positional
    silent = Head(((0, 1, 0),), ((0, 1, 0),), ((1, 0, 0),), ((0,), (0,), (0,)))  # W_O = 0
    att = Attention((values, silent), "softmax", 1)
    ffn = FeedForward(((0, 0, 1), (0, 0, -1)), (0, 0), ((0, 0), (0, 0), (2, -2)), (0, 0, 0), 1)  # a ReLU pair
    model = Transformer((att, ffn), Embedding(base, E, 0), Readout(2, 0))
    st = model.structure()
    assert st is model.structure()
    assert dict(st.constant_heads) == {(0, 0): "scores", (0, 1): "output"}
    assert st.silent_heads == {(0, 1)}
    assert st.relu_pairs == ((), ((0, 1),))
    assert st.affine_prefix == 2  # constant scores, then a ReLU pair on the input row
    assert dict(st.needed_columns) == {1: (0,), 0: (0,)}
    assert dict(st.first_value_columns) == {0: [0], 1: [0]}
    assert [[bool(v) for v in row] for row in st.prefix_dependence] == [[False, False], [False, False], [True, True]]
    # the value: z_2 after the head is x + (pi_00 x at column 0, pi_10 x at column 1); the pair adds
    # 2 (relu(y) - relu(-y)) = 2 y, so the readout is 3 (x + pi_00 x) with pi_00 = e / (e + 1)
    x = F(1, 3)
    with mpmath.workprec(300):
        w = mpmath.e / (mpmath.e + 1)
        ref = 3 * (mpmath.mpf(1) / 3) * (1 + w)
    assert _inside(ref, *_mp_of_arb(forward(BallContext(128), model, [x])))
    copy = dataclasses.replace(model, share_softmax=False)
    assert copy.structure() is not st and not copy.structure().share_softmax
