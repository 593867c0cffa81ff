"""Where a layer graph's Taylor-model enclosure grows: node by node over one box.

    python benchmarks/peers/diagnose_graph.py encoder.json --width 1/10 [--centre 1/2] [--points 400]
    python benchmarks/peers/diagnose_graph.py encoder.json --box encoder_side.json:encoder:0

Run with symbounds' environment.  Over the box of side ``width`` around the centre (every input
coordinate), one Arb first-order Taylor model of every tensor (``c + <g, delta> + [-r, r]``, as
``bound`` encloses each sub-box), and for each node: the widest entry's range width ``2 (|g| h +
r)``, the part of it that is remainder (``2 r``), and the spread (max - min) of that entry over
``--points`` random points of the box (float64 evaluations in the ``fp`` context: evidence, not a
bound).  "range / spread" is how much wider the enclosure is than the values seen; where it jumps
from one node to the next, that node's enclosure is where the width comes from.
"""

import argparse
import json
import random
import sys
from fractions import Fraction as F

from symbounds.core.boxes import Box
from symbounds.core.contexts import FPContext
from symbounds.core.graph import _tensor
from symbounds.core.graph_file import network_from_json
from symbounds.core.taylor import TaylorContext


def node_values(g, ctx, xs):
    """Every tensor of the graph (rows of context numbers) at the flat input ``xs``."""
    num = g.numeric(ctx)
    with ctx.scope():
        X = [[xs[t * g.in_width + c] for c in range(g.in_width)] for t in range(g.tokens)]
        vals = {g.input_name: X}
        for nd in g.nodes:
            vals[nd.name] = _tensor(ctx, nd, num[nd.name], [vals[i] for i in nd.inputs])
    return vals


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--width", default="1/10")
    ap.add_argument("--centre", default="1/2")
    ap.add_argument("--points", type=int, default=400)
    ap.add_argument("--box", metavar="SIDE.json:MODEL:INDEX", help="that box of a side file instead")
    a = ap.parse_args(argv)
    with open(a.graph) as f:
        g = network_from_json(json.load(f))
    w, c = F(a.width), F(a.centre)
    d = g.input_count
    box = Box(tuple(c - w / 2 for _ in range(d)), tuple(c + w / 2 for _ in range(d)))
    if a.box:
        path, model, index = a.box.rsplit(":", 2)
        with open(path) as f:
            b = next(m for m in json.load(f)["models"] if m["name"] == model)["boxes"][int(index)]
        box = Box(tuple(F(v) for v in b["lo"]), tuple(F(v) for v in b["hi"]))
    tm = TaylorContext(128, box.centre, box.half)
    with tm.scope():
        vals = node_values(g, tm, tm.inputs())
        enc = {}
        for nd in g.nodes:
            enc[nd.name] = [[(float(v.range().rad()) * 2, 0.0 if v.r is None else float(v.r) * 2) for v in row]
                            for row in vals[nd.name]]
    fp = FPContext()
    rng = random.Random(0)
    lo = {nd.name: None for nd in g.nodes}
    hi = {nd.name: None for nd in g.nodes}
    for _ in range(a.points):
        xs = [float(b0 + (b1 - b0) * F(rng.random())) for b0, b1 in zip(box.lo, box.hi)]
        vs = node_values(g, fp, xs)
        for nd in g.nodes:
            flat = [float(v) for row in vs[nd.name] for v in row]
            lo[nd.name] = flat if lo[nd.name] is None else [min(p, q) for p, q in zip(lo[nd.name], flat)]
            hi[nd.name] = flat if hi[nd.name] is None else [max(p, q) for p, q in zip(hi[nd.name], flat)]
    where = f"box {a.box}" if a.box else f"the box of side {w} around {c}"
    print(f"{a.graph}: {where} ({d} inputs); the widest entry of each node")
    print("| node | op | range width | of it remainder | sampled spread | range / spread |")
    print("|---|---|---|---|---|---|")
    for nd in g.nodes:
        flat = [e for row in enc[nd.name] for e in row]
        k = max(range(len(flat)), key=lambda i: flat[i][0])
        spread = hi[nd.name][k] - lo[nd.name][k]
        ratio = flat[k][0] / spread if spread > 0 else float("inf")
        print(f"| {nd.name} | {nd.op} | {flat[k][0]:.3g} | {flat[k][1]:.3g} | {spread:.3g} | {ratio:.3g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
