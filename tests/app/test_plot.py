"""symbounds.plot: the figures draw the numbers of real runs, and the files are real PNG/PDF."""

import argparse
import json
import math
import struct
from fractions import Fraction

import matplotlib  # noqa: F401  (a dependency of symbounds: `symbounds plot`)
import pytest

from symbounds.app import plot as pl  # noqa: E402
from symbounds.papers import shi_liao as sl  # noqa: E402
from symbounds.papers.shi_liao.sweep import sweep, write_table  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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


def test_bad_input(tmp_path, table):
    _, json_path = table
    with pytest.raises(ValueError, match="png or .pdf"):
        pl.run_plot(_args("--kind", "error", "--table", json_path, "--out", str(tmp_path / "a.jpg")))
    with pytest.raises(ValueError, match="needs --table"):
        pl.run_plot(_args("--kind", "size", "--out", str(tmp_path / "a.png")))
    with pytest.raises(ValueError, match="no such file"):
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
    assert list(ax.lines[1].get_ydata()) == [r["log10_L3"] for r in rows]
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
