"""Time `symbounds pou` certification at the acceptance instances, with mpmath and float64 beside it.

Each row is one run of `symbounds.pou.run(..., context="all")`: the Arb certification (all claims,
precision escalation included), then the same measurements in mpmath at the precision the balls
ended at, then in float64 -- the same network, the same sample points, in the same process.

    python benchmarks/bench_pou.py            # both instances
    python benchmarks/bench_pou.py --only d1  # one of them
"""

import argparse
import platform
import time

from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.run import PouOptions, run

INSTANCES = {
    "d1": ("d=1, C_H=2, B=2, eps=1/10", sl.Instance()),
    "d2": ("d=2, C_H=1, B=1, eps=1/4, g=sin(x1+x2)/2", sl.Instance(d=2, C_H=1, B=1, eps="1/4", target="sin(x1+x2)/2")),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=list(INSTANCES))
    ap.add_argument("--points", type=int, default=8)
    args = ap.parse_args()
    print(f"# python {platform.python_version()}, {platform.machine()}, sample points: grid + {args.points} random")
    print("| instance | P | claims proved | prec (bits) | build (s) | ball: certify (s) | mpmath, same prec (s) | float64 (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for key, (label, inst) in INSTANCES.items():
        if args.only and key != args.only:
            continue
        t0 = time.perf_counter()
        res = run(inst, PouOptions(context="all", points=args.points))
        total = time.perf_counter() - t0
        t = res.timings
        proved = sum(c.verdict == "proved" for c in res.claims)
        print(f"| {label} | {res.K.P} | {proved}/{len(res.claims)} (+{len(res.claims) - proved} grid checks: "
              f"{', '.join(sorted({c.verdict for c in res.claims if c.verdict != 'proved'}))}) | {res.prec} | "
              f"{t['build']:.2f} | {t['ball']:.2f} | {t['mp']:.2f} | {t['fp']:.2f} |")
        print(f"#   {key}: {res.samples} sample points, exit code {res.exit_code}, total {total:.1f} s", flush=True)


if __name__ == "__main__":
    main()
