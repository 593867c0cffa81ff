"""The kernel's class bound (symbounds_kernel/holder.py): the weight caps over every token, and
its directed roundings, against independent computations.

References: symbounds' own class bound and point evaluation (256 bits, its own forward pass), and
exact rationals or 1000-bit Arb balls of the kernel's formula on hand-built networks.
"""

import copy
import json
import pathlib
from fractions import Fraction

import pytest
from flint import arb, ctx
from hypothesis import given, settings
from hypothesis import strategies as st

import symbounds_kernel
from symbounds_kernel import read, verify
from symbounds_kernel.holder import ClassNet

from test_kernel import _class_nets, _prec

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
#: `symbounds certify --holder-class --d 1 --eps 1/4 --Mg 22` (C_H = B = 2, P = 16): at this small
#: M_g the softmax weight spreads over more than the 8 heaviest tokens
SMALL_MG_PATH = DATA / "class_certificates" / "d1-eps-1-4-Mg-22.json"
SMALL_MG = json.loads(SMALL_MG_PATH.read_text())


def _q(v: arb) -> Fraction:
    return verify._upper(v)


def test_a_small_Mg_class_certificate_is_true_and_accepted():
    """symbounds' full re-verification (its own network and class bound) proves it, and the
    kernel accepts it; with caps from the 8 heaviest tokens alone the kernel rejected box 0."""
    from symbounds.papers import check_certificate

    assert check_certificate(copy.deepcopy(SMALL_MG))["boxes"] == len(SMALL_MG["boxes"]) == 406
    assert len(SMALL_MG["model"]["embedding"]["base"][0]) == 16
    ok, reason = symbounds_kernel.check_file(str(SMALL_MG_PATH))
    assert ok and reason.startswith("406 boxes cover [0,1]^1"), reason


def test_a_small_Mg_class_certificate_with_a_bound_below_E_is_rejected():
    """The box holding the worst point gets a bound just below E there (symbounds' point
    evaluation, 256 bits): false, so the kernel must reject it, naming the box."""
    from symbounds.papers.shi_liao.class_bound import point_values

    _, theirs = _class_nets(SMALL_MG)
    x = Fraction(SMALL_MG["worst"]["x"][0])
    E_lo = Fraction(point_values(theirs, [x])[0].lower().str(40, radius=False))
    cert = copy.deepcopy(SMALL_MG)
    i = next(i for i, b in enumerate(cert["boxes"]) if Fraction(b["lo"][0]) <= x <= Fraction(b["hi"][0]))
    bound = E_lo * (1 - Fraction(1, 10**9))
    cert["boxes"][i]["bound"] = str(bound)
    cert["max_bound"] = str(max(Fraction(b["bound"]) for b in cert["boxes"]))
    with pytest.raises(read.Rejected, match=f"^box {i}: the kernel cannot bound E by its recorded bound"):
        verify.check(cert)


@settings(max_examples=25, deadline=None)
@given(st.fractions(0, 1), st.sampled_from([Fraction(1, 2**k) for k in (2, 6, 12, 20, 30)]), st.integers(0, 8))
def test_small_Mg_box_bound_contains_E_and_converges(lo, width, t):
    """P = 16 tokens, the weight spread over more than 8: E at a point of the box (symbounds, 256
    bits) is below the kernel's bound, and on narrow boxes the bound is within 64 w of it (the
    caps use every token, so they converge to the weights)."""
    from symbounds.papers.shi_liao.class_bound import point_values

    mine, theirs = _class_nets(SMALL_MG)
    lo = min(lo, 1 - width)
    x = lo + width * t / 8
    with _prec():
        up = _q(mine.upper([lo], [lo + width]))
    E = point_values(theirs, [x])[0]
    assert Fraction(E.upper().str(40, radius=False)) <= up
    assert width > Fraction(1, 2**12) or up <= Fraction(E.lower().str(40, radius=False)) + 64 * width


def test_small_Mg_box_bound_is_at_most_symbounds_class_bound_plus_rounding():
    """On the certificate's own boxes the kernel's bound is within 10^-12 of symbounds' box bound
    (which uses every near token through the same one-sum-per-box bound; they differ only in the
    far tokens symbounds lumps together and in the rounding, about 10^-14 here), far below the
    recorded bounds' margin (about 10^-10)."""
    from symbounds.core.boxes import Box
    from symbounds.papers.shi_liao.class_bound import box_upper

    mine, theirs = _class_nets(SMALL_MG)
    for b in SMALL_MG["boxes"][::37]:
        lo, hi = [Fraction(b["lo"][0])], [Fraction(b["hi"][0])]
        with _prec():
            up = _q(mine.upper(lo, hi))
        assert abs(up - box_upper(theirs, Box(lo, hi))) <= Fraction(1, 10**12)
