"""``symbounds tikhonov``: the regularised-training experiment of [AFZ25] beside its certified
threshold (docs/alcalde.md, Regularised training).

1. The teacher block (softmax attention with ``Q = K = 0``, ``V = I``, ``rho = 0``, then a residual
   width-4 ReLU layer with weights uniform on ``[0, 1]``) is held in exact binary rationals; its
   exact outputs are the targets and its exact evaluation is checked (the ``teacher`` verdict),
   so ``theta*`` interpolates and ``eps ||theta*||^2`` is a certified threshold.
2. One block of the same shape is trained in float64 PyTorch for each ``eps`` (Adam, lr 1e-3,
   cosine annealing, full batch; ``--decay coupled``: Adam's ``weight_decay = eps``, i.e. the penalty
   ``(eps/2) ||theta||^2``; ``--decay decoupled``: ``eps ||theta||^2`` added to the objective, plain
   Adam); ``--warm-start`` starts each ``eps`` from the previous one's weights (the authors' script).
3. What each run reached is certified in Arb balls: the data loss, the Hausdorff distance per
   sequence, ``||theta||^2`` against ``||theta*||^2`` and the objective against ``J(theta*)``.

Exit code 0 when the teacher is proved to interpolate (the training statistics are reported, not
claimed); 1 if that check is refuted; 2 for bad input or a missing PyTorch (``symbounds[train]``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from fractions import Fraction

from ..core.exact import decimal
from .args import FIGURE_FORMATS, Bar, UsageError, check_out_folders, int_list, number_list, written

__all__ = ["add_tikhonov_arguments", "run_tikhonov", "tikhonov_result", "tikhonov_json", "tikhonov_text"]

EPS_DEFAULT = "1e-1,1e-2,1e-3"
MAX_EPOCHS = 10_000_000
MAX_EPS = 20
MAX_TOKENS = 100_000


def add_tikhonov_arguments(p) -> None:
    p.add_argument("--eps", default=EPS_DEFAULT, metavar="E[,E...]",
                   help=f"penalty weights eps > 0, trained in this order (default {EPS_DEFAULT})")
    p.add_argument("--epochs", default="5000", metavar="N[,N...]",
                   help="full-batch epochs per eps: one number, or one per eps (default 5000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the data, the teacher and the initialisation (default 0)")
    p.add_argument("--warm-start", action="store_true",
                   help="start each eps from the weights the previous one reached (the authors' script)")
    p.add_argument("--decay", default="coupled", choices=["coupled", "decoupled"],
                   help="coupled: Adam weight_decay=eps, the penalty (eps/2)||theta||^2 (the authors'); "
                        "decoupled: eps||theta||^2 added to the objective, plain Adam (default coupled)")
    p.add_argument("--size", default="10,100,16", metavar="N,n,d",
                   help="sequences, tokens per sequence, dimension (default 10,100,16: the authors')")
    p.add_argument("--no-construction", action="store_true",
                   help="skip symbounds' own exact interpolant for the same dataset")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", default=None, metavar="FILE.png|FILE.svg|FILE.pdf",
                   help="draw the loss against epochs (threshold lines) and the minimum loss against eps")
    p.add_argument("--quiet", action="store_true", help="no progress")


def _eps_list(text: str) -> list[Fraction]:
    return number_list(text, "--eps", MAX_EPS, positive=True)


def _validate(args) -> tuple:
    eps = _eps_list(args.eps)
    epochs = int_list(args.epochs, "--epochs", count=len(eps), per="eps", positive=False)
    if any(e < 1 or e > MAX_EPOCHS for e in epochs):
        raise UsageError(f"--epochs {args.epochs[:40]}: each must be between 1 and {MAX_EPOCHS}")
    if len(epochs) == 1:
        epochs = epochs * len(eps)
    size = int_list(args.size, "--size", positive=False)
    if len(size) != 3 or size[0] < 1 or size[1] < 1 or size[2] < 2 or size[0] * size[1] > MAX_TOKENS or size[2] > 256:
        raise UsageError(f"--size {args.size[:40]}: need N,n >= 1, 2 <= d <= 256 and N*n <= {MAX_TOKENS}")
    if args.seed < 0:
        raise UsageError(f"--seed {args.seed}: must be non-negative")
    check_out_folders(args.plot)
    if args.plot is not None and os.path.splitext(args.plot)[1].lower() not in FIGURE_FORMATS:
        raise UsageError(f"--plot {args.plot}: use a .png, .svg or .pdf file name")
    return eps, epochs, tuple(size)


class _Progress:
    """A bar on a terminal; off one a short line now and then (at most every 30 s, and when an
    eps is done); nothing under --quiet."""

    def __init__(self, args, eps, epochs):
        self.quiet = args.quiet
        self.tty = not args.quiet and sys.stderr.isatty() and not os.environ.get("CI")
        self.bar = Bar(args, "epoch") if self.tty else None
        self.total = sum(epochs)
        self.before = [sum(epochs[:i]) for i in range(len(epochs))]
        self.t0 = self.last = time.perf_counter()

    def __call__(self, i, eps, done, total):
        if self.quiet:
            return
        if self.bar is not None:
            self.bar(self.before[i] + done, self.total, f"eps={float(eps):g}")
        elif done == total or time.perf_counter() - self.last >= 30:
            self.last = time.perf_counter()
            print(f"symbounds tikhonov: eps={float(eps):g} epoch {done}/{total} "
                  f"({time.perf_counter() - self.t0:.0f} s)", file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def tikhonov_result(data, check, runs, rows, construction, decay, warm) -> dict:
    from ..papers.alcalde import tikhonov as tk

    ds = data.dataset
    mins = [r["min_loss"] for r in rows]
    star = data.theta_star_sq
    return {
        "command": "tikhonov",
        "dataset": {"N": ds.N, "n": ds.n[0], "d": ds.d, "seed": data.seed},
        "teacher": check.as_dict(),
        "parameters": {"names": list(tk.PARAMETERS), "count": tk.parameter_count(ds.d)},
        "theta_star_sq": f"{star.numerator}/{star.denominator}" if star.denominator != 1 else str(star.numerator),
        "theta_star_sq_decimal": decimal(star),
        "construction": construction,
        "decay": decay,
        "warm_start": warm,
        "penalty": ("(eps/2)||theta||^2 (Adam weight_decay=eps)" if decay == "coupled"
                    else "eps||theta||^2 in the objective (plain Adam)"),
        "slope": tk.slope([r.eps for r in runs], mins),
        "runs": rows,
    }


def tikhonov_json(res: dict) -> str:
    return json.dumps(res, indent=1)


def tikhonov_text(res: dict) -> str:
    ds = res["dataset"]
    c = res["construction"]
    lines = [
        (f"symbounds tikhonov: [AFZ25] regularised training, N={ds['N']} sequences of n={ds['n']} tokens "
         f"in d={ds['d']} (seed {ds['seed']})"),
        f"teacher interpolates exactly (exact rationals): {res['teacher']['verdict']}",
        (f"||theta*||^2 (teacher; {', '.join(res['parameters']['names'])}; {res['parameters']['count']} parameters) "
         f"= {res['theta_star_sq_decimal']}"),
    ]
    if c:
        lines.append(f"symbounds' construction for the same data: {c['blocks']} blocks, {c['params_nonzero']} nonzero "
                     f"parameters, ||theta*||^2 = {c['theta_norm_sq']} ({c['verdict']})")
    lines.append(f"training: {res['decay']} penalty {res['penalty']}, "
                 f"{'warm-started' if res['warm_start'] else 'fresh start'} per eps, float64")
    for r in res["runs"]:
        cert = r.get("certified", {})
        v = cert.get("verdicts", {})
        lines.append(
            f"  eps={r['eps_float']:g} epochs={r['epochs']} ({r['seconds']:.1f} s): min loss {r['min_loss']:.4g}, "
            f"final {r['final_loss']:.4g}, threshold eps||theta*||^2 = {r['threshold_float']:.4g}, "
            f"crossing epoch {r['crossing_epoch'] if r['crossing_epoch'] is not None else 'none'}")
        if cert:
            lines.append(
                f"    certified: loss in [{cert['loss']['lower']}, {cert['loss']['upper']}]; "
                f"loss <= threshold {v['loss_below_threshold']}; ||theta||^2 = {cert['norm_sq']} <= ||theta*||^2 "
                f"{v['norm_below_teacher']}; J(theta) <= J(theta*) {v['objective_below_teacher']}")
    if res["slope"] is not None:
        lines.append(f"slope of log min loss against log eps: {res['slope']:.3f} (reference 1)")
    return "\n".join(lines)


def run_tikhonov(args) -> int:
    eps, epochs, (N, n, d) = _validate(args)
    try:
        import torch
    except ImportError:
        raise UsageError("PyTorch is not installed: pip install 'symbounds[train]'") from None
    from ..papers.alcalde import tikhonov as tk
    from ..papers.alcalde import tikhonov_train as tt

    torch.set_num_threads(1)
    data = tk.make_data(N, n, d, seed=args.seed)
    check = tk.check_teacher(data.dataset, data.teacher)
    construction = None if args.no_construction else tk.construction_summary(data.dataset)
    prog = _Progress(args, eps, epochs)
    try:
        runs = tt.experiment(data, eps, epochs, args.decay, args.warm_start, args.seed, prog)
    finally:
        prog.close()
    rows = tt.summarise(data, runs)
    res = tikhonov_result(data, check, runs, rows, construction, args.decay, args.warm_start)
    if args.plot:
        from .plot import plot_tikhonov, save_figure

        save_figure(plot_tikhonov([res]), args.plot)
        written(args.plot)
    print(tikhonov_json(res) if args.json else tikhonov_text(res))
    return check.verdict.exit_code
