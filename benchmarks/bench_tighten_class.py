"""The slack of [SL26]'s constants for the worst target of the class (``symbounds tighten --class``).

    python benchmarks/bench_tighten_class.py [--budget 1800] [--resolution 1/20] [--dims 1,2] [--out FILE.json] [--figure PNG]
    python benchmarks/bench_tighten_class.py --combine A.json B.json [--out FILE.json] [--figure PNG]

For each instance, the smallest ``M_g`` and ``M`` (the other derived) with which the class
certificate still holds (a certified pass), with the step one resolution below refuted by the worst
target ``g_0`` (its certified error above eps, confirmed by certifying ``g_0``'s own network), and the
slack paper / minimum.  Instances: d = 1 (C_H = B = 2, alpha = 1) at eps in {1/2, 1/4, 1/8, 1/10}
and d = 2 (C_H = B = 1, alpha = 1) at eps in {1/2, 2/5, 1/3, 1/4}.  Then the least-squares exponents
``k`` of ``minimum ~ (1/eps)^k`` per (d, constant) over every certified minimum
(``refuted_below`` counts those whose step below is refuted, the others are undecided there), beside
the fitted exponent of the derived values (the paper's orders, log factors dropped: ``M_g ~ eps^(-2/alpha)``, ``M ~ eps^(-2d/alpha)``).
Cheapest instances first; an instance not started within ``--budget`` seconds is listed as
skipped.  The JSON is rewritten after every constant.  ``--dims 1`` and ``--dims 2`` run one
dimension each (two processes; ``--eps`` picks instances), and ``--combine`` merges their JSON files, fits and draws.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from fractions import Fraction

from symbounds.core.files import atomic_write
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao import tighten as tg

INSTANCES = [(1, "1/2"), (1, "1/4"), (2, "1/2"), (1, "1/8"), (2, "2/5"), (1, "1/10"), (2, "1/3"), (2, "1/4")]


def _inst(d, eps):
    return sl.Instance(eps=eps) if d == 1 else sl.Instance(d=2, C_H=1, B=1, eps=eps)


def _slope(pts):
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def fits(rows):
    out = []
    for d in (1, 2):
        for c in ("Mg", "M"):
            rs = [r for r in rows if r["d"] == d and r["constant"] == c]
            lx = lambda r: math.log(1 / float(Fraction(r["eps"])))
            paper = [(lx(r), math.log(float(Fraction(r["paper"])))) for r in rs]
            found = [r for r in rs if r["minimum"] is not None]
            tight = [(lx(r), math.log(float(Fraction(r["minimum"])))) for r in found]
            nominal = 2 if c == "Mg" else 2 * d
            out.append({"d": d, "constant": c, "nominal": nominal, "paper_fitted": _slope(paper),
                        "class_fitted": _slope(tight), "points": len(tight),
                        "refuted_below": sum(r["below_status"] == "fail" for r in found)})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=1800)
    ap.add_argument("--resolution", default="1/20")
    ap.add_argument("--out", default="benchmarks/tighten_class_sweep.json")
    ap.add_argument("--figure", default=None, metavar="PNG", help="also draw the minima against 1/eps")
    ap.add_argument("--dims", default="1,2", help="the dimensions to run (default 1,2)")
    ap.add_argument("--eps", default=None, help="only these eps of the instances (e.g. 1/4,1/3)")
    ap.add_argument("--max-boxes", type=int, default=200_000,
                    help="boxes per class evaluation before it is undecided (default 200000); near the threshold "
                         "of M at d = 2 the leakage makes E nearly flat and one evaluation can use them all")
    ap.add_argument("--combine", nargs="+", default=None, metavar="JSON",
                    help="merge the rows of these sweep files (no run), fit and draw")
    args = ap.parse_args()
    if args.combine:
        return combine(args)
    dims = {int(v) for v in args.dims.split(",")}
    opts = tg.TightenOptions(resolution=Fraction(args.resolution), scan=12, max_boxes=args.max_boxes)
    rows, skipped = [], []
    t_start = time.perf_counter()
    only = None if args.eps is None else {Fraction(v) for v in args.eps.split(",")}
    for d, eps in [(d, e) for d, e in INSTANCES if d in dims and (only is None or Fraction(e) in only)]:
        if time.perf_counter() - t_start > args.budget:
            skipped.append({"d": d, "eps": eps, "reason": "not started within the time budget"})
            continue
        inst = _inst(d, eps)
        P = sl.constants(inst).P
        for c in ("Mg", "M"):
            t0, c0 = time.perf_counter(), time.process_time()
            r = tg.tighten(inst, c, "class", opts)
            row = {"d": d, "eps": eps, "P": P, "constant": c, "paper": tg.exact_text(tg.round_sig(r.paper, 6)),
                   "minimum": None if r.minimum is None else tg.exact_text(r.minimum),
                   "below": None if r.below is None else tg.exact_text(r.below),
                   "below_status": None if r.below_outcome is None else r.below_outcome.status,
                   "slack": None if r.slack is None else f"{float(r.slack):.4g}",
                   "worst_target_below": None if r.below_outcome is None else r.below_outcome.evidence.get("target"),
                   "evaluations": r.evaluations, "cpu_s": round(time.process_time() - c0, 1),
                   "wall_s": round(time.perf_counter() - t0, 1), "note": r.note}
            rows.append(row)
            print(f"| {d} | {eps} | {P} | {c} | {row['paper']} | {row['minimum']} | {row['below']} "
                  f"({row['below_status']}) | {row['slack']} | {row['evaluations']} | {row['cpu_s']} |", flush=True)
            atomic_write(args.out, json.dumps({"resolution": args.resolution, "rows": rows, "skipped": skipped,
                                               "fits": fits(rows)}, indent=1) + "\n")
    for f in fits(rows):
        print(f)
    print("skipped:", skipped)
    if args.figure:
        figure(rows, args.figure)


def combine(args):
    rows, skipped, res = [], [], set()
    for path in args.combine:
        with open(path) as f:
            part = json.load(f)
        rows += part["rows"]
        skipped += part["skipped"]
        res.add(part["resolution"])
    if len(res) != 1:
        raise SystemExit(f"the files were run at different resolutions: {sorted(res)}")
    order = {inst: i for i, inst in enumerate(INSTANCES)}
    rows.sort(key=lambda r: (r["d"], order.get((r["d"], r["eps"]), 99), r["constant"] != "Mg"))
    atomic_write(args.out, json.dumps({"resolution": res.pop(), "rows": rows, "skipped": skipped,
                                       "fits": fits(rows)}, indent=1) + "\n")
    print("written:", args.out)
    for f in fits(rows):
        print(f)
    if args.figure:
        figure(rows, args.figure)


def figure(rows, path):
    """The class minima and the derived values against 1/eps, log-log, one panel per d, each
    series labelled with its fitted exponent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    slopes = {(f["d"], f["constant"]): f for f in fits(rows)}
    names = {"Mg": "$M_g$", "M": "$M$"}
    fig, axes = plt.subplots(1, 2, figsize=(10, 5.2))
    for ax, d in zip(axes, (1, 2)):
        for c, colour in (("Mg", "tab:blue"), ("M", "tab:red")):
            rs = sorted((r for r in rows if r["d"] == d and r["constant"] == c), key=lambda r: Fraction(r["eps"]))
            if not rs:
                continue
            f = slopes[(d, c)]
            k = lambda v: "" if v is None else f", slope {v:.2f}"
            x = [1 / float(Fraction(r["eps"])) for r in rs]
            ax.loglog(x, [float(Fraction(r["paper"])) for r in rs], "o--", color=colour, mfc="none",
                      label=f"{names[c]} derived{k(f['paper_fitted'])}")
            pts = [(1 / float(Fraction(r["eps"])), float(Fraction(r["minimum"]))) for r in rs if r["minimum"]]
            why = "" if f["refuted_below"] == f["points"] else (
                " (step below undecided)" if f["refuted_below"] == 0 else " (some steps below undecided)")
            ax.loglog([p[0] for p in pts], [p[1] for p in pts], "s-", color=colour,
                      label=f"{names[c]}$^*$ class minimum{k(f['class_fitted'])}{why}")
        ax.set_title(f"d = {d}" + (" ($C_H = B = 2$, $\\alpha = 1$)" if d == 1 else " ($C_H = B = 1$, $\\alpha = 1$)"))
        ax.set_xlabel(r"$1/\varepsilon$")
        ax.set_ylabel("value of the constant")
        ax.grid(True, which="both", alpha=0.25)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False)
    fig.suptitle("[SL26]'s constants: derived, and the smallest for which the class certificate holds",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130, bbox_inches="tight")
    print("written:", path)


if __name__ == "__main__":
    main()
