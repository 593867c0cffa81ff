"""Small user networks, fixed seeds: two model files (``symbounds-transformer/1``) and three layer
graphs (``symbounds-graph/1``, docs/model-graph.md).

    python benchmarks/peers/make_models.py OUTDIR      # writes OUTDIR/attention.json, mlp.json,
                                                       # ln_gelu.json, tanh_sigmoid.json, encoder.json

Standard library only; every weight is an exact rational k/16 (LayerNorm's ``eps`` 2^-16) written as
a string, so float64 holds every parameter exactly and the peer's torch module has the same weights.

* ``attention.json``: d = 2 inputs embedded into column 0 of a 4 x 4 token matrix (D = 4 features,
  n = 4 tokens, the other tokens fixed), then softmax attention (2 heads, skip 1), a residual ReLU
  feed-forward layer (hidden width 8, skip 1), softmax attention again (1 head, skip 1), and a
  readout of feature 0 of token 0.
* ``mlp.json``: the 3-layer ReLU MLP ``Linear(2, 8), ReLU, Linear(8, 8), ReLU, Linear(8, 1)``
  written as two feed-forward layers with skip 0 on one token of width 8:
  ``z1 = A2 relu(A1 x + c1) + c2`` and ``z2 = A3' relu(z1) + c3'`` (``A3'`` is ``A3`` in row 0,
  zeros elsewhere); the readout is row 0.
* ``ln_gelu.json``: ``Linear(2, 8), LayerNorm(8), GELU, Linear(8, 8), GELU, Linear(8, 1)`` (GELU the
  erf form, ``nn.GELU()``), one row of width 2.
* ``tanh_sigmoid.json``: ``Linear(2, 8), Tanh, Linear(8, 8), Sigmoid, Linear(8, 1)``.
* ``encoder.json``: a pre-norm encoder block (``nn.TransformerEncoderLayer(8, 2, 16,
  activation="gelu", norm_first=True)`` without dropout) on 4 tokens: the input is 4 rows of width
  1 (4 inputs, one per token), embedded by ``Linear(1, 8)``, then ``x + SA(LN1(x))`` (2 heads of width 4, scale
  1/2 = 1/sqrt(4), biases), ``x + W2 GELU(W1 LN2(x) + b1) + b2`` (hidden width 16), and the readout
  ``Linear(8, 1)`` of token 0.
"""

import json
import os
import random
import sys


def q(rng, scale=16, lo=-16, hi=16):
    return f"{rng.randint(lo, hi)}/{scale}"


def mat(rng, r, c, **kw):
    return [[q(rng, **kw) for _ in range(c)] for _ in range(r)]


def attention_model(seed=0):
    rng = random.Random(seed)
    D, n, d = 4, 4, 2
    base = mat(rng, D, n, lo=-8, hi=8)
    for r in range(D):
        base[r][0] = "0"
    head = lambda: {"W_Q": mat(rng, 2, D, lo=-8, hi=8), "W_K": mat(rng, 2, D, lo=-8, hi=8),
                    "W_V": mat(rng, 2, D, lo=-8, hi=8), "W_O": mat(rng, D, 2, lo=-8, hi=8)}
    return {
        "format": "symbounds-transformer/1",
        "input": "vector",
        "embedding": {"base": base, "E": mat(rng, D, d), "column": 0},
        "layers": [
            {"type": "attention", "kind": "softmax", "skip": "1", "heads": [head(), head()]},
            {"type": "ffn", "skip": "1", "W1": mat(rng, 8, D), "b1": [q(rng) for _ in range(8)],
             "W2": mat(rng, D, 8, lo=-8, hi=8), "b2": [q(rng, lo=-4, hi=4) for _ in range(D)]},
            {"type": "attention", "kind": "softmax", "skip": "1", "heads": [head()]},
        ],
        "readout": {"row": 0, "column": 0},
    }


def mlp_model(seed=1):
    rng = random.Random(seed)
    W = 8
    A1 = mat(rng, W, 2)
    c1 = [q(rng, lo=-8, hi=8) for _ in range(W)]
    A2 = mat(rng, W, W, lo=-8, hi=8)
    c2 = [q(rng, lo=-8, hi=8) for _ in range(W)]
    A3 = [q(rng, lo=-8, hi=8) for _ in range(W)]
    c3 = q(rng, lo=-8, hi=8)
    eye = [["1" if i == j else "0" for j in range(W)] for i in range(W)]
    zero = [["0"] * W for _ in range(W)]
    E = [["1" if (r == k) else "0" for k in range(2)] for r in range(W)]
    return {
        "format": "symbounds-transformer/1",
        "input": "vector",
        "embedding": {"base": [["0"] for _ in range(W)], "E": E, "column": 0},
        "layers": [
            {"type": "ffn", "skip": "0", "W1": [row[:2] + ["0"] * (W - 2) for row in A1], "b1": c1,
             "W2": A2, "b2": c2},
            {"type": "ffn", "skip": "0", "W1": eye, "b1": ["0"] * W,
             "W2": [A3] + zero[1:], "b2": [c3] + ["0"] * (W - 1)},
        ],
        "readout": {"row": 0, "column": 0},
    }


LN_EPS = "1/65536"


def vec(rng, n, **kw):
    return [q(rng, **kw) for _ in range(n)]


def node(name, op, inputs, **params):
    return {"name": name, "op": op, "inputs": list(inputs), **params}


def layer_norm(rng, name, x, w):
    return node(name, "layer_norm", [x], eps=LN_EPS, weight=[f"{16 + rng.randint(-4, 4)}/16" for _ in range(w)],
                bias=vec(rng, w, lo=-4, hi=4))


def graph(nodes, tokens, width, output):
    return {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": tokens, "width": width},
            "nodes": nodes, "output": output}


def ln_gelu_model(seed=2):
    rng = random.Random(seed)
    return graph([node("h1", "affine", ["x"], W=mat(rng, 8, 2), b=vec(rng, 8, lo=-8, hi=8)),
                  layer_norm(rng, "n1", "h1", 8),
                  node("a1", "gelu", ["n1"]),
                  node("h2", "affine", ["a1"], W=mat(rng, 8, 8, lo=-8, hi=8), b=vec(rng, 8, lo=-8, hi=8)),
                  node("a2", "gelu", ["h2"]),
                  node("y", "affine", ["a2"], W=mat(rng, 1, 8, lo=-8, hi=8), b=vec(rng, 1, lo=-8, hi=8))],
                 1, 2, "y")


def tanh_sigmoid_model(seed=3):
    rng = random.Random(seed)
    return graph([node("h1", "affine", ["x"], W=mat(rng, 8, 2, lo=-32, hi=32), b=vec(rng, 8)),
                  node("a1", "tanh", ["h1"]),
                  node("h2", "affine", ["a1"], W=mat(rng, 8, 8), b=vec(rng, 8, lo=-8, hi=8)),
                  node("a2", "sigmoid", ["h2"]),
                  node("y", "affine", ["a2"], W=mat(rng, 1, 8), b=vec(rng, 1, lo=-8, hi=8))],
                 1, 2, "y")


def encoder_model(seed=4):
    rng = random.Random(seed)
    E, H, F, n = 8, 2, 16, 4
    return graph([node("e", "affine", ["x"], W=mat(rng, E, 1), b=vec(rng, E, lo=-8, hi=8)),
                  layer_norm(rng, "n1", "e", E),
                  node("sa", "attention", ["n1"], heads=H, scale="1/2",
                       Wq=mat(rng, E, E, lo=-8, hi=8), bq=vec(rng, E, lo=-4, hi=4),
                       Wk=mat(rng, E, E, lo=-8, hi=8), bk=vec(rng, E, lo=-4, hi=4),
                       Wv=mat(rng, E, E, lo=-8, hi=8), bv=vec(rng, E, lo=-4, hi=4),
                       Wo=mat(rng, E, E, lo=-8, hi=8), bo=vec(rng, E, lo=-4, hi=4)),
                  node("r1", "add", ["e", "sa"]),
                  layer_norm(rng, "n2", "r1", E),
                  node("f1", "affine", ["n2"], W=mat(rng, F, E, lo=-8, hi=8), b=vec(rng, F, lo=-8, hi=8)),
                  node("g", "gelu", ["f1"]),
                  node("f2", "affine", ["g"], W=mat(rng, E, F, lo=-8, hi=8), b=vec(rng, E, lo=-4, hi=4)),
                  node("r2", "add", ["r1", "f2"]),
                  node("t0", "select_tokens", ["r2"], indices=[0]),
                  node("y", "affine", ["t0"], W=mat(rng, 1, E, lo=-8, hi=8), b=vec(rng, 1, lo=-8, hi=8))],
                 n, 1, "y")


MODELS = (("attention", attention_model), ("mlp", mlp_model), ("ln_gelu", ln_gelu_model),
          ("tanh_sigmoid", tanh_sigmoid_model), ("encoder", encoder_model))


def main(argv):
    if len(argv) != 1:
        print("usage: make_models.py OUTDIR", file=sys.stderr)
        return 2
    os.makedirs(argv[0], exist_ok=True)
    for name, make in MODELS:
        with open(os.path.join(argv[0], f"{name}.json"), "w") as f:
            json.dump(make(), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
