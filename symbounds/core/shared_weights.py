"""Attention matrices of shared softmax heads, read on demand (see docs/performance.md).

A first-layer input-independent softmax head whose weights are shared (shared_softmax.py) has

    pi_h[j, k] = exp(s_{id(c, k)} - m) / N_{g(c)},      c = class of row j of head h,

with one exponential per distinct score id and one normaliser per group.  :class:`SharedMatrix`
is the ``n x n`` matrix ``pi_h`` built from those numbers only when an entry, a row or a column
is asked for, so a trace of a layer with ``P + 2`` heads of ``P x P`` weights costs no memory
beyond the distinct values.  It indexes like the list of rows it stands for (``pi[j][k]``,
``len(pi)``, iteration over rows).

:func:`entry_values` gives the values of chosen entries of several matrices with the entries of
shared matrices deduplicated by their exact ``(score id, normaliser)`` pair: two entries with the
same pair are the same exact number, so a maximum or minimum over the distinct values is the one
over all entries.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SharedMatrix", "entry_values"]


class SharedMatrix:
    """``pi_h`` of one shared head ``h``, from the layer's shared numbers
    (``symbounds.core.evaluator.SharedWeights``)."""

    def __init__(self, shared, h: int):
        self.shared, self.h = shared, h
        self._a = shared.S.index[h]

    def __len__(self) -> int:
        return self.shared.S.cls.shape[1]

    def __getitem__(self, j: int) -> list:
        """Row ``j``: ``[pi_h[j, k] for k]``."""
        S = self.shared.S
        c = int(S.cls[self._a, j])
        return self.shared.values(S.ids[c], np.full(S.ids.shape[1], S.group[c]))

    def __iter__(self):
        return (self[j] for j in range(len(self)))

    def column(self, k: int) -> list:
        """``[pi_h[j, k] for j]``."""
        return self.shared.column(self.h, k)

    def keys(self, rows, k: int) -> np.ndarray:
        """The exact ``(score id, normaliser)`` pairs of the entries ``(j, k)``, ``j`` in ``rows``,
        as ``[len(rows), 2]`` integers."""
        S = self.shared.S
        c = S.cls[self._a, np.asarray(rows, dtype=np.int64)]
        return np.stack([S.ids[c, k], S.group[c]], axis=1)

    def tolist(self) -> list:
        return [self[j] for j in range(len(self))]


def entry_values(picks) -> list:
    """The values ``pi[j][k]`` for ``(pi, rows, k)`` in ``picks``, ``j`` in ``rows``: every entry
    of a plain matrix (a list of rows), and for the :class:`SharedMatrix` entries one value per
    distinct exact ``(score id, normaliser)`` pair among them (per layer).  Every returned value is
    an entry's value, and every entry's value is returned (as the same ball), so extremes agree."""
    plain, keys, owner = [], {}, {}
    for pi, rows, k in picks:
        if isinstance(pi, SharedMatrix):
            ident = id(pi.shared)
            owner[ident] = pi.shared
            keys.setdefault(ident, []).append(pi.keys(rows, k))
        else:
            plain.extend(pi[j][k] for j in rows)
    out = plain
    for ident, parts in keys.items():
        shared = owner[ident]
        pairs = np.concatenate(parts) if parts else np.empty((0, 2), np.int64)
        groups = max(1, len(shared.inv))
        code = np.unique(pairs[:, 0] * groups + pairs[:, 1])
        out.extend(shared.values(code // groups, code % groups))
    return out
