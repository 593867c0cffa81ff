"""Figures and LaTeX of ``symbounds tighten`` tables (``plot --kind tighten``, ``latex tighten``).

Inputs
======
``--table T.json``
    A sweep of ``symbounds tighten`` over instances (``benchmarks/bench_tighten_sweep.py``: an
    object with ``kind = "tighten-sweep"`` and ``rows``), or one ``symbounds tighten --json`` report
    (its results become the rows of a single instance).  A row: ``eps``, ``d``, ``alpha``, ``P``,
    ``constant`` (``M``, ``Mg``, ``grid``), ``paper`` (the derived value), ``proof_minimum`` and
    ``domain_minimum`` (certified passes, or null), and ``proof_below_status`` /
    ``domain_below_status`` (``fail`` when the step below the minimum is a certified failure).
``--map R.json``
    A ``symbounds tighten --what M,Mg --criterion domain --map --json`` report: the domain
    criterion on a grid of ``(M_g, M)`` pairs, and the derived values.

What is drawn
=============
* slack ``paper / minimum`` against ``eps`` (log-log), one series per constant, criterion and
  ``(d, alpha)``; a hollow marker where the minimum is not tight (the step below it was not a
  certified failure: the search reached its floor, or the step below was undecided); the line
  ``slack = 1`` is the paper's own value;
* with a map, beside it: the cells of the ``(M_g, M)`` grid, pass (filled circle), fail (cross),
  undecided (question mark), and the paper's point (star).

The table (``latex tighten``) lists, per instance and constant, the paper's value, the two
minima and the two slacks, then the exponents ``k`` of least-squares fits ``value ~ (1/eps)^k``
over the tight minima, beside the paper's nominal exponent (log factors dropped):
``M ~ eps^(-2d/alpha)``, ``M_g ~ eps^(-2/alpha)``, ``m ~ eps^(-1/alpha)``.  Numbers are read from the
table as exact decimals or fractions (no ``eval``); floats only place points on the figure.
"""

from __future__ import annotations

import json
import math
import os
from fractions import Fraction

from ..core.exact import NumberError, parse_number
from ..core.files import atomic_write, read_user_text

__all__ = ["load_tighten_table", "load_map", "exponent_fits", "plot_tighten", "tighten_latex", "run_plot_tighten",
           "run_latex_tighten", "NOMINAL"]

CONSTANT_TEX = {"M": "M", "Mg": "M_g", "grid": "m"}
CONSTANT_LABEL = {"M": "M", "Mg": "M_g", "grid": "grid m"}
#: The paper's exponent of each constant in 1/eps (log factors dropped), as text and as a function.
NOMINAL = {"M": ("2d/alpha", lambda d, a: 2 * d / a), "Mg": ("2/alpha", lambda d, a: 2 / a),
           "grid": ("1/alpha", lambda d, a: 1 / a)}
_MAX_FILE = 64 * 2**20


def _num(text, what) -> Fraction:
    try:
        return parse_number(str(text), what)
    except NumberError:
        raise ValueError(f"{what}: not a number: {str(text)[:40]!r}") from None


def _read_json(path: str, what: str):
    text = read_user_text(path, ValueError, _MAX_FILE)
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{path}: not a {what} ({type(e).__name__})") from None


def _rows_of_report(data: dict) -> list[dict]:
    """The results of one ``symbounds tighten --json`` report as table rows (one instance)."""
    inst = data.get("instance") or {}
    by: dict = {}
    for r in data["results"]:
        row = by.setdefault(r["constant"], {"eps": str(inst.get("eps")), "d": inst.get("d"),
                                            "alpha": str(inst.get("alpha")), "P": None, "constant": r["constant"],
                                            "paper": r["paper"]})
        row[r["criterion"] + "_minimum"] = r["minimum"]
        row[r["criterion"] + "_below_status"] = r["below_status"]
    return list(by.values())


def load_tighten_table(path: str) -> dict:
    """``{"rows": [...], "skipped": [...], "meta": {...}}`` from a sweep table or a tighten report,
    validated (ValueError, one line, on anything else)."""
    data = _read_json(path, "tighten table")
    try:
        if isinstance(data, dict) and data.get("kind") == "tighten-sweep":
            rows, skipped = data["rows"], data.get("skipped", [])
        elif isinstance(data, dict) and data.get("command") == "tighten" and "results" in data:
            if data.get("what") == "tau":
                raise ValueError(f"{path}: a --what tau report has no M, M_g or grid to draw")
            rows, skipped = _rows_of_report(data), []
        else:
            raise ValueError(f"{path}: not a tighten table (expected a sweep table or a symbounds tighten --json report)")
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a tighten table ({type(e).__name__}: {e})") from None
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path}: the table has no rows")
    for r in rows:
        for key in ("eps", "d", "alpha", "constant", "paper"):
            if r.get(key) in (None, "None"):
                raise ValueError(f"{path}: a row lacks {key!r}")
        if r["constant"] not in NOMINAL:
            raise ValueError(f"{path}: unknown constant {str(r['constant'])[:20]!r}")
        eps = _num(r["eps"], f"{path}: eps")
        if not (0 < eps < 1):
            raise ValueError(f"{path}: eps {r['eps']} outside (0, 1)")
        for key in ("paper", "proof_minimum", "domain_minimum"):
            if r.get(key) is not None and not _num(r[key], f"{path}: {key}") > 0:
                raise ValueError(f"{path}: {key} must be positive")
    meta = {k: v for k, v in data.items() if k not in ("rows", "fits", "skipped", "results")} \
        if isinstance(data, dict) else {}
    return {"rows": rows, "skipped": skipped, "meta": meta}


def load_map(path: str) -> dict:
    """The map of a ``tighten --map --json`` report: ``{"cells", "paper": (M_g, M), "minimum": ...}``."""
    data = _read_json(path, "tighten --map report")
    if not isinstance(data, dict) or not isinstance(data.get("map"), dict):
        raise ValueError(f"{path}: not a tighten --map report (no 'map')")
    try:
        cells = [(_num(c["Mg"], "Mg"), _num(c["M"], "M"), c["status"]) for c in data["map"]["cells"]]
        paper = {r["constant"]: _num(r["paper"], "paper") for r in data["results"]}
        minimum = {r["constant"]: (None if r["minimum"] is None else _num(r["minimum"], "minimum"))
                   for r in data["results"] if r.get("criterion") == "domain"}
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a tighten --map report ({type(e).__name__}: {e})") from None
    if not cells or any(s not in ("pass", "fail", "undecided") for _, _, s in cells):
        raise ValueError(f"{path}: the map has no cells or an unknown status")
    if "M" not in paper or "Mg" not in paper:
        raise ValueError(f"{path}: the report lacks the derived M and M_g")
    return {"cells": cells, "paper": (paper["Mg"], paper["M"]), "minimum": minimum,
            "instance": data.get("instance", {})}


def _tight(r: dict, criterion: str) -> bool:
    return r.get(criterion + "_minimum") is not None and r.get(criterion + "_below_status") == "fail"


def _slope(points) -> float | None:
    if len(points) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def exponent_fits(rows: list[dict]) -> list[dict]:
    """Per ``(d, alpha, constant)``: least-squares slopes of ``log value`` against ``log(1/eps)``
    for the paper's values and for each minimum (tight minima only), with the number of points,
    beside the paper's nominal exponent."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((int(r["d"]), str(r["alpha"]), r["constant"]), []).append(r)
    out = []
    for (d, a, c), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], -_num(kv[0][1], "alpha"),
                                                                 list(NOMINAL).index(kv[0][2]))):
        lx = lambda r: math.log(1 / float(_num(r["eps"], "eps")))
        ly = lambda v: math.log(float(_num(v, "value")))
        paper = [(lx(r), ly(r["paper"])) for r in rs]
        entry = {"d": d, "alpha": a, "constant": c, "eps": [r["eps"] for r in rs],
                 "paper_exponent_text": NOMINAL[c][0],
                 "paper_exponent": NOMINAL[c][1](d, float(_num(a, "alpha"))),
                 "paper_fitted": _slope(paper), "points": len(paper)}
        for crit in ("proof", "domain"):
            pts = [(lx(r), ly(r[crit + "_minimum"])) for r in rs if _tight(r, crit)]
            entry[crit + "_fitted"] = _slope(pts)
            entry[crit + "_points"] = len(pts)
        out.append(entry)
    return out


# ------------------------------------------------------------------------------------------
# the figure


def _pyplot():
    import matplotlib

    if "MPLBACKEND" not in os.environ:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_COLOURS = {("M", "proof"): "tab:blue", ("M", "domain"): "tab:cyan", ("Mg", "proof"): "tab:red",
            ("Mg", "domain"): "tab:orange", ("grid", "domain"): "tab:green"}
_MARKERS = {("1", "1"): "o", ("1", "1/2"): "^", ("2", "1"): "s", ("2", "1/2"): "D"}


def _slack_axes(ax, rows: list[dict]) -> None:
    """Slack against eps: colour = (constant, criterion), marker = instance (d, alpha).  The legend
    names each colour and each marker once (two short legends, not one entry per series)."""
    from matplotlib.lines import Line2D

    series: dict = {}
    for r in rows:
        for crit in ("proof", "domain"):
            if r.get(crit + "_minimum") is None:
                continue
            key = (r["constant"], crit, str(r["d"]), str(r["alpha"]))
            series.setdefault(key, []).append(r)
    all_eps = set()
    for (c, crit, d, a), rs in sorted(series.items()):
        rs.sort(key=lambda r: _num(r["eps"], "eps"))
        xs = [float(_num(r["eps"], "eps")) for r in rs]
        ys = [float(_num(r["paper"], "paper") / _num(r[crit + "_minimum"], "minimum")) for r in rs]
        all_eps.update(xs)
        colour, marker = _COLOURS[(c, crit)], _MARKERS.get((d, a), "o")
        label = f"{CONSTANT_LABEL[c]}, {crit} (d={d}, α={a})"  # the line's name; the legends are built below
        ax.plot(xs, ys, "-", color=colour, lw=1.2, label=label, marker=marker, ms=5)
        loose = [(x, y) for x, y, r in zip(xs, ys, rs) if not _tight(r, crit)]
        if loose:
            ax.plot([x for x, _ in loose], [y for _, y in loose], marker, ms=9, mfc="white", mec=colour,
                    ls="none")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.annotate("slack 1: the paper's value", (0.01, 1.0), xycoords=("axes fraction", "data"), xytext=(0, 3),
                textcoords="offset points", fontsize=9, color="grey", va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = sorted(all_eps)
    ax.set_xticks(xs)
    ax.set_xticklabels([_eps_label(x) for x in xs])
    ax.minorticks_off()
    ax.set_xlabel(r"accuracy $\varepsilon$")
    ax.set_ylabel("slack = paper value / certified minimum")
    ax.yaxis.set_major_formatter(_plain_formatter())
    ax.set_title("how much smaller each constant could be")
    kinds = sorted({(c, crit) for c, crit, _, _ in series}, key=list(_COLOURS).index)
    shown = sorted({(d, a) for _, _, d, a in series})
    colour_legend = ax.legend(
        [Line2D([], [], color=_COLOURS[k], lw=2) for k in kinds],
        [f"{CONSTANT_LABEL[c]}, {crit}" for c, crit in kinds],
        title="constant, criterion", fontsize=9, title_fontsize=9, loc="upper left", bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0.0)
    ax.add_artist(colour_legend)
    ax.legend([Line2D([], [], color="grey", marker=_MARKERS.get(k, "o"), ls="none") for k in shown]
              + [Line2D([], [], color="grey", marker="o", ms=9, mfc="white", ls="none")],
              [f"d = {d}, α = {a}" for d, a in shown] + ["not tight (open marker)"],
              title="instance", fontsize=9, title_fontsize=9, loc="upper left", bbox_to_anchor=(1.02, 0.45),
              borderaxespad=0.0)


def _eps_label(x: float) -> str:
    q = Fraction(x).limit_denominator(10**6)
    return f"1/{q.denominator}" if q.numerator == 1 else str(q)


def _map_axes(ax, m: dict) -> None:
    style = {"pass": dict(marker="o", color="tab:green", ls="none", ms=7),
             "fail": dict(marker="x", color="tab:red", ls="none", ms=7, mew=1.5),
             "undecided": dict(marker="$?$", color="tab:orange", ls="none", ms=8)}
    names = {"pass": "certified (sup |T-g| ≤ ε)", "fail": "counterexample", "undecided": "undecided"}
    for status in ("pass", "fail", "undecided"):
        pts = [(float(mg), float(mm)) for mg, mm, s in m["cells"] if s == status]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=names[status], **style[status])
    pm, pM = (float(v) for v in m["paper"])
    ax.plot([pm], [pM], "*", color="black", ms=14, label=r"paper's $(M_g, M)$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("partition scale $M_g$")
    ax.set_ylabel("attention scale $M$")
    inst = m.get("instance") or {}
    where = f" (d={inst.get('d')}, ε={inst.get('eps')})" if inst else ""
    ax.set_title(r"domain criterion on the $(M_g, M)$ grid" + where)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(_plain_formatter())
        axis.set_minor_formatter(_plain_formatter(minor=True))
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)


def _plain_formatter(minor: bool = False):
    """Tick labels as plain numbers (``50``, ``0.5``), not ``5 x 10^1``; minor ticks at 2 and 5 only."""
    from matplotlib.ticker import FuncFormatter

    def fmt(v, _pos):
        if v <= 0:
            return ""
        lead = v / 10 ** math.floor(math.log10(v) + 1e-9)
        if minor and round(lead) not in (2, 5):
            return ""
        return f"{v:g}"

    return FuncFormatter(fmt)


def plot_tighten(table: dict | None, grid_map: dict | None = None):
    """The slack figure of ``table`` and, with ``grid_map``, the map beside it (or the map alone)."""
    if table is None and grid_map is None:
        raise ValueError("--kind tighten needs --table T.json and/or --map R.json")
    plt = _pyplot()
    panels = [p for p in (table, grid_map) if p is not None]
    fig, axes = plt.subplots(1, len(panels), figsize=(7.4 * len(panels), 5.6), squeeze=False, layout="constrained")
    i = 0
    if table is not None:
        _slack_axes(axes[0][i], table["rows"])
        i += 1
    if grid_map is not None:
        _map_axes(axes[0][i], grid_map)
    return fig


#: Flags of ``plot`` / ``latex`` that define one [SL26] instance: a tighten table carries its own.
_INSTANCE_FLAGS = {"d": "--d", "alpha": "--alpha", "holder": "--holder", "bound": "--bound", "eps": "--eps",
                   "target": "--target", "M": "--M", "Mg": "--Mg", "M_values": "--M-values"}


def _no_instance_flags(args, what: str) -> None:
    for dest, flag in _INSTANCE_FLAGS.items():
        if getattr(args, dest, None) is not None:
            raise ValueError(f"{flag} does not apply to {what} (the table holds its instances)")


def run_plot_tighten(args, save_figure) -> int:
    """``symbounds plot --kind tighten``: ``save_figure(fig, path)`` is :mod:`.plot`'s."""
    _no_instance_flags(args, "--kind tighten")
    table = load_tighten_table(args.table) if args.table else None
    grid_map = load_map(args.map) if getattr(args, "map", None) else None
    fig = plot_tighten(table, grid_map)
    try:
        save_figure(fig, args.out)
    finally:
        _pyplot().close(fig)
    return 0


# ------------------------------------------------------------------------------------------
# LaTeX


_PREAMBLE = r"""\documentclass[11pt]{article}
\usepackage[T1]{fontenc}
\usepackage[margin=2cm]{geometry}
\usepackage{amsmath,amssymb}
\usepackage{booktabs}
\begin{document}
"""


def _tex_number(v, digits: int = 4) -> str:
    """``v`` to ``digits`` significant digits, trailing zeros dropped (``3.6``, ``1``, ``1.2\\times 10^{9}``)."""
    if v is None:
        return "--"
    q = _num(v, "value") if not isinstance(v, (Fraction, int, float)) else v
    text = f"{float(q):.{digits}g}"
    if "e" in text:
        mant, exp = text.split("e")
        return rf"${mant}\times 10^{{{int(exp)}}}$"
    return f"${text}$"


def _frac_tex(text) -> str:
    q = _num(text, "value")
    return f"${q.numerator}$" if q.denominator == 1 else rf"$\tfrac{{{q.numerator}}}{{{q.denominator}}}$"


def _minimum_cell(r: dict, crit: str) -> str:
    v = r.get(crit + "_minimum")
    if v is None:
        return "--"
    cell = _tex_number(v, 6)
    if not _tight(r, crit):
        cell += r"$^{\dagger}$"
    return cell


def _slack_cell(r: dict, crit: str) -> str:
    v = r.get(crit + "_minimum")
    if v is None:
        return "--"
    return _tex_number(_num(r["paper"], "paper") / _num(v, "minimum"), 3)


def tighten_latex(table: dict, fragment: bool = False) -> str:
    """The booktabs tables of a tighten table (module docstring)."""
    rows = sorted(table["rows"], key=lambda r: (int(r["d"]), -_num(r["alpha"], "alpha"), -_num(r["eps"], "eps"),
                                                list(NOMINAL).index(r["constant"])))
    out = [r"\begin{table}[h]\centering\small",
           r"\begin{tabular}{rrrrlrrrrr}",
           r"\toprule",
           r"$d$ & $\alpha$ & $\varepsilon$ & $P$ & constant & paper & proof min. & domain min. & "
           r"slack (proof) & slack (domain) \\",
           r"\midrule"]
    prev = None
    for r in rows:
        inst = (r["d"], r["alpha"], r["eps"])
        if prev is not None and inst != prev:
            out.append(r"\addlinespace")
        lead = [f"${r['d']}$", _frac_tex(r["alpha"]), _frac_tex(r["eps"]),
                "--" if r.get("P") is None else f"${r['P']}$"] if inst != prev else ["", "", "", ""]
        prev = inst
        out.append(" & ".join(lead + [f"${CONSTANT_TEX[r['constant']]}$", _tex_number(r["paper"], 6),
                                      _minimum_cell(r, "proof"), _minimum_cell(r, "domain"),
                                      _slack_cell(r, "proof"), _slack_cell(r, "domain")]) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}",
            r"\caption{The derived constants of [SL26] and the smallest values with which every lemma and budget "
            r"claim is still proved (proof) or $\sup_{x\in[0,1]^d}|T(x)-g(x)|\le\varepsilon$ is still certified "
            r"(domain); each minimum is a certified pass and the value one resolution step below it a certified "
            r"failure, except where marked $^{\dagger}$ (the search reached its floor, or the step below was "
            r"undecided). Slack = paper / minimum; the grid $m$ has no proof criterion (the budget claims fix it).}",
            r"\end{table}"]
    fits = exponent_fits(table["rows"])
    fit_cell = lambda v, n: "--" if v is None else f"${v:.2f}$" + ("" if n is None else f" ({n})")
    out += [r"\begin{table}[h]\centering\small",
            r"\begin{tabular}{rrlrrrr}",
            r"\toprule",
            r"$d$ & $\alpha$ & constant & paper's exponent & fit: paper & fit: proof min. & fit: domain min. \\",
            r"\midrule"]
    for f in fits:
        nominal = f"${f['paper_exponent']:g}$ (${f['paper_exponent_text'].replace('alpha', chr(92) + 'alpha')}$)"
        out.append(" & ".join([f"${f['d']}$", _frac_tex(f["alpha"]), f"${CONSTANT_TEX[f['constant']]}$", nominal,
                               fit_cell(f["paper_fitted"], f["points"]),
                               fit_cell(f["proof_fitted"], f["proof_points"]),
                               fit_cell(f["domain_fitted"], f["domain_points"])]) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}",
            r"\caption{Exponents $k$ of least-squares fits $\text{value}\sim\varepsilon^{-k}$ (number of "
            r"accuracies in parentheses; tight minima only), beside the paper's exponent with its logarithmic "
            r"factors dropped.}",
            r"\end{table}"]
    skipped = table.get("skipped") or []
    if skipped:
        out.append(r"\noindent\textbf{Not run:} " + "; ".join(
            rf"$d={s['d']}$, $\alpha={s['alpha']}$, $\varepsilon={s['eps']}$" for s in skipped[:30])
            + (r"; \ldots" if len(skipped) > 30 else "") + ". Reasons: "
            + "; ".join(sorted({_tex_text(s['reason']) for s in skipped})) + ".")
    body = "\n".join(out) + "\n"
    if fragment:
        return body
    return _PREAMBLE + r"\section*{[SL26]: how much smaller the constants could be}" + "\n" + body + "\\end{document}\n"


_TEX_ESCAPE = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
               "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}", ">": r"$>$", "<": r"$<$"}


def _tex_text(s) -> str:
    return "".join(_TEX_ESCAPE.get(ch, ch) for ch in str(s))


def run_latex_tighten(args) -> int:
    """``symbounds latex tighten --table T.json --out FILE.tex [--fragment]``."""
    _no_instance_flags(args, "latex tighten")
    if not getattr(args, "table", None):
        raise ValueError("latex tighten needs --table T.json (a tighten sweep table or a tighten --json report)")
    atomic_write(args.out, tighten_latex(load_tighten_table(args.table), args.fragment))
    return 0
