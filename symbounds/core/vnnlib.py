"""VNN-LIB properties (the box-and-linear-constraints subset) and their verification.

A property file declares the inputs ``X_0 .. X_{m-1}`` and outputs ``Y_0 .. Y_{k-1}``
(``(declare-const X_0 Real)``), bounds every input from both sides
(``(assert (>= X_0 0.1))``, ``(assert (<= X_0 0.5))``), and states the **unsafe** output region
``U`` by linear constraints on the outputs: ``(assert (<= Y_0 0.3))``, and disjunctions of
conjunctions ``(assert (or (and (>= Y_0 Y_1) (<= Y_0 2)) (and ...)))``.  Several assertions are
conjoined.  Terms are linear: numbers, variables, ``(+ a b ...)``, ``(- a b)``, ``(- a)``,
``(* c a)`` with a number ``c``.

The property is **proved** when no input of the box reaches ``U``: the box is cut into sub-boxes
by the best-first search of :mod:`symbounds.core.search` (the sub-box that may reach deepest into
``U`` first), the outputs are enclosed on each (float or Arb Taylor models, balls), and on each
sub-box every disjunct of ``U`` has one constraint whose enclosure lies entirely on its false
side.  It is **refuted** by an input -- an exact rational point, found by random sampling, a
gradient descent or as a sub-box centre -- where an exact evaluation (when the network admits
one: rational weights, ReLU, hardmax) or a ball evaluation of the outputs decides every
constraint of one disjunct true; **undecided** otherwise (``stopped`` says whether by the box
limit, the timeout or the smallest width).

The reader is a small parser over the s-expression grammar: numbers are read exactly
(:func:`symbounds.core.exact.parse_number`), nothing is evaluated, and anything outside the subset
(an input in an output constraint, a non-linear term, an unbounded input) is rejected with one line.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import product

import numpy as np

from .bound import check_box
from .claims import Verdict
from .contexts import BallContext
from .exact import NumberError, parse_number
from .graph import Graph
from .search import BoxEvaluator, Limits, Problem, float_ends, output_count, search
from .transformer import Transformer

__all__ = ["PropertyProblem", "StagedEvaluator", "property_evaluator", "network_outputs", "read_vnnlib_text", "SpecError", "Constraint", "Spec", "VerifyResult", "parse_vnnlib", "load_vnnlib", "verify"]

MAX_PROPERTY_BYTES = 4 * 2**20
MAX_DISJUNCTS = 4096
_VAR = re.compile(r"^([XY])_([0-9]{1,6})$")


class SpecError(ValueError):
    """A property file outside the supported subset (one line naming the problem)."""


@dataclass(frozen=True)
class Constraint:
    """``sum_j coeffs[j] Y_j + const <= 0`` (``< 0`` when ``strict``)."""

    coeffs: tuple  # ((j, Fraction), ...)
    const: Fraction
    strict: bool

    def text(self) -> str:
        terms = " + ".join(f"{c}*Y_{j}" for j, c in self.coeffs) or "0"
        return f"{terms} + {self.const} {'<' if self.strict else '<='} 0"


@dataclass
class Spec:
    lo: tuple  # input lower ends, X_0 ..
    hi: tuple
    outputs: int  # declared outputs
    unsafe: list  # disjunction of conjunctions (lists of Constraint)


# ------------------------------------------------------------------------------------------
# reading


def _tokens(text: str):
    out = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == ";":
            while i < n and text[i] != "\n":
                i += 1
        elif ch in "()":
            out.append(ch)
            i += 1
        elif ch.isspace():
            i += 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in "();":
                j += 1
            out.append(text[i:j])
            i = j
    return out


def _sexprs(tokens):
    """The top-level s-expressions as nested lists (iterative: no recursion limit to hit)."""
    stack = [[]]
    for t in tokens:
        if t == "(":
            stack.append([])
        elif t == ")":
            if len(stack) == 1:
                raise SpecError("unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(t)
    if len(stack) != 1:
        raise SpecError("unbalanced '(': the file ends inside an expression")
    return stack[0]


def _show(e) -> str:
    s = e if isinstance(e, str) else "(" + " ".join(_show(x) for x in e) + ")"
    return s if len(s) <= 60 else s[:57] + "..."


def _term(e, declared) -> dict:
    """A linear term as ``{name or 1: Fraction}``."""
    if isinstance(e, str):
        m = _VAR.match(e)
        if m:
            if e not in declared:
                raise SpecError(f"{e} is used but not declared")
            return {e: Fraction(1)}
        try:
            return {1: parse_number(e)}
        except NumberError:
            raise SpecError(f"{e[:40]!r} is neither a declared variable nor a number") from None
    if not e or not isinstance(e[0], str):
        raise SpecError(f"unsupported term {_show(e)}")
    op, args = e[0], [_term(a, declared) for a in e[1:]]
    if op == "+" and args:
        return _lin_sum(args)
    if op == "-" and len(args) == 1:
        return {k: -v for k, v in args[0].items()}
    if op == "-" and len(args) >= 2:
        return _lin_sum([args[0]] + [{k: -v for k, v in a.items()} for a in args[1:]])
    if op == "*" and len(args) == 2:
        a, b = args
        if set(a) == {1}:
            return {k: v * a[1] for k, v in b.items()}
        if set(b) == {1}:
            return {k: v * b[1] for k, v in a.items()}
        raise SpecError(f"non-linear term {_show(e)}")
    raise SpecError(f"unsupported term {_show(e)} (linear terms: + - * with a number)")


def _lin_sum(terms) -> dict:
    out: dict = {}
    for t in terms:
        for k, v in t.items():
            out[k] = out.get(k, Fraction(0)) + v
    return out


def _atoms(e, declared) -> list:
    """A comparison as ``[(linear dict of lhs - rhs, strict, kind)]`` meaning ``lhs - rhs <= 0``."""
    if not isinstance(e, list) or len(e) != 3 or e[0] not in ("<=", ">=", "<", ">", "="):
        raise SpecError(f"unsupported formula {_show(e)} (comparisons: <= >= < > =)")
    op, a, b = e[0], _term(e[1], declared), _term(e[2], declared)
    diff = _lin_sum([a, {k: -v for k, v in b.items()}])
    neg = {k: -v for k, v in diff.items()}
    if op in ("<=", "<"):
        return [(diff, op == "<")]
    if op in (">=", ">"):
        return [(neg, op == ">")]
    return [(diff, False), (neg, False)]


def _kind(lin) -> str:
    names = {k for k, v in lin.items() if k != 1 and v != 0}
    xs = {k for k in names if k.startswith("X")}
    if xs and len(names) > len(xs):
        raise SpecError("a constraint mixes inputs and outputs (not in the supported subset)")
    if xs:
        return "input"
    if names:
        return "output"
    return "constant"


def _constraint(lin, strict) -> Constraint:
    coeffs = tuple(sorted((int(k[2:]), v) for k, v in lin.items() if k != 1 and v != 0))
    return Constraint(coeffs, lin.get(1, Fraction(0)), strict)


def _disjunction(f, declared) -> list:
    """``(or (and a ...) b ...)`` as a list of conjunctions of output constraints."""
    disj = []
    for part in f[1:]:
        conj = part[1:] if isinstance(part, list) and part and part[0] == "and" else [part]
        cs = []
        for a in conj:
            for lin, strict in _atoms(a, declared):
                if _kind(lin) == "input":
                    raise SpecError("input constraints inside (or ...) (several input regions) are not "
                                    "supported: write one property file per region")
                cs.append(_constraint(lin, strict))
        disj.append(cs)
    if not disj:
        raise SpecError("(or) with no alternatives")
    return disj


def _assert(f, declared, lo, hi, common, disjunctions) -> None:
    """One asserted formula: a conjunction (``and``, nested or not) of input bounds, output
    constraints and disjunctions of conjunctions of output constraints."""
    stack = [f]
    while stack:
        f = stack.pop()
        if isinstance(f, list) and f and f[0] == "and":
            stack.extend(reversed(f[1:]))
            continue
        if isinstance(f, list) and f and f[0] == "or":
            disjunctions.append(_disjunction(f, declared))
            continue
        for lin, strict in _atoms(f, declared):
            kind = _kind(lin)
            if kind == "output" or kind == "constant":
                common.append(_constraint(lin, strict))
                continue
            names = [k for k, v in lin.items() if k != 1 and v != 0]
            if len(names) != 1:
                raise SpecError(f"input constraint {_show(f)}: only bounds of one input are supported")
            x, c = names[0], lin[names[0]]
            val = -lin.get(1, Fraction(0)) / c  # c x + k <= 0  <=>  x <= -k/c (c > 0)
            if c > 0:
                hi[x] = min(hi.get(x, val), val)
            else:
                lo[x] = max(lo.get(x, val), val)


def parse_vnnlib(text: str) -> Spec:
    """Read a property (see the module docstring); raises :class:`SpecError`."""
    try:
        return _parse(text)
    except RecursionError:
        raise SpecError("expressions nested too deeply") from None


def _parse(text: str) -> Spec:
    if len(text) > MAX_PROPERTY_BYTES:
        raise SpecError(f"property file too large ({len(text)} characters)")
    declared: dict = {}
    lo: dict = {}
    hi: dict = {}
    common: list = []  # output constraints asserted outright
    disjunctions: list = []  # each a list of conjunctions
    for cmd in _sexprs(_tokens(text)):
        if not isinstance(cmd, list) or not cmd or not isinstance(cmd[0], str):
            raise SpecError(f"expected a command, found {_show(cmd)}")
        head = cmd[0]
        if head == "declare-const":
            if len(cmd) != 3 or not isinstance(cmd[1], str) or cmd[2] != "Real" or not _VAR.match(cmd[1]):
                raise SpecError(f"unsupported declaration {_show(cmd)} (use (declare-const X_0 Real))")
            if cmd[1] in declared:
                raise SpecError(f"{cmd[1]} is declared twice")
            declared[cmd[1]] = True
        elif head == "assert":
            if len(cmd) != 2:
                raise SpecError(f"assert takes one formula: {_show(cmd)}")
            _assert(cmd[1], declared, lo, hi, common, disjunctions)
        elif head in ("set-logic", "set-info", "check-sat", "exit", "set-option"):
            continue
        else:
            raise SpecError(f"unsupported command {head[:40]!r}")
    xs = sorted((k for k in declared if k.startswith("X")), key=lambda k: int(k[2:]))
    ys = sorted((k for k in declared if k.startswith("Y")), key=lambda k: int(k[2:]))
    if not xs:
        raise SpecError("no inputs declared (declare-const X_0 Real)")
    if [int(k[2:]) for k in xs] != list(range(len(xs))) or [int(k[2:]) for k in ys] != list(range(len(ys))):
        raise SpecError("inputs and outputs must be numbered X_0, X_1, ... and Y_0, Y_1, ... without gaps")
    for x in xs:
        if x not in lo or x not in hi:
            raise SpecError(f"{x} needs a lower and an upper bound")
        if lo[x] > hi[x]:
            raise SpecError(f"{x}: the bounds are empty ({lo[x]} > {hi[x]})")
    total = 1
    for d in disjunctions:
        total *= len(d)
        if total > MAX_DISJUNCTS:
            raise SpecError(f"the unsafe region has more than {MAX_DISJUNCTS} alternatives")
    unsafe = [common + [c for conj in choice for c in conj] for choice in product(*disjunctions)]
    return Spec(tuple(lo[x] for x in xs), tuple(hi[x] for x in xs), len(ys), unsafe)


def read_vnnlib_text(path: str) -> str:
    """The text of a property file (``.gz`` decompressed, both read bounded)."""
    from .shipped import read_shipped

    try:
        return read_shipped(path, SpecError, MAX_PROPERTY_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a UTF-8 text file") from None


def load_vnnlib(path: str) -> Spec:
    return parse_vnnlib(read_vnnlib_text(path))


# ------------------------------------------------------------------------------------------
# verifying


@dataclass
class VerifyResult:
    verdict: Verdict
    counterexample: dict | None
    boxes: int  # sub-boxes evaluated
    undecided: list = field(default_factory=list)
    seconds: float = 0.0
    methods: set = field(default_factory=set)
    stopped: str | None = None  # why an undecided search ended: "timeout", "max-boxes" or "min-width"
    proved_fraction: Fraction = Fraction(0)  # of the input box's volume (sides of positive width)
    leaves: list = field(default_factory=list)  # the decided sub-boxes (a proof's cells, for its certificate)


class _Property(Problem):
    """No input of the box reaches the unsafe region: a box is decided when on it every disjunct
    has a constraint whose enclosure lies on its false side; a point refutes when its rigorous
    outputs make every constraint of one disjunct true.

    :attr:`c_rows` lists the left sides ``c`` (dense, without the constant) of the constraints
    over two or more outputs, once each: an evaluator given them (``BoxEvaluator(...,
    objectives=...)``) bounds each ``<c, Y>`` on its own, a layer graph's backward linear pass
    starting from ``c`` (:mod:`symbounds.core.linear_graph`), where correlated outputs cancel."""

    def __init__(self, spec: Spec, k: int):
        self.spec = spec
        self.k = k
        self.rows = [[(np.array([float(a) for a in _dense(c, k)]), float(c.const), c) for c in conj]
                     for conj in spec.unsafe]
        self._slot: dict = {}
        self.c_rows: list = []
        for conj in spec.unsafe:
            for c in conj:
                key = tuple(_dense(c, k))
                if len(c.coeffs) > 1 and key not in self._slot:
                    self._slot[key] = len(self.c_rows)
                    self.c_rows.append(list(key))

    def _range(self, c: Constraint, enc) -> tuple[Fraction, Fraction]:
        """Exact ends of the constraint's value over the box: interval arithmetic on the outputs'
        enclosures, met with the Taylor models' own (which keep the outputs' correlation) and with
        the enclosure's own bound of ``<c, Y>`` (:attr:`c_rows`), the tightest of the three."""
        lo = hi = c.const
        for j, a in c.coeffs:
            lo += a * (enc.lo[j] if a > 0 else enc.hi[j])
            hi += a * (enc.hi[j] if a > 0 else enc.lo[j])
        if enc.vals is not None and enc.method in ("taylor", "linear") and len(c.coeffs) > 1:
            tlo, thi = enclosure(enc.ctx, _value(enc.ctx, c, enc.vals))
            lo, hi = max(lo, tlo), min(hi, thi)
        objs = getattr(enc, "objectives", None)
        if objs is not None and len(c.coeffs) > 1:
            slot = self._slot.get(tuple(_dense(c, self.k)))
            if slot is not None and slot < len(objs):
                olo, ohi = objs[slot]
                lo, hi = max(lo, olo + c.const), min(hi, ohi + c.const)
        return lo, hi

    def decide(self, box, enc):
        if enc is None:
            return Verdict.UNDECIDED
        for conj in self.spec.unsafe:
            if not any((lambda lo: lo >= 0 if c.strict else lo > 0)(self._range(c, enc)[0]) for c in conj):
                return Verdict.UNDECIDED
        return Verdict.PROVED

    def priority(self, box, enc):
        """The deepest a disjunct may reach into the unsafe region on the box (most negative first)."""
        if enc is None:
            return -math.inf
        lo, hi = float_ends(enc)
        best = math.inf
        for conj in self.rows:
            worst = -math.inf
            for w, k0, _ in conj:
                worst = max(worst, k0 + float(np.sum(np.where(w > 0, w * np.array(lo), w * np.array(hi)))))
            best = min(best, worst)
        return best

    def score(self, ys):
        """Per point: ``min`` over disjuncts of the ``max`` constraint value (``<= 0``: unsafe)."""
        out = np.full(len(ys), np.inf)
        if ys.shape[1] != self.k:
            return out
        for conj in self.rows:
            m = np.full(len(ys), -np.inf)
            for w, k0, _ in conj:
                m = np.maximum(m, ys @ w + k0)
            out = np.minimum(out, m)
        return np.where(np.isnan(out), np.inf, out)

    def refutes(self, x, enc):
        for i, conj in enumerate(self.spec.unsafe):
            if all((lambda hi: hi < 0 if c.strict else hi <= 0)(self._range(c, enc)[1]) for c in conj):
                if enc.method == "exact":
                    y = [str(v) for v in enc.lo]
                else:
                    y = [v.str(20, radius=True) for v in enc.vals]
                return {"x": [str(v) for v in x], "disjunct": i, "y": y, "checked": enc.method}
        return None


#: The problem a property's search decides (public: its certificate's check decides each leaf with it).
PropertyProblem = _Property


def _value(ctx, c: Constraint, outs):
    """The constraint's left side ``sum_j a_j Y_j + const`` in ``ctx``."""
    with ctx.scope():
        v = ctx.convert(c.const)
        for j, a in c.coeffs:
            v = v + ctx.convert(a) * outs[j]
        return v


def _dense(c: Constraint, k: int) -> list:
    out = [Fraction(0)] * k
    for j, a in c.coeffs:
        out[j] = a
    return out


def enclosure(ctx, v) -> tuple[Fraction, Fraction]:
    """Exact ``(lower, upper)`` of a Taylor model's range."""
    return BallContext(ctx.prec).to_fraction_bounds(v.range())


def network_outputs(model, m: int) -> int:
    """How many outputs ``Y_j`` the network has on ``m`` inputs: a layer graph's every entry of its
    output, row by row (``tokens x out_width``); a model file's readout, or every entry of ``Z_L``."""
    return model.output_count if isinstance(model, Graph) else output_count(model, m)


def counterexample_at(model: Transformer, spec: Spec, x, prec: int):
    """The counterexample record if the outputs at the exact point ``x`` (exactly where the
    network admits it, else in balls) make every constraint of one disjunct true, else None."""
    if any(not (a <= v <= b) for a, v, b in zip(spec.lo, x, spec.hi)):
        return None
    ev = BoxEvaluator(model, prec, fast=False)
    enc = ev.at(tuple(Fraction(v) for v in x))
    return None if enc is None else _Property(spec, len(enc.lo)).refutes(x, enc)


class StagedEvaluator(BoxEvaluator):
    """A layer graph's evaluator for a property: each box is enclosed in Arb Taylor models and balls
    first (met with its parent's), and only where ``decide`` leaves that enclosure undecided is it
    met with the backward linear bounds as well (of every output and, with ``rows``, of each row
    ``c``: :func:`symbounds.core.search.meet_graph_linear`) -- the linear relaxations of smooth
    activations cost tens of Taylor passes, and most boxes of an easy property need none.  A
    deterministic rule, so the certificate's check re-derives the same enclosures."""

    def __init__(self, model, prec: int, decide, rows: list | None, linear: bool | str = "auto"):
        super().__init__(model, prec, linear=linear, objectives=rows)
        self.staged, self.graph_linear = self.graph_linear, False
        self._decide = decide

    def enclose(self, boxes, parents=None, deadline=None):
        out = super().enclose(boxes, parents, deadline)
        if not self.staged:
            return out
        from .search import meet_graph_linear

        for i, (box, e) in enumerate(zip(boxes, out)):
            if deadline is not None and time.monotonic() >= deadline:
                break
            if e is None or e.method == "exact" or self._decide(box, e) is Verdict.PROVED:
                continue
            met = meet_graph_linear(self.model, box, self.prec, e, self.objectives)
            if met is not None and met is not e:
                if met.method != e.method:
                    self.counts[e.method] -= 1
                    self.counts[met.method] = self.counts.get(met.method, 0) + 1
                out[i] = met
        return out


def property_evaluator(model, problem: _Property, prec: int, linear: bool | str = "auto",
                       objectives: bool = True) -> BoxEvaluator:
    """The evaluator of a property's search, and of its certificate's check (the same, so that the
    check re-derives every leaf): for a layer graph, :class:`StagedEvaluator` -- its Arb Taylor
    models and balls, met where they leave a box undecided with the backward linear bounds
    (``linear``: "auto" for small graphs, :func:`symbounds.core.linear_graph.small_graph`; False:
    none) started from the outputs and, with ``objectives``, from each constraint's row ``c`` over
    several outputs (:attr:`_Property.c_rows`); a model file's as before (no linear bounds)."""
    if not isinstance(model, Graph):
        return BoxEvaluator(model, prec)
    return StagedEvaluator(model, prec, problem.decide, problem.c_rows if objectives else None, linear)


def verify(model: Transformer, spec: Spec, prec: int = 128, max_boxes: int = 20000,
           min_width=Fraction(1, 2**20), timeout: float | None = None, progress=None,
           seed: int = 0, linear: bool | str = "auto", objectives: bool = True) -> VerifyResult:
    """Prove, refute or leave undecided that no input of the spec's box reaches the unsafe region
    (best-first search, :func:`symbounds.core.search.search`; the evaluator
    :func:`property_evaluator`: ``linear`` and ``objectives`` choose a layer graph's linear bounds)."""
    box = check_box(model, spec.lo, spec.hi)
    k = network_outputs(model, len(box.lo))
    used = max((j for conj in spec.unsafe for c in conj for j, _ in c.coeffs), default=-1)
    if spec.outputs != k or used >= k:
        raise SpecError(f"the property has {spec.outputs} outputs, the model has {k}")
    # the smallest width relative to the property's box too: a box narrower than 2^-20 is still split
    smallest = min(Fraction(min_width), box.width() * Fraction(min_width)) if box.width() > 0 else Fraction(min_width)
    problem = _Property(spec, k)
    res = search(problem, property_evaluator(model, problem, prec, linear, objectives), box,
                 Limits(max_boxes=max_boxes, timeout=timeout, min_width=smallest, seed=seed), progress)
    return VerifyResult(res.verdict, res.counterexample, res.evaluated, [b for b, _ in res.open]
                        if res.verdict is Verdict.UNDECIDED else [], res.seconds, set(res.methods),
                        res.stopped, res.decided_fraction, [b for b, _ in res.decided])
