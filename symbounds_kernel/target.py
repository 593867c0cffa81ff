"""The target ``g``: a whitelisting parser of the certificate's target text, evaluated on balls.

Grammar (the one certificates are written in; nothing is handed to ``eval``)::

    expr  = term {("+"|"-") term}        term = unary {("*"|"/") unary}
    unary = ("+"|"-") unary | power      power = atom [("^"|"**") unary]
    atom  = number | "pi" | "x1".."xd" | f "(" expr {"," expr} ")" | "(" expr ")"
    f     = abs | sqrt | exp | log | sin | cos (one argument) | min | max (two or more)

A tree is a tuple ``(op, ...)``; :func:`evaluate` encloses it over balls for x1..xd.  sqrt and
log need their argument's ball to lie in their domain, else the value is NaN (nothing is proved).
"""

import re
from fractions import Fraction

from flint import arb

from .read import Rejected

_TOKEN = re.compile(r"\s*(?:([0-9]+\.?[0-9]*(?:[eE][-+]?[0-9]{1,3})?|\.[0-9]+(?:[eE][-+]?[0-9]{1,3})?)"
                    r"|([A-Za-z][A-Za-z0-9]*)|(\*\*|[-+*/^(),]))")
_ONE = {"abs": abs, "sqrt": lambda v: v.sqrt() if v >= 0 else arb.nan(), "exp": arb.exp,
        "log": lambda v: v.log() if v > 0 else arb.nan(), "sin": arb.sin, "cos": arb.cos}
_MANY = {"min": arb.min, "max": arb.max}


def parse(text: str, d: int):
    """The tree of ``text`` over x1..xd; :class:`Rejected` naming the first problem."""
    if not isinstance(text, str) or len(text) > 1000:
        raise Rejected("target: not a string of at most 1000 characters")
    tokens, pos = [], 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        if not m:
            raise Rejected(f"target: unexpected character at {pos}")
        tokens.append((m.lastindex, m.group(m.lastindex)))
        pos = m.end()
    tokens.append((0, ""))
    at = [0]

    def peek(*ops):
        return tokens[at[0]][0] == 3 and tokens[at[0]][1] in ops

    def take(op=None):
        tok = tokens[at[0]]
        if op is not None and tok != (3, op):
            raise Rejected(f"target: expected {op!r} at token {at[0]}")
        at[0] += 1
        return tok

    def expr(depth):
        if depth > 100:
            raise Rejected("target: nested too deeply")
        node = term(depth)
        while peek("+", "-"):
            node = (take()[1], node, term(depth))
        return node

    def term(depth):
        node = unary(depth)
        while peek("*", "/"):
            node = (take()[1], node, unary(depth))
        return node

    def unary(depth):
        if peek("+", "-"):
            sign = take()[1]
            inner = unary(depth + 1)
            return inner if sign == "+" else ("neg", inner)
        node = atom(depth)
        if peek("^", "**"):
            take()
            node = ("^", node, unary(depth + 1))
        return node

    def atom(depth):
        kind, val = take()
        if kind == 1:
            return ("num", Fraction(val))
        if kind == 2 and val == "pi":
            return ("pi",)
        if kind == 2 and re.fullmatch(r"x[1-9][0-9]*", val) and int(val[1:]) <= d:
            return ("x", int(val[1:]) - 1)
        if kind == 2 and (val in _ONE or val in _MANY):
            take("(")
            args = [expr(depth + 1)]
            while peek(","):
                take()
                args.append(expr(depth + 1))
            take(")")
            if (val in _ONE) != (len(args) == 1):
                raise Rejected(f"target: {val} takes {'one argument' if val in _ONE else 'two or more'}")
            return (val, *args)
        if (kind, val) == (3, "("):
            node = expr(depth + 1)
            take(")")
            return node
        raise Rejected(f"target: unexpected {val or 'end'!r}")

    tree = expr(0)
    if tokens[at[0]][0] != 0:
        raise Rejected(f"target: unexpected {tokens[at[0]][1]!r} after the expression")
    return tree


def evaluate(node, xs):
    """A ball containing the tree's value for every point of the balls ``xs``."""
    op = node[0]
    if op == "num":
        return arb(node[1].numerator) / node[1].denominator
    if op == "pi":
        return arb.pi()
    if op == "x":
        return xs[node[1]]
    args = [evaluate(a, xs) for a in node[1:]]
    if op == "neg":
        return -args[0]
    if op == "+":
        return args[0] + args[1]
    if op == "-":
        return args[0] - args[1]
    if op == "*":
        return args[0] * args[1]
    if op == "/":
        return args[0] / args[1]
    if op == "^":
        e = node[2][1][1] if node[2][0] == "neg" and node[2][1][0] == "num" else node[2][1]
        if node[2][0] in ("num", "neg") and isinstance(e, Fraction) and e.denominator == 1 and abs(e) <= 1000:
            return args[0] ** int(e if node[2][0] == "num" else -e)
        return args[0] ** args[1] if args[0] > 0 else arb.nan()
    if op in _ONE:
        return _ONE[op](args[0])
    out = args[0]
    for a in args[1:]:
        out = _MANY[op](out, a)
    return out
