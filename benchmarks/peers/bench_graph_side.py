"""The symbounds side of the peer comparison on layer graphs (``symbounds-graph/1``).

    python benchmarks/peers/bench_graph_side.py --model ln_gelu=ln_gelu.json \
        --model tanh_sigmoid=tanh_sigmoid.json --model encoder=encoder.json:30 --per-width 10 \
        --out graph_side.json

Run with symbounds' environment.  ``NAME=PATH[:SECONDS]``: a layer-graph file with one output;
``SECONDS`` caps each adaptive bound (default 60 s).  Boxes as ``bench_symbounds_side.py`` draws
them (seed 0; ``--per-width`` boxes of side ``w`` for ``w`` in 10^-1 .. 10^-4, centres uniform in
``[w/2, 1 - w/2]^d``, every end a float64 number, so the peer reads exactly the same boxes).
A layer graph is enclosed in Arb only (there is no float pass for graphs), at 128 bits.  For each box:

* ``taylor``: one Arb first-order Taylor model of the whole box met with plain interval balls
  (the evaluator every sub-box of ``bound`` gets), timed one box per call and, as "batched", all
  boxes of the model through one evaluator call (Arb has no batched mode: box by box);
* ``linear``: the same met with the graph's backward linear bounds (``symbounds/core/linear_graph.py``),
  what every sub-box of ``bound`` gets on a small graph (``--linear auto``), timed the same ways;
* ``bound``: ``symbounds.core.bound.bound`` with its defaults (adaptive, tolerance 1/10, at most
  4000 sub-boxes) and the time cap: the enclosure ``symbounds bound`` prints, with its sub-box
  count, what stopped it, and the sampled range (values the network certainly reaches, so the true
  range lies between it and every valid enclosure);
* ``bound_tol_P_Q`` (with ``--tight P/Q``, repeatable): the same with tolerance ``P/Q``;
* ``centre``: an Arb ball of the output at the exact box centre at 300 bits.

Times are CPU seconds of this process (``time.process_time``).
"""

import argparse
import json
import sys
import time
from fractions import Fraction as F

from bench_symbounds_side import WIDTHS, boxes_for, down, s, up, valid

from symbounds.core.bound import bound, outputs_at
from symbounds.core.contexts import BallContext
from symbounds.core.graph_file import network_from_json
from symbounds.core.search import BoxEvaluator


def ends(e):
    return (None, None) if e is None else (down(e.lo[0]), up(e.hi[0]))


def tol_key(tol: str) -> str:
    return "bound_tol_" + tol.replace("/", "_")


def run_bound(g, b, cap, tol=None):
    t = time.process_time()
    r = bound(g, list(b.lo), list(b.hi), timeout=cap, tol=tol)
    t = time.process_time() - t
    one = lambda v: v[0] if isinstance(v, tuple) else v  # a graph has no readout: one output, listed
    slo, shi = one(r.sampled_lower), one(r.sampled_upper)
    return {"lo": down(one(r.lower)), "hi": up(one(r.upper)), "boxes": r.boxes, "evaluated": r.evaluated,
            "stopped": r.stopped, "seconds": t,
            "sampled": [None if slo is None else float(slo), None if shi is None else float(shi)],
            "sampled_exact": [None if slo is None else s(slo), None if shi is None else s(shi)]}


def run_model(name, path, cap, per_width, widths, tight):
    with open(path) as f:
        gj = json.load(f)
    g = network_from_json(gj)
    if g.output_count != 1:
        raise SystemExit(f"{name}: the benchmark bounds one output, the graph has {g.output_count}")
    d = g.input_count
    boxes = boxes_for(d, per_width, widths=widths)
    ev = BoxEvaluator(g, 128, fast=False)
    ev._arb(boxes[-1][1])  # the one-off conversion of the weights to Arb
    single, t = [], time.process_time()
    for _, b in boxes:
        single.append(ev._arb(b))
    t_single = (time.process_time() - t) / len(boxes)
    t = time.process_time()
    ev.enclose([b for _, b in boxes])
    t_batch = (time.process_time() - t) / len(boxes)
    # the same met with the graph's backward linear bounds (symbounds/core/linear_graph.py)
    evl = BoxEvaluator(g, 128, fast=False, linear=True)
    evl._arb(boxes[-1][1])
    lin, t = [], time.process_time()
    for _, b in boxes:
        lin.append(evl._arb(b))
    t_lin = (time.process_time() - t) / len(boxes)
    t = time.process_time()
    evl.enclose([b for _, b in boxes])
    t_lin_batch = (time.process_time() - t) / len(boxes)
    rows, t_bound, t_tight = [], 0.0, {}
    ball300 = BallContext(300)
    for i, (w, b) in enumerate(boxes):
        c_lo, c_hi = ball300.to_fraction_bounds(outputs_at(g, b.centre, 300)[0])
        a_lo, a_hi = ends(single[i])
        l_lo, l_hi = ends(lin[i])
        bd = run_bound(g, b, cap)
        t_bound += bd["seconds"]
        row = {"width": w, "lo": [s(v) for v in b.lo], "hi": [s(v) for v in b.hi],
               "lo_float": [float(v) for v in b.lo], "hi_float": [float(v) for v in b.hi],
               "centre": [s(c_lo), s(c_hi)], "centre_float": [down(c_lo), up(c_hi)],
               "taylor": {"lo": a_lo, "hi": a_hi, "method": None if single[i] is None else single[i].method,
                          **valid(a_lo, a_hi, c_lo, c_hi)},
               "linear": {"lo": l_lo, "hi": l_hi, "method": None if lin[i] is None else lin[i].method,
                          **valid(l_lo, l_hi, c_lo, c_hi)},
               "bound": {**bd, **valid(bd["lo"], bd["hi"], c_lo, c_hi)}}
        for tol in tight:
            bt = run_bound(g, b, cap, tol)
            t_tight[tol] = t_tight.get(tol, 0.0) + bt["seconds"]
            row[tol_key(tol)] = {**bt, **valid(bt["lo"], bt["hi"], c_lo, c_hi)}
        rows.append(row)
        print(f"{name} box {i} (width {w:g}): bound [{bd['lo']:.6g}, {bd['hi']:.6g}], {bd['boxes']} boxes, "
              f"{bd['seconds']:.2f} s, stopped {bd['stopped']}", file=sys.stderr, flush=True)
    times = {"taylor_single": t_single, "taylor_batched": t_batch, "linear_single": t_lin,
             "linear_batched": t_lin_batch, "bound_single": t_bound / len(boxes)}
    tools = {"bound": "symbounds bound (adaptive, tol 1/10)", "taylor": "symbounds Arb Taylor, one box",
             "linear": "symbounds Taylor + linear bounds, one box"}
    for tol in tight:
        times[tol_key(tol) + "_single"] = t_tight[tol] / len(boxes)
        tools[tol_key(tol)] = f"symbounds bound (adaptive, tol {tol})"
    print(f"{name}: {len(boxes)} boxes, d={d}, Taylor {t_single:.5f} s/box single, {t_batch:.5f} batched, "
          f"bound {times['bound_single']:.3f} s/box", file=sys.stderr, flush=True)
    return {"name": name, "path": path, "format": gj["format"], "eps": None, "d": d, "tokens": g.tokens,
            "width_D": g.width, "cap": cap, "layers": [nd["op"] for nd in gj["nodes"]],
            "tools": tools, "times": times, "boxes": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", required=True, help="NAME=PATH[:SECONDS]")
    ap.add_argument("--per-width", type=int, default=10)
    ap.add_argument("--widths", default=None, help="box sides, comma-separated fractions (default 1/10,...,1/10000)")
    ap.add_argument("--tight", action="append", default=[], help="also run the adaptive bound with this "
                    "tolerance (repeatable)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    widths = WIDTHS if a.widths is None else tuple(F(w) for w in a.widths.split(","))
    out = []
    for spec in a.model:
        name, rest = spec.split("=", 1)
        path, _, cap = rest.partition(":")
        out.append(run_model(name, path, float(cap or 60), a.per_width, widths, a.tight))
    with open(a.out, "w") as f:
        json.dump({"models": out, "widths": [float(w) for w in widths], "seed": 0}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
