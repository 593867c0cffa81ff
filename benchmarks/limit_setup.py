"""The one-off layer-1 setup of the [SL26] network written directly with python-flint, using
what the paper says about it: every layer-1 score is ``M cos(2 pi q / P)`` for an integer ``q``,
so the P + 2 heads hold one circulant softmax ``w[q] = exp(M cos(2 pi q / P)) / N``.  This is
the floor the engine's generic setup is measured against (benchmarks/bench_setup.py): P
exponentials (P/2 + 1 distinct, by symmetry), one normaliser, and the circulant products that
give the layer's output rows for the inputs x = 0 and x = e_i.

    python benchmarks/limit_setup.py [--P 1024] [--prec 128]

Head h's weight from query j on key k is ``w[(j - k - h) mod P]``; the affine heads carry a
value only at key 0 (the input token), the indicator head (h = 0) the constant 1 there, the
position head (h = 0) the positions p_k at every key.
"""

import argparse
import sys
import time
from pathlib import Path

import flint

if __name__ == "__main__":  # imported, the caller has chosen which symbounds to use
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from symbounds.core.contexts import BallContext
from symbounds.papers import shi_liao as sl


def inputs(K, model, prec):
    """The numbers the setup starts from (not timed): M, and per head the value at key 0 for
    x = 0, e_1..e_d (affine score) and g(c_h)."""
    ball = BallContext(prec)
    env = model.definition_values(ball)
    with ball.scope():
        conv = lambda v: ball.from_sympy(v, {}, env)
        M, Mg = conv(K.M), conv(K.M_g)
        vals = []
        for c, g in zip(K.centres, K.g_centres):
            cc = [flint.arb(flint.fmpq(int(ci.p), int(ci.q))) for ci in c]
            a0 = -Mg * sum((ci * ci for ci in cc), flint.arb(0))
            vals.append([a0] + [a0 + 2 * Mg * ci for ci in cc] + [conv(g)])
    return M, vals


def limit_setup(P, M, vals, prec):
    """(seconds of CPU, rows): rows = the circulant products (T for x = 0, e_1.., g; indicator;
    the two position rows)."""
    saved = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        t = time.process_time()
        half = [M * (flint.arb(2 * q) / P).cos_pi() - M for q in range(P // 2 + 1)]
        E = [half[min(q, P - q)].exp() for q in range(P)]
        N = sum(E[1:], E[0])
        inv = 1 / N
        w = [e * inv for e in E]
        # affine heads: out[j] = sum_h w[(j - h) mod P] v_h (value at key 0)
        C = flint.arb_mat([[w[(j - h) % P] for h in range(P)] for j in range(P)])
        affine = C * flint.arb_mat(vals)
        # indicator head: w[j]; position head: sum_k w[(j - k) mod P] p_k (p_k at angle 2 pi (k+1) / P)
        pos = flint.arb_mat([[(flint.arb(2 * (k + 1)) / P).sin_pi(), (flint.arb(2 * (k + 1)) / P).cos_pi()]
                             for k in range(P)])
        position = C * pos
        seconds = time.process_time() - t
        return seconds, (affine, w, position)
    finally:
        flint.ctx.prec = saved


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--P", type=int, default=1024)
    ap.add_argument("--prec", type=int, default=128)
    args = ap.parse_args()
    from bench_setup import instance

    K = sl.constants(instance(args.P), max_tokens=max(args.P, sl.MAX_TOKENS))
    M, vals = inputs(K, sl.build(K), args.prec)
    s, _ = limit_setup(K.P, M, vals, args.prec)
    print(f"P = {K.P}: limit setup {s:.3f} s CPU")


if __name__ == "__main__":
    main()
