"""A fast exact evaluator for token-input hardmax Transformers on many long sequences.

Same semantics as :func:`symbounds.core.transformer.forward` in :class:`~symbounds.core.contexts.ExactContext`
(and tested against it), restated with tokens as *rows* ``x_i`` of an ``n x d`` matrix ``X``:

* feed-forward: ``x -> eta x + W2 relu(W1 x + b1) + b2``;
* hardmax attention: ``x_i -> rho x_i + sum_h W_O^h mean_{l in C_i^h} W_V^h x_l`` with
  ``C_i^h = argmax_l <W_Q^h x_i, W_K^h x_l> / tau`` (ties averaged), within one sequence.

What makes it fast, and why each shortcut is exact:

1. Matrix products run in FLINT (``fmpq_mat``, exact rationals in C); only ReLU and the argmax
   comparisons are Python loops.
2. Repeated tokens are stored once with a multiplicity: the hardmax mean over ``C_i`` counts each
   token, so ``mean = sum_v count_v W_V v / sum_v count_v`` over the distinct values ``v`` in
   ``C_i``.  After an attention layer with ``rho = 0`` two tokens with the same argmax sets in every
   head have the same output and are merged (no hashing of vectors needed).
3. A head whose ``W_O W_V`` is zero adds nothing, whatever its attention pattern.
4. Rank-one scores (``d_k = 1``): ``s_il = q_i k_l``, so ``C_i`` is the set of maximisers of ``k``
   when ``q_i > 0``, of minimisers when ``q_i < 0``, and all tokens when ``q_i = 0``: O(n).
5. Any other ``d_k``: visit the candidates ``l`` in decreasing order of ``|k_l|^2`` and stop as soon
   as the best score ``b > 0`` satisfies ``b^2 > |q_i|^2 |k_l|^2``; by Cauchy-Schwarz every
   remaining candidate scores at most ``|q_i| |k_l| < b``, so it can neither win nor tie.  This is
   exact for every input and fast when the maximisers have large norms (the collapse layer
   ``A = I`` of the construction: leaders and sphere points lie far out).

Only hardmax attention is handled; a softmax layer raises :class:`NotImplementedError`.
"""

from __future__ import annotations

from dataclasses import dataclass

import flint

from ...core.contexts import ExactContext
from ...core.exact import as_fraction
from ...core.transformer import Attention, Transformer

__all__ = ["SeqState", "evaluate", "output_set", "state_points"]

_EX = ExactContext()
_ZERO = flint.fmpq(0)


@dataclass
class SeqState:
    """One sequence: distinct-or-not token rows ``X`` (``n x d`` fmpq_mat) and their multiplicities."""

    X: flint.fmpq_mat
    counts: list

    @property
    def n(self) -> int:
        return self.X.nrows()


def _mat(rows) -> flint.fmpq_mat:
    rows = [list(r) for r in rows]
    r, c = len(rows), len(rows[0]) if rows else 0
    return flint.fmpq_mat(r, c, [_EX.convert(v) for row in rows for v in row])


def _is_zero_mat(m: flint.fmpq_mat) -> bool:
    return all(v == 0 for v in m.entries())


def _ones(cache: dict, n: int) -> flint.fmpq_mat:
    o = cache.get(n)
    if o is None:
        o = cache[n] = flint.fmpq_mat(n, 1, [1] * n)
    return o


def _rows(m: flint.fmpq_mat) -> list:
    e = m.entries()
    c = m.ncols()
    return [e[i * c:(i + 1) * c] for i in range(m.nrows())]


class _FF:
    def __init__(self, layer):
        self.W1T = _mat(layer.W1).transpose()  # D x h
        self.b1 = _mat([layer.b1])  # 1 x h
        self.W2T = _mat(layer.W2).transpose()  # h x D
        self.b2 = _mat([layer.b2])  # 1 x D
        self.eta = _EX.convert(layer.skip)
        self.b1_zero = _is_zero_mat(self.b1)
        self.b2_zero = _is_zero_mat(self.b2)
        self.h = self.W1T.ncols()

    def __call__(self, s: SeqState, ones: dict) -> SeqState:
        X = s.X
        n = X.nrows()
        H = X * self.W1T
        if not self.b1_zero:
            H = H + _ones(ones, n) * self.b1
        S = flint.fmpq_mat(n, self.h, [v if v > 0 else _ZERO for v in H.entries()])
        out = S * self.W2T
        if not self.b2_zero:
            out = out + _ones(ones, n) * self.b2
        if self.eta != 0:
            out = out + (X if self.eta == 1 else X * self.eta)
        return SeqState(out, s.counts)


class _Head:
    def __init__(self, head, tau):
        self.WQT = _mat(head.W_Q).transpose()  # D x dk
        self.WKT = _mat(head.W_K).transpose()
        self.OVT = (_mat(head.W_O) * _mat(head.W_V)).transpose()  # D x D: x_l -> W_O W_V x_l
        self.silent = _is_zero_mat(self.OVT)
        self.dk = self.WQT.ncols()
        # a hardmax of s / tau is the argmax of s (tau > 0) or of -s (tau < 0)
        self.flip = tau is not None and tau < 0
        if tau is not None and tau == 0:
            raise ZeroDivisionError("attention temperature tau = 0")

    def keys(self, X: flint.fmpq_mat) -> list:
        """For each token i, its argmax set C_i as a tuple of row indices."""
        Q, K = X * self.WQT, X * self.WKT
        if self.flip:
            Q = Q * -1
        n = X.nrows()
        if self.dk == 1:
            q, k = Q.entries(), K.entries()
            kmax, kmin = max(k), min(k)
            up = tuple(l for l in range(n) if k[l] == kmax)
            down = tuple(l for l in range(n) if k[l] == kmin)
            everyone = tuple(range(n))
            return [up if qi > 0 else down if qi < 0 else everyone for qi in q]
        return _cauchy_schwarz_argmax(_rows(Q), _rows(K))


def _cauchy_schwarz_argmax(q: list, k: list) -> list:
    """Exact argmax sets of <q_i, k_l> over l, pruned by |<q_i,k_l>| <= |q_i| |k_l|."""
    kn = [sum(a * a for a in kl) for kl in k]
    order = sorted(range(len(k)), key=lambda l: kn[l], reverse=True)
    out = []
    for qi in q:
        qn = sum(a * a for a in qi)
        best = None
        win: list = []
        for l in order:
            if best is not None and best > 0 and best * best > qn * kn[l]:
                break
            s = sum(a * b for a, b in zip(qi, k[l]))
            if best is None or s > best:
                best, win = s, [l]
            elif s == best:
                win.append(l)
        out.append(tuple(win))
    return out


class _SA:
    def __init__(self, layer: Attention):
        if layer.kind != "hardmax":
            raise NotImplementedError("the fast evaluator handles hardmax attention only")
        tau = None if layer.tau is None else _EX.convert(layer.tau)
        self.rho = _EX.convert(layer.skip)
        self.heads = [h for h in (_Head(hd, tau) for hd in layer.heads) if not h.silent]

    def __call__(self, s: SeqState, ones: dict) -> SeqState:
        X, counts = s.X, s.counts
        if not self.heads:
            return s if self.rho == 1 else SeqState(X * self.rho, counts)
        n, D = X.nrows(), X.ncols()
        keys_per_head = []
        total = None
        for h in self.heads:
            keys = h.keys(X)
            vals = _rows(X * h.OVT)
            means: dict = {}
            for key in set(keys):
                w = sum(counts[l] for l in key)
                acc = [_ZERO] * D
                for l in key:
                    c = counts[l]
                    acc = [a + c * v for a, v in zip(acc, vals[l])]
                means[key] = [a / w for a in acc]
            keys_per_head.append(keys)
            flat = [v for key in keys for v in means[key]]
            contrib = flint.fmpq_mat(n, D, flat)
            total = contrib if total is None else total + contrib
        if self.rho != 0:
            out = total + (X if self.rho == 1 else X * self.rho)
            return SeqState(out, counts)
        # rho = 0: equal argmax sets in every head give equal outputs -> merge them
        groups: dict = {}
        for i in range(n):
            groups.setdefault(tuple(k[i] for k in keys_per_head), []).append(i)
        if len(groups) == n:
            return SeqState(total, counts)
        rows = _rows(total)
        reps = [idx[0] for idx in groups.values()]
        merged = flint.fmpq_mat(len(reps), D, [v for i in reps for v in rows[i]])
        return SeqState(merged, [sum(counts[i] for i in idx) for idx in groups.values()])


def compile_layers(model: Transformer) -> list:
    return [_SA(layer) if isinstance(layer, Attention) else _FF(layer) for layer in model.layers]


def initial_states(inputs) -> list:
    """One :class:`SeqState` per sequence from token tuples (exact rationals)."""
    out = []
    for X in inputs:
        d = len(X[0])
        out.append(SeqState(flint.fmpq_mat(len(X), d, [_EX.convert(v) for x in X for v in x]), [1] * len(X)))
    return out


def evaluate(model: Transformer, inputs, checkpoints=(), compiled=None):
    """Run every sequence through ``model``; returns ``(final_states, {i: states at the input of
    layer i})`` for each ``i`` in ``checkpoints`` (``i = len(model.layers)`` is the output)."""
    layers = compiled if compiled is not None else compile_layers(model)
    states = initial_states(inputs)
    snaps = {}
    ones: dict = {}
    cps = set(checkpoints)
    for i, layer in enumerate(layers):
        if i in cps:
            snaps[i] = states
        states = [layer(s, ones) for s in states]
    if len(layers) in cps:
        snaps[len(layers)] = states
    return states, snaps


def state_points(s: SeqState) -> list:
    """The token rows as tuples of Fractions (with repetitions as stored)."""
    return [tuple(as_fraction(v) for v in r) for r in _rows(s.X)]


def output_set(s: SeqState) -> set:
    return set(state_points(s))
