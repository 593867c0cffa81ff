"""The one-off setup of the [SL26] network (d = 2, the P + 2 layer-1 heads of P x P softmax
weights) in the engine -- generic, the sharing found and proved from the weights -- against the
same computation written directly with python-flint from the paper's structure
(benchmarks/limit_setup.py), side by side in one run.  CPU time (time.process_time), since the
machine may be loaded by other work.

    python benchmarks/bench_setup.py [--P 64,144,256,1024,4096] [--prec 128] [--plain-max-P 144]

"exact" is the detection (row classes, distinct scores and normalisers, decided on the exact
weights); "numeric" the rest of the first evaluation (weights to balls, one exponential per
distinct score, the Arb products of the head outputs, the point itself).  "plain" is the
entry-by-entry computation (only up to --plain-max-P).  The engine's layer-1 output rows are
checked against the limit script's (their balls must overlap).
"""

import argparse
import dataclasses
import math
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from limit_setup import inputs, limit_setup

from symbounds.core import transformer as T
from symbounds.core.contexts import BallContext
from symbounds.core.expr import variables
from symbounds.papers import shi_liao as sl

EPS = {64: "19/50", 144: "6/25", 256: "9/50", 1024: "9/100", 4096: "89/2000"}


def instance(P):
    if P > sl.MAX_TOKENS:  # the command's own limit; the engine is measured beyond it here
        sys.modules["symbounds.papers.shi_liao.constants"].MAX_TOKENS = P
    return sl.Instance(d=2, C_H=1, B=1, eps=EPS[P], target="sin(x1+x2)/2")


def cpu(f, *args):
    t = time.process_time()
    v = f(*args)
    return time.process_time() - t, v


def detect(model):
    return model.structure().shared_softmax


def point_values(ctx, K, model, x):
    """``(T(x), g(x), |T(x) - g(x)|)`` in ``ctx`` (what ``symbounds pou`` evaluates at a point)."""
    with ctx.scope():
        t = T.forward(ctx, model, x)
        g = ctx.from_sympy(K.g, env={s: ctx.convert(v) for s, v in zip(variables(K.d), x)})
        return t, g, ctx.abs(t - g)


def check_against_limit(K, model, prec, rows):
    """The engine's layer-1 output at x = 0 (rows T, g, indicator, positions) overlaps the
    limit script's."""
    affine, w, position = rows
    ball = BallContext(prec)
    with ball.scope():  # the state after layer 1 at x = 0 (the shared weights are cached)
        F0 = T.forward(ball, model, (0,) * K.d, stop=1)
    R = sl.ROWS(K.d)
    A = affine.tolist()
    Pm = position.tolist()
    p0, p1 = R["pos"]
    ok = all(F0[R["T"]][j].overlaps(A[j][0]) and F0[R["g"]][j].overlaps(A[j][-1])
             and F0[R["ind"]][j].overlaps(w[j]) and F0[p0][j].overlaps(Pm[j][0]) and F0[p1][j].overlaps(Pm[j][1])
             for j in range(K.P))
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--P", default="64,144,256,1024,4096")
    ap.add_argument("--prec", type=int, default=128)
    ap.add_argument("--plain-max-P", type=int, default=144)
    ap.add_argument("--points", type=int, default=4)
    args = ap.parse_args()
    x = (Fraction(1, 3), Fraction(1, 5))
    rows = []
    print(f"# prec {args.prec} bits, CPU seconds (time.process_time)")
    print("| P | heads | exact (s) | numeric (s) | setup (s) | limit script (s) | setup / limit | plain (s) | "
          "plain / setup | sharing found | agrees with limit | per point (s) | max abs(T - g) at the points |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for P in [int(p) for p in args.P.split(",")]:
        K = sl.constants(instance(P))
        assert K.P == P, (P, K.P)
        model = sl.build(K)
        ball = BallContext(args.prec)
        t_exact, S = cpu(detect, model)
        t_num, _ = cpu(T.forward, ball, model, x)
        setup = t_exact + t_num
        # a pou-style evaluation after the setup: T(x), g(x) and |T - g| at seeded points
        pts = sl.sample_points(2, None, args.points, 0)[-args.points:]
        t_pts, vals_pts = cpu(lambda ps: [point_values(ball, K, model, p) for p in ps], pts)  # noqa: B023
        with ball.scope():
            err = max((v[2].upper() for v in vals_pts), key=float)
        per_point = f"{t_pts / len(pts):.4f}"
        M, vals = inputs(K, model, args.prec)
        t_lim, lim_rows = limit_setup(P, M, vals, args.prec)
        agree = check_against_limit(K, model, args.prec, lim_rows)
        del lim_rows
        if P <= args.plain_max_P:
            plain = dataclasses.replace(sl.build(K), share_softmax=False)
            t_plain, _ = cpu(T.forward, BallContext(args.prec), plain, x)
            plain_s, ratio = f"{t_plain:.2f}", f"{t_plain / setup:.0f}x"
        else:
            plain_s, ratio = "-", "-"
        found = (f"{len(S.class_rep)} classes, {len(S.score_rep)} scores, {len(S.group_rep)} normaliser"
                 f"{'s' if len(S.group_rep) > 1 else ''}")
        rows.append((P, setup, t_lim))
        print(f"| {P} | {P + 2} | {t_exact:.2f} | {t_num:.2f} | {setup:.2f} | {t_lim:.3f} | {setup / t_lim:.0f}x | "
              f"{plain_s} | {ratio} | {found} | {'yes' if agree else 'NO'} | {per_point} | <= {float(err):.3g} |",
              flush=True)
        model = None  # free the weights before the next size
    big = [r for r in rows if r[0] >= 256]
    if len(big) >= 2:
        (p0, s0, l0), (p1, s1, l1) = big[0], big[-1]
        e = math.log(s1 / s0) / math.log(p1 / p0)
        el = math.log(l1 / l0) / math.log(p1 / p0)
        print(f"\nscaling exponent of setup time in P (P = {p0}..{p1}): engine {e:.2f}, limit script {el:.2f}")


if __name__ == "__main__":
    main()
