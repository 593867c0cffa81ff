"""Plain text of certified numbers and aligned tables, shared by the command line and each
construction's own report text (``Paper.report``; the ``pou`` and ``interp`` reports)."""

from __future__ import annotations

import re

import flint

from .exact import NumberError, decimal, decimal_down, decimal_up, parse_number

__all__ = ["DIGITS", "enclosure_text", "approx_text", "table_lines"]

#: significant digits of numbers in the text reports (``--digits``)
DIGITS = 12

_DECIMAL = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")


def enclosure_text(text: str, digits: int = DIGITS) -> str:
    """A certified number (Arb's ``[m +/- r]``, or a plain decimal that is an exact value) cut to
    ``digits`` significant digits, **outward**: the printed ball contains the one given.  Exact
    rationals ``p/q`` and anything that is not a number are returned unchanged."""
    t = text.strip()
    if not t or "/" in t.replace("+/-", ""):
        return text
    if not t.startswith("["):
        if not _DECIMAL.fullmatch(t):
            return text
        try:
            q = parse_number(t)
        except NumberError:
            return text
        lo, hi = decimal_down(q, digits), decimal_up(q, digits)
        if lo == hi:  # exactly representable in `digits` digits
            return lo
    with flint.ctx.workprec(max(64, 4 * len(t) + 64)):
        try:
            ball = flint.arb(t)  # rounded outward on reading
        except (ValueError, TypeError):
            return text
        return ball.str(digits)  # Arb widens the radius to cover the digits it drops


def approx_text(text: str, digits: int = DIGITS) -> str:
    """An approximate decimal (a ball's midpoint, reported as such) rounded to ``digits``
    significant digits; exact rationals and integers are returned unchanged."""
    t = text.strip()
    if "/" in t or not _DECIMAL.fullmatch(t) or "." not in t and "e" not in t:
        return text
    try:
        q = parse_number(t)
    except NumberError:  # an exponent beyond the bound on a user's numbers (e^2400 ~ 1e1042): Arb reads it
        with flint.ctx.workprec(max(64, 4 * digits + 16)):
            return flint.arb(t).str(digits, radius=False)
    return decimal(q, digits)


def table_lines(rows: list, align: str, indent: str = "  ") -> list:
    """Rows of cells as lines with aligned columns (``align``: one of ``<``/``>`` per column; a
    left-aligned last column is not padded)."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(align))]
    out = []
    for r in rows:
        cells = [f"{str(c):{a}{w}}" for c, a, w in zip(r, align, widths)]
        if align[-1] == "<":
            cells[-1] = str(r[len(align) - 1])
        out.append((indent + "  ".join(cells)).rstrip())
    return out
