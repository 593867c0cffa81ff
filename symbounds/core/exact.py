"""Exact numbers: one reader of numbers written as text, one converter of each exact type.

Every number a user gives (flags, model files, datasets, certificates) is read by
:func:`parse_number`: a strict ASCII pattern, then ``Fraction`` (no ``eval``, bounded size), so
``"0.1"`` is one tenth exactly.  :func:`as_fraction` turns an int, ``Fraction``, ``flint.fmpq`` or
SymPy ``Rational`` into a ``Fraction``; :func:`arb_to_fraction` the exact value of an Arb ball of
radius 0 (a midpoint, an endpoint).
"""

from __future__ import annotations

import re
from fractions import Fraction

import flint

__all__ = ["NumberError", "parse_number", "as_fraction", "arb_to_fraction", "decimal", "decimal_down", "decimal_up"]

_NUMBER = re.compile(r"^[+-]?([0-9]{1,4000})(/[0-9]{1,4000}|\.[0-9]{0,4000})?([eE][+-]?[0-9]{1,9})?$", re.ASCII)


class NumberError(ValueError):
    """A number that cannot be read (one line naming the problem)."""


def parse_number(text: str, what: str = "number", error=NumberError) -> Fraction:
    """An exact Fraction from ``"3"``, ``"-7/8"``, ``"0.125"`` or ``"1.5e-3"`` (no eval, bounded size).

    ``error`` is the exception class raised on bad input (a subclass of :class:`NumberError`)."""
    if not isinstance(text, str):
        raise error(f"{what}: expected a number written as a string, got {type(text).__name__}")
    t = text.strip()
    m = _NUMBER.match(t)
    if not m or (m.group(2) and m.group(2).startswith("/") and m.group(3)):
        raise error(f"{what}: {text[:40]!r} is not a number (use '3', '-7/8' or '0.125')")
    if m.group(3) and abs(int(m.group(3)[1:])) > 1000:
        raise error(f"{what}: exponent out of range in {text[:40]!r}")
    try:
        return Fraction(t)
    except ZeroDivisionError:
        raise error(f"{what}: division by zero in {text[:40]!r}") from None


def as_fraction(v) -> Fraction:
    """An exact ``Fraction`` from an int, Fraction, fmpz, fmpq or SymPy Rational."""
    if isinstance(v, Fraction):
        return v
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, flint.fmpz):
        return Fraction(int(v))
    return Fraction(int(v.p), int(v.q))


def arb_to_fraction(x: flint.arb) -> Fraction:
    """The exact value of an exact (radius-0) arb, as a Fraction."""
    man, exp = x.man_exp()
    man, exp = int(man), int(exp)
    return Fraction(man * 2**exp) if exp >= 0 else Fraction(man, 2 ** (-exp))


def decimal(q: Fraction, digits: int = 12) -> str:
    """A decimal rendering of an exact rational to ``digits`` significant digits (for reading; the
    exact value is reported beside it)."""
    with flint.ctx.workprec(max(64, 4 * digits + 16)):
        return flint.arb(flint.fmpq(q.numerator, q.denominator)).str(digits, radius=False)


def _decimal_round(q: Fraction, digits: int, up: bool) -> str:
    """``q`` as a decimal of ``digits`` significant digits, rounded toward +inf (``up``) or -inf.

    Works for rationals far outside float range (the exponent is found from bit lengths, never by
    printing the whole integer)."""
    if q == 0:
        return "0"
    a = abs(q)
    e = (a.numerator.bit_length() - a.denominator.bit_length()) * 30103 // 100000  # ~ floor(log10 a)
    while a >= Fraction(10) ** (e + 1):
        e += 1
    while a < Fraction(10) ** e:
        e -= 1
    shift = digits - 1 - e
    scaled = q * Fraction(10) ** shift
    n = -((-scaled.numerator) // scaled.denominator) if up else scaled.numerator // scaled.denominator
    m = str(abs(n))  # digits or digits + 1 characters
    exp10 = len(m) - 1 - shift
    sign = "-" if n < 0 else ""
    if exp10 < -6 or exp10 > 20:  # scientific notation, still exact: n * 10^-shift
        m = m.rstrip("0") or "0"
        return f"{sign}{m[0]}" + (f".{m[1:]}" if len(m) > 1 else "") + f"e{exp10}"
    if shift <= 0:
        return sign + m + "0" * (-shift)
    digs = m.rjust(shift + 1, "0")
    whole, frac = digs[:-shift], digs[-shift:].rstrip("0")
    return f"{sign}{whole}" + (f".{frac}" if frac else "")


def decimal_down(q: Fraction, digits: int = 17) -> str:
    """A decimal ``<= q`` with about ``digits`` significant digits (lower ends of enclosures)."""
    return _decimal_round(Fraction(q), digits, up=False)


def decimal_up(q: Fraction, digits: int = 17) -> str:
    """A decimal ``>= q`` with about ``digits`` significant digits (upper ends of enclosures)."""
    return _decimal_round(Fraction(q), digits, up=True)
