"""Model files (``symbounds-transformer/1``).

Format: JSON; every number is a string, either exact (``"3"``, ``"-7/8"``) or a decimal at the
working precision (``"1743.204..."``), never a JSON float::

    {"format": "symbounds-transformer/1",
     "input": "vector",                       # or "tokens" (no embedding; tokens are columns)
     "precision_bits": 128,                   # how the decimal entries were rounded
     "embedding": {"base": D x n, "E": D x d, "column": c},   # Z_0 = base, plus E x in column c
     "layers": [
        {"type": "attention", "kind": "softmax" | "hardmax", "skip": rho, "tau": optional,
         "heads": [{"W_Q": .., "W_K": .., "W_V": .., "W_O": ..}, ...]},
        {"type": "ffn", "skip": eta, "W1": .., "b1": .., "W2": .., "b2": ..}],
     "readout": {"row": r, "column": c}}

Attention: score ``<W_Q z_j, W_K z_k>`` (divided by ``tau`` when given), output
``rho z_j + sum_h W_O sum_k pi_jk W_V z_k``.  Feed-forward: ``eta z + W2 relu(W1 z + b1) + b2``.

Reading a file never evaluates anything: numbers are matched against a strict pattern and turned
into exact ``Fraction`` values; every malformed part gives a one-line :class:`ModelFileError`.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

import sympy

from .contexts import BallContext
from .exact import NumberError
from .exact import parse_number as _parse_number
from .files import atomic_write, read_json_file
from .transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer

__all__ = ["FORMAT", "ModelFileError", "export_model", "model_to_json", "model_from_json", "load_model"]

FORMAT = "symbounds-transformer/1"



class ModelFileError(NumberError):
    """A model file that cannot be read (one line naming the problem)."""


def parse_number(text: str, what: str = "number"):
    return _parse_number(text, what, ModelFileError)


# ------------------------------------------------------------------------------------------
# writing


def _number_writer(model: Transformer, prec: int):
    """Exact rationals as ``p/q``; everything else as the midpoint of its ball, in decimal."""
    ctx = BallContext(prec)
    env = model.definition_values(ctx)
    memo: dict = {}
    digits = max(17, int(prec * 0.30103) + 2)

    def w(v) -> str:
        if isinstance(v, (int, Fraction)) and not isinstance(v, bool):
            return str(v)
        if isinstance(v, sympy.Basic) and v.is_Rational:
            return str(v)
        if not isinstance(v, sympy.Basic):
            v = sympy.Rational(str(v))
        with ctx.scope():
            return ctx.from_sympy(v, memo, env).mid().str(digits, radius=False)

    return w


def model_to_json(model: Transformer, prec: int = 128) -> dict:
    w = _number_writer(model, prec)
    mat = lambda m: [[w(v) for v in row] for row in m]
    vec = lambda v: [w(x) for x in v]
    layers = []
    for layer in model.layers:
        if isinstance(layer, Attention):
            d = {"type": "attention", "kind": layer.kind, "skip": w(layer.skip)}
            if layer.tau is not None:
                d["tau"] = w(layer.tau)
            d["heads"] = [{"W_Q": mat(h.W_Q), "W_K": mat(h.W_K), "W_V": mat(h.W_V), "W_O": mat(h.W_O)}
                          for h in layer.heads]
        else:
            d = {"type": "ffn", "skip": w(layer.skip), "W1": mat(layer.W1), "b1": vec(layer.b1),
                 "W2": mat(layer.W2), "b2": vec(layer.b2)}
        layers.append(d)
    out = {"format": FORMAT, "input": model.input, "precision_bits": prec}
    if model.embedding is not None:
        e = model.embedding
        out["embedding"] = {"base": mat(e.base), "E": mat(e.E), "column": e.column}
    out["layers"] = layers
    if model.readout is not None:
        out["readout"] = {"row": model.readout.row, "column": model.readout.column}
    return out


def export_model(model: Transformer, path: str, prec: int = 128) -> None:
    """Write ``model`` to ``path`` (atomically), after reading the JSON back with this module's own
    reader: a model whose numbers the reader refuses (a weight above ``10^1000``, a rational of more
    than 4000 digits) raises :class:`ModelFileError` and nothing is written."""
    data = model_to_json(model, prec)
    try:
        model_from_json(data)
    except ModelFileError as e:
        exps = [abs(int(m.group(1))) for m in re.finditer(r'e([+-]?[0-9]+)"', json.dumps(data["layers"]))]
        why = (f"the network has a weight of about 10^{max(exps)}, beyond the decimal exponents up to 1000 "
               "that a model file holds" if exps and max(exps) > 1000 else str(e))
        raise ModelFileError(f"not written: {why}") from None
    atomic_write(path, json.dumps(data, separators=(",", ":")) + "\n")


# ------------------------------------------------------------------------------------------
# reading


def _matrix(obj, what, rows=None, cols=None):
    if not isinstance(obj, list) or not obj or not all(isinstance(r, list) for r in obj):
        raise ModelFileError(f"{what}: expected a non-empty list of rows")
    n = len(obj[0])
    if any(len(r) != n for r in obj):
        raise ModelFileError(f"{what}: rows of different lengths")
    if rows is not None and len(obj) != rows:
        raise ModelFileError(f"{what}: expected {rows} rows, found {len(obj)}")
    if cols is not None and n != cols:
        raise ModelFileError(f"{what}: expected {cols} columns, found {n}")
    return tuple(tuple(parse_number(v, f"{what}[{i}][{j}]") for j, v in enumerate(r)) for i, r in enumerate(obj))


def _vector(obj, what, n):
    if not isinstance(obj, list) or len(obj) != n:
        raise ModelFileError(f"{what}: expected a list of {n} numbers")
    return tuple(parse_number(v, f"{what}[{i}]") for i, v in enumerate(obj))


def _index(obj, what, limit):
    if not isinstance(obj, int) or isinstance(obj, bool) or not (0 <= obj < limit):
        raise ModelFileError(f"{what}: expected an integer in [0, {limit})")
    return obj


def load_model(path: str) -> Transformer:
    """Read a ``symbounds-transformer/1`` file into a :class:`Transformer` with exact weights."""
    return model_from_json(read_json_file(path, ModelFileError, _reject_float, _reject_float))


def _reject_float(text):
    raise ModelFileError(f"JSON number {text!r}: numbers must be strings (exact '3', '7/8' or decimals)")


def model_from_json(data) -> Transformer:
    if not isinstance(data, dict):
        raise ModelFileError("model file: the top level must be an object")
    if data.get("format") != FORMAT:
        raise ModelFileError(f"model file: format must be {FORMAT!r}, found {str(data.get('format'))[:40]!r}")
    kind = data.get("input", "vector")
    if kind not in ("vector", "tokens"):
        raise ModelFileError("model file: 'input' must be 'vector' or 'tokens'")
    emb = None
    if kind == "vector":
        e = data.get("embedding")
        if not isinstance(e, dict):
            raise ModelFileError("model file: a vector-input model needs an 'embedding' object")
        base = _matrix(e.get("base"), "embedding.base")
        D, n = len(base), len(base[0])
        E = _matrix(e.get("E"), "embedding.E", rows=D)
        emb = Embedding(base, E, _index(e.get("column"), "embedding.column", n))
    layers_in = data.get("layers")
    if not isinstance(layers_in, list) or not layers_in:
        raise ModelFileError("model file: 'layers' must be a non-empty list")
    layers = []
    D = len(emb.base) if emb is not None else None
    for i, L in enumerate(layers_in):
        what = f"layers[{i}]"
        if not isinstance(L, dict):
            raise ModelFileError(f"{what}: expected an object")
        t = L.get("type")
        skip = parse_number(L.get("skip", "0"), f"{what}.skip")
        if t == "attention":
            if L.get("kind") not in ("softmax", "hardmax"):
                raise ModelFileError(f"{what}.kind: expected 'softmax' or 'hardmax'")
            tau = parse_number(L["tau"], f"{what}.tau") if "tau" in L else None
            if tau is not None and tau <= 0:
                raise ModelFileError(f"{what}.tau: must be positive")
            heads_in = L.get("heads")
            if not isinstance(heads_in, list) or not heads_in:
                raise ModelFileError(f"{what}.heads: expected a non-empty list")
            heads = []
            for h, H in enumerate(heads_in):
                hw = f"{what}.heads[{h}]"
                if not isinstance(H, dict):
                    raise ModelFileError(f"{hw}: expected an object")
                WQ = _matrix(H.get("W_Q"), f"{hw}.W_Q", cols=D)
                D = len(WQ[0])
                WK = _matrix(H.get("W_K"), f"{hw}.W_K", rows=len(WQ), cols=D)
                WV = _matrix(H.get("W_V"), f"{hw}.W_V", cols=D)
                WO = _matrix(H.get("W_O"), f"{hw}.W_O", rows=D, cols=len(WV))
                heads.append(Head(WQ, WK, WV, WO))
            layers.append(Attention(tuple(heads), L["kind"], skip, tau))
        elif t == "ffn":
            W1 = _matrix(L.get("W1"), f"{what}.W1", cols=D)
            D = len(W1[0])
            b1 = _vector(L.get("b1"), f"{what}.b1", len(W1))
            W2 = _matrix(L.get("W2"), f"{what}.W2", rows=D, cols=len(W1))
            b2 = _vector(L.get("b2"), f"{what}.b2", D)
            layers.append(FeedForward(W1, b1, W2, b2, skip))
        else:
            raise ModelFileError(f"{what}.type: expected 'attention' or 'ffn'")
    readout = None
    if "readout" in data:
        r = data["readout"]
        if not isinstance(r, dict):
            raise ModelFileError("model file: 'readout' must be an object")
        n = len(emb.base[0]) if emb is not None else 2**62
        readout = Readout(_index(r.get("row"), "readout.row", D), _index(r.get("column"), "readout.column", n))
    return Transformer(tuple(layers), emb, readout, kind)
