"""A layer graph against a target over a box: ``sup_{x in D} |Y_k(x) - g(x)| <= eps``, proved box by box.

``Y_k`` is output ``k`` (row by row) of a layer graph (``symbounds-graph/1``, or an ONNX graph read
as one) with ``d`` inputs, ``D`` a box (default ``[0,1]^d``) and ``g`` a target in ``x1..xd``
(parsed by :func:`symbounds.core.expr.parse_target`: no user text reaches an evaluator).  The box
search is the one of :mod:`symbounds.core.search` (:class:`GraphTargetProblem` with the graph's
:class:`~symbounds.core.search.BoxEvaluator`: Arb Taylor models met with balls, exact at a point
where the graph admits it, each child's enclosure met with its parent's).  On a box ``B = x0 +- h``
the error is bounded by the smaller of

* the interval bound ``max(T_hi - g_lo, g_hi - T_lo)``, ``[T_lo, T_hi]`` the enclosure of ``Y_k``
  and ``[g_lo, g_hi]`` the target over ``B`` in Arb balls; and
* the mean-value bound, where ``Y_k``'s Taylor model ``c + <a, delta> + [-r, r]`` is known: ``g(x) in
  g(x0) + <grad g(B), delta>`` (the partial derivatives, SymPy's ``diff`` of the parsed tree,
  enclosed over ``B`` in balls), so ``Y_k - g`` lies in ``(c - g(x0)) + <a - grad g(B), delta> +
  [-r, r]``: where the network follows ``g`` the two linear parts cancel and the bound shrinks like
  ``h^2``, not ``h``.  A target whose derivative the balls cannot enclose (``abs`` or ``min`` at a
  kink, ``sqrt`` at 0) keeps the interval bound.

A box is proved when its bound is at most ``eps``, else halved along its widest side.  A point
refutes the claim when ``|Y_k(x) - g(x)| > eps`` is decided at it: ``Y_k(x)`` exactly (rational
weights and piecewise-linear activations) or in Arb balls, ``g(x)`` in Arb balls, at the
evaluator's precision and at four times it (the corners, the centre and random points first, then
the centre of every new box).  Nothing else decides a verdict.

The certificate (``symbounds-graph-target-certificate/1``, every number an exact string) holds the
graph and its SHA-256, the claim (output, box, ``eps``, target), the precision and the proved
boxes, each with its bound; :func:`check_graph_target_certificate` re-derives it from scratch: the
boxes must be the leaves of the bisection of ``D`` (so they cover it) and on each the recomputed
bound, with the same evaluator along the same tree, at most the recorded one, at most ``eps``.
The independent checker kernel (``symbounds_kernel``) does not read these certificates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import sympy as sp

from .claims import Verdict
from .contexts import BallContext, Undecided, UndefinedValue
from .exact import NumberError, arb_to_fraction, parse_number
from .expr import ExprError, parse_target, variables
from .float_target import compile_target
from .graph import Graph
from .search import Box, BoxEvaluator, Limits, Problem, search
from .taylor import TM, TaylorContext

__all__ = ["GRAPH_TARGET_FORMAT", "GraphTargetError", "GraphTargetCertificateError", "GraphTargetResult",
           "GraphTargetProblem", "Target", "certify_graph", "error_bound", "make_graph_target_certificate",
           "check_graph_target_certificate", "graph_claim"]

GRAPH_TARGET_FORMAT = "symbounds-graph-target-certificate/1"
#: input dimensions a box search covers (as for a model file's whole-cube certificate)
MAX_INPUTS = 8
#: the errors a ball evaluation of the target may raise on a box (then that bound is not used)
_FAILS = (Undecided, UndefinedValue, ZeroDivisionError, TypeError, ValueError, ArithmeticError, NotImplementedError)


class GraphTargetError(ValueError):
    """A graph, target, output or box that cannot be used (one line naming the problem)."""


class GraphTargetCertificateError(ValueError):
    """A rejected certificate (one line naming the first problem)."""


class Target:
    """The parsed target ``g`` in ``x1..xd``, its partial derivatives (SymPy's ``diff`` of the parsed
    tree, taken when first needed) and its float enclosure (for steering the search only)."""

    def __init__(self, text: str, d: int):
        self.text, self.d = text, d
        self.g = parse_target(text, d)
        self.xs = variables(d)
        self._dg = None
        self._float = None

    @property
    def dg(self) -> list:
        if self._dg is None:
            self._dg = [sp.diff(self.g, x) for x in self.xs]
        return self._dg

    def floats(self, points: list) -> np.ndarray:
        """Float approximations of ``g`` at exact points (NaN where the floats enclose nothing)."""
        if self._float is None:
            self._float = compile_target(self.g, self.d)
        lo, hi = self._float.enclose_boxes([Box(tuple(p), tuple(p)) for p in points])
        return (np.asarray(lo, dtype=float) + np.asarray(hi, dtype=float)) / 2

    def ball_at(self, ball: BallContext, x):
        """``g(x)`` as a ball at the exact point ``x`` (inside ``ball.scope()``)."""
        return ball.from_sympy(self.g, env={s: ball.convert(v) for s, v in zip(self.xs, x)})


def _upper(v) -> Fraction | None:
    return arb_to_fraction(v.upper()) if v.is_finite() else None


def error_bound(target: Target, box: Box, enc, k: int, prec: int) -> Fraction | None:
    """An exact upper bound of ``|Y_k(x) - g(x)|`` over ``box`` from the enclosure ``enc`` of the
    graph's outputs there (the smaller of the interval and mean-value bounds of the module
    docstring), or None where neither is finite."""
    if enc is None or not enc.lo:
        return None
    ball = BallContext(prec)
    best = None
    with ball.scope():
        env = {s: ball.convert(a).union(ball.convert(b)) for s, a, b in zip(target.xs, box.lo, box.hi)}
        try:
            gB = ball.from_sympy(target.g, env=env)
            best = _upper(abs(ball.convert(enc.lo[k]).union(ball.convert(enc.hi[k])) - gB))
        except _FAILS:
            pass
        tm = enc.vals[k] if enc.vals is not None and enc.method in ("taylor", "linear") else None
        if isinstance(tm, TM) and isinstance(enc.ctx, TaylorContext):
            try:
                e = tm.c - ball.from_sympy(target.g, env={s: ball.convert(v) for s, v in zip(target.xs, box.centre)})
                for i, (dgi, hi) in enumerate(zip(target.dg, box.half)):
                    if hi == 0:
                        continue
                    a = (tm.g[i] if tm.g is not None else ball.convert(0)) - ball.from_sympy(dgi, env=env)
                    e = e + a * ball.convert(0).union(ball.convert(hi)).union(ball.convert(-hi))
                if tm.r is not None:
                    e = e + ball.convert(0).union(tm.r).union(-tm.r)
                mv = _upper(abs(e))
                if mv is not None and (best is None or mv < best):
                    best = mv
            except _FAILS:
                pass
    return best


@dataclass
class GraphTargetResult:
    verdict: Verdict
    leaves: list  # [(Box, bound)] the proved boxes
    max_bound: Fraction | None
    counterexample: dict | None
    undecided: list  # boxes left undecided
    seconds: float
    evaluated: int
    stopped: str | None = None  # why an undecided search ended: "timeout", "max-boxes", "min-width"
    methods: dict = field(default_factory=dict)


class GraphTargetProblem(Problem):
    """``|Y_k - g| <= eps`` on every box, as a problem of :func:`symbounds.core.search.search`: a box
    is proved when :func:`error_bound` is at most ``eps``; a point refutes when ``|Y_k(x) - g(x)| >
    eps`` is decided there (:meth:`refutes`)."""

    stable = True  # a box is decided on its own enclosure alone (met with its parent's)

    def __init__(self, target: Target, k: int, eps: Fraction, prec: int):
        self.target, self.k, self.eps, self.prec = target, k, Fraction(eps), int(prec)
        self.bounds: dict = {}
        self._points: list = []

    def decide(self, box, enc):
        b = error_bound(self.target, box, enc, self.k, self.prec)
        self.bounds[box] = b
        return Verdict.PROVED if b is not None and b <= self.eps else Verdict.UNDECIDED

    def priority(self, box, enc):
        """The box whose bound misses ``eps`` most first (unbounded ones before all)."""
        b = self.bounds.get(box)
        return -math.inf if b is None else -float(b)

    def observe(self, points, ys):
        self._points = list(points)

    def score(self, ys):
        """``eps - |y_k - g|`` at the points last observed (floats, for steering only)."""
        out = np.full(len(ys), np.inf)
        if len(ys) != len(self._points) or ys.ndim != 2 or ys.shape[1] <= self.k:
            return out
        with np.errstate(all="ignore"):
            s = float(self.eps) - np.abs(ys[:, self.k] - self.target.floats(self._points))
        return np.where(np.isnan(s), np.inf, s)

    def objectives(self):
        return []  # the score reads the points observed with its outputs: no descents

    def refutes(self, x, enc):
        """The counterexample record when ``|Y_k(x) - g(x)| > eps`` is decided at the exact point ``x``
        from the rigorous outputs ``enc`` there (exact or balls)."""
        if enc is None or enc.method not in ("exact", "ball"):
            return None
        for prec in (self.prec, 4 * self.prec):
            ball = BallContext(prec)
            with ball.scope():
                try:
                    T = ball.convert(enc.lo[self.k]) if enc.method == "exact" else enc.vals[self.k]
                    err = abs(T - self.target.ball_at(ball, x))
                except _FAILS:
                    return None
                if err > ball.convert(self.eps):
                    value = str(enc.lo[self.k]) if enc.method == "exact" else T.str(20, radius=True)
                    return {"x": [str(v) for v in x], "error": err.str(20, radius=True), "output": value,
                            "checked": enc.method}
                if err <= ball.convert(self.eps):
                    return None
        return None


def _check_graph(graph) -> None:
    if not isinstance(graph, Graph):
        raise GraphTargetError("expected a layer graph (symbounds-graph/1)")


def graph_claim(d: int, k: int, K: int, lo, hi) -> str:
    """The claim's wording, as a certificate records it."""
    unit = all(a == 0 for a in lo) and all(b == 1 for b in hi)
    where = f"[0,1]^{d}" if unit else "the box " + " x ".join(f"[{a}, {b}]" for a, b in zip(lo, hi))
    out = "Y(x)" if K == 1 else f"Y_{k}(x)"
    return f"sup over {where} of |{out} - g(x)| <= eps"


def resolve(graph, target_text: str, output: int | None, lo=None, hi=None) -> tuple:
    """``(Target, k, Box)`` after checking the claim's parts (one line naming the first problem)."""
    _check_graph(graph)
    d, K = graph.input_count, graph.output_count
    if not (1 <= d <= MAX_INPUTS):
        raise GraphTargetError(f"the graph has {d} inputs: a box search covers 1..{MAX_INPUTS}")
    if output is None:
        if K != 1:
            raise GraphTargetError(f"the graph has {K} outputs: pick one with --output K (0..{K - 1}, row by row)")
        output = 0
    if isinstance(output, bool) or not isinstance(output, int) or not (0 <= output < K):
        raise GraphTargetError(f"--output {output}: the graph has {K} output(s), numbered 0..{K - 1} row by row")
    try:
        target = Target(target_text, d)
    except ExprError as e:
        raise GraphTargetError(f"--target: {e} (the graph has {d} input(s))") from None
    if lo is None:
        lo, hi = [Fraction(0)] * d, [Fraction(1)] * d
    if len(lo) != d or len(hi) != d:
        raise GraphTargetError(f"--box has {len(lo)} interval(s), the graph {d} input(s)")
    if any(a > b for a, b in zip(lo, hi)):
        raise GraphTargetError("--box: an interval has LO > HI")
    return target, output, Box(tuple(Fraction(v) for v in lo), tuple(Fraction(v) for v in hi))


def certify_graph(graph, target_text: str, eps, output: int | None = None, lo=None, hi=None, prec: int = 128,
                  max_boxes: int = 200_000, timeout: float | None = None, min_width=Fraction(1, 2**20),
                  progress=None, seed: int = 0) -> GraphTargetResult:
    """Prove, refute or leave undecided ``sup_{x in D} |Y_k(x) - g(x)| <= eps`` (module docstring)."""
    eps = Fraction(eps)
    if eps <= 0:
        raise GraphTargetError("eps must be positive")
    target, k, box = resolve(graph, target_text, output, lo, hi)
    problem = GraphTargetProblem(target, k, eps, prec)
    ev = graph_evaluator(graph, prec)
    smallest = min(Fraction(min_width), box.width() * Fraction(min_width)) if box.width() > 0 else Fraction(min_width)
    res = search(problem, ev, box, Limits(max_boxes=max_boxes, timeout=timeout, min_width=smallest, seed=seed),
                 progress)
    leaves = [(b, problem.bounds[b]) for b, _ in res.decided]
    leaves.sort(key=lambda t: (t[0].lo, t[0].hi))
    undecided = [b for b, _ in res.open] if res.verdict is Verdict.UNDECIDED else []
    return GraphTargetResult(res.verdict, leaves, max((b for _, b in leaves), default=None), res.counterexample,
                             undecided, res.seconds, res.evaluated, res.stopped, dict(res.methods))


def graph_evaluator(graph, prec: int) -> BoxEvaluator:
    """The evaluator of the search and of the certificate's check (the same): Arb Taylor models met
    with balls, exact at a point (the backward linear bounds, an interval of ``Y_k`` alone, are not
    used: the error's bound reads the Taylor model, where ``Y_k`` and ``g`` cancel)."""
    return BoxEvaluator(graph, prec, fast=False, linear=False)


def make_graph_target_certificate(*, version: str, graph, target_text: str, eps, output: int, lo, hi, prec: int,
                                  result: GraphTargetResult) -> dict:
    """The certificate of a :func:`certify_graph` run (any verdict; ``check`` accepts a proved one)."""
    from .boxes import digest
    from .graph_file import graph_to_json

    mj = graph_to_json(graph)
    d, K = graph.input_count, graph.output_count
    return {
        "format": GRAPH_TARGET_FORMAT,
        "symbounds": version,
        "claim": graph_claim(d, output, K, lo, hi),
        "verdict": str(result.verdict),
        "d": d,
        "output": int(output),
        "box": [[str(v) for v in lo], [str(v) for v in hi]],
        "eps": str(Fraction(eps)),
        "target": target_text,
        "prec": int(prec),
        "model_sha256": digest(mj),
        "model": mj,
        "max_bound": None if result.max_bound is None else str(result.max_bound),
        "leaves": [[[str(v) for v in b.lo], [str(v) for v in b.hi], str(bound)] for b, bound in result.leaves],
        "undecided_boxes": [[[str(v) for v in b.lo], [str(v) for v in b.hi]] for b in result.undecided],
        "counterexample": result.counterexample,
        "seconds": f"{float(result.seconds):.3f}",
        "boxes_evaluated": int(result.evaluated),
    }


def _req(cert, key, kind):
    v = cert.get(key)
    if not isinstance(v, kind) or isinstance(v, bool):
        raise GraphTargetCertificateError(f"'{key}' is missing or not a {kind.__name__}")
    return v


def _exact(v, what: str) -> Fraction:
    if not isinstance(v, str):
        raise GraphTargetCertificateError(f"{what}: not an exact number string")
    try:
        return parse_number(v, what)
    except NumberError as e:
        raise GraphTargetCertificateError(str(e)) from None


def check_graph_target_certificate(cert: dict, progress=None) -> dict:
    """Re-verify a graph target certificate (module docstring); returns ``{"leaves", "nodes", "d",
    "max_bound", "eps", "claim"}`` or raises :class:`GraphTargetCertificateError`."""
    from .boxes import digest
    from .graph_file import network_from_json
    from .modelfile import ModelFileError
    from .property_certificate import PropertyCertificateError, walk_bisection

    if not isinstance(cert, dict) or cert.get("format") != GRAPH_TARGET_FORMAT:
        raise GraphTargetCertificateError(f"not a graph target certificate ('format' must be {GRAPH_TARGET_FORMAT!r})")
    if cert.get("verdict") != "proved":
        raise GraphTargetCertificateError(f"its verdict is {str(cert.get('verdict'))[:20]!r}, not 'proved'")
    if cert.get("counterexample") is not None or cert.get("undecided_boxes") != []:
        raise GraphTargetCertificateError("a proved certificate has no counterexample and no undecided box")
    prec = _req(cert, "prec", int)
    if not (53 <= prec <= 4096):
        raise GraphTargetCertificateError("'prec' must be between 53 and 4096 bits")
    mj = _req(cert, "model", dict)
    if digest(mj) != _req(cert, "model_sha256", str):
        raise GraphTargetCertificateError("the model does not match its digest (model_sha256)")
    try:
        graph = network_from_json(mj)
    except (ModelFileError, ValueError) as e:
        raise GraphTargetCertificateError(str(e).splitlines()[0]) from None
    if not isinstance(graph, Graph):
        raise GraphTargetCertificateError("the model is not a layer graph")
    d, k = _req(cert, "d", int), _req(cert, "output", int)
    if d != graph.input_count:
        raise GraphTargetCertificateError(f"'d' is {d}, the graph has {graph.input_count} inputs")
    box = _req(cert, "box", list)
    if len(box) != 2 or not all(isinstance(e, list) and len(e) == d for e in box):
        raise GraphTargetCertificateError(f"'box' must be [[lo ...], [hi ...]] of {d} exact numbers each")
    lo = [_exact(v, "box") for v in box[0]]
    hi = [_exact(v, "box") for v in box[1]]
    eps = _exact(cert.get("eps"), "eps")
    if eps <= 0:
        raise GraphTargetCertificateError("eps must be positive")
    text = _req(cert, "target", str)
    try:
        target, k, root = resolve(graph, text, k, lo, hi)
    except GraphTargetError as e:
        raise GraphTargetCertificateError(str(e)) from None
    if cert.get("claim") != graph_claim(d, k, graph.output_count, lo, hi):
        raise GraphTargetCertificateError("the claim's wording is not the claim checked")
    raw = _req(cert, "leaves", list)
    if not raw:
        raise GraphTargetCertificateError("'leaves' lists no box")
    leaves, bounds = [], []
    for i, obj in enumerate(raw):
        if not isinstance(obj, list) or len(obj) != 3 or not all(isinstance(e, list) and len(e) == d for e in obj[:2]):
            raise GraphTargetCertificateError(f"leaf {i}: expected [[lo ...], [hi ...], bound]")
        b = Box(tuple(_exact(v, f"leaf {i}") for v in obj[0]), tuple(_exact(v, f"leaf {i}") for v in obj[1]))
        bound = _exact(obj[2], f"leaf {i}")
        if not (0 <= bound <= eps):
            raise GraphTargetCertificateError(f"leaf {i}: its bound {bound} is not in [0, eps]")
        leaves.append(b)
        bounds.append(bound)
    if _exact(cert.get("max_bound"), "max_bound") != max(bounds):
        raise GraphTargetCertificateError("max_bound is not the largest leaf bound")
    ev = graph_evaluator(graph, prec)

    def leaf_ok(i, box, enc):
        again = error_bound(target, box, enc, k, prec)
        return again is not None and again <= bounds[i]

    try:
        nodes = walk_bisection(root, leaves, ev, leaf_ok, progress,
                               "the recomputed bound of |Y - g| is above the recorded one")
    except PropertyCertificateError as e:
        raise GraphTargetCertificateError(str(e)) from None
    return {"leaves": len(leaves), "nodes": nodes, "d": d, "max_bound": max(bounds), "eps": eps,
            "claim": cert["claim"], "target": text}
