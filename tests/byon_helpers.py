"""An evaluator of model files written for the tests only: mpmath at 300 bits, straight from the
formulas of the model-file format (no code shared with symbounds.core.transformer)."""

import json
import os
from fractions import Fraction

import mpmath

DATA = os.path.join(os.path.dirname(__file__), "data")


def data_path(name):
    return os.path.join(DATA, name)


def load(name):
    with open(data_path(name)) as f:
        return json.load(f)


def _m(rows):
    return [[mpmath.mpf(Fraction(v).numerator) / Fraction(v).denominator for v in r] for r in rows]


def _num(v):
    q = Fraction(v)
    return mpmath.mpf(q.numerator) / q.denominator


def reference(model: dict, x, bits: int = 300):
    """The model's output at ``x`` (a vector, or flat token coordinates token by token) as a list
    of mpf (the readout, or every entry of Z_L column by column)."""
    with mpmath.workprec(bits):
        xs = [_num(v) for v in x]
        if model.get("input", "vector") == "vector":
            e = model["embedding"]
            Z = _m(e["base"])
            E = _m(e["E"])
            c = e["column"]
            for r in range(len(Z)):
                Z[r][c] += mpmath.fsum(E[r][i] * xs[i] for i in range(len(xs)))
        else:
            D = len(model["layers"][0]["heads"][0]["W_Q"][0]) if model["layers"][0]["type"] == "attention" \
                else len(model["layers"][0]["W1"][0])
            n = len(xs) // D
            Z = [[xs[j * D + r] for j in range(n)] for r in range(D)]
        for L in model["layers"]:
            D, n = len(Z), len(Z[0])
            col = lambda j: [Z[r][j] for r in range(D)]
            mv = lambda W, z: [mpmath.fsum(w * v for w, v in zip(row, z)) for row in W]
            if L["type"] == "attention":
                skip = _num(L["skip"])
                tau = _num(L["tau"]) if "tau" in L else mpmath.mpf(1)
                out = [[skip * Z[r][j] for j in range(n)] for r in range(D)]
                for H in L["heads"]:
                    WQ, WK, WV, WO = (_m(H[k]) for k in ("W_Q", "W_K", "W_V", "W_O"))
                    Q = [mv(WQ, col(j)) for j in range(n)]
                    K = [mv(WK, col(j)) for j in range(n)]
                    V = [mv(WV, col(j)) for j in range(n)]
                    for j in range(n):
                        s = [mpmath.fsum(a * b for a, b in zip(Q[j], K[k])) / tau for k in range(n)]
                        if L["kind"] == "softmax":
                            m = max(s)
                            w = [mpmath.exp(v - m) for v in s]
                            tot = mpmath.fsum(w)
                            p = [v / tot for v in w]
                        else:
                            m = max(s)
                            win = [k for k in range(n) if s[k] == m]
                            p = [mpmath.mpf(1) / len(win) if k in win else mpmath.mpf(0) for k in range(n)]
                        a = [mpmath.fsum(p[k] * V[k][v] for k in range(n)) for v in range(len(V[0]))]
                        o = mv(WO, a)
                        for r in range(D):
                            out[r][j] += o[r]
                Z = out
            else:
                W1, W2 = _m(L["W1"]), _m(L["W2"])
                b1 = [_num(v) for v in L["b1"]]
                b2 = [_num(v) for v in L["b2"]]
                skip = _num(L["skip"])
                cols = []
                for j in range(n):
                    h = [max(mpmath.mpf(0), v + b) for v, b in zip(mv(W1, col(j)), b1)]
                    o = [v + b for v, b in zip(mv(W2, h), b2)]
                    if skip != 0:
                        o = [v + skip * z for v, z in zip(o, col(j))]
                    cols.append(o)
                Z = [[cols[j][r] for j in range(len(cols))] for r in range(len(cols[0]))]
        if "readout" in model:
            return [Z[model["readout"]["row"]][model["readout"]["column"]]]
        return [Z[r][j] for j in range(len(Z[0])) for r in range(len(Z))]


def as_fraction(v):
    """The exact value of an mpf."""
    p, q = mpmath.libmp.to_rational(v._mpf_)
    return Fraction(int(p), int(q))


def random_model(seed, d, D=4, n=3, score_scale=1, embed_scale=Fraction(1, 2), heads=1, constant_head=False):
    """A vector-input model file with random rational weights (multiples of 1/8, fixed ``seed``):
    ``Z_0 = base + E x`` in column 0, one softmax attention layer with a skip, a ReLU feed-forward
    layer with a skip, the readout ``Z[0, 0]``.  ``constant_head`` adds a head whose query is zero,
    so its scores (and softmax) do not depend on the input."""
    import random

    rng = random.Random(seed)

    def mat(r, c, scale=1):
        return [[str(Fraction(rng.randint(-8, 8), 8) * scale) for _ in range(c)] for _ in range(r)]

    hs = [{"W_Q": mat(2, D, score_scale), "W_K": mat(2, D, score_scale), "W_V": mat(2, D), "W_O": mat(D, 2)}
          for _ in range(heads)]
    if constant_head:
        hs.append({"W_Q": [["0"] * D] * 2, "W_K": mat(2, D), "W_V": mat(2, D), "W_O": mat(D, 2)})
    return {"format": "symbounds-transformer/1", "input": "vector", "precision_bits": 128,
            "embedding": {"base": mat(D, n), "E": mat(D, d, embed_scale), "column": 0},
            "layers": [{"type": "attention", "kind": "softmax", "skip": "1", "heads": hs},
                       {"type": "ffn", "skip": "1", "W1": mat(6, D), "b1": mat(1, 6)[0], "W2": mat(D, 6),
                        "b2": mat(1, D)[0]}],
            "readout": {"row": 0, "column": 0}}
