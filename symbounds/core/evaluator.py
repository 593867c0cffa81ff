"""The operations a layer's ``apply`` is written against, and their implementation over one context.

The layers of a numeric model (:mod:`symbounds.core.layers`) never compute on numbers themselves:
each ``apply`` is a short sequence of the operations below, so the same layer code runs wherever
the operations are implemented.  :class:`ScalarEvaluator` implements them over any scalar
:class:`~symbounds.core.contexts.Context` (exact rationals, Arb balls, mpmath, float64, Taylor
models), states being ``D x n`` lists of rows.  The operations:

* ``linear(W, Z)``: ``W Z``, exact zeros of ``W`` skipped (construction weights are sparse);
* ``add_bias(H, b)``, ``add(A, B)``, ``scale(k, Z)``, ``relu(H)``: entrywise;
* ``relu_pairs(H, pairs)``: ``relu(H)``, but a linear ReLU pair ``(u, u')`` as ``(h_u, 0)``;
* ``add_rows(out, rows)`` and ``finish(out)``: a head's contribution added to a layer's output,
  and the output once every head is in;
* ``matmul(A, B)``: a dense product by the context's own matrix primitive (:meth:`Context.matmul`);
* ``attention_matrix(kind, tau, W_Q, W_K, Z, rows, columns)``: the rows ``pi[j, :]`` of softmax
  (or hardmax) of the scores ``<W_Q z_j, W_K z_k> / tau``;
* ``head_output(pi, W_V, W_O, Z, columns)``: ``W_O sum_k pi[j, k] W_V z_k`` by the rows ``W_O``
  writes;
* ``one_input(Z)``, ``output_columns(Z, cols)``, ``columns``, ``scatter_columns``, ``width``: the
  state at one input of a batch (where an input-independent quantity is computed once), and the
  token columns a pruned layer evaluates;
* ``shared_weights(S, layer, Z)`` and ``shared_output(shared, heads, Zs)``: the first layer's
  shared softmax weights (``shared_softmax.py``) and the output of their heads.

The second implementation, over batches of boxes in outward-rounded float64, is
:class:`symbounds.core.float_boxes.FloatBoxOps`: the same layers' ``apply`` walk both.

Every operation is an exact rewriting of the formula it names: the evaluator never branches on an
inexact number (a softmax is shifted by ``ctx.shift_point``, a hardmax argmax decided by
``ctx.argmax_set``, which raises :class:`~symbounds.core.contexts.Undecided` when it cannot).
"""

from __future__ import annotations

import numpy as np

from .contexts import Context
from .shared_weights import SharedMatrix

__all__ = ["ScalarEvaluator", "SharedWeights"]


class ScalarEvaluator:
    """The layer operations over one scalar context ``ctx`` (states are lists of rows)."""

    #: whether the layers may read the first layer's shared softmax weights (:meth:`shared_weights`)
    shares_softmax = True

    def __init__(self, ctx: Context):
        self.ctx = ctx

    # --- entrywise and linear ---------------------------------------------------------------------
    def linear(self, W, Z) -> list:
        """``W Z`` row by row, summed in ascending inner index, exact zeros of ``W`` skipped: the
        generic row loop of :meth:`Context.matmul` in every context (not Arb's matrix product,
        whose sums round differently), so the layers' results do not depend on the context's
        matrix type."""
        return Context.matmul(self.ctx, W, Z)

    def matmul(self, A, B) -> list:
        """``A @ B`` by the context's matrix product (Arb's in balls)."""
        return self.ctx.matmul(A, B)

    def add_bias(self, H, b) -> list:
        """``H[r][j] + b[r]``."""
        return [[h + v for h in row] for row, v in zip(H, b)]

    def add(self, A, B) -> list:
        """``A + B`` entrywise."""
        return [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]

    def add_rows(self, out, rows) -> list:
        """``out[r] += values`` for each ``(r, values)`` of ``rows`` (in place); returns ``out``."""
        for r, crow in rows:
            out[r] = [a + b for a, b in zip(out[r], crow)]
        return out

    def finish(self, out) -> list:
        """A layer's output once every head's contribution is added: ``out`` itself."""
        return out

    def scale(self, k, Z) -> list:
        """``k Z``; exact zeros when ``k`` is exactly 0."""
        if self.ctx.is_zero(k):
            z = self.ctx.zero
            return [[z] * len(Z[0]) for _ in Z]
        return [[k * v for v in row] for row in Z]

    def relu(self, H) -> list:
        """``max(h, 0)`` entrywise (``ctx.relu``)."""
        relu = self.ctx.relu
        return [[relu(h) for h in row] for row in H]

    def relu_pairs(self, H, pairs) -> list:
        """``relu(H)`` row by row, except for each linear ReLU pair ``(u, u')`` (``W1[u'] = -W1[u]``,
        zero biases, ``W2[:, u'] = -W2[:, u]``): row ``u`` is ``H[u]`` itself and row ``u'`` exact
        zeros, so that ``W2 S`` computes ``W2[:, u] (relu(y) - relu(-y)) = W2[:, u] y`` as the
        linear map it is."""
        S = [None] * len(H)
        if pairs:
            zero_row = self.zeros(1, len(H[0]))[0]
            for u, u2 in pairs:
                S[u] = H[u]
                S[u2] = zero_row
        rest = [r for r, s in enumerate(S) if s is None]
        for r, row in zip(rest, self.relu([H[r] for r in rest])):
            S[r] = row
        return S

    def is_zero(self, v) -> bool:
        """Whether ``v`` is exactly zero (``ctx.is_zero``: decided, never guessed)."""
        return self.ctx.is_zero(v)

    def zeros(self, rows: int, cols: int) -> list:
        z = self.ctx.zero
        return [[z] * cols for _ in range(rows)]

    def width(self, Z) -> int:
        """The number of token columns of the state ``Z``."""
        return len(Z[0])

    def one_input(self, Z):
        """The state at one input: ``Z`` itself (a scalar state is one input)."""
        return Z

    def output_columns(self, out, cols):
        """The start of a layer's output pruned to the columns ``cols``: all of ``out`` (the other
        columns are computed, or zero, and not read)."""
        return out

    def columns(self, Z, cols) -> list:
        """The columns ``cols`` of ``Z``."""
        return [[row[j] for j in cols] for row in Z]

    def scatter_columns(self, sub, cols, n: int) -> list:
        """A ``len(sub) x n`` state with ``sub``'s columns at ``cols`` and exact zeros elsewhere."""
        full = self.zeros(len(sub), n)
        for r, row in enumerate(sub):
            for j, v in zip(cols, row):
                full[r][j] = v
        return full

    # --- attention ----------------------------------------------------------------------------------
    def softmax(self, scores) -> list:
        """``e^{s_k - m} / sum_l e^{s_l - m}`` with ``m = ctx.shift_point(scores)``, one reciprocal
        per row; a row of exact zeros is uniform."""
        ctx = self.ctx
        if all(ctx.is_zero(s) for s in scores):  # e.g. a query row that is exactly zero
            w = ctx.one / ctx.rational(len(scores))
            return [w] * len(scores)
        m = ctx.shift_point(scores)
        e = [ctx.exp(s - m) for s in scores]
        total = e[0]
        for v in e[1:]:
            total = total + v
        inv = ctx.one / total  # one reciprocal per row (a Taylor-model division is costly)
        return [v * inv for v in e]

    def hardmax(self, scores) -> list:
        """``1/|A|`` on the argmax set ``A`` (ties averaged), 0 elsewhere."""
        ctx = self.ctx
        winners = ctx.argmax_set(scores)
        w = ctx.one / ctx.rational(len(winners))
        row = [ctx.zero] * len(scores)
        for k in winners:
            row[k] = w
        return row

    def attention_matrix(self, kind, tau, WQ, WK, Z, rows=None, columns=None) -> list:
        """``pi[j] = softmax_k(<W_Q z_j, W_K z_k> / tau)`` (or hardmax) for every query ``j``, or
        only for ``j`` in ``rows`` (the others None); every column ``k``, whatever ``columns``
        (the tokens that carry values: :meth:`head_output` finds them from the values)."""
        ctx = self.ctx
        Q = self.linear(WQ, Z)
        K = self.linear(WK, Z)
        n = len(Z[0])
        zero = ctx.zero
        pi = []
        for j in range(n):
            if rows is not None and j not in rows:
                pi.append(None)
                continue
            scores = []
            for k in range(n):
                s = zero
                for qa, ka in zip(Q, K):
                    s = s + qa[j] * ka[k]
                scores.append(s if tau is None else s / tau)
            pi.append(self.softmax(scores) if kind == "softmax" else self.hardmax(scores))
        return pi

    def head_output(self, pi, WV, WO, Z, columns=None) -> list:
        """``[(row, values)]``: the rows of ``W_O sum_k pi[j][k] W_V z_k`` that ``W_O`` can write.

        Only the columns ``k`` of ``pi`` whose value ``W_V z_k`` is not exactly zero are read (most
        tokens carry no value), so a :class:`~symbounds.core.shared_weights.SharedMatrix` is never
        built in full."""
        ctx = self.ctx
        n = len(Z[0])
        V = self.linear(WV, Z)  # d_v x n
        nz = [[k for k, vk in enumerate(vrow) if not ctx.is_zero(vk)] for vrow in V]
        zero = ctx.zero
        # A[v][j] = sum_k pi[j][k] V[v][k], summed over k in ascending order
        A = []
        if isinstance(pi, SharedMatrix):  # column by column
            cols = {k: pi.column(k) for k in sorted(set().union(*nz))}
            for vrow, ks in zip(V, nz):
                arow = [zero] * n
                for k in ks:
                    vk = vrow[k]
                    arow = [s + p * vk for s, p in zip(arow, cols[k])]
                A.append(arow)
        else:  # row by row (a query row nobody reads is None)
            for vrow, ks in zip(V, nz):
                arow = []
                for j in range(n):
                    pij = pi[j]
                    s = zero
                    if pij is not None:
                        for k in ks:
                            s = s + pij[k] * vrow[k]
                    arow.append(s)
                A.append(arow)
        return [(r, crow) for r, crow in enumerate(self.linear(WO, A)) if any(not ctx.is_zero(v) for v in WO[r])]

    # --- shared softmax weights -------------------------------------------------------------------
    def shared_weights(self, S, layer, Z) -> SharedWeights:
        """The layer's shared softmax weights at state ``Z`` (:class:`SharedWeights`)."""
        return SharedWeights(self, S, layer, Z)

    def shared_matrix(self, shared: SharedWeights, h: int) -> SharedMatrix:
        """``pi_h`` of shared head ``h``, read on demand."""
        return SharedMatrix(shared, h)

    def shared_output(self, shared: SharedWeights, heads, Zs, block: int = 1 << 20) -> list:
        """``sum_h W_O^h V_h pi_h^T`` over the shared heads, for each state in ``Zs`` (``D x n``
        lists): ``[W_O^h V_h[:, cols_h] ...] @ [pi_h[:, cols_h]^T; ...]`` with ``cols_h`` the tokens
        whose values can be nonzero, by the context's matrix product; the right factor is built
        once per block of heads (at most ``block`` weights) and shared by every state."""
        S = shared.S
        D, n = len(Zs[0]), len(Zs[0][0])
        acc = [None for _ in Zs]
        live = [h for h in S.heads if S.value_columns[h]]
        per_head = [len(S.value_columns[h]) for h in live]
        b0 = 0
        while b0 < len(live):
            b1, width = b0, 0
            while b1 < len(live) and (b1 == b0 or (width + per_head[b1]) * n <= block):
                width += per_head[b1]
                b1 += 1
            right = []
            for h in live[b0:b1]:
                right.extend(shared.column(h, k) for k in S.value_columns[h])
            R = self.ctx.matrix(right)  # width x n
            for z, Z in enumerate(Zs):
                left = [[] for _ in range(D)]
                for h in live[b0:b1]:
                    cols = S.value_columns[h]
                    part = self.matmul(heads[h].W_O, self.matmul(heads[h].W_V, self.columns(Z, cols)))
                    for r in range(D):
                        left[r].extend(part[r])
                prod = self.matmul(left, R)
                acc[z] = prod if acc[z] is None else self.add(acc[z], prod)
            b0 = b1
        return [a if a is not None else self.zeros(D, n) for a in acc]


def _dot(ctx, wrow, Z, j):
    s = ctx.zero
    for c, w in enumerate(wrow):
        if not ctx.is_zero(w):
            s = s + w * Z[c][j]
    return s


class SharedWeights:
    """A layer's shared softmax weights in one context: one exponential per distinct score
    (shifted by one exact point ``m`` for the whole layer), one reciprocal per normaliser."""

    def __init__(self, ev: ScalarEvaluator, S, layer, Z):
        ctx = ev.ctx
        self.ctx, self.S = ctx, S
        tau, heads = layer.tau, layer.heads
        qcol: dict = {}

        def query(h, j):
            v = qcol.get((h, j))
            if v is None:
                v = qcol[(h, j)] = [_dot(ctx, row, Z, j) for row in heads[h].W_Q]
            return v

        scores = []
        for c, k in S.score_rep:
            a, j = S.class_rep[c]
            h = S.heads[a]
            s = ctx.zero
            for qa, wk in zip(query(h, j), heads[h].W_K):
                s = s + qa * _dot(ctx, wk, Z, k)
            scores.append(s if tau is None else s / tau)
        m = ctx.shift_point(scores)
        self.E = [ctx.exp(s - m) for s in scores]
        self.inv = []
        for c in S.group_rep:
            row = S.ids[c].tolist()
            total = self.E[row[0]]
            for d in row[1:]:
                total = total + self.E[d]
            self.inv.append(ctx.one / total)
        self._tables: dict = {}

    def values(self, sids, groups) -> list:
        """``[exp(s_d - m) / N_g for d, g in zip(sids, groups)]`` (integer arrays or lists)."""
        if len(self.inv) == 1:
            tab = self._tables.get(0)
            if tab is None:
                inv = self.inv[0]
                tab = self._tables[0] = [e * inv for e in self.E]
            return [tab[d] for d in np.asarray(sids).tolist()]
        E, inv = self.E, self.inv
        return [E[d] * inv[g] for d, g in zip(np.asarray(sids).tolist(), np.asarray(groups).tolist())]

    def column(self, h, k) -> list:
        """``[pi_h[j, k] for j]``."""
        S = self.S
        c = S.cls[S.index[h]]
        return self.values(S.ids[c, k], S.group[c])
