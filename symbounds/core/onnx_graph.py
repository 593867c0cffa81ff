"""ONNX import into a layer graph (:mod:`symbounds.core.graph`): what ``torch.onnx.export`` writes
(opset 13 to 18) for ``nn.Sequential`` networks, ``nn.MultiheadAttention`` and
``nn.TransformerEncoderLayer``.

One small method per ONNX operation (:data:`_OPS` names them): Gemm and MatMul by a constant
(``nn.Linear``; a MatMul's following bias Add is folded into it), Add and Sub (of a constant, or
of two tensors of one shape: a residual connection), Mul and Div by a constant, Relu, LeakyRelu,
PRelu (one slope),
Tanh, Sigmoid, Softplus, Exp, Erf, LayerNormalization (opset 17 on), RMSNormalization and Gelu
(where a graph has them), ReduceMean (over the features: one affine node; over the tokens: mean
pooling), Cast between float types, Constant and Identity.  PyTorch writes GELU (both forms)
and, before opset 17, LayerNorm as chains of elementary nodes (and
:mod:`symbounds.core.graph_onnx_export` writes RMSNorm as one); those chains are recognised and
read as the one operation they compute, with the graph's own constants (the float64 ``sqrt 2`` it
divides by, its ``sqrt(2/pi)``, its ``eps``), so the imported function is the graph's exactly.
Every float weight is its exact binary rational.

The input has any rank with fixed dimensions: ``[D]`` is one row, ``[d1, ..., dk, D]`` is
``d1 ... dk`` rows (in C order) of width ``D``.  Shape operations (Reshape, Transpose, Squeeze,
Unsqueeze, Flatten, Gather, Slice, Split, Concat) are followed entry by entry
(:mod:`symbounds.core.onnx_views`); where a row-wise operation reads the result, it must be rows
of one tensor (in any order: the order is kept, and restored at the output by ``select_tokens``)
with one set of columns (``slice``/``concat``).  Attention (the scores ``Q K^T`` of two computed
tensors, a scale, an additive 0/-inf mask, Softmax over the keys, the product with ``V``) becomes
one ``attention`` node (:mod:`symbounds.core.onnx_attention`).  Operations on constants only
(the shape arithmetic PyTorch writes: Shape, Cast, Sqrt, Div, Concat, ...) are evaluated by
ONNX's reference implementation, in the graph's own float types.  Anything else is refused with
one line naming the node and its operation.
"""

from __future__ import annotations

import re
from fractions import Fraction

from .graph import Graph, Node
from .graph_file import MAX_NODES, graph_from_json, graph_to_json
from .modelfile import model_from_json, model_to_json
from .onnx_attention import attention_node
from .onnx_io import (MAX_ELEMENTS, MAX_ONNX_BYTES, MAX_TOKENS, MAX_WIDTH, MODEL_OPS, OnnxError, TensorReader,
                      graph_input, onnx_modules, onnx_to_model)
from .onnx_views import Budget, View, shape_op, split_sizes

__all__ = ["onnx_to_graph", "import_onnx_network"]


class _C:
    """A constant: a numpy array in the graph's own type (float32, float64, int64, bool)."""

    def __init__(self, arr):
        self.a = arr


class _Scores:
    """``scale (Q K^T) + mask``: the views of the queries ``[.., L, dk]`` and of the keys
    transposed ``[.., dk, L]``, an exact factor, the additive mask (a constant, or None)."""

    def __init__(self, q, kT, scale, mask=None, probs=False):
        self.q, self.kT, self.scale, self.mask, self.probs = q, kT, scale, mask, probs


#: operations evaluated when every operand is a constant (the shape arithmetic of an export);
#: those that make an output larger than their operands are checked against the budget first
_FOLD = {"Cast", "Sqrt", "Div", "Mul", "Add", "Sub", "Mod", "Neg", "Abs", "Pow", "Floor", "Ceil", "Equal",
         "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Where", "Min", "Max",
         "Reshape", "Concat", "Slice", "Gather", "Unsqueeze", "Squeeze", "Transpose", "Flatten", "Identity",
         "ConstantOfShape", "Expand", "Range", "Reciprocal", "Exp", "Log", "Erf", "Tanh", "Sigmoid", "Relu",
         "Softmax", "MatMul", "Gemm", "Trilu", "IsInf", "IsNaN", "Split"}
_GROWS = {"ConstantOfShape", "Expand", "Range"}
_SHAPE_OPS = {"Identity", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Gather", "Slice", "Concat"}


class _GraphImporter:
    attr = TensorReader.attr
    guarded = staticmethod(TensorReader.guarded)

    def __init__(self, proto):
        onnx, helper, numpy_helper, np = onnx_modules()
        self.onnx, self.np, self.numpy_helper, self.helper = onnx, np, numpy_helper, helper
        self.proto = proto
        self.room = MAX_ELEMENTS
        self.budget = Budget()
        self.nodes: list[Node] = []
        self.widths: dict = {}
        self.rows: dict = {}  # graph tensor -> its number of rows
        self.names: set = set()
        self.fused: dict = {}  # ONNX node index -> (op, x, params): the last node of a recognised chain
        self.skip: set = set()  # ONNX node indices inside a recognised chain
        self.cache: dict = {}  # (tensor, columns, factor) -> the tensor holding them
        self.onnx_of: dict = {}  # graph tensor -> the ONNX value it was emitted for
        self.opset = next((int(o.version) for o in proto.opset_import if o.domain in ("", "ai.onnx")), 18)

    # --- the graph being built ------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.:/\-]", "_", hint)[:150] or "t"
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def emit(self, op, inputs, params, width, hint, rows=None) -> str:
        """Append a node reading the graph tensors ``inputs``; its name."""
        if len(self.nodes) >= MAX_NODES:
            raise OnnxError(f"the graph has more than {MAX_NODES} operations")
        if width > MAX_WIDTH:
            raise OnnxError(f"a tensor of {width} features, above the limit of {MAX_WIDTH}")
        name = self.fresh(hint)
        self.nodes.append(Node(name, op, tuple(inputs), params))
        self.widths[name] = width
        self.rows[name] = self.rows[inputs[0]] if rows is None else rows
        self.onnx_of[name] = hint
        return name

    def node_named(self, name):
        return next((nd for nd in reversed(self.nodes) if nd.name == name), None)

    # --- constants --------------------------------------------------------------------------------
    def native(self, t, where):
        """A TensorProto as a numpy array, its declared shape checked (and charged to the budget of
        constant entries) before anything of that shape is built."""
        if t.data_location == 1:  # TensorProto.EXTERNAL
            raise OnnxError(f"{where}: weights stored in another file (external data) are not read")
        dims = [int(x) for x in t.dims]
        if any(x < 0 for x in dims):
            raise OnnxError(f"{where}: a negative dimension in the declared shape {dims}")
        self.charge(int(self.np.prod(dims, dtype=object)), where)
        arr = self.numpy_helper.to_array(t)
        if list(arr.shape) != dims:
            raise OnnxError(f"{where}: holds {arr.size} entries for the declared shape {dims}")
        if arr.dtype.kind not in "fiub":
            raise OnnxError(f"{where}: unsupported tensor type {arr.dtype}")
        return arr

    def charge(self, n, where):
        if n > self.room:
            raise OnnxError(f"{where}: {n} entries, above the {MAX_ELEMENTS} entries the constant tensors may hold in all")
        self.room -= n

    def frac(self, c: _C, where):
        """The constant's entries as exact rationals (finite floats are binary rationals)."""
        np = self.np
        a = c.a
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            raise OnnxError(f"{where}: a weight is not finite")
        out = np.empty(a.shape, dtype=object)
        for idx, v in np.ndenumerate(a):
            out[idx] = Fraction(float(v)) if a.dtype.kind == "f" else Fraction(int(v))
        return out

    def ints(self, v, where):
        if v is None:
            return None
        if not isinstance(v, _C) or v.a.dtype.kind not in "iub":
            raise OnnxError(f"{where}: expected a constant integer tensor")
        return [int(x) for x in v.a.reshape(-1)]

    def fold(self, nd, args, where):
        """A node of constant operands, evaluated by ONNX's reference implementation."""
        np = self.np
        if nd.op_type in _GROWS:
            if nd.op_type == "Range":
                s, lim, d = (float(a.a.reshape(-1)[0]) for a in args)
                n = max(0, int(np.ceil((lim - s) / d))) if d else None
                if n is None:
                    raise OnnxError(f"{where}: a range of step 0")
            else:
                shp = [int(x) for x in args[1 if nd.op_type == "Expand" else 0].a.reshape(-1)]
                if nd.op_type == "Expand":
                    shp = np.broadcast_shapes(tuple(shp), args[0].a.shape)
                n = int(np.prod(shp, dtype=object))
            self.charge(n, where)
        from onnx.reference import ReferenceEvaluator

        ins = [f"i{k}" if a is not None else "" for k, a in enumerate(args)]
        node = self.helper.make_node(nd.op_type, ins, [f"o{k}" for k in range(len(nd.output))], domain=nd.domain)
        node.attribute.extend(nd.attribute)
        feeds = {f"i{k}": a.a for k, a in enumerate(args) if a is not None}
        try:
            outs = ReferenceEvaluator(node, opsets={"": self.opset}).run(None, feeds)
        except Exception as e:  # the reference implementation's own errors have no common base
            raise OnnxError(f"{where}: cannot evaluate on constants ({type(e).__name__})") from None
        res = []
        for o in outs:
            o = np.asarray(o)
            self.charge(o.size, where)
            res.append(_C(o))
        return res

    # --- views of graph tensors --------------------------------------------------------------------
    def columns(self, name, cols):
        """The graph tensor holding columns ``cols`` of ``name`` (itself, a ``slice``, or a
        ``concat`` of slices)."""
        w = self.widths[name]
        if cols == tuple(range(w)):
            return name
        key = (name, cols)
        if key not in self.cache:
            runs, start = [], 0
            for i in range(1, len(cols) + 1):
                if i == len(cols) or cols[i] != cols[i - 1] + 1:
                    runs.append((cols[start], cols[i - 1] + 1))
                    start = i
            parts = [name if (a, b) == (0, w) else
                     self.emit("slice", [name], {"start": a, "stop": b}, b - a, f"{name}_cols{a}") for a, b in runs]
            self.cache[key] = parts[0] if len(parts) == 1 else self.emit("concat", parts, {}, len(cols), f"{name}_cols")
        return self.cache[key]

    def operand(self, v, where):
        """``(tensor, rowmap, lead)``: a view read by a row-wise operation as rows of one graph
        tensor (``rowmap[r]`` the tensor's row of the view's row ``r``, None when in order),
        with the view's factor applied; else one line."""
        np = self.np
        v = self.view(v, where)
        if v.rank == 0:
            raise OnnxError(f"{where}: a scalar computed from the input")
        lead = v.shape[:-1]
        if v.canonical:
            name, rowmap = v.name, None
        else:
            R, W = int(np.prod(lead, dtype=object)), v.shape[-1]
            tok, col = v.tok.reshape(R, W), v.col.reshape(R, W)
            if W == 0 or R == 0:
                raise OnnxError(f"{where}: an empty tensor")
            if not np.all(tok == tok[:, :1]) or not np.all(col == col[:1, :]):
                raise OnnxError(f"{where}: reads a reshape that is not an identity on the [tokens, width] layout "
                                f"(its rows mix tokens or columns)")
            rowmap = tok[:, 0]
            name = self.columns(v.name, tuple(int(c) for c in col[0]))
            if R == self.rows[v.name] and np.array_equal(rowmap, np.arange(R)):
                rowmap = None
        if v.factor != 1:
            key = (name, "factor", v.factor)
            if key not in self.cache:
                self.cache[key] = self.emit("mul_constant", [name], {"c": (v.factor,)}, self.widths[name], name + "_scaled")
            name = self.cache[key]
        return name, rowmap, lead

    def result(self, name, rowmap, lead) -> View:
        """The view of the graph tensor ``name`` computed row by row from an operand's rows."""
        np = self.np
        w = self.widths[name]
        shape = tuple(lead) + (w,)
        if rowmap is None:
            return View(name, shape)
        self.budget.charge(2 * int(np.prod(shape, dtype=object)))
        tok = np.broadcast_to(np.asarray(rowmap).reshape(tuple(lead) + (1,)), shape)
        return View(name, shape, tok, np.broadcast_to(np.arange(w), shape))

    def rowwise(self, op, v, params, width, hint, where) -> View:
        name, rowmap, lead = self.operand(v, where)
        return self.result(self.emit(op, [name], params, width, hint), rowmap, lead)

    def in_order(self, v, where) -> str:
        """The graph tensor whose rows are the view's rows in order (``select_tokens`` when
        they are not)."""
        name, rowmap, lead = self.operand(v, where)
        if rowmap is None:
            return name
        return self.emit("select_tokens", [name], {"indices": tuple(int(r) for r in rowmap)}, self.widths[name],
                         name + "_rows", rows=len(rowmap))

    # --- run --------------------------------------------------------------------------------------
    def run(self) -> Graph:
        np = self.np
        g = self.proto.graph
        inp, dims = graph_input(g)
        if not dims or None in dims:
            raise OnnxError(f"input {inp.name!r}: every dimension must be fixed (export without dynamic axes)")
        width = dims[-1]
        tokens = int(np.prod(dims[:-1], dtype=object))
        if not (1 <= width <= MAX_WIDTH) or not (1 <= tokens <= MAX_TOKENS):
            raise OnnxError(f"input {inp.name!r}: {tokens} rows of width {width}, expected at most "
                            f"{MAX_TOKENS} rows of width 1..{MAX_WIDTH}")
        self.input_name = self.fresh(inp.name)
        self.widths[self.input_name], self.rows[self.input_name] = width, tokens
        vals: dict = {inp.name: View(self.input_name, dims)}
        for t in g.initializer:
            where = f"initializer {t.name!r}"
            vals[t.name] = _C(self.guarded(lambda: self.native(t, where), where))
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
                if not isinstance(src, View):
                    raise OnnxError(f"{where}: the {op} chain does not start from a computed tensor")
                if op == "layer_norm_chain":
                    op, params = "layer_norm", self.chain_params(params, src.shape[-1], where)
                elif op == "rms_norm_chain":
                    op, params = "rms_norm", self.chain_params(params, src.shape[-1], where, bias=False)
                vals[nd.output[0]] = self.guarded(
                    lambda: self.rowwise(op, src, params, src.shape[-1], nd.output[0], where), where)
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
            outs = out if isinstance(out, list) else [out]
            if len(outs) != len(nd.output):
                raise OnnxError(f"{where}: expected {len(outs)} outputs")
            for o, v in zip(nd.output, outs):
                vals[o] = v
        res = vals.get(self.out_name)
        where = f"output {self.out_name!r}"
        if not isinstance(res, View):
            raise OnnxError("the output is not computed from the input by the graph's operations")
        out = self.guarded(lambda: self.in_order(res, where), where)
        if out == self.input_name:
            raise OnnxError("the output is not computed from the input by the graph's operations")
        nodes, widths = _fold_out_projections(self.nodes, out, self.widths)
        graph = Graph(self.input_name, tokens, width, tuple(nodes), out, widths)
        return graph_from_json(graph_to_json(graph))  # the graph must read back as a valid file

    def op(self, nd, args, where):
        """The value of node ``nd`` from its inputs' values (:data:`_OPS` names the method)."""
        if nd.domain not in ("", "ai.onnx"):
            raise OnnxError(f"{where}: operation from domain {nd.domain!r} is not supported")
        if args and all(isinstance(a, _C) or a is None for a in args) and args[0] is not None:
            if nd.op_type not in _FOLD:
                raise OnnxError(f"{where}: operation {nd.op_type} of constants is not supported")
            res = self.fold(nd, args, where)
            return res if len(nd.output) > 1 else res[0]
        name = _OPS.get(nd.op_type)
        if name is None:
            raise OnnxError(f"{where}: operation {nd.op_type} is not supported in a layer graph")
        return getattr(self, name)(nd, args, where)

    # --- helpers ------------------------------------------------------------------------------------
    def const_row(self, c: _C, width, where) -> tuple:
        """A constant broadcast over the rows: one number, or one per column (leading dims 1)."""
        a = c.a
        if a.size == 1:
            return tuple(self.frac(c, where).reshape(-1))
        if a.shape[-1] == width and a.size == width:
            return tuple(self.frac(c, where).reshape(-1))
        raise OnnxError(f"{where}: a constant of shape {list(a.shape)} does not broadcast over rows of width {width} "
                        "(a constant that differs between rows is not supported)")

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

    def _input_rank(self):
        g = self.proto.graph
        inits = {t.name for t in g.initializer}
        return [i for i in g.input if i.name not in inits][0].type.tensor_type.shape.dim

    def view(self, v, where) -> View:
        if isinstance(v, _Scores):
            raise OnnxError(f"{where}: reads a product of two computed tensors, which is only supported as the "
                            "scores of an attention (scaled, masked, Softmax over the keys, times the values)")
        if not isinstance(v, View):
            raise OnnxError(f"{where}: expected a tensor computed from the input")
        return v

    # --- operations ----------------------------------------------------------------------------------
    def op_constant(self, nd, args, where):
        """Constant: a tensor given in the node (``value``; scalar ``value_float`` / ``value_floats``,
        ``value_int`` / ``value_ints``)."""
        np = self.np
        t = self.attr(nd, "value")
        if t is not None:
            return _C(self.native(t, where))
        for key, dt in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                        ("value_ints", np.int64)):
            f = self.attr(nd, key)
            if f is not None:
                arr = np.array(f, dtype=dt)
                self.charge(arr.size, where)
                return _C(arr)
        raise OnnxError(f"{where}: only tensor constants ('value') are supported")

    def op_shape(self, nd, args, where):
        """Shape (and Size) of a computed tensor: its declared dimensions, a constant."""
        np = self.np
        v = self.view(args[0], where)
        if nd.op_type == "Size":
            return _C(np.array(int(np.prod(v.shape, dtype=object)), dtype=np.int64))
        dims = list(v.shape)
        start, end = self.attr(nd, "start", 0), self.attr(nd, "end", None)
        return _C(np.array(dims[slice(start, end)], dtype=np.int64))

    def op_shape_view(self, nd, args, where):
        """Reshape, Transpose, Squeeze, Unsqueeze, Flatten, Gather, Slice, Concat of computed
        tensors: the same operation on where each entry comes from (:mod:`symbounds.core.onnx_views`)."""
        np = self.np
        op = nd.op_type
        at = lambda key, default=None: self.attr(nd, key, default)
        if op == "Concat":
            vs = [self.view(a, where) for a in args]
            if len({(v.name, v.factor) for v in vs}) > 1:
                return self.concat_tensors(vs, at("axis"), where)
            arrays = [v.arrays(self.budget) for v in vs]
            tok = shape_op(op, [t for t, _ in arrays], [], at, self.opset, where)[0]
            col = shape_op(op, [c for _, c in arrays], [], at, self.opset, where)[0]
            return vs[0].with_arrays(tok, col, self.budget)
        v = self.view(args[0], where)
        consts = [self.ints(a, where) for a in args[1:]]
        if op == "Gather" and args[1] is not None:
            consts = [self.np.asarray(self.ints(args[1], where), dtype=np.int64).reshape(args[1].a.shape)]
        if op in ("Reshape", "Flatten", "Identity") and v.canonical:
            shp = shape_op(op, [np.empty(v.shape, dtype=np.int8)], consts, at, self.opset, where)[0].shape
            if shp and shp[-1] == v.shape[-1]:  # still the same rows in C order
                return View(v.name, shp, factor=v.factor)
        tok, col = v.arrays(self.budget)
        tok = shape_op(op, [tok], consts, at, self.opset, where)[0]
        col = shape_op(op, [col], consts, at, self.opset, where)[0]
        return v.with_arrays(tok, col, self.budget)

    def concat_tensors(self, vs, axis, where):
        """Concat of different computed tensors along the features: a ``concat`` node of their
        rows (the same rows of each, in the same order)."""
        rank = vs[0].rank
        if axis is None or int(axis) not in (-1, rank - 1) or any(v.rank != rank for v in vs):
            raise OnnxError(f"{where}: only the concatenation of different tensors along the features")
        ops = [self.operand(v, where) for v in vs]
        lead = ops[0][2]
        same = lambda a, b: (a is None and b is None) or (a is not None and b is not None and self.np.array_equal(a, b))
        if any(o[2] != lead or not same(o[1], ops[0][1]) for o in ops):
            raise OnnxError(f"{where}: concatenates tensors of different rows")
        name = self.emit("concat", [o[0] for o in ops], {}, sum(self.widths[o[0]] for o in ops), "concat")
        return self.result(name, ops[0][1], lead)

    def op_split(self, nd, args, where):
        """Split of a computed tensor (sizes given, or ``num_outputs`` equal parts)."""
        np = self.np
        v = self.view(args[0], where)
        ax = int(self.attr(nd, "axis", 0)) % max(v.rank, 1)
        sizes = self.attr(nd, "split")
        if sizes is None and len(args) > 1 and args[1] is not None:
            sizes = self.ints(args[1], where)
        sizes = split_sizes(v.shape[ax], sizes, len(nd.output), where)
        tok, col = v.arrays(self.budget)
        cuts = np.cumsum(sizes)[:-1]
        return [v.with_arrays(t, c, self.budget) for t, c in zip(np.split(tok, cuts, axis=ax), np.split(col, cuts, axis=ax))]

    def op_identity(self, nd, args, where):
        return args[0]

    def op_cast(self, nd, args, where):
        """Cast of a computed tensor to float or double: the same exact values (the graph computes
        exactly; a float32 rounding is not modelled, as in every other operation)."""
        if int(self.attr(nd, "to", 0)) not in (1, 11):
            raise OnnxError(f"{where}: only a cast to float or double is supported")
        return self.view(args[0], where)

    def op_gemm(self, nd, args, where):
        """Gemm ``alpha A B' + beta C`` of a tensor ``A`` and constants ``B``, ``C``: an affine node."""
        if self.attr(nd, "transA", 0):
            raise OnnxError(f"{where}: transA is not supported")
        a = self.view(args[0], where)
        if len(args) < 2 or not isinstance(args[1], _C) or args[1].a.ndim != 2:
            raise OnnxError(f"{where}: the weight must be a constant matrix")
        B = self.frac(args[1], where)
        W = B if self.attr(nd, "transB", 0) else B.T  # out x in
        alpha = Fraction(float(self.attr(nd, "alpha", 1.0)))
        beta = Fraction(float(self.attr(nd, "beta", 1.0)))
        if W.shape[1] != a.shape[-1]:
            raise OnnxError(f"{where}: the weight takes width {W.shape[1]}, the input has width {a.shape[-1]}")
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
        return self.rowwise("affine", a, {"W": Wt, "b": b}, n, nd.output[0], where)

    def op_matmul(self, nd, args, where):
        """MatMul of a tensor by a constant ``[in, out]`` matrix (an affine node without bias);
        of queries by keys (attention scores); of attention weights by values (the ``attention``
        node)."""
        a, b = args
        if isinstance(a, _Scores) and a.probs and isinstance(b, View):
            return self.attend(a, b, where)
        if isinstance(a, View) and isinstance(b, View):
            return _Scores(a, b, a.factor * b.factor)
        a = self.view(a, where)
        if not isinstance(b, _C) or b.a.ndim != 2:
            raise OnnxError(f"{where}: only a product by a constant matrix, or of queries by keys, is supported")
        B = self.frac(b, where)
        if B.shape[0] != a.shape[-1]:
            raise OnnxError(f"{where}: the weight takes width {B.shape[0]}, the input has width {a.shape[-1]}")
        if B.shape[1] > MAX_WIDTH:
            raise OnnxError(f"{where}: a tensor of {B.shape[1]} features, above the limit of {MAX_WIDTH}")
        W = tuple(tuple(row) for row in B.T)
        return self.rowwise("affine", a, {"W": W, "b": (Fraction(0),) * B.shape[1]}, B.shape[1], nd.output[0], where)

    def attend(self, p: _Scores, v: View, where) -> View:
        x, params, tok, col = attention_node(self, p.q, p.kT, v, p.scale, p.mask, where)
        name = self.emit("attention", [x], params, len(params["Wo"]), "attention")
        return View(name, tok.shape, tok, col)

    def op_softmax(self, nd, args, where):
        """Softmax of attention scores over the keys (the last axis)."""
        s = args[0]
        if not isinstance(s, _Scores) or s.probs:
            raise OnnxError(f"{where}: Softmax of a tensor other than attention scores is not supported")
        rank = s.q.rank
        if int(self.attr(nd, "axis", -1)) not in (-1, rank - 1):
            raise OnnxError(f"{where}: Softmax of attention scores over an axis other than the keys")
        return _Scores(s.q, s.kT, s.scale, s.mask, probs=True)

    def op_add(self, nd, args, where):
        """Add / Sub: of two tensors of one shape (a residual connection), or of a constant (folded
        into the bias of the affine node just before it when that node has no other use); a mask
        added to attention scores."""
        a, b = args
        sub = nd.op_type == "Sub"
        for s, c in ((a, b), (b, a)):
            if isinstance(s, _Scores) and not s.probs and isinstance(c, _C) and not sub:
                mask = c.a if s.mask is None else s.mask + c.a
                return _Scores(s.q, s.kT, s.scale, mask)
        if isinstance(a, View) and isinstance(b, View):
            ua, ra, la = self.operand(a, where)
            ub, rb, lb = self.operand(b, where)
            if la != lb or self.widths[ua] != self.widths[ub]:
                raise OnnxError(f"{where}: shapes differ ({list(a.shape)} and {list(b.shape)})")
            same = (ra is None and rb is None) or (ra is not None and rb is not None and self.np.array_equal(ra, rb))
            if not same or self.rows[ua] != self.rows[ub]:
                ua, ub, ra = self.in_order(a, where), self.in_order(b, where), None
            if sub:
                ub = self.emit("mul_constant", [ub], {"c": (Fraction(-1),)}, self.widths[ub], nd.output[0] + "_neg")
            return self.result(self.emit("add", [ua, ub], {}, self.widths[ua], nd.output[0]), ra, la)
        if isinstance(a, View) and isinstance(b, _C):
            c = self.const_row(b, a.shape[-1], where)
            c = tuple(-v for v in c) if sub else c
            return self.add_constant(a, nd.input[0], c, nd.output[0], where)
        if isinstance(a, _C) and isinstance(b, View):
            c = self.const_row(a, b.shape[-1], where)
            if sub:  # c - x
                neg = self.rowwise("mul_constant", b, {"c": (Fraction(-1),)}, b.shape[-1], nd.output[0] + "_neg", where)
                return self.add_constant(neg, None, c, nd.output[0], where)
            return self.add_constant(b, nd.input[1], c, nd.output[0], where)
        raise OnnxError(f"{where}: unsupported operands")

    def add_constant(self, v: View, onnx_name, c, hint, where) -> View:
        name, rowmap, lead = self.operand(v, where)
        last = self.nodes[-1] if self.nodes else None
        # only into the affine node of the ONNX value added to itself, when nothing else reads that
        # value (a reshape of it, read elsewhere, would see the bias too)
        if (last is not None and last.name == name and last.op == "affine" and onnx_name is not None
                and self.onnx_of.get(name) == onnx_name and self.uses.get(onnx_name, 0) == 1
                and onnx_name != self.out_name):
            cs = c * self.widths[name] if len(c) == 1 else c
            b = tuple(x + y for x, y in zip(last.params["b"], cs))
            self.nodes[-1] = Node(last.name, "affine", last.inputs, {"W": last.params["W"], "b": b})
            return self.result(name, rowmap, lead)
        return self.result(self.emit("add_constant", [name], {"c": tuple(c)}, self.widths[name], hint), rowmap, lead)

    def op_mul(self, nd, args, where):
        """Mul / Div of a tensor by a constant: one number (kept as the view's factor until a
        row-wise operation reads it, so a score factor split over queries and keys is found
        whole) or one per column; of attention scores by one number."""
        a, b = args
        div = nd.op_type == "Div"
        if isinstance(b, _C) and b.a.size == 1 and isinstance(a, (View, _Scores)):
            f = self.const_row(b, 1, where)[0]
            if div and f == 0:
                raise OnnxError(f"{where}: division by zero")
            f = 1 / f if div else f
            if isinstance(a, _Scores):
                if a.probs or a.mask is not None:
                    raise OnnxError(f"{where}: a product of attention weights or masked scores is not supported")
                return _Scores(a.q, a.kT, a.scale * f)
            return View(a.name, a.shape, a.tok, a.col, a.factor * f)
        if isinstance(a, _C) and b is not None and not div and isinstance(b, (View, _Scores)) and a.a.size == 1:
            return self.op_mul(nd, [b, a], where)
        if isinstance(a, View) and isinstance(b, _C):
            c = self.const_row(b, a.shape[-1], where)
            if div and any(v == 0 for v in c):
                raise OnnxError(f"{where}: division by zero")
            return self.rowwise("div_constant" if div else "mul_constant", a, {"c": c}, a.shape[-1], nd.output[0], where)
        if isinstance(a, _C) and isinstance(b, View) and not div:
            return self.rowwise("mul_constant", b, {"c": self.const_row(a, b.shape[-1], where)}, b.shape[-1],
                                nd.output[0], where)
        if isinstance(a, View) and isinstance(b, View):
            raise OnnxError(f"{where}: a product of two computed tensors is not supported")
        raise OnnxError(f"{where}: only division of a tensor by a constant is supported")

    def op_unary(self, nd, args, where):
        """Relu, Tanh, Sigmoid, Exp, Erf, Softplus: the graph's node of the same function
        (:data:`_UNARY`), elementwise, of the input's width."""
        a = self.view(args[0], where)
        return self.rowwise(_UNARY[nd.op_type], a, {}, a.shape[-1], nd.output[0], where)

    def op_leaky_relu(self, nd, args, where):
        """LeakyRelu (``alpha``, default 0.01, as the float32 the graph holds)."""
        a = self.view(args[0], where)
        alpha = Fraction(float(self.attr(nd, "alpha", 0.01)))
        return self.rowwise("leaky_relu", a, {"alpha": alpha}, a.shape[-1], nd.output[0], where)

    def op_prelu(self, nd, args, where):
        """PRelu with one constant slope (``nn.PReLU`` with one parameter): a leaky ReLU."""
        a = self.view(args[0], where)
        if len(args) != 2 or not isinstance(args[1], _C) or args[1].a.size == 0:
            raise OnnxError(f"{where}: the slope must be a constant")
        slopes = set(self.frac(args[1], where).reshape(-1))
        if len(slopes) != 1:
            raise OnnxError(f"{where}: one slope per channel is not supported (only one slope)")
        return self.rowwise("leaky_relu", a, {"alpha": slopes.pop()}, a.shape[-1], nd.output[0], where)

    def op_gelu(self, nd, args, where):
        """Gelu (opset 20): ``approximate`` "none" (erf) or "tanh"."""
        a = self.view(args[0], where)
        approx = self.attr(nd, "approximate", b"none")
        approx = approx.decode() if isinstance(approx, bytes) else approx
        if approx not in ("none", "tanh"):
            raise OnnxError(f"{where}: approximate={approx[:20]!r} is not supported")
        return self.rowwise("gelu" if approx == "none" else "gelu_tanh", a, {}, a.shape[-1], nd.output[0], where)

    def op_layer_norm(self, nd, args, where):
        """LayerNormalization over the last axis (``epsilon``, scale, optional bias)."""
        return self._norm(nd, args, where, "layer_norm")

    def op_rms_norm(self, nd, args, where):
        """RMSNormalization over the last axis (``epsilon``, scale)."""
        return self._norm(nd, args, where, "rms_norm")

    def _norm(self, nd, args, where, op):
        a = self.view(args[0], where)
        w = a.shape[-1]
        axis = self.attr(nd, "axis", -1)
        if axis not in (-1, a.rank - 1):
            raise OnnxError(f"{where}: only normalisation over the last axis is supported (axis {axis})")
        eps = Fraction(float(self.attr(nd, "epsilon", 1e-5)))
        if eps <= 0:
            raise OnnxError(f"{where}: epsilon must be positive")
        params = {"eps": eps}
        for k, key in ((1, "weight"), (2, "bias")):
            if len(args) > k and args[k] is not None:
                if not isinstance(args[k], _C):
                    raise OnnxError(f"{where}: the {key} must be a constant")
                c = self.const_row(args[k], w, where)
                params[key] = c * w if len(c) == 1 else c
            elif key == "weight":
                params[key] = (Fraction(1),) * w
        if op == "layer_norm":
            params.setdefault("bias", (Fraction(0),) * w)
        elif "bias" in params:
            raise OnnxError(f"{where}: a bias is not supported")
        return self.rowwise(op, a, params, w, nd.output[0], where)

    def op_reduce_mean(self, nd, args, where):
        """ReduceMean over the features (an affine node of ``1/width``) or over token axes
        (``mean_tokens``: the mean of each group of rows, mean pooling)."""
        np = self.np
        v = self.view(args[0], where)
        axes = self.attr(nd, "axes")
        if axes is None and len(args) > 1 and args[1] is not None:
            axes = self.ints(args[1], where)
        r = v.rank
        axes = list(range(r)) if not axes else sorted({int(x) % r for x in axes if -r <= int(x) < r})
        keep = bool(self.attr(nd, "keepdims", 1))
        if axes == [r - 1]:
            w = v.shape[-1]
            res = self.rowwise("affine", v, {"W": ((Fraction(1, w),) * w,), "b": (Fraction(0),)}, 1, nd.output[0], where)
            return res if keep else View(res.name, res.shape[:-1], None if res.tok is None else res.tok[..., 0],
                                         None if res.col is None else res.col[..., 0])
        if r - 1 in axes:
            raise OnnxError(f"{where}: a mean over the features and the tokens together is not supported")
        kept = [i for i in range(r - 1) if i not in axes]
        tok, col = v.arrays(self.budget)
        perm = kept + axes + [r - 1]
        K = int(np.prod([v.shape[i] for i in kept], dtype=object))
        G = int(np.prod([v.shape[i] for i in axes], dtype=object))
        t = np.transpose(tok, perm).reshape(K, G, -1)
        c = np.transpose(col, perm).reshape(K * G, -1)
        if not np.all(t == t[:, :, :1]) or not np.all(c == c[:1]):
            raise OnnxError(f"{where}: a mean over rows that mix tokens or columns")
        groups = t[:, :, 0]
        name = self.columns(v.name, tuple(int(x) for x in c[0]))
        if v.factor != 1:
            name = self.emit("mul_constant", [name], {"c": (v.factor,)}, self.widths[name], name + "_scaled")
        T = self.rows[name]
        if K * G == T and np.array_equal(groups, np.arange(T).reshape(K, G)):
            layout = "batch_major"
        elif K * G == T and np.array_equal(groups, np.arange(T).reshape(G, K).T):
            layout = "sequence_major"
        else:
            name = self.emit("select_tokens", [name], {"indices": tuple(int(x) for x in groups.reshape(-1))},
                             self.widths[name], name + "_rows", rows=K * G)
            layout = "batch_major"
        out = self.emit("mean_tokens", [name], {"sequence_length": G, "layout": layout}, self.widths[name],
                        nd.output[0], rows=K)
        shape = [1 if i in axes else v.shape[i] for i in range(r - 1)] if keep else [v.shape[i] for i in kept]
        return View(out, tuple(shape) + (self.widths[out],))

    def op_dropout(self, nd, args, where):
        """Dropout in inference (no training mode): the identity."""
        if len(args) > 2 and args[2] is not None and (not isinstance(args[2], _C) or bool(args[2].a.reshape(-1)[0])):
            raise OnnxError(f"{where}: dropout in training mode is not supported")
        return [args[0]] + ([None] if len(nd.output) > 1 else [])

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
            return Fraction(float(a.flat[0])) if a.size == 1 and self.np.isfinite(a.flat[0]) else None
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
        """``(1 + t) * x * 1/2`` after ``t`` (either operand order; ``* 1/2`` before ``* x`` as
        the dynamo exporter writes it): the last node's index and the nodes of the tail, or None."""
        add = self._only(t_name, "Add")
        if add is None or self._scalar(self._other(add[1], t_name)) != 1:
            return None
        m1 = self._only(add[1].output[0], "Mul")
        if m1 is None:
            return None
        first = self._other(m1[1], add[1].output[0])
        m2 = self._only(m1[1].output[0], "Mul")
        if m2 is None:
            return None
        second = self._other(m2[1], m1[1].output[0])
        if not ((first == x and self._scalar(second) == Fraction(1, 2))
                or (second == x and self._scalar(first) == Fraction(1, 2))):
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
                params["weight"] = tuple(self.frac(self.vals[w], "the LayerNorm weight").reshape(-1))
                inner.add(mw[0])
                last = mw[0]
                ab = self._only(mw[1].output[0], "Add")
                if ab is not None:
                    b = self._other(ab[1], mw[1].output[0])
                    if b in self.vals and isinstance(self.vals[b], _C):
                        params["bias"] = tuple(self.frac(self.vals[b], "the LayerNorm bias").reshape(-1))
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
            params["weight"] = tuple(self.frac(self.vals[w], "the RMSNorm weight").reshape(-1))
            inner.add(mw[0])
            last = mw[0]
        return last, inner - {last}, ("rms_norm_chain", x, params)



#: the elementwise ONNX operations read as the layer graph's node of the same function
_UNARY = {"Relu": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid", "Exp": "exp", "Erf": "erf", "Softplus": "softplus"}

_OPS = {
    "Constant": "op_constant", "Identity": "op_identity", "Gemm": "op_gemm", "MatMul": "op_matmul",
    "Add": "op_add", "Sub": "op_add", "Mul": "op_mul", "Div": "op_mul",
    "LeakyRelu": "op_leaky_relu", "PRelu": "op_prelu", "Gelu": "op_gelu", "LayerNormalization": "op_layer_norm",
    "RMSNormalization": "op_rms_norm", "Softmax": "op_softmax", "ReduceMean": "op_reduce_mean",
    "Shape": "op_shape", "Size": "op_shape", "Split": "op_split", "Cast": "op_cast", "Dropout": "op_dropout",
    **{name: "op_shape_view" for name in _SHAPE_OPS if name != "Identity"},
    **{name: "op_unary" for name in _UNARY},
}


def _live(nodes, out) -> list:
    """The nodes the output depends on (the rest: projections folded into an attention node,
    column slices no longer read)."""
    need, keep = {out}, []
    for nd in reversed(nodes):
        if nd.name in need:
            keep.append(nd)
            need.update(nd.inputs)
    return keep[::-1]


def _fold_out_projections(nodes, out, widths):
    """Each ``attention`` node read only by one affine node (its ``out_proj``): the two as one
    ``attention`` node with ``Wo' = W Wo``, ``bo' = W bo + b``, named as the affine node."""
    nodes = _live(nodes, out)
    readers: dict = {}
    for nd in nodes:
        for i in nd.inputs:
            readers.setdefault(i, []).append(nd)
    merged, drop = {}, set()
    for nd in nodes:
        rs = readers.get(nd.name, [])
        if nd.op != "attention" or nd.name == out or len(rs) != 1 or rs[0].op != "affine" or rs[0].inputs != (nd.name,):
            continue
        a, p = rs[0], dict(nd.params)
        Wo, bo = p["Wo"], p["bo"]
        W, b = a.params["W"], a.params["b"]
        p["Wo"] = tuple(tuple(sum((r[k] * Wo[k][j] for k in range(len(Wo))), Fraction(0)) for j in range(len(Wo[0])))
                        for r in W)
        p["bo"] = tuple(sum((r[k] * bo[k] for k in range(len(bo))), Fraction(0)) + bi for r, bi in zip(W, b))
        merged[nd.name] = Node(a.name, "attention", nd.inputs, p)
        drop.add(a.name)
    nodes = [merged.get(nd.name, nd) for nd in nodes if nd.name not in drop]
    nodes = _live(nodes, out)
    return nodes, widths


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
