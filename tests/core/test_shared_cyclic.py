"""The cyclic fast path of the exact sharing (symbounds/core/shared_cyclic.py): on random layers of
rotations of tokens on a circle (copies, named constants, scaled rotations, near-equal angles,
constant rows) its structure is the general path's (``cyclic=False``, the entry-by-entry exact
forms) and that of 250-bit values; a layer outside its hypotheses (a reflection, a token off the
circle, a second frequency) is declined and the general path decides; a tampered [SL26] model
shares nothing it should not."""

import dataclasses
import random

import mpmath
import numpy as np
import pytest
import sympy
from sympy import Integer, Rational, Symbol

from symbounds.core import shared_cyclic, shared_softmax as ss
from symbounds.core.network import is_exact_zero
from symbounds.core.transformer import Attention

from test_shared_softmax_mutants import DPS, _check_structure, _head, cospi, sinpi  # noqa: I001

A, B = Symbol("A_ss", positive=True), Symbol("B_ss", positive=True)


@pytest.fixture(autouse=True)
def _precision():
    with mpmath.workdps(DPS):
        yield


@pytest.fixture
def spy(monkeypatch):
    """Records what the fast path returned (None: declined) on each call."""
    seen = []
    real = shared_cyclic.structure

    def wrapped(*a, **k):
        out = real(*a, **k)
        seen.append(out)
        return out

    monkeypatch.setattr(shared_cyclic, "structure", wrapped)
    return seen


def _partitions(S):
    """The partitions the structure asserts, as labels by first appearance: rows (h, j) by class,
    entries (h, j, k) by score id, rows by normaliser."""
    def relabel(x):
        first: dict = {}
        return np.array([first.setdefault(v, len(first)) for v in np.asarray(x).ravel().tolist()])

    return relabel(S.cls), relabel(S.ids[S.cls]), relabel(S.group[S.cls])


def _same_as_general(layer, tokens, heads):
    fast = ss.structure(layer, tokens, heads)
    slow = ss.structure(layer, tokens, heads, cyclic=False)
    assert (fast is None) == (slow is None)
    if fast is not None:
        for a, b in zip(_partitions(fast), _partitions(slow)):
            assert (a == b).all()
    return fast


def _circle(n, shift=1, const=True):
    rows = [[Integer(1)] * n] if const else []
    rows += [[sinpi(Rational(2 * (j + shift), n)) for j in range(n)], [cospi(Rational(2 * (j + shift), n)) for j in range(n)]]
    return rows


def _rot(q, c=Integer(1), k=Integer(1), const=True, tiny=0):
    z = [0] if const else []
    phi = Rational(q) + tiny
    WQ = [z + [c * cospi(phi), c * sinpi(phi)], z + [-c * sinpi(phi), c * cospi(phi)]]
    WK = [z + [k, 0], z + [0, k]]
    return WQ, WK


def _random_cyclic_layer(rng, n, H):
    """Heads: rotations by ``2 m / n`` (times ``pi``), some scaled by a rational or a named
    constant on ``W_Q`` and/or ``W_K``, some copies, some by an angle ``2^-24`` away from a
    rotation of another head (near-equal scores), some adding a term on the constant row."""
    heads = []
    for h in range(H):
        if h and rng.random() < 0.25:
            heads.append(heads[rng.randrange(h)])
            continue
        q = Rational(2 * rng.randrange(n), n)
        c = rng.choice([Integer(1), Integer(1), Rational(rng.randint(1, 3), rng.randint(1, 2)), A])
        k = rng.choice([Integer(1), Integer(1), B])
        tiny = Rational(1, 2**24) if rng.random() < 0.2 else 0
        WQ, WK = _rot(q, c, k, tiny=tiny)
        if rng.random() < 0.3 and c == 1 and k == 1:  # the score gains a constant t_j[0] t_k[0] = 1
            WQ, WK = WQ + [[1, 0, 0]], WK + [[1, 0, 0]]
        heads.append(_head(WQ, WK))
    return Attention(tuple(heads), "softmax", Integer(0))


@pytest.mark.parametrize("seed", range(6))
def test_random_rotation_layers_share_as_the_general_path_and_the_values(seed, spy):
    rng = random.Random(seed)
    n = rng.choice([6, 8, 12])
    layer = _random_cyclic_layer(rng, n, rng.randint(2, 6))
    tokens = _circle(n, shift=rng.randint(0, n - 1))
    heads = list(range(len(layer.heads)))
    S = _same_as_general(layer, tokens, heads)
    assert spy[0] is not None  # the fast path decided
    _check_structure(S, layer, tokens, heads)


def test_near_equal_rotations_are_told_apart(spy):
    """Two heads whose angles differ by 2^-30 (pi): no row class and no score in common except
    those equal in value (none here), and the fast path decided it."""
    n = 8
    layer = Attention((_head(*_rot(Rational(2, 8))), _head(*_rot(Rational(2, 8), tiny=Rational(1, 2**30)))),
                      "softmax", Integer(0))
    tokens = _circle(n)
    S = _same_as_general(layer, tokens, [0, 1])
    assert spy[0] is not None
    assert not set(S.cls[0].tolist()) & set(S.cls[1].tolist())
    assert not set(S.ids[S.cls[0]].ravel().tolist()) & set(S.ids[S.cls[1]].ravel().tolist())
    _check_structure(S, layer, tokens, [0, 1])


def test_tokens_with_rational_entries_and_the_rotation_counts(spy):
    """``n = 8`` tokens at ``2 pi j / 8``: four of them are rational points (SymPy evaluates
    ``sin``, ``cos`` there), whose exponents come from the lifts ``m L / 2``; rotations by every
    multiple of ``2 pi / 8``: ``n`` classes, ``n / 2 + 1`` scores, one normaliser."""
    n = 8
    layer = Attention(tuple(_head(*_rot(Rational(2 * m, n), const=False)) for m in range(n)), "softmax", Integer(0))
    tokens = _circle(n, shift=0, const=False)
    assert tokens[0][2] == 1 and tokens[1][4] == -1
    S = _same_as_general(layer, tokens, list(range(n)))
    assert spy[0] is not None
    assert (len(S.class_rep), len(S.score_rep), len(S.group_rep)) == (n, n // 2 + 1, 1)
    _check_structure(S, layer, tokens, list(range(n)))


@pytest.mark.parametrize("case", ["reflection", "token-off-circle", "second-frequency", "mixed"])
def test_layers_outside_the_hypotheses_are_declined(case, spy):
    """The fast path returns None and the general path decides (and agrees with the values)."""
    n = 8
    tokens = _circle(n)
    heads = [_head(*_rot(Rational(2, 8)))]
    if case == "reflection":  # beta_{++} != 0: the score depends on e_j + e_k
        phi = Rational(2, 8)
        heads.append(_head([[0, cospi(phi), sinpi(phi)], [0, sinpi(phi), -cospi(phi)]], [[0, 1, 0], [0, 0, 1]]))
    elif case == "token-off-circle":
        tokens[1][3] = sinpi(Rational(2 * 4, n) + Rational(1, 2**20))  # one sine moved, its cosine not
    elif case == "second-frequency":
        tokens[2][5] = cospi(Rational(4 * 6, n))  # token 5's cosine at twice its angle
    else:  # a head reading the constant row against the circle: beta_{0+} != 0
        heads.append(_head([[1, 0, 0]], [[0, 1, 0]]))
    layer = Attention(tuple(heads), "softmax", Integer(0))
    hs = list(range(len(heads)))
    S = _same_as_general(layer, tokens, hs)
    assert spy and spy[0] is None
    _check_structure(S, layer, tokens, hs)


def test_named_constants_of_equal_value_do_not_share(spy):
    """``A`` and ``A2`` (another name, the same value when substituted) make two families whose
    scores are never merged, as in the general path."""
    A2 = Symbol("A2_ss", positive=True)
    n = 6
    layer = Attention((_head(*_rot(Rational(2, 6), c=A)), _head(*_rot(Rational(2, 6), c=A2))), "softmax", Integer(0))
    S = _same_as_general(layer, _circle(n), [0, 1])
    assert spy[0] is not None
    ids0, ids1 = set(S.ids[S.cls[0]].ravel().tolist()), set(S.ids[S.cls[1]].ravel().tolist())
    assert not ids0 & ids1  # (no score is 0 here: cos(2 pi m / 6) never vanishes)


# ------------------------------------------------------------------------------------------
# a tampered [SL26] model


@pytest.fixture(scope="module")
def sl26():
    from symbounds.papers import shi_liao as sl

    K = sl.constants(sl.Instance(d=2, C_H=1, B=1, eps="19/50", target="sin(x1+x2)/2"))
    model = sl.build(K)
    st = model.structure()
    layer = model.layers[0]
    heads = [h for h in range(len(layer.heads)) if st.constant_heads.get((0, h)) and (0, h) not in st.silent_heads]
    return K, model, heads


def _first_layer_rows(model):
    rows = sorted({c for hd in model.layers[0].heads for W in (hd.W_Q, hd.W_K) for row in W
                   for c, v in enumerate(row) if not is_exact_zero(v)})
    return rows


def test_sl26_first_layer_takes_the_fast_path(sl26, spy):
    K, model, heads = sl26
    layer, tokens = model.layers[0], model.embedding.base
    S = _same_as_general(layer, tokens, heads)
    assert spy[0] is not None
    assert (len(S.class_rep), len(S.score_rep), len(S.group_rep)) == (K.P, K.P // 2 + 1, 1)


@pytest.mark.parametrize("where", ["token", "head"])
def test_tampered_sl26_weight_is_not_shared(sl26, spy, where):
    """One weight changed by ``2^-20 pi`` in its angle: a token's sine (that token's rows are no
    longer rotations of the others') or one entry of a head's ``W_Q`` (that head is no longer a
    rotation).  The fast path declines, the structure is the general path's, and the rows and
    scores that were equal before the change are now apart."""
    K, model, heads = sl26
    layer = model.layers[0]
    tokens = [list(row) for row in model.embedding.base]
    P = K.P
    rs = _first_layer_rows(model)
    if where == "token":
        j = 5
        tokens[rs[0]][j] = sinpi(Rational(2 * (j + 1), P) + Rational(1, 2**20))
    else:
        h = heads[7]
        hd = layer.heads[h]
        WQ = [list(row) for row in hd.W_Q]
        c = next(c for c in rs if not is_exact_zero(WQ[0][c]))
        arg = WQ[0][c].args[0] / sympy.pi
        WQ[0][c] = type(WQ[0][c])(sympy.pi * (arg + Rational(1, 2**20)))
        new = type(hd)(tuple(tuple(r) for r in WQ), hd.W_K, hd.W_V, hd.W_O)
        layer = dataclasses.replace(layer, heads=layer.heads[:h] + (new,) + layer.heads[h + 1:])
    S = _same_as_general(layer, tokens, heads)
    assert spy[0] is None
    a0 = S.index[heads[0]]
    if where == "token":
        # before: s_0[j, j] = s_0[j + 1, j + 1] (= M, the same point); now t_5's norm is not 1
        assert S.ids[S.cls[a0, 5], 5] != S.ids[S.cls[a0, 6], 6]
        assert S.ids[S.cls[a0, 6], 6] == S.ids[S.cls[a0, 7], 7]
    else:
        a = S.index[heads[7]]
        # head 7's rows that read the changed weight (t_j[c] != 0) are no other head's rows (the
        # others' query functionals have norm M, those rows' do not)
        others = {int(x) for b in range(len(heads)) if b != a for x in S.cls[b]}
        moved = [j for j in range(P) if not is_exact_zero(tokens[c][j])]
        assert len(moved) >= P - 2 and not {int(S.cls[a, j]) for j in moved} & others


# ------------------------------------------------------------------------------------------
# the helpers


def test_equal_rows_are_labelled_alike_even_through_a_hash_collision():
    rng = np.random.default_rng(1)
    M = rng.integers(0, 3, size=(40, 5))
    M[7] = M[3]
    labels, reps = shared_cyclic._equal_rows(M)
    rows = [tuple(r) for r in M.tolist()]
    for p in range(len(rows)):
        for q in range(p):
            assert (labels[p] == labels[q]) == (rows[p] == rows[q])
    assert all(labels[r] == g for g, r in enumerate(reps))
    # two different rows with one hash: a + d with d . w = 0 (mod 2^64)
    w = np.random.default_rng(20261202).integers(1, 2**62, size=3, dtype=np.int64)
    a = np.array([5, 6, 7], np.int64)
    d = np.array([w[1], -w[0], 0], np.int64)
    C = np.stack([a, a + d, a])
    with np.errstate(over="ignore"):
        assert ((C[0] * w).sum() == (C[1] * w).sum())
    labels, _ = shared_cyclic._equal_rows(C)
    assert labels[0] == labels[2] != labels[1]


def test_multisets_and_dense_codes():
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 4, size=(30, 6))
    ids[5] = ids[2][::-1]
    key = shared_cyclic._multisets(ids, 4)
    for p in range(30):
        for q in range(p):
            assert (key[p] == key[q]).all() == (sorted(ids[p]) == sorted(ids[q]))
    wide = shared_cyclic._multisets(ids, 10**6)  # the sorted rows when the count table is large
    assert (wide == np.sort(ids, axis=1)).all()
    x = rng.integers(0, 50, size=(7, 9))
    for size in (50, 1 << 25):
        codes, inv = shared_cyclic._dense(x, size)
        assert (codes == np.unique(x)).all() and (codes[inv] == x).all()


def _canonical(elems, L, width):
    """Canonical arrays [N, 9, width] of ``elems[h] = {pair index: {exponent: (re, im)}}``."""
    N = len(elems)
    E = np.zeros((N * 9, width), np.int64)
    R = np.zeros((N * 9, width), np.int64)
    I = np.zeros((N * 9, width), np.int64)
    for h, el in enumerate(elems):
        for p, d in el.items():
            for t, (e, (r, i)) in enumerate(sorted(d.items())):
                E[h * 9 + p, t], R[h * 9 + p, t], I[h * 9 + p, t] = e, r, i
    return tuple(A.reshape(N, 9, width) for A in ss._canon(E, R, I, L, width))


def test_heads_match_only_when_all_three_betas_shift_together():
    """``beta_{+-}``, ``beta_{-+}``, ``beta_{00}`` of a head against a reference (``X^1``, ``X^-1``,
    ``1``): shifted by ``a = 3`` together it matches with ``a = 3``; with ``beta_{-+}`` scaled by 2,
    shifted the other way, or ``beta_{00}`` changed it does not; a shift by ``a = 8 = L/2`` shows as
    the factor ``i`` (exponent 1 + 8 reduces to 1 with ``X^8 = i``)."""
    L = 16
    pm, mp, zz = 5, 7, 0
    ref = {pm: {1: (1, 0)}, mp: {15: (1, 0)}, zz: {0: (1, 0)}}
    heads = [
        ref,
        {pm: {4: (1, 0)}, mp: {12: (1, 0)}, zz: {0: (1, 0)}},  # a = 3
        {pm: {4: (1, 0)}, mp: {12: (2, 0)}, zz: {0: (1, 0)}},  # beta_{-+} twice
        {pm: {4: (1, 0)}, mp: {14: (1, 0)}, zz: {0: (1, 0)}},  # beta_{-+} shifted by -1
        {pm: {4: (1, 0)}, mp: {12: (1, 0)}, zz: {0: (2, 0)}},  # beta_{00} changed
        {pm: {1: (0, 1)}, mp: {7: (1, 0)}, zz: {0: (1, 0)}},  # a = 8: i X, X^{-9} = X^7
    ]
    cE, cR, cI = _canonical(heads, L, 2)
    found = shared_cyclic._match(0, np.arange(len(heads)), cE, cR, cI, pm, mp, zz, L, ss._canon)
    assert found.tolist() == [0, 3, -1, -1, -1, 8]
