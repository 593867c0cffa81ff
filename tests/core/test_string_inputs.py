"""Exact number strings are inputs like any exact number (README, As a library): ``"1/2"``,
``"0.1"`` (one tenth, exactly), ``"1e-3"``; floats stay refused."""

from fractions import Fraction

import flint
import pytest

from symbounds import BallContext, ExactContext, forward
from symbounds.core.exact import NumberError
from symbounds.core.transformer import Embedding, FeedForward, Readout, Transformer


def tiny_model():
    """z -> relu(z) on the 1 x 1 state z = x: T(x) = max(x, 0) + x/2 (skip 1/2)."""
    ffn = FeedForward(W1=((1,),), b1=(0,), W2=((1,),), b2=(0,), skip=Fraction(1, 2))
    return Transformer((ffn,), Embedding(base=((0,),), E=((1,),), column=0), Readout(0, 0))


@pytest.mark.parametrize("text, value", [("1/2", Fraction(1, 2)), ("0.1", Fraction(1, 10)), ("-3/8", Fraction(-3, 8)),
                                         ("1e-3", Fraction(1, 1000)), ("7", Fraction(7))])
def test_strings_are_exact_inputs(text, value):
    m = tiny_model()
    expected = max(value, 0) + value / 2  # the formula, by hand
    ex = ExactContext()
    assert forward(ex, m, (text,)) == flint.fmpq(expected.numerator, expected.denominator)
    ball = BallContext(128)
    a, b = forward(ball, m, (text,)), forward(ball, m, (value,))
    assert a.mid() == b.mid() and a.rad() == b.rad()
    assert ExactContext().convert(text) == flint.fmpq(value.numerator, value.denominator)


def test_the_readme_call_works():
    from symbounds.papers import shi_liao as sl

    model = sl.build(sl.constants(sl.Instance(eps=Fraction(1, 2))))
    ctx = BallContext(128)
    a = forward(ctx, model, ("1/2",))
    b = forward(ctx, model, (Fraction(1, 2),))
    assert a.overlaps(b) and abs(a.mid() - b.mid()) <= a.rad() + b.rad()


def test_floats_and_bad_strings_are_refused():
    m = tiny_model()
    with pytest.raises(TypeError, match="float"):
        forward(ExactContext(), m, (0.5,))
    with pytest.raises(NumberError, match="not a number"):
        forward(ExactContext(), m, ("one half",))
    with pytest.raises(NumberError):
        ExactContext().convert("__import__('os')")
