"""Repeated softmax weights of input-independent attention heads, found and proved from the weights.

An input-independent head of the first layer scores tokens ``t_j`` (the embedding's rows that no
input reaches) with ``score_h[j, k] = t_j^T B_h t_k`` where ``B_h = W_Q^hT W_K^h / tau``.  When the
weights are built from rationals, named constants and ``sin(pi q)``, ``cos(pi q)`` (``q``
rational), every such score is, exactly,

    c_Q c_K / tau * sum_e a_e zeta^e,       zeta = exp(i pi / L),  a_e in Q(i),  e in Z / 2L,

with ``c_Q``, ``c_K`` products of named constants common to all of ``W_Q`` (resp. ``W_K``) and
``L`` the common denominator of every ``q`` (``sin(pi q) = (zeta^{qL} - zeta^{-qL}) / 2i``,
``cos(pi q) = (zeta^{qL} + zeta^{-qL}) / 2``).  The map sending a formal sum ``sum_e a_e X^e`` of
the group algebra ``Q(i)[Z / 2L]`` to ``sum_e a_e zeta^e`` is a ring homomorphism, and it
factors through the quotient by ``X^{L/2} = i`` (``L`` even; ``zeta^{L/2} = exp(i pi / 2) = i``),
whose elements have the canonical form ``sum_{0 <= e < L/2} a_e X^e``.  So two scores with
equal monomials ``c_Q c_K`` (the same product of the same named constants, compared as SymPy
expressions: two constants of equal value but different names count as different) and equal
canonical forms (same exponents, same coefficients after reducing and collecting terms) are
equal numbers; a formal sum that is zero is the score 0 whatever its monomial.  That is the only equality used here: it is decided on integers, never on
floating-point or ball values, and a near-equality (two angles differing by 2^-100) gives
different formal sums, hence different scores.  (The converse does not hold -- a formal sum may
vanish in value without being formally zero -- which only costs sharing, never soundness.)

What is shared, for one attention layer (:func:`structure`):

* *row classes*: rows ``(h, j)`` whose query functionals ``u = B_h^T t_j`` are formally equal
  have equal score rows, across heads;
* *score ids*: formally equal scores ``u^T t_k`` get one id; each distinct score has one
  exponential per context;
* *normaliser groups*: row classes whose multisets of score ids are equal (a row that is an exact
  permutation of another) share one softmax normaliser ``sum_k exp(score - m)``.

The softmax weight is then ``pi_h[j, k] = exp(s_{id} - m) / N_g`` with one shift ``m`` for the
whole layer (the softmax does not depend on the shift).
"""

from __future__ import annotations

from fractions import Fraction
from math import lcm

import numpy as np
import sympy

__all__ = ["Structure", "structure"]

_LIMIT = 2**62


_ZERO, _HALF, _ONE = Fraction(0), Fraction(1, 2), Fraction(1)


class _NoForm(Exception):
    """A weight outside the exact trigonometric forms handled here."""


# ------------------------------------------------------------------------------------------
# Exact forms: (monomial of named constants, {q mod 2 (Fraction): (re, im) Fractions}) meaning
# monomial * sum_q (re + i im) exp(i pi q).


def _gmul(a: dict, b: dict) -> dict:
    out: dict = {}
    for qa, (ra, ia) in a.items():
        for qb, (rb, ib) in b.items():
            q = (qa + qb) % 2
            r, i = out.get(q, (Fraction(0), Fraction(0)))
            out[q] = (r + ra * rb - ia * ib, i + ra * ib + ia * rb)
    return {q: v for q, v in out.items() if v != (0, 0)}


def _gadd(a: dict, b: dict) -> dict:
    out = dict(a)
    for q, (r, i) in b.items():
        r0, i0 = out.get(q, (Fraction(0), Fraction(0)))
        out[q] = (r0 + r, i0 + i)
    return {q: v for q, v in out.items() if v != (0, 0)}


def _form(expr):
    """``(monomial, group element)`` of an exact weight, or raise :class:`_NoForm`."""
    if isinstance(expr, (int, Fraction)) or (isinstance(expr, sympy.Basic) and expr.is_Rational):
        v = Fraction(int(expr.p), int(expr.q)) if isinstance(expr, sympy.Basic) else Fraction(expr)
        return sympy.Integer(1), ({Fraction(0): (v, Fraction(0))} if v else {})
    if not isinstance(expr, sympy.Basic):
        raise _NoForm
    if expr.is_Symbol:
        return expr, {Fraction(0): (Fraction(1), Fraction(0))}
    if isinstance(expr, (sympy.sin, sympy.cos)):
        q, rest = expr.args[0].as_coeff_Mul()
        if rest is not sympy.pi or not q.is_Rational:
            raise _NoForm
        q = Fraction(int(q.p), int(q.q)) % 2
        nq = (-q) % 2
        if isinstance(expr, sympy.cos):  # (X^q + X^-q) / 2
            return sympy.Integer(1), ({q: (_ONE, _ZERO)} if q == nq else {q: (_HALF, _ZERO), nq: (_HALF, _ZERO)})
        # (X^q - X^-q) / 2i = -i/2 X^q + i/2 X^-q
        return sympy.Integer(1), ({} if q == nq else {q: (_ZERO, -_HALF), nq: (_ZERO, _HALF)})
    if expr.is_Mul:
        mono, g = sympy.Integer(1), {Fraction(0): (Fraction(1), Fraction(0))}
        for a in expr.args:
            m, h = _form(a)
            mono, g = mono * m, _gmul(g, h)
        return mono, g
    if expr.is_Add:
        mono, g = None, {}
        for a in expr.args:
            m, h = _form(a)
            if not h:
                continue
            if mono is not None and m != mono:
                raise _NoForm
            mono, g = m, _gadd(g, h)
        return (mono if mono is not None else sympy.Integer(1)), g
    if expr.is_Pow and expr.exp.is_Integer and int(expr.exp) > 0:
        m, h = _form(expr.base)
        g = {Fraction(0): (Fraction(1), Fraction(0))}
        for _ in range(int(expr.exp)):
            g = _gmul(g, h)
        return m ** expr.exp, g
    raise _NoForm


def _uniform(forms):
    """The common monomial of the nonzero entries (raise :class:`_NoForm` if they differ)."""
    mono = None
    for m, g in forms:
        if g:
            if mono is not None and m != mono:
                raise _NoForm
            mono = m
    return mono


# ------------------------------------------------------------------------------------------
# Batches of group elements as integer arrays: exponent E (in [0, 2L)), real part R, imaginary
# part I, each [..., T]; empty slots have R = I = 0.  All elements of a batch share one
# (implicit) positive denominator, so equal arrays mean equal elements.


def _to_arrays(elems, L: int):
    """Integer arrays [len(elems), T] for group dicts, and the common denominator used."""
    dens = {x.denominator for g in elems for v in g.values() for x in v}
    den = lcm(1, *dens)
    T = max([len(g) for g in elems] + [1])
    E = np.zeros((len(elems), T), np.int64)
    R = np.zeros((len(elems), T), np.int64)
    I = np.zeros((len(elems), T), np.int64)
    two = 2 * L
    for n, g in enumerate(elems):
        for t, (q, (r, i)) in enumerate(sorted(g.items())):
            if L % q.denominator:
                raise _NoForm
            rr, ii = r.numerator * (den // r.denominator), i.numerator * (den // i.denominator)
            if max(abs(rr), abs(ii)) >= 2**30:
                raise _NoForm  # the products are checked again in _mul
            E[n, t], R[n, t], I[n, t] = q.numerator * (L // q.denominator) % two, rr, ii
    return E, R, I


def _batch(elems, L: int):
    """:func:`_to_arrays` of ``elems`` with each distinct element (by identity) converted once."""
    index: dict = {}
    uniq, inv = [], np.empty(len(elems), np.int64)
    for n, g in enumerate(elems):
        u = index.get(id(g))
        if u is None:
            u = index[id(g)] = len(uniq)
            uniq.append(g)
        inv[n] = u
    return tuple(A[inv] for A in _to_arrays(uniq, L))


def _mul(X, Y, L):
    """Termwise products of broadcast batches X [..., T1] and Y [..., T2] -> [..., T1 * T2]."""
    (Ex, Rx, Ix), (Ey, Ry, Iy) = X, Y
    bx = max(int(np.abs(Rx).max(initial=0)), int(np.abs(Ix).max(initial=0)))
    by = max(int(np.abs(Ry).max(initial=0)), int(np.abs(Iy).max(initial=0)))
    if 2 * bx * by * max(1, Ex.shape[-1] * Ey.shape[-1]) * 4 >= _LIMIT:
        raise _NoForm  # the products (and their sums over a few rows) could leave int64
    E = (Ex[..., :, None] + Ey[..., None, :]) % (2 * L)
    R = Rx[..., :, None] * Ry[..., None, :] - Ix[..., :, None] * Iy[..., None, :]
    I = Rx[..., :, None] * Iy[..., None, :] + Ix[..., :, None] * Ry[..., None, :]
    shp = E.shape[:-2] + (E.shape[-2] * E.shape[-1],)
    return E.reshape(shp), R.reshape(shp), I.reshape(shp)


def _canon(E, R, I, L, width):
    """Canonical rows [N, width] of a batch [N, T]: exponents reduced to [0, L/2) by
    ``X^{L/2} = i``, terms with equal exponents collected, zero coefficients dropped, exponents
    ascending, padded with (L/2, 0, 0)."""
    N, T = E.shape
    half = L // 2
    quarter, E = E // half, E % half
    cr = np.array([1, 0, -1, 0], np.int64)[quarter]
    ci = np.array([0, 1, 0, -1], np.int64)[quarter]
    R, I = R * cr - I * ci, R * ci + I * cr
    for A in (R, I):
        if A.size and int(np.abs(A).max()) >= _LIMIT // max(T, 1):
            raise _NoForm
    order = np.argsort(E, axis=1, kind="stable")  # rows stay in order: the flat keys are sorted
    E, R, I = (np.take_along_axis(A, order, axis=1) for A in (E, R, I))
    k = (np.arange(N, dtype=np.int64)[:, None] * half + E).ravel()
    r, i = R.ravel(), I.ravel()
    oE = np.full((N, width), half, np.int64)
    oR = np.zeros((N, width), np.int64)
    oI = np.zeros((N, width), np.int64)
    if k.size == 0:
        return oE, oR, oI
    start = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    rs, is_, ks = np.add.reduceat(r, start), np.add.reduceat(i, start), k[start]
    keep = (rs != 0) | (is_ != 0)
    rs, is_, ks = rs[keep], is_[keep], ks[keep]
    rows, ex = ks // half, ks % half
    counts = np.bincount(rows, minlength=N)
    pos = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
    if counts.size and int(counts.max()) > width:
        raise AssertionError("canonical width exceeded")
    oE[rows, pos], oR[rows, pos], oI[rows, pos] = ex, rs, is_
    return oE, oR, oI


def _intern(keys: np.ndarray, table: dict, reps: list, rep_of) -> np.ndarray:
    """Global ids of the rows of ``keys`` (equal rows, equal ids), extending ``table``."""
    keys = np.ascontiguousarray(keys)
    void = keys.view(np.dtype((np.void, keys.dtype.itemsize * keys.shape[1]))).ravel()
    uniq, first, inverse = np.unique(void, return_index=True, return_inverse=True)
    gid = np.empty(len(uniq), np.int64)
    for u, (b, f) in enumerate(zip(uniq, first)):
        b = b.tobytes()
        g = table.get(b)
        if g is None:
            g = table[b] = len(reps)
            reps.append(rep_of(int(f)))
        gid[u] = g
    return gid[inverse.ravel()]


# ------------------------------------------------------------------------------------------


class Structure:
    """The exact sharing pattern of one attention layer's input-independent heads.

    ``heads``: the head indices covered; ``cls[a, j]``: row class of row ``j`` of head
    ``heads[a]``; ``ids[c, k]``: score id of key ``k`` in class ``c``; ``class_rep[c] = (a, j)``;
    ``score_rep[s] = (c, k)``; ``group[c]``: normaliser group of class ``c``; ``group_rep[g]``: a
    class of group ``g``.
    """

    def __init__(self, heads, cls, ids, class_rep, score_rep, group, group_rep):
        self.heads = tuple(heads)
        self.index = {h: a for a, h in enumerate(self.heads)}
        self.cls, self.ids = cls, ids
        self.class_rep, self.score_rep = class_rep, score_rep
        self.group, self.group_rep = group, group_rep

    def __repr__(self):
        return (f"Structure({len(self.heads)} heads x {self.cls.shape[1]} rows: {len(self.class_rep)} row "
                f"classes, {len(self.score_rep)} distinct scores, {len(self.group_rep)} normalisers)")


def structure(layer, tokens, heads, is_zero=None, chunk_rows: int = 1 << 18, cyclic: bool = True):
    """The :class:`Structure` of ``heads`` of ``layer`` (softmax) for exact ``tokens`` (a ``D x n``
    matrix whose rows read by the heads' ``W_Q``, ``W_K`` hold the exact token values), or None
    when a weight is outside the forms handled (then nothing is shared).  ``is_zero`` decides
    which weights are exactly zero (the rows read are those with a nonzero weight)."""
    if layer.kind != "softmax" or not heads:
        return None
    try:
        return _structure(layer, tokens, list(heads), is_zero or _is_zero, chunk_rows, cyclic)
    except _NoForm:
        return None


def _structure(layer, tokens, heads, is_zero, chunk_rows, cyclic=True):
    n = len(tokens[0])
    read = sorted({c for h in heads for W in (layer.heads[h].W_Q, layer.heads[h].W_K)
                   for row in W for c, v in enumerate(row) if not is_zero(v)})
    r = len(read)
    if r == 0:
        return None
    memo: dict = {}  # one exact form per distinct weight (heads and tokens repeat them)

    def form(v):
        f = memo.get(v)
        if f is None:
            f = memo[v] = _form(v)
        return f

    tok = [[form(tokens[c][j]) for j in range(n)] for c in read]
    if _uniform([f for row in tok for f in row]) not in (None, sympy.Integer(1)):
        raise _NoForm  # named constants in the tokens: keep it simple
    monos: dict = {sympy.Integer(1): 0}  # monomial c_Q c_K -> its index
    H = len(heads)
    mono_of = np.empty(H, np.int64)  # per head
    rows = max(max(len(layer.heads[h].W_Q), len(layer.heads[h].W_K)) for h in heads)
    empty = (sympy.Integer(1), {})
    fqs, fks = [], []
    for a, h in enumerate(heads):
        hd = layer.heads[h]
        fq = [[form(row[c]) for c in read] for row in hd.W_Q]
        fk = [[form(row[c]) for c in read] for row in hd.W_K]
        if len(fq) != len(fk):
            raise _NoForm
        mq = _uniform([f for row in fq for f in row])
        mk = _uniform([f for row in fk for f in row])
        # the score's monomial c_Q c_K is part of its exact form: heads whose formal sums agree
        # but whose monomials differ (M vs 1, M vs N with equal values) must not share
        mono = sympy.Integer(1) if mq is None or mk is None else mq * mk
        mono_of[a] = monos.setdefault(mono, len(monos))
        pad = [[empty] * r] * (rows - len(fq))  # zero rows: no term of the score
        fqs.extend(f[1] for row in fq + pad for f in row)
        fks.extend(f[1] for row in fk + pad for f in row)
    # exponents first in units of pi / Lw (Lw: every denominator of the weights read), then
    # in units of pi / L with L the least even common denominator of the tokens' and B_h's
    # exponents (the products may cancel a denominator of W_Q, W_K)
    Lw = 2
    for g in [f[1] for row in tok for f in row] + fqs + fks:
        for q in g:
            Lw = lcm(Lw, q.denominator)
    if Lw > 2**30:
        raise _NoForm  # exponents must stay in int64
    TE, TR, TI = _batch([f[1] for row in tok for f in row], Lw)
    Tt = TE.shape[1]
    Q = tuple(A.reshape(H, rows, r, 1, -1) for A in _batch(fqs, Lw))  # [h, a, x, 1, Tq]
    K = tuple(A.reshape(H, rows, 1, r, -1) for A in _batch(fks, Lw))  # [h, a, 1, y, Tk]
    # B_h[x][y] = sum_a W_Q[a][x] W_K[a][y], its terms collected (no reduction: "L" = 4 Lw)
    BE, BR, BI = (np.moveaxis(A, 1, 3).reshape(H * r * r, -1) for A in _mul(Q, K, Lw))
    BE, BR, BI = _canon(BE, BR, BI, 4 * Lw, BE.shape[1])
    live = (BR != 0) | (BI != 0)
    Tb = max(1, int(live.any(axis=0).nonzero()[0].max() + 1) if live.any() else 1)
    BE, BR, BI = BE[:, :Tb], BR[:, :Tb], BI[:, :Tb]
    used = np.concatenate([TE[(TR != 0) | (TI != 0)], BE[live[:, :Tb]]])
    G = int(np.gcd.reduce(np.concatenate([used, [Lw]])))
    L = lcm(2, Lw // G)
    scale = L // (Lw // G)  # an exponent e (units pi / Lw) is (e / G) * scale in units pi / L
    TE, BE = (TE // G) * scale % (2 * L), (BE // G) * scale % (2 * L)
    if L > 2**30 or L * len(heads) * n * r > 2**60:
        raise _NoForm  # exponents and flat sort keys must stay in int64
    T = tuple(A.reshape(r, n, Tt) for A in (TE, TR, TI))
    Bm = tuple(A.reshape(H, r, r, Tb) for A in (BE, BR, BI))
    if cyclic:
        from . import shared_cyclic  # noqa: PLC0415 (it reads this module's helpers)

        S = shared_cyclic.structure(T, Bm, mono_of, heads, L, _canon, _intern, Structure)
        if S is not None:
            return S

    # row classes: u_{h,j}[y] = sum_x t_j[x] B_h[x][y]
    Wu = r * Tt * Tb
    per = max(1, chunk_rows // max(1, n * r * Wu))
    cls = np.empty((H, n), np.int64)
    class_table: dict = {}
    class_rep: list = []
    class_u: list = []
    class_mono: list = []  # monomial index of each row class
    for a0 in range(0, H, per):
        a1 = min(H, a0 + per)
        Tx = tuple(A[None, :, :, None, :] for A in T)  # [1, x, j, 1, Tt]
        Bx = tuple(A[a0:a1, :, None, :, :] for A in Bm)  # [h, x, 1, y, Tb]
        E, R, I = _mul(Tx, Bx, L)  # [h, x, j, y, Tt*Tb]
        E, R, I = (np.moveaxis(A, 1, 3).reshape((a1 - a0) * n * r, Wu) for A in (E, R, I))
        E, R, I = _canon(E, R, I, L, Wu)
        keys = np.concatenate([A.reshape((a1 - a0) * n, r * Wu) for A in (E, R, I)], axis=1)
        mono = _mono_column(np.repeat(mono_of[a0:a1], n), keys[:, r * Wu:])

        def rep(f, a0=a0, keys=keys, mono=mono):
            class_u.append(keys[f])
            class_mono.append(int(mono[f]))
            return (a0 + f // n, f % n)

        keys = np.concatenate([mono[:, None], keys], axis=1)

        cls[a0:a1] = _intern(keys, class_table, class_rep, rep).reshape(a1 - a0, n)
    C = len(class_rep)
    U = np.array(class_u).reshape(C, 3, r, Wu)
    used = (U[:, 1] != 0) | (U[:, 2] != 0)  # canonical terms are packed to the left
    tu = max(1, int(used.any(axis=(0, 1)).nonzero()[0].max() + 1) if used.any() else 1)
    Uc = tuple(U[:, t, :, :tu] for t in range(3))  # [C, y, tu]
    Wu = tu

    # score ids: s_{c,k} = sum_y u_c[y] t_k[y]
    Ws = r * Wu * Tt
    per = max(1, chunk_rows // max(1, n * Ws))
    ids = np.empty((C, n), np.int64)
    score_table: dict = {}
    score_rep: list = []
    for c0 in range(0, C, per):
        c1 = min(C, c0 + per)
        Ux = tuple(A[c0:c1, :, None, :] for A in Uc)  # [c, y, 1, Wu]
        Tx = tuple(A[None, :, :, :] for A in T)  # [1, y, k, Tt]
        E, R, I = _mul(Ux, Tx, L)  # [c, y, k, Wu*Tt]
        E, R, I = (np.moveaxis(A, 1, 2).reshape((c1 - c0) * n, Ws) for A in (E, R, I))
        E, R, I = _canon(E, R, I, L, Ws)
        mono = _mono_column(np.repeat(np.asarray(class_mono[c0:c1], np.int64), n), np.concatenate([R, I], axis=1))
        keys = np.concatenate([mono[:, None], E, R, I], axis=1)
        ids[c0:c1] = _intern(keys, score_table, score_rep,
                             lambda f, c0=c0: (c0 + f // n, f % n)).reshape(c1 - c0, n)

    # normaliser groups: equal multisets of score ids (rows that are exact permutations)
    srt = np.sort(ids, axis=1)
    group_table: dict = {}
    group_rep: list = []
    group = _intern(srt, group_table, group_rep, lambda f: f)
    return Structure(heads, cls, ids, class_rep, score_rep, group, group_rep)


def _mono_column(mono: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """The monomial index of each key row, 0 (the monomial 1) for a formal sum that is zero
    (all its coefficients ``coeffs`` are 0: the value is 0 whatever the monomial)."""
    return np.where((coeffs != 0).any(axis=1), mono, 0)


def _is_zero(v) -> bool:
    if isinstance(v, sympy.Basic):
        return v.is_zero is True
    return v == 0
