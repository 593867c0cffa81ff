"""Taylor models over a box enclose every point value; the network's box evaluation encloses T.

Independent computation: the value at random points of the box, in plain Arb balls (or exact
rationals), must lie inside the model's range -- checked by exact endpoint comparison.
"""

import random
from fractions import Fraction as F

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symbounds.core.contexts import BallContext, ExactContext, Undecided
from symbounds.core.taylor import TaylorContext
from symbounds.core.transformer import Embedding, FeedForward, Readout, Transformer, embed, forward
from symbounds.papers import shi_liao as sl

PREC = 96


def inside(range_ball, value_ball) -> bool:
    """value_ball lies inside range_ball (exact endpoints)."""
    ctx = BallContext(PREC)
    lo, hi = ctx.to_fraction_bounds(range_ball)
    vlo, vhi = ctx.to_fraction_bounds(value_ball)
    return lo <= vlo and vhi <= hi


# expressions over two inputs, written once and evaluated in any context
EXPRS = {
    "poly": lambda c, x, y: x * x * y - 3 * x + y / 7,
    "exp": lambda c, x, y: c.exp(2 * x - y) + c.exp(-x),
    "ratio": lambda c, x, y: (x + 3) / (y * y + 1),
    "softmax": lambda c, x, y: c.exp(5 * x) / (c.exp(5 * x) + c.exp(5 * y) + 1),
    "relu": lambda c, x, y: c.relu(x - y) + c.max(x, y) - c.min(x, 2 * y) + c.abs(x - c.convert(F(1, 3))),
}


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(EXPRS)),
    cx=st.fractions(-2, 2, max_denominator=64), cy=st.fractions(-2, 2, max_denominator=64),
    h=st.sampled_from([F(1, 2), F(1, 16), F(1, 1024)]),
    seed=st.integers(0, 10**6),
)
def test_models_enclose_point_values(name, cx, cy, h, seed):
    f = EXPRS[name]
    tctx = TaylorContext(PREC, [cx, cy], [h, h])
    with tctx.scope():
        x, y = tctx.inputs()
        try:
            model = f(tctx, x, y)
        except Undecided:
            # a first-order model of a wide box may not keep a denominator away from 0: an
            # honest "cannot tell", only acceptable on the wide boxes
            assert h >= F(1, 16)
            return
        rng = model.range()
    ball = BallContext(PREC)
    r = random.Random(seed)
    corners = [(cx + sx * h, cy + sy * h) for sx in (-1, 1) for sy in (-1, 1)]
    pts = corners + [(cx + F(r.randint(-1000, 1000), 1000) * h, cy + F(r.randint(-1000, 1000), 1000) * h)
                     for _ in range(5)]
    for px, py in pts:
        with ball.scope():
            v = f(ball, ball.convert(px), ball.convert(py))
        assert inside(rng, v), (name, px, py)


def test_models_are_tight_on_small_boxes():
    """First order: the range of exp(5x) over x0 +- h has width ~ 2 * 5 e^{5 x0} h, not O(1)."""
    h = F(1, 10**6)
    tctx = TaylorContext(PREC, [F(1, 3)], [h])
    with tctx.scope():
        (x,) = tctx.inputs()
        rng = tctx.exp(5 * x).range()
    ball = BallContext(PREC)
    lo, hi = ball.to_fraction_bounds(rng)
    assert hi - lo < F(6, 10**5)  # 2 * 5 * e^{5/3} * 1e-6 = 5.3e-5


def test_linear_relu_pairs_stay_linear():
    """relu(y) - relu(-y) = y across 0: the pair is evaluated as the linear map it is."""
    ffn = FeedForward(((1,), (-1,)), (0, 0), ((3, -3),), (0,), 0)
    model = Transformer((ffn,), Embedding(((0,),), ((1,),), 0), Readout(0, 0))
    tctx = TaylorContext(PREC, [F(0)], [F(1, 2)])
    out = forward(tctx, model, tctx.inputs())
    assert out.r is None and out.g is not None  # no hull: an exact linear model 3x
    lo, hi = BallContext(PREC).to_fraction_bounds(out.range())
    # (an Arb radius carries ~30 bits, so a wide range is exact only to ~1e-9 relative)
    assert -F(3, 2) - F(1, 10**8) < lo <= -F(3, 2) and F(3, 2) <= hi < F(3, 2) + F(1, 10**8)
    # without the pair structure (b1 differs) the ReLUs straddle 0 and only the hull is known
    ffn2 = FeedForward(((1,), (-1,)), (0, F(1, 10**9)), ((3, -3),), (0,), 0)
    model2 = Transformer((ffn2,), Embedding(((0,),), ((1,),), 0), Readout(0, 0))
    out2 = forward(tctx, model2, tctx.inputs())
    assert out2.r is not None


@pytest.fixture(scope="module")
def default_model():
    K = sl.constants(sl.Instance())
    return K, sl.build(K)


@pytest.mark.parametrize("x0, h", [(F(3, 10), F(1, 4000)), (F(31, 100), F(1, 1000)), (F(0), F(1, 2000)),
                                   (F(1), F(1, 500)), (F(1, 2), F(1, 1000))])
def test_network_box_evaluation_encloses_point_evaluations(default_model, x0, h):
    K, model = default_model
    tctx = TaylorContext(128, [x0], [h])
    T = forward(tctx, model, tctx.inputs())
    ball = BallContext(128)
    for t in (-1, F(-1, 3), 0, F(1, 7), 1):
        v = forward(ball, model, (x0 + t * h,))
        assert inside(T.range(), v)


def test_forward_shortcuts_agree_with_the_full_trace(default_model):
    """From the model input the forward pass uses the affine prefix, cached heads and pruned rows
    (a trace too, for the prefix); from the embedded state (``start=0``) it evaluates every layer.
    All must agree, in balls and at sample points."""
    K, model = default_model
    assert model.affine_prefix() == 2  # attention with position-only scores, then paired ReLUs
    ctx = BallContext(160)
    for x in (F(0), F(2, 7), F(1, 2), F(999, 1000)):
        fast = forward(ctx, model, (x,))
        traced, _ = forward(ctx, model, (x,), trace=True)
        full = forward(ctx, model, embed(ctx, model, (x,)), start=0)
        with ctx.scope():
            assert abs(fast - traced) < ctx.convert(F(1, 10**30))
        with ctx.scope():
            assert abs(fast - full) < ctx.convert(F(1, 10**30))


def test_affine_prefix_exact_on_a_hand_model():
    """Exact context: F0 + x F1 equals the layer-by-layer evaluation for a model that is affine
    in x until a later ReLU."""
    ffn1 = FeedForward(((2, 0), (-2, 0), (0, 1)), (0, 0, 5), ((1, -1, 0), (0, 0, 1)), (F(1, 3), 0), 1)
    ffn2 = FeedForward(((1, 1),), (-1,), ((1,), (0,)), (0, 0), 0)
    model = Transformer((ffn1, ffn2), Embedding(((0,), (1,)), ((1,), (0,)), 0), Readout(0, 0))
    assert model.affine_prefix() == 1
    ctx = ExactContext()
    for x in (F(-3), F(0), F(1, 2), F(4)):
        # by hand: after ffn1 (eta = 1): row0 = x + 2x + 1/3, row1 = 1 + relu(1 + 5) = 7
        # ffn2: relu(row0 + row1 - 1) = relu(3x + 19/3)
        assert F(str(forward(ctx, model, (x,)))) == max(F(0), 3 * x + F(19, 3))
