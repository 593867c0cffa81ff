"""The fused box kernel (numba) beside the NumPy float pass, per box, in one run.

    python benchmarks/bench_fused.py                 # d = 2, P = 256 and P = 1024, and a P = 256 certificate
    python benchmarks/bench_fused.py --no-cert       # the box passes only

For each instance (the [SL26] network written as a model file at 192 bits, what ``symbounds
certify`` certifies): 512 seeded boxes of widths 1/16 to 1/256, enclosed in batches of 64 (the
search's batch) with the kernel and with the NumPy pass, interleaved over ``--rounds`` rounds;
CPU seconds of this process (``time.process_time``) per box, the one-off setup excluded.  The
operation count of a box after the affine prefix is taken as ``(74 d + 296) P`` (layer 2 at the
readout column and FFN2, every outward rounding included), and the machine's float64 rate is
measured here: a numba loop of independent multiply-adds (scalar), and an elementwise
``a x + b`` over an L1-resident array (what LLVM vectorises).  "x of the count" is the per-box
time over the count's time at the vector rate; "kernel alone" is the compiled pass without the
conversion of the boxes' exact ends to float centres and half-widths (``float_boxes.centres``)
and the readout's range, which the fused pass includes.  The certificate is ``certify`` of
the d = 2, P = 256 instance in one worker, kernel on and off: CPU seconds, boxes evaluated, CPU
per evaluated box.
"""

import argparse
import os
import random
import sys
import time
from fractions import Fraction as F

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from symbounds.core import fused_boxes
from symbounds.core.boxes import CertifyOptions, float_evaluator
from symbounds.core.float_boxes import centres
from symbounds.core.modelfile import model_from_json, model_to_json
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.certificate import certify_instance

INSTANCES = {256: "9/50", 1024: "9/100"}  # P: eps (the [SL26] grid P follows from eps)


@numba.njit(cache=True)
def _madd_chains(a, n):
    x0 = x1 = x2 = x3 = x4 = x5 = x6 = x7 = 1.0
    for _ in range(n):
        x0 = x0 * a + 1e-3
        x1 = x1 * a + 1e-3
        x2 = x2 * a + 1e-3
        x3 = x3 * a + 1e-3
        x4 = x4 * a + 1e-3
        x5 = x5 * a + 1e-3
        x6 = x6 * a + 1e-3
        x7 = x7 * a + 1e-3
    return x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7


@numba.njit(cache=True)
def _axpb(x, y, a, b, reps):
    for _ in range(reps):
        for k in range(x.shape[0]):
            y[k] = x[k] * a + b
        for k in range(x.shape[0]):
            x[k] = y[k] * a + b
    return x[0]


def float_rates():
    """``(scalar, vector)`` float64 operations per CPU second (a multiply and an add each count)."""
    n = 20_000_000
    _madd_chains(0.999, 10)
    t = time.process_time()
    _madd_chains(0.999, n)
    scalar = 16 * n / (time.process_time() - t)
    x, y = np.random.default_rng(0).uniform(0, 1, 1024), np.zeros(1024)
    reps = 20_000
    _axpb(x, y, 0.5, 0.25, 1)
    t = time.process_time()
    _axpb(x, y, 0.5, 0.25, reps)
    vector = 4 * 1024 * reps / (time.process_time() - t)
    return scalar, vector


def boxes_of(n, seed=0):
    rng = random.Random(seed)
    lo, hi = [], []
    for _ in range(n):
        w = F(1, rng.choice([16, 64, 256]))
        a = tuple(F(rng.randrange(int(1 / w)), 1) * w for _ in range(2))
        lo.append(a)
        hi.append(tuple(v + w for v in a))
    return lo, hi


def per_box(ev, lo, hi, fused: bool, batch=64):
    fused_boxes.ENABLED = fused
    try:
        t = time.process_time()
        for s in range(0, len(lo), batch):
            ev.enclose(lo[s:s + batch], hi[s:s + batch])
        return (time.process_time() - t) / len(lo)
    finally:
        fused_boxes.ENABLED = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-cert", action="store_true")
    args = ap.parse_args()
    assert fused_boxes.ENABLED and fused_boxes.load() is not None, "numba is needed (pip install .[fast])"
    print(f"# load average at start: {os.getloadavg()[0]:.1f}")
    scalar, vector = float_rates()
    print(f"# float64 rate (CPU): scalar multiply-add chains {scalar / 1e9:.2f} Gflop/s, "
          f"vectorised a x + b {vector / 1e9:.2f} Gflop/s")
    print()
    print("| d | P | ops per box (74d+296)P | NumPy pass (µs / box) | fused pass (µs / box) | NumPy / fused |"
          " kernel alone (µs / box) | fused pass: x of the count at the vector rate | kernel alone: x of the count |")
    print("|---|---|---|---|---|---|---|---|---|")
    lo, hi = boxes_of(512)
    for eps in INSTANCES.values():
        inst = sl.Instance(d=2, C_H=1, B=1, eps=eps, target="sin(x1+x2)/2")
        K = sl.constants(inst)
        model = model_from_json(model_to_json(sl.build(K), 192))
        ev = float_evaluator(model, 128)
        assert fused_boxes._plan(ev, ev._prefix, ev._rows_read) is not None
        ev.enclose(lo[:2], hi[:2])  # compile or load the kernel
        tn, tf = [], []
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            for fused in order:
                (tf if fused else tn).append(per_box(ev, lo, hi, fused))
        a, b = min(tn), min(tf)
        # the kernel alone: the boxes' float centres and half-widths made once, outside the timing
        x0, h = centres(lo, hi)
        plan = fused_boxes._plan(ev, ev._prefix, ev._rows_read)
        tk = []
        for _ in range(args.rounds):
            t = time.process_time()
            for s in range(0, len(lo), 64):
                plan.run(x0[s:s + 64], h[s:s + 64])
            tk.append((time.process_time() - t) / len(lo))
        k = min(tk)
        ops = (74 * 2 + 296) * K.P
        floor = ops / vector
        print(f"| 2 | {K.P} | {ops:,} | {a * 1e6:.0f} | {b * 1e6:.0f} | {a / b:.1f}x | {k * 1e6:.0f} |"
              f" {b / floor:.0f}x | {k / floor:.1f}x |", flush=True)
    if not args.no_cert:
        print()
        print("| certificate | kernel | CPU (s) | boxes proved | boxes evaluated | largest bound | CPU per evaluated box (ms) |")
        print("|---|---|---|---|---|---|---|")
        inst = sl.Instance(d=2, C_H=1, B=1, eps="9/50", target="sin(x1+x2)/2")
        for fused in (True, False, True, False)[:2 * args.rounds]:
            fused_boxes.ENABLED = fused
            t = time.process_time()
            _, res = certify_instance(inst, CertifyOptions(workers=1))
            dt = time.process_time() - t
            fused_boxes.ENABLED = True
            print(f"| d=2, P=256, eps=9/50 | {'fused' if fused else 'NumPy'} | {dt:.1f} | {len(res.boxes)} | "
                  f"{res.evaluated} | {float(res.max_bound):.9f} | {dt / res.evaluated * 1e3:.3f} |", flush=True)
    print(f"\n# load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
