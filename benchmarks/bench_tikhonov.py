"""The regularised-training experiment of [AFZ25] (their Fig. 1a and 1b), in float64 PyTorch,
beside the certified threshold ``eps ||theta*||^2`` of the teacher, each run certified after.

    python benchmarks/bench_tikhonov.py fig1a --decay coupled         # eps = 1e-4, 50,000 epochs
    python benchmarks/bench_tikhonov.py fig1b --decay coupled --warm  # the authors' script
    python benchmarks/bench_tikhonov.py fig1b --decay decoupled       # fresh starts, eps ||theta||^2
    python benchmarks/bench_tikhonov.py fig1b --scale 0.1             # a tenth of the epochs
    python benchmarks/bench_tikhonov.py figure --fig1a A.json ... --fig1b B.json ... --out FIG.png

Fig. 1b uses the authors' schedule: 5,000, 10,000 and 50,000 epochs for eps = 1e-1, 1e-2, 1e-3
(in that order, which matters with --warm).  Each case writes one JSON file (``--out``, default
``tikhonov_<case>_<decay>_<warm|fresh>.json``) with the traces and the certified enclosures; the
figures are drawn from those files by ``symbounds.app.plot.tikhonov_figure``.  Needs the extra
``symbounds[train]``.  No assertions: the numbers go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from fractions import Fraction

import torch

from symbounds.papers.alcalde import tikhonov as tk
from symbounds.papers.alcalde import tikhonov_train as tt

CASES = {
    "fig1a": ([Fraction(1, 10000)], [50000]),
    "fig1b": ([Fraction(1, 10), Fraction(1, 100), Fraction(1, 1000)], [5000, 10000, 50000]),
}


def figure(argv) -> None:
    """Fig. 1a (left: the loss traces of the --fig1a files) and 1b (right: min loss against eps of
    the --fig1b files) in one PNG."""
    from symbounds.app.plot import plot_tikhonov, save_figure

    ap = argparse.ArgumentParser(prog="bench_tikhonov.py figure")
    ap.add_argument("--fig1a", nargs="+", required=True)
    ap.add_argument("--fig1b", nargs="+", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    def load(paths):
        out = []
        for p in paths:
            with open(p) as f:
                out.append(json.load(f))
        return out

    save_figure(plot_tikhonov(load(a.fig1a), load(a.fig1b)), a.out)


def main() -> None:
    if sys.argv[1:2] == ["figure"]:
        return figure(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--decay", choices=tt.DECAYS, default="coupled")
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every epoch count (default 1)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    eps, epochs = CASES[a.case]
    epochs = [max(1, round(e * a.scale)) for e in epochs]
    data = tk.make_data(seed=a.seed)
    t0 = time.perf_counter()
    check = tk.check_teacher(data.dataset, data.teacher)
    t_check = time.perf_counter() - t0

    def progress(i, e, done, total):
        if done % max(1, total // 10) == 0:
            print(f"  eps={float(e):g}: epoch {done}/{total}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    runs = tt.experiment(data, eps, epochs, a.decay, a.warm, a.seed, progress)
    t_train = time.perf_counter() - t0
    rows = tt.summarise(data, runs)
    mins = [r["min_loss"] for r in rows]
    out = {
        "case": a.case, "decay": a.decay, "warm": a.warm, "warm_start": a.warm, "seed": a.seed, "scale": a.scale,
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "teacher": check.as_dict(), "teacher_check_seconds": round(t_check, 3),
        "theta_star_sq": str(data.theta_star_sq), "theta_star_sq_float": float(data.theta_star_sq),
        "theta_star_sq_decimal": str(float(data.theta_star_sq)),
        "train_seconds": round(t_train, 2), "slope": tk.slope([r.eps for r in runs], mins), "runs": rows,
    }
    path = a.out or f"tikhonov_{a.case}_{a.decay}_{'warm' if a.warm else 'fresh'}.json"
    with open(path, "w") as f:
        json.dump(out, f)
    print(f"{a.case} {a.decay} {'warm' if a.warm else 'fresh'}: |theta*|^2 = {float(data.theta_star_sq):.4f} "
          f"(teacher {check.verdict}), train {t_train:.1f} s, slope {out['slope']}")
    for r in rows:
        c = r["certified"]
        print(f"  eps={r['eps_float']:g} epochs={r['epochs']} ({r['seconds']:.1f} s): min {r['min_loss']:.4g} "
              f"final {r['final_loss']:.4g} threshold {r['threshold_float']:.4g} crossing {r['crossing_epoch']} "
              f"|theta|^2 {r['norm_sq']:.3f}  certified loss [{c['loss']['lower']}, {c['loss']['upper']}] "
              f"{c['verdicts']}")


if __name__ == "__main__":
    main()
