"""How much smaller M, M_g and the grid could be, across instances (a table for ``symbounds tighten``).

    python benchmarks/bench_tighten_sweep.py --out tighten_sweep [--budget 3000] [--resolution 1/20]

Sweep: ``eps`` in {1/2, 1/4, 1/8, 1/16, 1/32}, ``d`` in {1, 2}, ``alpha`` in {1, 1/2}; ``C_H = B = 2``
and the default target (a 2-Lipschitz sine, so it is also alpha-Hoelder with C_H = 2 for alpha =
1/2 on the unit cube).  For each instance and constant (``M``, ``M_g``, ``grid``) the derived value
(the paper's), the proof minimum (every lemma and budget claim proved), the domain minimum
(``sup |T - g| <= eps`` certified over the cube), both as certified passes with the value one
resolution step below evaluated (``below_status``: ``fail`` is a certified failure), and the slack
factors paper / minimum.  Then, per ``(d, alpha, constant)``, least-squares exponents ``k`` of
``value ~ (1/eps)^k`` for the paper's values and each minimum (tight minima only:
:func:`symbounds.app.tighten_figures.exponent_fits`), beside the paper's nominal exponent
(log factors dropped): ``M ~ P^2 ~ eps^(-2d/alpha)``, ``M_g ~ r_g^-2 ~ eps^(-2/alpha)``,
``m ~ r_g^-1 ~ eps^(-1/alpha)``.

Instances whose grid has more than 1024 tokens (the command's limit) are skipped with that reason;
the proof criterion is skipped above 300 tokens (the claims keep every layer-1 attention matrix);
instances not started before ``--budget`` seconds of wall time are listed as skipped for time.
Cheapest instances first.  The table is rewritten (atomically) after every constant, so a run cut
short still leaves what it finished.  CPU time is this process's (``time.process_time``); on a
shared machine wall time is larger.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import time
from fractions import Fraction

import sympy

from symbounds.app.tighten_figures import exponent_fits
from symbounds.core.files import atomic_write
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao import tighten as tg

EPS = ("1/2", "1/4", "1/8", "1/16", "1/32")
DIMS = (1, 2)
ALPHAS = ("1", "1/2")
COLUMNS = ("eps", "d", "alpha", "P", "constant", "paper", "proof_minimum", "proof_below_status", "proof_slack",
           "domain_minimum", "domain_below_status", "domain_slack", "note", "cpu_s", "wall_s")


def plan():
    """All instances, cheapest first (by token count, then proof before the 2-d ones), with a skip reason."""
    out = []
    for d in DIMS:
        for a in ALPHAS:
            for e in EPS:
                inst = sl.Instance(d=d, alpha=sympy.Rational(a), eps=sympy.Rational(e))
                r = sl.r_g_of(sympy.Rational(e), 2, sympy.Rational(a))
                m = int(sympy.ceiling(sl.grid_ratio(d, r)))
                P = m**d
                reason = None if P <= sl.MAX_TOKENS else f"P = {P} tokens > {sl.MAX_TOKENS} (the command's limit)"
                out.append((P, d, a, e, inst, reason))
    out.sort(key=lambda t: (t[0], t[1]))
    return out


def write(prefix, rows, skipped, meta):
    data = dict(meta, kind="tighten-sweep", rows=rows, fits=exponent_fits(rows), skipped=skipped)
    atomic_write(prefix + ".json", json.dumps(data, indent=1) + "\n")
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    atomic_write(prefix + ".csv", buf.getvalue())


def markdown(data) -> str:
    """The table and the fits as Markdown (for BENCHMARKS.md)."""
    out = ["| eps | d | alpha | P | constant | paper | proof min. | domain min. | slack proof | slack domain "
           "| CPU (s) | wall (s) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        def cell(c):
            v, status = r.get(c + "_minimum"), r.get(c + "_below_status")
            if v is None:
                return "-"
            return v + ("" if status == "fail" else " (floor, not tight)" if status == "-" else f" (below: {status})")

        out.append(f"| {r['eps']} | {r['d']} | {r['alpha']} | {r['P']} | {r['constant']} | {float(r['paper']):.6g} | "
                   f"{cell('proof')} | {cell('domain')} | {r.get('proof_slack') or '-'} | {r.get('domain_slack') or '-'} "
                   f"| {r['cpu_s']} | {r['wall_s']} |")
    out += ["", "| d | alpha | constant | paper's exponent | fit: paper | fit: proof min. | fit: domain min. |",
            "|---|---|---|---|---|---|---|"]
    show = lambda v, n: "-" if v is None else f"{v:.2f} ({n})"
    for f in data["fits"]:
        out.append(f"| {f['d']} | {f['alpha']} | {f['constant']} | {f['paper_exponent']:g} ({f['paper_exponent_text']}) "
                   f"| {show(f['paper_fitted'], f['points'])} | {show(f['proof_fitted'], f['proof_points'])} "
                   f"| {show(f['domain_fitted'], f['domain_points'])} |")
    out += ["", "Not run:"] + [f"- eps = {s['eps']}, d = {s['d']}, alpha = {s['alpha']} (P = {s['P']}): {s['reason']}"
                               for s in data["skipped"]]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tighten_sweep", help="write OUT.csv and OUT.json")
    ap.add_argument("--budget", type=float, default=3000.0, help="wall seconds after which no instance starts")
    ap.add_argument("--resolution", default="1/20")
    ap.add_argument("--scan", type=int, default=2, help="halvings scanned first (the scan goes on while it passes)")
    ap.add_argument("--only", default=None, help="run only the first K feasible instances (a quick check)")
    ap.add_argument("--refit", action="store_true", help="only rewrite OUT.json's exponent fits from its rows")
    a = ap.parse_args()
    if a.refit:
        with open(a.out + ".json", encoding="utf-8") as f:
            data = json.load(f)
        meta = {k: v for k, v in data.items() if k not in ("rows", "fits", "skipped", "kind")}
        write(a.out, data["rows"], data["skipped"], meta)
        with open(a.out + ".json", encoding="utf-8") as f:
            print(markdown(json.load(f)))
        return
    opts = tg.TightenOptions(resolution=Fraction(a.resolution), scan=a.scan)
    t_start, cpu_start = time.perf_counter(), time.process_time()
    meta = {"resolution": a.resolution, "scan": a.scan, "C_H": "2", "B": "2", "target": "default (2-Lipschitz sine)"}
    rows, skipped = [], []
    done = 0
    for P, d, alpha, eps, inst, reason in plan():
        where = {"eps": eps, "d": d, "alpha": alpha, "P": P}
        if reason:
            skipped.append(dict(where, reason=reason))
            continue
        if time.perf_counter() - t_start > a.budget or (a.only and done >= int(a.only)):
            skipped.append(dict(where, reason=f"not started within the {a.budget:.0f} s wall budget"))
            continue
        done += 1
        for constant in tg.CONSTANTS:
            t0, c0 = time.perf_counter(), time.process_time()
            paper, paper_text = tg.paper_value(inst, constant)
            row = dict(where, constant=constant, paper=paper_text, paper_exact=tg.exact_text(tg.round_sig(paper, 12)),
                       note="")
            for criterion in ("proof", "domain"):
                if criterion not in tg.CRITERIA[constant]:
                    row[criterion + "_minimum"] = None
                    row[criterion + "_below_status"] = "n/a (E0/E1 fix the grid)"
                    continue
                if criterion == "proof" and P > sl.MAX_TRACED_TOKENS:
                    row[criterion + "_minimum"] = None
                    row[criterion + "_below_status"] = f"skipped: P > {sl.MAX_TRACED_TOKENS}"
                    continue
                r = tg.tighten(inst, constant, criterion, opts)
                row[criterion + "_minimum"] = None if r.minimum is None else tg.exact_text(r.minimum)
                row[criterion + "_below"] = None if r.below is None else tg.exact_text(r.below)
                row[criterion + "_below_status"] = r.below_outcome.status if r.below_outcome else "-"
                row[criterion + "_slack"] = None if r.slack is None else f"{float(r.slack):.4g}"
                row[criterion + "_evaluations"] = r.evaluations
                row[criterion + "_undecided"] = [tg.exact_text(o.value) for o in r.undecided]
                if r.note:
                    row["note"] += f"{criterion}: {r.note}. "
                if r.flips:
                    row["note"] += f"{criterion}: {len(r.flips)} non-monotone flip(s). "
            row["cpu_s"] = round(time.process_time() - c0, 1)
            row["wall_s"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
            meta.update(wall_s=round(time.perf_counter() - t_start, 1), cpu_s=round(time.process_time() - cpu_start, 1))
            write(a.out, rows, skipped, meta)
            print(f"eps={eps} d={d} alpha={alpha} P={P} {constant}: paper {float(paper):.6g} "
                  f"proof {row.get('proof_minimum')} ({row.get('proof_below_status')}) "
                  f"domain {row.get('domain_minimum')} ({row.get('domain_below_status')}) "
                  f"cpu {row['cpu_s']} s wall {row['wall_s']} s", flush=True)
    meta.update(wall_s=round(time.perf_counter() - t_start, 1), cpu_s=round(time.process_time() - cpu_start, 1))
    write(a.out, rows, skipped, meta)
    for s in skipped:
        print(f"skipped eps={s['eps']} d={s['d']} alpha={s['alpha']} P={s['P']}: {s['reason']}")
    for f in exponent_fits(rows):
        print(f)


if __name__ == "__main__":
    main()
