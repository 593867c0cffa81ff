"""Layer graphs over boxes: the float64 outward-rounded Taylor-model pass beside the Arb path.

    python benchmarks/bench_float_graph.py [--boxes 2048] [--arb-boxes 24] [--bound]

Two networks with float64 weights drawn as ``nn.Linear`` initialises them (uniform in
``+-1/sqrt(fan_in)``, each read as its exact binary rational, as an ONNX import reads them),
fixed seeds:

* a 3-layer ReLU MLP, 8 -> 64 -> 64 -> 4;
* an MLP with LayerNorm and GELU, 8 -> 64 (LayerNorm, GELU) -> 64 (LayerNorm, GELU) -> 4.

The same boxes (seeded centres in [-1, 1]^8, every side of width ``w``) go through the float pass
(:class:`symbounds.core.float_graph.FloatGraphEvaluator`, all boxes in one call, batched inside)
and through the Arb path a box costs ``bound`` (Taylor models at 128 bits met with balls,
``BoxEvaluator._arb``, without the backward linear bounds), the latter on the first
``--arb-boxes`` boxes.  Boxes per second are CPU seconds of this process; the widths are medians
over the boxes both evaluated of the widest output's enclosure.  ``--bound`` also times
``symbounds bound`` (adaptive, default tolerance) with and without the float pass.
"""

import argparse
import random
import sys
import time
from fractions import Fraction as F
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from symbounds.core import float_graph  # noqa: E402
from symbounds.core.bound import bound  # noqa: E402
from symbounds.core.graph import Graph, Node  # noqa: E402
from symbounds.core.search import Box, BoxEvaluator  # noqa: E402


def linear(rng, fan_in, fan_out):
    k = 1 / np.sqrt(fan_in)
    W = tuple(tuple(F(float(rng.uniform(-k, k))) for _ in range(fan_in)) for _ in range(fan_out))
    b = tuple(F(float(rng.uniform(-k, k))) for _ in range(fan_out))
    return {"W": W, "b": b}


def mlp(kind: str, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    sizes = [8, 64, 64, 4]
    nodes, src = [], "x"
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        nodes.append(Node(f"l{i}", "affine", (src,), linear(rng, a, b)))
        src = f"l{i}"
        if i < len(sizes) - 2:
            if kind == "relu":
                nodes.append(Node(f"r{i}", "relu", (src,), {}))
                src = f"r{i}"
            else:
                nodes.append(Node(f"n{i}", "layer_norm", (src,), {"eps": F(1, 10**5), "weight": (F(1),) * b,
                                                                  "bias": (F(0),) * b}))
                nodes.append(Node(f"g{i}", "gelu", (f"n{i}",), {}))
                src = f"g{i}"
    return Graph("x", 1, sizes[0], tuple(nodes), src, {"x": sizes[0]})


def boxes(n, w, d=8, seed=1):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        c = [F(rng.randint(-2**20, 2**20), 2**20) for _ in range(d)]
        out.append(Box(tuple(v - w / 2 for v in c), tuple(v + w / 2 for v in c)))
    return out


def cpu():
    return time.process_time()


def compare(g: Graph, w: F, n: int, n_arb: int):
    bs = boxes(n, w)
    ev = float_graph.evaluator(g)
    ev.ranges([bs[0].lo], [bs[0].hi])  # warm-up (imports, constants)
    t = cpu()
    lo, hi, ok = ev.ranges([b.lo for b in bs], [b.hi for b in bs])
    tf = cpu() - t
    arb = BoxEvaluator(g, 128, fast=False, linear=False)
    t = cpu()
    encs = [arb._arb(b) for b in bs[:n_arb]]
    ta = cpu() - t
    fw, aw = [], []
    for k, e in enumerate(encs):
        if e is None or not ok[k]:
            continue
        fw.append(float(np.max(hi[k] - lo[k])))
        aw.append(max(float(b - a) for a, b in zip(e.lo, e.hi)))
    return n / tf, len(encs) / ta, int(ok.sum()), n, float(np.median(fw)), float(np.median(aw))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--boxes", type=int, default=2048)
    ap.add_argument("--arb-boxes", type=int, default=24)
    ap.add_argument("--bound", action="store_true")
    args = ap.parse_args()
    print("| network | box width | float boxes/s | Arb boxes/s | speed-up | float finite | "
          "float width (median) | Arb width (median) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, kind in (("ReLU MLP 8-64-64-4", "relu"), ("LayerNorm+GELU MLP 8-64-64-4", "gelu")):
        g = mlp(kind)
        for w in (F(1, 10), F(1, 100), F(1, 1000), F(1, 10000)):
            fr, ar, okn, n, fw, aw = compare(g, w, args.boxes, args.arb_boxes)
            print(f"| {name} | {float(w):g} | {fr:,.0f} | {ar:,.1f} | {fr / ar:,.0f}x | {okn}/{n} | "
                  f"{fw:.4g} | {aw:.4g} |")
    if args.bound:
        print("\n| network | bound over a box of width 1/10 | s (wall) | boxes | evaluators | enclosure of Y_0 |")
        print("|---|---|---|---|---|---|")
        for name, kind in (("ReLU MLP", "relu"), ("LayerNorm+GELU MLP", "gelu")):
            g = mlp(kind)
            c = [F(1, 4)] * 8
            lo, hi = [str(v - F(1, 20)) for v in c], [str(v + F(1, 20)) for v in c]
            for label, fast in (("float pass first", True), ("Arb only", False)):
                t = time.perf_counter()
                r = bound(g, lo, hi, fast=fast, max_boxes=1000)
                print(f"| {name} | {label} | {time.perf_counter() - t:.2f} | {r.boxes} | {r.evaluators} | "
                      f"[{float(r.lower[0]):.6g}, {float(r.upper[0]):.6g}] |")


if __name__ == "__main__":
    main()
