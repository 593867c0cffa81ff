"""Deciding a property certificate (``symbounds-property-certificate/1``): an unsat VNN-LIB answer.

The claim: no input ``x`` of the property's box ``[L, H]`` reaches its unsafe region
``U = OR_a AND_c (sum_j w_cj Y_j + k_c <= 0)`` (``< 0`` for a strict constraint), ``Y = T(x)``.
It is accepted when the fields are those of the format, both SHA-256 digests are recomputed, the
leaves lie in ``[L, H]`` and cover it (exact rationals), and on every leaf each alternative ``a``
has a constraint ``c`` whose enclosure, ``sum_j w_cj Y_j + k_c`` as one Taylor model, lies on its
false side (the leaf bisected up to ``LEAF_SPLITS`` times where one enclosure is too wide: the
prover's linear bounds decide wider leaves than the kernel's Taylor models).

The property is read by the kernel's own reader: s-expressions, ``declare-const`` of ``X_i`` and
``Y_j``, ``assert`` of comparisons ``<= >= < > =`` of linear terms (numbers, variables,
``+ - *`` with a number factor) joined by ``and`` and by ``or`` of ``and``-alternatives; every
input bounded from both sides by one-variable constraints; nothing is evaluated.
"""

import hashlib
import re
from fractions import Fraction
from itertools import product

from flint import ctx

from . import taylor as tm
from .graph import FORMAT as GRAPH, Graph
from .network import Network, _ball
from .read import Rejected, number
from .verify import PREC, covers, digested

FORMAT = "symbounds-property-certificate/1"
CLAIM = "no input of the property's box reaches its unsafe region (answer unsat)"
_KEYS = {"format", "symbounds", "claim", "verdict", "prec", "model_sha256", "model", "property_sha256",
         "property", "source", "seconds", "leaves"}
_VAR = re.compile(r"[XY]_(0|[1-9][0-9]{0,5})")
MAX_TEXT, MAX_ALTERNATIVES = 4 << 20, 4096


def _sexprs(text):
    stack = [[]]
    for tok in re.findall(r"[()]|[^\s();]+|;[^\n]*", text):
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) == 1:
                raise Rejected("property: unbalanced ')'")
            stack[-2].append(stack.pop())
        elif tok[0] != ";":
            stack[-1].append(tok)
    if len(stack) != 1:
        raise Rejected("property: unbalanced '('")
    return stack[0]


def _term(e, names) -> dict:
    """A linear term as ``{variable or 1: Fraction}``."""
    if isinstance(e, str):
        if _VAR.fullmatch(e):
            if e not in names:
                raise Rejected(f"property: {e} is not declared")
            return {e: Fraction(1)}
        return {1: number(e, "property")}
    if not e or not isinstance(e[0], str):
        raise Rejected("property: a term is not (op ...)")
    op, args = e[0], [_term(a, names) for a in e[1:]]
    if op == "-" and len(args) == 1:
        args = [{}, args[0]]
    if op in ("+", "-") and args:
        out = dict(args[0])
        for a in args[1:]:
            for v, c in a.items():
                out[v] = out.get(v, 0) + (c if op == "+" else -c)
        return out
    if op == "*" and len(args) == 2 and any(set(a) <= {1} for a in args):
        c, t = sorted(args, key=lambda a: not set(a) <= {1})
        return {v: w * c.get(1, 0) for v, w in t.items()}
    raise Rejected(f"property: unsupported term ({op[:20]} ...)")


def _atoms(e, names):
    """A comparison as ``[(lin, strict)]``, each meaning ``lin <= 0`` (``< 0``)."""
    if not isinstance(e, list) or len(e) != 3 or e[0] not in ("<=", ">=", "<", ">", "="):
        raise Rejected("property: a formula is not a comparison <= >= < > =")
    a, b = _term(e[1], names), _term(e[2], names)
    diff = {v: a.get(v, 0) - b.get(v, 0) for v in set(a) | set(b)}
    neg = {v: -c for v, c in diff.items()}
    return {"<=": [(diff, False)], "<": [(diff, True)], ">=": [(neg, False)], ">": [(neg, True)],
            "=": [(diff, False), (neg, False)]}[e[0]]


def _output(lin, strict):
    vs = [v for v, c in lin.items() if v != 1 and c]
    if any(v[0] == "X" for v in vs):
        raise Rejected("property: a constraint on the outputs names an input")
    return [(int(v[2:]), lin[v]) for v in vs], lin.get(1, Fraction(0)), strict


def read_property(text):
    """``(L, H, k, alternatives)``: the input box, the number of outputs and the unsafe region as
    a list of conjunctions of ``(coefficients [(j, w)], constant, strict)``."""
    if len(text) > MAX_TEXT:
        raise Rejected("property: the text is too long")
    names, lo, hi, common, ors = set(), {}, {}, [], []
    for cmd in _sexprs(text):
        head = cmd[0] if isinstance(cmd, list) and cmd and isinstance(cmd[0], str) else None
        if head == "declare-const" and len(cmd) == 3 and cmd[2] == "Real" and isinstance(cmd[1], str) \
                and _VAR.fullmatch(cmd[1]) and cmd[1] not in names:
            names.add(cmd[1])
        elif head == "assert" and len(cmd) == 2:
            stack = [cmd[1]]
            while stack:
                f = stack.pop()
                if isinstance(f, list) and f and f[0] == "and":
                    stack.extend(f[1:])
                elif isinstance(f, list) and f and f[0] == "or" and len(f) > 1:
                    ors.append([[_output(*a) for part in (p[1:] if isinstance(p, list) and p and p[0] == "and"
                                                           else [p]) for a in _atoms(part, names)] for p in f[1:]])
                else:
                    for lin, strict in _atoms(f, names):
                        xs = [v for v, c in lin.items() if v != 1 and c and v[0] == "X"]
                        if not xs:
                            common.append(_output(lin, strict))
                            continue
                        if len([v for v, c in lin.items() if v != 1 and c]) != 1:
                            raise Rejected("property: an input constraint is not a bound of one input")
                        x, c = xs[0], lin[xs[0]]
                        val = -lin.get(1, Fraction(0)) / c
                        ends = hi if c > 0 else lo
                        ends[x] = min(ends.get(x, val), val) if c > 0 else max(ends.get(x, val), val)
        elif head not in ("set-logic", "set-info", "set-option", "check-sat", "exit"):
            raise Rejected(f"property: unsupported command {str(head)[:30]!r}")
    m, k = sum(v[0] == "X" for v in names), sum(v[0] == "Y" for v in names)
    if not m or names != {f"X_{i}" for i in range(m)} | {f"Y_{j}" for j in range(k)}:
        raise Rejected("property: the inputs and outputs are not X_0.. and Y_0.. without gaps")
    if any(f"X_{i}" not in lo or f"X_{i}" not in hi or lo[f"X_{i}"] > hi[f"X_{i}"] for i in range(m)):
        raise Rejected("property: an input is not bounded from both sides by a non-empty interval")
    total = 1
    for o in ors:
        total *= len(o)
        if total > MAX_ALTERNATIVES:
            raise Rejected(f"property: more than {MAX_ALTERNATIVES} unsafe alternatives")
    alternatives = [common + [c for conj in choice for c in conj] for choice in product(*ors)]
    return [lo[f"X_{i}"] for i in range(m)], [hi[f"X_{i}"] for i in range(m)], k, alternatives


#: bisections of a leaf (one axis at a time, the widest first): 2^12 sub-boxes at most, enough to
#: halve each of 12 inputs once, or 6 twice, where the prover's relaxations proved a whole leaf
LEAF_SPLITS = 12


def check_property(cert, progress=None) -> str:
    """Accept ``cert`` (returns a one-line summary) or raise :class:`Rejected` with the reason."""
    if set(cert) != _KEYS:
        raise Rejected(f"unknown or missing fields: {sorted(set(cert) ^ _KEYS)[:3]}")
    if cert["verdict"] != "proved" or cert["claim"] != CLAIM:
        raise Rejected("the verdict is not 'proved' or the claim's wording is not the claim checked")
    model, text = cert["model"], cert["property"]
    if not isinstance(model, dict) or not isinstance(text, str):
        raise Rejected("'model' is not an object or 'property' is not a string")
    digested(cert, model)
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != cert["property_sha256"]:
        raise Rejected("the property does not match property_sha256")
    L, H, k, alternatives = read_property(text)
    m = len(L)
    leaves = _leaves(cert["leaves"], L, H)
    axes = [i for i in range(m) if L[i] < H[i]]  # the box scaled to the unit cube on these axes
    unit = [([(lo[i] - L[i]) / (H[i] - L[i]) for i in axes], [(hi[i] - L[i]) / (H[i] - L[i]) for i in axes])
            for lo, hi in leaves]
    if not covers(unit, len(axes)):
        raise Rejected("the leaves do not cover the property's input box")
    old = ctx.prec
    ctx.prec = PREC
    try:
        if model.get("format") == GRAPH:
            g = Graph(model, m)
            outputs, outs = g.outputs, lambda lo, hi: dict(enumerate(g.taylor(lo, hi)[0]))
        else:
            outputs, nets = _networks(model, m, alternatives)
            outs = lambda lo, hi: {o: net.taylor(lo, hi)[0] for o, net in nets.items()}
        if k != outputs:
            raise Rejected(f"the property has {k} outputs, the model {outputs}")
        for i, (lo, hi) in enumerate(leaves):
            if not _unsafe_unreachable(outs, alternatives, lo, hi, LEAF_SPLITS):
                raise Rejected(f"leaf {i}: the kernel cannot show every unsafe alternative unreachable on it")
            if progress is not None:
                progress(i + 1, len(leaves))
    finally:
        ctx.prec = old
    return (f"{len(leaves)} leaves cover the property's box ({m} inputs); on each, none of the "
            f"{len(alternatives)} unsafe alternative(s) is reachable: unsat")


def _networks(model, m, alternatives):
    """The outputs' count and a :class:`Network` for each output the property reads: the readout,
    or without one ``Y_{jD + r} = Z_L[r, j]``."""
    base = model["embedding"].get("base") if isinstance(model.get("embedding"), dict) else None
    if isinstance(model.get("readout"), dict):
        return 1, {0: Network(model, m)}
    if isinstance(base, list) and base and isinstance(base[0], list):
        outputs = len(base) * len(base[0])
        return outputs, {o: Network(dict(model, readout={"row": o % len(base), "column": o // len(base)}), m)
                         for o in _used(alternatives) if o < outputs}
    raise Rejected("model: not a vector-input model with an embedding, nor a layer graph")


def _used(alternatives):
    return {j for alt in alternatives for cs, _, _ in alt for j, _ in cs}


def _leaves(raw, L, H):
    if not isinstance(raw, list) or not raw:
        raise Rejected("no leaves")
    out = []
    for i, b in enumerate(raw):
        if not isinstance(b, list) or len(b) != 2 or not all(isinstance(e, list) and len(e) == len(L) for e in b):
            raise Rejected(f"leaf {i}: not [[lo ...], [hi ...]] of {len(L)} ends each")
        lo, hi = ([number(v, f"leaf {i}", exact=True) for v in e] for e in b)
        if not all(a <= l <= h <= c for a, l, h, c in zip(L, lo, hi, H)):
            raise Rejected(f"leaf {i} is not a box inside the property's input box")
        out.append((lo, hi))
    return out


def _unsafe_unreachable(outs, alternatives, lo, hi, splits) -> bool:
    """Does every alternative have a constraint false on the whole box (from one enclosure of the
    outputs ``outs(lo, hi)``, or from the two halves of the box)?"""
    try:
        ys = outs(lo, hi)
        h = [_ball((c - a) / 2) for a, c in zip(lo, hi)]
        if all(any(_false(ys, cs, const, strict, h, len(lo)) for cs, const, strict in alt) for alt in alternatives):
            return True
    except (ArithmeticError, ValueError):
        pass
    widths = [c - a for a, c in zip(lo, hi)]
    if splits == 0 or max(widths) == 0:
        return False
    j = widths.index(max(widths))
    mid = (lo[j] + hi[j]) / 2
    return (_unsafe_unreachable(outs, alternatives, lo, hi[:j] + [mid] + hi[j + 1:], splits - 1)
            and _unsafe_unreachable(outs, alternatives, lo[:j] + [mid] + lo[j + 1:], hi, splits - 1))


def _false(ys, cs, const, strict, h, d) -> bool:
    """Is ``sum_j w_j Y_j + const <= 0`` (``< 0``) false on the whole box?"""
    v = tm.enclosure(tm.lin([(_ball(w), ys[j]) for j, w in cs], _ball(const), d), h)
    return bool(v >= 0) if strict else bool(v > 0)
