"""The rate, measured (docs/shi_liao.md, "Generalisation rate"): excess risk of the softmax-partition-of-unity estimator.

    python benchmarks/bench_rate.py            # n = 10^2 .. 10^4.5, 10 repetitions
    python benchmarks/bench_rate.py --reps 20

For each case: eps(n) = n^(-alpha/(2 alpha + d)), the centres of the construction (grid of the cube,
certified net of the curve), ybar_k = local averages of noisy samples (sigma = 1/2), and the excess
risk E(f_hat - g)^2 on 4000 evaluation points, averaged over the repetitions; then the fitted slope
of log risk against log n beside -2 alpha/(2 alpha + d) (and, for the curve, the ambient
-2 alpha/(2 alpha + D)).  Next to it, `symbounds rate`'s bound and C4 at the same n.
"""

import argparse
import time

from symbounds.papers.shi_liao.empirical import CASES, fit_slope, measure
from symbounds.papers.shi_liao.rate import rate_report

NS = [100, 316, 1000, 3162, 10000, 31623]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    for key, (label, d, amb, C_H, B) in CASES.items():
        t0 = time.perf_counter()
        rows = measure(key, NS, reps=args.reps)
        print(f"\n{label}  (d = {d}, D = {amb}, alpha = 1, sigma = 1/2, {args.reps} repetitions)")
        print("| n | eps(n) | P | excess risk (mean +- s.e.) | `symbounds rate` bound | C4 |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            rep = rate_report(r["n"], d, "1", str(C_H), str(B), "1/2")
            print(f"| {r['n']} | {r['eps']:.4f} | {r['P']} | {r['risk']:.3e} +- {r['risk_sd']:.1e} | "
                  f"{float(rep['bound']):.3e} | {float(rep['C4']):.3e} |")
        s = fit_slope(rows)
        print(f"fitted slope {s:.3f}   theory -2a/(2a+d) = {-2 / (2 + d):.3f}"
              + (f"   ambient -2a/(2a+D) = {-2 / (2 + amb):.3f}" if amb != d else "")
              + f"   ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
