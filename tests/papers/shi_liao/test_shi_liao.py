"""[SL26] claims at several instances, mp/ball agreement, float64 beside the balls, tampered models.

Independent computations used here: constants re-derived with mpmath straight from the formulas
of docs/shi_liao.md, "Constants" (not from the package's SymPy expressions), the parameter count from the layer
shapes, and expected refutations from what each tampering breaks.
"""

from dataclasses import replace
from fractions import Fraction

import mpmath
import pytest
import sympy
from flint import fmpq
from sympy import Rational

from symbounds.core.claims import decide, escalate, exit_code
from symbounds.core.contexts import BallContext, FPContext, MPContext
from symbounds.core.fpcompare import compare_claims
from symbounds.papers import shi_liao as sl


def certify(inst_or_model, K=None, points=None, max_prec=4096):
    """(verdicts by id, final measurements) for an instance or a (possibly tampered) model."""
    if K is None:
        K = sl.constants(inst_or_model)
        model = sl.build(K)
    else:
        model = inst_or_model
    pts = points if points is not None else sl.sample_points(K.d, None, 3, seed=1)
    res, last, prec = escalate(lambda ctx: sl.measure(ctx, K, model, pts), 128, max_prec,
                               exact=lambda cid: sl.decide_exactly(K, model, cid))
    sym = [decide(BallContext(128), m) for m in sl.symbolic_claims(K)]
    return {r.id: r for r in sym + res}, last


INSTANCES = {
    # id: (instance, expected P)
    "d1-a1": (sl.Instance(), 40),
    "d1-a1/2": (sl.Instance(alpha=Rational(1, 2), C_H=Rational(1, 2), B=Rational(1, 4), eps=Rational(1, 2),
                            target="sin(x1)/4"), 8),
    "d2-a1": (sl.Instance(d=2, C_H=1, B=1, eps=Rational(1, 2), target="sin(x1+x2)/2"), 36),
    "d2-a1/2": (sl.Instance(d=2, alpha=Rational(1, 2), C_H=Rational(1, 2), B=Rational(1, 4), eps=Rational(9, 10),
                            target="(x1+x2)/8"), 16),
    "d3-a1": (sl.Instance(d=3, C_H=Rational(1, 2), B=Rational(1, 2), eps=Rational(1, 2), target="(x1+x2+x3)/8"), 64),
    "d3-a1/2": (sl.Instance(d=3, alpha=Rational(1, 2), C_H=Rational(1, 4), B=Rational(1, 4), eps=Rational(9, 10),
                            target="(x1+x2+x3)/16"), 8),
}


@pytest.mark.parametrize("key", list(INSTANCES))
def test_every_claim_proved(key):
    inst, P = INSTANCES[key]
    K = sl.constants(inst)
    assert K.P == P
    verdicts, _ = certify(inst)
    expected = {"L1", "L2.1", "L2.2", "L2.3", "L2.4", "L3", "L4.1", "L4.2", "L4.3", "L5.1", "L5.2", "L5.3",
                "L6.1", "L6.2", "L7", "E0", "E1", "E2", "E3", "L8.1", "L8.2", "A1", "A2"}
    assert set(verdicts) == expected
    for cid, r in verdicts.items():
        want = "evidence" if cid in ("A1", "A2") else "proved"
        assert r.verdict == want, (key, cid, r)
    assert exit_code(list(verdicts.values())) == 0


def test_constants_match_formulas_evaluated_independently():
    """The constants (docs/shi_liao.md) at the default instance, recomputed with mpmath from the formulas."""
    mp = mpmath.MPContext()
    mp.prec = 200
    d, C_H, B, eps = 1, 2, 2, mp.mpf(1) / 10
    r_g = eps / (4 * C_H)  # alpha = 1
    assert r_g == mp.mpf(1) / 80
    m = 40  # ceil(1 / (2/80))
    P = m**d
    M_g = mp.log(8 * B * P / eps) / (3 * r_g**2)
    c = 1 - mp.cos(2 * mp.pi / P)
    M = mp.log(4 * (P - 1) * B * (36 * d * M_g + 2) / eps) / c
    S = mp.fsum(mp.exp(M * (mp.cos(2 * mp.pi * k / P) - 1)) for k in range(1, P + 1))
    eta = 1 / S
    ctx = BallContext(200)
    K = sl.constants(sl.Instance())
    model = sl.build(K)
    env = model.definition_values(ctx)
    val = {str(s): env[s] for s in K.defs}
    for name, ref in [("M_g", M_g), ("c", c), ("M", M), ("eta", eta), ("emcM", mp.exp(-c * M))]:
        ball = val[name]
        with ctx.scope():
            assert abs(ball - BallContext(200).convert(Fraction(mp.nstr(ref, 55, min_fixed=-1, max_fixed=1)))) < \
                abs(ball) * fmpq(1, 10**45), name
    # e^{-cM} at the derived M equals eps / (4 (P-1) B (36 d M_g + 2)) exactly.
    assert abs(mp.exp(-c * M) - eps / (4 * (P - 1) * B * (36 * d * M_g + 2))) < mp.mpf(10) ** -55
    assert K.P == P and K.m == m


def test_parameter_count_matches_layer_shapes():
    for key in ("d1-a1", "d3-a1"):
        inst, P = INSTANCES[key]
        K = sl.constants(inst)
        model = sl.build(K)
        D = inst.d + 4
        layer1 = (P + 2) * (2 * D + 2 * D + 2 * D + D * 2)  # W_Q, W_K, W_V (2 x D), W_O (D x 2)
        layer2 = 4 * D  # d_k = d_v = 1
        ffn = 2 * D * D + 2 * D + D * 2 * D + D  # W1, b1, W2, b2 with d_ff = 2D
        dense, nonzero = model.count_parameters()
        assert dense == layer1 + layer2 + 2 * ffn
        assert nonzero < dense


def test_symbolic_identities():
    for d in (1, 2, 3):
        assert sl.cancellation_identity(d) is True
    for P in (5, 7, 8, 40, 64):
        assert sl.sine_cancellation(P) is True


def test_mp_and_ball_agree():
    inst, _ = INSTANCES["d1-a1"]
    K = sl.constants(inst)
    model = sl.build(K)
    pts = sl.sample_points(1, 3, 2)
    ball = BallContext(192)
    mp = MPContext(192)
    mb = {m.id: m for m in sl.measure(ball, K, model, pts, assumptions=False)}
    mm = {m.id: m for m in sl.measure(mp, K, model, pts, assumptions=False)}
    assert mb.keys() == mm.keys()
    with ball.scope():
        for cid, m in mb.items():
            for side in ("lhs", "rhs"):
                b, v = getattr(m, side), getattr(mm[cid], side)
                if b is None:
                    continue
                v = Fraction(mpmath.nstr(v, 60, min_fixed=-1, max_fixed=1)) if v != 0 else Fraction(0)
                slack = abs(b).upper() * fmpq(1, 10**40) + fmpq(1, 10**50)
                assert abs(b - ball.convert(v)) <= b.rad() + slack, (cid, side)
        assert decide(mp, mm["L7"]).verdict == "evidence"


def _fp_statuses(inst):
    K = sl.constants(inst)
    model = sl.build(K)
    pts = sl.sample_points(1, 3, 1)
    verdicts, last = certify(model, K, pts)
    fp = FPContext()
    measured = sl.measure(fp, K, model, pts, assumptions=False)
    prec = max(r.prec or 0 for r in verdicts.values())
    cmp = compare_claims(BallContext(prec), last, list(verdicts.values()), fp, measured)
    return {c.id: c for c in cmp}, {m.id: m for m in measured}


def test_float64_agrees_at_the_derived_constants():
    st, fpm = _fp_statuses(sl.Instance())
    # e^{-cM} ~ 4.8e-10 is representable: float64 sees the thresholding for the right reason.
    assert fpm["L3"].rhs > 0
    for cid in ("L3", "L5.1", "L5.2", "L6.1", "L6.2", "L7"):
        assert st[cid].status == "agrees", st[cid]
    # 1 - eta is computed as 1 - (1 - tiny): only a few digits survive, but it is not zero.
    one_m_eta = fpm["L2.3"].rhs
    K = sl.constants(sl.Instance())
    ctx = BallContext(256)
    env = sl.build(K).definition_values(ctx)
    with ctx.scope():
        exact = 1 - env[sl.SYM["eta"]]
        rel = abs((ctx.convert(Fraction(one_m_eta)) - exact) / exact)
        assert rel < fmpq(1, 10**3)  # a few digits agree ...
        assert rel > fmpq(1, 10**15)  # ... but not all of them


def test_float64_fails_at_a_large_attention_scale():
    st, fpm = _fp_statuses(sl.Instance(M=100000))  # c M ~ 1231 > 745: e^{-cM} underflows
    assert fpm["L3"].rhs == 0.0 and fpm["L3"].lhs == 0.0
    assert st["L3"].status == "vacuous"
    assert st["L5.1"].status == "wrong"  # pre-activation 0 - 0 is not < 0 in float64
    assert st["L5.2"].status == "vacuous"  # the output is 0 only because both sides underflowed
    assert st["L2.2"].status == "vacuous"
    assert st["L7"].status == "agrees"  # the final answer itself survives


@pytest.mark.parametrize("M, failing", [(50, {"L5.3", "L7", "E3"}), (500, {"E3"})])
def test_too_small_attention_scale_is_refuted(M, failing):
    verdicts, _ = certify(sl.Instance(M=M))
    refuted = {cid for cid, r in verdicts.items() if r.verdict == "refuted"}
    assert failing <= refuted
    assert exit_code(list(verdicts.values())) == 1


def test_too_small_partition_scale_is_refuted():
    verdicts, _ = certify(sl.Instance(M_g=100))
    assert verdicts["E2"].verdict == "refuted"


def test_declared_constants_violated_by_the_target_are_refuted():
    v, _ = certify(sl.Instance(target="sin(5*x1)"))  # Lipschitz 5 > C_H = 2
    assert v["A2"].verdict == "refuted"
    v, _ = certify(sl.Instance(target="3"))  # |g| = 3 > B = 2
    assert v["A1"].verdict == "refuted"


# ------------------------------------------------------------------------------------------
# Tampered models: change one weight, the verifier must refute a claim.


def _set(matrix, i, j, value):
    rows = [list(r) for r in matrix]
    rows[i][j] = value
    return tuple(tuple(r) for r in rows)


def _tamper_layer(model, index, new_layer):
    layers = list(model.layers)
    layers[index] = new_layer
    return replace(model, layers=tuple(layers))


@pytest.fixture(scope="module")
def default_build():
    K = sl.constants(sl.Instance())
    return K, sl.build(K)


def _refuted(model, K):
    verdicts, _ = certify(model, K, sl.sample_points(1, 2, 1), max_prec=512)
    return {cid for cid, r in verdicts.items() if r.verdict == "refuted"}


def test_untampered_model_is_proved(default_build):
    K, model = default_build
    assert _refuted(model, K) == set()


def test_tampered_position_entry_is_refuted(default_build):
    K, model = default_build
    d = K.d
    emb = model.embedding
    p0 = sl.ROWS(d)["pos"][0]
    bad = replace(emb, base=_set(emb.base, p0, 5, emb.base[p0][5] + Rational(1, 1000)))
    tampered = replace(model, embedding=bad)
    assert {"L4.2", "L4.3"} <= _refuted(tampered, K)


def test_tampered_ffn1_bias_is_refuted(default_build):
    K, model = default_build
    ffn = model.layers[sl.FFN1]
    ind = sl.ROWS(K.d)["ind"]
    b1 = list(ffn.b1)
    b1[ind] = sympy.Integer(0)
    refuted = _refuted(_tamper_layer(model, sl.FFN1, replace(ffn, b1=tuple(b1))), K)
    assert {"L5.1", "L5.2"} <= refuted


def test_tampered_w_ind_is_refuted(default_build):
    K, model = default_build
    ffn = model.layers[sl.FFN1]
    ind = sl.ROWS(K.d)["ind"]
    W2 = _set(ffn.W2, ind, ind, ffn.W2[ind][ind] * Rational(1001, 1000))
    assert "L5.3" in _refuted(_tamper_layer(model, sl.FFN1, replace(ffn, W2=W2)), K)


def test_tampered_value_row_is_refuted(default_build):
    K, model = default_build
    att = model.layers[sl.ATT1]
    h = 7
    head = att.heads[h]
    const = sl.ROWS(K.d)["const"]
    W_V = _set(head.W_V, 1, const, head.W_V[1][const] + Rational(1, 100))
    heads = list(att.heads)
    heads[h] = replace(head, W_V=W_V)
    assert "L6.2" in _refuted(_tamper_layer(model, sl.ATT1, replace(att, heads=tuple(heads))), K)


def test_tampered_attention_scale_is_refuted(default_build):
    K, model = default_build
    att = model.layers[sl.ATT1]
    heads = [replace(h, W_K=tuple(tuple(v / 2 for v in row) for row in h.W_K)) for h in att.heads]
    assert "L3" in _refuted(_tamper_layer(model, sl.ATT1, replace(att, heads=tuple(heads))), K)


def test_tampered_query_rotation_is_refuted(default_build):
    K, model = default_build
    att = model.layers[sl.ATT1]
    h = 3
    head = att.heads[h]
    p0 = sl.ROWS(K.d)["pos"][0]
    W_Q = _set(head.W_Q, 0, p0, head.W_Q[0][p0] + Rational(1, 10))
    heads = list(att.heads)
    heads[h] = replace(head, W_Q=W_Q)
    assert _refuted(_tamper_layer(model, sl.ATT1, replace(att, heads=tuple(heads))), K) & {"L3", "L6.1", "L6.2"}


def test_a_replaced_model_does_not_reuse_cached_weights(default_build):
    K, model = default_build
    x = (Fraction(1, 3),)
    ctx = BallContext(128)
    from symbounds.core.transformer import forward

    before = forward(ctx, model, x)  # fills the caches of `model`
    att = model.layers[sl.ATT2]
    head = att.heads[0]
    doubled = replace(head, W_V=tuple(tuple(2 * v for v in row) for row in head.W_V))
    tampered = _tamper_layer(model, sl.ATT2, replace(att, heads=(doubled,)))
    after = forward(ctx, tampered, x)
    with ctx.scope():
        assert abs(after - 2 * before) < fmpq(1, 10**20)  # T is linear in the layer-2 values


def test_input_independent_heads_are_detected(default_build):
    K, model = default_build
    const = model.constant_heads()
    assert all(const[(sl.ATT1, h)] == "scores" for h in range(K.P))  # affine heads: values carry x
    assert const[(sl.ATT1, K.P)] == "output" and const[(sl.ATT1, K.P + 1)] == "output"  # indicator, position
    assert const[(sl.ATT2, 0)] is False  # layer 2's keys are T~(x)


def test_acceptance_instance_d2_with_P_at_least_100():
    inst = sl.Instance(d=2, C_H=1, B=1, eps="1/4", target="sin(x1+x2)/2")
    K = sl.constants(inst)
    assert K.P == 144
    verdicts, _ = certify(inst, points=sl.sample_points(2, 2, 3, seed=5))
    assert all(r.verdict == ("evidence" if cid in ("A1", "A2") else "proved") for cid, r in verdicts.items())
