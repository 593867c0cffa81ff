"""Interval softmax rows shared across the heads of one layer: the float setup in quadratic time.

The float setup of a model (:class:`symbounds.core.float_boxes.FloatBoxEvaluator`) computes the
attention weights of every input-independent head once, as intervals: for head ``h`` and query
row ``j`` the scores ``s_k = <q_j, k_k> / tau`` from an interval query ``q_j`` (``|q - c| <= r``
coordinatewise) and interval keys, then ``pi[j, k] in [E_lo / N_hi, E_hi / N_lo]``
(:func:`symbounds.core.float_boxes._softmax_interval`).  The enclosure holds for *every* query
in the box ``|q - c| <= r``: so one row's weights, computed from a box ``B``, enclose the weights
of every other row whose query box lies inside ``B`` and whose keys, scale and value columns are
the same.

The [SL26] network has ``P + 2`` first-layer heads of ``P`` rows each, but only about ``P``
different query vectors (head ``h``'s query at token ``j`` is the position of token ``j - h``).
A model file rounds every weight independently, so those queries agree only to within a few
units in the last place of their float enclosures, never exactly; :class:`SharedRows` shares
them anyway, soundly:

* the first row of a *class* is computed from its query box widened by ``delta = 2^-48 m``
  (``m`` the row's largest ``|c| + r``), a relative change of the order of ``10^-14`` in its scores;
* a later row (of any head of the layer) is served by a class only when its keys and scale are
  bitwise those of the class, its value columns are the same, and its query box is proved to lie
  inside the class's box, ``fl_up(fl_up(|c_row - c_class|) + r_row) <= R_class`` coordinatewise
  (a float comparison of upper bounds, so containment in the reals follows);
* every other row is computed on its own, exactly as without sharing.

Nothing is assumed from near-equality: the class of a row is looked up by its query
centre quantised to ``2^-50 m`` (an equal key only names a candidate), and soundness rests on the
containment test alone.  A tampered weight either still lies inside the class's box (its own
weights are then enclosed) or fails the test and is computed on its own.  With ``C`` classes
the layer costs ``C`` rows of ``n`` scores plus a comparison per row, instead of ``H n``
rows: ``O(P^2)`` for [SL26] instead of ``O(P^3)``.
"""

from __future__ import annotations

import numpy as np

from . import outward as fo

__all__ = ["SHARE_FROM_ROWS", "SharedRows", "rows_for"]

#: The fewest interval softmax rows (heads times tokens) of a layer whose rows are shared.  Below
#: it the unshared setup takes a few seconds at most (66,048 rows, 1.9 s at P = 256) and keeps
#: every row's enclosure as tight as it is computed alone (the widening below costs the default
#: certificate about 7·10^-8 of its largest bound); above it, the setup's P^3 growth dominates.
SHARE_FROM_ROWS = 1 << 18

#: The widening of a class's query box, relative to the row's magnitude ``m``.
_WIDEN = 2.0**-48
#: The key grid of the query centres, relative to ``2^e`` where ``m`` lies in ``[2^(e-1), 2^e)``.
_GRID_BITS = 50


class _Table:
    """The classes of one (keys, scale, value columns): their sorted row keys and data."""

    def __init__(self, dk: int, nk: int):
        self.key = np.empty(0, np.dtype((np.void, 8 * (dk + 1))))
        self.c = np.empty((0, dk))
        self.R = np.empty((0, dk))
        self.pc = np.empty((0, nk))
        self.pr = np.empty((0, nk))
        self.ok = np.empty(0, bool)

    def add(self, keys, c, R, pc, pr, ok):
        order = np.argsort(np.concatenate([self.key, keys]), kind="stable")
        cat = lambda a, b: np.concatenate([a, b])[order]
        self.key = cat(self.key, keys)
        self.c, self.R = cat(self.c, c), cat(self.R, R)
        self.pc, self.pr, self.ok = cat(self.pc, pc), cat(self.pr, pr), cat(self.ok, ok)

    def lookup(self, keys, c, r):
        """``(cls, known)``: the class of each row (-1: none, or its query box is not proved inside
        the class's) and whether its key names a class."""
        if self.key.size == 0:
            return np.full(keys.shape, -1), np.zeros(keys.shape, bool)
        pos = np.minimum(np.searchsorted(self.key, keys), self.key.size - 1)
        known = self.key[pos] == keys
        with np.errstate(all="ignore"):
            inside = (fo.up(fo.up(np.abs(c - self.c[pos])) + r) <= self.R[pos]).all(axis=1)
        return np.where(known & inside, pos, -1), known


class SharedRows:
    """The interval softmax rows of one attention layer's input-independent heads, shared across
    rows and heads where a query box lies inside an earlier one's (module docstring).

    ``compute(Q, K, tau, keep)`` is the unshared interval softmax
    (:func:`symbounds.core.float_boxes._softmax_interval`); :meth:`softmax` has its signature and
    meaning, and encloses, entry by entry, what ``compute`` encloses for the same rows.
    """

    def __init__(self, compute):
        self.compute = compute
        self.tables: dict = {}
        #: rows served by a class; rows computed (the first rows of classes, and rows on their own)
        self.shared = self.computed = 0

    def softmax(self, Q, K, tau, keep):
        """``(pi, ok)`` as ``compute(Q, K, tau, keep)`` for one head: ``Q`` of shape ``(1, dk, nq)``
        and ``K`` of ``(1, dk, n)``, intervals (no gradients).  Any other shape is passed on."""
        if Q.G is not None or K.G is not None or Q.c.shape[0] != 1 or K.c.shape[0] != 1:
            return self.compute(Q, K, tau, keep)
        keep = list(keep)
        ident = (K.c.tobytes(), K.r.tobytes(), K.c.shape, None if tau is None else (float(tau[0]), float(tau[1])),
                 tuple(keep))
        qc, qr = Q.c[0].T, Q.r[0].T  # (nq, dk)
        nq, dk = qc.shape
        table = self.tables.get(ident)
        if table is None:
            table = self.tables[ident] = _Table(dk, len(keep))
        keys, good = _row_keys(qc, qr)
        cls, known = table.lookup(keys, qc, qr)
        cls = np.where(good, cls, -1)
        fresh = np.flatnonzero((cls < 0) & good & ~known)
        firsts = 0
        if fresh.size:  # new classes: the first row of each new key, from its widened box
            first = fresh[np.unique(keys[fresh], return_index=True)[1]]
            R = fo.up(qr[first] + _widening(qc[first], qr[first]))
            npi, nok = self._rows(qc[first], R, K, tau, keep)
            table.add(keys[first], qc[first], R, npi.c[0], npi.r[0], nok[0])
            firsts = first.size
            self.computed += firsts
            cls, _ = table.lookup(keys, qc, qr)  # every row again: adding re-sorts the classes
            cls = np.where(good, cls, -1)
        pc, pr = np.empty((nq, len(keep))), np.empty((nq, len(keep)))
        ok = np.empty(nq, bool)
        hit = cls >= 0
        pc[hit], pr[hit], ok[hit] = table.pc[cls[hit]], table.pr[cls[hit]], table.ok[cls[hit]]
        self.shared += int(hit.sum()) - firsts
        alone = np.flatnonzero(~hit)
        if alone.size:  # outside every class's box: computed on their own, unshared
            api, aok = self._rows(qc[alone], qr[alone], K, tau, keep)
            pc[alone], pr[alone], ok[alone] = api.c[0], api.r[0], aok[0]
            self.computed += alone.size
        return type(Q)(pc[None], None, pr[None]), ok[None]

    def _rows(self, c, r, K, tau, keep):
        """The unshared softmax of the query rows ``c +- r`` (each ``(m, dk)``)."""
        Q = type(K)(np.ascontiguousarray(c.T)[None], None, np.ascontiguousarray(r.T)[None])
        return self.compute(Q, K, tau, keep)


def rows_for(layer, Z, compute):
    """A :class:`SharedRows` for the attention layer ``layer`` (its heads ``layer.heads``) over the
    state ``Z`` of ``n`` tokens, when ``len(heads) n >= SHARE_FROM_ROWS``; None (every row on its
    own) otherwise."""
    return SharedRows(compute) if len(layer.heads) * Z.c.shape[2] >= SHARE_FROM_ROWS else None


def _widening(c, r):
    """``delta = 2^-48 max_a (|c_a| + r_a)`` per row, as a column (a power-of-two scaling: exact
    but for underflow, which ``up`` covers)."""
    m = fo.up(np.abs(c) + r).max(axis=1, keepdims=True)
    return fo.up(m * _WIDEN)


def _row_keys(c, r):
    """The key of each row: its exponent ``e`` (``m`` in ``[2^(e-1), 2^e)``) and its query centre
    quantised to ``2^(e - 50)``, as one opaque bytes value per row; and whether the row can be
    shared (finite, nonzero).  Equal keys only name a candidate class."""
    with np.errstate(all="ignore"):
        m = np.max(np.abs(c) + r, axis=1)
        good = np.isfinite(m) & (m > 0) & np.isfinite(c).all(axis=1) & np.isfinite(r).all(axis=1)
        _, e = np.frexp(np.where(good, m, 1.0))
        q = np.rint(np.ldexp(np.where(good[:, None], c, 0.0), (_GRID_BITS - e)[:, None])).astype(np.int64)
    keys = np.ascontiguousarray(np.concatenate([e.astype(np.int64)[:, None], q], axis=1))
    return keys.view(np.dtype((np.void, keys.itemsize * keys.shape[1]))).ravel(), good
