"""The encoder's one-box Taylor output and ``bound`` with two checkouts side by side, box by box.

    python benchmarks/peers/attention_node_side.py encoder.json encoder_side.json \
        --checkout /path/to/main --checkout . --boxes 0,10,20,30 [--cap 20]

Run with symbounds' environment.  For each box, each checkout in turn (interleaved, so load
affects both), a fresh process with ``PYTHONPATH`` set to the checkout: the widest output of the
graph evaluated in first-order Taylor models over the whole box and its CPU seconds, then
``bound(g, lo, hi, timeout=CAP)`` at the default tolerance (width, boxes, stop, CPU seconds).
"""

import argparse
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
from fractions import Fraction as F
from symbounds.core.bound import bound
from symbounds.core.graph_file import network_from_json
from symbounds.core.taylor import TaylorContext
g = network_from_json(json.load(open(sys.argv[1])))
b = next(m for m in json.load(open(sys.argv[2]))["models"] if m["name"] == "encoder")["boxes"][int(sys.argv[3])]
lo, hi = [F(v) for v in b["lo"]], [F(v) for v in b["hi"]]
tm = TaylorContext(128, [(a + c) / 2 for a, c in zip(lo, hi)], [(c - a) / 2 for a, c in zip(lo, hi)])
t = time.process_time()
with tm.scope():
    w = max(float(v.range().rad()) * 2 for v in g.evaluate(tm, tm.inputs()))
t = time.process_time() - t
s = time.process_time()
r = bound(g, lo, hi, timeout=float(sys.argv[4]))
s = time.process_time() - s
L, U = (r.lower[0], r.upper[0]) if isinstance(r.lower, tuple) else (r.lower, r.upper)
print(f"box {sys.argv[3]} (side {b['width']}): one-box Taylor {w:.3g} ({t:.3f} s CPU); bound {float(U - L):.6g}, "
      f"{r.boxes} boxes, stopped {r.stopped}, {s:.2f} s CPU")
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph")
    ap.add_argument("side")
    ap.add_argument("--checkout", action="append", required=True)
    ap.add_argument("--boxes", default="0,10,20,30")
    ap.add_argument("--cap", default="20")
    a = ap.parse_args(argv)
    for box in a.boxes.split(","):
        for root in a.checkout:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
            # in the checkout's directory: ``-c`` puts the working directory first on sys.path
            out = subprocess.run([sys.executable, "-c", CHILD, os.path.abspath(a.graph), os.path.abspath(a.side),
                                  box, a.cap], env=env, cwd=os.path.abspath(root), capture_output=True, text=True)
            print(f"{root}: {out.stdout.strip() or out.stderr.strip().splitlines()[-1]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
