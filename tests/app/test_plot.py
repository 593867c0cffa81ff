"""symbounds.plot: the figures draw the numbers of real runs, and the files are real PNG/PDF."""

import argparse
import json
import math
import re
import struct
from fractions import Fraction

import matplotlib  # noqa: F401  (a dependency of symbounds: `symbounds plot`)
import pytest

from symbounds.app import plot as pl  # noqa: E402
from symbounds.papers import shi_liao as sl  # noqa: E402
from symbounds.papers.shi_liao.sweep import sweep, write_table  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """A real sweep (d = 1, three accuracies; fast) written by symbounds.sweep."""
    rows = sweep(["1/2", "1/4", "1/8"], [1], {1: ["sin(x1)/2"]}, holder="1", bound="1", points=2)
    path = tmp_path_factory.mktemp("sweep") / "table.csv"
    return rows, write_table(rows, str(path))


def _args(*argv):
    p = argparse.ArgumentParser()
    pl.add_plot_arguments(p)
    return p.parse_args(list(argv))


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_error_plot_draws_the_table(table, tmp_path):
    rows, json_path = table
    fig = pl.plot_table(pl.load_table(json_path), "error")
    ax = fig.axes[0]
    measured, ref = ax.lines[0], ax.lines[-1]
    data = sorted(json.load(open(json_path))["rows"], key=lambda r: Fraction(r["eps"]))  # drawn in eps order
    assert list(measured.get_xdata()) == [float(Fraction(r["eps"])) for r in data]
    assert list(measured.get_ydata()) == [float(r["measured_max_error"]) for r in data]
    assert list(ref.get_xdata()) == list(ref.get_ydata()) == sorted(float(Fraction(r["eps"])) for r in data)
    # and the error really is below eps, independently of the plot
    assert all(y <= x for x, y in zip(measured.get_xdata(), measured.get_ydata()))
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_size_plot_draws_P_and_the_paper_bound(table):
    rows, json_path = table
    fig = pl.plot_table(pl.load_table(json_path), "size")
    ax = fig.axes[0]
    P_line, bound = ax.lines[0], ax.lines[1]
    # independently: m = ceil(sqrt(1) / (2 eps / 4)) = ceil(2/eps), P = m
    assert list(P_line.get_ydata()) == [math.ceil(2 / e) for e in (0.125, 0.25, 0.5)]
    assert list(bound.get_ydata()) == pytest.approx([8 / e for e in (0.125, 0.25, 0.5)])


def test_cli_function_writes_png_and_pdf(table, tmp_path):
    _, json_path = table
    out = tmp_path / "err.png"
    assert pl.run_plot(_args("--kind", "error", "--table", json_path, "--out", str(out))) == 0
    w, h = _png_size(out)
    assert w > 100 and h > 100 and out.stat().st_size > 1000
    pdf = tmp_path / "size.pdf"
    assert pl.run_plot(_args("--kind", "size", "--table", json_path, "--out", str(pdf))) == 0
    assert pdf.read_bytes()[:5] == b"%PDF-"
    svg = tmp_path / "size.svg"
    assert pl.run_plot(_args("--kind", "size", "--table", json_path, "--out", str(svg))) == 0
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and text.rstrip().endswith("</svg>")


def test_bad_input(tmp_path, table):
    _, json_path = table
    with pytest.raises(ValueError, match=r"\.png, \.svg or \.pdf"):
        pl.run_plot(_args("--kind", "error", "--table", json_path, "--out", str(tmp_path / "a.jpg")))
    with pytest.raises(ValueError, match="needs --table"):
        pl.run_plot(_args("--kind", "size", "--out", str(tmp_path / "a.png")))
    with pytest.raises(ValueError, match="(?i)no such file"):
        pl.run_plot(_args("--kind", "size", "--table", str(tmp_path / "x.json"), "--out", str(tmp_path / "a.png")))
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": [{"eps": "1/2"}]}')
    with pytest.raises(ValueError, match="lacks the column"):
        pl.load_table(str(bad))
    with pytest.raises(ValueError, match="eps"):
        pl.run_plot(_args("--kind", "leakage", "--eps", "3", "--out", str(tmp_path / "a.png")))
    assert not (tmp_path / "a.png").exists()


def test_leakage_rows_and_plot(tmp_path):
    inst = sl.Instance()
    Ms = [Fraction(500), Fraction(100000)]
    rows = pl.leakage_rows(inst, Ms, context="fp", points=1)
    # e^{-cM} independently: c = 1 - cos(2 pi / 40)
    import mpmath

    mpmath.mp.dps = 30
    c = 1 - mpmath.cos(2 * mpmath.pi / 40)
    for r, M in zip(rows, Ms):
        assert r["log10_emcM"] == pytest.approx(float(-c * M / mpmath.log(10)), rel=1e-12)
        assert r["log10_L3"] <= r["log10_emcM"] + 1e-9  # L3: every off-target weight <= e^{-cM}
    small, big = rows
    assert small["fp_log10_emcM"] == pytest.approx(small["log10_emcM"], rel=1e-9)
    assert big["fp_log10_emcM"] is None and big["fp_emcM"] == "0.0"  # cM ~ 1231 > 745: underflow
    assert big["fp_claims"]["L5.1"] == "wrong" and big["fp_claims"]["L3"] == "vacuous"
    fig = pl.plot_leakage(rows)
    ax = fig.axes[0]
    assert list(ax.lines[0].get_xdata()) == [500.0, 100000.0]
    assert list(ax.lines[0].get_ydata()) == [r["log10_emcM"] for r in rows]
    # a true linear M axis: the runs are markers only, and the exact line -cM/ln 10 is drawn
    # through the origin with the slope computed independently here
    assert ax.get_xscale() == "linear" and ax.lines[0].get_linestyle() == "None"
    exact = ax.lines[1]
    (x0, x1), (y0, y1) = exact.get_xdata(), exact.get_ydata()
    assert x0 == 0 and y0 == 0 and (y1 - y0) / (x1 - x0) == pytest.approx(float(-c / mpmath.log(10)), rel=1e-12)
    # the claims' sides are drawn relative to e^{-cM} in the second panel (L3, L6.1, L6.2 in order)
    rel = fig.axes[1]
    for line, q in zip(rel.lines, ("L3", "L6.1", "L6.2")):
        assert list(line.get_ydata()) == pytest.approx([r["log10_" + q] - r["log10_emcM"] for r in rows])
    out = tmp_path / "leak.png"
    pl.save_figure(fig, str(out))
    assert _png_size(out)[0] > 100


def test_readme_picture_is_drawn_from_the_committed_table():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert "docs/error_vs_eps.png" in (root / "README.md").read_text(encoding="utf-8")
    w, h = _png_size(root / "docs" / "error_vs_eps.png")
    assert w > 300 and h > 200
    rows = pl.load_table(str(root / "docs" / "sweep_table.json"))
    assert all(r["claims"] == "proved" for r in rows)
    assert all(float(r["measured_max_error"]) <= float(Fraction(r["eps"])) for r in rows)
    fig = pl.plot_table(rows, "error")
    ys = sorted(y for line in fig.axes[0].lines[:-1] for y in line.get_ydata())
    assert ys == sorted(float(r["measured_max_error"]) for r in rows)


# --- what a reader sees: ticks, legends, labels -------------------------------------------------


def _tick_texts(fig, axis="x", ax_index=0):
    fig.canvas.draw()
    ax = fig.axes[ax_index]
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t.get_text() for t in labels if t.get_text()]


def _rows(eps_by_series):
    """A hand-made sweep table: ``{(d, target): [(eps, P, error), ...]}``."""
    return [{"d": str(d), "target": t, "eps": e, "P": str(P), "measured_max_error": err, "holder": "1", "alpha": "1"}
            for (d, t), pts in eps_by_series.items() for e, P, err in pts]


@pytest.mark.parametrize("kind", ["error", "size"])
def test_table_plots_label_their_eps_values(table, kind):
    # eps = 1/2, 1/4, 1/8 lies inside one decade: a plain log axis would label no tick at all
    _, json_path = table
    fig = pl.plot_table(pl.load_table(json_path), kind)
    assert _tick_texts(fig) == ["1/8", "1/4", "1/2"]
    assert [t for t in fig.axes[0].get_xticks()] == [0.125, 0.25, 0.5]
    # two series over different eps ranges: every eps of either series is a labelled tick
    rows = _rows({(1, "a"): [("1/2", 4, "0.06"), ("1/4", 8, "0.03"), ("1/8", 16, "0.015")],
                  (2, "b"): [("1/3", 9, "0.1"), ("1/6", 36, "0.05")]})
    fig = pl.plot_table(rows, kind)
    assert _tick_texts(fig) == ["1/8", "1/6", "1/4", "1/3", "1/2"]


def _overlap(a, b):
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_legends_sit_outside_the_data(table):
    _, json_path = table
    for kind in ("error", "size"):
        fig = pl.plot_table(pl.load_table(json_path), kind)
        fig.canvas.draw()
        ax = fig.axes[0]
        r = fig.canvas.get_renderer()
        assert not _overlap(ax.get_legend().get_window_extent(r), ax.get_window_extent(r)), kind


def test_identical_series_are_drawn_once_with_one_legend_entry():
    # P depends on d, C_H and alpha only: two targets at d = 1 give the same P series and the same bound
    pts = [("1/2", 4, "0.06"), ("1/4", 8, "0.03")]
    rows = _rows({(1, "sin(x1)/2"): pts, (1, "x1/3"): [(e, P, "0.01") for e, P, _ in pts]})
    fig = pl.plot_table(rows, "size")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(labels) == len(set(labels)) == 2  # P and the paper's bound, once each
    assert len(fig.axes[0].lines) == 2
    # different errors stay two series in the error plot
    fig = pl.plot_table(rows, "error")
    assert len(fig.axes[0].lines) == 3  # two measured series and eps
    # identical error series (same points) merge, naming both targets
    rows2 = _rows({(1, "a"): pts, (1, "b"): pts})
    fig = pl.plot_table(rows2, "error")
    assert len(fig.axes[0].lines) == 2 and "a" in fig.axes[0].lines[0].get_label() and \
        "b" in fig.axes[0].lines[0].get_label()


@pytest.fixture(scope="module")
def leakage_rows_fp():
    return pl.leakage_rows(sl.Instance(), [Fraction(500), Fraction(1743), Fraction(10000), Fraction(100000)],
                           context="fp", points=1)


def test_leakage_legends_do_not_hide_the_annotation_or_the_data(leakage_rows_fp):
    fig = pl.plot_leakage(leakage_rows_fp)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    ax = fig.axes[0]
    notes = [t for t in ax.texts if "2^{-1022}" in t.get_text()]
    assert len(notes) == 1  # cM ~ 1231 at M = 10^5: the float64 range ends inside the plot
    for a in fig.axes:
        legend = a.get_legend().get_window_extent(r)
        assert not _overlap(legend, notes[0].get_window_extent(r))
        assert not _overlap(legend, a.get_window_extent(r))
    # each panel has a y range fit to its own quantity: the ratios to e^{-cM} are within a few
    # decades (L3 <= e^{-cM}; L6 within P-fold), not squeezed onto a -600...0 axis
    lo, hi = fig.axes[1].get_ylim()
    assert hi - lo < 20
    # a linear M axis (log e^{-cM} is linear in M), its scale in the label; the runs' M in the title
    assert all(a.get_xscale() == "linear" for a in fig.axes)
    assert "10^{5}" in fig.axes[-1].get_xlabel()
    assert "500, 1743, $10^{4}$, $10^{5}$" in fig.axes[0].get_title()
    # the float64 panel's ticks are values of log10(float64 / certified), not powers (a log of a log)
    labels = _tick_texts(fig, "y", 2)
    assert "0" in labels and "100" in labels and not any("10^" in t for t in labels)


def test_leakage_float64_panel_shows_the_disagreement(leakage_rows_fp):
    rows = leakage_rows_fp
    fig = pl.plot_leakage(rows)
    ax = fig.axes[2]
    # line i: quantity i of LEAKAGE, log10(float64 / certified); independently from the rows
    for q in pl.LEAKAGE:
        line = next(l for l in ax.lines if l.get_label() == pl.LEAKAGE[q][1])
        want = [r["fp_log10_" + q] - r["log10_" + q] if r["fp_log10_" + q] is not None else None for r in rows]
        got = list(line.get_ydata())
        for g, w in zip(got, want):
            assert (math.isnan(g) and w is None) or g == pytest.approx(w)
    # at M = 10^4 float64's L6.1 is off by more than 30 orders of magnitude (1 - (1 - tiny) = 0)
    assert rows[2]["fp_log10_L6.1"] - rows[2]["log10_L6.1"] > 30
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == len(set(labels))


def test_stages_figure_is_labelled():
    from symbounds.papers.alcalde.dataset import random_dataset
    from symbounds.papers.alcalde.run import InterpOptions, run
    from symbounds.papers.alcalde.stages import STAGES

    res = run(random_dataset(3, 8, 2, 2, seed=1), InterpOptions(variant="plain"))
    fig = pl.plot_stages(res.construction)
    fig.canvas.draw()
    assert len(fig.axes) == len(STAGES)
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        # no floating "1e5" offset text: a scale, if any, is in the axis label
        assert ax.xaxis.get_offset_text().get_text() == "" and ax.yaxis.get_offset_text().get_text() == ""
    big = fig.axes[STAGES.index("leaders")]
    assert "10^{" in big.get_xlabel()
    # the stars (targets) are explained in the figure's legend
    texts = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert any("target" in t and "Y^j" in t for t in texts)
    assert sum("tokens of" in t for t in texts) == res.construction.dataset.N


def _tikhonov_result(decay, warm):
    runs = []
    for eps, loss in (("1/10", 3.0), ("1/100", 0.4)):
        e = float(Fraction(eps))
        runs.append({"eps": eps, "eps_float": e, "penalty_weight": str(Fraction(eps) / 2) if decay == "coupled" else eps,
                     "threshold_float": 16 * e, "penalty_threshold": str(8 * e), "crossing_epoch": None,
                     "min_loss": loss, "trace": [[k, loss * (1 + 10 / k)] for k in range(1, 50)]})
    return {"theta_star_sq_decimal": "16", "decay": decay, "warm_start": warm, "slope": 0.87, "runs": runs}


def test_tikhonov_figure_labels_are_mathtext_and_readable():
    """Labels go through matplotlib's mathtext ($...$), never raw pseudo-TeX (Σ, ‖, ^2 in plain
    text), and the titles are at the default size or larger."""
    import matplotlib

    fig = pl.plot_tikhonov([_tikhonov_result("coupled", True), _tikhonov_result("decoupled", False)])
    fig.canvas.draw()
    default = matplotlib.font_manager.FontProperties(size=matplotlib.rcParams["axes.titlesize"]).get_size_in_points()
    for ax in fig.axes:
        texts = [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
        texts += [t.get_text() for t in ax.get_legend().get_texts()]
        for t in texts:
            outside = re.sub(r"\$[^$]*\$", "", t)
            assert not any(ch in outside for ch in "Σ‖θ²^_\\"), t
        assert ax.title.get_fontsize() >= default
        assert min(t.get_fontsize() for t in ax.get_legend().get_texts()) >= 8
    assert r"\sum_j" in fig.axes[0].get_ylabel() and "$" in fig.axes[0].get_ylabel()
