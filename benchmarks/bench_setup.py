"""The one-off setup of the [SL26] network (d = 2, the P + 2 layer-1 heads of P x P softmax
weights) in the engine -- generic, the sharing found and proved from the weights -- against the
same computation written directly with python-flint from the paper's structure
(benchmarks/limit_setup.py), side by side in one run.  CPU time (time.process_time), since the
machine may be loaded by other work.

    python benchmarks/bench_setup.py [--P 64,144,256,1024,4096] [--prec 128] [--plain-max-P 144]
        [--before DIR]

Each size runs in a fresh process.  ``--before DIR`` (a tree holding an earlier ``symbounds``
package, e.g. ``git archive main symbounds | tar -x -C DIR``) runs every size also with that
code, in its own fresh process right before this checkout's, so the two see the same load; each
process times its own limit script, and "setup / limit" is within one process.

"exact" is the detection (row classes, distinct scores and normalisers, decided on the exact
weights); "numeric" the rest of the first evaluation (weights to balls, one exponential per
distinct score, the Arb products of the head outputs, the point itself).  "plain" is the
entry-by-entry computation (only up to --plain-max-P).  The engine's layer-1 output rows are
checked against the limit script's (their balls must overlap).
"""

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
if "--child" not in sys.argv:  # a child takes symbounds from the tree its PYTHONPATH names
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from limit_setup import inputs, limit_setup

import symbounds
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


def measure(P, prec, plain_max_P, n_points):
    """One size in this process: the table's numbers as a dict."""
    x = (Fraction(1, 3), Fraction(1, 5))
    K = sl.constants(instance(P), max_tokens=max(P, sl.MAX_TOKENS))
    assert K.P == P, (P, K.P)
    model = sl.build(K)
    ball = BallContext(prec)
    t_exact, S = cpu(detect, model)
    t_num, _ = cpu(T.forward, ball, model, x)
    # a pou-style evaluation after the setup: T(x), g(x) and |T - g| at seeded points
    pts = sl.sample_points(2, None, n_points, 0)[-n_points:]
    t_pts, vals_pts = cpu(lambda ps: [point_values(ball, K, model, p) for p in ps], pts)
    with ball.scope():
        err = max((v[2].upper() for v in vals_pts), key=float)
    M, vals = inputs(K, model, prec)
    t_lim, lim_rows = limit_setup(P, M, vals, prec)
    agree = check_against_limit(K, model, prec, lim_rows)
    del lim_rows
    t_plain = None
    if P <= plain_max_P:
        plain = dataclasses.replace(sl.build(K), share_softmax=False)
        t_plain, _ = cpu(T.forward, BallContext(prec), plain, x)
    groups = len(S.group_rep)
    found = f"{len(S.class_rep)} classes, {len(S.score_rep)} scores, {groups} normaliser{'s' if groups > 1 else ''}"
    return {"P": P, "exact": t_exact, "numeric": t_num, "limit": t_lim, "plain": t_plain, "found": found,
            "agree": bool(agree), "per_point": t_pts / len(pts), "err": float(err),
            "package": str(Path(symbounds.__file__).resolve().parent)}


def run_child(tree, P, args, plain_max_P):
    """:func:`measure` in a fresh process with ``tree``'s symbounds first on the path."""
    here = Path(__file__).resolve()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(here.parent)]))
    argv = [sys.executable, str(here), "--child", str(P), "--prec", str(args.prec), "--plain-max-P",
            str(plain_max_P), "--points", str(args.points)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"P = {P} ({tree}): child failed\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--P", default="64,144,256,1024,4096")
    ap.add_argument("--prec", type=int, default=128)
    ap.add_argument("--plain-max-P", type=int, default=144)
    ap.add_argument("--points", type=int, default=4)
    ap.add_argument("--before", help="a tree holding the earlier symbounds package, run side by side")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.prec, args.plain_max_P, args.points)))
        return
    this = Path(__file__).resolve().parent.parent
    trees = ([("before", Path(args.before).resolve())] if args.before else []) + [("this", this)]
    rows = []
    print(f"# prec {args.prec} bits, CPU seconds (time.process_time), each line a fresh process")
    print("| P | heads | code | exact (s) | numeric (s) | setup (s) | limit script (s) | setup / limit | plain (s) | "
          "plain / setup | sharing found | agrees with limit | per point (s) | max abs(T - g) at the points |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for P in [int(p) for p in args.P.split(",")]:
        for name, tree in trees:
            o = run_child(tree, P, args, args.plain_max_P if name == "this" else 0)
            assert Path(o["package"]) == tree / "symbounds", (o["package"], tree)
            setup = o["exact"] + o["numeric"]
            if o["plain"] is not None:
                plain_s, ratio = f"{o['plain']:.2f}", f"{o['plain'] / setup:.0f}x"
            else:
                plain_s, ratio = "-", "-"
            rows.append((P, name, setup, o["limit"]))
            print(f"| {P} | {P + 2} | {name} | {o['exact']:.2f} | {o['numeric']:.2f} | {setup:.2f} | {o['limit']:.3f} | "
                  f"{setup / o['limit']:.1f}x | {plain_s} | {ratio} | {o['found']} | {'yes' if o['agree'] else 'NO'} | "
                  f"{o['per_point']:.4f} | <= {o['err']:.3g} |", flush=True)
    for name, _ in trees:
        big = [r for r in rows if r[1] == name and r[0] >= 256]
        if len(big) >= 2:
            (p0, _, s0, l0), (p1, _, s1, l1) = big[0], big[-1]
            e = math.log(s1 / s0) / math.log(p1 / p0)
            el = math.log(l1 / l0) / math.log(p1 / p0)
            print(f"\nscaling exponent of setup time in P (P = {p0}..{p1}), {name}: engine {e:.2f}, "
                  f"limit script {el:.2f}")


if __name__ == "__main__":
    main()
