"""Tests written by mutation testing of the float box pass as an evaluator of the layers
(``FloatBoxOps``, the layers' ``apply`` in ``layers.py``, ``ScalarEvaluator``'s operations):
each one fails on a mutant that the rest of the suite let through (docs/mutation-testing.md,
"After the float pass became an evaluator of the layers").

References are the formulas written out here in ``Fraction`` or 300-bit mpmath, never the
engine's own output."""

from __future__ import annotations

from fractions import Fraction as F

import mpmath
import numpy as np

from symbounds.core import float_boxes
from symbounds.core.float_boxes import _Boxes, _centres, evaluator
from symbounds.core.transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer


def _ranges_at(ev, layer_fn, xs):
    """``(lo, hi)`` of the one-layer output at the point boxes ``x`` of ``xs``, shape ``(B, D, n)``."""
    x0, h = _centres([(x,) for x in xs], [(x,) for x in xs])
    bx = _Boxes(h)
    Z = float_boxes.embed(ev, bx, x0)
    out = layer_fn(ev, bx, ev.layers[0], Z)
    return bx.range(out)


def _tight_around(lo, hi, value) -> bool:
    """``lo <= value <= hi`` in 300-bit arithmetic, and the range rounding-wide (``<= 1e-12``)."""
    with mpmath.workprec(300):
        v = mpmath.mpf(value) if not isinstance(value, F) else mpmath.mpf(value.numerator) / value.denominator
        return mpmath.mpf(float(lo)) <= v <= mpmath.mpf(float(hi)) and float(hi) - float(lo) <= 1e-12


def test_ffn_layer_on_its_own_is_the_feed_forward_formula():
    """``ffn_layer`` (one feed-forward layer over boxes, read by the linear-bounds pass): at points
    ``x``, ``out = x/2 + 3 relu(x) - 3 relu(-x) + 5 relu(x - 1/4) + 1/3`` (units 0 and 1 a linear
    ReLU pair), enclosed to rounding width."""
    ffn = FeedForward(((1,), (-1,), (1,)), (0, 0, F(-1, 4)), ((3, -3, 5),), (F(1, 3),), skip=F(1, 2))
    model = Transformer(layers=(ffn,), embedding=Embedding(base=((0,),), E=((1,),), column=0), readout=Readout(0, 0))
    ev = evaluator(model)
    xs = [F(-1, 2), F(0), F(1, 5), F(3, 4)]
    lo, hi = _ranges_at(ev, float_boxes.ffn_layer, xs)
    for b, x in enumerate(xs):
        ref = x / 2 + 3 * x + 5 * max(x - F(1, 4), F(0)) + F(1, 3)
        assert _tight_around(lo[b, 0, 0], hi[b, 0, 0], ref), (x, lo[b, 0, 0], hi[b, 0, 0], ref)


def test_attention_layer_on_its_own_is_the_attention_formula():
    """``attention_layer`` with skip ``1/3``: token 0 of row 0 is
    ``x/3 + (x e^(x/2) + e^(1/2)) / (e^(x/2) + e^(1/2))`` (scores ``(x, 1)`` divided by
    ``tau = 2``, values ``(x, 1)``), token 1 is ``1/3 * 0 + the same softmax over the scores of
    query 0 in token 1``; both enclosed to rounding width."""
    head = Head(W_Q=((0, 1),), W_K=((1, 0),), W_V=((1, 0),), W_O=((1,), (0,)))
    att = Attention((head,), "softmax", skip=F(1, 3), tau=2)
    emb = Embedding(base=((0, 1), (1, 0)), E=((1,), (0,)), column=0)
    ev = evaluator(Transformer(layers=(att,), embedding=emb, readout=Readout(0, 0)))
    xs = [F(-3, 5), F(0), F(1, 4)]
    lo, hi = _ranges_at(ev, float_boxes.attention_layer, xs)
    with mpmath.workprec(300):
        for b, x in enumerate(xs):
            xm = mpmath.mpf(x.numerator) / x.denominator
            vals = [xm, mpmath.mpf(1)]  # row 0 of the state: (x, 1); row 1: (1, 0)
            for j, q in enumerate((mpmath.mpf(1), mpmath.mpf(0))):  # query of token j: row 1
                w = [mpmath.exp(q * k / 2) for k in vals]  # keys: row 0
                ref = vals[j] / 3 + sum(wi * v for wi, v in zip(w, vals)) / sum(w)
                assert _tight_around(lo[b, 0, j], hi[b, 0, j], ref), (x, j)


def test_walk_marks_flagged_or_infinite_boxes_not_ok():
    """``walk`` (every layer over the boxes, no shortcuts) on a pass reporting box 0 flagged
    (finite ends), box 1 with an infinite lower end and box 2 fine: only box 2 is ok."""
    from test_float_boxes_mutants import _ffn_bias_model

    ev = evaluator(_ffn_bias_model(F(1, 3)))
    seen = []

    def fake_batch(x0, h, shortcuts=True):
        seen.append(shortcuts)
        lo, hi = np.array([0.0, -np.inf, 0.5]), np.array([1.0, 1.0, 0.75])
        return lo, hi, np.array([True, False, False]), lo, hi, np.array([0, 0, 0])

    ev._batch = fake_batch
    ok = ev.walk([(F(0),)] * 3, [(F(1),)] * 3)[2]
    assert not any(seen)  # the plain pass
    assert ok.dtype == bool and ok.tolist() == [False, False, True]
    ev._batch = lambda x0, h, shortcuts=True: (np.array([0.0, 0.0]), np.array([np.inf, 1.0]),
                                               np.array([False, True]), None, None, None)
    assert ev.walk([(F(0),)] * 2, [(F(1),)] * 2)[2].tolist() == [False, False]


def test_one_input_is_the_first_box_and_its_softmax_the_first_boxs():
    """``one_input`` of a batch of Taylor models is the first box's model (centre, gradient and
    remainder), and the attention matrix computed on it (over that box's half-widths alone) is
    the first box's row of the matrix of the whole batch, bit for bit."""
    from symbounds.core.float_boxes import FloatBoxOps

    head = Head(W_Q=((0, 1),), W_K=((1, 0),), W_V=((1, 0),), W_O=((1,), (0,)))
    att = Attention((head,), "softmax", skip=F(1, 3), tau=2)
    emb = Embedding(base=((0, 1), (1, 0)), E=((1,), (0,)), column=0)
    ev = evaluator(Transformer(layers=(att,), embedding=emb, readout=Readout(0, 0)))
    x0, h = _centres([(F(-1, 2),), (F(0),), (F(1, 3),)], [(F(-1, 4),), (F(1, 2),), (F(1, 2),)])
    ops = FloatBoxOps(_Boxes(h))
    Z = float_boxes.embed(ev, ops.bx, x0)
    one = ops.one_input(Z)
    assert one.G is not None and one.c.shape[0] == one.G.shape[0] == one.r.shape[0] == 1
    assert np.array_equal(one.c, Z.c[:1]) and np.array_equal(one.G, Z.G[:1]) and np.array_equal(one.r, Z.r[:1])
    layer = ev.layers[0]
    hw = layer.head(0)
    full = ops.attention_matrix("softmax", layer.tau, hw.W_Q, hw.W_K, Z)
    first = ops.attention_matrix("softmax", layer.tau, hw.W_Q, hw.W_K, one)
    assert first.G is not None and first.c.shape[0] == first.G.shape[0] == 1
    assert np.array_equal(first.c, full.c[:1]) and np.array_equal(first.G, full.G[:1])
    assert np.array_equal(first.r, full.r[:1])


def test_relu_of_the_box_operations_encloses_relu_at_points():
    """``FloatBoxOps.relu`` (the evaluator's entrywise ReLU; the layers call ``relu_pairs``) of
    ``x - 1/4`` over ``x in [-1, 1]`` and of ``x + 3`` encloses ``max(x - 1/4, 0)`` and ``x + 3``
    at points of the box, and is 0 at its bottom (up to rounding)."""
    from symbounds.core.float_boxes import FTM, FloatBoxOps

    x0, h = _centres([(F(-1),)], [(F(1),)])
    ops = FloatBoxOps(_Boxes(h))
    H = FTM(np.array([[[-0.25, 3.0]]]) + x0[0, 0], np.ones((1, 1, 1, 2)), np.zeros((1, 1, 2)))
    lo, hi = ops.bx.range(ops.relu(H))
    assert -1e-15 <= lo[0, 0, 0] <= 0.0 and lo[0, 0, 1] <= 2.0
    for x in (F(-1), F(0), F(1, 4), F(1, 2), F(1)):
        assert lo[0, 0, 0] <= max(x - F(1, 4), F(0)) <= hi[0, 0, 0]
        assert lo[0, 0, 1] <= x + 3 <= hi[0, 0, 1]


def test_a_linear_relu_pair_is_evaluated_as_the_linear_map_over_a_box():
    """``3 relu(x) - 3 relu(-x) - x/2 + 1/3 = 5x/2 + 1/3`` over ``x in [-1/2, 1/2]``: with the pair
    read as the linear map it is, the range is ``[-11/12, 19/12]`` up to rounding; a ReLU hull of
    each unit (the pair ignored) loses the unit's correlation with the skip ``-x/2`` and is
    ``[-3/2, 3/2] + [-1/4, 1/4]`` wide, 1 more."""
    ffn = FeedForward(((1,), (-1,)), (0, 0), ((3, -3),), (F(1, 3),), skip=F(-1, 2))
    model = Transformer(layers=(ffn,), embedding=Embedding(base=((0,),), E=((1,),), column=0), readout=Readout(0, 0))
    ev = evaluator(model)
    assert ev.layers[0].pairs
    x0, h = _centres([(F(-1, 2),)], [(F(1, 2),)])
    bx = _Boxes(h)
    lo, hi = bx.range(float_boxes.ffn_layer(ev, bx, ev.layers[0], float_boxes.embed(ev, bx, x0)))
    assert lo[0, 0, 0] <= F(-11, 12) and F(19, 12) <= hi[0, 0, 0]
    assert hi[0, 0, 0] - lo[0, 0, 0] <= 2.5 + 1e-12
    a, b, ok = ev.walk([(F(-1, 2),)], [(F(1, 2),)])  # the whole plain pass, the same layer
    assert ok.all() and a[0] <= F(-11, 12) and F(19, 12) <= b[0] and b[0] - a[0] <= 2.5 + 1e-12


def _hardmax_model(silent: bool = False):
    """Rows ``(x, 0)`` and ``(1, 2)``; one hardmax head with queries row 1, keys and values row 0:
    token 1 reads ``x`` when ``x > 0`` (score ``2x`` against ``0``), ``0`` when ``x < 0``, the
    average ``x/2`` at a tie.  With ``silent``, a second head whose ``W_O W_V = 0``."""
    head = Head(W_Q=((0, 1),), W_K=((1, 0),), W_V=((1, 0),), W_O=((1,), (0,)))
    heads = (head, Head(W_Q=((1, 0),), W_K=((0, 1),), W_V=((1, 0),), W_O=((0,), (0,)))) if silent else (head,)
    att = Attention(heads, "hardmax", skip=0)
    emb = Embedding(base=((0, 0), (1, 2)), E=((1,), (0,)), column=0)
    return Transformer(layers=(att,), embedding=emb, readout=Readout(0, 1))


def test_an_input_dependent_head_is_recomputed_at_every_input_of_a_context():
    """Exact values of ``_hardmax_model`` at ``x = 1, 2, -1, 0`` in one context (the context's
    cache of input-independent heads persists across calls): ``1, 2, 0, 0``.  A head whose
    output were cached though it depends on the input would repeat the first value."""
    from symbounds.core.contexts import ExactContext
    from symbounds.core.exact import as_fraction
    from symbounds.core.transformer import forward

    model = _hardmax_model()
    assert not any(model.structure().constant_heads.values())
    ctx = ExactContext()
    assert [as_fraction(forward(ctx, model, (x,))) for x in (1, 2, -1, 0)] == [1, 2, 0, 0]


def test_the_trace_keeps_a_silent_heads_matrix_at_its_position():
    """With a trace, every head's attention matrix is recorded in head order, a silent head's too
    (it adds nothing to the output but a reader of the trace indexes the heads by position).  At
    ``x = 1`` in ``_hardmax_model(silent=True)``: head 0 scores ``(1, 0)`` and ``(2, 0)``, both
    rows ``[1, 0]``; the silent head scores ``(1, 2)`` and ``(0, 0)``: ``[0, 1]`` and
    ``[1/2, 1/2]``; the value is 1."""
    from symbounds.core.contexts import ExactContext
    from symbounds.core.exact import as_fraction
    from symbounds.core.transformer import forward

    model = _hardmax_model(silent=True)
    assert model.structure().silent_heads == {(0, 1)}
    v, tr = forward(ExactContext(), model, (1,), trace=True)
    assert as_fraction(v) == 1
    pis = tr.attention[0]
    assert len(pis) == 2
    assert [[as_fraction(p) for p in row] for row in pis[0]] == [[1, 0], [1, 0]]
    assert [[as_fraction(p) for p in row] for row in pis[1]] == [[0, 1], [F(1, 2), F(1, 2)]]
