"""The exact sharing of input-independent softmax heads (symbounds/core/shared_softmax.py), piece
by piece, against independent computations: each formal sum evaluated as a number at 250 bits,
and the structure of a layer (row classes, score ids, normaliser groups) compared with equalities
of 250-bit values.  The angles here have power-of-two denominators, for which the canonical form
is complete (``zeta = exp(i pi / L)`` has degree ``L / 2`` over ``Q(i)`` when ``L`` is a power of
two), so "formally equal" and "equal in value" must agree both ways; named constants get
transcendental values, so a monomial never matches another by accident.  (Written to kill the
mutants of the fourth mutation pass, docs/mutation-testing.md.)"""

import functools
import random
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy
from sympy import Integer, Rational, Symbol

from symbounds.core import shared_softmax as ss
from symbounds.core.transformer import Attention, Head

DPS = 75
TOL = mpmath.mpf(10) ** -60
A, B = Symbol("A_ss", positive=True), Symbol("B_ss", positive=True)


@pytest.fixture(autouse=True)
def _precision():
    """Every value in these tests at 250 bits (products and sums included)."""
    with mpmath.workdps(DPS):
        yield


def sinpi(q):
    q = Rational(q) % 2
    return sympy.sin(sympy.pi * q) if (2 * q).is_integer else sympy.sin(sympy.pi * q, evaluate=False)


def cospi(q):
    q = Rational(q) % 2
    return sympy.cos(sympy.pi * q) if (2 * q).is_integer else sympy.cos(sympy.pi * q, evaluate=False)


@functools.lru_cache(maxsize=None)
def num(expr):
    """A 250-bit value of an exact weight (named constants: A = e, B = pi)."""
    with mpmath.workdps(DPS):
        if isinstance(expr, (int, Fraction)):
            return mpmath.mpf(expr.numerator) / expr.denominator if isinstance(expr, Fraction) else mpmath.mpf(expr)
        v = sympy.N(sympy.sympify(expr).subs({A: sympy.E, B: sympy.pi}), DPS)
        return mpmath.mpc(complex(0)) + mpmath.mpmathify(str(sympy.re(v))) + 1j * mpmath.mpmathify(str(sympy.im(v)))


def gval(g):
    """The value of a group element ``{q: (re, im)}``: ``sum (re + i im) exp(i pi q)``."""
    with mpmath.workdps(DPS):
        return sum((mpmath.mpf(r.numerator) / r.denominator + 1j * mpmath.mpf(i.numerator) / i.denominator)
                   * mpmath.expjpi(mpmath.mpf(q.numerator) / q.denominator) for q, (r, i) in g.items())


def close(a, b):
    with mpmath.workdps(DPS):
        return abs(mpmath.mpc(a) - mpmath.mpc(b)) < TOL


def key(v):
    """``v`` (known to ~1e-75) to 50 decimals: equal keys for equal values (no value here is
    within 1e-50 of a rounding boundary but not equal)."""
    v = mpmath.mpc(v) * mpmath.mpf(10) ** 50
    return int(mpmath.nint(v.real)), int(mpmath.nint(v.imag))


def check_element(g):
    """A group element is reduced: exponents in [0, 2), no zero coefficient, Fractions."""
    for q, (r, i) in g.items():
        assert isinstance(q, Fraction) and 0 <= q < 2
        assert (r, i) != (0, 0)
        assert isinstance(r, Fraction) and isinstance(i, Fraction)


def rand_element(rng, dens=(1, 2, 4, 8, 3)):
    out = {}
    for _ in range(rng.randint(0, 4)):
        q = Fraction(rng.randrange(0, 16), rng.choice(dens)) % 2
        out[q] = (Fraction(rng.randint(-5, 5), rng.randint(1, 3)), Fraction(rng.randint(-5, 5), rng.randint(1, 3)))
    return {q: v for q, v in out.items() if v != (0, 0)}


# ------------------------------------------------------------------------------------------
# the group algebra


@pytest.mark.parametrize("seed", range(4))
def test_group_product_and_sum_are_those_of_the_values(seed):
    rng = random.Random(seed)
    for _ in range(30):
        a, b = rand_element(rng), rand_element(rng)
        p, s = ss._gmul(a, b), ss._gadd(a, b)
        check_element(p)
        check_element(s)
        assert close(gval(p), gval(a) * gval(b))
        assert close(gval(s), gval(a) + gval(b))
    # cancellation: the zero element is empty, and the operands are left unchanged
    a = {Fraction(1, 2): (Fraction(1), Fraction(-2)), Fraction(0): (Fraction(3), Fraction(0))}
    neg = {q: (-r, -i) for q, (r, i) in a.items()}
    before = dict(a)
    assert ss._gadd(a, neg) == {}
    assert a == before
    # X^(1/2) * X^(3/2) = X^0 (exponents mod 2), with (1 + 2i)(3 - i) = 5 + 5i
    assert ss._gmul({Fraction(1, 2): (Fraction(1), Fraction(2))}, {Fraction(3, 2): (Fraction(3), Fraction(-1))}) == {
        Fraction(0): (Fraction(5), Fraction(5))}
    # i * i = -1; two products landing on one exponent are summed, and a zero sum dropped
    i_ = {Fraction(0): (Fraction(0), Fraction(1))}
    assert ss._gmul(i_, i_) == {Fraction(0): (Fraction(-1), Fraction(0))}
    two = {Fraction(0): (Fraction(1), Fraction(0)), Fraction(1): (Fraction(1), Fraction(0))}  # 1 + X
    assert ss._gmul(two, two) == {Fraction(0): (Fraction(2), Fraction(0)), Fraction(1): (Fraction(2), Fraction(0))}
    assert ss._gmul(two, {Fraction(0): (Fraction(1), Fraction(0)), Fraction(1): (Fraction(-1), Fraction(0))}) == {}


_EXPRS = [
    Integer(0), Integer(3), Rational(-5, 7), 2, Fraction(3, 4), Fraction(0), A,
    sinpi(Rational(1, 4)), cospi(Rational(1, 4)), sinpi(Rational(-3, 8)), cospi(Rational(11, 8)),
    sinpi(Rational(7, 3)), cospi(Rational(1, 3)), sympy.sin(sympy.pi, evaluate=False),
    A * cospi(Rational(1, 8)), Rational(3, 2) * A * B * sinpi(Rational(5, 8)),
    sinpi(Rational(1, 4)) + cospi(Rational(1, 8)) / 3, A * sinpi(Rational(1, 4)) + A * cospi(Rational(1, 4)),
    A * 0 + B * cospi(Rational(1, 8)),
    cospi(Rational(1, 8)) ** 3, (A * sinpi(Rational(3, 8))) ** 2, A ** 2,
    sympy.Mul(2, cospi(Rational(1, 4)), sinpi(Rational(1, 4)), evaluate=False),
    sympy.Add(sinpi(Rational(1, 4)), -sinpi(Rational(1, 4)), evaluate=False),
    sympy.sin(Rational(9, 4) * sympy.pi, evaluate=False), sympy.cos(Rational(-7, 3) * sympy.pi, evaluate=False),
    sympy.sin(Rational(11, 4) * sympy.pi, evaluate=False),
]


@pytest.mark.parametrize("expr", _EXPRS, ids=str)
def test_exact_form_has_the_weights_value(expr):
    mono, g = ss._form(expr)
    check_element(g)
    assert isinstance(mono, sympy.Basic)
    assert close(num(mono) * gval(g), num(expr))
    free = sympy.sympify(expr).free_symbols
    assert mono.free_symbols <= free
    if not g:
        assert mono == 1
    if isinstance(expr, (int, Fraction)) or not free:
        assert mono == 1


def test_exact_forms_written_out():
    h = Fraction(1, 2)
    z = Fraction(0)
    assert ss._form(Rational(3, 2)) == (1, {z: (Fraction(3, 2), z)})
    assert ss._form(Fraction(-1, 3)) == (1, {z: (Fraction(-1, 3), z)})
    assert ss._form(7) == (1, {z: (Fraction(7), z)})
    assert ss._form(Integer(0)) == (1, {})
    assert ss._form(0) == (1, {})
    assert ss._form(A) == (A, {z: (Fraction(1), z)})
    # cos(pi q) = (X^q + X^-q) / 2, sin(pi q) = -i/2 X^q + i/2 X^-q
    assert ss._form(cospi(Rational(1, 4))) == (1, {Fraction(1, 4): (h, z), Fraction(7, 4): (h, z)})
    assert ss._form(sinpi(Rational(1, 4))) == (1, {Fraction(1, 4): (z, -h), Fraction(7, 4): (z, h)})
    assert ss._form(sinpi(Rational(9, 4))) == ss._form(sinpi(Rational(1, 4)))  # q mod 2
    # sin(pi) = 0 written unevaluated: the two terms cancel; cos(pi) = X^1 collects to one term
    assert ss._form(sympy.sin(sympy.pi, evaluate=False)) == (1, {})
    assert ss._form(sympy.cos(sympy.pi, evaluate=False)) == (1, {Fraction(1): (Fraction(1), z)})  # X^1 = -1
    assert ss._form(A * B * 2) == (A * B, {z: (Fraction(2), z)})
    assert ss._form(A ** 3) == (A ** 3, {z: (Fraction(1), z)})
    assert ss._form(A * 0 + 3) == (1, {z: (Fraction(3), z)})
    # a sum of zero terms is 0 with the monomial 1; a power written out with exponent 1
    zeros = sympy.Add(sympy.Mul(0, A, evaluate=False), sympy.Mul(0, B, evaluate=False), evaluate=False)
    assert ss._form(zeros) == (1, {})
    assert ss._form(sympy.Mul(3, zeros, evaluate=False)) == (1, {})
    assert ss._form(sympy.Pow(A, 1, evaluate=False)) == (A, {z: (Fraction(1), z)})
    # a sum whose first term is zero keeps the monomial of the others
    assert ss._form(sympy.Add(sympy.Mul(0, B, evaluate=False), A, evaluate=False)) == (A, {z: (Fraction(1), z)})


@pytest.mark.parametrize("expr", [
    1.5, "1", sympy.sqrt(2), sympy.pi, sympy.Symbol("x") * sympy.pi, sympy.sin(sympy.sqrt(2) * sympy.pi),
    sympy.sin(A * sympy.pi), sympy.sin(sympy.Rational(1, 3), evaluate=False), sympy.exp(Rational(1, 3)),
    A + B, A + 1, A ** -1, A ** Rational(1, 2), sympy.cos(2 * sympy.E, evaluate=False)], ids=str)
def test_weights_outside_the_forms_are_refused(expr):
    with pytest.raises(ss._NoForm):
        ss._form(expr)


def test_common_monomial():
    z = Fraction(0)
    one = {z: (Fraction(1), z)}
    assert ss._uniform([]) is None
    assert ss._uniform([(A, {}), (B, {})]) is None
    assert ss._uniform([(B, {}), (A, one), (A, one)]) == A
    assert ss._uniform([(A, one), (B, {})]) == A
    with pytest.raises(ss._NoForm):
        ss._uniform([(A, one), (B, one)])
    with pytest.raises(ss._NoForm):
        ss._uniform([(A, one), (B, {}), (Integer(1), one)])


# ------------------------------------------------------------------------------------------
# integer batches


def arrays_value(E, R, I, L, den=1):
    """Row values ``sum_t (R + i I) / den * zeta^E`` with ``zeta = exp(i pi / L)``."""
    with mpmath.workdps(DPS):
        return [sum((int(r) + 1j * int(i)) * mpmath.expjpi(mpmath.mpf(int(e)) / L) for e, r, i in zip(er, rr, ir)) / den
                for er, rr, ir in zip(E, R, I)]


@pytest.mark.parametrize("seed", range(3))
def test_integer_batches_hold_the_elements(seed):
    rng = random.Random(seed)
    elems = [rand_element(rng, dens=(1, 2, 4, 8)) for _ in range(12)] + [{}]
    L = 8
    E, R, I = ss._to_arrays(elems, L)
    den = 1
    for g in elems:
        for r, i in g.values():
            den = np.lcm(np.lcm(den, r.denominator), i.denominator)
    T = max(len(g) for g in elems)
    assert E.shape == R.shape == I.shape == (len(elems), T)
    assert E.dtype == np.int64
    assert ((E >= 0) & (E < 2 * L)).all()
    for n, g in enumerate(elems):
        assert close(arrays_value([E[n]], [R[n]], [I[n]], L, int(den))[0], gval(g))
        # terms in ascending order of exponent, empty slots last with R = I = 0
        assert list(E[n, :len(g)]) == [int(q * L) for q in sorted(g)]
        assert not R[n, len(g):].any() and not I[n, len(g):].any()
    assert ss._to_arrays([{}], 4)[0].shape == (1, 1)
    assert ss._to_arrays([], 4)[0].shape == (0, 1)
    # a denominator common to the batch: 1/2 and 1/3 are 3/6 and 2/6
    E, R, I = ss._to_arrays([{Fraction(0): (Fraction(1, 2), Fraction(0))}, {Fraction(1): (Fraction(0), Fraction(1, 3))}], 2)
    assert E.tolist() == [[0], [2]] and R.tolist() == [[3], [0]] and I.tolist() == [[0], [2]]


def test_integer_batches_refuse_what_they_cannot_hold():
    with pytest.raises(ss._NoForm):  # q L not an integer
        ss._to_arrays([{Fraction(1, 3): (Fraction(1), Fraction(0))}], 4)
    big = 2**30
    ss._to_arrays([{Fraction(0): (Fraction(big - 1), Fraction(1 - big))}], 2)
    for r, i in ((big, 0), (0, big), (-big, 0), (0, -big)):
        with pytest.raises(ss._NoForm):
            ss._to_arrays([{Fraction(0): (Fraction(r), Fraction(i))}], 2)
    # the common denominator counts: 1/(2^15) and 2^15 give 1 and 2^30
    with pytest.raises(ss._NoForm):
        ss._to_arrays([{Fraction(0): (Fraction(1, 2**15), Fraction(0))}, {Fraction(0): (Fraction(0), Fraction(2**15))}], 2)


def test_termwise_products_are_the_products_of_the_values():
    rng = np.random.default_rng(5)
    L = 8
    X = tuple(a for a in (rng.integers(0, 2 * L, (2, 3, 1, 2)), rng.integers(-9, 9, (2, 3, 1, 2)),
                          rng.integers(-9, 9, (2, 3, 1, 2))))
    Y = tuple(a for a in (rng.integers(0, 2 * L, (1, 3, 4, 3)), rng.integers(-9, 9, (1, 3, 4, 3)),
                          rng.integers(-9, 9, (1, 3, 4, 3))))
    E, R, I = ss._mul(X, Y, L)
    assert E.shape == (2, 3, 4, 6)
    assert ((E >= 0) & (E < 2 * L)).all()
    for idx in np.ndindex(2, 3, 4):
        x = arrays_value([X[0][idx[0], idx[1], 0]], [X[1][idx[0], idx[1], 0]], [X[2][idx[0], idx[1], 0]], L)[0]
        y = arrays_value([Y[0][0, idx[1], idx[2]]], [Y[1][0, idx[1], idx[2]]], [Y[2][0, idx[1], idx[2]]], L)[0]
        assert close(arrays_value([E[idx]], [R[idx]], [I[idx]], L)[0], x * y)


def _one(e, r, i):
    return tuple(np.array([[v]], np.int64) for v in (e, r, i))


def test_termwise_products_refuse_a_possible_int64_overflow():
    # 2 bx by T1 T2 4 >= 2^62 is refused: bx by = 2^59 is, (2^30 - 1) 2^29 is not
    ok, lo = 2**30 - 1, 2**29
    ss._mul(_one(0, ok, 0), _one(0, 0, lo), 2)
    ss._mul(_one(0, 0, ok), _one(0, lo, 0), 2)
    ss._mul(_one(0, 1, 0), _one(0, 2**59 - 1, 0), 2)
    for x, y in ((_one(0, 2**30, 0), _one(0, lo, 0)), (_one(0, 0, -2**30), _one(0, lo, 0)),
                 (_one(0, lo, 0), _one(0, 0, -2**30)), (_one(0, 1, 0), _one(0, 2**59, 0))):
        with pytest.raises(ss._NoForm):
            ss._mul(x, y, 2)
    # the term counts count: 2 terms x 2 terms with bx by = 2^57 reach 2^62, 2 x 1 do not
    two = tuple(np.array([[a, b]], np.int64) for a, b in ((0, 1), (2**29, 2**29), (0, 0)))
    two_ = tuple(np.array([[a, b]], np.int64) for a, b in ((0, 1), (2**28, 2**28), (0, 0)))
    with pytest.raises(ss._NoForm):
        ss._mul(two, two_, 2)
    one = tuple(np.array([[a]], np.int64) for a in (0, 2**28, 0))
    ss._mul(two, one, 2)
    # the term count is the last axis of a batch of any rank: 4 rows of one term are not 4 terms
    rows = tuple(np.full((1, 4, 1, 1), v, np.int64) for v in (0, 2**29, 0))
    single = tuple(np.full((1, 1, 1, 1), v, np.int64) for v in (0, 2**29, 0))
    ss._mul(rows, single, 2)
    terms = tuple(np.full((1, 1, 1, 4), v, np.int64) for v in (0, 2**29, 0))
    with pytest.raises(ss._NoForm):
        ss._mul(terms, single, 2)
    with pytest.raises(ss._NoForm):
        ss._mul(single, terms, 2)
    # a zero batch bounds nothing: times a huge one it is not refused
    zero = _one(0, 0, 0)
    for big in (_one(0, 2**59, 0), _one(0, 0, 2**59)):
        ss._mul(zero, big, 2)
        ss._mul(big, zero, 2)
    # empty batches are fine
    empty = tuple(np.zeros((0, 1), np.int64) for _ in range(3))
    assert ss._mul(empty, empty, 2)[0].shape == (0, 1)


def _canon_value(oE, oR, oI, L):
    return arrays_value(oE, oR, oI, L)


@pytest.mark.parametrize("L", [2, 4, 8])
def test_canonical_rows_keep_the_value_and_are_unique(L):
    rng = np.random.default_rng(L)
    N, T = 40, 5
    E = rng.integers(0, 2 * L, (N, T))
    R = rng.integers(-3, 4, (N, T))
    I = rng.integers(-3, 4, (N, T))
    R[::5] = 0
    I[::5] = 0  # some rows are zero
    width = 2 * T
    oE, oR, oI = ss._canon(E, R, I, L, width)
    half = L // 2
    assert oE.shape == oR.shape == oI.shape == (N, width)
    vin, vout = arrays_value(E, R, I, L), arrays_value(oE, oR, oI, L)
    seen = {}
    for n in range(N):
        assert close(vin[n], vout[n])
        used = (oR[n] != 0) | (oI[n] != 0)
        k = int(used.sum())
        assert used[:k].all() and not used[k:].any()  # packed to the left
        assert (oE[n, k:] == half).all()  # padding (L/2, 0, 0)
        assert (np.diff(oE[n, :k]) > 0).all()  # ascending, collected
        assert ((oE[n, :k] >= 0) & (oE[n, :k] < half)).all()
        # complete for L a power of two: equal values give equal rows, and only those
        key = (tuple(oE[n]), tuple(oR[n]), tuple(oI[n]))
        for other, v in seen.items():
            assert (other == key) == close(v, vout[n])
        seen[key] = vout[n]
    # X^(L/2) = i, X^L = -1, X^(3L/2) = -i; collected with X^0: i + (-1) + (-i) + 1 = 0
    E = np.array([[half, L, 3 * half, 0, 1]], np.int64)
    R = np.array([[1, 1, 1, 1, 2]], np.int64)
    I = np.zeros((1, 5), np.int64)
    oE, oR, oI = ss._canon(E, R, I, L, 3)
    if L == 2:  # X^1 = X^(L/2) = i too: 2 i left
        assert (oE.tolist(), oR.tolist(), oI.tolist()) == ([[0, 1, 1]], [[0, 0, 0]], [[2, 0, 0]])
    else:
        assert (oE.tolist(), oR.tolist(), oI.tolist()) == ([[1, half, half]], [[2, 0, 0]], [[0, 0, 0]])
    # i X^(L/2) = -1, the imaginary parts rotate as well
    oE, oR, oI = ss._canon(np.array([[half, 3 * half]]), np.array([[0, 0]]), np.array([[1, 2]]), L, 2)
    assert (oE.tolist(), oR.tolist(), oI.tolist()) == ([[0, half]], [[1, 0]], [[0, 0]])


def test_canonical_rows_edge_cases():
    # no rows
    oE, oR, oI = ss._canon(np.zeros((0, 3), np.int64), np.zeros((0, 3), np.int64), np.zeros((0, 3), np.int64), 4, 2)
    assert oE.shape == (0, 2)
    # rows of zero width: padded rows
    oE, oR, oI = ss._canon(np.zeros((2, 0), np.int64), np.zeros((2, 0), np.int64), np.zeros((2, 0), np.int64), 4, 2)
    assert oE.tolist() == [[2, 2], [2, 2]] and not oR.any() and not oI.any()
    # rows stay apart: row 1's term is not collected with row 0's although their exponents agree
    oE, oR, oI = ss._canon(np.array([[1, 0], [1, 0]]), np.array([[1, 0], [2, 0]]), np.zeros((2, 2), np.int64), 4, 2)
    assert oE.tolist() == [[1, 2], [1, 2]] and oR.tolist() == [[1, 0], [2, 0]]
    # a zero row between nonzero ones
    oE, oR, oI = ss._canon(np.array([[1], [1], [0]]), np.array([[1], [0], [5]]), np.zeros((3, 1), np.int64), 4, 1)
    assert oE.tolist() == [[1], [2], [0]] and oR.tolist() == [[1], [0], [5]]
    with pytest.raises(AssertionError):  # more terms than the width
        ss._canon(np.array([[0, 1]]), np.array([[1, 1]]), np.zeros((1, 2), np.int64), 4, 1)
    # coefficients that could overflow once collected are refused, the largest allowed kept
    lim = ss._LIMIT // 2
    ss._canon(np.array([[0, 1]]), np.array([[lim - 1, 0]]), np.array([[0, 1 - lim]]), 4, 2)
    for R, I in (([[lim, 0]], [[0, 0]]), ([[0, 0]], [[0, -lim]]), ([[0, -lim]], [[0, 0]])):
        with pytest.raises(ss._NoForm):
            ss._canon(np.array([[0, 1]]), np.array(R), np.array(I), 4, 2)
    # the limit is 2^62 // T exactly (integers): one term may reach 2^62 - 1 ...
    ss._canon(np.array([[0]]), np.array([[ss._LIMIT - 1]]), np.array([[0]]), 4, 1)
    for T in (3, 5):  # ... and T terms just below 2^62 // T, whatever the double nearest 2^62 / T
        z = np.zeros((1, T), np.int64)
        E = np.arange(T, dtype=np.int64)[None, :]
        ok, over = z.copy(), z.copy()
        ok[0, 0], over[0, 0] = ss._LIMIT // T - 1, ss._LIMIT // T
        ss._canon(E, ok, z, 2 * T, T)
        ss._canon(E, z, ok, 2 * T, T)
        with pytest.raises(ss._NoForm):
            ss._canon(E, over, z, 2 * T, T)
    # the rotation by i moves an imaginary coefficient into the real part before the check
    with pytest.raises(ss._NoForm):
        ss._canon(np.array([[2, 1]]), np.array([[0, 0]]), np.array([[lim, 0]]), 4, 2)


def test_interned_ids_are_shared_across_calls():
    table, reps, calls = {}, [], []

    def rep_of(f):
        calls.append(f)
        return ("rep", f)

    k1 = np.array([[1, 2], [3, 4], [1, 2], [0, 0]], np.int64)
    ids = ss._intern(k1, table, reps, rep_of)
    assert ids.tolist()[0] == ids.tolist()[2]
    assert len(set(ids.tolist())) == 3 and sorted(set(ids.tolist())) == [0, 1, 2]
    assert len(reps) == 3 and sorted(calls) == [0, 1, 3]  # the first row of each kind
    for i, g in enumerate(ids.tolist()):
        assert reps[g] == ("rep", next(f for f in calls if k1[f].tolist() == k1[i].tolist()))
    k2 = np.array([[3, 4], [5, 6], [5, 6]], np.int64)[:, ::-1][:, ::-1]  # not contiguous before the copy
    ids2 = ss._intern(k2, table, reps, rep_of)
    assert ids2[0] == ids[1] and ids2[1] == ids2[2] == 3
    assert len(reps) == 4 and reps[3] == ("rep", 1)
    assert ids2.dtype == np.int64 and ids2.shape == (3,)
    # rows that agree as bytes only in part are different
    k3 = np.array([[1, 2, 0], [1, 2, 1]], np.int64)
    assert len(set(ss._intern(k3, {}, [], lambda f: f).tolist())) == 2


def test_monomial_column_is_zero_for_a_zero_sum():
    mono = np.array([3, 4, 5, 6])
    coeffs = np.array([[0, 0], [0, 1], [-1, 0], [0, 0]])
    assert ss._mono_column(mono, coeffs).tolist() == [0, 4, 5, 0]


def test_exact_zero_default():
    assert ss._is_zero(0) and ss._is_zero(Fraction(0)) and ss._is_zero(Integer(0))
    assert not ss._is_zero(1) and not ss._is_zero(Rational(1, 3)) and not ss._is_zero(A)
    assert not ss._is_zero(Symbol("z_ss"))  # unknown sign: not known to be zero


# ------------------------------------------------------------------------------------------
# the structure of a layer, against 250-bit values


def _head(WQ, WK):
    conv = lambda W: tuple(tuple(sympy.sympify(v) for v in row) for row in W)
    D = len(WQ[0])
    return Head(conv(WQ), conv(WK), conv([[1] + [0] * (D - 1)]), conv([[1]] + [[0]] * (D - 1)))


def _tokens(n, extra=0):
    """Rows: 0 = constant 1, 1-2 = sin, cos of 2 pi j / n, then ``extra`` rows 0 and 1/2 alternating."""
    base = [[Integer(1)] * n, [sinpi(Rational(2 * j, n)) for j in range(n)], [cospi(Rational(2 * j, n)) for j in range(n)]]
    for e in range(extra):
        base.append([Rational(j % 2, 2) for j in range(n)])
    return base


def _rand_weight(rng, n):
    c = rng.random()
    if c < 0.3:
        return Integer(0)
    if c < 0.55:
        return Rational(rng.randint(-2, 2), rng.choice([1, 2]))
    q = Rational(2 * rng.randrange(n), n)
    return rng.choice([sinpi, cospi])(q)


def _rand_layer(rng, n, H, D):
    mono_choices = [Integer(1), A, B, A * B, A**2]
    heads = []
    for h in range(H):
        if h and rng.random() < 0.3:
            heads.append(heads[rng.randrange(h)])
            continue
        mq, mk = rng.choice(mono_choices), rng.choice(mono_choices)
        kind = rng.random()
        if kind < 0.5:  # a rotation of the positions
            phi = Rational(2 * rng.randrange(n), n)
            WQ = [[0, cospi(phi), sinpi(phi)] + [0] * (D - 3), [0, -sinpi(phi), cospi(phi)] + [0] * (D - 3)]
            WK = [[0, 1, 0] + [0] * (D - 3), [0, 0, 1] + [0] * (D - 3)]
        else:
            k = rng.randint(1, 2)
            WQ = [[_rand_weight(rng, n) for _ in range(D)] for _ in range(k)]
            WK = [[_rand_weight(rng, n) for _ in range(D)] for _ in range(k)]
        WQ = [[mq * v for v in row] for row in WQ]
        WK = [[mk * v for v in row] for row in WK]
        heads.append(_head(WQ, WK))
    return Attention(tuple(heads), "softmax", Integer(0))


def _numeric(layer, tokens, heads):
    """250-bit query functionals ``u[h][j][y]`` over the rows read, and scores ``s[h][j][k]``."""
    n = len(tokens[0])
    read = sorted({c for h in heads for W in (layer.heads[h].W_Q, layer.heads[h].W_K)
                   for row in W for c, v in enumerate(row) if v != 0})
    with mpmath.workdps(DPS):
        t = [[num(tokens[c][j]) for j in range(n)] for c in read]
        U, S = [], []
        for h in heads:
            WQ = [[num(row[c]) for c in read] for row in layer.heads[h].W_Q]
            WK = [[num(row[c]) for c in read] for row in layer.heads[h].W_K]
            Bm = [[sum(WQ[a][x] * WK[a][y] for a in range(len(WQ))) for y in range(len(read))] for x in range(len(read))]
            u = [[sum(t[x][j] * Bm[x][y] for x in range(len(read))) for y in range(len(read))] for j in range(n)]
            U.append(u)
            S.append([[sum(u[j][y] * t[y][k] for y in range(len(read))) for k in range(n)] for j in range(n)])
    return U, S


def _check_structure(S, layer, tokens, heads):
    n = len(tokens[0])
    U, Sc = _numeric(layer, tokens, heads)
    H = len(heads)
    assert S.heads == tuple(heads) and S.index == {h: a for a, h in enumerate(heads)}
    assert S.cls.shape == (H, n)
    C = len(S.class_rep)
    assert sorted(set(S.cls.ravel().tolist())) == list(range(C))
    assert S.ids.shape == (C, n)
    assert sorted(set(S.ids.ravel().tolist())) == list(range(len(S.score_rep)))
    ukey = {(a, j): tuple(key(x) for x in U[a][j]) for a in range(H) for j in range(n)}
    rows = sorted(ukey)
    for p, r1 in enumerate(rows):
        for r2 in rows[:p]:
            assert (S.cls[r1] == S.cls[r2]) == (ukey[r1] == ukey[r2]), (r1, r2)
    for c, (a, j) in enumerate(S.class_rep):
        assert S.cls[a, j] == c
    vals = {}
    for a in range(H):
        for j in range(n):
            for k in range(n):
                vals.setdefault((int(S.cls[a, j]), k), set()).add(key(Sc[a][j][k]))
    assert all(len(v) == 1 for v in vals.values())  # a class's members score alike
    vals = {c: v.pop() for c, v in vals.items()}
    by_value: dict = {}
    for ck, v in vals.items():
        by_value.setdefault(v, set()).add(int(S.ids[ck]))
    assert all(len(ids) == 1 for ids in by_value.values())  # equal values, one id
    assert len(by_value) == len(S.score_rep)  # and one value per id
    for s, (c, k) in enumerate(S.score_rep):
        assert S.ids[c, k] == s
    assert S.group.shape == (C,)
    assert sorted(set(S.group.tolist())) == list(range(len(S.group_rep)))
    ms = [tuple(sorted(vals[(c, k)] for k in range(n))) for c in range(C)]
    for c in range(C):
        for d in range(c):
            assert (S.group[c] == S.group[d]) == (ms[c] == ms[d])
    for g, c in enumerate(S.group_rep):
        assert S.group[c] == g


@pytest.mark.parametrize("seed", range(5))
def test_structure_is_the_equality_of_exact_values(seed):
    rng = random.Random(seed)
    n = rng.choice([4, 8])
    D = 4
    layer = _rand_layer(rng, n, rng.randint(2, 5), D)
    tokens = _tokens(n, extra=1)
    heads = list(range(len(layer.heads)))
    S = ss.structure(layer, tokens, heads)
    if S is None:  # every W_Q, W_K zero is the only way here
        assert all(v == 0 for hd in layer.heads for W in (hd.W_Q, hd.W_K) for row in W for v in row)
        return
    _check_structure(S, layer, tokens, heads)
    # formed in chunks of one row (and of a few): the same partitions
    for chunk in (1, 7 * n):
        S1 = ss.structure(layer, tokens, heads, chunk_rows=chunk)
        _check_structure(S1, layer, tokens, heads)
    # a subset of the heads, in another order
    sub = heads[::-1][:2]
    _check_structure(ss.structure(layer, tokens, sub), layer, tokens, sub)


def test_structure_of_rotations_counts_classes_scores_and_groups():
    """Heads ``R(2 pi m / n)`` on the positions of ``n = 8`` tokens: each distinct rotation gives
    ``n`` row classes; the scores are ``cos(2 pi (j + m - k) / n)``: ``n / 2 + 1`` values; every row
    is a permutation of every other: one normaliser; a copy of a head and the rotation by ``n``
    share everything."""
    n = 8

    def rot(m, c=Integer(1)):
        phi = Rational(2 * m, n)
        return _head([[0, c * cospi(phi), c * sinpi(phi)], [0, -c * sinpi(phi), c * cospi(phi)]],
                     [[0, 1, 0], [0, 0, 1]])

    h0, h1 = rot(0), rot(3)
    layer = Attention((h0, h1, h0, rot(n), rot(3, A)), "softmax", Integer(0))
    tokens = _tokens(n)
    S = ss.structure(layer, tokens, [0, 1, 2, 3, 4])
    assert (S.cls[0] == S.cls[2]).all() and (S.cls[0] == S.cls[3]).all()
    # rotation by 3 of token j is the query of token j + 3 for the unrotated head (and A's head is
    # A times that: apart)
    assert all(S.cls[1, j] == S.cls[0, (j + 3) % n] for j in range(n))
    assert not set(S.cls[4].tolist()) & set(S.cls[0].tolist())
    assert len(S.class_rep) == 2 * n
    assert len(S.score_rep) == 2 * (n // 2 + 1) - 1  # the score 0 is one, whatever the monomial
    assert len(S.group_rep) == 2
    assert repr(S) == f"Structure(5 heads x {n} rows: {2 * n} row classes, {2 * (n // 2 + 1) - 1} distinct scores, 2 normalisers)"
    _check_structure(S, layer, tokens, [0, 1, 2, 3, 4])


def test_a_zero_score_is_shared_whatever_its_monomial():
    """Head 0 is ``A`` times a head whose scores are all 0 on the tokens; head 1 has monomial 1 and
    also scores 0 for the key ``(0, 0)``: every zero score gets one id (the value 0 whatever ``A``)."""
    n = 2
    tokens = [[Integer(1), Integer(0)], [Integer(0), Integer(0)]]  # token 1 is zero
    h0 = _head([[0, A]], [[0, 1]])  # u = A t_j[1] = 0 for every token: the zero functional
    h1 = _head([[1, 0]], [[1, 0]])  # score t_j[0] t_k[0]
    layer = Attention((h0, h1), "softmax", Integer(0))
    S = ss.structure(layer, tokens, [0, 1])
    _check_structure(S, layer, tokens, [0, 1])
    assert S.cls[0, 0] == S.cls[0, 1] == S.cls[1, 1]  # the zero functional, whatever the monomial
    assert len(S.score_rep) == 2


def test_structure_declines_what_it_does_not_handle():
    n = 4
    tokens = _tokens(n)
    good = _head([[0, 1, 0]], [[0, 0, 1]])
    assert ss.structure(Attention((good,), "hardmax", Integer(0)), tokens, [0]) is None
    assert ss.structure(Attention((good,), "softmax", Integer(0)), tokens, []) is None
    zero = _head([[0, 0, 0]], [[0, 0, 0]])
    assert ss.structure(Attention((zero,), "softmax", Integer(0)), tokens, [0]) is None
    irr = _head([[0, sympy.sqrt(2), 0]], [[0, 0, 1]])
    assert ss.structure(Attention((good, irr), "softmax", Integer(0)), tokens, [0, 1]) is None
    assert ss.structure(Attention((good, irr), "softmax", Integer(0)), tokens, [0]) is not None
    mixed = _head([[0, A, 1]], [[0, 0, 1]])  # two monomials in one W_Q
    assert ss.structure(Attention((mixed,), "softmax", Integer(0)), tokens, [0]) is None
    # named constants in the tokens read
    named = [row[:] for row in tokens]
    named[1] = [A * v for v in named[1]]
    assert ss.structure(Attention((good,), "softmax", Integer(0)), named, [0]) is None
    # ... but not in a row no head reads
    named = [row[:] for row in tokens]
    named[0] = [A] * n
    assert ss.structure(Attention((good,), "softmax", Integer(0)), named, [0]) is not None
    # an angle whose denominator makes L above 2^30
    far = _head([[0, cospi(Rational(1, 2**31)), 0]], [[0, 0, 1]])
    assert ss.structure(Attention((far,), "softmax", Integer(0)), tokens, [0]) is None
    near = _head([[0, cospi(Rational(1, 2**30)), 0]], [[0, 0, 1]])  # L = 2^30 exactly
    S = ss.structure(Attention((near,), "softmax", Integer(0)), tokens, [0])
    _check_structure(S, Attention((near,), "softmax", Integer(0)), tokens, [0])
    # the is_zero given decides the rows read: a weight it calls zero is not read
    S = ss.structure(Attention((good,), "softmax", Integer(0)), tokens, [0], is_zero=lambda v: True)
    assert S is None
    S = ss.structure(Attention((_head([[0, 1, 0]], [[0, 0, 1]]),), "softmax", Integer(0)), tokens, [0],
                     is_zero=lambda v: v == 0)
    _check_structure(S, Attention((good,), "softmax", Integer(0)), tokens, [0])


def test_monomials_of_W_Q_and_W_K_multiply():
    """``A`` on ``W_Q`` and ``B`` on ``W_K`` score like ``A B`` on ``W_Q`` alone (one class), not
    like ``A`` or ``B`` alone; ``A`` on ``W_Q`` with a zero ``W_K`` row elsewhere still counts."""
    n = 4
    tokens = _tokens(n)
    WQ = [[0, 1, 0], [0, 0, 1]]
    WK = [[0, 1, 0], [0, 0, 1]]
    sc = lambda c, W: [[c * v for v in row] for row in W]
    heads = (_head(sc(A, WQ), sc(B, WK)), _head(sc(A * B, WQ), WK), _head(sc(A, WQ), WK), _head(WQ, sc(B, WK)),
             _head(sc(B, WQ), sc(A, WK)))
    layer = Attention(heads, "softmax", Integer(0))
    S = ss.structure(layer, tokens, list(range(5)))
    _check_structure(S, layer, tokens, list(range(5)))
    assert (S.cls[0] == S.cls[1]).all() and (S.cls[0] == S.cls[4]).all()
    assert not set(S.cls[2].tolist()) & set(S.cls[0].tolist())
    assert not set(S.cls[3].tolist()) & set(S.cls[0].tolist())


def test_a_head_with_a_zero_query_or_key_scores_zero():
    """A head whose ``W_Q`` (or ``W_K``) is zero on every row read, beside heads that read those
    rows: its query functionals are all zero, one class with the zero scores of every other head."""
    n = 4
    tokens = _tokens(n)
    good = _head([[0, A, 0]], [[0, 0, 1]])
    for zero in (_head([[0, 0, 0]], [[0, 1, 0]]), _head([[0, 1, 0]], [[0, 0, 0]]), _head([[0, 0, 0]], [[0, 0, 0]])):
        layer = Attention((good, zero), "softmax", Integer(0))
        S = ss.structure(layer, tokens, [0, 1])
        _check_structure(S, layer, tokens, [0, 1])
        assert len(set(S.cls[1].tolist())) == 1


@pytest.mark.parametrize("unit", [Integer(1), sinpi(Rational(1, 4))], ids=["real", "imaginary"])
def test_scores_beyond_float_precision_are_told_apart(unit):
    """Tokens ``2^28 + 1``, ``2^28 - 1``, ``2^28`` (times ``sin(pi/4)``, whose exact form has only
    imaginary coefficients) and the score ``t_j t_k``: ``(2^28 + 1)(2^28 - 1) = 2^56 - 1`` and
    ``2^28 2^28 = 2^56`` are one double but two scores (integer arithmetic throughout, no float64
    anywhere)."""
    a = 2**28
    tokens = [[Integer(a + 1) * unit, Integer(a - 1) * unit, Integer(a) * unit]]
    layer = Attention((_head([[1]], [[1]]),), "softmax", Integer(0))
    S = ss.structure(layer, tokens, [0])
    _check_structure(S, layer, tokens, [0])
    assert S.ids[S.cls[0, 0], 1] != S.ids[S.cls[0, 2], 2]
    assert len(S.score_rep) == 6  # t_j t_k for j <= k: all different



def _pair(a, b):
    return [[a, b]]


# canonical forms (L = 16 unless said): cos(5 pi/16) = -i/2 X^3 + 1/2 X^5, cos(7 pi/16) = -i/2 X + 1/2 X^7
# (an imaginary term, then a real one); -sin(5 pi/16) = -1/2 X^3 + i/2 X^5, -sin(7 pi/16) =
# -1/2 X + i/2 X^7 (a real term, then an imaginary one); cos(5 pi/12) = -i/2 X + 1/2 X^5 (L = 12)
PAIRS = {
    "cos-3/8-and-1": _pair(cospi(Rational(3, 8)), Integer(1)),
    "cos-5/12-and-1": _pair(cospi(Rational(5, 12)), Integer(1)),
    "imaginary-then-real": _pair(cospi(Rational(5, 16)), cospi(Rational(7, 16))),
    "real-then-imaginary": _pair(-sinpi(Rational(5, 16)), -sinpi(Rational(7, 16))),
}


@pytest.mark.parametrize("name", list(PAIRS))
def test_query_functionals_are_kept_to_their_last_term(name):
    """Two tokens ``a``, ``b`` on one row read and ``B = 1``: the scores ``a b`` and ``b a`` are one
    number (the same product), so they share an id, and ``a^2``, ``a b``, ``b^2`` are the three
    distinct scores.  Every token here ends, in its canonical form, in a term that is real only
    or imaginary only, of the same column in both: the query functionals ``u_j = t_j`` must be kept
    to their last nonzero term whichever part holds it (a width read from one part alone, or
    from a coefficient compared with 1, drops it, and ``u_0 b`` no longer matches ``u_1 a``)."""
    tokens = PAIRS[name]
    layer = Attention((_head([[1]], [[1]]),), "softmax", Integer(0))
    S = ss.structure(layer, tokens, [0])
    assert S.ids[S.cls[0, 0], 1] == S.ids[S.cls[0, 1], 0]
    assert len({key(num(a) * num(b)) for a in tokens[0] for b in tokens[0]}) == 3
    assert len(S.score_rep) == 3
    if "12" not in name:  # L a power of two: formally equal and equal in value agree both ways
        _check_structure(S, layer, tokens, [0])


def test_functionals_that_are_all_zero_score_zero():
    """A layer whose only head has ``W_Q`` zero on the rows read (``W_K`` reads a row): every
    query functional is zero, one row class, every score 0 (one id)."""
    tokens = _tokens(4)
    layer = Attention((_head([[0, 0, 0]], [[0, 1, 0]]),), "softmax", Integer(0))
    S = ss.structure(layer, tokens, [0])
    _check_structure(S, layer, tokens, [0])
    assert len(S.class_rep) == 1 and len(S.score_rep) == 1 and len(S.group_rep) == 1
