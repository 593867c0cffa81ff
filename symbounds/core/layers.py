"""A network's layers in one context's numbers, each with one ``apply``.

:class:`~symbounds.core.transformer.Transformer` holds the exact weights (SymPy, rationals);
``Transformer.numeric(ctx)`` converts them once per context and precision into these records, read
by name (``layer.heads[h].W_Q``, ``layer.skip``, ``layer.pairs``), never by position.  Matrices are
lists of rows of the context's numbers.

``layer.apply(ev, Z, run, cols)`` is the layer's formula written once against the operations of an
evaluator ``ev`` (:mod:`symbounds.core.evaluator`): a
:class:`~symbounds.core.evaluator.ScalarEvaluator` over one context
(:func:`symbounds.core.transformer.forward` walks the layers, calling ``apply`` on each), or
:class:`~symbounds.core.float_boxes.FloatBoxOps` over a batch of boxes in float64 (the same
classes in float balls, :mod:`symbounds.core.float_layers`).  ``run`` (:class:`Run`) carries what
one pass knows beyond the state: the model's structure, the cache of input-independent attention results, which
heads may use it, and the trace being recorded.  The shortcuts each ``apply`` takes are exact
rewritings, licensed by the structure (docs/performance.md):

* a silent head (``W_O W_V = 0``) adds nothing and is skipped;
* an input-independent head reuses its cached attention matrix (and, when its values are input
  independent too, its cached output); the first layer's shared softmax heads read their weights
  from the shared numbers;
* with ``cols`` (readout pruning) only those query rows / token columns are evaluated;
* a ReLU pair ``(u, u')`` is evaluated as the linear map ``W2[:, u] y`` it computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["AttentionWeights", "EmbeddingWeights", "FeedForwardWeights", "HeadWeights", "Run"]


@dataclass
class Run:
    """What one pass of the walker knows beyond the state.

    ``structure`` is the model's :class:`~symbounds.core.structure.ModelStructure`; ``cache`` the
    numeric model's cache of input-independent attention results (per context and precision);
    ``constant_heads`` the heads that may use it (empty from a state given mid-network, which need
    not be one the model produces); ``trace`` the :class:`~symbounds.core.transformer.Trace` being
    recorded, or None."""

    structure: object
    cache: dict
    constant_heads: object = field(default_factory=dict)
    trace: object = None

    def shared(self, ev, layer, Z):
        """The layer's shared softmax weights in ``ev`` (cached), or None (nothing shared)."""
        key = ("shared", layer.index)
        if key in self.cache:
            return self.cache[key]
        S = self.structure.shared_layer(layer.index) if ev.shares_softmax else None
        val = None if S is None else ev.shared_weights(S, layer, Z)
        self.cache[key] = val
        return val


@dataclass(frozen=True, eq=False)
class EmbeddingWeights:
    """The embedding of a vector input: ``Z_0 = base``, plus ``E x`` added to column ``column``."""

    base: list  # D x n
    E: list  # D x d
    column: int

    def apply(self, ev, xs):
        """``Z_0`` at the input ``xs`` (numbers of the evaluator's context): only the rows with a
        nonzero weight in ``E`` change."""
        Ex = ev.linear(self.E, [[v] for v in xs])
        Z = [list(row) for row in self.base]
        j = self.column
        for r, erow in enumerate(self.E):
            if not all(ev.is_zero(e) for e in erow):
                Z[r][j] = Z[r][j] + Ex[r][0]
        return Z


@dataclass(frozen=True, eq=False)
class HeadWeights:
    """One attention head: ``W_Q, W_K`` are ``d_k x D``, ``W_V`` is ``d_v x D``, ``W_O`` is ``D x d_v``;
    ``value_columns``: the tokens ``k`` whose values ``W_V z_k`` can be nonzero, when known from the
    weights (a first layer evaluated from the model input), else None."""

    W_Q: list
    W_K: list
    W_V: list
    W_O: list
    value_columns: list | None = None


@dataclass(frozen=True, eq=False)
class AttentionWeights:
    """Attention layer ``index``: ``out_j = skip z_j + sum_h W_O^h sum_k pi_h[j, k] W_V^h z_k`` with
    ``pi_h`` the softmax (or hardmax) rows of ``<W_Q^h z_j, W_K^h z_k> / tau`` (no ``tau``: None)."""

    index: int
    kind: str
    skip: object
    tau: object
    heads: tuple  # of HeadWeights

    def head(self, h: int) -> HeadWeights:
        """The weights of head ``h`` (the head's index in the layer)."""
        return self.heads[h]

    def head_items(self):
        """``(h, weights)`` for the layer's heads, in order."""
        return enumerate(self.heads)

    def matrix(self, ev, h: int, Z, rows=None):
        """``pi_h`` at state ``Z``, computed (only the query rows ``rows`` when given; an evaluator
        may leave out the token columns outside the head's ``value_columns``)."""
        hw = self.head(h)
        return ev.attention_matrix(self.kind, self.tau, hw.W_Q, hw.W_K, Z, rows, columns=hw.value_columns)

    def head_weights(self, ev, h: int, Z, run: Run, rows=None):
        """The attention matrix of head ``h`` at state ``Z``: for an input-independent head the
        cached one (its shared weights read on demand when they are shared, else computed once at
        one input of the evaluator's batch, ``ev.one_input(Z)``); for any other head computed."""
        key = (self.index, h)
        if not run.constant_heads.get(key):
            return self.matrix(ev, h, Z, rows)
        pi = run.cache.get(key)
        if pi is None:
            shared = run.shared(ev, self, Z)
            if shared is not None and h in shared.S.index:
                pi = ev.shared_matrix(shared, h)
            else:
                pi = self.matrix(ev, h, ev.one_input(Z))
            run.cache[key] = pi
        return pi

    def apply(self, ev, Z, run: Run, cols=None):
        """``skip Z + sum_h W_O^h V_h pi_h^T`` (only the query rows ``cols`` of ``pi_h`` when given;
        the other columns of the result are then not the layer's output and are not read: the
        evaluator may drop them, ``ev.output_columns``)."""
        i = self.index
        tr = run.trace
        silent = run.structure.silent_heads
        out = ev.output_columns(ev.scale(self.skip, Z), cols)
        pis = []
        for h, hw in self.head_items():
            key = (i, h)
            if key in silent:  # W_O W_V = 0: W_O sum_k pi_jk W_V z_k = 0 whatever pi is
                if tr is not None:
                    pis.append(self.matrix(ev, h, Z))
                continue
            pi = self.head_weights(ev, h, Z, run, cols)
            pis.append(pi)
            constant_output = run.constant_heads.get(key) == "output"
            contrib = run.cache.get(("out", key)) if constant_output else None
            if contrib is None:
                contrib = ev.head_output(pi, hw.W_V, hw.W_O, Z, columns=hw.value_columns)
                if constant_output:  # neither scores nor values depend on the input
                    run.cache[("out", key)] = contrib
            out = ev.add_rows(out, contrib)
        if tr is not None:
            tr.attention[i] = pis
        return ev.finish(out)

    def apply_all(self, ev, Zs, run: Run):
        """:meth:`apply` at every state of ``Zs`` at once, for an input-independent layer (the
        affine prefix at ``x = 0`` and ``x = e_i``): each head's weights are computed once at
        ``Zs[0]`` and applied to every state, the shared heads through one product."""
        i = self.index
        outs = [ev.scale(self.skip, Z) for Z in Zs]
        shared = run.shared(ev, self, Zs[0])
        silent = run.structure.silent_heads
        if shared is not None:
            for out, acc in zip(outs, ev.shared_output(shared, self.heads, Zs)):
                ev.add_rows(out, enumerate(acc))
        for h, hw in enumerate(self.heads):
            if (i, h) in silent or (shared is not None and h in shared.S.index):
                continue  # silent, or in the shared heads' product above
            pi = run.cache.get((i, h))
            if pi is None:
                pi = self.matrix(ev, h, Zs[0])
            for out, Z in zip(outs, Zs):
                ev.add_rows(out, ev.head_output(pi, hw.W_V, hw.W_O, Z))
        return outs

    def record(self, ev, Z, run: Run):
        """Record the layer's attention matrices at ``Z`` in ``run.trace`` without evaluating the
        layer (inside the affine prefix, whose states come from the composed maps)."""
        run.trace.attention[self.index] = [
            self.matrix(ev, h, Z) if (self.index, h) in run.structure.silent_heads
            else self.head_weights(ev, h, Z, run)
            for h in range(len(self.heads))
        ]


@dataclass(frozen=True, eq=False)
class FeedForwardWeights:
    """Feed-forward layer ``index``: ``out_j = skip z_j + W2 relu(W1 z_j + b1) + b2``; ``pairs`` are
    the hidden units ``(u, u')`` that together compute ``W2[:, u] y`` exactly
    (:attr:`symbounds.core.structure.ModelStructure.relu_pairs`)."""

    index: int
    W1: list
    b1: list
    W2: list
    b2: list
    skip: object
    pairs: tuple

    def preactivation(self, ev, Z):
        """``W1 Z + b1``."""
        return ev.add_bias(ev.linear(self.W1, Z), self.b1)

    def apply(self, ev, Z, run: Run, cols=None):
        """``skip Z + W2 relu(W1 Z + b1) + b2``, token-wise: with ``cols``, only those columns are
        evaluated (exact zeros elsewhere, or dropped: ``ev.scatter_columns``)."""
        if cols is not None and len(cols) < ev.width(Z):
            sub = self.apply(ev, ev.columns(Z, cols), run)
            return ev.scatter_columns(sub, cols, ev.width(Z))
        H = self.preactivation(ev, Z)
        if run.trace is not None:
            run.trace.preactivation[self.index] = H
        # A pair of units (u, u') with W1[u'] = -W1[u], zero biases and W2[:, u'] = -W2[:, u]
        # computes W2[:, u] (relu(y) - relu(-y)) = W2[:, u] y exactly: evaluate it as the linear map
        # it is (tighter enclosures, and linear in the input for a Taylor model).
        S = ev.relu_pairs(H, self.pairs)
        out = ev.add_bias(ev.linear(self.W2, S), self.b2)
        if not ev.is_zero(self.skip):
            out = ev.add(out, ev.scale(self.skip, Z))
        return out

    def apply_all(self, ev, Zs, run: Run):
        """:meth:`apply` at every state of ``Zs``."""
        return [self.apply(ev, Z, run) for Z in Zs]

    def record(self, ev, Z, run: Run):
        """Record the layer's pre-activation at ``Z`` in ``run.trace`` without evaluating it."""
        run.trace.preactivation[self.index] = self.preactivation(ev, Z)
