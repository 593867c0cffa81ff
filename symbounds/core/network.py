"""The exact data of a Transformer: its layers, embedding and readout, weights as exact numbers.

Weights are SymPy expressions, ints or rationals, held as tuples of row tuples (columns are
tokens, rows are features).  The layer records here only hold the weights; the network they form
is :class:`symbounds.core.transformer.Transformer`, its structure
:class:`symbounds.core.structure.ModelStructure`, and its evaluation
:func:`symbounds.core.transformer.forward`.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

__all__ = [
    "Attention",
    "Embedding",
    "FeedForward",
    "Head",
    "Readout",
    "as_matrix",
    "flatten",
    "is_exact_zero",
    "layer_text",
    "shape",
]

Matrix = tuple  # tuple of row tuples of exact entries


def as_matrix(rows) -> Matrix:
    return tuple(tuple(r) for r in rows)


def shape(m: Matrix) -> tuple[int, int]:
    return (len(m), len(m[0]) if m else 0)


def is_exact_zero(v) -> bool:
    """Whether a weight is exactly zero (decided on its exact form, never on a rounding)."""
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



def _shape(m) -> str:
    """``"3x5"`` of a matrix given as rows."""
    return f"{len(m)}x{len(m[0]) if len(m) else 0}"


def _number_text(v) -> str:
    """A weight for a repr: an exact rational as it is, a symbolic one by its short form."""
    text = str(v)
    return text if len(text) <= 24 else text[:21] + "..."


def layer_text(layer) -> str:
    """A layer in a few words (``attention softmax x4``, ``ffn 12``), for reprs and tables."""
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

