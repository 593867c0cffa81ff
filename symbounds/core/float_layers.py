"""The float64 box pass's layer records: a model's weights as float balls ``(Wm, Wr)`` (midpoints
and radii, ``Wr`` None when every entry is a double), one named record per layer, built once by
:class:`symbounds.core.float_boxes.FloatBoxEvaluator` and read by name by the evaluators built on
that pass (:mod:`symbounds.core.linear_bounds`, :mod:`symbounds.core.fused_boxes`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FloatHead", "FloatAttention", "FloatFeedForward"]


@dataclass(frozen=True, eq=False)
class FloatHead:
    """One head's weights as float balls ``(Wm, Wr)``; ``const``: its scores are input independent;
    ``value_columns``: the tokens whose values can be nonzero (first layer only, else None)."""

    index: int
    W_Q: tuple
    W_K: tuple
    W_V: tuple
    W_O: tuple
    const: bool
    value_columns: list | None


@dataclass(frozen=True, eq=False)
class FloatAttention:
    """An attention layer's non-silent heads, skip weight and ``1/tau`` (None) as float balls."""

    heads: tuple
    skip: tuple
    tau: tuple | None


@dataclass(frozen=True, eq=False)
class FloatFeedForward:
    """A feed-forward layer's weights as float balls, and its linear ReLU pairs."""

    W1: tuple
    b1: tuple
    W2: tuple
    b2: tuple
    skip: tuple
    pairs: tuple
