"""``symbounds plot --kind tighten`` and ``symbounds latex tighten``: what is drawn and typeset.

The inputs are small hand-written tables whose slacks and exponents are known by hand (values
``C (1/eps)^k`` with chosen ``k``), so the figure's lines, the fitted exponents and the LaTeX cells
are compared with numbers computed here, not with earlier output.  The LaTeX compiles with
pdflatex and its text is read back with pdftotext.
"""

import json
import math
import os
import shutil
import subprocess

import pytest

from symbounds.app import tighten_figures as tf
from symbounds.app.cli import main

HAVE_TEX = shutil.which("pdflatex") is not None and shutil.which("pdftotext") is not None
needs_tex = pytest.mark.skipif(not os.environ.get("CI") and not HAVE_TEX,
                               reason="pdflatex/pdftotext not installed (and CI is not set)")

EPS = ["1/2", "1/4", "1/8"]


def _row(eps, constant, paper, proof, domain, tight=True):
    return {"eps": eps, "d": 1, "alpha": "1", "P": 8, "constant": constant,
            "paper": paper, "proof_minimum": proof, "proof_below_status": "fail" if proof else "n/a",
            "domain_minimum": domain, "domain_below_status": "fail" if tight else "-"}


def frac_value(text):
    p, q = text.split("/")
    return int(p) / int(q)


def _table():
    """M: paper 10 (1/eps)^2, proof 8 (1/eps)^2, domain (1/eps)^3; M_g: paper 100/eps, domain 4/eps;
    grid: paper 8/eps, domain 2/eps except at eps = 1/2 (not tight)."""
    rows = []
    for e in EPS:
        x = 1 / frac_value(e)
        rows.append(_row(e, "M", str(10 * x**2), str(8 * x**2), str(x**3)))
        rows.append(_row(e, "Mg", str(100 * x), str(100 * x), str(4 * x)))
        rows.append(_row(e, "grid", str(int(8 * x)), None, str(int(2 * x)), tight=e != "1/2"))
    return {"kind": "tighten-sweep", "rows": rows,
            "skipped": [{"eps": "1/8", "d": 2, "alpha": "1", "P": 2116, "reason": "P = 2116 tokens > 1024"}]}


def _map():
    cells = []
    for mg in ("400", "40", "4"):
        for m in ("50", "10", "2"):
            status = "pass" if float(m) >= 10 and float(mg) >= 40 else ("undecided" if mg == "4" and m == "50" else "fail")
            cells.append({"Mg": mg, "M": m, "status": status})
    return {"command": "tighten", "instance": {"d": 1, "eps": "1/2"},
            "results": [{"constant": "M", "criterion": "domain", "paper": "49.37", "minimum": "6"},
                        {"constant": "Mg", "criterion": "domain", "paper": "473.1", "minimum": "3.5"}],
            "map": {"Mg_values": ["400", "40", "4"], "M_values": ["50", "10", "2"], "cells": cells}}


@pytest.fixture()
def files(tmp_path):
    t, m = tmp_path / "T.json", tmp_path / "R.json"
    t.write_text(json.dumps(_table()))
    m.write_text(json.dumps(_map()))
    return str(t), str(m)


def test_exponent_fits_recover_the_exponents():
    fits = {(f["constant"]): f for f in tf.exponent_fits(_table()["rows"])}
    assert fits["M"]["paper_fitted"] == pytest.approx(2) and fits["M"]["proof_fitted"] == pytest.approx(2)
    assert fits["M"]["domain_fitted"] == pytest.approx(3) and fits["M"]["paper_exponent"] == 2
    assert fits["Mg"]["domain_fitted"] == pytest.approx(1) and fits["Mg"]["paper_exponent"] == 2
    # the grid's non-tight minimum at eps = 1/2 is left out of the fit: two points
    assert fits["grid"]["domain_points"] == 2 and fits["grid"]["domain_fitted"] == pytest.approx(1)
    assert fits["grid"]["proof_fitted"] is None and fits["grid"]["proof_points"] == 0


def test_slack_figure_lines_ticks_and_labels(files):
    table, grid_map = tf.load_tighten_table(files[0]), tf.load_map(files[1])
    fig = tf.plot_tighten(table, grid_map)
    fig.canvas.draw()  # tick labels are set at draw time
    ax, mx = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1/8", "1/4", "1/2"]
    assert "ε" in ax.get_xlabel() or "varepsilon" in ax.get_xlabel()
    assert "slack" in ax.get_ylabel()
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    m_dom = lines["M, domain (d=1, α=1)"]
    # slack of M, domain: 10 x^2 / x^3 = 10 eps, at eps = 1/8, 1/4, 1/2
    assert list(m_dom.get_xdata()) == [0.125, 0.25, 0.5]
    assert [round(y, 9) for y in m_dom.get_ydata()] == [1.25, 2.5, 5.0]
    assert [round(y, 9) for y in lines["M, proof (d=1, α=1)"].get_ydata()] == [1.25] * 3
    assert [round(y, 9) for y in lines["grid m, domain (d=1, α=1)"].get_ydata()] == [4.0] * 3
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("not tight" in t for t in legend)
    # the map: axes, the paper's point, each status where the report put it
    assert "M_g" in mx.get_xlabel() and "M" in mx.get_ylabel() and "ε=1/2" in mx.get_title()
    byl = {ln.get_label(): ln for ln in mx.get_lines()}
    star = byl["paper's $(M_g, M)$"]
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (473.1, 49.37)
    passed = set(zip(byl["certified (sup |T-g| ≤ ε)"].get_xdata(), byl["certified (sup |T-g| ≤ ε)"].get_ydata()))
    assert passed == {(400.0, 50.0), (400.0, 10.0), (40.0, 50.0), (40.0, 10.0)}
    assert list(zip(byl["undecided"].get_xdata(), byl["undecided"].get_ydata())) == [(4.0, 50.0)]
    labels = [t.get_text() for t in mx.get_xticklabels()]
    assert "10" in labels and "100" in labels
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_cli_writes_png_and_pdf(files, tmp_path):
    for name in ("f.png", "f.pdf"):
        out = tmp_path / name
        assert main(["plot", "--kind", "tighten", "--table", files[0], "--map", files[1], "--out", str(out)]) == 0
        head = out.read_bytes()[:8]
        assert head.startswith(b"\x89PNG") if name.endswith("png") else head.startswith(b"%PDF")
    assert main(["plot", "--kind", "tighten", "--map", files[1], "--out", str(tmp_path / "m.png")]) == 0


def test_a_tighten_report_is_a_table(tmp_path):
    rep = {"command": "tighten", "instance": {"d": 1, "alpha": "1", "eps": "1/2"},
           "results": [{"constant": "M", "criterion": "proof", "paper": "49.4", "minimum": "46", "below_status": "fail"},
                       {"constant": "M", "criterion": "domain", "paper": "49.4", "minimum": "6", "below_status": "fail"}]}
    p = tmp_path / "r.json"
    p.write_text(json.dumps(rep))
    rows = tf.load_tighten_table(str(p))["rows"]
    assert rows == [{"eps": "1/2", "d": 1, "alpha": "1", "P": None, "constant": "M", "paper": "49.4",
                     "proof_minimum": "46", "proof_below_status": "fail", "domain_minimum": "6",
                     "domain_below_status": "fail"}]


def test_latex_cells(files, tmp_path):
    out = tmp_path / "t.tex"
    assert main(["latex", "tighten", "--table", files[0], "--out", str(out)]) == 0
    tex = out.read_text()
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert tex.count(r"\begin{tabular}") == 2
    # eps = 1/8, M: paper 640, proof 512, domain 512, slacks 1.25 and 1.25; the grid at 1/2 is marked
    assert r"$M$ & $640$ & $512$ & $512$ & $1.25$ & $1.25$ \\" in tex
    assert r"$4$$^{\dagger}$" in tex
    assert r"$\tfrac{1}{8}$" in tex and r"P = 2116 tokens $>$ 1024" in tex
    frag = tmp_path / "f.tex"
    assert main(["latex", "tighten", "--table", files[0], "--out", str(frag), "--fragment"]) == 0
    assert r"\documentclass" not in frag.read_text() and r"\begin{table}" in frag.read_text()


@needs_tex
def test_latex_compiles(files, tmp_path):
    assert HAVE_TEX, "CI is set but pdflatex/pdftotext are missing"
    out = tmp_path / "t.tex"
    assert main(["latex", "tighten", "--table", files[0], "--out", str(out)]) == 0
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout[-2000:]
    text = subprocess.run(["pdftotext", "-layout", "t.pdf", "-"], cwd=tmp_path, capture_output=True, text=True, check=False).stdout
    assert "slack (proof)" in text and "domain min." in text and "paper’s exponent" in text.replace("'", "’")
    assert "640" in text and "1.25" in text
    # the fitted exponent of M's domain minimum: 3.00 over three accuracies
    assert "3.00 (3)" in text


def _err(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("make", [
    lambda d: ["plot", "--kind", "tighten", "--out", str(d / "x.png")],
    lambda d: ["plot", "--kind", "tighten", "--table", str(d / "none.json"), "--out", str(d / "x.png")],
    lambda d: ["plot", "--kind", "tighten", "--table", str(d / "bad.json"), "--out", str(d / "x.png")],
    lambda d: ["plot", "--kind", "tighten", "--table", str(d / "norows.json"), "--out", str(d / "x.png")],
    lambda d: ["plot", "--kind", "tighten", "--map", str(d / "norows.json"), "--out", str(d / "x.png")],
    lambda d: ["plot", "--kind", "tighten", "--table", str(d / "badeps.json"), "--out", str(d / "x.png")],
    lambda d: ["plot", "--kind", "tighten", "--table", str(d / "tau.json"), "--out", str(d / "x.png")],
    lambda d: ["plot", "--kind", "tighten", "--table", str(d / "bad.json"), "--out", str(d / "x.gif")],
    lambda d: ["latex", "tighten", "--out", str(d / "x.tex")],
    lambda d: ["latex", "tighten", "--table", str(d / "bad.json"), "--out", str(d / "x.tex")],
    lambda d: ["latex", "tighten", "--table", str(d), "--out", str(d / "x.tex")],
    lambda d: ["latex", "tighten", "--table", str(d / "T.json"), "--eps", "0.1", "--out", str(d / "x.tex")],
    lambda d: ["plot", "--kind", "tighten", "--table", str(d / "T.json"), "--d", "2", "--out", str(d / "x.png")],
    lambda d: ["plot", "--kind", "tighten", "--table", str(d / "T.json"), "--M-values", "5", "--out", str(d / "x.png")],
])
def test_bad_input_exit_2(tmp_path, capsys, make):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "T.json").write_text(json.dumps(_table()))
    (tmp_path / "norows.json").write_text(json.dumps({"kind": "tighten-sweep", "rows": []}))
    bad = _table()
    bad["rows"][0]["eps"] = "2"
    (tmp_path / "badeps.json").write_text(json.dumps(bad))
    (tmp_path / "tau.json").write_text(json.dumps({"command": "tighten", "what": "tau", "results": []}))
    code, out, err = _err(capsys, make(tmp_path))
    assert code == 2 and out == ""
    assert err.startswith("symbounds: error: ") and err.count("\n") == 1
    assert not (tmp_path / "x.png").exists() and not (tmp_path / "x.tex").exists()


def test_slack_is_paper_over_minimum_not_the_reverse():
    # an independent reading of one row: slack > 1 exactly when the paper's value is the larger
    r = _table()["rows"][0]
    assert float(r["paper"]) / float(r["domain_minimum"]) == pytest.approx(5.0)
    assert math.isclose(float(r["paper"]) / float(r["proof_minimum"]), 1.25)
