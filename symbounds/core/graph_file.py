"""Layer-graph files (``symbounds-graph/1``): the reader, the writer, and the dispatch on the format.

Format: JSON; every number a string, exact (``"3"``, ``"-7/8"``, ``"0.125"``, ``"1e-5"`` read as
the decimal it spells), never a JSON float; docs/model-graph.md describes it in full::

    {"format": "symbounds-graph/1",
     "input": {"name": "x", "tokens": 1, "width": 2},
     "nodes": [
        {"name": "h", "op": "affine", "inputs": ["x"], "W": [["1", "-1/2"], ...], "b": ["0", ...]},
        {"name": "a", "op": "relu", "inputs": ["h"]},
        {"name": "n", "op": "layer_norm", "inputs": ["a"], "eps": "1e-5", "weight": [...], "bias": [...]},
        {"name": "r", "op": "add", "inputs": ["n", "h"]},
        {"name": "y", "op": "affine", "inputs": ["r"], "W": [[...]], "b": [...]}],
     "output": "y"}

Nodes are listed in evaluation order: each reads the input or earlier nodes.  Reading never
evaluates anything: numbers go through :func:`symbounds.core.exact.parse_number`; every declared
size (tokens, widths, the number of nodes) is checked against its limit before anything of that
size is built, and a matrix's shape is checked before its entries are read.  Every malformed part
gives a one-line :class:`GraphFileError`.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

from .files import atomic_write, read_json_file
from .graph import CONSTANT_OPS, UNARY, Graph, Node
from .modelfile import FORMAT as TRANSFORMER_FORMAT
from .modelfile import ModelFileError, model_from_json, parse_number

__all__ = ["FORMAT", "GraphFileError", "graph_from_json", "graph_to_json", "load_graph", "export_graph",
           "network_from_json", "reject_float", "MAX_NODES", "MAX_WIDTH", "MAX_TOKENS"]

FORMAT = "symbounds-graph/1"
#: limits checked before anything of that size is built
MAX_NODES = 4096
MAX_WIDTH = 1024
MAX_TOKENS = 1 << 16
MAX_INPUTS = 1 << 20
_NAME = re.compile(r"^[A-Za-z0-9_.:/\-]{1,200}$", re.ASCII)

#: the keys each operation takes besides name, op, inputs (required ones first, then optional)
_KEYS = {"affine": ({"W"}, {"b"}), "add": (set(), set()), "leaky_relu": (set(), {"alpha"}),
         "gelu": (set(), {"divisor"}), "gelu_tanh": (set(), {"k", "a"}),
         "layer_norm": ({"eps"}, {"weight", "bias"}), "rms_norm": ({"eps"}, {"weight"})}
_KEYS.update({op: ({"constant"}, set()) for op in CONSTANT_OPS})
_KEYS.update({op: (set(), set()) for op in UNARY})


class GraphFileError(ModelFileError):
    """A graph file that cannot be read (one line naming the problem)."""


def _number(v, what) -> Fraction:
    try:
        return parse_number(v, what)
    except ModelFileError as e:
        raise GraphFileError(str(e)) from None


def _vector(obj, what, n) -> tuple:
    if not isinstance(obj, list) or len(obj) != n:
        raise GraphFileError(f"{what}: expected a list of {n} numbers")
    return tuple(_number(v, f"{what}[{i}]") for i, v in enumerate(obj))


def _matrix(obj, what, cols) -> tuple:
    """A list of rows of ``cols`` numbers (at most :data:`MAX_WIDTH` rows), shape checked first."""
    if not isinstance(obj, list) or not obj:
        raise GraphFileError(f"{what}: expected a non-empty list of rows")
    if len(obj) > MAX_WIDTH:
        raise GraphFileError(f"{what}: {len(obj)} rows, more than the {MAX_WIDTH} a graph holds")
    for i, r in enumerate(obj):
        if not isinstance(r, list) or len(r) != cols:
            raise GraphFileError(f"{what}[{i}]: expected a row of {cols} numbers (the input's width)")
    return tuple(tuple(_number(v, f"{what}[{i}][{j}]") for j, v in enumerate(r)) for i, r in enumerate(obj))


def _count(obj, what, limit) -> int:
    if not isinstance(obj, int) or isinstance(obj, bool) or not (1 <= obj <= limit):
        raise GraphFileError(f"{what}: expected an integer in 1..{limit}")
    return obj


def _name(obj, what) -> str:
    if not isinstance(obj, str) or not _NAME.match(obj):
        raise GraphFileError(f"{what}: expected a name of 1 to 200 letters, digits or _ . : / -")
    return obj


def _positive(q: Fraction, what) -> Fraction:
    if q <= 0:
        raise GraphFileError(f"{what}: must be positive")
    return q


def graph_from_json(data) -> Graph:
    """The :class:`Graph` of a ``symbounds-graph/1`` document (exact weights)."""
    if not isinstance(data, dict):
        raise GraphFileError("graph file: the top level must be an object")
    if data.get("format") != FORMAT:
        raise GraphFileError(f"graph file: format must be {FORMAT!r}, found {str(data.get('format'))[:40]!r}")
    inp = data.get("input")
    if not isinstance(inp, dict):
        raise GraphFileError("graph file: 'input' must be an object {name, tokens, width}")
    in_name = _name(inp.get("name"), "input.name")
    tokens = _count(inp.get("tokens"), "input.tokens", MAX_TOKENS)
    width = _count(inp.get("width"), "input.width", MAX_WIDTH)
    if tokens * width > MAX_INPUTS:
        raise GraphFileError(f"input: {tokens} x {width} entries, more than the {MAX_INPUTS} a box can list")
    nodes_in = data.get("nodes")
    if not isinstance(nodes_in, list) or not nodes_in:
        raise GraphFileError("graph file: 'nodes' must be a non-empty list")
    if len(nodes_in) > MAX_NODES:
        raise GraphFileError(f"graph file: {len(nodes_in)} nodes, more than the {MAX_NODES} a graph holds")
    widths = {in_name: width}
    nodes = []
    for i, nd in enumerate(nodes_in):
        node = _node(nd, f"nodes[{i}]", widths)
        widths[node.name] = _out_width(node, widths)
        nodes.append(node)
    out = _name(data.get("output"), "output")
    if out not in widths or out == in_name:
        raise GraphFileError(f"output: {out!r} is not a node of the graph")
    if "precision_bits" in data:
        _count(data["precision_bits"], "precision_bits", 1 << 16)
    return Graph(in_name, tokens, width, tuple(nodes), out, widths)


def _node(nd, what, widths) -> Node:
    if not isinstance(nd, dict):
        raise GraphFileError(f"{what}: expected an object")
    name = _name(nd.get("name"), f"{what}.name")
    what = f"node {name!r}"
    if name in widths:
        raise GraphFileError(f"{what}: the name is already used")
    op = nd.get("op")
    if op not in _KEYS:
        raise GraphFileError(f"{what}: unknown operation {str(op)[:40]!r} (docs/model-graph.md lists them)")
    required, optional = _KEYS[op]
    extra = set(nd) - {"name", "op", "inputs"} - required - optional
    if extra:
        raise GraphFileError(f"{what} ({op}): unknown key {sorted(extra)[0][:40]!r}")
    for k in sorted(required):
        if k not in nd:
            raise GraphFileError(f"{what} ({op}): missing {k!r}")
    ins = nd.get("inputs")
    arity = 2 if op == "add" else 1
    if not isinstance(ins, list) or len(ins) != arity:
        raise GraphFileError(f"{what} ({op}): 'inputs' must list {arity} tensor name(s)")
    for j, src in enumerate(ins):
        if not isinstance(src, str) or src not in widths:
            raise GraphFileError(f"{what} ({op}): input {str(src)[:40]!r} is neither the graph's input nor an earlier node")
    w = widths[ins[0]]
    if op == "add" and widths[ins[1]] != w:
        raise GraphFileError(f"{what} (add): shapes differ (width {w} and {widths[ins[1]]})")
    p: dict = {}
    if op == "affine":
        p["W"] = _matrix(nd["W"], f"{what}.W", w)
        n = len(p["W"])
        p["b"] = _vector(nd["b"], f"{what}.b", n) if "b" in nd else (Fraction(0),) * n
    elif op in CONSTANT_OPS:
        c = nd["constant"]
        p["c"] = (_number(c, f"{what}.constant"),) if isinstance(c, str) else _vector(c, f"{what}.constant", w)
        if op == "div_constant" and any(v == 0 for v in p["c"]):
            raise GraphFileError(f"{what}: division by zero")
    elif op == "leaky_relu":
        p["alpha"] = _number(nd.get("alpha", "1/100"), f"{what}.alpha")
    elif op == "gelu":
        if "divisor" in nd:
            p["divisor"] = _positive(_number(nd["divisor"], f"{what}.divisor"), f"{what}.divisor")
    elif op == "gelu_tanh":
        for k in ("k", "a"):
            if k in nd:
                p[k] = _number(nd[k], f"{what}.{k}")
    elif op in ("layer_norm", "rms_norm"):
        p["eps"] = _positive(_number(nd["eps"], f"{what}.eps"), f"{what}.eps")
        p["weight"] = _vector(nd["weight"], f"{what}.weight", w) if "weight" in nd else (Fraction(1),) * w
        if op == "layer_norm":
            p["bias"] = _vector(nd["bias"], f"{what}.bias", w) if "bias" in nd else (Fraction(0),) * w
    return Node(name, op, tuple(ins), p)


def _out_width(node: Node, widths) -> int:
    if node.op == "affine":
        return len(node.params["W"])
    return widths[node.inputs[0]]


# ------------------------------------------------------------------------------------------
# writing


def graph_to_json(g: Graph) -> dict:
    """The ``symbounds-graph/1`` document of ``g`` (every number exact, ``p/q``)."""
    s = str
    nodes = []
    for nd in g.nodes:
        d = {"name": nd.name, "op": nd.op, "inputs": list(nd.inputs)}
        p = nd.params
        if nd.op == "affine":
            d["W"] = [[s(v) for v in row] for row in p["W"]]
            d["b"] = [s(v) for v in p["b"]]
        elif nd.op in CONSTANT_OPS:
            d["constant"] = [s(v) for v in p["c"]] if len(p["c"]) > 1 else s(p["c"][0])
        elif nd.op in ("layer_norm", "rms_norm"):
            d["eps"] = s(p["eps"])
            d["weight"] = [s(v) for v in p["weight"]]
            if nd.op == "layer_norm":
                d["bias"] = [s(v) for v in p["bias"]]
        else:
            for k in ("alpha", "divisor", "k", "a"):
                if p.get(k) is not None:
                    d[k] = s(p[k])
        nodes.append(d)
    return {"format": FORMAT, "input": {"name": g.input_name, "tokens": g.tokens, "width": g.in_width},
            "nodes": nodes, "output": g.output}


def export_graph(g: Graph, path: str) -> None:
    """Write ``g`` to ``path`` atomically, after reading the document back with this module's reader
    (a graph it would refuse is not written: :class:`GraphFileError`)."""
    data = graph_to_json(g)
    try:
        graph_from_json(data)
    except GraphFileError as e:
        raise GraphFileError(f"not written: {e}") from None
    atomic_write(path, json.dumps(data, separators=(",", ":")) + "\n")


# ------------------------------------------------------------------------------------------
# reading either format


def reject_float(text):
    """``parse_float`` of the JSON reader: a JSON float is refused (one line)."""
    raise GraphFileError(f"JSON number {text!r}: numbers must be strings (exact '3', '7/8' or decimals)")


def load_graph(path: str) -> Graph:
    """Read a ``symbounds-graph/1`` file."""
    return graph_from_json(read_json_file(path, GraphFileError, reject_float, reject_float))


def network_from_json(data):
    """A :class:`~symbounds.core.transformer.Transformer` (``symbounds-transformer/1``) or a
    :class:`Graph` (``symbounds-graph/1``), by the document's format."""
    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt == FORMAT:
        return graph_from_json(data)
    if fmt == TRANSFORMER_FORMAT:
        return model_from_json(data)
    raise ModelFileError(f"model file: format must be {TRANSFORMER_FORMAT!r} or {FORMAT!r}, "
                         f"found {str(fmt)[:40]!r}")

