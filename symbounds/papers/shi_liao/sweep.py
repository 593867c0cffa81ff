"""``symbounds sweep``: a grid of [SL26] instances (ε × d × targets) as one table.

Each row: the instance, the grid size ``P``, the scales ``M_g`` and ``M``, the largest weight, the
measured max error over the sample points (the upper end of the certified enclosure of
``max |T - g|``), the verdict of every claim at the sample points, optionally the whole-domain
certified error (``--certify``), and the time.  Written as CSV and JSON (same stem), the input of
plots and LaTeX tables.
"""

from __future__ import annotations

import csv
import io as _io
import json
import time

from ...core.exact import arb_to_fraction, decimal_up
from .constants import MAX_TRACED_TOKENS, Instance, constants

__all__ = ["COLUMNS", "run_instance", "sweep", "write_table", "json_twin", "table_text"]

COLUMNS = [
    "d", "alpha", "holder", "bound", "eps", "target", "P", "M_g", "M", "max_weight",
    "measured_max_error", "claims", "certified_error", "certificate", "seconds",
]


def _short(s: str, digits: int = 12) -> str:
    """A decimal string cut to ``digits`` significant digits (the table is for reading and
    plotting; the certificates keep every digit)."""
    if "/" in s or "e" in s or "." not in s:
        return s
    head, _, tail = s.partition(".")
    keep = max(0, digits - len(head.lstrip("-0")))
    return head + ("." + tail[:keep] if keep else "")


def run_instance(spec: dict) -> dict:
    """One row of the table (``spec``: d, alpha, holder, bound, eps, target, points, certify, workers)."""
    from ...core.boxes import CertifyOptions
    from .certificate import certify_instance
    from .run import PouOptions, run

    t0 = time.perf_counter()
    inst = Instance(d=spec["d"], alpha=spec["alpha"], C_H=spec["holder"], B=spec["bound"], eps=spec["eps"],
                       target=spec["target"])
    res = run(inst, PouOptions(points=spec.get("points", 8)))
    verdict = str(res.verdict)
    row = {
        "d": inst.d, "alpha": str(inst.alpha), "holder": str(inst.C_H), "bound": str(inst.B), "eps": str(inst.eps),
        "target": inst.target_text, "P": int(res.constants["P"]), "M_g": _short(res.constants["M_g"]),
        "M": _short(res.constants["M"]), "max_weight": _short(res.constants["max_weight"]),
        "measured_max_error": decimal_up(arb_to_fraction(res.max_error_value.upper()), 6), "claims": verdict, "certified_error": "", "certificate": "",
    }
    if spec.get("certify"):
        _, cres = certify_instance(inst, CertifyOptions(workers=1))
        row["certificate"] = cres.verdict
        if cres.max_bound is not None and cres.verdict == "proved":
            row["certified_error"] = decimal_up(cres.max_bound, 6)  # an upper bound: rounded up
    row["seconds"] = f"{time.perf_counter() - t0:.2f}"
    return row


def _run_indexed(item):
    """``(i, run_instance(spec))`` for ``item = (i, spec)`` (results come back in any order)."""
    i, spec = item
    return i, run_instance(spec)


def sweep(eps_list, d_list, targets, alpha="1", holder="2", bound="2", points=8, certify=False, workers=1,
          progress=None) -> list[dict]:
    """Rows for every (d, target, eps); ``targets`` maps d to a list of expressions (None: the
    default target for that d)."""
    specs = []
    for d in d_list:
        for target in targets.get(d) or [None]:
            for eps in eps_list:
                specs.append({"d": d, "alpha": alpha, "holder": holder, "bound": bound, "eps": eps,
                              "target": target, "points": points, "certify": certify})
    for s in specs:  # fail fast, before any work, on an instance that cannot be built
        inst = Instance(d=s["d"], alpha=s["alpha"], C_H=s["holder"], B=s["bound"], eps=s["eps"], target=s["target"])
        inst.target_expr()
        K = constants(inst)  # the grid size limit and a target that is real at the centres
        if K.P > MAX_TRACED_TOKENS:
            raise ValueError(f"d = {s['d']}, eps = {s['eps']}: P = {K.P} tokens, above the {MAX_TRACED_TOKENS} "
                             "whose claims a sweep measures")
    rows = []
    if workers > 1:
        from ...core.boxes import LocalPool, ignore_sigint

        # an instance lost with its worker process is run again (core.boxes.LocalPool)
        pool = LocalPool(workers, (), task=_run_indexed, initializer=ignore_sigint)
        done = {}
        try:
            for i, row in pool.imap(list(enumerate(specs))):
                done[i] = row
                if progress:
                    progress(len(done), len(specs))
        finally:
            pool.close()
        rows = [done[i] for i in range(len(specs))]
    else:
        for s in specs:
            rows.append(run_instance(s))
            if progress:
                progress(len(rows), len(specs))
    return rows


def json_twin(csv_path: str) -> str:
    """The JSON file written beside the table ``csv_path`` (same stem, ``.json``)."""
    return (csv_path[:-4] if csv_path.endswith(".csv") else csv_path) + ".json"


def write_table(rows: list[dict], csv_path: str) -> str:
    """Write ``csv_path`` and the JSON twin (same stem, ``.json``), atomically; returns the JSON path."""
    from ...core.files import atomic_write

    buf = _io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS)
    w.writeheader()
    for r in rows:
        w.writerow(r)
    json_path = json_twin(csv_path)
    atomic_write(csv_path, buf.getvalue())
    atomic_write(json_path, json.dumps({"columns": COLUMNS, "rows": rows}, indent=1) + "\n")
    return json_path


def table_text(rows: list[dict]) -> str:
    """The rows as a text table, one line each; the target column tells apart two rows of the same
    d and eps (written in full, so that two targets never look alike)."""
    cols = ["d", "eps", "target", "P", "M_g", "M", "max_weight", "measured_max_error", "claims", "certified_error", "seconds"]
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols)]
    for r in rows:
        lines.append("  ".join(str(r[c]).ljust(width[c]) for c in cols))
    return "\n".join(lines)
