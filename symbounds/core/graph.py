"""A layer graph: named nodes over tensors of shape ``[tokens, width]``, evaluated in any context.

A :class:`Graph` is the network of a ``symbounds-graph/1`` file (:mod:`symbounds.core.graph_file`):
one input ``X`` of ``tokens`` rows (independent inputs of a batch, or the tokens of a sequence; an
MLP has one) and ``width`` columns, and a list of nodes in evaluation order, each computing a new
tensor from earlier ones.  The row-wise operations act on each row alone:

* ``affine``: ``y = W x + b`` (``W`` of ``out x in``, any widths);
* ``add``: ``y = u + v`` of two tensors of one shape (a residual connection);
* ``add_constant``, ``mul_constant``, ``div_constant``: ``x + c``, ``x * c``, ``x / c`` entry by
  entry, ``c`` one number or one per column;
* ``relu``, ``leaky_relu`` (``alpha``), ``gelu`` (erf form; ``divisor``), ``gelu_tanh`` (``k``,
  ``a``), ``tanh``, ``sigmoid``, ``softplus``, ``exp``, ``erf``: entry by entry
  (:mod:`symbounds.core.activations`);
* ``layer_norm``: ``(x - mean x) / sqrt(var x + eps) * weight + bias`` over the columns of each
  row (``var`` the mean of squared deviations, as PyTorch and ONNX define it);
* ``rms_norm``: ``x / sqrt(mean(x^2) + eps) * weight``.

Both norms are bounded whatever their input: ``|y_i - b_i| <= sqrt(n - 1) |w_i|`` for LayerNorm and
``|y_i| <= sqrt(n) |w_i|`` for RMSNorm (``n`` the width; :func:`norm_cap_square`), and the rigorous
contexts meet every output with that bound (:func:`meet_caps`).

The token and column operations (:mod:`symbounds.core.graph_tokens`) read several rows or part of
a row: ``attention`` (multi-head softmax or hardmax self-attention, with biases, a mask and
independent sequences), ``slice``, ``concat``, ``select_tokens``, ``mean_tokens``.  A graph knows
the rows of every tensor (``tokens_of``): ``select_tokens`` and ``mean_tokens`` change them.

Weights are exact rationals (``Fraction``), converted once per context and precision.
:meth:`Graph.forward` takes the input as :func:`symbounds.core.search.shape_input` lays it out
(``width x tokens``, the box listing the input row by row) and returns the output the same way
(``out_width x out_tokens``), so the box search and :func:`symbounds.core.bound.bound` evaluate a
graph as they evaluate a token-set model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import flint

from . import activations as act
from . import graph_tokens as gt
from .contexts import BallContext, Context, ExactUnsupported
from .taylor import TM, TaylorContext

__all__ = ["Node", "Graph", "UNARY", "CONSTANT_OPS", "TOKEN_OPS", "OPS", "is_graph", "tokens_after", "width_after",
           "node_tensor", "node_row", "square", "norm_cap_square", "norm_caps", "meet_caps"]

#: entry-by-entry functions without parameters
UNARY = {"relu": act.relu, "tanh": act.tanh, "sigmoid": act.sigmoid, "softplus": act.softplus, "exp": act.exp,
         "erf": act.erf}
#: elementwise operations with a constant (one number, or one per column)
CONSTANT_OPS = ("add_constant", "mul_constant", "div_constant")
#: operations that read several rows, or part of a row (:mod:`symbounds.core.graph_tokens`)
TOKEN_OPS = ("attention", "slice", "concat", "select_tokens", "mean_tokens")
#: every operation of a graph
OPS = ("affine", "add", *CONSTANT_OPS, *UNARY, "leaky_relu", "gelu", "gelu_tanh", "layer_norm", "rms_norm",
       *TOKEN_OPS)


@dataclass(frozen=True)
class Node:
    """One operation: ``name = op(inputs, params)`` (params: exact rationals, tuples of them).

    ``attention`` params: ``heads`` (int), ``Wq``, ``Wk``, ``Wv``, ``Wo`` (tuples of rows),
    ``bq``, ``bk``, ``bv``, ``bo`` (tuples; absent: zeros), ``scale`` (a positive ``Fraction`` or
    ``{"inv_sqrt": n}`` for ``1/sqrt(n)``), ``mask`` (None, ``"causal"`` or an ``L x L`` tuple of
    0/1 rows), ``hardmax`` (bool), ``sequence_length`` (int or None: the input's rows), ``layout``
    (``"batch_major"``, the default, or ``"sequence_major"``).  ``slice``: ``start``, ``stop``;
    ``select_tokens``: ``indices``; ``mean_tokens``: ``sequence_length``, ``layout``."""

    name: str
    op: str
    inputs: tuple
    params: dict = field(default_factory=dict, hash=False, compare=False)


class Graph:
    """A layer graph (see the module docstring); ``widths`` maps every tensor to its width (a node
    missing from the given ``widths`` gets :func:`width_after`'s), and ``tokens_of`` (computed from
    the nodes) every tensor to its number of rows."""

    #: how the box search lays out the input (neither a vector model nor a token set)
    input = "graph"
    readout = None
    embedding = None

    def __init__(self, input_name: str, tokens: int, width: int, nodes: tuple, output: str,
                 widths: dict, source: str = ""):
        self.input_name, self.tokens, self.in_width = input_name, tokens, width
        self.nodes, self.output, self.widths = tuple(nodes), output, dict(widths)
        self.source = source
        self.tokens_of = {input_name: tokens}
        self.widths.setdefault(input_name, width)
        for nd in self.nodes:
            self.tokens_of[nd.name] = tokens_after(nd, self.tokens_of)
            if nd.name not in self.widths:
                self.widths[nd.name] = width_after(nd, self.widths)
        self._numeric: dict = {}

    # --- shape ---------------------------------------------------------------------------------
    @property
    def width(self) -> int:
        """The width of one input row (the ``D`` of the search's ``D x n`` layout)."""
        return self.in_width

    @property
    def out_width(self) -> int:
        return self.widths[self.output]

    @property
    def input_count(self) -> int:
        return self.tokens * self.in_width

    @property
    def out_tokens(self) -> int:
        """The output's rows (the input's, unless ``select_tokens`` or ``mean_tokens`` change them)."""
        return self.tokens_of[self.output]

    @property
    def output_count(self) -> int:
        return self.out_tokens * self.out_width

    def __repr__(self):
        return (f"Graph({len(self.nodes)} nodes, input [{self.tokens}, {self.in_width}], "
                f"output [{self.out_tokens}, {self.out_width}])")

    # --- numbers of a context ------------------------------------------------------------------------
    def numeric(self, ctx: Context) -> dict:
        """Every node's parameters as numbers of ``ctx`` (cached per context name and precision)."""
        key = (ctx.name, ctx.prec)
        num = self._numeric.get(key)
        if num is None:
            num = {}
            with ctx.scope():
                for nd in self.nodes:
                    num[nd.name] = _convert_params(ctx, nd)
            self._numeric[key] = num
        return num

    # --- evaluation --------------------------------------------------------------------------------
    def forward(self, ctx: Context, x):
        """The output (``out_width x out_tokens``) at the input ``x`` (``width x tokens``; entries
        exact numbers or numbers of ``ctx``)."""
        rows = [list(r) for r in x]
        if len(rows) != self.in_width or any(len(r) != self.tokens for r in rows):
            raise ValueError(f"the input must be {self.in_width} x {self.tokens} (width x tokens)")
        num = self.numeric(ctx)
        with ctx.scope():
            conv = lambda v: ctx.native(v) if _is_native(ctx, v) else ctx.convert(v)
            X = [[conv(rows[c][t]) for c in range(self.in_width)] for t in range(self.tokens)]
            vals = {self.input_name: X}
            for nd in self.nodes:
                vals[nd.name] = _tensor(ctx, nd, num[nd.name], [vals[i] for i in nd.inputs])
            Y = vals[self.output]
        return [[Y[t][c] for t in range(len(Y))] for c in range(self.out_width)]

    def evaluate(self, ctx: Context, x_flat) -> list:
        """The outputs, flat (row by row), at the flat input (row by row)."""
        x = [[x_flat[t * self.in_width + c] for t in range(self.tokens)] for c in range(self.in_width)]
        out = self.forward(ctx, x)
        return [out[c][t] for t in range(self.out_tokens) for c in range(self.out_width)]


def tokens_after(nd: Node, tokens_of: dict) -> int:
    """The rows of node ``nd``'s output, from the rows of its inputs (``tokens_of``)."""
    t = tokens_of[nd.inputs[0]]
    if nd.op == "select_tokens":
        return len(nd.params["indices"])
    if nd.op == "mean_tokens":
        return t // (nd.params.get("sequence_length") or t)
    return t


def width_after(nd: Node, widths: dict) -> int:
    """The width of node ``nd``'s output, from its inputs' (``widths``)."""
    p = nd.params
    if nd.op == "affine":
        return len(p["W"])
    if nd.op == "attention":
        return len(p["Wo"])
    if nd.op == "slice":
        return p["stop"] - p["start"]
    if nd.op == "concat":
        return sum(widths[i] for i in nd.inputs)
    return widths[nd.inputs[0]]


def node_tensor(ctx: Context, nd: Node, p: dict, args: list) -> list:
    """Node ``nd``'s output rows from its inputs' rows (``p``: its parameters in ``ctx``,
    :meth:`Graph.numeric`): one node of :meth:`Graph.forward`, for evaluators that keep every tensor."""
    return _tensor(ctx, nd, p, args)


def node_row(ctx: Context, nd: Node, p: dict, args: list) -> list:
    """One output row of the row-wise node ``nd`` from one row of each input."""
    return _row(ctx, nd, p, args)


def _tensor(ctx: Context, nd: Node, p: dict, args: list) -> list:
    """Node ``nd``'s output rows from its inputs' rows."""
    op = nd.op
    if op == "attention":
        return gt.attention(ctx, p, args[0], _affine)
    if op == "slice":
        return gt.slice_columns(p["start"], p["stop"], args[0])
    if op == "concat":
        return gt.concat_columns(args)
    if op == "select_tokens":
        return gt.select_tokens(p["indices"], args[0])
    if op == "mean_tokens":
        L = p["L"] or len(args[0])
        inv = p["inv_L"] if p["inv_L"] is not None else ctx.convert(Fraction(1, L))
        return gt.mean_tokens(ctx, inv, L, p["layout"], args[0])
    return [_row(ctx, nd, p, [a[t] for a in args]) for t in range(len(args[0]))]


def _is_native(ctx, v) -> bool:
    return not isinstance(v, (int, Fraction, flint.fmpq, flint.fmpz, str)) and not hasattr(v, "is_Rational")


def _affine_params(ctx: Context, W, b) -> dict:
    c = ctx.convert
    W = [[c(v) for v in row] for row in W]
    b = [c(v) for v in b] if b is not None else [ctx.zero] * len(W)
    out = {"W": W, "b": b}
    if isinstance(ctx, BallContext):
        out["Wm"] = flint.arb_mat(W)
        out["bm"] = flint.arb_mat([[v] for v in b])
    return out


def _scale(ctx: Context, s):
    """The score factor in ``ctx``: a rational, or ``1/sqrt(n)`` (in the context of the constants;
    None in the exact context when ``n`` is not a square: only a hardmax, which needs no scale,
    can then be evaluated exactly)."""
    if not isinstance(s, dict):
        return ctx.convert(s)
    cc = ctx.constants_context()
    try:
        v = cc.one / cc.sqrt(cc.convert(int(s["inv_sqrt"])))
    except ExactUnsupported:
        return None
    return ctx.convert(v) if cc.exact else ctx.native(v)


def _convert_params(ctx: Context, nd: Node) -> dict:
    c = ctx.convert
    p = nd.params
    if nd.op == "affine":
        return _affine_params(ctx, p["W"], p["b"])
    if nd.op == "attention":
        L = p.get("sequence_length")
        hard = bool(p.get("hardmax", False))
        return {"q": _affine_params(ctx, p["Wq"], p.get("bq")), "k": _affine_params(ctx, p["Wk"], p.get("bk")),
                "v": _affine_params(ctx, p["Wv"], p.get("bv")), "o": _affine_params(ctx, p["Wo"], p.get("bo")),
                "heads": int(p["heads"]), "hardmax": hard, "scale": None if hard else _scale(ctx, p["scale"]),
                "L": L, "layout": p.get("layout") or "batch_major", "mask": p.get("mask")}
    if nd.op == "mean_tokens":
        L = p.get("sequence_length")
        return {"L": L, "inv_L": None if L is None else c(Fraction(1, L)), "layout": p.get("layout") or "batch_major"}
    if nd.op in ("slice", "select_tokens", "concat"):
        return p
    if nd.op in CONSTANT_OPS:
        return {"c": [c(v) for v in p["c"]]}
    if nd.op in ("layer_norm", "rms_norm"):
        n = len(p["weight"])
        out = {"eps": c(p["eps"]), "eps_q": flint.fmpq(p["eps"].numerator, p["eps"].denominator),
               "weight": [c(v) for v in p["weight"]], "inv_n": c(Fraction(1, n))}
        if nd.op == "layer_norm":
            out["bias"] = [c(v) for v in p["bias"]]
        return out
    if nd.op == "leaky_relu":
        return {"alpha": _fmpq(p["alpha"])}
    if nd.op == "gelu":
        return {"divisor": None if p.get("divisor") is None else _fmpq(p["divisor"])}
    if nd.op == "gelu_tanh":
        return {"k": None if p.get("k") is None else _fmpq(p["k"]), "a": None if p.get("a") is None else _fmpq(p["a"])}
    return {}


def _fmpq(q: Fraction) -> flint.fmpq:
    return flint.fmpq(q.numerator, q.denominator)


def _row(ctx: Context, nd: Node, p: dict, args: list) -> list:
    """One row of node ``nd``'s output from the rows of its inputs."""
    op = nd.op
    x = args[0]
    if op == "affine":
        return _affine(ctx, p, x)
    if op == "add":
        return [a + b for a, b in zip(x, args[1])]
    if op in CONSTANT_OPS:
        cs = p["c"] if len(p["c"]) == len(x) else p["c"] * len(x)
        if op == "add_constant":
            return [v + k for v, k in zip(x, cs)]
        if op == "mul_constant":
            return [v * k for v, k in zip(x, cs)]
        return [v / k for v, k in zip(x, cs)]
    f = UNARY.get(op)
    if f is not None:
        return [f(ctx, v) for v in x]
    if op == "leaky_relu":
        return [act.leaky_relu(ctx, v, p["alpha"]) for v in x]
    if op == "gelu":
        return [act.gelu(ctx, v, p["divisor"]) for v in x]
    if op == "gelu_tanh":
        return [act.gelu_tanh(ctx, v, p["k"], p["a"]) for v in x]
    if op == "layer_norm":
        return _layer_norm(ctx, p, x)
    if op == "rms_norm":
        return _rms_norm(ctx, p, x)
    raise ValueError(f"node {nd.name!r}: unknown operation {op!r}")


def _affine(ctx: Context, p: dict, x: list) -> list:
    """``W x + b``: Arb's matrix product for balls, one affine combination per output otherwise
    (Taylor models build each in one step)."""
    if isinstance(ctx, BallContext) and all(isinstance(v, flint.arb) for v in x):
        y = p["Wm"] * flint.arb_mat([[v] for v in x]) + p["bm"]
        return [y[i, 0] for i in range(y.nrows())]
    return [ctx.affine_combination(bi, Wi, x) for bi, Wi in zip(p["b"], p["W"])]


def square(ctx: Context, v):
    """``v^2``, never below 0 for a ball (``v * v`` of a ball around 0 reaches below 0)."""
    if isinstance(ctx, BallContext):
        return act.square_ball(v)
    return v * v


def _sum(ctx: Context, vs):
    acc = vs[0]
    for v in vs[1:]:
        acc = acc + v
    return acc


def norm_cap_square(op: str, n: int) -> int:
    """``k`` with ``|(x_i - mu) s| <= sqrt(k)`` (``layer_norm``: ``n - 1``) or ``|x_i s| <= sqrt(k)``
    (``rms_norm``: ``n``) for every real row ``x`` of width ``n`` and every ``eps > 0``.

    LayerNorm: the deviations ``d_j = x_j - mu`` sum to 0, so ``d_i = -sum_(j != i) d_j`` and by
    Cauchy-Schwarz ``d_i^2 <= (n - 1) sum_(j != i) d_j^2 = (n - 1) (n m - d_i^2)``, ``m`` the mean
    of ``d_j^2``; hence ``d_i^2 <= (n - 1) m`` and ``|d_i| s = |d_i| / sqrt(m + eps) <=
    sqrt((n - 1) m / (m + eps)) < sqrt(n - 1)`` (equality in the limit ``eps -> 0`` for one entry
    apart from ``n - 1`` equal ones; ``n = 1``: ``d = 0``, ``y = b``).  RMSNorm: ``x_i^2 <= sum_j
    x_j^2 = n q``, ``q`` the mean of ``x_j^2``, so ``|x_i| s <= sqrt(n q / (q + eps)) < sqrt(n)``."""
    return n - 1 if op == "layer_norm" else n


def norm_caps(weight, bias, k: int) -> list:
    """The a-priori enclosures of a norm's outputs, one Arb ball per column: ``b_i + [-1, 1]
    sqrt(k) |w_i|`` (``k`` from :func:`norm_cap_square`; ``weight``, ``bias`` Arb balls, ``bias``
    None for RMSNorm), in ball arithmetic at the current precision (so rounded outward)."""
    root = flint.arb(k).sqrt()
    zero = flint.arb(0)
    out = []
    for i, w in enumerate(weight):
        b = zero if bias is None else bias[i]
        half = root * abs(w)
        # the ball spanning the exact ends (one rounding of its radius, where b + [-1, 1] half
        # would round twice)
        out.append(flint.arb((b - half).lower()).union(flint.arb((b + half).upper())))
    return out


def _as_ball(v) -> flint.arb:
    return v.range() if isinstance(v, TM) else v


def meet_caps(ctx: Context, ys: list, caps: list) -> list:
    """Each enclosure ``ys[i]`` met with its a-priori ball ``caps[i]`` (:func:`norm_caps`), in the
    rigorous contexts (the point contexts and the exact one compute the value itself, which lies
    in the cap).  A ball: the intersection.  A Taylor model: kept where its range lies inside the
    cap, else the constant model of (range ∩ cap) (:meth:`TaylorContext.hull`; a model met with an
    interval cannot keep its gradient in general).  Where the enclosure is not finite or misses
    the cap (which a sound enclosure cannot), the cap alone (it holds the value for every input)."""
    if isinstance(ctx, BallContext):
        out = []
        for y, cap in zip(ys, caps):
            if not isinstance(y, flint.arb) or not y.is_finite() or not y.overlaps(cap):
                out.append(cap)
            elif cap.contains(y):
                out.append(y)
            else:
                out.append(y.intersection(cap))
        return out
    if isinstance(ctx, TaylorContext):
        out = []
        for y, cap in zip(ys, caps):
            rng = ctx.convert(y).range()
            if not rng.is_finite() or not rng.overlaps(cap):
                out.append(ctx.hull(cap))
            elif cap.contains(rng):
                out.append(y)
            else:
                out.append(ctx.hull(rng.intersection(cap)))
        return out
    return ys


def _layer_norm(ctx: Context, p: dict, x: list) -> list:
    """``(x_i - mu) / sqrt(sigma^2 + eps) w_i + b_i``, ``mu`` the mean of the row and ``sigma^2``
    the mean of ``(x_i - mu)^2``; the deviations ``x_i - mu`` are computed first, so Taylor models
    keep their correlation (the linear parts of a nearly constant row cancel in them).  Each output
    is then met with its a-priori bound ``b_i + [-1, 1] sqrt(n - 1) |w_i|`` (:func:`norm_cap_square`,
    :func:`meet_caps`): where the row's variance can come close to 0 on a box, ``1/sqrt(sigma^2 +
    eps)`` is enclosed over a range with a large upper end, and the product far wider than that."""
    mu = _sum(ctx, x) * p["inv_n"]
    d = [v - mu for v in x]
    var = _sum(ctx, [square(ctx, v) for v in d]) * p["inv_n"]
    s = act.rsqrt_from(ctx, var + p["eps"], p["eps_q"])
    y = [(di * s) * w + b for di, w, b in zip(d, p["weight"], p["bias"])]
    if not isinstance(ctx, (BallContext, TaylorContext)):
        return y
    k = norm_cap_square("layer_norm", len(x))
    return meet_caps(ctx, y, norm_caps([_as_ball(w) for w in p["weight"]], [_as_ball(b) for b in p["bias"]], k))


def _rms_norm(ctx: Context, p: dict, x: list) -> list:
    """``x_i / sqrt(mean(x^2) + eps) w_i``, met with its a-priori bound ``[-1, 1] sqrt(n) |w_i|``
    (:func:`norm_cap_square`, :func:`meet_caps`)."""
    ms = _sum(ctx, [square(ctx, v) for v in x]) * p["inv_n"]
    s = act.rsqrt_from(ctx, ms + p["eps"], p["eps_q"])
    y = [(v * s) * w for v, w in zip(x, p["weight"])]
    if not isinstance(ctx, (BallContext, TaylorContext)):
        return y
    k = norm_cap_square("rms_norm", len(x))
    return meet_caps(ctx, y, norm_caps([_as_ball(w) for w in p["weight"]], None, k))


def is_graph(model) -> bool:
    return isinstance(model, Graph)

