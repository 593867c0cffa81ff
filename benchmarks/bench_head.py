"""One layer-1 head of the [SL26] network (its P x P softmax weights) in Arb balls, mpmath at the
same precision and NumPy float64: the unit of the one-off setup, which is P + 2 such heads.

    python benchmarks/bench_head.py [--P 1024] [--prec 128]
"""

import argparse
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from symbounds.core.contexts import BallContext, MPContext  # noqa: E402
from symbounds.core.evaluator import ScalarEvaluator  # noqa: E402
from symbounds.core.transformer import embed  # noqa: E402
from symbounds.papers import shi_liao as sl  # noqa: E402

EPS = {64: "19/50", 256: "9/50", 1024: "9/100"}


def head_seconds(ctx, model):
    num = model.numeric(ctx)
    layer = num.layers[0]
    kind, tau, heads = layer.kind, layer.tau, layer.heads
    Z = embed(ctx, model, (Fraction(1, 3), Fraction(1, 5)))
    with ctx.scope():
        t = time.perf_counter()
        ScalarEvaluator(ctx).attention_matrix(kind, tau, heads[0].W_Q, heads[0].W_K, Z)
        return time.perf_counter() - t


def numpy_head_seconds(P):
    th = 2 * np.pi * np.arange(1, P + 1) / P
    p = np.stack([np.sin(th), np.cos(th)])
    t = time.perf_counter()
    S = 1000.0 * (p.T @ p)
    S -= S.max(axis=1, keepdims=True)
    E = np.exp(S)
    E /= E.sum(axis=1, keepdims=True)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--P", type=int, default=1024)
    ap.add_argument("--prec", type=int, default=128)
    args = ap.parse_args()
    K = sl.constants(sl.Instance(d=2, C_H=1, B=1, eps=EPS[args.P], target="sin(x1+x2)/2"))
    b = head_seconds(BallContext(args.prec), sl.build(K))
    m = head_seconds(MPContext(args.prec), sl.build(K))
    n = numpy_head_seconds(args.P)
    heads = args.P + 2
    print("| P | one head: ball (s) | one head: mpmath (s) | one head: numpy (s) | mpmath / ball | "
          "setup = P + 2 heads: ball (s, extrapolated) | mpmath (s, extrapolated) |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.P} | {b:.2f} | {m:.2f} | {n:.4f} | {m / b:.1f} | ~{b * heads:.0f} | ~{m * heads:.0f} |")


if __name__ == "__main__":
    main()
