"""The float64 box pass's layer records: a model's weights as float balls ``(Wm, Wr)`` (midpoints
and radii, ``Wr`` None when every entry is a double), one named record per layer, built once by
:class:`symbounds.core.float_boxes.FloatBoxEvaluator` and read by name by the evaluators built on
that pass (:mod:`symbounds.core.linear_bounds`, :mod:`symbounds.core.fused_boxes`).

They are the layers of :mod:`symbounds.core.layers` in the box pass's numbers (the same classes,
so the same ``apply``, walked with :class:`symbounds.core.float_boxes.FloatBoxOps`), with what the
pass needs besides: an attention layer holds only its non-silent heads (``W_O W_V = 0`` adds
nothing), each with its index in the layer, and its ``tau`` is the float ball of ``1/tau`` (the
pass multiplies the scores by it)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .layers import AttentionWeights, FeedForwardWeights, HeadWeights

__all__ = ["FloatAttention", "FloatFeedForward", "FloatHead"]


@dataclass(frozen=True, eq=False)
class FloatHead(HeadWeights):
    """One head's weights as float balls ``(Wm, Wr)``; ``index``: the head's index in its layer;
    ``const``: its scores are input independent; ``value_columns``: the tokens whose values can be
    nonzero (first layer only, else None)."""

    index: int = 0
    const: bool = False


@dataclass(frozen=True, eq=False)
class FloatAttention(AttentionWeights):
    """An attention layer's non-silent heads, skip weight and ``1/tau`` (None) as float balls."""

    @cached_property
    def _by_index(self) -> dict:
        return {hd.index: hd for hd in self.heads}

    def head(self, h: int) -> FloatHead:
        """The non-silent head whose index in the layer is ``h``."""
        return self._by_index[h]

    def head_items(self):
        """``(index, weights)`` of the non-silent heads, in order."""
        return ((hd.index, hd) for hd in self.heads)


@dataclass(frozen=True, eq=False)
class FloatFeedForward(FeedForwardWeights):
    """A feed-forward layer's weights as float balls, and its linear ReLU pairs."""
