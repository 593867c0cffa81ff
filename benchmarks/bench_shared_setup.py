"""The float setup of a model file with and without rows shared across the first layer's heads.

    python benchmarks/bench_shared_setup.py [--eps 9/50,9/100,2/45] [--unshared-max 1024]

For d = 2, C_H = 1, B = 1, target sin(x1+x2)/2 (P = 256, 1024, 4096 at the default eps), each
instance and mode in a fresh process: CPU seconds of the [SL26] constants, the model file (the
network written at 192 bits and read back), the float setup (``float_evaluator``: the weights as
float balls and the affine prefix), the interval softmax rows computed and shared, and the peak
resident memory.  "unshared" runs the same code with every row computed on its own (the setup
before ``symbounds.core.float_shared``), up to ``--unshared-max`` tokens (P^3: about an hour at
P = 4096).
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from symbounds.core import float_shared
float_shared.SHARE_FROM_ROWS = 0  # the mechanism at every P (certify shares from 2^18 rows only)
from symbounds.core.boxes import float_evaluator
from symbounds.core.modelfile import model_from_json, model_to_json
from symbounds.papers import shi_liao as sl
made = []
init = float_shared.SharedRows.__init__
def counted(self, compute):
    init(self, compute)
    made.append(self)
float_shared.SharedRows.__init__ = counted
if SHARED is False:
    def alone(self, Q, K, tau, keep):
        self.computed += Q.c.shape[2]
        return self.compute(Q, K, tau, keep)
    float_shared.SharedRows.softmax = alone
cpu = time.process_time
t0 = cpu()
inst = sl.Instance(d=2, C_H=1, B=1, eps=EPS, target="sin(x1+x2)/2")
K = sl.constants(inst, max_tokens=1 << 16)
t1 = cpu()
mj = model_to_json(sl.build(K), 192)
model = model_from_json(mj)
t2 = cpu()
fast = float_evaluator(model, 128)
t3 = cpu()
print(json.dumps({"P": K.P, "constants": t1 - t0, "model": t2 - t1, "setup": t3 - t2,
                  "computed": sum(m.computed for m in made), "shared": sum(m.shared for m in made),
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(eps: str, shared: bool) -> dict:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = CHILD.replace("EPS", repr(eps)).replace("SHARED", repr(shared))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=here,
                         env=dict(os.environ, PYTHONPATH=here))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eps", default="9/50,9/100,2/45")
    ap.add_argument("--unshared-max", type=int, default=1024)
    ap.add_argument("--P", default="256,1024,4096", help="the P of each eps, to skip unshared runs above the limit")
    args = ap.parse_args()
    print("| P | setup | constants (s) | model file (s) | float setup (s) | softmax rows computed | rows shared | "
          "peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|---|")
    rows = {}
    for eps, P in zip(args.eps.split(","), [int(p) for p in args.P.split(",")]):
        for shared in ((False, True) if P <= args.unshared_max else (True,)):
            o = run(eps, shared)
            rows[(o["P"], shared)] = o
            print(f"| {o['P']} | {'shared' if shared else 'unshared'} | {o['constants']:.1f} | {o['model']:.1f} | "
                  f"{o['setup']:.2f} | {o['computed']:,} | {o['shared']:,} | {o['rss']:.0f} |", flush=True)
    for P in sorted({p for p, _ in rows}):
        if (P, False) in rows and (P, True) in rows:
            print(f"P = {P}: unshared / shared float setup {rows[(P, False)]['setup'] / rows[(P, True)]['setup']:.1f}x")


if __name__ == "__main__":
    main()
