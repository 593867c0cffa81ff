"""Exact-number reading and formatting, and the atomic writer's file modes."""

import os
import random
import stat
from fractions import Fraction

import pytest

from symbounds.core.exact import NumberError, decimal_down, decimal_up, parse_number
from symbounds.core.files import atomic_write


@pytest.mark.parametrize("seed", range(4))
def test_outward_decimals_enclose_the_rational(seed):
    rng = random.Random(seed)
    for _ in range(3000):
        q = Fraction(rng.randint(-10**30, 10**30), rng.randint(1, 10**30)) * Fraction(10) ** rng.randint(-40, 40)
        k = rng.randint(1, 20)
        lo, hi = Fraction(decimal_down(q, k)), Fraction(decimal_up(q, k))
        assert lo <= q <= hi
        # and they are tight: within one unit in the k-th significant digit
        if q != 0:
            assert hi - lo <= abs(q) * Fraction(10) ** (1 - k) * 2


def test_outward_decimals_far_outside_float_range():
    big, tiny = Fraction(2**60000, 3), Fraction(1, 2**60000 + 1)
    for q in (big, -big, tiny, -tiny):
        lo, hi = Fraction(decimal_down(q, 8)), Fraction(decimal_up(q, 8))
        assert lo <= q <= hi and "e" in decimal_up(q, 8)


def test_exact_values_print_exactly():
    assert decimal_down(Fraction(1, 10)) == decimal_up(Fraction(1, 10)) == "0.1"
    assert decimal_up(Fraction(-5, 2)) == "-2.5" and decimal_up(Fraction(10**25)) == "1e25"


@pytest.mark.parametrize("text", ["١", "1e", "1/0", "0x10", "1_000", " ", "1e99999", "½", "1/2e3"])
def test_parse_number_refuses(text):
    with pytest.raises(NumberError):
        parse_number(text, "x")


def test_parse_number_reads_decimals_exactly():
    assert parse_number("0.1") == Fraction(1, 10) and parse_number("-7/8") == Fraction(-7, 8)
    assert parse_number("1.5e-3") == Fraction(3, 2000)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_written_files_honour_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        p = tmp_path / "a.json"
        atomic_write(str(p), "x")
        assert _mode(p) == 0o644
        os.umask(0o077)
        q = tmp_path / "b.json"
        atomic_write(str(q), b"y")
        assert _mode(q) == 0o600
    finally:
        os.umask(old)


def test_overwrite_keeps_the_existing_mode(tmp_path):
    p = tmp_path / "c.tex"
    p.write_text("old")
    os.chmod(p, 0o640)
    atomic_write(str(p), "new")
    assert _mode(p) == 0o640 and p.read_text() == "new"
    assert [f for f in os.listdir(tmp_path) if f.startswith(".symbounds-")] == []
