"""The box search behind ``symbounds bound`` and ``certify --spec``: what the adaptive bound and the
falsification pass cost, beside the one-box and fixed-partition bounds they replace.

    python benchmarks/bench_search.py

Models (random rational weights, fixed seeds, as in tests/core/test_search.py): a softmax
attention + ReLU network over [0,1]^12 and a one-input residual network over [0,1].  Times are
wall seconds of this process; "range" is the 300-bit sampled range (400 points) the enclosures
are compared with.
"""

import random
import sys
import time
from fractions import Fraction as F
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from byon_helpers import random_model, reference  # noqa: E402

from symbounds.core.bound import bound  # noqa: E402
from symbounds.core.modelfile import model_from_json  # noqa: E402
from symbounds.core.vnnlib import parse_vnnlib, verify  # noqa: E402


def sampled(mj, d, n=400, seed=0):
    rng = random.Random(seed)
    return sorted(float(reference(mj, [F(rng.randrange(1025), 1024) for _ in range(d)])[0]) for _ in range(n))


def row(name, res, spread, t):
    w = float(res.upper - res.lower)
    print(f"| {name} | [{float(res.lower):.4g}, {float(res.upper):.4g}] | {w / spread:.3g} | {res.boxes} | "
          f"{res.evaluated} | {t:.2f} |")


def main():
    cases = [("1 input, residual", random_model(6, 1, D=3, score_scale=1, embed_scale=1), 1),
             ("12 inputs, attention + ReLU", random_model(12, 12, score_scale=F(1, 2), embed_scale=F(1, 4)), 12)]
    print("| model, bound | enclosure | width / sampled range | boxes | evaluated | s |")
    print("|---|---|---|---|---|---|")
    for name, mj, d in cases:
        vals = sampled(mj, d)
        spread = vals[-1] - vals[0]
        for label, kw in (("split 0", {"split": 0}), ("split 8", {"split": 8}), ("adaptive (default)", {})):
            t = time.perf_counter()
            res = bound(mj, [0] * d, [1] * d, **kw)
            row(f"{name}, {label}", res, spread, time.perf_counter() - t)
    mj = cases[1][1]
    vals = sampled(mj, 12, 90, 3)
    q = F(vals[60]).limit_denominator(10**6)
    decl = "".join(f"(declare-const X_{i} Real)(assert (>= X_{i} 0))(assert (<= X_{i} 1))" for i in range(12))
    spec = parse_vnnlib(decl + f"(declare-const Y_0 Real)(assert (>= Y_0 {q.numerator}/{q.denominator}))")
    t = time.perf_counter()
    res = verify(model_from_json(mj), spec)
    print(f"\nproperty violated by a third of the inputs: {res.verdict}, {res.boxes} boxes, "
          f"{time.perf_counter() - t:.2f} s (counterexample checked in {res.counterexample['checked']})")
    hard = bound(mj, [0] * 12, [1] * 12, split=4)
    top = hard.sampled_upper + (hard.upper - hard.sampled_upper) / 10
    spec = parse_vnnlib(decl + f"(declare-const Y_0 Real)(assert (>= Y_0 {top.numerator}/{top.denominator}))")
    t = time.perf_counter()
    res = verify(model_from_json(mj), spec, max_boxes=10**8, timeout=10)
    print(f"hard property, --timeout 10: {res.verdict} ({res.stopped}) after {time.perf_counter() - t:.2f} s, "
          f"{res.boxes} boxes")


if __name__ == "__main__":
    main()
