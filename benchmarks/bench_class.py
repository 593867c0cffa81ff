"""Class certificates (symbounds certify --holder-class): sup over every target of the Hoelder class.

    python benchmarks/bench_class.py [--only default|alpha|d2]

Prints one Markdown row per instance: P, boxes kept / evaluated, the two ends of the class's
worst error (the worst target's certified lower bound at x*, and sup E), eps, the verdict, and the
wall time of the certificate (model construction, reading the scores and leakage factors off the
network, and the boxes, all included) and of re-checking it.
"""

import argparse
import time

from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.class_bound import ClassOptions
from symbounds.papers.shi_liao.class_certificate import certify_class, check_class_certificate

INSTANCES = {
    "default": ("d=1, alpha=1, C_H=2, B=2, eps=1/10 (the default)", sl.Instance()),
    "alpha": ("d=1, alpha=1/2, C_H=1, B=1, eps=1/2", sl.Instance(alpha="1/2", C_H=1, B=1, eps="1/2")),
    "d2": ("d=2, alpha=1, C_H=1, B=1, eps=1/2", sl.Instance(d=2, C_H=1, B=1, eps="1/2")),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=list(INSTANCES))
    args = ap.parse_args()
    print("| instance | P | boxes kept | boxes evaluated | worst target at x* (lower) | sup E (upper) | eps | verdict "
          "| certify (s) | check (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key, (label, inst) in INSTANCES.items():
        if args.only and key != args.only:
            continue
        t0 = time.perf_counter()
        cert, res = certify_class(inst, ClassOptions(prec=128))
        dt = time.perf_counter() - t0
        t0 = time.perf_counter()
        check_class_certificate(cert)
        dc = time.perf_counter() - t0
        P = sl.constants(inst).P
        print(f"| {label} | {P} | {len(res.boxes)} | {res.evaluated} | {float(res.worst_lower):.9f} | "
              f"{float(res.max_bound):.9f} | {inst.eps} | {res.verdict} | {dt:.1f} | {dc:.1f} |", flush=True)


if __name__ == "__main__":
    main()
