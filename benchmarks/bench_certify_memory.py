"""Peak memory of a certificate's one-off work (model file, float setup) against P.

    python benchmarks/bench_certify_memory.py [--eps 9/50,3/25,9/100]

For d = 2, C_H = 1, B = 1, target sin(x1+x2)/2, each eps in a fresh process: P, the peak
resident memory (MiB, ``ru_maxrss``) after building the model file and after the float setup,
and the fitted bytes per P^2 that ``certify`` uses to estimate the setup's memory
(:func:`symbounds.papers.shi_liao.certificate.setup_memory_estimate`).
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys
from symbounds.core.boxes import float_evaluator
from symbounds.core.modelfile import model_from_json, model_to_json
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.certificate import setup_memory_estimate
inst = sl.Instance(d=2, C_H=1, B=1, eps=EPS, target="sin(x1+x2)/2")
K = sl.constants(inst, max_tokens=1 << 16)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
mj = model_to_json(sl.build(K), 192)
model = model_from_json(mj)
after_model = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
fast = float_evaluator(model, 128)
after_setup = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"P": K.P, "base": base, "model": after_model, "setup": after_setup,
                  "estimate": setup_memory_estimate(K.P, 2)}))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eps", default="9/50,3/25,9/100")
    args = ap.parse_args()
    print("| P | peak after model file (MiB) | peak after float setup (MiB) | above start (MiB) | estimate (MiB) |")
    print("|---|---|---|---|---|")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for eps in args.eps.split(","):
        out = subprocess.run([sys.executable, "-c", CHILD.replace("EPS", repr(eps))], capture_output=True, text=True,
                             check=True, cwd=here, env=dict(os.environ, PYTHONPATH=here))
        o = json.loads(out.stdout.strip().splitlines()[-1])
        mib = lambda kib: kib / 1024
        print(f"| {o['P']} | {mib(o['model']):.0f} | {mib(o['setup']):.0f} | {mib(o['setup'] - o['base']):.0f} | "
              f"{o['estimate'] / 2**20:.0f} |", flush=True)


if __name__ == "__main__":
    main()
