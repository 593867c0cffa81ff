"""forward over a slice of layers: ``forward(ctx, m, x, start=a, stop=b)``.

Every check compares against a reference forward pass written out below from the formulas of
the module docstring of symbounds.core.transformer (Fractions for hardmax/ReLU networks, a private
600-bit mpmath context for softmax), not against the code under test.
"""
import random
from fractions import Fraction as F

import flint
import mpmath
import pytest

from symbounds.core.contexts import BallContext, ExactContext, FPContext, MPContext
from symbounds.core.transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer, forward

M = mpmath.MPContext()
M.prec = 600
EPS = F(1, 2**560)  # distance of the 600-bit reference from the truth (values are O(1))


# ---------------------------------------------------------------------------------- reference


def _mm(A, B):
    return [[sum((a * b for a, b in zip(row, col)), 0 * B[0][0]) for col in zip(*B)] for row in A]


def ref_layer(layer, Z, exp):
    """One layer on a D x n matrix of Fractions (exp=None) or mpf (exp = M.exp)."""
    n = len(Z[0])
    if isinstance(layer, FeedForward):
        H = [[h + b for h in row] for row, b in zip(_mm(layer.W1, Z), layer.b1)]
        S = [[h if h > 0 else 0 * h for h in row] for row in H]
        return [[o + b + layer.skip * z for o, z in zip(orow, zrow)]
                for orow, b, zrow in zip(_mm(layer.W2, S), layer.b2, Z)]
    out = [[layer.skip * z for z in row] for row in Z]
    for h in layer.heads:
        Q, K, V = _mm(h.W_Q, Z), _mm(h.W_K, Z), _mm(h.W_V, Z)
        pi = []
        for j in range(n):
            s = [sum((Q[a][j] * K[a][k] for a in range(len(Q))), 0 * Z[0][0]) for k in range(n)]
            if layer.tau is not None:
                s = [v / layer.tau for v in s]
            if layer.kind == "hardmax":
                top = max(s)
                win = [k for k in range(n) if s[k] == top]
                pi.append([F(1, len(win)) if k in win else F(0) for k in range(n)])
            else:
                e = [exp(v) for v in s]
                pi.append([v / sum(e) for v in e])
        A = [[sum((pi[j][k] * V[a][k] for k in range(n)), 0 * Z[0][0]) for j in range(n)] for a in range(len(V))]
        contrib = _mm(h.W_O, A)
        out = [[o + c for o, c in zip(orow, crow)] for orow, crow in zip(out, contrib)]
    return out


def ref_embed(model, x):
    if model.input == "tokens":
        return [[F(v) for v in row] for row in x]
    emb = model.embedding
    Z = [[F(v) for v in row] for row in emb.base]
    for r, erow in enumerate(emb.E):
        Z[r][emb.column] += sum((F(e) * F(v) for e, v in zip(erow, x)), F(0))
    return Z


def ref_forward(model, Z, a, b, exp=None):
    for layer in model.layers[a:b]:
        Z = ref_layer(layer, Z, exp)
    return Z


def to_mp(Z):
    return [[M.mpf(v.numerator) / v.denominator for v in row] for row in Z]


def mpf_frac(v) -> F:
    sign, man, exp, _ = M.mpf(v)._mpf_
    return (-1) ** sign * F(int(man)) * F(2) ** int(exp)


def fr(v):
    return F(int(v.p), int(v.q))


# ------------------------------------------------------------------------------ random networks


def _rat(rng, den=4, span=3):
    return F(rng.randint(-span * den, span * den), den)


def _mat(rng, r, c, **kw):
    return tuple(tuple(_rat(rng, **kw) for _ in range(c)) for _ in range(r))


def random_network(seed, kind="hardmax", D=3, n=4, L=6):
    rng = random.Random(seed)
    layers = []
    for i in range(L):
        if i % 2 == 0:
            heads = tuple(Head(_mat(rng, 2, D), _mat(rng, 2, D), _mat(rng, 2, D), _mat(rng, D, 2))
                          for _ in range(rng.randint(1, 2)))
            tau = None if kind == "hardmax" else F(rng.randint(2, 4))
            layers.append(Attention(heads, kind, rng.choice([0, 1, F(1, 2)]), tau))
        else:
            h = rng.randint(2, 4)
            layers.append(FeedForward(_mat(rng, h, D), tuple(_rat(rng) for _ in range(h)), _mat(rng, D, h),
                                      tuple(_rat(rng) for _ in range(D)), rng.choice([0, 1])))
    model = Transformer(tuple(layers), input="tokens")
    X = _mat(rng, D, n, den=2, span=1)
    return model, X


def affine_prefix_network(seed):
    """A vector model whose first two attention layers have input-independent scores (W_Q, W_K
    read rows 2, 3, which the input never reaches), followed by ReLU, hardmax and a readout."""
    rng = random.Random(seed)
    D, n, d = 4, 3, 2
    base = _mat(rng, D, n)
    E = tuple(tuple(_rat(rng) if r < 2 else 0 for _ in range(d)) for r in range(D))
    reads = lambda: tuple(tuple(_rat(rng) if c >= 2 else 0 for c in range(D)) for _ in range(2))
    writes = lambda: tuple(tuple(_rat(rng) if r < 2 else 0 for _ in range(2)) for r in range(D))
    att0 = Attention((Head(reads(), reads(), _mat(rng, 2, D), writes()),), "hardmax", 1)
    att1 = Attention((Head(reads(), reads(), _mat(rng, 2, D), writes()),), "hardmax", 1)
    ffn = FeedForward(_mat(rng, 3, D), tuple(_rat(rng) for _ in range(3)), _mat(rng, D, 3), (0,) * D, 1)
    att2 = Attention((Head(_mat(rng, 2, D), _mat(rng, 2, D), _mat(rng, 2, D), _mat(rng, D, 2)),), "hardmax", 1)
    ffn2 = FeedForward(_mat(rng, 2, D), tuple(_rat(rng) for _ in range(2)), _mat(rng, D, 2), (0,) * D, 0)
    model = Transformer((att0, att1, ffn, att2, ffn2), Embedding(base, E, 1), Readout(2, 1))
    return model, [_rat(rng) for _ in range(d)]


# --------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("seed", range(8))
def test_exact_slices_compose_and_match_the_reference(seed):
    model, X = random_network(seed)
    ctx = ExactContext()
    L = len(model.layers)
    full = forward(ctx, model, X)
    assert [[fr(v) for v in row] for row in full] == ref_forward(model, ref_embed(model, X), 0, L)
    k = random.Random(seed).randint(0, L)
    mid = forward(ctx, model, X, stop=k)
    assert forward(ctx, model, X, start=0) == full  # a token model's input is its state Z_0
    assert [[fr(v) for v in row] for row in mid] == ref_forward(model, ref_embed(model, X), 0, k)
    assert forward(ctx, model, mid, start=k) == full
    # the state may also be given as exact Python numbers
    assert forward(ctx, model, [[fr(v) for v in row] for row in mid], start=k) == full
    # any slice [a, b) from the reference state
    a, b = sorted(random.Random(seed + 100).sample(range(L + 1), 2))
    Za = ref_forward(model, ref_embed(model, X), 0, a)
    got = forward(ctx, model, Za, start=a, stop=b)
    assert [[fr(v) for v in row] for row in got] == ref_forward(model, Za, a, b)


@pytest.mark.parametrize("seed", range(6))
def test_slices_with_affine_prefix_cached_heads_and_readout(seed):
    model, x = affine_prefix_network(seed)
    assert model.affine_prefix() == 2  # the shortcut is exercised
    L = len(model.layers)
    ctx = ExactContext()
    Z0 = ref_embed(model, x)
    truth = ref_forward(model, Z0, 0, L)[2][1]
    assert fr(forward(ctx, model, x)) == truth
    for k in range(L + 1):
        mid = forward(ctx, model, x, stop=k)
        if k < L:
            assert [[fr(v) for v in row] for row in mid] == ref_forward(model, Z0, 0, k)
            assert fr(forward(ctx, model, mid, start=k)) == truth, k
        else:  # the slice to the end ends in the readout
            assert fr(mid) == truth
        # a state that no input of the model produces: cached input-independent heads must not
        # be reused for it
        odd = [[v + (r + 1) * (j + 2) for j, v in enumerate(row)] for r, row in enumerate(ref_forward(model, Z0, 0, k))]
        assert fr(forward(ctx, model, odd, start=k)) == ref_forward(model, odd, k, L)[2][1]


@pytest.mark.parametrize("seed", range(4))
def test_ball_slices_of_a_softmax_network_contain_the_truth(seed):
    model, X = random_network(seed, kind="softmax")
    L = len(model.layers)
    ctx = BallContext(200)
    truth = ref_forward(model, to_mp(ref_embed(model, X)), 0, L, M.exp)
    k = random.Random(seed).randint(0, L)
    full = forward(ctx, model, X)
    two = forward(ctx, model, forward(ctx, model, X, stop=k), start=k)
    with ctx.scope():
        for Z in (full, two):
            for row, trow in zip(Z, truth):
                for v, t in zip(row, trow):
                    lo, hi = ctx.to_fraction_bounds(v)
                    tf = mpf_frac(t)
                    assert lo - EPS <= tf <= hi + EPS
                    assert hi - lo < F(1, 2**120) * (1 + abs(tf))
        assert all(a.overlaps(b) for ra, rb in zip(full, two) for a, b in zip(ra, rb))


@pytest.mark.parametrize("ctx", [MPContext(100), FPContext()], ids=["mp", "fp"])
def test_non_rigorous_contexts_accept_their_own_states(ctx):
    model, X = random_network(3, kind="softmax")
    full = forward(ctx, model, X)
    two = forward(ctx, model, forward(ctx, model, X, stop=3), start=3)
    assert full == two  # the same operations in the same order


def test_trace_of_a_slice_starts_at_the_given_state():
    model, X = random_network(1)
    ctx = ExactContext()
    Z2 = forward(ctx, model, X, stop=2)
    out, tr = forward(ctx, model, Z2, trace=True, start=2, stop=5)
    assert tr.Z[0] == Z2 and tr.Z[-1] == out and len(tr.Z) == 4
    assert sorted(tr.attention) == [2, 4] and sorted(tr.preactivation) == [3]


def test_heads_with_zero_value_output_product_are_exact_zero():
    # W_O W_V = 0 although neither factor is zero: the head adds exactly 0, even in balls and even
    # where its hardmax would be undecided (all scores tie at a ball's precision)
    WV = ((1, 1), (1, 1))
    WO = ((1, -1), (0, 0))
    tiny = ((F(1, 3), 0), (0, 0))
    att = Attention((Head(tiny, tiny, WV, WO),), "hardmax", 1)
    model = Transformer((att,), input="tokens")
    X = ((F(1, 8), F(3, 4)), (F(5, 2), F(1, 16)))
    ctx = BallContext(64)
    out = forward(ctx, model, X)
    for row, xrow in zip(out, X):
        for v, xv in zip(row, xrow):
            assert v.is_exact() and ctx.to_fraction_bounds(v) == (xv, xv)
    assert forward(ExactContext(), model, X) == [[flint.fmpq(v.numerator, v.denominator) for v in r] for r in X]


@pytest.mark.parametrize("bad", [{"start": -1}, {"stop": 7}, {"start": 4, "stop": 3}, {"start": 1.0}])
def test_bad_slices_are_refused(bad):
    model, X = random_network(0)
    with pytest.raises(ValueError):
        forward(ExactContext(), model, X, **bad)


def test_a_state_of_the_wrong_shape_is_refused():
    model, _ = random_network(0)
    with pytest.raises(ValueError):
        forward(ExactContext(), model, [[1, 2, 3, 4]], start=1)
