"""Digits that agree between a certified ball and an mpmath or float64 value, for negative values
too (mpmath stores the sign apart from the mantissa: a negative value once read as positive)."""

import flint
import mpmath
import pytest

from symbounds.core.contexts import FPContext, MPContext
from symbounds.core.fpcompare import agree_digits


@pytest.mark.parametrize("sign", [1, -1])
def test_agreeing_digits_do_not_depend_on_the_sign(sign):
    mp = MPContext(128)
    with flint.ctx.workprec(200):
        ball = sign * flint.arb(3) / 7
    v = sign * mp._mp.mpf(3) / 7
    assert agree_digits(ball, mp, v, 128) >= 30
    assert agree_digits(ball, FPContext(), sign * 3 / 7, 53) >= 15
    # and a value of the other sign agrees nowhere
    assert agree_digits(ball, mp, -v, 128) == 0


def test_a_value_off_in_the_fifth_digit_agrees_to_four():
    with flint.ctx.workprec(200):
        ball = -flint.arb(1) / 3
    v = -mpmath.mpf("0.33334")
    assert agree_digits(ball, MPContext(128), v, 128) == 4
