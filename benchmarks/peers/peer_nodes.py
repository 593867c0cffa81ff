"""auto_LiRPA's intermediate bounds of a layer graph over one box, node by node (the peer's side of
``diagnose_graph.py``).

    benchmarks/peers/.venv/bin/python benchmarks/peers/peer_nodes.py encoder.json --width 0.1 \
        [--centre 0.5] [--method CROWN] [--box encoder_side.json:encoder:0]

Run with the peer environment; symbounds is not imported.  The box is ``centre +- width/2`` in every
input; the torch module is ``bench_peers.build_graph_net``'s.  Prints the output bound and, for each
bounded node of auto_LiRPA's graph (its own names and operator classes), the widest entry's
``upper - lower``.
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_peers import build_graph_net, load  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--width", type=float, default=0.1)
    ap.add_argument("--centre", type=float, default=0.5)
    ap.add_argument("--method", default="CROWN")
    ap.add_argument("--box", metavar="SIDE.json:MODEL:INDEX", help="that box of a side file instead")
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    from auto_LiRPA import BoundedModule, BoundedTensor, PerturbationLpNorm

    gj = load(a.graph)
    net = build_graph_net(gj)
    d = int(gj["input"]["tokens"]) * int(gj["input"]["width"])
    lo = torch.full((1, d), a.centre - a.width / 2)
    hi = torch.full((1, d), a.centre + a.width / 2)
    where = f"box of side {a.width} around {a.centre}"
    if a.box:
        path, model, index = a.box.rsplit(":", 2)
        b = next(m for m in load(path)["models"] if m["name"] == model)["boxes"][int(index)]
        lo, hi = torch.tensor([b["lo_float"]]), torch.tensor([b["hi_float"]])
        where = f"box {a.box} (side {b['width']})"
    lm = BoundedModule(net, torch.zeros(1, d), device="cpu", bound_opts={"verbosity": 0})
    x = BoundedTensor((lo + hi) / 2, PerturbationLpNorm(norm=math.inf, x_L=lo, x_U=hi))
    l, u = lm.compute_bounds(x=(x,), method=a.method)
    print(f"{a.graph}, {a.method}, {where}: output [{l.item():.6g}, {u.item():.6g}], "
          f"width {(u - l).item():.3g}")
    print("| node | operator | shape | widest entry |")
    print("|---|---|---|---|")
    for n in lm.nodes():
        lo_n, hi_n = getattr(n, "lower", None), getattr(n, "upper", None)
        if isinstance(lo_n, torch.Tensor) and isinstance(hi_n, torch.Tensor) and lo_n.numel() > 1:
            w = (hi_n - lo_n).max().item()
            if w > 0:
                print(f"| {n.name} | {type(n).__name__} | {tuple(lo_n.shape)} | {w:.3g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
