"""Softmax weights below ``TINY = 2^-300`` (symbounds/core/outward.py) as the constant ``[0, TINY]``.

A far token's weight ``e^a`` with ``a`` below ``ln TINY`` on the whole box is replaced, in the
NumPy pass and in the fused kernel alike, by the model ``TINY/2 +- TINY/2`` (no subnormal double
computed for it).  The network here makes that enclosure visible at the readout: the far token
carries the value ``2^300``, so its weight ``e^-210 / N`` (just below ``TINY``) contributes about
``0.064`` to the output, and ``[0, TINY] 2^300 = [0, 1]``.  Independent reference: the readout at
sampled points in 300-bit mpmath from the formulas (``test_fused_kernel.mp_value``).  Mutants (the
constant as ``[TINY, TINY]``, or the weight dropped as ``[0, 0]``) must make the enclosure miss it.
"""

import random
from fractions import Fraction as F

import mpmath
import numpy as np
import pytest
from test_fused_kernel import MARGIN, _enclose, _points, mp_value, needs_numba, plan_of

from symbounds.core import float_boxes as fb
from symbounds.core import fused_boxes
from symbounds.core import outward as fo
from symbounds.core.boxes import Box
from symbounds.core.float_boxes import FTM, evaluator
from symbounds.core.transformer import Attention, Embedding, Head, Readout, Transformer, as_matrix

S = 420  # the query's scale: the far token's shifted score is -S x, about -210 at x = 1/2


def far_token_network(big=2**300) -> Transformer:
    """Rows: 0 x (at token 0), 1 the constant 1, 2 the keys ``(1, 1, 0)``, 3 the values
    ``(0, 1, big)``, 4 the output, 5 layer 0's (affine) output.  Layer 0: uniform attention
    writing the mean of x to row 5 (the affine prefix).  Layer 1 (the kernel's): query ``S x``,
    keys row 2, values row 3, written to row 4; the readout is row 4 at token 0:
    ``(1 + big e^{-S x}) / (2 + e^{-S x})``."""
    D, n = 6, 3
    base = [[0] * n for _ in range(D)]
    base[1] = [1, 1, 1]
    base[2] = [1, 1, 0]
    base[3] = [0, 1, big]
    E = [[1]] + [[0]] * (D - 1)

    def row(i, v=1):
        return tuple(v if r == i else 0 for r in range(D))

    def col(i):
        return tuple((1 if r == i else 0,) for r in range(D))

    h0 = Head((row(1),), (row(1),), (row(0),), col(5))
    h1 = Head((row(0, S),), (row(2),), (row(3),), col(4))
    layers = (Attention((h0,), "softmax", skip=1), Attention((h1,), "softmax", skip=0))
    return Transformer(layers=layers, embedding=Embedding(base=as_matrix(base), E=as_matrix(E), column=0),
                       readout=Readout(4, 0))


BOXES = [Box((F(1, 2),), (F(1, 2),)), Box((F(1, 2) - F(1, 2**20),), (F(1, 2) + F(1, 2**20),)),
         Box((F(17, 32),), (F(9, 16),)), Box((F(1, 4),), (F(3, 4),)), Box((F(3, 5),), (F(3, 5),))]


def _tiny_entries(ev, boxes):
    """How many softmax weights the NumPy pass made the constant (``_tiny_constant`` counted)."""
    seen = []
    orig = fb._tiny_constant

    def count(a, tiny):
        seen.append(int(np.count_nonzero(tiny)))
        return orig(a, tiny)

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(fb, "_tiny_constant", count)
        mp.setattr(fused_boxes, "ENABLED", False)
        ev.enclose([b.lo for b in boxes], [b.hi for b in boxes])
    finally:
        mp.undo()
    return sum(seen)


def _check(ev, model, boxes, fused, monkeypatch, rng):
    out = _enclose(ev, boxes, fused, monkeypatch)
    for b, box in enumerate(boxes):
        assert out[2][b], (fused, box)
        for x in _points(rng, box, 3):
            v = mp_value(model, x)
            assert out[0][b] <= v + MARGIN and v - MARGIN <= out[1][b], (fused, box, x, out[0][b], out[1][b], v)
        v0 = mp_value(model, box.centre)
        assert out[3][b] <= v0 + MARGIN and v0 - MARGIN <= out[4][b], (fused, box)
    return out


@needs_numba
@pytest.mark.parametrize("tight", [False, True])
def test_tiny_weights_enclose_the_300_bit_values(tight, monkeypatch):
    """Both passes, boxes in random orders and batches: the readout's enclosures contain the
    300-bit values, the constant is used (the far weight is below TINY on the narrow boxes), it
    is visible (the enclosure is about 1 wide there), and the passes agree to 2^-250."""
    rng = random.Random(3)
    model = far_token_network()
    ev = evaluator(model)
    ev.tight = tight
    ev.setup()
    assert fused_boxes.load() is not None and plan_of(ev) is not None
    assert _tiny_entries(ev, BOXES[:3]) >= 3
    for _ in range(4):
        boxes = BOXES[:]
        rng.shuffle(boxes)
        k = rng.randint(1, len(boxes))
        for batch in (boxes[:k], boxes[k:]):
            if not batch:
                continue
            fz = _check(ev, model, batch, True, monkeypatch, rng)
            nz = _check(ev, model, batch, False, monkeypatch, rng)
            for i in (0, 1, 3, 4):
                assert np.allclose(fz[i], nz[i], rtol=1e-9, atol=2.0**-250), (i, fz[i], nz[i])
    one = _enclose(ev, BOXES[:1], False, monkeypatch)
    assert 0.5 < one[1][0] - one[0][0] < 1.5  # [0, TINY] 2^300: the constant is what the output sees


def _mutant(kind):
    def tiny_constant(a: FTM, tiny) -> FTM:
        c = np.where(tiny, fo.TINY if kind == "point" else 0.0, a.c)
        r = np.where(tiny, 0.0, a.r)
        G = None if a.G is None else np.where(tiny[:, None], 0.0, a.G)
        return FTM(c, G, r)

    return tiny_constant


@pytest.mark.parametrize("kind", ["point", "dropped"])
def test_a_wrong_tiny_constant_is_caught(kind, monkeypatch):
    """The constant as ``[TINY, TINY]`` or as ``[0, 0]`` (NumPy pass, plain weights): the
    readout's enclosure at x = 1/2 excludes the 300-bit value."""
    model = far_token_network()
    ev = evaluator(model)
    ev.tight = False
    ev.setup()
    box = BOXES[0]
    v = mp_value(model, box.lo)
    good = _enclose(ev, [box], False, monkeypatch)
    assert good[0][0] <= v <= good[1][0]
    monkeypatch.setattr(fb, "_tiny_constant", _mutant(kind))
    bad = _enclose(ev, [box], False, monkeypatch)
    assert not (bad[0][0] <= v + MARGIN and v - MARGIN <= bad[1][0]), (kind, bad[0][0], bad[1][0], v)


def test_the_threshold_is_below_ln_tiny():
    """``LN_TINY < ln 2^-300`` (60 digits), and ``TINY`` times the kernel's error term and ``4u``
    is normal with headroom."""
    with mpmath.workdps(60):
        assert mpmath.mpf(fo.LN_TINY) < -300 * mpmath.log(2)
    assert fo.TINY == 2.0**-300 and fo.TINY * fused_boxes._ETA * 2.0**-51 >= 2.0**-1022 * 2.0**170
