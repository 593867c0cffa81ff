"""The linear bounds beside the float pass and the recorded auto_LiRPA widths, on the peer boxes.

    python benchmarks/peers/make_models.py /tmp/peers_models
    python benchmarks/peers/bench_linear.py --side benchmarks/peers/results/side.json \
        --peers benchmarks/peers/results/peers.json \
        --model attention=/tmp/peers_models/attention.json --model mlp=/tmp/peers_models/mlp.json \
        --out benchmarks/peers/results/linear.json

Run with symbounds' environment (auto_LiRPA is not needed: its enclosures are read from the
recorded ``peers.json`` of ``bench_peers.py``, on exactly the boxes of ``side.json``).  For each
box (exact ends from ``side.json``):

* ``float``: the outward-rounded float64 Taylor-model pass (``symbounds/core/float_boxes.py``);
* ``linear``: the backward linear bounds (``symbounds/core/linear_bounds.py``), already met with
  the float pass's Taylor ranges computed alongside, and met once more with the float pass's own
  enclosure as ``symbounds bound`` does;
* the recorded IBP, CROWN-IBP, CROWN and alpha-CROWN enclosures of auto_LiRPA (float64, no
  directed rounding).

Valid: finite, lower <= upper, and containing the 300-bit ball of ``T`` at the box centre recorded
in ``side.json`` (compared exactly).  Per width: the median width over valid boxes, the median
ratio to CROWN's width on boxes valid for both, and how many boxes CROWN is narrower on (by more
than 1e-6 relative).  Times are CPU seconds per box, all boxes of a model in one call.
"""

import argparse
import json
import math
import statistics
import sys
import time
from fractions import Fraction as F

import numpy as np

from symbounds.core.boxes import float_evaluator
from symbounds.core.linear_bounds import linear_evaluator
from symbounds.core.modelfile import load_model

PEERS = ("IBP", "CROWN-IBP", "CROWN", "alpha-CROWN")


def frac(s: str) -> F:
    return F(s)


def valid(lo, hi, c_lo: F, c_hi: F) -> bool:
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        return False
    return F(lo) <= c_lo and c_hi <= F(hi)


def run(name, path, side_model, peers):
    model = load_model(path)
    fast = float_evaluator(model, 128)
    lin = linear_evaluator(model, 128, fast)
    rows = side_model["boxes"]
    los = [tuple(frac(v) for v in r["lo"]) for r in rows]
    his = [tuple(frac(v) for v in r["hi"]) for r in rows]
    t = time.process_time()
    flo, fhi, fok = fast.ranges(los, his)
    t_float = (time.process_time() - t) / len(rows)
    t = time.process_time()
    llo, lhi, lok = lin.ranges(los, his)
    t_lin = (time.process_time() - t) / len(rows)
    both = fok & lok
    llo = np.where(both, np.maximum(llo, flo), llo)
    lhi = np.where(both, np.minimum(lhi, fhi), lhi)
    tools = {"float": [(float(a), float(b)) if k else (None, None) for a, b, k in zip(flo, fhi, fok)],
             "linear": [(float(a), float(b)) if k else (None, None) for a, b, k in zip(llo, lhi, lok)]}
    for res in peers:
        if res.get("name") == name and res.get("method") in PEERS and res.get("lo") is not None:
            tools[res["method"]] = list(zip(res["lo"], res["hi"]))
    widths = sorted({r["width"] for r in rows}, reverse=True)
    table = {}
    for tool, ends in tools.items():
        per = {}
        for w in widths:
            idx = [i for i, r in enumerate(rows) if r["width"] == w]
            ok = [i for i in idx if valid(*ends[i], *(frac(v) for v in rows[i]["centre"]))]
            cw = []
            crown = tools.get("CROWN")
            narrower = 0
            for i in ok:
                if crown is not None and valid(*crown[i], *(frac(v) for v in rows[i]["centre"])):
                    a = ends[i][1] - ends[i][0]
                    c = crown[i][1] - crown[i][0]
                    cw.append(a / c if c > 0 else math.inf)
                    narrower += c < a * (1 - 1e-6)
            per[w] = {"median": statistics.median(ends[i][1] - ends[i][0] for i in ok) if ok else None,
                      "valid": len(ok), "boxes": len(idx),
                      "ratio_to_crown": statistics.median(cw) if cw else None,
                      "max_ratio_to_crown": max(cw) if cw else None,
                      "crown_narrower": narrower if cw else None}
        table[tool] = per
    print(f"{name}: {len(rows)} boxes, float {t_float:.2e} s/box, linear {t_lin:.2e} s/box (batched)",
          file=sys.stderr, flush=True)
    return {"name": name, "times": {"float_batched": t_float, "linear_batched": t_lin},
            "boxes": [{"width": r["width"], "float": tools["float"][i], "linear": tools["linear"][i]}
                      for i, r in enumerate(rows)],
            "table": {t: {str(w): v for w, v in per.items()} for t, per in table.items()}, "widths": widths}


def render(out) -> str:
    lines = []
    for m in out["models"]:
        ws = m["widths"]
        lines.append(f"**{m['name']}** (float pass {m['times']['float_batched']:.1e} s/box, linear "
                     f"{m['times']['linear_batched']:.1e} s/box, batched)\n")
        lines.append("| tool | " + " | ".join(f"width {w:g}" for w in ws) + " |")
        lines.append("|---|" + "---|" * len(ws))
        for tool, per in m["table"].items():
            cells = []
            for w in ws:
                c = per[str(w)]
                if c["median"] is None:
                    cells.append(f"- ({c['valid']}/{c['boxes']})")
                    continue
                s = f"{c['median']:.3e} ({c['valid']}/{c['boxes']})"
                if tool != "CROWN" and c["ratio_to_crown"] is not None:
                    top = c["max_ratio_to_crown"]
                    most = f"x{top:.4g}" if abs(top - 1) >= 1e-3 else f"x(1 {'+' if top >= 1 else '-'} {abs(top - 1):.1e})"
                    s += f", x{c['ratio_to_crown']:.4g} of CROWN (at most {most}), CROWN narrower on {c['crown_narrower']}"
                cells.append(s)
            lines.append(f"| {tool} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--side", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--model", action="append", required=True, help="NAME=PATH (NAME as in side.json)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    with open(a.side) as f:
        side = {m["name"]: m for m in json.load(f)["models"]}
    with open(a.peers) as f:
        peers = json.load(f)["results"]
    out = {"models": []}
    for spec in a.model:
        name, path = spec.split("=", 1)
        out["models"].append(run(name, path, side[name], peers))
    with open(a.out, "w") as f:
        json.dump(out, f)
    print(render(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
