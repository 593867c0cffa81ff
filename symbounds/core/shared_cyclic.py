"""A fast path of the exact sharing (shared_softmax.py) for tokens on one circle: every score a
function of one exponent, proved from the weights, so one canonical form per distinct exponent.

The setting is that of shared_softmax.py: exact forms in ``A = Q(i)[X] / (X^{L/2} - i)`` (the
canonical form ring), ``zeta = exp(i pi / L)`` the image of ``X``.  Suppose the tokens read are

    t_j = v_0 + v_+ X^{e_j} + v_- X^{-e_j}          (v_0, v_+, v_- in Q(i)^r fixed, e_j in Z / 2L)

(positions ``(sin theta_j, cos theta_j)`` are ``v_+ = (-i/2, 1/2)``, ``v_- = (i/2, 1/2)``, ``e_j =
theta_j L / pi``).  With ``beta^h_{ab} = v_a^T B_h v_b`` the score is, in ``A``,

    s_h[j, k] = t_j^T B_h t_k = sum_{a, b in {0, +, -}} beta^h_{ab} X^{a e_j + b e_k}.

If ``beta^h_{ab} = 0`` except for ``(+, -)``, ``(-, +)``, ``(0, 0)``, and, for a reference head
``*`` of the same monomial (a *family*), ``beta^h_{+-} = X^{a_h} beta^*_{+-}``, ``beta^h_{-+} =
X^{-a_h} beta^*_{-+}``, ``beta^h_{00} = beta^*_{00}``, then

    s_h[j, k] = Phi(a_h + e_j - e_k),    Phi(D) = beta^*_{00} + beta^*_{+-} X^D + beta^*_{-+} X^{-D},

an identity in ``A`` (each step is ring arithmetic).  So the canonical form of every score is that
of ``Phi`` at one exponent ``D`` in ``Z / 2L``: at most ``2L`` canonical forms per family instead
of one per (head, row, key), and the rest is integer arithmetic on exponents.  Every hypothesis
is checked exactly (the tokens' decomposition token by token, the zeros and shifts of every
``beta`` on canonical forms); when one fails, :func:`structure` returns None and the general
path runs.  The partition of the scores is the one of the general path (the same canonical forms
in ``A``); the row classes are rows of equal score ids (rows with equal query functionals among
them).  [SL26]'s first layer is this case: ``P + 2`` rotations ``W_Q^h`` of the positions, one
family, ``e_j = 2 (j + 1) L / P``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["structure"]

MAX_FAMILIES = 16
_BIG = 2**62
_PAIRS = [(a, b) for a in range(3) for b in range(3)]  # 0: v_0, 1: v_+, 2: v_-
_KEEP = {(1, 2): "pm", (2, 1): "mp", (0, 0): "00"}


def _template(T, L):
    """``(Vr, Vi)``, integer arrays ``[3, r]`` (``v_0, v_+, v_-`` over the tokens' denominator),
    read off the first token with an exponent ``e`` other than ``0`` and ``L`` (where ``X^e`` and
    ``X^{-e}`` differ), or None.  ``T = (E, R, I)``: the tokens' terms ``[r, n, Tt]``."""
    TE, TR, TI = T
    two = 2 * L
    live = (TR != 0) | (TI != 0)
    usable = live & ((2 * TE) % two != 0)
    js = np.flatnonzero(usable.any(axis=(0, 2)))
    if not len(js):
        return None
    j = int(js[0])
    x, t = (int(i[0]) for i in np.nonzero(usable[:, j, :]))
    e0 = int(TE[x, j, t])
    Vr = np.zeros((3, TE.shape[0]), np.int64)
    Vi = np.zeros((3, TE.shape[0]), np.int64)
    for x in range(TE.shape[0]):
        for t in np.flatnonzero(live[x, j]):
            e = int(TE[x, j, t])
            a = {0: 0, e0: 1, (-e0) % two: 2}.get(e)
            if a is None:
                return None  # another frequency
            Vr[a, x], Vi[a, x] = TR[x, j, t], TI[x, j, t]
    return Vr, Vi


def _token_exponents(T, Vr, Vi, L, canon):
    """``e_j`` for every token with ``t_j = v_0 + v_+ X^{e_j} + v_- X^{-e_j}`` in ``A`` (checked
    entry by entry on canonical forms), or None.  The candidates for ``e_j`` are read off the
    token's own exponents: ``X^e`` reduces to ``X^{e mod L/2}``, so ``e`` is one of the lifts
    ``+-e' + m L/2`` of an exponent ``e'`` it shows (or ``m L/2`` when none shows)."""
    TE, TR, TI = T
    r, n, Tt = TE.shape
    half, two = L // 2, 2 * L
    W = max(3, Tt)
    want = tuple(A.reshape(r, n, W) for A in canon(*(A.reshape(r * n, Tt) for A in T), L, W))
    e = np.full(n, -1, np.int64)
    cands = [np.full(n, m * half, np.int64) for m in range(4)]
    cands += [(s * TE[x, :, t] + m * half) % two for x in range(r) for t in range(Tt) for s in (1, -1)
              for m in range(4)]
    for cand in cands:
        todo = np.flatnonzero(e < 0)
        if not len(todo):
            break
        c = cand[todo]
        E = np.broadcast_to(np.stack([np.zeros_like(c), c, -c], axis=1) % two, (r, len(todo), 3))
        R = np.broadcast_to(Vr.T[:, None, :], (r, len(todo), 3))
        I = np.broadcast_to(Vi.T[:, None, :], (r, len(todo), 3))
        got = canon(*(np.ascontiguousarray(A).reshape(r * len(todo), 3) for A in (E, R, I)), L, W)
        ok = _equal(*(A.reshape(r, len(todo), W) for A in got), *(A[:, todo] for A in want)).all(axis=0)
        e[todo[ok]] = c[ok]
    return None if (e < 0).any() else e


def structure(T, Bm, mono_of, heads, L, canon, intern, Structure):
    """The :class:`~symbounds.core.shared_softmax.Structure` of the layer by the cyclic fast path,
    or None when a hypothesis (module docstring) does not hold.

    ``T``: the tokens as integer batches ``(E, R, I)`` of shape ``[r, n, Tt]``; ``Bm``: the heads' ``B_h`` as integer
    batches ``(E, R, I)`` of shape ``[H, r, r, T]`` over one denominator; ``mono_of[a]``: the index
    of head ``a``'s monomial ``c_Q c_K``; ``canon``, ``intern``: shared_softmax's canonical rows and
    interning."""
    r, n = T[0].shape[:2]
    H = len(heads)
    two = 2 * L
    V = _template(T, L)
    if V is None:
        return None
    Vr, Vi = V
    if max(int(np.abs(Vr).max()), int(np.abs(Vi).max())) >= 2**30:
        return None
    e = _token_exponents(T, Vr, Vi, L, canon)
    if e is None:
        return None
    BE, BR, BI = Bm
    Tb = BE.shape[-1]
    # W[a, b, x, y] = v_a[x] v_b[y]; beta^h_{ab} = sum_{x, y} W[a, b, x, y] B_h[x][y]
    Wr = Vr[:, None, :, None] * Vr[None, :, None, :] - Vi[:, None, :, None] * Vi[None, :, None, :]
    Wi = Vr[:, None, :, None] * Vi[None, :, None, :] + Vi[:, None, :, None] * Vr[None, :, None, :]
    bw = max(int(np.abs(Wr).max(initial=0)), int(np.abs(Wi).max(initial=0)))
    bb = max(int(np.abs(BR).max(initial=0)), int(np.abs(BI).max(initial=0)))
    if 4 * bw * bb * r * r * Tb >= _BIG:
        return None
    w = lambda A: A[None, :, :, :, :, None]  # [1, a, b, x, y, 1]
    b = lambda A: A[:, None, None, :, :, :]  # [H, 1, 1, x, y, T]
    R = w(Wr) * b(BR) - w(Wi) * b(BI)
    I = w(Wr) * b(BI) + w(Wi) * b(BR)
    E = np.broadcast_to(b(BE), R.shape)
    width = r * r * Tb
    E, R, I = (np.ascontiguousarray(A).reshape(H * 9, width) for A in (E, R, I))
    cE, cR, cI = (A.reshape(H, 9, width) for A in canon(E, R, I, L, width))
    nonzero = (cR != 0) | (cI != 0)  # [H, 9, width]
    for p, ab in enumerate(_PAIRS):
        if ab not in _KEEP and nonzero[:, p].any():
            return None
    pm, mp, zz = _PAIRS.index((1, 2)), _PAIRS.index((2, 1)), _PAIRS.index((0, 0))
    wk = max(1, int(nonzero.any(axis=(0, 1)).nonzero()[0].max() + 1) if nonzero.any() else 1)
    cE, cR, cI = cE[..., :wk], cR[..., :wk], cI[..., :wk]

    family = np.full(H, -1, np.int64)
    shift = np.zeros(H, np.int64)
    refs = []
    while (family < 0).any():
        if len(refs) == MAX_FAMILIES:
            return None
        ref = int(np.flatnonzero(family < 0)[0])
        cand = np.flatnonzero((family < 0) & (mono_of == mono_of[ref]))
        found = _match(ref, cand, cE, cR, cI, pm, mp, zz, L, canon)
        family[cand[found >= 0]] = len(refs)
        shift[cand[found >= 0]] = found[found >= 0]
        refs.append(ref)
        assert family[ref] == len(refs) - 1 and shift[ref] == 0

    # row (h, j) scores Phi_f(kappa - e_k), kappa = a_h + e_j: one provisional class per (f, kappa)
    F = len(refs)
    kcodes, kinv = _dense(family[:, None] * two + (shift[:, None] + e[None, :]) % two, F * two)
    kf, kk = kcodes // two, kcodes % two
    # the (family, exponent) codes of each provisional class's scores
    dcodes, dinv = _dense(kf[:, None] * two + (kk[:, None] - e[None, :]) % two, F * two)
    df, dd = dcodes // two, dcodes % two
    ref_of = np.array(refs, np.int64)[df]
    # Phi_f(D) = beta*_00 + beta*_{+-} X^D + beta*_{-+} X^{-D}, as terms before canonicalising
    parts = [(zz, 0), (pm, 1), (mp, -1)]
    PE = np.concatenate([(cE[ref_of, p] + s * dd[:, None]) % two for p, s in parts], axis=1)
    PR = np.concatenate([cR[ref_of, p] for p, _ in parts], axis=1)
    PI = np.concatenate([cI[ref_of, p] for p, _ in parts], axis=1)
    fE, fR, fI = canon(PE, PR, PI, L, 3 * wk)
    coeffs = np.concatenate([fR, fI], axis=1)
    mono = np.where((coeffs != 0).any(axis=1), mono_of[ref_of], 0)
    keys = np.concatenate([mono[:, None], fE, fR, fI], axis=1)
    score_of = intern(keys, {}, [], lambda f: f)  # score id of each (family, exponent) code
    kids = score_of[dinv]  # [provisional classes, n]
    # row classes: rows of equal score ids
    kcls, _ = _equal_rows(kids)
    C = int(kcls.max()) + 1
    cls = kcls[kinv]
    ids = np.empty((C, n), np.int64)
    ids[kcls] = kids
    class_rep = _members(cls, n)
    score_rep = _members(ids, n)
    group, group_rep = _equal_rows(_multisets(ids, len(score_rep)))
    return Structure(heads, cls, ids, class_rep, score_rep, group, group_rep)


def _equal_rows(M: np.ndarray):
    """``(labels, reps)``: rows of ``M`` get equal labels ``0, 1, ...`` exactly when they are equal;
    ``reps[g]`` is a row labelled ``g``.  Rows are bucketed by a random linear hash (equal rows,
    equal hash) and every row is then compared with its bucket's first row; a bucket holding
    two different rows (a collision) falls back to sorting the rows themselves."""
    M = np.ascontiguousarray(M)
    w = np.random.default_rng(20261202).integers(1, 2**62, size=M.shape[1], dtype=np.int64)
    with np.errstate(over="ignore"):
        h = (M * w).sum(axis=1)  # int64 arithmetic wraps: a hash, never trusted alone
    _, first, labels = np.unique(h, return_index=True, return_inverse=True)
    labels = labels.ravel()
    if not (M == M[first[labels]]).all():
        void = M.view(np.dtype((np.void, M.dtype.itemsize * M.shape[1]))).ravel()
        _, first, labels = np.unique(void, return_index=True, return_inverse=True)
        labels = labels.ravel()
    return labels, [int(f) for f in first]


def _multisets(ids: np.ndarray, m: int) -> np.ndarray:
    """Rows that are equal exactly when the rows of ``ids`` (labels in ``[0, m)``) are equal as
    multisets: the label counts when that table is small, else the sorted rows."""
    C, n = ids.shape
    if C * m > 4 * C * n:
        return np.sort(ids, axis=1)
    flat = (np.arange(C, dtype=np.int64)[:, None] * m + ids).ravel()
    return np.bincount(flat, minlength=C * m).reshape(C, m)


def _dense(x: np.ndarray, size: int):
    """``(codes, inverse)``: the distinct values of ``x`` (integers in ``[0, size)``), ascending,
    and the index of each entry's value among them (``x``'s shape)."""
    if size > 1 << 24:
        codes, inv = np.unique(x, return_inverse=True)
        return codes, inv.reshape(x.shape)
    present = np.zeros(size, bool)
    present[x] = True
    codes = np.flatnonzero(present)
    rank = np.empty(size, np.int64)
    rank[codes] = np.arange(len(codes))
    return codes, rank[x]


def _members(labels: np.ndarray, n: int) -> list:
    """One position ``(p // n, p % n)`` of each label ``0 .. m-1`` of ``labels`` (all present)."""
    flat = labels.ravel()
    pos = np.empty(int(flat.max()) + 1, np.int64)
    pos[flat] = np.arange(flat.size, dtype=np.int64)  # some entry holding the label
    return [(int(p // n), int(p % n)) for p in pos]


def _match(ref, cand, cE, cR, cI, pm, mp, zz, L, canon):
    """For each head in ``cand``: the shift ``a`` (in ``Z / 2L``) with ``beta^h_{+-} = X^a
    beta^ref_{+-}``, ``beta^h_{-+} = X^{-a} beta^ref_{-+}``, ``beta^h_{00} = beta^ref_{00}`` (on
    canonical forms), or -1."""
    half, two = L // 2, 2 * L
    wk = cE.shape[-1]
    N = len(cand)
    found = np.full(N, -1, np.int64)
    same00 = _equal(cE[cand, zz], cR[cand, zz], cI[cand, zz], cE[ref, zz], cR[ref, zz], cI[ref, zz])
    nz = lambda h, p: bool((cR[h, p] != 0).any() or (cI[h, p] != 0).any())
    if nz(ref, pm):
        p, sign = pm, 1
    elif nz(ref, mp):
        p, sign = mp, -1
    else:  # both zero: the scores do not depend on the exponent
        ok = same00 & ~((cR[cand][:, [pm, mp]] != 0) | (cI[cand][:, [pm, mp]] != 0)).any(axis=(1, 2))
        found[ok] = 0
        return found
    e_ref = int(cE[ref, p, 0])
    trials = [(tt, m) for tt in range(wk) for m in range(4)]
    for tt, m in [(None, 0)] + trials:
        todo = (found < 0) & same00
        if not todo.any():
            break
        idx = np.flatnonzero(todo)
        hs = cand[idx]
        if tt is None:
            a = np.zeros(len(hs), np.int64)
        else:
            a = (sign * (cE[hs, p, tt] - e_ref + m * half)) % two
        ok = np.ones(len(hs), bool)
        for q, s in ((pm, 1), (mp, -1)):
            sE = (np.broadcast_to(cE[ref, q], (len(hs), wk)) + s * a[:, None]) % two
            sR = np.broadcast_to(cR[ref, q], (len(hs), wk)).copy()
            sI = np.broadcast_to(cI[ref, q], (len(hs), wk)).copy()
            sE, sR, sI = canon(np.ascontiguousarray(sE), sR, sI, L, wk)
            ok &= _equal(cE[hs, q], cR[hs, q], cI[hs, q], sE, sR, sI)
        found[idx[ok]] = a[ok]
    return found


def _equal(E1, R1, I1, E2, R2, I2) -> np.ndarray:
    """Row-wise equality of canonical forms (zero coefficients' exponents ignored)."""
    z1 = (R1 == 0) & (I1 == 0)
    z2 = (R2 == 0) & (I2 == 0)
    same = ((E1 == E2) | (z1 & z2)) & (R1 == R2) & (I1 == I2)
    return same.all(axis=-1)
