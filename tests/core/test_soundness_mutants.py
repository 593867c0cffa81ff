"""Tests aimed at wrong-but-plausible variants of the soundness-critical code (each of them once
passed the rest of the suite): the worst case over sample points, the ReLU-pair detection, the
readout pruning, the Taylor remainder of exp, exact-zero tests, undecided claims and upper ends.

Every expected value is worked out by hand (exact rationals) or computed in another context.
"""

import json
from fractions import Fraction as F

import flint
import pytest
import sympy

from symbounds.app.cli import main
from symbounds.core.boxes import Box, box_bound, boxes_cover_cube
from symbounds.core.claims import Claim, Verdict, aggregate, decide, truth
from symbounds.core.contexts import BallContext, ExactContext, MPContext
from symbounds.core.structure import needed_rows
from symbounds.core.taylor import TM, TaylorContext
from symbounds.core.transformer import (
    Attention,
    Embedding,
    FeedForward,
    Head,
    Readout,
    Transformer,
    forward,
)

PREC = 128


def bounds(x):
    return BallContext(PREC).to_fraction_bounds(x)


def fr(v: flint.fmpq) -> F:
    return F(int(v.p), int(v.q))


def arb(mid, rad=0):
    """The ball ``mid +- rad`` (dyadic rationals: exact)."""
    q = lambda v: flint.fmpq(F(v).numerator, F(v).denominator)
    return flint.arb(q(mid), q(rad))


# ------------------------------------------------------------------------------------------
# The sample-point aggregate keeps the worst case.

SPIKE = "max(0, 1 - 1000000*abs(x1 - 1/3))"  # 1 at x = 1/3, 0 at every grid point


def test_one_violating_at_point_refutes_L7(capsys):
    """g is 0 on the whole sample grid and 1 at x = 1/3, where the network (built from g's grid
    values) is about 0: |T - g| is about 1 > eps = 1/10 there, and only there."""
    code = main(["pou", "--quiet", "--points", "2", "--target", SPIKE, "--at", "1/3", "--at", "1/2", "--json"])
    data = json.loads(capsys.readouterr().out)
    at = {tuple(p["x"]): p for p in data["points"]}
    mid = F(at[("1/3",)]["error"].strip("[]").split("+/-")[0].strip())  # the printed midpoint
    assert mid > F(9, 10)  # |T(1/3) - g(1/3)| = |T(1/3) - 1|, T(1/3) about 0; eps = 1/10
    verdicts = {c["id"]: c["verdict"] for c in data["claims"]}
    assert verdicts["L7"] == "refuted" and code == 1, (verdicts["L7"], code)


L = Claim("T", "lhs <= rhs", r"a \le b", "le")
Z = Claim("Z", "lhs = 0", "a = 0", "zero")


def test_aggregate_takes_largest_lhs_and_smallest_rhs():
    ctx = ExactContext()
    q = flint.fmpq
    groups = [[L.measured(q(1), q(5)), Z.measured(q(0))],
              [L.measured(q(3), q(4)), Z.measured(q(-2))],
              [L.measured(q(2), q(6)), Z.measured(q(1))]]
    merged = {m.id: m for m in aggregate(ctx, groups)}
    assert (merged["T"].lhs, merged["T"].rhs) == (3, 4)
    assert merged["Z"].lhs == 2  # the largest |lhs|
    assert decide(ctx, merged["Z"]).verdict == Verdict.REFUTED


H = Claim("H", "a property decided exactly", "P", "holds")


@pytest.mark.parametrize("values, want", [((True, True, True), True), ((True, False, True), False),
                                          ((True, None, True), None), ((None, False), False)])
def test_aggregate_of_decided_properties_is_their_conjunction(values, want):
    """A ``holds`` claim at several points holds only if it holds at each (Kleene conjunction);
    the claims measured after it in the same group are still merged."""
    ctx = ExactContext()
    q = flint.fmpq
    groups = [[H.measured(v), Claim("S", "symbolic", "S", "symbolic").measured(v), L.measured(q(i), q(10))]
              for i, v in enumerate(values)]
    merged = {m.id: m for m in aggregate(ctx, groups)}
    assert merged["H"].lhs is want and merged["S"].lhs is want
    assert merged["T"].lhs == len(values) - 1  # the last group's lhs is the largest


def test_aggregate_keeps_wording_note_claim_and_smallest_witness():
    ctx = ExactContext()
    q = flint.fmpq
    groups = [[L.stated("wording").measured(q(1), q(5), witnesses={"w": q(3)}, note="n1")],
              [L.measured(q(2), q(5), witnesses={"w": q(1), "v": q(7)})],
              [L.measured(q(0), q(5), witnesses={"w": q(2)})]]
    (m,) = aggregate(ctx, groups)
    assert (m.statement, m.note, m.claim) == ("wording", "n1", L)
    assert m.witnesses == {"w": 1, "v": 7}


# ------------------------------------------------------------------------------------------
# ReLU pairs: relu(y) - relu(-y) = y only when the second-layer columns are opposite.

def abs_pair_model(sign: int) -> Transformer:
    """``T(x) = relu(y) + sign * relu(-y)`` with ``y = x - 1/2`` (rows: x, constant 1): for
    ``sign = +1`` the pair computes ``|x - 1/2|``, not a linear function."""
    ffn = FeedForward(W1=((1, F(-1, 2)), (-1, F(1, 2))), b1=(0, 0), W2=((1, sign), (0, 0)), b2=(0, 0), skip=0)
    return Transformer(layers=(ffn,), embedding=Embedding(((0,), (1,)), ((1,), (0,))), readout=Readout(0, 0))


@pytest.mark.parametrize("sign", [1, -1])
def test_relu_pair_needs_opposite_second_layer_columns(sign):
    truth_at = lambda x: max(x - F(1, 2), 0) + sign * max(F(1, 2) - x, 0)
    for x in (F(0), F(1, 4), F(1, 2), F(7, 8), F(1)):
        assert fr(forward(ExactContext(), abs_pair_model(sign), [x])) == truth_at(x)
        ball = BallContext(PREC)
        with ball.scope():
            lo, hi = bounds(forward(ball, abs_pair_model(sign), [x]))
        assert lo <= truth_at(x) <= hi
    # the box [0, 1/4]: T = 1/2 - x (sign +1) or x - 1/2 (sign -1) has sup |T| = 1/2 at x = 0
    bound = box_bound(abs_pair_model(sign), sympy.Integer(0), 1, Box((F(0),), (F(1, 4),)), PREC)
    assert bound is not None and bound >= F(1, 2)
    ctx = TaylorContext(PREC, [F(1, 2)], [F(1, 2)])
    lo, hi = ctx.to_fraction_bounds(forward(ctx, abs_pair_model(sign), ctx.inputs()))
    assert lo <= min(truth_at(F(0)), truth_at(F(1))) and max(truth_at(F(0)), truth_at(F(1))) <= hi


# ------------------------------------------------------------------------------------------
# Readout pruning applies only from the last attention layer on.

def two_token_model() -> Transformer:
    """Tokens 0 and 1; rows: 0 output, 1 carries x (on token 1 only), 2 the constant 1, 3 a
    position (0, 1).  An FFN (skip 1) adds relu(row 1) to row 0 of every token (so on token 1 it is
    relu(x) = x for x >= 0); a hardmax head lets token 0 attend to the larger position (token 1)
    and copies row 0 of token 1 into row 0 of token 0.  Readout: row 0 of token 0, so ``T(x) = x``
    on [0, 1] -- and the FFN's token-1 column, which the readout never reads directly, matters."""
    ffn = FeedForward(W1=((0, 1, 0, 0),), b1=(0,), W2=((1,), (0,), (0,), (0,)), b2=(0, 0, 0, 0), skip=1)
    head = Head(W_Q=((0, 0, 1, 0),), W_K=((0, 0, 0, 1),), W_V=((1, 0, 0, 0),), W_O=((1,), (0,), (0,), (0,)))
    att = Attention((head,), "hardmax", skip=0)
    emb = Embedding(base=((0, 0), (0, 0), (1, 1), (0, 1)), E=((0,), (1,), (0,), (0,)), column=1)
    return Transformer(layers=(ffn, att), embedding=emb, readout=Readout(0, 0))


def test_readout_pruning_only_after_the_last_attention():
    model = two_token_model()
    assert model.affine_prefix() == 0  # the unpaired ReLU of x: no shortcut hides the pruning
    assert needed_rows(model) == {1: (0,)}
    for x in (F(0), F(1, 3), F(1)):
        assert fr(forward(ExactContext(), two_token_model(), [x])) == x
        _, tr = forward(ExactContext(), two_token_model(), [x], trace=True)
        assert fr(tr.Z[-1][0][0]) == x
    bound = box_bound(two_token_model(), sympy.Integer(0), 1, Box((F(1, 2),), (F(1),)), PREC)
    assert bound is not None and bound >= 1


# ------------------------------------------------------------------------------------------
# exp of a model with a remainder: the remainder goes through the slope of exp on the range.

def test_exp_of_a_relu_hull_encloses_the_exponential():
    """Over x in [0, 1], 4 relu(x - 1/2) is not sign-decided: its model is the hull [0, 2]
    (centre 1, remainder 1, no gradient), and exp of it must contain e^0 = 1 and e^2."""
    ctx = TaylorContext(PREC, [F(1, 2)], [F(1, 2)])
    with ctx.scope():
        (x,) = ctx.inputs()
        h = 4 * ctx.relu(x - ctx.convert(F(1, 2)))
        assert h.g is None and h.r is not None
        lo, hi = ctx.to_fraction_bounds(ctx.exp(h))
    ball = BallContext(PREC)
    with ball.scope():
        _, e2 = bounds(ball.exp(ball.convert(2)))
    assert lo <= 1 and e2 <= hi


def test_exp_with_gradient_and_remainder_encloses_point_values():
    """exp(x + 3 relu(x - 1/2)) over [0, 1] (a gradient and a hull remainder): the values at the
    ends, e^0 and e^{5/2}, lie in the model's range."""
    ctx = TaylorContext(PREC, [F(1, 2)], [F(1, 2)])
    with ctx.scope():
        (x,) = ctx.inputs()
        lo, hi = ctx.to_fraction_bounds(ctx.exp(x + 3 * ctx.relu(x - ctx.convert(F(1, 2)))))
    ball = BallContext(PREC)
    with ball.scope():
        _, top = bounds(ball.exp(ball.convert(F(5, 2))))
    assert lo <= 1 and top <= hi


def softmax_over_hull_model() -> Transformer:
    """Two tokens; an FFN puts s = 4 relu(x - 1/2) in row 1 of token 0 (x is on token 0, the
    constant row 2 is 1 everywhere); a softmax head on token 0 scores s against 0 (token 1) and
    reads row 3 (1 on token 0, 0 on token 1).  T(x) = e^s / (e^s + 1) = sigmoid(s)."""
    ffn = FeedForward(W1=((1, 0, F(-1, 2), 0),), b1=(0,), W2=((0,), (4,), (0,), (0,)), b2=(0, 0, 0, 0), skip=1)
    # score(0, k) = <row2 of token 0, row1 of token k> = s_k with s_1 = 0
    head = Head(W_Q=((0, 0, 1, 0),), W_K=((0, 1, 0, 0),), W_V=((0, 0, 0, 1),), W_O=((1,), (0,), (0,), (0,)))
    att = Attention((head,), "softmax", skip=0)
    emb = Embedding(base=((0, 0), (0, 0), (1, 1), (1, 0)), E=((1,), (0,), (0,), (0,)), column=0)
    return Transformer(layers=(ffn, att), embedding=emb, readout=Readout(0, 0))


def test_softmax_over_a_relu_hull_encloses_the_sigmoid():
    """Over [3/8, 5/8] the ReLU is not sign-decided: s is the hull [0, 1/2].  (The network-level
    check; the two tests above are the ones that pin the remainder of exp itself.)"""
    ctx = TaylorContext(PREC, [F(1, 2)], [F(1, 8)])
    lo, hi = ctx.to_fraction_bounds(forward(ctx, softmax_over_hull_model(), ctx.inputs()))
    ball = BallContext(300)
    for x in (F(3, 8), F(1, 2), F(9, 16), F(5, 8)):
        with ball.scope():
            s = 4 * max(x - F(1, 2), 0)
            want = ball.exp(ball.convert(s)) / (ball.exp(ball.convert(s)) + 1)  # by hand: sigmoid(s)
            got = forward(ball, softmax_over_hull_model(), [x])
        wlo, whi = ball.to_fraction_bounds(want)
        glo, ghi = ball.to_fraction_bounds(got)
        assert glo <= whi and wlo <= ghi  # the network is the sigmoid
        assert lo <= wlo and whi <= hi, (x, lo, hi)


# ------------------------------------------------------------------------------------------
# Exactly zero means exactly zero; undecided is never true; bounds use the upper end.

def test_is_zero_only_for_exact_zero_in_ball_and_taylor_contexts():
    B = BallContext(PREC)
    with B.scope():
        assert B.is_zero(arb(0)) is True
        assert not B.is_zero(arb(0, F(1, 2**30)))  # [0 +- r], r > 0
        assert not B.is_zero(B.convert(2))  # exact, nonzero
        assert not B.is_zero(arb(F(1, 2**100), F(1, 2**90)))  # contains 0, midpoint nonzero
    T = TaylorContext(PREC, [F(1, 2)], [F(1, 2)])
    with T.scope():
        assert T.is_zero(TM(T, arb(0)))
        assert not T.is_zero(TM(T, arb(0), None, arb(1)))  # 0 +- 1
        assert not T.is_zero(TM(T, arb(0), (arb(1),)))  # delta, zero at the centre only
        assert not T.is_zero(TM(T, arb(0, F(1, 2**30))))
        assert not T.is_zero(TM(T, arb(3)))
        assert not T.is_zero(arb(0))  # not a model


def test_zero_claim_on_a_ball_around_zero_is_undecided():
    B = BallContext(PREC)
    with B.scope():
        fuzzy = Z.measured(arb(0, F(1, 2**40)))
        assert truth(B, fuzzy) is None
        assert decide(B, fuzzy).verdict == Verdict.UNDECIDED
        assert truth(B, Z.measured(arb(0))) is True
        assert truth(B, Z.measured(arb(-3, F(1, 4)))) is False
        assert truth(B, Z.measured(arb(F(1, 2**50), F(1, 2**40)))) is None
    assert truth(ExactContext(), Z.measured(flint.fmpq(0))) is True
    assert truth(ExactContext(), Z.measured(flint.fmpq(-1, 3))) is False


def identity_model() -> Transformer:
    ffn = FeedForward(W1=((1,),), b1=(0,), W2=((1,),), b2=(0,), skip=0)  # relu(x) = x on x >= 0
    return Transformer(layers=(ffn,), embedding=Embedding(((0,),), ((1,),)), readout=Readout(0, 0))


@pytest.mark.parametrize("lo, hi", [(F(0), F(1)), (F(1, 4), F(1, 2)), (F(3, 8), F(3, 8) + F(1, 2**30))])
def test_box_bound_is_an_upper_bound_of_the_error(lo, hi):
    """|T - g| for T(x) = x and g = x/2 + 1/8 is |x/2 - 1/8|: its sup over [lo, hi] is at an end."""
    g = sympy.Symbol("x1", real=True) / 2 + sympy.Rational(1, 8)
    bound = box_bound(identity_model(), g, 1, Box((lo,), (hi,)), PREC)
    assert bound is not None and bound >= max(abs(lo / 2 - F(1, 8)), abs(hi / 2 - F(1, 8)))


def test_boxes_cover_cube_exactly():
    half = [Box((F(0),), (F(1, 2),)), Box((F(1, 2),), (F(1),))]
    assert boxes_cover_cube(half, 1)
    assert not boxes_cover_cube([Box((F(0),), (F(1, 2),)), Box((F(1, 2) + F(1, 2**60),), (F(1),))], 1)
    assert not boxes_cover_cube([Box((F(0),), (F(1, 2),))], 1)
    q = [Box((F(a, 2), F(b, 2)), (F(a + 1, 2), F(b + 1, 2))) for a in (0, 1) for b in (0, 1)]
    assert boxes_cover_cube(q, 2)
    assert not boxes_cover_cube(q[:3], 2)
    assert boxes_cover_cube([Box((F(-1), F(0)), (F(2), F(1)))], 2)  # one box larger than the cube


def test_boxes_cover_cube_in_three_dimensions():
    """Octants of [0,1]^3 (splits along every axis, so each coordinate of a piece matters)."""
    import itertools

    octs = [Box(tuple(F(a, 2) for a in c), tuple(F(a + 1, 2) for a in c)) for c in itertools.product((0, 1), repeat=3)]
    assert boxes_cover_cube(octs, 3)
    for k in range(8):
        assert not boxes_cover_cube(octs[:k] + octs[k + 1:], 3), k
    # slabs along the third axis over the bottom half, one box over the top half
    slabs = [Box((F(0), F(0), F(i, 4)), (F(1), F(1, 2), F(i + 1, 4))) for i in range(4)]
    top = Box((F(0), F(1, 2), F(0)), (F(1), F(1), F(1)))
    assert boxes_cover_cube(slabs + [top], 3)
    assert not boxes_cover_cube(slabs[:2] + slabs[3:] + [top], 3)


S = Claim("S", "a symbolic identity", "I", "symbolic")


@pytest.mark.parametrize("ctx", [ExactContext(), BallContext(PREC)], ids=["exact", "ball"])
def test_decided_properties_keep_their_truth_value(ctx):
    """``holds`` / ``symbolic`` claims carry their truth value: False is refuted, None undecided."""
    for claim in (H, S):
        assert truth(ctx, claim.measured(True)) is True
        assert truth(ctx, claim.measured(False)) is False
        assert truth(ctx, claim.measured(None)) is None
        assert decide(ctx, claim.measured(False)).verdict == Verdict.REFUTED
        assert decide(ctx, claim.measured(True)).verdict == Verdict.PROVED
        assert decide(ctx, claim.measured(None)).verdict == Verdict.UNDECIDED


def test_decide_verdicts_by_context_and_scope():
    """Rigorous contexts prove or refute; mpmath only gives evidence; an assumption checked at
    points is evidence even in balls; a decided property is proved in any context, and a symbolic
    one is reported as decided by SymPy."""
    mp, ball = MPContext(64), BallContext(PREC)
    A = Claim("A", "an assumption on g", "A", "le", scope="assumption")
    one, two, three = (mp.convert(v) for v in (1, 2, 3))
    assert decide(mp, L.measured(one, two)).verdict == Verdict.EVIDENCE
    assert decide(mp, L.measured(three, two)).verdict == Verdict.AGAINST
    assert decide(mp, L.measured(one, two)).lhs_value is None  # no enclosure from mpmath
    b1, b2, b3 = (ball.convert(v) for v in (1, 2, 3))
    r = decide(ball, L.measured(b1, b2))
    assert (r.verdict, r.context, r.prec, r.lhs_value) == (Verdict.PROVED, "ball", PREC, b1)
    assert (r.lhs, r.rhs) == ("1.0000000000000000000", "2.0000000000000000000")  # the printed sides
    assert decide(mp, L.measured(one, two)).lhs == "1.0"
    assert (r.id, r.statement, r.claim) == ("T", L.statement, L)
    assert decide(ball, H.measured(True)).lhs == ""  # a truth value is not printed as a number
    assert decide(ball, A.measured(b1, b2)).verdict == Verdict.EVIDENCE
    assert decide(ball, A.measured(b3, b2)).verdict == Verdict.REFUTED
    for ctx in (mp, ball, ExactContext()):
        r = decide(ctx, S.measured(True))
        assert (r.verdict, r.context, r.prec) == (Verdict.PROVED, "symbolic", None)
        r = decide(ctx, H.measured(True))
        assert (r.verdict, r.context, r.prec) == (Verdict.PROVED, ctx.name, ctx.prec)
        assert decide(ctx, H.measured(False)).verdict == Verdict.REFUTED
        assert decide(ctx, S.measured(None)).verdict == Verdict.UNDECIDED


def test_exp_model_is_tight_at_the_top_and_constants_stay_usable():
    """exp(x) over [0, 1/2]: the model e^c (1 + u + R) with R centred on [0, e^U - 1 - U] has
    upper end exactly e^{c + U} = e^{1/2} (up to rounding), and lower end e^c (1 - U) <= 1."""
    ctx = TaylorContext(PREC, [F(1, 4)], [F(1, 4)])
    ball = BallContext(PREC)
    with ctx.scope():
        (x,) = ctx.inputs()
        lo, hi = ctx.to_fraction_bounds(ctx.exp(x))
        e_lo, e_hi = bounds(ball.exp(ball.convert(F(1, 2))))
        assert lo <= 1 and e_hi <= hi <= e_hi * (1 + F(1, 2**26))  # radii carry 30 bits
        # exp of a constant is a constant model that mixes with numbers and models
        c = ctx.exp(ctx.convert(1)) + 1
        clo, chi = ctx.to_fraction_bounds(c + x - x)
    fine = BallContext(300)
    with fine.scope():
        want_lo, want_hi = fine.to_fraction_bounds(fine.exp(fine.convert(1)) + 1)
    assert clo <= want_lo and want_hi <= chi


def test_every_relu_pair_is_found():
    """Two pairs (y1, -y1, y2, -y2) with opposite second-layer columns: both are linear, so the
    layer is affine in x (an affine prefix of one layer), and ``relu(y) + relu(-y)`` is not."""
    W1 = ((1, 0), (-1, 0), (0, 1), (0, -1))

    def model(s2):
        ffn = FeedForward(W1=W1, b1=(0, 0, 0, 0), W2=((1, -1, 2, -2 * s2), (0, 0, 0, 0)), b2=(0, 0), skip=0)
        return Transformer(layers=(ffn,), embedding=Embedding(((0,), (1,)), ((1,), (1,))), readout=Readout(0, 0))

    assert model(1).affine_prefix() == 1
    assert model(-1).affine_prefix() == 0  # the second pair computes 2|y2|
    for s2 in (1, -1):
        for x in (F(-2), F(-1), F(1, 3)):  # rows: y1 = x, y2 = 1 + x
            want = x + 2 * max(1 + x, 0) - 2 * s2 * max(-1 - x, 0)
            assert fr(forward(ExactContext(), model(s2), [x])) == want


def test_relu_pairs_with_repeated_rows():
    """Units (y, -y, y, -y) with columns (1, -1, 1, -1) are two pairs (T = 2y, affine); units
    (y, -y, y) with columns (1, -1, 1) are one pair and a lone ReLU: T = y + relu(y), so the
    unit -y must not be paired twice."""
    def model(W1, W2):
        ffn = FeedForward(W1=W1, b1=(0,) * len(W1), W2=(W2, (0,) * len(W2)), b2=(0, 0), skip=0)
        return Transformer(layers=(ffn,), embedding=Embedding(((0,), (1,)), ((1,), (0,))), readout=Readout(0, 0))

    two = model(((1, -1), (-1, 1), (1, -1), (-1, 1)), (1, -1, 1, -1))
    assert two.affine_prefix() == 1
    lone = model(((1, -1), (-1, 1), (1, -1)), (1, -1, 1))
    for x in (F(0), F(1, 2), F(2)):  # y = x - 1
        y = x - 1
        assert fr(forward(ExactContext(), two, [x])) == 2 * y
        assert fr(forward(ExactContext(), lone, [x])) == y + max(y, 0)
        ctx = TaylorContext(PREC, [x], [F(1, 8)])
        lo, hi = ctx.to_fraction_bounds(forward(ctx, lone, ctx.inputs()))
        assert lo <= y + max(y, 0) <= hi


def test_readout_pruning_stops_at_the_last_attention_behind_a_final_ffn():
    """The same network followed by an identity FFN: pruning covers the last two layers only."""
    base = two_token_model()
    ident = FeedForward(W1=((0, 0, 0, 0),), b1=(0,), W2=((0,), (0,), (0,), (0,)), b2=(0, 0, 0, 0), skip=1)
    model = Transformer(layers=base.layers + (ident,), embedding=base.embedding, readout=base.readout)
    assert needed_rows(model) == {2: (0,), 1: (0,)}
    for x in (F(1, 3), F(1)):
        assert fr(forward(ExactContext(), model, [x])) == x


def test_the_error_bound_over_a_box_is_exact_above_and_none_when_not_finite():
    """``_error_bound``: the upper end of ``|T - g(box)|`` for an enclosure ``T``, or None (the box
    then goes to another pass or is split) when that is not finite, never an exception."""
    import flint

    from symbounds.core.boxes import Box, _error_bound, _float_box_bound
    from symbounds.core.expr import parse_target, variables

    ball = BallContext(64)
    xs, g = variables(1), parse_target("3*x1/2", 1)
    box = Box((F(0),), (F(1, 2),))  # g(box) = [0, 3/4]
    with ball.scope():
        assert _error_bound(ball, g, xs, box, flint.arb(0, "inf")) is None
        assert _error_bound(ball, g, xs, box, flint.arb("nan")) is None
        e = _error_bound(ball, g, xs, box, ball.convert(F(1)))  # |1 - [0, 3/4]| <= 1
        assert 1 <= e <= 1 + F(1, 2**25)  # (Arb keeps radii to 30 bits)
    e = _float_box_bound(ball, g, xs, box, -0.25, 0.0)  # |[-1/4, 0] - [0, 3/4]| <= 1
    assert 1 <= e <= 1 + F(1, 2**25)  # (Arb keeps radii to 30 bits)


def test_the_centre_verdict_is_on_the_distance_of_T_from_g():
    """``_centre_verdict``: ``|T(c) - g(c)| > eps`` proved (the enclosure's text, a counterexample),
    disproved (False) or undecided (None), for ``T(c)`` in ``[lo, hi]``; here ``g = 3 x / 2`` at
    ``c = 1/2`` is ``3/4`` and ``T(c) = 1/2``: the distance is ``1/4`` (``|T + g| = 5/4``)."""
    from symbounds.core.boxes import _centre_verdict
    from symbounds.core.expr import parse_target, variables

    ball = BallContext(64)
    xs, g, c = variables(1), parse_target("3*x1/2", 1), (F(1, 2),)
    assert isinstance(_centre_verdict(ball, g, xs, c, 0.5, 0.5, F(1, 5)), str)
    assert _centre_verdict(ball, g, xs, c, 0.5, 0.5, F(1, 3)) is False
    assert _centre_verdict(ball, g, xs, c, 0.25, 0.75, F(1, 5)) is None  # distance in [0, 1/2]
    assert _centre_verdict(ball, g, xs, c, 1.0, 1.0, F(1, 3)) is False  # T above g: |1 - 3/4| = 1/4
    assert isinstance(_centre_verdict(ball, g, xs, c, 1.25, 1.25, F(1, 3)), str)


def test_a_violation_is_written_with_20_digits_and_its_radius():
    """``_violation``: the counterexample's error as Arb writes it to 20 digits with its radius
    (what a refuted certificate records), False when ``<= eps`` is proved, None when undecided."""
    from symbounds.core.boxes import _violation

    ball = BallContext(64)
    with ball.scope():
        third = ball.convert(F(1, 3))  # 1/3 at 64 bits: 19 digits are certain
        assert _violation(third, ball.convert(F(1, 4))) == "[0.3333333333333333333 +/- 4.24e-20]"
        assert _violation(third, ball.convert(F(1, 2))) is False
        quarter = ball.convert(F(1, 4))
        assert _violation(quarter, ball.convert(F(1, 4))) is False  # err = eps exactly: not a violation
        assert _violation(ball.interval(F(1, 5), F(1, 2)), ball.convert(F(1, 3))) is None
    fine = BallContext(128)
    with fine.scope():  # at 128 bits 20 digits (twenty 3s), not more
        assert _violation(fine.convert(F(1, 3)), fine.convert(F(1, 4))) == "[0.33333333333333333333 +/- 3.34e-21]"


def test_centre_verdicts_find_a_violation_on_either_side_of_the_target():
    """``_centre_verdicts`` sends a centre to balls when the float lower end of ``|T - g|`` is
    above the limit: with ``T(c)`` above ``g(c)`` (``1/2`` against ``-1/4``) and below it
    (``-1/2`` against ``1/4``) the distance is ``3/4 > 1/2``, a counterexample each time; ``1/4``
    is within ``1/2`` (False); the estimates are the distances of the midpoints."""
    from symbounds.core.boxes import _centre_verdicts
    from symbounds.core.expr import parse_target, variables
    from symbounds.core.float_target import compile_target

    ball, xs, c = BallContext(64), variables(1), (F(1, 2),)
    for text, t, want in (("3*x1/2 - 1", 0.5, str), ("3*x1/2 - 1/2", -0.5, str), ("3*x1/2 - 1/2", 0.5, bool)):
        g = parse_target(text, 1)
        verdicts, est = _centre_verdicts(ball, g, xs, compile_target(g, 1), [c], [t], [t], [F(1, 2)])
        assert isinstance(verdicts[0], want) and (want is str or verdicts[0] is False), (text, t, verdicts)
        assert abs(est[0] - (0.75 if want is str else 0.25)) < 1e-12


class _FloatsFail:
    """A float evaluator that encloses no box (as for a division by a range holding 0)."""

    def enclose(self, los, his):
        import numpy as np

        n = len(los)
        nan = np.full(n, np.nan)
        return nan, nan, np.zeros(n, bool), nan, nan, np.full(n, -1)


def test_a_box_the_floats_cannot_enclose_gets_the_arb_bound():
    """``box_bounds`` with a float evaluator that fails on every box: each box gets exactly the
    Arb bound of ``box_bound`` (an exact rational above ``max |x - x^2/2|`` over the box), or None
    with ``arb=False`` -- never a placeholder."""
    from symbounds.core.boxes import box_bounds

    x = sympy.Symbol("x1", real=True)
    g = x**2 / 2
    boxes = [Box((F(0),), (F(1, 2),)), Box((F(1, 2),), (F(1),))]
    want = [box_bound(identity_model(), g, 1, b, PREC) for b in boxes]
    assert all(isinstance(w, F) for w in want)
    assert want[0] >= F(3, 8) and want[1] >= F(1, 2)  # |x - x^2/2| at x = 1/2 and x = 1
    assert box_bounds(identity_model(), g, 1, boxes, PREC, fast=_FloatsFail()) == want
    assert box_bounds(identity_model(), g, 1, boxes, PREC, fast=_FloatsFail(), arb=False) == [None, None]
