"""Certify [SL26] on the four manifolds (docs/shi_liao.md, "Manifolds"): `symbounds pou --manifold NAME [--ambient D]`.

    python benchmarks/bench_manifolds.py

Each row is one `symbounds.pou.run` (Arb balls, every claim, precision escalation included) at the
manifold's default instance, with sample points on the manifold (6 fixed + 8 seeded random rational
points) and float64 set beside the balls; L7.M certifies |T - g| <= eps over the whole manifold
(Taylor-model boxes around parameter rectangles, symbounds/papers/manifold_certify.py).
"""

import time

from symbounds.papers.shi_liao.manifolds import manifold as mf
from symbounds.papers.shi_liao.run import PouOptions, run

CASES = [("circle", None), ("circle", 10), ("sphere", None), ("sphere", 6), ("torus", None), ("curve", 10),
         ("curve", 16)]


def main():
    print("| manifold | d | D | radii | eps | C_H | P | rows D+4 | params (dense) | claims proved | prec | "
          "max |T-g| at samples | L7.M boxes | certify (s) | L7.M (s) | float64 (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, amb in CASES:
        mi = mf.manifold_instance(name, amb)
        t0 = time.perf_counter()
        res = run(mi, PouOptions(context="fp", points=8))
        t = res.timings
        proved = sum(c.verdict == "proved" for c in res.claims)
        i = mi.inst
        print(f"| {name} | {mi.man.d} | {mi.man.ambient} | {', '.join(map(str, mi.man.radii))} | {i.eps} | {i.C_H} | "
              f"{res.K.P} | {res.K.D} | {res.constants['params_dense']} | {proved}/{len(res.claims)} | {res.prec} | "
              f"{res.max_error.split('+/-')[0].strip('[ ')[:8]} | {res.whole['boxes']} ({res.whole['status']}) | "
              f"{t['build'] + t['ball']:.2f} | {t['whole']:.2f} | {t['fp']:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
