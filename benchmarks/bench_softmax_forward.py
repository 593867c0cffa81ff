"""CPU time of the softmax interpolation certificate [AFZ25] (Arb balls + exact rationals).

    PYTHONPATH=. python3 benchmarks/bench_softmax_forward.py [--repeat 3]

Same datasets as ``symbounds interp --random N,n,d,m --attention softmax`` (seed 0).  Reports the
process CPU time (less sensitive than wall time to other jobs on the machine) of building the
model and of ``certify_softmax``, the minimum over ``--repeat`` runs, and a profile of where the
certificate's time goes (forward pass vs the rest).  No assertions.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from symbounds.papers.alcalde import softmax as sm
from symbounds.papers.alcalde.dataset import random_dataset

CASES = [(10, 100, 16, 1), (4, 20, 16, 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    for N, n, d, m in CASES:
        ds = random_dataset(N, n, d, m, seed=0)
        builds, proofs = [], []
        for _ in range(args.repeat):
            t0 = time.process_time()
            con = sm.build_softmax(ds)
            t1 = time.process_time()
            _, exact, info = sm.certify_softmax(con)
            t2 = time.process_time()
            builds.append(t1 - t0)
            proofs.append(t2 - t1)
        print(f"--random {N},{n},{d},{m} --attention softmax: build {min(builds):.3f} s  "
              f"certify {min(proofs):.3f} s (CPU, min of {args.repeat})  exact={exact}  prec={info['prec']}",
              flush=True)
        if args.profile:
            pr = cProfile.Profile()
            pr.runcall(sm.certify_softmax, sm.build_softmax(ds))
            pstats.Stats(pr).sort_stats("cumulative").print_stats(18)


if __name__ == "__main__":
    main()
