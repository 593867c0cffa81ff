"""Whole-domain certificates (symbounds certify) at d = 1 (P >= 100) and d = 2 (P >= 256).

    python benchmarks/bench_certify.py [--workers 2] [--only d1|d2]

Prints one Markdown row per instance: P, boxes proved / evaluated, the largest certified bound,
the verdict and the wall time (model construction, the one-off input-independent work and the
boxes, all included).
"""

import argparse
import time

from symbounds.core.boxes import CertifyOptions
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.certificate import certify_instance

INSTANCES = {
    "d1": ("d=1, C_H=2, B=2, eps=1/25, g=sin(2 x1)", sl.Instance(eps="1/25")),
    "d2": ("d=2, C_H=1, B=1, eps=9/50, g=sin(x1+x2)/2",
           sl.Instance(d=2, C_H=1, B=1, eps="9/50", target="sin(x1+x2)/2")),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", choices=list(INSTANCES))
    args = ap.parse_args()
    print(f"# workers: {args.workers}")
    print("| instance | P | boxes proved | boxes evaluated | largest certified bound | eps | verdict | time (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for key, (label, inst) in INSTANCES.items():
        if args.only and key != args.only:
            continue
        t0 = time.perf_counter()
        cert, res = certify_instance(inst, CertifyOptions(workers=args.workers))
        dt = time.perf_counter() - t0
        P = sl.constants(inst).P
        mb = "-" if res.max_bound is None else f"{float(res.max_bound):.5f}"
        print(f"| {label} | {P} | {len(res.boxes)} | {res.evaluated} | {mb} | {inst.eps} | {res.verdict} | {dt:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
