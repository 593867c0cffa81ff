"""The [SL26] claims measured through the fast path (shared softmax weights read on demand, the
traced affine prefix, L3 over distinct exact weights) against the plain path (every weight
computed entry by entry): the measured sides contain the same exact values, the verdicts agree,
and a tampered network fails the same claims in both."""

from dataclasses import replace
from fractions import Fraction

import pytest
from flint import arb
from sympy import Rational

from symbounds.core.claims import decide
from symbounds.core.contexts import BallContext
from symbounds.core.transformer import embed, forward
from symbounds.papers import shi_liao as sl

INSTANCES = {
    16: sl.Instance(d=2, alpha=Rational(1, 2), C_H=Rational(1, 2), B=Rational(1, 4), eps=Rational(9, 10),
                    target="(x1+x2)/8"),
    36: sl.Instance(d=2, C_H=1, B=1, eps=Rational(1, 2), target="sin(x1+x2)/2"),
}


def _measure(K, model, pts, plain: bool, prec=128):
    ctx = BallContext(prec)
    if plain:  # every attention weight computed entry by entry
        model = replace(model, share_softmax=False)
    ms = sl.measure(ctx, K, model, pts, assumptions=False)
    return ms, [decide(ctx, m).verdict for m in ms]


def _same_value(a, b):
    if isinstance(a, arb) or isinstance(b, arb):
        return arb(a).overlaps(arb(b))
    return a == b


@pytest.mark.parametrize("P", sorted(INSTANCES))
def test_claims_fast_and_plain_agree(P):
    K = sl.constants(INSTANCES[P])
    assert K.P == P
    pts = sl.sample_points(2, 2, 2, seed=3)
    fast, v_fast = _measure(K, sl.build(K), pts, plain=False)
    plain, v_plain = _measure(K, sl.build(K), pts, plain=True)
    assert [m.id for m in fast] == [m.id for m in plain]
    for a, b in zip(fast, plain):
        assert _same_value(a.lhs, b.lhs), a.id
        assert a.rhs is None and b.rhs is None or _same_value(a.rhs, b.rhs), a.id
    assert v_fast == v_plain
    assert all(v == "proved" for v, m in zip(v_fast, fast) if m.id.startswith("L"))


def test_l2_l3_sides_against_a_full_layer_by_layer_trace():
    """eta and the largest off-target weight read from full lists of rows (every layer evaluated
    from the embedded input, no sharing) lie in the fast path's measured balls."""
    K = sl.constants(INSTANCES[36])
    P = K.P
    x = (Fraction(1, 2), Fraction(1, 5))
    ctx = BallContext(128)
    ms = {m.id: m for m in sl.measure_point(ctx, K, sl.build(K), x)}
    plain = replace(sl.build(K), share_softmax=False)
    _, tr = forward(ctx, plain, embed(ctx, plain, x), start=0, trace=True)
    pis = tr.attention[sl.ATT1]
    with ctx.scope():
        eta = pis[P][0][0]
        off = [pis[h][j][0] for h in range(P) for j in range(P) if j != h]
        off += [pis[h][j][0] for h in (P, P + 1) for j in range(1, P)]
        top = max(off, key=lambda v: v.upper())
        assert (ctx.one - eta).overlaps(ms["L2.3"].rhs)
        assert top.overlaps(ms["L3"].lhs)
        assert all(not (v > ms["L3"].lhs) for v in off)


def _tampered_heads(model, change):
    att = model.layers[sl.ATT1]
    heads = list(att.heads)
    for h, f in change.items():
        heads[h] = f(heads[h])
    layers = list(model.layers)
    layers[sl.ATT1] = replace(att, heads=tuple(heads))
    return replace(model, layers=tuple(layers))


@pytest.mark.parametrize("what", ["key scale", "query rotation", "value"])
def test_tampered_affine_head_fails_the_same_claims(what):
    """One affine head changed (its key scale halved, its query rotation moved, its value shifted):
    the fast path refutes, and exactly the claims the plain path refutes."""
    K = sl.constants(INSTANCES[16])
    h, p0, const = 5, sl.ROWS(2)["pos"][0], sl.ROWS(2)["const"]

    def setm(W, i, j, v):
        rows = [list(r) for r in W]
        rows[i][j] = v
        return tuple(tuple(r) for r in rows)

    change = {
        "key scale": lambda hd: replace(hd, W_K=tuple(tuple(v / 2 for v in r) for r in hd.W_K)),
        "query rotation": lambda hd: replace(hd, W_Q=setm(hd.W_Q, 0, p0, hd.W_Q[0][p0] + Rational(1, 10))),
        "value": lambda hd: replace(hd, W_V=setm(hd.W_V, 1, const, hd.W_V[1][const] + Rational(1, 10))),
    }[what]
    pts = sl.sample_points(2, 2, 1, seed=0)
    model = sl.build(K)
    fast, v_fast = _measure(K, _tampered_heads(model, {h: change}), pts, plain=False)
    plain, v_plain = _measure(K, _tampered_heads(sl.build(K), {h: change}), pts, plain=True)
    refuted = {m.id for m, v in zip(fast, v_fast) if v == "refuted"}
    assert refuted == {m.id for m, v in zip(plain, v_plain) if v == "refuted"}
    assert refuted & {"L3", "L6.1", "L6.2"}
    assert _tampered_heads(model, {h: change}).structure().shared_softmax is not None  # the fast path ran


@pytest.mark.slow
def test_pou_at_P_1024_proves_every_lemma_claim():
    from symbounds.papers.shi_liao.run import PouOptions, run

    res = run(sl.Instance(d=2, C_H=1, B=1, eps="9/100", target="sin(x1+x2)/2"), PouOptions(points=2))
    assert res.K.P == 1024
    by_id = {c.id: c.verdict for c in res.claims}
    assert all(v == "proved" for cid, v in by_id.items() if cid not in ("A1", "A2")), by_id
