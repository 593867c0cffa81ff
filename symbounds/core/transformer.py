"""A generic Transformer held as exact data, and one forward pass that runs in every context.

Conventions (columns are tokens, rows are features; ``Z`` is ``D x n``):

* **Attention layer** with heads ``h``::

      score_h[j, k] = <W_Q^h z_j, W_K^h z_k> / tau          (no hidden 1/sqrt(d_k))
      pi_h[j, :]    = softmax(score_h[j, :])  or  hardmax (ties averaged)
      out_j         = rho * z_j + sum_h W_O^h sum_k pi_h[j, k] W_V^h z_k

* **Feed-forward layer** (token-wise, ReLU ``sigma``)::

      out_j = eta * z_j + W2 sigma(W1 z_j + b1) + b2

* **Embedding** (vector input ``x`` in R^d): ``Z_0 = base`` plus ``E x`` added to column ``column``.
  Token input (``input="tokens"``): ``Z_0`` is the given ``d x n`` matrix of tokens.
* **Readout**: the entry ``Z_L[row, column]``.

The layer records and their exact weights are in :mod:`symbounds.core.network` (re-exported here).
Weights are held exactly (SymPy expressions, ints or rationals) and converted once per context and
precision (:meth:`Transformer.numeric`) into the named numeric layers of :mod:`symbounds.core.layers`;
:func:`forward` walks them, each layer's ``apply`` running against a
:class:`~symbounds.core.evaluator.ScalarEvaluator` over the context.  The forward pass never branches on an inexact number: ReLU
is ``ctx.max``, a softmax is shifted by an exactly representable point, and a hardmax argmax is
decided by three-valued comparisons (raising :class:`~symbounds.core.contexts.Undecided` if it cannot be).

Attention heads whose scores cannot depend on the input (their ``W_Q`` and ``W_K`` read only rows
that no input can reach, found by propagating a dependency mask through the weights:
:meth:`Transformer.structure`) have their attention matrices computed once per context and
precision and reused for every input.

``forward(ctx, model, Z_k, start=k, stop=m)`` runs only the layers ``k..m-1`` from a given state
(e.g. one returned by ``forward(ctx, model, x, stop=k)``), so a construction can inspect a network
at an intermediate stage without a second evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import flint
import sympy

from .contexts import Context
from .evaluator import ScalarEvaluator
from .layers import AttentionWeights, EmbeddingWeights, FeedForwardWeights, HeadWeights, Run
from .network import (
    Attention,
    Embedding,
    FeedForward,
    Head,
    Readout,
    as_matrix,
    flatten,
    is_exact_zero,
    layer_text,
    shape,
)
from .structure import ModelStructure, analyse

__all__ = [
    "Attention",
    "Embedding",
    "FeedForward",
    "Head",
    "Readout",
    "Trace",
    "Transformer",
    "as_matrix",
    "flatten",
    "forward",
    "is_exact_zero",
    "shape",
]


@dataclass
class Transformer:
    """Layers in order, an input embedding (or token input) and a readout."""

    layers: tuple
    embedding: Embedding | None = None
    readout: Readout | None = None
    input: str = "vector"  # or "tokens"
    #: Named constants the weights refer to, as ``((Symbol, definition), ...)`` in dependency
    #: order.  Keeping transcendental constants (an attention scale ``M``, ``e^{-cM}``, ...) as
    #: symbols stops SymPy from "simplifying" products of huge exponentials, and lets a context
    #: evaluate each definition once.
    definitions: tuple = ()
    # Caches are not init fields, so dataclasses.replace() (e.g. a tampered copy) starts empty.
    _numeric_cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    #: Share exactly equal softmax weights of the first layer's input-independent heads
    #: (shared_softmax.py, docs/performance.md); False computes every weight entry by entry (the
    #: reference the sharing is compared with): ``dataclasses.replace(model, share_softmax=False)``.
    share_softmax: bool = field(default=True, compare=False)
    _structure: ModelStructure | None = field(default=None, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        """What the network is, in one line: input, width, the layers by kind, the readout."""
        from .display import short

        d = f", d={len(self.embedding.E[0])}" if self.embedding is not None else ""
        n = f", n={len(self.embedding.base[0])} tokens" if self.embedding is not None else ""
        readout = "" if self.readout is None else f", readout=({self.readout.row}, {self.readout.column})"
        return short(f"Transformer(input={self.input}{d}{n}, D={self.width}, {len(self.layers)} layers: "
                     f"{'; '.join(layer_text(layer) for layer in self.layers)}{readout})")

    def _repr_html_(self) -> str:
        """A table of the layers (notebooks)."""
        from .display import html_table

        dense, nonzero = self.count_parameters()
        rows = [[str(i), layer_text(layer)] for i, layer in enumerate(self.layers)]
        caption = (f"{self.input}-input Transformer, width D = {self.width}, {len(self.layers)} layers, "
                   f"{dense} parameters ({nonzero} nonzero)"
                   + ("" if self.readout is None else f", readout Z[{self.readout.row}, {self.readout.column}]"))
        return html_table(["layer", "kind"], rows, caption)

    def __post_init__(self):
        self.layers = tuple(self.layers)
        if self.input not in ("vector", "tokens"):
            raise ValueError(f"unknown input kind {self.input!r}")
        if self.input == "vector" and self.embedding is None:
            raise ValueError("a vector-input model needs an embedding")

    # ---------------------------------------------------------------------------------------
    @property
    def width(self) -> int:
        if self.embedding is not None:
            return len(self.embedding.base)
        first = self.layers[0]
        return len(first.W1[0]) if isinstance(first, FeedForward) else len(first.heads[0].W_Q[0])

    def weight_arrays(self):
        """Yield ``(name, matrix-or-vector-or-scalar)`` for every trainable parameter array."""
        for i, layer in enumerate(self.layers):
            if isinstance(layer, Attention):
                for h, head in enumerate(layer.heads):
                    for nm in ("W_Q", "W_K", "W_V", "W_O"):
                        yield f"layer{i}.head{h}.{nm}", getattr(head, nm)
                yield f"layer{i}.skip", layer.skip
            else:
                for nm in ("W1", "b1", "W2", "b2"):
                    yield f"layer{i}.{nm}", getattr(layer, nm)
                yield f"layer{i}.skip", layer.skip

    def weights(self):
        """Every scalar weight and bias of the attention and feed-forward layers (skip weights,
        the embedding and the readout excluded): what the parameter counts and norms range over."""
        for name, arr in self.weight_arrays():
            if not name.endswith(".skip"):
                yield from flatten(arr)

    def count_parameters(self) -> tuple[int, int]:
        """(dense, nonzero) parameter counts over attention and feed-forward weights and biases.

        Skip weights are architecture choices, not counted; the fixed embedding (positional
        encoding) and readout are not counted either.
        """
        dense = nonzero = 0
        for v in self.weights():
            dense += 1
            nonzero += not is_exact_zero(v)
        return dense, nonzero

    # ---------------------------------------------------------------------------------------
    def numeric(self, ctx: Context):
        """The weights converted to ``ctx`` (cached per context name and precision)."""
        # The key holds everything the cached *values* depend on.  A Taylor-model context also
        # has a box, but the weights (and the cached input-independent attention results) are
        # constant models, whose value is the same in every box; the box of a result is taken
        # from the operand with a gradient (symbounds.core.taylor._box), never from a constant.
        key = (ctx.name, ctx.prec)
        cached = self._numeric_cache.get(key)
        if cached is None:
            env = self.definition_values(ctx)
            memo: dict = {}
            conv = lambda v: ctx.from_sympy(v, memo, env) if isinstance(v, sympy.Basic) else ctx.convert(v)
            cached = _NumericModel(self, ctx, conv)
            self._numeric_cache[key] = cached
        return cached

    def definition_values(self, ctx: Context) -> dict:
        """``{Symbol: value in ctx}`` for the model's named constants."""
        env: dict = {}
        memo: dict = {}
        for sym, expr in self.definitions:
            env[sym] = ctx.from_sympy(expr, memo, env)
        return env

    def clear_cache(self):
        """Forget every conversion of the weights (:meth:`numeric`)."""
        self._numeric_cache.clear()

    def cached_numeric(self, key: tuple):
        """The weights converted for ``key = (context name, precision)``, or None when :meth:`numeric`
        has not converted them (or they were dropped)."""
        return self._numeric_cache.get(key)

    def drop_numeric(self, key: tuple) -> None:
        """Forget the conversion for ``key = (context name, precision)`` (nothing if there is none)."""
        self._numeric_cache.pop(key, None)

    def keep_numeric_only(self, key: tuple) -> None:
        """Forget every conversion of the weights but the one for ``key`` (memory after a run)."""
        for k in [k for k in self._numeric_cache if k != key]:
            del self._numeric_cache[k]

    def constant_heads(self) -> dict:
        """``{(layer, head): kind}`` for every attention head: ``"output"`` when neither its scores
        nor its values can depend on the input (its whole output is computed once), ``"scores"``
        when only its values can, ``False`` when its scores can (:attr:`ModelStructure.constant_heads`)."""
        return dict(self.structure().constant_heads)

    def affine_prefix(self) -> int:
        """How many leading layers are affine in the input ``x`` (found from the weights):
        attention layers whose scores are input independent, and feed-forward layers whose
        input-dependent units all come in linear pairs.  Their composition ``Z(x) = F_0 + sum_i
        x_i F_i`` is computed once per context and precision and reused for every input."""
        return self.structure().affine_prefix

    def structure(self) -> ModelStructure:
        """The model's :class:`~symbounds.core.structure.ModelStructure`, found once from the exact
        weights and kept (a copy made with ``dataclasses.replace`` finds its own)."""
        if self._structure is None:
            self._structure = analyse(self, self.share_softmax)
        return self._structure



class _NumericModel:
    """A model's weights in one context, plus the cache of input-independent attention matrices."""

    def __init__(self, model: Transformer, ctx: Context, conv):
        self.ctx = ctx
        mat = lambda m: [[conv(v) for v in row] for row in m]
        vec = lambda v: [conv(x) for x in v]
        pairs = model.structure().relu_pairs
        with ctx.scope():
            self.layers = []
            for i, layer in enumerate(model.layers):
                if isinstance(layer, Attention):
                    heads = tuple(HeadWeights(mat(h.W_Q), mat(h.W_K), mat(h.W_V), mat(h.W_O)) for h in layer.heads)
                    tau = None if layer.tau is None else conv(layer.tau)
                    self.layers.append(AttentionWeights(i, layer.kind, conv(layer.skip), tau, heads))
                else:
                    self.layers.append(FeedForwardWeights(i, mat(layer.W1), vec(layer.b1), mat(layer.W2),
                                                          vec(layer.b2), conv(layer.skip), pairs[i]))
            emb = model.embedding
            self.embedding = None if emb is None else EmbeddingWeights(mat(emb.base), mat(emb.E), emb.column)
        self.attention_cache: dict = {}


@dataclass
class Trace:
    """Intermediate values of one forward pass (all in the context's numbers).

    ``Z[i]`` is the input of layer ``start + i`` (for a full pass ``Z[0]`` is the embedding),
    ``Z[-1]`` the final state,
    ``attention[i][h]`` the ``n x n`` matrix ``pi_h`` of attention layer ``i`` (a list of rows, or
    for a head with shared softmax weights a :class:`~symbounds.core.shared_weights.SharedMatrix`,
    which indexes like one and is read on demand), and
    ``preactivation[i]`` the hidden ``W1 Z + b1`` of feed-forward layer ``i``.
    """

    Z: list = field(default_factory=list)
    attention: dict = field(default_factory=dict)
    preactivation: dict = field(default_factory=dict)


def embed(ctx: Context, model: Transformer, x) -> list:
    """Z_0 for input ``x`` (a vector for vector models, a D x n token matrix for token models)."""
    num = model.numeric(ctx)
    with ctx.scope():
        if model.input == "tokens":
            return [[ctx.convert(v) for v in row] for row in x]
        xs = [ctx.convert(v) for v in x]
        d = len(model.embedding.E[0])
        if len(xs) != d:
            raise ValueError(f"input has {len(xs)} coordinates, the model expects {d}")
        return num.embedding.apply(ScalarEvaluator(ctx), xs)


def forward(ctx: Context, model: Transformer, x, trace: bool = False, *, start: int | None = None,
            stop: int | None = None):
    """Evaluate ``model`` at ``x`` in ``ctx``, or only its layers ``start <= i < stop``.

    With ``start`` omitted, ``x`` is the model input (a vector for vector models, embedded as
    ``Z_0 = base + E x``; a ``D x n`` token matrix for token models) and the layers run from the
    first.  With ``start = k`` (``0 <= k <= L``), ``x`` is the state ``Z_k``, the ``D x n`` input
    of layer ``k`` -- e.g. the ``Z`` an earlier slice returned; no embedding is applied.  Entries
    of a state may be exact numbers (int, Fraction, fmpq, SymPy) or numbers of ``ctx``.  ``stop``
    (default ``L``) ends the slice, so for every ``k``::

        forward(ctx, m, forward(ctx, m, x, stop=k), start=k) == forward(ctx, m, x)

    exactly in the exact context; in balls both sides enclose the same value.

    Returns the readout ``Z_L[row, column]`` when the slice runs to the last layer and the model
    has a readout, else the state ``Z_stop`` (a ``D x n`` list of lists); with ``trace=True`` also
    a :class:`Trace` whose ``Z[0]`` is the slice's first state (attention matrices and
    preactivations keyed by the absolute layer index).

    Shortcuts (each an exact rewriting of the same function, never a change of the value):

    * the *affine prefix* (the leading layers that are affine in ``x``, composed once per context
      and precision as ``F_0 + sum_i x_i F_i``) is used only from the model input, when the slice
      covers the whole prefix.  With a trace, each state ``Z_l`` of the prefix is its own
      composition ``F_0^l + sum_i x_i F_i^l``, its attention matrices are the cached
      input-independent ones and its pre-activations are computed from those states; a slice
      with ``start = 0`` from the embedded input evaluates every layer instead;
    * *input-independent heads* (attention matrices and outputs cached per context and
      precision) are used only from the model input: a state given mid-network need not be one
      the model produces, so a slice with ``start`` recomputes every head;
    * *readout pruning* (only the readout's column is evaluated from the last attention layer on)
      applies only when the slice ends at the last layer, without a trace;
    * *shared softmax weights*: the first layer's input-independent softmax heads compute each
      exactly-equal score's exponential and each normaliser of rows that are exact permutations
      once (equalities decided on exact forms of the weights, see ``shared_softmax.py`` and
      docs/performance.md); off for a model with ``share_softmax=False``;
    * heads with ``W_O W_V = 0`` contribute exactly ``0`` and are skipped (with a trace their
      attention matrix is still computed and recorded), and ReLU pairs computing a linear function
      are evaluated as that linear map (``FeedForwardWeights.apply``): both hold for every state.

    The pass is a walk over the numeric layers (:mod:`symbounds.core.layers`): each layer's
    ``apply`` runs against a :class:`~symbounds.core.evaluator.ScalarEvaluator` over ``ctx``, and
    the facts the shortcuts rest on come from the model's :class:`ModelStructure`.
    """
    if not isinstance(model, Transformer):  # a layer graph (symbounds.core.graph) evaluates itself
        if trace or start is not None or stop is not None:
            raise ValueError("a layer graph is evaluated whole (no trace, no layer slice)")
        return model.forward(ctx, x)
    L = len(model.layers)
    first = 0 if start is None else start
    stop = L if stop is None else stop
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (first, stop)) or not 0 <= first <= stop <= L:
        raise ValueError(f"layer slice [{start}, {stop}) is not inside [0, {L}]")
    num = model.numeric(ctx)
    st = model.structure()
    tr = Trace() if trace else None
    run = Run(st, num.attention_cache, st.constant_heads if start is None else {}, tr)
    ev = ScalarEvaluator(ctx)
    readout = model.readout if stop == L else None
    needed = st.needed_columns if tr is None and readout is not None else {}
    with ctx.scope():
        prefix = st.affine_prefix if start is None and model.input == "vector" else 0
        if 0 < prefix <= stop:
            first = prefix
            if tr is not None:  # the prefix's states, matrices and pre-activations, layer by layer
                Zi = embed(ctx, model, x)
                for i in range(prefix):
                    tr.Z.append(Zi)
                    num.layers[i].record(ev, Zi, run)
                    Zi = _affine_prefix_value(ctx, model, num, i + 1, x)
            Z = _affine_prefix_value(ctx, model, num, prefix, x)
        elif start is None:
            Z = embed(ctx, model, x)
        else:
            Z = _state(ctx, model, x)
        for i in range(first, stop):
            if tr is not None:
                tr.Z.append(Z)
            Z = num.layers[i].apply(ev, Z, run, needed.get(i))
        if tr is not None:
            tr.Z.append(Z)
        out = Z if readout is None else Z[readout.row][readout.column]
    return (out, tr) if trace else out


def _state(ctx: Context, model: Transformer, Z) -> list:
    """A ``D x n`` state in ``ctx`` numbers (exact entries converted, context numbers kept)."""
    try:
        rows = [list(r) for r in Z]
    except TypeError:
        rows = []
    if len(rows) != model.width or len({len(r) for r in rows}) != 1:
        raise ValueError(f"a state must be a {model.width} x n matrix")
    exact = (int, Fraction, flint.fmpq, flint.fmpz, sympy.Basic, str)  # str: an exact number string
    conv = lambda v: ctx.convert(v) if isinstance(v, exact) else ctx.native(v)
    return [[conv(v) for v in r] for r in rows]


def _affine_prefix_value(ctx, model, num, L, x):
    """Z after the first ``L`` layers (``L`` at most the affine prefix, so affine in x):
    ``F_0 + sum_i x_i F_i``, with ``F_0`` and ``F_i`` computed once from the layers at x = 0 and
    x = e_i (in ``ctx.constants_context()``: a Taylor-model context borrows them from its ball
    context).  Only the entries that can depend on x (the exact dependency mask) are combined."""
    key = ("affine", L)
    cached = num.attention_cache.get(key)
    d = len(model.embedding.E[0])
    if cached is None:
        base = ctx.constants_context()
        bnum = model.numeric(base)
        maps = bnum.attention_cache.get(("affine-maps", L))
        if maps is None:  # every stage of the prefix in one pass (a trace reads them all)
            with base.scope():
                for stage, m in enumerate(_affine_stage_maps(base, model, bnum, model.affine_prefix()), start=1):
                    bnum.attention_cache[("affine-maps", stage)] = m
            maps = bnum.attention_cache[("affine-maps", L)]
        if base is not ctx:
            conv = lambda M: [[ctx.convert(v) for v in row] for row in M]
            maps = (conv(maps[0]), [conv(F) for F in maps[1]])
        cached = (maps[0], maps[1], model.structure().stage_dependence[L - 1])
        num.attention_cache[key] = cached
    F0, Fs, dep = cached
    xs = [ctx.convert(v) for v in x]
    if len(xs) != d:
        raise ValueError(f"input has {len(xs)} coordinates, the model expects {d}")
    Z = [list(row) for row in F0]
    for r, drow in enumerate(dep):
        for j, dependent in enumerate(drow):
            if dependent:
                Z[r][j] = ctx.affine_combination(F0[r][j], [Fk[r][j] for Fk in Fs], xs)
    return Z


def _affine_prefix_maps(ctx, model, num, L):
    """(F_0, [F_i]): the first L layers at x = 0 and x = e_i."""
    return _affine_stage_maps(ctx, model, num, L)[-1]


def _affine_stage_maps(ctx, model, num, L):
    """``[(F_0, [F_i]) after layer l for l = 1..L]``: the first L layers at x = 0 and x = e_i.
    Each attention head's weights (input independent in the prefix) are computed once and applied
    to every basis input, then dropped, so memory stays at one head's matrix; shared heads go
    through one product over their value-carrying columns, never a full matrix."""
    d = len(model.embedding.E[0])
    Zs = [embed(ctx, model, [1 if i == k else 0 for i in range(d)] if k >= 0 else [0] * d) for k in range(-1, d)]
    ev = ScalarEvaluator(ctx)
    run = Run(model.structure(), num.attention_cache, model.structure().constant_heads)
    stages = []
    for i in range(L):
        Zs = num.layers[i].apply_all(ev, Zs, run)
        stages.append(_stage(Zs))
    return stages


def _stage(Zs):
    """``(F_0, [F_i])`` from the states at x = 0 and x = e_i: ``F_i = Z(e_i) - Z(0)``."""
    F0 = Zs[0]
    return F0, [[[a - b for a, b in zip(r1, r0)] for r1, r0 in zip(Fk, F0)] for Fk in Zs[1:]]
