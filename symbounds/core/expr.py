"""Safe parser for user-written target functions.

Turns a string such as ``"sin(2*pi*x1) + 0.5*x2^2"`` into a SymPy expression in
the input symbols x1..xd.  User text is never handed to Python's evaluator or
to SymPy's string parser: a hand-written tokenizer feeds a recursive-descent
parser, and numbers are converted to exact rationals from their digits.

Grammar (EBNF; whitespace between tokens is ignored)::

    expr     = term , { ( "+" | "-" ) , term } ;
    term     = unary , { ( "*" | "/" ) , unary } ;
    unary    = ( "+" | "-" ) , unary | power ;
    power    = atom , [ ( "^" | "**" ) , unary ] ;          (* right-assoc. *)
    atom     = number | "pi" | variable | call | "(" , expr , ")" ;
    call     = function , "(" , [ expr , { "," , expr } ] , ")" ;
    function = "abs" | "sqrt" | "exp" | "log" | "sin" | "cos"   (* 1 arg  *)
             | "min" | "max" ;                                  (* >= 2   *)
    variable = "x" , digit - "0" , { digit } ;                  (* x1..xd *)
    number   = ( digits , [ "." , [ digits ] ] | "." , digits ) ,
               [ ( "e" | "E" ) , [ "+" | "-" ] , digits ] ;

So ``-x1^2`` is ``-(x1^2)``, ``2^-1`` is 1/2 and ``2^3^2`` is 2^9.  Numbers
are exact (``0.1`` is 1/10).  Limits keep hostile input cheap: at most 1000
characters, nesting depth 100 (parentheses, calls, signs, exponents), 1000
digits per literal, decimal exponents and power exponents of magnitude at most
1000, exact numbers of at most 4000 bits, constants inside exp/sin/cos
arguments at most 2^64, powers of constant sums with at most 100 terms when
expanded, SymPy trees at most 100 deep and at most 32 min/max arguments in
total.  Division by an exact zero, results containing zoo/nan/oo
and non-real constants (sqrt(-1), log(-1), (-8)^(1/3)) are rejected.  Every
failure is an ExprError.

The target is the expression as written: when SymPy's automatic simplification would remove a
partial operation on a variable (``x1/x1 -> 1``, ``exp(log(x1)) -> x1``, ``log(x1) - log(x1) -> 0``),
the unsimplified tree is returned, so that evaluating it at a point where it is undefined raises
(see ``symbounds.core.contexts.UndefinedValue``) instead of proving something about ``1``.
Targets without such a loss (polynomials, sines, ``abs``, ``min``/``max``, ``sqrt(x1^2 + x2^2)``)
are SymPy's usual simplified expressions.
"""
from __future__ import annotations

import math
import re
import string

import sympy as sp

from .contexts import nonnegative_by_construction, positive_by_construction

__all__ = ["ExprError", "variables", "parse_target", "target_function", "input_names"]

MAX_LEN, MAX_DEPTH, MAX_HEIGHT = 1000, 100, 100  # characters, parser nesting, SymPy tree height
MAX_DIGITS, MAX_EXP, MAX_BITS = 1000, 1000, 4000  # literal digits, |exponent|, bits per number
MAX_MINMAX = 32  # min/max arguments in total (SymPy compares them pairwise: slow)
MAX_ARG = 2**64  # constants inside exp/sin/cos arguments
MAX_TERMS = 100  # terms in the multinomial expansion of (constant sum)^k
_ALLOWED = frozenset(string.ascii_letters + string.digits + ".+-*/^()," + " \t\n\r\f\v")
_TOKEN = re.compile(r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
                    r"|(?P<name>[A-Za-z][A-Za-z0-9]*)|(?P<op>\*\*|[-+*/^(),]))", re.ASCII)
_NUMBER = re.compile(r"(\d*)(?:\.(\d*))?(?:[eE]([+-]?)(\d+))?", re.ASCII)
_VAR = re.compile(r"x([1-9][0-9]*)", re.ASCII)
_UNARY = {"abs": sp.Abs, "sqrt": None, "exp": None, "log": sp.log, "sin": sp.sin, "cos": sp.cos}
_NARY = {"min": sp.Min, "max": sp.Max}
_BAD = (sp.S.NaN, sp.S.ComplexInfinity, sp.S.Infinity, sp.S.NegativeInfinity)


class ExprError(ValueError):
    """One-line message naming the problem (and the offending token/position)."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).splitlines()))


def _check_dim(d) -> None:
    if isinstance(d, bool) or not isinstance(d, int) or d < 0:
        raise ExprError(f"invalid dimension {d!r}")


def variables(d: int) -> tuple[sp.Symbol, ...]:
    """The input symbols x1..xd (real); equal symbols on every call."""
    _check_dim(d)
    return tuple(sp.Symbol(f"x{i}", real=True) for i in range(1, d + 1))


def _is_input(sym, d: int) -> bool:
    m = _VAR.fullmatch(sym.name) if isinstance(sym, sp.Symbol) else None
    return m is not None and int(m.group(1)) <= d and sym == sp.Symbol(sym.name, real=True)


def _rationals(expr):
    return [a for a in expr.atoms() if a.is_Rational]


def _bits(expr) -> int:
    return max((max(abs(r.p).bit_length(), r.q.bit_length()) for r in _rationals(expr)), default=0)


def _heights(expr) -> dict:
    """The height of every node of ``expr``, in post-order (an iterative walk: SymPy trees can be
    deep)."""
    height, stack = {}, [expr]
    while stack:
        node = stack[-1]
        todo = [a for a in node.args if a not in height]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        height[node] = 1 + max((height[a] for a in node.args), default=0)
    return height


def _checked(expr):
    """Reject results that are undefined, infinite, non-real, too deep or oversized."""
    height = _heights(expr)
    for node in height:
        if any(node is bad for bad in _BAD):
            raise ExprError("expression is undefined or infinite (e.g. log(0))")
        if node.is_Rational and max(abs(node.p).bit_length(), node.q.bit_length()) > MAX_BITS:
            raise ExprError("number too large")
        if (node.is_Pow and node.base.is_Add and node.base.is_number and node.exp.is_Rational
                and math.comb(len(node.base.args) + abs(node.exp.p) // node.exp.q - 1,
                              len(node.base.args) - 1) > MAX_TERMS):
            raise ExprError("power of a constant sum too large (SymPy may expand it)")
        if node is sp.I or (node.is_Pow and node.base.is_number and node.exp.is_number
                            and not node.exp.is_integer and node.base.is_extended_negative):
            raise ExprError("constant is not real (e.g. sqrt(-1) or log(-1))")
    if height[expr] > MAX_HEIGHT:
        raise ExprError(f"expression tree too deep (limit {MAX_HEIGHT})")
    return expr


def _constants(expr):
    """The maximal symbol-free subtrees of `expr`."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if node.is_number:
            yield node
        else:
            stack.extend(node.args)


def _size(const):
    """|value| of a constant (max of |re|, |im|), from a 15-digit numerical evaluation."""
    if const.is_Rational:
        return abs(const)
    real, imag = const.evalf(15).as_real_imag()
    if not (real.is_Number and imag.is_Number):
        raise ExprError(f"cannot evaluate constant {str(const)[:40]}")
    return max(abs(real), abs(imag))


def _check_power(base, exponent) -> None:
    """Refuse powers that SymPy would expand into astronomically large numbers."""
    mag = max((max(abs(r.p), r.q) for r in _rationals(exponent)), default=0)
    if mag <= MAX_EXP:
        mag = max([mag] + [_size(c) for c in _constants(exponent)])
    if mag > MAX_EXP:
        raise ExprError(f"exponent too large (limit {MAX_EXP})")
    if _bits(base) * mag > MAX_BITS:
        raise ExprError("number too large")


def _check_argument(name: str, arg) -> None:
    """Numerically evaluating sin/cos/exp of a huge number needs huge precision: refuse it."""
    if any(_size(c) > MAX_ARG for c in _constants(arg)):
        raise ExprError(f"constant in argument of {name}() too large (limit 2^64)")


def _check_exp_arg(arg) -> None:
    """exp(k*log(b)) evaluates to b**k, so guard it like a power."""
    for term in sp.Add.make_args(arg):
        if term.has(sp.log):
            factors = sp.Mul.make_args(term)
            _check_power(sp.Mul(*[f for f in factors if f.has(sp.log)]),
                         sp.Mul(*[f for f in factors if not f.has(sp.log)]))


def _power(base, exponent):
    _check_power(base, exponent)
    if base is sp.S.Exp1 or isinstance(base, sp.exp):
        _check_exp_arg((sp.S.One if base is sp.S.Exp1 else base.args[0]) * exponent)
    if base == 0 and exponent.is_extended_negative:
        raise ExprError("division by zero")
    return _checked(sp.Pow(base, exponent))


def _number(text: str):
    intpart, frac, sign, exp = _NUMBER.fullmatch(text).groups()
    frac = frac or ""
    if len(intpart) + len(frac) > MAX_DIGITS:
        raise ExprError(f"number too long (limit {MAX_DIGITS} digits)")
    e = 0
    if exp is not None:
        exp = exp.lstrip("0") or "0"
        if len(exp) > 4 or int(exp) > MAX_EXP:
            raise ExprError(f"exponent too large in number '{text[:20]}' (limit {MAX_EXP})")
        e = -int(exp) if sign == "-" else int(exp)
    num, den = int(intpart + frac or "0"), 10 ** len(frac)
    num, den = (num * 10 ** e, den) if e >= 0 else (num, den * 10 ** -e)
    return _checked(sp.Rational(num, den))


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    for pos, ch in enumerate(text):
        if ch not in _ALLOWED:
            raise ExprError(f"invalid character {ch!r} at position {pos}")
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if not text[pos:].strip():
                break
            bad = len(text[pos:]) - len(text[pos:].lstrip()) + pos
            raise ExprError(f"unexpected {text[bad]!r} at position {bad}")
        kind = m.lastgroup
        tokens.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, tokens, d: int):
        self.tokens, self.i, self.d, self.depth, self.minmax = tokens, 0, d, -1, 0
        self.partials: list = []  # (kind, evaluated argument) of partial operations on variables

    def peek(self, *ops) -> bool:
        return self.i < len(self.tokens) and self.tokens[self.i][0] == "op" \
            and self.tokens[self.i][1] in ops

    def take(self):
        if self.i >= len(self.tokens):
            raise ExprError("unexpected end of input")
        self.i += 1
        return self.tokens[self.i - 1]

    def expect(self, op: str) -> None:
        if not self.peek(op):
            raise ExprError(f"expected '{op}' but found {self.where()}")
        self.i += 1

    def where(self) -> str:
        if self.i >= len(self.tokens):
            return "end of input"
        return f"'{self.tokens[self.i][1][:20]}' at position {self.tokens[self.i][2]}"

    # Each rule returns a pair (evaluated, written): the SymPy expression with SymPy's automatic
    # simplification (what every consumer uses) and the same tree as written (evaluate=False
    # wherever a variable occurs).  Partial operations on variables (division, log, roots,
    # powers with a variable exponent) are recorded; if simplification made one disappear
    # (x1/x1 -> 1, exp(log(x1)) -> x1), the written tree is the target instead.

    def expr(self):
        left = self.term()
        while self.peek("+", "-"):
            op = self.take()[1]
            right = self.term()
            if op == "+":
                left = (_checked(left[0] + right[0]), _add(left[1], right[1]))
            else:
                left = (_checked(left[0] - right[0]), _add(left[1], _neg(right[1])))
        return left

    def term(self):
        left = self.unary()
        while self.peek("*", "/"):
            op = self.take()[1]
            right = self.unary()
            if op == "/" and right[0] == 0:
                raise ExprError("division by zero")
            if op == "*":
                left = (_checked(left[0] * right[0]), _mul(left[1], right[1]))
            else:
                self.partial("div", right[0])
                left = (_checked(left[0] / right[0]), _mul(left[1], _inv(right[1])))
        return left

    def unary(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(f"expression nested too deeply (limit {MAX_DEPTH})")
        if self.peek("+", "-"):
            op = self.take()[1]
            operand = self.unary()
            result = (-operand[0], _neg(operand[1])) if op == "-" else operand
        else:
            result = self.atom()
            if self.peek("^", "**"):
                self.i += 1
                result = self.power(result, self.unary())
        self.depth -= 1
        return result

    def power(self, base, exponent):
        ev = _power(base[0], exponent[0])
        if not (base[1].free_symbols or exponent[1].free_symbols):
            return ev, ev
        if exponent[0].free_symbols:
            self.partial("pow", base[0])
        elif exponent[0].is_Integer:
            if exponent[0] < 0:
                self.partial("div", base[0])
        else:
            if not nonnegative_by_construction(base[0]):
                self.partial("root", base[0])
            if exponent[0].is_extended_negative:
                self.partial("div", base[0])
        return ev, sp.Pow(base[1], exponent[1], evaluate=False)

    def partial(self, kind: str, arg) -> None:
        if arg.free_symbols:
            self.partials.append((kind, arg))

    def atom(self):
        where = self.where()
        kind, value, pos = self.take()
        if kind == "num":
            v = _number(value)
            return v, v
        if kind == "op" and value == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        if kind != "name":
            raise ExprError(f"unexpected {where}")
        if self.peek("("):
            return self.call(value)
        if value in _UNARY or value in _NARY:
            raise ExprError(f"function '{value}' at position {pos} must be followed by '('")
        if value == "pi":
            return sp.pi, sp.pi
        sym = sp.Symbol(value, real=True)
        if not _is_input(sym, self.d):
            raise ExprError(f"unknown variable '{value[:20]}' (expected {input_names(self.d)})")
        return sym, sym

    def call(self, name: str):
        if name not in _UNARY and name not in _NARY:
            raise ExprError(f"unknown function '{name[:20]}'")
        self.expect("(")
        args = []
        if not self.peek(")"):
            args.append(self.expr())
            while self.peek(","):
                self.i += 1
                args.append(self.expr())
        self.expect(")")
        if name in _UNARY and len(args) != 1:
            raise ExprError(f"{name}() takes exactly 1 argument ({len(args)} given)")
        if name in _NARY and len(args) < 2:
            raise ExprError(f"{name}() takes at least 2 arguments ({len(args)} given)")
        if name in _NARY:
            self.minmax += len(args)
            if self.minmax > MAX_MINMAX:
                raise ExprError(f"too many min/max arguments (limit {MAX_MINMAX} in total)")
        if name == "sqrt":
            return self.power(args[0], (sp.S.Half, sp.S.Half))
        evs, wrs = [a[0] for a in args], [a[1] for a in args]
        if name in ("exp", "sin", "cos"):
            _check_argument(name, evs[0])
        if name == "exp":
            _check_exp_arg(evs[0])
            ev = _checked(sp.exp(evs[0]))
        else:
            ev = _checked((_UNARY.get(name) or _NARY[name])(*evs))
        if name == "log" and not positive_by_construction(evs[0]):
            self.partial("log", evs[0])
        if not any(w.free_symbols for w in wrs):
            return ev, ev
        func = sp.exp if name == "exp" else (_UNARY.get(name) or _NARY[name])
        return ev, func(*wrs, evaluate=False)


def _add(a, b):
    if not (a.free_symbols or b.free_symbols):
        return a + b
    parts = [*(a.args if isinstance(a, sp.Add) else (a,)), *(b.args if isinstance(b, sp.Add) else (b,))]
    return sp.Add(*parts, evaluate=False)


def _mul(a, b):
    if not (a.free_symbols or b.free_symbols):
        return a * b
    parts = [*(a.args if isinstance(a, sp.Mul) else (a,)), *(b.args if isinstance(b, sp.Mul) else (b,))]
    return sp.Mul(*parts, evaluate=False)


def _neg(a):
    return -a if not a.free_symbols else sp.Mul(sp.S.NegativeOne, a, evaluate=False)


def _inv(a):
    return 1 / a if not a.free_symbols else sp.Pow(a, sp.S.NegativeOne, evaluate=False)


def _kept(kind: str, arg, nodes: set) -> bool:
    """Is the partial operation ``kind`` on ``arg`` still in the simplified tree (whose nodes are
    ``nodes``), so that evaluating that tree still meets it?  Conservative: False when unsure."""
    if kind == "log":
        return sp.log(arg) in nodes
    pows = [n for n in nodes if isinstance(n, sp.Pow)]
    if kind == "root":
        return any(n.base == arg and not n.exp.is_integer for n in pows)
    if kind == "pow":
        return any(n.base == arg and n.exp.free_symbols for n in pows)
    for f in sp.Mul.make_args(arg):  # "div": every variable factor of the divisor still divides
        if not f.free_symbols:
            continue
        base, e = f.as_base_exp()
        if e.is_extended_negative:
            continue  # dividing by 1/u: u was recorded when 1/u was parsed
        if not any(n.base == base and n.exp.is_extended_negative for n in pows):
            return False
    return True


def _height(expr) -> int:
    return _heights(expr)[expr]


def parse_target(text: str, d: int) -> sp.Expr:
    """Parse `text` into a SymPy expression in x1..xd; raise ExprError on any problem."""
    _check_dim(d)
    if not isinstance(text, str):
        raise ExprError(f"target must be a string, not {type(text).__name__}")
    if len(text) > MAX_LEN:
        raise ExprError(f"expression too long ({len(text)} > {MAX_LEN} characters)")
    tokens = _tokenize(text)
    if not tokens:
        raise ExprError("empty expression")
    parser = _Parser(tokens, d)
    try:
        evaluated, written = parser.expr()
        if parser.i < len(tokens):
            raise ExprError(f"unexpected {parser.where()}")
        result = evaluated
        if parser.partials:
            nodes = set(sp.preorder_traversal(evaluated))
            if not all(_kept(kind, arg, nodes) for kind, arg in parser.partials):
                if _height(written) > MAX_HEIGHT:
                    raise ExprError(f"expression tree too deep (limit {MAX_HEIGHT})")
                result = written
        return target_function(result, d)
    except ExprError:
        raise
    except RecursionError:
        raise ExprError("expression too complex") from None
    except Exception as exc:  # any SymPy failure must surface as ExprError
        raise ExprError(f"cannot build expression: {type(exc).__name__}: {exc}"[:200]) from None


def input_names(d: int) -> str:
    """The input variables as a message names them: ``x1`` for d = 1, ``x1..x3`` for d = 3."""
    return "x1" if d == 1 else f"x1..x{d}"


def target_function(expr: sp.Expr, d: int) -> sp.Expr:
    """Return `expr` unchanged after checking it only involves x1..xd."""
    _check_dim(d)
    if not isinstance(expr, sp.Expr):
        raise ExprError(f"not a SymPy expression: {type(expr).__name__}")
    extra = {s for s in expr.free_symbols if not _is_input(s, d)}
    if extra:
        raise ExprError(f"unknown symbols {sorted(map(str, extra))} (expected {input_names(d)})")
    return expr
