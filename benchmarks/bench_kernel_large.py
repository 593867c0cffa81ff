"""The checker kernel at large grids: its affine stage and its time per box, each beside its baseline.

    python benchmarks/bench_kernel_large.py --eps 9/50            # d = 2, P = 256
    python benchmarks/bench_kernel_large.py --eps 1/11 --no-old   # d = 2, P = 1024

For one [SL26] instance (d = 2, ``--holder 1 --bound 1 --target "sin(x1+x2)/2"``, the model file
``certify`` writes, at 192 bits) this times, in one process, one after the other:

- the affine stage (layer 1 of the network for the whole cube, ``Network._affine_attention``):
  the O(H n) rows of ``symbounds_kernel/affine.py`` and, unless ``--no-old``, the full computation
  of every head's scores that the class-certificate path still runs (``record=[...]``); their
  balls are compared entry by entry (they must overlap) and the radius ratio is printed;
- ``--boxes`` boxes of width 1/64 along a row of the cube, enclosed with the tail of the last
  softmax layer (``symbounds_kernel/tail.py``) and without it (every token a Taylor model); the
  two enclosures of each box must overlap, and the tokens kept are counted.

CPU seconds (``time.process_time``) and the load average are printed with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def model_file(eps: str) -> tuple[dict, int]:
    from sympy import Rational

    from symbounds.core.modelfile import model_to_json
    from symbounds.papers.shi_liao.constants import CERTIFY_MAX_TOKENS, Instance, constants
    from symbounds.papers.shi_liao.construction import build

    K = constants(Instance(d=2, C_H=1, B=1, eps=Rational(eps), target="sin(x1+x2)/2"),
                  max_tokens=CERTIFY_MAX_TOKENS)
    return json.loads(json.dumps(model_to_json(build(K), 192))), int(K.P)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--eps", default="9/50", help="the instance's eps (9/50: P = 256; 1/11: 1024; 2/45: 4096)")
    ap.add_argument("--no-old", action="store_true", help="skip the full computation of the affine stage")
    ap.add_argument("--boxes", type=int, default=8, help="boxes timed with and without the tail")
    args = ap.parse_args(argv)

    from flint import arb, ctx

    from symbounds_kernel.network import Network, embed, parse_model

    t = time.process_time()
    m, P = model_file(args.eps)
    build_s = time.process_time() - t
    ctx.prec = 128
    d = 2
    base, E, col, layers, _ = parse_model(m, d)
    A, B = embed(base, E, col, d)
    t = time.process_time()
    A1, B1 = Network._affine_attention(layers[0], A, B)
    new_s = time.process_time() - t
    largest = max(float(b.rad()) for M in [A1] + B1 for b in M.entries())
    old_s = ratio = None
    if not args.no_old:
        t = time.process_time()
        A0, B0 = Network._affine_attention(layers[0], A, B, record=[])
        old_s = time.process_time() - t
        ratio = 0.0
        for M0, M1 in zip([A0] + B0, [A1] + B1):
            for a, b in zip(M0.entries(), M1.entries()):
                if not a.overlaps(b):
                    raise SystemExit(f"affine stage: {a} and {b} do not overlap")
                if b.rad() > 0:
                    ratio = max(ratio, float(b.rad()) / max(float(a.rad()), 1e-300))

    net = Network(m, d)
    if net.tail is None:
        raise SystemExit("this network has no tail (fewer than 32 tokens?)")
    boxes = [([Fraction(i, 64), Fraction(1, 3)], [Fraction(i + 1, 64), Fraction(1, 3) + Fraction(1, 64)])
             for i in range(0, 64, max(1, 64 // args.boxes))][:args.boxes]
    kept = [len(net.tail.split([arb(lo[k].numerator) / lo[k].denominator
                                + arb(0, float(hi[k] - lo[k])) for k in range(d)], net.readout[1])[0])
            for lo, hi in boxes]  # kept tokens, on a ball a little wider than the box
    t = time.process_time()
    with_tail = [net.enclose(lo, hi) for lo, hi in boxes]
    tail_s = (time.process_time() - t) / len(boxes)
    net.tail = None
    t = time.process_time()
    plain = [net.enclose(lo, hi) for lo, hi in boxes]
    plain_s = (time.process_time() - t) / len(boxes)
    for a, b in zip(with_tail, plain):
        if not a.overlaps(b):
            raise SystemExit(f"box enclosures {a} and {b} do not overlap")
    widest = max(abs(float(a.rad()) - float(b.rad())) / float(b.rad()) for a, b in zip(with_tail, plain))

    print(f"load average {os.getloadavg()[0]:.2f}; eps {args.eps}, P = {P}, model built in {build_s:.1f} s")
    print("| P | affine stage, O(H n) rows (s) | affine stage, every score (s) | radius ratio new/old | largest radius, new "
          "| per box, with the tail (s) | per box, every token (s) | tokens kept of P | largest relative radius change |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {P} | {new_s:.1f} | {'-' if old_s is None else f'{old_s:.1f}'} | "
          f"{'-' if ratio is None else f'{ratio:.3g}'} | {largest:.1e} | {tail_s:.3f} | {plain_s:.3f} | "
          f"{min(kept)}-{max(kept)} | {widest:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
