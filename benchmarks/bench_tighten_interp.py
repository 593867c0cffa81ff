"""How tight the interpolation construction of [AFZ25] is: block counts and the largest temperature.

    python benchmarks/bench_tighten_interp.py [--quick]

Table 1 (hardmax, exact rationals): for each dataset family of the benchmarks (``random_dataset``,
``core_dataset``, ``authors_dataset``, as in ``bench_interp.py``; and a random dataset whose targets
are drawn from a pool of 4 points, so that outputs repeat across sequences) the blocks ``L`` of the
plain and compressed variants against the paper's count ``2M + 2N + 1`` and against the number of
distinct output tokens ``|Y^1 u ... u Y^N|`` (every distinct output point is written by at least
one feed-forward unit, and this construction spends one block per pair (sequence, target) in
leader selection); I1 is re-proved in exact rationals for every row.

Table 2 (softmax): ``tau*`` of ``symbounds tighten --what tau`` (claims X1 and I1 proved at
``tau*``, the step above certified or not) beside the construction's ``1/64``, on small members of
the same families.  Prints Markdown rows; numbers go to BENCHMARKS.md.  Wall and CPU seconds are
this process's.
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import replace
from fractions import Fraction

from symbounds.core.exact import decimal
from symbounds.papers import alcalde as al
from symbounds.papers.alcalde import tighten as tt
from symbounds.papers.alcalde.dataset import authors_dataset, core_dataset, random_dataset


def shared_targets(ds, pool=4, seed=0):
    """``ds`` with every target drawn from a pool of ``pool`` points (distinct within a sequence)."""
    rng = random.Random(seed)
    pts = [tuple(Fraction(rng.randint(0, 2**8), 2**8) for _ in range(ds.d)) for _ in range(pool)]
    return replace(ds, targets=tuple(tuple(rng.sample(pts, min(len(Y), pool))) for Y in ds.targets))


def families(quick):
    N, n = (10, 60) if quick else (30, 200)
    return [
        (f"random N={N} n<={n} d=8 m<=3", random_dataset(N, n, 8, 3, seed=0)),
        (f"random N={N} n={n} d=8 m<=3 (fixed n)", random_dataset(N, n, 8, 3, seed=0, vary=False)),
        (f"core N={N} n={n} d=8 m=2", core_dataset(N, n, 8, 2, seed=0)),
        (f"core N={N} n={n} d=8 m=3", core_dataset(N, n, 8, 3, seed=0)),
        (f"authors N={N // 3} n={n // 2} d=16", authors_dataset(N // 3, n // 2, 16, seed=0)),
        (f"random N={N} n<={n} d=8 m<=3, targets from 4 points", shared_targets(random_dataset(N, n, 8, 3, seed=0))),
    ]


def blocks_table(quick):
    print("| dataset | N | M | distinct outputs | K | L plain | L compressed | paper 2M+2N+1 | paper / L (plain, compr.) "
          "| L / distinct (plain, compr.) | I1 | wall (s) | CPU (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, ds in families(quick):
        t0, c0 = time.perf_counter(), time.process_time()
        distinct = len({y for Y in ds.targets for y in Y})
        Ls, I1 = {}, []
        for variant in ("plain", "compressed"):
            con = al.build(ds, variant)
            claims, _ = al.verify(con)
            Ls[variant] = con.blocks
            I1.append(next(str(c.verdict) for c in claims if c.id == "I1"))
            K = con.K
        paper = al.paper_blocks(ds, "hardmax")
        print(f"| {name} | {ds.N} | {ds.M} | {distinct} | {K} | {Ls['plain']} | {Ls['compressed']} | {paper} | "
              f"{paper / Ls['plain']:.2f}, {paper / Ls['compressed']:.2f} | "
              f"{Ls['plain'] / distinct:.2f}, {Ls['compressed'] / distinct:.2f} | {'/'.join(I1)} | "
              f"{time.perf_counter() - t0:.1f} | {time.process_time() - c0:.1f} |", flush=True)


def tau_table(quick):
    cases = [("random N=2 n<=4 d=2 m<=2", random_dataset(2, 4, 2, 2, seed=0)),
             ("random N=3 n<=6 d=2 m<=2", random_dataset(3, 6, 2, 2, seed=0)),
             ("random N=4 n<=8 d=4 m<=3", random_dataset(4, 8, 4, 3, seed=0)),
             ("core N=3 n=6 d=2 m=2", core_dataset(3, 6, 2, 2, seed=0)),
             ("authors N=3 n=10 d=4", authors_dataset(3, 10, 4, seed=0))]
    if not quick:
        cases += [("random N=10 n<=40 d=8 m<=3", random_dataset(10, 40, 8, 3, seed=0)),
                  ("authors N=4 n=40 d=16", authors_dataset(4, 40, 16, seed=0))]
    print()
    print("| dataset | N | M | tau used | tau* (decimal) | tau* / (1/64) | step above tau* (1+R) | evidence above "
          "| certificates | wall (s) | CPU (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    opts = tt.TauOptions(resolution=Fraction(1, 100))
    for name, ds in cases:
        t0, c0 = time.perf_counter(), time.process_time()
        r = tt.tighten_tau(ds, opts)
        o = r.above_outcome
        above = "-" if o is None else f"{o.status} (X1 {o.x1}, I1 {o.i1})"
        ev = "-" if o is None or not o.note else o.note.split(";")[0][:70]
        star = "-" if r.tau_star is None else decimal(r.tau_star, 8)
        slack = "-" if r.slack is None else decimal(r.slack, 4)
        print(f"| {name} | {ds.N} | {ds.M} | 1/64 | {star} | {slack} | {above} | {ev} | {r.evaluations} | "
              f"{time.perf_counter() - t0:.1f} | {time.process_time() - c0:.1f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    blocks_table(a.quick)
    tau_table(a.quick)


if __name__ == "__main__":
    main()
