"""The symbounds side of the peer comparison: boxes, symbounds' enclosures on them, 300-bit centres.

    python benchmarks/peers/bench_symbounds_side.py --model pou=pou.json:1/10 \
        --model pou100=pou100.json:1/25 --model attention=attention.json --model mlp=mlp.json \
        --per-width 25 --out side.json

Run with symbounds' environment.  ``NAME=PATH[:EPS]``: a model file; with ``EPS`` it is the
[SL26] network of ``symbounds pou --eps EPS`` (target ``sin(2 x1)``, d = 1), and every box also
gets ``g``'s enclosure over it and the bound of ``|T - g|`` that certification compares with ``EPS``.

Boxes (seed 0): for each width ``w`` in 10^-1 .. 10^-4 (or ``--widths``), ``--per-width`` boxes of side ``w``
around centres drawn uniformly in ``[w/2, 1 - w/2]^d``; every end is a float64 number, so the
peer reads exactly the same boxes.  For each box:

* ``float``: the outward-rounded float64 Taylor-model pass (``symbounds/core/float_boxes.py``),
  timed one box per call and all boxes of the model in one batched call;
* ``linear``: the backward linear bounds (``symbounds/core/linear_bounds.py``) met with the float
  pass, as ``symbounds bound`` does, all boxes in one call;
* ``arb``: Arb first-order Taylor models at 128 bits met with interval balls (either alone where
  the other fails), one box per call;
* ``centre``: an Arb ball of ``T`` at the exact box centre at 300 bits, on the exact model file.

Times are CPU seconds of this process (``time.process_time``).  The JSON holds every end as an
exact fraction string ``"p/q"`` and as a float rounded outward.
"""

import argparse
import json
import math
import random
import sys
import time
from fractions import Fraction as F

import numpy as np

from symbounds.core.bound import outputs_at
from symbounds.core.boxes import Box, float_evaluator
from symbounds.core.contexts import BallContext
from symbounds.core.linear_bounds import linear_evaluator
from symbounds.core.search import BoxEvaluator
from symbounds.core.modelfile import model_from_json
from symbounds.papers import shi_liao as sl

WIDTHS = (F(1, 10), F(1, 100), F(1, 1000), F(1, 10000))


def boxes_for(d, per_width, seed=0, widths=WIDTHS):
    rng = random.Random(seed)
    out = []
    for w in widths:
        for _ in range(per_width):
            c = [w / 2 + (1 - w) * F(rng.randrange(1 << 30), 1 << 30) for _ in range(d)]
            lo = tuple(F(float(x - w / 2)) for x in c)
            hi = tuple(F(float(x + w / 2)) for x in c)
            out.append((float(w), Box(lo, hi)))
    return out


def s(q: F) -> str:
    return f"{q.numerator}/{q.denominator}"


def down(q: F) -> float:
    x = float(q)
    return x if F(x) <= q else math.nextafter(x, -math.inf)


def up(q: F) -> float:
    x = float(q)
    return x if F(x) >= q else math.nextafter(x, math.inf)


def valid(lo, hi, c_lo: F, c_hi: F) -> dict:
    fin = lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi)
    return {"finite": fin, "ordered": fin and lo <= hi,
            "contains_centre": fin and F(lo) <= c_lo and c_hi <= F(hi)}


def err_bound(lo, hi, g_lo: F, g_hi: F):
    """Upper end of ``|T - g|`` over a box from ``T in [lo, hi]`` and ``g in [g_lo, g_hi]``."""
    if lo is None or not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        return None
    return max(F(hi) - g_lo, g_hi - F(lo))


def arb_box(ev, b):
    """``((lo, hi), method)``: the Arb enclosure of one box (Taylor models met with interval
    balls), ``((None, None), "undecided")`` when neither encloses it."""
    e = ev._arb(b)
    if e is None:
        return (None, None), "undecided"
    return (e.lo[0], e.hi[0]), e.method


def run_model(name, path, eps, per_width, widths=WIDTHS):
    with open(path) as f:
        mj = json.load(f)
    model = model_from_json(mj)
    d = len(model.embedding.E[0])
    boxes = boxes_for(d, per_width, widths=widths)
    g = None
    if eps is not None:
        g = sl.constants(sl.Instance(eps=eps)).g
        xs = sorted(g.free_symbols, key=str)
    t = time.process_time()
    fast = float_evaluator(model, 128)
    t_setup = time.process_time() - t
    # the float pass: one box per call, then every box in one call
    single = []
    t = time.process_time()
    for _, b in boxes:
        single.append(fast.ranges([b.lo], [b.hi]))
    t_single = (time.process_time() - t) / len(boxes)
    t = time.process_time()
    flo, fhi, fok = fast.ranges([b.lo for _, b in boxes], [b.hi for _, b in boxes])
    t_batch = (time.process_time() - t) / len(boxes)
    # the linear bounds (met with the float pass, as symbounds bound does), all boxes in one call
    lin = linear_evaluator(model, 128, fast)
    t = time.process_time()
    llo, lhi, lok = lin.ranges([b.lo for _, b in boxes], [b.hi for _, b in boxes])
    t_lin = (time.process_time() - t) / len(boxes)
    llo, lhi = np.where(lok & fok, np.maximum(llo, flo), llo), np.where(lok & fok, np.minimum(lhi, fhi), lhi)
    # Arb Taylor models, one box per call (the first call also does the Arb one-off setup)
    ev = BoxEvaluator(model, 128, fast=False)
    arb_box(ev, boxes[-1][1])
    arb, t = [], time.process_time()
    for _, b in boxes:
        arb.append(arb_box(ev, b))
    t_arb = (time.process_time() - t) / len(boxes)
    rows = []
    ball300 = BallContext(300)
    for i, (w, b) in enumerate(boxes):
        c_lo, c_hi = ball300.to_fraction_bounds(outputs_at(model, b.centre, 300)[0])
        fl = float(flo[i]) if fok[i] else None
        fh = float(fhi[i]) if fok[i] else None
        ll = float(llo[i]) if lok[i] else None
        lh = float(lhi[i]) if lok[i] else None
        (a_lo, a_hi), method = arb[i]
        a_lo, a_hi = (None, None) if a_lo is None else (down(a_lo), up(a_hi))
        row = {"width": w, "lo": [s(v) for v in b.lo], "hi": [s(v) for v in b.hi],
               "lo_float": [float(v) for v in b.lo], "hi_float": [float(v) for v in b.hi],
               "centre": [s(c_lo), s(c_hi)], "centre_float": [down(c_lo), up(c_hi)],
               "float": {"lo": fl, "hi": fh, **valid(fl, fh, c_lo, c_hi)},
               "linear": {"lo": ll, "hi": lh, **valid(ll, lh, c_lo, c_hi)},
               "arb": {"lo": a_lo, "hi": a_hi, "method": method, **valid(a_lo, a_hi, c_lo, c_hi)}}
        if g is not None:
            ball = BallContext(128)
            with ball.scope():
                env = {x: ball.convert(a).union(ball.convert(bb)) for x, a, bb in zip(xs, b.lo, b.hi)}
                g_lo, g_hi = ball.to_fraction_bounds(ball.from_sympy(g, env=env))
            row["g"] = [s(g_lo), s(g_hi)]
            for key, (lo, hi) in (("float", (fl, fh)), ("linear", (ll, lh)), ("arb", (a_lo, a_hi))):
                e = err_bound(lo, hi, g_lo, g_hi)
                row[key]["err"] = None if e is None else up(e)
                row[key]["proves"] = e is not None and e <= F(eps)
        rows.append(row)
    tokens = len(model.embedding.base[0])
    print(f"{name}: {len(boxes)} boxes, d={d}, tokens={tokens}, float setup {t_setup:.3f} s, "
          f"float {t_single:.6f} s/box single, {t_batch:.6f} s/box batched, linear {t_lin:.6f} s/box batched, "
          f"Arb {t_arb:.5f} s/box",
          file=sys.stderr, flush=True)
    return {"name": name, "path": path, "eps": eps, "d": d, "tokens": tokens, "width_D": len(model.embedding.base),
            "layers": [L["type"] + (f"({len(L['heads'])} heads)" if "heads" in L else "") for L in mj["layers"]],
            "times": {"float_setup": t_setup, "float_single": t_single, "float_batched": t_batch,
                      "linear_batched": t_lin, "arb_single": t_arb}, "boxes": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", required=True, help="NAME=PATH[:EPS]")
    ap.add_argument("--per-width", type=int, default=25)
    ap.add_argument("--widths", default=None, help="box sides, comma-separated fractions (default 1/10,1/100,1/1000,1/10000)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    widths = WIDTHS if a.widths is None else tuple(F(w) for w in a.widths.split(","))
    out = []
    for spec in a.model:
        name, rest = spec.split("=", 1)
        path, _, eps = rest.partition(":")
        out.append(run_model(name, path, eps or None, a.per_width, widths))
    with open(a.out, "w") as f:
        json.dump({"models": out, "widths": [float(w) for w in widths], "seed": 0}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
