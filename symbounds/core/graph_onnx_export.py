"""A layer graph (:mod:`symbounds.core.graph`) written back as an ONNX graph that onnxruntime runs
(optional extra ``symbounds[onnx]``); the import is :mod:`symbounds.core.onnx_graph`.

The exported graph is a float64 copy (``dtype="float32"``: a float32 one): every exact weight and
constant is rounded to the nearest float64 (float32) number once, so a graph imported from an ONNX
file of that type holds exactly those numbers and goes back unchanged.  The input and every node's
output keep the graph's names; both ends are ``[tokens, width]`` (rows are tokens, as in PyTorch),
opset 17.  onnxruntime's CPU
kernels cover every operation written here in float32; in float64 they lack ``Erf`` (so both GELU
forms' erf and the ``erf`` node) and ``Softplus``, which ONNX's reference evaluator
(``onnx.reference``) and other runtimes compute.  Each node becomes the ONNX operations PyTorch writes for it, so that
:func:`~symbounds.core.onnx_graph.import_onnx_network` reads the file back as the same graph:

* ``affine``: ``Gemm(x, W, b, transB=1)``; ``add``: ``Add``; ``add/mul/div_constant``: ``Add``,
  ``Mul``, ``Div`` by a float64 constant;
* ``relu``, ``tanh``, ``sigmoid``, ``softplus``, ``exp``, ``erf``: the operation of that name;
* ``leaky_relu``: ``LeakyRelu`` when ``alpha`` is a float32 number (ONNX attributes are float32),
  else ``PRelu`` with a float64 slope;
* ``gelu``: ``x/2 (1 + erf(x / s))`` as ``Div, Erf, Add 1, Mul x, Mul 1/2`` (``s = sqrt 2`` rounded
  to float64 unless the node gives its divisor); ``gelu_tanh``: ``x/2 (1 + tanh(k (x + a x^3)))``
  as PyTorch writes it (``Mul(x, x)``, ``Mul x``, ``Mul a``, ``Add x``, ``Mul k``, ``Tanh``, ...);
* ``layer_norm``: ``LayerNormalization`` when ``eps`` is a float32 number, else the chain
  ``ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul w, Add b`` with a float64 ``eps``;
* ``rms_norm``: ``Mul(x, x), ReduceMean, Add eps, Sqrt, Div(x, .), Mul w``;
* ``attention``: the rows reshaped to ``[S, L, E]`` sequences (a ``Transpose`` first for the
  ``sequence_major`` layout), per head ``Q = X Wq_i^T + bq_i`` (likewise ``K``, ``V``), the scores
  ``MatMul(Q, K^T)`` times the scale (``1/sqrt(n)`` rounded), then the mask as an added constant of
  0 and ``-inf``, ``Softmax`` over the keys (hardmax: the indicator of the row maxima over their number),
  ``MatMul`` with ``V``, the heads concatenated, the output projection, and the rows back;
* ``slice``: ``Slice`` of the columns; ``concat``: ``Concat`` of the columns; ``select_tokens``:
  ``Gather`` of the rows; ``mean_tokens``: ``ReduceMean`` over the rows of each sequence.

A node this module cannot write is refused with one line naming it (:class:`OnnxError`).
"""

from __future__ import annotations

import math
from fractions import Fraction

from .graph import CONSTANT_OPS, Graph
from .onnx_builder import DTYPES, OPSET, OnnxBuilder
from .onnx_io import OnnxError

__all__ = ["DTYPES", "OPSET", "graph_to_onnx"]

_UNARY_ONNX = {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "softplus": "Softplus", "exp": "Exp",
               "erf": "Erf"}
_CONSTANT_ONNX = {"add_constant": "Add", "mul_constant": "Mul", "div_constant": "Div"}
#: PyTorch's GELU tanh constants: k = sqrt(2/pi) and a = 0.044715
_GELU_K, _GELU_A = math.sqrt(2 / math.pi), 0.044715


def _float32_exact(q: Fraction) -> bool:
    """``q`` is a float32 number (an ONNX float attribute holds it exactly)."""
    import numpy as np

    f = np.float32(float(q))
    return bool(np.isfinite(f)) and Fraction(float(f)) == q


class _Writer(OnnxBuilder):
    def __init__(self, graph: Graph, dtype: str):
        super().__init__(dtype, taken={graph.input_name, *(nd.name for nd in graph.nodes)})
        self.g = graph
        self.names = {graph.input_name: graph.input_name}

    # --- one graph node ---------------------------------------------------------------------------
    def write(self, nd) -> str:
        x = [self.names[i] for i in nd.inputs]
        p, op = nd.params, nd.op
        if op == "affine":
            return self.node("Gemm", [x[0], self.const(p["W"], "W"), self.const(p["b"], "b")], transB=1)
        if op == "add":
            return self.node("Add", x)
        if op in CONSTANT_OPS:
            c = p["c"][0] if len(p["c"]) == 1 else p["c"]
            return self.node(_CONSTANT_ONNX[op], [x[0], self.const(c)])
        if op in _UNARY_ONNX:
            return self.node(_UNARY_ONNX[op], x)
        if op == "leaky_relu":
            a = p["alpha"]
            if _float32_exact(a) or self.float is self.np.float32:
                return self.node("LeakyRelu", x, alpha=float(a))
            return self.node("PRelu", [x[0], self.const(a, "slope")])
        if op == "gelu":
            s = p.get("divisor")
            t = self.node("Erf", [self.node("Div", [x[0], self.const(math.sqrt(2) if s is None else s)])])
            return self._gelu_tail(t, x[0])
        if op == "gelu_tanh":
            k = _GELU_K if p.get("k") is None else p["k"]
            a = _GELU_A if p.get("a") is None else p["a"]
            cube = self.node("Mul", [self.node("Mul", [x[0], x[0]]), x[0]])
            inner = self.node("Add", [x[0], self.node("Mul", [cube, self.const(a)])])
            return self._gelu_tail(self.node("Tanh", [self.node("Mul", [inner, self.const(k)])]), x[0])
        if op == "layer_norm":
            if _float32_exact(p["eps"]) or self.float is self.np.float32:
                return self.node("LayerNormalization", [x[0], self.const(p["weight"], "w"), self.const(p["bias"], "b")],
                                 axis=-1, epsilon=float(p["eps"]))
            mu = self.node("ReduceMean", x, axes=[-1], keepdims=1)
            d = self.node("Sub", [x[0], mu])
            var = self.node("ReduceMean", [self.node("Pow", [d, self.const(2)])], axes=[-1], keepdims=1)
            s = self.node("Sqrt", [self.node("Add", [var, self.const(p["eps"])])])
            y = self.node("Mul", [self.node("Div", [d, s]), self.const(p["weight"], "w")])
            return self.node("Add", [y, self.const(p["bias"], "b")])
        if op == "rms_norm":
            ms = self.node("ReduceMean", [self.node("Mul", [x[0], x[0]])], axes=[-1], keepdims=1)
            s = self.node("Sqrt", [self.node("Add", [ms, self.const(p["eps"])])])
            return self.node("Mul", [self.node("Div", [x[0], s]), self.const(p["weight"], "w")])
        if op == "attention":
            return self._attention(nd, x[0])
        if op == "slice":
            return self.node("Slice", [x[0], self.ints([p["start"]]), self.ints([p["stop"]]), self.ints([1])])
        if op == "concat":
            return self.node("Concat", x, axis=1)
        if op == "select_tokens":
            return self.node("Gather", [x[0], self.ints(list(p["indices"]))], axis=0)
        if op == "mean_tokens":
            rows = self.g.tokens_of[nd.inputs[0]]
            L = p.get("sequence_length") or rows
            seqs = self._sequences(x[0], rows, L, self.g.widths[nd.inputs[0]], p.get("layout"), transpose=False)
            axis = 0 if p.get("layout") == "sequence_major" else 1
            return self.node("ReduceMean", [seqs], axes=[axis], keepdims=0)
        raise OnnxError(f"node {nd.name!r}: operation {op} cannot be written as ONNX yet")

    def _sequences(self, x, rows, L, width, layout, transpose=True) -> str:
        """``[rows, width]`` as ``[S, L, width]`` (``[L, S, width]`` for sequence_major unless
        ``transpose``: then moved to ``[S, L, width]``)."""
        S = rows // L
        if layout == "sequence_major":
            t = self.node("Reshape", [x, self.ints([L, S, width])])
            return self.node("Transpose", [t], perm=[1, 0, 2]) if transpose else t
        return self.node("Reshape", [x, self.ints([S, L, width])])

    def _attention(self, nd, x) -> str:
        """Multi-head self-attention per sequence (see the module docstring)."""
        import math as _m

        p = nd.params
        rows, E = self.g.tokens_of[nd.inputs[0]], self.g.widths[nd.inputs[0]]
        L = p.get("sequence_length") or rows
        layout = p.get("layout") or "batch_major"
        X = self._sequences(x, rows, L, E, layout)
        h = int(p["heads"])
        dk, dv = len(p["Wq"]) // h, len(p["Wv"]) // h
        sc = p["scale"]
        scale = 1 / _m.sqrt(sc["inv_sqrt"]) if isinstance(sc, dict) else sc
        mask = None
        if p.get("mask") is not None:
            allowed = ([[int(k <= j) for k in range(L)] for j in range(L)] if p["mask"] == "causal"
                       else [list(r) for r in p["mask"]])
            mask = self.const([[0.0 if a else -math.inf for a in r] for r in allowed], "mask", finite=False)
        heads = []
        for i in range(h):
            def proj(W, b, d):
                rows_ = list(W[i * d:(i + 1) * d])
                Wt = [[rows_[r][c] for r in range(d)] for c in range(E)]  # E x d
                return self.node("Add", [self.node("MatMul", [X, self.const(Wt, "W")]),
                                         self.const(list(b[i * d:(i + 1) * d]), "b")])
            Q, K, V = proj(p["Wq"], p["bq"], dk), proj(p["Wk"], p["bk"], dk), proj(p["Wv"], p["bv"], dv)
            S_ = self.node("MatMul", [Q, self.node("Transpose", [K], perm=[0, 2, 1])])
            if not p.get("hardmax"):  # the scale first, then the mask: the order PyTorch writes
                S_ = self.node("Mul", [S_, self.const(scale, "scale")])
            if mask is not None:
                S_ = self.node("Add", [S_, mask])
            if p.get("hardmax"):
                m = self.node("ReduceMax", [S_], axes=[-1], keepdims=1)
                ind = self.node("Cast", [self.node("Equal", [S_, m])], to=self.T)
                P = self.node("Div", [ind, self.node("ReduceSum", [ind, self.ints([-1])], keepdims=1)])
            else:
                P = self.node("Softmax", [S_], axis=-1)
            heads.append(self.node("MatMul", [P, V]))
        O = heads[0] if h == 1 else self.node("Concat", heads, axis=-1)
        Wo = p["Wo"]
        WoT = [[Wo[r][c] for r in range(len(Wo))] for c in range(h * dv)]
        Y = self.node("Add", [self.node("MatMul", [O, self.const(WoT, "Wo")]), self.const(list(p["bo"]), "bo")])
        if layout == "sequence_major":
            Y = self.node("Transpose", [Y], perm=[1, 0, 2])
        return self.node("Reshape", [Y, self.ints([rows, len(Wo)])])

    def _gelu_tail(self, t, x) -> str:
        """``(1 + t) * x * 1/2``: the tail PyTorch writes for both GELU forms."""
        return self.node("Mul", [self.node("Mul", [self.node("Add", [t, self.const(1)]), x]), self.const(0.5)])

    def proto(self):
        g = self.g
        T = self.T
        for nd in g.nodes:
            self.write(nd)
            last = self.nodes[-1]  # every node ends in an ONNX node: its output takes the node's name
            last.output[0] = last.name = self.names[nd.name] = nd.name
        inp = self.helper.make_tensor_value_info(g.input_name, T, [g.tokens, g.in_width])
        out = self.helper.make_tensor_value_info(g.output, T, [g.out_tokens, g.out_width])
        return self.model(inp, out, "symbounds-graph")


def graph_to_onnx(graph: Graph, dtype: str = "float64"):
    """The ONNX ModelProto of ``graph`` (``dtype`` float64 or float32, opset 17; see the module
    docstring)."""
    return _Writer(graph, dtype).proto()
