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
from .graph import CONSTANT_OPS, UNARY, Graph, Node, tokens_after, width_after
from .graph_tokens import LAYOUTS
from .modelfile import FORMAT as TRANSFORMER_FORMAT
from .modelfile import ModelFileError, model_from_json, parse_number

__all__ = ["FORMAT", "GraphFileError", "graph_from_json", "graph_to_json", "load_graph", "export_graph",
           "network_from_json", "reject_float", "MAX_NODES", "MAX_WIDTH", "MAX_TOKENS", "MAX_SEQUENCE"]

FORMAT = "symbounds-graph/1"
#: limits checked before anything of that size is built
MAX_NODES = 4096
MAX_WIDTH = 1024
MAX_TOKENS = 1 << 16
MAX_INPUTS = 1 << 20
#: the longest sequence an attention node (or a mean over tokens) reads: its scores are L x L per head
MAX_SEQUENCE = 1024
_NAME = re.compile(r"^[A-Za-z0-9_.:/\-]{1,200}$", re.ASCII)

#: the keys each operation takes besides name, op, inputs (required ones first, then optional)
_KEYS = {"affine": ({"W"}, {"b"}), "add": (set(), set()), "leaky_relu": (set(), {"alpha"}),
         "gelu": (set(), {"divisor"}), "gelu_tanh": (set(), {"k", "a"}),
         "layer_norm": ({"eps"}, {"weight", "bias"}), "rms_norm": ({"eps"}, {"weight"})}
_KEYS.update({op: ({"constant"}, set()) for op in CONSTANT_OPS})
_KEYS.update({op: (set(), set()) for op in UNARY})
_KEYS.update({"attention": ({"heads", "Wq", "Wk", "Wv", "Wo", "scale"},
                            {"bq", "bk", "bv", "bo", "mask", "hardmax", "sequence_length", "layout"}),
              "slice": ({"start", "stop"}, set()), "concat": (set(), set()), "select_tokens": ({"indices"}, set()),
              "mean_tokens": (set(), {"sequence_length", "layout"})})


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


def _matrix(obj, what, cols, of="the input's width") -> tuple:
    """A list of rows of ``cols`` numbers (at most :data:`MAX_WIDTH` rows), shape checked first."""
    if not isinstance(obj, list) or not obj:
        raise GraphFileError(f"{what}: expected a non-empty list of rows")
    if len(obj) > MAX_WIDTH:
        raise GraphFileError(f"{what}: {len(obj)} rows, more than the {MAX_WIDTH} a graph holds")
    for i, r in enumerate(obj):
        if not isinstance(r, list) or len(r) != cols:
            raise GraphFileError(f"{what}[{i}]: expected a row of {cols} numbers ({of})")
    return tuple(tuple(_number(v, f"{what}[{i}][{j}]") for j, v in enumerate(r)) for i, r in enumerate(obj))


def _count(obj, what, limit) -> int:
    if not isinstance(obj, int) or isinstance(obj, bool) or not (1 <= obj <= limit):
        raise GraphFileError(f"{what}: expected an integer in 1..{limit}")
    return obj


def _integer(obj, what, lo, hi) -> int:
    if not isinstance(obj, int) or isinstance(obj, bool) or not (lo <= obj <= hi):
        raise GraphFileError(f"{what}: expected an integer in {lo}..{hi}")
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
    tokens_of = {in_name: tokens}
    nodes = []
    for i, nd in enumerate(nodes_in):
        node = _node(nd, f"nodes[{i}]", widths, tokens_of)
        w = width_after(node, widths)
        t = tokens_after(node, tokens_of)
        if w > MAX_WIDTH:
            raise GraphFileError(f"node {node.name!r} ({node.op}): width {w}, more than the {MAX_WIDTH} a graph holds")
        if t * w > MAX_INPUTS:
            raise GraphFileError(f"node {node.name!r} ({node.op}): {t} x {w} entries, more than the {MAX_INPUTS} "
                                 f"a tensor holds")
        widths[node.name], tokens_of[node.name] = w, t
        nodes.append(node)
    out = _name(data.get("output"), "output")
    if out not in widths or out == in_name:
        raise GraphFileError(f"output: {out!r} is not a node of the graph")
    if "precision_bits" in data:
        _count(data["precision_bits"], "precision_bits", 1 << 16)
    return Graph(in_name, tokens, width, tuple(nodes), out, widths)


def _node(nd, what, widths, tokens_of) -> Node:
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
    if op == "concat":
        if not isinstance(ins, list) or not 1 <= len(ins) <= MAX_WIDTH:
            raise GraphFileError(f"{what} (concat): 'inputs' must list 1 to {MAX_WIDTH} tensor names")
    else:
        arity = 2 if op == "add" else 1
        if not isinstance(ins, list) or len(ins) != arity:
            raise GraphFileError(f"{what} ({op}): 'inputs' must list {arity} tensor name(s)")
    for j, src in enumerate(ins):
        if not isinstance(src, str) or src not in widths:
            raise GraphFileError(f"{what} ({op}): input {str(src)[:40]!r} is neither the graph's input nor an earlier node")
    w, t = widths[ins[0]], tokens_of[ins[0]]
    if op == "add" and (widths[ins[1]], tokens_of[ins[1]]) != (w, t):
        raise GraphFileError(f"{what} (add): shapes differ ([{t}, {w}] and [{tokens_of[ins[1]]}, {widths[ins[1]]}])")
    if op == "concat":
        for src in ins[1:]:
            if tokens_of[src] != t:
                raise GraphFileError(f"{what} (concat): inputs of {t} and {tokens_of[src]} rows")
    p: dict = {}
    if op == "attention":
        p = _attention(nd, what, w, t)
    elif op == "slice":
        p["start"] = _integer(nd["start"], f"{what}.start", 0, w - 1)
        p["stop"] = _integer(nd["stop"], f"{what}.stop", p["start"] + 1, w)
    elif op == "select_tokens":
        idx = nd["indices"]
        if not isinstance(idx, list) or not 1 <= len(idx) <= MAX_TOKENS:
            raise GraphFileError(f"{what}.indices: expected a list of 1 to {MAX_TOKENS} row indices")
        p["indices"] = tuple(_integer(v, f"{what}.indices[{i}]", 0, t - 1) for i, v in enumerate(idx))
    elif op == "mean_tokens":
        p["sequence_length"], p["layout"] = _sequence(nd, what, t)
    elif op == "affine":
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


def _sequence(nd, what, t) -> tuple:
    """``(sequence_length, layout)`` of a node reading ``t`` rows as sequences."""
    L = nd.get("sequence_length")
    if L is not None:
        L = _integer(L, f"{what}.sequence_length", 1, MAX_SEQUENCE)
        if t % L:
            raise GraphFileError(f"{what}: sequence_length {L} does not divide the input's {t} rows")
    elif t > MAX_SEQUENCE:
        raise GraphFileError(f"{what}: one sequence of {t} rows, longer than the {MAX_SEQUENCE} a node reads "
                             f"(give sequence_length)")
    layout = nd.get("layout", "batch_major")
    if layout not in LAYOUTS:
        raise GraphFileError(f"{what}.layout: expected 'batch_major' or 'sequence_major', found {str(layout)[:40]!r}")
    return L, layout


def _attention(nd, what, E, t) -> dict:
    """The parameters of an ``attention`` node on rows of width ``E`` (docs/model-graph.md)."""
    h = _integer(nd["heads"], f"{what}.heads", 1, MAX_WIDTH)
    p: dict = {"heads": h}
    for m in ("Wq", "Wk", "Wv"):
        p[m] = _matrix(nd[m], f"{what}.{m}", E)
        n = len(p[m])
        if n % h:
            raise GraphFileError(f"{what}.{m}: {n} rows, not a multiple of the {h} heads")
        b = "b" + m[1]
        p[b] = _vector(nd[b], f"{what}.{b}", n) if b in nd else (Fraction(0),) * n
    if len(p["Wk"]) != len(p["Wq"]):
        raise GraphFileError(f"{what}.Wk: {len(p['Wk'])} rows, Wq has {len(p['Wq'])} (queries and keys share d_k)")
    p["Wo"] = _matrix(nd["Wo"], f"{what}.Wo", len(p["Wv"]), "the rows of Wv: heads x d_v")
    p["bo"] = _vector(nd["bo"], f"{what}.bo", len(p["Wo"])) if "bo" in nd else (Fraction(0),) * len(p["Wo"])
    sc = nd["scale"]
    if isinstance(sc, dict):
        if set(sc) != {"inv_sqrt"}:
            raise GraphFileError(f"{what}.scale: expected a number or {{'inv_sqrt': n}}")
        p["scale"] = {"inv_sqrt": _integer(sc["inv_sqrt"], f"{what}.scale.inv_sqrt", 1, 1 << 30)}
    else:
        p["scale"] = _positive(_number(sc, f"{what}.scale"), f"{what}.scale")
    hard = nd.get("hardmax", False)
    if not isinstance(hard, bool):
        raise GraphFileError(f"{what}.hardmax: expected true or false")
    p["hardmax"] = hard
    p["sequence_length"], p["layout"] = _sequence(nd, what, t)
    p["mask"] = _mask(nd.get("mask"), what, p["sequence_length"] or t)
    return p


def _mask(m, what, L):
    """None (every key), ``"causal"``, or an ``L x L`` tuple of 0/1 rows, each with a 1."""
    if m is None or m == "causal":
        return m
    if not isinstance(m, list) or len(m) != L:
        raise GraphFileError(f"{what}.mask: expected null, 'causal' or a list of {L} rows of 0/1 (the sequence length)")
    rows = []
    for j, r in enumerate(m):
        if not isinstance(r, list) or len(r) != L:
            raise GraphFileError(f"{what}.mask[{j}]: expected a row of {L} entries 0 or 1")
        row = []
        for k, v in enumerate(r):
            if v in (0, 1, "0", "1") and not isinstance(v, bool):
                row.append(int(v))
            else:
                raise GraphFileError(f"{what}.mask[{j}][{k}]: expected 0 or 1, found {str(v)[:20]!r}")
        if not any(row):
            raise GraphFileError(f"{what}.mask[{j}]: query {j} attends no key (a row of zeros)")
        rows.append(tuple(row))
    return tuple(rows)


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
        elif nd.op == "attention":
            d.update(_attention_json(p))
        elif nd.op == "slice":
            d["start"], d["stop"] = int(p["start"]), int(p["stop"])
        elif nd.op == "select_tokens":
            d["indices"] = [int(i) for i in p["indices"]]
        elif nd.op == "mean_tokens":
            _sequence_json(d, p)
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


def _sequence_json(d: dict, p: dict) -> None:
    if p.get("sequence_length") is not None:
        d["sequence_length"] = int(p["sequence_length"])
    if p.get("layout") not in (None, "batch_major"):
        d["layout"] = p["layout"]


def _attention_json(p: dict) -> dict:
    d: dict = {"heads": int(p["heads"])}
    for m in ("q", "k", "v", "o"):
        W = p["W" + m]
        d["W" + m] = [[str(v) for v in row] for row in W]
        b = p.get("b" + m)
        d["b" + m] = [str(v) for v in b] if b is not None else ["0"] * len(W)
    sc = p["scale"]
    d["scale"] = {"inv_sqrt": int(sc["inv_sqrt"])} if isinstance(sc, dict) else str(sc)
    mask = p.get("mask")
    if mask is not None:
        d["mask"] = mask if mask == "causal" else [[int(v) for v in row] for row in mask]
    if p.get("hardmax"):
        d["hardmax"] = True
    _sequence_json(d, p)
    return d


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

