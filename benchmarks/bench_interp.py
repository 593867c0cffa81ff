"""Timings of the exact sequence-interpolation construction [AFZ25] (hardmax, exact rationals).

    python3 benchmarks/bench_interp.py            # the two acceptance cases of issue 3
    python3 benchmarks/bench_interp.py --quick    # a smaller run

Prints, for each case: build time (the construction, which tracks the cloud itself), proof time
(the fast exact evaluator re-runs the built model from the raw inputs and checks every stage),
blocks, K, and the largest parameter bit sizes.  No assertions: numbers go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

from symbounds.papers import alcalde as al
from symbounds.papers.alcalde.dataset import authors_dataset, core_dataset, random_dataset


def case(name, ds, variant="plain"):
    t0 = time.perf_counter()
    con = al.build(ds, variant)
    t1 = time.perf_counter()
    claims, exact = al.verify(con)
    t2 = time.perf_counter()
    sz = al.sizes(con)
    verdicts = " ".join(f"{c.id}:{c.verdict}" for c in claims)
    print(f"{name:<44} build {t1 - t0:7.1f} s  prove {t2 - t1:7.1f} s  total {t2 - t0:7.1f} s  "
          f"L={con.blocks} (paper {sz['blocks_formula']['paper']}) K={con.K} M={ds.M} "
          f"bits {sz['max_numerator_bits']}/{sz['max_denominator_bits']}  exact={exact}  [{verdicts}]", flush=True)


def softmax_case(name, ds, tau=Fraction(1, 64)):
    from symbounds.papers.alcalde import softmax as sm

    t0 = time.perf_counter()
    con = sm.build_softmax(ds, tau)
    t1 = time.perf_counter()
    claims, exact, info = sm.certify_softmax(con)
    t2 = time.perf_counter()
    verdicts = " ".join(f"{c.id}:{c.verdict}" for c in claims)
    print(f"{name:<44} build {t1 - t0:7.1f} s  certify {t2 - t1:7.1f} s  L={con.blocks} "
          f"(paper {al.paper_blocks(ds, 'softmax')}) tau={info['tau']} prec={info['prec']}  exact={exact}  "
          f"[{verdicts}]", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--variant", default="plain", choices=["plain", "compressed"])
    a = ap.parse_args()
    N, n = (10, 200) if a.quick else (50, 1000)
    case(f"random N={N} n_j={n} d=16 m<=3 ({a.variant})", random_dataset(N, n, 16, 3, seed=0, vary=False), a.variant)
    case(f"core N={N} n={n} d=16 m=2 ({a.variant})", core_dataset(N, n, 16, 2, seed=0), a.variant)
    Ns, ns = (4, 40) if a.quick else (10, 100)
    softmax_case(f"softmax, authors' data N={Ns} n={ns} d=16 m=1", authors_dataset(Ns, ns, 16, seed=0))


if __name__ == "__main__":
    main()
