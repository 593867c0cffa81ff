"""The network of a layer graph (``symbounds-graph/1``, docs/model-graph.md) on Taylor models.

A tensor is a list of rows (tokens) of entries; nodes in file order compute new tensors from
earlier ones.  The input ``X_{t W + c}`` is row ``t``, column ``c``; the outputs ``Y`` are the
output tensor's entries row by row.  Row-wise operations: ``affine`` ``W x + b``, ``add``,
``add/mul/div_constant``, ``relu``, ``leaky_relu`` (``alpha x + (1 - alpha) relu x``, an
identity), ``gelu`` ``x/2 (1 + erf(x / s))``, ``gelu_tanh`` ``x/2 (1 + tanh(k (x + a x^3)))``,
``tanh``, ``sigmoid``, ``softplus``, ``exp``, ``erf``, ``layer_norm``
``(x_i - mu) / sqrt(var + eps) w_i + b_i`` and ``rms_norm`` ``x_i / sqrt(mean x^2 + eps) w_i``.
Token ops: ``attention`` (per sequence and head ``i``: ``w_j = softmax_k(scale <q_j, k_k>)`` over
the allowed keys, or the decided argmax; ``y_j = Wo [sum_k w_jk v_k]_i + bo``), ``slice``,
``concat``, ``select_tokens``, ``mean_tokens``.

A smooth ``f`` of a model ``c + L + e`` (``|L| <= l``, ``|e| <= r``) by the mean-value form:
``f(c + L + e) = f(c) + f'(c) L + (f'(xi) - f'(c)) L + f'(xi) e`` with ``xi`` in the model's range
``R``, so the rest is ``|f'(R) - f'(c)| l + |f'(R)| r``.  Monotone ``f`` are the hull of their
values at a ball's ends (Arb's ``tanh`` of a wide ball is NaN); squares are formed from ``|x|``'s
ends (``x * x`` of a ball around 0 reaches below 0).  Any entry that is not finite makes the
leaf too wide: it is bisected or rejected, never passed.
"""

from fractions import Fraction

from flint import arb

from . import taylor as tm
from .network import _ball, _dot, _hardmax, _softmax
from .read import Rejected, number

FORMAT = "symbounds-graph/1"
_SMOOTH = ("tanh", "sigmoid", "softplus", "erf", "gelu", "gelu_tanh")
_SEQ = {"sequence_length", "layout"}
_KEYS = {"affine": {"W", "b"}, "add": set(), "leaky_relu": {"alpha"}, "gelu": {"divisor"}, "gelu_tanh": {"k", "a"},
         "layer_norm": {"eps", "weight", "bias"}, "rms_norm": {"eps", "weight"}, "slice": {"start", "stop"},
         "concat": set(), "select_tokens": {"indices"}, "mean_tokens": _SEQ,
         "attention": {"heads", "Wq", "Wk", "Wv", "Wo", "scale", "bq", "bk", "bv", "bo", "mask", "hardmax"} | _SEQ}
_KEYS.update({op: {"constant"} for op in ("add_constant", "mul_constant", "div_constant")})
_KEYS.update({op: set() for op in ("relu", "tanh", "sigmoid", "softplus", "exp", "erf")})
_REQUIRED = {"affine": {"W"}, "layer_norm": {"eps"}, "rms_norm": {"eps"}, "slice": {"start", "stop"},
             "select_tokens": {"indices"}, "attention": {"heads", "Wq", "Wk", "Wv", "Wo", "scale"}}
_REQUIRED.update({op: {"constant"} for op in ("add_constant", "mul_constant", "div_constant")})


def _int(v, what, lo, hi):
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise Rejected(f"model: {what} is not an integer in {lo}..{hi}")
    return v


def _vec(v, what, n):
    if not isinstance(v, list) or len(v) != n:
        raise Rejected(f"model: {what} is not a list of {n} numbers")
    return [number(x, f"model: {what}") for x in v]


def _rows(v, what, cols):
    """A non-empty matrix of ``cols`` columns, each row as ``[(column, ball)]`` of its non-zeros."""
    if not isinstance(v, list) or not v or not all(isinstance(r, list) and len(r) == cols for r in v):
        raise Rejected(f"model: {what} is not a non-empty list of rows of {cols} numbers")
    return [[(j, _ball(q)) for j, q in enumerate(_vec(r, what, cols)) if q] for r in v]


def _affine(nd, w, wkey, bkey, what):
    W = _rows(nd[wkey], f"{what}.{wkey}", w)
    b = _vec(nd[bkey], f"{what}.{bkey}", len(W)) if bkey in nd else [0] * len(W)
    return W, [_ball(Fraction(q)) for q in b]


def _sequence(nd, what, T):
    L = _int(nd.get("sequence_length", T), f"{what}.sequence_length", 1, T)
    if T % L or nd.get("layout", "batch_major") not in ("batch_major", "sequence_major"):
        raise Rejected(f"model: {what}: the sequence length does not divide the rows, or an unknown layout")
    S = T // L
    if nd.get("layout") == "sequence_major":
        return [[i * S + s for i in range(L)] for s in range(S)]
    return [[s * L + i for i in range(L)] for s in range(S)]


def _positive(nd, key, what):
    q = number(nd[key], f"model: {what}.{key}")
    if q <= 0:
        raise Rejected(f"model: {what}.{key} is not positive")
    return _ball(q)


class Graph:
    """The nodes the output reads, each ``(name, op, inputs, params)``, and the output's name."""

    def __init__(self, m, inputs: int):
        if set(m) - {"precision_bits"} != {"format", "input", "nodes", "output"} or m["format"] != FORMAT \
                or not isinstance(m["nodes"], list):
            raise Rejected("model: a layer graph needs exactly 'format', 'input', 'nodes' and 'output'")
        inp = m["input"] if isinstance(m["input"], dict) else {}
        if set(inp) != {"name", "tokens", "width"} or not isinstance(inp["name"], str):
            raise Rejected("model: 'input' is not {name, tokens, width}")
        T, W = _int(inp["tokens"], "input.tokens", 1, 1 << 16), _int(inp["width"], "input.width", 1, 1 << 16)
        if T * W != inputs:
            raise Rejected(f"model: the graph has {T * W} inputs, the property {inputs}")
        self.input, self.width, shape, nodes = inp["name"], W, {inp["name"]: (T, W)}, []
        for i, nd in enumerate(m["nodes"]):
            nodes.append(self._node(nd, i, shape))
        out = m["output"]
        if not isinstance(out, str) or out not in shape or out == self.input:
            raise Rejected("model: 'output' is not a node of the graph")
        self.output, (T, W) = out, shape[out]
        self.outputs = T * W
        need, self.nodes = {out}, []
        for nd in reversed(nodes):  # only the nodes the output reads
            if nd[0] in need:
                need |= set(nd[2])
                self.nodes.insert(0, nd)

    @staticmethod
    def _node(nd, i, shape):
        what = f"nodes[{i}]"
        if not isinstance(nd, dict) or not isinstance(nd.get("name"), str) or nd.get("op") not in _KEYS:
            raise Rejected(f"model: {what} has no name or an unknown op")
        op, ins = nd["op"], nd.get("inputs")
        if nd["name"] in shape or not set(nd) - {"name", "op", "inputs"} <= _KEYS[op] or not _REQUIRED.get(
                op, set()) <= set(nd):
            raise Rejected(f"model: {what}: a name used twice, or unknown or missing keys")
        if not isinstance(ins, list) or not ins or len(ins) != {"add": 2}.get(op, len(ins) if op == "concat" else 1) \
                or not all(isinstance(s, str) and s in shape for s in ins):
            raise Rejected(f"model: {what}: its inputs are not earlier tensors")
        (T, w), p = shape[ins[0]], None
        if op == "add" and shape[ins[1]] != (T, w) or op == "concat" and any(shape[s][0] != T for s in ins):
            raise Rejected(f"model: {what}: its inputs' shapes differ")
        out = (T, w)
        if op == "affine":
            p = _affine(nd, w, "W", "b", what)
            out = (T, len(p[0]))
        elif op in ("add_constant", "mul_constant", "div_constant"):
            c = nd["constant"]
            c = [number(c, f"model: {what}.constant")] if isinstance(c, str) else _vec(c, f"{what}.constant", w)
            if op == "div_constant" and not all(c):
                raise Rejected(f"model: {what}: a division by zero")
            p = [_ball(1 / q if op == "div_constant" else q) for q in c] * (w if len(c) == 1 else 1)
        elif op == "leaky_relu":
            p = _ball(number(nd.get("alpha", "1/100"), f"model: {what}.alpha"))
        elif op == "gelu":
            p = _positive(nd, "divisor", what) if "divisor" in nd else arb(2).sqrt()
        elif op == "gelu_tanh":
            p = (_ball(number(nd["k"], f"model: {what}.k")) if "k" in nd else (2 / arb.pi()).sqrt(),
                 _ball(number(nd.get("a", "0.044715"), f"model: {what}.a")))
        elif op in ("layer_norm", "rms_norm"):
            p = (_positive(nd, "eps", what),
                 [_ball(q) for q in (_vec(nd["weight"], f"{what}.weight", w) if "weight" in nd else [1] * w)],
                 [_ball(Fraction(q)) for q in (_vec(nd["bias"], f"{what}.bias", w) if "bias" in nd else [0] * w)])
        elif op == "slice":
            a = _int(nd["start"], f"{what}.start", 0, w - 1)
            p = (a, _int(nd["stop"], f"{what}.stop", a + 1, w))
            out = (T, p[1] - a)
        elif op == "concat":
            out = (T, sum(shape[s][1] for s in ins))
        elif op == "select_tokens":
            idx = nd["indices"]
            if not isinstance(idx, list) or not idx:
                raise Rejected(f"model: {what}.indices is not a non-empty list")
            p = [_int(t, f"{what}.indices", 0, T - 1) for t in idx]
            out = (len(p), w)
        elif op == "mean_tokens":
            p = _sequence(nd, what, T)
            out = (len(p), w)
        elif op == "attention":
            p = _attention(nd, what, T, w)
            out = (T, len(p[4][0]))
        shape[nd["name"]] = out
        return nd["name"], op, ins, p

    def taylor(self, lo, hi):
        """``(Y, h)``: a Taylor model of every output over the box ``[lo, hi]``, in ``delta = x - centre``."""
        d = len(lo)
        x0 = [_ball((a + b) / 2) for a, b in zip(lo, hi)]
        h = [_ball((b - a) / 2) for a, b in zip(lo, hi)]
        unit = lambda i: tm.TM(x0[i], [arb(int(j == i)) for j in range(d)], arb(0))
        vals = {self.input: [[unit(t * self.width + c) for c in range(self.width)] for t in range(d // self.width)]}
        for name, op, ins, p in self.nodes:
            Y = _OPS[op](p, [vals[s] for s in ins], h, d)
            if not all(t.c.is_finite() and t.r.is_finite() and all(g.is_finite() for g in t.g) for row in Y for t in row):
                raise ArithmeticError(f"node {name!r}: an enclosure that is not finite")
            vals[name] = Y
        return [t for row in vals[self.output] for t in row], h


def _attention(nd, what, T, E):
    """``(heads, q, k, v, o, scale, keys, sequences)``; ``scale`` None for a hardmax (a positive
    factor does not move the argmax); ``keys[j]`` the positions query ``j`` attends."""
    H = _int(nd["heads"], f"{what}.heads", 1, 1 << 16)
    q, k, v = (_affine(nd, E, "W" + a, "b" + a, what) for a in "qkv")
    if len(q[0]) % H or len(k[0]) != len(q[0]) or len(v[0]) % H:
        raise Rejected(f"model: {what}: the heads do not divide Wq, Wk, Wv, or Wk and Wq differ in rows")
    o = _affine(nd, len(v[0]), "Wo", "bo", what)
    sc, hard = nd["scale"], nd.get("hardmax", False)
    if isinstance(sc, dict) and set(sc) == {"inv_sqrt"}:
        scale = arb(_int(sc["inv_sqrt"], f"{what}.scale.inv_sqrt", 1, 1 << 30)).rsqrt()
    else:
        scale = _positive(nd, "scale", what)
    if not isinstance(hard, bool):
        raise Rejected(f"model: {what}.hardmax is not true or false")
    seqs = _sequence(nd, what, T)
    L, mask = len(seqs[0]), nd.get("mask")
    if mask is None:
        keys = [list(range(L))] * L
    elif mask == "causal":
        keys = [list(range(j + 1)) for j in range(L)]
    elif isinstance(mask, list) and len(mask) == L and all(isinstance(r, list) and len(r) == L and all(
            e in (0, 1, "0", "1") and not isinstance(e, bool) for e in r) for r in mask):
        keys = [[c for c in range(L) if int(mask[j][c])] for j in range(L)]
    else:
        raise Rejected(f"model: {what}.mask is not null, 'causal' or {L} rows of {L} entries 0 or 1")
    if not all(keys):
        raise Rejected(f"model: {what}.mask has a query that attends no key")
    return H, q, k, v, o, None if hard else scale, keys, seqs


def _lin(W, b, x, d):
    return [tm.lin([(w, x[j]) for j, w in row], bi, d) for row, bi in zip(W, b)]


def _sq(x):
    """``x^2`` of a ball, not below 0 (from the ends of ``|x|``)."""
    a, c = x.abs_lower(), x.abs_upper()
    return (a * a).union(c * c)


def _mono(f):
    """A monotone ``f`` on a ball: the hull of its values at the ends."""
    return lambda x: f(x.lower()).union(f(x.upper()))


def _sig(x):
    return 1 / (1 + (-x).exp())


def _gelu(s):
    f = lambda x: x / 2 * (1 + (x / s).erf())
    return f, lambda x: (1 + (x / s).erf()) / 2 + x / (s * arb.pi().sqrt()) * (-_sq(x / s)).exp()


def _gelu_tanh(p):
    k, a = p
    th = _mono(arb.tanh)
    f = lambda x: x / 2 * (1 + th(k * (x + a * _sq(x) * x)))

    def df(x):
        t = th(k * (x + a * _sq(x) * x))
        return (1 + t) / 2 + x / 2 * (1 - _sq(t)) * k * (1 + 3 * a * _sq(x))
    return f, df


_FUNCS = {"tanh": lambda p: (_mono(arb.tanh), lambda x: 4 * _sig(2 * x) * _sig(-2 * x)),
          "sigmoid": lambda p: (_mono(_sig), lambda x: _sig(x) * _sig(-x)),
          "softplus": lambda p: (_mono(lambda x: x.exp().log1p()), _sig),
          "erf": lambda p: (_mono(arb.erf), lambda x: 2 / arb.pi().sqrt() * (-_sq(x)).exp()),
          "gelu": _gelu, "gelu_tanh": _gelu_tanh}


def mean_value(t, h, f, df, R=None):
    """``f`` of the model ``t`` (``R``: a ball holding its range and its centre; default the range)."""
    lsp = tm.spread(tm.TM(0, t.g, arb(0)), h)
    if R is None:
        s = lsp + t.r
        R = (t.c - s).union(t.c + s)
    dc, dR = df(t.c), df(R)
    return tm.TM(f(t.c), [dc * g for g in t.g], (dR - dc).abs_upper() * lsp + dR.abs_upper() * t.r)


def _rsqrt(t, eps, h, d):
    """``t^(-1/2)`` of a model whose true values are at least ``eps``: the mean-value form over
    ``R = [max(lo, eps), hi]`` (and the centre), or the constant hull of ``R^(-1/2)``."""
    s = tm.spread(t, h)
    R = (t.c - s).lower().max(eps.lower()).union((t.c + s).upper())
    if t.c > 0 and R.union(t.c) > 0:
        return mean_value(t, h, arb.rsqrt, lambda x: -x.rsqrt() / (2 * x), R.union(t.c))
    v = R.rsqrt()
    return tm.TM(arb(v.mid()), [arb(0)] * d, arb(v.rad()))


def _norm(p, x, h, d, centre):
    eps, w, b = p
    inv = _ball(Fraction(1, len(x)))
    if centre:
        mu = tm.lin([(inv, v) for v in x], arb(0), d)
        x = [tm.lin([(arb(1), v), (arb(-1), mu)], arb(0), d) for v in x]
    s = _rsqrt(tm.lin([(inv, tm.mul(v, v, h)) for v in x], eps, d), eps, h, d)
    return [tm.lin([(wi, tm.mul(v, s, h))], bi, d) for v, wi, bi in zip(x, w, b)]


def _attend(p, X, h, d):
    H, (Wq, bq), (Wk, bk), (Wv, bv), (Wo, bo), scale, keys, seqs = p
    Q, K, V = ([_lin(W, b, x, d) for x in X] for W, b in ((Wq, bq), (Wk, bk), (Wv, bv)))
    dk, dv = len(Wq) // H, len(Wv) // H
    O = [None] * len(X)
    for seq in seqs:
        for jp, j in enumerate(seq):
            ks, row = [seq[c] for c in keys[jp]], []
            for i in range(H):
                s = [_dot(Q[j][i * dk:(i + 1) * dk], K[c][i * dk:(i + 1) * dk], h, d) for c in ks]
                e, inv, _ = _hardmax(s, h, d) if scale is None else _softmax(
                    [tm.lin([(scale, t)], arb(0), d) for t in s], h, d)
                for a in range(i * dv, (i + 1) * dv):
                    acc = tm.const(arb(0), d)
                    for w, c in zip(e, ks):
                        if w is not None:
                            acc = tm.add(acc, tm.mul(w, V[c][a], h))
                    row.append(tm.mul(acc, inv, h))
            O[j] = row
    return [_lin(Wo, bo, o, d) for o in O]


def _rowwise(f):
    return lambda p, args, h, d: [f(p, x, h, d) for x in args[0]]


_OPS = {"affine": _rowwise(lambda p, x, h, d: _lin(*p, x, d)),
        "add": lambda p, args, h, d: [[tm.add(a, b) for a, b in zip(*r)] for r in zip(*args)],
        "add_constant": _rowwise(lambda p, x, h, d: [tm.lin([(arb(1), v)], c, d) for v, c in zip(x, p)]),
        "relu": _rowwise(lambda p, x, h, d: [tm.relu(v, h) for v in x]),
        "leaky_relu": _rowwise(lambda p, x, h, d: [tm.lin([(p, v), (1 - p, tm.relu(v, h))], arb(0), d) for v in x]),
        "exp": _rowwise(lambda p, x, h, d: [tm.exp(v, h) for v in x]),
        "layer_norm": _rowwise(lambda p, x, h, d: _norm(p, x, h, d, True)),
        "rms_norm": _rowwise(lambda p, x, h, d: _norm(p, x, h, d, False)),
        "slice": lambda p, args, h, d: [x[p[0]:p[1]] for x in args[0]],
        "concat": lambda p, args, h, d: [[v for x in r for v in x] for r in zip(*args)],
        "select_tokens": lambda p, args, h, d: [args[0][t] for t in p],
        "mean_tokens": lambda p, args, h, d: [
            [tm.lin([(_ball(Fraction(1, len(s))), args[0][t][c]) for t in s], arb(0), d) for c in range(len(args[0][0]))]
            for s in p],
        "attention": lambda p, args, h, d: _attend(p, args[0], h, d)}
_OPS["mul_constant"] = _OPS["div_constant"] = _rowwise(lambda p, x, h, d: [tm.lin([(c, v)], arb(0), d) for v, c in zip(x, p)])
_OPS.update({op: _rowwise(lambda p, x, h, d, f=f: [mean_value(v, h, *f(p)) for v in x]) for op, f in _FUNCS.items()})
