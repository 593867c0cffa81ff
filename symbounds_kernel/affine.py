"""A softmax attention layer with constant scores, on ``Z = A + sum_i x_i B_i``, in ``O(H n)`` rows.

With constant weights ``pi_h[j, k] = e_jk / t_j`` (``e_jk = exp(s_jk)``, ``t_j = sum_k e_jk``,
``s_jk = <q_j, kappa_k>``, ``q_j = W_Q z_j / tau``, ``kappa_k = W_K z_k``) the layer is affine:
column ``j`` of its output is ``rho z_j + sum_h sum_k W_O W_V Z e_k pi_h[j, k]``, for ``Z`` each of
``A, B_1, .., B_d``.  Two facts make it cheaper than every head's ``n x n`` scores:

* **values of small support**: only the columns ``k`` where a row that ``W_V`` reads is non-zero
  in ``A`` or some ``B_i`` contribute (exactly: the others are exact zeros), so a head needs the
  numerators ``e_jk`` of those columns only;
* **shared normalisers**: ``t_j`` depends on the head only through ``q_j`` and the keys.  Rows of
  any head with the same ``W_K`` whose query balls lie inside one ball ``Q`` (checked with
  ``contains``, coordinatewise) take ``t(Q) = sum_k exp(<Q, kappa_k>)``, which by ball arithmetic
  contains ``t_j`` of each of them.  ``Q`` is the first such row's query widened by
  ``WIDEN`` times its size; rows are matched to it by their midpoints rounded to ``GRID`` bits
  (a name only: the containment decides).

A model file rounds each head's weights on its own, so equal queries are never exactly equal;
the widening, about ``2^-112`` of the query, changes the scores by ``2^-112 |q| |kappa|``.
"""

from flint import arb, arb_mat

WIDEN = arb(2) ** -112
GRID = 2**40


def _mat(rows):
    return arb_mat([[arb(v.numerator) / v.denominator for v in r] for r in rows])


def _support(Z):
    """For each row, the columns where some matrix of ``Z`` is not exactly 0."""
    rows = [set() for _ in range(Z[0].nrows())]
    for M in Z:
        for r, row in enumerate(M.tolist()):
            rows[r] |= {k for k, v in enumerate(row) if not v.is_zero()}
    return rows


def affine_softmax(layer, A, B, full):
    """``(A', B')`` of the layer (a softmax one); ``full(WQ, WK, WV, WO)`` gives ``(OV Z E^T / t)``
    for every ``Z`` of ``[A] + B`` for a head whose values are read from many columns."""
    _, _, skip, tau, heads, _ = layer
    Z, n = [A] + B, A.ncols()
    rho, inv_tau = arb(skip.numerator) / skip.denominator, arb(tau.denominator) / tau.numerator
    out = [M * rho for M in Z]
    support, keys, classes = _support(Z), {}, {}
    for WQ, WK, WV, WO in heads:
        cols = sorted(set().union(*(support[c] for row in WV for c, w in enumerate(row) if w)))
        if not cols:  # the values are exactly 0
            continue
        if 4 * len(cols) > n:
            parts = full(WQ, WK, WV, WO)
        else:
            wk = tuple(map(tuple, WK))
            if wk not in keys:
                keys[wk] = (len(keys), _mat(WK) * A)
            wk, K = keys[wk]
            Q = (_mat(WQ) * A * inv_tau).transpose()
            Ks = arb_mat([[K[c, k] for k in cols] for c in range(K.nrows())])
            num = (Q * Ks).tolist()  # n x |cols| scores
            W = [[None] * n for _ in cols]
            for j, (q, row) in enumerate(zip(Q.tolist(), num)):
                t = _normaliser(classes, wk, q, K)
                for i, s in enumerate(row):
                    W[i][j] = s.exp() / t
            OV = _mat(WO) * _mat(WV)
            W = arb_mat(W)
            parts = [OV * arb_mat([[M[r, k] for k in cols] for r in range(M.nrows())]) * W for M in Z]
        out = [o + p for o, p in zip(out, parts)]
    return out[0], out[1:]


def _normaliser(classes, wk, q, K):
    """A ball containing ``sum_k exp(<q', kappa_k>)`` for every query ``q'`` in the ball ``q``."""
    key = (wk,) + tuple(round(float(v) * GRID) for v in q)
    Q, t = classes.get(key, (None, None))
    if Q is None or not all(a.contains(b) for a, b in zip(Q, q)):
        size = max((abs(v).upper() for v in q), default=arb(0)) + arb(2) ** -200
        Q = [v + arb(0, (WIDEN * size).upper()) for v in q]
        t = sum((s.exp() for s in (arb_mat([Q]) * K).entries()), arb(0))
        classes[key] = (Q, t)
    return t
