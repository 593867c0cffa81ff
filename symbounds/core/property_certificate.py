"""Certificates of VNN-LIB properties (``symbounds-property-certificate/1``): the proof behind an
``unsat`` answer, re-verified from scratch by ``symbounds check``.

A certificate holds the network (the model file's JSON -- ``symbounds-transformer/1``, or the layer
graph's ``symbounds-graph/1`` for an MLP or any network read as a layer graph -- as imported from
ONNX when it came from there, and its SHA-256), the property file's text (and its SHA-256), the precision, and the
*leaves* of the search: the sub-boxes on which every alternative of the unsafe region was shown
unreachable, each ``[lo, hi]`` with exact rational ends.  The check

1. parses the network and the property again and compares both digests;
2. rebuilds the bisection tree of the property's input box from the leaves: starting at the box,
   a node equal to a leaf is a leaf; a node strictly holding leaves is halved along its widest
   side (:meth:`symbounds.core.boxes.Box.split`, as the search halves) and each leaf must lie in
   one half; a node holding no leaf is a gap.  So the leaves cover the box exactly, or the check
   names the first gap or the first box that is not a cell of the bisection;
3. encloses the outputs on every node of the tree, each enclosure met with its parent's (as the
   search does: the parent's enclosure holds on the child), with the same rigorous evaluators
   (outward-rounded float64 Taylor models, Arb Taylor models and balls; exact at a point), and
   requires that on every leaf each alternative of the unsafe region has a constraint whose
   enclosure lies entirely on its false side.

A counterexample (``sat``) needs no certificate: it is re-checked at its exact point.
"""

from __future__ import annotations

import hashlib
from fractions import Fraction

from .bound import BoundError, check_box
from .boxes import Box, digest
from .claims import Verdict
from .exact import NumberError, parse_number
from .graph import Graph
from .graph_file import graph_to_json, network_from_json
from .modelfile import ModelFileError, model_to_json

__all__ = ["PROPERTY_FORMAT", "PropertyCertificateError", "make_property_certificate",
           "check_property_certificate", "MAX_LEAVES"]

PROPERTY_FORMAT = "symbounds-property-certificate/1"
MAX_LEAVES = 10**7
#: Halvings from the property's box to a leaf (a search stops at half-widths of 2^-20 a side).
MAX_DEPTH = 4096


class PropertyCertificateError(ValueError):
    """A certificate that is rejected (one line naming the first problem)."""


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_property_certificate(*, version: str, model, spec_text: str, result, prec: int,
                              source: dict | None = None) -> dict:
    """The certificate of a proved :func:`symbounds.core.vnnlib.verify` run (``result``)."""
    if str(result.verdict) != "proved":
        raise ValueError("only a proved property has a certificate")
    mj = graph_to_json(model) if isinstance(model, Graph) else model_to_json(model, max(prec, 128))
    return {
        "format": PROPERTY_FORMAT,
        "symbounds": version,
        "claim": "no input of the property's box reaches its unsafe region (answer unsat)",
        "verdict": "proved",
        "prec": int(prec),
        "model_sha256": digest(mj),
        "model": mj,
        "property_sha256": text_digest(spec_text),
        "property": spec_text,
        "source": dict(source or {}),
        "seconds": f"{float(result.seconds):.3f}",
        "leaves": [[[str(v) for v in b.lo], [str(v) for v in b.hi]] for b in result.leaves],
    }


def _req(cert, key, kind):
    if key not in cert or not isinstance(cert[key], kind):
        raise PropertyCertificateError(f"'{key}' is missing or not a {kind.__name__}")
    return cert[key]


def _leaf(obj, k, m) -> Box:
    if (not isinstance(obj, list) or len(obj) != 2 or not all(isinstance(e, list) and len(e) == m for e in obj)
            or not all(isinstance(v, str) for e in obj for v in e)):
        raise PropertyCertificateError(f"leaf {k}: expected [[lo ...], [hi ...]] of {m} exact numbers each")
    try:
        lo = tuple(parse_number(v) for v in obj[0])
        hi = tuple(parse_number(v) for v in obj[1])
    except NumberError as e:
        raise PropertyCertificateError(f"leaf {k}: {e}") from None
    return Box(lo, hi)


def _inside(leaf: Box, box: Box) -> bool:
    return all(a <= c and d <= b for a, b, c, d in zip(box.lo, box.hi, leaf.lo, leaf.hi))


def check_property_certificate(cert: dict, progress=None) -> dict:
    """Re-verify a property certificate (see the module docstring); returns
    ``{"leaves", "nodes", "inputs", "alternatives"}`` or raises :class:`PropertyCertificateError`."""
    from .vnnlib import PropertyProblem, SpecError, network_outputs, parse_vnnlib, property_evaluator

    if not isinstance(cert, dict) or cert.get("format") != PROPERTY_FORMAT:
        raise PropertyCertificateError(f"not a property certificate ('format' must be {PROPERTY_FORMAT!r})")
    if cert.get("verdict") != "proved":
        raise PropertyCertificateError("the verdict is not 'proved'")
    prec = _req(cert, "prec", int)
    if isinstance(prec, bool) or not (53 <= prec <= 4096):
        raise PropertyCertificateError("'prec' must be between 53 and 4096 bits")
    mj = _req(cert, "model", dict)
    if digest(mj) != _req(cert, "model_sha256", str):
        raise PropertyCertificateError("the model does not match its digest (model_sha256)")
    text = _req(cert, "property", str)
    if text_digest(text) != _req(cert, "property_sha256", str):
        raise PropertyCertificateError("the property does not match its digest (property_sha256)")
    try:
        model = network_from_json(mj)
        spec = parse_vnnlib(text)
        root = check_box(model, spec.lo, spec.hi)
        k = network_outputs(model, len(root.lo))
    except (ModelFileError, SpecError, BoundError) as e:
        raise PropertyCertificateError(str(e).splitlines()[0]) from None
    if spec.outputs != k:
        raise PropertyCertificateError(f"the property has {spec.outputs} outputs, the model has {k}")
    raw = _req(cert, "leaves", list)
    if not raw or len(raw) > MAX_LEAVES:
        raise PropertyCertificateError(f"'leaves' must list between 1 and {MAX_LEAVES} boxes")
    leaves = [_leaf(obj, i, len(root.lo)) for i, obj in enumerate(raw)]
    problem = PropertyProblem(spec, k)
    ev = property_evaluator(model, problem, prec)
    nodes = walk_bisection(root, leaves, ev,
                           lambda i, box, enc: enc is not None and problem.decide(box, enc) is Verdict.PROVED,
                           progress, "the unsafe region is not shown unreachable on it (re-evaluated)")
    return {"leaves": len(leaves), "nodes": nodes, "inputs": len(root.lo), "alternatives": len(spec.unsafe),
            "fraction": str(Fraction(1))}


def walk_bisection(root: Box, leaves: list, ev, leaf_ok, progress=None, why: str = "not decided on it") -> int:
    """Rebuild the bisection tree of ``root`` from its ``leaves`` (distinct boxes): a node equal to a
    leaf is that leaf; a node strictly holding leaves is halved along its widest side
    (:meth:`symbounds.core.search.Box.split`, as the search halves) and each leaf must lie in one
    half; a node holding no leaf is a gap.  Every node is enclosed by ``ev`` (met with its
    parent's, as the search does) and ``leaf_ok(i, box, enclosure)`` must accept every leaf ``i``.
    Returns the number of nodes; raises :class:`PropertyCertificateError` naming the first gap,
    overlap, box that is not a cell of the bisection, or leaf not accepted (``why``)."""
    index = {b: i for i, b in enumerate(leaves)}
    if len(index) != len(leaves):
        raise PropertyCertificateError("a leaf is listed twice")
    stack = [(root, None, list(range(len(leaves))), 0)]
    nodes = done = 0
    while stack:
        box, parent, inside, depth = stack.pop()
        if not inside:
            raise PropertyCertificateError(
                f"the leaves do not cover the box: [{', '.join(f'{a}:{b}' for a, b in zip(box.lo, box.hi))}] "
                "holds no leaf")
        enc = ev.enclose([box], [parent])[0]
        nodes += 1
        if len(inside) == 1 and leaves[inside[0]] == box:
            if not leaf_ok(inside[0], box, enc):
                raise PropertyCertificateError(f"leaf {inside[0]}: {why}")
            done += 1
            if progress is not None:
                progress(done, len(leaves))
            continue
        if any(leaves[i] == box for i in inside):
            raise PropertyCertificateError(f"leaf {index[box]} overlaps another leaf")
        if box.width() == 0 or depth > MAX_DEPTH:
            raise PropertyCertificateError("a leaf is not a cell of the bisection of the property's box")
        left, right = box.split()
        parts: tuple[list, list] = ([], [])
        for i in inside:
            if _inside(leaves[i], left):
                parts[0].append(i)
            elif _inside(leaves[i], right):
                parts[1].append(i)
            else:
                raise PropertyCertificateError(f"leaf {i} is not a cell of the bisection of the property's box")
        stack.append((right, enc, parts[1], depth + 1))
        stack.append((left, enc, parts[0], depth + 1))
    return nodes
