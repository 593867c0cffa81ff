"""Where the entries of an ONNX tensor live in a layer graph: a *view* of a graph tensor.

A graph tensor is ``[tokens, width]`` (:mod:`symbounds.core.graph`).  An ONNX tensor computed from
the input has any shape ``S``; its entry at index ``i`` is ``f * Y[tok[i], col[i]]`` of one graph
tensor ``Y`` (``f`` an exact rational, from a multiplication by a constant not yet applied).  The
index arrays ``tok`` and ``col`` have the shape ``S``, so the shape operations of ONNX (Reshape,
Transpose, Squeeze, Unsqueeze, Flatten, Gather, Slice, Split, Concat) are the same numpy
operations on them: nothing is computed, only where each entry comes from is followed.  That is
how the heads of an exported ``nn.MultiheadAttention`` (a reshape into ``[L, N h, dk]``, a
transpose, a reshape back) are read: by where their entries come from, not by the names or the
order of the nodes.

A view is *canonical* (``tok``, ``col`` None) when it is ``Y`` itself laid out in ``S`` in C order
(``prod(S[:-1])`` rows of ``Y``, ``S[-1]`` its width): a network without reshapes never builds an
index array.  Index arrays are charged to :data:`MAX_VIEW_ENTRIES` before they are built.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .onnx_io import OnnxError

__all__ = ["View", "MAX_VIEW_ENTRIES", "shape_op"]

#: the entries of all index arrays of an import together
MAX_VIEW_ENTRIES = 2**23


class View:
    """``f * Y[tok, col]`` in the ONNX shape ``shape`` (see the module docstring)."""

    def __init__(self, name: str, shape, tok=None, col=None, factor=Fraction(1)):
        self.name, self.shape = name, tuple(int(d) for d in shape)
        self.tok, self.col, self.factor = tok, col, factor

    @property
    def canonical(self) -> bool:
        return self.tok is None

    @property
    def rank(self) -> int:
        return len(self.shape)

    def arrays(self, budget) -> tuple:
        """``(tok, col)``, built (and charged to ``budget``) for a canonical view."""
        if self.tok is not None:
            return self.tok, self.col
        n = int(np.prod(self.shape, dtype=object))
        budget.charge(2 * n)
        lead, w = self.shape[:-1], self.shape[-1]
        rows = int(np.prod(lead, dtype=object))
        tok = np.broadcast_to(np.arange(rows, dtype=np.int64).reshape(lead + (1,)), self.shape)
        col = np.broadcast_to(np.arange(w, dtype=np.int64), self.shape)
        return tok, col

    def with_arrays(self, tok, col, budget) -> "View":
        budget.charge(2 * tok.size)
        return View(self.name, tok.shape, tok, col, self.factor)


class Budget:
    def __init__(self, room=MAX_VIEW_ENTRIES):
        self.room = room

    def charge(self, n: int):
        if n > self.room:
            raise OnnxError(f"the reshapes of the graph index more than {MAX_VIEW_ENTRIES} entries")
        self.room -= n


def _axis(a, rank, where):
    a = int(a)
    if not -rank <= a < rank:
        raise OnnxError(f"{where}: axis {a} out of range for rank {rank}")
    return a % rank


def reshape_target(shape, target, allowzero, where) -> tuple:
    """ONNX Reshape's output shape (``0`` copies a dimension unless ``allowzero``; one ``-1``)."""
    total = int(np.prod(shape, dtype=object))
    out = []
    for i, d in enumerate(int(x) for x in target):
        if d == 0 and not allowzero:
            if i >= len(shape):
                raise OnnxError(f"{where}: a 0 in the shape beyond the input's rank")
            d = shape[i]
        out.append(d)
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise OnnxError(f"{where}: the shape {list(target)} is not a valid target")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=object))
        if known == 0 or total % known:
            raise OnnxError(f"{where}: cannot reshape {list(shape)} into {list(target)}")
        out[out.index(-1)] = total // known
    if int(np.prod(out, dtype=object)) != total:
        raise OnnxError(f"{where}: cannot reshape {list(shape)} into {list(target)}")
    return tuple(out)


def _slice_take(a, starts, ends, axes, steps, where):
    """ONNX Slice: per axis, negative bounds count from the end, then clamp to ``[0, n]`` (step
    > 0) or ``[-1, n - 1]`` (step < 0); the entries ``start, start + step, ...`` before ``end``."""
    axes = list(range(len(starts))) if axes is None else [_axis(x, a.ndim, where) for x in axes]
    steps = [1] * len(starts) if steps is None else [int(x) for x in steps]
    if not (len(starts) == len(ends) == len(axes) == len(steps)) or 0 in steps or len(set(axes)) != len(axes):
        raise OnnxError(f"{where}: starts, ends, axes and steps do not match")
    for s, e, ax, st in zip(starts, ends, axes, steps):
        n = a.shape[ax]
        s, e = int(s), int(e)
        s, e = s + n if s < 0 else s, e + n if e < 0 else e
        lo, hi = (0, n) if st > 0 else (-1, n - 1)
        s, e = min(max(s, lo), hi), min(max(e, lo), hi)
        a = np.take(a, np.arange(s, e, st, dtype=np.int64), axis=ax)
    return a


def shape_op(op: str, arrays: list, consts: list, attrs, opset: int, where) -> list:
    """The index-array form of one ONNX shape operation: ``arrays`` the operands' numpy arrays
    (the same operation applies to a constant's values and to a view's ``tok`` and ``col``),
    ``consts`` the constant operands after the first (shapes, axes, indices, as int lists or
    None), ``attrs`` the node's attribute reader.  Returns the outputs' arrays."""
    a = arrays[0]
    if op == "Identity":
        return [a]
    if op == "Transpose":
        perm = attrs("perm")
        perm = list(range(a.ndim))[::-1] if perm is None else [int(p) for p in perm]
        if sorted(perm) != list(range(a.ndim)):
            raise OnnxError(f"{where}: perm {perm} is not a permutation of {a.ndim} axes")
        return [np.transpose(a, perm)]
    if op == "Reshape":
        if consts[0] is None:
            raise OnnxError(f"{where}: the shape must be a constant")
        return [a.reshape(reshape_target(a.shape, consts[0], attrs("allowzero", 0), where))]
    if op == "Flatten":
        ax = int(attrs("axis", 1))
        ax = ax % (a.ndim + 1) if -a.ndim <= ax <= a.ndim else None
        if ax is None:
            raise OnnxError(f"{where}: axis out of range")
        return [a.reshape(int(np.prod(a.shape[:ax], dtype=object)), -1)]
    if op in ("Squeeze", "Unsqueeze"):
        axes = attrs("axes") if opset < 13 else consts[0] if consts else None
        if op == "Squeeze":
            if axes is None:
                return [np.squeeze(a)]
            axes = [_axis(x, a.ndim, where) for x in axes]
            if any(a.shape[x] != 1 for x in axes):
                raise OnnxError(f"{where}: squeezes an axis that is not of size 1")
            return [np.squeeze(a, axis=tuple(axes))]
        if axes is None:
            raise OnnxError(f"{where}: Unsqueeze without axes")
        r = a.ndim + len(axes)
        axes = sorted(_axis(x, r, where) for x in axes)
        out = a
        for x in axes:
            out = np.expand_dims(out, x)
        return [out]
    if op == "Gather":
        if consts[0] is None:
            raise OnnxError(f"{where}: the indices must be constant")
        ax = _axis(attrs("axis", 0), a.ndim, where)
        ind = np.asarray(consts[0], dtype=np.int64)
        n = a.shape[ax]
        if ind.size and (ind.min() < -n or ind.max() >= n):
            raise OnnxError(f"{where}: an index out of range")
        return [np.take(a, np.where(ind < 0, ind + n, ind), axis=ax)]
    if op == "Slice":
        if opset < 10:
            starts, ends, axes, steps = attrs("starts"), attrs("ends"), attrs("axes"), None
        else:
            starts, ends = consts[0], consts[1]
            axes = consts[2] if len(consts) > 2 else None
            steps = consts[3] if len(consts) > 3 else None
        if starts is None or ends is None:
            raise OnnxError(f"{where}: the slice bounds must be constant")
        return [_slice_take(a, list(starts), list(ends), None if axes is None else list(axes),
                            None if steps is None else list(steps), where)]
    if op == "Concat":
        ax = _axis(attrs("axis"), a.ndim, where)
        if any(x.ndim != a.ndim for x in arrays):
            raise OnnxError(f"{where}: operands of different ranks")
        return [np.concatenate(arrays, axis=ax)]
    raise OnnxError(f"{where}: operation {op} is not a shape operation")


def split_sizes(n: int, sizes, parts: int, where) -> list:
    """The sizes of Split's outputs along an axis of length ``n``: given, or ``parts`` equal ones
    (the last one smaller when ``n`` does not divide, as opset 18 defines)."""
    if sizes is not None:
        sizes = [int(s) for s in sizes]
        if sum(sizes) != n or any(s < 0 for s in sizes) or len(sizes) != parts:
            raise OnnxError(f"{where}: split sizes {sizes} do not add up to {n} in {parts} parts")
        return sizes
    if parts < 1:
        raise OnnxError(f"{where}: no outputs")
    k = -(-n // parts)
    sizes = [min(k, max(0, n - i * k)) for i in range(parts)]
    if sum(sizes) != n:
        raise OnnxError(f"{where}: {n} entries do not split into {parts} parts")
    return sizes
