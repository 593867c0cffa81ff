"""ONNX import into a layer graph (:mod:`symbounds.core.graph`): what ``torch.onnx.export`` writes
for ``nn.Sequential`` networks (opset 13 to 18).

One small method per ONNX operation (:data:`_OPS` names them): Gemm and MatMul by a constant
(``nn.Linear``; a MatMul's following bias Add is folded into it), Add and Sub (of a constant, or
of two tensors of one shape: a residual connection), Mul and Div by a constant, Relu, LeakyRelu,
PRelu (one slope),
Tanh, Sigmoid, Softplus, Exp, Erf, LayerNormalization (opset 17 on), RMSNormalization and Gelu
(where a graph has them), Constant and Identity.  PyTorch writes GELU (both forms) and, before
opset 17, LayerNorm as chains of elementary nodes (and :mod:`symbounds.core.graph_onnx_export`
writes RMSNorm as one); those chains are recognised and read as the
one operation they compute, with the graph's own constants (the float64 ``sqrt 2`` it divides by,
its ``sqrt(2/pi)``, its ``eps``), so the imported function is the graph's exactly.  Every float
weight is its exact binary rational.

The input is ``[D]`` (one row), ``[N, D]`` (a batch of ``N`` independent rows) or ``[1, N, D]``,
with fixed dimensions.  Anything else is refused with one line naming the node and its operation.
"""

from __future__ import annotations

import re
from fractions import Fraction

from .graph import Graph, Node
from .graph_file import MAX_NODES, graph_from_json, graph_to_json
from .modelfile import model_from_json, model_to_json
from .onnx_io import (MAX_ELEMENTS, MAX_ONNX_BYTES, MAX_TOKENS, MAX_WIDTH, MODEL_OPS, OnnxError, TensorReader,
                      graph_input, onnx_modules, onnx_to_model)

__all__ = ["onnx_to_graph", "import_onnx_network"]


class _T:
    """A computed tensor ``[tokens, width]``: the graph node (or the input) holding it."""

    def __init__(self, name: str, width: int):
        self.name, self.width = name, width


class _C:
    def __init__(self, arr):
        self.a = arr  # numpy object array of Fractions


class _GraphImporter:
    frac_array = TensorReader.frac_array
    attr = TensorReader.attr
    guarded = staticmethod(TensorReader.guarded)

    def __init__(self, proto):
        onnx, helper, numpy_helper, np = onnx_modules()
        self.np, self.numpy_helper, self.helper = np, numpy_helper, helper
        self.proto = proto
        self.room = MAX_ELEMENTS
        self.nodes: list[Node] = []
        self.widths: dict = {}
        self.names: set = set()
        self.fused: dict = {}  # ONNX node index -> (op, x, params): the last node of a recognised chain
        self.skip: set = set()  # ONNX node indices inside a recognised chain

    # --- the graph being built ------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.:/\-]", "_", hint)[:150] or "t"
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def emit(self, op, inputs, params, width, hint) -> _T:
        if len(self.nodes) >= MAX_NODES:
            raise OnnxError(f"the graph has more than {MAX_NODES} operations")
        name = self.fresh(hint)
        self.nodes.append(Node(name, op, tuple(t.name for t in inputs), params))
        self.widths[name] = width
        return _T(name, width)

    # --- run --------------------------------------------------------------------------------------
    def run(self) -> Graph:
        g = self.proto.graph
        inp, dims = graph_input(g)
        if not dims or None in dims:
            raise OnnxError(f"input {inp.name!r}: every dimension must be fixed (export without dynamic axes)")
        if len(dims) == 1:
            tokens, width = 1, dims[0]
        elif len(dims) == 2 or (len(dims) == 3 and dims[0] == 1):
            tokens, width = dims[-2], dims[-1]
        else:
            raise OnnxError(f"input {inp.name!r}: expected [D], [N, D] or [1, N, D], found {dims}")
        if not (1 <= width <= MAX_WIDTH) or not (1 <= tokens <= MAX_TOKENS):
            raise OnnxError(f"input {inp.name!r}: {tokens} rows of width {width}, expected at most "
                            f"{MAX_TOKENS} rows of width 1..{MAX_WIDTH}")
        self.input_name = self.fresh(inp.name)
        self.widths[self.input_name] = width
        vals: dict = {inp.name: _T(self.input_name, width)}
        for t in g.initializer:
            where = f"initializer {t.name!r}"
            vals[t.name] = _C(self.guarded(lambda: self.frac_array(t, where), where))
        self.uses = {}
        for nd in g.node:
            for i in nd.input:
                self.uses[i] = self.uses.get(i, 0) + 1
        self.out_name = g.output[0].name
        self.uses[self.out_name] = self.uses.get(self.out_name, 0) + 1
        self.vals = vals
        self.find_chains(list(g.node))
        for k, nd in enumerate(g.node):
            where = f"node {nd.name or nd.output[0]!r} ({nd.op_type})"
            if nd.op_type == "Constant":  # constants first: the recognised chains read them too
                vals[nd.output[0]] = self.guarded(lambda: self.op_constant(nd, [], where), where)
                continue
            if k in self.skip:
                continue
            if k in self.fused:
                op, x, params = self.fused[k]
                src = vals.get(x)
                if not isinstance(src, _T):
                    raise OnnxError(f"{where}: the {op} chain does not start from a computed tensor")
                if op == "layer_norm_chain":
                    op, params = "layer_norm", self.chain_params(params, src.width, where)
                elif op == "rms_norm_chain":
                    op, params = "rms_norm", self.chain_params(params, src.width, where, bias=False)
                vals[nd.output[0]] = self.emit(op, [src], params, src.width, nd.output[0])
                continue
            args = []
            for i in nd.input:
                if i == "":
                    args.append(None)
                elif i not in vals:
                    raise OnnxError(f"{where}: unknown input {i!r}")
                else:
                    args.append(vals[i])
            out = self.guarded(lambda: self.op(nd, args, where), where)
            if len(nd.output) != 1:
                raise OnnxError(f"{where}: expected one output")
            vals[nd.output[0]] = out
        res = vals.get(self.out_name)
        if not isinstance(res, _T) or res.name == self.input_name:
            raise OnnxError("the output is not computed from the input by the graph's operations")
        graph = Graph(self.input_name, tokens, width, tuple(self.nodes), res.name, self.widths)
        return graph_from_json(graph_to_json(graph))  # the graph must read back as a valid file

    def op(self, nd, args, where):
        """The value of node ``nd`` from its inputs' values (:data:`_OPS` names the method)."""
        if nd.domain not in ("", "ai.onnx"):
            raise OnnxError(f"{where}: operation from domain {nd.domain!r} is not supported")
        name = _OPS.get(nd.op_type)
        if name is None:
            raise OnnxError(f"{where}: operation {nd.op_type} is not supported in a layer graph")
        return getattr(self, name)(nd, args, where)

    # --- helpers ------------------------------------------------------------------------------------
    def const_row(self, c: _C, width, where) -> tuple:
        """A constant broadcast over the rows: one number, or one per column (leading dims 1)."""
        a = c.a
        if a.size == 1:
            return (a.flat[0],)
        if a.shape[-1] == width and a.size == width:
            return tuple(a.reshape(-1))
        raise OnnxError(f"{where}: a constant of shape {list(a.shape)} does not broadcast over rows of width {width}")

    def chain_params(self, p, width, where, bias=True) -> dict:
        """A LayerNorm (RMSNorm: ``bias=False``) chain's weight and bias (one per column, or one
        number), defaults 1 and 0."""
        out = {"eps": p["eps"]}
        for key, default in (("weight", Fraction(1)), ("bias", Fraction(0)))[:2 if bias else 1]:
            v = p.get(key, (default,))
            if len(v) == 1:
                v = v * width
            if len(v) != width:
                raise OnnxError(f"{where}: the LayerNorm {key} has {len(v)} entries for width {width}")
            out[key] = tuple(v)
        return out

    def tensor(self, v, where) -> _T:
        if not isinstance(v, _T):
            raise OnnxError(f"{where}: expected a tensor computed from the input")
        return v

    # --- operations ----------------------------------------------------------------------------------
    def op_constant(self, nd, args, where):
        """Constant: a tensor given in the node (``value``; scalar ``value_float`` / ``value_floats``)."""
        t = self.attr(nd, "value")
        if t is not None:
            return _C(self.frac_array(t, where))
        f = self.attr(nd, "value_float")
        if f is not None:
            return _C(self.np.array([Fraction(float(f))], dtype=object))
        raise OnnxError(f"{where}: only tensor constants ('value') are supported")

    def op_identity(self, nd, args, where):
        return args[0]

    def op_gemm(self, nd, args, where):
        """Gemm ``alpha A B' + beta C`` of a tensor ``A`` and constants ``B``, ``C``: an affine node."""
        if self.attr(nd, "transA", 0):
            raise OnnxError(f"{where}: transA is not supported")
        a = self.tensor(args[0], where)
        if len(args) < 2 or not isinstance(args[1], _C) or args[1].a.ndim != 2:
            raise OnnxError(f"{where}: the weight must be a constant matrix")
        B = args[1].a
        W = B if self.attr(nd, "transB", 0) else B.T  # out x in
        alpha = Fraction(float(self.attr(nd, "alpha", 1.0)))
        beta = Fraction(float(self.attr(nd, "beta", 1.0)))
        if W.shape[1] != a.width:
            raise OnnxError(f"{where}: the weight takes width {W.shape[1]}, the input has width {a.width}")
        if W.shape[0] > MAX_WIDTH:
            raise OnnxError(f"{where}: a tensor of {W.shape[0]} features, above the limit of {MAX_WIDTH}")
        n = W.shape[0]
        b = (Fraction(0),) * n
        if len(args) > 2 and args[2] is not None:
            if not isinstance(args[2], _C):
                raise OnnxError(f"{where}: the bias must be a constant")
            c = self.const_row(args[2], n, where)
            b = tuple(beta * v for v in (c * n if len(c) == 1 else c))
        Wt = tuple(tuple(alpha * v for v in row) for row in W)
        return self.emit("affine", [a], {"W": Wt, "b": b}, n, nd.output[0])

    def op_matmul(self, nd, args, where):
        """MatMul of a tensor by a constant ``[in, out]`` matrix: an affine node without bias."""
        a = self.tensor(args[0], where)
        if not isinstance(args[1], _C) or args[1].a.ndim != 2:
            raise OnnxError(f"{where}: only a product by a constant matrix is supported")
        B = args[1].a
        if B.shape[0] != a.width:
            raise OnnxError(f"{where}: the weight takes width {B.shape[0]}, the input has width {a.width}")
        if B.shape[1] > MAX_WIDTH:
            raise OnnxError(f"{where}: a tensor of {B.shape[1]} features, above the limit of {MAX_WIDTH}")
        W = tuple(tuple(row) for row in B.T)
        return self.emit("affine", [a], {"W": W, "b": (Fraction(0),) * B.shape[1]}, B.shape[1], nd.output[0])

    def op_add(self, nd, args, where):
        """Add / Sub: of two tensors of one shape (a residual connection), or of a constant (folded
        into the bias of the affine node just before it when that node has no other use)."""
        a, b = args
        sub = nd.op_type == "Sub"
        if isinstance(a, _T) and isinstance(b, _T):
            if a.width != b.width:
                raise OnnxError(f"{where}: shapes differ (width {a.width} and {b.width})")
            if sub:
                b = self.emit("mul_constant", [b], {"c": (Fraction(-1),)}, b.width, nd.output[0] + "_neg")
            return self.emit("add", [a, b], {}, a.width, nd.output[0])
        if isinstance(a, _C) and isinstance(b, _C):
            return _C(a.a - b.a if sub else a.a + b.a)
        if isinstance(a, _T) and isinstance(b, _C):
            c = self.const_row(b, a.width, where)
            c = tuple(-v for v in c) if sub else c
            return self.add_constant(a, nd.input[0], c, nd.output[0])
        if isinstance(a, _C) and isinstance(b, _T):
            c = self.const_row(a, b.width, where)
            if sub:  # c - x
                b = self.emit("mul_constant", [b], {"c": (Fraction(-1),)}, b.width, nd.output[0] + "_neg")
            return self.add_constant(b, None if sub else nd.input[1], c, nd.output[0])
        raise OnnxError(f"{where}: unsupported operands")

    def add_constant(self, t: _T, onnx_name, c, hint) -> _T:
        last = self.nodes[-1] if self.nodes else None
        if (last is not None and last.name == t.name and last.op == "affine" and onnx_name is not None
                and self.uses.get(onnx_name, 0) == 1 and onnx_name != self.out_name):
            cs = c * t.width if len(c) == 1 else c
            b = tuple(x + y for x, y in zip(last.params["b"], cs))
            self.nodes[-1] = Node(last.name, "affine", last.inputs, {"W": last.params["W"], "b": b})
            return t
        return self.emit("add_constant", [t], {"c": tuple(c)}, t.width, hint)

    def op_mul(self, nd, args, where):
        """Mul / Div of a tensor by a constant (one number or one per column)."""
        a, b = args
        div = nd.op_type == "Div"
        if isinstance(a, _C) and isinstance(b, _C):
            return _C(a.a / b.a if div else a.a * b.a)
        if isinstance(a, _T) and isinstance(b, _C):
            c = self.const_row(b, a.width, where)
            if div and any(v == 0 for v in c):
                raise OnnxError(f"{where}: division by zero")
            return self.emit("div_constant" if div else "mul_constant", [a], {"c": c}, a.width, nd.output[0])
        if isinstance(a, _C) and isinstance(b, _T) and not div:
            return self.emit("mul_constant", [b], {"c": self.const_row(a, b.width, where)}, b.width, nd.output[0])
        if isinstance(a, _T) and isinstance(b, _T):
            raise OnnxError(f"{where}: a product of two computed tensors is not supported")
        raise OnnxError(f"{where}: only division of a tensor by a constant is supported")

    def op_unary(self, nd, args, where):
        """Relu, Tanh, Sigmoid, Exp, Erf, Softplus: the graph's node of the same function
        (:data:`_UNARY`), elementwise, of the input's width."""
        a = self.tensor(args[0], where)
        return self.emit(_UNARY[nd.op_type], [a], {}, a.width, nd.output[0])

    def op_leaky_relu(self, nd, args, where):
        """LeakyRelu (``alpha``, default 0.01, as the float32 the graph holds)."""
        a = self.tensor(args[0], where)
        alpha = Fraction(float(self.attr(nd, "alpha", 0.01)))
        return self.emit("leaky_relu", [a], {"alpha": alpha}, a.width, nd.output[0])

    def op_prelu(self, nd, args, where):
        """PRelu with one constant slope (``nn.PReLU`` with one parameter): a leaky ReLU."""
        a = self.tensor(args[0], where)
        if len(args) != 2 or not isinstance(args[1], _C) or args[1].a.size == 0:
            raise OnnxError(f"{where}: the slope must be a constant")
        slopes = set(args[1].a.reshape(-1))
        if len(slopes) != 1:
            raise OnnxError(f"{where}: one slope per channel is not supported (only one slope)")
        return self.emit("leaky_relu", [a], {"alpha": slopes.pop()}, a.width, nd.output[0])

    def op_gelu(self, nd, args, where):
        """Gelu (opset 20): ``approximate`` "none" (erf) or "tanh"."""
        a = self.tensor(args[0], where)
        approx = self.attr(nd, "approximate", b"none")
        approx = approx.decode() if isinstance(approx, bytes) else approx
        if approx not in ("none", "tanh"):
            raise OnnxError(f"{where}: approximate={approx[:20]!r} is not supported")
        return self.emit("gelu" if approx == "none" else "gelu_tanh", [a], {}, a.width, nd.output[0])

    def op_layer_norm(self, nd, args, where):
        """LayerNormalization over the last axis (``epsilon``, scale, optional bias)."""
        return self._norm(nd, args, where, "layer_norm")

    def op_rms_norm(self, nd, args, where):
        """RMSNormalization over the last axis (``epsilon``, scale)."""
        return self._norm(nd, args, where, "rms_norm")

    def _norm(self, nd, args, where, op):
        a = self.tensor(args[0], where)
        rank = len(self._input_rank())
        axis = self.attr(nd, "axis", -1)
        if axis not in (-1, rank - 1):
            raise OnnxError(f"{where}: only normalisation over the last axis is supported (axis {axis})")
        eps = Fraction(float(self.attr(nd, "epsilon", 1e-5)))
        if eps <= 0:
            raise OnnxError(f"{where}: epsilon must be positive")
        params = {"eps": eps}
        for k, key in ((1, "weight"), (2, "bias")):
            if len(args) > k and args[k] is not None:
                if not isinstance(args[k], _C):
                    raise OnnxError(f"{where}: the {key} must be a constant")
                c = self.const_row(args[k], a.width, where)
                params[key] = c * a.width if len(c) == 1 else c
            elif key == "weight":
                params[key] = (Fraction(1),) * a.width
        if op == "layer_norm":
            params.setdefault("bias", (Fraction(0),) * a.width)
        elif "bias" in params:
            raise OnnxError(f"{where}: a bias is not supported")
        return self.emit(op, [a], params, a.width, nd.output[0])

    def _input_rank(self):
        g = self.proto.graph
        inits = {t.name for t in g.initializer}
        inp = [i for i in g.input if i.name not in inits][0]
        return inp.type.tensor_type.shape.dim

    # --- chains PyTorch writes for one operation ----------------------------------------------------
    def find_chains(self, nodes) -> None:
        """Recognise GELU (erf and tanh forms), LayerNorm and RMSNorm written as elementary nodes."""
        self.producer = {o: (k, nd) for k, nd in enumerate(nodes) for o in nd.output}
        self.consumers: dict = {}
        for k, nd in enumerate(nodes):
            for i in nd.input:
                self.consumers.setdefault(i, []).append((k, nd))
        for k, nd in enumerate(nodes):
            if k in self.skip:
                continue
            for match in (self._gelu_erf, self._gelu_tanh, self._layer_norm_chain, self._rms_norm_chain):
                m = match(k, nd)
                if m is not None:
                    last, inner, fused = m
                    if not (inner & set(self.fused)) and not (inner & self.skip):
                        self.skip |= inner
                        self.fused[last] = fused
                    break

    def _scalar(self, name):
        """The value of a one-entry constant (an initializer or a Constant node), else None."""
        if name in self.vals and isinstance(self.vals[name], _C):
            a = self.vals[name].a
            return a.flat[0] if a.size == 1 else None
        p = self.producer.get(name)
        if p is None or p[1].op_type != "Constant":
            return None
        t = self.attr(p[1], "value")
        if t is None or len(t.dims) > 1 or (t.dims and t.dims[0] != 1):
            return None
        try:
            return Fraction(float(self.numpy_helper.to_array(t).reshape(-1)[0]))
        except (ValueError, OverflowError, IndexError):
            return None

    def _only(self, name, op):
        """The one consumer of ``name`` when it has one and it is an ``op`` node (never the output)."""
        cs = self.consumers.get(name, [])
        if name == self.out_name or len(cs) != 1 or cs[0][1].op_type != op:
            return None
        return cs[0]

    @staticmethod
    def _other(nd, name):
        """The other operand of a binary node one of whose operands is ``name``."""
        if len(nd.input) != 2:
            return None
        a, b = nd.input
        return b if a == name else a if b == name else None

    def _gelu_tail(self, t_name, x):
        """``(1 + t) * x * 1/2`` after ``t`` (either operand order): the last node's index and the
        nodes of the tail, or None."""
        add = self._only(t_name, "Add")
        if add is None or self._scalar(self._other(add[1], t_name)) != 1:
            return None
        m1 = self._only(add[1].output[0], "Mul")
        if m1 is None or self._other(m1[1], add[1].output[0]) != x:
            return None
        m2 = self._only(m1[1].output[0], "Mul")
        if m2 is None or self._scalar(self._other(m2[1], m1[1].output[0])) != Fraction(1, 2):
            return None
        return m2[0], {add[0], m1[0], m2[0]}

    def _gelu_erf(self, k, nd):
        """``Div(x, s) -> Erf -> Add 1 -> Mul x -> Mul 1/2``: GELU with divisor ``s``."""
        if nd.op_type != "Div":
            return None
        x, s = nd.input[0], self._scalar(nd.input[1]) if len(nd.input) == 2 else None
        if s is None or s <= 0:
            return None
        erf = self._only(nd.output[0], "Erf")
        if erf is None:
            return None
        tail = self._gelu_tail(erf[1].output[0], x)
        if tail is None:
            return None
        last, inner = tail
        return last, (inner | {k, erf[0]}) - {last}, ("gelu", x, {"divisor": s})

    def _gelu_tanh(self, k, nd):
        """``x + a x^3`` (``Mul(x, x)``, ``Mul(x, .)``, ``Mul(a, .)``, ``Add(x, .)``, or ``Pow(x, 3)``)
        ``-> Mul k -> Tanh -> Add 1 -> Mul x -> Mul 1/2``: GELU's tanh form with its ``k`` and ``a``."""
        if nd.op_type == "Mul" and len(nd.input) == 2 and nd.input[0] == nd.input[1]:
            x = nd.input[0]
            cube = self._only(nd.output[0], "Mul")
            if cube is None or self._other(cube[1], nd.output[0]) != x:
                return None
            first = {k, cube[0]}
        elif nd.op_type == "Pow" and len(nd.input) == 2 and self._scalar(nd.input[1]) == 3:
            x, cube, first = nd.input[0], (k, nd), {k}
        else:
            return None
        ma = self._only(cube[1].output[0], "Mul")
        if ma is None:
            return None
        a = self._scalar(self._other(ma[1], cube[1].output[0]))
        add = self._only(ma[1].output[0], "Add")
        if a is None or add is None or self._other(add[1], ma[1].output[0]) != x:
            return None
        mk = self._only(add[1].output[0], "Mul")
        if mk is None:
            return None
        kk = self._scalar(self._other(mk[1], add[1].output[0]))
        th = self._only(mk[1].output[0], "Tanh")
        if kk is None or th is None:
            return None
        tail = self._gelu_tail(th[1].output[0], x)
        if tail is None:
            return None
        last, inner = tail
        return last, (inner | first | {ma[0], add[0], mk[0], th[0]}) - {last}, ("gelu_tanh", x, {"k": kk, "a": a})

    def _last_axis(self, nd):
        """A ReduceMean over the last axis only (``axes`` an attribute, or a constant input from
        opset 18), keeping the dimension."""
        if nd.op_type != "ReduceMean" or not self.attr(nd, "keepdims", 1):
            return False
        axes = self.attr(nd, "axes")
        if axes is None and len(nd.input) == 2:
            p = self.producer.get(nd.input[1])
            if nd.input[1] in self.vals and isinstance(self.vals[nd.input[1]], _C):
                axes = [int(v) for v in self.vals[nd.input[1]].a.reshape(-1)]
            elif p is not None and p[1].op_type == "Constant":
                axes = [int(v) for v in self.numpy_helper.to_array(self.attr(p[1], "value")).reshape(-1)]
        rank = len(self._input_rank())
        return axes is not None and list(axes) in ([-1], [rank - 1])

    def _layer_norm_chain(self, k, nd):
        """``ReduceMean -> Sub -> Pow 2 -> ReduceMean -> Add eps -> Sqrt -> Div [-> Mul w -> Add b]``."""
        if not self._last_axis(nd):
            return None
        x = nd.input[0]
        sub = self._only(nd.output[0], "Sub")
        if sub is None or list(sub[1].input) != [x, nd.output[0]]:
            return None
        d = sub[1].output[0]
        cs = self.consumers.get(d, [])
        if d == self.out_name or len(cs) != 2 or {c[1].op_type for c in cs} != {"Pow", "Div"}:
            return None
        pw = next(c for c in cs if c[1].op_type == "Pow")
        dv = next(c for c in cs if c[1].op_type == "Div")
        if list(pw[1].input)[0] != d or self._scalar(pw[1].input[1]) != 2 or list(dv[1].input)[0] != d:
            return None
        r2 = self._only(pw[1].output[0], "ReduceMean")
        if r2 is None or not self._last_axis(r2[1]):
            return None
        ad = self._only(r2[1].output[0], "Add")
        eps = None if ad is None else self._scalar(self._other(ad[1], r2[1].output[0]))
        if eps is None or eps <= 0:
            return None
        sq = self._only(ad[1].output[0], "Sqrt")
        if sq is None or list(dv[1].input) != [d, sq[1].output[0]] or self._only(sq[1].output[0], "Div") is None:
            return None
        inner = {k, sub[0], pw[0], r2[0], ad[0], sq[0], dv[0]}
        last, params = dv[0], {"eps": eps}
        mw = self._only(dv[1].output[0], "Mul")
        if mw is not None:
            w = self._other(mw[1], dv[1].output[0])
            if w in self.vals and isinstance(self.vals[w], _C):
                params["weight"] = tuple(self.vals[w].a.reshape(-1))
                inner.add(mw[0])
                last = mw[0]
                ab = self._only(mw[1].output[0], "Add")
                if ab is not None:
                    b = self._other(ab[1], mw[1].output[0])
                    if b in self.vals and isinstance(self.vals[b], _C):
                        params["bias"] = tuple(self.vals[b].a.reshape(-1))
                        inner.add(ab[0])
                        last = ab[0]
        return last, inner - {last}, ("layer_norm_chain", x, params)

    def _rms_norm_chain(self, k, nd):
        """``Mul(x, x) -> ReduceMean -> Add eps -> Sqrt -> Div(x, .) [-> Mul w]``: RMSNorm, as
        :mod:`symbounds.core.graph_onnx_export` writes it."""
        if nd.op_type != "Mul" or len(nd.input) != 2 or nd.input[0] != nd.input[1]:
            return None
        x = nd.input[0]
        rm = self._only(nd.output[0], "ReduceMean")
        if rm is None or not self._last_axis(rm[1]):
            return None
        ad = self._only(rm[1].output[0], "Add")
        eps = None if ad is None else self._scalar(self._other(ad[1], rm[1].output[0]))
        if eps is None or eps <= 0:
            return None
        sq = self._only(ad[1].output[0], "Sqrt")
        dv = None if sq is None else self._only(sq[1].output[0], "Div")
        if dv is None or list(dv[1].input) != [x, sq[1].output[0]]:
            return None
        inner = {k, rm[0], ad[0], sq[0], dv[0]}
        last, params = dv[0], {"eps": eps}
        mw = self._only(dv[1].output[0], "Mul")
        w = None if mw is None else self._other(mw[1], dv[1].output[0])
        if w in self.vals and isinstance(self.vals[w], _C):
            params["weight"] = tuple(self.vals[w].a.reshape(-1))
            inner.add(mw[0])
            last = mw[0]
        return last, inner - {last}, ("rms_norm_chain", x, params)


#: the elementwise ONNX operations read as the layer graph's node of the same function
_UNARY = {"Relu": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid", "Exp": "exp", "Erf": "erf", "Softplus": "softplus"}

_OPS = {
    "Constant": "op_constant", "Identity": "op_identity", "Gemm": "op_gemm", "MatMul": "op_matmul",
    "Add": "op_add", "Sub": "op_add", "Mul": "op_mul", "Div": "op_mul",
    "LeakyRelu": "op_leaky_relu", "PRelu": "op_prelu", "Gelu": "op_gelu", "LayerNormalization": "op_layer_norm",
    "RMSNormalization": "op_rms_norm",
    **{name: "op_unary" for name in _UNARY},
}


def onnx_to_graph(proto) -> Graph:
    """The :class:`Graph` of an ONNX ModelProto (exact weights), or :class:`OnnxError`, one line."""
    return _GraphImporter(proto).run()


def import_onnx_network(path: str):
    """The network of an ONNX file: a model file's :class:`Transformer` where the graph is one
    (attention and feed-forward layers, as :func:`import_onnx`), else a layer graph
    (:func:`symbounds.core.onnx_graph.onnx_to_graph`: MLPs, normalisations, activations).  When
    neither reads it, the one line says why the layer graph could not (or, for an operation only
    the model file reads, such as Softmax, why the model file could not)."""
    from .files import read_user_file

    onnx, *_ = onnx_modules()
    data = read_user_file(path, OnnxError, MAX_ONNX_BYTES)
    try:
        proto = onnx.load_model_from_string(data)
    except Exception as e:  # protobuf's decode errors have no common base class
        raise OnnxError(f"{path}: not an ONNX file ({type(e).__name__})") from None
    try:
        return model_from_json(model_to_json(onnx_to_model(proto)))
    except (OnnxError, ValueError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
    try:
        return onnx_to_graph(proto)
    except (OnnxError, ValueError) as e:
        second = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise OnnxError(f"{path}: {_reason(first, second)}")


def _node_of(message: str):
    """The ``node 'name' (Op)`` a message starts with, or None (the input, an initializer)."""
    m = re.match(r"node '[^']*' \(([A-Za-z0-9_]+)\)", message)
    return (m.group(0), m.group(1)) if m else None


def _reason(model_error: str, graph_error: str) -> str:
    """Which importer's message to report when neither reads a graph: the layer graph's when it
    failed at another node than the model file's import (so it read further, or the model file
    refused an operation only the layer graph reads), else the model file's (a declaration both
    check, a node both refuse, an operation only the model file reads, such as Softmax)."""
    g, m = _node_of(graph_error), _node_of(model_error)
    if g is None or (m is not None and g[0] == m[0]) or (g[1] in MODEL_OPS and g[1] not in _OPS):
        return model_error
    return graph_error
