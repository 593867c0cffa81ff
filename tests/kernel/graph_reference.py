"""A 300-bit reference of a layer graph (``symbounds-graph/1``) at a point, written from the
formulas of docs/model-graph.md alone (mpmath; neither symbounds' nor the kernel's code), and
random graphs of every operation the kernel reads."""

import random
from fractions import Fraction

import mpmath

MP = mpmath.MPContext()
MP.prec = 300


def num(v):
    q = Fraction(v)
    return MP.mpf(q.numerator) / q.denominator


def _affine(W, b, x):
    return [num(bi) + sum((num(w) * v for w, v in zip(row, x)), MP.mpf(0)) for row, bi in zip(W, b)]


def _seqs(T, L, layout):
    S = T // L
    if layout == "sequence_major":
        return [[i * S + s for i in range(L)] for s in range(S)]
    return [[s * L + i for i in range(L)] for s in range(S)]


def _attention(nd, X):
    T, H = len(X), nd["heads"]
    z = lambda m: ["0"] * len(nd[m])
    Q, K, V = ([_affine(nd["W" + a], nd.get("b" + a, z("W" + a)), x) for x in X] for a in "qkv")
    dk, dv = len(Q[0]) // H, len(V[0]) // H
    sc = nd["scale"]
    scale = 1 / MP.sqrt(sc["inv_sqrt"]) if isinstance(sc, dict) else num(sc)
    mask, out = nd.get("mask"), [None] * T
    for seq in _seqs(T, nd.get("sequence_length", T), nd.get("layout", "batch_major")):
        for jp, j in enumerate(seq):
            keys = [seq[k] for k in range(len(seq)) if mask is None or (k <= jp if mask == "causal" else int(mask[jp][k]))]
            o = []
            for i in range(H):
                s = {k: sum(Q[j][i * dk + a] * K[k][i * dk + a] for a in range(dk)) for k in keys}
                if nd.get("hardmax"):
                    top = max(s.values())
                    win = [k for k in keys if s[k] == top]
                    w = {k: MP.mpf(1) / len(win) if k in win else MP.mpf(0) for k in keys}
                else:
                    e = {k: MP.exp(scale * s[k]) for k in keys}
                    w = {k: e[k] / sum(e.values()) for k in keys}
                o += [sum(w[k] * V[k][i * dv + a] for k in keys) for a in range(dv)]
            out[j] = _affine(nd["Wo"], nd.get("bo", z("Wo")), o)
    return out


def _unary(nd, v):
    op = nd["op"]
    if op == "relu":
        return max(v, 0)
    if op == "leaky_relu":
        return v if v >= 0 else num(nd.get("alpha", "1/100")) * v
    if op == "gelu":
        s = num(nd["divisor"]) if "divisor" in nd else MP.sqrt(2)
        return v / 2 * (1 + MP.erf(v / s))
    if op == "gelu_tanh":
        k = num(nd["k"]) if "k" in nd else MP.sqrt(2 / MP.pi)
        a = num(nd.get("a", "0.044715"))
        return v / 2 * (1 + MP.tanh(k * (v + a * v ** 3)))
    return {"tanh": MP.tanh, "sigmoid": lambda t: 1 / (1 + MP.exp(-t)), "softplus": lambda t: MP.log(1 + MP.exp(t)),
            "exp": MP.exp, "erf": MP.erf}[op](v)


def _row(nd, x, y=None):
    op, w = nd["op"], len(x)
    if op == "affine":
        return _affine(nd["W"], nd.get("b", ["0"] * len(nd["W"])), x)
    if op == "add":
        return [a + b for a, b in zip(x, y)]
    if op.endswith("_constant"):
        c = nd["constant"]
        c = [num(c)] * w if isinstance(c, str) else [num(v) for v in c]
        return [{"add_constant": v + k, "mul_constant": v * k, "div_constant": v / k}[op] for v, k in zip(x, c)]
    if op in ("layer_norm", "rms_norm"):
        wt = [num(v) for v in nd.get("weight", ["1"] * w)]
        b = [num(v) for v in nd.get("bias", ["0"] * w)]
        mu = sum(x) / w if op == "layer_norm" else 0
        dev = [v - mu for v in x]
        s = 1 / MP.sqrt(sum(t * t for t in dev) / w + num(nd["eps"]))
        return [t * s * wi + bi for t, wi, bi in zip(dev, wt, b)]
    return [_unary(nd, v) for v in x]


def reference(doc, x_flat):
    """The graph's outputs (row by row) at the flat input (row by row), 300-bit mpf."""
    T, E = doc["input"]["tokens"], doc["input"]["width"]
    vals = {doc["input"]["name"]: [[num(v) for v in x_flat[t * E:(t + 1) * E]] for t in range(T)]}
    for nd in doc["nodes"]:
        X, op = vals[nd["inputs"][0]], nd["op"]
        if op == "attention":
            Y = _attention(nd, X)
        elif op == "slice":
            Y = [x[nd["start"]:nd["stop"]] for x in X]
        elif op == "concat":
            Y = [sum((vals[n][t] for n in nd["inputs"]), []) for t in range(len(X))]
        elif op == "select_tokens":
            Y = [X[i] for i in nd["indices"]]
        elif op == "mean_tokens":
            L = nd.get("sequence_length", len(X))
            Y = [[sum(X[t][c] for t in s) / L for c in range(len(X[0]))] for s in _seqs(len(X), L, nd.get("layout", "batch_major"))]
        elif op == "add":
            Y = [_row(nd, x, y) for x, y in zip(X, vals[nd["inputs"][1]])]
        else:
            Y = [_row(nd, x) for x in X]
        vals[nd["name"]] = Y
    return [v for row in vals[doc["output"]] for v in row]


ROW_OPS = ("relu", "leaky_relu", "gelu", "gelu_tanh", "tanh", "sigmoid", "softplus", "exp", "erf", "layer_norm",
           "rms_norm", "add_constant", "mul_constant", "div_constant")


def _q(rng, den=8, top=8):
    return str(Fraction(rng.randint(-top, top), den))


def _mat(rng, rows, cols):
    return [[_q(rng) for _ in range(cols)] for _ in range(rows)]


def _params(rng, op, w):
    if op == "leaky_relu":
        return {"alpha": _q(rng, 16, 15)} if rng.random() < 0.7 else {}
    if op == "gelu":
        return {"divisor": str(Fraction(rng.randint(1, 9), 4))} if rng.random() < 0.5 else {}
    if op == "gelu_tanh":
        return {"k": _q(rng, 8), "a": _q(rng, 64)} if rng.random() < 0.5 else {}
    if op in ("layer_norm", "rms_norm"):
        p = {"eps": rng.choice(["1e-5", "1/10", "1/1000"])}
        if rng.random() < 0.7:
            p["weight"] = [_q(rng) for _ in range(w)]
        if op == "layer_norm" and rng.random() < 0.7:
            p["bias"] = [_q(rng) for _ in range(w)]
        return p
    if op.endswith("_constant"):
        nz = lambda: str(Fraction(rng.choice([-1, 1]) * rng.randint(1, 8), 4))
        return {"constant": nz() if rng.random() < 0.5 else [nz() for _ in range(w)]}
    return {}


def _attention_node(rng, name, src, E, T, hardmax=False):
    H, dk, dv, Eo = rng.randint(1, 2), rng.randint(1, 2), rng.randint(1, 2), rng.randint(1, 3)
    L = rng.choice([d for d in range(1, T + 1) if T % d == 0])
    nd = {"name": name, "op": "attention", "inputs": [src], "heads": H, "Wq": _mat(rng, H * dk, E),
          "Wk": _mat(rng, H * dk, E), "Wv": _mat(rng, H * dv, E), "Wo": _mat(rng, Eo, H * dv),
          "scale": rng.choice([{"inv_sqrt": dk}, str(Fraction(rng.randint(1, 9), 4))])}
    for b, m in (("bq", "Wq"), ("bk", "Wk"), ("bv", "Wv"), ("bo", "Wo")):
        if rng.random() < 0.6:
            nd[b] = [_q(rng) for _ in nd[m]]
    if L != T or rng.random() < 0.5:
        nd["sequence_length"] = L
    if rng.random() < 0.5:
        nd["layout"] = rng.choice(["batch_major", "sequence_major"])
    r = rng.random()
    if r < 0.3:
        nd["mask"] = "causal"
    elif r < 0.5:
        nd["mask"] = [[1 if k == j or rng.random() < 0.5 else 0 for k in range(L)] for j in range(L)]
    if hardmax:
        nd["hardmax"] = True
    return nd, Eo


def random_graph(seed, tokens=None):
    """A random graph: a chain of affine maps and row operations, a residual add, a slice and
    concat, and (when ``tokens`` > 1) an attention node and a token operation."""
    rng = random.Random(seed)
    T = tokens or rng.choice([1, 1, 2, 3, 4, 6])  # 4 and 6: several sequences of several rows
    E = rng.randint(1, 4) if T == 1 else rng.randint(1, 3) if T < 4 else rng.randint(1, 2)
    nodes, cur, w, t = [], "x", E, T
    for i in range(rng.randint(2, 4)):
        n = rng.randint(1, 4)
        nodes.append({"name": f"a{i}", "op": "affine", "inputs": [cur], "W": _mat(rng, n, w), "b": [_q(rng) for _ in range(n)]})
        op = rng.choice(ROW_OPS)
        nodes.append(dict({"name": f"f{i}", "op": op, "inputs": [f"a{i}"]}, **_params(rng, op, n)))
        if rng.random() < 0.3:
            nodes.append({"name": f"r{i}", "op": "add", "inputs": [f"f{i}", f"a{i}"]})
        cur, w = nodes[-1]["name"], n
        if rng.random() < 0.3 and w > 1:
            a = rng.randint(0, w - 2)
            nodes.append({"name": f"s{i}", "op": "slice", "inputs": [cur], "start": a, "stop": rng.randint(a + 1, w)})
            nodes.append({"name": f"c{i}", "op": "concat", "inputs": [f"s{i}", cur]})
            cur, w = f"c{i}", nodes[-2]["stop"] - a + w
        if t > 1 and rng.random() < 0.5:
            nd, w = _attention_node(rng, f"t{i}", cur, w, t, hardmax=rng.random() < 0.25)
            nodes.append(nd)
            cur = nd["name"]
    if t > 1:
        if rng.random() < 0.5:
            nodes.append({"name": "sel", "op": "select_tokens", "inputs": [cur], "indices": [rng.randrange(t) for _ in range(rng.randint(1, 3))]})
        else:
            L = rng.choice([d for d in range(1, t + 1) if t % d == 0])
            nodes.append({"name": "sel", "op": "mean_tokens", "inputs": [cur], "sequence_length": L,
                          "layout": rng.choice(["batch_major", "sequence_major"])})
        cur = "sel"
    nodes.append({"name": "y", "op": "affine", "inputs": [cur], "W": _mat(rng, rng.randint(1, 2), w)})
    return {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": T, "width": E}, "nodes": nodes, "output": "y"}
