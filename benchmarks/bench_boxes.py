"""The box pass: outward-rounded float64 Taylor models against Arb Taylor models, side by side.

    python benchmarks/bench_boxes.py --part setup     # one-off setup of a model file, P = 64 .. 1024
    python benchmarks/bench_boxes.py --part box       # per box and per point, same boxes, same run
    python benchmarks/bench_boxes.py --part cert      # whole certificates, float+Arb vs Arb only
    python benchmarks/bench_boxes.py --part cert --big  # also d = 2, P = 1024 and d = 3 (float only)
    python benchmarks/bench_boxes.py --part split     # widest side against the gradient's side

Every instance is the [SL26] partition-of-unity network written as a model file at 192 bits (what
``symbounds certify`` certifies).  Times are CPU seconds of this process (``time.process_time``)
unless the column says wall; certificates run with ``--workers`` processes and report wall time.
"""

import argparse
import math
import os
import random
import sys
import time
from fractions import Fraction as F

sys.path.insert(0, os.path.dirname(__file__))

from np_forward import NumpyModel

from symbounds.core.boxes import Box, CertifyOptions, box_bound, box_bounds, float_evaluator
from symbounds.core.certificate import check_certificate
from symbounds.core.contexts import BallContext
from symbounds.core.modelfile import model_from_json, model_to_json
from symbounds.core.transformer import forward
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.certificate import certify_instance, rebuild


def instance(d, eps):
    if d == 1:
        return sl.Instance(eps=eps)
    if d == 2:
        return sl.Instance(d=2, C_H=1, B=1, eps=eps, target="sin(x1+x2)/2")
    return sl.Instance(d=3, C_H=1, B=1, eps=eps, target="sin(x1+x2+x3)/3")


def model_file(inst):
    K = sl.constants(inst)
    mj = model_to_json(sl.build(K), 192)
    return K, mj, model_from_json(mj)


def cpu(f, *a):
    t = time.process_time()
    out = f(*a)
    return out, time.process_time() - t


def part_setup():
    print("| P | float setup (s) | Arb setup (s) | Arb / float |")
    print("|---|---|---|---|")
    rows = []
    for eps, arb_too in [("1/2", True), ("1/4", True), ("9/50", True), ("9/100", False)]:
        inst = instance(2, eps)
        K, mj, model = model_file(inst)
        _, tf = cpu(float_evaluator, model, 128)
        if arb_too:
            fresh = model_from_json(mj)
            ball = BallContext(128)
            _, ta = cpu(lambda: forward(ball, fresh, [F(1, 3), F(1, 5)]))
            ratio = f"{ta / tf:.0f}x"
            ta_s = f"{ta:.2f}"
        else:
            ta_s, ratio = "not run (~1,600 s, see the Arb setup section)", "-"
        rows.append((K.P, tf))
        print(f"| {K.P} | {tf:.2f} | {ta_s} | {ratio} |", flush=True)
    (p1, t1), (p2, t2) = rows[-2], rows[-1]
    print(f"\nscaling exponent of the float setup, P = {p1}..{p2}: {math.log(t2 / t1) / math.log(p2 / p1):.2f}")


def boxes_of(d, n, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        w = F(1, rng.choice([16, 64, 256])) if d < 3 else F(1, rng.choice([4, 16, 64]))
        lo = tuple(F(rng.randrange(int(1 / w)), 1) * w for _ in range(d))
        out.append(Box(lo, tuple(a + w for a in lo)))
    return out


def part_box():
    print("| instance | P | boxes | float: s / box | Arb: s / box (boxes timed) | Arb / float | decided: float / Arb |"
          " median bound float / Arb |")
    print("|---|---|---|---|---|---|---|---|")
    pts = []
    for d, eps, n_arb in [(1, "1/25", 60), (2, "9/50", 30), (3, "1/2", 12)]:
        inst = instance(d, eps)
        K, mj, model = model_file(inst)
        fast = float_evaluator(model, 128)
        boxes = boxes_of(d, 512)
        # the float pass alone (a box it cannot enclose stays undecided here, not sent to Arb)
        fb, tf = cpu(lambda: box_bounds(model, K.g, d, boxes, 128, fast, arb=False))
        box_bound(model, K.g, d, boxes[0], 128)  # the Arb one-off setup, not timed per box
        ab, ta = cpu(lambda: [box_bound(model, K.g, d, b, 128) for b in boxes[:n_arb]])
        dec_f = sum(b is not None for b in fb[:n_arb])
        dec_a = sum(b is not None for b in ab)
        ratios = sorted(float(f / a) for f, a in zip(fb, ab) if f is not None and a is not None and a > 0)
        med = ratios[len(ratios) // 2] if ratios else float("nan")
        print(f"| d={d}, eps={eps} | {K.P} | {len(boxes)} | {tf / len(boxes):.5f} | {ta / n_arb:.4f} ({n_arb}) | "
              f"{(ta / n_arb) / (tf / len(boxes)):.0f}x | {dec_f}/{n_arb} / {dec_a}/{n_arb} | {med:.3f} |", flush=True)
        pts.append((d, eps, K, mj, model, fast))
    print()
    print("Per point (after the one-off setup), d = 2: float64 enclosure (a zero-width box, 64 points in one batch),")
    print("Arb ball forward pass, mpmath at the same 128 bits (P <= 64 only: its cold setup is minutes above), NumPy")
    print("float64 (no enclosure).")
    print()
    print("| P | float enclosure (s / point) | Arb ball (s / point) | mpmath (s / point) | NumPy float64 (s / point) |"
          " Arb / float |")
    print("|---|---|---|---|---|---|")
    for eps in ("1/2", "9/50", "9/100"):
        inst = instance(2, eps)
        K, mj, _ = model_file(inst)
        model = sl.build(K)  # the exact weights: the Arb setup shares equal softmax weights
        fast = float_evaluator(model, 128)
        rng = random.Random(1)
        xs = [(F(rng.randrange(1024), 1024), F(rng.randrange(1024), 1024)) for _ in range(64)]
        _, tf = cpu(fast.ranges, xs, xs)
        ball = BallContext(128)
        with ball.scope():
            forward(ball, model, list(xs[0]))
            _, ta = cpu(lambda: [forward(ball, model, list(x)) for x in xs[:8]])
        tm = "not run"
        if K.P <= 64:
            from symbounds.core.contexts import MPContext

            mp = MPContext(128)
            with mp.scope():
                forward(mp, model, list(xs[0]))
                _, t = cpu(lambda: [forward(mp, model, list(x)) for x in xs[:8]])
            tm = f"{t / 8:.5f}"
        npm = NumpyModel(mj)
        _, tn = cpu(lambda: [npm([float(v) for v in x]) for x in xs[:8]])
        print(f"| {K.P} | {tf / len(xs):.6f} | {ta / 8:.5f} | {tm} | {tn / 8:.5f} | {(ta / 8) / (tf / len(xs)):.0f}x |",
              flush=True)


def part_cert(workers, big):
    print("| instance | P | evaluator | boxes proved | boxes evaluated | largest bound | verdict | certify (s, wall) |"
          " check (s, wall) |")
    print("|---|---|---|---|---|---|---|---|---|")
    runs = [(1, "1/25", True), (1, "1/25", False), (2, "9/50", True), (2, "9/50", False)]
    if big:
        runs += [(2, "9/100", True), (3, "1/2", True), (3, "2/5", True)]
    for d, eps, fast in runs:
        inst = instance(d, eps)
        P = sl.constants(inst).P
        t = time.perf_counter()
        cert, res = certify_instance(inst, CertifyOptions(workers=workers, fast=fast))
        tc = time.perf_counter() - t
        t = time.perf_counter()
        ok = "-"
        if res.verdict == "proved":
            check_certificate(cert, rebuild)
            ok = f"{time.perf_counter() - t:.1f}"
        mb = "-" if res.max_bound is None else f"{float(res.max_bound):.5f}"
        name = "float64 + Arb fallback" if fast else "Arb only"
        print(f"| d={d}, eps={eps} | {P} | {name} | {len(res.boxes)} | {res.evaluated} | {mb} | {res.verdict} | "
              f"{tc:.1f} | {ok} |", flush=True)


def part_split():
    """Halving the widest side against the side the output's gradient picks (CertifyOptions.split)."""
    print("| instance | P | split | boxes proved | boxes evaluated | largest bound | CPU (s, one process) |")
    print("|---|---|---|---|---|---|---|")
    for d, eps in [(1, "1/25"), (2, "9/50"), (3, "1/2")]:
        inst = instance(d, eps)
        P = sl.constants(inst).P
        for rule in ("widest", "gradient"):
            (cert, res), t = cpu(certify_instance, inst, CertifyOptions(workers=1, split=rule))
            print(f"| d={d}, eps={eps} | {P} | {rule} | {len(res.boxes)} | {res.evaluated} | "
                  f"{float(res.max_bound):.5f} | {t:.1f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["setup", "box", "cert", "split"], required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--big", action="store_true")
    args = ap.parse_args()
    {"setup": part_setup, "box": part_box, "cert": lambda: part_cert(args.workers, args.big),
     "split": part_split}[args.part]()


if __name__ == "__main__":
    main()
