"""The VNN-COMP workflow: networks and properties as the competition ships them, its
``instances.csv``, its result file, and the witness of a ``sat`` answer.

* **Files.**  :func:`read_shipped` reads a user's file, gzip-compressed when its name ends in
  ``.gz`` (as the competition's benchmark folders ship large networks and properties), never
  more than a limit of compressed *and* of decompressed bytes: a small ``.gz`` that expands to
  gigabytes (a gzip bomb) is refused with one line after at most ``limit + 1`` bytes were
  produced.  :func:`load_network` takes a model file (``symbounds-transformer/1`` or a layer graph,
  ``symbounds-graph/1``, JSON) or an ONNX graph (imported on the fly, every float weight as its
  exact binary rational: a model file's network by :mod:`symbounds.core.onnx_io` where the graph
  is one, else a layer graph by :mod:`symbounds.core.onnx_graph`, as ``bound`` imports it): JSON
  when the first non-blank byte is ``{``, ONNX when the name ends in ``.onnx`` or the bytes parse
  as an ONNX graph with an input, else one line naming both.
* **instances.csv.**  One instance a line, ``onnx,vnnlib,timeout`` (seconds), the paths relative
  to the csv's folder, no header (:func:`read_instances`).
* **The result file.**  The first line is the answer, one of :data:`ANSWERS`: ``unsat`` (the
  property holds: no input of the box reaches the unsafe region), ``sat`` (it does), ``timeout``,
  ``unknown`` (undecided within the limits), ``error``.  After ``sat`` comes the witness,
  ``((X_0 v) ... (Y_0 v) ...)``, one entry a line, the inputs flattened in the network's input
  order (C order, as the competition's checker reshapes them) and the outputs it computes there.
* **Witness.**  :func:`float_witness` moves a counterexample found at an exact rational point to a
  float64 point of the box (the nearest, then its neighbours), so that the decimal written in the
  result file *is* the point, and re-checks it rigorously (exactly where the network admits it,
  else in Arb balls); :func:`onnxruntime_check` runs the ONNX graph there in onnxruntime and says
  whether its float outputs, taken exactly, lie in the unsafe region too (the competition's
  checker replays the witness this way).  The session runs in the graph's own input type: a
  ``torch.onnx.export`` graph is float32 (onnxruntime has no float64 kernels for some of the
  operations a layer graph reads, such as Erf, Softplus and LeakyRelu), so its outputs are float32
  approximations, and a witness whose outputs lie within their rounding of the unsafe region's
  edge may be confirmed rigorously and not by onnxruntime (the result says which).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass
from fractions import Fraction

from .exact import NumberError, parse_number
from .shipped import read_shipped
from .graph_file import network_from_json
from .modelfile import ModelFileError, model_from_json, model_to_json

__all__ = ["ANSWERS", "VnncompError", "Instance", "read_shipped", "load_network", "read_instances",
           "result_text", "answer_of", "float_witness", "onnxruntime_check", "MAX_CSV_BYTES", "MAX_INSTANCES"]

#: The answers of a result file (its first line).
ANSWERS = ("unsat", "sat", "timeout", "unknown", "error")
MAX_CSV_BYTES = 4 * 2**20
MAX_INSTANCES = 100_000
#: Decompressed networks are held to the model file's own limit.
MAX_NETWORK_BYTES = 64 * 2**20


class VnncompError(NumberError):
    """A file of the workflow that cannot be used (one line naming the problem)."""


@dataclass(frozen=True)
class Instance:
    network: str  # path (resolved against the csv's folder)
    spec: str
    timeout: float
    line: int


# ------------------------------------------------------------------------------------------
# files


def _bare_name(path: str) -> str:
    return path[:-3] if path.endswith(".gz") else path


def _reject_float(text):
    raise ModelFileError(f"JSON number {text!r}: numbers must be strings (exact '3', '7/8' or decimals)")


def load_network(path: str):
    """``(network, onnx_bytes or None)`` of a model file (either format) or an ONNX graph
    (``.gz`` read bounded): a :class:`~symbounds.core.transformer.Transformer`, or a layer
    :class:`~symbounds.core.graph.Graph`; :class:`VnncompError` with one line otherwise."""
    data = read_shipped(path, VnncompError, MAX_NETWORK_BYTES)
    head = data.lstrip()[:1]
    name = _bare_name(path)
    if head == b"{":
        try:
            obj = json.loads(data.decode("utf-8"), parse_float=_reject_float, parse_constant=_reject_float)
            return network_from_json(obj), None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise VnncompError(f"{path}: not valid JSON (a model file is symbounds-transformer/1 or "
                               "symbounds-graph/1 JSON)") from None
        except RecursionError:
            raise VnncompError(f"{path}: JSON nested too deeply") from None
        except ModelFileError as e:
            raise VnncompError(f"{path}: {str(e).splitlines()[0]}") from None
    from .onnx_io import OnnxError, onnx_modules, onnx_to_model

    try:
        onnx, *_ = onnx_modules()
    except OnnxError as e:
        if name.endswith(".onnx"):
            raise VnncompError(f"{path}: {e}") from None
        raise VnncompError(f"{path}: neither a model file (symbounds-transformer/1 JSON) nor an ONNX graph "
                           "(ONNX needs: pip install 'symbounds[onnx]')") from None
    try:
        proto = onnx.load_model_from_string(data)
        ok = proto.HasField("graph") and len(proto.graph.input) > 0
    except Exception:  # protobuf's decode errors have no common base class
        ok = False
    if not ok:
        if name.endswith(".onnx"):
            raise VnncompError(f"{path}: not an ONNX file (no graph with an input)")
        raise VnncompError(f"{path}: neither a model file (symbounds-transformer/1 JSON) nor an ONNX graph")
    return _onnx_network(path, proto, onnx_to_model, OnnxError), data


def _onnx_network(path: str, proto, onnx_to_model, OnnxError):
    """The network of an ONNX graph: a model file's where the graph is one, else a layer graph
    (:func:`symbounds.core.onnx_graph.import_onnx_network`, whose one line says why neither reads
    it); a ``.gz`` graph, already decompressed, is tried the same two ways (the layer graph's line
    when neither reads it)."""
    from .onnx_graph import import_onnx_network, onnx_to_graph

    if not path.endswith(".gz"):
        try:
            return import_onnx_network(path)
        except OnnxError as e:
            raise VnncompError(str(e).splitlines()[0]) from None
    first = lambda e: str(e).splitlines()[0] if str(e) else type(e).__name__
    try:
        return model_from_json(model_to_json(onnx_to_model(proto)))
    except (OnnxError, ValueError):
        pass
    try:
        return onnx_to_graph(proto)
    except (OnnxError, ValueError) as e:
        raise VnncompError(f"{path}: {first(e)}") from None


def read_instances(path: str) -> list[Instance]:
    """The lines of a competition ``instances.csv``: ``onnx,vnnlib,timeout``, paths relative to
    the csv's folder; :class:`VnncompError` names the first bad line."""
    data = read_shipped(path, VnncompError, MAX_CSV_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise VnncompError(f"{path}: not a UTF-8 text file") from None
    folder = os.path.dirname(os.path.abspath(path))
    out = []
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as e:
        raise VnncompError(f"{path}: not a csv file ({e})") from None
    for k, row in enumerate(rows, 1):
        row = [c.strip() for c in row]
        if not row or row == [""] or (row[0].startswith("#")):
            continue
        if len(row) != 3 or not row[0] or not row[1]:
            raise VnncompError(f"{path}, line {k}: expected 'onnx,vnnlib,timeout', found {len(row)} field(s)")
        try:
            t = parse_number(row[2])
        except NumberError:
            raise VnncompError(f"{path}, line {k}: timeout {row[2][:40]!r} is not a number of seconds") from None
        if not (0 < t <= 7 * 86400):
            raise VnncompError(f"{path}, line {k}: timeout {row[2][:40]} is not in (0, 604800] seconds")
        if len(out) >= MAX_INSTANCES:
            raise VnncompError(f"{path}: more than {MAX_INSTANCES} instances")
        resolve = lambda p: p if os.path.isabs(p) else os.path.join(folder, p)
        out.append(Instance(resolve(row[0]), resolve(row[1]), float(t), k))
    if not out:
        raise VnncompError(f"{path}: no instances (one 'onnx,vnnlib,timeout' a line)")
    return out


# ------------------------------------------------------------------------------------------
# the result file


def answer_of(verdict, stopped) -> str:
    """The competition's answer for a verdict of :func:`symbounds.core.vnnlib.verify`."""
    v = str(verdict)
    if v == "proved":
        return "unsat"
    if v == "refuted":
        return "sat"
    return "timeout" if stopped == "timeout" else "unknown"


def _dec(q: Fraction) -> str:
    """A decimal for the result file: the float's shortest round-trip form when ``q`` is a
    float64 number (then the text *is* ``q``), else 20 significant digits."""
    try:
        f = float(q)
    except OverflowError:
        f = math.inf
    if math.isfinite(f) and Fraction(f) == q:
        return repr(f)
    from .exact import decimal

    return decimal(q, 20)


def result_text(answer: str, witness: dict | None = None) -> str:
    """The result file: the answer, and after ``sat`` the witness ``((X_i v) ... (Y_j v))``."""
    if answer not in ANSWERS:
        raise ValueError(f"unknown answer {answer!r}")
    if answer != "sat" or witness is None:
        return answer + "\n"
    rows = [f"(X_{i} {_dec(Fraction(v))})" for i, v in enumerate(witness["x"])]
    rows += [f"(Y_{j} {_dec(Fraction(v))})" for j, v in enumerate(witness["y_value"])]
    return "sat\n(" + "\n".join(rows) + ")\n"


# ------------------------------------------------------------------------------------------
# the witness


def _float_near(q: Fraction, lo: Fraction, hi: Fraction) -> list:
    """Float64 numbers in ``[lo, hi]`` nearest to ``q`` (the nearest, then one step either way)."""
    try:
        f = float(q)
    except OverflowError:
        return []
    out = []
    for c in (f, math.nextafter(f, math.inf), math.nextafter(f, -math.inf)):
        if math.isfinite(c) and lo <= Fraction(c) <= hi and c not in out:
            out.append(c)
    return out


def _mid(record_y: str) -> Fraction:
    """A value written by a counterexample record: an exact rational, or a ball ``[m +/- r]``."""
    s = record_y.strip()
    if s.startswith("["):
        s = s[1:].split("+/-")[0].strip().rstrip("]").strip() or "0"  # "[+/- r]": a ball about 0
    return parse_number(s)


def float_witness(model, spec, cex: dict, prec: int = 128) -> dict:
    """The counterexample ``cex`` (an exact point refuting the property) as a witness for the
    result file: a float64 point of the box that refutes too (re-checked rigorously), else the
    exact point itself (``"float_point": False``).  Adds ``y_value``: the outputs there (exact,
    or a ball's midpoint), for writing."""
    from .vnnlib import counterexample_at

    x = [parse_number(v) for v in cex["x"]]
    choice = []
    for v, a, b in zip(x, spec.lo, spec.hi):
        near = _float_near(v, a, b)
        if not near:
            choice = None
            break
        choice.append(near[0])
    rec, point = None, None
    if choice is not None:
        point = tuple(Fraction(c) for c in choice)
        rec = point == tuple(x) and cex or counterexample_at(model, spec, point, prec)
    out = dict(rec) if rec is not None else dict(cex)
    out["float_point"] = rec is not None
    if rec is not None:
        out["x"] = [str(v) for v in point]
    out["y_value"] = [str(_mid(y)) for y in out["y"]]
    return out


def onnxruntime_check(onnx_bytes: bytes, spec, x) -> dict:
    """Run the ONNX graph under onnxruntime at the point ``x`` (the graph's input type, its
    declared shape, C order) and decide exactly whether its float outputs lie in the property's
    unsafe region: ``{"available", "outputs", "unsafe", "disjunct"}`` (``available`` False when
    onnxruntime is not installed, or the graph does not run; ``reason`` then says why)."""
    try:
        import numpy as np
        import onnx
        import onnxruntime as ort
    except ImportError:
        return {"available": False, "reason": "onnxruntime is not installed (pip install 'symbounds[onnx]')"}
    try:
        proto = onnx.load_model_from_string(onnx_bytes)
        init = {t.name for t in proto.graph.initializer}
        inp = [i for i in proto.graph.input if i.name not in init][0]
        elem = inp.type.tensor_type.elem_type
        dtype = np.float64 if elem == onnx.TensorProto.DOUBLE else np.float32
        shape = [d.dim_value if d.dim_value > 0 else -1 for d in inp.type.tensor_type.shape.dim]
        free = [i for i, v in enumerate(shape) if v == -1]
        for i in free[:-1]:  # several free dimensions (a batch and the tokens): the first ones are 1
            shape[i] = 1
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])
        arr = np.array([float(Fraction(v)) for v in x], dtype=dtype).reshape(shape, order="C")
        y = np.asarray(sess.run(None, {inp.name: arr})[0]).flatten(order="C")
    except Exception as e:  # onnxruntime's errors have no common base class
        return {"available": False, "reason": f"onnxruntime did not run the graph ({type(e).__name__})"}
    ys = [Fraction(float(v)) if math.isfinite(float(v)) else None for v in y]
    hit = None
    if len(ys) == spec.outputs and all(v is not None for v in ys):
        for i, conj in enumerate(spec.unsafe):
            if all(_holds(c, ys) for c in conj):
                hit = i
                break
    return {"available": True, "outputs": [repr(float(v)) for v in y], "unsafe": hit is not None, "disjunct": hit}


def _holds(c, ys) -> bool:
    v = c.const + sum((a * ys[j] for j, a in c.coeffs), Fraction(0))
    return v < 0 if c.strict else v <= 0
