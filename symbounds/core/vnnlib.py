"""VNN-LIB properties (the box-and-linear-constraints subset) and their verification.

A property file declares the inputs ``X_0 .. X_{m-1}`` and outputs ``Y_0 .. Y_{k-1}``
(``(declare-const X_0 Real)``), bounds every input from both sides
(``(assert (>= X_0 0.1))``, ``(assert (<= X_0 0.5))``), and states the **unsafe** output region
``U`` by linear constraints on the outputs: ``(assert (<= Y_0 0.3))``, and disjunctions of
conjunctions ``(assert (or (and (>= Y_0 Y_1) (<= Y_0 2)) (and ...)))``.  Several assertions are
conjoined.  Terms are linear: numbers, variables, ``(+ a b ...)``, ``(- a b)``, ``(- a)``,
``(* c a)`` with a number ``c``.

The property is **proved** when no input of the box reaches ``U``: the box is cut into sub-boxes,
the outputs are enclosed on each with Taylor models (:func:`symbounds.core.bound.evaluate_box`),
and on each sub-box every disjunct of ``U`` has one constraint whose enclosure lies entirely on
its false side.  It is **refuted** by an input (a sub-box centre, an exact rational point) where
a ball evaluation of the outputs decides every constraint of one disjunct true; **undecided**
otherwise.

The reader is a small parser over the s-expression grammar: numbers are read exactly
(:func:`symbounds.core.exact.parse_number`), nothing is evaluated, and anything outside the subset
(an input in an output constraint, a non-linear term, an unbounded input) is rejected with one line.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import product

from .bound import BoundUndecided, check_box, enclosure, evaluate_box, outputs_at
from .contexts import BallContext
from .exact import NumberError, parse_number
from .transformer import Transformer

__all__ = ["SpecError", "Constraint", "Spec", "VerifyResult", "parse_vnnlib", "load_vnnlib", "verify"]

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
            f = cmd[1]
            if isinstance(f, list) and f and f[0] == "or":
                disj = []
                for part in f[1:]:
                    conj = part[1:] if isinstance(part, list) and part and part[0] == "and" else [part]
                    cs = []
                    for a in conj:
                        for lin, strict in _atoms(a, declared):
                            if _kind(lin) == "input":
                                raise SpecError("input constraints inside (or ...) are not supported")
                            cs.append(_constraint(lin, strict))
                    disj.append(cs)
                if not disj:
                    raise SpecError("(or) with no alternatives")
                disjunctions.append(disj)
                continue
            conj = f[1:] if isinstance(f, list) and f and f[0] == "and" else [f]
            for a in conj:
                for lin, strict in _atoms(a, declared):
                    kind = _kind(lin)
                    if kind == "output" or kind == "constant":
                        common.append(_constraint(lin, strict))
                        continue
                    names = [k for k, v in lin.items() if k != 1 and v != 0]
                    if len(names) != 1:
                        raise SpecError(f"input constraint {_show(a)}: only bounds of one input are supported")
                    x, c = names[0], lin[names[0]]
                    val = -lin.get(1, Fraction(0)) / c  # c x + k <= 0  <=>  x <= -k/c (c > 0)
                    if c > 0:
                        hi[x] = min(hi.get(x, val), val)
                    else:
                        lo[x] = max(lo.get(x, val), val)
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


def load_vnnlib(path: str) -> Spec:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_PROPERTY_BYTES + 1)
    except OSError as e:
        raise SpecError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a UTF-8 text file") from None
    return parse_vnnlib(text)


# ------------------------------------------------------------------------------------------
# verifying


@dataclass
class VerifyResult:
    verdict: str  # proved / refuted / undecided
    counterexample: dict | None
    boxes: int  # sub-boxes evaluated
    undecided: list = field(default_factory=list)
    seconds: float = 0.0
    methods: set = field(default_factory=set)


def _value(ctx, c: Constraint, outs):
    with ctx.scope():
        v = ctx.convert(c.const)
        for j, a in c.coeffs:
            v = v + ctx.convert(a) * outs[j]
        return v


def _false_on(ctx, c: Constraint, outs) -> bool:
    lo, _ = enclosure(ctx, _value(ctx, c, outs))
    return lo >= 0 if c.strict else lo > 0


def counterexample_at(model: Transformer, spec: Spec, x, prec: int):
    """``(outputs, disjunct index)`` if a ball evaluation at the exact point ``x`` decides every
    constraint of one disjunct of the unsafe region true, else None."""
    if any(not (a <= v <= b) for a, v, b in zip(spec.lo, x, spec.hi)):
        return None
    outs = outputs_at(model, x, prec)
    ball = BallContext(prec)
    for i, conj in enumerate(spec.unsafe):
        ok = True
        for c in conj:
            _, hi = ball.to_fraction_bounds(_value(ball, c, outs))
            if not (hi < 0 if c.strict else hi <= 0):
                ok = False
                break
        if ok:
            return outs, i
    return None


def verify(model: Transformer, spec: Spec, prec: int = 128, max_boxes: int = 20000,
           min_width=Fraction(1, 2**20)) -> VerifyResult:
    """Prove, refute or leave undecided that no input of the spec's box reaches the unsafe region."""
    t0 = time.perf_counter()
    box = check_box(model, spec.lo, spec.hi)
    n_out = None
    queue, undecided, evaluated = [box], [], 0
    res = VerifyResult("proved", None, 0)
    while queue:
        b = queue.pop()
        evaluated += 1
        try:
            ctx, outs, method = evaluate_box(model, b, prec)
            res.methods.add(method)
            if n_out is None:
                n_out = len(outs)
                used = max((j for conj in spec.unsafe for c in conj for j, _ in c.coeffs), default=-1)
                if spec.outputs != n_out or used >= n_out:
                    raise SpecError(f"the property has {spec.outputs} outputs, the model has {n_out}")
            safe = all(any(_false_on(ctx, c, outs) for c in conj) for conj in spec.unsafe)
        except BoundUndecided:
            safe = False
        if safe:
            continue
        hit = counterexample_at(model, spec, b.centre, prec)
        if hit is not None:
            outs, i = hit
            res.verdict = "refuted"
            res.counterexample = {"x": [str(v) for v in b.centre], "disjunct": i,
                                  "y": [v.str(20, radius=True) for v in outs]}
            break
        if b.width() / 2 < min_width or evaluated + len(queue) >= max_boxes:
            undecided.append(b)
        else:
            queue.extend(b.split())
    if res.verdict != "refuted" and undecided:
        res.verdict = "undecided"
    res.undecided = undecided
    res.boxes = evaluated
    res.seconds = time.perf_counter() - t0
    return res
