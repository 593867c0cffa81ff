"""Two small user networks in the model-file format (``symbounds-transformer/1``), fixed seed.

    python benchmarks/peers/make_models.py OUTDIR      # writes OUTDIR/attention.json, OUTDIR/mlp.json

Standard library only; every weight is an exact rational k/16 written as a string.

* ``attention.json``: d = 2 inputs embedded into column 0 of a 4 x 4 token matrix (D = 4 features,
  n = 4 tokens, the other tokens fixed), then softmax attention (2 heads, skip 1), a residual ReLU
  feed-forward layer (hidden width 8, skip 1), softmax attention again (1 head, skip 1), and a
  readout of feature 0 of token 0.
* ``mlp.json``: the 3-layer ReLU MLP ``Linear(2, 8), ReLU, Linear(8, 8), ReLU, Linear(8, 1)``
  written as two feed-forward layers with skip 0 on one token of width 8:
  ``z1 = A2 relu(A1 x + c1) + c2`` and ``z2 = A3' relu(z1) + c3'`` (``A3'`` is ``A3`` in row 0,
  zeros elsewhere); the readout is row 0.
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


def main(argv):
    if len(argv) != 1:
        print("usage: make_models.py OUTDIR", file=sys.stderr)
        return 2
    os.makedirs(argv[0], exist_ok=True)
    for name, m in (("attention", attention_model()), ("mlp", mlp_model())):
        with open(os.path.join(argv[0], f"{name}.json"), "w") as f:
            json.dump(m, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
