"""The kernel's class bound (symbounds_kernel/holder.py): the weight caps over every token, and
its directed roundings, against independent computations.

References: symbounds' own class bound and point evaluation (256 bits, its own forward pass), and
exact rationals or 1000-bit Arb balls of the kernel's formula on hand-built networks.
"""

import copy
import json
import pathlib
from fractions import Fraction

import mpmath
import pytest
from flint import arb
from hypothesis import given, settings
from hypothesis import strategies as st
from test_kernel import _class_nets, _prec

import symbounds_kernel
from symbounds_kernel import read, verify
from symbounds_kernel.holder import ClassNet
from symbounds_kernel.network import _ball

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


# ------------------------------------------------------------------------------------------
# every rounding of the box bound outward: hand-built networks whose formula value is known
# exactly (or at 80 digits), so a recorded bound just below it must not be proved. A rounding
# turned the wrong way moves the bound by a ball's radius; the inputs are chosen so that radius is
# not absorbed by a later rounding (a wide input ball, exact caps, or many cases).


def _net(b, a, c, C_H, two_B, alpha, B_ell):
    """A :class:`ClassNet` with the given scores ``b_k + a_k . x``, centres and brackets' data."""
    net = object.__new__(ClassNet)
    net.b, net.a, net.c, net.d, net.alpha = b, a, c, len(a), alpha
    net.C_H, net.two_B, net.half_alpha = C_H, two_B, arb(alpha.numerator) / alpha.denominator / 2
    net.B_ell = B_ell
    return net


def _not_proved_below(net, lo, hi, value: Fraction):
    """The kernel's bound of the box is at least ``value``: a recorded bound just under it fails."""
    from symbounds_kernel.holder import _proves

    with _prec():
        assert not _proves(net, lo, hi, value - Fraction(1, 2**400), 0)
        assert verify._upper(net.upper(lo, hi)) >= value


F = Fraction
W = 2.0 ** -10  # the radius of the wide input balls


@pytest.mark.parametrize("lo, hi, centre, C_H, value", [
    # one token, weight 1: the bound is C_H times the largest distance from the box to a centre in
    # the ball 1/2 +- 2^-10; the far end of the box is lo, then hi
    ([F(0)], [F(1, 4)], arb(0.5, W), arb(1), F(1, 2) + F(1, 2**10)),
    ([F(3, 4)], [F(1)], arb(0.5, W), arb(1), F(1, 2) + F(1, 2**10)),
    # C_H in the ball 1 +- 2^-10: the bracket's upper end
    ([F(0)], [F(1, 4)], arb(0.5), arb(1, W), (1 + F(1, 2**10)) / 2),
])
def test_class_bracket_is_the_upper_end_over_its_input_balls(lo, hi, centre, C_H, value):
    _not_proved_below(_net([arb(0)], [[arb(0)]], [[centre]], C_H, arb(8), F(1), [arb(0)]), lo, hi, value)


def test_class_caps_are_upper_ends_and_the_sum_is_rounded_up():
    """Three equal constant scores: each weight is exactly 1/3 (not a binary number, so every cap
    is rounded); brackets 3, 0, 0: the greedy optimum is exactly 1."""
    net = _net([arb(0)] * 3, [[arb(0)] * 3], [[arb(0)]] * 3, arb(0), arb(8), F(1), [arb(3), arb(0), arb(0)])
    _not_proved_below(net, [F(0)], [F(1)], F(1))


def test_class_cap_denominators_are_lower_ends():
    """Two constant scores ``0`` and ``delta`` (delta in [5, 10], 40 fixed cases), brackets 2 and 0:
    the bound is ``2 / (1 + e^delta)`` (80 digits); the denominator's exponential must be its
    lower end."""
    import random

    rng = random.Random(2)
    for _ in range(40):
        delta = F(rng.randint(5 * 2**18, 10 * 2**18), 2**18)  # exact in a ball at any precision
        net = _net([arb(0), _ball(delta)], [[arb(0)] * 2], [[arb(0)]] * 2, arb(0), arb(8), F(1), [arb(2), arb(0)])
        with mpmath.workdps(80):
            value = 2 / (1 + mpmath.exp(mpmath.mpf(delta.numerator) / delta.denominator))
            _not_proved_below(net, [F(0)], [F(1)], F(mpmath.nstr(value, 75)) - F(1, 10**70))


@pytest.mark.parametrize("alpha", [F(1), F(1, 2)])
def test_class_distance_power_is_rounded_up(alpha):
    """One token, d = 8, C_H = 1, centres with a denominator 3: the bound is ``far2^(alpha/2)``
    with ``far2`` the exact squared largest distance; checked exactly as ``bound^(2/alpha) >= far2``
    on 100 fixed random boxes."""
    import random

    rng = random.Random(1)
    e = int(2 / alpha)
    for _ in range(100):
        lo = [F(rng.randint(0, 2**40), 2**41) for _ in range(8)]
        hi = [v + F(rng.randint(1, 2**40), 2**42) for v in lo]
        cen = [F(rng.randint(0, 2**20), 3 * 2**20) for _ in range(8)]
        far2 = sum(max(abs(a - c), abs(b - c)) ** 2 for a, b, c in zip(lo, hi, cen))
        with _prec():  # the centres' balls at the kernel's precision
            net = _net([arb(0)], [[arb(0)] for _ in range(8)], [[_ball(v) for v in cen]], arb(1), arb(8), alpha, [arb(0)])
            assert verify._upper(net.upper(lo, hi)) ** e >= far2


def test_class_leakage_term_is_an_upper_end():
    """``B l_k`` with B = 1/3 (so the product is rounded) is at least B times the lower end of
    symbounds' own l_k (256 bits) for every token."""
    _, theirs = _class_nets(SMALL_MG)
    with _prec():  # (the lower ends read at 128 bits, not at the tests' 53)
        net = ClassNet(SMALL_MG["model"], 1, F(1), F(2), F(1, 3))
        for k, v in enumerate(net.B_ell):
            assert verify._upper(v) >= F(1, 3) * F(theirs.ell[k].lower().str(60, radius=False))


def test_class_model_with_no_constant_row_is_rejected():
    """A model of the two blocks' shape with exactly d rows (D = d = 1, P = 1) has no constant row
    (row d): one-line rejection, not an IndexError."""
    one = [["1"]]
    att = {"type": "attention", "kind": "softmax", "heads": [{"W_Q": one, "W_K": one, "W_V": one, "W_O": one}]}
    ffn = {"type": "ffn", "W1": one, "b1": ["0"], "W2": one, "b2": ["0"]}
    model = {"format": "symbounds-transformer/1", "input": "vector",
             "embedding": {"base": [["0"]], "E": one, "column": 0}, "layers": [att, ffn, att, ffn],
             "readout": {"row": 0, "column": 0}}
    with _prec(), pytest.raises(read.Rejected, match=r"^model: not the two blocks of \[SL26\] on a grid of P = m\^d tokens$"):
        ClassNet(model, 1, F(1), F(1), F(1))


def _reference_bound(b, a, cen, C_H, B2, B_ell, lo, hi, heavy=8):
    """The kernel's box bound recomputed at 80 digits from exact rationals (mpmath): caps from the
    ``heavy`` largest scores at the centre (each minimum exact: an affine function's, at a corner)
    and every other token through ``u_l - (s_k(x_c) + rho_k)``; the greedy optimum of
    ``sum w_k A_k``, ``w_k <= cap_k``, ``sum w_k = 1``."""
    P, d = len(b), len(lo)
    xc = [(u + v) / 2 for u, v in zip(lo, hi)]
    h = [(v - u) / 2 for u, v in zip(lo, hi)]
    s_c = [b[k] + sum(a[i][k] * xc[i] for i in range(d)) for k in range(P)]
    order = sorted(range(P), key=lambda k: float(s_c[k]), reverse=True)
    H, top = order[:heavy], order[0]
    rho = [sum(abs(a[i][k] - a[i][top]) * h[i] for i in range(d)) for k in range(P)]
    mp = lambda q: mpmath.mpf(q.numerator) / q.denominator
    items = []
    for k in range(P):
        den = mpmath.mpf(1)
        for l in range(P):
            if l == k:
                continue
            if l in H:  # min over the box of (s_l - s_k): the affine part at its worst corner
                m = s_c[l] - s_c[k] - sum(abs(a[i][l] - a[i][k]) * h[i] for i in range(d))
            else:
                m = (s_c[l] - rho[l]) - (s_c[k] + rho[k])
            den += mpmath.exp(mp(m))
        far2 = sum(max(abs(u - c), abs(v - c)) ** 2 for u, v, c in zip(lo, hi, cen[k]))
        A = min(mp(C_H) * mpmath.sqrt(mp(far2)), mp(B2)) + mp(B_ell[k])
        items.append((A, 1 / den))
    total, left = mpmath.mpf(0), mpmath.mpf(1)
    for A, cap in sorted(items, key=lambda t: t[0], reverse=True):
        w = min(cap, left)
        total, left = total + w * A, left - w
        if left <= 0:
            break
    return total


def test_class_caps_over_every_token_agree_with_an_exact_recomputation():
    """12 tokens (8 heavy, 4 through the one sum) with random dyadic scores over d = 2, centres
    with a denominator 3, 30 fixed random boxes: the kernel's bound is at least the formula's
    80-digit value (every rounding outward) and within a relative 10^-7 of it (no term dropped
    or loosened; Arb's ball of a box has a radius rounded up to 30 bits, which widens the score
    ranges by about 10^-10 of the bound here)."""
    import random

    rng = random.Random(5)
    P, d = 12, 2
    for _ in range(30):
        b = [F(rng.randint(-2**12, 2**12), 2**10) for _ in range(P)]
        a = [[F(rng.randint(-2**12, 2**12), 2**9) for _ in range(P)] for _ in range(d)]
        cen = [[F(rng.randint(0, 3 * 2**10), 3 * 2**10) for _ in range(d)] for _ in range(P)]
        B_ell = [F(rng.randint(0, 2**10), 2**14) for _ in range(P)]
        lo = [F(rng.randint(0, 2**20), 2**21) for _ in range(d)]
        hi = [u + F(rng.randint(1, 2**20), 2**20 * rng.choice([2, 16, 256])) for u in lo]
        with _prec():
            net = _net([_ball(v) for v in b], [[_ball(v) for v in r] for r in a], [[_ball(v) for v in c] for c in cen],
                       arb(3), arb(2), F(1), [_ball(v) for v in B_ell])
            up = verify._upper(net.upper(lo, hi))
        with mpmath.workdps(80):
            ref = _reference_bound(b, a, cen, F(3), F(2), B_ell, lo, hi)
            got = mpmath.mpf(up.numerator) / up.denominator
            assert ref <= got <= ref * (1 + mpmath.mpf(10) ** -7), (float(ref), float(got))


def test_class_caps_one_sum_is_rounded_toward_larger_caps():
    """40 tokens with constant scores (so every minimum is exact and the one-sum bound of the 32
    light tokens is exact too), brackets 1 for the 8 heavy ones and 0 for the rest: the bound is
    ``sum_{k heavy} 1 / sum_l e^(b_l - b_k)`` (80 digits), which the kernel's must not be below in
    any of 20 fixed random cases (each of the sum's 32 lower ends and the final lower end moves it
    by a few units in the last place) and must be within 10^-30 of."""
    import random

    rng = random.Random(3)
    P = 40
    for _ in range(20):
        b = [F(rng.randint(-2**20, 2**20), 2**20) for _ in range(P)]
        heavy = sorted(range(P), key=lambda k: b[k], reverse=True)[:8]
        A = [F(int(k in heavy)) for k in range(P)]
        with _prec():
            net = _net([_ball(v) for v in b], [[arb(0)] * P], [[arb(0)]] * P, arb(0), arb(2), F(1), [_ball(v) for v in A])
            up = verify._upper(net.upper([F(0)], [F(1)]))
        with mpmath.workdps(80):
            e = [mpmath.exp(mpmath.mpf(v.numerator) / v.denominator) for v in b]
            ref = sum(e[k] / sum(e) for k in heavy)
            got = mpmath.mpf(up.numerator) / up.denominator
            assert ref <= got <= ref + mpmath.mpf(10) ** -30, (float(ref), float(got))


def _worst_caps_bound(b_lo, b_hi, A, heavy):
    """``sum_k A_k cap_k`` with each ``cap_k`` at its worst case over the score balls (``b_k`` at its
    upper end, every other score at its lower end), at 80 digits, when the caps of the tokens
    with ``A_k > 0`` sum below 1 (so the greedy threshold is 0)."""
    mp = lambda q: mpmath.mpf(q.numerator) / q.denominator
    caps = [1 / (1 + sum(mpmath.exp(mp(b_lo[l] - b_hi[k])) for l in range(len(A)) if l != k)) for k in range(len(A))]
    assert sum(caps[k] for k in heavy) < 1
    return sum(caps[k] * mp(A[k]) for k in heavy)


@pytest.mark.parametrize("P, heavy_radius, light_radius", [
    (24, 0, 2**-10),  # light scores in wide balls: the one sum must take their lower ends
    (24, 2**-10, 0),  # heavy scores in wide balls: the factor e^(ref - s_k) must take s_k's upper end
    (208, 0, 0),      # 200 light tokens: the one sum's own rounding (about 100 units) must go down
])
def test_class_caps_one_sum_takes_the_lower_ends_of_its_balls(P, heavy_radius, light_radius):
    """Constant scores (every minimum exact), brackets 1 for the 8 heavy tokens and 0 for the
    rest: the kernel's bound must be at least the sum of the heavy caps at their worst case over
    the score balls (80 digits)."""
    import random

    rng = random.Random(7)
    for _ in range(3):
        mids = sorted((F(rng.randint(-2**20, 2**20), 2**20) for _ in range(P)), reverse=True)
        heavy = range(8)
        rad = [F(heavy_radius if k < 8 else light_radius) for k in range(P)]
        A = [F(int(k < 8)) for k in range(P)]
        with _prec():
            b = [arb(float(m), float(r)) if r else _ball(m) for m, r in zip(mids, rad)]
            assert all(v.mid() == _ball(m) for v, m in zip(b, mids))
            net = _net(b, [[arb(0)] * P], [[arb(0)]] * P, arb(0), arb(2), F(1), [_ball(v) for v in A])
            up = verify._upper(net.upper([F(0)], [F(1)]))
        with mpmath.workdps(80):
            ref = _worst_caps_bound([m - r for m, r in zip(mids, rad)], [m + r for m, r in zip(mids, rad)], A, heavy)
            assert ref <= mpmath.mpf(up.numerator) / up.denominator
