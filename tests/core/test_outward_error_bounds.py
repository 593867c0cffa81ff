"""Each a-priori error bound of the float64 box pass against the actual error, with no other margin.

In the box pass a rounding error is usually covered twice: by its own term and by the slack of
another one (the ``4u`` of every upward rounding, the ``2^-44`` of ``exp``).  So a term can be
dropped and every enclosure still holds; only a test that reads the term alone notices.  Here
each bound is compared with the exact error of what it bounds (exact rationals or 300-bit Arb
balls): one rounding (``err``), the polynomial of ``exp`` (``_REL``), the reduced argument of
``exp`` before outward rounding, a sum rounded down, a model's range, and the remainder of a
model's ``exp`` for the widest enclosure of ``e^c`` that ``exp_bounds`` may return.
docs/mutation-testing.md lists the edits these tests kill.
"""

from fractions import Fraction as F

import flint
import numpy as np
import pytest

from symbounds.core import outward as fo
from symbounds.core.float_boxes import FTM, _Boxes

U, ETA = F(2) ** -53, F(2) ** -1074


def exact(v) -> F:
    return F(float(v))


def arb(q: F) -> flint.arb:
    return flint.arb(flint.fmpq(q.numerator, q.denominator))


# ------------------------------------------------------------------------------------------
# err: one rounding, underflow included


def _operands():
    rng = np.random.default_rng(25)
    a = rng.uniform(0.5, 2, 300) * 2.0 ** rng.integers(-560, 560, 300) * rng.choice([-1, 1], 300)
    b = rng.uniform(0.5, 2, 300) * 2.0 ** rng.integers(-560, 560, 300)
    # products that underflow: to 0 (below eta/2), to eta, and into the subnormals
    tiny = np.array([2.0**-538, 1.5 * 2.0**-537, 1.3 * 2.0**-540, 1.7 * 2.0**-520, 2.0**-600, 3.0 * 2.0**-1074])
    return np.concatenate([a, tiny, [1.0, 1 / 3, 0.1]]), np.concatenate([b, tiny, [2.0**-60, 3.0, 0.7]])


@pytest.mark.parametrize("op", ["mul", "add", "div"])
def test_err_bounds_the_exact_error_of_one_rounding_with_underflow(op):
    """``|z - fl(z)| <= err(fl(z))`` for the exact product, sum or quotient ``z`` of two doubles,
    among them products that round to 0 or to a subnormal (the ``eta`` term alone covers those)."""
    a, b = _operands()
    with np.errstate(all="ignore"):
        y = {"mul": a * b, "add": a + b, "div": a / b}[op]
    e = fo.err(y)
    hit_zero = 0
    for ai, bi, yi, ei in zip(a, b, y, e):
        if not np.isfinite(yi):
            continue
        z = {"mul": exact(ai) * exact(bi), "add": exact(ai) + exact(bi), "div": exact(ai) / exact(bi)}[op]
        assert abs(z - exact(yi)) <= exact(ei), (op, ai, bi)
        hit_zero += yi == 0 and z != 0
    if op == "mul":
        assert hit_zero >= 2  # a product that rounded to 0 was checked


def test_err_of_zero_covers_a_product_that_underflowed():
    """``2^-538 * 2^-538 = 2^-1076`` rounds to 0: ``err(0)`` must be at least ``2^-1076``."""
    y = np.float64(2.0**-538) * np.float64(2.0**-538)
    assert y == 0.0
    assert exact(fo.err(np.array([y]))[0]) >= F(2) ** -1076
    assert exact(fo.err(np.array([2.0**-1074]))[0]) >= ETA / 2


# ------------------------------------------------------------------------------------------
# exp: the polynomial's error and the reduced argument, each without the other margins


def test_taylor_polynomial_is_within_its_a_priori_relative_error():
    """``p(r) (1 - _REL) <= e^r <= p(r) (1 + _REL)`` in 300-bit balls for ``|r| <= 0.36``, where
    ``p`` is the float64 Horner polynomial; and the factors applied to ``p`` are at least that."""
    rng = np.random.default_rng(2)
    r = np.concatenate([np.linspace(-0.36, 0.36, 1441), rng.uniform(-0.36, 0.36, 500),
                        [0.36, -0.36, 0.3466, -0.3466, 2.0**-30, -(2.0**-30), 1e-300, 0.0]])
    p = fo._taylor(r)
    rel = exact(fo._REL)
    with flint.ctx.workprec(300):
        for ri, pi in zip(r, p):
            e = arb(exact(ri)).exp()
            assert arb(exact(pi) * (1 - rel)) <= e <= arb(exact(pi) * (1 + rel)), ri
    assert exact(fo._UP_REL) >= 1 + rel and exact(fo._DOWN_REL) <= 1 - rel


def _near_k_ln2(k: int) -> float:
    with flint.ctx.workprec(300):
        return float(flint.arb(k) * flint.arb(2).log())


@pytest.mark.parametrize("upper", [True, False])
def test_reduced_argument_is_on_its_side_before_outward_rounding(monkeypatch, upper):
    """``r >= x - k ln 2`` (upper) or ``<=`` (lower) with ``up`` and ``down`` made the identity:
    the ``ln 2`` split alone must put ``r`` on the right side.  At ``x`` the double nearest
    ``k ln 2`` (``k`` a power of two, so ``k C2`` is exact and ``x - k C1 - k C2`` is exact too,
    Sterbenz), ``x - k ln 2`` is tiny and a wrong end of the split shows."""
    monkeypatch.setattr(fo, "up", lambda y: y)
    monkeypatch.setattr(fo, "down", lambda y: y)
    ks = [s * 2**j for j in range(11) for s in (1, -1)]
    x = np.array([_near_k_ln2(k) for k in ks])
    k, r = fo._reduced(x, upper)
    assert list(k) == ks
    with flint.ctx.workprec(300):
        ln2 = flint.arb(2).log()
        for xi, ki, ri in zip(x, ks, r):
            true = arb(exact(xi)) - ki * ln2
            assert (arb(exact(ri)) >= true) if upper else (arb(exact(ri)) <= true), (ki, upper)


def test_reduced_argument_with_outward_rounding_brackets_x_minus_k_ln2():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-745, 709.7, 400), [_near_k_ln2(k) for k in (1, -1, 700, -1000, 1023)]])
    (k, hi), (k2, lo) = fo._reduced(x, True), fo._reduced(x, False)
    assert (k == k2).all()
    with flint.ctx.workprec(300):
        ln2 = flint.arb(2).log()
        for xi, ki, a, b in zip(x, k, lo, hi):
            true = arb(exact(xi)) - int(ki) * ln2
            assert arb(exact(a)) <= true <= arb(exact(b)) and abs(b) <= 0.36, xi


# ------------------------------------------------------------------------------------------
# sums rounded down (the interval softmax's denominator)


def _sums_that_round_up():
    """Rows whose float sum exceeds the exact sum by several ``u``: ``1 + x + x + ...`` with
    ``x`` just above ``u``, so that each addition rounds up (numpy's order for these lengths)."""
    x = 2.0**-53 * (1 + 2.0**-20)
    return [np.array([1.0] + [x] * (n - 1)) for n in (2, 5, 7, 100)]


def test_sum_down_is_below_the_exact_sum_where_the_float_sum_rounds_up():
    rows = _sums_that_round_up()
    assert any(exact(a.sum()) - sum(map(exact, a)) > 4 * U * sum(map(exact, a)) for a in rows)
    rng = np.random.default_rng(6)
    rows += [rng.uniform(0, 1, 1000) * 10.0 ** rng.integers(-300, 3, 1000), np.full(64, 3 * 2.0**-1074),
             np.array([0.0, 0.0]), np.array([0.1])]
    for a in rows:
        s = sum(map(exact, a))
        lo = exact(fo.sum_down(a, axis=0))
        assert lo <= s, len(a)
        assert lo >= s * (1 - (2 * len(a) + 10) * U) - 2 * ETA, len(a)  # and not loose
    # along the last axis of a (B, nq, n) array, as the softmax uses it
    A = np.stack([np.stack([rows[2], rows[2][::-1]])] * 2)
    out = fo.sum_down(A, axis=2)
    assert out.shape == (2, 2) and (np.vectorize(exact)(out) <= sum(map(exact, rows[2]))).all()


def test_sum_up_and_matmul_up_are_above_the_exact_sum_where_the_float_sum_rounds_down():
    """Rows ``1, x, x, ...`` with ``x`` just below ``u``: every addition rounds down (the float sum
    stays 1), so the float sum is ``(n - 1) u`` below the exact one, more than the ``4u`` of ``up``:
    the factor ``1 + 2nu`` must be there."""
    x = 2.0**-53 * (1 - 2.0**-20)
    for n in (7, 100, 1000):
        a = np.array([1.0] + [x] * (n - 1))
        s = sum(map(exact, a))
        assert exact(a.sum()) < s * (1 - 5 * U)  # the float sum rounded down by more than 4u
        assert exact(fo.sum_up(a, axis=0)) >= s, n
        A, B = a.reshape(1, n), np.ones((n, 1))
        assert exact(fo.matmul_up(A, B)[0, 0]) >= s, n
        assert exact(fo.matmul_err(A, B)[0, 0]) >= s - exact((A @ B)[0, 0]), n


# ------------------------------------------------------------------------------------------
# a model's range


@pytest.mark.parametrize("grad", [False, True])
def test_range_is_rounded_outward(grad):
    """``c +- (|g| h + r)`` with the deviation far below an ulp of ``c``: the ends must still
    contain ``c - dev`` and ``c + dev`` exactly."""
    c = np.array([1.0, -1.0, 3.0, 1e300, 2.0**-1000, 0.0])
    r = np.full(6, 2.0**-60) * np.maximum(np.abs(c), 1.0)
    h = np.array([[2.0**-70]])
    G = np.ones((6, 1)) * np.maximum(np.abs(c), 1.0)[:, None] if grad else None
    bx = _Boxes(np.repeat(h, 6, axis=0))
    lo, hi = bx.range(FTM(c, G, r))
    for i in range(6):
        dev = exact(r[i]) + (exact(abs(G[i, 0])) * exact(h[0, 0]) if grad else 0)
        assert exact(lo[i]) <= exact(c[i]) - dev and exact(hi[i]) >= exact(c[i]) + dev, (i, grad)


# ------------------------------------------------------------------------------------------
# a model's exp, for any enclosure of e^c that exp_bounds may return


def _wide_exp_bounds(width, at_low_end: bool):
    """A valid but wide ``exp_bounds``: ``e^c`` at the lower end (``hi = lo (1 + width)``) or at
    the upper end."""
    def bounds(x):
        lo, hi = fo.exp_lower(x), fo.exp_upper(x)
        if at_low_end:
            return lo, fo.up(lo * (1 + width))
        return fo.down(hi * (1 - width)), hi
    return bounds


@pytest.mark.parametrize("at_low_end", [True, False])
@pytest.mark.parametrize("c0", [0.0, 0.7, -3.0])
@pytest.mark.parametrize("U_", [2.0**-16, 2.0**-8, 0.5, 2.0])
def test_exp_model_holds_for_the_widest_enclosure_of_its_centre(monkeypatch, at_low_end, c0, U_):
    """``e^{c + g delta}`` inside the model at points ``delta`` (the corners, 0, and where
    ``e^c (e^u - 1) = hi - e^c``, the worst point when ``e^c`` is at the lower end), with
    ``exp_bounds`` returning ``[lo, lo (1 + 2^-20)]``: the ``er`` terms of the remainder are then
    the whole margin."""
    width = 2.0**-20
    monkeypatch.setattr(fo, "exp_bounds", _wide_exp_bounds(width, at_low_end))
    bx = _Boxes(np.array([[U_]]))
    a = FTM(np.array([c0]), np.array([[1.0]]), np.array([0.0]))
    m = bx.exp(a)
    cm, gm, rm = exact(m.c[0]), exact(m.G[0, 0]), exact(m.r[0])
    h = exact(U_)
    deltas = [h, -h, F(0), h / 2, -h / 2]
    deltas += [s * F(2) ** -j for j in (19, 20, 21, 22) for s in (1, -1) if F(2) ** -j <= h]
    with flint.ctx.workprec(300):
        for dl in deltas:
            true = arb(exact(c0) + dl).exp()
            assert abs(true - arb(cm + gm * dl)) <= arb(rm), (c0, U_, dl, at_low_end)
