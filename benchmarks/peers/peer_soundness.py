"""Points of each box where the network's float64 value lies outside a peer's enclosure.

    benchmarks/peers/.venv/bin/python benchmarks/peers/peer_soundness.py --side encoder_side.json \
        --peers encoder_peers.json --model encoder --method CROWN [--points 20000]

Run with the peer environment; symbounds is not imported.  For every box the peer enclosed, the
torch module of ``bench_peers.build_graph_net`` at ``--points`` uniform random points (seed 0) and
at every corner of the box; a box is printed when the smallest value is below the peer's lower
bound or the largest above its upper bound.  A miss far above float64's rounding (about 10^-16
here) is a point where the peer's enclosure does not hold.
"""

import argparse
import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_peers import build_graph_net, load  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--side", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--method", default="CROWN")
    ap.add_argument("--points", type=int, default=20000)
    a = ap.parse_args(argv)
    import torch

    torch.set_default_dtype(torch.float64)
    side, peers = load(a.side), load(a.peers)
    m = next(mm for mm in side["models"] if mm["name"] == a.model)
    net = build_graph_net(load(m["path"]))
    res = next(r for r in peers["results"] if r["name"] == a.model and r["method"] == a.method)
    gen = torch.Generator().manual_seed(0)
    bad = 0
    for i, b in enumerate(m["boxes"]):
        if res["lo"][i] is None:
            continue
        lo, hi = torch.tensor(b["lo_float"]), torch.tensor(b["hi_float"])
        corners = torch.tensor(list(itertools.product([0.0, 1.0], repeat=len(lo))))
        pts = torch.cat([lo + (hi - lo) * torch.rand(a.points, len(lo), generator=gen), lo + (hi - lo) * corners])
        with torch.no_grad():
            y = net(pts)[:, 0]
        below, above = res["lo"][i] - y.min().item(), y.max().item() - res["hi"][i]
        if below > 0 or above > 0:
            bad += 1
            print(f"box {i} (side {b['width']:g}): {a.method} [{res['lo'][i]:.17g}, {res['hi'][i]:.17g}]; "
                  f"values from {y.min().item():.17g} (below the lower bound by {max(below, 0):.3g}) to "
                  f"{y.max().item():.17g} (above the upper bound by {max(above, 0):.3g})")
    print(f"{a.model}, {a.method}: {bad} boxes with a value outside the enclosure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
