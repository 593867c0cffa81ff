"""Certificates with the target enclosed in floats (compiled once) against an earlier tree.

    python benchmarks/bench_certify_target.py --before DIR [--rounds 2] [--only d2|default]

``DIR`` holds an earlier checkout's ``symbounds`` package (e.g. ``git archive v0 symbounds | tar
-x -C DIR``).  Each round runs every instance once with each tree, interleaved, in fresh
processes with one worker (the machine's load then affects both alike), and prints one Markdown
row per run: the CPU seconds of the whole run (model, setup, boxes), the boxes proved and
evaluated, the largest certified bound, and the number of Arb evaluations of the target and of
boxes given a centre point pass (counted by wrapping the functions, in both trees).
"""

import argparse
import json
import os
import subprocess
import sys

INSTANCES = {
    "d2": "sl.Instance(d=2, C_H=1, B=1, eps='9/50', target='sin(x1+x2)/2')",
    "default": "sl.Instance()",
}

CHILD = r"""
import json, resource, sys, time
from symbounds.core import boxes as bx
from symbounds.core.boxes import CertifyOptions
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.certificate import certify_instance
counts = {"arb_target": 0, "centre_passes": 0}
def counted(name, f, size=None):
    def g(*a, **k):
        counts[name] += 1 if size is None else len(a[size])
        return f(*a, **k)
    return g
bx._float_box_bound = counted("arb_target", bx._float_box_bound)
bx._centre_verdict = counted("arb_target", bx._centre_verdict)
bx.centre_refutes = counted("centre_passes", bx.centre_refutes, 3)
inst = INST
t0 = time.process_time()
cert, res = certify_instance(inst, CertifyOptions(workers=1))
cpu = time.process_time() - t0
print(json.dumps({"P": sl.constants(inst).P, "cpu": cpu, "proved": len(res.boxes), "evaluated": res.evaluated,
                  "max_bound": str(res.max_bound), "verdict": res.verdict, **counts}))
"""


def run(tree: str, inst: str) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD.replace("INST", inst)], env=env, capture_output=True, cwd=tree,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="directory holding the earlier symbounds package")
    ap.add_argument("--after", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", choices=list(INSTANCES))
    args = ap.parse_args()
    print("| instance | P | tree | CPU (s) | boxes proved | boxes evaluated | largest bound | verdict | Arb target evaluations | boxes given a centre point pass |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in range(args.rounds):
        for key, inst in INSTANCES.items():
            if args.only and key != args.only:
                continue
            order = [("before", args.before), ("after", args.after)]
            if r % 2:
                order.reverse()
            for name, tree in order:
                o = run(tree, inst)
                from fractions import Fraction

                mb = Fraction(o["max_bound"]) if o["max_bound"] != "None" else None
                print(f"| {key} | {o['P']} | {name} | {o['cpu']:.1f} | {o['proved']} | {o['evaluated']} | "
                      f"{'-' if mb is None else f'{float(mb):.9f}'} | {o['verdict']} | {o['arb_target']} | "
                      f"{o['centre_passes']} |", flush=True)


if __name__ == "__main__":
    main()
