"""Pictures of real runs (``symbounds plot``), drawn with matplotlib.

=============  ===========================================================================
kind           what is drawn
=============  ===========================================================================
``error``      from a sweep table (``symbounds sweep``): the measured ``max |T - g|`` at the
               sample points (upper end of its certified enclosure) and, when present, the
               whole-cube certified error, against ``ε``, beside the line ``error = ε``; log-log,
               one series per ``(d, target)``
``size``       from a sweep table: the token count ``P`` against ``ε`` beside the paper's bound
               ``d^{d/2} (8C_H)^{d/α} ε^{-d/α}``; log-log, one series per ``(d, target)``
``leakage``    from ``symbounds pou`` runs at several attention scales ``M``: ``log10`` of the
               certified ``e^{-cM}``, of the largest off-target layer-1 weight (L3, measured
               from the attention matrices), of ``max_j |T̃_j − T_j|`` (L6.1) and of
               ``max_j |g̃_j − g(c_j)|`` (L6.2), against ``M``; with ``context="fp"`` the float64
               values beside them (a value that underflowed to 0.0 is drawn as a cross on the
               bottom edge)
=============  ===========================================================================

``log10`` values are used for ``leakage`` because the certified quantities leave the float64
range (``e^{-cM} ≈ 10^{-535}`` at ``M = 10^5``); they are computed from the Arb balls, not from
floats.  Plots are pictures, not proofs: the numbers they draw are read from the runs.

Command line::

    symbounds plot --kind error|size --table TABLE.json --out FIG.png|FIG.pdf
    symbounds plot --kind leakage [instance flags] [--M-values 500,1000,2000] [--context ball|fp]
                   --out FIG.png|FIG.pdf
"""

from __future__ import annotations

import csv
import json
import math
import os
import tempfile
from fractions import Fraction

import flint

from ..core.contexts import BallContext
from ..core.modelfile import parse_number
from ..papers import shi_liao as sl
from ..papers.shi_liao.run import PouOptions, run
from .args import UsageError, add_instance_args, instance

__all__ = ["load_table", "plot_table", "leakage_rows", "plot_leakage", "save_figure", "log10_ball", "plot_loglog",
           "add_plot_arguments", "run_plot", "KINDS"]

KINDS = ("error", "size", "leakage", "tighten")


def _pyplot():
    import matplotlib

    if "MPLBACKEND" not in os.environ:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def load_table(path: str) -> list[dict]:
    """The rows of a sweep table (``TABLE.json`` as written by ``symbounds sweep``, or its CSV twin)."""
    try:
        with open(path, encoding="utf-8") as f:
            if path.endswith(".csv"):
                rows = list(csv.DictReader(f))
            else:
                data = json.load(f)
                rows = data["rows"] if isinstance(data, dict) else data
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as e:
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


def plot_table(rows: list[dict], kind: str):
    """A matplotlib Figure of a sweep table (``kind``: ``error`` or ``size``).

    Line data are floats of the table's numbers: ``x = float(eps)``; ``y`` = ``measured_max_error``
    (error) or ``P`` (size); the reference line ``y = eps`` (error) or the paper's bound (size) is
    drawn last in each axes, dashed, with label ``"eps"`` / ``"paper bound, d=..."``.
    """
    if kind not in ("error", "size"):
        raise ValueError(f"unknown table plot {kind!r} (use error or size)")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    all_eps = set()
    for (d, target), rs in _series(rows).items():
        eps = [float(_number(r["eps"], "eps")) for r in rs]
        all_eps.update(eps)
        name = f"d={d}" + (f", {target}" if target else "")
        if kind == "error":
            ax.plot(eps, [float(_number(r["measured_max_error"], "measured_max_error")) for r in rs], "o-",
                    label=f"measured max error ({name})")
            cert = [(e, r.get("certified_error")) for e, r in zip(eps, rs) if r.get("certified_error")]
            if cert:
                ax.plot([e for e, _ in cert], [float(_number(c, "certified_error")) for _, c in cert], "s--",
                        label=f"certified sup error ({name})")
        else:
            ax.plot(eps, [int(r["P"]) for r in rs], "o-", label=f"P ({name})")
            alpha = _number(rs[0].get("alpha", "1"), "alpha")
            C_H = _number(rs[0].get("holder", "2"), "holder")
            bound = [d ** (d / 2) * (8 * float(C_H)) ** (d / float(alpha)) * e ** (-d / float(alpha)) for e in eps]
            ax.plot(eps, bound, ":", label=f"paper bound, d={d}")
    xs = sorted(all_eps)
    if kind == "error":
        ax.plot(xs, xs, "k--", label="eps")
        ax.set_ylabel(r"$\max |T(x) - g(x)|$")
        ax.set_title("error against accuracy")
    else:
        ax.set_ylabel("tokens $P$")
        ax.set_title("size against accuracy")
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(r"$\varepsilon$")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def log10_ball(v) -> float | None:
    """``log10`` of a positive certified value (an Arb ball; ``None`` if not certainly positive),
    computed in Arb, so ``1e-535`` is fine."""
    if v is None:
        return None
    with flint.ctx.workprec(128):
        if not v > 0:
            return None
        return float((v.log() / flint.arb(10).log()).mid())


def _log10_float(text: str) -> float | None:
    v = float(text)
    return math.log10(v) if v > 0 and math.isfinite(v) else None


#: quantity of the leakage plot -> (source in the pou run: "constant" or claim id, label)
LEAKAGE = {
    "emcM": ("constant", "exp(-cM)"),
    "L3": ("L3", "largest off-target weight (L3)"),
    "L6.1": ("L6.1", "max |T~ - T| (L6.1)"),
    "L6.2": ("L6.2", "max |g~ - g(c)| (L6.2)"),
}
_FP_NAMES = {"emcM": "exp(-cM)", "L3": "L3 lhs", "L6.1": "L6.1 lhs", "L6.2": "L6.2 lhs"}


def leakage_rows(inst, M_values, context: str = "ball", points: int = 2) -> list[dict]:
    """One ``symbounds pou`` run per attention scale ``M`` (``inst`` with ``M`` replaced).

    Each row: ``M`` (exact string), ``cM`` (float), ``verdict``, and for each quantity ``q`` of
    ``LEAKAGE`` the certified ball ``q`` (string) and ``log10_q`` (float or None); with
    ``context="fp"`` also ``fp_q`` (the float64 value as a string) and ``fp_log10_q`` (None when it
    underflowed to 0.0).
    """
    from dataclasses import replace


    rows = []
    for M in M_values:
        M = _number(M, "M") if not isinstance(M, Fraction) else M
        if M <= 0:
            raise ValueError(f"M = {M}: the attention scale must be positive")
        res = run(replace(inst, M=M), PouOptions(context=context, points=points))
        claims = {c.id: c for c in res.claims}
        row = {"M": str(M), "cM": float(_number(res.constants["c"], "c")) * float(M), "verdict": str(res.verdict)}
        ball = BallContext(res.prec)
        env = res.model.definition_values(ball)
        for q, (src, _) in LEAKAGE.items():
            if src == "constant":
                with ball.scope():
                    value = ball.from_sympy(sl.SYM[q], env=env)
                row[q] = res.constants[q]
            else:
                value = claims[src].lhs_value
                row[q] = claims[src].lhs
            row["log10_" + q] = log10_ball(value)
        if context in ("fp", "all"):
            fp = {x.name: x for x in res.comparisons["fp"][1]}
            for q, name in _FP_NAMES.items():
                row["fp_" + q] = fp[name].other
                row["fp_log10_" + q] = _log10_float(fp[name].other)
            row["fp_claims"] = {c.id: c.status for c in res.comparisons["fp"][0]}
        rows.append(row)
    return rows


def plot_leakage(rows: list[dict]):
    """``log10`` of the leakage quantities against ``M`` (certified: solid; float64: hollow markers,
    crosses on the bottom edge where float64 returned 0.0).  Line ``i`` of ``fig.axes[0]`` is
    quantity ``list(LEAKAGE)[i]`` (certified), in that order, then the float64 series."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    Ms = [float(Fraction(r["M"])) for r in rows]
    for q, (_, label) in LEAKAGE.items():
        ax.plot(Ms, [r["log10_" + q] if r["log10_" + q] is not None else math.nan for r in rows], "o-",
                label=label)
    has_fp = any("fp_" + q in r for r in rows for q in LEAKAGE)
    if has_fp:
        finite = [r["log10_" + q] for r in rows for q in LEAKAGE if r.get("log10_" + q) is not None]
        lo, hi = min(finite), max(finite)
        floor = lo - 0.08 * max(hi - lo, 10.0)
        for q, (_, label) in LEAKAGE.items():
            ys = [r.get("fp_log10_" + q) for r in rows]
            ax.plot(Ms, [y if y is not None else math.nan for y in ys], "o", mfc="none", label=f"float64: {label}")
            zero = [m for m, y in zip(Ms, ys) if y is None]
            if zero:
                ax.plot(zero, [floor] * len(zero), "x", color="red",
                        label="float64 returned 0.0" if q == "emcM" else None)
        if lo < -300:
            ax.axhline(math.log10(2.2250738585072014e-308), color="grey", lw=0.8, ls=":")
            ax.text(Ms[0], -300, "float64 normal range ends", fontsize=7, color="grey")
    ax.set_xscale("log")
    ax.set_xlabel("attention scale $M$")
    ax.set_ylabel(r"$\log_{10}$ (certified value)")
    ax.set_title("leakage against the attention scale")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_loglog(series: dict, xlabel: str, ylabel: str, title: str = "", styles: dict | None = None):
    """A log-log Figure of ``{label: (xs, ys)}`` (one line per label, in order)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for label, (xs, ys) in series.items():
        ax.plot([float(x) for x in xs], [float(y) for y in ys], (styles or {}).get(label, "o-"), label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def save_figure(fig, path: str) -> None:
    """Save as PNG or PDF (by extension) through a temporary file and a rename (atomic)."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".png", ".pdf"):
        raise ValueError(f"{path}: use a .png or .pdf file name")
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
    parser.add_argument("--kind", required=True, choices=list(KINDS), help="error | size | leakage | tighten")
    parser.add_argument("--table", default=None, metavar="TABLE.json", help="error, size: a sweep table")
    parser.add_argument("--M-values", dest="M_values", default=None, metavar="M1,M2,...",
                        help="leakage: attention scales (default: the derived M times 1/4, 1, 4, 16, 64)")
    parser.add_argument("--context", default="ball", choices=["ball", "fp"],
                        help="leakage: also draw the float64 values (fp)")
    parser.add_argument("--map", default=None, metavar="R.json",
                        help="tighten: a symbounds tighten --map --json report (the (M_g, M) region)")
    add_instance_args(parser)
    parser.add_argument("--out", required=True, metavar="FIG.png", help="write the figure (.png or .pdf)")


def run_plot(args) -> int:
    """``symbounds plot``: draw and write the figure; returns 0 (bad input raises ValueError)."""
    if not args.out.lower().endswith((".png", ".pdf")):
        raise ValueError(f"{args.out}: use a .png or .pdf file name")
    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder):
        raise ValueError(f"{args.out}: folder {folder} does not exist")
    if args.kind == "tighten":  # slack against eps, and the (M_g, M) map: tighten_figures
        from .tighten_figures import run_plot_tighten

        return run_plot_tighten(args, save_figure)
    if args.kind in ("error", "size"):
        if not args.table:
            raise ValueError(f"--kind {args.kind} needs --table TABLE.json (from symbounds sweep)")
        fig = plot_table(load_table(args.table), args.kind)
    else:

        try:
            inst = instance(args)
        except UsageError as e:
            raise ValueError(str(e)) from None
        if args.M_values:
            Ms = [_number(p.strip(), "--M-values") for p in args.M_values.split(",") if p.strip()]
            if not Ms or len(Ms) > 20:
                raise ValueError("--M-values: give 1 to 20 comma-separated scales")
        else:

            K = sl.constants(inst)
            ctx = BallContext(128)
            env = sl.build(K).definition_values(ctx)
            base = Fraction(int(env[K.M].mid().floor().unique_fmpz()))
            Ms = [base * f for f in (Fraction(1, 4), 1, 4, 16, 64)]
        fig = plot_leakage(leakage_rows(inst, Ms, context=args.context))
    save_figure(fig, args.out)
    return 0
