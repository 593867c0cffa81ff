"""Tests for symbounds.transformer: hand-worked small networks.

Every expected output below is worked out by hand (the derivation is in the comments), or, for
softmax / transcendental weights, from a closed formula evaluated in a private 1200-bit mpmath
context -- never by the code under test.
"""
import dataclasses
import math
from fractions import Fraction as F

import flint
import mpmath
import pytest
import sympy

from symbounds.core.contexts import BallContext, ExactContext, ExactUnsupported, FPContext, MPContext, Undecided
from symbounds.core.transformer import Attention, Embedding, FeedForward, Head, Readout, Trace, Transformer, forward

M = mpmath.MPContext()
M.prec = 1200
EPS = F(1, 2**1100)  # distance of the 1200-bit reference values from the truth (values are O(10))

I2 = ((1, 0), (0, 1))


# ---------------------------------------------------------------------------------------- helpers


def exact_arb(a: flint.arb) -> F:
    assert a.is_exact(), a
    man, exp = (int(t) for t in a.man_exp())
    return F(man) * F(2) ** exp


def mpf_frac(v) -> F:
    v = M.mpf(v)
    assert M.isfinite(v)
    sign, man, exp, _ = v._mpf_  # (man_exp drops the sign of negative numbers)
    return (-1) ** sign * F(int(man)) * F(2) ** int(exp)


def as_exact(v) -> F:
    """An exactly known context number (fmpq, exact arb, mpf, float) as a Fraction."""
    if isinstance(v, flint.fmpq):
        return F(int(v.p), int(v.q))
    if isinstance(v, flint.arb):
        return exact_arb(v)
    if isinstance(v, float):
        return F(v)
    return mpf_frac(v)


def exact_matrix(Z):
    return [[as_exact(v) for v in row] for row in Z]


def ball_bounds(ctx: BallContext, v):
    m, r = exact_arb(v.mid()), exact_arb(v.rad())
    with ctx.scope():
        lo, hi = ctx.to_fraction_bounds(v)
    assert lo <= m - r and m + r <= hi
    return lo, hi


def assert_ball_contains(ctx, v, truth: F, eps=F(0), slack=64):
    """The true value (within eps of ``truth``) is inside the ball, and the ball is narrow."""
    lo, hi = ball_bounds(ctx, v)
    assert lo <= truth - eps and truth + eps <= hi, (ctx.to_str(v, 30), float(truth))
    assert hi - lo <= F(2) ** -ctx.prec * slack * (1 + abs(truth)), ctx.to_str(v, 30)


def approx(ctx, v, truth: F):
    """Non-rigorous contexts: close to the truth at their precision."""
    if isinstance(ctx, FPContext):
        assert abs(v - float(truth)) <= 1e-12 * (1 + abs(float(truth)))
    else:
        assert abs(mpf_frac(v) - truth) <= F(2) ** -(ctx.prec - 8) * (1 + abs(truth))


def tokens_model(layers):
    return Transformer(layers=layers, input="tokens")


def ALL_CONTEXTS():
    return [ExactContext(), BallContext(128), MPContext(128), FPContext()]


CTX_IDS = ["exact", "ball", "mp", "fp"]


# ------------------------------------------------------------------- 1. hand-worked hardmax attention

# Tokens (columns) z1 = (1,0), z2 = (0,1), z3 = (1,1); W_Q = W_K = W_V = W_O = I, rho = 0.
# scores <z_j, z_k>:
#   j=1: [1, 0, 1] -> tie {1,3} -> (z1+z3)/2 = (1, 1/2)
#   j=2: [0, 1, 1] -> tie {2,3} -> (z2+z3)/2 = (1/2, 1)
#   j=3: [1, 1, 2] -> {3}       -> z3        = (1, 1)
HARD_TOKENS = ((1, 0, 1), (0, 1, 1))
HARD_OUT = [[F(1), F(1, 2), F(1)], [F(1, 2), F(1), F(1)]]
HARD_PI = [[F(1, 2), F(0), F(1, 2)], [F(0), F(1, 2), F(1, 2)], [F(0), F(0), F(1)]]


def hardmax_identity_model():
    return tokens_model((Attention((Head(I2, I2, I2, I2),), kind="hardmax", skip=0),))


def test_hardmax_identity_head_exact_with_tie_averaging():
    out = forward(ExactContext(), hardmax_identity_model(), HARD_TOKENS)
    assert all(isinstance(v, flint.fmpq) for row in out for v in row)
    assert exact_matrix(out) == HARD_OUT


@pytest.mark.parametrize("ctx", ALL_CONTEXTS(), ids=CTX_IDS)
def test_hardmax_identity_head_same_in_every_context(ctx):
    # integer tokens give exact scores and dyadic averages: every context must be exact here
    out = forward(ctx, hardmax_identity_model(), HARD_TOKENS)
    assert exact_matrix(out) == HARD_OUT


def test_hardmax_exact_tie_that_balls_cannot_decide():
    # z1 = z2 = (1/3, 0), z3 = (0, 1).  j=1: scores [1/9, 1/9, 0] -> average of z1, z2 = (1/3, 0);
    # j=3: scores [0, 0, 1] -> z3.  In balls, 1/3 is inexact, so the tie 1/9 vs 1/9 is undecidable.
    Z = ((F(1, 3), F(1, 3), 0), (0, 0, 1))
    model = hardmax_identity_model()
    out = forward(ExactContext(), model, Z)
    assert exact_matrix(out) == [[F(1, 3), F(1, 3), F(0)], [F(0), F(0), F(1)]]
    flint.ctx.prec = 40
    with pytest.raises(Undecided):
        forward(BallContext(128), model, Z)
    assert flint.ctx.prec == 40


# ------------------------------------------------------------------------ 2. softmax, closed form


def softmax_scalar_model(tau=None, rho=0):
    one = ((1,),)
    return tokens_model((Attention((Head(one, one, one, one),), kind="softmax", skip=rho, tau=tau),))


def test_softmax_two_tokens_closed_form_in_balls():
    # D = 1, tokens (1, 2), all weights 1: score[j,k] = z_j z_k.
    #   row 1: scores [1, 2] -> out = (e + 2e^2)/(e + e^2)     = (1 + 2e)/(1 + e)
    #   row 2: scores [2, 4] -> out = (e^2 + 2e^4)/(e^2 + e^4) = (1 + 2e^2)/(1 + e^2)
    e = M.e
    truths = [mpf_frac((1 + 2 * e) / (1 + e)), mpf_frac((1 + 2 * e**2) / (1 + e**2))]
    for prec in (64, 200):
        B = BallContext(prec)
        out, tr = forward(B, softmax_scalar_model(), ((1, 2),), trace=True)
        for v, t in zip(out[0], truths):
            assert_ball_contains(B, v, t, EPS)
        # the attention rows: pi[0] = [1/(1+e), e/(1+e)]
        pi = tr.attention[0][0]
        assert_ball_contains(B, pi[0][0], mpf_frac(1 / (1 + e)), EPS)
        assert_ball_contains(B, pi[0][1], mpf_frac(e / (1 + e)), EPS)
        with B.scope():
            for row in pi:
                lo, hi = ball_bounds(B, row[0] + row[1])
                assert lo <= 1 <= hi
    P, Fp = MPContext(150), FPContext()
    for ctx in (P, Fp):
        out = forward(ctx, softmax_scalar_model(), ((1, 2),))
        for v, t in zip(out[0], truths):
            approx(ctx, v, t)


def test_softmax_refused_by_exact_context():
    with pytest.raises(ExactUnsupported):
        forward(ExactContext(), softmax_scalar_model(), ((1, 2),))


# ---------------------------------------------------------------------------------- 3. feed-forward

# D = 3, two tokens z1 = (3, 1/2, 0), z2 = (-1, 2, 5).
FFN_Z = ((3, -1), (F(1, 2), 2), (0, 5))
FFN_W1 = ((1, -1, 0), (2, 1, 0), (-1, -1, 0))
FFN_B1 = (0, -1, F(1, 3))
FFN_W2 = ((1, 0, 5), (0, F(-1, 2), 7), (0, 0, 1))
FFN_B2 = (F(1, 4), -1, 0)
# pre(z1) = (3 - 1/2, 6 + 1/2 - 1, -3 - 1/2 + 1/3) = (5/2, 11/2, -19/6) -> relu (5/2, 11/2, 0)
# pre(z2) = (-1 - 2, -2 + 2 - 1, 1 - 2 + 1/3)     = (-3, -1, -2/3)      -> relu (0, 0, 0)
FFN_PRE = [[F(5, 2), F(-3)], [F(11, 2), F(-1)], [F(-19, 6), F(-2, 3)]]
# out(z1) = (5/2 + 1/4, -11/4 - 1, 0) = (11/4, -15/4, 0);  out(z2) = b2 = (1/4, -1, 0)
FFN_OUT = [[F(11, 4), F(1, 4)], [F(-15, 4), F(-1)], [F(0), F(0)]]
# with eta = 1/3 add z/3: z1/3 = (1, 1/6, 0), z2/3 = (-1/3, 2/3, 5/3)
FFN_OUT_ETA = [[F(15, 4), F(-1, 12)], [F(-43, 12), F(-1, 3)], [F(0), F(5, 3)]]


def ffn_model(eta=0):
    return tokens_model((FeedForward(FFN_W1, FFN_B1, FFN_W2, FFN_B2, skip=eta),))


def test_ffn_exact_hand_computed():
    out, tr = forward(ExactContext(), ffn_model(), FFN_Z, trace=True)
    assert exact_matrix(out) == FFN_OUT
    assert exact_matrix(tr.preactivation[0]) == FFN_PRE


def test_ffn_with_skip_eta_exact():
    assert exact_matrix(forward(ExactContext(), ffn_model(F(1, 3)), FFN_Z)) == FFN_OUT_ETA


@pytest.mark.parametrize("eta, expected", [(0, FFN_OUT), (F(1, 3), FFN_OUT_ETA)], ids=["eta0", "eta1/3"])
def test_ffn_balls_contain_hand_values(eta, expected):
    B = BallContext(100)
    out = forward(B, ffn_model(eta), FFN_Z)
    for row, erow in zip(out, expected):
        for v, t in zip(row, erow):
            assert_ball_contains(B, v, t)


def test_ffn_relu_of_certainly_negative_ball_is_exact_zero():
    B = BallContext(100)
    out, tr = forward(B, ffn_model(), FFN_Z, trace=True)
    # the pre-activation -19/6 is an inexact ball, but certainly negative
    assert not tr.preactivation[0][2][0].is_exact()
    # row 2 reads only that hidden unit: exactly zero, not a tiny ball around zero
    assert B.is_zero(out[2][0]) and B.is_zero(out[2][1])
    assert out[2][0].is_exact() and out[2][0].mid() == 0
    # token 2: every hidden unit is zeroed, so the output is exactly b2 (1/4 and -1 are dyadic)
    assert out[0][1].is_exact() and exact_arb(out[0][1]) == F(1, 4)
    assert out[1][1].is_exact() and exact_arb(out[1][1]) == F(-1)


# ------------------------------------------------------------------- 4. rho, eta and tau together

# Tokens Z = [[1, -1, 2], [4, 6, 8]] (D = 2, n = 3).
# Layer 0: hardmax, rho = 1/2, tau = -1 (so the head picks the *smallest* product); one head with
#   W_Q = W_K = [[1, 0]] (scores read row 0), W_V = [[0, 1]] (values = row 1), W_O = [[0], [1]].
#   score[j,k] = -(Z[0,j] Z[0,k]):
#     j=1 (z=1):  [-1,  1, -2] -> k=2 -> value 6
#     j=2 (z=-1): [ 1, -1,  2] -> k=3 -> value 8
#     j=3 (z=2):  [-2,  2, -4] -> k=2 -> value 6
#   (without the division by tau, j=1 would pick k=3 and get 8.)
#   Z1 = rho Z + [[0,0,0],[6,8,6]] = [[1/2, -1/2, 1], [2+6, 3+8, 4+6]] = [[1/2, -1/2, 1], [8, 11, 10]]
# Layer 1: FFN, eta = 2, W1 = [[1, 1]], b1 = [-10], W2 = [[0], [1]], b2 = [0, 1/2].
#   pre = [1/2+8-10, -1/2+11-10, 1+10-10] = [-3/2, 1/2, 1] -> relu [0, 1/2, 1]
#   row 0: 2 * [1/2, -1/2, 1]                 = [1, -1, 2]
#   row 1: [0, 1/2, 1] + 1/2 + 2 * [8, 11, 10] = [33/2, 23, 43/2]
SKIP_Z = ((1, -1, 2), (4, 6, 8))
SKIP_Z1 = [[F(1, 2), F(-1, 2), F(1)], [F(8), F(11), F(10)]]
SKIP_OUT = [[F(1), F(-1), F(2)], [F(33, 2), F(23), F(43, 2)]]


def skip_tau_model():
    head = Head(((1, 0),), ((1, 0),), ((0, 1),), ((0,), (1,)))
    return tokens_model(
        (
            Attention((head,), kind="hardmax", skip=F(1, 2), tau=-1),
            FeedForward(((1, 1),), (-10,), ((0,), (1,)), (0, F(1, 2)), skip=2),
        )
    )


@pytest.mark.parametrize("ctx", ALL_CONTEXTS(), ids=CTX_IDS)
def test_rho_eta_tau_hand_computed(ctx):
    out, tr = forward(ctx, skip_tau_model(), SKIP_Z, trace=True)
    assert exact_matrix(tr.Z[1]) == SKIP_Z1
    assert exact_matrix(tr.preactivation[1]) == [[F(-3, 2), F(1, 2), F(1)]]
    assert exact_matrix(out) == SKIP_OUT
    assert exact_matrix(tr.attention[0][0]) == [[0, 1, 0], [0, 0, 1], [0, 1, 0]]


def test_softmax_with_tau_and_rho_closed_form():
    # D = 1, tokens (1, 2), weights 1, tau = 2, rho = 1/3: score[j,k] = z_j z_k / 2
    #   row 1: scores [1/2, 1] -> 1/3 + (e^{1/2} + 2e)/(e^{1/2} + e)
    #   row 2: scores [1, 2]   -> 2/3 + (e + 2e^2)/(e + e^2)
    e, h = M.e, M.exp(M.mpf(1) / 2)
    truths = [mpf_frac(M.mpf(1) / 3 + (h + 2 * e) / (h + e)), mpf_frac(M.mpf(2) / 3 + (e + 2 * e**2) / (e + e**2))]
    model = softmax_scalar_model(tau=2, rho=F(1, 3))
    B = BallContext(150)
    out = forward(B, model, ((1, 2),))
    for v, t in zip(out[0], truths):
        assert_ball_contains(B, v, t, EPS)
    approx(FPContext(), forward(FPContext(), model, ((1, 2),))[0][0], truths[0])


# ---------------------------------------------------------------------- 5. embedding and readout

# base = [[0, 1], [1, 0], [0, 0]], E = [[1/2, 0], [0, 0], [1, -2]], column 1, x = (3, 1/2):
#   E x = (3/2, 0, 3 - 1 = 2) added to column 1 -> Z0 = [[0, 5/2], [1, 0], [0, 2]]
# FFN W1 = [[1, 0, 1], [0, 1, -1]], b1 = (-1, 0):
#   col 0 = (0, 1, 0):   pre = (-1, 1)            -> relu (0, 1)
#   col 1 = (5/2, 0, 2): pre = (5/2 + 2 - 1, -2)  -> relu (7/2, 0)
# W2 = [[0, 0], [0, 0], [2, 3]], b2 = (0, 0, 1/5): row 2 = [3 + 1/5, 7 + 1/5] = [16/5, 36/5]
EMB_Z0 = [[F(0), F(5, 2)], [F(1), F(0)], [F(0), F(2)]]


def embedding_model(readout=Readout(row=2, column=1)):
    return Transformer(
        layers=(FeedForward(((1, 0, 1), (0, 1, -1)), (-1, 0), ((0, 0), (0, 0), (2, 3)), (0, 0, F(1, 5))),),
        embedding=Embedding(base=((0, 1), (1, 0), (0, 0)), E=((F(1, 2), 0), (0, 0), (1, -2)), column=1),
        readout=readout,
    )


def test_embedding_ffn_readout_exact():
    x = (3, F(1, 2))
    out, tr = forward(ExactContext(), embedding_model(), x, trace=True)
    assert as_exact(out) == F(36, 5)
    assert exact_matrix(tr.Z[0]) == EMB_Z0
    assert exact_matrix(tr.preactivation[0]) == [[F(-1), F(7, 2)], [F(1), F(-2)]]
    assert as_exact(forward(ExactContext(), embedding_model(Readout(2, 0)), x)) == F(16, 5)
    full = forward(ExactContext(), embedding_model(None), x)
    assert exact_matrix(full) == [[0, 0], [0, 0], [F(16, 5), F(36, 5)]]


def test_embedding_ffn_readout_other_contexts():
    x = (3, F(1, 2))
    B = BallContext(128)
    assert_ball_contains(B, forward(B, embedding_model(), x), F(36, 5))
    assert abs(forward(FPContext(), embedding_model(), x) - 7.2) <= 1e-14
    approx(MPContext(100), forward(MPContext(100), embedding_model(), x), F(36, 5))


def test_embedding_rejects_wrong_input_length():
    with pytest.raises(ValueError):
        forward(ExactContext(), embedding_model(), (1, 2, 3))


def test_width_of_models():
    assert embedding_model().width == 3
    assert ffn_model().width == 3
    assert hardmax_identity_model().width == 2


def test_vector_model_requires_embedding():
    with pytest.raises(ValueError):
        Transformer(layers=(), input="vector")


# ---------------------------------------------------------------------------------- 6. trace contents


def test_trace_hardmax_attention_rows_are_exact_probabilities():
    out, tr = forward(ExactContext(), hardmax_identity_model(), HARD_TOKENS, trace=True)
    assert isinstance(tr, Trace)
    assert len(tr.Z) == 2 and exact_matrix(tr.Z[0]) == [[1, 0, 1], [0, 1, 1]]
    assert exact_matrix(tr.Z[-1]) == exact_matrix(out) == HARD_OUT
    assert list(tr.attention) == [0] and len(tr.attention[0]) == 1
    pi = tr.attention[0][0]
    assert exact_matrix(pi) == HARD_PI
    for row in pi:
        assert sum(as_exact(v) for v in row) == 1
    assert tr.preactivation == {}


def test_trace_preactivation_is_W1_Z_plus_b1():
    for ctx in (ExactContext(), BallContext(128)):
        _, tr = forward(ctx, ffn_model(F(1, 3)), FFN_Z, trace=True)
        assert tr.attention == {}
        pre = tr.preactivation[0]
        if ctx.exact:
            assert exact_matrix(pre) == FFN_PRE
        else:
            for row, erow in zip(pre, FFN_PRE):
                for v, t in zip(row, erow):
                    assert_ball_contains(ctx, v, t)


def test_trace_false_returns_only_the_output():
    out = forward(ExactContext(), ffn_model(), FFN_Z)
    assert isinstance(out, list) and len(out) == 3 and exact_matrix(out) == FFN_OUT


# ------------------------------------------------------------------------------- 7. count_parameters


def test_count_parameters_by_hand():
    head = Head(
        W_Q=((1, F(0)),),  # 2 entries, 1 nonzero
        W_K=((0, 2),),  # 2, 1
        W_V=((sympy.sqrt(2), sympy.Integer(0)),),  # 2, 1
        W_O=((1,), (sympy.sin(sympy.pi),)),  # 2, 1   (sin(pi) is a SymPy zero)
    )
    ffn = FeedForward(
        W1=((1, flint.fmpq(0)), (sympy.Rational(1, 2), -1)),  # 4, 3
        b1=(0, sympy.sin(sympy.pi)),  # 2, 0
        W2=((0, 0), (sympy.cos(sympy.pi / 2), 7)),  # 4, 1
        b2=(F(1, 3), sympy.pi),  # 2, 2
        skip=1,
    )
    # skip weights (3 and 1) and tau are not counted; neither are the embedding and readout
    model = Transformer(
        layers=(Attention((head,), kind="softmax", skip=3, tau=5), ffn),
        embedding=Embedding(base=((1,), (1,)), E=((1,), (1,)), column=0),
        readout=Readout(0, 0),
    )
    assert model.count_parameters() == (8 + 12, 4 + 6)
    # changing only the skip weights does not change the count
    model2 = Transformer(
        layers=(Attention((head,), kind="softmax", skip=0), FeedForward(ffn.W1, ffn.b1, ffn.W2, ffn.b2, skip=0)),
        input="tokens",
    )
    assert model2.count_parameters() == (20, 10)


def test_count_parameters_two_heads_and_symbolic_zero():
    s = sympy.Symbol("s")
    zero_expr = sympy.sqrt(8) - 2 * sympy.sqrt(2)  # SymPy simplifies this to an exact 0
    h1 = Head(((1, 0, 0),), ((0, 1, 0),), ((0, 0, 1),), ((0,), (0,), (1,)))  # 3+3+3+3 = 12, 4 nonzero
    h2 = Head(((s, 0, zero_expr),), ((0, 0, 1),), ((1, 1, 1),), ((1,), (1,), (0,)))  # 12, 1+1+3+2 = 7
    model = Transformer(layers=(Attention((h1, h2), kind="hardmax", skip=1),), input="tokens")
    assert model.count_parameters() == (24, 11)


# --------------------------------------------------------------------------------- 8. constant_heads

# Model A (vector input x in R^1; D = 3, n = 2): rows 0, 1 are positional one-hots, row 2 carries x.
#   Z0 = [[1, 0], [0, 1], [x, 0]]
# Layer 0: hardmax, rho = 1.
#   head 0: W_Q = [[1,0,0]], W_K = [[0,1,0]]  -> scores Z[0,j] Z[1,k] (positional only: constant)
#       j=1: [0, 1] -> k=2;  j=2: [0, 0] -> average.  V = row 2 = [x, 0] -> A = [0, x/2] into row 2
#   head 1: W_Q = W_K = [[0,0,1]]               -> scores x-dependent
#       j=1: [x^2, 0] -> k=1 if x != 0 else average;  j=2: [0, 0] -> average
#       V = row 0 = [1, 0] -> A = [1 (x != 0) or 1/2 (x = 0), 1/2] into row 1
#   out = [[1, 0], [A1, 1 + 1/2], [x, x/2]]


def model_a():
    h0 = Head(((1, 0, 0),), ((0, 1, 0),), ((0, 0, 1),), ((0,), (0,), (1,)))
    h1 = Head(((0, 0, 1),), ((0, 0, 1),), ((1, 0, 0),), ((0,), (1,), (0,)))
    return Transformer(
        layers=(Attention((h0, h1), kind="hardmax", skip=1),),
        embedding=Embedding(base=((1, 0), (0, 1), (0, 0)), E=((0,), (0,), (1,)), column=0),
    )


def model_a_expected(x: F):
    a1 = F(1) if x != 0 else F(1, 2)
    return [[F(1), F(0)], [a1, F(3, 2)], [x, x / 2]]


# Model B: layer 0 is an FFN (eta = 1) that writes relu(x) into positional row 0:
#   W1 = [[0,0,1]], b1 = 0, W2 = [[1],[0],[0]], b2 = 0 -> Z1 = [[1 + r, 0], [0, 1], [x, 0]], r = relu(x)
# Layer 1: hardmax, rho = 0.
#   head 0 reads row 0 (now x-dependent): j=1: [(1+r)^2, 0] -> k=1;  j=2: [0, 0] -> average
#       V = row 2 = [x, 0] -> A = [x, x/2] into row 0
#   head 1 reads row 1 (still positional): j=1: [0, 0] -> average;  j=2: [0, 1] -> k=2
#       V = row 0 = [1 + r, 0] -> A = [(1 + r)/2, 0] into row 1
#   out = [[x, x/2], [(1 + r)/2, 0], [0, 0]]


def model_b():
    ffn = FeedForward(((0, 0, 1),), (0,), ((1,), (0,), (0,)), (0, 0, 0), skip=1)
    h0 = Head(((1, 0, 0),), ((1, 0, 0),), ((0, 0, 1),), ((1,), (0,), (0,)))
    h1 = Head(((0, 1, 0),), ((0, 1, 0),), ((1, 0, 0),), ((0,), (1,), (0,)))
    return Transformer(
        layers=(ffn, Attention((h0, h1), kind="hardmax", skip=0)),
        embedding=Embedding(base=((1, 0), (0, 1), (0, 0)), E=((0,), (0,), (1,)), column=0),
    )


def model_b_expected(x: F):
    r = max(x, F(0))
    return [[x, x / 2], [(1 + r) / 2, F(0)], [F(0), F(0)]]


# Model C: the x-dependence reaches positional row 0 through an attention *value* path.
# Layer 0 (rho = 1): head reads row 1 only (constant): j=1: [0,0] -> average; j=2: [0,1] -> k=2;
#   V = row 2 = [x, 0] -> A = [x/2, 0] into row 0 -> Z1 = [[1 + x/2, 0], [0, 1], [x, 0]]
# Layer 1 (rho = 1):
#   head 0 reads row 0 (x-dependent): j=1: [(1+x/2)^2, 0] -> k=1 unless x = -2 (then average);
#       j=2: [0, 0] -> average.  V = row 1 = [0, 1] -> A = [0 or 1/2 (x = -2), 1/2] into row 2
#   head 1 reads row 1 (constant): j=1 average, j=2 -> k=2.  V = row 0 -> A = [(1 + x/2)/2, 0] into row 2
#   out row 2 = [x + A0 + (1 + x/2)/2, 0 + 1/2 + 0]


def model_c():
    l0 = Attention((Head(((0, 1, 0),), ((0, 1, 0),), ((0, 0, 1),), ((1,), (0,), (0,))),), kind="hardmax", skip=1)
    h0 = Head(((1, 0, 0),), ((1, 0, 0),), ((0, 1, 0),), ((0,), (0,), (1,)))
    h1 = Head(((0, 1, 0),), ((0, 1, 0),), ((1, 0, 0),), ((0,), (0,), (1,)))
    return Transformer(
        layers=(l0, Attention((h0, h1), kind="hardmax", skip=1)),
        embedding=Embedding(base=((1, 0), (0, 1), (0, 0)), E=((0,), (0,), (1,)), column=0),
    )


def model_c_expected(x: F):
    z0 = 1 + x / 2
    a0 = F(1, 2) if z0 == 0 else F(0)
    return [[z0, F(0)], [F(0), F(1)], [x + a0 + z0 / 2, F(1, 2)]]


def _scores_constant(model):
    """{(layer, head): whether the head's scores are input independent} (values may still depend)."""
    return {k: bool(v) for k, v in model.constant_heads().items()}


def test_constant_heads_single_layer():
    assert _scores_constant(model_a()) == {(0, 0): True, (0, 1): False}


def test_constant_heads_after_ffn_mixes_input_into_positional_row():
    assert _scores_constant(model_b()) == {(1, 0): False, (1, 1): True}


def test_constant_heads_after_attention_value_mixes_input_into_positional_row():
    assert _scores_constant(model_c()) == {(0, 0): True, (1, 0): False, (1, 1): True}


# Model D: dependence must survive skip connections and flow through x-dependent attention weights.
#   Z0 = [[1, 0], [0, 1], [x, 0]]
# Layer 0 (attention, rho = 1): scores read row 2 (x) -> NOT constant; values read positional row 0
#   (constant values, but mixed by x-dependent weights) and are written into row 1:
#   j=1: [x^2, 0] -> k=1 (x != 0) or average (x = 0); j=2: [0, 0] -> average.  V = [1, 0]
#   Z1 = [[1, 0], [a, 1 + 1/2], [x, 0]],  a = 1 (x != 0) or 1/2 (x = 0)
# Layer 1 (FFN, eta = 1): W1 = [[1,0,0]], b1 = 0, W2 = [[1],[0],[0]] -> row 0 += relu(row 0)
#   Z2 = [[2, 0], [a, 3/2], [x, 0]]   (rows 1 and 2 carried only by the skip eta)
# Layer 2 (attention, rho = 0): head 0 reads row 1 (x-dependent through layer 0's weights),
#   head 1 reads row 2 (x, carried by both skips), head 2 reads row 0 (constant).


def model_d():
    l0 = Attention((Head(((0, 0, 1),), ((0, 0, 1),), ((1, 0, 0),), ((0,), (1,), (0,))),), kind="hardmax", skip=1)
    l1 = FeedForward(((1, 0, 0),), (0,), ((1,), (0,), (0,)), (0, 0, 0), skip=1)
    heads = tuple(
        Head((row,), (row,), ((1, 0, 0),), ((0,), (0,), (0,)))
        for row in ((0, 1, 0), (0, 0, 1), (1, 0, 0))
    )
    return Transformer(
        layers=(l0, l1, Attention(heads, kind="hardmax", skip=0)),
        embedding=Embedding(base=((1, 0), (0, 1), (0, 0)), E=((0,), (0,), (1,)), column=0),
    )


def test_constant_heads_dependence_survives_skips_and_attention_weights():
    model = model_d()
    assert _scores_constant(model) == {(0, 0): False, (2, 0): False, (2, 1): False, (2, 2): True}
    for x, a in ((F(3), F(1)), (F(0), F(1, 2)), (F(-5), F(1))):
        _, tr = forward(ExactContext(), model, [x], trace=True)
        assert exact_matrix(tr.Z[1]) == [[1, 0], [a, F(3, 2)], [x, 0]]
        assert exact_matrix(tr.Z[2]) == [[2, 0], [a, F(3, 2)], [x, 0]]
        assert exact_matrix(tr.Z[3]) == [[0, 0], [0, 0], [0, 0]]


def test_constant_heads_token_input_has_none():
    assert hardmax_identity_model().constant_heads() == {}


@pytest.mark.parametrize(
    "make, expected, xs",
    [
        (model_a, model_a_expected, [F(3), F(0), F(-1, 2), F(0), F(3)]),
        (model_b, model_b_expected, [F(3), F(-2), F(1, 4), F(-2)]),
        (model_c, model_c_expected, [F(2), F(-2), F(6), F(-2)]),
    ],
    ids=["A", "B", "C"],
)
def test_cached_constant_heads_give_hand_values_for_changing_inputs(make, expected, xs):
    # one model object evaluated at several inputs: a wrongly cached head would return a stale pattern
    model = make()
    for ctx in (ExactContext(), BallContext(96), FPContext()):
        for x in xs:
            out = forward(ctx, model, [x])
            want = expected(x)
            if isinstance(ctx, BallContext):
                for row, erow in zip(out, want):
                    for v, t in zip(row, erow):
                        assert_ball_contains(ctx, v, t)
            elif isinstance(ctx, FPContext):
                assert [[float(v) for v in row] for row in out] == [[float(t) for t in r] for r in want]
            else:
                assert exact_matrix(out) == want, (x, ctx)


# ------------------------------------------------------------------ 9. SymPy weights and definitions

s, t = sympy.symbols("s t")

# Vector input x in R^1, D = 2, n = 1: Z0 = [[x], [1]].  FFN (eta = 0):
#   W1 = [[s, 0], [-1, t]], b1 = 0, W2 = [[1, s^2/2], [0, 0]], b2 = 0; readout Z[0, 0].
#   out = relu(s x) + (s^2/2) relu(t - x)


def sym_model(definitions):
    return Transformer(
        layers=(FeedForward(((s, 0), (-1, t)), (0, 0), ((1, s**2 / 2), (0, 0)), (0, 0)),),
        embedding=Embedding(base=((0,), (1,)), E=((1,), (0,)), column=0),
        readout=Readout(0, 0),
        definitions=definitions,
    )


IRRATIONAL_DEFS = ((s, sympy.sqrt(2)), (t, sympy.exp(-s)))  # s = sqrt 2, t = e^{-sqrt 2}


def irrational_truth(x: F) -> F:
    r2 = M.sqrt(2)
    xm = M.mpf(x.numerator) / x.denominator
    return mpf_frac(max(r2 * xm, 0) + max(M.exp(-r2) - xm, 0))  # s^2/2 = 1


@pytest.mark.parametrize("x", [F(1, 10), F(3), F(-1, 7)])
def test_symbolic_definitions_ball_contains_truth(x):
    model = sym_model(IRRATIONAL_DEFS)
    truth = irrational_truth(x)
    for prec in (64, 200):
        B = BallContext(prec)
        assert_ball_contains(B, forward(B, model, [x]), truth, EPS, slack=256)


def test_symbolic_definitions_contexts_agree():
    model = sym_model(IRRATIONAL_DEFS)
    x = F(1, 10)
    with pytest.raises(ExactUnsupported):
        forward(ExactContext(), model, [x])
    B = BallContext(200)
    ball = forward(B, model, [x])
    mp = forward(MPContext(200), model, [x])
    fp = forward(FPContext(), model, [x])
    mid, rad = exact_arb(ball.mid()), exact_arb(ball.rad())
    assert abs(mpf_frac(mp) - mid) <= rad + F(1, 10**30)
    assert abs(fp - float(mid)) <= 1e-12
    # and the value is the hand formula sqrt(2)/10 + e^{-sqrt 2} - 1/10 (both units active)
    assert abs(fp - (math.sqrt(2) / 10 + math.exp(-math.sqrt(2)) - 0.1)) <= 1e-14


# A rational definition (kept unevaluated, so the context evaluates the square root):
#   s = sqrt(9/4) = 3/2, t = s^2 - s = 3/4, s^2/2 = 9/8.
#   x = 1/10: relu(3/20) + 9/8 relu(3/4 - 1/10) = 3/20 + 9/8 * 13/20 = 24/160 + 117/160 = 141/160
#   x = -1:   relu(-3/2) + 9/8 relu(7/4)       = 63/32
RATIONAL_DEFS = ((s, sympy.Pow(sympy.Rational(9, 4), sympy.Rational(1, 2), evaluate=False)), (t, s**2 - s))


@pytest.mark.parametrize("x, expected", [(F(1, 10), F(141, 160)), (F(-1), F(63, 32))])
def test_rational_definitions_agree_in_all_contexts(x, expected):
    model = sym_model(RATIONAL_DEFS)
    assert as_exact(forward(ExactContext(), model, [x])) == expected
    B = BallContext(128)
    assert_ball_contains(B, forward(B, model, [x]), expected)
    approx(MPContext(128), forward(MPContext(128), model, [x]), expected)
    approx(FPContext(), forward(FPContext(), model, [x]), expected)


# ------------------------------------------------------------------------------- 10. caching


def test_repeated_ball_evaluation_is_identical():
    model = model_a()
    B = BallContext(80)
    x = [F(-1, 3)]
    first = forward(B, model, x)
    forward(B, model, [F(5, 7)])  # a different input in between
    second = forward(B, model, x)
    key = lambda Z: [[(exact_arb(v.mid()), exact_arb(v.rad())) for v in row] for row in Z]
    assert key(first) == key(second)
    # and a fresh model object (no caches) gives the same balls
    assert key(forward(B, model_a(), x)) == key(first)


def test_precisions_do_not_share_caches():
    model = sym_model(IRRATIONAL_DEFS)
    x = [F(1, 10)]
    hi1 = forward(BallContext(256), model, x)
    lo = forward(BallContext(64), model, x)
    hi2 = forward(BallContext(256), model, x)
    r_hi1, r_lo, r_hi2 = (exact_arb(v.rad()) for v in (hi1, lo, hi2))
    assert r_lo > 2**150 * r_hi1 > 0
    assert r_hi2 == r_hi1 and exact_arb(hi2.mid()) == exact_arb(hi1.mid())
    # same for the mp context: 53-bit evidence must not be reused at 200 bits
    truth = irrational_truth(F(1, 10))
    forward(MPContext(53), model, x)
    v200 = forward(MPContext(200), model, x)
    assert abs(mpf_frac(v200) - truth) <= F(2) ** -190


def test_ball_forward_does_not_leak_precision():
    flint.ctx.prec = 33
    forward(BallContext(256), model_b(), [F(3)])
    forward(BallContext(256), sym_model(IRRATIONAL_DEFS), [F(1, 3)])
    assert flint.ctx.prec == 33


def test_replaced_model_does_not_reuse_old_weights():
    # dataclasses.replace() with new weights must be evaluated with the new weights, even after the
    # original model has filled its numeric and attention caches in the same context
    B = BallContext(96)
    model = model_a()
    for x in (F(3), F(0)):
        assert exact_matrix(forward(ExactContext(), model, [x])) == model_a_expected(x)
        forward(B, model, [x])
    # new layer 0: the same heads, but rho = 0 (so only the head outputs remain)
    new = dataclasses.replace(model, layers=(dataclasses.replace(model.layers[0], skip=0),))
    # x = 3: out = [[0, 0], [1, 1/2], [0, 3/2]]
    assert exact_matrix(forward(ExactContext(), new, [F(3)])) == [[0, 0], [1, F(1, 2)], [0, F(3, 2)]]
    out = forward(B, new, [F(3)])
    assert exact_matrix(out) == [[0, 0], [1, F(1, 2)], [0, F(3, 2)]]
    # and the original still gives its own answer
    assert exact_matrix(forward(B, model, [F(3)])) == model_a_expected(F(3))
