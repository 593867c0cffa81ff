"""Pictures of real runs (``symbounds plot``), drawn with matplotlib.

=============  ===========================================================================
kind           what is drawn
=============  ===========================================================================
``error``      from a sweep table (``symbounds sweep``): the measured ``max |T - g|`` at the
               sample points (upper end of its certified enclosure) and, when present, the
               whole-cube certified error, against ``ε``, beside the line ``error = ε``; log-log,
               one series per ``(d, target)``
``size``       from a sweep table: the token count ``P`` against ``ε`` beside the paper's bound
               ``d^{d/2} (8C_H)^{d/α} ε^{-d/α}``; log-log, one series per ``(d, C_H, α)`` (``P``
               does not depend on the target)
``leakage``    from ``symbounds pou`` runs at several attention scales ``M``, in panels:
               ``log10`` of the certified ``e^{-cM}`` (with ``context="fp"`` float64's value
               beside it, a cross where it underflowed to 0.0); ``log10(q / e^{-cM})`` for the
               largest off-target layer-1 weight (L3, measured from the attention matrices),
               ``max_j |T̃_j − T_j|`` (L6.1) and ``max_j |g̃_j − g(c_j)|`` (L6.2); with
               ``context="fp"``, ``log10(float64 / certified)`` of each quantity
``paper``      a catalogue construction's own figure (``--construction KEY [NAME=VALUE ...]
               [--figure NAME]``): the :class:`~symbounds.core.paper.Figure` data its
               ``figures`` hook returns, each series as points joined by lines
=============  ===========================================================================

The error and size plots put their x ticks at the table's ``ε`` values (labelled exactly,
``1/8``); series with the same points are drawn once, with one legend entry; legends sit beside
the axes, never on the data.  :func:`plot_stages` draws the interpolation stages of [AFZ25].

``log10`` values are used for ``leakage`` because the certified quantities leave the float64
range (``e^{-cM} ≈ 10^{-535}`` at ``M = 10^5``); they are computed from the Arb balls, not from
floats.  Plots are pictures, not proofs: the numbers they draw are read from the runs.

Command line::

    symbounds plot --kind error|size --table TABLE.json --out FIG.png|FIG.svg|FIG.pdf
    symbounds plot --kind leakage [instance flags] [--M-values 500,1000,2000] [--context ball|fp]
                   --out FIG.png|FIG.svg|FIG.pdf
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from fractions import Fraction

from ..core.files import check_writable, read_user_text
from ..core.modelfile import parse_number
from ..papers.shi_liao.leakage import (  # noqa: F401  (leakage_rows, log10_ball: re-exported)
    FP_NORMAL_LOG10, LEAKAGE, default_scales, leakage_rows, log10_ball)
from .args import FIGURE_FORMATS, Bar, UsageError, add_instance_args, instance, number_list, written

__all__ = ["load_table", "plot_table", "leakage_rows", "plot_leakage", "plot_figure", "save_figure", "log10_ball", "plot_loglog",
           "add_plot_arguments", "run_plot", "KINDS", "plot_stages"]

KINDS = ("error", "size", "leakage", "tighten", "paper")

#: the largest sweep table read
_MAX_TABLE = 64 * 2**20


def _pyplot():
    import matplotlib

    if "MPLBACKEND" not in os.environ:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def load_table(path: str) -> list[dict]:
    """The rows of a sweep table (``TABLE.json`` as written by ``symbounds sweep``, or its CSV twin)."""
    text = read_user_text(path, ValueError, _MAX_TABLE)
    try:
        if path.endswith(".csv"):
            rows = list(csv.DictReader(io.StringIO(text, newline="")))
        else:
            data = json.loads(text)
            rows = data["rows"] if isinstance(data, dict) else data
    except (json.JSONDecodeError, KeyError, TypeError, RecursionError, csv.Error) as e:
        raise ValueError(f"{path}: not a sweep table ({type(e).__name__})") from None
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path}: the table has no rows")
    for r in rows:
        for key in ("eps", "P", "measured_max_error", "d"):
            if key not in r:
                raise ValueError(f"{path}: a row lacks the column {key!r}")
    return rows


def _number(text, what) -> Fraction:
    try:
        return parse_number(str(text), what)
    except Exception:
        raise ValueError(f"{what}: not a number: {str(text)[:40]!r}") from None


def _series(rows: list[dict]) -> dict:
    """``{(d, target): rows sorted by eps}``."""
    out: dict = {}
    for r in rows:
        out.setdefault((int(r["d"]), r.get("target", "")), []).append(r)
    for k in out:
        out[k].sort(key=lambda r: _number(r["eps"], "eps"))
    return out


def _eps_text(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def _ticks_at(axis, values, labels) -> None:
    """Major ticks of a log ``axis`` exactly at ``values`` (labelled ``labels``), no minor ticks: an
    ``ε`` range inside one decade otherwise gets no labelled tick at all."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

    axis.set_major_locator(FixedLocator(list(values)))
    axis.set_major_formatter(FixedFormatter(list(labels)))
    axis.set_minor_locator(NullLocator())


def _legend_outside(ax, **kw):
    """The legend to the right of the axes, so it never covers data or annotations."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8, **kw)


def _merged(items: list) -> list:
    """Series ``(role, name, xs, ys)`` with equal ``role``, ``xs`` and ``ys`` drawn once, their names
    joined: identical lines would hide each other and repeat in the legend."""
    out: dict = {}
    for role, name, xs, ys in items:
        key = (role, tuple(xs), tuple(ys))
        if key in out:
            if name not in out[key][1]:
                out[key][1].append(name)
        else:
            out[key] = (role, [name], xs, ys)
    return list(out.values())


def plot_table(rows: list[dict], kind: str):
    """A matplotlib Figure of a sweep table (``kind``: ``error`` or ``size``).

    Line data are floats of the table's numbers: ``x = float(eps)``; ``y`` = ``measured_max_error``
    (error) or ``P`` (size); the reference line ``y = eps`` (error) is drawn last, dashed; the
    paper's bound ``d^{d/2} (8C_H)^{d/α} ε^{-d/α}`` (size) follows the first ``P`` series it
    belongs to, dotted.  Series with identical points are drawn once, their names joined in one
    legend entry.  The x ticks sit at the table's ``ε`` values, labelled exactly (``1/8``); the
    legend is outside the axes.
    """
    if kind not in ("error", "size"):
        raise ValueError(f"unknown table plot {kind!r} (use error or size)")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
    all_eps: dict = {}
    items = []
    bounds = {}
    for (d, target), rs in _series(rows).items():
        qs = [_number(r["eps"], "eps") for r in rs]
        eps = [float(q) for q in qs]
        all_eps.update(zip(eps, qs))
        name = f"d={d}" + (f", {target}" if target else "")
        if kind == "error":
            items.append(("measured max error", name, eps,
                          [float(_number(r["measured_max_error"], "measured_max_error")) for r in rs]))
            cert = [(e, r.get("certified_error")) for e, r in zip(eps, rs) if r.get("certified_error")]
            if cert:
                items.append(("certified sup error", name, [e for e, _ in cert],
                              [float(_number(c, "certified_error")) for _, c in cert]))
        else:
            alpha = _number(rs[0].get("alpha", "1"), "alpha")
            C_H = _number(rs[0].get("holder", "2"), "holder")
            pname = f"d={d}" + (f", C_H={C_H}" if len({r.get('holder') for r in rows}) > 1 else "") \
                + (f", alpha={alpha}" if len({r.get('alpha') for r in rows}) > 1 else "")
            items.append(("P", pname, eps, [int(r["P"]) for r in rs]))
            bounds.setdefault(("P", pname), (d, alpha, C_H))
    for role, names, xs, ys in _merged(items):
        style = {"measured max error": "o-", "certified sup error": "s--", "P": "o-"}[role]
        label = f"{role} ({'; '.join(names)})"
        ax.plot(xs, ys, style, label=label)
        if kind == "size":
            d, alpha, C_H = bounds[(role, names[0])]
            bound = [d ** (d / 2) * (8 * float(C_H)) ** (d / float(alpha)) * e ** (-d / float(alpha)) for e in xs]
            ax.plot(xs, bound, ":", color=ax.lines[-1].get_color(), label=f"paper bound ({names[0]})")
    xs = sorted(all_eps)
    if kind == "error":
        ax.plot(xs, xs, "k--", label=r"$\varepsilon$ (the target accuracy)")
        ax.set_ylabel(r"$\max |T(x) - g(x)|$")
        ax.set_title("error against accuracy")
    else:
        ax.set_ylabel("tokens $P$")
        ax.set_title("size against accuracy")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _ticks_at(ax.xaxis, xs, [_eps_text(all_eps[x]) for x in xs])
    ax.set_xlabel(r"$\varepsilon$")
    _legend_outside(ax)
    return fig


def plot_leakage(rows: list[dict]):
    """The leakage quantities against ``M`` on a linear ``M`` axis, in panels that each keep their
    own scale.  The runs are drawn as markers only: nothing is known between two scales, and a
    line between them would invent a shape.

    ``fig.axes[0]``: ``log10 e^{-cM}`` (line 0: certified, from the Arb balls, one marker per run),
    the exact line ``log10 e^{-cM} = -cM / ln 10`` (``c`` depends on ``P`` only, so it is linear in
    ``M``), and with float64 values in ``rows`` the float64 ``e^{-cM}`` (hollow markers; a cross
    on the bottom edge where float64 returned 0.0) beside the line of float64's smallest normal
    number.
    ``fig.axes[1]``: each claim's measured side relative to the scale, ``log10(q / e^{-cM})`` for
    ``q`` = L3, L6.1, L6.2 (lines 0, 1, 2, certified, in that order; L3 claims ``≤ 0``).
    ``fig.axes[2]`` (float64 rows only): ``log10(float64 / certified)`` of the four quantities, the
    orders of magnitude float64 is off, on a symlog axis whose ticks are the values themselves
    (0: float64 agrees; 100: off by a factor ``10^100``); crosses on the row labelled
    ``returned 0.0`` where float64 returned 0.0; concentric markers of decreasing size keep
    coinciding points visible.  Legends sit to the right of the panels.
    """
    plt = _pyplot()
    has_fp = any("fp_" + q in r for r in rows for q in LEAKAGE)
    n = 3 if has_fp else 2
    fig, axes = plt.subplots(n, 1, figsize=(9.5, 3.2 * n), sharex=True, layout="constrained")
    Ms = [float(Fraction(r["M"])) for r in rows]
    colours = {q: f"C{i}" for i, q in enumerate(LEAKAGE)}
    nan = lambda v: math.nan if v is None else v

    ax = axes[0]
    ref = [r["log10_emcM"] for r in rows]
    ax.plot(Ms, [nan(v) for v in ref], "o", color=colours["emcM"], label="certified (Arb ball), one run each")
    slopes = [v / m for v, m in zip(ref, Ms) if v is not None]  # log10 e^{-cM} / M = -c / ln 10
    if slopes:
        top = 1.05 * max(Ms)
        ax.plot([0.0, top], [0.0, slopes[0] * top], "-", color=colours["emcM"], lw=0.8, alpha=0.6,
                label=r"$-cM/\ln 10$ (exact: a line in $M$)")
    if has_fp:
        fp = [r.get("fp_log10_emcM") for r in rows]
        ax.plot(Ms, [nan(v) for v in fp], "o", ms=11, mfc="none", color="C4", label="float64")
        finite = [v for v in ref + fp if v is not None]
        lo, hi = min(finite), max(finite)
        floor = lo - 0.08 * max(hi - lo, 10.0)
        zero = [m for m, y in zip(Ms, fp) if y is None]
        if zero:
            ax.plot(zero, [floor] * len(zero), "x", ms=9, mew=2, color="red", label="float64 returned 0.0")
        if lo < FP_NORMAL_LOG10:
            ax.axhline(FP_NORMAL_LOG10, color="grey", lw=0.8, ls=":")
            ax.annotate(r"float64's smallest normal number $2^{-1022}$", (0.0, FP_NORMAL_LOG10),
                        xytext=(4, 4), textcoords="offset points", fontsize=8, color="grey", va="bottom")
    ax.set_ylabel(r"$\log_{10} e^{-cM}$")
    ax.set_title("the attention scale's bound $e^{-cM}$; runs at $M$ = "
                 + ", ".join(_M_text(r["M"]) for r in rows))
    _legend_outside(ax)

    ax = axes[1]
    for q in ("L3", "L6.1", "L6.2"):
        ys = [r["log10_" + q] - r["log10_emcM"] if r["log10_" + q] is not None and r["log10_emcM"] is not None
              else math.nan for r in rows]
        ax.plot(Ms, ys, "o", color=colours[q], label=LEAKAGE[q][1])
    ax.axhline(0.0, color="black", lw=0.8, ls="--", label=r"L3's bound: $q = e^{-cM}$")
    ax.set_ylabel(r"$\log_{10}\,(q \,/\, e^{-cM})$")
    ax.set_title("each claim's measured side $q$ relative to $e^{-cM}$ (certified)")
    _legend_outside(ax)

    if has_fp:
        ax = axes[2]
        zero_row = -3.0
        sizes = dict(zip(LEAKAGE, (13, 10, 7, 4)))
        shapes = dict(zip(LEAKAGE, ("o", "s", "D", "^")))
        for q, (_, label) in LEAKAGE.items():
            ys, zero = [], []
            for m, r in zip(Ms, rows):
                f, c = r.get("fp_log10_" + q), r.get("log10_" + q)
                ys.append(f - c if f is not None and c is not None else math.nan)
                if f is None and "fp_" + q in r:
                    zero.append(m)
            ax.plot(Ms, ys, shapes[q], ms=sizes[q], mfc="none", mew=1.5, color=colours[q], label=label)
            if zero:
                ax.plot(zero, [zero_row] * len(zero), "x", ms=sizes[q], mew=1.5, color=colours[q])
        ax.plot([], [], "x", color="black", label="float64 returned 0.0")
        ax.set_yscale("symlog", linthresh=1.0)
        hi = max([1.0] + [abs(r.get("fp_log10_" + q) - r["log10_" + q]) for r in rows for q in LEAKAGE
                          if r.get("fp_log10_" + q) is not None and r.get("log10_" + q) is not None])
        top = 10 ** math.ceil(math.log10(hi) + 1e-9)
        ax.set_ylim(zero_row - 2, top * 2)
        ticks = [zero_row, 0.0] + [10.0 ** k for k in range(0, int(round(math.log10(top))) + 1)]
        _ticks_at(ax.yaxis, ticks, ["returned 0.0", "0"] + [f"{10 ** k}" for k in range(len(ticks) - 2)])
        ax.axhline(0.0, color="black", lw=0.8, ls="--")
        ax.set_ylabel(r"$\log_{10}$ (float64 / certified)")
        ax.set_title("float64 against the certified value: orders of magnitude off (0: they agree)")
        _legend_outside(ax)
    axes[-1].set_xlim(0.0, 1.05 * max(Ms))
    _power_axis(axes[-1].xaxis, Ms, "attention scale $M$")
    return fig


def _M_text(M: str) -> str:
    """An attention scale for a title: ``500``, ``10^5`` (mathtext) for a power of ten, else ``%g``."""
    q = Fraction(M)
    if q.denominator == 1 and q >= 10**4 and str(q.numerator).rstrip("0") == "1":
        return f"$10^{{{len(str(q.numerator)) - 1}}}$"
    return str(q) if q.denominator == 1 else f"{float(q):g}"


#: panel titles of the stages figure
STAGE_TITLES = {
    "input": "1. input $X^j$",
    "separation": "2. after separation",
    "leaders": "3. after leader selection",
    "collapse": "4. after the collapse",
    "final": "5. output $T(X^j) = Y^j$",
}


def _power_axis(axis, values, name: str) -> None:
    """Label ``axis`` ``name``; when the data reach ``10^4`` or more, tick labels are divided by
    ``10^k`` and the label says ``(× 10^k)`` (no floating offset text in a corner)."""
    from matplotlib.ticker import FuncFormatter

    big = max((abs(v) for v in values), default=0.0)
    if big >= 1e4:
        k = int(math.floor(math.log10(big)))
        axis.set_major_formatter(FuncFormatter(lambda v, _pos, k=k: f"{v / 10 ** k:g}"))
        axis.set_label_text(rf"{name} ($\times 10^{{{k}}}$)")
    else:
        axis.get_major_formatter().set_useOffset(False)
        axis.set_label_text(name)


def plot_stages(con, clouds: dict | None = None):
    """The point clouds of exact sequence interpolation [AFZ25] stage by stage (like the paper's
    Figure 5): one panel per stage of :data:`symbounds.papers.alcalde.stages.STAGES`, one colour per
    sequence ``X^j``, the target points ``Y^j`` as hollow stars of the same colour in the first and
    last panels (explained in the legend below the panels).  Panels 1, 2 and 5 are in the data's
    coordinates ``x``; panels 3 and 4 in the construction's integer frame ``z = D x + t``
    (``Construction.scale`` / ``shift``), far from the unit box, each with its own axes.
    ``clouds``: :func:`symbounds.papers.alcalde.stages.stage_clouds` (computed when omitted)."""
    from matplotlib.lines import Line2D

    from ..papers.alcalde.stages import STAGES, as_floats, stage_clouds

    plt = _pyplot()
    clouds = clouds or stage_clouds(con)
    fig, axes = plt.subplots(1, len(STAGES), figsize=(3.1 * len(STAGES), 3.9), layout="constrained")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    frame = {"input": "x", "separation": "x", "leaders": "z", "collapse": "z", "final": "x"}
    for ax, name in zip(axes, STAGES):
        allx, ally = [], []
        for j, seq in enumerate(clouds[name]):
            xs, ys = as_floats(seq)
            allx += xs
            ally += ys
            ax.plot(xs, ys, "o", ms=4, color=colours[j % len(colours)])
        if name in ("input", "final"):
            for j, Y in enumerate(con.dataset.targets):
                xs, ys = as_floats(Y)
                ax.plot(xs, ys, "*", ms=12, mfc="none", mew=1.2, color=colours[j % len(colours)])
        ax.set_title(STAGE_TITLES[name], fontsize=10)
        _power_axis(ax.xaxis, allx, f"${frame[name]}_1$")
        _power_axis(ax.yaxis, ally, f"${frame[name]}_2$")
    handles = [Line2D([], [], ls="none", marker="o", ms=5, color=colours[j % len(colours)], label=f"tokens of $X^{{{j + 1}}}$")
               for j in range(len(con.dataset.targets))]
    handles.append(Line2D([], [], ls="none", marker="*", ms=11, mfc="none", color="black",
                          label="target points $Y^j$ (colour of their sequence)"))
    handles.append(Line2D([], [], ls="none", label="panels 3-4: integer frame $z = Dx + t$"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    return fig


def plot_loglog(series: dict, xlabel: str, ylabel: str, title: str = "", styles: dict | None = None):
    """A log-log Figure of ``{label: (xs, ys)}`` (one line per label, in order; series with the same
    points are drawn once, their labels joined).  When the x values are exact (``Fraction`` or
    ``int``) and at most 10 distinct, the x ticks sit at them, labelled exactly (``1/8``, ``316``);
    the legend is outside the axes."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
    items = _merged([((styles or {}).get(label, "o-"), label, tuple(float(x) for x in xs), tuple(float(y) for y in ys))
                     for label, (xs, ys) in series.items()])
    for style, labels, xs, ys in items:
        ax.plot(xs, ys, style, label="; ".join(labels))
    ax.set_xscale("log")
    ax.set_yscale("log")
    exact = {float(x): Fraction(x) for xs, _ in series.values() for x in xs if isinstance(x, (Fraction, int))}
    if exact and len(exact) <= 10 and all(isinstance(x, (Fraction, int)) for xs, _ in series.values() for x in xs):
        xs = sorted(exact)
        _ticks_at(ax.xaxis, xs, [_eps_text(exact[x]) for x in xs])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    _legend_outside(ax)
    return fig


def save_figure(fig, path: str) -> None:
    """Save as PNG, SVG or PDF (by extension) through a temporary file and a rename (atomic)."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FIGURE_FORMATS:
        raise ValueError(f"{path}: use a .png, .svg or .pdf file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"{path}: folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".symbounds-", suffix=ext, dir=folder)
    os.close(fd)
    try:
        fig.savefig(tmp, format=ext[1:], dpi=120)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a figure is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def add_plot_arguments(parser) -> None:
    """Flags of ``symbounds plot``."""
    parser.add_argument("--kind", required=True, choices=list(KINDS),
                        help="error | size | leakage | tighten | paper (a construction's own figure)")
    parser.add_argument("--construction", default=None, metavar="KEY",
                        help="paper: a catalogue key (symbounds prove --list), its instance as NAME=VALUE")
    parser.add_argument("--figure", default=None, metavar="NAME", help="paper: which of its figures (default: the first)")
    from .catalogue_cli import add_paper_arguments

    add_paper_arguments(parser)
    parser.add_argument("--table", default=None, metavar="TABLE.json", help="error, size: a sweep table")
    parser.add_argument("--M-values", dest="M_values", default=None, metavar="M1,M2,...",
                        help="leakage: attention scales (default: the derived M times 1/4, 1, 4, 16, 64)")
    parser.add_argument("--context", default="ball", choices=["ball", "fp"],
                        help="leakage: also draw the float64 values (fp)")
    parser.add_argument("--map", default=None, metavar="R.json",
                        help="tighten: a symbounds tighten --map --json report (the (M_g, M) region)")
    add_instance_args(parser)
    parser.add_argument("--out", required=True, metavar="FIG.png", help="write the figure (.png, .svg or .pdf)")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run_plot(args) -> int:
    """``symbounds plot``: draw and write the figure; returns 0 (bad input raises ValueError)."""
    if not args.out.lower().endswith(FIGURE_FORMATS):
        raise ValueError(f"{args.out}: use a .png, .svg or .pdf file name")
    check_writable(args.out, ValueError)
    if args.kind != "paper" and (args.values or args.example is not None or args.construction or args.figure):
        raise ValueError("NAME=VALUE, --example, --construction and --figure apply to --kind paper only")
    if args.kind == "paper":
        fig = _paper_figure(args)
    elif args.kind == "tighten":  # slack against eps, and the (M_g, M) map: tighten_figures
        from .tighten_figures import run_plot_tighten

        return run_plot_tighten(args, save_figure)
    elif args.kind in ("error", "size"):
        if not args.table:
            raise ValueError(f"--kind {args.kind} needs --table TABLE.json (from symbounds sweep)")
        fig = plot_table(load_table(args.table), args.kind)
    else:

        try:
            inst = instance(args)
        except UsageError as e:
            raise ValueError(str(e)) from None
        if args.M_values:
            try:
                Ms = number_list(args.M_values, "--M-values", 20, positive=True)
            except UsageError as e:
                raise ValueError(str(e)) from None
        else:
            Ms = default_scales(inst)
        bar = Bar(args, "run", "plot")
        try:
            rows = leakage_rows(inst, Ms, context=args.context, progress=bar)
        finally:
            bar.close()
        fig = plot_leakage(rows)
    try:
        save_figure(fig, args.out)
    finally:
        _pyplot().close(fig)
    written(args.out)
    return 0


def plot_figure(figure):
    """A construction's :class:`~symbounds.core.paper.Figure`: each series as points joined by lines."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), constrained_layout=True)
    for label, xs, ys in figure.series:
        ax.plot([float(x) for x in xs], [float(y) for y in ys], "o-", label=label)
    if "x" in figure.log:
        ax.set_xscale("log")
    if "y" in figure.log:
        ax.set_yscale("log")
    ax.set_title(figure.title)
    ax.set_xlabel(figure.xlabel)
    ax.set_ylabel(figure.ylabel)
    if any(label for label, _, _ in figure.series):
        ax.legend(fontsize=9)
    return fig


def _paper_figure(args):
    from .catalogue_cli import paper_instance

    if not args.construction:
        raise ValueError("--kind paper needs --construction KEY")
    try:
        paper, _, inst = paper_instance(args.construction, args.values, args.example)
    except UsageError as e:
        raise ValueError(str(e)) from None
    if paper.figures is None:
        raise ValueError(f"{paper.key} has no figures")
    figures = paper.figures(inst, paper.prove(inst))
    names = [f.name for f in figures]
    if not figures or (args.figure is not None and args.figure not in names):
        raise ValueError(f"--figure {args.figure}: {paper.key} draws {', '.join(names) or 'no figure'}")
    return plot_figure(next(f for f in figures if args.figure in (None, f.name)))


# ------------------------------------------------------------------------------------------
# symbounds tikhonov: [AFZ25] Fig. 1a and 1b


def _tikhonov_label(res: dict) -> str:
    return f"{res['decay']}, {'warm' if res['warm_start'] else 'fresh'}"


def plot_tikhonov(results: list[dict], eps_results: list[dict] | None = None):
    """[AFZ25] Fig. 1 from ``symbounds tikhonov`` results (one per penalty convention and start;
    ``eps_results``, when given, feed the right panel instead of ``results``).

    Left (Fig. 1a): the training loss against epochs (log-log), one line per run, with the
    certified threshold ``eps ||theta*||^2`` of its ``eps`` dashed in the same colour (the line the
    authors draw); the first epoch below it is marked.  Right (Fig. 1b): the minimum training loss
    against ``eps`` per convention, a slope-1 reference through the first point, and the threshold
    ``eps ||theta*||^2`` itself (every minimiser of ``loss + eps||theta||^2`` lies below it; with
    Adam's coupled decay the penalty is ``eps/2``, so its minimisers lie below half of it)."""
    plt = _pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    k = 0
    star = None
    halves = False
    for res in results:
        star = res["theta_star_sq_decimal"]
        for r in res["runs"]:
            col = colours[k % len(colours)]
            k += 1
            ep = [p[0] for p in r["trace"]]
            ax.plot(ep, [p[1] for p in r["trace"]], "-", color=col, lw=1.2,
                    label=rf"$\varepsilon = {_tex_float(r['eps_float'])}$ ({_tikhonov_label(res)})")
            ax.axhline(r["threshold_float"], color=col, ls="--", lw=0.9)
            if r.get("penalty_weight") != r["eps"] and r.get("penalty_threshold"):
                ax.axhline(float(r["penalty_threshold"]), color=col, ls=":", lw=0.9)
                halves = True
            if r["crossing_epoch"] is not None:
                ax.plot([r["crossing_epoch"]], [r["threshold_float"]], "o", color=col, ms=5)
    ax.plot([], [], "--", color="grey", lw=0.9, label=r"$\varepsilon\,\|\theta^*\|^2$ (certified threshold)")
    if halves:
        ax.plot([], [], ":", color="grey", lw=0.9, label=r"$\varepsilon\,\|\theta^*\|^2/2$ (coupled decay)")
    ax.plot([], [], "o", color="grey", ms=5, label="first epoch below it")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel(r"training loss $(1/N)\,\sum_j d_H(T(X^j), Y^j)^2$")
    ax.set_title(rf"(a) training loss; $\|\theta^*\|^2 = {float(star):.4g}$")
    ax.legend(fontsize=8)
    results = results if eps_results is None else eps_results
    eps_all = sorted({r["eps_float"] for res in results for r in res["runs"]})
    for res in results:
        rs = sorted(res["runs"], key=lambda r: r["eps_float"])
        bx.plot([r["eps_float"] for r in rs], [r["min_loss"] for r in rs], "o-",
                label=f"min loss ({_tikhonov_label(res)}), slope "
                      + (f"{res['slope']:.2f}" if res.get("slope") is not None else "n/a"))
    if results and results[0]["runs"]:
        r0 = max(results[0]["runs"], key=lambda r: r["eps_float"])
        bx.plot(eps_all, [r0["min_loss"] * e / r0["eps_float"] for e in eps_all], "--", color="grey",
                label="slope 1")
        bx.plot(eps_all, [r0["threshold_float"] * e / r0["eps_float"] for e in eps_all], ":", color="red",
                label=r"$\varepsilon\,\|\theta^*\|^2$ (certified)")
    bx.set_xscale("log")
    bx.set_yscale("log")
    bx.set_xlabel(r"$\varepsilon$")
    bx.set_ylabel("minimum training loss")
    bx.set_title(r"(b) minimum loss against $\varepsilon$")
    bx.legend(fontsize=8)
    return fig


def _tex_float(v: float) -> str:
    """``1e-04`` as mathtext, ``10^{-4}``; other floats as ``%g``."""
    m, _, e = f"{v:.3g}".partition("e")
    if not e:
        return m
    power = f"10^{{{int(e)}}}"
    return power if m == "1" else rf"{m} \times {power}"


__all__ += ["plot_tikhonov"]
