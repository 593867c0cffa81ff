"""Traces of shared softmax heads (symbounds/core/shared_weights.py): the on-demand matrices, the
distinct-value reduction of chosen entries and the traced affine prefix, each against the plain
computation -- sharing switched off (``share_softmax=False``) and every layer evaluated entry by entry
from the embedded state (``start=0``), which uses no cached or composed shortcut."""

import dataclasses
import random
from fractions import Fraction

import pytest
from flint import arb
from sympy import Rational
from test_setup_shortcuts import _random_model

from symbounds.core.contexts import BallContext, FPContext, MPContext
from symbounds.core.shared_weights import SharedMatrix, entry_values
from symbounds.core.transformer import embed, forward
from symbounds.papers import shi_liao as sl


def _plain_trace(ctx, model, x):
    """Every layer evaluated from the embedded input, every weight computed entry by entry."""
    plain = dataclasses.replace(model, share_softmax=False)
    return forward(ctx, plain, embed(ctx, plain, x), start=0, trace=True)


def _overlap(a, b, ctx):
    if isinstance(a, arb):
        return a.overlaps(b)
    with ctx.scope():
        return abs(a - b) <= 1e-12 * (1 + abs(b))


def _reduce(f, values):
    acc = values[0]
    for v in values[1:]:
        acc = f(acc, v)
    return acc


def _same_matrix(A, B, ctx=None):
    ctx = ctx or BallContext(128)
    return len(A) == len(B) and all(_overlap(a, b, ctx) for ra, rb in zip(A, B) for a, b in zip(ra, rb))


@pytest.mark.parametrize("seed", range(6))
def test_shared_matrices_and_distinct_entries_match_the_plain_path(seed):
    rng = random.Random(seed)
    perturb = {2: (True, Rational(1, 2**20)), 5: (False, Rational(1, 2**100))}.get(seed)
    model = _random_model(rng, perturb=perturb)
    x = (Fraction(rng.randrange(-50, 50), 37),)
    ball = BallContext(128)
    _, tr = forward(ball, model, x, trace=True)
    _, ref = _plain_trace(ball, _random_model(random.Random(seed), perturb=perturb), x)
    pis, plain = tr.attention[0], ref.attention[0]
    assert not any(isinstance(p, SharedMatrix) for p in plain)
    assert any(isinstance(p, SharedMatrix) for p in pis) == (seed != 5)  # seed 5: nothing shared
    n = len(plain[0])
    for pi, pp in zip(pis, plain):
        assert _same_matrix(list(pi), pp)  # rows (iteration), entries
        for k in range(n):
            if isinstance(pi, SharedMatrix):
                assert all(a.overlaps(pp[j][k]) for j, a in enumerate(pi.column(k)))
    assert all(_same_matrix(a, b) for a, b in zip(tr.Z, ref.Z))
    # chosen entries: column k of each head without one row -- the distinct values have the same
    # extremes as all the entries, each is some entry's ball and each entry is one of them
    picks = [(h, [j for j in range(n) if j != h % n], rng.randrange(n)) for h in range(len(pis))]
    with ball.scope():
        fast = entry_values([(pis[h], rows, k) for h, rows, k in picks])
        full = [plain[h][j][k] for h, rows, k in picks for j in rows]
        assert all(any(v.overlaps(w) for w in full) for v in fast)
        assert all(any(w.overlaps(v) for v in fast) for w in full)
        for ext in (ball.max, ball.min):
            assert _reduce(ext, fast).overlaps(_reduce(ext, full))
    if seed != 5:
        assert len(fast) < len(full)


@pytest.mark.parametrize("ctx", [BallContext(128), MPContext(128), FPContext()], ids=lambda c: c.name)
def test_traced_prefix_matches_every_layer_evaluated(ctx):
    """[SL26] at P = 16: the trace from the model input (affine prefix, shared weights read on
    demand) against the plain layer-by-layer trace: every state, pre-activation, attention
    matrix and the output agree (balls overlap; mpmath and float64 to working precision)."""
    K = sl.constants(sl.Instance(d=2, alpha=Rational(1, 2), C_H=Rational(1, 2), B=Rational(1, 4),
                                 eps=Rational(9, 10), target="(x1+x2)/8"))
    assert K.P == 16
    model = sl.build(K)
    assert model.affine_prefix() == 2
    x = (Fraction(2, 7), Fraction(-1, 3))
    out, tr = forward(ctx, model, x, trace=True)
    ref_out, ref = _plain_trace(ctx, sl.build(K), x)
    assert _overlap(out, ref_out, ctx)
    assert len(tr.Z) == len(ref.Z) == 5
    assert all(_same_matrix(a, b, ctx) for a, b in zip(tr.Z, ref.Z))
    assert sorted(tr.preactivation) == sorted(ref.preactivation) == [1, 3]
    assert all(_same_matrix(tr.preactivation[i], ref.preactivation[i], ctx) for i in (1, 3))
    assert sorted(tr.attention) == [0, 2]
    assert sum(isinstance(p, SharedMatrix) for p in tr.attention[0]) == K.P + 2
    for i in (0, 2):
        assert all(_same_matrix(list(a), b, ctx) for a, b in zip(tr.attention[i], ref.attention[i]))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("ctx", [MPContext(128), FPContext()], ids=lambda c: c.name)
def test_shared_heads_outside_the_ball_context_match_the_plain_path(seed, ctx):
    """mpmath and float64 sum the shared heads' outputs column by column (no Arb matrices): the
    state after the layer agrees with every weight computed entry by entry, to working precision."""
    rng = random.Random(seed)
    perturb = {2: (True, Rational(1, 2**20))}.get(seed)
    model = _random_model(rng, perturb=perturb)
    x = (Fraction(rng.randrange(-50, 50), 37),)
    assert model.structure().shared_softmax is not None
    Z = forward(ctx, model, x, stop=1)
    plain = dataclasses.replace(_random_model(random.Random(seed), perturb=perturb), share_softmax=False)
    ref = forward(ctx, plain, embed(ctx, model, x), start=0, stop=1)
    assert _same_matrix(Z, ref, ctx)
