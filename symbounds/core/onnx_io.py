"""ONNX in (optional extra ``symbounds[onnx]``: onnx, onnxruntime); the export is
:mod:`symbounds.core.onnx_export`.

**Import** (:func:`import_onnx`) reads a graph of MatMul/Gemm, Add, Sub, Mul, Div (by constants),
Relu, Softmax (last axis), Transpose (of keys; between tokens and heads), Reshape (of the vector
input; into heads ``[n, h, dk]`` and back), Concat, Split and Slice (along the features: a fused
q/k/v projection), Gather (the readout), Constant, Identity and initializers, with tokens ``[n, D]``
or a batch of one ``[1, n, D]``, and turns it
into a model file: each tensor is tracked as a token-wise affine map of the current residual state
plus ReLU units and attention heads (``X M + 1 c^T + sum relu(X M1 + b1) W + sum_h P_h X Mv_h
Wo_h``); when a tensor is used twice (a residual stream) or by a non-linearity it becomes the next
state, emitting one attention or feed-forward layer (a linear map that is not a multiple of the
identity becomes pairs of ReLU units ``relu(l.z) - relu(-l.z)``, which the engine evaluates as the
linear map they are).  A key bias is dropped (it shifts each softmax row by a constant), a value
bias becomes a bias after the heads (softmax rows sum to 1).  Every float weight is taken as its
exact binary rational (``Fraction(float)`` is exact).  Anything else is refused with one line
naming the node and its operation.  Layer norms, query biases, masks, dynamic shapes (Shape,
Unsqueeze) and graphs with several inputs are not supported.

A file can declare what it does not hold (an input ``[10^9]``, an initializer of ``10^6 x 10^6``
entries and no data): the file is read up to :data:`MAX_ONNX_BYTES`, every declared dimension of
the input and every constant's shape is checked against :data:`MAX_WIDTH`, :data:`MAX_TOKENS`
and :data:`MAX_ELEMENTS` before anything of that size is built, and initializers are converted
under the same one-line error handling as nodes.  External data (weights in another file) is
refused.
"""

from __future__ import annotations

from fractions import Fraction

from .exact import NumberError
from .modelfile import model_from_json, model_to_json
from .transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer

__all__ = ["OnnxError", "graph_input", "import_onnx", "onnx_modules", "onnx_to_model"]

#: the largest ONNX file read (its bytes are read once, then parsed)
MAX_ONNX_BYTES = 64 * 2**20
#: import limits, checked before anything of that size is built: the features of the input and of
#: every tensor computed from it (the importer holds ``D x k`` matrices of exact rationals), the
#: declared number of tokens, and the entries of all constant tensors together
MAX_WIDTH = 1024
MAX_TOKENS = 2**16
MAX_ELEMENTS = 2**22


class OnnxError(NumberError):
    """An ONNX file that cannot be read or written (one line naming the problem)."""


def onnx_modules():
    """``(onnx, onnx.helper, onnx.numpy_helper, numpy)``, or an :class:`OnnxError` saying how to
    install the optional dependency."""
    try:
        import numpy as np
        import onnx
        from onnx import helper, numpy_helper
    except ImportError:
        raise OnnxError("ONNX support needs the optional dependency: pip install 'symbounds[onnx]'") from None
    return onnx, helper, numpy_helper, np


# ------------------------------------------------------------------------------------------
# import: symbolic values


class _Const:
    def __init__(self, arr):
        self.a = arr  # numpy object array of Fractions


class _Aff:
    """``X_s M + 1 c^T + sum_u relu(X_s M1 + b1) W + sum_h P_h (X_s Mv) Wo`` over state ``s``."""

    def __init__(self, state, L, c, relus=(), heads=(), rank=2, chain=None):
        self.state, self.L, self.c = state, L, c
        self.relus, self.heads, self.rank = list(relus), list(heads), rank
        # (root, [(op, argument)]): this value is a non-linear root followed by affine operations,
        # replayed on the root's state if the value turns out to be needed as an affine map
        self.chain = chain
        self.materialised = None

    @property
    def k(self):
        return self.L.shape[1]

    def affine(self):
        return not self.relus and not self.heads


class _KT:
    def __init__(self, aff):
        self.aff = aff


class _Probs:
    def __init__(self, state, Mq, Mk, kind="softmax"):
        self.state, self.Mq, self.Mk, self.kind = state, Mq, Mk, kind


class _Scores(_Probs):
    pass


class _Heads:
    """Per-head tensors after a reshape into heads: ``layout`` "tokens" ``[n, h, dk]``, "heads"
    ``[h, n, dk]`` or "keys" ``[h, dk, n]`` (``items``: one value per head)."""

    def __init__(self, items, layout, rank):
        self.items, self.layout, self.rank = items, layout, rank


class _XIn:  # the vector input x (shape [d]) times M (d x k), as a row [1, k]
    def __init__(self, M, row):
        self.M, self.row = M, row


class _Emb:  # e_c (x M): the row vector placed in token c of n
    def __init__(self, col, n, M):
        self.col, self.n, self.M = col, n, M


class _Row:  # one token (row) of a state
    def __init__(self, state, col):
        self.state, self.col = state, col


class _Out:  # a readout entry
    def __init__(self, state, row, col):
        self.state, self.row, self.col = state, row, col



def graph_input(g):
    """``(input, dims)``: the one non-initializer input of the ONNX graph ``g`` and its declared
    dimensions (None where not fixed); :class:`OnnxError` unless there is one input, one output,
    and the input is a float or double tensor."""
    inits = {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    if len(inputs) != 1:
        raise OnnxError(f"the graph must have one input, found {len(inputs)}")
    if len(g.output) != 1:
        raise OnnxError(f"the graph must have one output, found {len(g.output)}")
    inp = inputs[0]
    if inp.type.tensor_type.elem_type not in (1, 11):
        raise OnnxError(f"input {inp.name!r}: expected a float or double tensor")
    return inp, [d.dim_value if d.HasField("dim_value") else None for d in inp.type.tensor_type.shape.dim]

class _Importer:
    def __init__(self, proto):
        onnx, helper, numpy_helper, np = onnx_modules()
        self.np, self.numpy_helper, self.helper = np, numpy_helper, helper
        self.proto = proto
        self.layers: list = []
        self.state = 0
        self.width = None
        self.embedding = None
        self.input_kind = None
        self.room = MAX_ELEMENTS  # entries of constant tensors still allowed

    # --- helpers ----------------------------------------------------------------------------
    def frac_array(self, t, where):
        """A TensorProto as an object array of exact Fractions, its declared shape checked (and
        charged to the budget of constant entries) before anything of that shape is built."""
        np = self.np
        if t.data_location == 1:  # TensorProto.EXTERNAL
            raise OnnxError(f"{where}: weights stored in another file (external data) are not read")
        dims = [int(x) for x in t.dims]
        if any(x < 0 for x in dims):
            raise OnnxError(f"{where}: a negative dimension in the declared shape {dims}")
        n = 1
        for x in dims:
            n *= x
        if n > self.room:
            raise OnnxError(f"{where}: declares {' x '.join(map(str, dims))} = {n} entries, above the "
                            f"{MAX_ELEMENTS} entries the constant tensors may hold in all")
        self.room -= n
        arr = self.numpy_helper.to_array(t)
        if list(arr.shape) != dims:
            raise OnnxError(f"{where}: holds {arr.size} entries for the declared shape {dims}")
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)):
                raise OnnxError(f"{where}: a weight is not finite")
            out = np.empty(arr.shape, dtype=object)
            for idx, v in np.ndenumerate(arr):
                out[idx] = Fraction(float(v))  # exact: every float is a binary rational
            return out
        if arr.dtype.kind in "iu":
            out = np.empty(arr.shape, dtype=object)
            for idx, v in np.ndenumerate(arr):
                out[idx] = Fraction(int(v))
            return out
        raise OnnxError(f"{where}: unsupported tensor type {arr.dtype}")

    @staticmethod
    def _fits(shape):
        """Matrices of the importer have at most ``MAX_WIDTH`` features a side (a ValueError,
        named by the node being read, before the allocation)."""
        if any(not (0 <= x <= MAX_WIDTH) for x in shape):
            raise ValueError(f"a tensor of {' x '.join(map(str, shape))} features, above the limit of {MAX_WIDTH}")

    def eye(self, n):
        np = self.np
        self._fits((n, n))
        m = np.full((n, n), Fraction(0), dtype=object)
        for i in range(n):
            m[i, i] = Fraction(1)
        return m

    def zeros(self, *shape):
        self._fits(shape)
        return self.np.full(shape, Fraction(0), dtype=object)

    def const_result(self, shape):
        """Charge the entries of a constant computed from constants (a product, a broadcast sum)."""
        n = 1
        for x in shape:
            n *= int(x)
        if n > self.room:
            raise ValueError(f"a constant of {n} entries, above the {MAX_ELEMENTS} the constant tensors may hold")
        self.room -= n

    def identity_aff(self, rank=2):
        return _Aff(self.state, self.eye(self.width), self.zeros(self.width), rank=rank)

    # --- materialising a value as the next residual state -------------------------------------
    def materialise(self, v: _Aff, where) -> _Aff:
        if v.state != self.state:
            raise OnnxError(f"{where}: uses a tensor of an earlier layer (not a sequential stack of layers)")
        D, k = v.L.shape
        is_scaled_eye = D == k and all(v.L[i, j] == (v.L[0, 0] if i == j else 0) for i in range(D) for j in range(k))
        if v.affine() and is_scaled_eye and v.L[0, 0] == 1 and all(x == 0 for x in v.c):
            return v
        mat = lambda m: tuple(tuple(x for x in row) for row in m)
        if k != self.width:
            raise OnnxError(f"{where}: a layer output of width {k}, the state has width {self.width} "
                            "(every layer of a model file keeps the width)")
        if v.heads and v.relus:
            raise OnnxError(f"{where}: attention heads and ReLU units in one residual step (parallel "
                            "blocks) cannot be written as a sequence of layers")
        if v.heads:
            if not (is_scaled_eye or all(x == 0 for x in v.L.flat)):
                raise OnnxError(f"{where}: the skip path of an attention block must be a multiple of the identity")
            kinds = {h[4] for h in v.heads}
            if len(kinds) > 1:
                raise OnnxError(f"{where}: softmax and hardmax heads in one layer")
            skip = v.L[0, 0] if is_scaled_eye else Fraction(0)
            heads = tuple(Head(mat(Mq.T), mat(Mk.T), mat(Mv.T), mat(Wo.T)) for Mq, Mk, Mv, Wo, _ in v.heads)
            self.layers.append(Attention(heads, kinds.pop(), skip, None))
            self.state += 1
            self.width = k
            if any(x != 0 for x in v.c):  # a bias after the heads: one feed-forward layer with skip 1
                self.layers.append(FeedForward(((Fraction(0),) * k,), (Fraction(0),), tuple((Fraction(0),)
                                               for _ in range(k)), tuple(v.c), Fraction(1)))
                self.state += 1
            return self.identity_aff(v.rank)
        W1, b1, W2cols = [], [], []
        for M1, bb, W in v.relus:
            for u in range(M1.shape[1]):
                W1.append(tuple(M1[:, u]))
                b1.append(bb[u])
                W2cols.append(tuple(W[u, :]))
        skip = Fraction(0)
        if is_scaled_eye:
            skip = v.L[0, 0]
        else:
            for r in range(k):  # pairs: L^T z = relu(L^T z) - relu(-L^T z), row by row
                col = tuple(v.L[:, r])
                if all(x == 0 for x in col):
                    continue
                unit = tuple(Fraction(1) if i == r else Fraction(0) for i in range(k))
                W1 += [col, tuple(-x for x in col)]
                b1 += [Fraction(0), Fraction(0)]
                W2cols += [unit, tuple(-x for x in unit)]
        if not W1:  # only a bias: one idle unit
            W1, b1 = [tuple(Fraction(0) for _ in range(D))], [Fraction(0)]
            W2cols = [tuple(Fraction(0) for _ in range(k))]
        W2 = tuple(zip(*W2cols))
        self.layers.append(FeedForward(tuple(W1), tuple(b1), W2, tuple(v.c), skip))
        self.state += 1
        self.width = k
        return self.identity_aff(v.rank)

    def as_affine(self, v, where) -> _Aff:
        if not isinstance(v, _Aff):
            raise OnnxError(f"{where}: expected a tensor computed from the network's input")
        if not v.affine() and v.chain is not None:
            root, ops = v.chain
            if root.materialised is None or root.materialised.state != self.state:
                root.materialised = self.materialise(root, where)
            v = root.materialised
            for kind, arg in ops:
                v = {"matmul": self.aff_matmul, "scale": self.aff_scale, "bias": self._bias,
                     "cols": self.aff_cols}[kind](v, arg)
        if v.state != self.state:
            raise OnnxError(f"{where}: uses a tensor of an earlier layer (not a sequential stack of layers)")
        if not v.affine():
            raise OnnxError(f"{where}: a non-linear tensor used once and then transformed again "
                            "(not a sequence of attention and feed-forward layers)")
        return v

    # --- operations on affine values -------------------------------------------------------------
    def _chain(self, v: _Aff, op, arg):
        if v.affine():
            return None
        if v.chain is None:
            # a value that cannot be a state (every layer keeps the width D) is not a root: the
            # result of this operation is its own root
            return (v, [(op, arg)]) if v.k == self.width else None
        root, ops = v.chain
        return (root, ops + [(op, arg)])

    def aff_matmul(self, v: _Aff, W):
        self._fits(W.shape[1:])
        return _Aff(v.state, v.L.dot(W), v.c.dot(W), [(M1, b1, Wr.dot(W)) for M1, b1, Wr in v.relus],
                    [(Mq, Mk, Mv, Wo.dot(W), kd) for Mq, Mk, Mv, Wo, kd in v.heads], v.rank,
                    self._chain(v, "matmul", W))

    def aff_scale(self, v: _Aff, s):
        return _Aff(v.state, v.L * s, v.c * s, [(M1, b1, W * s) for M1, b1, W in v.relus],
                    [(Mq, Mk, Mv, Wo * s, kd) for Mq, Mk, Mv, Wo, kd in v.heads], v.rank,
                    self._chain(v, "scale", s))

    def _bias(self, v: _Aff, arr):
        return _Aff(v.state, v.L, v.c + arr, v.relus, v.heads, v.rank, self._chain(v, "bias", arr))

    def aff_add(self, a: _Aff, b: _Aff, where):
        if a.state != b.state:
            raise OnnxError(f"{where}: adds tensors of different layers")
        if a.L.shape != b.L.shape:
            raise OnnxError(f"{where}: shape mismatch {a.L.shape[1]} vs {b.L.shape[1]}")
        return _Aff(a.state, a.L + b.L, a.c + b.c, a.relus + b.relus, a.heads + b.heads, max(a.rank, b.rank))

    def bias(self, v: _Aff, c, where):
        np = self.np
        arr = c.a
        while arr.ndim > 1 and arr.shape[0] == 1:
            arr = arr[0]
        if arr.ndim == 0:
            arr = np.full((v.k,), arr.item(), dtype=object)
        if arr.ndim != 1 or arr.shape[0] != v.k:
            raise OnnxError(f"{where}: only a bias broadcast over the tokens can be added")
        return self._bias(v, arr)

    def scores(self, a: _Aff, b: _KT, where) -> _Scores:
        q, k = self.as_affine(a, where), self.as_affine(b.aff, where)
        if any(x != 0 for x in q.c):
            raise OnnxError(f"{where}: a query bias cannot be expressed in a model file")
        if q.state != k.state:
            raise OnnxError(f"{where}: queries and keys from different layers")
        return _Scores(q.state, q.L, k.L)  # a key bias shifts each row by a constant: dropped

    def attend(self, a: _Probs, b: _Aff, where) -> _Aff:
        if not isinstance(a, _Probs) or isinstance(a, _Scores):
            raise OnnxError(f"{where}: expected attention weights (a softmax of scores)")
        v = self.as_affine(b, where)
        if v.state != a.state:
            raise OnnxError(f"{where}: values and scores from different layers")
        # P (X Mv + 1 c^T) = P X Mv + 1 c^T (softmax rows sum to 1)
        return _Aff(v.state, self.zeros(self.width, v.k), v.c.copy(), [],
                    [(a.Mq, a.Mk, v.L, self.eye(v.k), a.kind)], v.rank)

    def aff_cols(self, v: _Aff, span):
        a, b = span
        return _Aff(v.state, v.L[:, a:b], v.c[a:b], [(M1, b1, W[:, a:b]) for M1, b1, W in v.relus],
                    [(Mq, Mk, Mv, Wo[:, a:b], kd) for Mq, Mk, Mv, Wo, kd in v.heads], v.rank,
                    self._chain(v, "cols", span))

    def concat(self, args, where) -> _Aff:
        if len({x.state for x in args}) != 1:
            raise OnnxError(f"{where}: concatenates tensors of different layers")
        ks = [x.k for x in args]
        total = sum(ks)
        self._fits((total,))
        L = self.zeros(self.width, total)
        c = self.zeros(total)
        relus, heads = [], []
        off = 0
        for x, kx in zip(args, ks):
            L[:, off:off + kx] = x.L
            c[off:off + kx] = x.c
            for M1, b1, W in x.relus:
                W2 = self.zeros(W.shape[0], total)
                W2[:, off:off + kx] = W
                relus.append((M1, b1, W2))
            for Mq, Mk, Mv, Wo, kd in x.heads:
                W2 = self.zeros(Wo.shape[0], total)
                W2[:, off:off + kx] = Wo
                heads.append((Mq, Mk, Mv, W2, kd))
            off += kx
        return _Aff(args[0].state, L, c, relus, heads, args[0].rank)

    # --- the graph --------------------------------------------------------------------------------
    def run(self) -> Transformer:
        g = self.proto.graph
        inp, dims = graph_input(g)
        self.check_input_dims(inp.name, dims)
        vals: dict = {}
        for t in g.initializer:
            where = f"initializer {t.name!r}"
            vals[t.name] = _Const(self.guarded(lambda: self.frac_array(t, where), where))
        if len(dims) == 1:
            if dims[0] is None:
                raise OnnxError(f"input {inp.name!r}: the vector input needs a fixed length")
            self.input_kind = "vector"
            vals[inp.name] = _XIn(self.eye(dims[0]), row=False)
        elif len(dims) in (2, 3) and (len(dims) == 2 or dims[0] == 1) and dims[-1] is not None:
            self.input_kind = "tokens"
            self.width = dims[-1]
            vals[inp.name] = self.identity_aff(len(dims))
        else:
            raise OnnxError(f"input {inp.name!r}: expected a vector [d] or tokens [n, D] (or [1, n, D])")
        uses: dict = {}
        for nd in g.node:
            for i in nd.input:
                uses[i] = uses.get(i, 0) + 1
        uses[g.output[0].name] = uses.get(g.output[0].name, 0) + 1
        for nd in g.node:
            where = f"node {nd.name or nd.output[0]!r} ({nd.op_type})"
            args = []
            for i in nd.input:
                if i == "":
                    args.append(None)
                    continue
                if i not in vals:
                    raise OnnxError(f"{where}: unknown input {i!r}")
                args.append(vals[i])
            outs = self.guarded(lambda: self.op(nd, args, where), where)
            if not isinstance(outs, list):
                outs = [outs]
            if len(outs) != len(nd.output):
                raise OnnxError(f"{where}: expected {len(outs)} output(s), the node has {len(nd.output)}")
            for name, out in zip(nd.output, outs):
                if isinstance(out, _Aff) and not out.affine() and (uses.get(name, 0) > 1 or
                                                                    name == g.output[0].name):
                    out = self.materialise(out, where)
                vals[name] = out
        res = vals.get(g.output[0].name)
        readout = None
        if isinstance(res, _Out):
            readout = Readout(res.row, res.col)
        elif isinstance(res, _Aff):
            self.materialise(res, "the output")
        else:
            raise OnnxError("the output is neither the final token matrix nor one entry of it")
        if not self.layers:
            raise OnnxError("the graph has no attention or feed-forward layer")
        return Transformer(tuple(self.layers), self.embedding, readout, self.input_kind)

    @staticmethod
    def guarded(step, where):
        """``step()``, its errors one line naming ``where`` (a node or an initializer)."""
        try:
            return step()
        except OnnxError:
            raise
        except (ValueError, IndexError, TypeError, ZeroDivisionError, KeyError, OverflowError) as e:
            # shapes that do not fit (numpy's own errors), malformed attributes or tensors
            raise OnnxError(f"{where}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None

    @staticmethod
    def check_input_dims(name, dims):
        """Every declared dimension of the input in range, before anything of that size is built:
        a vector ``[d]`` or tokens ``[n, D]`` / ``[1, n, D]``; ``n`` may be left symbolic."""
        for i, x in enumerate(dims):
            if x is None:
                continue
            limit = MAX_WIDTH if i == len(dims) - 1 else MAX_TOKENS
            if not (1 <= x <= limit):
                raise OnnxError(f"input {name!r}: dimension {i} is {x}, expected 1..{limit}")

    def attr(self, nd, key, default=None):
        for a in nd.attribute:
            if a.name == key:
                return self.helper.get_attribute_value(a)
        return default

    def op(self, nd, args, where):
        """The value of node ``nd`` from the values of its inputs (:data:`_OPS` names the method)."""
        op = nd.op_type
        if op not in _OPS:
            raise OnnxError(f"{where}: operation {op} cannot be expressed in a model file")
        if nd.domain not in ("", "ai.onnx"):
            raise OnnxError(f"{where}: operation from domain {nd.domain!r} is not supported")
        return getattr(self, _OPS[op])(nd, args, where)

    def op_constant(self, nd, args, where):
        """Constant: a tensor given in the node (``value``)."""
        t = self.attr(nd, "value")
        if t is None:
            raise OnnxError(f"{where}: only tensor constants ('value') are supported")
        return _Const(self.frac_array(t, where))

    def op_identity(self, nd, args, where):
        """Identity: the operand itself."""
        return args[0]

    def op_matmul(self, nd, args, where):
        """MatMul and Gemm: an affine map times a weight, scores ``Q K^T``, probabilities times
        values (per head too), the vector input times the embedding."""
        op = nd.op_type
        a = args[0]
        b = args[1] if len(args) > 1 else None
        if op == "Gemm":
            if self.attr(nd, "transA", 0):
                raise OnnxError(f"{where}: transA is not supported")
            if isinstance(b, _Const) and self.attr(nd, "transB", 0):
                b = _Const(b.a.T)
        if isinstance(a, _Const) and isinstance(b, _Const):
            if a.a.ndim != 2 or b.a.ndim != 2 or a.a.shape[1] != b.a.shape[0]:
                raise OnnxError(f"{where}: only a product of two constant matrices")
            self.const_result((a.a.shape[0], b.a.shape[1]))
            out = _Const(a.a.dot(b.a))
        elif isinstance(a, _Aff) and isinstance(b, _Const) and b.a.ndim == 2:
            if b.a.shape[0] != a.k:
                raise OnnxError(f"{where}: shape mismatch ({a.k} columns times {b.a.shape[0]} rows)")
            out = self.aff_matmul(a, b.a)
        elif isinstance(a, _Aff) and isinstance(b, _KT):
            out = self.scores(a, b, where)
        elif isinstance(a, _Probs) and not isinstance(a, _Scores) and isinstance(b, _Aff):
            out = self.attend(a, b, where)
        elif isinstance(a, _Heads) and isinstance(b, _Heads) and len(a.items) == len(b.items):
            if a.layout == "heads" and b.layout == "keys":
                out = _Heads([self.scores(q, k, where) for q, k in zip(a.items, b.items)], "heads", a.rank)
            elif a.layout == "heads" and b.layout == "heads" and isinstance(a.items[0], _Probs):
                out = _Heads([self.attend(p, v, where) for p, v in zip(a.items, b.items)], "heads", a.rank)
            else:
                raise OnnxError(f"{where}: unsupported product of per-head tensors")
        elif isinstance(a, _XIn) and isinstance(b, _Const) and a.row and b.a.ndim == 2:
            out = _XIn(a.M.dot(b.a), row=True)
        elif isinstance(a, _Const) and isinstance(b, _XIn) and b.row and a.a.ndim == 2 and a.a.shape[1] == 1:
            nz = [j for j in range(a.a.shape[0]) if a.a[j, 0] != 0]
            if len(nz) != 1 or a.a[nz[0], 0] != 1:
                raise OnnxError(f"{where}: the input must be placed in one token (a one-hot column)")
            out = _Emb(nz[0], a.a.shape[0], b.M)
        else:
            raise OnnxError(f"{where}: unsupported operands ({type(a).__name__.strip('_')}, "
                            f"{type(b).__name__.strip('_')})")
        if op == "Gemm":
            alpha, beta = Fraction(self.attr(nd, "alpha", 1.0)), Fraction(self.attr(nd, "beta", 1.0))
            if alpha != 1:
                out = self.aff_scale(out, alpha) if isinstance(out, _Aff) else _Const(out.a * alpha)
            if len(args) > 2 and args[2] is not None:
                if not isinstance(args[2], _Const) or not isinstance(out, _Aff):
                    raise OnnxError(f"{where}: C must be a constant bias")
                out = self.bias(out, _Const(args[2].a * beta), where)
        return out

    def op_add(self, nd, args, where):
        """Add and Sub: a bias, the sum of two affine maps, or the embedding ``base + e_c (x E^T)``."""
        op = nd.op_type
        a = args[0]
        b = args[1] if len(args) > 1 else None
        if op == "Sub":
            if isinstance(b, _Const):
                b = _Const(-b.a)
            elif isinstance(b, _Aff):
                b = self.aff_scale(b, Fraction(-1))
            else:
                raise OnnxError(f"{where}: unsupported operands")
        if isinstance(a, _Const) and isinstance(b, _Const):
            self.const_result(self.np.broadcast_shapes(a.a.shape, b.a.shape))
            return _Const(a.a + b.a)
        if isinstance(b, _Const) and isinstance(a, _Aff):
            return self.bias(a, b, where)
        if isinstance(a, _Const) and isinstance(b, _Aff):
            return self.bias(b, a, where)
        if isinstance(a, _Aff) and isinstance(b, _Aff):
            return self.aff_add(a, b, where)
        emb, base = (a, b) if isinstance(a, _Emb) else (b, a)
        if isinstance(emb, _Emb) and isinstance(base, _Const) and op == "Add":
            if self.embedding is not None or base.a.ndim != 2 or base.a.shape != (emb.n, emb.M.shape[1]):
                raise OnnxError(f"{where}: the embedding must add an n x D base once")
            mat = lambda m: tuple(tuple(x for x in row) for row in m)
            self.embedding = Embedding(mat(base.a.T), mat(emb.M.T), emb.col)
            self.width = emb.M.shape[1]
            return self.identity_aff()
        raise OnnxError(f"{where}: unsupported operands")

    def op_mul(self, nd, args, where):
        """Mul and Div by one constant (of an affine map, of scores, of a constant)."""
        op = nd.op_type
        a = args[0]
        b = args[1] if len(args) > 1 else None
        c, v = (b, a) if isinstance(b, _Const) else (a, b)
        if not isinstance(c, _Const) or c.a.size != 1 or (op == "Div" and c is a):
            raise OnnxError(f"{where}: only multiplication or division by one constant is supported")
        s = c.a.flat[0]
        if op == "Div":
            if s == 0:
                raise OnnxError(f"{where}: division by zero")
            s = 1 / s
        if isinstance(v, _Aff):
            return self.aff_scale(v, s)
        if isinstance(v, _Scores):
            return _Scores(v.state, v.Mq * s, v.Mk)
        if isinstance(v, _Heads) and all(isinstance(x, _Scores) for x in v.items):
            return _Heads([_Scores(x.state, x.Mq * s, x.Mk) for x in v.items], v.layout, v.rank)
        if isinstance(v, _Const):
            return _Const(v.a * s)
        raise OnnxError(f"{where}: unsupported operand")

    def op_relu(self, nd, args, where):
        """Relu: ReLU units of an affine map."""
        a = args[0]
        v = self.as_affine(a, where)
        return _Aff(v.state, self.zeros(self.width, v.k), self.zeros(v.k), [(v.L, v.c, self.eye(v.k))], [],
                    v.rank)

    def op_softmax(self, nd, args, where):
        """Softmax of attention scores along the last axis."""
        a = args[0]
        axis = self.attr(nd, "axis", -1)
        if isinstance(a, _Heads) and all(isinstance(x, _Scores) for x in a.items) and \
                axis in (-1, a.rank):
            return _Heads([_Probs(x.state, x.Mq, x.Mk, "softmax") for x in a.items], a.layout, a.rank)
        if not isinstance(a, _Scores) or axis not in (-1, 1, 2):
            raise OnnxError(f"{where}: softmax of attention scores along the last axis only")
        return _Probs(a.state, a.Mq, a.Mk, "softmax")

    def op_transpose(self, nd, args, where):
        """Transpose: the keys ``K^T`` (last two axes), tokens and heads swapped, a constant matrix."""
        a = args[0]
        perm = list(self.attr(nd, "perm", []) or [])
        if isinstance(a, _Aff) and perm in ([1, 0], [0, 2, 1]):
            return _KT(a)
        if isinstance(a, _Heads):
            # rank 2 tokens [n, D] -> [n, h, dk]; with a batch of one [1, n, D] -> [1, n, h, dk]
            base = [] if a.rank == 2 else [0]
            o = len(base)
            swap_nh = base + [o + 1, o, o + 2]  # [n, h, dk] <-> [h, n, dk]
            keys = base + [o, o + 2, o + 1]  # [h, n, dk] -> [h, dk, n]
            to_keys = base + [o + 1, o + 2, o]  # [n, h, dk] -> [h, dk, n]
            if perm == swap_nh and a.layout in ("tokens", "heads"):
                return _Heads(a.items, "heads" if a.layout == "tokens" else "tokens", a.rank)
            if (perm == keys and a.layout == "heads") or (perm == to_keys and a.layout == "tokens"):
                return _Heads([_KT(x) for x in a.items], "keys", a.rank)
        if isinstance(a, _Const) and a.a.ndim == 2:
            return _Const(a.a.T)
        raise OnnxError(f"{where}: only the transpose of a key matrix (last two axes) is supported")

    def op_reshape(self, nd, args, where):
        """Reshape: the vector input as a row, the readout, heads split from and merged into features."""
        a = args[0]
        b = args[1] if len(args) > 1 else None
        if not isinstance(b, _Const):
            raise OnnxError(f"{where}: the shape must be a constant")
        shape = [int(x) for x in b.a.flat]
        if isinstance(a, _XIn) and not a.row and len(shape) == 2 and shape[0] == 1:
            return _XIn(a.M, row=True)
        if isinstance(a, _Out) and shape in ([1], [-1], [1, 1]):
            return a
        if isinstance(a, _Const):
            return _Const(a.a.reshape(shape))
        if isinstance(a, _Aff) and len(shape) == a.rank and shape[-1] in (a.k, -1):
            return a
        if isinstance(a, _Aff) and len(shape) == a.rank + 1:  # [.., n, h, dk]: split into heads
            h, dk = shape[-2], shape[-1]
            if h == -1 and dk > 0 and a.k % dk == 0:
                h = a.k // dk
            if dk == -1 and h > 0 and a.k % h == 0:
                dk = a.k // h
            if h <= 0 or dk <= 0 or h * dk != a.k:
                raise OnnxError(f"{where}: cannot split {a.k} features into heads of shape {shape[-2:]}")
            return _Heads([self.aff_cols(a, (i * dk, (i + 1) * dk)) for i in range(h)], "tokens", a.rank)
        if isinstance(a, _Heads) and a.layout == "tokens" and len(shape) == a.rank and \
                all(isinstance(x, _Aff) for x in a.items):
            out = self.concat(a.items, where)
            if shape[-1] not in (out.k, -1):
                raise OnnxError(f"{where}: cannot merge the heads into {shape[-1]} features")
            return out
        raise OnnxError(f"{where}: only reshapes that keep the token layout are supported")

    def op_concat(self, nd, args, where):
        """Concat of token tensors along the features."""
        axis = self.attr(nd, "axis")
        if not all(isinstance(x, _Aff) for x in args) or axis not in (-1, args[0].rank - 1):
            raise OnnxError(f"{where}: only the concatenation of token tensors along the features")
        return self.concat(args, where)

    def op_split(self, nd, args, where):
        """Split of a token tensor along the features (a fused q/k/v projection)."""
        a = args[0]
        b = args[1] if len(args) > 1 else None
        axis = self.attr(nd, "axis", 0)
        if not isinstance(a, _Aff) or axis not in (-1, a.rank - 1):
            raise OnnxError(f"{where}: only a split of a token tensor along the features")
        sizes = self.attr(nd, "split")
        if sizes is None and b is not None:
            if not isinstance(b, _Const):
                raise OnnxError(f"{where}: the split sizes must be constant")
            sizes = [int(x) for x in b.a.flat]
        if sizes is None:
            parts = self.attr(nd, "num_outputs", len(nd.output))
            if a.k % parts:
                raise OnnxError(f"{where}: {a.k} features do not split into {parts} equal parts")
            sizes = [a.k // parts] * parts
        if sum(sizes) != a.k or any(x <= 0 for x in sizes):
            raise OnnxError(f"{where}: split sizes {sizes} do not add up to {a.k}")
        out, off = [], 0
        for x in sizes:
            out.append(self.aff_cols(a, (off, off + x)))
            off += x
        return out

    def op_slice(self, nd, args, where):
        """Slice of a token tensor along the features, step 1."""
        a = args[0]
        consts = args[1:]
        if not isinstance(a, _Aff) or not all(isinstance(x, _Const) for x in consts if x is not None):
            raise OnnxError(f"{where}: only a constant slice of a token tensor along the features")
        starts, ends = [int(x) for x in consts[0].a.flat], [int(x) for x in consts[1].a.flat]
        axes = [int(x) for x in consts[2].a.flat] if len(consts) > 2 and consts[2] is not None else [0]
        steps = [int(x) for x in consts[3].a.flat] if len(consts) > 3 and consts[3] is not None else [1]
        if len(starts) != 1 or axes[0] not in (-1, a.rank - 1) or steps != [1]:
            raise OnnxError(f"{where}: only a slice of the feature axis with step 1")
        lo_, hi_, _ = slice(starts[0], ends[0]).indices(a.k)
        if hi_ <= lo_:
            raise OnnxError(f"{where}: an empty slice")
        return self.aff_cols(a, (lo_, hi_))

    def op_gather(self, nd, args, where):
        """Gather: the readout, one token and then one feature."""
        op = nd.op_type
        a = args[0]
        b = args[1] if len(args) > 1 else None
        if self.attr(nd, "axis", 0) != 0 or not isinstance(b, _Const) or b.a.size != 1 or b.a.ndim != 0:
            raise OnnxError(f"{where}: only the readout (one token, then one feature) is supported")
        idx = int(b.a.flat[0])
        if isinstance(a, _Aff):
            self.materialise(a, where)
            return _Row(self.state, idx)
        if isinstance(a, _Row):
            if a.state != self.state or not (0 <= idx < self.width):
                raise OnnxError(f"{where}: readout index out of range")
            return _Out(a.state, idx, a.col)
        raise OnnxError(f"{where}: unsupported operand")


#: ONNX operation -> the method of :class:`_Importer` that reads it
_OPS = {
    "Constant": "op_constant",
    "Identity": "op_identity",
    "MatMul": "op_matmul",
    "Gemm": "op_matmul",
    "Add": "op_add",
    "Sub": "op_add",
    "Mul": "op_mul",
    "Div": "op_mul",
    "Relu": "op_relu",
    "Softmax": "op_softmax",
    "Transpose": "op_transpose",
    "Reshape": "op_reshape",
    "Concat": "op_concat",
    "Split": "op_split",
    "Slice": "op_slice",
    "Gather": "op_gather",
}


def onnx_to_model(proto) -> Transformer:
    """The model file's :class:`Transformer` of an ONNX ModelProto (exact weights)."""
    return _Importer(proto).run()


def import_onnx(path: str) -> Transformer:
    from .files import read_user_file

    onnx, *_ = onnx_modules()
    data = read_user_file(path, OnnxError, MAX_ONNX_BYTES)
    try:  # from the bytes read: onnx.load would read the file, and any external data, unbounded
        proto = onnx.load_model_from_string(data)
    except Exception as e:  # protobuf's decode errors have no common base class
        raise OnnxError(f"{path}: not an ONNX file ({type(e).__name__})") from None
    model = onnx_to_model(proto)
    try:  # the imported model must read back as a valid model file
        return model_from_json(model_to_json(model))
    except ValueError as e:
        raise OnnxError(f"{path}: {str(e).splitlines()[0]}") from None


#: the constant reader, attribute reader and error guard a layer-graph importer shares
#: (:mod:`symbounds.core.onnx_graph`), and the operations a model file's import reads
TensorReader = _Importer
MODEL_OPS = _OPS
