"""`symbounds pou` (every claim, Arb balls, precision escalation) on the [SL26] network at large grids,
d = 2, g = sin(x1 + x2)/2: one Markdown row per P, each size in its own process (so the peak
memory is that size's own).  CPU seconds (time.process_time), since the machine may be loaded.

    python benchmarks/bench_pou_large.py [--P 64,256,1024,4096] [--points 8]

"build" is the exact construction (SymPy weights); "setup" the exact detection of the shared
softmax weights plus the first evaluation at 128 bits (one exponential per distinct score, the
layer-1 head outputs as Arb matrix products); "pou" the rest of the run on that same model
(the claims at every sample point, the constants, the assumptions on a grid, any precision
escalation).  The command's own grid stops at P = 1024 (`MAX_TOKENS`); this script lifts that
limit for P = 4096, as benchmarks/bench_setup.py does.
"""

import argparse
import resource
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from symbounds.core import transformer as T
from symbounds.core.contexts import BallContext
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.run import PouOptions, run

EPS = {64: "19/50", 144: "6/25", 256: "9/50", 1024: "9/100", 4096: "89/2000"}


def one(P: int, points: int) -> str:
    if P > sl.MAX_TOKENS:  # the command's own limit; the engine is measured beyond it here
        sys.modules["symbounds.papers.shi_liao.constants"].MAX_TOKENS = P
        sl.MAX_TRACED_TOKENS = P
    inst = sl.Instance(d=2, C_H=1, B=1, eps=EPS[P], target="sin(x1+x2)/2")
    t0 = time.process_time()
    K = sl.constants(inst)
    assert K.P == P, (P, K.P)
    model = sl.build(K)
    t1 = time.process_time()
    model.structure().shared_softmax  # the exact analysis and the sharing structure
    T.forward(BallContext(128), model, (Fraction(1, 3), Fraction(1, 5)))
    t2 = time.process_time()
    build, constants = sl.build, sl.constants
    sl.build = lambda K_: model  # the run reuses the constants and the warmed model
    sl.constants = lambda inst_: K
    try:
        res = run(inst, PouOptions(points=points))
    finally:
        sl.build, sl.constants = build, constants
    t3 = time.process_time()
    proved = sum(c.verdict == "proved" for c in res.claims)
    others = sorted({c.verdict for c in res.claims if c.verdict != "proved"})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    return (f"| {P} | {EPS[P]} | {proved}/{len(res.claims)} (others: {', '.join(others) or '-'}) | {res.samples} | "
            f"{res.prec} | {t1 - t0:.1f} | {t2 - t1:.1f} | {t3 - t2:.1f} | {t3 - t0:.1f} | {peak:.2f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--P", default="64,256,1024,4096")
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(one(args.one, args.points), flush=True)
        return
    print(f"# d = 2, sample points: 3x3 grid + {args.points} random; CPU seconds; peak RSS per process")
    print("| P | eps | claims proved | points | prec (bits) | build (s) | setup (s) | pou (s) | total (s) | "
          "peak memory (GiB) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for P in [int(p) for p in args.P.split(",")]:
        out = subprocess.run([sys.executable, __file__, "--one", str(P), "--points", str(args.points)],
                             capture_output=True, text=True, check=False)
        line = out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else (
            f"| {P} | failed: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode} |")
        print(line, flush=True)


if __name__ == "__main__":
    main()
