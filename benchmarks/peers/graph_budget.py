"""How the adaptive bound of a layer graph narrows with its budget, beside CROWN on the same box.

    python benchmarks/peers/graph_budget.py --side encoder_side.json --peers encoder_peers.json \
        --model encoder --boxes 0,1,10,11 --timeouts 20,80,320

Run with symbounds' environment (it reads the peer's results file as JSON, nothing of the peer
is imported).  For each chosen box of the side file and each time cap (wall seconds, as
``symbounds bound --timeout``), ``bound`` with its defaults otherwise (adaptive, tolerance 1/10 or
``--tol``) but at most ``--max-boxes`` sub-boxes (default 65536): the enclosure's width, the sub-boxes, CPU
seconds, what stopped it, and the width divided by CROWN's and by the sampled spread.
"""

import argparse
import json
import sys
import time
from fractions import Fraction as F

from symbounds.core.bound import bound
from symbounds.core.graph_file import network_from_json


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--side", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--boxes", required=True, help="box indices, comma-separated")
    ap.add_argument("--timeouts", default="20,80,320")
    ap.add_argument("--max-boxes", type=int, default=1 << 16)
    ap.add_argument("--tol", default=None, help="the adaptive tolerance (default bound's, 1/10)")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    with open(a.side) as f:
        side = json.load(f)
    with open(a.peers) as f:
        peers = json.load(f)
    m = next(mm for mm in side["models"] if mm["name"] == a.model)
    crown = next(r for r in peers["results"] if r["name"] == a.model and r["method"] == "CROWN")
    with open(m["path"]) as f:
        g = network_from_json(json.load(f))
    rows = []
    print("| box | width | cap (s) | enclosure width | sub-boxes | CPU s | stopped | ÷ CROWN | ÷ sampled spread |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i in (int(v) for v in a.boxes.split(",")):
        b = m["boxes"][i]
        lo, hi = [F(v) for v in b["lo"]], [F(v) for v in b["hi"]]
        cw = crown["hi"][i] - crown["lo"][i]
        for cap in (float(v) for v in a.timeouts.split(",")):
            t = time.process_time()
            r = bound(g, lo, hi, timeout=cap, max_boxes=a.max_boxes, tol=a.tol)
            t = time.process_time() - t
            w = float(r.upper[0] - r.lower[0])
            sp = float(r.sampled_upper[0] - r.sampled_lower[0])
            rows.append({"box": i, "width": b["width"], "cap": cap, "tol": a.tol, "enclosure": w, "boxes": r.boxes, "cpu": t,
                         "stopped": r.stopped, "crown": cw, "sampled": sp})
            print(f"| {i} | {b['width']:g} | {cap:g} | {w:.4g} | {r.boxes} | {t:.1f} | {r.stopped} | "
                  f"{w / cw:.3g} | {w / sp:.3g} |", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
