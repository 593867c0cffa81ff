"""The certified forward pass (Arb balls) against mpmath at equal precision and a float64 NumPy
implementation of the same network, for P = 64, 256, 1024 tokens (d = 2).

    python benchmarks/bench_forward.py [--P 64,256,1024] [--prec 128] [--points 5] [--mp-max-P 256]

"cold" is one evaluation on a fresh model (every input-independent part computed: the P + 2
layer-1 heads of P x P softmax weights); "per point" is the mean time of later evaluations, which
reuse that work.  NumPy recomputes everything each call (it is fast enough not to need caching).
mpmath is run only up to --mp-max-P; above it, its cold time is extrapolated from one head's
P x P softmax timed in both mpmath and balls (marked "extrapolated").
"""

import argparse
import random
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from np_forward import NumpyModel  # noqa: E402

from symbounds.core.contexts import BallContext, MPContext  # noqa: E402
from symbounds.core.evaluator import ScalarEvaluator  # noqa: E402
from symbounds.core.modelfile import model_to_json  # noqa: E402
from symbounds.core.transformer import forward  # noqa: E402
from symbounds.papers import shi_liao as sl  # noqa: E402

EPS = {64: "19/50", 256: "9/50", 1024: "9/100"}  # m = 8, 16, 32 per axis with C_H = 1 (d = 2)


def timed(f):
    t = time.perf_counter()
    v = f()
    return time.perf_counter() - t, v


def one_head_seconds(ctx, model):
    """Time one layer-1 head's P x P softmax weights in ctx (for extrapolation)."""
    num = model.numeric(ctx)
    layer = num.layers[0]
    kind, tau, WQ, WK = layer.kind, layer.tau, layer.heads[0].W_Q, layer.heads[0].W_K
    from symbounds.core.transformer import embed

    Z = embed(ctx, model, (Fraction(1, 3), Fraction(1, 5)))
    with ctx.scope():
        return timed(lambda: ScalarEvaluator(ctx).attention_matrix(kind, tau, WQ, WK, Z))[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--P", default="64,256,1024")
    ap.add_argument("--prec", type=int, default=128)
    ap.add_argument("--points", type=int, default=5)
    ap.add_argument("--mp-max-P", type=int, default=256)
    args = ap.parse_args()
    rng = random.Random(0)
    print(f"# prec {args.prec} bits; per point = mean over {args.points} random points after the cold call")
    print("| P | heads | ball cold (s) | mpmath cold (s) | numpy cold (s) | ball / point (s) | mpmath / point (s) "
          "| numpy / point (s) | mpmath / ball (cold) | ball / numpy (per point) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for P in [int(p) for p in args.P.split(",")]:
        inst = sl.Instance(d=2, C_H=1, B=1, eps=EPS[P], target="sin(x1+x2)/2")
        K = sl.constants(inst)
        assert K.P == P, (P, K.P)
        pts = [(Fraction(rng.randrange(2**20), 2**20), Fraction(rng.randrange(2**20), 2**20))
               for _ in range(args.points + 1)]
        model = sl.build(K)
        ball = BallContext(args.prec)
        t_ball_cold, _ = timed(lambda: forward(ball, model, pts[0]))
        t_ball = timed(lambda: [forward(ball, model, x) for x in pts[1:]])[0] / args.points
        npm = NumpyModel(model_to_json(model, args.prec))
        t_np_cold, _ = timed(lambda: npm([float(v) for v in pts[0]]))
        t_np = timed(lambda: [npm([float(v) for v in x]) for x in pts[1:]])[0] / args.points
        if P <= args.mp_max_P:
            mp = MPContext(args.prec)
            model_mp = sl.build(K)
            t_mp_cold, _ = timed(lambda: forward(mp, model_mp, pts[0]))
            t_mp = timed(lambda: [forward(mp, model_mp, x) for x in pts[1:]])[0] / args.points
            mp_cold, mp_pt = f"{t_mp_cold:.2f}", f"{t_mp:.4f}"
            ratio = f"{t_mp_cold / t_ball_cold:.1f}"
        else:
            ratio_head = one_head_seconds(MPContext(args.prec), sl.build(K)) / one_head_seconds(
                BallContext(args.prec), sl.build(K))
            mp_cold = f"~{t_ball_cold * ratio_head:.0f} (extrapolated)"
            mp_pt = "-"
            ratio = f"~{ratio_head:.1f} (one head)"
        print(f"| {P} | {P + 2} | {t_ball_cold:.2f} | {mp_cold} | {t_np_cold:.3f} | {t_ball:.4f} | {mp_pt} | "
              f"{t_np:.5f} | {ratio} | {t_ball / t_np:.2g} |", flush=True)


if __name__ == "__main__":
    main()
