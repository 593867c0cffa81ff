"""VNN-LIB properties over several outputs on layer graphs: the backward pass started from the
property's rows ``c`` (``C y <= b``) against the per-output intervals.

    python benchmarks/bench_spec_objectives.py --instances 12 --scale 64 --max-boxes 400 --out spec_objectives.json

Instances (seeded): random MLP layer graphs (2-3 inputs, two hidden layers of 8-12, ReLU or tanh,
5 outputs, weights multiples of 1/16), and for each a robustness-style property around a random
centre: the label ``l`` is the centre's argmax, the unsafe region the disjunction ``Y_j >= Y_l``
over ``j != l`` (rows ``e_j - e_l`` of ``C``), on a box of half-width ``r`` a side; ``r`` is ``--scale``
times the radius at which the centre's margin surely survives a crude Lipschitz estimate
(``margin / (2 L sqrt(d))``, ``L`` the product of the weights' spectral norms), so that some
instances are provable and some take many boxes.  Every instance is verified three ways with
:func:`symbounds.core.vnnlib.verify`, each with at most ``--max-boxes`` boxes:

* ``taylor``: Arb Taylor models met with balls, no linear bounds (what ``verify`` did before);
* ``per-output``: the same met with the backward linear bounds of every output (``objectives=False``):
  a constraint ``Y_j - Y_l`` combines the two outputs' intervals;
* ``c-start``: the same and the pass started from each row ``c`` (``objectives=True``, the default).

Reported per instance and configuration: the verdict, the boxes evaluated and the CPU seconds
(``time.process_time``); and the totals.
"""

import argparse
import json
import random
import time
from fractions import Fraction as F

import numpy as np

from symbounds.core.graph_file import graph_from_json
from symbounds.core.vnnlib import parse_vnnlib, verify

CONFIGS = {"taylor": dict(linear=False, objectives=False), "per-output": dict(linear="auto", objectives=False),
           "c-start": dict(linear="auto", objectives=True)}


def instance(seed: int, scale: float = 8.0):
    rng = random.Random(seed)
    n_in = rng.choice([2, 3])
    act = rng.choice(["relu", "relu", "tanh"])
    widths = [rng.randint(8, 12), rng.randint(8, 12)]
    q = lambda: F(rng.randint(-24, 24), 16)
    nodes, prev, w = [], "x", n_in
    Ws = []
    for k, width in enumerate(widths):
        W = [[q() for _ in range(w)] for _ in range(width)]
        b = [q() for _ in range(width)]
        Ws.append((W, b))
        nodes.append({"name": f"a{k}", "op": "affine", "inputs": [prev], "W": [[str(v) for v in r] for r in W],
                      "b": [str(v) for v in b]})
        nodes.append({"name": f"h{k}", "op": act, "inputs": [f"a{k}"]})
        prev, w = f"h{k}", width
    W = [[q() for _ in range(w)] for _ in range(5)]
    b = [q() for _ in range(5)]
    Ws.append((W, b))
    nodes.append({"name": "y", "op": "affine", "inputs": [prev], "W": [[str(v) for v in r] for r in W],
                  "b": [str(v) for v in b]})
    doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 1, "width": n_in}, "nodes": nodes,
           "output": "y"}
    centre = [F(rng.randint(-8, 8), 16) for _ in range(n_in)]
    # the centre's outputs and a crude Lipschitz bound of the margins (float; only to pick the radius)
    f = np.tanh if act == "tanh" else (lambda v: np.maximum(v, 0))
    x = np.array([float(v) for v in centre])
    lip = 1.0
    for k, (W, b) in enumerate(Ws):
        A = np.array([[float(v) for v in r] for r in W])
        x = A @ x + np.array([float(v) for v in b])
        if k < len(Ws) - 1:
            x = f(x)
        lip *= np.linalg.norm(A, 2)
    label = int(np.argmax(x))
    margin = float(np.sort(x)[-1] - np.sort(x)[-2])
    r = F(max(round(margin / (2 * lip * np.sqrt(n_in)) * scale * 2**16), 1), 2**16)
    return doc, centre, r, label, act


def spec_text(centre, r, label, k=5):
    lines = [f"(declare-const X_{i} Real)" for i in range(len(centre))]
    lines += [f"(declare-const Y_{j} Real)" for j in range(k)]
    for i, c in enumerate(centre):
        lo, hi = c - r, c + r
        lines.append(f"(assert (>= X_{i} {_dec(lo)}))")
        lines.append(f"(assert (<= X_{i} {_dec(hi)}))")
    alts = " ".join(f"(and (>= Y_{j} Y_{label}))" for j in range(k) if j != label)
    lines.append(f"(assert (or {alts}))")
    return "\n".join(lines) + "\n"


def _dec(q: F) -> str:
    """An exact decimal (q's denominator is a power of two)."""
    from decimal import Decimal, getcontext

    getcontext().prec = 80
    s = format(Decimal(q.numerator) / Decimal(q.denominator), "f")
    assert F(s) == q, q
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=12)
    ap.add_argument("--max-boxes", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=8.0, help="the radius: scale x margin / (2 L sqrt(d))")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for i in range(args.instances):
        doc, centre, r, label, act = instance(args.seed + i, args.scale)
        g = graph_from_json(doc)
        spec = parse_vnnlib(spec_text(centre, r, label))
        row = {"instance": i, "activation": act, "inputs": len(centre), "radius": str(r)}
        for name, kw in CONFIGS.items():
            t0 = time.process_time()
            res = verify(g, spec, max_boxes=args.max_boxes, **kw)
            row[name] = {"verdict": str(res.verdict), "boxes": res.boxes, "seconds": round(time.process_time() - t0, 3)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    total = {name: {"proved": sum(r[name]["verdict"] == "proved" for r in rows),
                    "refuted": sum(r[name]["verdict"] == "refuted" for r in rows),
                    "undecided": sum(r[name]["verdict"] == "undecided" for r in rows),
                    "boxes": sum(r[name]["boxes"] for r in rows),
                    "seconds": round(sum(r[name]["seconds"] for r in rows), 2)} for name in CONFIGS}
    print(json.dumps(total, indent=2))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"rows": rows, "total": total, "max_boxes": args.max_boxes}, fh, indent=2)


if __name__ == "__main__":
    main()
