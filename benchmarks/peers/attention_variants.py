"""Three ways to enclose a graph's ``attention`` node in first-order Taylor models, over one box.

    python benchmarks/peers/attention_variants.py encoder.json --box encoder_side.json:encoder:0 \
        [--node sa] [--input n1]

Run with symbounds' environment.  A measurement for proposed changes of the attention node's
enclosure, not the enclosure ``bound`` uses: the node's output is recomputed here from its
input's Taylor models (the graph evaluated up to ``--input`` as ``bound`` does) with the node's own
numbers, per sequence and head ``i`` (all keys, no mask), in the Taylor-model context:

* ``as the node``: ``s_k = scale <q, k_k>``, ``w = softmax(s - s_m)`` with ``m`` the key of the
  largest upper end (``ScalarEvaluator.softmax``), ``o = sum_k w_k v_k``;
* ``differences``: ``s_k - s_m = scale <q, k_k - k_m>``, one product per key (the two products'
  remainders do not add);
* ``differences, centred values``: also ``o = v_m + sum_k w_k (v_k - v_m)`` (``sum_k w_k = 1``),
  so the weights' remainders multiply ``v_k - v_m`` instead of ``v_k``;
* ``..., interval weights``: also each weight replaced by the interval softmax of the score
  ranges, ``[e^(l_k) / (e^(l_k) + sum_(j != k) e^(u_j)), e^(u_k) / (e^(u_k) + sum_(j != k) e^(l_j))]``,
  where that is narrower than its model.

Prints the widest output entry's range width for each, and the width of the graph's output when
the rest of the graph is evaluated from it.  Every variant is an enclosure (each
step is an identity of real numbers evaluated in enclosing arithmetic).
"""

import argparse
import json
import sys
from fractions import Fraction as F

from diagnose_graph import node_values

from symbounds.core.boxes import Box
from symbounds.core.graph import _affine, _tensor
from symbounds.core.graph_file import network_from_json
from symbounds.core.graph_tokens import _dot
from symbounds.core.taylor import TaylorContext

VARIANTS = ("as the node", "differences", "differences, centred values", "differences, centred values, interval weights")


def width(v) -> float:
    return float(v.range().rad()) * 2


def head_output(tm, p, Q, K, V, j, i, variant):
    h = p["heads"]
    dk, dv = len(Q[0]) // h, len(V[0]) // h
    q = Q[j][i * dk:(i + 1) * dk]
    ks = [k[i * dk:(i + 1) * dk] for k in K]
    sc = [_dot(tm, q, k) * p["scale"] for k in ks]
    m = max(range(len(sc)), key=lambda k: sc[k].range().upper())
    if variant == VARIANTS[0]:
        dif = [s - sc[m] for s in sc]
    else:
        dif = [_dot(tm, q, [a - b for a, b in zip(k, ks[m])]) * p["scale"] for k in ks]
    e = [tm.exp(s) for s in dif]
    total = e[0]
    for v in e[1:]:
        total = total + v
    inv = tm.one / total
    w = [v * inv for v in e]
    if variant == VARIANTS[3]:
        lo = [s.range().lower() for s in sc]
        hi = [s.range().upper() for s in sc]
        for k in range(len(w)):
            a = lo[k].exp() / (lo[k].exp() + sum(hi[l].exp() for l in range(len(w)) if l != k))
            b = hi[k].exp() / (hi[k].exp() + sum(lo[l].exp() for l in range(len(w)) if l != k))
            ball = a.union(b)
            if float(ball.rad()) * 2 < width(w[k]):
                w[k] = tm.const(ball)
    out = []
    for c in range(i * dv, (i + 1) * dv):
        vs = [V[k][c] for k in range(len(V))]
        if variant in VARIANTS[2:]:
            out.append(vs[m] + _dot(tm, w, [v - vs[m] for v in vs]))
        else:
            out.append(_dot(tm, w, vs))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--box", required=True, metavar="SIDE.json:MODEL:INDEX")
    ap.add_argument("--node", default="sa")
    ap.add_argument("--input", default="n1")
    a = ap.parse_args(argv)
    with open(a.graph) as f:
        g = network_from_json(json.load(f))
    path, model, index = a.box.rsplit(":", 2)
    with open(path) as f:
        b = next(m for m in json.load(f)["models"] if m["name"] == model)["boxes"][int(index)]
    box = Box(tuple(F(v) for v in b["lo"]), tuple(F(v) for v in b["hi"]))
    tm = TaylorContext(128, box.centre, box.half)
    with tm.scope():
        vals = node_values(g, tm, tm.inputs())
        p = g.numeric(tm)[a.node]
        X = vals[a.input]
        Q, K, V = ([_affine(tm, p[k], x) for x in X] for k in ("q", "k", "v"))
        print(f"{a.graph}, box {a.box} (side {b['width']}): the node as bound encloses it: widest entry "
              f"{max(width(v) for r in vals[a.node] for v in r):.3g}")
        for variant in VARIANTS:
            O = [_affine(tm, p["o"], [x for i in range(p["heads"]) for x in head_output(tm, p, Q, K, V, j, i, variant)])
                 for j in range(len(X))]
            rest = dict(vals)
            rest[a.node] = O
            num = g.numeric(tm)
            after = [nd for nd in g.nodes][[nd.name for nd in g.nodes].index(a.node) + 1:]
            for nd in after:
                rest[nd.name] = _tensor(tm, nd, num[nd.name], [rest[k] for k in nd.inputs])
            y = [v for r in rest[g.output] for v in r]
            print(f"  {variant}: widest entry {max(width(v) for r in O for v in r):.3g}; the graph's output then "
                  f"{max(width(v) for v in y):.3g} wide")
    return 0


if __name__ == "__main__":
    sys.exit(main())
