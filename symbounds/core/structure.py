"""What a network's exact weights say about its evaluation, found once per model.

:class:`ModelStructure` holds every fact the evaluators read from the weights (never from a
number): which attention heads cannot depend on the input, how many leading layers are affine in
the input, which heads are silent, which ReLU units pair into linear maps, which columns reach the
readout and which tokens carry values at the first layer, and the exact sharing of the first
layer's input-independent softmax weights.  Each fact licenses an exact rewriting of the forward
pass (docs/performance.md), so it is decided on exact forms, and conservatively: a nonzero weight
is assumed to carry dependence.

``Transformer.structure()`` computes it once and caches it on the model; a model changed with
``dataclasses.replace`` (a tampered copy) starts without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property, lru_cache

import sympy

from . import shared_softmax
from .network import Attention, FeedForward, shape
from .network import is_exact_zero as _exact_zero


__all__ = ["ModelStructure", "analyse", "linear_pairs", "needed_rows", "value_columns"]


@lru_cache(maxsize=1 << 16)
def _cached_zero(v) -> bool:
    if isinstance(v, (sympy.sin, sympy.cos)):  # sin(pi q) = 0 iff q is an integer, cos iff q - 1/2 is
        q, rest = v.args[0].as_coeff_Mul()
        if rest is sympy.pi and q.is_Rational:
            f = Fraction(int(q.p), int(q.q)) - (0 if isinstance(v, sympy.sin) else Fraction(1, 2))
            return f.denominator == 1
    return _exact_zero(v)


def is_exact_zero(v) -> bool:
    """:func:`symbounds.core.network.is_exact_zero`, remembered per weight: the analyses below test
    each weight several times (the same ``sin(pi q)`` recurs across heads and passes)."""
    try:
        return _cached_zero(v)
    except TypeError:  # an unhashable weight
        return _exact_zero(v)


@dataclass(frozen=True)
class ModelStructure:
    """The structure of one model, found from its exact weights.

    Frozen, and its mappings are read, never written, by every evaluator (they stay plain dicts so
    that a model and its structure pickle for worker processes).

    * ``constant_heads``: ``{(layer, head): kind}`` for the attention heads of the affine-prefix
      analysis: ``"output"`` when neither the head's scores nor its values can depend on the input
      (its whole output is computed once), ``"scores"`` when only its values can, ``False`` when its
      scores can (empty for token input: every token is input);
    * ``affine_prefix``: how many leading layers are affine in the input ``x`` (attention layers
      whose scores are input independent, feed-forward layers whose input-dependent units all come
      in linear pairs): their composition ``Z(x) = F_0 + sum_i x_i F_i`` is computed once;
    * ``prefix_dependence``: the mask ``dep[r][j]`` (entry ``(r, j)`` of the state after the prefix
      may depend on ``x``), None without a prefix analysis; ``stage_dependence[l]`` the mask after
      layer ``l`` of the prefix;
    * ``silent_heads``: ``{(layer, head)}`` with ``W_O W_V = 0`` exactly (their output is 0 whatever
      the attention matrix is);
    * ``relu_pairs[l]``: the hidden units ``(u, u')`` of feed-forward layer ``l`` with ``W1[u'] =
      -W1[u]``, zero biases and ``W2[:, u'] = -W2[:, u]``, which compute ``W2[:, u] y`` exactly
      (``()`` for an attention layer);
    * ``needed_columns``: ``{layer: columns}`` from the last attention layer on: only the readout's
      column reaches the output (empty without a readout);
    * ``first_value_columns``: ``{head: tokens}`` of a first attention layer of a vector-input model:
      the tokens ``k`` whose values ``W_V z_k`` can be nonzero for some input;
    * ``share_softmax``: whether the first layer's input-independent softmax heads share their
      exactly equal weights (:attr:`shared_softmax`); False computes every weight entry by entry
      (the reference the sharing is tested against).
    """

    constant_heads: dict
    affine_prefix: int
    prefix_dependence: tuple | None
    stage_dependence: tuple
    silent_heads: frozenset
    relu_pairs: tuple
    needed_columns: dict
    first_value_columns: dict
    share_softmax: bool = True
    _model: object = field(default=None, repr=False, compare=False)

    @cached_property
    def shared_softmax(self):
        """The exact sharing structure (:func:`symbounds.core.shared_softmax.structure`) of the first
        layer's input-independent, non-silent softmax heads, with ``value_columns`` set to their
        :attr:`first_value_columns`; None when nothing is shared or sharing is off.

        Only for the first layer of a vector-input model: there the rows its heads score are rows of
        the embedding that no input reaches, so the tokens are the exact ``base`` entries.  Found on
        first use (it costs a pass over every score's exact form)."""
        model = self._model
        if not self.share_softmax or model is None or model.input != "vector" or not model.layers:
            return None
        layer = model.layers[0]
        if not isinstance(layer, Attention) or layer.kind != "softmax":
            return None
        heads = [h for h in range(len(layer.heads))
                 if self.constant_heads.get((0, h)) and (0, h) not in self.silent_heads]
        S = shared_softmax.structure(layer, model.embedding.base, heads, is_exact_zero)
        if S is not None:
            S.value_columns = {h: self.first_value_columns[h] for h in S.heads}
        return S

    def shared_layer(self, i: int):
        """:attr:`shared_softmax` for layer 0, None for every other layer."""
        return self.shared_softmax if i == 0 else None


def analyse(model, share_softmax: bool = True) -> ModelStructure:
    """The :class:`ModelStructure` of ``model`` (a :class:`~symbounds.core.transformer.Transformer`)."""
    const, prefix, dep, stages = _dependence(model)
    pairs = tuple(tuple(linear_pairs(layer)) if isinstance(layer, FeedForward) else () for layer in model.layers)
    first = model.layers[0] if model.layers else None
    vcols = (value_columns(model, first, range(len(first.heads)))
             if model.input == "vector" and isinstance(first, Attention) else {})
    return ModelStructure(
        constant_heads=const,
        affine_prefix=prefix,
        prefix_dependence=dep,
        stage_dependence=stages,
        silent_heads=_silent_heads(model),
        relu_pairs=pairs,
        needed_columns=needed_rows(model),
        first_value_columns=vcols,
        share_softmax=share_softmax,
        _model=model,
    )


def needed_rows(model) -> dict:
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



def value_columns(model, layer: Attention, heads) -> dict:
    """``{head: columns}``: the tokens whose values ``W_V z_k`` can be nonzero at the first layer
    (exact zeros of the embedding ``base + E x``, for every ``x``)."""
    emb = model.embedding
    n = len(emb.base[0])
    cols = []
    for c, row in enumerate(emb.base):
        nz = {k for k, v in enumerate(row) if not is_exact_zero(v)}
        if any(not is_exact_zero(e) for e in emb.E[c]):
            nz.add(emb.column)
        cols.append(nz)
    out, seen = {}, {}
    for h in heads:
        read = frozenset(c for vrow in layer.heads[h].W_V for c, v in enumerate(vrow) if not is_exact_zero(v))
        if read not in seen:  # heads reading the same rows have the same columns
            seen[read] = sorted(set().union(*(cols[c] for c in read))) if read else []
            assert all(0 <= k < n for k in seen[read])
        out[h] = list(seen[read])
    return out



def linear_pairs(layer: FeedForward) -> list[tuple[int, int]]:
    """Hidden units (u, u') of an FFN that together compute a linear function, found from the exact
    weights (``FeedForwardWeights.apply`` evaluates them as that linear map)."""
    W1, b1, W2 = layer.W1, layer.b1, layer.W2
    zero_bias = [u for u in range(len(W1)) if is_exact_zero(b1[u]) and any(not is_exact_zero(w) for w in W1[u])]
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
            if all(is_exact_zero(row[u2] + row[u]) for row in W2):
                pairs.append((u, u2))
                used.update((u, u2))
                break
    return pairs


# ------------------------------------------------------------------------------------------
# Which attention scores can depend on the input: propagate a boolean mask dep[r][j] ("entry
# (r, j) of Z may depend on x") through the exact weights.  Conservative: a nonzero weight is
# assumed to carry dependence.


def _dependence(model) -> tuple:
    """(input-independent heads, length of the affine prefix, dependency mask after it, the
    dependency masks after each layer of the prefix)."""
    if model.input == "tokens":
        return {}, 0, None, ()  # every token is input
    emb = model.embedding
    D, n = shape(emb.base)
    dep = [[False] * n for _ in range(D)]
    for r in range(D):
        if any(not is_exact_zero(e) for e in emb.E[r]):
            dep[r][emb.column] = True
    const = {}
    nz = lambda v: not is_exact_zero(v)
    affine, affine_dep = True, None
    prefix, stage_dep = 0, []
    for i, layer in enumerate(model.layers):
        dep_rows = [any(row) for row in dep]
        if isinstance(layer, Attention):
            skip = nz(layer.skip)
            new = [list(row) if skip else [False] * n for row in dep]
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
            # each weight tested once (not once per token): the nonzero columns of each row
            hidden = []
            for wrow in layer.W1:
                cols = [dep[c] for c, w in enumerate(wrow) if nz(w)]
                hidden.append([any(col[j] for col in cols) for j in range(n)])
            paired = {u for pair in linear_pairs(layer) for u in pair}
            affine = affine and all(u in paired or not any(hidden[u]) for u in range(len(hidden)))
            skip = nz(layer.skip)
            new = []
            for r, w2row in enumerate(layer.W2):
                units = [hidden[u] for u, w in enumerate(w2row) if nz(w)]
                new.append([any(hu[j] for hu in units) or (skip and dep[r][j]) for j in range(n)])
            dep = new
        if affine:
            prefix, affine_dep = i + 1, [list(row) for row in dep]
            stage_dep.append(affine_dep)
    return const, prefix, affine_dep, tuple(stage_dep)



def _silent_heads(model) -> frozenset:
    """``{(layer, head)}`` whose ``W_O W_V`` is exactly zero (the head's output is 0 for every
    attention matrix), decided on the exact weights: each inner index ``a`` has a zero column
    ``W_O[:, a]`` or a zero row ``W_V[a, :]``, or (rational weights) the product is 0."""
    nz = lambda v: not is_exact_zero(v)
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
