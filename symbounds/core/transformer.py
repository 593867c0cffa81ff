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

Weights are held exactly (SymPy expressions, ints or rationals) and converted once per context and
precision (:meth:`Transformer.numeric`).  The forward pass never branches on an inexact number: ReLU
is ``ctx.max``, a softmax is shifted by an exactly representable point, and a hardmax argmax is
decided by three-valued comparisons (raising :class:`~symbounds.core.contexts.Undecided` if it cannot be).

Attention heads whose scores cannot depend on the input (their ``W_Q`` and ``W_K`` read only rows
that no input can reach, found by propagating a dependency mask through the weights) have their
attention matrices computed once per context and precision and reused for every input.

``forward(ctx, model, Z_k, start=k, stop=m)`` runs only the layers ``k..m-1`` from a given state
(e.g. one returned by ``forward(ctx, model, x, stop=k)``), so a construction can inspect a network
at an intermediate stage without a second evaluator.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from fractions import Fraction

import flint
import numpy as np
import sympy

from . import shared_softmax
from .contexts import Context
from .shared_weights import SharedMatrix

__all__ = [
    "Head",
    "Attention",
    "FeedForward",
    "Embedding",
    "Readout",
    "Transformer",
    "forward",
    "Trace",
]

Matrix = tuple  # tuple of row tuples of exact entries


def as_matrix(rows) -> Matrix:
    return tuple(tuple(r) for r in rows)


def shape(m: Matrix) -> tuple[int, int]:
    return (len(m), len(m[0]) if m else 0)


def _is_exact_zero(v) -> bool:
    if isinstance(v, sympy.Basic):
        known = _known_zero(v)
        return known if known is not None else v.is_zero is True
    return v == 0


def _known_zero(v):
    """Whether a SymPy weight is exactly zero, decided without the assumption system for the
    common forms (numbers, ``sin(pi q)`` and ``cos(pi q)`` with ``q`` rational, products of
    them: a product of finite factors is zero iff a factor is); None for anything else."""
    if v.is_Rational:
        return v == 0
    if isinstance(v, (sympy.sin, sympy.cos)):
        q, rest = v.args[0].as_coeff_Mul()
        if rest is sympy.pi and q.is_Rational:
            return bool((q if isinstance(v, sympy.sin) else q - sympy.Rational(1, 2)).is_integer)
        return None
    if v.is_Mul:
        parts = [_known_zero(a) for a in v.args]
        if all(p is False for p in parts):
            return False
    return None


@dataclass(frozen=True)
class Head:
    """One attention head: ``W_Q, W_K`` are ``d_k x D``, ``W_V`` is ``d_v x D``, ``W_O`` is ``D x d_v``."""

    W_Q: Matrix
    W_K: Matrix
    W_V: Matrix
    W_O: Matrix

    def __repr__(self) -> str:  # the shapes, not the weights (a repr of every weight runs to pages)
        return "Head(" + ", ".join(f"{k} {_shape(getattr(self, k))}" for k in ("W_Q", "W_K", "W_V", "W_O")) + ")"


@dataclass(frozen=True)
class Attention:
    """Multi-head self-attention with skip weight ``skip`` (the paper's rho)."""

    heads: tuple[Head, ...]
    kind: str = "softmax"  # or "hardmax"
    skip: object = 0
    tau: object = None  # scores are divided by tau when given

    def __post_init__(self):
        if self.kind not in ("softmax", "hardmax"):
            raise ValueError(f"unknown attention kind {self.kind!r}")

    def __repr__(self) -> str:
        tau = "" if self.tau is None else f", tau={_number_text(self.tau)}"
        return f"Attention({self.kind}, {len(self.heads)} heads, skip={_number_text(self.skip)}{tau})"


@dataclass(frozen=True)
class FeedForward:
    """Token-wise ``eta z + W2 relu(W1 z + b1) + b2`` (``skip`` is the paper's eta)."""

    W1: Matrix
    b1: tuple
    W2: Matrix
    b2: tuple
    skip: object = 0

    def __repr__(self) -> str:
        return f"FeedForward(width {len(self.W1)}, W1 {_shape(self.W1)}, skip={_number_text(self.skip)})"


@dataclass(frozen=True)
class Embedding:
    """``Z_0 = base``, plus ``E x`` added to column ``column`` (0-based)."""

    base: Matrix  # D x n
    E: Matrix  # D x d
    column: int = 0

    def __repr__(self) -> str:
        return f"Embedding(base {_shape(self.base)}, E {_shape(self.E)}, column={self.column})"


@dataclass(frozen=True)
class Readout:
    row: int = 0
    column: int = 0


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
    _analysis: tuple | None = field(default=None, init=False, repr=False, compare=False)
    #: exact sharing structures of input-independent softmax heads, per layer (shared_softmax.py)
    _shared: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        """What the network is, in one line: input, width, the layers by kind, the readout."""
        from .display import short

        d = f", d={len(self.embedding.E[0])}" if self.embedding is not None else ""
        n = f", n={len(self.embedding.base[0])} tokens" if self.embedding is not None else ""
        readout = "" if self.readout is None else f", readout=({self.readout.row}, {self.readout.column})"
        return short(f"Transformer(input={self.input}{d}{n}, D={self.width}, {len(self.layers)} layers: "
                     f"{'; '.join(_layer_text(layer) for layer in self.layers)}{readout})")

    def _repr_html_(self) -> str:
        """A table of the layers (notebooks)."""
        from .display import html_table

        dense, nonzero = self.count_parameters()
        rows = [[str(i), _layer_text(layer)] for i, layer in enumerate(self.layers)]
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
            nonzero += not _is_exact_zero(v)
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
        when only its values can, ``False`` when its scores can."""
        return self.analyse()[0]

    def affine_prefix(self) -> int:
        """How many leading layers are affine in the input ``x`` (found from the weights):
        attention layers whose scores are input independent, and feed-forward layers whose
        input-dependent units all come in linear pairs.  Their composition ``Z(x) = F_0 + sum_i
        x_i F_i`` is computed once per context and precision and reused for every input."""
        return self.analyse()[1]

    def analyse(self) -> tuple:
        """The model's structure, computed once from the exact weights: ``(constant heads, affine
        prefix length, the coordinates each layer's output depends on, silent heads, shared softmax
        structures per layer)`` (:meth:`constant_heads` and :meth:`affine_prefix` are its first two)."""
        if self._analysis is None:
            self._analysis = _analyse(self)
        return self._analysis


def _shape(m) -> str:
    """``"3x5"`` of a matrix given as rows."""
    return f"{len(m)}x{len(m[0]) if len(m) else 0}"


def _number_text(v) -> str:
    """A weight for a repr: an exact rational as it is, a symbolic one by its short form."""
    text = str(v)
    return text if len(text) <= 24 else text[:21] + "..."


def _layer_text(layer) -> str:
    if isinstance(layer, Attention):
        tau = "" if layer.tau is None else f", tau {_number_text(layer.tau)}"
        return f"attention {layer.kind} x{len(layer.heads)}{tau}"
    return f"ffn {len(layer.W1)}"


def flatten(arr):
    """The scalars of a weight given as nested tuples (a matrix, a vector or a number), row by row."""
    if isinstance(arr, tuple):
        for r in arr:
            yield from flatten(r)
    else:
        yield arr


class _NumericModel:
    """A model's weights in one context, plus the cache of input-independent attention matrices."""

    def __init__(self, model: Transformer, ctx: Context, conv):
        self.ctx = ctx
        mat = lambda m: [[conv(v) for v in row] for row in m]
        vec = lambda v: [conv(x) for x in v]
        with ctx.scope():
            self.layers = []
            for layer in model.layers:
                if isinstance(layer, Attention):
                    heads = [
                        (mat(h.W_Q), mat(h.W_K), mat(h.W_V), mat(h.W_O)) for h in layer.heads
                    ]
                    tau = None if layer.tau is None else conv(layer.tau)
                    self.layers.append(("attention", layer.kind, conv(layer.skip), tau, heads))
                else:
                    self.layers.append(
                        ("ffn", mat(layer.W1), vec(layer.b1), mat(layer.W2), vec(layer.b2), conv(layer.skip),
                         linear_pairs(layer))
                    )
            emb = model.embedding
            self.base = mat(emb.base) if emb is not None else None
            self.E = mat(emb.E) if emb is not None else None
        self.attention_cache: dict = {}


# ------------------------------------------------------------------------------------------
# Dense linear algebra on lists of lists, skipping exact zeros of the left factor (the weight
# matrices of a construction are sparse, and 0 * finite is exactly 0 in every context).


def _matmul(ctx: Context, A, B):
    n = len(B[0]) if B else 0
    zero = ctx.zero
    out = []
    for row in A:
        acc = [zero] * n
        for a, brow in zip(row, B):
            if ctx.is_zero(a):
                continue
            acc = [s + a * b for s, b in zip(acc, brow)]
        out.append(acc)
    return out


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
        emb = model.embedding
        if len(xs) != len(emb.E[0]):
            raise ValueError(f"input has {len(xs)} coordinates, the model expects {len(emb.E[0])}")
        Z = [list(row) for row in num.base]
        for r, erow in enumerate(num.E):
            add = ctx.zero
            nz = False
            for e, xi in zip(erow, xs):
                if not ctx.is_zero(e):
                    add = add + e * xi
                    nz = True
            if nz:
                Z[r][emb.column] = Z[r][emb.column] + add
        return Z


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
      docs/performance.md); switched off by :func:`plain_setup`;
    * heads with ``W_O W_V = 0`` contribute exactly ``0`` and are skipped (with a trace their
      attention matrix is still computed and recorded), and ReLU pairs computing a linear function
      are evaluated as that linear map (see ``_ffn``): both hold for every state.
    """
    L = len(model.layers)
    first = 0 if start is None else start
    stop = L if stop is None else stop
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (first, stop)) or not 0 <= first <= stop <= L:
        raise ValueError(f"layer slice [{start}, {stop}) is not inside [0, {L}]")
    num = model.numeric(ctx)
    silent = model.analyse()[3]
    const = model.constant_heads() if start is None else {}
    tr = Trace() if trace else None
    readout = model.readout if stop == L else None
    needed = needed_rows(model) if tr is None and readout is not None else {}
    with ctx.scope():
        prefix = model.affine_prefix() if start is None and model.input == "vector" else 0
        if 0 < prefix <= stop:
            first = prefix
            if tr is not None:  # the prefix's states, matrices and pre-activations, layer by layer
                Zi = embed(ctx, model, x)
                for i in range(prefix):
                    tr.Z.append(Zi)
                    _traced_prefix_layer(ctx, model, num, i, Zi, tr, silent)
                    Zi = _affine_prefix_value(ctx, model, num, i + 1, x)
            Z = _affine_prefix_value(ctx, model, num, prefix, x)
        elif start is None:
            Z = embed(ctx, model, x)
        else:
            Z = _state(ctx, model, x)
        for i in range(first, stop):
            layer = num.layers[i]
            if tr is not None:
                tr.Z.append(Z)
            if layer[0] == "attention":
                Z = _attention(ctx, num, i, layer, Z, const, tr, needed.get(i), silent, model)
            else:
                Z = _ffn(ctx, i, layer, Z, tr, needed.get(i))
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


def needed_rows(model: Transformer) -> dict:
    """``{layer: columns}`` for the layers from the last attention layer on: only the readout's
    column can reach the output (one query row of that attention, one column of the token-wise
    layers after it)."""
    if model.readout is None:
        return {}
    out = {}
    for i in range(len(model.layers) - 1, -1, -1):
        out[i] = (model.readout.column,)
        if isinstance(model.layers[i], Attention):
            break
    return out


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
        cached = (maps[0], maps[1], model.analyse()[4][L - 1])
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
    stages = []
    for i in range(L):
        layer = num.layers[i]
        if layer[0] == "ffn":
            Zs = [_ffn(ctx, i, layer, Z, None) for Z in Zs]
            stages.append(_stage(Zs))
            continue
        _, kind, skip, tau, heads = layer
        outs = [_skip_part(ctx, skip, Z) for Z in Zs]
        shared = _shared_numeric(ctx, model, num, i, Zs[0])
        silent = model.analyse()[3]
        if shared is not None:
            product = _shared_output_ball if ctx.name == "ball" else _shared_output_columns
            for out, acc in zip(outs, product(ctx, shared, heads, Zs)):
                for r, row in enumerate(acc):
                    if row is not None:
                        out[r] = [a + b for a, b in zip(out[r], row)]
        for h, (WQ, WK, WV, WO) in enumerate(heads):
            if (i, h) in silent or (shared is not None and h in shared.S.index):
                continue  # silent, or in the shared heads' product above
            pi = num.attention_cache.get((i, h))
            if pi is None:
                pi = _attention_matrix(ctx, kind, tau, WQ, WK, Zs[0])
            for out, Z in zip(outs, Zs):
                for r, crow in _head_output(ctx, pi, WV, WO, Z):
                    out[r] = [a + b for a, b in zip(out[r], crow)]
        Zs = outs
        stages.append(_stage(Zs))
    return stages


def _stage(Zs):
    """``(F_0, [F_i])`` from the states at x = 0 and x = e_i: ``F_i = Z(e_i) - Z(0)``."""
    F0 = Zs[0]
    return F0, [[[a - b for a, b in zip(r1, r0)] for r1, r0 in zip(Fk, F0)] for Fk in Zs[1:]]


def _skip_part(ctx, skip, Z):
    if ctx.is_zero(skip):
        z = ctx.zero
        return [[z] * len(Z[0]) for _ in Z]
    return [[skip * v for v in row] for row in Z]


def _head_output(ctx, pi, WV, WO, Z):
    """``[(row, values)]``: the rows of ``W_O sum_k pi[j][k] W_V z_k`` that ``W_O`` can write.

    Only the columns ``k`` of ``pi`` whose value ``W_V z_k`` is not exactly zero are read (most
    tokens carry no value), so a :class:`~symbounds.core.shared_weights.SharedMatrix` is never
    built in full."""
    n = len(Z[0])
    V = _matmul(ctx, WV, Z)  # d_v x n
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
    return [(r, crow) for r, crow in enumerate(_matmul(ctx, WO, A)) if any(not ctx.is_zero(v) for v in WO[r])]


def _head_weights(ctx, model, num, i, h, layer, Z, const, rows=None):
    """The attention matrix of head ``h`` of attention layer ``i`` at state ``Z``: for an
    input-independent head the cached one (a :class:`SharedMatrix` when its weights are shared),
    else computed (only the query rows ``rows`` when given)."""
    _, kind, _, tau, heads = layer
    WQ, WK = heads[h][0], heads[h][1]
    key = (i, h)
    if not const.get(key):
        return _attention_matrix(ctx, kind, tau, WQ, WK, Z, rows)
    pi = num.attention_cache.get(key)
    if pi is None:
        shared = _shared_numeric(ctx, model, num, i, Z) if model is not None else None
        if shared is not None and h in shared.S.index:
            pi = SharedMatrix(shared, h)
        else:
            pi = _attention_matrix(ctx, kind, tau, WQ, WK, Z)
        num.attention_cache[key] = pi
    return pi


def _attention(ctx, num, i, layer, Z, const, tr, rows=None, silent=frozenset(), model=None):
    _, kind, skip, tau, heads = layer
    out = _skip_part(ctx, skip, Z)
    pis = []
    for h, (WQ, WK, WV, WO) in enumerate(heads):
        key = (i, h)
        if key in silent:  # W_O W_V = 0: W_O sum_k pi_jk W_V z_k = 0 whatever pi is
            if tr is not None:
                pis.append(_attention_matrix(ctx, kind, tau, WQ, WK, Z))
            continue
        pi = _head_weights(ctx, model, num, i, h, layer, Z, const, rows)
        pis.append(pi)
        contrib = num.attention_cache.get(("out", key)) if const.get(key) == "output" else None
        if contrib is None:
            contrib = _head_output(ctx, pi, WV, WO, Z)
            if const.get(key) == "output":  # neither scores nor values depend on the input
                num.attention_cache[("out", key)] = contrib
        for r, crow in contrib:
            out[r] = [a + b for a, b in zip(out[r], crow)]
    if tr is not None:
        tr.attention[i] = pis
    return out


def _traced_prefix_layer(ctx, model, num, i, Z, tr, silent):
    """Record layer ``i`` of the affine prefix in ``tr`` without evaluating it (its output comes
    from the prefix maps): the attention matrices of an attention layer (input independent: the
    cached ones), the pre-activation ``W1 Z + b1`` of a feed-forward layer."""
    layer = num.layers[i]
    if layer[0] == "ffn":
        _, W1, b1 = layer[:3]
        tr.preactivation[i] = [[h + b for h in row] for row, b in zip(_matmul(ctx, W1, Z), b1)]
        return
    _, kind, _, tau, heads = layer
    const = model.constant_heads()
    tr.attention[i] = [
        _attention_matrix(ctx, kind, tau, WQ, WK, Z) if (i, h) in silent
        else _head_weights(ctx, model, num, i, h, layer, Z, const)
        for h, (WQ, WK, _, _) in enumerate(heads)
    ]


def _attention_matrix(ctx, kind, tau, WQ, WK, Z, rows=None):
    Q = _matmul(ctx, WQ, Z)
    K = _matmul(ctx, WK, Z)
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
        pi.append(_softmax(ctx, scores) if kind == "softmax" else _hardmax(ctx, scores))
    return pi


#: Share exactly equal softmax weights of input-independent heads (see shared_softmax.py);
#: switched off by :func:`plain_setup` to compare with the entry-by-entry computation.
SHARED_SOFTMAX = True


@contextlib.contextmanager
def plain_setup():
    """Within the block, every attention weight is computed entry by entry (no sharing)."""
    global SHARED_SOFTMAX
    saved, SHARED_SOFTMAX = SHARED_SOFTMAX, False
    try:
        yield
    finally:
        SHARED_SOFTMAX = saved


def _shared_structure(model: Transformer, i: int):
    """The exact sharing structure of layer ``i``'s input-independent softmax heads, or None.

    Only for the first layer of a vector-input model: there the rows its heads score are rows
    of the embedding that no input reaches, so the tokens are the exact ``base`` entries."""
    if i in model._shared:
        return model._shared[i]
    S = None
    layer = model.layers[i]
    if i == 0 and model.input == "vector" and isinstance(layer, Attention) and layer.kind == "softmax":
        const, silent = model.constant_heads(), model.analyse()[3]
        heads = [h for h in range(len(layer.heads)) if const.get((i, h)) and (i, h) not in silent]
        S = shared_softmax.structure(layer, model.embedding.base, heads, _is_exact_zero)
        if S is not None:
            S.value_columns = value_columns(model, layer, S.heads)
    model._shared[i] = S
    return S


def value_columns(model: Transformer, layer: Attention, heads) -> dict:
    """``{head: columns}``: the tokens whose values ``W_V z_k`` can be nonzero at the first layer
    (exact zeros of the embedding ``base + E x``, for every ``x``)."""
    emb = model.embedding
    n = len(emb.base[0])
    cols = []
    for c, row in enumerate(emb.base):
        nz = {k for k, v in enumerate(row) if not _is_exact_zero(v)}
        if any(not _is_exact_zero(e) for e in emb.E[c]):
            nz.add(emb.column)
        cols.append(nz)
    out = {}
    for h in heads:
        read = {c for vrow in layer.heads[h].W_V for c, v in enumerate(vrow) if not _is_exact_zero(v)}
        out[h] = sorted(set().union(*(cols[c] for c in read))) if read else []
        assert all(0 <= k < n for k in out[h])
    return out


class _SharedNumeric:
    """A layer's shared softmax weights in one context: one exponential per distinct score
    (shifted by one exact point ``m`` for the whole layer), one reciprocal per normaliser."""

    def __init__(self, ctx, S, layer, Z):
        self.ctx, self.S = ctx, S
        _, _, _, tau, heads = layer
        qcol: dict = {}

        def query(h, j):
            v = qcol.get((h, j))
            if v is None:
                WQ = heads[h][0]
                v = qcol[(h, j)] = [_dot(ctx, row, Z, j) for row in WQ]
            return v

        scores = []
        for c, k in S.score_rep:
            a, j = S.class_rep[c]
            h = S.heads[a]
            s = ctx.zero
            for qa, wk in zip(query(h, j), heads[h][1]):
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


def _dot(ctx, wrow, Z, j):
    s = ctx.zero
    for c, w in enumerate(wrow):
        if not ctx.is_zero(w):
            s = s + w * Z[c][j]
    return s


def _shared_numeric(ctx, model, num, i, Z):
    """The layer's :class:`_SharedNumeric` in ``ctx`` (cached), or None (no shared structure)."""
    if not SHARED_SOFTMAX:
        return None
    key = ("shared", i)
    if key in num.attention_cache:
        return num.attention_cache[key]
    S = _shared_structure(model, i)
    val = None if S is None else _SharedNumeric(ctx, S, num.layers[i], Z)
    num.attention_cache[key] = val
    return val


def _shared_output_ball(ctx, shared, heads, Zs, block: int = 1 << 20):
    """``sum_h W_O^h V_h pi_h^T`` over the shared heads, for each state in ``Zs`` (``D x n`` lists),
    as Arb matrix products: ``[W_O^h V_h[:, cols_h] ...] @ [pi_h[:, cols_h]^T; ...]`` with
    ``cols_h`` the tokens whose values can be nonzero, the right factor built once per block of
    heads (at most ``block`` weights) and shared by every state."""
    S = shared.S
    D, n = len(Zs[0]), len(Zs[0][0])
    acc = [flint.arb_mat(D, n) for _ in Zs]
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
        R = flint.arb_mat(right)  # width x n
        for z, Z in enumerate(Zs):
            left = [[] for _ in range(D)]
            for h in live[b0:b1]:
                _, _, WV, WO = heads[h]
                cols = S.value_columns[h]
                Zc = flint.arb_mat([[Zr[k] for k in cols] for Zr in Z])
                part = (flint.arb_mat(WO) * (flint.arb_mat(WV) * Zc)).tolist()
                for r in range(D):
                    left[r].extend(part[r])
            acc[z] += flint.arb_mat(left) * R
        b0 = b1
    return [a.tolist() for a in acc]


def _shared_output_columns(ctx, shared, heads, Zs):
    """``sum_h W_O^h V_h pi_h^T`` over the shared heads, for each state in ``Zs``, in any context
    (the counterpart of :func:`_shared_output_ball` without Arb matrices): for each head the
    ``D x |cols_h|`` matrix ``W_O^h W_V^h Z[:, cols_h]``, then each row ``r`` it writes gains
    ``sum_c (W_O^h W_V^h Z)[r, c] pi_h[:, c]^T``, skipping exact zeros.  Rows no head writes are
    None."""
    S = shared.S
    D, n = len(Zs[0]), len(Zs[0][0])
    zero = ctx.zero
    outs = [[None] * D for _ in Zs]
    for h in S.heads:
        cols = S.value_columns[h]
        if not cols:
            continue
        _, _, WV, WO = heads[h]
        pis = [shared.column(h, k) for k in cols]
        for out, Z in zip(outs, Zs):
            prod = _matmul(ctx, WO, _matmul(ctx, WV, [[row[k] for k in cols] for row in Z]))
            for r, prow in enumerate(prod):
                terms = [(p, col) for p, col in zip(prow, pis) if not ctx.is_zero(p)]
                if not terms:
                    continue
                acc = out[r] if out[r] is not None else [zero] * n
                for p, col in terms:
                    acc = [a + p * w for a, w in zip(acc, col)]
                out[r] = acc
    return outs


def _softmax(ctx, scores):
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


def _hardmax(ctx, scores):
    winners = ctx.argmax_set(scores)
    w = ctx.one / ctx.rational(len(winners))
    row = [ctx.zero] * len(scores)
    for k in winners:
        row[k] = w
    return row


def _ffn(ctx, i, layer, Z, tr, cols=None):
    if cols is not None and len(cols) < len(Z[0]):
        # token-wise: evaluate only the columns that can reach the output, zeros elsewhere
        sub = _ffn(ctx, i, layer, [[row[j] for j in cols] for row in Z], tr)
        zero = ctx.zero
        full = [[zero] * len(Z[0]) for _ in sub]
        for r, row in enumerate(sub):
            for j, v in zip(cols, row):
                full[r][j] = v
        return full
    _, W1, b1, W2, b2, skip, pairs = layer
    n = len(Z[0])
    H = _matmul(ctx, W1, Z)
    H = [[h + b for h in row] for row, b in zip(H, b1)]
    if tr is not None:
        tr.preactivation[i] = H
    # A pair of units (u, u') with W1[u'] = -W1[u], zero biases and W2[:, u'] = -W2[:, u] computes
    # W2[:, u] (relu(y) - relu(-y)) = W2[:, u] y exactly: evaluate it as the linear map it is
    # (tighter enclosures, and linear in the input for a Taylor model).
    S = [None] * len(H)
    for u, u2 in pairs:
        S[u] = H[u]
        S[u2] = [ctx.zero] * n
    S = [[ctx.relu(h) for h in row] if s is None else s for s, row in zip(S, H)]
    out = _matmul(ctx, W2, S)
    out = [[o + b for o in row] for row, b in zip(out, b2)]
    if not ctx.is_zero(skip):
        out = [[o + skip * z for o, z in zip(orow, zrow)] for orow, zrow in zip(out, Z)]
    return out


def linear_pairs(layer: FeedForward) -> list[tuple[int, int]]:
    """Hidden units (u, u') of an FFN that together compute a linear function (see ``_ffn``),
    found from the exact weights."""
    W1, b1, W2 = layer.W1, layer.b1, layer.W2
    zero_bias = [u for u in range(len(W1)) if _is_exact_zero(b1[u]) and any(not _is_exact_zero(w) for w in W1[u])]
    by_row = {}
    for u in zero_bias:
        by_row.setdefault(tuple(W1[u]), []).append(u)
    pairs, used = [], set()
    for u in zero_bias:
        if u in used:
            continue
        neg = tuple(-w for w in W1[u])
        for u2 in by_row.get(neg, []):
            if u2 in used or u2 == u:
                continue
            if all(_is_exact_zero(row[u2] + row[u]) for row in W2):
                pairs.append((u, u2))
                used.update((u, u2))
                break
    return pairs


# ------------------------------------------------------------------------------------------
# Which attention scores can depend on the input: propagate a boolean mask dep[r][j] ("entry
# (r, j) of Z may depend on x") through the exact weights.  Conservative: a nonzero weight is
# assumed to carry dependence.


def _analyse(model: Transformer) -> tuple:
    """(input-independent heads, length of the affine prefix, dependency mask after it, silent
    heads, the dependency masks after each layer of the prefix)."""
    silent = _silent_heads(model)
    if model.input == "tokens":
        return {}, 0, None, silent, ()  # every token is input
    emb = model.embedding
    D, n = shape(emb.base)
    dep = [[False] * n for _ in range(D)]
    for r in range(D):
        if any(not _is_exact_zero(e) for e in emb.E[r]):
            dep[r][emb.column] = True
    const = {}
    nz = lambda v: not _is_exact_zero(v)
    affine, affine_dep = True, None
    prefix, stage_dep = 0, []
    for i, layer in enumerate(model.layers):
        dep_rows = [any(row) for row in dep]
        if isinstance(layer, Attention):
            new = [list(row) if nz(layer.skip) else [False] * n for row in dep]
            for h, head in enumerate(layer.heads):
                reads = {c for m in (head.W_Q, head.W_K) for row in m for c, v in enumerate(row) if nz(v)}
                scores_dep = any(dep_rows[c] for c in reads)
                v_dep = [
                    scores_dep or any(dep_rows[c] for c, v in enumerate(vrow) if nz(v)) for vrow in head.W_V
                ]
                # "output": nothing of the head depends on x; "scores": only its values do
                const[(i, h)] = False if scores_dep else ("scores" if any(v_dep) else "output")
                for r, orow in enumerate(head.W_O):
                    if any(nz(w) and v_dep[a] for a, w in enumerate(orow)):
                        new[r] = [True] * n
                affine = affine and not scores_dep
            dep = new
        else:
            hidden = [
                [any(nz(w) and dep[c][j] for c, w in enumerate(wrow)) for j in range(n)] for wrow in layer.W1
            ]
            paired = {u for pair in linear_pairs(layer) for u in pair}
            affine = affine and all(u in paired or not any(hidden[u]) for u in range(len(hidden)))
            new = []
            for r, w2row in enumerate(layer.W2):
                new.append(
                    [
                        any(nz(w) and hidden[u][j] for u, w in enumerate(w2row)) or (nz(layer.skip) and dep[r][j])
                        for j in range(n)
                    ]
                )
            dep = new
        if affine:
            prefix, affine_dep = i + 1, [list(row) for row in dep]
            stage_dep.append(affine_dep)
    return const, prefix, affine_dep, silent, tuple(stage_dep)



def _silent_heads(model: Transformer) -> frozenset:
    """``{(layer, head)}`` whose ``W_O W_V`` is exactly zero (the head's output is 0 for every
    attention matrix), decided on the exact weights: each inner index ``a`` has a zero column
    ``W_O[:, a]`` or a zero row ``W_V[a, :]``, or (rational weights) the product is 0."""
    nz = lambda v: not _is_exact_zero(v)
    out = set()
    for i, layer in enumerate(model.layers):
        if not isinstance(layer, Attention):
            continue
        for h, head in enumerate(layer.heads):
            WV, WO = head.W_V, head.W_O
            live = [a for a in range(len(WV)) if any(nz(v) for v in WV[a]) and any(nz(row[a]) for row in WO)]
            if not live:
                out.add((i, h))
                continue
            entries = [v for m in (WV, WO) for row in m for v in row]
            if all(isinstance(v, (int, Fraction)) for v in entries) and all(
                sum((Fraction(orow[a]) * Fraction(WV[a][c]) for a in live), Fraction(0)) == 0
                for orow in WO for c in range(len(WV[0]))
            ):
                out.add((i, h))
    return frozenset(out)
