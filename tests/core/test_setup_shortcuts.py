"""The shared softmax weights of input-independent heads (symbounds/core/shared_softmax.py): the
sharing is found exactly, refuses near-equalities, and its balls contain values computed
independently (a direct 300-bit mpmath evaluation); verdicts match the entry-by-entry path."""

import dataclasses
import random
from fractions import Fraction

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import sympy
from sympy import Integer, Rational, Symbol

from symbounds.core import shared_softmax
from symbounds.core import transformer as T
from symbounds.core.contexts import BallContext, MPContext
from symbounds.core.transformer import Attention, Embedding, Head, Readout, Transformer, forward
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.constants import cospi, sinpi

M = Symbol("M_test", positive=True)
DPS = 95  # ~315 bits


def _mp(v, env):
    return mpmath.mpf(str(sympy.N(sympy.sympify(v).subs(env), DPS)))


def _direct(model, x, env):
    """A 300-bit evaluation of a one-attention-layer model written from the definitions:
    scores, row softmax, sum over heads of W_O W_V Z pi^T, then the rest by the engine's own
    conventions (only the attention layer matters here; the models below end there)."""
    with mpmath.workdps(DPS):
        emb = model.embedding
        D, n = len(emb.base), len(emb.base[0])
        Z = [[_mp(emb.base[r][j], env) for j in range(n)] for r in range(D)]
        for r in range(D):
            Z[r][emb.column] += sum(_mp(e, env) * mpmath.mpf(xi.numerator) / xi.denominator
                                    for e, xi in zip(emb.E[r], x))
        att = model.layers[0]
        out = [[_mp(att.skip, env) * Z[r][j] for j in range(n)] for r in range(D)]
        pis = []
        for hd in att.heads:
            W = {nm: [[_mp(v, env) for v in row] for row in getattr(hd, nm)] for nm in ("W_Q", "W_K", "W_V", "W_O")}
            Q = [[sum(w * Z[c][j] for c, w in enumerate(row)) for j in range(n)] for row in W["W_Q"]]
            K = [[sum(w * Z[c][j] for c, w in enumerate(row)) for j in range(n)] for row in W["W_K"]]
            V = [[sum(w * Z[c][j] for c, w in enumerate(row)) for j in range(n)] for row in W["W_V"]]
            pi = []
            for j in range(n):
                s = [sum(Q[a][j] * K[a][k] for a in range(len(Q))) for k in range(n)]
                e = [mpmath.exp(v - max(s)) for v in s]
                tot = sum(e)
                pi.append([v / tot for v in e])
            pis.append(pi)
            for r, orow in enumerate(W["W_O"]):
                for j in range(n):
                    out[r][j] += sum(o * sum(pi[j][k] * V[a][k] for k in range(n)) for a, o in enumerate(orow))
        return out, pis


def _random_model(rng, *, n=6, heads=5, perturb=None):
    """Rows: 0 = x, 1 = constant, 2-3 = positions (sin, cos of angles 2 q / n).  Some heads are
    copies of earlier ones (equal scores), some rotate the queries (rows permuted), the rest are
    random; ``perturb`` adds a tiny rational to one token's position (rows that are *not*
    permutations of each other)."""
    D = 4
    base = [[Integer(0)] * n for _ in range(D)]
    base[1][0] = Integer(1)
    for j in range(n):
        q = Rational(2 * (j + 1), n)
        base[2][j], base[3][j] = sinpi(q), cospi(q)
    if perturb is not None:  # a tiny change of one token: its rows are no exact permutations
        angle, tiny = perturb
        base[2][1] = sinpi(Rational(4, n) + tiny) if angle else base[2][1] + tiny
    E = [[Integer(1)], [Integer(0)], [Integer(0)], [Integer(0)]]
    hs = []
    for h in range(heads):
        if h >= 2 and rng.random() < 0.4:
            hs.append(hs[rng.randrange(len(hs))])  # an exact copy: equal scores
            continue
        kind = rng.choice(["rot", "rot", "rand"])
        if kind == "rot":
            phi = Rational(-2 * rng.randrange(n), n)
            WQ = [[0, 0, cospi(phi), sinpi(phi)], [0, 0, -sinpi(phi), cospi(phi)]]
        else:
            pick = lambda: rng.choice([Rational(rng.randint(-3, 3), rng.randint(1, 4)),
                                       sinpi(Rational(rng.randint(0, 11), 6)), cospi(Rational(1, 5))])
            WQ = [[0, 0, pick(), pick()], [0, 0, pick(), pick()]]
        WK = [[0, 0, M, 0], [0, 0, 0, M]]
        WV = [[Rational(rng.randint(1, 3), 2), Rational(rng.randint(-2, 2), 3), 0, 0], [0, 0, 1, 0]]
        WO = [[1, 0], [0, 0], [0, 1], [0, 0]]
        hs.append(Head(*(tuple(tuple(sympy.sympify(v) for v in row) for row in W) for W in (WQ, WK, WV, WO))))
    att = Attention(tuple(hs), "softmax", Integer(0))
    return Transformer((att,), Embedding(tuple(map(tuple, base)), tuple(map(tuple, E)), 0), None,
                       "vector", ((M, Integer(3)),))


def _check_contains(ball, v):
    """The 300-bit value ``v`` (known to ~1e-90) lies in ``ball`` (its exact endpoints), up to a
    1e-80 allowance for the reference's own rounding."""
    (mm, me), (rm, re_) = ball.mid().man_exp(), ball.rad().man_exp()
    with mpmath.workdps(DPS):
        mid, rad = mpmath.ldexp(int(mm), int(me)), mpmath.ldexp(int(rm), int(re_))
        slack = mpmath.mpf(10) ** -80 * (1 + abs(v))
        assert abs(mpmath.mpf(v) - mid) <= rad + slack, (ball, mpmath.nstr(v, 40))


@pytest.mark.parametrize("seed", range(6))
def test_random_networks_fast_path_contains_direct_values(seed):
    rng = random.Random(seed)
    # seed 2: one token's angle moved by 2^-20 (shared where exact, not elsewhere); seed 5: a
    # weight moved by 2^-100 (outside the exact integer range: nothing is shared)
    perturb = {2: (True, Rational(1, 2**20)), 5: (False, Rational(1, 2**100))}.get(seed)
    model = _random_model(rng, perturb=perturb)
    x = (Fraction(rng.randrange(-50, 50), 37),)
    env = {M: 3}
    out, pis = _direct(model, x, env)
    ball = BallContext(128)
    S = model.structure().shared_softmax
    # the whole state after the layer (affine prefix, Arb matrix path) and the readout
    Z = forward(ball, model, x, stop=1)
    for r in range(len(Z)):
        for j in range(len(Z[0])):
            _check_contains(Z[r][j], out[r][j])
    # the attention matrices of the trace (materialised from the shared weights)
    _, tr = forward(ball, model, x, trace=True)
    for h, pi in enumerate(tr.attention[0]):
        for j in range(len(pi)):
            for k in range(len(pi)):
                _check_contains(pi[j][k], pis[h][j][k])
    # and the plain path gives overlapping balls, the same readout sign decision
    plain = dataclasses.replace(_random_model(random.Random(seed), perturb=perturb), share_softmax=False)
    Zp = forward(ball, plain, x, stop=1)
    assert all(a.overlaps(b) for ra, rb in zip(Z, Zp) for a, b in zip(ra, rb))
    sign = lambda v: (v > 0, v < 0)  # proved positive, proved negative (neither: undecided)
    assert [sign(v) for r in Z for v in r] == [sign(v) for r in Zp for v in r]
    assert (S is None) == (seed == 5)
    if seed == 2:
        assert len(S.group_rep) > 1  # the perturbed rows are not taken for permutations


def test_some_but_not_all_scores_equal():
    """Copies share a row class; the distinct heads do not; ids are exact."""
    rng = random.Random(4)
    model = _random_model(rng, heads=8)
    S = model.structure().shared_softmax
    assert S is not None
    att = model.layers[0]
    copies = [(a, b) for a in range(8) for b in range(a) if att.heads[a] is att.heads[b]]
    assert copies, "the seed must produce a copied head"
    for a, b in copies:
        assert (S.cls[S.index[a]] == S.cls[S.index[b]]).all()
    n = S.cls.shape[1]
    assert 1 < len(S.score_rep) < len(S.class_rep) * n  # shared, but not everything
    # every shared score id is a true equality: check each id's members at 300 bits
    with mpmath.workdps(DPS):
        tok = [[_mp(v, {M: 3}) for v in row] for row in model.embedding.base]
        vals = {}
        for a, h in enumerate(S.heads):
            hd = att.heads[h]
            WQ = [[_mp(v, {M: 3}) for v in row] for row in hd.W_Q]
            WK = [[_mp(v, {M: 3}) for v in row] for row in hd.W_K]
            for j in range(n):
                c = S.cls[a, j]
                for k in range(n):
                    s = sum(sum(w * tok[r][j] for r, w in enumerate(q)) * sum(w * tok[r][k] for r, w in enumerate(kk))
                            for q, kk in zip(WQ, WK))
                    vals.setdefault(int(S.ids[c, k]), []).append(s)
        for sid, vs in vals.items():
            assert max(vs) - min(vs) < mpmath.mpf(10) ** -80, sid


def test_near_equality_is_refused():
    """Two heads whose scores differ by ~2^-20 (angles q and q + 2^-20 / pi-ish): the balls of
    an 8-bit context overlap, yet the scores get different ids; a 2^-100 perturbation of a
    weight is refused outright (no sharing at all, the plain path runs)."""
    n = 4
    base = [[Integer(0)] * n for _ in range(3)]
    for j in range(n):
        base[1][j], base[2][j] = sinpi(Rational(2 * j, n)), cospi(Rational(2 * j, n))
    E = ((Integer(1),), (Integer(0),), (Integer(0),))
    eps = Rational(1, 2**20)

    def head(phi):
        WQ = ((0, cospi(phi), sinpi(phi)), (0, -sinpi(phi), cospi(phi)))
        WK = ((0, Integer(1), 0), (0, 0, Integer(1)))
        WV = ((Integer(1), 0, 0),)
        WO = ((Integer(1),), (0,), (0,))
        return Head(*(tuple(tuple(sympy.sympify(v) for v in r) for r in W) for W in (WQ, WK, WV, WO)))

    att = Attention((head(Rational(1, 3)), head(Rational(1, 3) + eps)), "softmax", Integer(0))
    S = shared_softmax.structure(att, base, [0, 1], T.is_exact_zero)
    assert S is not None
    assert not (S.cls[0] == S.cls[1]).any()  # no row of head 1 is taken for a row of head 0
    ids0 = set(S.ids[S.cls[0]].ravel().tolist())
    ids1 = set(S.ids[S.cls[1]].ravel().tolist())
    assert not ids0 & ids1
    # ... although at 8 bits the two heads' score balls overlap (a ball test would merge them)
    model = Transformer((att,), Embedding(tuple(map(tuple, base)), E, 0), Readout(0, 0), "vector")
    low = BallContext(8)
    _, tr = forward(low, dataclasses.replace(model, share_softmax=False), (Fraction(1, 2),), trace=True)
    assert all(a.overlaps(b) for ra, rb in zip(*tr.attention[0]) for a, b in zip(ra, rb))
    # a 2^-100 perturbation of a weight: the coefficients leave the exact integer range -> refused
    hd = head(Rational(1, 3))
    tiny = Head(((0, hd.W_Q[0][1] + Rational(1, 2**100), hd.W_Q[0][2]), hd.W_Q[1]), hd.W_K, hd.W_V, hd.W_O)
    att2 = Attention((hd, tiny), "softmax", Integer(0))
    S2 = shared_softmax.structure(att2, base, [0, 1], T.is_exact_zero)
    assert S2 is None or not (S2.cls[0] == S2.cls[1]).any()


def test_canonical_form_identities():
    """sin(a) cos(b) + cos(a) sin(b) and sin(a + b) have one canonical form; sin(pi/5) and
    sin(pi/5) + 2^-100 do not."""
    a, b = Rational(1, 7), Rational(3, 11)
    lhs = shared_softmax._form(sinpi(a) * cospi(b) + cospi(a) * sinpi(b))[1]
    rhs = shared_softmax._form(sinpi(a + b))[1]
    assert lhs == rhs
    assert shared_softmax._form(sinpi(Rational(1, 5)))[1] != shared_softmax._form(
        sinpi(Rational(1, 5)) + Rational(1, 2**100))[1]


@pytest.mark.parametrize("eps", ["1/2", pytest.param("19/50", marks=pytest.mark.slow)])
def test_shi_liao_small_P(eps):
    """The [SL26] network (d = 2): the detection finds P row classes, P/2 + 1 distinct scores
    (M cos(2 pi q / P)) and one normaliser; the cold evaluation's balls contain the plain path's
    300-bit values; verdicts of the paper's measurements match the plain path's."""
    K = sl.constants(sl.Instance(d=2, C_H=1, B=1, eps=Rational(eps), target="sin(x1+x2)/2"))
    P = K.P
    model = sl.build(K)
    S = model.structure().shared_softmax
    assert (len(S.class_rep), len(S.score_rep), len(S.group_rep)) == (P, P // 2 + 1, 1)
    x = (Fraction(1, 3), Fraction(-2, 7))
    v = forward(BallContext(128), model, x)
    ref = dataclasses.replace(sl.build(K), share_softmax=False)
    w = forward(MPContext(300), ref, x)
    _check_contains(v, w)
    pts = sl.sample_points(2, 2, 2, 0)
    fast = [m.lhs for m in sl.measure(BallContext(128), K, sl.build(K), pts)]
    plain_claims = sl.measure(BallContext(128), K, dataclasses.replace(sl.build(K), share_softmax=False), pts)
    assert len(fast) == len(plain_claims)
    from symbounds.core.claims import decide

    verdicts_plain = [decide(BallContext(128), m).verdict for m in plain_claims]
    verdicts_fast = [decide(BallContext(128), m).verdict for m in sl.measure(BallContext(128), K, sl.build(K), pts)]
    assert verdicts_fast == verdicts_plain


# ------------------------------------------------------------------------------------------
# Heads whose scores differ only by a named-constant factor c_Q c_K: their formal sums agree, so
# only the monomial tells them apart.

_A, _B, _C = Symbol("A_test", positive=True), Symbol("B_test", positive=True), Symbol("C_test", positive=True)
#: A and B have equal values but different names (they still must not be merged by value)
_VALUES = {_A: Rational(3, 2), _B: Rational(3, 2), _C: Rational(2, 3)}
_MONOS = [Integer(1), _A, _B, _C, _A**2, _A * _B, _B * _C, _A * _C**2, _A**2 * _B]


def _monomial_heads_model(specs, n=6):
    """Rows: 0 = x (token 0), 1-2 = positions (sin, cos of 2 q / n), then one output row per
    head.  Head ``h`` = ``(mono_Q, mono_K, phi, in_K)`` scores ``mono_Q mono_K <R(phi) p_j, p_k>``
    with the monomial on ``W_Q`` (and, when ``in_K``, ``mono_K`` on ``W_K``, else on ``W_Q``
    too); its value is ``x`` (token 0), written to its own row, so every head's weights
    show in the state."""
    H = len(specs)
    D = 3 + H
    base = [[Integer(0)] * n for _ in range(D)]
    for j in range(n):
        q = Rational(2 * (j + 1), n)
        base[1][j], base[2][j] = sinpi(q), cospi(q)
    E = tuple((Integer(1 if r == 0 else 0),) for r in range(D))
    heads = []
    for h, (mq, mk, phi, in_k) in enumerate(specs):
        phi = Rational(-2 * phi, n)
        cq, ck = (mq, mk) if in_k else (mq * mk, Integer(1))
        WQ = [[0, cq * cospi(phi), cq * sinpi(phi)] + [0] * H, [0, -cq * sinpi(phi), cq * cospi(phi)] + [0] * H]
        WK = [[0, ck, 0] + [0] * H, [0, 0, ck] + [0] * H]
        WV = [[1, 0, 0] + [0] * H]
        WO = [[1 if r == 3 + h else 0] for r in range(D)]
        heads.append(Head(*(tuple(tuple(sympy.sympify(v) for v in row) for row in W) for W in (WQ, WK, WV, WO))))
    att = Attention(tuple(heads), "softmax", Integer(0))
    return Transformer((att,), Embedding(tuple(map(tuple, base)), E, 0), None, "vector",
                       tuple(_VALUES.items()))


def _two_heads(where: str):
    """Head 0 scores with ``M`` (value 10) on ``W_Q`` or ``W_K``, head 1 the same without it."""
    D = 4
    one, zero = Integer(1), Integer(0)
    base = ((one, zero), (zero, zero), (zero, zero), (zero, zero))  # token values t = (1, 0)
    E = ((zero,), (one,), (zero,), (zero,))  # x enters row 1 of token 0

    def head(c, out_row):
        WQ = ((c if where == "Q" else one, zero, zero, zero),)
        WK = ((c if where == "K" else one, zero, zero, zero),)
        WV = ((zero, one, zero, zero),)
        WO = tuple((one if r == out_row else zero,) for r in range(D))
        return Head(WQ, WK, WV, WO)

    att = Attention((head(M, 2), head(one, 3)), "softmax", zero)
    return Transformer((att,), Embedding(base, E, 0), Readout(3, 0), "vector", ((M, Integer(10)),))


@pytest.mark.parametrize("where", ["Q", "K"])
def test_a_named_constant_factor_is_not_shared(where):
    """``W_Q`` (or ``W_K``) of head 0 is ``[[M, 0, ...]]`` with M = 10, head 1's is ``[[1, 0, ...]]``:
    equal formal sums, different scores.  Head 1's row 0 scores the tokens (1, 0) as (1, 0), so
    the readout (its output at token 0, x = 1) is ``e / (e + 1)`` by hand; with M's scores it
    would be ``e^10 / (e^10 + 1)``."""
    model = _two_heads(where)
    S = model.structure().shared_softmax
    assert S is not None
    assert S.cls[0, 0] != S.cls[1, 0]
    v = forward(BallContext(128), model, (Fraction(1),))
    with mpmath.workdps(DPS):
        e = mpmath.e
        _check_contains(v, e / (e + 1))
        out, _ = _direct(model, (Fraction(1),), {M: 10})
        _check_contains(v, out[3][0])
        Z = forward(BallContext(128), dataclasses.replace(model, readout=None), (Fraction(1),), stop=1)
        _check_contains(Z[2][0], out[2][0])  # head 0 keeps its own scores
    assert forward(BallContext(128), dataclasses.replace(_two_heads(where), share_softmax=False), (Fraction(1),)).overlaps(v)


_head_spec = st.tuples(st.sampled_from(_MONOS), st.sampled_from(_MONOS), st.integers(0, 1), st.booleans())


@settings(max_examples=30, deadline=None)
@given(specs=st.lists(_head_spec, min_size=2, max_size=5), x=st.fractions(-3, 3, max_denominator=50))
def test_heads_differing_by_named_constant_monomials_are_enclosed(specs, x):
    """Random heads whose scores are ``c_Q c_K`` times one of two rotations: different constants,
    powers, products, and ``A``, ``B`` of equal value but different names.  Every entry of the
    state after the shared pass contains a direct 300-bit evaluation, and two heads share a row
    class only when their monomials (as written) are equal."""
    model = _monomial_heads_model(specs)
    S = model.structure().shared_softmax
    assert S is not None
    Z = forward(BallContext(128), model, (x,), stop=1)
    out, _ = _direct(model, (x,), _VALUES)
    for r in range(len(Z)):
        for j in range(len(Z[0])):
            _check_contains(Z[r][j], out[r][j])
    # the same sharing when the keys are formed in chunks of one head (the monomial column
    # follows its rows through the chunking; ids may be numbered otherwise)
    S1 = shared_softmax.structure(model.layers[0], model.embedding.base, S.heads, T.is_exact_zero, chunk_rows=1)
    for a, b in ((S.cls, S1.cls), (S.ids[S.cls], S1.ids[S1.cls]), (S.group[S.cls], S1.group[S1.cls])):
        pairs = set(zip(a.ravel().tolist(), b.ravel().tolist()))
        assert len(pairs) == len(set(a.ravel().tolist())) == len(set(b.ravel().tolist()))
    mono = [mq * mk for mq, mk, _, _ in specs]
    for a in range(len(specs)):
        for b in range(a):
            if mono[a] != mono[b]:  # structurally: A and B differ although equal in value
                assert not (S.cls[a] == S.cls[b]).any()  # each token's row has nonzero scores


def test_shi_liao_head_times_M_is_enclosed():
    """[SL26] (the default instance, P = 40): one position head's ``W_Q`` multiplied by the
    named constant ``M`` at x = 7/10 (the heads that matter there: the tampered network's value
    differs from the untouched one's).  The shared pass's ball contains the plain pass's value."""
    K = sl.constants(sl.Instance())
    Msym = dict((str(s), s) for s, _ in sl.build(K).definitions)["M"]

    def tampered(h=28):
        model = sl.build(K)
        att = model.layers[0]
        hd = att.heads[h]
        hd = dataclasses.replace(hd, W_Q=tuple(tuple(Msym * v for v in row) for row in hd.W_Q))
        att = dataclasses.replace(att, heads=att.heads[:h] + (hd,) + att.heads[h + 1:])
        return dataclasses.replace(model, layers=(att,) + model.layers[1:])

    x = (Fraction(7, 10),)
    v = forward(BallContext(128), tampered(), x)
    w = forward(MPContext(300), dataclasses.replace(tampered(), share_softmax=False), x)
    plain_ball = forward(BallContext(128), dataclasses.replace(tampered(), share_softmax=False), x)
    untouched = forward(BallContext(128), sl.build(K), x)
    assert not plain_ball.overlaps(untouched)  # the tampering shows in the value
    _check_contains(v, w)
