"""How much smaller M, M_g and the grid could be (symbounds tighten) at a few accuracies.

    python benchmarks/bench_tighten.py [--eps 1/2,1/4,1/8,1/10] [--resolution 1/100]

Instance: d = 1, alpha = 1, C_H = B = 2, g = sin(2 x1).  Prints one Markdown row per accuracy,
constant and criterion: the derived value, the smallest value that passes (a certified pass),
the value one resolution step below (a certified failure), the slack paper / minimum, what
refutes the step below (a budget claim, or a counterexample point of the whole-cube search), the
number of evaluations and the wall time.
"""

import argparse
import time
from fractions import Fraction

from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao import tighten as tg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eps", default="1/2,1/4,1/8,1/10")
    ap.add_argument("--resolution", default="1/100")
    args = ap.parse_args()
    opts = tg.TightenOptions(resolution=Fraction(args.resolution))
    print(f"# resolution {args.resolution}")
    print("| eps | P | constant | criterion | paper | minimum | below | slack | refuted below by | evaluations "
          "| time (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for eps in args.eps.split(","):
        inst = sl.Instance(eps=eps)
        P = sl.constants(inst).P
        for constant in tg.CONSTANTS:
            for criterion in tg.CRITERIA[constant]:
                t0 = time.perf_counter()
                r = tg.tighten(inst, constant, criterion, opts)
                dt = time.perf_counter() - t0
                paper = r.paper_text if constant == "grid" else f"{float(r.paper):.6g}"
                mn = "-" if r.minimum is None else tg.exact_text(r.minimum)
                bl = "-" if r.below is None else tg.exact_text(r.below)
                slack = "-" if r.slack is None else f"{float(r.slack):.4g}"
                why = "-"
                if r.below_outcome is not None:
                    e = r.below_outcome.evidence
                    if "claim" in e:
                        why = e["claim"]
                    elif "x" in e:
                        why = f"x = {', '.join(e['x'])}, error {e['error'].split(' +/-')[0].lstrip('[')[:8]}"
                    else:
                        why = r.below_outcome.status
                extra = f" ({r.note})" if r.note else ""
                flips = f", {len(r.flips)} non-monotone flip(s)" if r.flips else ""
                print(f"| {eps} | {P} | {constant} | {criterion} | {paper} | {mn} | {bl} | {slack} | {why}{extra}{flips} "
                      f"| {r.evaluations} | {dt:.1f} |", flush=True)


if __name__ == "__main__":
    main()
